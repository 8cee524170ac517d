//! The history store: one append-only folder per night, `<store>/<config>/<date>-<commit8>/`,
//! holding `night.json` (what ran, where, how long, the environment fingerprint), every
//! entry's run directories and result files (with their per-item outcomes), and the morning
//! report. A night is written under a hidden `.partial` name and renamed when complete, so a
//! killed night never looks like a finished one; a finished night is never written again.

use harness_bench::items::{read_items, Items};
use harness_bench::runner::{read_result, BenchResult};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// `night.json`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NightRecord {
    /// Configuration name (the history it belongs to).
    pub config: String,
    /// `YYYY-MM-DD`.
    pub date: String,
    /// The harness commit that ran (full hash, `-dirty` with local changes).
    pub commit: String,
    /// Folder name: `<date>-<commit8>`.
    pub name: String,
    pub started: String,
    pub finished: String,
    /// Wall time of the whole night, seconds.
    pub wall_seconds: f64,
    pub env: EnvFingerprint,
    pub entries: Vec<EntryRecord>,
    /// Fire-drill perturbations applied to this night's per-item outcomes (`--plant`):
    /// every report of this night names them.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub plants: Vec<Plant>,
    /// Added to every seed (`--seed-offset`; 0 on a real night): noise-only nights for
    /// measuring the false-alarm rate.
    #[serde(default)]
    pub seed_offset: u64,
}

/// What can change a number besides the code: recorded with every night.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct EnvFingerprint {
    pub harness_version: String,
    pub git_commit: String,
    /// The workspace crates and the main dependencies, name → version (Cargo.lock).
    pub crate_versions: BTreeMap<String, String>,
    /// sha256 of the embedded `datasets.lock`.
    pub datasets_lock: String,
    pub backend: String,
    pub device: String,
    pub threads: usize,
    pub cpu_model: String,
    pub os: String,
}

/// One entry of a night.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct EntryRecord {
    pub name: String,
    /// `recipe`, `run` or `encoder`.
    pub kind: String,
    /// The recipe path, run directory or encoder spec.
    pub source: String,
    pub seeds: Vec<SeedRecord>,
    /// Encoding throughput of the speed probe (first seed's encoder), sentences/s.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sentences_per_s: Option<f64>,
    /// How long the speed probe took, seconds (a timing too short to compare is not judged).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub probe_seconds: Option<f64>,
}

/// One seed of an entry.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SeedRecord {
    pub seed: u64,
    /// The seed's folder, relative to the night (`<entry>/seed-<n>`); results in
    /// `results/` below it.
    pub dir: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub train_seconds: Option<f64>,
    /// Training throughput (train/metrics.jsonl), tokens/s.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tokens_per_s: Option<f64>,
    pub eval_seconds: f64,
    /// CPU seconds (user + system) of the seed's training and evaluation children
    /// (`getrusage(RUSAGE_CHILDREN)` around them; none off Unix): over their wall seconds,
    /// the share of the machine they had.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cpu_seconds: Option<f64>,
    /// Why the seed failed (training or a benchmark), when it did.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub errors: Vec<String>,
    /// The children's output, relative to the night.
    pub log: String,
}

/// A planted change: `series` (`entry/benchmark`) moved by `points` of quality (negative:
/// worse) by flipping per-item outcomes.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Plant {
    pub series: String,
    pub points: f64,
    /// The headline before and after, per seed.
    #[serde(default)]
    pub headlines: Vec<(f64, f64)>,
}

/// One seed's result of one benchmark, with its per-item outcomes when recorded.
#[derive(Debug, Clone)]
pub struct SeedResult {
    pub seed: u64,
    pub result: BenchResult,
    pub items: Option<Items>,
    pub path: PathBuf,
}

