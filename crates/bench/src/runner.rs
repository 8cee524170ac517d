//! `harness eval`: runs benchmarks against one encoder and writes one result file per
//! benchmark. The encoder is wrapped in the shared embedding cache; each benchmark's dataset
//! is installed on first use; a failing benchmark is recorded in its result file and the
//! run goes on with the others (the exit code says whether any failed).

use super::benchmark::{Benchmark, Overrides};
use super::error::BenchError;
use super::items::{write_items, Items, ItemsRef};
use super::protocols::{self, Context, Outcome};
use super::registry::Registry;
use harness_core::settings::Settings;
use harness_data::fetch::ensure_dataset;
use harness_data::lock::Lock;
use harness_embed::cache::{CacheStats, CachedEncoder};
use harness_embed::Encoder;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
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
    /// Those seconds by part ([`crate::timing`]): `encoder` (the model's own work),
    /// `embedding cache` (lookups and writes), the protocol's named parts, and `other`.
    /// Empty in files written before harness recorded them.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub seconds_by_part: BTreeMap<String, f64>,
    /// Embedding-cache lookups during this benchmark.
    pub cache: CacheCounts,
    /// harness version that wrote the file.
    pub harness_version: String,
    /// Overrides of the declaration applied in this run (a recipe's `evaluate:` entry or
    /// `--set BENCH.KEY=VALUE`); absent when none.
    #[serde(default, skip_serializing_if = "Overrides::is_empty")]
    pub overrides: Overrides,
    /// Identity of the declaration as run ([`Benchmark::identity`]): a kept result is
    /// reused only while it is unchanged.
    #[serde(default)]
    pub declaration: String,
    /// Why the benchmark failed, when it did.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// The per-item outcomes' sidecar beside this file (`<bench>.items.json.gz`), with its
    /// sha256; absent for a protocol without item-level outcomes (and in files written
    /// before harness recorded them).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub items: Option<ItemsRef>,
    /// The per-item outcomes themselves, between measuring and [`write_result`] (which
    /// writes them to the sidecar and fills [`BenchResult::items`]).
    #[serde(skip)]
    pub outcomes: Option<Items>,
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

/// Installs and verifies every dataset a benchmark reads (its own and its protocol's side
/// datasets, [`super::protocols::datasets_read`]) before anything runs: name → folder.
pub fn ensure_benchmark_data(
    bench: &Benchmark,
    settings: &Settings,
) -> Result<BTreeMap<String, PathBuf>, BenchError> {
    let mut dirs = BTreeMap::new();
    for d in protocols::datasets_read(bench)? {
        let dir = ensure_dataset(settings, &d)?;
        dirs.insert(d, dir);
    }
    Ok(dirs)
}

/// Runs one benchmark (with `overrides` applied to its declaration) against an encoder;
/// never fails: errors land in the result.
pub fn run_benchmark(
    name: &str,
    overrides: &Overrides,
    registry: &Registry,
    encoder: &CachedEncoder<Box<dyn Encoder>>,
    settings: &Settings,
    seed: u64,
) -> BenchResult {
    let start = Instant::now();
    let before = encoder.stats();
    let mut named_parts = BTreeMap::new();
    let bench = registry.get(name).map(|b| b.with(overrides));
    let outcome = (|| -> Result<Outcome, BenchError> {
        let bench = bench.as_ref().ok_or_else(|| BenchError::Protocol {
            benchmark: name.to_string(),
            detail: "no declaration in benchmarks/".into(),
        })?;
        let protocol = protocols::find(&bench.protocol).ok_or_else(|| BenchError::Protocol {
            benchmark: name.to_string(),
            detail: protocols::not_implemented(&bench.protocol),
        })?;
        (protocol.check_params)(bench).map_err(|detail| BenchError::Params {
            benchmark: name.to_string(),
            detail,
        })?;
        let mut dirs = ensure_benchmark_data(bench, settings)?;
        let own = dirs.remove(&bench.dataset).unwrap_or_default();
        let (outcome, parts) = crate::timing::collect(|| {
            (protocol.run)(&Context {
                benchmark: bench,
                dataset_dir: &own,
                side: &dirs,
                encoder,
                seed,
            })
        });
        named_parts = parts;
        let outcome = outcome?;
        // The scores are the protocol's typed struct, whole (every test build checks it on
        // every benchmark it runs): a reader that deserialises them loses nothing.
        debug_assert_eq!(
            (protocol.scores.reread)(&outcome.scores).as_ref(),
            Ok(&outcome.scores),
            "the scores of `{name}` are not protocol `{}`'s struct",
            bench.protocol
        );
        Ok(outcome)
    })();
    let seconds = start.elapsed().as_secs_f64();
    let seconds_by_part = by_part(seconds, named_parts, encoder.stats(), before);
    let (main_metric, main_score, scores, protocol_params, notes, error, outcomes) = match outcome {
        Ok(o) => (
            Some(o.main_metric),
            Some(o.main_score),
            o.scores,
            o.params,
            o.notes,
            None,
            o.items,
        ),
        Err(e) => (
            None,
            None,
            serde_json::Value::Null,
            serde_json::Value::Null,
            Vec::new(),
            Some(e.to_string()),
            None,
        ),
    };
    BenchResult {
        benchmark: name.to_string(),
        protocol: bench.as_ref().map_or(String::new(), |b| b.protocol.clone()),
        dataset: bench.as_ref().map_or(String::new(), |b| b.dataset.clone()),
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
        seconds_by_part,
        cache: CacheCounts::since(encoder.stats(), before),
        harness_version: harness_core::VERSION.to_string(),
        overrides: overrides.clone(),
        declaration: bench.as_ref().map_or(String::new(), Benchmark::identity),
        error,
        items: None,
        outcomes,
    }
}

