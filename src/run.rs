//! `harness run RECIPE`: resolve the recipe, (train,) evaluate every benchmark it lists and
//! leave everything in one run directory (DESIGN.md, "The run directory"):
//!
//! ```text
//! runs/<name>-<fingerprint8>/
//!   recipe.resolved.yaml   the recipe as run (base ⊕ profile ⊕ --set, defaults filled)
//!   env.json               harness version, git commit, backend, device, threads, datasets digest
//!   results/<bench>.json   one result per benchmark (same format as `harness eval`)
//! ```
//!
//! Re-running the same resolved recipe reuses the directory: results already present for the
//! same encoder are kept (`--force` recomputes them). One process at a time may use a run
//! directory; a second gets an error naming the lock file.

use crate::bench::cache::CachedEncoder;
use crate::bench::encoder::open_encoder;
use crate::bench::registry::Overrides;
use crate::bench::registry::Registry;
use crate::bench::runner::summary_table;
use crate::cli::RunCliArgs;
use crate::data::lock::Lock;
use crate::fsutil::write_atomic;
use crate::recipe::schema::Encoder as EncoderSpec;
use crate::recipe::{LoadOptions, Resolved};
use crate::settings::Settings;
use anyhow::{bail, Context};
use serde::Serialize;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

/// `env.json`: where and with what a run happened.
#[derive(Debug, Clone, Serialize)]
pub struct RunEnv {
    /// harness version (Cargo.toml).
    pub harness_version: String,
    /// Git commit the binary was built from (`-dirty` with local changes), or `unknown`.
    pub git_commit: String,
    /// Recipe name and fingerprint.
    pub recipe: String,
    pub recipe_fingerprint: String,
    /// Profile applied, if any.
    pub profile: Option<String>,
    /// `--set` overrides applied after the profile, in order (absent when none). A run with
    /// overrides is not the recipe's own system in reports.
    #[serde(skip_serializing_if = "Vec::is_empty", default)]
    pub overrides: Vec<String>,
    /// Compute backend and device of training and encoding.
    pub backend: String,
    pub device: String,
    /// Worker threads (rayon).
    pub threads: usize,
    /// sha256 of the embedded `datasets.lock`.
    pub datasets: String,
    /// Operating system and CPU architecture.
    pub os: String,
    /// Start of the run (UTC, RFC 3339).
    pub started: String,
}

impl RunEnv {
    /// The environment of a run of `resolved` (with the `--set` overrides `sets`) starting
    /// now, on the CPU.
    pub fn capture(resolved: &Resolved, sets: &[String]) -> Self {
        RunEnv {
            harness_version: env!("CARGO_PKG_VERSION").to_string(),
            git_commit: env!("HARNESS_GIT_COMMIT").to_string(),
            recipe: resolved.recipe.name.clone(),
            recipe_fingerprint: resolved.fingerprint.0.clone(),
            profile: resolved.profile.clone(),
            overrides: sets.to_vec(),
            backend: "cpu".into(),
            device: "cpu".into(),
            threads: rayon::current_num_threads(),
            datasets: Lock::embedded_digest(),
            os: format!("{}-{}", std::env::consts::OS, std::env::consts::ARCH),
            started: utc_now(),
        }
    }
}

/// The run directory of a resolved recipe: `<runs_dir>/<name>[-<profile>]-<fingerprint8>`.
pub fn run_dir(settings: &Settings, resolved: &Resolved) -> PathBuf {
    let mut name = safe_name(&resolved.recipe.name);
    if let Some(p) = &resolved.profile {
        name.push('-');
        name.push_str(&safe_name(p));
    }
    settings
        .runs_dir
        .join(format!("{name}-{}", resolved.fingerprint.short()))
}

fn safe_name(s: &str) -> String {
    s.chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.') {
                c
            } else {
                '_'
            }
        })
        .collect()
}

