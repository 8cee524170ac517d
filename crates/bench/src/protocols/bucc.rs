//! `bucc-mining`: BUCC 2018 parallel-sentence mining, the LASER protocol.
//!
//! Reference: Artetxe & Schwenk (2019), §4.3 and Table 3 (BUCC), which use the margin
//! scoring of Artetxe & Schwenk (2018, "Margin-based parallel corpus mining"); the
//! implementation followed line by line is facebookresearch/LASER `tasks/bucc/bucc.sh`
//! (the pipeline: `mine_bitexts.py --unify --mode mine --retrieval max --margin ratio -k 4`,
//! then `bucc.py --gold` on the training set), `source/mine_bitexts.py` (`TextLoadUnify`,
//! `knn`, `score_candidates`, the four retrieval modes) and `tasks/bucc/bucc.py`
//! (`sent2id` with repeated sentences removed, `BuccOptimize`, `BuccExtract`).
//!
//! # Steps (as in LASER)
//! 1. **Unify** (`--unify`): each side's sentences are deduplicated on their exact text,
//!    first occurrence first; only the unique sentences are embedded (once each).
//! 2. Embeddings are **L2-normalised** (`faiss.normalize_L2`); exact k-NN by inner product
//!    (= cosine) runs both ways with `k = min(k, other side's size)` (default 4).
//! 3. `x2y_mean[i]` / `y2x_mean[j]`: mean cosine of a sentence to its k neighbours. A
//!    candidate `(x, y)` scores `margin(cos(x, y), (x2y_mean[x] + y2x_mean[y]) / 2)`; the
//!    ratio margin is `a / b`. Each sentence keeps its best-scoring neighbour among its k
//!    (first on ties, as `argmax`).
//! 4. **Retrieval**: `fwd` = every source with its best target; `bwd` = every target with
//!    its best source; `intersect` = forward pairs that are also backward pairs (forward
//!    score); `max` = both lists merged, sorted by decreasing score, kept greedily when
//!    neither side is taken yet, and written only when the score is `> 0` (mine_bitexts'
//!    default `--threshold 0`, which bucc.sh keeps). LASER's default, and BUCC's, is `max`.
//! 5. **Ids** (`bucc.py`): each side maps its *stripped* sentence text to its id, and a
//!    text that occurs more than once on a side is **removed** from the map, so a candidate
//!    involving a repeated sentence is dropped (its gold pairs stay in the recall
//!    denominator). A pair seen twice keeps its highest score.
//! 6. **Threshold** (`BuccOptimize`): candidates sorted by decreasing score (stable), P/R/F1
//!    against the gold at every cut-off; at each strictly better F1 the threshold becomes
//!    halfway between this candidate's score and the next one's. Extraction is then
//!    `score >= threshold` (`BuccExtract`), and P/R/F1 are those of the extraction (which
//!    can differ from the walk's best F1 when the next score ties).
//!
//! # The split: only the sample set, so the threshold is cross-validated
//! LASER tunes the threshold on the BUCC *training* gold and applies it to the test set.
//! Only the zh-en *sample* set is available here (no train/test), so two numbers are
//! reported per retrieval mode:
//! - `oracle`: the threshold optimised on the sample itself and scored on it — exactly what
//!   `bucc.py --gold` prints for the training set (optimistic);
//! - `cross_validated`: `folds`-fold cross-validation over *source sentence ids*. The
//!   source sentences that occur in a gold pair and the others are each shuffled (ChaCha8,
//!   the benchmark seed) and dealt round-robin into the folds, so every fold holds
//!   ⌊g/k⌋ or ⌈g/k⌉ gold pairs. Mining uses no gold and runs once on the whole set; for
//!   each fold the threshold is chosen by `BuccOptimize` on the candidates and gold pairs
//!   whose source is in the other folds, and applied (`>=`) to the candidates whose source
//!   is in the held-out fold. Counts are pooled over the folds: precision = Σ correct /
//!   Σ extracted, recall = Σ correct / |gold|. This is the honest number and the headline.
//!
//! Differences from LASER, all outside what the numbers depend on in practice: scores are
//! computed in f64 from the f32 cosines (LASER divides in f32); `max` sorts with a stable
//! sort (numpy's `argsort` default is not stable, so LASER's order among exactly equal
//! scores is unspecified); when the best F1 is reached at the very last candidate
//! `BuccOptimize` would index past the end (an `IndexError`), here the threshold is that
//! last score; `strip()` is Rust's `trim()` (Unicode White_Space; Python also strips
//! U+001C..U+001F).
//!
//! Items: per source line, the true positives, false positives and false negatives it adds
//! to the cross-validated counts (its candidates extracted at its fold's threshold; its gold
//! pairs not extracted), a `Counts` group per language pair and retrieval mode
//! (`zh-en/max`; the headline's mode weighs 1, the others 0): the F1 of the summed counts is
//! the pooled cross-validated F1.

use super::def::{
    no_side_datasets, parses_as, CheckedParams, Context, Outcome, ProtocolDef, ScoresDef,
};
use crate::benchmark::Benchmark;
use crate::classify::mlp::seeded_rng;
use crate::error::BenchError;
use crate::items::{Group, Items, Outcomes};
use crate::knn::{top_k, KnnError, KnnOptions, Metric};
use crate::metrics::Prf;
use harness_data::loaders::bucc;
use harness_data::records::{IdSentence, MiningSet};
use harness_embed::matrix::Matrix;
use rand::seq::SliceRandom;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, HashMap, HashSet};

/// Random stream of the fold assignment (under the benchmark seed).
const STREAM_FOLDS: u64 = 0xB0CC;

