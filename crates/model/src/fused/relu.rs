//! `relu` as one operation on the CPU backend, with its own backward pass: burn-ndarray's
//! `relu` copies its shared input before clamping it, and its backward builds a boolean
//! mask tensor and runs `mask_fill`; here the forward writes `max(x, 0)` once and the
//! backward passes `dy` where the saved output is positive. Used by the transformer's
//! feed-forward layers.
//!
//! The rule is burn's exactly (forward `x < 0 → 0`, so `-0.0` and NaN pass as they are;
//! backward `y ≤ 0 → 0`), so values and gradients are bit-equal to burn's (tested).
//! [`relu`] serves burn-ndarray (f32) and its autodiff; on any other backend it is burn's own
//! `relu`.

use crate::fused::unary::{apply, Rule};
use burn::tensor::backend::Backend;
use burn::tensor::Tensor;

/// `relu(x)`, element by element.
pub fn relu<B: Backend, const D: usize>(x: Tensor<B, D>) -> Tensor<B, D> {
    apply::<Relu, B, D>(x)
}

#[derive(Debug)]
struct Relu;

impl Rule for Relu {
    /// burn-ndarray's `clamp_min(x, 0)`.
    fn forward(mut x: Vec<f32>) -> Vec<f32> {
        for v in &mut x {
            if *v < 0.0 {
                *v = 0.0;
            }
        }
        x
    }

    /// burn's `mask_fill(dy, y <= 0, 0)`.
    fn backward(d: &mut [f32], y: &[f32]) {
        for (d, &y) in d.iter_mut().zip(y) {
            if y <= 0.0 {
                *d = 0.0;
            }
        }
    }

    fn generic<B: Backend, const D: usize>(x: Tensor<B, D>) -> Tensor<B, D> {
        burn::tensor::activation::relu(x)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_support::fused::{values, CpuAd};
    use burn::tensor::TensorData;

    /// Bit for bit against burn's `relu`, zeros of both signs included.
    #[test]
    fn fused_relu_equals_burns_with_its_gradient() {
        let dev = Default::default();
        let mut v: Vec<f32> = (0..60).map(|i| (i as f32 - 30.0) * 0.17).collect();
        v[3] = 0.0;
        v[4] = -0.0;
        let w: Vec<f32> = (0..60).map(|i| (i as f32 * 0.9).cos()).collect();
        let w = Tensor::<CpuAd, 2>::from_data(TensorData::new(w, [6, 10]), &dev);
        let x1 =
            Tensor::<CpuAd, 2>::from_data(TensorData::new(v.clone(), [6, 10]), &dev).require_grad();
        let x2 = x1.clone().detach().require_grad();
        let a = relu(x1.clone());
        let b = burn::tensor::activation::relu(x2.clone());
        let bits = |v: Vec<f32>| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
        assert_eq!(bits(values(a.clone())), bits(values(b.clone())));
        let ga = x1.grad(&(a * w.clone()).sum().backward()).unwrap();
        let gb = x2.grad(&(b * w).sum().backward()).unwrap();
        assert_eq!(bits(values(ga)), bits(values(gb)));
        let inner = relu(x1.inner());
        assert_eq!(
            bits(values(inner)),
            bits(values(burn::tensor::activation::relu(x2.inner())))
        );
    }
}
