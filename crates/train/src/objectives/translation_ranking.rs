//! `translation_ranking`: the bridge task of multilingual USE (Chidambaram et al. 2019, §3.2,
//! eq. 2, after Guo et al. 2018, "Effective parallel corpus mining using bilingual sentence
//! embeddings", §3): for a batch of translation pairs `(x_i, y_i)` with sentence vectors
//! `u_i = g(x_i)`, `v_j = g(y_j)`, the score is the dot product `φ(x_i, y_j) = u_i · v_j`
//! (Figure 1's DOT; no normalisation, no task head) and the loss the negative
//! log-likelihood of `y_i` among the batch's targets plus each example's `k` hard negatives
//! (Guo et al. §3.3: "appending k hard negatives", mined before training by
//! `mine_with`, never the example's own target). `bidirectional` also ranks the sources for
//! each target; `margin` lowers the positive's score (Yang et al. 2019). The computation is
//! `ranking_softmax.rs`'s, with dot-product scores.

use crate::objectives::ranking_softmax::{hashed, is_hashed, rank_pairs, Ranking};
use crate::objectives::{CheckContext, ExampleKind, HardNegatives, Loss, Objective};
use crate::step::Step;
use crate::TrainError;
use burn::tensor::backend::AutodiffBackend;
use burn::tensor::Tensor;
use harness_recipe::check::Finding;
use serde::{Deserialize, Serialize};

/// The recipe's parameters of a translation ranking task.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TranslationRanking {
    /// Hard negatives appended per example (the paper: 5; 0: in-batch negatives only).
    #[serde(default)]
    pub hard_negatives: u32,
    /// The encoder that mines them (`--encoder` syntax): `hashed-ngrams`, a pretrained
    /// model, or an earlier run directory (the paper mines with a translation-ranking-only
    /// model: `recipes/muse-xling.yaml` documents the two commands).
    #[serde(default = "hashed", skip_serializing_if = "is_hashed")]
    pub mine_with: String,
    /// Rank in both directions (source→target and target→source) and average.
    #[serde(default)]
    pub bidirectional: bool,
    /// Additive margin subtracted from the positive's score.
    #[serde(default)]
    pub margin: f64,
}

impl Objective for TranslationRanking {
    const NAME: &'static str = "translation_ranking";
    const EXAMPLES: ExampleKind = ExampleKind::Pairs;

    fn check(&self, cx: &CheckContext<'_>) -> Vec<Finding> {
        let mut out = Vec::new();
        cx.non_negative(&mut out, "margin", self.margin);
        cx.hard_negatives_corpus(&mut out, self.hard_negatives);
        out
    }

    fn hard_negatives(&self) -> Option<HardNegatives> {
        (self.hard_negatives > 0).then(|| HardNegatives {
            k: self.hard_negatives as usize,
            encoder: self.mine_with.clone(),
        })
    }
}

impl Loss for TranslationRanking {
    fn loss<B: AutodiffBackend>(&self, step: &mut Step<'_, B>) -> Result<Tensor<B, 1>, TrainError> {
        let p = Ranking {
            cosine: false,
            scale: 1.0,
            margin: self.margin,
            bidirectional: self.bidirectional,
        };
        rank_pairs(step, p)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::objectives::ranking_softmax::{ranking_softmax, RankingMasks};
    use crate::objectives::gradcheck::{check_gradient, F64};
    use burn::backend::NdArray;
    use burn::tensor::TensorData;

    type B = NdArray<f32>;

    fn t<const D: usize>(v: Vec<f32>, shape: [usize; D]) -> Tensor<B, D> {
        Tensor::from_data(TensorData::new(v, shape), &Default::default())
    }

    fn dot(margin: f64, bidirectional: bool) -> Ranking {
        Ranking {
            cosine: false,
            scale: 1.0,
            margin,
            bidirectional,
        }
    }

    /// Hand-computed, dot products (not cosines): u = [[2, 0], [0, 1]], v = [[1, 0], [1, 3]]:
    /// scores [[2, 2], [0, 3]]; row 0: −log(e²/(e² + e²)) = ln 2; row 1: −log(e³/(1 + e³)).
    /// A hard negative h₀ = [0.5, 0] (score 1) joins row 0, h₁ = [0, −1] (score −1) row 1.
    #[test]
    fn hand_checked_dot_product_ranking_with_hard_negatives() {
        let u = t(vec![2.0, 0.0, 0.0, 1.0], [2, 2]);
        let v = t(vec![1.0, 0.0, 1.0, 3.0], [2, 2]);
        let none = RankingMasks::default();
        let r0 = 2f64.ln();
        let r1 = -(3f64.exp() / (1.0 + 3f64.exp())).ln();
        let got = ranking_softmax(u.clone(), v.clone(), None, dot(0.0, false), &none);
        let got = got.into_scalar() as f64;
        assert!((got - (r0 + r1) / 2.0).abs() < 1e-6, "{got}");
        let h = t(vec![0.5, 0.0, 0.0, -1.0], [2, 1, 2]);
        let e = std::f64::consts::E;
        let r0 = -(e.powi(2) / (2.0 * e.powi(2) + e)).ln();
        let r1 = -(e.powi(3) / (1.0 + e.powi(3) + e.powi(-1))).ln();
        let got = ranking_softmax(u, v, Some(h), dot(0.0, false), &none).into_scalar() as f64;
        assert!((got - (r0 + r1) / 2.0).abs() < 1e-6, "{got}");
    }

    #[test]
    fn gradient_matches_finite_differences() {
        let dev = Default::default();
        let v = Tensor::<F64, 2>::from_data(
            TensorData::new(vec![0.3f32, -0.2, 0.5, 0.1, 0.0, -0.7, 0.4, 0.4, 0.2], [3, 3]),
            &dev,
        );
        let h = Tensor::<F64, 3>::from_data(
            TensorData::new(vec![0.1f32, 0.9, -0.3, 0.2, 0.2, 0.2, -0.5, 0.0, 0.6], [3, 1, 3]),
            &dev,
        );
        let masks = RankingMasks::from_ids(&[&[1], &[2], &[3]], &[&[4], &[5], &[6]]);
        for bidirectional in [false, true] {
            check_gradient::<2>([3, 3], 7, |x| {
                ranking_softmax(x, v.clone(), Some(h.clone()), dot(0.1, bidirectional), &masks)
            });
        }
    }
}
