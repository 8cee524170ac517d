//! `ranking_softmax`: in-batch softmax ranking of aligned sentences, the translation-ranking
//! loss of the dual encoders (Guo et al. 2018, "Effective parallel corpus mining using
//! bilingual sentence embeddings", §3; multilingual USE, Chidambaram et al. 2019, §3.2;
//! Yang et al. 2019 for the additive margin).
//!
//! For a batch of pairs `(x_i, y_i)` with sentence vectors `u_i`, `v_i`, every target of the
//! batch is a candidate for every source: `S_ij = s · cos(u_i, v_j)` (`s` the scale), the
//! positive's score lowered by `s · margin`, and the loss is the mean cross-entropy of
//! picking `y_i` among the candidates, `−log softmax_j(S_i·)_i`; `bidirectional` averages it
//! with the same ranking of sources for each target. `extra` candidates (hard negatives,
//! `[batch, k, dim]`) join each row's candidates. A candidate that is a copy of the row's own
//! positive (the same sentence twice in a batch) is masked out, not counted as a negative;
//! rows marked not `valid` (e.g. a sentence paired with itself) only serve as candidates.

use crate::objectives::{CheckContext, ExampleKind, HardNegatives, Loss, Objective};
use crate::step::Step;
use crate::TrainError;
use harness_model::fused::device_nodes::log_softmax;
use burn::tensor::backend::{AutodiffBackend, Backend};
use burn::tensor::{Bool, Tensor, TensorData};
use harness_recipe::check::Finding;
use serde::{Deserialize, Serialize};

/// The recipe's parameters of an in-batch ranking task.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RankingSoftmax {
    /// Scale of the cosine similarities.
    #[serde(default = "twenty")]
    pub scale: f64,
    /// Additive margin on the positive's cosine.
    #[serde(default)]
    pub margin: f64,
    /// Rank sources for targets too, and average.
    #[serde(default = "yes")]
    pub bidirectional: bool,
    /// Task whose batches this loss is added to (same pairs and encodings, one backward
    /// pass), weighted by this task's `weight`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub joint_with: Option<String>,
    /// Hard negatives per example, mined before training and ranked beside the in-batch
    /// candidates (0: in-batch negatives only).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub hard_negatives: u32,
    /// The encoder that mines them (`--encoder` syntax): `hashed-ngrams`, a pretrained
    /// model, or an earlier run directory (multilingual USE's two steps).
    #[serde(default = "hashed", skip_serializing_if = "is_hashed")]
    pub mine_with: String,
}

fn is_zero(n: &u32) -> bool {
    *n == 0
}

/// The default miner of hard negatives.
pub(crate) fn hashed() -> String {
    "hashed-ngrams".into()
}

pub(crate) fn is_hashed(s: &str) -> bool {
    s == "hashed-ngrams"
}

fn twenty() -> f64 {
    20.0
}

fn yes() -> bool {
    true
}

impl Objective for RankingSoftmax {
    const NAME: &'static str = "ranking_softmax";
    const EXAMPLES: ExampleKind = ExampleKind::Pairs;

    fn check(&self, cx: &CheckContext<'_>) -> Vec<Finding> {
        let mut out = Vec::new();
        cx.non_negative(&mut out, "margin", self.margin);
        cx.hard_negatives_corpus(&mut out, self.hard_negatives);
        cx.positive(&mut out, "scale", self.scale);
        cx.joint_with(&mut out, self.joint_with.as_deref());
        if self.hard_negatives > 0 && self.joint_with.is_some() {
            out.push(Finding::new(crate::objectives::check::param("hard_negatives"),
                "a joint task reads its partner's batches, which carry no hard negatives",
            ));
        }
        out
    }

    fn joint_with(&self) -> Option<&str> {
        self.joint_with.as_deref()
    }

    fn hard_negatives(&self) -> Option<HardNegatives> {
        (self.hard_negatives > 0).then(|| HardNegatives {
            k: self.hard_negatives as usize,
            encoder: self.mine_with.clone(),
        })
    }
}

impl Loss for RankingSoftmax {
    fn loss<B: AutodiffBackend>(&self, step: &mut Step<'_, B>) -> Result<Tensor<B, 1>, TrainError> {
        let p = Ranking {
            cosine: true,
            scale: self.scale,
            margin: self.margin,
            bidirectional: self.bidirectional,
        };
        rank_pairs(step, p)
    }
}