/// The encoder spec (`--encoder` syntax) an evaluation recipe's `model.encoder` stands for.
///
/// Errors for encoders that have to be trained first, and for hashed-encoder settings the
/// `hashed-ngrams` implementation does not have.
pub fn encoder_spec(resolved: &Resolved) -> anyhow::Result<String> {
    let file = resolved.path.display();
    let Some(model) = &resolved.recipe.model else {
        bail!("{file}: the recipe has no `model:` section. Fix: add `model: {{encoder: ...}}`");
    };
    match &model.encoder {
        EncoderSpec::Hashed(h) => {
            if h.word_ngrams != [1] || h.char_ngrams != [3, 4] {
                bail!(
                    "{file}: model.encoder: the hashed encoder implements word unigrams and \
                     character 3- and 4-grams only (multilingual USE §2.1); found word_ngrams \
                     {:?}, char_ngrams {:?}. Fix: use word_ngrams: [1], char_ngrams: [3, 4]",
                    h.word_ngrams,
                    h.char_ngrams
                );
            }
            if !h.buckets.is_power_of_two() {
                bail!(
                    "{file}: model.encoder.buckets: {} is not a power of two. Fix: use e.g. 1048576",
                    h.buckets
                );
            }
            Ok(format!(
                "hashed-ngrams:dim={},seed={},buckets={}",
                h.dim,
                resolved.recipe.seed,
                h.buckets.trailing_zeros()
            ))
        }
        EncoderSpec::Pretrained(p) if !p.trainable => Ok(p.name.clone()),
        other => bail!(
            "{file}: model.encoder (kind `{}`) has to be trained first, and the recipe has no \
             `tasks:`. Fix: add training tasks, or evaluate a trained run with \
             `harness eval --encoder runs/<dir>`",
            other.kind()
        ),
    }
}

/// `harness run`.
pub fn run_command(args: &RunCliArgs, settings: &Settings) -> anyhow::Result<ExitCode> {
    let train = &args.train;
    let opts = LoadOptions {
        profile: train.profile.clone(),
        sets: train.sets.clone(),
    };
    let resolved = crate::recipe::load(&train.recipe, &opts)?;
    if !resolved.recipe.tasks.is_empty() {
        // A training recipe: train (or resume) into its run directory, then evaluate its
        // best checkpoint. The run directory stays locked until the report is written.
        let (resolved, trained) =
            crate::train::run::train_recipe(&train.to_train_args(), settings)?;
        crate::train::run::print_outcome(&trained);
        if trained.outcome.interrupted {
            return Ok(ExitCode::from(130));
        }
        let spec = trained.run_dir.display().to_string();
        return evaluate_and_report(&resolved, &spec, &trained.run_dir, settings, args.force);
    }
    let spec = encoder_spec(&resolved)?;
    let dir = train
        .out
        .clone()
        .unwrap_or_else(|| run_dir(settings, &resolved));
    claim_run_dir(&dir)?;
    std::fs::create_dir_all(&dir)
        .with_context(|| format!("creating the run directory {}", dir.display()))?;
    let _lock = RunLock::acquire(&dir)?;
    eprintln!("run directory: {}", dir.display());
    write_atomic(
        &dir.join("recipe.resolved.yaml"),
        resolved.to_yaml().as_bytes(),
    )
    .with_context(|| format!("writing {}", dir.join("recipe.resolved.yaml").display()))?;
    let env = RunEnv::capture(&resolved, &train.sets);
    let mut env_text = serde_json::to_string_pretty(&env)?;
    env_text.push('\n');
    write_atomic(&dir.join("env.json"), env_text.as_bytes())
        .with_context(|| format!("writing {}", dir.join("env.json").display()))?;
    evaluate_and_report(&resolved, &spec, &dir, settings, args.force)
}

