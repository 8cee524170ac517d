//! MTEB result files from a harness run (`harness export-results RUN_DIR --format mteb`).
//!
//! Reference: MTEB's result files and loader at mteb 2.26.24, the version pinned in
//! `scripts/pyenv.py`: `mteb/results/task_result.py` (`TaskResult`: `dataset_revision`,
//! `task_name`, `mteb_version`, `scores` = split → list of entries, each with `main_score`,
//! `hf_subset`, `languages` and the metrics, `evaluation_time`), the layout of
//! `mteb/cache/result_cache.py` (`ResultCache.load_results`: `<model name with "/" as "__">/
//! <revision>/<TaskName>.json` beside a `model_meta.json`, which the loader requires by
//! default; `mteb/models/model_meta.py` `ModelMeta` for its fields), and the metrics of the two
//! kinds of task exported:
//! - STS (`mteb/abstasks/sts.py`, `AbsTaskSTS._calculate_scores`): `cosine_spearman` (the main
//!   score) and `cosine_pearson`, scipy's correlations of the cosine similarity with the gold
//!   score over all pairs of one subset, in [-1, 1] (harness records them ×100);
//! - bitext mining (`mteb/abstasks/text/bitext_mining.py`, `_compute_metrics`): every
//!   `sentence1` retrieves its cosine nearest neighbour among the `sentence2`s; `accuracy` and
//!   scikit-learn's support-weighted `precision`, `recall` and `f1` (the main score) of the
//!   retrieved line indices against the gold ones.
//!
//! # What maps where
//! | harness (dataset, protocol) | MTEB task, split: hf_subsets | from |
//! |---|---|---|
//! | `stsbenchmark`, sts, test / dev | `STSBenchmark`, test / validation: default | the result's cosine correlations |
//! | `sts12-16`, sts, year 2012…2016 | `STS12`…`STS16`, test: default | the per-pair cosines of the items sidecar, pooled over the subsets (MTEB correlates all pairs at once; harness's headline is SentEval's weighted mean of per-subset correlations) |
//! | `sts17`, sts, tracks 1, 2, 3, 4a, 5, 6 | `STS17`, test: ar-ar, en-ar, es-es, es-en, en-en, en-tr | the result's per-track cosine correlations (track 4b has no MTEB subset) |
//! | `stsb-multi-mt`, sts, test / dev | `STSBenchmarkMultilingualSTS`, test / dev: en de es fr it nl pl pt ru zh | the result's per-language cosine correlations (ja and the cross-lingual pairs have no MTEB subset) |
//! | `tatoeba-laser-v1`, tatoeba-search | `Tatoeba`, test: `<xxx>-eng` | each xxx sentence's retrieved English line in the items sidecar (MTEB searches that direction only; harness's error rate averages both) |
//! | `flores200-devtest`, multiway-search | `FloresBitextMining`, devtest: `<x>-<y>` | each x sentence's retrieved y line in the items sidecar |
//!
//! Not exported, with the reason [`skip_reason`] gives: SICK-R (MTEB's holds all 9,927 SICK
//! pairs, harness evaluates one split), BUCC (MTEB's is 1-NN search over the gold sentences of
//! the training data, harness mines the zh-en sample set with margin scoring), XNLI (MTEB's is
//! pair classification by similarity), SIB-200 (MTEB trains a classifier per language), and
//! SentEval's classification tasks, the intent, sentiment, retrieval-P@1, eigen-similarity
//! and newstest2012 benchmarks, which MTEB does not have.
//!
//! # Honesty rules
//! Every number comes from the run's result files (`results/<bench>.json`, and the per-item
//! sidecar `<bench>.items.json.gz` whose sha256 the result records): a metric MTEB defines
//! differently from harness's headline is computed from the recorded per-item outcomes with
//! MTEB's definition, never estimated. A subset is written only when the result holds exactly
//! as many pairs as MTEB's copy of it (the counts of mteb's descriptive statistics, in
//! [`tables`]); otherwise the benchmark or subset is left out and the summary says why. An
//! undefined correlation (NaN) is left out too. Harness's tie-breaking of the nearest
//! neighbour (the lower index) and its cosine of identical embeddings (exactly 1) are its own.
//! `dataset_revision` names the harness dataset the numbers were measured on
//! (`<dataset>@harness-datasets-lock-<sha12>`), not MTEB's Hugging Face revision, which the
//! `harness` block of each file records beside it (`mteb_dataset`); `mteb_version` is the
//! version whose schema the file follows (the scores were measured by harness, not by mteb's
//! evaluators; the `harness` block says so and names the result files).
//!
//! # Model name and revision
//! The model is named `harness/<recipe>` (`-<profile>` appended for a profile other than the
//! default) for a run directory, `harness/<encoder>` for a bare result directory, unless the
//! caller names it. Its revision is the first 16 hex digits of the sha256 of the encoder
//! fingerprint that the result files record (for a trained run it contains the sha256 of the
//! trained weights, the tokenizer's digest, the pooling and the input clip; for a pretrained
//! encoder the pinned model's identity): MTEB's revision names one state of a model's
//! weights, and the recipe fingerprint does not (the same recipe trained on another backend,
//! or for more steps, gives other weights). Results of several encoder fingerprints in one
//! directory are refused.
//!
//! # Writing
//! Files go through [`harness_core::outdir::OutDir`] (kind `mteb-results`, atomic writes,
//! the manifest `.harness-files.json` in the output folder, which MTEB's loader does not
//! read): a folder that already holds other files (another MTEB results folder, say) is
//! written into, but a file in the way that this command did not write is refused before
//! anything is written, and nothing is ever deleted. Task files of an earlier export that this
//! one does not write again are left as they are (same model revision, same weights).

