//! Running one night: every entry and seed through the same commands a person types
//! (`harness train`, `harness eval`, `harness embed` for the speed probe), each as a child
//! process of this binary writing into tonight's own folder — so no result of an earlier
//! night is ever reused (only the embedding cache may serve identical encoder + data, and
//! each result file counts its cache hits). The night is written under a hidden `.partial`
//! name and renamed into the history when complete.

use super::config::{Entry, NightlyConfig, Source};
use super::plan::NightPlan;
use super::store::{night_name, EntryRecord, EnvFingerprint, NightRecord, SeedRecord};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Instant;

/// How to run a night.
#[derive(Debug, Clone)]
pub struct NightOptions {
    /// The harness binary (`std::env::current_exe()`).
    pub exe: PathBuf,
    /// `<store>/<config>/`.
    pub history: PathBuf,
    pub date: String,
    pub commit: String,
    pub env: EnvFingerprint,
    /// Sentences for the speed probe (one per line); `None`: no probe.
    pub probe_input: Option<PathBuf>,
    /// Added to every seed (noise-only nights).
    pub seed_offset: u64,
    /// Where relative paths of the config (recipes, runs) are resolved: the directory the
    /// command runs in.
    pub cwd: PathBuf,
}

/// What the command layer is told while a night runs.
#[derive(Debug, Clone)]
pub enum NightEvent {
    Start {
        entry: String,
        seed: u64,
        what: String,
    },
    Done {
        entry: String,
        seed: u64,
        seconds: f64,
        errors: usize,
    },
}

/// The folder a night is built in before it is complete.
pub fn partial_dir(history: &Path, name: &str) -> PathBuf {
    history.join(format!(".{name}.partial-{}", std::process::id()))
}

/// Runs every entry of `config` into a new partial night folder and returns the record and
/// the folder (still partial: the caller plants, writes the record and renames).
pub fn run_night(
    config: &NightlyConfig,
    plan: &NightPlan,
    opts: &NightOptions,
    on_event: &mut dyn FnMut(NightEvent),
) -> Result<(NightRecord, PathBuf), String> {
    let name = night_name(&opts.date, &opts.commit);
    refuse_to_start(config, plan, opts, &name)?;
    let dir = partial_dir(&opts.history, &name);
    std::fs::create_dir_all(&dir).map_err(|e| format!("{}: cannot create ({e})", dir.display()))?;
    let started = harness_core::rundir::utc_now();
    let t0 = Instant::now();
    let mut entries = Vec::new();
    for (entry, planned) in config.entries.iter().zip(&plan.entries) {
        let mut seeds = Vec::new();
        for &base_seed in config.seeds_of(entry) {
            let job = SeedJob::new(entry, &planned.bench, base_seed + opts.seed_offset, &dir);
            seeds.push(run_seed(&job, opts, on_event)?);
        }
        let probed = probe_entry(entry, &seeds, opts, &dir);
        entries.push(entry_record(entry, seeds, probed));
    }
    let failed = entries
        .iter()
        .any(|e| e.seeds.iter().any(|s| !s.errors.is_empty()));
    let record = NightRecord {
        config: config.name.clone(),
        date: opts.date.clone(),
        commit: opts.commit.clone(),
        name,
        started,
        finished: harness_core::rundir::utc_now(),
        wall_seconds: t0.elapsed().as_secs_f64(),
        env: opts.env.clone(),
        entries,
        plants: Vec::new(),
        seed_offset: opts.seed_offset,
        failed,
        sealed: true,
    };
    Ok((record, dir))
}

/// Refuses a night that cannot start: one named `name` is already in the history (a night
/// is never overwritten), or `plan` is not the plan of `config`.
fn refuse_to_start(
    config: &NightlyConfig,
    plan: &NightPlan,
    opts: &NightOptions,
    name: &str,
) -> Result<(), String> {
    let final_dir = opts.history.join(name);
    if final_dir.exists() {
        return Err(format!(
            "{}: a night of {} at commit {} is already in the history, and a night is never overwritten. Fix: run with another --date, or move that folder away",
            final_dir.display(),
            opts.date,
            super::store::night_name("", &opts.commit).trim_start_matches('-')
        ));
    }
    // Every entry was resolved and checked before this (`plan::resolve`): a misspelt name
    // fails at once, not after an hour of other entries.
    if plan.entries.len() != config.entries.len() {
        return Err(format!(
            "nightly {}: the plan has {} entries, the configuration {}. Fix: resolve the plan of this configuration",
            config.name,
            plan.entries.len(),
            config.entries.len()
        ));
    }
    Ok(())
}

