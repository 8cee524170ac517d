//! `harness sweep GRID`: expands a grid file into resolved recipes (every point checked
//! before anything runs), runs the points not done yet through `harness run` (`--jobs N` at
//! once), keeps going past failures, and renders the ablation table into the sweep
//! directory (`sweeps/<grid>-<fp8>/`). `--emit slurm` writes a job array and a gather job
//! instead of running; `--report-only` renders what the run directories hold (the gather
//! job's command).
//!
//! Output goes through `outln!`, never `println!`: stdout closed early (`harness sweep
//! --dry-run GRID | head -1`) is an `io::Error` of kind `BrokenPipe`, which `cli::main`
//! turns into a quiet exit 0, where `println!` would panic (exit 101).

use anyhow::{bail, Context};
use clap::{Args, ValueEnum};
use harness_core::settings::Settings;
use harness_core::terminal::terminal_safe;
use harness_sweep::ledger::{Ledger, State};
use harness_sweep::report::SweepReport;
use harness_sweep::run::{Event, Only, RunOptions, RunSummary};
use harness_sweep::slurm::{ArrayTask, EmitRequest};
use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Instant;

/// `println!` that returns the write's error (`?`) instead of panicking on it.
macro_rules! outln {
    ($($arg:tt)*) => {
        writeln!(std::io::stdout().lock(), $($arg)*)?
    };
}

/// `print!` likewise.
macro_rules! out {
    ($($arg:tt)*) => {
        write!(std::io::stdout().lock(), $($arg)*)?
    };
}

#[derive(Debug, Args)]
pub struct SweepArgs {
    /// Grid file (YAML; see grids/)
    pub grid: PathBuf,
    /// Apply this profile of the grid (e.g. `paper`: the paper-scale budget)
    #[arg(long)]
    pub profile: Option<String>,
    /// Print every point, its run directory and whether it is done; run nothing
    #[arg(long)]
    pub dry_run: bool,
    /// Points run at once; the machine's threads are shared among them
    #[arg(long, default_value_t = 1, value_name = "N")]
    pub jobs: usize,
    /// Run only the points never finished (`missing`) or only those whose last attempt
    /// failed (`failed`); default: every point without all its results
    #[arg(long, value_enum, value_name = "WHICH")]
    pub only: Option<OnlyArg>,
    /// Stop launching points after this many failures
    #[arg(long, value_name = "N")]
    pub max_fails: Option<usize>,
    /// Stop at the first failure (the points running are interrupted)
    #[arg(long)]
    pub fail_fast: bool,
    /// Run nothing: render the ablation table from the run directories as they are
    #[arg(long)]
    pub report_only: bool,
    /// Write scripts for a cluster instead of running: `slurm` (needs `--out DIR`)
    #[arg(long, value_enum, value_name = "ENGINE")]
    pub emit: Option<EmitArg>,
    /// Folder of the emitted scripts: new, empty, or one harness emitted into before (its
    /// scripts are replaced; nothing else in it is touched)
    #[arg(long, value_name = "DIR")]
    pub out: Option<PathBuf>,
    /// With `--emit slurm`: write into a folder that holds other files too (only harness's
    /// own files are written; the others are left as they are, never replaced)
    #[arg(long)]
    pub force: bool,
}

#[derive(Debug, Clone, Copy, ValueEnum)]
pub enum OnlyArg {
    Missing,
    Failed,
}

#[derive(Debug, Clone, Copy, ValueEnum)]
pub enum EmitArg {
    Slurm,
}

/// `harness sweep`.
pub fn run(args: &SweepArgs, settings: &Settings) -> anyhow::Result<ExitCode> {
    let started = Instant::now();
    let grid = match harness_sweep::Grid::load(&args.grid, args.profile.as_deref()) {
        Ok(g) => g,
        Err(problems) => return invalid(&args.grid, &problems),
    };
    let sweep = match harness_sweep::plan(
        grid,
        &super::known()?,
        &settings.runs_dir,
        &settings.sweeps_dir,
    ) {
        Ok(s) => s,
        Err(problems) => return invalid(&args.grid, &problems),
    };
    let only = match args.only {
        None => Only::NotDone,
        Some(OnlyArg::Missing) => Only::Missing,
        Some(OnlyArg::Failed) => Only::Failed,
    };
    if args.jobs == 0 {
        bail!("--jobs 0: give at least 1");
    }
    let ledger = harness_sweep::run::current_ledger(&sweep)?;
    let selected = harness_sweep::run::to_run(&ledger, only);
    print_overview(&sweep, &ledger, &selected, only)?;
    if args.dry_run {
        print_dry_run(&sweep, &ledger, &selected)?;
        return Ok(ExitCode::SUCCESS);
    }
    if let Some(EmitArg::Slurm) = args.emit {
        return emit_slurm(args, &sweep, &selected);
    }
    if args.out.is_some() {
        bail!("--out names the folder of emitted scripts: use it with `--emit slurm`");
    }
    if args.force {
        bail!("--force lets `--emit slurm` write beside other files in its --out folder: use it with `--emit slurm`");
    }
    let dir = harness_sweep::run::SweepDir::open(&sweep)?;
    let (summary, failed_now) = if args.report_only {
        (None, 0)
    } else {
        let (summary, failed_now) = run_points(args, &sweep, &dir, only)?;
        (Some(summary), failed_now)
    };
    let ledger = harness_sweep::run::current_ledger(&sweep)?;
    ledger.write(&dir.path)?;
    let report = harness_sweep::report::render(&sweep, &ledger, &super::known()?)
        .with_context(|| format!("rendering the report of {}", sweep.dir.display()))?;
    out!("{}", terminal_safe(&report.terminal));
    for w in &report.warnings {
        harness_core::note!("warning: {w}");
    }
    print_results(&report, &ledger, summary.as_ref(), started)?;
    exit_code(args, summary.as_ref(), &ledger, failed_now)
}

