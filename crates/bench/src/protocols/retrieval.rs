//! `retrieval-p1`: cross-lingual retrieval precision at 1 among K random distractors.
//!
//! Reference: multilingual USE (Chidambaram et al. 2019, "Learning Cross-Lingual Sentence
//! Representations via a Multi-task Dual-Encoder Model"), §3.4 "Cross-lingual Retrieval",
//! which follows Guo et al. (2018) and Henderson et al. (2017): "Performance is scored by
//! checking if a source sentence's target translation ranks in the top N scored candidates
//! when considering K other randomly selected target sentences. We set K to 999." No
//! reference code was released (nor Guo et al.'s evaluation).
//!
//! # The protocol as implemented
//! For every pair `src-tgt` of the declaration, line `i` of `src` translates line `i` of
//! `tgt` (a pool of `n` translation pairs). For each source sentence `i`, the candidates are
//! its true translation plus `K = distractors` target sentences drawn uniformly without
//! replacement from the other `n − 1` (seeded: see [`hits_at_1`]); the query scores a hit
//! when its true translation scores strictly higher than every distractor. A tie with a
//! distractor counts as a miss (a duplicate of the true translation in the pool is one: the
//! encoder cannot tell them apart, and P@1 must not reward the lower line number). When the
//! pool is too small (`n − 1 ≤ K`), every other sentence is a candidate and nothing is
//! sampled. Both directions are measured (`src→tgt` and `tgt→src`).
//!
//! Scores are cosine similarities by default; the paper (footnote 7) uses the dot product
//! of its encoder's outputs, which are close to unit norm: `score: dot` gives that.
//!
//! # Data
//! The paper used held-out pairs of its own web-mined training data (not public); this
//! runs on the declaration's dataset instead: Tatoeba (`tatoeba-laser-v1`, pairs
//! `xxx-eng` or `eng-xxx`, up to 1000 pairs each) or FLORES-200 (`flores200-devtest`, any
//! `lang_Script-lang_Script` pair, 1012 lines).
//!
//! # Cost
//! When `n × n` scores fit in [`FULL_MATRIX_LIMIT`] entries, one GEMM per direction gives
//! all of them (Tatoeba: 1000 × 1000); otherwise each query scores only its `K + 1`
//! candidates (`n · (K + 1) · d` multiply-adds).
//! `main_score` = mean over pairs of the mean of both directions, ×100.
//!
//! Items: a `Correct` group per pair and direction (`deu-eng/deu->eng`, weight 1 each: the
//! headline is their mean), a hit or a miss per query with the candidate it ranked first
//! (its own line on a hit, else the best-scoring distractor; `-1` when none has a score).

use super::def::{
    no_side_datasets, parses_as, stream_of, CheckedParams, Context, Outcome, ProtocolDef, ScoresDef,
};
use crate::benchmark::Benchmark;
use crate::classify::mlp::seeded_rng;
use crate::error::BenchError;
use crate::items::{Group, Items, Outcomes};
use crate::knn::gemm_nt;
use harness_data::loaders::{multiway, tatoeba};
use harness_embed::matrix::Matrix;
use rand::seq::index::sample;
use rayon::prelude::*;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// The `scores` of a `retrieval-p1` result.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RetrievalScores {
    /// Per language pair (`fra-eng`).
    pub pairs: BTreeMap<String, PairScores>,
}

/// P@1 (×100) of one language pair, both directions.
// No `deny_unknown_fields`: serde does not support it beside `flatten`; the flattened map
// takes every other key, and only numbers.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct PairScores {
    /// P@1 of each direction, keyed `src->tgt` and `tgt->src`.
    #[serde(flatten)]
    pub directions: BTreeMap<String, f64>,
    /// The mean of both directions.
    pub mean: f64,
    /// Sentence pairs.
    pub pairs: usize,
    /// The true translation and its sampled distractors.
    pub candidates_per_query: usize,
}

/// Largest score matrix (entries) computed in one piece: 16M f32 = 64 MiB.
pub const FULL_MATRIX_LIMIT: usize = 16 << 20;

/// How a (source, target) pair is scored.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Score {
    /// Cosine similarity (zero vectors score 0 with everything).
    Cosine,
    /// Raw inner product (the paper's footnote 7).
    Dot,
}