/// A finished night, loaded.
#[derive(Debug, Clone)]
pub struct Night {
    pub dir: PathBuf,
    pub record: NightRecord,
    /// `entry/benchmark` → one result per seed that produced one.
    pub series: BTreeMap<String, Vec<SeedResult>>,
    /// Files that could not be used (a changed sidecar, an unreadable result): shown in
    /// the report, never silently dropped.
    pub problems: Vec<String>,
}

impl Night {
    /// Reads `night.json` and every result below a night's folder.
    pub fn load(dir: &Path) -> Result<Night, String> {
        let path = dir.join("night.json");
        let text = std::fs::read_to_string(&path)
            .map_err(|e| format!("{}: cannot read ({e})", path.display()))?;
        let record: NightRecord = serde_json::from_str(&text).map_err(|e| {
            format!(
                "{}: not a night record harness wrote ({e}). Fix: move the folder out of the history",
                path.display()
            )
        })?;
        let mut series: BTreeMap<String, Vec<SeedResult>> = BTreeMap::new();
        let mut problems = Vec::new();
        for entry in &record.entries {
            for seed in &entry.seeds {
                let results = dir.join(&seed.dir).join("results");
                let Ok(listing) = std::fs::read_dir(&results) else {
                    continue;
                };
                let mut files: Vec<PathBuf> = listing
                    .filter_map(|e| e.ok().map(|e| e.path()))
                    .filter(|p| {
                        p.extension().is_some_and(|x| x == "json")
                            && !p.to_string_lossy().ends_with(".items.json")
                    })
                    .collect();
                files.sort();
                for file in files {
                    let result = match read_result(&file) {
                        Ok(r) => r,
                        Err(e) => {
                            problems.push(e.to_string());
                            continue;
                        }
                    };
                    if result.error.is_some() {
                        continue;
                    }
                    let items = match &result.items {
                        Some(r) => match read_items(&results, r) {
                            Ok(i) => Some(i),
                            Err(e) => {
                                problems.push(e.to_string());
                                None
                            }
                        },
                        None => None,
                    };
                    series
                        .entry(format!("{}/{}", entry.name, result.benchmark))
                        .or_default()
                        .push(SeedResult {
                            seed: seed.seed,
                            result,
                            items,
                            path: file,
                        });
                }
            }
        }
        Ok(Night {
            dir: dir.to_path_buf(),
            record,
            series,
            problems,
        })
    }

    /// The mean headline of `series` over its seeds.
    pub fn headline(&self, series: &str) -> Option<f64> {
        let r = self.series.get(series)?;
        let v: Vec<f64> = r.iter().filter_map(|s| s.result.main_score).collect();
        (!v.is_empty()).then(|| v.iter().sum::<f64>() / v.len() as f64)
    }
}

/// The folder name of a night.
pub fn night_name(date: &str, commit: &str) -> String {
    let short: String = commit.chars().take(8).collect();
    format!("{date}-{short}")
}

/// Whether `s` is a `YYYY-MM-DD` date.
pub fn is_date(s: &str) -> bool {
    let b = s.as_bytes();
    b.len() == 10
        && b[4] == b'-'
        && b[7] == b'-'
        && b.iter()
            .enumerate()
            .all(|(i, c)| i == 4 || i == 7 || c.is_ascii_digit())
}

/// Removes what nights killed before their end left in `history`: their `.NAME.partial-PID`
/// folders and `.speed-probe-PID.txt` files, only where process PID no longer runs (a
/// night still running keeps its own). Returns what was removed.
pub fn remove_dead_partials(history: &Path) -> Vec<PathBuf> {
    let Ok(listing) = std::fs::read_dir(history) else {
        return Vec::new();
    };
    let mut removed = Vec::new();
    for e in listing.flatten() {
        let name = e.file_name().to_string_lossy().into_owned();
        let Some(pid) = dead_writer(&name) else {
            continue;
        };
        if pid == std::process::id() || harness_core::fsutil::process_alive(pid) {
            continue;
        }
        let p = e.path();
        let gone = if name.ends_with(".txt") {
            std::fs::remove_file(&p)
        } else {
            std::fs::remove_dir_all(&p)
        };
        if gone.is_ok() {
            removed.push(p);
        }
    }
    removed
}

