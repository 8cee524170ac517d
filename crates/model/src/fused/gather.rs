//! Embedding lookups as one operation on the CPU backend: `out[r] = Σ_{k: pos[k] = r}
//! W[index[k]]` (a word lookup is the case `pos[k] = k`; the character n-gram sums of
//! `encoder::char_ngrams` sum several rows into one token), with its own backward pass.
//!
//! Why: burn's path is `embedding` (a `select`) or `select_assign(Add)` into zeros, and its
//! backward fills the table-sized gradient with `TensorData::full`, one element at a time,
//! before the scatter. With tables of tens of thousands of rows and two or three lookups a
//! training step, that fill was a tenth of the step. Here the gradient starts from
//! zeroed memory (`calloc`) and only the rows that were read are written. A table read by
//! several lookups in one step (both sides of a pair, a premise and its hypothesis) gets
//! the later lookups' rows added in place into the gradient the first one registered,
//! where burn's `Gradients::register` would allocate and fill a table-sized sum for each.
//!
//! Semantics are burn's exactly, in the same order of additions (the forward sum runs over
//! `k` in order, from zero; the backward scatter too), which the tests below check against
//! the generic path, values and gradients.
//!
//! [`gather_rows`] serves `burn-ndarray` (f32) and its autodiff; on any other backend it
//! returns `None` and the caller runs burn's own operations.

use crate::fused::lstm::{register_grad, with_values};
use burn::backend::autodiff::checkpoint::base::Checkpointer;
use burn::backend::autodiff::checkpoint::strategy::NoCheckpointing;
use burn::backend::autodiff::grads::Gradients;
use burn::backend::autodiff::ops::{Backward, Ops, OpsKind};
use burn::backend::ndarray::NdArrayTensor;
use burn::backend::{Autodiff, NdArray};
use burn::tensor::backend::Backend;
use burn::tensor::ops::FloatTensorOps;
use burn::tensor::{Tensor, TensorData, TensorPrimitive};
use std::any::Any;
use std::sync::Arc;

type Cpu = NdArray<f32>;
type CpuAd = Autodiff<Cpu>;
/// burn-autodiff's tensor (its module is private; the type is public through the backend).
type AdTensor = burn::tensor::ops::FloatTensor<CpuAd>;

/// Which rows of the table go where.
#[derive(Debug, Clone)]
pub struct Gather {
    /// Row of the table for each item.
    pub index: Vec<usize>,
    /// Output row of each item; `None`: item `k` is output row `k`.
    pub position: Option<Vec<usize>>,
    /// Output rows.
    pub rows: usize,
}

/// Whether [`gather_rows`] runs fused on backend `B` (the caller then builds the host
/// indices it needs).
pub fn supported<B: Backend>() -> bool {
    use std::any::TypeId;
    let b = TypeId::of::<B>();
    b == TypeId::of::<CpuAd>() || b == TypeId::of::<Cpu>()
}

/// Host values of an integer tensor, as row indices.
pub fn host_indices<B: Backend, const D: usize>(t: &Tensor<B, D, burn::tensor::Int>) -> Vec<usize> {
    t.clone()
        .into_data()
        .convert::<i64>()
        .into_vec::<i64>()
        .expect("integer data")
        .into_iter()
        .map(|i| i as usize)
        .collect()
}

/// `[rows, d]`: the sums of the table `weight` (`[n_rows, d]`) rows `g` asks for, or `None`
/// on a backend other than burn-ndarray (f32) or its autodiff.
///
/// Panics when an index is outside the table or a position outside `0..rows` (the callers
/// build both from the batch they pad).
pub fn gather_rows<B: Backend>(weight: &Tensor<B, 2>, g: &Gather) -> Option<Tensor<B, 2>> {
    let any: &dyn Any = weight;
    if let Some(w) = any.downcast_ref::<Tensor<CpuAd, 2>>() {
        let out: Box<dyn Any> = Box::new(autodiff_gather(w.clone(), g));
        return Some(
            *out.downcast::<Tensor<B, 2>>()
                .expect("the same backend type"),
        );
    }
    if let Some(w) = any.downcast_ref::<Tensor<Cpu, 2>>() {
        let [_, d] = w.dims();
        let p = w.clone().into_primitive().tensor();
        let out = with_values(&p, |table| forward(table, d, g));
        let out: Box<dyn Any> = Box::new(Tensor::<Cpu, 2>::from_data(
            TensorData::new(out, [g.rows, d]),
            &Default::default(),
        ));
        return Some(
            *out.downcast::<Tensor<B, 2>>()
                .expect("the same backend type"),
        );
    }
    None
}