/// A benchmark's `seconds` by part: the encoder's and the cache's clocks between `before`
/// and `now`, the protocol's `named` parts, and the rest as `other` (never below zero: the
/// clocks are read at slightly different moments).
fn by_part(
    seconds: f64,
    named: BTreeMap<String, f64>,
    now: harness_embed::cache::CacheStats,
    before: harness_embed::cache::CacheStats,
) -> BTreeMap<String, f64> {
    let secs = |nanos: u64| nanos as f64 / 1e9;
    let encoder = secs(now.encoder_nanos - before.encoder_nanos);
    let cache = (secs(now.embed_nanos - before.embed_nanos) - encoder).max(0.0);
    let mut parts = named;
    parts.insert("encoder".into(), encoder);
    parts.insert("embedding cache".into(), cache);
    let claimed: f64 = parts.values().sum();
    parts.insert("other".into(), (seconds - claimed).max(0.0));
    parts
}

/// Writes a result file atomically, its per-item outcomes first (the sidecar, whose sha256
/// the result then records). An existing file at that place is replaced only when it is a
/// harness result file: a foreign file of the same name is refused, never overwritten.
pub fn write_result(dir: &Path, result: &BenchResult) -> Result<PathBuf, BenchError> {
    let path = dir.join(format!("{}.json", result.benchmark));
    if path.exists() {
        if let Err(e) = read_result(&path) {
            return Err(BenchError::format(
                path.clone(),
                format!(
                    "a file harness did not write is in the way of the result of `{}` ({e}); it was left as it is",
                    result.benchmark
                ),
                "move it elsewhere, or write the results into another directory (--out DIR)",
            ));
        }
    }
    let mut result = result.clone();
    if let Some(items) = result.outcomes.take() {
        let sidecar = dir.join(super::items::items_file_name(&result.benchmark));
        if sidecar.exists() && !super::items::is_items_file(&sidecar) {
            return Err(BenchError::format(
                sidecar,
                "a file harness did not write is in the way of the per-item outcomes; it was \
                 left as it is",
                "move it elsewhere, or write the results into another directory (--out DIR)",
            ));
        }
        result.items = Some(write_items(dir, &result.benchmark, &items)?);
    }
    let result = &result;
    let mut text = serde_json::to_string_pretty(result).map_err(|e| BenchError::Protocol {
        benchmark: result.benchmark.clone(),
        detail: format!("serialising the result: {e}"),
    })?;
    text.push('\n');
    crate::results_folder::write_below_parent(dir, &path, text.as_bytes())
        .map_err(|e| BenchError::io(&path, e))?;
    Ok(path)
}

/// Reads a result file.
pub fn read_result(path: &Path) -> Result<BenchResult, BenchError> {
    let text = std::fs::read_to_string(path).map_err(|e| BenchError::io(path, e))?;
    serde_json::from_str(&text).map_err(|e| {
        BenchError::format(
            path.to_path_buf(),
            format!("not a harness result file ({e})"),
            "delete it and re-run `harness eval`",
        )
    })
}

