//! `harness nightly CONFIG`: one night of a nightly configuration — every entry trained
//! and/or evaluated into a new, never-overwritten folder of the history store, then the
//! morning report (Markdown, HTML, terminal) against the previous night and the baseline.
//! Exit status: 0 clean, 3 regressions (not acknowledged), 1 errors (a recipe that did not
//! train, a benchmark that failed), 2 usage or setup errors.

use anyhow::{bail, Context};
use clap::Args;
use harness_core::settings::Settings;
use harness_core::terminal::terminal_safe;
use harness_sweep::nightly::ack::{load_acks, Ack};
use harness_sweep::nightly::config::NightlyConfig;
use harness_sweep::nightly::morning;
use harness_sweep::nightly::night::{run_night, NightEvent, NightOptions};
use harness_sweep::nightly::plant;
use harness_sweep::nightly::store::{self, EnvFingerprint};
use std::path::{Path, PathBuf};
use std::process::ExitCode;

#[derive(Debug, Args)]
pub struct NightlyArgs {
    /// The nightly configuration (`nightly/*.yaml`; `nightly/example.yaml` is the worked
    /// example)
    pub config: PathBuf,
    /// The night's date, YYYY-MM-DD (default: today, UTC)
    #[arg(long)]
    pub date: Option<String>,
    /// The night every report also compares against (a date or DATE-COMMIT8 of the
    /// history; default: the config's `baseline:`, else the first night)
    #[arg(long)]
    pub baseline: Option<String>,
    /// Known regressions that stop alerting (YAML list of {series, reason, expires}); the
    /// report shows them with their reason
    #[arg(long, value_name = "FILE")]
    pub ack: Option<PathBuf>,
    /// The history store: nights go to STORE/<config name>/<date>-<commit8>/
    #[arg(long, env = "HARNESS_NIGHTLY_DIR", default_value = "nightly")]
    pub store: PathBuf,
    /// Render the report of the newest night (or the night of --date) again, without
    /// running anything (after adding an --ack, say); written to --out, else printed only
    #[arg(long)]
    pub report_only: bool,
    /// With --report-only: where to write report.md/html/txt
    #[arg(long, value_name = "DIR")]
    pub out: Option<PathBuf>,
    /// Fire drill: perturb tonight's per-item outcomes of ENTRY/BENCH by POINTS of quality
    /// (negative: worse) to check that alerting works; the night and its report say so
    /// (repeatable)
    #[arg(long, value_name = "ENTRY/BENCH=POINTS", allow_hyphen_values = true)]
    pub plant: Vec<String>,
    /// Add N to every seed: a noise-only night, for measuring the false-alarm rate
    #[arg(long, default_value_t = 0, value_name = "N")]
    pub seed_offset: u64,
}