/// One seed of one entry, and where it runs.
struct SeedJob<'a> {
    entry: &'a Entry,
    /// The benchmarks to evaluate on (`--bench`).
    bench: &'a str,
    seed: u64,
    /// The seed's folder relative to the night (`<entry>/seed-<n>`).
    rel: String,
    /// The seed's folder.
    dir: PathBuf,
    /// Its log. Beside the seed's folder, not in it: `harness train --out` wants a new or
    /// empty directory.
    log: PathBuf,
}

impl<'a> SeedJob<'a> {
    /// Seed `seed` of `entry` in night folder `night`.
    fn new(entry: &'a Entry, bench: &'a str, seed: u64, night: &Path) -> Self {
        let rel = format!("{}/seed-{seed}", entry.name);
        SeedJob {
            entry,
            bench,
            seed,
            dir: night.join(&rel),
            log: night.join(format!("{rel}.log")),
            rel,
        }
    }

    /// Tells the command layer what the seed starts now.
    fn start(&self, on_event: &mut dyn FnMut(NightEvent), what: String) {
        on_event(NightEvent::Start {
            entry: self.entry.name.clone(),
            seed: self.seed,
            what,
        });
    }
}

/// Runs one seed: trains it when the entry is a recipe, then evaluates its encoder; its
/// failures are recorded, not returned (only the night's own folders and logs are errors).
fn run_seed(
    job: &SeedJob,
    opts: &NightOptions,
    on_event: &mut dyn FnMut(NightEvent),
) -> Result<SeedRecord, String> {
    std::fs::create_dir_all(&job.dir)
        .map_err(|e| format!("{}: cannot create ({e})", job.dir.display()))?;
    let mut record = SeedRecord {
        seed: job.seed,
        dir: job.rel.clone(),
        train_seconds: None,
        tokens_per_s: None,
        eval_seconds: 0.0,
        cpu_seconds: None,
        errors: Vec::new(),
        log: format!("{}.log", job.rel),
    };
    let t = Instant::now();
    let encoder = match job.entry.source() {
        Source::Recipe(recipe) => train_seed(job, recipe, opts, &mut record, on_event)?,
        Source::Run(run) => Some(opts.cwd.join(run).display().to_string()),
        Source::Encoder(e) => Some(e.to_string()),
    };
    if let Some(encoder) = encoder {
        eval_seed(job, encoder, opts, &mut record, on_event)?;
    }
    on_event(NightEvent::Done {
        entry: job.entry.name.clone(),
        seed: job.seed,
        seconds: t.elapsed().as_secs_f64(),
        errors: record.errors.len(),
    });
    Ok(record)
}

/// Trains the seed's model from `recipe` (`harness train`) into its folder: the encoder to
/// evaluate, or none when training failed (recorded in `record`).
fn train_seed(
    job: &SeedJob,
    recipe: &Path,
    opts: &NightOptions,
    record: &mut SeedRecord,
    on_event: &mut dyn FnMut(NightEvent),
) -> Result<Option<String>, String> {
    job.start(on_event, format!("training {}", recipe.display()));
    let mut args: Vec<String> = vec![
        "train".into(),
        opts.cwd.join(recipe).display().to_string(),
        "--out".into(),
        job.dir.display().to_string(),
        "--set".into(),
        format!("seed={}", job.seed),
    ];
    if let Some(p) = &job.entry.profile {
        args.extend(["--profile".into(), p.clone()]);
    }
    for s in &job.entry.set {
        args.extend(["--set".into(), s.clone()]);
    }
    let t_train = Instant::now();
    let ok = child(&opts.exe, &args, &job.log, &mut record.cpu_seconds)?;
    record.train_seconds = Some(t_train.elapsed().as_secs_f64());
    record.tokens_per_s = tokens_per_s(&job.dir);
    if !ok {
        record
            .errors
            .push(format!("training failed: {}", why_failed(&job.log, &args)));
        Ok(None)
    } else {
        Ok(Some(job.dir.display().to_string()))
    }
}