/// The sweep's first lines: its points, how many are done and to run, and its directory.
fn print_overview(
    sweep: &harness_sweep::Sweep,
    ledger: &Ledger,
    selected: &[usize],
    only: Only,
) -> anyhow::Result<()> {
    outln!(
        "sweep {}: {} configurations × {} seed(s) = {} points; {} done, {} to run{}",
        sweep.grid.name,
        sweep.expansion.configs.len(),
        sweep.grid.file.seeds.len().max(1),
        sweep.points.len(),
        ledger
            .points
            .iter()
            .filter(|e| matches!(e.state, State::Done | State::Reused))
            .count(),
        selected.len(),
        match only {
            Only::NotDone => String::new(),
            Only::Missing => " (--only missing)".into(),
            Only::Failed => " (--only failed)".into(),
        }
    );
    outln!("sweep directory: {}", sweep.dir.display());
    Ok(())
}

/// `--dry-run`: every point, its state and run directory, and the command of each point
/// that would run.
fn print_dry_run(
    sweep: &harness_sweep::Sweep,
    ledger: &Ledger,
    selected: &[usize],
) -> anyhow::Result<()> {
    for (i, (p, e)) in sweep.points.iter().zip(&ledger.points).enumerate() {
        let mark = if selected.contains(&i) {
            "run "
        } else {
            "    "
        };
        outln!(
            "{mark}{:<11} {:<28} {}{}",
            e.state.name(),
            p.point.alias,
            p.run_dir.display(),
            if e.attempts > 0 {
                format!(" ({} attempt(s))", e.attempts)
            } else {
                String::new()
            }
        );
        if selected.contains(&i) {
            outln!("    harness {}", shell_words(&p.args));
        }
    }
    Ok(())
}

/// Runs the selected points through `harness run`, telling each start and end on stderr;
/// returns the run's summary and how many points failed in it.
fn run_points(
    args: &SweepArgs,
    sweep: &harness_sweep::Sweep,
    dir: &harness_sweep::run::SweepDir,
    only: Only,
) -> anyhow::Result<(RunSummary, usize)> {
    let threads = std::env::var("RAYON_NUM_THREADS")
        .ok()
        .and_then(|v| v.parse().ok())
        .filter(|n: &usize| *n > 0)
        .unwrap_or_else(|| std::thread::available_parallelism().map_or(1, |n| n.get()));
    let opts = RunOptions {
        exe: std::env::current_exe().context("locating the harness binary")?,
        jobs: args.jobs,
        only,
        max_fails: args.max_fails,
        fail_fast: args.fail_fast,
        threads,
    };
    let mut failed_now = 0;
    let (summary, _) = harness_sweep::run::run(sweep, dir, &opts, &mut |e| match e {
        Event::Start {
            alias,
            n,
            total,
            threads,
        } => harness_core::note!("[{n}/{total}] {alias}: started ({threads} thread(s))"),
        Event::Done { alias, seconds } => {
            harness_core::note!("{alias}: done in {seconds:.0} s")
        }
        Event::Failed { alias, error, log } => {
            failed_now += 1;
            harness_core::note!("FAILED {alias}: {error} (log: {})", log.display())
        }
        Event::Interrupted { alias } => harness_core::note!("{alias}: interrupted"),
        Event::Stopping { why } => harness_core::note!("stopping: {why}"),
    })?;
    Ok((summary, failed_now))
}

