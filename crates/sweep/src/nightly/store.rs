//! The history store: one append-only folder per night, `<store>/<config>/<date>-<commit8>/`,
//! holding `night.json` (what ran, where, how long, the environment fingerprint), every
//! entry's run directories and result files (with their per-item outcomes), and the morning
//! report. A night is written under a hidden `.partial` name and renamed when complete, so a
//! killed night never looks like a finished one; a finished night is never written again.
//!
//! Sealing: the last file written into a night, before the rename, is `SHA256SUMS` (the
//! `sha256sum` format, so `sha256sum -c SHA256SUMS` checks a night by hand too): the sha256
//! of every other file of the night. [`Night::load`] verifies it before anything of the night
//! is used: a changed, missing or added file fails the night, by name, and the report leaves
//! that night out of every comparison. A night written before harness sealed nights (its
//! `night.json` without `sealed: true`) has nothing to verify against: it is used, and every
//! report names it as unverified.

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
    /// A seed failed (training, a benchmark) or a result could not be read: the night is
    /// kept and reported, but never used as the previous night or the baseline of another.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub failed: bool,
    /// The night ends with a [`CHECKSUMS`] file over all its files (absent, `false`, in
    /// nights of older versions, which are reported as unverified).
    #[serde(default)]
    pub sealed: bool,
}

impl NightRecord {
    /// Why the night failed (its record says so, or a seed recorded an error); `None` for
    /// a night that ran through.
    pub fn failure(&self) -> Option<String> {
        let errors: usize = self
            .entries
            .iter()
            .flat_map(|e| &e.seeds)
            .map(|s| s.errors.len())
            .sum();
        match (self.failed, errors) {
            (false, 0) => None,
            (_, 0) => Some("its record marks it failed".into()),
            (_, n) => Some(format!(
                "{n} error{} in its seeds",
                if n == 1 { "" } else { "s" }
            )),
        }
    }
}

/// What can change a number besides the code: recorded with every night.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
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

/// Whether a night's files are what its end sealed.
#[derive(Debug, Clone, PartialEq)]
pub enum Integrity {
    /// Every file matches the night's [`CHECKSUMS`].
    Verified,
    /// Tonight, still being written (sealed after its report).
    Unsealed,
    /// Written by a harness that did not seal nights: nothing to verify against.
    Unverified,
    /// What does not match (each naming the file and the fix), or why the night could not
    /// be read at all.
    Failed(Vec<String>),
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
    /// The night's files against its [`CHECKSUMS`].
    pub integrity: Integrity,
}

impl Night {
    /// Reads a night of the history: verifies its files against its [`CHECKSUMS`], then
    /// reads `night.json` and every result. A night that cannot be read at all is returned
    /// with [`Integrity::Failed`] (its record a placeholder named after the folder), so that
    /// the report names it instead of every report failing.
    pub fn load(dir: &Path) -> Night {
        let integrity = if dir.join(CHECKSUMS).exists() {
            match verify(dir) {
                Ok(()) => Integrity::Verified,
                Err(problems) => Integrity::Failed(problems),
            }
        } else {
            Integrity::Unverified
        };
        match Night::read(dir) {
            Ok(mut night) => {
                night.integrity = match integrity {
                    Integrity::Unverified if night.record.sealed => {
                        Integrity::Failed(vec![format!(
                            "{}: missing, yet night.json says the night was sealed: its files cannot be verified. Fix: restore the file, or move the night out of the history",
                            dir.join(CHECKSUMS).display()
                        )])
                    }
                    other => other,
                };
                night
            }
            Err(e) => {
                let mut problems = match integrity {
                    Integrity::Failed(p) => p,
                    _ => Vec::new(),
                };
                problems.push(e);
                Night::unreadable(dir, problems)
            }
        }
    }

    /// Reads tonight's night from its partial folder (not yet sealed).
    pub fn load_unsealed(dir: &Path) -> Result<Night, String> {
        Night::read(dir)
    }

    /// A placeholder for a night folder that cannot be read.
    fn unreadable(dir: &Path, problems: Vec<String>) -> Night {
        let name = dir
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        Night {
            dir: dir.to_path_buf(),
            record: NightRecord {
                config: String::new(),
                date: name.chars().take(10).collect(),
                commit: String::new(),
                name,
                started: String::new(),
                finished: String::new(),
                wall_seconds: 0.0,
                env: EnvFingerprint::default(),
                entries: Vec::new(),
                plants: Vec::new(),
                seed_offset: 0,
                failed: true,
                sealed: false,
            },
            series: BTreeMap::new(),
            problems: Vec::new(),
            integrity: Integrity::Failed(problems),
        }
    }

