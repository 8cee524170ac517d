//! `harness nightly CONFIG`: one night of a nightly configuration — every entry trained
//! and/or evaluated into a new, never-overwritten folder of the history store, then the
//! morning report (Markdown, HTML, terminal) against the previous night and the baseline.
//! Exit status: 0 clean, 3 regressions (not acknowledged), 1 errors (a recipe that did not
//! train, a benchmark that failed, a night of the history that fails verification), 2 usage
//! or setup errors (found before anything runs: nothing is written then).

use anyhow::{bail, Context};
use clap::Args;
use harness_core::outdir::Foreign;
use harness_core::settings::Settings;
use harness_core::terminal::terminal_safe;
use harness_sweep::nightly::ack::{self, load_acks, Ack};
use harness_sweep::nightly::config::NightlyConfig;
use harness_sweep::nightly::morning;
use harness_sweep::nightly::night::{run_night, NightEvent, NightOptions};
use harness_sweep::nightly::store::{self, EnvFingerprint};
use harness_sweep::nightly::{plan, plant};
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
    /// Check everything the night takes (configuration, every entry's recipe, benchmarks,
    /// overrides, run directory or encoder, --plant, --ack, --date), print the plan and stop:
    /// exit 0 when the night would start, 2 otherwise. Nothing is run, nothing written to the
    /// history (a pretrained encoder is fetched on first use, as the night would)
    #[arg(long)]
    pub dry_run: bool,
}

/// `harness nightly`.
pub fn run(args: &NightlyArgs, settings: &Settings) -> anyhow::Result<ExitCode> {
    let inputs = check_inputs(args)?;
    if args.report_only {
        return report_only(
            args,
            &inputs.config,
            &inputs.history,
            inputs.baseline.as_deref(),
            &inputs.acks,
            &inputs.cwd,
        );
    }
    let plan = resolve_plan(args, &inputs, settings)?;
    let commit = harness_core::git_commit().to_string();
    let name = store::night_name(&inputs.date, &commit);
    let final_dir = inputs.history.join(&name);
    if final_dir.exists() {
        bail!(
            "{}: a night of {} at this commit is already in the history, and a night is never overwritten. Fix: run with another --date, or move that folder away",
            final_dir.display(),
            inputs.date
        );
    }
    warn_expired_acks(&inputs.acks, &inputs.date);
    if args.dry_run {
        print!("{}", terminal_safe(&dry_run_text(&inputs, &plan, &name)));
        return Ok(ExitCode::SUCCESS);
    }
    prepare_history(&inputs.history)?;
    let (record, partial) = run_tonight(args, settings, &inputs, &plan, commit, &name)?;
    let finished = finish_night(
        &inputs.config,
        record,
        &partial,
        &inputs.plants,
        &inputs.history,
        inputs.baseline.as_deref(),
        &inputs.acks,
    );
    let (m, final_dir) = match finished {
        Ok(done) => done,
        Err(e) => {
            // The night never reached the history: its partial folder is harness's own.
            let _ = std::fs::remove_dir_all(&partial);
            return Err(e);
        }
    };
    print!("{}", terminal_safe(&morning::terminal(&m)));
    println!("report: {}", final_dir.join("report/report.html").display());
    println!("night: {}", final_dir.display());
    Ok(ExitCode::from(m.status.code()))
}

/// What a night takes from its command line and configuration, checked.
struct NightInputs {
    config: NightlyConfig,
    acks: Vec<Ack>,
    /// The fire drills: (series, points).
    plants: Vec<(String, f64)>,
    /// The night's date, YYYY-MM-DD.
    date: String,
    /// `<store>/<config name>/`, absolute.
    history: PathBuf,
    /// `--baseline`, else the configuration's.
    baseline: Option<String>,
    cwd: PathBuf,
}

