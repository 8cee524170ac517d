//! `harness report RUN_DIR...`: the paper tables, the published numbers next to the measured
//! ones (Markdown, HTML, CSV, terminal).

use clap::Args;
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
}

/// `harness report`.
pub fn run(args: &ReportArgs) -> anyhow::Result<ExitCode> {
    if args.list {
        for s in spec::embedded()? {
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
    let summary = render_report(&args.run_dirs, &args.tables, &out)?;
    if !args.quiet {
        print!("{}", summary.terminal);
    }
    for w in &summary.warnings {
        harness_core::note!("warning: {w}");
    }
    println!(
        "\n{} tables, systems: {}; measured cells: {} filled, {} n/a, {} not run yet, {} failed",
        summary.tables,
        summary.systems.join(", "),
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