pub mod tables;

use crate::error::ReportError;
use crate::runs::{self, ResultFile, SystemRuns};
use harness_bench::items::{read_items, Items, Outcomes};
use harness_bench::protocols::def::read_scores;
use harness_bench::protocols::multiway::MultiwayScores;
use harness_bench::protocols::sts::StsScores;
use harness_bench::protocols::tatoeba::TatoebaScores;
use harness_core::outdir::{Foreign, OutDir};
use serde_json::{json, Map, Value};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// The mteb version whose result schema and loader the export follows (and the pin of
/// `scripts/pyenv.py`, whose `scripts/mteb_load_results.py` reads the files back).
pub const MTEB_VERSION: &str = "2.26.24";

/// The output folder's kind in its `.harness-files.json`.
pub const OUTPUT_KIND: &str = "mteb-results";

/// An MTEB task that harness results fill: its name and the Hugging Face dataset (and
/// revision) MTEB evaluates it on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Task {
    pub name: &'static str,
    pub hf_path: &'static str,
    pub hf_revision: &'static str,
    pub main_score: &'static str,
}

const fn sts_task(name: &'static str, hf_path: &'static str, hf_revision: &'static str) -> Task {
    Task {
        name,
        hf_path,
        hf_revision,
        main_score: "cosine_spearman",
    }
}

const STSB: Task = sts_task(
    "STSBenchmark",
    "mteb/stsbenchmark-sts",
    "b0fddb56ed78048fa8b90373c8a3cfc37b684831",
);
const STS_YEARS: [(u64, Task, usize); 5] = [
    (
        2012,
        sts_task(
            "STS12",
            "mteb/sts12-sts",
            "a0d554a64d88156834ff5ae9920b964011b16384",
        ),
        3108,
    ),
    (
        2013,
        sts_task(
            "STS13",
            "mteb/sts13-sts",
            "7e90230a92c190f1bf69ae9002b8cea547a64cca",
        ),
        1500,
    ),
    (
        2014,
        sts_task(
            "STS14",
            "mteb/sts14-sts",
            "6031580fec1f6af667f0bd2da0a551cf4f0b2375",
        ),
        3750,
    ),
    (
        2015,
        sts_task(
            "STS15",
            "mteb/sts15-sts",
            "ae752c7c21bf194d8b67fd573edf7ae58183cbe3",
        ),
        3000,
    ),
    (
        2016,
        sts_task(
            "STS16",
            "mteb/sts16-sts",
            "4d8694f8f0e0100860b497b999b3dbed754a0513",
        ),
        1186,
    ),
];
const STS17: Task = sts_task(
    "STS17",
    "mteb/sts17-crosslingual-sts",
    "faeb762787bd10488a50c8b5be4a3b82e411949c",
);
const STSB_MULTI: Task = sts_task(
    "STSBenchmarkMultilingualSTS",
    "mteb/stsb_multi_mt",
    "29afa2569dcedaaa2fe6a3dcfebab33d28b82e8c",
);
const TATOEBA: Task = Task {
    name: "Tatoeba",
    hf_path: "mteb/tatoeba-bitext-mining",
    hf_revision: "69e8f12da6e31d59addadda9a9c8a2e601a0e282",
    main_score: "f1",
};
const FLORES: Task = Task {
    name: "FloresBitextMining",
    hf_path: "mteb/FloresBitextMining",
    hf_revision: "2144d16cc15edd22d4a9237d12bff5f31f5c07fc",
    main_score: "f1",
};
/// Pairs of MTEB's `SICK-R` (its one `test` split holds all of SICK).
const SICK_R_PAIRS: usize = 9927;
/// Sentences per language of FLORES-200 devtest.
const FLORES_LINES: usize = 1012;

/// One score entry of a task file: a split and hf_subset with its metrics.
#[derive(Debug, Clone, PartialEq)]
pub struct Entry {
    pub split: String,
    pub hf_subset: String,
    pub languages: Vec<String>,
    /// MTEB metric name → value, the main score's among them.
    pub metrics: BTreeMap<&'static str, f64>,
    pub main_score: f64,
}

/// What one harness result gives an MTEB task.
#[derive(Debug, Clone, PartialEq)]
pub struct Contribution {
    pub task: Task,
    pub benchmark: String,
    pub entries: Vec<Entry>,
    /// Where the numbers came from, for the task file's `harness` block.
    pub source: String,
    /// Parts of the result left out, and why.
    pub left_out: Vec<String>,
}

/// What becomes of one result file.
#[derive(Debug, Clone, PartialEq)]
pub enum Mapping {
    Export(Contribution),
    /// No MTEB counterpart (or not the same data, or not convertible): the reason.
    Skip(String),
}

/// One written task file, for the summary.
#[derive(Debug, Clone)]
pub struct TaskFile {
    pub task: &'static str,
    pub path: PathBuf,
    pub benchmarks: Vec<String>,
    /// split → (hf_subset → main score).
    pub main_scores: BTreeMap<String, BTreeMap<String, f64>>,
}