/// `params:` of a `retrieval-p1` declaration.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct Params {
    /// K: random target sentences ranked against the true translation (paper: 999).
    pub distractors: usize,
    /// Similarity of a pair.
    pub score: Score,
}

impl Default for Params {
    fn default() -> Self {
        Params {
            distractors: 999,
            score: Score::Cosine,
        }
    }
}

impl CheckedParams for Params {
    fn check(&self, benchmark: &Benchmark) -> Result<(), String> {
        super::def::pairs_well_formed(benchmark)
    }
}

/// `retrieval-p1`, defined once: [`super::ALL`] lists it.
pub const DEF: ProtocolDef = ProtocolDef {
    name: "retrieval-p1",
    check_params: parses_as::<Params>,
    side_datasets: no_side_datasets,
    run,
    scores: ScoresDef::of::<RetrievalScores>(),
};

/// The protocol's entry point.
pub fn run(ctx: &Context) -> Result<Outcome, BenchError> {
    let params: Params = ctx.params()?;
    let layout = Layout::detect(ctx)?;
    let pairs = ctx.languages_or(layout.default_pairs(ctx)?);
    if pairs.is_empty() {
        return Err(ctx.error("no language pair to evaluate"));
    }
    let mut per_pair = BTreeMap::new();
    let mut means = Vec::new();
    let mut full_pool = Vec::new();
    let mut groups = Vec::new();
    for pair in &pairs {
        let (src, tgt) = pair
            .split_once('-')
            .ok_or_else(|| ctx.error(format!("`{pair}` is not a `src-tgt` language pair")))?;
        let (src_lines, tgt_lines) = layout.load(ctx, src, tgt)?;
        let n = src_lines.len();
        if n < 2 {
            return Err(ctx.error(format!("{pair}: {n} pairs; retrieval needs at least 2")));
        }
        let x = ctx.embed(&src_lines)?;
        let y = ctx.embed(&tgt_lines)?;
        let forward = format!("{src}->{tgt}");
        let backward = format!("{tgt}->{src}");
        let k = params.distractors;
        let fwd = outcomes_at_1(&x, &y, k, params.score, ctx.seed, stream_of(&forward))?;
        let bwd = outcomes_at_1(&y, &x, k, params.score, ctx.seed, stream_of(&backward))?;
        let p_fwd = percent(hits_of(&fwd), n);
        let p_bwd = percent(hits_of(&bwd), n);
        for (direction, outcomes) in [(&forward, fwd), (&backward, bwd)] {
            groups.push(Group {
                name: format!("{pair}/{direction}"),
                weight: 1.0,
                outcomes,
            });
        }
        let mean = (p_fwd + p_bwd) / 2.0;
        if n - 1 <= k {
            full_pool.push(format!("{pair} ({n})"));
        }
        means.push(mean);
        per_pair.insert(
            pair.clone(),
            PairScores {
                directions: BTreeMap::from([(forward, p_fwd), (backward, p_bwd)]),
                mean,
                pairs: n,
                candidates_per_query: k.min(n - 1) + 1,
            },
        );
    }
    let main_score = means.iter().sum::<f64>() / means.len() as f64;
    let mut notes = vec![
        format!(
            "stand-in data: the paper scored held-out pairs of its web-mined training data; \
             here the {} `{}` pairs",
            ctx.benchmark.dataset, ctx.benchmark.split
        ),
        "P@1 ×100; main score = mean over pairs of the mean of both directions; a tie \
         between the true translation and a distractor counts as a miss"
            .to_string(),
    ];
    if !full_pool.is_empty() {
        notes.push(format!(
            "pool of at most K + 1 = {} sentences: every other sentence of the pool is a \
             candidate, nothing is sampled, for {}",
            params.distractors + 1,
            full_pool.join(", ")
        ));
    }
    Ok(Outcome {
        main_metric: "p_at_1".into(),
        main_score,
        scores: ctx.scores(&RetrievalScores { pairs: per_pair })?,
        params: serde_json::to_value(&params).map_err(|e| ctx.error(e.to_string()))?,
        notes,
        items: Some(Items::mean_of(groups)),
    })
}

fn percent(hits: usize, n: usize) -> f64 {
    100.0 * hits as f64 / n as f64
}

