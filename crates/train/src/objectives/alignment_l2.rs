//! `alignment_l2`: align a target-language encoder to a frozen English one on parallel data
//! (Conneau et al. 2018, XNLI, §4.2.2, `../shared/papers/xnli-2018.txt`):
//!
//! `L = ‖x − y‖ − λ (‖x_c − y‖ + ‖x − y_c‖)`
//!
//! with `x` the target sentence's embedding (the task's own encoder, `encoder:`), `y` its
//! English translation's (the encoder it reads, `reads:`, frozen in the stage), and
//! `(x_c, y_c)` a randomly sampled other pair (§5.1: "We sample negatives randomly"). The
//! distance is the L2 norm, not its square (§4.2.2). Negatives are drawn within the batch:
//! each negative is a random cyclic shift `s ∈ [1, batch)` of the batch (so never the pair
//! itself), one draw per negative and step from the step's seeded stream. With `negatives:
//! k > 1` the negative term is the mean over the `k` shifts, so that λ keeps its meaning;
//! the paper uses one. `lambda: 0` is Table 5's "no negatives" row.

use crate::objectives::{CheckContext, ExampleKind, Loss, Objective, PairOptions};
use crate::step::{Side, Step};
use crate::TrainError;
use burn::tensor::backend::{AutodiffBackend, Backend};
use burn::tensor::{Int, Tensor, TensorData};
use harness_recipe::check::Finding;
use serde::{Deserialize, Serialize};

/// Added under the square root of each distance: the norm's gradient `d / ‖d‖` stays finite
/// (bounded by 1) when a distance is zero.
const EPS: f64 = 1e-12;

/// Align a target-language encoder to a frozen English one on parallel data (XNLI §4.2.2).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AlignmentL2 {
    /// Weight λ of the negative (contrastive) terms; 0: no negatives (Table 5).
    #[serde(default = "quarter")]
    pub lambda: f64,
    /// Random negative pairs per pair (the paper: 1).
    #[serde(default = "one")]
    pub negatives: u32,
}

fn quarter() -> f64 {
    0.25
}

fn one() -> u32 {
    1
}

impl Objective for AlignmentL2 {
    const NAME: &'static str = "alignment_l2";
    const EXAMPLES: ExampleKind = ExampleKind::Pairs;

    fn check(&self, cx: &CheckContext<'_>) -> Vec<Finding> {
        let mut out = Vec::new();
        cx.non_negative(&mut out, "lambda", self.lambda);
        if self.lambda > 0.0 && self.negatives == 0 {
            out.push(Finding::new(
                crate::objectives::check::param("negatives"),
                "must be ≥ 1 when `lambda` > 0 (set `lambda: 0` for no negatives)",
            ));
        }
        out
    }

    /// Every pair as `X → eng`: the first side (the trained target encoder) reads the
    /// non-English sentence, the second (the frozen English encoder) its translation.
    fn pair_options(&self) -> PairOptions {
        PairOptions::default()
    }
}

impl Loss for AlignmentL2 {
    fn loss<B: AutodiffBackend>(&self, step: &mut Step<'_, B>) -> Result<Tensor<B, 1>, TrainError> {
        let [x, y] = step.encode_sides([Side::First, Side::Second])?.map(|e| e.sentence);
        let [batch, _] = x.dims();
        let k = if self.lambda > 0.0 && batch > 1 {
            self.negatives as usize
        } else {
            0
        };
        let shifts: Vec<usize> = (0..k).map(|_| 1 + step.noise().below(batch - 1)).collect();
        Ok(alignment_l2(x, y, self.lambda, &shifts))
    }
}

/// `‖a_i − b_i‖` per row of `a, b: [batch, dim]`.
fn distances<B: Backend>(a: Tensor<B, 2>, b: Tensor<B, 2>) -> Tensor<B, 1> {
    let d = a - b;
    let [batch, _] = d.dims();
    (d.clone() * d)
        .sum_dim(1)
        .add_scalar(EPS)
        .sqrt()
        .reshape([batch])
}

/// Rows `(i + shift) mod batch` of `m`.
fn rolled<B: Backend>(m: Tensor<B, 2>, shift: usize) -> Tensor<B, 2> {
    let [batch, _] = m.dims();
    let index: Vec<i64> = (0..batch).map(|i| ((i + shift) % batch) as i64).collect();
    let index = Tensor::<B, 1, Int>::from_data(TensorData::new(index, [batch]), &m.device());
    m.select(0, index)
}

