//! Hard negatives, mined once before training (multilingual USE §3.2, after Guo et al.
//! 2018 §4.2: "hard negatives … the k most similar targets under a translation-ranking
//! model trained without them"). For every example of a task whose objective asks for `k`
//! of them, the `k` targets of the task's corpus nearest to its source under the mining
//! encoder (`--encoder` syntax: `hashed-ngrams`, a pretrained model, or an earlier run
//! directory — the two-step recipe), excluding its own target text. They are fed to the
//! objective's loss as extra candidates ([`crate::step::Step::hard_negatives`]).
//!
//! Targets are searched among the targets of the same language only: a negative in another
//! language than the positive is told apart by its script or spelling alone, and the paper
//! mines within each language pair (one model per pair). So a corpus of several pairs costs
//! one search per target language, not one over every target.
//!
//! Deterministic (exact kNN, ties by index) and cached in the run directory:
//! `hard-negatives/<task>.json` holds the key it was mined under (the miner's fingerprint,
//! `k`, and the sha256 of every source and target text) and is reused only under that key.

use crate::corpora::Loaded;
use crate::data::{Examples, PairExample};
use crate::plan::Plan;
use crate::TrainError;
use harness_bench::knn::{top_k, KnnOptions, Metric};
use harness_core::settings::Settings;
use harness_embed::cache::CachedEncoder;
use harness_embed::Encoder;
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};
use std::collections::{BTreeMap, HashMap};
use std::path::Path;

/// Opens a mining encoder by its `--encoder` spec.
pub type OpenMiner<'a> = dyn Fn(&str) -> Result<Box<dyn Encoder>, TrainError> + 'a;

/// The cache file's content.
#[derive(Debug, Serialize, Deserialize)]
struct Cached {
    key: String,
    k: usize,
    miner: String,
    negatives: Vec<Vec<u32>>,
}

/// What mining did for one task (for the run's notes).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Mined {
    pub task: String,
    pub examples: usize,
    pub k: usize,
    /// Read from the run directory's cache instead of mined.
    pub from_cache: bool,
}

fn io(path: &Path, e: std::io::Error) -> TrainError {
    TrainError::Io {
        path: path.to_path_buf(),
        source: e,
    }
}

/// Mines (or reads back) the hard negatives of every task of `plan` whose objective asks for
/// them, into its `TaskData::negatives`. `open` opens the mining encoder by spec.
pub fn mine(
    plan: &mut Plan,
    loaded: &BTreeMap<String, Loaded>,
    run_dir: &Path,
    settings: &Settings,
    open: &OpenMiner<'_>,
) -> Result<Vec<Mined>, TrainError> {
    let mut out = Vec::new();
    let corpora: BTreeMap<String, String> = plan
        .recipe
        .tasks
        .iter()
        .map(|t| (t.name.clone(), t.corpus.clone()))
        .collect();
    for task in &mut plan.tasks {
        let Some(spec) = task.hard_negatives.clone() else {
            continue;
        };
        let Some(data) = task.data.as_mut() else {
            continue;
        };
        // A task with hard negatives holds its examples in memory (`plan.rs` reads its
        // shards whole), and `validate` refuses one whose corpus holds no texts.
        let Examples::Pairs(examples) = &data.examples else {
            return Err(TrainError::recipe(
                format!("tasks.{}", task.name),
                "hard negatives are mined for pair examples only",
                "drop `hard_negatives` from this task",
            ));
        };
        let corpus = corpora.get(&task.name).and_then(|c| loaded.get(c));
        let pairs = example_texts(&task.name, examples, corpus)?;
        let encoder = open(&spec.encoder)?;
        let miner = encoder.fingerprint();
        let key = cache_key(&miner, spec.k, &pairs);
        let path = run_dir
            .join("hard-negatives")
            .join(format!("{}.json", task.name));
        let cached = std::fs::read(&path)
            .ok()
            .and_then(|b| serde_json::from_slice::<Cached>(&b).ok())
            .filter(|c| c.key == key && c.negatives.len() == pairs.len());
        let (negatives, from_cache) = match cached {
            Some(c) => (c.negatives, true),
            None => {
                harness_core::note!(
                    "mining {} hard negatives per example of task `{}` ({} examples) with `{}`",
                    spec.k,
                    task.name,
                    pairs.len(),
                    spec.encoder
                );
                let cache = CachedEncoder::new(encoder, &settings.cache_dir);
                let languages: Vec<u32> = examples.iter().map(|e| e.tgt_lang).collect();
                let negatives = nearest_targets(&cache, &pairs, &languages, spec.k, &task.name)?;
                let file = Cached {
                    key,
                    k: spec.k,
                    miner,
                    negatives,
                };
                let json = serde_json::to_vec(&file).map_err(|e| TrainError::Checkpoint {
                    path: path.clone(),
                    detail: e.to_string(),
                })?;
                if let Some(dir) = path.parent() {
                    std::fs::create_dir_all(dir).map_err(|e| io(dir, e))?;
                }
                harness_core::nofollow::write_atomic(&path, &json).map_err(|e| io(&path, e))?;
                (file.negatives, false)
            }
        };
        out.push(Mined {
            task: task.name.clone(),
            examples: pairs.len(),
            k: spec.k,
            from_cache,
        });
        data.negatives = Some(negatives);
    }
    Ok(out)
}