/// LASER's margin functions (`mine_bitexts.py --margin`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Margin {
    /// `cos / mean` (the paper's choice).
    Ratio,
    /// `cos − mean`.
    Distance,
    /// `cos` (no margin).
    Absolute,
}

impl Margin {
    fn apply(self, a: f64, b: f64) -> f64 {
        match self {
            Margin::Ratio => a / b,
            Margin::Distance => a - b,
            Margin::Absolute => a,
        }
    }
}

/// LASER's retrieval modes (`mine_bitexts.py --retrieval`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Retrieval {
    Fwd,
    Bwd,
    Max,
    Intersect,
}

impl Retrieval {
    /// Every mode, in the order the result lists them.
    pub const ALL: [Retrieval; 4] = [
        Retrieval::Max,
        Retrieval::Fwd,
        Retrieval::Bwd,
        Retrieval::Intersect,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Retrieval::Fwd => "fwd",
            Retrieval::Bwd => "bwd",
            Retrieval::Max => "max",
            Retrieval::Intersect => "intersect",
        }
    }
}

/// `params:` of a `bucc-mining` benchmark.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct BuccParams {
    /// Neighbours each way (LASER `-k 4`).
    pub k: usize,
    /// Margin function (LASER `--margin ratio`).
    pub margin: Margin,
    /// The mode whose cross-validated F1 is the headline (LASER `--retrieval max`); every
    /// mode is reported.
    pub retrieval: Retrieval,
    /// Folds of the threshold cross-validation (≥ 2).
    pub folds: usize,
}

impl Default for BuccParams {
    fn default() -> Self {
        BuccParams {
            k: 4,
            margin: Margin::Ratio,
            retrieval: Retrieval::Max,
            folds: 5,
        }
    }
}

/// One mined pair: rows of the unified source and target sentences, and its margin score.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Mined {
    pub src: usize,
    pub trg: usize,
    pub score: f64,
}

/// The output of mining in every retrieval mode (rows of the unified sentences).
#[derive(Debug, Clone, PartialEq)]
pub struct Mining {
    pub fwd: Vec<Mined>,
    pub bwd: Vec<Mined>,
    pub max: Vec<Mined>,
    pub intersect: Vec<Mined>,
}

impl Mining {
    pub fn mode(&self, r: Retrieval) -> &[Mined] {
        match r {
            Retrieval::Fwd => &self.fwd,
            Retrieval::Bwd => &self.bwd,
            Retrieval::Max => &self.max,
            Retrieval::Intersect => &self.intersect,
        }
    }
}

/// `mine_bitexts.py --mode mine` on L2-normalised embeddings `x` (source) and `y` (target).
pub fn mine(x: &Matrix, y: &Matrix, k: usize, margin: Margin) -> Result<Mining, KnnError> {
    let opts = KnnOptions::default();
    let x2y = top_k(x, y, k, Metric::InnerProduct, &opts)?;
    let y2x = top_k(y, x, k, Metric::InnerProduct, &opts)?;
    let x2y_mean = x2y.mean_scores();
    let y2x_mean = y2x.mean_scores();
    // score_candidates + argmax: the best of each row's k candidates (first on ties).
    let best = |knn: &crate::knn::TopK, fwd_mean: &[f64], bwd_mean: &[f64]| {
        knn.iter()
            .enumerate()
            .map(|(i, row)| {
                let mut best: Option<(usize, f64)> = None;
                for n in row {
                    let s =
                        margin.apply(f64::from(n.score), (fwd_mean[i] + bwd_mean[n.index]) / 2.0);
                    if best.is_none_or(|(_, b)| s > b) {
                        best = Some((n.index, s));
                    }
                }
                best
            })
            .collect::<Vec<_>>()
    };
    let fwd_best = best(&x2y, &x2y_mean, &y2x_mean);
    let bwd_best = best(&y2x, &y2x_mean, &x2y_mean);

    let fwd: Vec<Mined> = fwd_best
        .iter()
        .enumerate()
        .filter_map(|(i, b)| {
            b.map(|(j, s)| Mined {
                src: i,
                trg: j,
                score: s,
            })
        })
        .collect();
    let bwd: Vec<Mined> = bwd_best
        .iter()
        .enumerate()
        .filter_map(|(j, b)| {
            b.map(|(i, s)| Mined {
                src: i,
                trg: j,
                score: s,
            })
        })
        .collect();
    let intersect: Vec<Mined> = fwd
        .iter()
        .filter(|m| bwd_best[m.trg].is_some_and(|(i, _)| i == m.src))
        .copied()
        .collect();
    // max: forward then backward entries, by decreasing score, greedily one-to-one; written
    // when score > 0 (the default `--threshold 0`), but marked as seen either way.
    let all: Vec<Mined> = fwd.iter().chain(&bwd).copied().collect();
    let mut order: Vec<usize> = (0..all.len()).collect();
    order.sort_by(|&a, &b| all[b].score.total_cmp(&all[a].score));
    let (mut seen_src, mut seen_trg) = (vec![false; x.rows], vec![false; y.rows]);
    let mut max = Vec::new();
    for i in order {
        let m = all[i];
        if !seen_src[m.src] && !seen_trg[m.trg] {
            seen_src[m.src] = true;
            seen_trg[m.trg] = true;
            if m.score > 0.0 {
                max.push(m);
            }
        }
    }
    Ok(Mining {
        fwd,
        bwd,
        max,
        intersect,
    })
}

