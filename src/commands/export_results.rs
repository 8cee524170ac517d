//! `harness export-results RUN_DIR --format mteb --out DIR`: a run's benchmark results in
//! another tool's result-file layout. `mteb`: MTEB's (`DIR/<model>/<revision>/<Task>.json` and
//! `model_meta.json`, read by `mteb.ResultCache(...).load_results()`), for the benchmarks that
//! have an MTEB counterpart; the mapping, the metrics and what is left out are documented in
//! `crates/report/src/mteb/mod.rs`.

use anyhow::Context;
use clap::{Args, ValueEnum};
use harness_report::mteb::{self, ExportOptions};
use std::path::PathBuf;
use std::process::ExitCode;

#[derive(Debug, Args)]
pub struct ExportResultsArgs {
    /// Run directory (`runs/<recipe>-<fingerprint8>`) or result directory (`harness eval
    /// --out`)
    pub run: PathBuf,
    /// Result-file layout to write
    #[arg(long, value_enum)]
    pub format: ResultsFormat,
    /// Output directory: new, empty, an earlier export, or an MTEB results folder (files
    /// are written beside what is there; a file in the way that this command did not write
    /// is refused, and nothing is deleted)
    #[arg(long, value_name = "DIR")]
    pub out: PathBuf,
    /// Model name in MTEB's `organization/name` form (default: `harness/<recipe>`, with
    /// `-<profile>` for a profile, or `harness/<encoder>` for a result directory)
    #[arg(long, value_name = "ORG/NAME")]
    pub model_name: Option<String>,
}

/// The layouts `--format` accepts.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum ResultsFormat {
    /// MTEB's result files (TaskResult schema of mteb 2.26.24)
    Mteb,
}

/// `harness export-results`.
pub fn run(args: &ExportResultsArgs) -> anyhow::Result<ExitCode> {
    match args.format {
        ResultsFormat::Mteb => mteb_export(args),
    }
}

fn mteb_export(args: &ExportResultsArgs) -> anyhow::Result<ExitCode> {
    let opts = ExportOptions {
        model_name: args.model_name.clone(),
    };
    let x = mteb::export(&args.run, &args.out, &opts, &super::known()?).with_context(|| {
        format!(
            "exporting {} as MTEB results{}",
            args.run.display(),
            if args.model_name.is_some() {
                " (--model-name)"
            } else {
                ""
            }
        )
    })?;
    for n in &x.notes {
        harness_core::note!("note: {n}");
    }
    println!(
        "model {} revision {}: {} MTEB task files in {}",
        x.model_name,
        x.revision,
        x.tasks.len(),
        x.model_dir.display()
    );
    for t in &x.tasks {
        let scores: Vec<String> = t
            .main_scores
            .iter()
            .map(|(split, subsets)| {
                let mean = subsets.values().sum::<f64>() / subsets.len() as f64;
                if subsets.len() == 1 {
                    format!("{split} {mean:.4}")
                } else {
                    format!("{split} {mean:.4} (mean of {} subsets)", subsets.len())
                }
            })
            .collect();
        println!(
            "  {:<28} main score {}  from {}",
            t.task,
            scores.join(", "),
            t.benchmarks.join(", ")
        );
    }
    if !x.skipped.is_empty() {
        println!(
            "skipped (no MTEB counterpart, or not the pairs MTEB scores): {}",
            x.skipped
                .iter()
                .map(|(b, why)| format!("{b} ({why})"))
                .collect::<Vec<_>>()
                .join("; ")
        );
    }
    Ok(ExitCode::SUCCESS)
}
