//! The exact (erf) GELU as one operation on the CPU backend, with its own backward pass
//! (`dx = dy·(Φ(x) + x·φ(x))` from the saved input): the vectorised GELU of `harness-kernels`
//! (PyTorch's CPU erf formula, within 1e-6 of the exact value) instead of burn-ndarray's
//! element-by-element f64 libm `erf` and the chain of nodes burn's `gelu` builds for its
//! backward. Used by BERT's feed-forward blocks, in inference and in fine-tuning.
//!
//! [`gelu`] serves burn-ndarray (f32) and its autodiff; on any other backend it is burn's own
//! `gelu`. The test below compares values and gradients with burn's.

use crate::fused::unary::{apply, Rule};
use burn::tensor::backend::Backend;
use burn::tensor::Tensor;

/// `x/2 · (1 + erf(x/√2))`, element by element.
pub fn gelu<B: Backend, const D: usize>(x: Tensor<B, D>) -> Tensor<B, D> {
    apply::<Gelu, B, D>(x)
}

#[derive(Debug)]
struct Gelu;

impl Rule for Gelu {
    const SAVES_INPUT: bool = true;

    fn forward(mut x: Vec<f32>) -> Vec<f32> {
        harness_kernels::gelu(&mut x);
        x
    }

    fn backward(d: &mut [f32], x: &[f32]) {
        harness_kernels::gelu_backward(d, x);
    }

    fn generic<B: Backend, const D: usize>(x: Tensor<B, D>) -> Tensor<B, D> {
        burn::tensor::activation::gelu(x)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_support::fused::{values, CpuAd};
    use burn::tensor::TensorData;

    /// erf in f64 by its Maclaurin series (exact to ~1e-11 for |x| ≤ 4, the points below).
    fn erf_f64(x: f64) -> f64 {
        let (mut term, mut sum, mut n) = (x, x, 0.0);
        while term.abs() > 1e-17 * sum.abs().max(1e-300) {
            n += 1.0;
            term *= -x * x / n;
            sum += term / (2.0 * n + 1.0);
        }
        sum * 2.0 / std::f64::consts::PI.sqrt()
    }

    #[test]
    fn fused_gelu_equals_burns_and_its_gradient_is_the_derivative() {
        let dev = Default::default();
        let v: Vec<f32> = (0..60).map(|i| (i as f32 - 30.0) * 0.17).collect();
        let w: Vec<f32> = (0..60).map(|i| (i as f32 * 0.9).cos()).collect();
        let w = Tensor::<CpuAd, 2>::from_data(TensorData::new(w, [6, 10]), &dev);
        let x1 =
            Tensor::<CpuAd, 2>::from_data(TensorData::new(v.clone(), [6, 10]), &dev).require_grad();
        let a = gelu(x1.clone());
        let b = burn::tensor::activation::gelu(x1.clone().detach());
        let (va, vb) = (values(a.clone()), values(b.clone()));
        assert!(
            va.iter().zip(&vb).all(|(x, y)| (x - y).abs() <= 2e-6),
            "{va:?} vs {vb:?}"
        );
        // The gradient against GELU's derivative `Φ(x) + x·φ(x)` in f64 (burn's own backward
        // is further from it: up to 9e-4 on these points).
        let ga = values(x1.grad(&(a * w.clone()).sum().backward()).unwrap());
        let wv = values(w);
        for ((&x, &g), &w) in v.iter().zip(&ga).zip(&wv) {
            let x = x as f64;
            let cdf = 0.5 * (1.0 + erf_f64(x / std::f64::consts::SQRT_2));
            let want =
                w as f64 * (cdf + x * (-0.5 * x * x).exp() / (2.0 * std::f64::consts::PI).sqrt());
            assert!((g as f64 - want).abs() <= 4e-6, "x = {x}: {g} vs {want}");
        }
        let inner = gelu(x1.inner());
        assert!(values(inner)
            .iter()
            .zip(&vb)
            .all(|(x, y)| (x - y).abs() <= 2e-6));
    }
}
