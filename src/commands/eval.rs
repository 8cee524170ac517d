//! `harness eval --encoder ENC --bench NAMES`: one result file per benchmark and a summary.
//! Each benchmark's datasets are installed on first use; a failing benchmark is recorded in
//! its result file and the others go on (exit code 1 if any failed).

use clap::Args;
use harness_bench::registry::{Overrides, Registry};
use harness_bench::runner::{default_out_dir, evaluate, plan, summary_table};
use harness_core::device::Device;
use harness_core::settings::Settings;
use harness_core::terminal::terminal_safe;
use harness_embed::CachedEncoder;
use harness_encoders::open_encoder_on;
use std::path::PathBuf;
use std::process::ExitCode;

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
    /// Where model-based encoders compute: `cpu`, `cuda:N` (a build made with
    /// `--features cuda`) or `wgpu` (with `--features wgpu`); the classifiers stay on the CPU
    #[arg(long, default_value = "cpu")]
    pub device: String,
}

/// `harness eval`.
pub fn run(args: &EvalArgs, settings: &Settings) -> anyhow::Result<ExitCode> {
    let device = Device::parse_for_encoding(&args.device, &super::compiled())?;
    let registry = Registry::load()?;
    let mut entries: Vec<(String, Overrides)> = args
        .bench
        .split(',')
        .map(|s| s.trim().to_string())
        .filter(|s| !s.is_empty())
        .map(|s| (s, Overrides::default()))
        .collect();
    if entries.is_empty() {
        anyhow::bail!(
            "--bench {:?} names no benchmark, so nothing would be evaluated. Fix: name benchmarks or groups, comma-separated (`--bench stsb-test,senteval`, `--bench all`; `harness eval --help`)",
            args.bench
        );
    }
    // `--set BENCH.KEY=VALUE`: BENCH must be one of the requested names (or a member of
    // one of the requested groups).
    let selected = registry.expand(&entries.iter().map(|e| e.0.clone()).collect::<Vec<_>>())?;
    for raw in &args.sets {
        let (bench, param, value) = Overrides::parse_set(raw).map_err(anyhow::Error::msg)?;
        let members = registry.expand(std::slice::from_ref(&bench))?;
        if let Some(m) = members.iter().find(|m| !selected.contains(m)) {
            anyhow::bail!(
                "`--set {raw}`: benchmark `{m}` is not among those evaluated (--bench {}). Fix: add it to --bench",
                args.bench
            );
        }
        let mut o = Overrides::default();
        o.set(&param, value)
            .map_err(|e| anyhow::anyhow!("`--set {raw}`: {e}"))?;
        entries.push((bench, o));
    }
    let plan = plan(&registry, &entries)?;
    super::on_device(device, None, || {
        let inner = open_encoder_on(&args.encoder, settings, device)?;
        let encoder = CachedEncoder::new(inner, &settings.cache_dir);
        let out = args
            .out
            .clone()
            .unwrap_or_else(|| default_out_dir(settings, &encoder));
        let results = evaluate(&plan, &registry, &encoder, settings, args.seed, &out, false)?;
        Ok((results, out))
    })
    .and_then(|(results, out)| report(&results, &out))
}

/// Prints the summary of an evaluation; exit code 1 when a benchmark failed.
fn report(
    results: &[harness_bench::runner::BenchResult],
    out: &std::path::Path,
) -> anyhow::Result<ExitCode> {
    print!("{}", terminal_safe(&summary_table(results)));
    println!("results in {}", out.display());
    let failed = results.iter().any(|r| r.error.is_some());
    Ok(if failed {
        ExitCode::from(1)
    } else {
        ExitCode::SUCCESS
    })
}