fn check(g: &Gather, n_rows: usize) {
    if let Some(p) = &g.position {
        assert_eq!(p.len(), g.index.len(), "one position per gathered row");
        assert!(
            p.iter().all(|&r| r < g.rows),
            "a position outside the output"
        );
    } else {
        assert_eq!(g.index.len(), g.rows, "one gathered row per output row");
    }
    assert!(
        g.index.iter().all(|&i| i < n_rows),
        "an index outside the table"
    );
}

fn forward(table: &[f32], d: usize, g: &Gather) -> Vec<f32> {
    check(g, table.len() / d.max(1));
    let mut out = vec![0.0f32; g.rows * d];
    for (k, &i) in g.index.iter().enumerate() {
        let r = g.position.as_ref().map_or(k, |p| p[k]);
        let src = &table[i * d..(i + 1) * d];
        for (o, s) in out[r * d..(r + 1) * d].iter_mut().zip(src) {
            *o += s;
        }
    }
    out
}

#[derive(Debug, Clone)]
struct Saved {
    g: Arc<Gather>,
    n_rows: usize,
    d: usize,
}

#[derive(Debug)]
struct GatherBackward;

impl Backward<Cpu, 1> for GatherBackward {
    type State = Saved;

    fn backward(self, ops: Ops<Saved, 1>, grads: &mut Gradients, _: &mut Checkpointer) {
        let s = ops.state;
        let d = s.d;
        let dout = grads.consume::<Cpu>(&ops.node);
        let [parent] = ops.parents;
        let Some(parent) = parent else { return };
        // The gradient an earlier lookup of this table registered, taken out of `grads`.
        let key = AdTensor {
            primitive: <Cpu as FloatTensorOps<Cpu>>::float_from_data(
                TensorData::new(Vec::<f32>::new(), [0]),
                &Default::default(),
            ),
            node: parent.clone(),
            rc: Arc::new(parent.id),
        };
        match grads.remove::<Cpu>(&key) {
            Some(NdArrayTensor::F32(storage)) if storage.shape() == [s.n_rows, d] => {
                // Owned (copied only if something else shares it), then this lookup's rows
                // added in place: burn's `old + new` element by element, `new` summed from
                // zero in item order as below (`add_grouped`).
                let mut sum = storage.into_owned();
                match sum.as_slice_mut() {
                    Some(dw) => with_values(&dout, |dout| add_grouped(dw, dout, d, &s.g)),
                    None => {
                        let fresh = fresh_grad(&dout, &s);
                        let old = NdArrayTensor::from(sum);
                        grads.register::<Cpu>(parent.id, old);
                        register_grad(grads, Some(parent.id), fresh, vec![s.n_rows, d]);
                        return;
                    }
                }
                grads.register::<Cpu>(parent.id, NdArrayTensor::from(sum));
            }
            other => {
                // None yet (the usual first lookup), or one this path cannot add into:
                // back in place, and burn's `register` sums.
                if let Some(old) = other {
                    grads.register::<Cpu>(parent.id, old);
                }
                let dw = fresh_grad(&dout, &s);
                register_grad(grads, Some(parent.id), dw, vec![s.n_rows, d]);
            }
        }
    }
}