/// What [`export`] did.
#[derive(Debug, Clone)]
pub struct MtebExport {
    pub out_dir: PathBuf,
    pub model_name: String,
    pub revision: String,
    /// `<out>/<model name as path>/<revision>`.
    pub model_dir: PathBuf,
    pub tasks: Vec<TaskFile>,
    /// Benchmarks with no MTEB counterpart: (benchmark, reason).
    pub skipped: Vec<(String, String)>,
    /// Parts of exported benchmarks left out, and warnings about the inputs.
    pub notes: Vec<String>,
}

/// Options of [`export`].
#[derive(Debug, Clone, Default)]
pub struct ExportOptions {
    /// MTEB model name (`organization/name`); default `harness/<recipe or encoder>`.
    pub model_name: Option<String>,
}

/// Writes every result of `run_dir` (a run directory or a result directory) that has an MTEB
/// counterpart into `out_dir` in MTEB's layout (module doc).
pub fn export(
    run_dir: &Path,
    out_dir: &Path,
    opts: &ExportOptions,
    known: &harness_recipe::Known,
) -> Result<MtebExport, ReportError> {
    let inputs = runs::load_inputs(&[run_dir.to_path_buf()], known)?;
    let system = inputs
        .systems
        .values()
        .next()
        .ok_or_else(|| ReportError::Input {
            path: run_dir.to_path_buf(),
            detail: "no results".into(),
            fix: "give a run directory with results/ or a result directory".into(),
        })?;
    let mut notes = inputs.warnings.clone();
    let (contributions, skipped) = contributions_of(run_dir, system, &mut notes)?;

    let revision = revision(run_dir, contributions.iter().map(|(_, f)| *f))?;
    let model_name = match &opts.model_name {
        Some(n) => check_model_name(n)?,
        None => default_model_name(system),
    };
    let model_rel = format!("{}/{revision}", model_name_as_path(&model_name));

    // Task → its entries, refusing two results for one (split, hf_subset).
    let mut by_task: BTreeMap<&'static str, Vec<&(Contribution, &ResultFile)>> = BTreeMap::new();
    for c in &contributions {
        by_task.entry(c.0.task.name).or_default().push(c);
    }
    let mut outputs: Vec<(String, Vec<u8>)> = Vec::new();
    let mut tasks = Vec::new();
    for (name, parts) in &by_task {
        refuse_two_for_one_subset(run_dir, name, parts)?;
        let json = task_json(parts, run_dir);
        let mut main_scores: BTreeMap<String, BTreeMap<String, f64>> = BTreeMap::new();
        for (c, _) in parts.iter().map(|p| (&p.0, p.1)) {
            for e in &c.entries {
                main_scores
                    .entry(e.split.clone())
                    .or_default()
                    .insert(e.hf_subset.clone(), e.main_score);
            }
        }
        let rel = format!("{model_rel}/{name}.json");
        let bytes = serde_json::to_vec_pretty(&json).expect("JSON values serialise");
        tasks.push(TaskFile {
            task: name,
            path: out_dir.join(&rel),
            benchmarks: parts.iter().map(|p| p.0.benchmark.clone()).collect(),
            main_scores,
        });
        outputs.push((rel, bytes));
    }
    let dim = contributions[0].1.result.encoder.dim;
    let meta = model_meta(&model_name, &revision, dim);
    outputs.push((
        format!("{model_rel}/model_meta.json"),
        serde_json::to_vec_pretty(&meta).expect("JSON values serialise"),
    ));

    let names: Vec<String> = outputs.iter().map(|(n, _)| n.clone()).collect();
    let mut dir = OutDir::claim(out_dir, OUTPUT_KIND, &names, Foreign::LeaveAlone, false)
        .map_err(|e| ReportError::Setup(e.to_string()))?;
    for (rel, bytes) in &outputs {
        dir.write(rel, bytes)
            .map_err(|e| ReportError::Setup(e.to_string()))?;
    }
    dir.finish()
        .map_err(|e| ReportError::Setup(e.to_string()))?;
    Ok(MtebExport {
        out_dir: out_dir.to_path_buf(),
        model_name,
        revision,
        model_dir: out_dir.join(rel_path(&model_rel)),
        tasks,
        skipped,
        notes,
    })
}

