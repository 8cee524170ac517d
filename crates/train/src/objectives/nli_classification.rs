//! `nli_classification`: 3-way cross-entropy of an MLP head over the pair features of a
//! premise and a hypothesis encoding (LASER §5.2's multitask NLI objective; the head reads
//! `(u, v, |u − v|, u ∗ v)`, see `model/heads.rs`).

use crate::objectives::{CheckContext, ExampleKind, Loss, Objective};
use crate::step::{Side, Step};
use crate::TrainError;
use harness_model::fused::device_nodes::log_softmax;
use burn::tensor::backend::{AutodiffBackend, Backend};
use burn::tensor::{Int, Tensor};
use harness_recipe::check::Finding;
use serde::{Deserialize, Serialize};

/// 3-way NLI classification through a pair-feature head.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NliClassification {
    /// The `mlp` head of `model.heads` that classifies.
    pub head: String,
}

impl Objective for NliClassification {
    const NAME: &'static str = "nli_classification";
    const EXAMPLES: ExampleKind = ExampleKind::Nli;

    fn check(&self, cx: &CheckContext<'_>) -> Vec<Finding> {
        let mut out = Vec::new();
        cx.head(&mut out, Self::NAME, &self.head, &["mlp"]);
        out
    }
}

impl Loss for NliClassification {
    fn loss<B: AutodiffBackend>(&self, step: &mut Step<'_, B>) -> Result<Tensor<B, 1>, TrainError> {
        let head = step.head(&self.head)?;
        let [u, v] = step.encode_sides([Side::First, Side::Second])?.map(|e| e.sentence);
        let labels = step.nli_batch()?.labels.clone();
        let logits = head.forward(u, Some(v), Some(step.noise()));
        Ok(classification_ce(logits, labels))
    }
}

/// Mean cross-entropy of `logits: [batch, classes]` against `labels: [batch]`.
pub fn classification_ce<B: Backend>(
    logits: Tensor<B, 2>,
    labels: Tensor<B, 1, Int>,
) -> Tensor<B, 1> {
    let [batch, _] = logits.dims();
    log_softmax(logits)
        .gather(1, labels.reshape([batch, 1]))
        .neg()
        .mean()
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
        // Uniform logits over 3 classes: ln 3 whatever the label.
        let logits = Tensor::<B, 2>::zeros([2, 3], &dev);
        let labels = Tensor::<B, 1, Int>::from_data(TensorData::new(vec![0i64, 2], [2]), &dev);
        let v = classification_ce(logits, labels).into_scalar();
        assert!((v - 3f32.ln()).abs() < 1e-6);
    }

    #[test]
    fn gradient_matches_finite_differences() {
        let dev = Default::default();
        let labels = Tensor::<F64, 1, Int>::from_data(TensorData::new(vec![1i64, 0], [2]), &dev);
        check_gradient::<2>([2, 3], 4, |x| classification_ce(x, labels.clone()));
    }
}
