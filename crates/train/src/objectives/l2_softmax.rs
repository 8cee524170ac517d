//! `l2_softmax`: L2-constrained softmax classification through an `l2_softmax` head (Emu
//! §2.2; Ranjan et al. 2017, "L2-constrained Softmax Loss for Discriminative Face
//! Verification", eq. 4: each feature L2-normalised and scaled to radius α, then the
//! softmax layer and cross-entropy). The head is the softmax layer (an `l2_softmax` head of
//! `model.heads`, whose `alpha` is the radius); the encodings are the first side of the
//! task's labelled sentences.

use crate::objectives::{CheckContext, ExampleKind, Loss, Objective};
use crate::step::{Side, Step};
use crate::TrainError;
use burn::tensor::backend::AutodiffBackend;
use burn::tensor::backend::Backend;
use burn::tensor::{Int, Tensor};
use harness_recipe::check::Finding;
use serde::{Deserialize, Serialize};

/// Smallest norm divided by, so that a zero embedding gives zero features, not NaN.
const MIN_NORM: f64 = 1e-12;

/// Logits of the L2-constrained softmax layer: `(α · u / ‖u‖) W + b` for embeddings
/// `u: [batch, d]`, weights `w: [d, classes]` and bias `b: [classes]`.
pub fn l2_constrained_logits<B: Backend>(
    u: Tensor<B, 2>,
    w: Tensor<B, 2>,
    b: Tensor<B, 1>,
    alpha: f64,
) -> Tensor<B, 2> {
    let norm = u.clone().powf_scalar(2.0).sum_dim(1).sqrt().clamp_min(MIN_NORM);
    harness_model::precision::matmul(u / norm * alpha, w) + b.unsqueeze()
}

/// The L2-constrained softmax loss: mean cross-entropy of [`l2_constrained_logits`] against
/// `labels: [batch]`.
pub fn l2_softmax_loss<B: Backend>(
    u: Tensor<B, 2>,
    w: Tensor<B, 2>,
    b: Tensor<B, 1>,
    alpha: f64,
    labels: Tensor<B, 1, Int>,
) -> Tensor<B, 1> {
    crate::objectives::nli_classification::classification_ce(
        l2_constrained_logits(u, w, b, alpha),
        labels,
    )
}

/// A loss computed by one head (L2-constrained softmax).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct L2Softmax {
    pub head: String,
    /// Normalise and scale the embeddings before the softmax layer (the L2 constraint);
    /// `false` is the plain softmax of Emu's ablation (the embeddings as they are).
    #[serde(default = "yes")]
    pub constrained: bool,
}

fn yes() -> bool {
    true
}

impl Objective for L2Softmax {
    const NAME: &'static str = "l2_softmax";
    const EXAMPLES: ExampleKind = ExampleKind::Labelled;

    fn check(&self, cx: &CheckContext<'_>) -> Vec<Finding> {
        let mut out = Vec::new();
        cx.head(&mut out, Self::NAME, &self.head, &["l2_softmax"]);
        out
    }
}

/// The `alpha` of the `l2_softmax` head `name` of the recipe.
fn alpha_of(plan: &crate::plan::Plan, name: &str) -> Result<f64, TrainError> {
    match plan.recipe.model.as_ref().and_then(|m| m.heads.get(name)) {
        Some(harness_recipe::schema::Head::L2Softmax(h)) => Ok(h.alpha),
        _ => Err(TrainError::recipe(
            format!("model.heads.{name}"),
            "objective `l2_softmax` needs an `l2_softmax` head",
            "declare it as `{kind: l2_softmax, alpha: 16}`",
        )),
    }
}

impl Loss for L2Softmax {
    fn loss<B: AutodiffBackend>(&self, step: &mut Step<'_, B>) -> Result<Tensor<B, 1>, TrainError> {
        let alpha = alpha_of(step.plan(), &self.head)?;
        let u = step.encode(Side::First)?.sentence;
        let labels = step.labels()?;
        let layer = &step.head(&self.head)?.layers[0];
        let bias = layer.bias.as_ref().map(|b| b.val()).unwrap_or_else(|| {
            let [_, k] = layer.weight.dims();
            Tensor::zeros([k], &u.device())
        });
        if !self.constrained {
            let logits = harness_model::precision::matmul(u, layer.weight.val()) + bias.unsqueeze();
            return Ok(crate::objectives::nli_classification::classification_ce(
                logits, labels,
            ));
        }
        Ok(l2_softmax_loss(u, layer.weight.val(), bias, alpha, labels))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::objectives::gradcheck::{check_gradient, matrix as t2, F64};
    use burn::backend::NdArray;

    type B = NdArray<f32>;

    /// By hand: u = (3, 4) has norm 5, so with α = 10 the features are (6, 8); W = I and
    /// b = (0, 1) give logits (6, 9), and label 0 costs ln(1 + e³) = 3.04859.
    /// Scaling u changes nothing (the constraint), and α scales the logits.
    #[test]
    fn hand_checked_value() {
        let w = t2::<B>(&[1.0, 0.0, 0.0, 1.0], [2, 2]);
        let b = Tensor::<B, 1>::from_floats([0.0, 1.0], &Default::default());
        let logits = l2_constrained_logits(t2::<B>(&[3.0, 4.0], [1, 2]), w.clone(), b.clone(), 10.0);
        assert_eq!(logits.into_data().to_vec::<f32>().unwrap(), vec![6.0, 9.0]);
        let labels = Tensor::<B, 1, Int>::from_ints([0], &Default::default());
        let at = |u: &[f32]| {
            l2_softmax_loss(t2::<B>(u, [1, 2]), w.clone(), b.clone(), 10.0, labels.clone())
                .into_scalar()
        };
        let expected = (1.0f32 + 3f32.exp()).ln();
        assert!((at(&[3.0, 4.0]) - expected).abs() < 1e-5, "{}", at(&[3.0, 4.0]));
        assert!((at(&[30.0, 40.0]) - expected).abs() < 1e-5);
        // A zero embedding gives the bias alone, not NaN.
        let zero = l2_constrained_logits(t2::<B>(&[0.0, 0.0], [1, 2]), w, b, 10.0);
        assert_eq!(zero.into_data().to_vec::<f32>().unwrap(), vec![0.0, 1.0]);
    }

    /// The gradient with respect to the embeddings and to the layer's weights.
    #[test]
    fn gradient_matches_finite_differences() {
        let dev = Default::default();
        let labels = Tensor::<F64, 1, Int>::from_ints([2, 0, 1], &dev);
        let w = t2::<F64>(&[0.3, -0.2, 0.5, 0.1, 0.4, -0.6, -0.3, 0.2, 0.7, 0.5, -0.1, 0.2], [4, 3]);
        let b = Tensor::<F64, 1>::from_floats([0.1, -0.2, 0.05], &dev);
        check_gradient::<2>([3, 4], 7, |u| {
            l2_softmax_loss(u, w.clone(), b.clone(), 4.0, labels.clone())
        });
        let u = t2::<F64>(&[0.5, -1.0, 0.25, 0.8, -0.3, 0.6, 1.0, -0.2, 0.9, 0.1, -0.4, 0.3], [3, 4]);
        check_gradient::<2>([4, 3], 8, |w| {
            l2_softmax_loss(u.clone(), w, b.clone(), 4.0, labels.clone())
        });
    }
}