/// Checks everything the night and the rule take that needs no entry resolved, before
/// anything runs or is written: the configuration, the dates, the fire drills and the
/// acknowledgements.
fn check_inputs(args: &NightlyArgs) -> anyhow::Result<NightInputs> {
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
    if let Some(d) = &args.date {
        store::check_date("--date", d).map_err(anyhow::Error::msg)?;
    }
    if let Some(b) = &args.baseline {
        if !store::is_night_ref(b) {
            bail!(
                "--baseline {b}: not a night. Fix: a date of the calendar (YYYY-MM-DD) or DATE-COMMIT8, as the history's folders are named"
            );
        }
    }
    if args.report_only && (args.dry_run || !plants.is_empty() || args.seed_offset != 0) {
        bail!("--report-only runs nothing: it takes no --dry-run, --plant or --seed-offset. Fix: drop them, or drop --report-only");
    }
    let date = match &args.date {
        Some(d) => d.clone(),
        None => harness_core::rundir::utc_now()[..10].to_string(),
    };
    // Absolute, so that the children (and the paths in night.json's logs) do not depend on
    // where they run.
    let store = std::path::absolute(&args.store)
        .with_context(|| format!("--store {}", args.store.display()))?;
    Ok(NightInputs {
        history: store.join(&config.name),
        baseline: args.baseline.clone().or_else(|| config.baseline.clone()),
        cwd: std::env::current_dir().context("reading the current directory")?,
        config,
        acks,
        plants,
        date,
    })
}

/// Resolves and checks every entry (recipe, benchmarks, overrides, run directory,
/// encoder), then the fire drills and acknowledgements against the series the plan has.
fn resolve_plan(
    args: &NightlyArgs,
    inputs: &NightInputs,
    settings: &Settings,
) -> anyhow::Result<plan::NightPlan> {
    let plan = plan::resolve(
        &inputs.config,
        &args.config,
        &inputs.cwd,
        &super::known()?,
        &mut |kind, spec| check_encoder(kind, spec, settings),
    )
    .map_err(|problems| {
        anyhow::anyhow!(
            "{} problem{} found before the night, nothing was run:\n  {}",
            problems.len(),
            if problems.len() == 1 { "" } else { "s" },
            problems.join("\n  ")
        )
    })?;
    plan::check_plants(&plan, &inputs.plants).map_err(anyhow::Error::msg)?;
    if let Some(path) = &args.ack {
        plan::check_acks(&inputs.acks, &plan.series(), path).map_err(anyhow::Error::msg)?;
    }
    Ok(plan)
}

/// Warns of each acknowledgement that expired before `date` (it alerts again).
fn warn_expired_acks(acks: &[Ack], date: &str) {
    for a in ack::expired(acks, date) {
        eprintln!(
            "{}",
            terminal_safe(&format!(
                "warning: --ack: the acknowledgement of `{}` expired on {}: it alerts again",
                a.series,
                a.expires.as_deref().unwrap_or("")
            ))
        );
    }
}

/// `--dry-run`'s answer: the checked plan of night `name`, its series, fire drills and
/// acknowledgements.
fn dry_run_text(inputs: &NightInputs, plan: &plan::NightPlan, name: &str) -> String {
    let (plants, acks) = (&inputs.plants, &inputs.acks);
    format!(
        "nightly {}: the plan of night {name} (into {}), checked; nothing was run, nothing written to the history\n{}series: {}, and each entry's speed figures{}{}\n",
        inputs.config.name,
        inputs.history.display(),
        plan.describe(),
        plan.entries
            .iter()
            .flat_map(|e| e.benchmarks.iter().map(move |b| format!("{}/{b}", e.name)))
            .collect::<Vec<_>>()
            .join(", "),
        if plants.is_empty() {
            String::new()
        } else {
            format!(
                "; fire drills: {}",
                plants
                    .iter()
                    .map(|(s, p)| format!("{s} {p:+}"))
                    .collect::<Vec<_>>()
                    .join(", ")
            )
        },
        if acks.is_empty() {
            String::new()
        } else {
            format!("; {} acknowledgement(s), each matching a series", acks.len())
        }
    )
}

