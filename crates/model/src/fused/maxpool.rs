//! Padding-aware max-pooling over time as one operation on the CPU backend, with its own
//! backward pass. burn's path (`mask_fill(padding, −∞)`, then `max_dim`) writes a masked
//! copy of the states, runs `argmax` and a `gather`, and its backward allocates a zeroed
//! `[batch, time, d]` tensor for a `scatter_add` and then masks it again; on the LASER
//! default that was about 8 % of a training step. Here the forward is one pass keeping each
//! column's maximum and its position, and the backward writes each sentence gradient at
//! that position.
//!
//! The rule is burn's exactly: padded positions count as −∞; the first maximum wins
//! (burn-ndarray's `argmax` replaces its running maximum only when a value is strictly
//! greater); a sentence with no real position pools to −∞ and passes no gradient (burn's
//! `mask_fill` backward zeroes it); the gradient at the chosen position is `0 + dy` (the
//! `scatter_add` into zeros). Values and gradients are bit-equal to burn's (tested).
//! [`max_pool`] serves burn-ndarray (f32) and its autodiff; on any other backend it is
//! burn's own path. [`max_pool_time_major`] pools a time-major `[time, batch, d]` in place
//! (the BiLSTM's own layout: no transposed copy of the states, and the gradient reaches the
//! BiLSTM in its layout), with the same rule and bits.

use crate::fused::lstm::{host_values, register_grad, with_values};
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

/// Where row `(b, t)` of a `[batch, time, d]` or `[time, batch, d]` array is (and its mask
/// value, in `[batch, time]` or `[time, batch]`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Layout {
    BatchMajor,
    TimeMajor,
}

impl Layout {
    fn row(self, b: usize, t: usize, batch: usize, time: usize) -> usize {
        match self {
            Layout::BatchMajor => b * time + t,
            Layout::TimeMajor => t * batch + b,
        }
    }
}

/// The maximum over time of `x: [time, batch, d]` where `mask: [time, batch]` is not 0,
/// `[batch, d]`: [`max_pool`] of the batch-major states (`x` transposed, times the mask),
/// without the transposed copy. `None` on a backend other than burn-ndarray (f32) or its
/// autodiff.
pub fn max_pool_time_major<B: Backend>(
    x: Tensor<B, 3>,
    mask: Tensor<B, 2>,
) -> Option<Tensor<B, 2>> {
    let any: Box<dyn Any> = Box::new((x, mask));
    let any = match any.downcast::<(Tensor<CpuAd, 3>, Tensor<CpuAd, 2>)>() {
        Ok(pair) => {
            let (x, mask) = *pair;
            let out: Box<dyn Any> = Box::new(autodiff(x, mask, Layout::TimeMajor));
            return out.downcast::<Tensor<B, 2>>().ok().map(|t| *t);
        }
        Err(other) => other,
    };
    let (x, mask) = *any.downcast::<(Tensor<Cpu, 3>, Tensor<Cpu, 2>)>().ok()?;
    let out: Box<dyn Any> = Box::new(inference(x, mask, Layout::TimeMajor));
    out.downcast::<Tensor<B, 2>>().ok().map(|t| *t)
}

/// The maximum over time of `states: [batch, time, d]` where `mask: [batch, time]` is not 0,
/// `[batch, d]`.
pub fn max_pool<B: Backend>(states: Tensor<B, 3>, mask: Tensor<B, 2>) -> Tensor<B, 2> {
    let any: Box<dyn Any> = Box::new((states, mask));
    let any = match any.downcast::<(Tensor<CpuAd, 3>, Tensor<CpuAd, 2>)>() {
        Ok(pair) => {
            let (states, mask) = *pair;
            let out: Box<dyn Any> = Box::new(autodiff(states, mask, Layout::BatchMajor));
            return *out.downcast::<Tensor<B, 2>>().expect("the same backend");
        }
        Err(other) => other,
    };
    match any.downcast::<(Tensor<Cpu, 3>, Tensor<Cpu, 2>)>() {
        Ok(pair) => {
            let (states, mask) = *pair;
            let out: Box<dyn Any> = Box::new(inference(states, mask, Layout::BatchMajor));
            *out.downcast::<Tensor<B, 2>>().expect("the same backend")
        }
        Err(other) => {
            let (states, mask) = *other
                .downcast::<(Tensor<B, 3>, Tensor<B, 2>)>()
                .expect("its own type");
            generic(states, mask)
        }
    }
}

/// burn's own path, for every other backend (and the reference of the tests).
pub fn generic<B: Backend>(states: Tensor<B, 3>, mask: Tensor<B, 2>) -> Tensor<B, 2> {
    let [batch, time, d] = states.dims();
    let pad = mask
        .unsqueeze_dim::<3>(2)
        .equal_elem(0.0)
        .expand([batch, time, d]);
    states
        .mask_fill(pad, f32::NEG_INFINITY)
        .max_dim(1)
        .reshape([batch, d])
}