/// Each result's MTEB counterpart (its left-out parts added to `notes`) and the results
/// without one, with the reason; an error when none has one.
#[allow(clippy::type_complexity)]
fn contributions_of<'a>(
    run_dir: &Path,
    system: &'a SystemRuns,
    notes: &mut Vec<String>,
) -> Result<(Vec<(Contribution, &'a ResultFile)>, Vec<(String, String)>), ReportError> {
    let mut skipped = Vec::new();
    let mut contributions: Vec<(Contribution, &ResultFile)> = Vec::new();
    for (bench, file) in &system.results {
        match convert(file)? {
            Mapping::Export(c) => {
                notes.extend(c.left_out.iter().map(|l| format!("{bench}: {l}")));
                contributions.push((c, file));
            }
            Mapping::Skip(reason) => skipped.push((bench.clone(), reason)),
        }
    }
    if contributions.is_empty() {
        return Err(ReportError::Input {
            path: run_dir.to_path_buf(),
            detail: format!(
                "none of its results has an MTEB counterpart ({})",
                skipped
                    .iter()
                    .map(|(b, r)| format!("{b}: {r}"))
                    .collect::<Vec<_>>()
                    .join("; ")
            ),
            fix: "evaluate a benchmark MTEB has first (stsb-test, sts12…sts16, sts17, stsb-multi, tatoeba, flores200), e.g. `harness eval --encoder ENC --bench stsb-test,sts17 --out DIR`".into(),
        });
    }
    Ok((contributions, skipped))
}

/// Refuses two benchmarks giving MTEB task `name` the same (split, hf_subset).
fn refuse_two_for_one_subset(
    run_dir: &Path,
    name: &str,
    parts: &[&(Contribution, &ResultFile)],
) -> Result<(), ReportError> {
    let mut seen: BTreeMap<(String, String), &str> = BTreeMap::new();
    for (c, _) in parts.iter().map(|p| (&p.0, p.1)) {
        for e in &c.entries {
            if let Some(other) = seen.insert((e.split.clone(), e.hf_subset.clone()), &c.benchmark) {
                return Err(ReportError::Input {
                    path: run_dir.to_path_buf(),
                    detail: format!(
                        "benchmarks `{other}` and `{}` both give MTEB {name} {}/{}",
                        c.benchmark, e.split, e.hf_subset
                    ),
                    fix: format!(
                        "export from a directory that holds only one of them (copy the result files of one into a folder of their own, or move `{}.json` aside)",
                        c.benchmark
                    ),
                });
            }
        }
    }
    Ok(())
}

/// A `/`-separated relative path as a path.
fn rel_path(rel: &str) -> PathBuf {
    rel.split('/').collect()
}

/// What an MTEB task gets from one result file (module doc, "What maps where").
pub fn convert(file: &ResultFile) -> Result<Mapping, ReportError> {
    let r = &file.result;
    if r.main_score.is_none() || r.error.is_some() {
        return Ok(Mapping::Skip(format!(
            "the benchmark failed ({})",
            r.error.as_deref().unwrap_or("no score")
        )));
    }
    match (r.protocol.as_str(), r.dataset.as_str()) {
        ("sts", "stsbenchmark") => stsbenchmark(file),
        ("sts", "sick") => {
            let scores: StsScores = match typed(file) {
                Ok(s) => s,
                Err(why) => return Ok(Mapping::Skip(why)),
            };
            let n = sts_set_counts(&scores)
                .iter()
                .map(|(_, n)| n)
                .sum::<usize>();
            Ok(Mapping::Skip(format!(
                "MTEB's SICK-R scores all {SICK_R_PAIRS} pairs of SICK (train, trial and test as one set); this result has {n}"
            )))
        }
        ("sts", "sts12-16") => sts12_16(file),
        ("sts", "sts17") => sts17(file),
        ("sts", "stsb-multi-mt") => stsb_multi(file),
        ("tatoeba-search", "tatoeba-laser-v1") => tatoeba(file),
        ("multiway-search", "flores200-devtest") => flores(file),
        (protocol, dataset) => Ok(Mapping::Skip(skip_reason(protocol, dataset))),
    }
}

/// Why a benchmark of `protocol` on `dataset` has no MTEB counterpart.
pub fn skip_reason(protocol: &str, dataset: &str) -> String {
    match protocol {
        "senteval-classification" => "a SentEval task MTEB does not have".into(),
        "bucc-mining" => "MTEB's BUCC is 1-NN search over the gold sentences of the BUCC training data; harness mines the zh-en sample set with margin scoring (LASER): other data, other metric".into(),
        "xnli-zero-shot" => "MTEB's XNLI is pair classification by embedding similarity, not a classifier trained on English NLI".into(),
        "mldoc" => "MTEB's SIB200Classification trains a classifier per language on its own train split; harness trains on English and tests across languages (MLDoc protocol)".into(),
        "sentiment-transfer" | "intent" | "retrieval-p1" | "eigen-similarity" => {
            format!("no MTEB task runs the `{protocol}` protocol")
        }
        _ => format!("no MTEB task for `{dataset}` with the `{protocol}` protocol"),
    }
}

/// The result's scores as its protocol's struct `S`, or why not (a skip reason: a result
/// file of another harness version).
fn typed<S: serde::de::DeserializeOwned>(file: &ResultFile) -> Result<S, String> {
    read_scores(
        &file.result.benchmark,
        &file.result.protocol,
        &file.result.scores,
    )
}

/// (set key, pairs) of an sts result, in the result's order.
fn sts_set_counts(scores: &StsScores) -> Vec<(String, usize)> {
    scores
        .order
        .iter()
        .map(|k| (k.clone(), scores.subsets.get(k).map_or(0, |s| s.n)))
        .collect()
}

/// One STS entry from a set of the result's `scores.subsets` (cosine, ×100 → [-1, 1]), or why
/// not.
fn sts_entry(
    scores: &StsScores,
    key: &str,
    split: &str,
    hf_subset: &str,
    languages: &[&str],
    expected: usize,
) -> Result<Entry, String> {
    let set = scores.subsets.get(key);
    let n = set.map_or(0, |s| s.n);
    if n != expected {
        return Err(format!(
            "`{key}` has {n} pairs, MTEB's {hf_subset} {split} {expected}"
        ));
    }
    let spearman = set.and_then(|s| s.cosine.spearman);
    let pearson = set.and_then(|s| s.cosine.pearson);
    entry_of(
        split,
        hf_subset,
        languages,
        spearman.map(|s| s / 100.0),
        pearson.map(|p| p / 100.0),
    )
    .ok_or_else(|| format!("`{key}`: the cosine Spearman correlation is undefined"))
}

fn entry_of(
    split: &str,
    hf_subset: &str,
    languages: &[&str],
    spearman: Option<f64>,
    pearson: Option<f64>,
) -> Option<Entry> {
    let spearman = spearman.filter(|v| v.is_finite())?;
    let mut metrics = BTreeMap::from([("cosine_spearman", spearman)]);
    if let Some(p) = pearson.filter(|v| v.is_finite()) {
        metrics.insert("cosine_pearson", p);
    }
    Some(Entry {
        split: split.into(),
        hf_subset: hf_subset.into(),
        languages: languages.iter().map(|s| s.to_string()).collect(),
        metrics,
        main_score: spearman,
    })
}

fn param_str<'a>(file: &'a ResultFile, key: &str) -> Option<&'a str> {
    file.result.protocol_params.get(key).and_then(Value::as_str)
}