/// Creates the history store and removes the partial folders of nights that were killed.
fn prepare_history(history: &Path) -> anyhow::Result<()> {
    std::fs::create_dir_all(history)
        .with_context(|| format!("creating the history store {}", history.display()))?;
    for left in store::remove_dead_partials(history) {
        harness_core::note!(
            "removed {}: left by a night that was killed",
            left.display()
        );
    }
    Ok(())
}

/// Runs tonight's entries into a partial folder, telling progress on stderr; returns the
/// night's record and that folder.
fn run_tonight(
    args: &NightlyArgs,
    settings: &Settings,
    inputs: &NightInputs,
    plan: &plan::NightPlan,
    commit: String,
    name: &str,
) -> anyhow::Result<(store::NightRecord, PathBuf)> {
    let (config, history) = (&inputs.config, &inputs.history);
    let probe = probe_input(settings, history, config.speed_probe_sentences)?;
    let opts = NightOptions {
        exe: std::env::current_exe().context("locating the harness binary")?,
        history: history.clone(),
        date: inputs.date.clone(),
        commit,
        env: fingerprint(),
        probe_input: probe.clone(),
        seed_offset: args.seed_offset,
        cwd: inputs.cwd.clone(),
    };
    eprintln!(
        "nightly {}: night {name} into {}",
        config.name,
        history.display()
    );
    let result = run_night(config, plan, &opts, &mut print_event);
    if let Some(p) = &probe {
        // The probe sentences are harness's own scratch file.
        let _ = std::fs::remove_file(p);
    }
    result.map_err(anyhow::Error::msg)
}

/// Tells a night's progress on stderr.
fn print_event(e: NightEvent) {
    match e {
        NightEvent::Start { entry, seed, what } => {
            eprintln!(
                "{}",
                terminal_safe(&format!("  {entry} seed {seed}: {what}"))
            )
        }
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
    }
}