/// `TextLoadUnify` with `--unify`: the distinct texts in order of first occurrence, and for
/// each line the row of its text.
pub fn unify<'a>(texts: impl IntoIterator<Item = &'a str>) -> (Vec<&'a str>, Vec<usize>) {
    let mut index: HashMap<&str, usize> = HashMap::new();
    let mut unique = Vec::new();
    let inds = texts
        .into_iter()
        .map(|t| {
            *index.entry(t).or_insert_with(|| {
                unique.push(t);
                unique.len() - 1
            })
        })
        .collect();
    (unique, inds)
}

/// `bucc.py`'s `sent2id`, as line indices: stripped text → line, texts occurring more than
/// once removed.
fn sent2line(sentences: &[IdSentence]) -> HashMap<&str, usize> {
    let mut map = HashMap::new();
    let mut repeated = HashSet::new();
    for (i, s) in sentences.iter().enumerate() {
        let t = s.text.trim();
        if map.contains_key(t) {
            repeated.insert(t);
        } else {
            map.insert(t, i);
        }
    }
    for t in repeated {
        map.remove(t);
    }
    map
}

/// A candidate pair of sentence *lines* (source, target) with its score.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Candidate {
    pub src: usize,
    pub trg: usize,
    pub score: f64,
}

/// `bucc.py`'s `candidate2score`: mined pairs mapped to lines through `sent2id`, pairs
/// whose text was repeated dropped, a pair seen twice keeping its max score (insertion
/// order kept, as a Python dict does).
fn to_candidates(
    mined: &[Mined],
    src_unique: &[&str],
    trg_unique: &[&str],
    src_map: &HashMap<&str, usize>,
    trg_map: &HashMap<&str, usize>,
) -> Vec<Candidate> {
    let mut out: Vec<Candidate> = Vec::new();
    let mut at: HashMap<(usize, usize), usize> = HashMap::new();
    for m in mined {
        let (Some(&s), Some(&t)) = (
            src_map.get(src_unique[m.src].trim()),
            trg_map.get(trg_unique[m.trg].trim()),
        ) else {
            continue;
        };
        match at.get(&(s, t)) {
            Some(&p) => out[p].score = out[p].score.max(m.score),
            None => {
                at.insert((s, t), out.len());
                out.push(Candidate {
                    src: s,
                    trg: t,
                    score: m.score,
                });
            }
        }
    }
    out
}

/// `BuccOptimize`: the F1-optimal threshold of `candidates` against `gold` (`n_gold` pairs).
pub fn optimize(candidates: &[Candidate], gold: &HashSet<(usize, usize)>, n_gold: usize) -> f64 {
    let mut items: Vec<&Candidate> = candidates.iter().collect();
    items.sort_by(|a, b| b.score.total_cmp(&a.score));
    let (mut nextract, mut ncorrect) = (0usize, 0usize);
    let mut threshold = 0.0;
    let mut best_f1 = 0.0;
    for (i, c) in items.iter().enumerate() {
        nextract += 1;
        if gold.contains(&(c.src, c.trg)) {
            ncorrect += 1;
        }
        if ncorrect > 0 {
            let precision = ncorrect as f64 / nextract as f64;
            let recall = ncorrect as f64 / n_gold as f64;
            let f1 = 2.0 * precision * recall / (precision + recall);
            if f1 > best_f1 {
                best_f1 = f1;
                threshold = match items.get(i + 1) {
                    Some(next) => (c.score + next.score) / 2.0,
                    None => c.score,
                };
            }
        }
    }
    threshold
}

/// Counts of an extraction.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Extraction {
    pub extracted: usize,
    pub correct: usize,
}

/// `BuccExtract`: candidates with `score >= threshold`, and how many are gold.
pub fn extract(
    candidates: &[Candidate],
    gold: &HashSet<(usize, usize)>,
    threshold: f64,
) -> Extraction {
    let mut e = Extraction::default();
    for c in candidates.iter().filter(|c| c.score >= threshold) {
        e.extracted += 1;
        e.correct += usize::from(gold.contains(&(c.src, c.trg)));
    }
    e
}

fn prf(e: Extraction, n_gold: usize) -> Prf {
    Prf::from_counts(
        e.correct,
        e.extracted - e.correct,
        n_gold.saturating_sub(e.correct),
    )
}

/// Fold of every source line: gold-bearing sources and the others each shuffled and dealt
/// round-robin (see the module documentation).
pub fn assign_folds(
    n_src: usize,
    gold: &HashSet<(usize, usize)>,
    folds: usize,
    seed: u64,
) -> Vec<usize> {
    let gold_src: HashSet<usize> = gold.iter().map(|g| g.0).collect();
    let (mut with, mut without): (Vec<usize>, Vec<usize>) =
        (0..n_src).partition(|i| gold_src.contains(i));
    let mut rng = seeded_rng(seed, STREAM_FOLDS);
    with.shuffle(&mut rng);
    without.shuffle(&mut rng);
    let mut fold = vec![0; n_src];
    for group in [with, without] {
        for (pos, i) in group.into_iter().enumerate() {
            fold[i] = pos % folds;
        }
    }
    fold
}

/// Result of the cross-validated threshold.
#[derive(Debug, Clone, PartialEq)]
pub struct CrossValidated {
    pub thresholds: Vec<f64>,
    pub pooled: Extraction,
    pub prf: Prf,
}