fn contribution(
    task: Task,
    file: &ResultFile,
    entries: Vec<Entry>,
    source: String,
    left_out: Vec<String>,
) -> Mapping {
    Mapping::Export(Contribution {
        task,
        benchmark: file.result.benchmark.clone(),
        entries,
        source,
        left_out,
    })
}

fn stsbenchmark(file: &ResultFile) -> Result<Mapping, ReportError> {
    let (split, expected) = match param_str(file, "split") {
        Some("test") => ("test", 1379),
        Some("dev") => ("validation", 1500),
        other => {
            return Ok(Mapping::Skip(format!(
                "MTEB's STSBenchmark has no `{}` split to fill (test and validation only)",
                other.unwrap_or("?")
            )))
        }
    };
    let key = param_str(file, "split").unwrap_or_default();
    let scores: StsScores = match typed(file) {
        Ok(s) => s,
        Err(why) => return Ok(Mapping::Skip(why)),
    };
    Ok(
        match sts_entry(&scores, key, split, "default", &["eng-Latn"], expected) {
            Ok(e) => contribution(
                STSB,
                file,
                vec![e],
                format!("scores.subsets.{key}.cosine.{{spearman,pearson}} / 100"),
                Vec::new(),
            ),
            Err(why) => Mapping::Skip(why),
        },
    )
}

fn sts12_16(file: &ResultFile) -> Result<Mapping, ReportError> {
    let year = file
        .result
        .protocol_params
        .get("year")
        .and_then(Value::as_u64);
    let Some(&(_, task, expected)) = STS_YEARS.iter().find(|(y, _, _)| Some(*y) == year) else {
        return Ok(Mapping::Skip(format!("no MTEB task for STS year {year:?}")));
    };
    if param_str(file, "similarity") != Some("cosine") {
        return Ok(Mapping::Skip(format!(
            "MTEB's {} correlates cosine similarities over all pairs, and this result's per-pair similarities are `{}`; evaluate it with `similarity: cosine`",
            task.name,
            param_str(file, "similarity").unwrap_or("?")
        )));
    }
    let items = match items_of(file)? {
        Ok(items) => items,
        Err(why) => return Ok(Mapping::Skip(why)),
    };
    let (mut predicted, mut gold) = (Vec::new(), Vec::new());
    for g in &items.groups {
        if let Outcomes::Scored {
            predicted: p,
            gold: y,
            ..
        } = &g.outcomes
        {
            predicted.extend_from_slice(p);
            gold.extend_from_slice(y);
        }
    }
    if predicted.len() != expected {
        return Ok(Mapping::Skip(format!(
            "the items hold {} pairs, MTEB's {} test {expected}",
            predicted.len(),
            task.name
        )));
    }
    let spearman = harness_bench::metrics::spearman(&predicted, &gold);
    let pearson = harness_bench::metrics::pearson(&predicted, &gold);
    Ok(
        match entry_of("test", "default", &["eng-Latn"], Some(spearman), Some(pearson)) {
            Some(e) => contribution(
                task,
                file,
                vec![e],
                format!(
                    "Spearman and Pearson of the cosine against the gold score over all {expected} pairs of {} (the per-pair cosines of its items sidecar, every subset pooled as MTEB pools them); harness's own headline is SentEval's weighted mean of per-subset correlations",
                    file.items_name()
                ),
                Vec::new(),
            ),
            None => Mapping::Skip("the pooled cosine Spearman correlation is undefined".into()),
        },
    )
}

fn sts17(file: &ResultFile) -> Result<Mapping, ReportError> {
    let scores: StsScores = match typed(file) {
        Ok(s) => s,
        Err(why) => return Ok(Mapping::Skip(why)),
    };
    let mut entries = Vec::new();
    let mut left_out = Vec::new();
    for (key, _) in sts_set_counts(&scores) {
        let id = key
            .strip_prefix("track")
            .and_then(|k| k.split('.').next())
            .unwrap_or_default();
        match tables::STS17.iter().find(|(t, ..)| *t == id) {
            Some((_, subset, langs, n)) => {
                match sts_entry(&scores, &key, "test", subset, langs, *n) {
                    Ok(e) => entries.push(e),
                    Err(why) => left_out.push(why),
                }
            }
            None => left_out.push(format!("`{key}` (no MTEB STS17 subset)")),
        }
    }
    Ok(if entries.is_empty() {
        Mapping::Skip(format!(
            "no track with an MTEB subset ({})",
            left_out.join("; ")
        ))
    } else {
        contribution(
            STS17,
            file,
            entries,
            "scores.subsets.<track>.cosine.{spearman,pearson} / 100 (track 1 → ar-ar, 2 → en-ar, 3 → es-es, 4a → es-en, 5 → en-en, 6 → en-tr)".into(),
            left_out,
        )
    })
}

