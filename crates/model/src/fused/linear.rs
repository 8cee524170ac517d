//! A linear layer on a matrix (`y = x·W + b`, `x: [rows, d_in]`) as one operation on the
//! CPU backend, with its own backward pass: `dx = dy·Wᵀ`, `dW = xᵀ·dy`, `db = Σ_rows dy`,
//! each one product (`harness-kernels`) reading the saved arrays in place: `y` and `dx`
//! through `gemm_w`, which packs only the weights (a tile at a time) and reads the rows in
//! place, `dW` through the general `gemm` with transposed strides.
//!
//! Why: burn's linear backward transposes `x` and `W` with `swap_dims`, and burn-ndarray's
//! matmul then copies each transposed operand into a fresh array before multiplying; for the
//! transformer's four linear layers a pass, those copies were a tenth of a training step.
//!
//! Semantics are `burn::nn::Linear::forward` on a 2-D input exactly, up to float rounding
//! (the tests below compare values and all three gradients). [`linear`] serves burn-ndarray
//! (f32) and its autodiff; on any other backend it runs burn's own `Linear::forward`.

use crate::fused::lstm::{register_grad, with_values};
use burn::backend::autodiff::checkpoint::base::Checkpointer;
use burn::backend::autodiff::checkpoint::strategy::NoCheckpointing;
use burn::backend::autodiff::grads::Gradients;
use burn::backend::autodiff::ops::{Backward, Ops, OpsKind};
use burn::backend::ndarray::NdArrayTensor;
use burn::backend::{Autodiff, NdArray};
use burn::nn::Linear;
use burn::tensor::backend::Backend;
use burn::tensor::ops::FloatTensorOps;
use burn::tensor::{Tensor, TensorData, TensorPrimitive};
use harness_kernels::{gemm, gemm_w};
use std::any::Any;

type Cpu = NdArray<f32>;
type CpuAd = Autodiff<Cpu>;

/// `layer` applied to the rows of `x` (`[rows, d_in]` → `[rows, d_out]`).
pub fn linear<B: Backend>(layer: &Linear<B>, x: Tensor<B, 2>) -> Tensor<B, 2> {
    let any: &dyn Any = layer;
    if let Some(l) = any.downcast_ref::<Linear<CpuAd>>() {
        let x: Box<dyn Any> = Box::new(x);
        let x = *x
            .downcast::<Tensor<CpuAd, 2>>()
            .expect("the layer's backend");
        let out: Box<dyn Any> = Box::new(autodiff_linear(l, x));
        return *out.downcast::<Tensor<B, 2>>().expect("the same backend");
    }
    if let Some(l) = any.downcast_ref::<Linear<Cpu>>() {
        let x: Box<dyn Any> = Box::new(x);
        let x = *x.downcast::<Tensor<Cpu, 2>>().expect("the layer's backend");
        let [rows, d_in] = x.dims();
        let [_, d_out] = l.weight.dims();
        let w = l.weight.val().into_primitive().tensor();
        let b = l.bias.as_ref().map(|b| b.val().into_primitive().tensor());
        let x = x.into_primitive().tensor();
        let y = forward(&x, &w, b.as_ref(), rows, d_in, d_out);
        let out: Box<dyn Any> = Box::new(Tensor::<Cpu, 2>::from_data(
            TensorData::new(y, [rows, d_out]),
            &Default::default(),
        ));
        return *out.downcast::<Tensor<B, 2>>().expect("the same backend");
    }
    crate::precision::linear(layer, x)
}

fn forward(
    x: &NdArrayTensor,
    w: &NdArrayTensor,
    b: Option<&NdArrayTensor>,
    rows: usize,
    d_in: usize,
    d_out: usize,
) -> Vec<f32> {
    let mut y = vec![0.0f32; rows * d_out];
    if let Some(b) = b {
        with_values(b, |b| {
            for r in y.chunks_exact_mut(d_out) {
                r.copy_from_slice(b);
            }
        });
    }
    with_values(x, |x| {
        with_values(w, |w| gemm_w(rows, d_out, d_in, x, w, false, &mut y))
    });
    y
}

#[derive(Debug, Clone)]
struct Saved {
    /// The input and the weight, as they were (shared, not copied).
    x: NdArrayTensor,
    w: NdArrayTensor,
    rows: usize,
    d_in: usize,
    d_out: usize,
}

#[derive(Debug)]
struct LinearBackward;

impl Backward<Cpu, 3> for LinearBackward {
    type State = Saved;

