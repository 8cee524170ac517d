//! `harness report RUN_DIR...`: the paper tables, the published numbers next to the measured
//! ones (Markdown, HTML, CSV, terminal).

use clap::Args;
use harness_core::terminal::terminal_safe;
use harness_report::{default_out_dir, render_report, spec};
use std::path::PathBuf;
use std::process::ExitCode;

#[derive(Debug, Args)]
pub struct ReportArgs {
    /// Run directories (`runs/<recipe>-<fp8>`) or result directories (`harness eval
    /// --out`); `NAME=DIR` names the system a directory fills
    pub run_dirs: Vec<PathBuf>,
    /// Render only these tables (repeatable or comma-separated; default: every table, see
    /// `--list`)
    #[arg(long = "table", value_name = "NAME", value_delimiter = ',')]
    pub tables: Vec<String>,
    /// Output directory (default: `RUN_DIR/report` for a single run directory, else
    /// `./report`)
    #[arg(long, value_name = "DIR")]
    pub out: Option<PathBuf>,
    /// Do not print the tables in the terminal
    #[arg(long)]
    pub quiet: bool,
    /// List the table specifications and exit
    #[arg(long)]
    pub list: bool,
    /// A generated table instead of the paper tables: one row per system of the given
    /// directories, one column per `BENCH[:FIELD[:higher|lower]]` (repeatable; e.g.
    /// `tatoeba:scores.summary.average:lower`; FIELD defaults to the headline score)
    #[arg(long = "metric", value_name = "BENCH[:FIELD[:DIR]]")]
    pub metrics: Vec<String>,
}

/// `harness report`.
pub fn run(args: &ReportArgs) -> anyhow::Result<ExitCode> {
    if args.list {
        for s in spec::load()? {
            println!("{:<34} {} — {} ({})", s.name, s.paper, s.table, s.title);
        }
        return Ok(ExitCode::SUCCESS);
    }
    if args.run_dirs.is_empty() {
        anyhow::bail!("give at least one run or results directory: `harness report runs/eval-hashed-ngrams-*/results` (or `--list` for the tables)");
    }
    let out = args
        .out
        .clone()
        .unwrap_or_else(|| default_out_dir(&args.run_dirs));
    let summary = if args.metrics.is_empty() {
        render_report(&args.run_dirs, &args.tables, &out, &super::known()?)?
    } else {
        if !args.tables.is_empty() {
            anyhow::bail!("--metric renders a generated table; --table selects paper tables: give one or the other");
        }
        let metrics = args
            .metrics
            .iter()
            .map(|m| harness_report::ablation::Metric::parse(m))
            .collect::<Result<Vec<_>, _>>()
            .map_err(|e| anyhow::anyhow!("--metric {e}"))?;
        let registry = harness_bench::registry::Registry::load()?;
        for (m, arg) in metrics.iter().zip(&args.metrics) {
            m.check(&registry.protocols())
                .map_err(|e| anyhow::anyhow!("--metric `{arg}`: {e}"))?;
        }
        harness_report::render_generated(&args.run_dirs, &metrics, &out, &super::known()?)?
    };
    if !args.quiet {
        print!("{}", terminal_safe(&summary.terminal));
    }
    for w in &summary.warnings {
        harness_core::note!("warning: {w}");
    }
    println!(
        "\n{} tables, systems: {}; measured cells: {} filled, {} n/a, {} not run yet, {} failed",
        summary.tables,
        terminal_safe(&summary.systems.join(", ")),
        summary.filled,
        summary.na,
        summary.not_run,
        summary.failed
    );
    println!(
        "report in {}: report.md, report.html, cells.csv, tables/*.csv, charts/*.svg",
        summary.out_dir.display()
    );
    Ok(ExitCode::SUCCESS)
}