/// The pid in the name of a night's scratch file or partial folder (the names
/// `night::partial_dir` and the speed probe use); `None` for any other name.
fn dead_writer(name: &str) -> Option<u32> {
    let rest = name.strip_prefix('.')?;
    let pid = if let Some(probe) = rest.strip_prefix("speed-probe-") {
        probe.strip_suffix(".txt")?
    } else {
        let (night, pid) = rest.rsplit_once(".partial-")?;
        if night.len() < 11 || !is_date(&night[..10]) {
            return None;
        }
        pid
    };
    if pid.is_empty() || !pid.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    pid.parse().ok()
}

/// The finished nights of a history, oldest first (by date, then finishing time). Folders
/// that are not nights (hidden, partial, foreign) are skipped.
pub fn list_nights(history: &Path) -> Result<Vec<PathBuf>, String> {
    let listing = match std::fs::read_dir(history) {
        Ok(l) => l,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(format!("{}: cannot list ({e})", history.display())),
    };
    let mut nights: Vec<(String, String, PathBuf)> = Vec::new();
    for e in listing.flatten() {
        let name = e.file_name().to_string_lossy().into_owned();
        if name.starts_with('.') || name.len() < 11 || !is_date(&name[..10]) {
            continue;
        }
        let p = e.path();
        let Ok(text) = std::fs::read_to_string(p.join("night.json")) else {
            continue;
        };
        let finished = serde_json::from_str::<serde_json::Value>(&text)
            .ok()
            .and_then(|v| v["finished"].as_str().map(String::from))
            .unwrap_or_default();
        nights.push((name[..10].to_string(), finished, p));
    }
    nights.sort();
    Ok(nights.into_iter().map(|(_, _, p)| p).collect())
}

/// Loads the last `n` nights of a history (all with `n == 0`), oldest first.
pub fn load_history(history: &Path, n: usize) -> Result<Vec<Night>, String> {
    let all = list_nights(history)?;
    let skip = if n == 0 {
        0
    } else {
        all.len().saturating_sub(n)
    };
    all[skip..].iter().map(|p| Night::load(p)).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_dead_nights_leftovers_are_removed() {
        let h = tempfile::tempdir().unwrap();
        // A pid that cannot run (above the kernel's pid_max).
        let dead = 4_194_305u32;
        let me = std::process::id();
        let mk = |n: &str| std::fs::create_dir_all(h.path().join(n).join("a")).unwrap();
        let touch = |n: &str| std::fs::write(h.path().join(n), "x").unwrap();
        mk(&format!(".2026-11-01-0123abcd.partial-{dead}"));
        touch(&format!(".speed-probe-{dead}.txt"));
        mk(&format!(".2026-11-01-0123abcd.partial-{me}"));
        touch(&format!(".speed-probe-{me}.txt"));
        mk("2026-11-01-0123abcd");
        mk(&format!(".mine.partial-{dead}"));
        touch(&format!(".speed-probe-{dead}.txt.bak"));
        let removed = remove_dead_partials(h.path());
        assert_eq!(removed.len(), 2, "{removed:?}");
        let mut left: Vec<String> = std::fs::read_dir(h.path())
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        left.sort();
        let mut kept = vec![
            format!(".2026-11-01-0123abcd.partial-{me}"),
            format!(".mine.partial-{dead}"),
            format!(".speed-probe-{dead}.txt.bak"),
            format!(".speed-probe-{me}.txt"),
            "2026-11-01-0123abcd".to_string(),
        ];
        kept.sort();
        assert_eq!(left, kept);
    }

    #[test]
    fn names_and_dates() {
        assert_eq!(
            night_name("2026-11-26", "0123456789abcdef"),
            "2026-11-26-01234567"
        );
        assert!(is_date("2026-11-26"));
        assert!(!is_date("2026-1-26x"));
        assert!(!is_date("20261126"));
    }
}