/// Hits among per-query outcomes.
fn hits_of(outcomes: &Outcomes) -> usize {
    match outcomes {
        Outcomes::Correct { correct, .. } => correct.iter().filter(|&&c| c).count(),
        _ => 0,
    }
}

/// Where the pairs come from.
enum Layout {
    /// `tatoeba.xxx-eng.{xxx,eng}`.
    Tatoeba,
    /// `<lang>.devtest(.gz)` multi-way files.
    Flores,
}

impl Layout {
    fn detect(ctx: &Context) -> Result<Layout, BenchError> {
        if !tatoeba::languages(ctx.dataset_dir)?.is_empty() {
            Ok(Layout::Tatoeba)
        } else if !multiway::flores200_languages(ctx.dataset_dir)?.is_empty() {
            Ok(Layout::Flores)
        } else {
            Err(ctx.error(format!(
                "{}: neither Tatoeba (`tatoeba.xxx-eng.xxx`) nor FLORES (`<lang>.devtest`) files",
                ctx.dataset_dir.display()
            )))
        }
    }

    /// Pairs when the declaration lists none: every Tatoeba language against English; for
    /// FLORES there is no natural default.
    fn default_pairs(&self, ctx: &Context) -> Result<Vec<String>, BenchError> {
        match self {
            Layout::Tatoeba => Ok(tatoeba::languages(ctx.dataset_dir)?
                .into_iter()
                .map(|l| format!("{l}-eng"))
                .collect()),
            Layout::Flores => Err(ctx
                .error("FLORES has no default pairs: list `languages: [eng_Latn-fra_Latn, ...]`")),
        }
    }

    /// The aligned lines of `src` and `tgt`.
    fn load(
        &self,
        ctx: &Context,
        src: &str,
        tgt: &str,
    ) -> Result<(Vec<String>, Vec<String>), BenchError> {
        match self {
            Layout::Tatoeba => {
                let (lang, swap) = match (src, tgt) {
                    (l, "eng") => (l, false),
                    ("eng", l) => (l, true),
                    _ => {
                        return Err(ctx.error(format!(
                            "`{src}-{tgt}`: Tatoeba pairs are `xxx-eng` or `eng-xxx`"
                        )))
                    }
                };
                let corpus = tatoeba::load_language(ctx.dataset_dir, lang)?;
                let (xs, en): (Vec<String>, Vec<String>) = corpus
                    .pairs
                    .into_iter()
                    .map(|b| (b.source, b.target))
                    .unzip();
                Ok(if swap { (en, xs) } else { (xs, en) })
            }
            Layout::Flores => {
                let mut mw = multiway::load_flores200_languages(ctx.dataset_dir, &[src, tgt])?;
                let a = mw.lines.remove(src).unwrap_or_default();
                let b = mw.lines.remove(tgt).unwrap_or_default();
                Ok((a, b))
            }
        }
    }
}

