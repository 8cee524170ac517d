//! `l2_similarity`: α times the squared L2 distance between the sentence encodings of
//! aligned sentences, averaged over the batch (Yu et al. 2018, §2.2: the similarity loss
//! added to the translation losses, `L = L_NMT + α·Σ‖h(s) − h(t)‖²`).

use crate::objectives::{CheckContext, ExampleKind, Loss, Objective};
use crate::step::{Side, Step};
use crate::TrainError;
use burn::tensor::backend::{AutodiffBackend, Backend};
use burn::tensor::Tensor;
use harness_recipe::check::Finding;
use serde::{Deserialize, Serialize};

/// Squared L2 distance between the encodings of aligned sentences, times `alpha`
/// (seq2seq §2.2).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct L2Similarity {
    #[serde(default = "one")]
    pub alpha: f64,
    /// Task whose batches this loss is added to (same pairs, one backward pass).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub joint_with: Option<String>,
}

fn one() -> f64 {
    1.0
}

impl Objective for L2Similarity {
    const NAME: &'static str = "l2_similarity";
    const EXAMPLES: ExampleKind = ExampleKind::Pairs;

    fn check(&self, cx: &CheckContext<'_>) -> Vec<Finding> {
        let mut out = Vec::new();
        cx.non_negative(&mut out, "alpha", self.alpha);
        cx.joint_with(&mut out, self.joint_with.as_deref());
        out
    }

    fn joint_with(&self) -> Option<&str> {
        self.joint_with.as_deref()
    }
}

impl Loss for L2Similarity {
    fn loss<B: AutodiffBackend>(&self, step: &mut Step<'_, B>) -> Result<Tensor<B, 1>, TrainError> {
        let [u, v] = step.encode_sides([Side::First, Side::Second])?.map(|e| e.sentence);
        Ok(l2_similarity(u, v, self.alpha))
    }
}

/// `α · mean_i ‖a_i − b_i‖²` for `a, b: [batch, dim]`.
pub fn l2_similarity<B: Backend>(a: Tensor<B, 2>, b: Tensor<B, 2>, alpha: f64) -> Tensor<B, 1> {
    let [batch, _] = a.dims();
    let d = a - b;
    (d.clone() * d).sum() * (alpha / batch.max(1) as f64)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::objectives::gradcheck::{check_gradient, F64};
    use burn::backend::NdArray;
    use burn::tensor::TensorData;

    type B = NdArray<f32>;

    #[test]
    fn hand_checked_value() {
        let dev = Default::default();
        let a = Tensor::<B, 2>::from_data(TensorData::new(vec![1f32, 2., 0., 0.], [2, 2]), &dev);
        let b = Tensor::<B, 2>::from_data(TensorData::new(vec![1f32, 0., 3., 4.], [2, 2]), &dev);
        // ‖(0, 2)‖² = 4, ‖(−3, −4)‖² = 25: mean 14.5, times α = 0.5.
        let v = l2_similarity(a, b, 0.5).into_scalar();
        assert!((v - 7.25).abs() < 1e-6, "{v}");
    }

    #[test]
    fn gradient_matches_finite_differences() {
        let dev = Default::default();
        let b = Tensor::<F64, 2>::from_data(
            TensorData::new(vec![0.3f32, -0.2, 0.5, 0.1, 0.0, -0.7], [2, 3]),
            &dev,
        );
        check_gradient::<2>([2, 3], 9, |x| l2_similarity(x, b.clone(), 0.7));
    }
}
