//! `center_loss`: center loss added with weight λ (Emu §2.2 eq. 2; Wen et al. 2016, "A
//! Discriminative Feature Learning Approach for Deep Face Recognition", eq. 2 and 4, as
//! their Caffe `center_loss_layer.cpp` computes it: the loss is
//! `Σ_i ‖x_i − c_{y_i}‖² / (2m)` over a batch of m, and each class centre moves by
//! `α · Σ_{i: y_i = j} (x_i − c_j) / (1 + n_j)`, its own update rule rather than the
//! optimizer's). Declared: the loss and the centre update are here and tested; the
//! objective trains with the Emu issue's `centers` head.

use crate::objectives::{CheckContext, ExampleKind, Loss, Objective};
use crate::step::{Side, Step};
use crate::TrainError;
use burn::tensor::backend::AutodiffBackend;
use burn::tensor::backend::Backend;
use burn::tensor::{IndexingUpdateOp, Int, Tensor};
use harness_recipe::check::Finding;
use serde::{Deserialize, Serialize};

/// The center loss of embeddings `x: [m, d]` with labels `[m]` and class centres
/// `centers: [classes, d]`: `Σ_i ‖x_i − c_{y_i}‖² / (2m)`.
pub fn center_loss<B: Backend>(
    x: Tensor<B, 2>,
    centers: Tensor<B, 2>,
    labels: Tensor<B, 1, Int>,
) -> Tensor<B, 1> {
    let [m, _] = x.dims();
    let c = centers.select(0, labels);
    (x - c).powf_scalar(2.0).sum() / (2.0 * m as f64)
}

/// The centres after one update of rate `alpha` (Wen et al. eq. 4):
/// `c_j ← c_j − α · Σ_{i: y_i = j} (c_j − x_i) / (1 + n_j)`; a class absent from the batch
/// keeps its centre.
pub fn updated_centers<B: Backend>(
    x: Tensor<B, 2>,
    centers: Tensor<B, 2>,
    labels: Tensor<B, 1, Int>,
    alpha: f64,
) -> Tensor<B, 2> {
    let [m, _] = x.dims();
    let [k, d] = centers.dims();
    let device = x.device();
    let diff = centers.clone().select(0, labels.clone()) - x;
    let sums =
        Tensor::<B, 2>::zeros([k, d], &device).select_assign(0, labels.clone(), diff, IndexingUpdateOp::Add);
    let counts = Tensor::<B, 2>::zeros([k, 1], &device).select_assign(
        0,
        labels,
        Tensor::ones([m, 1], &device),
        IndexingUpdateOp::Add,
    );
    centers - sums / (counts + 1.0) * alpha
}

/// Center loss, added with weight `lambda` (Emu eq. 2).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CenterLoss {
    pub head: String,
    pub lambda: f64,
    /// Learning rate of the centroid updates.
    #[serde(default = "half")]
    pub center_lr: f64,
    /// The task whose batches it shares (Emu eq. 2: the softmax task's), adding its loss
    /// to that task's on the same encodings.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub joint_with: Option<String>,
}

fn half() -> f64 {
    0.5
}

impl Objective for CenterLoss {
    const NAME: &'static str = "center_loss";
    const EXAMPLES: ExampleKind = ExampleKind::Labelled;

    fn check(&self, cx: &CheckContext<'_>) -> Vec<Finding> {
        let mut out = Vec::new();
        cx.head(&mut out, Self::NAME, &self.head, &["centers"]);
        cx.non_negative(&mut out, "lambda", self.lambda);
        cx.positive(&mut out, "center_lr", self.center_lr);
        cx.joint_with(&mut out, self.joint_with.as_deref());
        out
    }

    fn joint_with(&self) -> Option<&str> {
        self.joint_with.as_deref()
    }
}

impl Loss for CenterLoss {
    /// `λ · center_loss` against the current centres (fixed: no gradient reaches them), and
    /// Wen et al.'s update of the centres from this batch's encodings, applied by the
    /// trainer after the optimizer step (`Step::defer_head_weight`). The centres are the
    /// columns of the `centers` head's weight `[d, classes]`.
    fn loss<B: AutodiffBackend>(&self, step: &mut Step<'_, B>) -> Result<Tensor<B, 1>, TrainError> {
        let x = step.encode(Side::First)?.sentence;
        let labels = step.labels()?;
        let head = step.head_index(&self.head)?;
        let weight = step.model().heads[head].layers[0].weight.val().detach();
        let centers = weight.transpose();
        let updated = updated_centers(
            x.clone().detach().inner(),
            centers.clone().inner(),
            labels.clone().inner(),
            self.center_lr,
        );
        step.defer_head_weight(head, updated.transpose());
        Ok(center_loss(x, centers, labels) * self.lambda)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::objectives::gradcheck::{check_gradient, matrix as t2, F64};
    use burn::backend::NdArray;

    type B = NdArray<f32>;

    /// By hand: centres c0 = (0, 0), c1 = (1, 1), c2 = (5, 5); x = (1, 0) and (2, 0) of
    /// class 0, (1, 3) of class 1. Loss: (1 + 4 + 4) / (2·3) = 1.5. Update with α = 0.5:
    /// c0 − 0.5 · ((0−1) + (0−2), 0) / 3 = (0.5, 0); c1 − 0.5 · (0, 1−3) / 2 = (1, 1.5);
    /// c2, absent, stays.
    #[test]
    fn hand_checked_value_and_update() {
        let x = t2::<B>(&[1.0, 0.0, 2.0, 0.0, 1.0, 3.0], [3, 2]);
        let c = t2::<B>(&[0.0, 0.0, 1.0, 1.0, 5.0, 5.0], [3, 2]);
        let y = Tensor::<B, 1, Int>::from_ints([0, 0, 1], &Default::default());
        let loss = center_loss(x.clone(), c.clone(), y.clone()).into_scalar();
        assert!((loss - 1.5).abs() < 1e-6, "{loss}");
        let updated = updated_centers(x, c, y, 0.5).into_data().to_vec::<f32>().unwrap();
        assert_eq!(updated, vec![0.5, 0.0, 1.0, 1.5, 5.0, 5.0]);
    }

    /// The gradient reaching the embeddings (the encoder's side).
    #[test]
    fn gradient_matches_finite_differences() {
        let c = t2::<F64>(&[0.2, -0.1, 0.4, 0.3, -0.5, 0.6, 0.0, 0.1, -0.2], [3, 3]);
        let y = Tensor::<F64, 1, Int>::from_ints([2, 0, 2, 1], &Default::default());
        check_gradient::<2>([4, 3], 11, |x| center_loss(x, c.clone(), y.clone()));
    }
}