    /// Reads `night.json` and every result below a night's folder.
    fn read(dir: &Path) -> Result<Night, String> {
        let path = dir.join("night.json");
        let text = harness_core::fsutil::read_text_capped(&path, 16 << 20).map_err(|e| {
            format!(
                "{}: cannot read ({e}). Fix: move the folder out of the history",
                path.display()
            )
        })?;
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
            integrity: Integrity::Unsealed,
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

/// Whether `s` has the shape `YYYY-MM-DD` (digits and dashes; not necessarily a real day).
fn is_date_shaped(s: &str) -> bool {
    let b = s.as_bytes();
    b.len() == 10
        && b[4] == b'-'
        && b[7] == b'-'
        && b.iter()
            .enumerate()
            .all(|(i, c)| i == 4 || i == 7 || c.is_ascii_digit())
}

/// Whether `s` is a `YYYY-MM-DD` day of the calendar (`2026-02-30` and `2026-13-45` are
/// not; `2028-02-29` is).
pub fn is_date(s: &str) -> bool {
    if !is_date_shaped(s) {
        return false;
    }
    let num = |r: std::ops::Range<usize>| s[r].parse::<u32>().unwrap_or(0);
    let (year, month, day) = (num(0..4), num(5..7), num(8..10));
    let leap = year % 4 == 0 && (year % 100 != 0 || year % 400 == 0);
    let days = match month {
        1 | 3 | 5 | 7 | 8 | 10 | 12 => 31,
        4 | 6 | 9 | 11 => 30,
        2 if leap => 29,
        2 => 28,
        _ => return false,
    };
    (1..=days).contains(&day)
}

/// Checks a date given on the command line or in a file: `what` names where it came from.
pub fn check_date(what: &str, s: &str) -> Result<(), String> {
    if is_date(s) {
        Ok(())
    } else if is_date_shaped(s) {
        Err(format!(
            "{what} {s}: not a day of the calendar. Fix: a real date, YYYY-MM-DD"
        ))
    } else {
        Err(format!("{what} {s}: expected a date, YYYY-MM-DD"))
    }
}

/// Whether `s` names a night: `YYYY-MM-DD` or `YYYY-MM-DD-<commit8>`.
pub fn is_night_ref(s: &str) -> bool {
    match s.len() {
        10 => is_date(s),
        19 => {
            is_date(&s[..10])
                && s.as_bytes()[10] == b'-'
                && s[11..].bytes().all(|b| b.is_ascii_alphanumeric())
        }
        _ => false,
    }
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
        if night.len() < 11 || !is_date_shaped(&night[..10]) {
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
/// that are not nights (hidden, partial, foreign) are skipped; a folder named like a night
/// whose date is not a real day is listed (its loading names the problem).
pub fn list_nights(history: &Path) -> Result<Vec<PathBuf>, String> {
    let listing = match std::fs::read_dir(history) {
        Ok(l) => l,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(format!("{}: cannot list ({e})", history.display())),
    };
    let mut nights: Vec<(String, String, PathBuf)> = Vec::new();
    for e in listing.flatten() {
        let name = e.file_name().to_string_lossy().into_owned();
        if name.starts_with('.') || name.len() < 11 || !is_date_shaped(&name[..10]) {
            continue;
        }
        let p = e.path();
        if !p.join("night.json").is_file() {
            continue;
        }
        let text = std::fs::read_to_string(p.join("night.json")).unwrap_or_default();
        let finished = serde_json::from_str::<serde_json::Value>(&text)
            .ok()
            .and_then(|v| v["finished"].as_str().map(String::from))
            .unwrap_or_default();
        nights.push((name[..10].to_string(), finished, p));
    }
    nights.sort();
    Ok(nights.into_iter().map(|(_, _, p)| p).collect())
}

/// Loads the last `n` nights of a history (all with `n == 0`), oldest first, each verified
/// ([`Night::load`]).
pub fn load_history(history: &Path, n: usize) -> Result<Vec<Night>, String> {
    let all = list_nights(history)?;
    let skip = if n == 0 {
        0
    } else {
        all.len().saturating_sub(n)
    };
    Ok(all[skip..].iter().map(|p| Night::load(p)).collect())
}

/// The file that seals a night: `<sha256>  <path>` per file, `sha256sum` format.
pub const CHECKSUMS: &str = "SHA256SUMS";

/// Every file below `dir` (symbolic links to files included, other links skipped), as
/// (`/`-separated relative path, path), sorted; [`CHECKSUMS`] itself left out.
fn night_files(dir: &Path) -> Result<Vec<(String, PathBuf)>, String> {
    let mut out = Vec::new();
    let mut stack = vec![(String::new(), dir.to_path_buf())];
    while let Some((rel, folder)) = stack.pop() {
        let listing = std::fs::read_dir(&folder)
            .map_err(|e| format!("{}: cannot list ({e})", folder.display()))?;
        for e in listing {
            let e = e.map_err(|e| format!("{}: cannot list ({e})", folder.display()))?;
            let name = e.file_name().to_string_lossy().into_owned();
            let rel_name = if rel.is_empty() {
                name.clone()
            } else {
                format!("{rel}/{name}")
            };
            let path = e.path();
            let meta = std::fs::symlink_metadata(&path)
                .map_err(|e| format!("{}: cannot read ({e})", path.display()))?;
            if meta.is_dir() {
                stack.push((rel_name, path));
            } else if (meta.is_file() || path.is_file()) && rel_name != CHECKSUMS {
                out.push((rel_name, path));
            }
        }
    }
    out.sort();
    Ok(out)
}

/// Seals a finished night: writes [`CHECKSUMS`] (atomically, last) over every other file
/// of `dir`.
pub fn seal(dir: &Path) -> Result<(), String> {
    let mut text = String::new();
    for (rel, path) in night_files(dir)? {
        if rel.contains(['\n', '\\']) {
            return Err(format!(
                "{}: a file name with a newline or a backslash cannot be listed in {CHECKSUMS}. Fix: rename it",
                path.display()
            ));
        }
        let (_, sha) = harness_core::fsutil::hash_file(&path, &mut |_| {})
            .map_err(|e| format!("{}: cannot read to seal the night ({e})", path.display()))?;
        text.push_str(&format!("{sha}  {rel}\n"));
    }
    let path = dir.join(CHECKSUMS);
    harness_core::nofollow::write_atomic(&path, text.as_bytes())
        .map_err(|e| format!("{}: cannot write ({e})", path.display()))
}

/// Checks every file of a sealed night against its [`CHECKSUMS`]: `Err` lists each file
/// that changed, went missing or was added since, by path, with the fix.
pub fn verify(dir: &Path) -> Result<(), Vec<String>> {
    let sums = dir.join(CHECKSUMS);
    let fix = "Fix: restore the night's files, or move the night out of the history";
    let text = harness_core::fsutil::read_text_capped(&sums, 64 << 20)
        .map_err(|e| vec![format!("{}: cannot read ({e}). {fix}", sums.display())])?;
    let mut listed: BTreeMap<String, String> = BTreeMap::new();
    let mut problems = Vec::new();
    for (i, line) in text.lines().enumerate() {
        let parsed = line
            .split_once("  ")
            .or_else(|| line.split_once(" *"))
            .filter(|(sha, rel)| {
                sha.len() == 64
                    && sha.bytes().all(|b| b.is_ascii_hexdigit())
                    && !rel.is_empty()
                    && !rel.starts_with('/')
                    && !rel.split('/').any(|c| c == ".." || c.is_empty())
            });
        match parsed {
            Some((sha, rel)) => {
                listed.insert(rel.to_string(), sha.to_ascii_lowercase());
            }
            None => problems.push(format!(
                "{}:{}: not a `SHA256  PATH` line. {fix}",
                sums.display(),
                i + 1
            )),
        }
    }
    let files = night_files(dir).map_err(|e| vec![e])?;
    for (rel, path) in &files {
        match listed.remove(rel) {
            None => problems.push(format!(
                "{}: not in {CHECKSUMS}: added after the night was sealed. {fix}",
                path.display()
            )),
            Some(want) => match harness_core::fsutil::hash_file(path, &mut |_| {}) {
                Ok((_, sha)) if sha == want => {}
                Ok((_, sha)) => problems.push(format!(
                    "{}: sha256 {sha} is not the {want} of {CHECKSUMS}: changed after the night was sealed. {fix}",
                    path.display()
                )),
                Err(e) => problems.push(format!("{}: cannot read ({e}). {fix}", path.display())),
            },
        }
    }
    for rel in listed.keys() {
        problems.push(format!(
            "{}: missing (listed in {CHECKSUMS}). {fix}",
            dir.join(rel).display()
        ));
    }
    if problems.is_empty() {
        Ok(())
    } else {
        Err(problems)
    }
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
        // Days of the calendar only.
        for bad in [
            "2026-02-30",
            "2026-13-45",
            "2026-00-10",
            "2026-04-31",
            "2026-02-29",
            "2100-02-29",
            "2026-01-00",
        ] {
            assert!(!is_date(bad), "{bad}");
            let e = check_date("--date", bad).unwrap_err();
            assert!(
                e.contains(bad) && e.contains("not a day of the calendar"),
                "{e}"
            );
        }
        for good in ["2028-02-29", "2000-02-29", "2026-12-31", "2026-04-30"] {
            assert!(is_date(good), "{good}");
        }
        assert!(check_date("--date", "yesterday")
            .unwrap_err()
            .contains("YYYY-MM-DD"));
        assert!(is_night_ref("2026-11-26") && is_night_ref("2026-11-26-0123abcd"));
        assert!(!is_night_ref("2026-11-31") && !is_night_ref("2026-11-26-01/3abcd"));
    }

    fn record(sealed: bool) -> NightRecord {
        NightRecord {
            config: "t".into(),
            date: "2026-11-01".into(),
            commit: "0123456789".into(),
            name: "2026-11-01-01234567".into(),
            started: String::new(),
            finished: String::new(),
            wall_seconds: 1.0,
            env: EnvFingerprint::default(),
            entries: vec![],
            plants: vec![],
            seed_offset: 0,
            failed: false,
            sealed,
        }
    }

    /// A night folder with a record and two files below it.
    fn night_dir(root: &Path, sealed: bool) -> PathBuf {
        let dir = root.join("2026-11-01-01234567");
        std::fs::create_dir_all(dir.join("e/seed-1/results")).unwrap();
        std::fs::write(
            dir.join("night.json"),
            serde_json::to_string(&record(sealed)).unwrap(),
        )
        .unwrap();
        std::fs::write(dir.join("e/seed-1/results/mr.json"), "{\"x\": 1}").unwrap();
        std::fs::write(dir.join("e/seed-1.log"), "log").unwrap();
        dir
    }

    #[test]
    fn a_sealed_night_names_every_file_changed_added_or_removed_since() {
        let root = tempfile::tempdir().unwrap();
        let dir = night_dir(root.path(), true);
        seal(&dir).unwrap();
        let sums = std::fs::read_to_string(dir.join(CHECKSUMS)).unwrap();
        assert_eq!(sums.lines().count(), 3, "{sums}");
        assert!(sums.contains("  e/seed-1/results/mr.json\n"), "{sums}");
        assert_eq!(verify(&dir), Ok(()));
        assert_eq!(Night::load(&dir).integrity, Integrity::Verified);
        // One flipped byte.
        let result = dir.join("e/seed-1/results/mr.json");
        let mut bytes = std::fs::read(&result).unwrap();
        bytes[3] ^= 1;
        std::fs::write(&result, &bytes).unwrap();
        // An added file, a removed file.
        std::fs::write(dir.join("e/seed-1/results/trec.json"), "{}").unwrap();
        std::fs::remove_file(dir.join("e/seed-1.log")).unwrap();
        let problems = verify(&dir).unwrap_err();
        assert_eq!(problems.len(), 3, "{problems:?}");
        let all = problems.join("\n");
        assert!(
            all.contains("mr.json: sha256") && all.contains("changed after"),
            "{all}"
        );
        assert!(all.contains("trec.json: not in SHA256SUMS"), "{all}");
        assert!(all.contains("seed-1.log: missing"), "{all}");
        assert!(matches!(Night::load(&dir).integrity, Integrity::Failed(p) if p.len() == 3));
    }

    #[test]
    fn unsealed_and_unreadable_nights_are_told_apart() {
        // Written before nights were sealed: nothing to verify against, said so.
        let root = tempfile::tempdir().unwrap();
        let dir = night_dir(root.path(), false);
        assert_eq!(Night::load(&dir).integrity, Integrity::Unverified);
        // Its record says sealed, its checksums are gone: a failure, named.
        let root = tempfile::tempdir().unwrap();
        let dir = night_dir(root.path(), true);
        let n = Night::load(&dir);
        assert!(
            matches!(&n.integrity, Integrity::Failed(p) if p[0].contains("SHA256SUMS: missing")),
            "{:?}",
            n.integrity
        );
        // A record that does not parse: a placeholder named after the folder, never an
        // error that stops every report.
        std::fs::write(dir.join("night.json"), "{not json").unwrap();
        let n = Night::load(&dir);
        assert_eq!(n.record.name, "2026-11-01-01234567");
        assert_eq!(n.record.date, "2026-11-01");
        assert!(
            matches!(&n.integrity, Integrity::Failed(p) if p.iter().any(|p| p.contains("not a night record"))),
            "{:?}",
            n.integrity
        );
        assert_eq!(load_history(root.path(), 0).unwrap().len(), 1);
    }
}