/// SplitMix64's finaliser: decorrelates per-query seeds.
fn splitmix64(mut z: u64) -> u64 {
    z = z.wrapping_add(0x9e37_79b9_7f4a_7c15);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

/// The `distractors` sampled for query `i` among `n` candidates: distinct indices of
/// `0..n` other than `i`, from ChaCha8 stream `stream` under a seed derived from `seed`
/// and `i` (so queries can be scored in parallel and the draw does not depend on thread
/// count). `None` when every other candidate takes part (`n − 1 ≤ distractors`).
pub fn distractors_of(
    i: usize,
    n: usize,
    distractors: usize,
    seed: u64,
    stream: u64,
) -> Option<Vec<usize>> {
    if n.saturating_sub(1) <= distractors {
        return None;
    }
    let mut rng = seeded_rng(splitmix64(seed ^ splitmix64(i as u64)), stream);
    Some(
        sample(&mut rng, n - 1, distractors)
            .into_iter()
            .map(|j| if j >= i { j + 1 } else { j })
            .collect(),
    )
}

/// Number of queries whose true candidate (row `i` of `candidates` for row `i` of
/// `queries`) scores strictly higher than each of its distractors ([`distractors_of`]).
pub fn hits_at_1(
    queries: &Matrix,
    candidates: &Matrix,
    distractors: usize,
    score: Score,
    seed: u64,
    stream: u64,
) -> Result<usize, BenchError> {
    hits_with_limit(
        queries,
        candidates,
        distractors,
        score,
        seed,
        stream,
        FULL_MATRIX_LIMIT,
    )
}

/// Per query of [`hits_at_1`]: whether it is a hit, and the candidate it ranked first (its
/// own row on a hit, else its best-scoring distractor, the first on ties; `-1` when no
/// distractor has a score).
pub fn outcomes_at_1(
    queries: &Matrix,
    candidates: &Matrix,
    distractors: usize,
    score: Score,
    seed: u64,
    stream: u64,
) -> Result<Outcomes, BenchError> {
    outcomes_with_limit(
        queries,
        candidates,
        distractors,
        score,
        seed,
        stream,
        FULL_MATRIX_LIMIT,
    )
}

/// Query `i`'s outcome: a hit when `true_score` beats every other score strictly (a NaN
/// true score never does, nor does it beat a NaN), and the candidate ranked first (see
/// [`outcomes_at_1`]).
fn ranked_first(
    i: usize,
    true_score: f32,
    others: impl Iterator<Item = (usize, f32)>,
) -> (bool, i64) {
    let mut hit = !true_score.is_nan();
    let mut best: Option<(usize, f32)> = None;
    for (j, s) in others {
        hit &= true_score > s;
        if !s.is_nan() && best.is_none_or(|(_, b)| s > b) {
            best = Some((j, s));
        }
    }
    let first = match (hit, best) {
        (true, _) => i as i64,
        (false, Some((j, _))) => j as i64,
        (false, None) => -1,
    };
    (hit, first)
}

fn hits_with_limit(
    queries: &Matrix,
    candidates: &Matrix,
    distractors: usize,
    score: Score,
    seed: u64,
    stream: u64,
    full_limit: usize,
) -> Result<usize, BenchError> {
    let o = outcomes_with_limit(
        queries,
        candidates,
        distractors,
        score,
        seed,
        stream,
        full_limit,
    )?;
    Ok(hits_of(&o))
}

fn outcomes_with_limit(
    queries: &Matrix,
    candidates: &Matrix,
    distractors: usize,
    score: Score,
    seed: u64,
    stream: u64,
    full_limit: usize,
) -> Result<Outcomes, BenchError> {
    let n = queries.rows;
    if candidates.rows != n || candidates.cols != queries.cols {
        return Err(BenchError::Protocol {
            benchmark: "retrieval-p1".into(),
            detail: format!(
                "{} × {} queries against {} × {} candidates: row i must translate row i",
                n, queries.cols, candidates.rows, candidates.cols
            ),
        });
    }
    if n == 0 {
        return Ok(Outcomes::correct(Vec::new()));
    }
    let (mut q, mut c) = (queries.clone(), candidates.clone());
    if score == Score::Cosine {
        q.l2_normalize_rows();
        c.l2_normalize_rows();
    }
    let per_query: Vec<(bool, i64)> = if n.saturating_mul(n) <= full_limit {
        let mut s = vec![0.0f32; n * n];
        gemm_nt(&q, 0, n, &c, 0, n, q.cols, &mut s);
        (0..n)
            .into_par_iter()
            .map(|i| {
                let row = &s[i * n..(i + 1) * n];
                match distractors_of(i, n, distractors, seed, stream) {
                    None => {
                        ranked_first(i, row[i], (0..n).filter(|&j| j != i).map(|j| (j, row[j])))
                    }
                    Some(js) => ranked_first(i, row[i], js.iter().map(|&j| (j, row[j]))),
                }
            })
            .collect()
    } else {
        let dot =
            |i: usize, j: usize| -> f32 { q.row(i).iter().zip(c.row(j)).map(|(a, b)| a * b).sum() };
        (0..n)
            .into_par_iter()
            .map(|i| {
                let t = dot(i, i);
                match distractors_of(i, n, distractors, seed, stream) {
                    None => ranked_first(i, t, (0..n).filter(|&j| j != i).map(|j| (j, dot(i, j)))),
                    Some(js) => ranked_first(i, t, js.iter().map(|&j| (j, dot(i, j)))),
                }
            })
            .collect()
    };
    let (correct, neighbour) = per_query.into_iter().unzip();
    Ok(Outcomes::Correct {
        correct,
        neighbour: Some(neighbour),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::protocols::test_support::run_real;
    use crate::registry::Registry;
    use harness_embed::hashed::HashedNgrams;
    use std::collections::HashSet;

    fn m(rows: &[Vec<f32>]) -> Matrix {
        Matrix::from_rows(rows, rows[0].len())
    }

    #[test]
    fn distractors_are_distinct_exclude_the_query_and_are_reproducible() {
        let a = distractors_of(7, 50, 20, 3, 9).unwrap();
        assert_eq!(a.len(), 20);
        assert!(!a.contains(&7) && a.iter().all(|&j| j < 50));
        assert_eq!(a.iter().collect::<HashSet<_>>().len(), 20);
        assert_eq!(a, distractors_of(7, 50, 20, 3, 9).unwrap());
        assert_ne!(a, distractors_of(7, 50, 20, 4, 9).unwrap(), "seed matters");
        assert_ne!(
            a,
            distractors_of(7, 50, 20, 3, 10).unwrap(),
            "stream matters"
        );
        assert_ne!(a, distractors_of(8, 50, 20, 3, 9).unwrap(), "query matters");
        assert_eq!(distractors_of(7, 21, 20, 3, 9), None, "pool of K + 1: all");
        // Every index but the query can be drawn.
        let seen: HashSet<usize> = (0..200)
            .flat_map(|s| distractors_of(0, 6, 2, s, 1).unwrap())
            .collect();
        assert_eq!(seen, (1..6).collect());
    }

    #[test]
    fn hand_checked_hits_ties_are_misses_and_both_paths_agree() {
        // Query 0 → its translation; query 1's nearest is candidate 0; query 2 ties
        // between its translation and candidate 3 (a duplicate); query 3 ties too.
        let q = m(&[
            vec![1.0, 0.0, 0.0],
            vec![0.9, 0.1, 0.0],
            vec![0.0, 0.0, 1.0],
            vec![0.0, 0.0, 2.0],
        ]);
        let c = m(&[
            vec![1.0, 0.0, 0.0],
            vec![0.0, 1.0, 0.0],
            vec![0.0, 0.0, 1.0],
            vec![0.0, 0.0, 3.0],
        ]);
        for limit in [FULL_MATRIX_LIMIT, 0] {
            let hits = |k, score| hits_with_limit(&q, &c, k, score, 1, 1, limit).unwrap();
            // All candidates: only query 0 wins outright.
            assert_eq!(hits(3, Score::Cosine), 1);
            assert_eq!(hits(999, Score::Cosine), 1);
            // Dot product: query 2's translation (1) loses to its duplicate (3), query 3's
            // (2·3 = 6) beats it (2): queries 0 and 3.
            assert_eq!(hits(3, Score::Dot), 2);
            // One distractor each, seeded: query 0 always wins; the others depend on
            // the draw, identically on both paths.
            assert_eq!(
                hits(1, Score::Cosine),
                hits_with_limit(&q, &c, 1, Score::Cosine, 1, 1, FULL_MATRIX_LIMIT).unwrap()
            );
            assert!(hits(1, Score::Cosine) >= 1);
        }
        // The candidate ranked first: query 0 its own line; query 1 candidate 0; queries 2
        // and 3 tie with candidate 3 (cosine), which ranks first as the tie is a miss.
        assert_eq!(
            outcomes_at_1(&q, &c, 3, Score::Cosine, 1, 1).unwrap(),
            Outcomes::Correct {
                correct: vec![true, false, false, false],
                neighbour: Some(vec![0, 0, 3, 2]),
            }
        );
        // Zero distractors: every query with a finite score wins.
        assert_eq!(hits_at_1(&q, &c, 0, Score::Cosine, 1, 1).unwrap(), 4);
        // A NaN embedding never wins: query 0 drops out, query 3 still wins.
        let mut bad = q.clone();
        bad.row_mut(0)[0] = f32::NAN;
        assert_eq!(hits_at_1(&bad, &c, 3, Score::Dot, 1, 1).unwrap(), 1);
        assert!(hits_at_1(&q, &m(&[vec![1.0, 0.0, 0.0]]), 3, Score::Dot, 1, 1).is_err());
    }

    #[test]
    fn sampling_matters_when_the_pool_is_larger_than_k_plus_one() {
        // 60 random unit-ish vectors against themselves with noise: with 59 candidates
        // P@1 is lower than with 5 sampled distractors, and the draw is seeded.
        let mut rows = Vec::new();
        let mut state = 12345u64;
        for _ in 0..60 {
            rows.push(
                (0..8)
                    .map(|_| {
                        state = splitmix64(state);
                        (state >> 40) as f32 / (1u64 << 24) as f32 - 0.5
                    })
                    .collect::<Vec<f32>>(),
            );
        }
        let q = m(&rows);
        let mut noisy = rows.clone();
        for r in &mut noisy {
            for v in r.iter_mut() {
                state = splitmix64(state);
                *v += ((state >> 40) as f32 / (1u64 << 24) as f32 - 0.5) * 0.9;
            }
        }
        let c = m(&noisy);
        let all = hits_at_1(&q, &c, 59, Score::Cosine, 1, 1).unwrap();
        let few = hits_at_1(&q, &c, 5, Score::Cosine, 1, 1).unwrap();
        assert!(few > all, "{few} vs {all}");
        assert_eq!(few, hits_at_1(&q, &c, 5, Score::Cosine, 1, 1).unwrap());
        assert_eq!(
            few,
            hits_with_limit(&q, &c, 5, Score::Cosine, 1, 1, 0).unwrap(),
            "sampled-column path"
        );
    }

    #[test]
    fn params_default_and_reject_unknown_keys() {
        let p: Params = serde_yaml::from_str("{}").unwrap();
        assert_eq!(p, Params::default());
        let p: Params = serde_yaml::from_str("{distractors: 99, score: dot}").unwrap();
        assert_eq!((p.distractors, p.score), (99, Score::Dot));
        assert!(serde_yaml::from_str::<Params>("{distractor: 99}").is_err());
        let r = Registry::load().unwrap();
        let b = r.get("retrieval-p1").unwrap();
        let ctx = Context {
            benchmark: b,
            dataset_dir: std::path::Path::new("."),
            side: &std::collections::BTreeMap::new(),
            encoder: &HashedNgrams::new(Default::default()),
            seed: 1,
        };
        assert_eq!(ctx.params::<Params>().unwrap().distractors, 999);
    }

    /// Real Tatoeba deu/fra/spa/cmn-eng (1000 pairs each). The default `hashed-ngrams`
    /// (dim 512) takes ~16 s to encode the 8000 sentences in a debug build, so the test uses
    /// dim 128 (same rule, 4× cheaper); `real_tatoeba_default_hashed_ngrams` (ignored) gives
    /// the default's numbers.
    #[test]
    fn real_tatoeba_with_hashed_ngrams_is_plausible_and_reproducible() {
        let (o, _, _) = run_real("retrieval-p1", "hashed-ngrams:dim=128");
        check_tatoeba(&o);
    }

    /// `cargo test --lib -- --ignored real_tatoeba_default` (~20 s).
    #[test]
    #[ignore]
    fn real_tatoeba_default_hashed_ngrams() {
        let (o, _, _) = run_real("retrieval-p1", "hashed-ngrams");
        check_tatoeba(&o);
    }

    fn check_tatoeba(o: &Outcome) {
        let pairs = o.scores["pairs"].as_object().unwrap();
        assert_eq!(pairs.len(), 4);
        // Two directions per pair, one item per query: the items give the headline back.
        let items = o.items.as_ref().unwrap();
        assert!((items.headline() - o.main_score).abs() < 1e-9);
        assert_eq!((items.groups.len(), items.count()), (8, 8000));
        assert_eq!(items.groups[1].name, "deu-eng/eng->deu");
        assert_eq!(pairs["deu-eng"]["candidates_per_query"], 1000);
        // Without any cross-lingual training, shared character n-grams (names, numbers,
        // cognates) find ~10 % of Latin-script translations among 1000 candidates (chance:
        // 0.1 %); Chinese shares almost nothing with English.
        for p in ["deu-eng", "fra-eng", "spa-eng"] {
            let v = pairs[p]["mean"].as_f64().unwrap();
            assert!((3.0..40.0).contains(&v), "{p}: {v}");
        }
        assert!(pairs["cmn-eng"]["mean"].as_f64().unwrap() < 5.0);
        assert!((2.0..30.0).contains(&o.main_score), "{}", o.main_score);
    }
}