/// Plain burn-ndarray: the pooled values only.
fn inference(states: Tensor<Cpu, 3>, mask: Tensor<Cpu, 2>, layout: Layout) -> Tensor<Cpu, 2> {
    let dims = dims_of(states.dims(), layout);
    let m = host_values(&mask.into_primitive().tensor());
    let (y, _) = with_values(&states.into_primitive().tensor(), |s| {
        forward(s, &m, dims, layout)
    });
    Tensor::<Cpu, 2>::from_data(TensorData::new(y, [dims[0], dims[2]]), &Default::default())
}

/// `[batch, time, d]` of an array of `shape` in `layout`.
fn dims_of([a, b, d]: [usize; 3], layout: Layout) -> [usize; 3] {
    match layout {
        Layout::BatchMajor => [a, b, d],
        Layout::TimeMajor => [b, a, d],
    }
}

/// The pooled values `[batch, d]` and, for each, the position it came from; `time` when it
/// came from no real position (an empty sentence, or a column whose real values are all −∞
/// after a padded position 0): burn's gradient there is masked to 0.
fn forward(
    s: &[f32],
    mask: &[f32],
    [batch, time, d]: [usize; 3],
    layout: Layout,
) -> (Vec<f32>, Vec<u32>) {
    let mut y = vec![f32::NEG_INFINITY; batch * d];
    let mut at = vec![time as u32; batch * d];
    for b in 0..batch {
        let (yb, ab) = (&mut y[b * d..(b + 1) * d], &mut at[b * d..(b + 1) * d]);
        for t in (0..time).filter(|&t| mask[layout.row(b, t, batch, time)] != 0.0) {
            let r = layout.row(b, t, batch, time);
            let row = &s[r * d..(r + 1) * d];
            for j in 0..d {
                // burn's running maximum starts at position 0, whatever its value (−∞ when
                // padded, which is skipped here: −∞ and `time` stand for it).
                if t == 0 || row[j] > yb[j] {
                    yb[j] = row[j];
                    ab[j] = t as u32;
                }
            }
        }
    }
    (y, at)
}

#[derive(Debug)]
struct MaxPoolBackward;

impl Backward<Cpu, 1> for MaxPoolBackward {
    /// The chosen positions, `[batch, time, d]` and the input's layout.
    type State = (Arc<Vec<u32>>, [usize; 3], Layout);

    fn backward(self, ops: Ops<Self::State, 1>, grads: &mut Gradients, _: &mut Checkpointer) {
        let (at, [batch, time, d], layout) = ops.state;
        let dy = host_values(&grads.consume::<Cpu>(&ops.node));
        let [parent] = ops.parents;
        let Some(parent) = parent else { return };
        let mut dx = vec![0.0f32; batch * time * d];
        for b in 0..batch {
            for j in 0..d {
                let t = at[b * d + j] as usize;
                if t < time {
                    dx[layout.row(b, t, batch, time) * d + j] = 0.0 + dy[b * d + j];
                }
            }
        }
        let shape = match layout {
            Layout::BatchMajor => vec![batch, time, d],
            Layout::TimeMajor => vec![time, batch, d],
        };
        register_grad(grads, Some(parent.id), dx, shape);
    }
}