/// The ranking loss of a batch of translation pairs: sources against targets and the
/// task's mined hard negatives, copies of a row's positive masked (shared by
/// `ranking_softmax` and `translation_ranking`).
pub fn rank_pairs<B: AutodiffBackend>(
    step: &mut Step<'_, B>,
    p: Ranking,
) -> Result<Tensor<B, 1>, TrainError> {
    // Against the whole batch across data-parallel peers (`Step::gather`).
    let ex = step.whole_pairs()?;
    let src: Vec<&[u32]> = ex.iter().map(|e| e.src.ids.as_slice()).collect();
    let tgt: Vec<&[u32]> = ex.iter().map(|e| e.tgt.ids.as_slice()).collect();
    let masks = RankingMasks::from_ids(&src, &tgt);
    let ([u, v], extra) = step.encode_ranked()?;
    let [u, v] = [u, v].map(|e| e.sentence);
    let Some(extra) = extra else {
        let [u, v] = step.gather([u, v])?;
        return Ok(ranking_softmax(u, v, None, p, &masks));
    };
    let [n, k, d] = extra.dims();
    let [u, v, extra] = step.gather([u, v, extra.reshape([n, k * d])])?;
    let whole = u.dims()[0];
    Ok(ranking_softmax(u, v, Some(extra.reshape([whole, k, d])), p, &masks))
}

/// Parameters of one ranking loss.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Ranking {
    /// Score by cosine (`true`) or by the raw dot product of the vectors (`false`: the dual
    /// encoders of Henderson et al. 2017, Guo et al. 2018 and multilingual USE, eq. 2).
    pub cosine: bool,
    /// Scale `s` of the similarities (the softmax temperature's inverse).
    pub scale: f64,
    /// Additive margin subtracted from the positive's cosine.
    pub margin: f64,
    /// Also rank sources for each target, and average the two losses.
    pub bidirectional: bool,
}

/// Which rows count, and which candidates are copies of a row's positive.
#[derive(Debug, Clone, Default)]
pub struct RankingMasks {
    /// `valid[i]`: row `i` contributes a loss term (all rows when empty).
    pub valid: Vec<bool>,
    /// `same_target[i][j]` (`j ≠ i`): target `j` equals target `i` (masked for source `i`).
    pub same_target: Vec<Vec<bool>>,
    /// `same_source[j][i]` (`i ≠ j`): source `i` equals source `j` (masked in the reverse
    /// direction).
    pub same_source: Vec<Vec<bool>>,
}

impl RankingMasks {
    /// Masks from the token ids of each side: equal id sequences are the same sentence; a
    /// row whose source equals its target is not a valid pair (it only serves as a
    /// candidate).
    pub fn from_ids(sources: &[&[u32]], targets: &[&[u32]]) -> Self {
        let n = sources.len();
        let grid = |side: &[&[u32]]| -> Vec<Vec<bool>> {
            (0..n)
                .map(|i| (0..n).map(|j| j != i && side[j] == side[i]).collect())
                .collect()
        };
        RankingMasks {
            valid: (0..n).map(|i| sources[i] != targets[i]).collect(),
            same_target: grid(targets),
            same_source: grid(sources),
        }
    }
}

fn normalize<B: Backend, const D: usize>(x: Tensor<B, D>) -> Tensor<B, D> {
    let norm = x
        .clone()
        .powi_scalar(2)
        .sum_dim(D - 1)
        .sqrt()
        .clamp_min(1e-8);
    x / norm
}

fn bool_matrix<B: Backend>(
    rows: &[Vec<bool>],
    n: usize,
    m: usize,
    device: &B::Device,
) -> Tensor<B, 2, Bool> {
    let mut flat = vec![false; n * m];
    for (i, r) in rows.iter().enumerate().take(n) {
        for (j, &b) in r.iter().enumerate().take(m) {
            flat[i * m + j] = b;
        }
    }
    Tensor::from_data(TensorData::new(flat, [n, m]), device)
}

