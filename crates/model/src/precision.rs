//! Mixed precision for training (`train.precision: bf16`): PyTorch's
//! `torch.autocast(dtype=torch.bfloat16)` rule for `matmul` and `linear`, applied at the
//! model's product sites: inside an [`autocast`] scope, [`matmul`] and [`linear`] round both
//! operands to bfloat16, multiply (the backends accumulate in f32: cubecl's tensor-core
//! matmul on CUDA, burn-flex on the CPU) and hand back an f32 result. Weights, the optimizer,
//! element-wise work (gates, softmax, LayerNorm, GELU) and the losses stay f32, so no loss
//! scaling is needed (bfloat16 keeps f32's exponent range). Backward follows from burn's
//! autodiff: a cast's gradient is cast back, so the gradient products run in bfloat16 too
//! and the weights receive f32 gradients.
//!
//! One difference from autocast: PyTorch hands back a bfloat16 product and lets the next
//! element-wise ops run in bfloat16; here the product is cast back to f32 at once, so the
//! element-wise chain never mixes dtypes (burn's binary ops need equal dtypes) and keeps f32
//! rounding. The LSTM recurrence (`h·W_hh`, one small product per time step, bound by launch
//! latency rather than arithmetic) stays f32; its input projection over all time steps is a
//! product like any other.
//!
//! The scope is per thread, as autocast's is: the trainer opens it around a step's forward
//! pass; evaluation and encoding never run inside one. Devices without bfloat16 arithmetic
//! (`cpu`, whose training path is our own f32 kernels, and `wgpu`, whose WGSL has no
//! bfloat16) are refused before training starts (harness-train's session).

use burn::tensor::backend::Backend;
use burn::tensor::{DType, FloatDType, Tensor};
use std::cell::Cell;

thread_local! {
    static BF16: Cell<bool> = const { Cell::new(false) };
}

/// While alive, this thread's products run in bfloat16 (when `on`); dropping it restores
/// what was before.
#[must_use = "the scope ends when this is dropped"]
pub struct Autocast {
    previous: bool,
}

/// Opens a bfloat16 scope on this thread if `on` (else a scope that changes nothing).
pub fn autocast(on: bool) -> Autocast {
    Autocast {
        previous: BF16.with(|c| c.replace(on)),
    }
}

impl Drop for Autocast {
    fn drop(&mut self) {
        BF16.with(|c| c.set(self.previous));
    }
}

/// Whether this thread is inside a bfloat16 scope.
pub fn active() -> bool {
    BF16.with(|c| c.get())
}

/// `a · b` (burn's `matmul`), in bfloat16 inside a scope.
pub fn matmul<B: Backend, const D: usize>(a: Tensor<B, D>, b: Tensor<B, D>) -> Tensor<B, D> {
    if !active() {
        return a.matmul(b);
    }
    let dtype = a.dtype();
    bf16(a).matmul(bf16(b)).cast(float_dtype(dtype))
}

/// `layer` applied to `x` (burn's `Linear::forward`), its product in bfloat16 inside a
/// scope; the bias is added in f32.
pub fn linear<B: Backend, const D: usize>(
    layer: &burn::nn::Linear<B>,
    x: Tensor<B, D>,
) -> Tensor<B, D> {
    if !active() {
        return layer.forward(x);
    }
    let w = layer.weight.val().unsqueeze::<D>();
    let y = matmul(x, w);
    match &layer.bias {
        Some(b) => y + b.val().unsqueeze::<D>(),
        None => y,
    }
}

fn bf16<B: Backend, const D: usize>(t: Tensor<B, D>) -> Tensor<B, D> {
    t.cast(FloatDType::BF16)
}

