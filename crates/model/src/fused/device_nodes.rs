//! LayerNorm, softmax and log-softmax as one autodiff node each on burn's GPU backends, with
//! a backward pass written out and computed with the device's own tensor operations (so
//! burn's fusion joins them as it joins any others):
//!
//! ```text
//! layer norm:   n = (x − μ) / σ,  y = n·γ + β
//!               dγ = Σ_rows dy·n,  dβ = Σ_rows dy,  g = dy·γ,  dx = (g − mean(g) − n·mean(g·n)) / σ
//! softmax:      y = softmax(x),      dx = y·(dy − Σ dy·y)
//! log-softmax:  y = log_softmax(x),  dx = dy − exp(y)·Σ dy
//! ```
//!
//! Why: burn 0.21's autodiff differentiates these three through the operations they are
//! composed of, and on a GPU each backward operation is a kernel launch (issue 59). The
//! backward of each `mean_dim` and `sum_dim` there sums its gradient along the axis it
//! already reduced (a reduction over one element, launched all the same) and builds a
//! tensor of ones to broadcast it; each broadcast shift or scale (`γ`, `β`, the maximum, the
//! sum) has its gradient summed along every broadcast axis in turn, one reduction each.
//! Written out, a LayerNorm's backward is two row reductions (fused with the products they
//! reduce), two column reductions and one element-wise kernel; a softmax's one reduction
//! and one element-wise kernel.
//!
//! The forward values are burn's own composition (the same operations in the same order), so
//! only the gradients' rounding can differ; the tests compare values and every gradient with
//! burn's on the CPU backend, where the nodes run too (only the GPU backends take them in a
//! model: the CPU has its own fused operations, [`crate::fused::layer_norm`] among them).

use burn::backend::autodiff::checkpoint::base::Checkpointer;
use burn::backend::autodiff::checkpoint::strategy::NoCheckpointing;
use burn::backend::autodiff::grads::Gradients;
use burn::backend::autodiff::ops::{Backward, Ops, OpsKind};
use burn::backend::Autodiff;
use burn::nn::LayerNorm;
use burn::tensor::activation;
use burn::tensor::backend::Backend;
use burn::tensor::{Tensor, TensorPrimitive};
use std::any::Any;
use std::marker::PhantomData;

/// Moves `value` to type `T` when it is one (the concrete backend behind a generic `B`).
#[cfg_attr(not(any(feature = "wgpu", feature = "cuda")), allow(dead_code))]
pub(crate) fn cast<A: 'static, T: 'static>(value: A) -> Result<T, A> {
    let any: Box<dyn Any> = Box::new(value);
    match any.downcast::<T>() {
        Ok(t) => Ok(*t),
        Err(other) => Err(*other
            .downcast::<A>()
            .unwrap_or_else(|_| unreachable!("the value's own type"))),
    }
}

/// An inner backend's float tensor as a `Tensor` (for its operators).
fn inner<I: Backend, const D: usize>(p: I::FloatTensorPrimitive) -> Tensor<I, D> {
    Tensor::from_primitive(TensorPrimitive::Float(p))
}

fn primitive<I: Backend, const D: usize>(t: Tensor<I, D>) -> I::FloatTensorPrimitive {
    t.into_primitive().tensor()
}

// ---------------------------------------------------------------------------------------
// LayerNorm
// ---------------------------------------------------------------------------------------

#[derive(Debug, Clone)]
struct NormSaved<I: Backend> {
    /// `n`, `[rows, d]`.
    normalized: I::FloatTensorPrimitive,
    /// `σ` of each row, `[rows, 1]`.
    sigma: I::FloatTensorPrimitive,
    /// `γ`, `[d]`.
    gamma: I::FloatTensorPrimitive,
}

#[derive(Debug)]
struct LayerNormNode<I>(PhantomData<fn() -> I>);

impl<I: Backend> Backward<I, 3> for LayerNormNode<I> {
    type State = NormSaved<I>;

