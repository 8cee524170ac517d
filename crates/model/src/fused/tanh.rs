//! `tanh` as one operation on the CPU backend, with its own backward pass (`dx = dy·(1 − y²)`
//! from the saved output): the vectorised tanh of `harness-kernels` (within 3e-7 of the exact
//! value) instead of burn-ndarray's element-by-element libm call, and one node instead of
//! burn's tanh and its backward chain. Used by the character n-gram layer and the tanh heads.
//!
//! [`tanh`] serves burn-ndarray (f32) and its autodiff; on any other backend it is burn's own
//! `tanh`. The test below compares values and gradients with burn's.

use crate::fused::unary::{apply, Rule};
use burn::tensor::backend::Backend;
use burn::tensor::Tensor;

/// `tanh(x)`, element by element.
pub fn tanh<B: Backend, const D: usize>(x: Tensor<B, D>) -> Tensor<B, D> {
    apply::<Tanh, B, D>(x)
}

#[derive(Debug)]
struct Tanh;

impl Rule for Tanh {
    fn forward(mut x: Vec<f32>) -> Vec<f32> {
        harness_kernels::tanh(&mut x);
        x
    }

    fn backward(d: &mut [f32], y: &[f32]) {
        for (d, y) in d.iter_mut().zip(y) {
            *d *= 1.0 - y * y;
        }
    }

    fn generic<B: Backend, const D: usize>(x: Tensor<B, D>) -> Tensor<B, D> {
        x.tanh()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_support::fused::{values, CpuAd};
    use burn::tensor::TensorData;

    #[test]
    fn fused_tanh_equals_burns_with_its_gradient() {
        let dev = Default::default();
        let v: Vec<f32> = (0..60).map(|i| (i as f32 - 30.0) * 0.17).collect();
        let w: Vec<f32> = (0..60).map(|i| (i as f32 * 0.9).cos()).collect();
        let w = Tensor::<CpuAd, 2>::from_data(TensorData::new(w, [6, 10]), &dev);
        let x1 =
            Tensor::<CpuAd, 2>::from_data(TensorData::new(v.clone(), [6, 10]), &dev).require_grad();
        let x2 = x1.clone().detach().require_grad();
        let a = tanh(x1.clone());
        let b = x2.clone().tanh();
        let (va, vb) = (values(a.clone()), values(b.clone()));
        assert!(va.iter().zip(&vb).all(|(x, y)| (x - y).abs() <= 1e-6));
        let ga = x1.grad(&(a * w.clone()).sum().backward()).unwrap();
        let gb = x2.grad(&(b * w).sum().backward()).unwrap();
        let (ga, gb) = (values(ga), values(gb));
        assert!(ga.iter().zip(&gb).all(|(x, y)| (x - y).abs() <= 1e-6));
        let inner = tanh(x1.inner());
        assert!(values(inner)
            .iter()
            .zip(&vb)
            .all(|(x, y)| (x - y).abs() <= 1e-6));
    }
}