/// Plants, records, reports, seals and renames a night that ran into `partial`; returns
/// its report and its folder in the history.
fn finish_night(
    config: &NightlyConfig,
    mut record: store::NightRecord,
    partial: &Path,
    plants: &[(String, f64)],
    history: &Path,
    baseline: Option<&str>,
    acks: &[Ack],
) -> anyhow::Result<(morning::Morning, PathBuf)> {
    for (series, points) in plants {
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
    let write_record = |record: &store::NightRecord| -> anyhow::Result<()> {
        let mut text = serde_json::to_string_pretty(record)?;
        text.push('\n');
        harness_core::nofollow::write_atomic(&partial.join("night.json"), text.as_bytes())
            .with_context(|| format!("writing {}", partial.join("night.json").display()))
    };
    write_record(&record)?;
    let mut tonight = store::Night::load_unsealed(partial).map_err(anyhow::Error::msg)?;
    if !tonight.problems.is_empty() && !record.failed {
        // A result that cannot be read fails the night as a failed seed does.
        record.failed = true;
        write_record(&record)?;
        tonight.record.failed = true;
    }
    // The morning report is written inside the partial folder, before the seal and the
    // rename: a night in the history always has its report, whenever this process is
    // killed.
    let mut nights = store::load_history(history, 0).map_err(anyhow::Error::msg)?;
    nights.retain(|n| n.record.date.as_str() <= record.date.as_str());
    nights.push(tonight);
    // The order of `store::list_nights`: by date, then finishing time.
    nights.sort_by(|a, b| {
        (&a.record.date, &a.record.finished).cmp(&(&b.record.date, &b.record.finished))
    });
    let m = morning::build(config, &nights, baseline, acks);
    morning::write(&m, &partial.join("report"), Foreign::Ours).map_err(anyhow::Error::msg)?;
    store::seal(partial).map_err(anyhow::Error::msg)?;
    let final_dir = history.join(&record.name);
    std::fs::rename(partial, &final_dir).with_context(|| {
        format!(
            "moving the finished night {} to {}",
            partial.display(),
            final_dir.display()
        )
    })?;
    Ok((m, final_dir))
}

/// Whether an entry's run directory or encoder spec opens (checked before the night).
fn check_encoder(kind: &str, spec: &str, settings: &Settings) -> Result<(), String> {
    if kind == "run" && !harness_model::trained::is_run_dir(Path::new(spec)) {
        return Err(format!(
            "{spec}: not a run directory (it has no recipe.resolved.yaml). Fix: the folder `harness train --out DIR` wrote"
        ));
    }
    harness_encoders::open_encoder(spec, settings)
        .map(drop)
        .map_err(|e| e.to_string())
}

/// `--report-only`: the report of the newest night, or of the night of `--date`, again.
fn report_only(
    args: &NightlyArgs,
    config: &NightlyConfig,
    history: &Path,
    baseline: Option<&str>,
    acks: &[Ack],
    cwd: &Path,
) -> anyhow::Result<ExitCode> {
    let nights = upto(history, args.date.as_deref())?;
    if let Some(path) = &args.ack {
        // The series the configuration names (when it still resolves) and those the
        // history holds.
        let mut known: Vec<String> =
            plan::resolve(config, &args.config, cwd, &super::known()?, &mut |_, _| {
                Ok(())
            })
            .map(|p| p.series())
            .unwrap_or_default();
        for n in &nights {
            known.extend(n.series.keys().cloned());
            for e in &n.record.entries {
                known.extend(
                    plan::SPEED_FIGURES
                        .iter()
                        .map(|f| format!("{}/speed:{f}", e.name)),
                );
            }
        }
        plan::check_acks(acks, &known, path).map_err(anyhow::Error::msg)?;
    }
    if let Some(out) = &args.out {
        // A night's files are sealed: a report written into one would fail its
        // verification.
        let out_abs = std::path::absolute(out).unwrap_or_else(|_| out.clone());
        if let Some(n) = nights.iter().find(|n| out_abs.starts_with(&n.dir)) {
            bail!(
                "--out {}: inside night {} of the history, whose files are sealed by {}. Fix: write the report elsewhere",
                out.display(),
                n.record.name,
                store::CHECKSUMS
            );
        }
    }
    let m = morning::build(config, &nights, baseline, acks);
    print!("{}", terminal_safe(&morning::terminal(&m)));
    if let Some(out) = &args.out {
        let html = morning::write(&m, out, Foreign::LeaveAlone).map_err(anyhow::Error::msg)?;
        println!("report: {}", html.display());
    }
    Ok(ExitCode::from(m.status.code()))
}

/// The nights of a history up to the one reported, oldest first: the newest night, or with
/// `date` the newest night of that date — a date without a night is an error naming the
/// nights nearby, never another night's report.
fn upto(history: &Path, date: Option<&str>) -> anyhow::Result<Vec<store::Night>> {
    let mut nights = store::load_history(history, 0).map_err(anyhow::Error::msg)?;
    if nights.is_empty() {
        bail!(
            "{}: no finished night. Fix: run `harness nightly CONFIG` first",
            history.display()
        );
    }
    if let Some(d) = date {
        let Some(last) = nights.iter().rposition(|n| n.record.date == d) else {
            let at = nights.partition_point(|n| n.record.date.as_str() < d);
            let nearby: Vec<&str> = nights[at.saturating_sub(3)..(at + 3).min(nights.len())]
                .iter()
                .map(|n| n.record.name.as_str())
                .collect();
            bail!(
                "--date {d}: no night of that date in {}. Nights nearby: {} ({} in the history, {} … {}). Fix: --date one of their dates",
                history.display(),
                nearby.join(", "),
                nights.len(),
                nights[0].record.date,
                nights[nights.len() - 1].record.date
            );
        };
        nights.truncate(last + 1);
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
    harness_core::nofollow::write_atomic(&path, (lines.join("\n") + "\n").as_bytes())
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