/// The table's gradient from this lookup alone: zeroed memory from the allocator (calloc),
/// then the rows that were read, summed in item order.
fn fresh_grad(dout: &burn::tensor::ops::FloatTensor<Cpu>, s: &Saved) -> Vec<f32> {
    let d = s.d;
    let mut dw = vec![0.0f32; s.n_rows * d];
    with_values(dout, |dout| {
        for (k, &i) in s.g.index.iter().enumerate() {
            let r = s.g.position.as_ref().map_or(k, |p| p[k]);
            let src = &dout[r * d..(r + 1) * d];
            for (w, v) in dw[i * d..(i + 1) * d].iter_mut().zip(src) {
                *w += v;
            }
        }
    });
    dw
}

/// Adds this lookup's gradient into `dw` in place with the rounding of burn's
/// `dw + fresh_grad(..)`: each table row's items are first summed from zero in item order,
/// then added once. (Adding the items one by one into `dw` would round differently where a
/// row is read more than once.)
fn add_grouped(dw: &mut [f32], dout: &[f32], d: usize, g: &Gather) {
    let mut order: Vec<usize> = (0..g.index.len()).collect();
    // Stable: the items of one row keep their order.
    order.sort_by_key(|&k| g.index[k]);
    let mut row_sum = vec![0.0f32; d];
    for group in order.chunk_by(|&a, &b| g.index[a] == g.index[b]) {
        let i = g.index[group[0]];
        row_sum.fill(0.0);
        for &k in group {
            let r = g.position.as_ref().map_or(k, |p| p[k]);
            for (acc, v) in row_sum.iter_mut().zip(&dout[r * d..(r + 1) * d]) {
                *acc += v;
            }
        }
        for (w, v) in dw[i * d..(i + 1) * d].iter_mut().zip(&row_sum) {
            *w += v;
        }
    }
}