    fn backward(self, ops: Ops<NormSaved<I>, 3>, grads: &mut Gradients, _: &mut Checkpointer) {
        let s = ops.state;
        let n: Tensor<I, 2> = inner(s.normalized);
        let [_, d] = n.dims();
        // γ's reshape first, for the same reason as in `layer_norm_node`: here it let the
        // product dy·γ join the reduction that reads it.
        let gamma: Tensor<I, 2> = inner::<I, 1>(s.gamma).reshape([1, d]);
        let dy: Tensor<I, 2> = inner(grads.consume::<I>(&ops.node));
        let [p_x, p_gamma, p_beta] = ops.parents.map(|p| p.map(|node| node.id));
        if let Some(id) = p_beta {
            grads.register::<I>(id, primitive(dy.clone().sum_dim(0).reshape([d])));
        }
        if let Some(id) = p_gamma {
            let dgamma = (dy.clone() * n.clone()).sum_dim(0).reshape([d]);
            grads.register::<I>(id, primitive(dgamma));
        }
        if let Some(id) = p_x {
            let sigma: Tensor<I, 2> = inner(s.sigma);
            let g = dy * gamma;
            let mean_g = g.clone().mean_dim(1);
            let mean_gn = (g.clone() * n.clone()).mean_dim(1);
            let dx = (g - mean_g - n * mean_gn) / sigma;
            grads.register::<I>(id, primitive(dx));
        }
    }
}

/// `LayerNorm` over the rows of `x: [rows, d]` (`γ`, `β`: `[d]`, ε `epsilon`) as one
/// autodiff node: burn's `layer_norm` composition forwards, the backward above.
pub fn layer_norm_node<I: Backend>(
    x: Tensor<Autodiff<I>, 2>,
    gamma: Tensor<Autodiff<I>, 1>,
    beta: Tensor<Autodiff<I>, 1>,
    epsilon: f64,
) -> Tensor<Autodiff<I>, 2> {
    let [_, d] = x.dims();
    let x = x.into_primitive().tensor();
    let gamma = gamma.into_primitive().tensor();
    let beta = beta.into_primitive().tensor();
    // burn-backend's `ModuleOps::layer_norm`, step by step.
    let xi: Tensor<I, 2> = inner(x.primitive.clone());
    let mean = xi.clone().mean_dim(1);
    // γ and β are reshaped here, between the two reductions. Why: a reshape is a view that
    // burn's kernel fusion holds back in case a later operation takes it in; queued between
    // the division by σ and the scale and shift it split them into two launches, and queued
    // before the first reduction it held back every operation after it (each then its own
    // launch). Here each runs alone and LayerNorm forwards is three launches.
    let gamma_i: Tensor<I, 2> = inner::<I, 1>(gamma.primitive.clone()).reshape([1, d]);
    let beta_i: Tensor<I, 2> = inner::<I, 1>(beta.primitive.clone()).reshape([1, d]);
    let centered = xi - mean;
    let var = (centered.clone() * centered.clone()).mean_dim(1);
    let sigma = var.add_scalar(epsilon).sqrt();
    let normalized = centered / sigma.clone();
    let y = normalized.clone() * gamma_i + beta_i;
    let out = match LayerNormNode::<I>(PhantomData)
        .prepare::<NoCheckpointing>([x.node, gamma.node, beta.node])
        .compute_bound()
        .stateful()
    {
        OpsKind::Tracked(prep) => prep.finish(
            NormSaved {
                normalized: primitive(normalized),
                sigma: primitive(sigma),
                gamma: gamma.primitive,
            },
            primitive(y),
        ),
        OpsKind::UnTracked(prep) => prep.finish(primitive(y)),
    };
    Tensor::from_primitive(TensorPrimitive::Float(out))
}

// ---------------------------------------------------------------------------------------
// Softmax and log-softmax along the last axis
// ---------------------------------------------------------------------------------------

/// The backward pass of a softmax (`log`: a log-softmax) along the last axis, given its
/// output.
#[derive(Debug)]
struct SoftmaxNode<I, const D: usize> {
    log: bool,
    backend: PhantomData<fn() -> I>,
}

impl<I: Backend, const D: usize> Backward<I, 1> for SoftmaxNode<I, D> {
    /// The output `y` (log-probabilities where `log`).
    type State = I::FloatTensorPrimitive;

    fn backward(self, ops: Ops<Self::State, 1>, grads: &mut Gradients, _: &mut Checkpointer) {
        let dy: Tensor<I, D> = inner(grads.consume::<I>(&ops.node));
        let [parent] = ops.parents;
        if let Some(node) = parent {
            let y: Tensor<I, D> = inner(ops.state);
            let dx = if self.log {
                let total = dy.clone().sum_dim(D - 1);
                dy - y.exp() * total
            } else {
                let dot = (dy.clone() * y.clone()).sum_dim(D - 1);
                y * (dy - dot)
            };
            grads.register::<I>(node.id, primitive(dx));
        }
    }
}

