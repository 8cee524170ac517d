//! `nli_classification`: 3-way cross-entropy of an MLP head over the pair features of a
//! premise and a hypothesis encoding (LASER §5.2's multitask NLI objective; the head reads
//! `(u, v, |u − v|, u ∗ v)`, see `model/heads.rs`).

use burn::tensor::activation::log_softmax;
use burn::tensor::backend::Backend;
use burn::tensor::{Int, Tensor};

/// Mean cross-entropy of `logits: [batch, classes]` against `labels: [batch]`.
pub fn classification_ce<B: Backend>(
    logits: Tensor<B, 2>,
    labels: Tensor<B, 1, Int>,
) -> Tensor<B, 1> {
    let [batch, _] = logits.dims();
    log_softmax(logits, 1)
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