fn autodiff(states: Tensor<CpuAd, 3>, mask: Tensor<CpuAd, 2>, layout: Layout) -> Tensor<CpuAd, 2> {
    let [batch, time, d] = dims_of(states.dims(), layout);
    let states = states.into_primitive().tensor();
    // The mask is a constant: no gradient flows to it.
    let m = host_values(&mask.into_primitive().tensor().primitive);
    let (y, at) = with_values(&states.primitive, |s| {
        forward(s, &m, [batch, time, d], layout)
    });
    let out = <Cpu as FloatTensorOps<Cpu>>::float_from_data(
        TensorData::new(y, [batch, d]),
        &Default::default(),
    );
    let result = match MaxPoolBackward
        .prepare::<NoCheckpointing>([states.node.clone()])
        .compute_bound()
        .stateful()
    {
        OpsKind::Tracked(prep) => prep.finish((Arc::new(at), [batch, time, d], layout), out),
        OpsKind::UnTracked(prep) => prep.finish(out),
    };
    Tensor::from_primitive(TensorPrimitive::Float(result))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn values<const D: usize, B: Backend>(t: Tensor<B, D>) -> Vec<u32> {
        t.into_data()
            .convert::<f32>()
            .to_vec::<f32>()
            .unwrap()
            .iter()
            .map(|x| x.to_bits())
            .collect()
    }

    /// Bit for bit against burn's path, values and gradients: ties (the first wins), a
    /// padded first position, −∞ values, an all-padded sentence, negative maxima.
    #[test]
    fn fused_max_pool_equals_burns_with_its_gradient() {
        let dev = Default::default();
        let (batch, time, d) = (4, 5, 6);
        let mut s: Vec<f32> = (0..batch * time * d)
            .map(|i| ((i as f32) * 0.37).sin() - 0.5)
            .collect();
        let at = |b: usize, t: usize, j: usize| (b * time + t) * d + j;
        // Ties in sentence 0, column 1: positions 1 and 3 share the maximum.
        s[at(0, 1, 1)] = 2.0;
        s[at(0, 3, 1)] = 2.0;
        // −∞ at a real position; columns that are −∞ everywhere, after a real position 0
        // (sentence 2) and after a padded one (sentence 1).
        s[at(1, 2, 2)] = f32::NEG_INFINITY;
        for t in 0..time {
            s[at(2, t, 4)] = f32::NEG_INFINITY;
            s[at(1, t, 5)] = f32::NEG_INFINITY;
        }
        let mask: Vec<f32> = [
            [1.0, 1.0, 1.0, 1.0, 0.0],
            [0.0, 1.0, 1.0, 0.0, 1.0],
            [1.0, 1.0, 0.0, 0.0, 0.0],
            [0.0, 0.0, 0.0, 0.0, 0.0],
        ]
        .concat();
        let w: Vec<f32> = (0..batch * d).map(|i| (i as f32 * 0.9).cos()).collect();
        let w = Tensor::<CpuAd, 2>::from_data(TensorData::new(w, [batch, d]), &dev);
        let m = Tensor::<CpuAd, 2>::from_data(TensorData::new(mask, [batch, time]), &dev);
        let x1 = Tensor::<CpuAd, 3>::from_data(TensorData::new(s, [batch, time, d]), &dev)
            .require_grad();
        let x2 = x1.clone().detach().require_grad();
        let a = max_pool(x1.clone(), m.clone());
        let b = generic(x2.clone(), m.clone());
        assert_eq!(values(a.clone()), values(b.clone()));
        // The all-padded sentence pools to −∞: keep it out of the loss (−∞·w is not finite).
        let keep = |t: Tensor<CpuAd, 2>| t.slice([0..3, 0..d]).clamp_min(-10.0);
        let w3 = w.slice([0..3, 0..d]);
        let ga = x1.grad(&(keep(a) * w3.clone()).sum().backward()).unwrap();
        let gb = x2.grad(&(keep(b) * w3).sum().backward()).unwrap();
        assert_eq!(values(ga), values(gb));
        // Inference (no autodiff).
        assert_eq!(
            values(max_pool(x1.inner(), m.clone().inner())),
            values(generic(x2.inner(), m.inner()))
        );
    }

    /// Pooling a time-major array in place gives the bits of pooling its batch-major
    /// transpose times the mask (the encoder's states), values and gradients.
    #[test]
    fn time_major_pooling_equals_pooling_the_masked_transpose() {
        let dev = Default::default();
        let (time, batch, d) = (5, 4, 6);
        let mut s: Vec<f32> = (0..time * batch * d)
            .map(|i| ((i as f32) * 0.61).sin() - 0.3)
            .collect();
        // Ties and −∞, as above, in time-major positions.
        s[(batch + 1) * d + 2] = 3.0;
        s[(3 * batch + 1) * d + 2] = 3.0;
        s[(2 * batch + 2) * d] = f32::NEG_INFINITY;
        let mask_bt: [[f32; 5]; 4] = [
            [1.0, 1.0, 1.0, 1.0, 0.0],
            [0.0, 1.0, 1.0, 1.0, 1.0],
            [1.0, 1.0, 0.0, 0.0, 0.0],
            [1.0, 0.0, 0.0, 0.0, 0.0],
        ];
        let m_tm: Vec<f32> = (0..time)
            .flat_map(|t| mask_bt.iter().map(move |row| row[t]))
            .collect();
        let m_tm = Tensor::<CpuAd, 2>::from_data(TensorData::new(m_tm, [time, batch]), &dev);
        let m_bt = m_tm.clone().swap_dims(0, 1);
        let w: Vec<f32> = (0..batch * d).map(|i| (i as f32 * 0.7).cos()).collect();
        let w = Tensor::<CpuAd, 2>::from_data(TensorData::new(w, [batch, d]), &dev);
        let x1 = Tensor::<CpuAd, 3>::from_data(TensorData::new(s, [time, batch, d]), &dev)
            .require_grad();
        let x2 = x1.clone().detach().require_grad();
        let a = max_pool_time_major(x1.clone(), m_tm.clone()).expect("the CPU backend");
        let states = x2.clone().swap_dims(0, 1) * m_bt.clone().unsqueeze_dim::<3>(2);
        let b = max_pool(states, m_bt.clone());
        assert_eq!(values(a.clone()), values(b.clone()));
        let ga = x1.grad(&(a * w.clone()).sum().backward()).unwrap();
        let gb = x2.grad(&(b * w).sum().backward()).unwrap();
        assert_eq!(values(ga), values(gb));
        let inference = max_pool_time_major(x1.inner(), m_tm.inner()).expect("the CPU backend");
        assert_eq!(
            values(inference),
            values(max_pool(x2.inner().swap_dims(0, 1), m_bt.inner()))
        );
    }
}