/// The batch mean of `‖x_i − y_i‖ − λ · mean_s (‖x_{i+s} − y_i‖ + ‖x_i − y_{i+s}‖)` over the
/// cyclic `shifts` (indices mod the batch); no shifts: the positive term alone.
pub fn alignment_l2<B: Backend>(
    x: Tensor<B, 2>,
    y: Tensor<B, 2>,
    lambda: f64,
    shifts: &[usize],
) -> Tensor<B, 1> {
    let positive = distances(x.clone(), y.clone()).mean();
    if shifts.is_empty() || lambda == 0.0 {
        return positive;
    }
    let mut negative: Option<Tensor<B, 1>> = None;
    for &s in shifts {
        let x_c = rolled(x.clone(), s);
        let y_c = rolled(y.clone(), s);
        let term = distances(x_c, y.clone()).mean() + distances(x.clone(), y_c).mean();
        negative = Some(match negative {
            Some(n) => n + term,
            None => term,
        });
    }
    let negative = negative.expect("at least one shift");
    positive - negative * (lambda / shifts.len() as f64)
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

    /// x = [(0, 0), (3, 4)], y = [(0, 1), (3, 0)]: positives ‖(0, −1)‖ = 1 and ‖(0, 4)‖ = 4,
    /// mean 2.5. Shift 1 swaps the rows: ‖x_c − y‖ = ‖(3, 3)‖, ‖(−3, 0)‖ = √18, 3;
    /// ‖x − y_c‖ = ‖(−3, 0)‖, ‖(3, 3)‖ = 3, √18: the negative term is √18 + 3.
    #[test]
    fn hand_checked_value() {
        let x = t(vec![0.0, 0.0, 3.0, 4.0], [2, 2]);
        let y = t(vec![0.0, 1.0, 3.0, 0.0], [2, 2]);
        let none = alignment_l2(x.clone(), y.clone(), 0.25, &[]).into_scalar() as f64;
        assert!((none - 2.5).abs() < 1e-6, "{none}");
        let no_lambda = alignment_l2(x.clone(), y.clone(), 0.0, &[1]).into_scalar() as f64;
        assert!((no_lambda - 2.5).abs() < 1e-6, "{no_lambda}");
        let want = 2.5 - 0.25 * (18f64.sqrt() + 3.0);
        let got = alignment_l2(x.clone(), y.clone(), 0.25, &[1]).into_scalar() as f64;
        assert!((got - want).abs() < 1e-6, "{got} vs {want}");
        // Two negatives (the same shift twice): their mean, the same value.
        let twice = alignment_l2(x, y, 0.25, &[1, 1]).into_scalar() as f64;
        assert!((twice - want).abs() < 1e-6, "{twice}");
    }

    #[test]
    fn gradient_matches_finite_differences() {
        let dev = Default::default();
        let y = Tensor::<F64, 2>::from_data(
            TensorData::new(
                vec![0.3f32, -0.2, 0.5, 0.1, 0.0, -0.7, 0.4, 0.4, 0.2, -0.6, 0.8, 0.1],
                [4, 3],
            ),
            &dev,
        );
        check_gradient::<2>([4, 3], 11, |x| alignment_l2(x, y.clone(), 0.25, &[1, 3]));
        check_gradient::<2>([4, 3], 12, |x| alignment_l2(x, y.clone(), 0.0, &[]));
    }

    /// The frozen side gets no gradient through the loss: only `x` is trained.
    #[test]
    fn only_the_target_side_is_differentiated() {
        let dev = Default::default();
        let x = Tensor::<F64, 2>::from_data(
            TensorData::new(vec![0.1f32, 0.2, 0.3, 0.4], [2, 2]),
            &dev,
        )
        .require_grad();
        let y = Tensor::<F64, 2>::from_data(
            TensorData::new(vec![0.5f32, -0.2, 0.0, 0.9], [2, 2]),
            &dev,
        );
        let grads = alignment_l2(x.clone(), y.clone(), 0.25, &[1]).backward();
        assert!(x.grad(&grads).is_some());
        assert!(y.grad(&grads).is_none());
    }
}