/// `harness nightly`.
pub fn run(args: &NightlyArgs, settings: &Settings) -> anyhow::Result<ExitCode> {
    let config = NightlyConfig::load(&args.config).map_err(anyhow::Error::msg)?;
    let acks: Vec<Ack> = match &args.ack {
        Some(p) => load_acks(p).map_err(anyhow::Error::msg)?,
        None => Vec::new(),
    };
    let plants = args
        .plant
        .iter()
        .map(|p| plant::parse_plant(p))
        .collect::<Result<Vec<_>, _>>()
        .map_err(anyhow::Error::msg)?;
    for (series, _) in &plants {
        let entry = series.split('/').next().unwrap_or_default();
        if !config.entries.iter().any(|e| e.name == entry) {
            bail!(
                "--plant {series}: no entry `{entry}` in {}. Fix: ENTRY/BENCH with one of: {}",
                args.config.display(),
                config
                    .entries
                    .iter()
                    .map(|e| e.name.as_str())
                    .collect::<Vec<_>>()
                    .join(", ")
            );
        }
    }
    let date = match &args.date {
        Some(d) if store::is_date(d) => d.clone(),
        Some(d) => bail!("--date {d}: expected YYYY-MM-DD"),
        None => harness_core::rundir::utc_now()[..10].to_string(),
    };
    // Absolute, so that the children (and the paths in night.json's logs) do not depend on
    // where they run.
    let store = std::path::absolute(&args.store)
        .with_context(|| format!("--store {}", args.store.display()))?;
    let history = store.join(&config.name);
    let baseline = args.baseline.clone().or_else(|| config.baseline.clone());
    if args.report_only {
        let nights = upto(&history, args.date.as_deref())?;
        let m = morning::build(&config, &nights, baseline.as_deref(), &acks);
        print!("{}", terminal_safe(&morning::terminal(&m)));
        if let Some(out) = &args.out {
            let html = morning::write(&m, out).map_err(anyhow::Error::msg)?;
            println!("report: {}", html.display());
        }
        return Ok(ExitCode::from(m.status.code()));
    }
    std::fs::create_dir_all(&history)
        .with_context(|| format!("creating the history store {}", history.display()))?;
    for left in store::remove_dead_partials(&history) {
        harness_core::note!(
            "removed {}: left by a night that was killed",
            left.display()
        );
    }
    let probe = probe_input(settings, &history, config.speed_probe_sentences)?;
    let commit = harness_core::git_commit().to_string();
    let opts = NightOptions {
        exe: std::env::current_exe().context("locating the harness binary")?,
        history: history.clone(),
        date: date.clone(),
        commit: commit.clone(),
        env: fingerprint(),
        probe_input: probe.clone(),
        seed_offset: args.seed_offset,
        cwd: std::env::current_dir().context("reading the current directory")?,
    };
    eprintln!(
        "nightly {}: night {} into {}",
        config.name,
        store::night_name(&date, &commit),
        history.display()
    );
    let result = run_night(&config, &opts, &mut |e| match e {
        NightEvent::Start { entry, seed, what } => eprintln!("  {entry} seed {seed}: {what}"),
        NightEvent::Done {
            entry,
            seed,
            seconds,
            errors,
        } => eprintln!(
            "  {entry} seed {seed}: done in {seconds:.1} s{}",
            if errors > 0 {
                format!(", {errors} error(s)")
            } else {
                String::new()
            }
        ),
    });
    if let Some(p) = &probe {
        // The probe sentences are harness's own scratch file.
        let _ = std::fs::remove_file(p);
    }
    let (mut record, partial) = result.map_err(anyhow::Error::msg)?;
    for (series, points) in &plants {
        let entry = series.split('/').next().unwrap_or_default();
        let dirs: Vec<PathBuf> = record
            .entries
            .iter()
            .filter(|e| e.name == entry)
            .flat_map(|e| e.seeds.iter().map(|s| partial.join(&s.dir).join("results")))
            .collect();
        let refs: Vec<&Path> = dirs.iter().map(PathBuf::as_path).collect();
        let planted = plant::apply(&refs, series, *points).map_err(anyhow::Error::msg)?;
        eprintln!("  FIRE DRILL: {series} perturbed by {points:+} points");
        record.plants.push(planted);
    }
    let mut text = serde_json::to_string_pretty(&record)?;
    text.push('\n');
    harness_core::fsutil::write_atomic(&partial.join("night.json"), text.as_bytes())
        .with_context(|| format!("writing {}", partial.join("night.json").display()))?;
    // The morning report is written inside the partial folder, before the rename: a night
    // in the history always has its report, whenever this process is killed.
    let mut nights = store::load_history(&history, 0).map_err(anyhow::Error::msg)?;
    nights.retain(|n| n.record.date.as_str() <= date.as_str());
    nights.push(store::Night::load(&partial).map_err(anyhow::Error::msg)?);
    // The order of `store::list_nights`: by date, then finishing time.
    nights.sort_by(|a, b| {
        (&a.record.date, &a.record.finished).cmp(&(&b.record.date, &b.record.finished))
    });
    let m = morning::build(&config, &nights, baseline.as_deref(), &acks);
    morning::write(&m, &partial.join("report")).map_err(anyhow::Error::msg)?;
    let final_dir = history.join(&record.name);
    std::fs::rename(&partial, &final_dir).with_context(|| {
        format!(
            "moving the finished night {} to {}",
            partial.display(),
            final_dir.display()
        )
    })?;
    print!("{}", terminal_safe(&morning::terminal(&m)));
    println!("report: {}", final_dir.join("report/report.html").display());
    println!("night: {}", final_dir.display());
    Ok(ExitCode::from(m.status.code()))
}