/// Threshold by cross-validation over source folds (module documentation).
pub fn cross_validate(
    candidates: &[Candidate],
    gold: &HashSet<(usize, usize)>,
    fold_of_src: &[usize],
    folds: usize,
) -> CrossValidated {
    let mut thresholds = Vec::with_capacity(folds);
    let mut pooled = Extraction::default();
    for f in 0..folds {
        let (held, train): (Vec<Candidate>, Vec<Candidate>) =
            candidates.iter().partition(|c| fold_of_src[c.src] == f);
        let train_gold: HashSet<(usize, usize)> = gold
            .iter()
            .filter(|g| fold_of_src[g.0] != f)
            .copied()
            .collect();
        let th = optimize(&train, &train_gold, train_gold.len());
        let e = extract(&held, gold, th);
        pooled.extracted += e.extracted;
        pooled.correct += e.correct;
        thresholds.push(th);
    }
    CrossValidated {
        thresholds,
        pooled,
        prf: prf(pooled, gold.len()),
    }
}

/// Per source line, its contribution to the counts of [`cross_validate`]: candidates with
/// that source extracted at its fold's threshold (true or false positives), and its gold
/// pairs not extracted (false negatives).
pub fn source_counts(
    candidates: &[Candidate],
    gold: &HashSet<(usize, usize)>,
    fold_of_src: &[usize],
    thresholds: &[f64],
) -> Outcomes {
    let n = fold_of_src.len();
    let (mut tp, mut fp, mut fn_) = (vec![0u32; n], vec![0u32; n], vec![0u32; n]);
    for &(s, _) in gold {
        fn_[s] += 1;
    }
    for c in candidates {
        if c.score >= thresholds[fold_of_src[c.src]] {
            if gold.contains(&(c.src, c.trg)) {
                tp[c.src] += 1;
                fn_[c.src] -= 1;
            } else {
                fp[c.src] += 1;
            }
        }
    }
    Outcomes::Counts { tp, fp, fn_ }
}

/// The `scores` of a `bucc-mining` result: per language pair (`zh-en`).
pub type BuccScores = BTreeMap<String, BuccPairScores>;

/// What one language pair's set holds and what each retrieval mode mined from it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct BuccPairScores {
    /// Lines of the source file.
    pub source_sentences: usize,
    /// Lines of the target file.
    pub target_sentences: usize,
    /// Distinct source sentences (embedded once each).
    pub source_unique: usize,
    /// Distinct target sentences.
    pub target_unique: usize,
    /// Source lines whose text another line repeats.
    pub source_repeated_lines: usize,
    /// Target lines whose text another line repeats.
    pub target_repeated_lines: usize,
    /// Gold pairs.
    pub gold: usize,
    /// Gold pairs no candidate can reach (a repeated line on either side).
    pub gold_unreachable: usize,
    /// Per retrieval mode (`fwd`, `bwd`, `max`, `intersect`).
    pub modes: BTreeMap<String, ModeScores>,
}

/// One retrieval mode's candidates and their scores.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ModeScores {
    /// Pairs the mode mined.
    pub mined: usize,
    /// Of them, candidates between unrepeated lines.
    pub candidates: usize,
    /// With the threshold optimised and scored on the same set (LASER's bucc.py).
    pub oracle: OracleScores,
    /// With the threshold chosen per fold by cross-validation: the headline.
    pub cross_validated: CrossValidatedScores,
}

/// Extraction at the threshold optimised on the whole set (P, R, F1 in %).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct OracleScores {
    pub threshold: f64,
    pub extracted: usize,
    pub correct: usize,
    pub precision: f64,
    pub recall: f64,
    pub f1: f64,
}

/// Extraction with each fold's threshold chosen on the other folds, counts pooled
/// (P, R, F1 in %).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct CrossValidatedScores {
    /// One per fold.
    pub thresholds: Vec<f64>,
    pub extracted: usize,
    pub correct: usize,
    pub precision: f64,
    pub recall: f64,
    pub f1: f64,
}

/// Everything measured on one language pair.
#[derive(Debug, Clone, PartialEq)]
pub struct PairResult {
    pub scores: BuccPairScores,
    /// Cross-validated F1 (%) of each mode.
    pub cv_f1: HashMap<Retrieval, f64>,
    /// Per-source-line counts of each mode's cross-validated extraction ([`source_counts`]),
    /// in [`Retrieval::ALL`]'s order.
    pub outcomes: Vec<(Retrieval, Outcomes)>,
}

fn pct(x: f64) -> f64 {
    100.0 * x
}