fn float_dtype(dtype: DType) -> FloatDType {
    match dtype {
        DType::F64 => FloatDType::F64,
        DType::F16 => FloatDType::F16,
        DType::BF16 => FloatDType::BF16,
        _ => FloatDType::F32,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_scope_is_per_thread_and_restored_when_dropped() {
        assert!(!active());
        {
            let _outer = autocast(true);
            assert!(active());
            {
                let _inner = autocast(false);
                assert!(!active());
            }
            assert!(active());
            std::thread::spawn(|| assert!(!active())).join().unwrap();
        }
        assert!(!active());
    }

    #[test]
    fn outside_a_scope_products_are_burns_own() {
        type B = burn::backend::NdArray<f32>;
        let dev = Default::default();
        let a = Tensor::<B, 2>::from_floats([[1.0, 2.0], [3.0, 4.0]], &dev);
        let b = Tensor::<B, 2>::from_floats([[0.5, -1.0], [2.0, 0.25]], &dev);
        let ours = matmul(a.clone(), b.clone()).into_data();
        assert_eq!(ours, a.matmul(b).into_data());
    }

    /// The bfloat16 tests: they need burn-flex, a CPU backend with bfloat16 arithmetic
    /// (`cargo test -p harness-model --features flex`, a long suite: docs/tests.md).
    #[cfg(feature = "flex")]
    mod bf16 {
        use super::super::*;

        type Flex = burn::backend::Flex;
        type FlexAd = burn::backend::Autodiff<Flex>;

        fn round(x: f32) -> f32 {
            burn::tensor::bf16::from_f32(x).to_f32()
        }

        /// Values with bits below bfloat16's 8-bit significand, so that rounding shows.
        fn values(n: usize, seed: f32) -> Vec<f32> {
            (0..n)
                .map(|i| (seed + i as f32 * 0.618_034).sin() * 1.234_567)
                .collect()
        }

        fn floats<B: Backend>(t: Tensor<B, 2>) -> Vec<f32> {
            assert_eq!(t.dtype(), DType::F32, "products come back in f32");
            t.into_data().to_vec().unwrap()
        }

        #[test]
        fn inside_a_scope_a_product_reads_bf16_operands_and_comes_back_f32() {
            let dev = Default::default();
            let (m, k, n) = (3, 5, 4);
            let (a, b) = (values(m * k, 0.3), values(k * n, 1.7));
            let ta = Tensor::<Flex, 2>::from_data(
                burn::tensor::TensorData::new(a.clone(), [m, k]),
                &dev,
            );
            let tb = Tensor::<Flex, 2>::from_data(
                burn::tensor::TensorData::new(b.clone(), [k, n]),
                &dev,
            );
            let f32_product = floats(ta.clone().matmul(tb.clone()));
            let got = {
                let _bf16 = autocast(true);
                floats(matmul(ta, tb))
            };
            let mut differs = false;
            for i in 0..m {
                for j in 0..n {
                    // bfloat16 operands, an f32 sum, the result rounded to bfloat16.
                    let exact: f32 = (0..k)
                        .map(|p| round(a[i * k + p]) * round(b[p * n + j]))
                        .sum();
                    let g = got[i * n + j];
                    assert_eq!(round(g), g, "({i},{j}): {g} is not a bfloat16 value");
                    let ulp = (exact.abs() * 2f32.powi(-7)).max(f32::MIN_POSITIVE);
                    assert!((g - exact).abs() <= ulp, "({i},{j}): {g} against {exact}");
                    differs |= g != f32_product[i * n + j];
                }
            }
            assert!(
                differs,
                "the bfloat16 products equal the f32 ones everywhere"
            );
        }

        #[test]
        fn gradients_through_a_bf16_product_reach_f32_weights() {
            let dev = Default::default();
            let layer = burn::nn::LinearConfig::new(6, 3).init::<FlexAd>(&dev);
            let x = Tensor::<FlexAd, 2>::from_data(
                burn::tensor::TensorData::new(values(12, 0.9), [2, 6]),
                &dev,
            )
            .require_grad();
            let (y_f32, y_bf16) = (floats(layer.forward(x.clone()).inner()), {
                let _bf16 = autocast(true);
                let y = linear(&layer, x.clone());
                let grads = (y.clone() * y.clone()).sum().backward();
                let w = layer.weight.val().grad(&grads).expect("a weight gradient");
                let b = layer
                    .bias
                    .as_ref()
                    .unwrap()
                    .val()
                    .grad(&grads)
                    .expect("a bias gradient");
                let gx = x.grad(&grads).expect("an input gradient");
                assert_eq!(
                    (w.dtype(), b.dtype(), gx.dtype()),
                    (DType::F32, DType::F32, DType::F32)
                );
                // dx = dy·Wᵀ is itself a bfloat16 product.
                for v in floats(gx) {
                    assert_eq!(round(v), v, "{v} is not a bfloat16 value");
                }
                floats(y.inner())
            });
            let largest = y_f32
                .iter()
                .zip(&y_bf16)
                .map(|(a, b)| (a - b).abs())
                .fold(0f32, f32::max);
            assert!(
                largest > 0.0 && largest < 2e-2,
                "largest difference {largest}"
            );
        }
    }
}