fn stsb_multi(file: &ResultFile) -> Result<Mapping, ReportError> {
    let (split, expected) = match param_str(file, "split") {
        Some("test") => ("test", 1379),
        Some("dev") => ("dev", 1500),
        other => {
            return Ok(Mapping::Skip(format!(
                "MTEB's STSBenchmarkMultilingualSTS has no `{}` split to fill (dev and test only)",
                other.unwrap_or("?")
            )))
        }
    };
    let mut entries = Vec::new();
    let mut left_out = Vec::new();
    let scores: StsScores = match typed(file) {
        Ok(s) => s,
        Err(why) => return Ok(Mapping::Skip(why)),
    };
    for (key, _) in sts_set_counts(&scores) {
        match tables::STSB_MULTI.iter().find(|(l, _)| *l == key) {
            Some((subset, lang)) => {
                match sts_entry(&scores, &key, split, subset, &[lang], expected) {
                    Ok(e) => entries.push(e),
                    Err(why) => left_out.push(why),
                }
            }
            None => left_out.push(format!("`{key}` (no MTEB subset)")),
        }
    }
    if let Some(cross) = scores.cross_lingual_order.as_deref() {
        if !cross.is_empty() {
            left_out.push(format!(
                "the cross-lingual pairs {} (no MTEB subset)",
                cross.join(", ")
            ));
        }
    }
    Ok(if entries.is_empty() {
        Mapping::Skip(format!(
            "no language with an MTEB subset ({})",
            left_out.join("; ")
        ))
    } else {
        contribution(
            STSB_MULTI,
            file,
            entries,
            "scores.subsets.<language>.cosine.{spearman,pearson} / 100".into(),
            left_out,
        )
    })
}

fn tatoeba(file: &ResultFile) -> Result<Mapping, ReportError> {
    let items = match items_of(file)? {
        Ok(items) => items,
        Err(why) => return Ok(Mapping::Skip(why)),
    };
    let scores: TatoebaScores = match typed(file) {
        Ok(s) => s,
        Err(why) => return Ok(Mapping::Skip(why)),
    };
    let mut entries = Vec::new();
    let mut left_out = Vec::new();
    for g in &items.groups {
        let Some(lang) = g.name.strip_suffix("/xx_to_eng") else {
            continue;
        };
        let Some((_, script, n)) = tables::TATOEBA.iter().find(|(c, ..)| *c == lang) else {
            left_out.push(format!("`{lang}` (no MTEB Tatoeba subset)"));
            continue;
        };
        match bitext_entry(
            &g.outcomes,
            "test",
            &format!("{lang}-eng"),
            &[script, "eng-Latn"],
            *n,
        ) {
            Ok(e) => {
                let recorded = scores.per_language.get(lang).map(|l| l.xx_to_eng);
                check_accuracy(
                    file,
                    &e,
                    recorded,
                    &format!("scores.per_language.{lang}.xx_to_eng"),
                )?;
                entries.push(e)
            }
            Err(why) => left_out.push(format!("`{lang}`: {why}")),
        }
    }
    Ok(if entries.is_empty() {
        Mapping::Skip(format!(
            "no language with an MTEB subset ({})",
            left_out.join("; ")
        ))
    } else {
        contribution(
            TATOEBA,
            file,
            entries,
            format!(
                "the English line each xxx sentence retrieved (the `<xxx>/xx_to_eng` groups of {}), scored as MTEB scores bitext mining; accuracy = 1 − the result's xx_to_eng error / 100. Harness's own Tatoeba score averages the error of both directions; MTEB's searches xxx → eng only, so eng → xxx is not exported",
                file.items_name()
            ),
            left_out,
        )
    })
}

fn flores(file: &ResultFile) -> Result<Mapping, ReportError> {
    let items = match items_of(file)? {
        Ok(items) => items,
        Err(why) => return Ok(Mapping::Skip(why)),
    };
    let scores: MultiwayScores = match typed(file) {
        Ok(s) => s,
        Err(why) => return Ok(Mapping::Skip(why)),
    };
    let textual = file.result.protocol_params["textual"].as_bool() == Some(true);
    let mut entries = Vec::new();
    let mut left_out = Vec::new();
    for g in &items.groups {
        let Some((x, y)) = g.name.split_once('-') else {
            continue;
        };
        if !(tables::FLORES.contains(&x) && tables::FLORES.contains(&y)) {
            left_out.push(format!("`{}` (no MTEB FloresBitextMining subset)", g.name));
            continue;
        }
        let (lx, ly) = (x.replace('_', "-"), y.replace('_', "-"));
        match bitext_entry(&g.outcomes, "devtest", &g.name, &[&lx, &ly], FLORES_LINES) {
            Ok(e) => {
                // With `textual: true` harness counts a retrieved duplicate line as right;
                // MTEB's accuracy is by line index, so only an index search is checked.
                if !textual {
                    let recorded = scores.error_rate.get(x).and_then(|row| row.get(y)).copied();
                    check_accuracy(file, &e, recorded, &format!("scores.error_rate.{x}.{y}"))?;
                }
                entries.push(e)
            }
            Err(why) => left_out.push(format!("`{}`: {why}", g.name)),
        }
    }
    Ok(if entries.is_empty() {
        Mapping::Skip(format!(
            "no language pair with an MTEB subset ({})",
            left_out.join("; ")
        ))
    } else {
        contribution(
            FLORES,
            file,
            entries,
            format!(
                "the y line each x sentence retrieved (the `<x>-<y>` groups of {}), scored as MTEB scores bitext mining; accuracy = 1 − the result's error_rate[x][y] / 100",
                file.items_name()
            ),
            left_out,
        )
    })
}