/// Cross-entropy of the diagonal of `scores: [n, m]` (the positive of row `i` is column `i`),
/// with `masked` candidates excluded, over the `valid` rows.
fn diagonal_ce<B: Backend>(
    scores: Tensor<B, 2>,
    masked: Tensor<B, 2, Bool>,
    valid: &[bool],
) -> Tensor<B, 1> {
    let [n, m] = scores.dims();
    let device = scores.device();
    // A large negative, not −∞: a fully masked row must not turn into NaN.
    let logp = log_softmax(scores.mask_fill(masked, -1.0e4));
    let eye: Vec<f32> = (0..n * m)
        .map(|k| {
            let (i, j) = (k / m, k % m);
            if i == j && valid.get(i).copied().unwrap_or(true) {
                1.0
            } else {
                0.0
            }
        })
        .collect();
    let pick = Tensor::<B, 2>::from_data(TensorData::new(eye, [n, m]), &device);
    let count = valid
        .iter()
        .filter(|&&v| v)
        .count()
        .max(if valid.is_empty() { n } else { 0 });
    (logp * pick).sum().neg() / count.max(1) as f64
}

/// The loss for `u, v: [batch, dim]` (see the module doc); `extra: [batch, k, dim]` are
/// each row's additional candidates (hard negatives), ranked in the source → target direction.
pub fn ranking_softmax<B: Backend>(
    u: Tensor<B, 2>,
    v: Tensor<B, 2>,
    extra: Option<Tensor<B, 3>>,
    p: Ranking,
    masks: &RankingMasks,
) -> Tensor<B, 1> {
    let [n, _] = u.dims();
    let device = u.device();
    let (un, vn) = if p.cosine {
        (normalize(u), normalize(v))
    } else {
        (u, v)
    };
    let cos = harness_model::precision::matmul(un.clone(), vn.clone().transpose()); // [n, n]
    let margin: Vec<f32> = (0..n * n)
        .map(|k| if k / n == k % n { p.margin as f32 } else { 0.0 })
        .collect();
    let margin = Tensor::<B, 2>::from_data(TensorData::new(margin, [n, n]), &device);
    let scores = (cos - margin) * p.scale;
    let same_t = bool_matrix::<B>(&masks.same_target, n, n, &device);
    let forward = match extra {
        None => diagonal_ce(scores.clone(), same_t, &masks.valid),
        Some(extra) => {
            let [_, k, d] = extra.dims();
            let en = if p.cosine { normalize(extra) } else { extra };
            // [n, 1, d] · [n, d, k] → [n, 1, k]: each row against its own extra candidates.
            let extra_scores = harness_model::precision::matmul(
                un.clone().reshape([n, 1, d]),
                en.swap_dims(1, 2),
            )
            .reshape([n, k])
                * p.scale;
            let all = Tensor::cat(vec![scores.clone(), extra_scores], 1);
            let none = Tensor::<B, 2, Bool>::from_data(
                TensorData::new(vec![false; n * k], [n, k]),
                &device,
            );
            let masked = Tensor::cat(vec![same_t, none], 1);
            diagonal_ce(all, masked, &masks.valid)
        }
    };
    if !p.bidirectional {
        return forward;
    }
    let same_s = bool_matrix::<B>(&masks.same_source, n, n, &device);
    let backward = diagonal_ce(scores.transpose(), same_s, &masks.valid);
    (forward + backward) / 2.0
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::objectives::gradcheck::{check_gradient, F64};
    use burn::backend::NdArray;

    type B = NdArray<f32>;

    fn t(v: Vec<f32>, shape: [usize; 2]) -> Tensor<B, 2> {
        Tensor::from_data(TensorData::new(v, shape), &Default::default())
    }

    fn p(scale: f64, margin: f64, bidirectional: bool) -> Ranking {
        Ranking {
            cosine: true,
            scale,
            margin,
            bidirectional,
        }
    }

    /// Two orthogonal pairs: cos matrix [[1, 0], [0, 1]] (after normalising), scale 2:
    /// each row's loss is −log(e²/(e² + 1)).
    #[test]
    fn hand_checked_value_with_margin_and_both_directions() {
        let u = t(vec![3.0, 0.0, 0.0, 0.5], [2, 2]);
        let v = t(vec![1.0, 0.0, 0.0, 2.0], [2, 2]);
        let none = RankingMasks::default();
        let want = -(2f64.exp() / (2f64.exp() + 1.0)).ln();
        let got = ranking_softmax(u.clone(), v.clone(), None, p(2.0, 0.0, false), &none)
            .into_scalar() as f64;
        assert!((got - want).abs() < 1e-6, "{got} vs {want}");
        let got = ranking_softmax(u.clone(), v.clone(), None, p(2.0, 0.0, true), &none)
            .into_scalar() as f64;
        assert!((got - want).abs() < 1e-6, "symmetric: {got} vs {want}");
        // Margin 0.5: the positive's score is 2·(1 − 0.5) = 1.
        let want = -(1f64.exp() / (1f64.exp() + 1.0)).ln();
        let got = ranking_softmax(u, v, None, p(2.0, 0.5, false), &none).into_scalar() as f64;
        assert!((got - want).abs() < 1e-6, "margin: {got} vs {want}");
    }

    /// A hard negative equal to the positive halves its probability; a duplicate target in
    /// the batch is masked (not a negative); an invalid row adds no term.
    #[test]
    fn hard_negatives_duplicates_and_invalid_rows() {
        let dev = Default::default();
        let u = t(vec![1.0, 0.0, 0.0, 1.0], [2, 2]);
        let v = t(vec![1.0, 0.0, 0.0, 1.0], [2, 2]);
        let extra = Tensor::<B, 3>::from_data(
            TensorData::new(vec![1.0f32, 0.0, 0.0, 1.0], [2, 1, 2]),
            &dev,
        );
        let none = RankingMasks::default();
        // Scores per row: positive s, in-batch negative 0, hard negative s (a copy).
        let s = 3.0f64;
        let want = -(s.exp() / (2.0 * s.exp() + 1.0)).ln();
        let got = ranking_softmax(u.clone(), v.clone(), Some(extra), p(s, 0.0, false), &none)
            .into_scalar() as f64;
        assert!((got - want).abs() < 1e-6, "{got} vs {want}");
        // Both targets the same sentence: each row's only negative is masked → loss 0.
        let same = RankingMasks::from_ids(&[&[5], &[6]], &[&[9], &[9]]);
        let v2 = t(vec![1.0, 0.0, 1.0, 0.0], [2, 2]);
        let got =
            ranking_softmax(u.clone(), v2, None, p(s, 0.0, false), &same).into_scalar() as f64;
        assert!(got.abs() < 1e-6, "duplicates are not negatives: {got}");
        // Row 1 pairs a sentence with itself: only row 0 counts.
        let masks = RankingMasks::from_ids(&[&[5], &[7]], &[&[9], &[7]]);
        let want = -(s.exp() / (s.exp() + 1.0)).ln();
        let got = ranking_softmax(u, v, None, p(s, 0.0, false), &masks).into_scalar() as f64;
        assert!((got - want).abs() < 1e-6, "{got} vs {want}");
    }

    #[test]
    fn gradient_matches_finite_differences() {
        let dev = Default::default();
        let v = Tensor::<F64, 2>::from_data(
            TensorData::new(
                vec![0.3f32, -0.2, 0.5, 0.1, 0.0, -0.7, 0.4, 0.4, 0.2],
                [3, 3],
            ),
            &dev,
        );
        let masks = RankingMasks::from_ids(&[&[1], &[2], &[3]], &[&[4], &[5], &[4]]);
        for bidirectional in [false, true] {
            check_gradient::<2>([3, 3], 3, |x| {
                ranking_softmax(x, v.clone(), None, p(5.0, 0.2, bidirectional), &masks)
            });
        }
    }
}