/// Mines one set and scores every retrieval mode.
pub fn evaluate_set(
    ctx: &Context,
    set: &MiningSet,
    params: &BuccParams,
) -> Result<PairResult, BenchError> {
    let (src_unique, _) = unify(set.source.iter().map(|s| s.text.as_str()));
    let (trg_unique, _) = unify(set.target.iter().map(|s| s.text.as_str()));
    let mut x = ctx.embed(&src_unique)?;
    let mut y = ctx.embed(&trg_unique)?;
    x.l2_normalize_rows();
    y.l2_normalize_rows();
    let mining = mine(&x, &y, params.k, params.margin).map_err(|e| ctx.error(e.to_string()))?;

    let src_map = sent2line(&set.source);
    let trg_map = sent2line(&set.target);
    let src_line: HashMap<&str, usize> = set
        .source
        .iter()
        .enumerate()
        .map(|(i, s)| (s.id.as_str(), i))
        .collect();
    let trg_line: HashMap<&str, usize> = set
        .target
        .iter()
        .enumerate()
        .map(|(i, s)| (s.id.as_str(), i))
        .collect();
    let gold: HashSet<(usize, usize)> = set
        .gold
        .iter()
        .map(
            |(s, t)| match (src_line.get(s.as_str()), trg_line.get(t.as_str())) {
                (Some(&a), Some(&b)) => Ok((a, b)),
                _ => Err(ctx.error(format!("gold pair {s}\t{t} names an unknown id"))),
            },
        )
        .collect::<Result<_, _>>()?;
    let unreachable = gold
        .iter()
        .filter(|&&(s, t)| {
            src_map.get(set.source[s].text.trim()) != Some(&s)
                || trg_map.get(set.target[t].text.trim()) != Some(&t)
        })
        .count();
    let folds = assign_folds(set.source.len(), &gold, params.folds, ctx.seed);

    let mut modes = BTreeMap::new();
    let mut cv_f1 = HashMap::new();
    let mut outcomes = Vec::with_capacity(Retrieval::ALL.len());
    for r in Retrieval::ALL {
        let cands = to_candidates(mining.mode(r), &src_unique, &trg_unique, &src_map, &trg_map);
        let th = optimize(&cands, &gold, gold.len());
        let oracle = extract(&cands, &gold, th);
        let o = prf(oracle, gold.len());
        let cv = cross_validate(&cands, &gold, &folds, params.folds);
        cv_f1.insert(r, pct(cv.prf.f1));
        outcomes.push((r, source_counts(&cands, &gold, &folds, &cv.thresholds)));
        modes.insert(
            r.name().to_string(),
            ModeScores {
                mined: mining.mode(r).len(),
                candidates: cands.len(),
                oracle: OracleScores {
                    threshold: th,
                    extracted: oracle.extracted,
                    correct: oracle.correct,
                    precision: pct(o.precision),
                    recall: pct(o.recall),
                    f1: pct(o.f1),
                },
                cross_validated: CrossValidatedScores {
                    thresholds: cv.thresholds,
                    extracted: cv.pooled.extracted,
                    correct: cv.pooled.correct,
                    precision: pct(cv.prf.precision),
                    recall: pct(cv.prf.recall),
                    f1: pct(cv.prf.f1),
                },
            },
        );
    }
    let scores = BuccPairScores {
        source_sentences: set.source.len(),
        target_sentences: set.target.len(),
        source_unique: src_unique.len(),
        target_unique: trg_unique.len(),
        source_repeated_lines: set.source.len() - src_map.len(),
        target_repeated_lines: set.target.len() - trg_map.len(),
        gold: gold.len(),
        gold_unreachable: unreachable,
        modes,
    };
    Ok(PairResult {
        scores,
        cv_f1,
        outcomes,
    })
}

impl CheckedParams for BuccParams {
    fn check(&self, benchmark: &Benchmark) -> Result<(), String> {
        super::def::pairs_well_formed(benchmark)?;
        if self.k == 0 {
            return Err("params.k must be at least 1".into());
        }
        if self.folds < 2 {
            return Err("params.folds must be at least 2".into());
        }
        Ok(())
    }
}

/// `bucc-mining`, defined once: [`super::ALL`] lists it.
pub const DEF: ProtocolDef = ProtocolDef {
    name: "bucc-mining",
    check_params: parses_as::<BuccParams>,
    side_datasets: no_side_datasets,
    run,
    scores: ScoresDef::of::<BuccScores>(),
};

