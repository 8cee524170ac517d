//! `harness eval`: runs benchmarks against one encoder and writes one result file per
//! benchmark. The encoder is wrapped in the shared embedding cache; each benchmark's dataset
//! is installed on first use; a failing benchmark is recorded in its result file and the
//! run goes on with the others (the exit code says whether any failed).

use super::cache::{CacheStats, CachedEncoder};
use super::encoder::{open_encoder, Encoder};
use super::error::BenchError;
use super::protocols::{protocol, Context, Outcome};
use super::registry::Registry;
use crate::cli::EvalArgs;
use crate::data::fetch::ensure_dataset;
use crate::data::lock::Lock;
use crate::fsutil::write_atomic;
use crate::settings::Settings;
use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Instant;

/// The result file of one benchmark (`<out>/<benchmark>.json`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct BenchResult {
    /// Benchmark name (`benchmarks/<name>.yaml`).
    pub benchmark: String,
    /// Protocol that produced it.
    pub protocol: String,
    /// Dataset it ran on (`datasets.lock` name).
    pub dataset: String,
    /// Headline metric's name; `None` when the benchmark failed.
    pub main_metric: Option<String>,
    /// Headline number; `None` when the benchmark failed.
    pub main_score: Option<f64>,
    /// Every sub-score.
    pub scores: serde_json::Value,
    /// Protocol parameters as used.
    pub protocol_params: serde_json::Value,
    /// Caveats (stand-in data, missing splits).
    pub notes: Vec<String>,
    /// sha256 of the `datasets.lock` this binary was built with.
    pub datasets: String,
    /// The encoder measured.
    pub encoder: EncoderInfo,
    /// Root seed of the benchmark's random choices.
    pub seed: u64,
    /// Wall time of the benchmark, seconds.
    pub seconds: f64,
    /// Embedding-cache lookups during this benchmark.
    pub cache: CacheCounts,
    /// harness version that wrote the file.
    pub harness_version: String,
    /// Why the benchmark failed, when it did.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

/// Identity of the encoder in a result file.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct EncoderInfo {
    pub name: String,
    pub fingerprint: String,
    pub dim: usize,
}

/// Cache hits and misses (sentences found in / added to the embedding cache).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct CacheCounts {
    pub hits: u64,
    pub misses: u64,
}

impl CacheCounts {
    fn since(now: CacheStats, before: CacheStats) -> Self {
        CacheCounts {
            hits: now.hits - before.hits,
            misses: now.misses - before.misses,
        }
    }
}

/// Runs one benchmark against an encoder; never fails: errors land in the result.
pub fn run_benchmark(
    name: &str,
    registry: &Registry,
    encoder: &CachedEncoder<Box<dyn Encoder>>,
    settings: &Settings,
    seed: u64,
) -> BenchResult {
    let start = Instant::now();
    let before = encoder.stats();
    let bench = registry.get(name);
    let outcome = (|| -> Result<Outcome, BenchError> {
        let bench = bench.ok_or_else(|| BenchError::Protocol {
            benchmark: name.to_string(),
            detail: "no declaration in benchmarks/".into(),
        })?;
        let run = protocol(&bench.protocol).ok_or_else(|| BenchError::Protocol {
            benchmark: name.to_string(),
            detail: format!(
                "protocol `{}` is not implemented in this build",
                bench.protocol
            ),
        })?;
        let dir = ensure_dataset(settings, &bench.dataset)?;
        run(&Context {
            benchmark: bench,
            dataset_dir: &dir,
            encoder,
            seed,
        })
    })();
    let seconds = start.elapsed().as_secs_f64();
    let (main_metric, main_score, scores, protocol_params, notes, error) = match outcome {
        Ok(o) => (
            Some(o.main_metric),
            Some(o.main_score),
            o.scores,
            o.params,
            o.notes,
            None,
        ),
        Err(e) => (
            None,
            None,
            serde_json::Value::Null,
            serde_json::Value::Null,
            Vec::new(),
            Some(e.to_string()),
        ),
    };
    BenchResult {
        benchmark: name.to_string(),
        protocol: bench.map_or(String::new(), |b| b.protocol.clone()),
        dataset: bench.map_or(String::new(), |b| b.dataset.clone()),
        main_metric,
        main_score,
        scores,
        protocol_params,
        notes,
        datasets: Lock::embedded_digest(),
        encoder: EncoderInfo {
            name: encoder.name().to_string(),
            fingerprint: encoder.fingerprint(),
            dim: encoder.dim(),
        },
        seed,
        seconds,
        cache: CacheCounts::since(encoder.stats(), before),
        harness_version: env!("CARGO_PKG_VERSION").to_string(),
        error,
    }
}