/// The per-item outcomes of a result, or why there are none to use.
fn items_of(file: &ResultFile) -> Result<Result<Items, String>, ReportError> {
    let Some(reference) = &file.result.items else {
        return Ok(Err(
            "its result file has no per-item sidecar (written before harness recorded them); evaluate the benchmark again to export it"
                .into(),
        ));
    };
    let dir = file.path.parent().unwrap_or(Path::new("."));
    read_items(dir, reference)
        .map(Ok)
        .map_err(|e| ReportError::Input {
            path: file.path.clone(),
            detail: e.to_string(),
            fix: "evaluate the benchmark again so that the result and its sidecar match".into(),
        })
}

/// A bitext-mining entry from one search direction's outcomes (its retrieved indices), with
/// MTEB's metrics ([`bitext_metrics`]).
fn bitext_entry(
    outcomes: &Outcomes,
    split: &str,
    hf_subset: &str,
    languages: &[&str],
    expected: usize,
) -> Result<Entry, String> {
    let Outcomes::Correct {
        neighbour: Some(neighbour),
        ..
    } = outcomes
    else {
        return Err("no retrieved indices recorded".into());
    };
    if neighbour.len() != expected {
        return Err(format!(
            "{} sentences, MTEB's subset {expected}",
            neighbour.len()
        ));
    }
    let m = bitext_metrics(neighbour);
    Ok(Entry {
        split: split.into(),
        hf_subset: hf_subset.into(),
        languages: languages.iter().map(|s| s.to_string()).collect(),
        metrics: BTreeMap::from([
            ("precision", m.precision),
            ("recall", m.recall),
            ("f1", m.f1),
            ("accuracy", m.accuracy),
        ]),
        main_score: m.f1,
    })
}

/// The accuracy of `entry` must be 1 − the error rate (%) the result records at `path`: the
/// sidecar and the result describe the same search.
/// The items' accuracy against the error rate (%) the result records at `path` for it.
fn check_accuracy(
    file: &ResultFile,
    entry: &Entry,
    recorded: Option<f64>,
    path: &str,
) -> Result<(), ReportError> {
    let accuracy = entry.metrics["accuracy"];
    match recorded {
        Some(err) if (1.0 - err / 100.0 - accuracy).abs() <= 1e-9 => Ok(()),
        _ => Err(ReportError::Input {
            path: file.path.clone(),
            detail: format!(
                "{}: the items give accuracy {accuracy}, the result records error {recorded:?} at {}",
                entry.hf_subset,
                path
            ),
            fix: "evaluate the benchmark again so that the result and its sidecar match".into(),
        }),
    }
}

/// MTEB's bitext-mining metrics of 1-NN search where query `i`'s gold answer is line `i`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct BitextMetrics {
    pub precision: f64,
    pub recall: f64,
    pub f1: f64,
    pub accuracy: f64,
}

/// `neighbour[i]` is the line query `i` retrieved (`-1`: none). MTEB
/// (`AbsTaskBitextMining._compute_metrics`) scores the predictions against labels `0..n` with
/// scikit-learn's `average="weighted"`, `zero_division=0`: every label has support 1, so
/// recall = accuracy, precision = mean over the queries of `correct / c(pred)` and F1 = mean
/// of `correct · 2 / (c(pred) + 1)`, where `c(j)` is how many queries retrieved line `j`.
pub fn bitext_metrics(neighbour: &[i64]) -> BitextMetrics {
    let n = neighbour.len();
    if n == 0 {
        return BitextMetrics {
            precision: 0.0,
            recall: 0.0,
            f1: 0.0,
            accuracy: 0.0,
        };
    }
    let mut count: BTreeMap<i64, usize> = BTreeMap::new();
    for &j in neighbour {
        *count.entry(j).or_default() += 1;
    }
    let (mut correct, mut precision, mut f1) = (0usize, 0.0, 0.0);
    for (i, &j) in neighbour.iter().enumerate() {
        if j == i as i64 {
            let c = count[&j] as f64;
            correct += 1;
            precision += 1.0 / c;
            f1 += 2.0 / (c + 1.0);
        }
    }
    let n = n as f64;
    let accuracy = correct as f64 / n;
    BitextMetrics {
        precision: precision / n,
        recall: accuracy,
        f1: f1 / n,
        accuracy,
    }
}

impl ResultFile {
    /// The sidecar's file name, for provenance notes.
    fn items_name(&self) -> String {
        self.result
            .items
            .as_ref()
            .map_or_else(|| "its items sidecar".into(), |i| i.file.clone())
    }
}