/// Evaluates `encoder` on the entry's benchmarks (`harness eval`) into the seed's
/// `results/`; failed benchmarks (or a failed evaluation) are recorded in `record`.
fn eval_seed(
    job: &SeedJob,
    encoder: String,
    opts: &NightOptions,
    record: &mut SeedRecord,
    on_event: &mut dyn FnMut(NightEvent),
) -> Result<(), String> {
    let benchmarks = job.bench.to_string();
    job.start(on_event, format!("evaluating {encoder} on {benchmarks}"));
    let mut args: Vec<String> = vec![
        "eval".into(),
        "--encoder".into(),
        encoder,
        "--bench".into(),
        benchmarks,
        "--seed".into(),
        job.seed.to_string(),
        "--out".into(),
        job.dir.join("results").display().to_string(),
    ];
    for s in &job.entry.bench_set {
        args.extend(["--set".into(), s.clone()]);
    }
    let t_eval = Instant::now();
    let ok = child(&opts.exe, &args, &job.log, &mut record.cpu_seconds)?;
    record.eval_seconds = t_eval.elapsed().as_secs_f64();
    record
        .errors
        .extend(failed_benchmarks(&job.dir.join("results")));
    if !ok && record.errors.is_empty() {
        record.errors.push(format!(
            "evaluation failed: {}",
            why_failed(&job.log, &args)
        ));
    }
    Ok(())
}

/// Speed probe: the first seed's encoder over the probe sentences, no cache (sentences and
/// seconds; none without probe input or when the first seed failed).
fn probe_entry(
    entry: &Entry,
    seeds: &[SeedRecord],
    opts: &NightOptions,
    dir: &Path,
) -> Option<(f64, f64)> {
    match (&opts.probe_input, seeds.first()) {
        (Some(input), Some(first)) if first.errors.is_empty() => {
            let encoder = match entry.source() {
                Source::Recipe(_) => dir.join(&first.dir).display().to_string(),
                Source::Run(r) => opts.cwd.join(r).display().to_string(),
                Source::Encoder(e) => e.to_string(),
            };
            probe(&opts.exe, &encoder, input, &dir.join(&first.dir))
        }
        _ => None,
    }
}

/// The record of `entry`: what it is, its seeds, and its probe's speed.
fn entry_record(entry: &Entry, seeds: Vec<SeedRecord>, probed: Option<(f64, f64)>) -> EntryRecord {
    EntryRecord {
        name: entry.name.clone(),
        kind: match entry.source() {
            Source::Recipe(_) => "recipe",
            Source::Run(_) => "run",
            Source::Encoder(_) => "encoder",
        }
        .into(),
        source: match entry.source() {
            Source::Recipe(p) | Source::Run(p) => p.display().to_string(),
            Source::Encoder(e) => e.to_string(),
        },
        seeds,
        sentences_per_s: probed.map(|(n, secs)| n / secs),
        probe_seconds: probed.map(|(_, secs)| secs),
    }
}

/// Why a child failed: the last error of its log, else the command it ran.
fn why_failed(log: &Path, args: &[String]) -> String {
    last_error(log).unwrap_or_else(|| format!("`harness {}`", args.join(" ")))
}

/// Runs `exe args`, appending its output to `log` and its CPU seconds to `cpu`; whether it
/// exited 0.
fn child(exe: &Path, args: &[String], log: &Path, cpu: &mut Option<f64>) -> Result<bool, String> {
    let mut file = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(log)
        .map_err(|e| format!("{}: cannot open the log ({e})", log.display()))?;
    let _ = writeln!(file, "$ harness {}", args.join(" "));
    let err = file
        .try_clone()
        .map_err(|e| format!("{}: {e}", log.display()))?;
    let before = children_cpu_seconds();
    let mut cmd = Command::new(exe);
    cmd.args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::from(file))
        .stderr(Stdio::from(err));
    crate::run::die_with_parent(&mut cmd);
    let status = cmd
        .status()
        .map_err(|e| format!("{}: cannot start ({e})", exe.display()))?;
    if let (Some(a), Some(b)) = (before, children_cpu_seconds()) {
        *cpu = Some(cpu.unwrap_or(0.0) + (b - a).max(0.0));
    }
    Ok(status.success())
}