#[cfg(test)]
mod mining_tests {
    use crate::corpora::Loaded;
    use crate::data::Examples;
    use crate::hard_negatives::mine;
    use crate::plan::Plan;
    use crate::TrainError;
    use harness_core::settings::Settings;
    use harness_embed::Encoder;
    use std::collections::BTreeMap;
    use std::path::Path;
    use crate::plan::compile_plan;
    use crate::tokenizer::tokenizer_for;
    use burn::backend::{Autodiff, NdArray};
    use harness_data::records::Bitext;
    use harness_embed::hashed::{HashedNgrams, HashedParams};

    const ANIMALS: [(&str, &str); 6] = [
        ("katze", "cat"),
        ("hund", "dog"),
        ("maus", "mouse"),
        ("pferd", "horse"),
        ("vogel", "bird"),
        ("fisch", "fish"),
    ];

    fn corpora() -> BTreeMap<String, Loaded> {
        let pairs: Vec<Bitext> = (0..24)
            .map(|i| {
                let (d, e) = ANIMALS[i % 6];
                Bitext {
                    source: format!("ich sehe {} {d}", i / 6),
                    target: format!("i see {} {e}", i / 6),
                }
            })
            .collect();
        let mut m = BTreeMap::new();
        m.insert(
            "pairs".to_string(),
            Loaded::Parallel(vec![("deu".into(), "eng".into(), pairs)]),
        );
        m
    }

