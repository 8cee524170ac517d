//! `response_ranking`: conversational response prediction (multilingual USE, Chidambaram et
//! al. 2019, §3.2, after Henderson et al. 2017 and Yang et al. 2018): for a batch of
//! (input, response) turns, `g^I(s^I) = g(s^I)` and `g^R(s^R)` is `g(s^R)` through the
//! response head (the paper: two fully-connected layers of 320 and 512 with tanh), the score
//! their dot product, and the loss the negative log-likelihood of each input's own response
//! among the batch's responses (eq. 2, in-batch negatives). A response that appears twice in
//! a batch is not its own negative (`ranking_softmax.rs`'s masks).

use crate::objectives::ranking_softmax::{ranking_softmax, Ranking, RankingMasks};
use crate::objectives::{CheckContext, ExampleKind, Loss, Objective};
use crate::step::{Side, Step};
use crate::TrainError;
use burn::tensor::backend::AutodiffBackend;
use burn::tensor::Tensor;
use harness_recipe::check::Finding;
use serde::{Deserialize, Serialize};

/// The recipe's parameters of a response ranking task.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ResponseRanking {
    /// The projection head of `model.heads` on the response side (none: `g` itself).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub head: Option<String>,
}

impl Objective for ResponseRanking {
    const NAME: &'static str = "response_ranking";
    const EXAMPLES: ExampleKind = ExampleKind::Conversation;

    fn check(&self, cx: &CheckContext<'_>) -> Vec<Finding> {
        let mut out = Vec::new();
        if let Some(h) = &self.head {
            cx.projection_head(&mut out, "head", Self::NAME, h);
        }
        out
    }
}

impl Loss for ResponseRanking {
    fn loss<B: AutodiffBackend>(&self, step: &mut Step<'_, B>) -> Result<Tensor<B, 1>, TrainError> {
        // Against the whole batch across data-parallel peers (`Step::gather`).
        let ex = step.whole_pairs()?;
        let input: Vec<&[u32]> = ex.iter().map(|e| e.src.ids.as_slice()).collect();
        let response: Vec<&[u32]> = ex.iter().map(|e| e.tgt.ids.as_slice()).collect();
        let masks = RankingMasks::from_ids(&input, &response);
        let [u, v] = step.encode_sides([Side::First, Side::Second])?.map(|e| e.sentence);
        let v = project(step, self.head.as_deref(), v, "head")?;
        let [u, v] = step.gather([u, v])?;
        Ok(ranking_softmax(u, v, None, dot(), &masks))
    }
}

/// Dot-product scores, one direction, no margin (eq. 2).
pub(crate) fn dot() -> Ranking {
    Ranking {
        cosine: false,
        scale: 1.0,
        margin: 0.0,
        bidirectional: false,
    }
}

/// `x` through the projection head `head` (unchanged without one); an error names the
/// parameter when the head's output cannot be compared with the sentence vectors.
pub(crate) fn project<B: AutodiffBackend>(
    step: &mut Step<'_, B>,
    head: Option<&str>,
    x: Tensor<B, 2>,
    key: &str,
) -> Result<Tensor<B, 2>, TrainError> {
    let Some(name) = head else { return Ok(x) };
    let h = step.head(name)?;
    let [_, d] = x.dims();
    if h.pair || h.d_output() != d {
        return Err(TrainError::recipe(
            format!("model.heads.{name}"),
            format!(
                "params.{key} `{name}` must project one {d}-d sentence vector to {d} units, but it gives {} units{}",
                h.d_output(),
                if h.pair { " from a pair" } else { "" }
            ),
            format!("make it an `mlp` without `classes` whose last `hidden` size is {d}"),
        ));
    }
    Ok(h.forward(x, None, Some(step.noise())))
}

#[cfg(test)]
mod tests {
    use super::*;
    use burn::backend::NdArray;
    use burn::module::Param;
    use burn::tensor::TensorData;
    use harness_model::heads::MlpConfig;

    type B = NdArray<f32>;

    /// Hand-computed: the response head is one tanh layer with identity weights and zero
    /// bias, so responses [[1, 0], [0, 2]] become [[tanh 1, 0], [0, tanh 2]]; inputs
    /// [[1, 0], [0, 1]] score them [[tanh 1, 0], [0, tanh 2]], each row a softmax over two.
    #[test]
    fn hand_checked_value_through_the_response_head() {
        let dev = Default::default();
        let mut head = MlpConfig::new(2, vec![2], 2)
            .with_projection(true)
            .init::<B>(&dev);
        assert_eq!(head.d_output(), 2);
        head.layers[0].weight = Param::from_tensor(Tensor::from_data(
            TensorData::new(vec![1f32, 0.0, 0.0, 1.0], [2, 2]),
            &dev,
        ));
        head.layers[0].bias = Some(Param::from_tensor(Tensor::zeros([2], &dev)));
        let t = |v: Vec<f32>| Tensor::<B, 2>::from_data(TensorData::new(v, [2, 2]), &dev);
        let u = t(vec![1.0, 0.0, 0.0, 1.0]);
        let v = head.forward(t(vec![1.0, 0.0, 0.0, 2.0]), None, None);
        let got = ranking_softmax(u, v, None, dot(), &RankingMasks::default()).into_scalar();
        let row = |s: f64| -(s.exp() / (s.exp() + 1.0)).ln();
        let want = (row(1f64.tanh()) + row(2f64.tanh())) / 2.0;
        assert!((got as f64 - want).abs() < 1e-6, "{got} vs {want}");
    }
}