/// CPU seconds (user + system) of every child this process has waited for, with theirs:
/// the difference around one child is that child's. Written with libc because std exposes
/// no resource usage of a child.
#[cfg(unix)]
fn children_cpu_seconds() -> Option<f64> {
    // SAFETY: rusage is plain data (timevals and longs), for which all-zero bytes are a value.
    let mut u: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: `u` is a live, writable rusage, the only memory getrusage writes.
    if unsafe { libc::getrusage(libc::RUSAGE_CHILDREN, &mut u) } != 0 {
        return None;
    }
    let secs = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 * 1e-6;
    Some(secs(u.ru_utime) + secs(u.ru_stime))
}

#[cfg(not(unix))]
fn children_cpu_seconds() -> Option<f64> {
    None
}

/// The last `error: …` line a child wrote to its log (what a person needs first).
fn last_error(log: &Path) -> Option<String> {
    let text = std::fs::read_to_string(log).ok()?;
    text.lines()
        .rev()
        .find_map(|l| l.strip_prefix("error: "))
        .map(str::to_string)
}

/// Training throughput from a run's `train/metrics.jsonl` (its last line's `tokens_per_s`).
pub fn tokens_per_s(run_dir: &Path) -> Option<f64> {
    let text = std::fs::read_to_string(run_dir.join("train/metrics.jsonl")).ok()?;
    let last = text.lines().rev().find(|l| !l.trim().is_empty())?;
    serde_json::from_str::<serde_json::Value>(last).ok()?["tokens_per_s"].as_f64()
}

/// The errors of the failed result files in `results`.
fn failed_benchmarks(results: &Path) -> Vec<String> {
    let Ok(listing) = std::fs::read_dir(results) else {
        return vec![format!("{}: no results were written", results.display())];
    };
    let mut errors: Vec<String> = listing
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|x| x == "json"))
        .filter_map(|p| harness_bench::runner::read_result(&p).ok())
        .filter_map(|r| {
            r.error
                .map(|e| format!("benchmark `{}` failed: {e}", r.benchmark))
        })
        .collect();
    errors.sort();
    errors
}

/// Sentences encoded and seconds taken by `encoder` over `input` (no cache), from the line
/// `harness embed` prints (`wrote X (N × D) in S s: …`).
fn probe(exe: &Path, encoder: &str, input: &Path, scratch: &Path) -> Option<(f64, f64)> {
    let out = scratch.join("speed-probe.npy");
    let mut cmd = Command::new(exe);
    cmd.args([
        "embed",
        "--encoder",
        encoder,
        "--no-cache",
        "--force",
        "--input",
    ])
    .arg(input)
    .arg("--out")
    .arg(&out)
    .stdin(Stdio::null());
    crate::run::die_with_parent(&mut cmd);
    let o = cmd.output().ok()?;
    // The matrix is only a by-product of the timing: harness wrote it, harness removes it.
    let _ = std::fs::remove_file(&out);
    if !o.status.success() {
        return None;
    }
    parse_probe(&String::from_utf8_lossy(&o.stdout))
}

/// (sentences, seconds) from `harness embed`'s summary line.
pub fn parse_probe(line: &str) -> Option<(f64, f64)> {
    let open = line.find(" (")?;
    let rest = &line[open + 2..];
    let n: f64 = rest.split(" × ").next()?.trim().parse().ok()?;
    let secs: f64 = rest
        .split(") in ")
        .nth(1)?
        .split('s')
        .next()?
        .trim()
        .parse()
        .ok()?;
    (secs > 0.0).then_some((n, secs))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_embed_summary_line_parses() {
        let v = parse_probe("wrote /tmp/x.npy (1000 × 384) in 2.50s: cache not used").unwrap();
        assert_eq!(v, (1000.0, 2.5));
        assert_eq!(parse_probe("something else"), None);
    }
}