/// The part of `harness run` after the encoder exists: every benchmark of the recipe into
/// `<dir>/results/`, the summary table, then the recipe's `report:` tables into
/// `<dir>/report/`. Exit code 1 when a benchmark failed.
fn evaluate_and_report(
    resolved: &Resolved,
    spec: &str,
    dir: &Path,
    settings: &Settings,
    force: bool,
) -> anyhow::Result<ExitCode> {
    let registry = Registry::embedded()?;
    let plan = crate::bench::runner::plan(&registry, &evaluate_entries(&resolved.recipe))?;
    let inner = open_encoder(spec, settings)?;
    let encoder = CachedEncoder::new(inner, &settings.cache_dir);
    let results_dir = dir.join("results");
    let results = crate::bench::runner::evaluate(
        &plan,
        &registry,
        &encoder,
        settings,
        resolved.recipe.seed,
        &results_dir,
        !force,
    )?;
    print!("{}", summary_table(&results));
    if resolved.recipe.report.is_empty() {
        println!("no report: the recipe lists no `report:` tables (see `harness report --list`)");
    } else {
        let report_dir = dir.join("report");
        let summary =
            crate::report::render_report(&[dir.to_path_buf()], &resolved.recipe.report, &report_dir)
                .with_context(|| {
                    format!(
                        "rendering the report of {} (the results are kept; retry with `harness report {} --out {}`)",
                        dir.display(),
                        dir.display(),
                        report_dir.display()
                    )
                })?;
        for w in &summary.warnings {
            eprintln!("warning: {w}");
        }
        println!(
            "report: {} tables, {} measured cells filled ({} n/a, {} not run yet) in {}",
            summary.tables,
            summary.filled,
            summary.na,
            summary.not_run,
            report_dir.join("report.html").display()
        );
    }
    let (files, rehashed, bytes, spent) = crate::stamp::totals();
    eprintln!(
        "datasets and models checked before use: {files} file checks, {rehashed} re-hashed ({}), {:.1} ms",
        crate::data::fetch::human_bytes(bytes),
        spent.as_secs_f64() * 1e3
    );
    println!("run directory: {}", dir.display());
    Ok(if results.iter().any(|r| r.error.is_some()) {
        ExitCode::from(1)
    } else {
        ExitCode::SUCCESS
    })
}

/// Whether `dir` is a harness run directory: the first files every run writes into it
/// (`.lock`, `recipe.resolved.yaml`, `env.json`).
fn is_run_dir(dir: &Path) -> bool {
    let env_ok = std::fs::read_to_string(dir.join("env.json"))
        .ok()
        .and_then(|t| serde_json::from_str::<serde_json::Value>(&t).ok())
        .is_some_and(|v| v.get("harness_version").is_some());
    let lock_ok =
        std::fs::read_to_string(dir.join(".lock")).is_ok_and(|t| t.trim().parse::<u32>().is_ok());
    env_ok || lock_ok || dir.join("recipe.resolved.yaml").is_file()
}

/// A run directory (`--out DIR` of `run` and `train`) must be new, empty, or a harness run
/// directory: harness never writes its files among someone else's.
pub fn claim_run_dir(dir: &Path) -> anyhow::Result<()> {
    let Ok(entries) = std::fs::read_dir(dir) else {
        if dir.exists() {
            bail!(
                "{}: not a directory. Fix: name a new or empty directory with --out",
                dir.display()
            );
        }
        return Ok(());
    };
    let mut names: Vec<String> = entries
        .filter_map(Result::ok)
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect();
    if names.is_empty() || is_run_dir(dir) {
        return Ok(());
    }
    names.sort();
    let more = names.len().saturating_sub(3);
    names.truncate(3);
    bail!(
        "{}: this directory holds files harness did not write ({}{}) and is not a harness run directory; nothing was written. Fix: name a new or empty directory with --out, or leave --out out (runs/<recipe>-<fingerprint8>)",
        dir.display(),
        names.join(", "),
        if more > 0 {
            format!(" and {more} more")
        } else {
            String::new()
        }
    )
}

/// A recipe's `evaluate:` entries as benchmark names with the overrides of their
/// declarations.
pub fn evaluate_entries(recipe: &crate::recipe::Recipe) -> Vec<(String, Overrides)> {
    recipe
        .evaluate
        .iter()
        .map(|e| {
            (
                e.name.clone(),
                Overrides {
                    params: e.params.clone(),
                    languages: e.languages.clone(),
                },
            )
        })
        .collect()
}

