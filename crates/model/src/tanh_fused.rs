//! `tanh` as one operation on the CPU backend, with its own backward pass (`dx = dy·(1 − y²)`
//! from the saved output): the vectorised tanh of `harness-kernels` (within 3e-7 of the exact
//! value) instead of burn-ndarray's element-by-element libm call, and one node instead of
//! burn's tanh and its backward chain. Used by the character n-gram layer and the tanh heads.
//!
//! [`tanh`] serves burn-ndarray (f32) and its autodiff; on any other backend it is burn's own
//! `tanh`. The test below compares values and gradients with burn's.

use crate::lstm_fused::{host_values, register_grad};
use burn::backend::autodiff::checkpoint::base::Checkpointer;
use burn::backend::autodiff::checkpoint::strategy::NoCheckpointing;
use burn::backend::autodiff::grads::Gradients;
use burn::backend::autodiff::ops::{Backward, Ops, OpsKind};
use burn::backend::{Autodiff, NdArray};
use burn::tensor::backend::Backend;
use burn::tensor::ops::FloatTensorOps;
use burn::tensor::{Tensor, TensorData, TensorPrimitive};
use std::any::Any;
use std::sync::Arc;

type Cpu = NdArray<f32>;
type CpuAd = Autodiff<Cpu>;

/// `tanh(x)`, element by element.
pub fn tanh<B: Backend, const D: usize>(x: Tensor<B, D>) -> Tensor<B, D> {
    let any: Box<dyn Any> = Box::new(x);
    let any = match any.downcast::<Tensor<CpuAd, D>>() {
        Ok(x) => {
            let out: Box<dyn Any> = Box::new(autodiff_tanh(*x));
            return *out.downcast::<Tensor<B, D>>().expect("the same backend");
        }
        Err(other) => other,
    };
    match any.downcast::<Tensor<Cpu, D>>() {
        Ok(x) => {
            let shape = x.shape();
            let mut y = host_values(&x.into_primitive().tensor());
            harness_kernels::tanh(&mut y);
            let out: Box<dyn Any> = Box::new(Tensor::<Cpu, D>::from_data(
                TensorData::new(y, shape),
                &Default::default(),
            ));
            *out.downcast::<Tensor<B, D>>().expect("the same backend")
        }
        Err(other) => other
            .downcast::<Tensor<B, D>>()
            .expect("its own type")
            .tanh(),
    }
}

#[derive(Debug)]
struct TanhBackward;

impl Backward<Cpu, 1> for TanhBackward {
    /// The output `y` and its shape.
    type State = (Arc<Vec<f32>>, Vec<usize>);

    fn backward(self, ops: Ops<Self::State, 1>, grads: &mut Gradients, _: &mut Checkpointer) {
        let (y, shape) = ops.state;
        let mut dx = host_values(&grads.consume::<Cpu>(&ops.node));
        let [parent] = ops.parents;
        let Some(parent) = parent else { return };
        for (d, y) in dx.iter_mut().zip(y.iter()) {
            *d *= 1.0 - y * y;
        }
        register_grad(grads, Some(parent.id), dx, shape);
    }
}

fn autodiff_tanh<const D: usize>(x: Tensor<CpuAd, D>) -> Tensor<CpuAd, D> {
    let shape = x.shape();
    let x = x.into_primitive().tensor();
    let mut y = host_values(&x.primitive);
    harness_kernels::tanh(&mut y);
    let out = <Cpu as FloatTensorOps<Cpu>>::float_from_data(
        TensorData::new(y.clone(), shape.clone()),
        &Default::default(),
    );
    let result = match TanhBackward
        .prepare::<NoCheckpointing>([x.node.clone()])
        .compute_bound()
        .stateful()
    {
        OpsKind::Tracked(prep) => prep.finish((Arc::new(y), shape.to_vec()), out),
        OpsKind::UnTracked(prep) => prep.finish(out),
    };
    Tensor::from_primitive(TensorPrimitive::Float(result))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn values<const D: usize, B: Backend>(t: Tensor<B, D>) -> Vec<f32> {
        t.into_data().convert::<f32>().to_vec::<f32>().unwrap()
    }

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
