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

use crate::lstm_fused::{host_values, register_grad, with_values};
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

/// burn-ndarray's `clamp_min(x, 0)`.
fn forward(x: &[f32]) -> Vec<f32> {
    x.iter().map(|&x| if x < 0.0 { 0.0 } else { x }).collect()
}

/// `relu(x)`, element by element.
pub fn relu<B: Backend, const D: usize>(x: Tensor<B, D>) -> Tensor<B, D> {
    let any: Box<dyn Any> = Box::new(x);
    let any = match any.downcast::<Tensor<CpuAd, D>>() {
        Ok(x) => {
            let out: Box<dyn Any> = Box::new(autodiff_relu(*x));
            return *out.downcast::<Tensor<B, D>>().expect("the same backend");
        }
        Err(other) => other,
    };
    match any.downcast::<Tensor<Cpu, D>>() {
        Ok(x) => {
            let shape = x.shape();
            let y = with_values(&x.into_primitive().tensor(), forward);
            let out: Box<dyn Any> = Box::new(Tensor::<Cpu, D>::from_data(
                TensorData::new(y, shape),
                &Default::default(),
            ));
            *out.downcast::<Tensor<B, D>>().expect("the same backend")
        }
        Err(other) => {
            burn::tensor::activation::relu(*other.downcast::<Tensor<B, D>>().expect("its own type"))
        }
    }
}

#[derive(Debug)]
struct ReluBackward;

impl Backward<Cpu, 1> for ReluBackward {
    /// The output `y` and its shape.
    type State = (Arc<Vec<f32>>, Vec<usize>);

    fn backward(self, ops: Ops<Self::State, 1>, grads: &mut Gradients, _: &mut Checkpointer) {
        let (y, shape) = ops.state;
        let mut dx = host_values(&grads.consume::<Cpu>(&ops.node));
        let [parent] = ops.parents;
        let Some(parent) = parent else { return };
        // burn's `mask_fill(dy, y <= 0, 0)`.
        for (d, &y) in dx.iter_mut().zip(y.iter()) {
            if y <= 0.0 {
                *d = 0.0;
            }
        }
        register_grad(grads, Some(parent.id), dx, shape);
    }
}

fn autodiff_relu<const D: usize>(x: Tensor<CpuAd, D>) -> Tensor<CpuAd, D> {
    let shape = x.shape();
    let x = x.into_primitive().tensor();
    let y = with_values(&x.primitive, forward);
    let out = <Cpu as FloatTensorOps<Cpu>>::float_from_data(
        TensorData::new(y.clone(), shape.clone()),
        &Default::default(),
    );
    let result = match ReluBackward
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
