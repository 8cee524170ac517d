//! The plumbing shared by the element-wise CPU operations whose gradient needs only the
//! output (`tanh`: `dy·(1 − y²)`; `relu`: `dy` where `y > 0`) or only the input (GELU):
//! dispatch on the backend, one autodiff node that saves `y` (or `x`, [`Rule::SAVES_INPUT`]),
//! and burn's own operation on any other backend. Each operation is a [`Rule`] in its own
//! file ([`crate::fused::tanh`], [`crate::fused::relu`], [`crate::fused::gelu`]).

use crate::fused::lstm::{host_values, register_grad};
use burn::backend::autodiff::checkpoint::base::Checkpointer;
use burn::backend::autodiff::checkpoint::strategy::NoCheckpointing;
use burn::backend::autodiff::grads::Gradients;
use burn::backend::autodiff::ops::{Backward, Ops, OpsKind};
use burn::backend::{Autodiff, NdArray};
use burn::tensor::backend::Backend;
use burn::tensor::ops::FloatTensorOps;
use burn::tensor::{Tensor, TensorData, TensorPrimitive};
use std::any::Any;
use std::marker::PhantomData;
use std::sync::Arc;

type Cpu = NdArray<f32>;
type CpuAd = Autodiff<Cpu>;

/// An element-wise operation `y = f(x)` whose gradient is a function of `y` and `dy`.
pub trait Rule: std::fmt::Debug + Send + Sync + 'static {
    /// `f` over the input's values (row-major, a host copy the rule may overwrite), giving
    /// the output's.
    fn forward(x: Vec<f32>) -> Vec<f32>;
    /// Whether the backward pass reads the input `x` instead of the output `y`.
    const SAVES_INPUT: bool = false;
    /// `dx` from `dy` (in `d`, in place) and the saved output `y` (the input `x` when
    /// [`Self::SAVES_INPUT`]).
    fn backward(d: &mut [f32], saved: &[f32]);
    /// burn's own operation, for every other backend.
    fn generic<B: Backend, const D: usize>(x: Tensor<B, D>) -> Tensor<B, D>;
}

/// `R` applied to `x`: fused on burn-ndarray (f32) and its autodiff, else `R::generic`.
pub fn apply<R: Rule, B: Backend, const D: usize>(x: Tensor<B, D>) -> Tensor<B, D> {
    let any: Box<dyn Any> = Box::new(x);
    let any = match any.downcast::<Tensor<CpuAd, D>>() {
        Ok(x) => {
            let out: Box<dyn Any> = Box::new(autodiff::<R, D>(*x));
            return *out.downcast::<Tensor<B, D>>().expect("the same backend");
        }
        Err(other) => other,
    };
    match any.downcast::<Tensor<Cpu, D>>() {
        Ok(x) => {
            let shape = x.shape();
            let y = R::forward(host_values(&x.into_primitive().tensor()));
            let out: Box<dyn Any> = Box::new(Tensor::<Cpu, D>::from_data(
                TensorData::new(y, shape),
                &Default::default(),
            ));
            *out.downcast::<Tensor<B, D>>().expect("the same backend")
        }
        Err(other) => R::generic(*other.downcast::<Tensor<B, D>>().expect("its own type")),
    }
}

#[derive(Debug)]
struct UnaryBackward<R>(PhantomData<R>);

impl<R: Rule> Backward<Cpu, 1> for UnaryBackward<R> {
    /// The output `y` (or the input `x`, [`Rule::SAVES_INPUT`]) and its shape.
    type State = (Arc<Vec<f32>>, Vec<usize>);

    fn backward(self, ops: Ops<Self::State, 1>, grads: &mut Gradients, _: &mut Checkpointer) {
        let (saved, shape) = ops.state;
        let mut dx = host_values(&grads.consume::<Cpu>(&ops.node));
        let [parent] = ops.parents;
        let Some(parent) = parent else { return };
        R::backward(&mut dx, &saved);
        register_grad(grads, Some(parent.id), dx, shape);
    }
}

fn autodiff<R: Rule, const D: usize>(x: Tensor<CpuAd, D>) -> Tensor<CpuAd, D> {
    let shape = x.shape();
    let x = x.into_primitive().tensor();
    let input = host_values(&x.primitive);
    let saved_input = R::SAVES_INPUT.then(|| input.clone());
    let y = R::forward(input);
    let saved = saved_input.unwrap_or_else(|| y.clone());
    let out = <Cpu as FloatTensorOps<Cpu>>::float_from_data(
        TensorData::new(y, shape.clone()),
        &Default::default(),
    );
    let result = match UnaryBackward::<R>(PhantomData)
        .prepare::<NoCheckpointing>([x.node.clone()])
        .compute_bound()
        .stateful()
    {
        OpsKind::Tracked(prep) => prep.finish((Arc::new(saved), shape.to_vec()), out),
        OpsKind::UnTracked(prep) => prep.finish(out),
    };
    Tensor::from_primitive(TensorPrimitive::Float(result))
}