/// The task file of one MTEB task from its contributions.
fn task_json(parts: &[&(Contribution, &ResultFile)], run_dir: &Path) -> Value {
    let task = parts[0].0.task;
    let mut scores: BTreeMap<String, Vec<Value>> = BTreeMap::new();
    let mut seconds = 0.0;
    let mut sources = Vec::new();
    let mut datasets: Vec<String> = Vec::new();
    for (c, f) in parts.iter().map(|p| (&p.0, p.1)) {
        seconds += f.result.seconds;
        let lock = f.result.datasets.get(..12).unwrap_or(&f.result.datasets);
        let dataset = format!("{}@harness-datasets-lock-{lock}", f.result.dataset);
        if !datasets.contains(&dataset) {
            datasets.push(dataset);
        }
        for e in &c.entries {
            let mut m = Map::new();
            for (k, v) in &e.metrics {
                m.insert((*k).into(), json!(v));
            }
            m.insert("main_score".into(), json!(e.main_score));
            m.insert("hf_subset".into(), json!(e.hf_subset));
            m.insert("languages".into(), json!(e.languages));
            scores
                .entry(e.split.clone())
                .or_default()
                .push(Value::Object(m));
        }
        let rel = |p: &Path| {
            p.strip_prefix(run_dir)
                .unwrap_or(p)
                .to_string_lossy()
                .into_owned()
        };
        sources.push(json!({
            "benchmark": c.benchmark,
            "result_file": rel(&f.path),
            "items_file": f.result.items.as_ref().map(|i| i.file.clone()),
            "encoder": f.result.encoder.name,
            "encoder_fingerprint": f.result.encoder.fingerprint,
            "measured_by": format!("harness {}", f.result.harness_version),
            "numbers": c.source,
            "left_out": c.left_out,
        }));
    }
    json!({
        "dataset_revision": datasets.join(" + "),
        "task_name": task.name,
        "mteb_version": MTEB_VERSION,
        "scores": scores,
        "evaluation_time": seconds,
        "kg_co2_emissions": null,
        "harness": {
            "note": format!(
                "measured by harness, not by mteb's evaluators, on harness's pinned copy of the data (dataset_revision); written in the TaskResult schema of mteb {MTEB_VERSION} with MTEB's metric definitions"
            ),
            "mteb_dataset": {"path": task.hf_path, "revision": task.hf_revision},
            "sources": sources,
        },
    })
}

/// `model_meta.json`: the fields `ModelMeta` requires (mteb/models/model_meta.py), unknown
/// ones null.
fn model_meta(name: &str, revision: &str, dim: usize) -> Value {
    json!({
        "name": name,
        "revision": revision,
        "loader": null,
        "release_date": null,
        "languages": null,
        "n_parameters": null,
        "memory_usage_mb": null,
        "max_tokens": null,
        "embed_dim": dim,
        "license": null,
        "open_weights": null,
        "public_training_code": null,
        "public_training_data": null,
        "framework": [],
        "reference": null,
        "similarity_fn_name": "cosine",
        "use_instructions": false,
        "training_datasets": null,
        "modalities": ["text"],
        "model_type": ["dense"],
    })
}

/// The model's revision (module doc): from the one encoder fingerprint of the exported
/// results.
fn revision<'a>(
    run_dir: &Path,
    files: impl Iterator<Item = &'a ResultFile>,
) -> Result<String, ReportError> {
    let mut by_fp: BTreeMap<&str, Vec<&str>> = BTreeMap::new();
    for f in files {
        by_fp
            .entry(f.result.encoder.fingerprint.as_str())
            .or_default()
            .push(f.result.benchmark.as_str());
    }
    if by_fp.len() > 1 {
        return Err(ReportError::Input {
            path: run_dir.to_path_buf(),
            detail: format!(
                "results of {} encoder states ({}); an MTEB revision is one state of one model",
                by_fp.len(),
                by_fp
                    .iter()
                    .map(|(fp, b)| format!("{} from `{fp}`", b.join(", ")))
                    .collect::<Vec<_>>()
                    .join("; ")
            ),
            fix: "evaluate the stale benchmarks again (`harness run` with --force) or export their result files from a folder of their own".into(),
        });
    }
    let fp = by_fp.keys().next().copied().unwrap_or_default();
    Ok(harness_core::fsutil::sha256_hex(fp.as_bytes())[..16].to_string())
}

/// `harness/<system>`: the run's recipe (with `-<profile>`; `--set` overrides do not rename
/// it, its revision tells the weights apart) or the encoder's name.
fn default_model_name(system: &SystemRuns) -> String {
    let env = system.sources.first().and_then(|s| s.env.as_ref());
    let from_env = env.and_then(|e| {
        let recipe = e.get("recipe")?.as_str()?;
        Some(match e.get("profile").and_then(Value::as_str) {
            Some(p) if !p.is_empty() && p != "default" => format!("{recipe}-{p}"),
            _ => recipe.to_string(),
        })
    });
    let id = from_env.unwrap_or_else(|| {
        let id = system.id.split(" [").next().unwrap_or(&system.id);
        id.replace('@', "-")
    });
    format!("harness/{}", sanitize(&id))
}

/// Characters of a Hugging Face repository name; others become `-`.
fn sanitize(s: &str) -> String {
    let out: String = s
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.') {
                c
            } else {
                '-'
            }
        })
        .collect();
    if out.is_empty() {
        "model".into()
    } else {
        out
    }
}

/// A caller's model name: `organization/name` (what `ModelMeta` requires), each part of
/// Hugging Face repository characters.
pub fn check_model_name(name: &str) -> Result<String, ReportError> {
    let ok = |p: &str| {
        !p.is_empty()
            && p != "."
            && p != ".."
            && p.chars()
                .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'))
    };
    match name.split_once('/') {
        Some((org, model)) if ok(org) && ok(model) => Ok(name.to_string()),
        _ => Err(ReportError::Setup(format!(
            "model name `{name}` is not `organization/name` with letters, digits, `-`, `_` and `.` (MTEB's ModelMeta requires the slash). Fix: e.g. `myorg/laser-small`"
        ))),
    }
}

/// The folder of a model in MTEB's layout (`ModelMeta.model_name_as_path`).
pub fn model_name_as_path(name: &str) -> String {
    name.replace('/', "__").replace(' ', "_")
}

#[cfg(test)]
mod tests;