/// The (`log`: log-)softmax of `x` along its last axis as one autodiff node, burn's own
/// operation forwards.
fn softmax_of<I: Backend, const D: usize>(
    x: Tensor<Autodiff<I>, D>,
    log: bool,
) -> Tensor<Autodiff<I>, D> {
    let x = x.into_primitive().tensor();
    let xi = inner::<I, D>(x.primitive.clone());
    let y = primitive(if log {
        activation::log_softmax(xi, D - 1)
    } else {
        activation::softmax(xi, D - 1)
    });
    let node = SoftmaxNode::<I, D> {
        log,
        backend: PhantomData,
    };
    let out = match node
        .prepare::<NoCheckpointing>([x.node])
        .compute_bound()
        .stateful()
    {
        OpsKind::Tracked(prep) => prep.finish(y.clone(), y),
        OpsKind::UnTracked(prep) => prep.finish(y),
    };
    Tensor::from_primitive(TensorPrimitive::Float(out))
}

/// The softmax of `x` along its last axis as one autodiff node (burn's `softmax` forwards).
pub fn softmax_node<I: Backend, const D: usize>(
    x: Tensor<Autodiff<I>, D>,
) -> Tensor<Autodiff<I>, D> {
    softmax_of(x, false)
}

/// The log-softmax of `x` along its last axis as one autodiff node (burn's `log_softmax`
/// forwards).
pub fn log_softmax_node<I: Backend, const D: usize>(
    x: Tensor<Autodiff<I>, D>,
) -> Tensor<Autodiff<I>, D> {
    softmax_of(x, true)
}

// ---------------------------------------------------------------------------------------
// Where the nodes run: a GPU backend of this build, under autodiff
// ---------------------------------------------------------------------------------------

/// `$body` with `$value` cast to each GPU backend of this build under autodiff (`$A` names
/// that backend's autodiff type inside `$body`, `$t` the cast value): `Ok` with its result
/// cast back to `$out`, or `Err($value)` unchanged where `B` is none of them.
macro_rules! on_gpu_autodiff {
    ($value:ident: $from:ty => |$A:ident, $t:ident| $into:ty, $out:ty, $body:expr) => {{
        #[allow(unused_mut)]
        let mut result: Result<$out, $from> = Err($value);
        #[cfg(feature = "wgpu")]
        {
            type $A = Autodiff<burn::backend::Wgpu<f32, i32>>;
            if let Err(v) = result {
                result = cast::<$from, $into>(v).map(|$t| {
                    cast::<_, $out>($body).unwrap_or_else(|_| unreachable!("the caller's backend"))
                });
            }
        }
        #[cfg(feature = "cuda")]
        {
            type $A = Autodiff<burn::backend::Cuda<f32, i32>>;
            if let Err(v) = result {
                result = cast::<$from, $into>(v).map(|$t| {
                    cast::<_, $out>($body).unwrap_or_else(|_| unreachable!("the caller's backend"))
                });
            }
        }
        result
    }};
}

/// `norm` (ε `epsilon`: burn keeps a LayerNorm's own private) over the last axis of `x`
/// through [`layer_norm_node`] where `B` is a GPU backend under autodiff and the norm has a
/// shift; burn's own `LayerNorm::forward` otherwise (on the CPU, untouched).
#[cfg_attr(not(any(feature = "wgpu", feature = "cuda")), allow(unused_variables))]
pub fn layer_norm<B: Backend, const D: usize>(
    norm: &LayerNorm<B>,
    x: Tensor<B, D>,
    epsilon: f64,
) -> Tensor<B, D> {
    let tracked = crate::gpu::on_device::<B>() && B::ad_enabled(&x.device());
    let Some(beta) = norm.beta.as_ref().filter(|_| tracked) else {
        return norm.forward(x);
    };
    let dims = x.dims();
    let d = dims[D - 1];
    let rows = dims[..D - 1].iter().product::<usize>();
    let inputs = (x.reshape([rows, d]), norm.gamma.val(), beta.val());
    let tried = on_gpu_autodiff!(
        inputs: (Tensor<B, 2>, Tensor<B, 1>, Tensor<B, 1>) =>
            |A, t| (Tensor<A, 2>, Tensor<A, 1>, Tensor<A, 1>),
        Tensor<B, 2>,
        layer_norm_node(t.0, t.1, t.2, epsilon)
    );
    match tried {
        Ok(y) => y.reshape(dims),
        Err((x, _, _)) => norm.forward(x.reshape(dims)),
    }
}