/// Each example's (source, target) text from the task's corpus, in example order.
fn example_texts<'a>(
    task: &str,
    examples: &[PairExample],
    corpus: Option<&'a Loaded>,
) -> Result<Vec<(&'a str, &'a str)>, TrainError> {
    let texts: Vec<(&str, &str)> = match corpus {
        Some(Loaded::Parallel(parts)) => parts
            .iter()
            .flat_map(|(_, _, p)| p.iter().map(|b| (b.source.as_str(), b.target.as_str())))
            .collect(),
        Some(Loaded::Conversation(p)) => p
            .iter()
            .map(|b| (b.source.as_str(), b.target.as_str()))
            .collect(),
        _ => {
            return Err(TrainError::recipe(
                format!("tasks.{task}.corpus"),
                crate::objectives::check::HARD_NEGATIVE_TEXTS,
                "drop `hard_negatives` from this task",
            ))
        }
    };
    // Each example's (source, target) text, in example order.
    Ok(examples
        .iter()
        .map(|e| {
            let (s, t) = texts[e.origin as usize];
            if e.forward {
                (s, t)
            } else {
                (t, s)
            }
        })
        .collect())
}

/// The cache key of a task's mined negatives: the miner, `k` and every example's texts.
fn cache_key(miner: &str, k: usize, pairs: &[(&str, &str)]) -> String {
    let mut h = Sha256::new();
    h.update(miner.as_bytes());
    h.update((k as u64).to_le_bytes());
    for (s, t) in pairs {
        h.update(s.as_bytes());
        h.update([0]);
        h.update(t.as_bytes());
        h.update([1]);
    }
    hex::encode(h.finalize())
}

/// For each example, the examples holding its `k` nearest distinct target texts of its own
/// target language (`languages[i]`), by the cosine of the mining encoder's vectors of its
/// source and of every such target, its own target text excluded.
fn nearest_targets(
    encoder: &dyn Encoder,
    pairs: &[(&str, &str)],
    languages: &[u32],
    k: usize,
    task: &str,
) -> Result<Vec<Vec<u32>>, TrainError> {
    let mut by_language: BTreeMap<u32, Vec<usize>> = BTreeMap::new();
    for (i, &l) in languages.iter().enumerate() {
        by_language.entry(l).or_default().push(i);
    }
    let mut out = vec![Vec::new(); pairs.len()];
    for members in by_language.values() {
        let subset: Vec<(&str, &str)> = members.iter().map(|&i| pairs[i]).collect();
        let near = nearest_in(encoder, &subset, k, task)?;
        for (row, &i) in near.into_iter().zip(members) {
            out[i] = row
                .into_iter()
                .map(|j| members[j as usize] as u32)
                .collect();
        }
    }
    Ok(out)
}

/// [`nearest_targets`] within one language: indices into `pairs`.
fn nearest_in(
    encoder: &dyn Encoder,
    pairs: &[(&str, &str)],
    k: usize,
    task: &str,
) -> Result<Vec<Vec<u32>>, TrainError> {
    let err = |detail: String| {
        TrainError::recipe(
            format!("tasks.{task}"),
            format!("mining hard negatives: {detail}"),
            "check the mining encoder (`params.mine_with`)",
        )
    };
    // Distinct target texts, each standing for its first example.
    let mut first: HashMap<&str, u32> = HashMap::new();
    let mut targets: Vec<&str> = Vec::new();
    for (i, (_, t)) in pairs.iter().enumerate() {
        first.entry(t).or_insert_with(|| {
            targets.push(t);
            i as u32
        });
    }
    let sources: Vec<&str> = pairs.iter().map(|(s, _)| *s).collect();
    let s = encoder.encode(&sources).map_err(|e| err(e.to_string()))?;
    let t = encoder.encode(&targets).map_err(|e| err(e.to_string()))?;
    let near = top_k(&s, &t, k + 1, Metric::Cosine, &KnnOptions::default())
        .map_err(|e| err(e.to_string()))?;
    Ok(near
        .iter()
        .zip(pairs)
        .map(|(row, (_, own))| {
            row.iter()
                .map(|n| targets[n.index])
                .filter(|t| t != own)
                .take(k)
                .map(|t| first[t])
                .collect()
        })
        .collect())
}