/// The `bucc-mining` protocol.
pub fn run(ctx: &Context) -> Result<Outcome, BenchError> {
    let params: BuccParams = ctx.params()?;
    let pairs = ctx.languages_or(vec!["zh-en".to_string()]);
    let mut per_pair = BuccScores::new();
    let mut headline = Vec::new();
    let mut groups = Vec::new();
    for pair in &pairs {
        let (src, trg) = pair
            .split_once('-')
            .ok_or_else(|| ctx.error(format!("language pair `{pair}` is not `<src>-<trg>`")))?;
        let set = bucc::load(ctx.dataset_dir, src, trg, &ctx.benchmark.split)?;
        let r = evaluate_set(ctx, &set, &params)?;
        headline.push(r.cv_f1[&params.retrieval]);
        per_pair.insert(pair.clone(), r.scores);
        for (mode, outcomes) in r.outcomes {
            groups.push(Group {
                name: format!("{pair}/{}", mode.name()),
                weight: if mode == params.retrieval { 1.0 } else { 0.0 },
                outcomes,
            });
        }
    }
    let main_score = headline.iter().sum::<f64>() / headline.len().max(1) as f64;
    Ok(Outcome {
        main_metric: format!("f1_cv_{}", params.retrieval.name()),
        main_score,
        scores: ctx.scores(&per_pair)?,
        params: serde_json::to_value(&params).map_err(|e| ctx.error(e.to_string()))?,
        notes: vec![
            format!(
                "Only the BUCC 2018 {} split exists here (no train/test): the headline is the F1 \
                 with the threshold chosen by {}-fold cross-validation over source sentences \
                 (pooled counts); `oracle` is the threshold optimised and scored on the same set, \
                 as LASER's bucc.py does on the training set. Not comparable in number with \
                 LASER's test-set F1.",
                ctx.benchmark.split, params.folds
            ),
            "Sentences repeated on one side are embedded once (mine_bitexts --unify) and dropped \
             from the candidates (bucc.py's sent2id), as in LASER."
                .to_string(),
        ],
        items: Some(Items::mean_of(groups)),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::protocols::fake_encoder::TableEncoder;
    use crate::protocols::test_support::{run_real_with, Reuse};
    use crate::registry::Registry;

    fn c(src: usize, trg: usize, score: f64) -> Candidate {
        Candidate { src, trg, score }
    }

    #[test]
    fn threshold_walk_is_bucc_optimize() {
        // Sorted: 1.3 g, 1.2 n, 1.2 g, 1.1 g, 1.0 n (given out of order); 4 gold pairs.
        let cands = [
            c(3, 3, 1.1),
            c(0, 0, 1.3),
            c(1, 9, 1.2),
            c(2, 2, 1.2),
            c(4, 8, 1.0),
        ];
        let gold: HashSet<(usize, usize)> = [(0, 0), (2, 2), (3, 3), (5, 5)].into();
        // F1 along the walk: 0.4, 1/3, 4/7, 0.75, 2/3 → best after the 4th: (1.1 + 1.0) / 2.
        let th = optimize(&cands, &gold, 4);
        assert!((th - 1.05).abs() < 1e-12, "{th}");
        let e = extract(&cands, &gold, th);
        assert_eq!(
            e,
            Extraction {
                extracted: 4,
                correct: 3
            }
        );
        let p = prf(e, 4);
        assert!((p.precision - 0.75).abs() < 1e-12 && (p.f1 - 0.75).abs() < 1e-12);

        // A tie right after the optimum: the threshold lands ON the tied score and `>=`
        // extracts the tied wrong pair too, as bucc.py does (walk F1 1.0, reported 0.8).
        let cands = [c(0, 0, 1.3), c(1, 1, 1.2), c(2, 7, 1.2)];
        let gold: HashSet<(usize, usize)> = [(0, 0), (1, 1)].into();
        let th = optimize(&cands, &gold, 2);
        assert_eq!(th, 1.2);
        let p = prf(extract(&cands, &gold, th), 2);
        assert!((p.precision - 2.0 / 3.0).abs() < 1e-12 && p.recall == 1.0);
        assert!((p.f1 - 0.8).abs() < 1e-12);

        // Best at the last candidate: threshold = its score (LASER would raise IndexError).
        let cands = [c(0, 5, 1.5), c(1, 1, 1.1)];
        let gold: HashSet<(usize, usize)> = [(1, 1)].into();
        assert_eq!(optimize(&cands, &gold, 1), 1.1);
        // No correct candidate: threshold stays 0, everything non-negative is extracted.
        assert_eq!(optimize(&cands, &HashSet::new(), 3), 0.0);
    }

    #[test]
    fn duplicates_are_unified_and_dropped_and_pairs_keep_their_max() {
        let (u, inds) = unify(["a", "b", "a", "c", "b"]);
        assert_eq!((u, inds), (vec!["a", "b", "c"], vec![0, 1, 0, 2, 1]));
        let sents: Vec<IdSentence> = ["x", " y", "y ", "z", "x"]
            .iter()
            .enumerate()
            .map(|(i, t)| IdSentence {
                id: format!("s{i}"),
                text: t.to_string(),
            })
            .collect();
        // "x" twice and "y" twice after stripping: only "z" keeps an id.
        let m = sent2line(&sents);
        assert_eq!(m.len(), 1);
        assert_eq!(m["z"], 3);
        let src_u = ["x", "z", "w"];
        let trg_u = ["p", "q"];
        let sm: HashMap<&str, usize> = [("z", 3), ("w", 4)].into();
        let tm: HashMap<&str, usize> = [("p", 0), ("q", 1)].into();
        let mined = [
            Mined {
                src: 0,
                trg: 0,
                score: 2.0,
            }, // repeated source: dropped
            Mined {
                src: 1,
                trg: 1,
                score: 1.0,
            },
            Mined {
                src: 2,
                trg: 0,
                score: 1.5,
            },
            Mined {
                src: 1,
                trg: 1,
                score: 1.2,
            }, // same pair again: max kept, first position
        ];
        let got = to_candidates(&mined, &src_u, &trg_u, &sm, &tm);
        assert_eq!(got, vec![c(3, 1, 1.2), c(4, 0, 1.5)]);
    }

    /// The mining of `mine` against a direct transcription of mine_bitexts.py on the full
    /// score matrix.
    #[test]
    fn mining_matches_a_brute_force_transcription() {
        use rand::Rng;
        let mut rng = seeded_rng(3, 0);
        let mut rand_matrix = |n: usize| {
            let mut m = Matrix::from_vec(
                n,
                6,
                (0..n * 6).map(|_| rng.random::<f32>() - 0.3).collect(),
            );
            m.l2_normalize_rows();
            m
        };
        let x = rand_matrix(17);
        let y = rand_matrix(23);
        let k = 4;
        let got = mine(&x, &y, k, Margin::Ratio).unwrap();
        let dot = |a: &[f32], b: &[f32]| a.iter().zip(b).map(|(p, q)| p * q).sum::<f32>();
        let knn = |a: &Matrix, b: &Matrix| -> Vec<Vec<(usize, f32)>> {
            (0..a.rows)
                .map(|i| {
                    let mut v: Vec<(usize, f32)> =
                        (0..b.rows).map(|j| (j, dot(a.row(i), b.row(j)))).collect();
                    v.sort_by(|p, q| q.1.total_cmp(&p.1).then(p.0.cmp(&q.0)));
                    v.truncate(k);
                    v
                })
                .collect()
        };
        let (xy, yx) = (knn(&x, &y), knn(&y, &x));
        let mean = |v: &[Vec<(usize, f32)>]| -> Vec<f64> {
            v.iter()
                .map(|r| r.iter().map(|p| f64::from(p.1)).sum::<f64>() / r.len() as f64)
                .collect()
        };
        let (mx, my) = (mean(&xy), mean(&yx));
        let best = |v: &[Vec<(usize, f32)>], fm: &[f64], bm: &[f64]| -> Vec<(usize, f64)> {
            v.iter()
                .enumerate()
                .map(|(i, r)| {
                    let s: Vec<f64> = r
                        .iter()
                        .map(|&(j, cs)| f64::from(cs) / ((fm[i] + bm[j]) / 2.0))
                        .collect();
                    let a = (0..s.len()).fold(0, |b, t| if s[t] > s[b] { t } else { b });
                    (r[a].0, s[a])
                })
                .collect()
        };
        let (fb, bb) = (best(&xy, &mx, &my), best(&yx, &my, &mx));
        let close = |a: &[Mined], b: &[(usize, usize, f64)]| {
            assert_eq!(a.len(), b.len());
            for (m, &(s, t, sc)) in a.iter().zip(b) {
                assert_eq!((m.src, m.trg), (s, t));
                assert!((m.score - sc).abs() < 1e-5);
            }
        };
        let fwd: Vec<_> = fb
            .iter()
            .enumerate()
            .map(|(i, &(j, s))| (i, j, s))
            .collect();
        let bwd: Vec<_> = bb
            .iter()
            .enumerate()
            .map(|(j, &(i, s))| (i, j, s))
            .collect();
        close(&got.fwd, &fwd);
        close(&got.bwd, &bwd);
        let inter: Vec<_> = fwd
            .iter()
            .filter(|&&(i, j, _)| bb[j].0 == i)
            .copied()
            .collect();
        close(&got.intersect, &inter);
        let mut all: Vec<_> = fwd.iter().chain(&bwd).copied().collect();
        all.sort_by(|a, b| b.2.total_cmp(&a.2));
        let (mut ss, mut st) = (HashSet::new(), HashSet::new());
        let mut max = Vec::new();
        for (i, j, s) in all {
            if !ss.contains(&i) && !st.contains(&j) {
                ss.insert(i);
                st.insert(j);
                if s > 0.0 {
                    max.push((i, j, s));
                }
            }
        }
        close(&got.max, &max);
        // One-to-one.
        let srcs: HashSet<usize> = got.max.iter().map(|m| m.src).collect();
        assert_eq!(srcs.len(), got.max.len());
    }

    #[test]
    fn folds_partition_sources_and_balance_gold() {
        let gold: HashSet<(usize, usize)> = (0..23).map(|i| (i * 7, i)).collect();
        let f = assign_folds(200, &gold, 5, 9);
        assert_eq!(f.len(), 200);
        let mut per_fold = [0usize; 5];
        for g in &gold {
            per_fold[f[g.0]] += 1;
        }
        assert!(per_fold.iter().all(|&n| n == 4 || n == 5), "{per_fold:?}");
        assert_eq!(f, assign_folds(200, &gold, 5, 9));
        assert_ne!(f, assign_folds(200, &gold, 5, 10));
        // CV on perfectly separable candidates: every fold learns a separating threshold.
        let cands: Vec<Candidate> = (0..200)
            .map(|i| {
                let g = gold.iter().find(|p| p.0 == i);
                match g {
                    Some(&(s, t)) => c(s, t, 2.0 + i as f64 / 1000.0),
                    None => c(i, 999, 1.0 + i as f64 / 1000.0),
                }
            })
            .collect();
        let cv = cross_validate(&cands, &gold, &f, 5);
        assert_eq!(
            cv.pooled,
            Extraction {
                extracted: 23,
                correct: 23
            }
        );
        assert_eq!(cv.prf.f1, 1.0);
        // Per source line: each gold source one true positive, nothing else.
        let Outcomes::Counts { tp, fp, fn_ } = source_counts(&cands, &gold, &f, &cv.thresholds)
        else {
            panic!("counts")
        };
        assert_eq!(tp.len(), 200);
        assert_eq!(tp.iter().sum::<u32>(), 23);
        assert_eq!(fp.iter().chain(&fn_).sum::<u32>(), 0);
    }

    #[test]
    fn end_to_end_on_a_tiny_set_with_a_repeated_sentence() {
        // Three true pairs on distinct axes, a repeated source sentence ("dup", gold with t2)
        // and an unrelated target. k = 1: a mutual nearest pair scores exactly 1.
        let v = |a: f32, b: f32, c: f32| vec![a, b, c];
        let rows: HashMap<String, Vec<f32>> = [
            ("A", v(1.0, 0.0, 0.0)),
            ("B", v(0.0, 1.0, 0.0)),
            ("dup", v(0.0, 0.0, 1.0)),
            ("a", v(1.0, 0.0, 0.0)),
            ("b", v(0.0, 1.0, 0.0)),
            ("c", v(0.0, 0.0, 1.0)),
            ("z", v(0.6, 0.8, 0.0)),
        ]
        .into_iter()
        .map(|(k, r)| (k.to_string(), r))
        .collect();
        let enc = TableEncoder::new(3, rows);
        let ids = |p: &str, t: &[&str]| -> Vec<IdSentence> {
            t.iter()
                .enumerate()
                .map(|(i, s)| IdSentence {
                    id: format!("{p}{i}"),
                    text: s.to_string(),
                })
                .collect()
        };
        let set = MiningSet {
            source_lang: "xx".into(),
            target_lang: "en".into(),
            source: ids("s", &["A", "dup", "B", "dup"]),
            target: ids("t", &["b", "z", "c", "a"]),
            gold: vec![
                ("s0".into(), "t3".into()),
                ("s2".into(), "t0".into()),
                ("s1".into(), "t2".into()),
            ],
        };
        let bench = Registry::load().unwrap().get("bucc").unwrap().clone();
        let ctx = Context {
            benchmark: &bench,
            dataset_dir: std::path::Path::new("/nonexistent"),
            side: &std::collections::BTreeMap::new(),
            encoder: &enc,
            seed: 1,
        };
        let params = BuccParams {
            k: 1,
            folds: 2,
            ..BuccParams::default()
        };
        let r = evaluate_set(&ctx, &set, &params).unwrap();
        assert_eq!(enc.asked(), 3 + 4, "unique sentences only");
        let s = &r.scores;
        assert_eq!(s.source_unique, 3);
        assert_eq!(s.source_repeated_lines, 2);
        assert_eq!(s.gold_unreachable, 1);
        // max: A–a, B–b, dup–c score 1; z's best source (B, cos 0.8) is taken. dup–c is
        // dropped (repeated source): 2 candidates, both gold; 3 gold → P 1, R 2/3.
        let max = &s.modes["max"];
        assert_eq!(max.mined, 3);
        assert_eq!(max.candidates, 2);
        assert_eq!(max.oracle.threshold, 1.0);
        assert_eq!(max.oracle.precision, 100.0);
        assert!((max.oracle.f1 - 80.0).abs() < 1e-9);
        // bwd adds z → B at 0.8 / ((0.8 + 1) / 2): a wrong candidate below the others.
        let bwd = &s.modes["bwd"];
        assert_eq!(bwd.candidates, 3);
        let z = 0.8 / 0.9;
        let th = bwd.oracle.threshold;
        assert!((th - (1.0 + z) / 2.0).abs() < 1e-6, "{th}");
        assert_eq!(s.modes["intersect"].candidates, 2);
        // Per source line counts: F1 of their sums is each mode's cross-validated F1.
        for (r, o) in &r.outcomes {
            let cv = &s.modes[r.name()].cross_validated;
            let f1 = 100.0 * o.metric(None);
            assert!((f1 - cv.f1).abs() < 1e-9, "{}", r.name());
            assert_eq!(o.len(), 4);
        }
    }

    fn report(o: &Outcome, secs: f64, what: &str) {
        let zh = &o.scores["zh-en"];
        eprintln!("bucc {what} ({secs:.1} s): main {:.2}", o.main_score);
        for r in Retrieval::ALL {
            let m = &zh["modes"][r.name()];
            let f = |part: &str, key: &str| m[part][key].as_f64().unwrap();
            eprintln!(
                "  {:9} cand {:6} oracle th {:.4} P {:.2} R {:.2} F1 {:.2} | cv P {:.2} R {:.2} F1 {:.2} th {}",
                r.name(),
                m["candidates"],
                f("oracle", "threshold"),
                f("oracle", "precision"),
                f("oracle", "recall"),
                f("oracle", "f1"),
                f("cross_validated", "precision"),
                f("cross_validated", "recall"),
                f("cross_validated", "f1"),
                m["cross_validated"]["thresholds"],
            );
        }
    }

    fn check(o: &Outcome) {
        let zh = &o.scores["zh-en"];
        assert_eq!(o.main_metric, "f1_cv_max");
        // Per source line counts of every mode; their sums are the pooled CV counts, and
        // the headline mode's F1 is the headline.
        let items = o.items.as_ref().unwrap();
        assert!((items.headline() - o.main_score).abs() < 1e-9);
        assert_eq!(items.groups.len(), 4);
        for (g, r) in items.groups.iter().zip(Retrieval::ALL) {
            assert_eq!(g.name, format!("zh-en/{}", r.name()));
            let Outcomes::Counts { tp, fp, fn_ } = &g.outcomes else {
                panic!("counts")
            };
            let cv = &zh["modes"][r.name()]["cross_validated"];
            let sum = |v: &[u32]| v.iter().map(|&x| u64::from(x)).sum::<u64>();
            assert_eq!(tp.len(), 8_624);
            assert_eq!(sum(tp), cv["correct"].as_u64().unwrap());
            assert_eq!(sum(tp) + sum(fp), cv["extracted"].as_u64().unwrap());
            assert_eq!(sum(tp) + sum(fn_), 257);
            let f1 = 100.0 * g.outcomes.metric(None);
            assert!((f1 - cv["f1"].as_f64().unwrap()).abs() < 1e-9);
        }
        assert_eq!(zh["gold"], 257);
        assert_eq!(zh["source_unique"], 8_624 - 9);
        assert_eq!(zh["target_unique"], 13_589 - 14);
        for r in Retrieval::ALL {
            let m = &zh["modes"][r.name()];
            let oracle = m["oracle"]["f1"].as_f64().unwrap();
            let cv = m["cross_validated"]["f1"].as_f64().unwrap();
            // The oracle threshold is optimised on the very set it is scored on.
            assert!(oracle >= cv - 1e-9, "{}: {oracle} < {cv}", r.name());
            assert!((0.0..=100.0).contains(&cv));
        }
        // Bag-of-n-grams across scripts (unsegmented Chinese against English): next to no
        // signal, far below LASER's ~92.
        assert!((0.0..40.0).contains(&o.main_score), "{}", o.main_score);
    }

    /// Debug-build smoke test on the real sample set (hashed-ngrams of dimension 16).
    #[test]
    fn real_bucc_sample_small_dim() {
        let (o, secs, _) = run_real_with("bucc", None, "hashed-ngrams:dim=16", Reuse::Memory);
        report(&o, secs, "dim 16");
        check(&o);
    }

    /// With the default hashed-ngrams (512 dimensions):
    /// `cargo test --release --lib protocols::bucc::tests::full -- --ignored --nocapture`.
    #[test]
    #[ignore]
    fn full_bucc_sample_hashed_ngrams() {
        let (o, secs, _) = run_real_with("bucc", None, "hashed-ngrams:dim=512", Reuse::Memory);
        report(&o, secs, "hashed-ngrams");
        check(&o);
    }
}