fn autodiff_gather(weight: Tensor<CpuAd, 2>, g: &Gather) -> Tensor<CpuAd, 2> {
    let [n_rows, d] = weight.dims();
    let w = weight.into_primitive().tensor();
    let out = with_values(&w.primitive, |table| forward(table, d, g));
    let out = <Cpu as FloatTensorOps<Cpu>>::float_from_data(
        TensorData::new(out, [g.rows, d]),
        &Default::default(),
    );
    let result = match GatherBackward
        .prepare::<NoCheckpointing>([w.node.clone()])
        .compute_bound()
        .stateful()
    {
        OpsKind::Tracked(prep) => prep.finish(
            Saved {
                g: Arc::new(g.clone()),
                n_rows,
                d,
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
    use crate::test_support::fused::values;
    use burn::tensor::{IndexingUpdateOp, Int};

    fn table() -> Tensor<CpuAd, 2> {
        let v: Vec<f32> = (0..7 * 3)
            .map(|i| ((i * 13) % 11) as f32 * 0.25 - 1.0)
            .collect();
        Tensor::<CpuAd, 2>::from_data(TensorData::new(v, [7, 3]), &Default::default())
            .require_grad()
    }

    /// burn's own path for `g`: `embedding`, then `select_assign(Add)` into positions.
    fn generic_gather(w: &Tensor<CpuAd, 2>, g: &Gather) -> Tensor<CpuAd, 2> {
        let dev = Default::default();
        let index: Vec<i64> = g.index.iter().map(|&i| i as i64).collect();
        let n = index.len();
        let picked = burn::tensor::module::embedding(
            w.clone(),
            Tensor::<CpuAd, 2, Int>::from_data(TensorData::new(index, [1, n]), &dev),
        )
        .reshape([n, 3]);
        match &g.position {
            None => picked,
            Some(p) => {
                let p: Vec<i64> = p.iter().map(|&i| i as i64).collect();
                Tensor::<CpuAd, 2>::zeros([g.rows, 3], &dev).select_assign(
                    0,
                    Tensor::from_data(TensorData::new(p, [n]), &dev),
                    picked,
                    IndexingUpdateOp::Add,
                )
            }
        }
    }

    /// The same loss (a weighted sum of the output) through the fused and the generic
    /// path: equal outputs and equal table gradients.
    fn compare(g: Gather) {
        let dev = Default::default();
        let weights: Vec<f32> = (0..g.rows * 3).map(|i| (i as f32 * 0.37).sin()).collect();
        let weights = Tensor::<CpuAd, 2>::from_data(TensorData::new(weights, [g.rows, 3]), &dev);
        let w = table();
        let fused = gather_rows(&w, &g).expect("the CPU backend");
        let grad_fused = (fused.clone() * weights.clone()).sum().backward();
        let w2 = table();
        let generic = generic_gather(&w2, &g);
        let grad_generic = (generic.clone() * weights).sum().backward();
        assert_eq!(values(fused), values(generic));
        assert_eq!(
            values(w.grad(&grad_fused).unwrap()),
            values(w2.grad(&grad_generic).unwrap())
        );
        // Inference gives the same values.
        let inner = gather_rows(&w.clone().inner(), &g).unwrap();
        assert_eq!(values(inner), values(gather_rows(&w, &g).unwrap()));
    }

    #[test]
    fn a_lookup_equals_burns_embedding_with_its_gradient() {
        compare(Gather {
            index: vec![3, 0, 3, 6, 1],
            position: None,
            rows: 5,
        });
    }

    #[test]
    fn sums_into_positions_equal_select_assign_with_its_gradient() {
        compare(Gather {
            index: vec![2, 2, 5, 0, 6, 1, 4],
            position: Some(vec![0, 0, 0, 2, 2, 3, 0]),
            rows: 4,
        });
    }

    /// Three lookups of one table in one step (the sides of a pair), with rows read by
    /// several of them and several times within one; the third does not reach the loss. The
    /// table's gradient equals burn's generic path bit for bit, though the later lookups add
    /// into the first one's gradient in place.
    #[test]
    fn several_lookups_of_one_table_sum_their_gradients_as_burn_does() {
        let dev = Default::default();
        let lookups = [
            Gather {
                index: vec![3, 0, 3, 6, 1],
                position: None,
                rows: 5,
            },
            Gather {
                index: vec![2, 3, 5, 3, 6, 3, 0],
                position: Some(vec![0, 0, 1, 1, 2, 2, 2]),
                rows: 3,
            },
            Gather {
                index: vec![4, 3],
                position: None,
                rows: 2,
            },
        ];
        let weights = |rows: usize, salt: f32| {
            let v: Vec<f32> = (0..rows * 3)
                .map(|i| (i as f32 * 0.37 + salt).sin() * 1e3f32.powi(i as i32 % 3 - 1))
                .collect();
            Tensor::<CpuAd, 2>::from_data(TensorData::new(v, [rows, 3]), &dev)
        };
        let run = |fused: bool| {
            let w = table();
            let outs: Vec<_> = lookups
                .iter()
                .map(|g| match fused {
                    true => gather_rows(&w, g).unwrap(),
                    false => generic_gather(&w, g),
                })
                .collect();
            let loss = (outs[0].clone() * weights(5, 0.0)).sum()
                + (outs[1].clone() * weights(3, 1.0)).sum();
            let _unused = &outs[2];
            values(w.grad(&loss.backward()).unwrap())
        };
        assert_eq!(run(true), run(false));
    }

    #[test]
    fn other_backends_decline() {
        type Other = burn::backend::NdArray<f64>;
        // burn 0.21 keeps one default float type per device type, set by the first backend
        // that asks, and NdArray<f64> shares NdArray<f32>'s device: touch the f32 backend
        // first, or the other tests of this process, running beside this one, would get
        // f64 tensors.
        let _ = Tensor::<Cpu, 1>::zeros([1], &Default::default());
        assert!(supported::<CpuAd>() && supported::<Cpu>() && !supported::<Other>());
        let w = Tensor::<Other, 2>::zeros([2, 2], &Default::default());
        let g = Gather {
            index: vec![1],
            position: None,
            rows: 1,
        };
        assert!(gather_rows(&w, &g).is_none());
    }
}