/// The closing lines: the points by state, this run's summary (when one ran) and where the
/// ablation table is.
fn print_results(
    report: &SweepReport,
    ledger: &Ledger,
    summary: Option<&RunSummary>,
    started: Instant,
) -> anyhow::Result<()> {
    let counts = ledger.counts();
    outln!(
        "\npoints: {}",
        counts
            .iter()
            .map(|(k, v)| format!("{v} {k}"))
            .collect::<Vec<_>>()
            .join(", ")
    );
    if let Some(s) = summary {
        outln!(
            "this run: {} started, {} done, {} failed, {} interrupted, {} already done; {:.0} s wall",
            s.started,
            s.done,
            s.failed.len(),
            s.interrupted,
            s.reused,
            started.elapsed().as_secs_f64()
        );
        if let Some(why) = &s.stopped {
            outln!(
                "stopped early ({why}): {} point(s) not started",
                s.not_started
            );
        }
        for (alias, error, log) in &s.failed {
            outln!("failed: {alias}: {error}\n        log: {}", log.display());
        }
    }
    outln!(
        "ablation table: {} of {} cells filled ({} not run yet, {} failed), {} charts in {}",
        report.filled,
        report.measured,
        report.not_run,
        report.failed,
        report.charts,
        report.out_dir.join("report.html").display()
    );
    Ok(())
}

/// The exit status: 130 when the run was interrupted, 1 when a point failed in this run or
/// not every point is done (saying how to continue), else 0.
fn exit_code(
    args: &SweepArgs,
    summary: Option<&RunSummary>,
    ledger: &Ledger,
    failed_now: usize,
) -> anyhow::Result<ExitCode> {
    let unfinished = ledger
        .points
        .iter()
        .any(|e| !matches!(e.state, State::Done | State::Reused));
    if summary.is_some_and(|s| {
        s.interrupted > 0
            && s.stopped
                .as_deref()
                .is_some_and(|w| w.starts_with("interrupted"))
    }) {
        return Ok(ExitCode::from(130));
    }
    if failed_now > 0 || unfinished {
        if unfinished {
            outln!(
                "not every point is done: `harness sweep {}` continues (finished points are not repeated)",
                args.grid.display()
            );
        }
        return Ok(ExitCode::from(1));
    }
    Ok(ExitCode::SUCCESS)
}

fn invalid(
    grid: &std::path::Path,
    problems: &[harness_recipe::Problem],
) -> anyhow::Result<ExitCode> {
    for p in problems {
        outln!("{p}");
    }
    outln!(
        "{}: {} problem(s); nothing was run",
        grid.display(),
        problems.len()
    );
    Ok(ExitCode::from(1))
}

/// Arguments as one shell line (quoted where needed), for `--dry-run`.
fn shell_words(args: &[String]) -> String {
    args.iter()
        .map(|a| {
            if !a.is_empty()
                && a.chars()
                    .all(|c| c.is_ascii_alphanumeric() || "-_./=:@,".contains(c))
            {
                a.clone()
            } else {
                format!("'{}'", a.replace('\'', "'\\''"))
            }
        })
        .collect::<Vec<_>>()
        .join(" ")
}

fn emit_slurm(
    args: &SweepArgs,
    sweep: &harness_sweep::Sweep,
    selected: &[usize],
) -> anyhow::Result<ExitCode> {
    let Some(out) = &args.out else {
        bail!("--emit slurm writes scripts into a folder: add `--out DIR`");
    };
    let exe = std::env::current_exe().context("locating the harness binary")?;
    let workdir = std::env::current_dir().context("reading the current directory")?;
    let tasks: Vec<ArrayTask> = selected
        .iter()
        .map(|&i| {
            let p = &sweep.points[i];
            ArrayTask {
                alias: p.point.alias.clone(),
                args: p.args.clone(),
            }
        })
        .collect();
    if tasks.is_empty() {
        outln!("every point is done: nothing to submit (`harness sweep {} --report-only` renders the table)", args.grid.display());
        return Ok(ExitCode::SUCCESS);
    }
    let grid_abs = std::path::absolute(&args.grid).context("resolving the grid path")?;
    let mut gather_args = vec!["sweep".to_string(), grid_abs.display().to_string()];
    if let Some(p) = &args.profile {
        gather_args.push("--profile".into());
        gather_args.push(p.clone());
    }
    gather_args.push("--report-only".into());
    let options = sweep.grid.file.slurm.clone().unwrap_or_default();
    let emitted = harness_sweep::slurm::emit(&EmitRequest {
        name: &sweep.grid.name,
        tasks: &tasks,
        options: &options,
        harness: &exe,
        workdir: &workdir,
        gather_args,
        out,
        force: args.force,
    })?;
    outln!(
        "{} array task(s) in {} array(s) (max_array_size {}), a gather job after them ({}):",
        tasks.len(),
        emitted.arrays,
        options.max_array_size,
        match options.gather_after {
            harness_sweep::slurm::GatherAfter::Ok => "afterok",
            harness_sweep::slurm::GatherAfter::Any => "afterany",
        }
    );
    for f in &emitted.files {
        outln!("  {}", f.display());
    }
    for f in &emitted.removed {
        outln!("  removed {} (of an earlier, larger emit)", f.display());
    }
    outln!("submit with: bash {}", emitted.submit.display());
    Ok(ExitCode::SUCCESS)
}
