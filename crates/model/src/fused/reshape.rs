//! `reshape` without a copy on the CPU backend, forward and backward.
//!
//! Why: burn-ndarray 0.21 reshapes through `to_shape(..).into_shared()`, which copies the
//! array even when it is contiguous, and burn's autodiff reshape copies the gradient back the
//! same way. The transformer reshapes `[batch, time, d]` ↔ `[batch·time, d]` around each of
//! its linear layers and norms, so those copies were about a twentieth of a training step.
//! Here a contiguous array takes the new shape in place (ndarray's `into_shape_with_order`,
//! row-major, as burn's); any other layout goes through burn's own reshape.
//!
//! [`reshape`] serves burn-ndarray (f32) and its autodiff; on any other backend it is burn's
//! own `reshape`. Values are moved, never computed, so they are burn's bit for bit (tested).

use burn::backend::autodiff::checkpoint::base::Checkpointer;
use burn::backend::autodiff::checkpoint::strategy::NoCheckpointing;
use burn::backend::autodiff::grads::Gradients;
use burn::backend::autodiff::ops::{Backward, Ops, OpsKind};
use burn::backend::ndarray::NdArrayTensor;
use burn::backend::{Autodiff, NdArray};
use burn::tensor::backend::Backend;
use burn::tensor::ops::FloatTensorOps;
use burn::tensor::{Shape, Tensor, TensorPrimitive};
use std::any::Any;

type Cpu = NdArray<f32>;
type CpuAd = Autodiff<Cpu>;

/// `x` with `shape` (the same number of elements, row-major), as `Tensor::reshape`.
pub fn reshape<B: Backend, const D1: usize, const D2: usize>(
    x: Tensor<B, D1>,
    shape: [usize; D2],
) -> Tensor<B, D2> {
    let n: usize = x.dims().iter().product();
    assert_eq!(
        n,
        shape.iter().product::<usize>(),
        "reshape to {shape:?} keeps the number of elements"
    );
    let any: Box<dyn Any> = Box::new(x);
    let any = match any.downcast::<Tensor<CpuAd, D1>>() {
        Ok(x) => {
            let out: Box<dyn Any> = Box::new(autodiff_reshape(*x, shape));
            return *out.downcast::<Tensor<B, D2>>().expect("the same backend");
        }
        Err(other) => other,
    };
    match any.downcast::<Tensor<Cpu, D1>>() {
        Ok(x) => {
            let y = in_place(x.into_primitive().tensor(), &shape);
            let out: Box<dyn Any> =
                Box::new(Tensor::<Cpu, D2>::from_primitive(TensorPrimitive::Float(y)));
            *out.downcast::<Tensor<B, D2>>().expect("the same backend")
        }
        Err(other) => other
            .downcast::<Tensor<B, D1>>()
            .expect("its own type")
            .reshape(shape),
    }
}

/// The array with `shape`, sharing its memory when it is f32 in standard layout.
fn in_place(t: NdArrayTensor, shape: &[usize]) -> NdArrayTensor {
    match t {
        NdArrayTensor::F32(storage) if storage.view().is_standard_layout() => {
            let a = storage
                .into_shared()
                .into_shape_with_order(shape)
                .expect("a standard-layout array takes any shape of its size");
            NdArrayTensor::from(a)
        }
        other => <Cpu as FloatTensorOps<Cpu>>::float_reshape(other, Shape::from(shape.to_vec())),
    }
}

#[derive(Debug)]
struct ReshapeBackward;

impl Backward<Cpu, 1> for ReshapeBackward {
    /// The input's shape.
    type State = Vec<usize>;

    fn backward(self, ops: Ops<Self::State, 1>, grads: &mut Gradients, _: &mut Checkpointer) {
        let dy = grads.consume::<Cpu>(&ops.node);
        let [parent] = ops.parents;
        if let Some(parent) = parent {
            grads.register::<Cpu>(parent.id, in_place(dy, &ops.state));
        }
    }
}

fn autodiff_reshape<const D1: usize, const D2: usize>(
    x: Tensor<CpuAd, D1>,
    shape: [usize; D2],
) -> Tensor<CpuAd, D2> {
    let input_shape = x.dims().to_vec();
    let x = x.into_primitive().tensor();
    let out = in_place(x.primitive.clone(), &shape);
    let result = match ReshapeBackward
        .prepare::<NoCheckpointing>([x.node.clone()])
        .compute_bound()
        .stateful()
    {
        OpsKind::Tracked(prep) => prep.finish(input_shape, out),
        OpsKind::UnTracked(prep) => prep.finish(out),
    };
    Tensor::from_primitive(TensorPrimitive::Float(result))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_support::fused::values;
    use burn::tensor::TensorData;

    /// The same values and gradient as burn's reshape, for a contiguous input and for a
    /// transposed one (burn's path), through a loss that weighs every element differently.
    #[test]
    fn fused_reshape_equals_burns_with_its_gradient() {
        let dev = Default::default();
        let v: Vec<f32> = (0..24).map(|i| (i as f32 * 0.77).sin()).collect();
        let w: Vec<f32> = (0..24).map(|i| (i as f32 * 0.31).cos()).collect();
        let w = Tensor::<CpuAd, 2>::from_data(TensorData::new(w, [6, 4]), &dev);
        for transposed in [false, true] {
            let x1 = Tensor::<CpuAd, 3>::from_data(TensorData::new(v.clone(), [2, 3, 4]), &dev)
                .require_grad();
            let x2 = x1.clone().detach().require_grad();
            let prep = |x: Tensor<CpuAd, 3>| match transposed {
                true => x.swap_dims(1, 2),
                false => x,
            };
            let a = reshape(prep(x1.clone()), [6, 4]);
            let b = prep(x2.clone()).reshape([6, 4]);
            assert_eq!(values(a.clone()), values(b.clone()));
            let ga = x1.grad(&(a * w.clone()).sum().backward()).unwrap();
            let gb = x2.grad(&(b * w.clone()).sum().backward()).unwrap();
            assert_eq!(values(ga), values(gb));
            let inner = reshape(prep(x1.clone()).inner(), [4, 6]);
            assert_eq!(
                values(inner),
                values(prep(x2.clone()).inner().reshape([4, 6]))
            );
        }
    }
}