/// The nights of a history up to `date` (all when `None`), oldest first; the newest is the
/// one reported.
fn upto(history: &Path, date: Option<&str>) -> anyhow::Result<Vec<store::Night>> {
    let mut nights = store::load_history(history, 0).map_err(anyhow::Error::msg)?;
    if let Some(d) = date {
        nights.retain(|n| n.record.date.as_str() <= d);
    }
    if nights.is_empty() {
        bail!(
            "{}: no finished night{}. Fix: run `harness nightly CONFIG` first",
            history.display(),
            date.map_or(String::new(), |d| format!(" on or before {d}"))
        );
    }
    Ok(nights)
}

/// The speed probe's sentences: the first `n` STS-B test sentences, written to a scratch
/// file in the history folder.
fn probe_input(settings: &Settings, history: &Path, n: usize) -> anyhow::Result<Option<PathBuf>> {
    if n == 0 {
        return Ok(None);
    }
    let dir = harness_data::fetch::ensure_dataset(settings, "stsbenchmark")?;
    let pairs =
        harness_data::loaders::stsbenchmark::load(&dir, harness_data::records::Split::Test)?;
    let lines: Vec<&str> = pairs
        .iter()
        .flat_map(|p| [p.sentence1.as_str(), p.sentence2.as_str()])
        .take(n)
        .collect();
    let path = history.join(format!(".speed-probe-{}.txt", std::process::id()));
    harness_core::fsutil::write_atomic(&path, (lines.join("\n") + "\n").as_bytes())
        .with_context(|| format!("writing {}", path.display()))?;
    Ok(Some(path))
}

/// What can change a number besides the code.
fn fingerprint() -> EnvFingerprint {
    // The versions of the workspace and of the crates that compute (this binary's
    // Cargo.lock, embedded at build time).
    const LOCK: &str = include_str!("../../Cargo.lock");
    const WATCHED: &[&str] = &[
        "burn",
        "burn-ndarray",
        "burn-cuda",
        "burn-wgpu",
        "tokenizers",
        "matrixmultiply",
        "rayon",
        "safetensors",
        "ndarray",
        "harness",
        "harness-bench",
        "harness-model",
        "harness-train",
    ];
    let mut versions = std::collections::BTreeMap::new();
    let mut name: Option<&str> = None;
    for line in LOCK.lines() {
        if let Some(n) = line.strip_prefix("name = ") {
            name = Some(n.trim_matches('"'));
        } else if let (Some(n), Some(v)) = (name, line.strip_prefix("version = ")) {
            if WATCHED.contains(&n) {
                versions.insert(n.to_string(), v.trim_matches('"').to_string());
            }
            name = None;
        }
    }
    let cpu_model = std::fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|t| {
            t.lines()
                .find(|l| l.starts_with("model name"))
                .and_then(|l| l.split_once(':'))
                .map(|(_, v)| v.trim().to_string())
        })
        .unwrap_or_else(|| "unknown".into());
    EnvFingerprint {
        harness_version: harness_core::VERSION.to_string(),
        git_commit: harness_core::git_commit().to_string(),
        crate_versions: versions,
        datasets_lock: harness_data::lock::Lock::embedded_digest(),
        backend: "ndarray".into(),
        device: "cpu".into(),
        threads: std::env::var("RAYON_NUM_THREADS")
            .ok()
            .and_then(|v| v.parse().ok())
            .unwrap_or_else(|| std::thread::available_parallelism().map_or(1, |n| n.get())),
        cpu_model,
        os: format!("{} {}", std::env::consts::OS, std::env::consts::ARCH),
    }
}