/// Exclusive use of a run directory: `<dir>/.lock` created with `create_new`, holding the
/// owner's pid, removed on drop. A lock whose process is gone (Linux: no `/proc/<pid>`) is
/// taken over, so a killed run does not block the next one.
pub struct RunLock {
    path: PathBuf,
}

impl RunLock {
    /// Takes the lock or explains who holds it.
    pub fn acquire(dir: &Path) -> anyhow::Result<RunLock> {
        let path = dir.join(".lock");
        for _ in 0..2 {
            match std::fs::OpenOptions::new()
                .write(true)
                .create_new(true)
                .open(&path)
            {
                Ok(mut f) => {
                    use std::io::Write;
                    writeln!(f, "{}", std::process::id())
                        .with_context(|| format!("writing {}", path.display()))?;
                    return Ok(RunLock { path });
                }
                Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {
                    let owner = std::fs::read_to_string(&path).unwrap_or_default();
                    let pid = owner.trim().parse::<u32>().ok();
                    let alive = pid.is_some_and(|p| Path::new(&format!("/proc/{p}")).exists());
                    if alive || !Path::new("/proc/self").exists() {
                        bail!(
                            "{}: another harness process (pid {}) is using this run directory. \
                             Fix: wait for it to finish, or run with --out DIR elsewhere; if no \
                             such process exists, delete the lock file",
                            path.display(),
                            pid.map_or("unknown".into(), |p| p.to_string())
                        );
                    }
                    // Stale: its owner was killed. Remove and retry once.
                    let _ = std::fs::remove_file(&path);
                }
                Err(e) => {
                    return Err(e).with_context(|| format!("creating {}", path.display()));
                }
            }
        }
        bail!("{}: could not take the run lock", path.display())
    }
}

impl Drop for RunLock {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.path);
    }
}

/// Current UTC time as RFC 3339 (`2026-11-22T16:20:00Z`), from the system clock.
pub fn utc_now() -> String {
    rfc3339(crate::clock::unix_secs(std::time::SystemTime::now()))
}

fn rfc3339(secs: i64) -> String {
    let (year, month, day, h, m, sec) = crate::clock::civil(secs);
    format!("{year:04}-{month:02}-{day:02}T{h:02}:{m:02}:{sec:02}Z")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rfc3339_matches_known_instants() {
        assert_eq!(rfc3339(0), "1970-01-01T00:00:00Z");
        assert_eq!(rfc3339(951_782_400), "2000-02-29T00:00:00Z");
        assert_eq!(rfc3339(1_795_350_896), "2026-11-22T12:34:56Z");
    }

    #[test]
    fn a_second_lock_on_the_same_directory_is_refused_and_released_on_drop() {
        let dir = tempfile::tempdir().unwrap();
        let first = RunLock::acquire(dir.path()).unwrap();
        let err = RunLock::acquire(dir.path()).err().unwrap().to_string();
        assert!(
            err.contains(".lock") && err.contains("another harness process"),
            "{err}"
        );
        drop(first);
        RunLock::acquire(dir.path()).unwrap();
    }

    #[test]
    fn a_lock_left_by_a_dead_process_is_taken_over() {
        let dir = tempfile::tempdir().unwrap();
        // pid 0 never names a user process, so no /proc/0 exists.
        std::fs::write(dir.path().join(".lock"), "0\n").unwrap();
        RunLock::acquire(dir.path()).unwrap();
    }

    #[test]
    fn recipes_map_to_encoder_specs() {
        let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("recipes");
        let load = |f: &str| crate::recipe::load(&root.join(f), &LoadOptions::default()).unwrap();
        assert_eq!(
            encoder_spec(&load("hashed-ngrams.yaml")).unwrap(),
            "hashed-ngrams:dim=512,seed=1,buckets=20"
        );
        assert_eq!(
            encoder_spec(&load("multilingual-e5-small.yaml")).unwrap(),
            "multilingual-e5-small"
        );
        let err = encoder_spec(&load("laser.yaml")).unwrap_err().to_string();
        assert!(
            err.contains("laser.yaml") && err.contains("bilstm"),
            "{err}"
        );
    }
}