/// The softmax of `x` along its last axis: [`softmax_node`] where `B` is a GPU backend
/// under autodiff, burn's `softmax` otherwise.
pub fn softmax<B: Backend, const D: usize>(x: Tensor<B, D>) -> Tensor<B, D> {
    let tried =
        on_gpu_autodiff!(x: Tensor<B, D> => |A, t| Tensor<A, D>, Tensor<B, D>, softmax_node(t));
    tried.unwrap_or_else(|x| activation::softmax(x, D - 1))
}

/// The log-softmax of `x` along its last axis: [`log_softmax_node`] where `B` is a GPU
/// backend under autodiff, burn's `log_softmax` otherwise.
pub fn log_softmax<B: Backend, const D: usize>(x: Tensor<B, D>) -> Tensor<B, D> {
    let tried =
        on_gpu_autodiff!(x: Tensor<B, D> => |A, t| Tensor<A, D>, Tensor<B, D>, log_softmax_node(t));
    tried.unwrap_or_else(|x| activation::log_softmax(x, D - 1))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_support::fused::{self, close, values, CpuAd as Ad};
    use burn::module::Param;
    use burn::nn::LayerNormConfig;

    fn tensor<const D: usize>(shape: [usize; D], salt: f32) -> Tensor<Ad, D> {
        fused::tensor(shape.iter().product(), shape, 0.83, salt, 2.0)
    }

    /// The node's gradient `a` is burn's `b` to rounding, and not all zeros.
    fn same_gradient(name: &str, a: &[f32], b: &[f32]) {
        close(a, b);
        assert!(a.iter().any(|v| v.abs() > 1e-3), "d{name} is all zeros");
    }

    #[test]
    fn the_layer_norm_node_has_burns_values_and_gradients() {
        let (rows, d) = (7, 12);
        let mut norm = LayerNormConfig::new(d)
            .with_epsilon(1e-12)
            .init::<Ad>(&Default::default());
        norm.gamma = Param::from_tensor(tensor([d], 0.4).require_grad());
        norm.beta = Some(Param::from_tensor(tensor([d], 1.9).require_grad()));
        let weights = tensor([rows, d], 3.0);
        let x1 = tensor([rows, d], 0.1).require_grad();
        let x2 = tensor([rows, d], 0.1).require_grad();
        let (gamma, beta) = (norm.gamma.val(), norm.beta.as_ref().unwrap().val());
        let node = layer_norm_node(x1.clone(), gamma.clone(), beta.clone(), 1e-12);
        let burns = norm.forward(x2.clone());
        assert_eq!(values(node.clone()), values(burns.clone()));
        let g1 = (node * weights.clone()).sum().backward();
        let g2 = (burns * weights).sum().backward();
        same_gradient(
            "x",
            &values(x1.grad(&g1).unwrap()),
            &values(x2.grad(&g2).unwrap()),
        );
        same_gradient(
            "γ",
            &values(gamma.grad(&g1).unwrap()),
            &values(gamma.grad(&g2).unwrap()),
        );
        same_gradient(
            "β",
            &values(beta.grad(&g1).unwrap()),
            &values(beta.grad(&g2).unwrap()),
        );
    }

    #[test]
    fn the_softmax_nodes_have_burns_values_and_gradients() {
        let weights = tensor([3, 2, 9], 3.0);
        for log in [false, true] {
            let x1 = tensor([3, 2, 9], 0.7).require_grad();
            let x2 = tensor([3, 2, 9], 0.7).require_grad();
            let (node, burns) = if log {
                (
                    log_softmax_node(x1.clone()),
                    activation::log_softmax(x2.clone(), 2),
                )
            } else {
                (softmax_node(x1.clone()), activation::softmax(x2.clone(), 2))
            };
            assert_eq!(values(node.clone()), values(burns.clone()));
            let g1 = (node * weights.clone()).sum().backward();
            let g2 = (burns * weights.clone()).sum().backward();
            let name = if log {
                "x (log-softmax)"
            } else {
                "x (softmax)"
            };
            same_gradient(
                name,
                &values(x1.grad(&g1).unwrap()),
                &values(x2.grad(&g2).unwrap()),
            );
        }
    }

    #[test]
    fn off_a_gpu_the_dispatchers_are_burns_own() {
        let x = tensor([2, 3, 5], 0.2);
        assert_eq!(
            values(softmax(x.clone())),
            values(activation::softmax(x.clone(), 2))
        );
        assert_eq!(
            values(log_softmax(x.clone())),
            values(activation::log_softmax(x.clone(), 2))
        );
        let norm = LayerNormConfig::new(5).init::<Ad>(&Default::default());
        assert_eq!(
            values(layer_norm(&norm, x.clone(), 1e-5)),
            values(norm.forward(x))
        );
    }
}