/// The default output directory of `harness eval`: `<runs_dir>/eval-<encoder>-<fp8>/results`.
pub fn default_out_dir(settings: &Settings, encoder: &dyn Encoder) -> PathBuf {
    let fp = harness_core::fsutil::sha256_hex(encoder.fingerprint().as_bytes());
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

/// What to evaluate: benchmark names (groups expanded), each with the overrides of its
/// declaration.
pub type Plan = Vec<(String, Overrides)>;

/// Expands names with overrides into a [`Plan`] and checks every overridden declaration
/// before anything runs (a misspelt parameter fails here, not after an hour of work).
pub fn plan(registry: &Registry, entries: &[(String, Overrides)]) -> Result<Plan, BenchError> {
    let plan = registry
        .expand_with(entries)
        .map_err(|e| BenchError::Protocol {
            benchmark: String::new(),
            detail: e.to_string(),
        })?;
    for (name, overrides) in &plan {
        if overrides.is_empty() {
            continue;
        }
        if let Some(b) = registry.get(name) {
            protocols::check_params(&b.with(overrides)).map_err(|detail| BenchError::Params {
                benchmark: name.clone(),
                detail,
            })?;
        }
    }
    Ok(plan)
}

/// Runs every benchmark of `plan` into `out` (one result file each, written as soon as it
/// is done) and returns the results in order. With `keep`, a result already in `out` for
/// the same encoder, seed, datasets and declaration is reused instead of recomputed (the
/// folder is a run's own: results of its earlier checkpoints are replaced); without, `out`
/// may hold no other encoder's results. A failing benchmark is recorded and the others go
/// on.
pub fn evaluate(
    plan: &Plan,
    registry: &Registry,
    encoder: &CachedEncoder<Box<dyn Encoder>>,
    settings: &Settings,
    seed: u64,
    out: &Path,
    keep: bool,
) -> Result<Vec<BenchResult>, BenchError> {
    let fingerprint = encoder.fingerprint();
    check_results_dir(plan, out, (!keep).then_some(fingerprint.as_str()))?;
    crate::results_folder::results_folder(out).map_err(|e| BenchError::io(out, e))?;
    // One evaluation at a time per folder: two at once (of two encoders, say) would both
    // pass the check above and leave a folder of mixed results. Checked again once held.
    let _lock = harness_core::rundir::RunLock::acquire(out).map_err(|e| match e {
        harness_core::rundir::RunDirError::Busy { lock, pid } => BenchError::format(
            lock,
            format!(
                "another harness process (pid {}) is evaluating into this folder",
                pid.map_or("unknown".into(), |p| p.to_string())
            ),
            "wait for it to finish, or give this evaluation another --out",
        ),
        harness_core::rundir::RunDirError::Io { path, source } => {
            BenchError::io(&path, harness_core::fsutil::disk_full(source, out))
        }
        other => BenchError::format(out, other.to_string(), "give this evaluation another --out"),
    })?;
    check_results_dir(plan, out, (!keep).then_some(fingerprint.as_str()))?;
    let progress = harness_core::progress::bar(
        plan.len() as u64,
        "evaluate [{bar:30}] {pos}/{len} {msg} ({elapsed})",
    );
    // A benchmark can run for minutes (XNLI's classifier): tick so that the elapsed time
    // moves on a terminal and a log gets its periodic line meanwhile.
    progress.enable_steady_tick(std::time::Duration::from_secs(1));
    let mut results = Vec::with_capacity(plan.len());
    for (name, overrides) in plan {
        let path = out.join(format!("{name}.json"));
        if keep {
            let identity = registry.get(name).map(|b| b.with(overrides).identity());
            if let Ok(previous) = read_result(&path) {
                if previous.error.is_none()
                    && previous.encoder.fingerprint == fingerprint
                    && previous.seed == seed
                    && previous.datasets == Lock::embedded_digest()
                    && Some(&previous.declaration) == identity.as_ref()
                {
                    harness_core::note!("{name}: kept {}", path.display());
                    results.push(previous);
                    progress.inc(1);
                    continue;
                }
            }
        }
        progress.set_message(name.clone());
        let result = run_benchmark(name, overrides, registry, encoder, settings, seed);
        if let Some(e) = &result.error {
            harness_core::note!("error: {e}");
        }
        write_result(out, &result)?;
        results.push(result);
        progress.inc(1);
    }
    progress.finish_and_clear();
    Ok(results)
}

/// A results folder holds one encoder's results: refuses, before anything runs, a folder
/// holding result files of an encoder other than `fingerprint`'s (when given) (two evaluations into one `--out` would mix
/// their files, the last writer winning per benchmark), or a file that is not a harness
/// result where one of this evaluation's goes.
fn check_results_dir(plan: &Plan, out: &Path, fingerprint: Option<&str>) -> Result<(), BenchError> {
    if out.exists() && !out.is_dir() {
        return Err(BenchError::format(
            out,
            "is a file, not a folder for the results",
            "give --out a new or existing directory",
        ));
    }
    let entries = match fingerprint {
        Some(_) => std::fs::read_dir(out)
            .into_iter()
            .flatten()
            .flatten()
            .collect(),
        None => Vec::new(),
    };
    for entry in entries {
        let path = entry.path();
        if path.extension().and_then(|e| e.to_str()) != Some("json") {
            continue;
        }
        if let Ok(previous) = read_result(&path) {
            if Some(previous.encoder.fingerprint.as_str()) != fingerprint {
                return Err(BenchError::format(
                    path,
                    format!(
                        "this folder holds results of another encoder (`{}`); one folder holds one encoder's results",
                        previous.encoder.name
                    ),
                    "give this evaluation another --out",
                ));
            }
        }
    }
    for (name, _) in plan {
        let path = out.join(format!("{name}.json"));
        if path.exists() && read_result(&path).is_err() {
            return Err(BenchError::format(
                path,
                "a file harness did not write is where this benchmark's result goes; it was left as it is",
                "move it, or give this evaluation another --out",
            ));
        }
    }
    Ok(())
}

/// A recipe's `evaluate:` entries as benchmark names with the overrides of their
/// declarations (the input of [`plan`]).
pub fn entries(recipe: &harness_recipe::Recipe) -> Vec<(String, Overrides)> {
    recipe
        .evaluate
        .iter()
        .map(|e| {
            (
                e.name.clone(),
                Overrides {
                    params: e.params.clone(),
                    languages: e.languages.clone(),
                },
            )
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::protocols::fake_encoder::HashEncoder;

    /// Overrides that make every declared benchmark cheap (few epochs, few languages): the
    /// protocols still open every file they would open in a full run.
    pub(crate) const CHEAP: &[(&str, &str)] = &[
        (
            "xnli",
            "{params: {epochs: 1, train_fraction: 0.02, eval_limit: 40}, languages: [en, de]}",
        ),
        // The same classifier as xnli, 200 epochs by default (six minutes of this test).
        (
            "xnli-dev",
            "{params: {epochs: 1, train_fraction: 0.02, eval_limit: 40}, languages: [en, de]}",
        ),
        ("sib200", "{params: {epochs: 1, languages: [en, de]}}"),
        (
            "sentiment",
            "{params: {epochs: 1, eval_limit: 40, few_shot: [1.0]}}",
        ),
        ("tatoeba", "{languages: [deu, fra]}"),
        ("flores200", "{languages: [eng_Latn, deu_Latn]}"),
        (
            "eigen-similarity",
            "{params: {samples: 3}, languages: [eng_Latn-fra_Latn]}",
        ),
        (
            "retrieval-p1",
            "{params: {distractors: 10}, languages: [deu-eng]}",
        ),
        (
            "stsb-multi",
            "{languages: [de, en], params: {cross_lingual: [en-de]}}",
        ),
    ];

    fn cheap(name: &str, protocol: &str) -> Overrides {
        let mut o: Overrides = CHEAP
            .iter()
            .find(|(n, _)| *n == name)
            .map(|(_, y)| serde_yaml::from_str(y).unwrap())
            .unwrap_or_default();
        if protocol == "senteval-classification" {
            o.params.insert("kfold".into(), 2.into());
            o.params.insert("max_epoch".into(), 2.into());
        }
        o
    }

    /// Item 1 of the fresh-machine issue: every benchmark, run against an empty data
    /// directory, installs every dataset it reads before its protocol starts, and reads
    /// nothing else (its protocol sees only the folders the runner ensured; any other
    /// dataset would be missing from this data directory and fail the run).
    #[test]
    fn every_benchmark_fetches_everything_it_reads_into_an_empty_data_directory() {
        let shared = harness_core::shared_datasets_dir();
        assert!(shared.is_dir(), "{} missing", shared.display());
        let registry = Registry::load().unwrap();
        let cache = tempfile::tempdir().unwrap();
        let boxed: Box<dyn Encoder> = Box::new(HashEncoder);
        let encoder = CachedEncoder::new(boxed, cache.path());
        for name in registry.names() {
            let data = tempfile::tempdir().unwrap();
            let settings = Settings {
                data_dir: data.path().to_path_buf(),
                mirrors: vec![shared.display().to_string()],
                cache_dir: cache.path().to_path_buf(),
                ..Settings::default()
            };
            let bench = registry.get(name).unwrap();
            let overrides = cheap(name, &bench.protocol);
            let declared = crate::protocols::datasets_read(&bench.with(&overrides)).unwrap();
            let r = run_benchmark(name, &overrides, &registry, &encoder, &settings, 1);
            assert!(r.error.is_none(), "{name}: {:?}", r.error);
            assert!(
                r.main_score.is_some_and(f64::is_finite),
                "{name}: {:?}",
                r.main_score
            );
            let mut installed: Vec<String> = std::fs::read_dir(data.path())
                .unwrap()
                .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
                .filter(|n| n != ".stamps")
                .collect();
            installed.sort();
            let mut want = declared.clone();
            want.sort();
            assert_eq!(installed, want, "{name}: installed datasets");
            assert_eq!(r.overrides, overrides, "{name}: overrides recorded");
        }
    }

    #[test]
    fn kept_results_follow_the_declaration_and_foreign_files_are_not_overwritten() {
        let shared = harness_core::shared_datasets_dir();
        let data = tempfile::tempdir().unwrap();
        let out = tempfile::tempdir().unwrap();
        let settings = Settings {
            data_dir: data.path().to_path_buf(),
            mirrors: vec![shared.display().to_string()],
            cache_dir: data.path().join("cache"),
            ..Settings::default()
        };
        let registry = Registry::load().unwrap();
        let boxed: Box<dyn Encoder> = Box::new(HashEncoder);
        let encoder = CachedEncoder::new(boxed, &settings.cache_dir);
        let plain: Plan = vec![("stsb-test".into(), Overrides::default())];
        let first = evaluate(&plain, &registry, &encoder, &settings, 1, out.path(), true).unwrap();
        let kept = evaluate(&plain, &registry, &encoder, &settings, 1, out.path(), true).unwrap();
        assert_eq!(first[0].seconds, kept[0].seconds, "kept, not recomputed");
        // Another similarity is another declaration: recomputed, and recorded.
        let mut o = Overrides::default();
        o.set("similarity", "angular".into()).unwrap();
        let changed: Plan = vec![("stsb-test".into(), o.clone())];
        let again = evaluate(
            &changed,
            &registry,
            &encoder,
            &settings,
            1,
            out.path(),
            true,
        )
        .unwrap();
        assert_ne!(again[0].declaration, first[0].declaration);
        assert_eq!(again[0].overrides, o);
        assert_eq!(again[0].protocol_params["similarity"], "angular");
        // A file harness did not write, where a result would go, is left alone.
        std::fs::write(out.path().join("sick-r.json"), "my notes").unwrap();
        let foreign: Plan = vec![("sick-r".into(), Overrides::default())];
        let err = evaluate(
            &foreign,
            &registry,
            &encoder,
            &settings,
            1,
            out.path(),
            false,
        )
        .unwrap_err()
        .to_string();
        assert!(
            err.contains("sick-r.json") && err.contains("did not write"),
            "{err}"
        );
        assert_eq!(
            std::fs::read_to_string(out.path().join("sick-r.json")).unwrap(),
            "my notes"
        );
        // Another encoder's results in the folder: an evaluation (not a run's) is refused
        // before it runs, and the files stay as they were.
        std::fs::remove_file(out.path().join("sick-r.json")).unwrap();
        let mut other = again[0].clone();
        other.encoder.fingerprint = "another encoder".into();
        other.encoder.name = "other".into();
        write_result(out.path(), &other).unwrap();
        let before = std::fs::read(out.path().join("stsb-test.json")).unwrap();
        let err = evaluate(&plain, &registry, &encoder, &settings, 1, out.path(), false)
            .unwrap_err()
            .to_string();
        assert!(err.contains("another encoder (`other`)"), "{err}");
        assert_eq!(
            std::fs::read(out.path().join("stsb-test.json")).unwrap(),
            before
        );
    }

    #[test]
    fn a_misspelt_override_is_refused_before_anything_runs() {
        let registry = Registry::load().unwrap();
        let mut o = Overrides::default();
        o.set("epoch", 3.into()).unwrap();
        let err = plan(&registry, &[("xnli".into(), o)])
            .unwrap_err()
            .to_string();
        assert!(err.contains("epoch") && err.contains("xnli"), "{err}");
    }
}