    fn backward(self, ops: Ops<Saved, 3>, grads: &mut Gradients, _: &mut Checkpointer) {
        let s = ops.state;
        let (rows, d_in, d_out) = (s.rows, s.d_in, s.d_out);
        let dy = grads.consume::<Cpu>(&ops.node);
        let [p_x, p_w, p_b] = ops.parents.map(|p| p.map(|n| n.id));
        let mut put = |id, v, shape| register_grad(grads, id, v, shape);
        let (dx, dw, db) = with_values(&dy, |dy| {
            let dx = p_x.map(|_| {
                let mut dx = vec![0.0f32; rows * d_in];
                with_values(&s.w, |w| gemm_w(rows, d_in, d_out, dy, w, true, &mut dx));
                dx
            });
            let dw = p_w.map(|_| {
                let mut dw = vec![0.0f32; d_in * d_out];
                with_values(&s.x, |x| {
                    gemm(d_in, d_out, rows, 1.0, x, true, dy, false, 0.0, &mut dw)
                });
                dw
            });
            let db = p_b.map(|_| {
                let mut db = vec![0.0f32; d_out];
                for r in dy.chunks_exact(d_out) {
                    for (o, v) in db.iter_mut().zip(r) {
                        *o += v;
                    }
                }
                db
            });
            (dx, dw, db)
        });
        if let Some(dx) = dx {
            put(p_x, dx, vec![rows, d_in]);
        }
        if let Some(dw) = dw {
            put(p_w, dw, vec![d_in, d_out]);
        }
        if let Some(db) = db {
            put(p_b, db, vec![d_out]);
        }
    }
}

fn autodiff_linear(layer: &Linear<CpuAd>, x: Tensor<CpuAd, 2>) -> Tensor<CpuAd, 2> {
    let [rows, d_in] = x.dims();
    let [_, d_out] = layer.weight.dims();
    let device = x.device();
    let x = x.into_primitive().tensor();
    let w = layer.weight.val().into_primitive().tensor();
    let has_bias = layer.bias.is_some();
    // An absent bias takes part as an untracked placeholder: it gets no gradient.
    let b = layer
        .bias
        .as_ref()
        .map(|b| b.val())
        .unwrap_or_else(|| Tensor::zeros([0], &device))
        .into_primitive()
        .tensor();
    let y = forward(
        &x.primitive,
        &w.primitive,
        has_bias.then_some(&b.primitive),
        rows,
        d_in,
        d_out,
    );
    let out = <Cpu as FloatTensorOps<Cpu>>::float_from_data(
        TensorData::new(y, [rows, d_out]),
        &Default::default(),
    );
    let result = match LinearBackward
        .prepare::<NoCheckpointing>([x.node.clone(), w.node.clone(), b.node.clone()])
        .compute_bound()
        .stateful()
    {
        OpsKind::Tracked(prep) => prep.finish(
            Saved {
                x: x.primitive.clone(),
                w: w.primitive.clone(),
                rows,
                d_in,
                d_out,
            },
            out,
        ),
        OpsKind::UnTracked(prep) => prep.finish(out),
    };
    Tensor::from_primitive(TensorPrimitive::Float(result))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_support::fused::{self, close, values};
    use burn::module::{AutodiffModule, Param};
    use burn::nn::LinearConfig;

    fn tensor<const D: usize>(n: usize, shape: [usize; D], salt: f32) -> Tensor<CpuAd, D> {
        fused::tensor(n, shape, 0.61, salt, 1.0)
    }

    #[test]
    fn fused_linear_equals_burns_with_every_gradient() {
        for bias in [true, false] {
            let dev = Default::default();
            let mut layer = LinearConfig::new(5, 7).with_bias(bias).init::<CpuAd>(&dev);
            layer.weight = Param::from_tensor(tensor(35, [5, 7], 0.3).require_grad());
            if bias {
                layer.bias = Some(Param::from_tensor(tensor(7, [7], 1.1).require_grad()));
            }
            let w = tensor(6 * 7, [6, 7], 2.0);
            let x1 = tensor(30, [6, 5], 0.7).require_grad();
            let x2 = tensor(30, [6, 5], 0.7).require_grad();
            let fused = linear(&layer, x1.clone());
            let generic = layer.forward(x2.clone());
            close(&values(fused.clone()), &values(generic.clone()));
            let g1 = (fused * w.clone()).sum().backward();
            let g2 = (generic * w).sum().backward();
            close(
                &values(x1.grad(&g1).unwrap()),
                &values(x2.grad(&g2).unwrap()),
            );
            let wv = layer.weight.val();
            close(
                &values(wv.grad(&g1).unwrap()),
                &values(wv.grad(&g2).unwrap()),
            );
            if let Some(b) = &layer.bias {
                let bv = b.val();
                close(
                    &values(bv.grad(&g1).unwrap()),
                    &values(bv.grad(&g2).unwrap()),
                );
            }
            // Inference gives the same values.
            let inner = layer.valid();
            let xi = tensor(30, [6, 5], 0.7).inner();
            close(
                &values(linear(&inner, xi.clone())),
                &values(inner.forward(xi)),
            );
        }
    }
}