/// Writes a result file atomically.
pub fn write_result(dir: &Path, result: &BenchResult) -> Result<PathBuf, BenchError> {
    let path = dir.join(format!("{}.json", result.benchmark));
    let mut text = serde_json::to_string_pretty(result).map_err(|e| BenchError::Protocol {
        benchmark: result.benchmark.clone(),
        detail: format!("serialising the result: {e}"),
    })?;
    text.push('\n');
    write_atomic(&path, text.as_bytes()).map_err(|e| BenchError::io(&path, e))?;
    Ok(path)
}

/// Reads a result file.
pub fn read_result(path: &Path) -> Result<BenchResult, BenchError> {
    let text = std::fs::read_to_string(path).map_err(|e| BenchError::io(path, e))?;
    serde_json::from_str(&text).map_err(|e| BenchError::Format {
        path: path.to_path_buf(),
        detail: format!("not a harness result file ({e})"),
        fix: "delete it and re-run `harness eval`".into(),
    })
}

/// The default output directory of `harness eval`: `<runs_dir>/eval-<encoder>-<fp8>/results`.
pub fn default_out_dir(settings: &Settings, encoder: &dyn Encoder) -> PathBuf {
    let fp = crate::fsutil::sha256_hex(encoder.fingerprint().as_bytes());
    let safe: String = encoder
        .name()
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '-' || c == '_' || c == '.' {
                c
            } else {
                '_'
            }
        })
        .collect();
    settings
        .runs_dir
        .join(format!("eval-{safe}-{}", &fp[..8]))
        .join("results")
}

/// Formats the summary table printed after a run.
pub fn summary_table(results: &[BenchResult]) -> String {
    let mut out = format!(
        "{:<18} {:<24} {:>10} {:>9} {:>10} {:>10}\n",
        "benchmark", "metric", "score", "seconds", "cache hit", "cache miss"
    );
    for r in results {
        let (metric, score) = match (&r.main_metric, r.main_score) {
            (Some(m), Some(s)) => (m.clone(), format!("{s:.2}")),
            _ => ("FAILED".to_string(), "-".to_string()),
        };
        out.push_str(&format!(
            "{:<18} {:<24} {:>10} {:>9.1} {:>10} {:>10}\n",
            r.benchmark, metric, score, r.seconds, r.cache.hits, r.cache.misses
        ));
    }
    let hits: u64 = results.iter().map(|r| r.cache.hits).sum();
    let misses: u64 = results.iter().map(|r| r.cache.misses).sum();
    let secs: f64 = results.iter().map(|r| r.seconds).sum();
    out.push_str(&format!(
        "{} benchmarks, {} failed, {secs:.1} s; embedding cache: {hits} hits, {misses} misses\n",
        results.len(),
        results.iter().filter(|r| r.error.is_some()).count()
    ));
    out
}

/// `harness eval`.
pub fn eval_command(args: &EvalArgs, settings: &Settings) -> anyhow::Result<ExitCode> {
    let registry = Registry::embedded()?;
    let requested: Vec<String> = args
        .bench
        .split(',')
        .map(|s| s.trim().to_string())
        .filter(|s| !s.is_empty())
        .collect();
    let names = registry.expand(&requested)?;
    let inner = open_encoder(&args.encoder, settings)?;
    let encoder = CachedEncoder::new(inner, &settings.cache_dir);
    let out = args
        .out
        .clone()
        .unwrap_or_else(|| default_out_dir(settings, &encoder));
    std::fs::create_dir_all(&out).map_err(|e| BenchError::io(&out, e))?;
    let progress = indicatif::ProgressBar::new(names.len() as u64).with_style(
        indicatif::ProgressStyle::with_template(
            "{prefix} [{bar:30}] {pos}/{len} {msg} ({elapsed})",
        )
        .unwrap_or_else(|_| indicatif::ProgressStyle::default_bar()),
    );
    progress.set_prefix("eval");
    let mut results = Vec::with_capacity(names.len());
    for name in &names {
        progress.set_message(name.clone());
        let result = run_benchmark(name, &registry, &encoder, settings, args.seed);
        if let Some(e) = &result.error {
            progress.suspend(|| eprintln!("error: {e}"));
        }
        write_result(&out, &result)?;
        results.push(result);
        progress.inc(1);
    }
    progress.finish_and_clear();
    print!("{}", summary_table(&results));
    println!("results in {}", out.display());
    let failed = results.iter().any(|r| r.error.is_some());
    Ok(if failed {
        ExitCode::from(1)
    } else {
        ExitCode::SUCCESS
    })
}
