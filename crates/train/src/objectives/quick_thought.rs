//! `quick_thought`: the modified Quick-Thought task of multilingual USE (Chidambaram et al.
//! 2019, §3.2, after Logeswaran and Lee 2018): for a sentence `s^I` of running text with its
//! predecessor `s^P` and successor `s^R`, minimise `−log P̃(s^R | s^I) − log P̃(s^P | s^I)`,
//! each an in-batch softmax over dot products (eq. 2), where "all three of g^P(s^P),
//! g^I(s^I), and g^R(s^R)" are `g` followed by separate feed-forward heads (the paper: 320
//! and 512 units, tanh): `input_head`, `previous_head`, `next_head` (none: `g` itself).

use crate::objectives::ranking_softmax::{ranking_softmax, RankingMasks};
use crate::objectives::response_ranking::{dot, project};
use crate::objectives::{CheckContext, ExampleKind, Loss, Objective};
use crate::step::{Side, Step};
use crate::TrainError;
use burn::tensor::backend::{AutodiffBackend, Backend};
use burn::tensor::Tensor;
use harness_recipe::check::Finding;
use serde::{Deserialize, Serialize};

/// The recipe's parameters of a Quick-Thought task.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct QuickThought {
    /// Projection head of the sentence itself (`g^I`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub input_head: Option<String>,
    /// Projection head of the predecessor (`g^P`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub previous_head: Option<String>,
    /// Projection head of the successor (`g^R`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub next_head: Option<String>,
    /// Sentences of context on each side (the paper's task: 1, the only value trained).
    #[serde(default = "one")]
    pub context: u32,
}

fn one() -> u32 {
    1
}

impl Objective for QuickThought {
    const NAME: &'static str = "quick_thought";
    const EXAMPLES: ExampleKind = ExampleKind::RunningText;

    fn check(&self, cx: &CheckContext<'_>) -> Vec<Finding> {
        let mut out = Vec::new();
        for (key, head) in self.heads() {
            if let Some(h) = head {
                cx.projection_head(&mut out, key, Self::NAME, h);
            }
        }
        if self.context != 1 {
            out.push(Finding::new(
                crate::objectives::check::param("context"),
                format!(
                    "must be 1 (the predecessor and the successor, as the paper), found {}",
                    self.context
                ),
            ));
        }
        out
    }
}

impl QuickThought {
    fn heads(&self) -> [(&'static str, Option<&str>); 3] {
        [
            ("input_head", self.input_head.as_deref()),
            ("previous_head", self.previous_head.as_deref()),
            ("next_head", self.next_head.as_deref()),
        ]
    }
}

impl Loss for QuickThought {
    fn loss<B: AutodiffBackend>(&self, step: &mut Step<'_, B>) -> Result<Tensor<B, 1>, TrainError> {
        // Against the whole batch across data-parallel peers (`Step::gather`).
        let ex = step.whole_context()?;
        let ids = |f: fn(&crate::data::ContextExample) -> &[u32]| -> Vec<&[u32]> {
            ex.iter().map(|e| f(e)).collect()
        };
        let sentence = ids(|e| e.sentence.ids.as_slice());
        let previous = ids(|e| e.previous.ids.as_slice());
        let next = ids(|e| e.next.ids.as_slice());
        let to_previous = RankingMasks::from_ids(&sentence, &previous);
        let to_next = RankingMasks::from_ids(&sentence, &next);
        let [i, p, n] = step
            .encode_sides([Side::First, Side::Second, Side::Third])?
            .map(|e| e.sentence);
        let i = project(step, self.input_head.as_deref(), i, "input_head")?;
        let p = project(step, self.previous_head.as_deref(), p, "previous_head")?;
        let n = project(step, self.next_head.as_deref(), n, "next_head")?;
        let [i, p, n] = step.gather([i, p, n])?;
        Ok(quick_thought_loss(i, p, n, &to_previous, &to_next))
    }
}

/// `−log P̃(next | sentence) − log P̃(previous | sentence)`, each averaged over the batch,
/// from the projected vectors `[batch, d]`.
pub fn quick_thought_loss<B: Backend>(
    sentence: Tensor<B, 2>,
    previous: Tensor<B, 2>,
    next: Tensor<B, 2>,
    to_previous: &RankingMasks,
    to_next: &RankingMasks,
) -> Tensor<B, 1> {
    ranking_softmax(sentence.clone(), next, None, dot(), to_next)
        + ranking_softmax(sentence, previous, None, dot(), to_previous)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::objectives::gradcheck::{check_gradient, F64};
    use burn::backend::NdArray;
    use burn::tensor::TensorData;

    type B = NdArray<f32>;

    fn t(v: Vec<f32>, shape: [usize; 2]) -> Tensor<B, 2> {
        Tensor::from_data(TensorData::new(v, shape), &Default::default())
    }

    /// Hand-computed: sentences i = [[1, 0], [0, 2]], successors n = [[1, 0], [0, 1]]
    /// (scores [[1, 0], [0, 2]]), predecessors p = [[0, 0], [0, 0]] (every score 0, so
    /// −log ½ per row). Sum: mean(−log(e/(e+1)), −log(e²/(e²+1))) + ln 2.
    #[test]
    fn hand_checked_value() {
        let i = t(vec![1.0, 0.0, 0.0, 2.0], [2, 2]);
        let p = t(vec![0.0; 4], [2, 2]);
        let n = t(vec![1.0, 0.0, 0.0, 1.0], [2, 2]);
        let none = RankingMasks::default();
        let e = std::f64::consts::E;
        let next = (-(e / (e + 1.0)).ln() - (e * e / (e * e + 1.0)).ln()) / 2.0;
        let want = next + 2f64.ln();
        let got = quick_thought_loss(i, p, n, &none, &none).into_scalar() as f64;
        assert!((got - want).abs() < 1e-6, "{got} vs {want}");
    }

    #[test]
    fn gradient_matches_finite_differences() {
        let dev = Default::default();
        let m = |v: Vec<f32>| Tensor::<F64, 2>::from_data(TensorData::new(v, [3, 2]), &dev);
        let p = m(vec![0.3, -0.2, 0.5, 0.1, 0.0, -0.7]);
        let n = m(vec![0.4, 0.4, 0.2, -0.9, 0.6, 0.1]);
        let masks = RankingMasks::from_ids(&[&[1], &[2], &[3]], &[&[4], &[5], &[6]]);
        check_gradient::<2>([3, 2], 11, |x| {
            quick_thought_loss(x, p.clone(), n.clone(), &masks, &masks)
        });
    }
}