    fn plan(k: u32, dir: &Path) -> Plan {
        let r: harness_recipe::Recipe = serde_yaml::from_str(&format!(
            "name: hn
seed: 3
data:
  tokenizer: {{kind: bpe, vocab: 320}}
  corpora: {{pairs: {{dataset: parallel-pairs, pairs: [deu-eng]}}}}
model:
  encoder: {{kind: bilstm, layers: 1, hidden: 8, embed: 8, pool: max}}
tasks:
  - {{name: rank, objective: ranking_softmax, corpus: pairs, params: {{hard_negatives: {k}}}}}
optimizer: {{kind: adam, lr: 0.01}}
train: {{steps: 1, batch_size: 6, max_len: 12}}
"
        ))
        .unwrap();
        let tok = tokenizer_for(&r, &corpora(), &dir.join("tokenizer.json")).unwrap();
        compile_plan(&r, &tok, &corpora(), crate::objectives::ALL).unwrap()
    }

    fn hashed(_: &str) -> Result<Box<dyn Encoder>, TrainError> {
        Ok(Box::new(HashedNgrams::new(HashedParams::default())))
    }

    fn first_loss(dir: &Path) -> f64 {
        let text = std::fs::read_to_string(dir.join("train/metrics.jsonl")).unwrap();
        let v: serde_json::Value = serde_json::from_str(text.lines().next().unwrap()).unwrap();
        v["loss"].as_f64().unwrap()
    }

    /// The mining test (here, beside the loss that reads the negatives): deterministic, cached under its key (a changed `k` mines
    /// again), never the example's own target; the mined negatives join the ranking's
    /// candidates (the first step's loss grows with them, same weights and batch).
    #[test]
    fn mining_is_deterministic_cached_and_feeds_the_ranking() {
        let dir = tempfile::tempdir().unwrap();
        let settings = Settings {
            cache_dir: dir.path().join("cache"),
            ..Settings::default()
        };
        let mut p = plan(2, dir.path());
        let first = mine(&mut p, &corpora(), dir.path(), &settings, &hashed).unwrap();
        assert!(!first[0].from_cache);
        let negatives = p.tasks[0].data.as_ref().unwrap().negatives.clone().unwrap();
        let Examples::Pairs(ex) = &p.tasks[0].data.as_ref().unwrap().examples else {
            panic!()
        };
        for (i, row) in negatives.iter().enumerate() {
            assert_eq!(row.len(), 2);
            assert!(
                row.iter().all(|&j| ex[j as usize].tgt != ex[i].tgt),
                "{i}: {row:?}"
            );
            assert!(
                row.iter().all(|&j| ex[j as usize].tgt_lang == ex[i].tgt_lang),
                "{i}: a negative in another language: {row:?}"
            );
        }
        // Again, from another directory: the same negatives; in the same one: the cache.
        let other = tempfile::tempdir().unwrap();
        let mut q = plan(2, dir.path());
        mine(&mut q, &corpora(), other.path(), &settings, &hashed).unwrap();
        assert_eq!(
            q.tasks[0].data.as_ref().unwrap().negatives.as_ref(),
            Some(&negatives)
        );
        let mut r = plan(2, dir.path());
        let again = mine(&mut r, &corpora(), dir.path(), &settings, &hashed).unwrap();
        assert!(again[0].from_cache);
        assert_eq!(
            r.tasks[0].data.as_ref().unwrap().negatives.as_ref(),
            Some(&negatives)
        );
        let mut three = plan(3, dir.path());
        let redo = mine(&mut three, &corpora(), dir.path(), &settings, &hashed).unwrap();
        assert!(!redo[0].from_cache);

        // One step with and without them, from the same initial weights and batch.
        type B = Autodiff<NdArray<f32>>;
        let opts = |d: &Path| crate::trainer::Options::<B> {
            objectives: crate::objectives::registry(),
            run_dir: d.to_path_buf(),
            stop_after: None,
            progress: false,
            keep: 1,
            evaluate: None,
        };
        let with = tempfile::tempdir().unwrap();
        crate::trainer::train::<B>(&p, &Default::default(), opts(with.path())).unwrap();
        let mut without = p.clone();
        without.tasks[0].data.as_mut().unwrap().negatives = None;
        let plain = tempfile::tempdir().unwrap();
        crate::trainer::train::<B>(&without, &Default::default(), opts(plain.path())).unwrap();
        assert!(
            first_loss(with.path()) > first_loss(plain.path()),
            "{} vs {}",
            first_loss(with.path()),
            first_loss(plain.path())
        );
    }
}
