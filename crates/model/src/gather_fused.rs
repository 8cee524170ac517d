//! Embedding lookups as one operation on the CPU backend: `out[r] = Σ_{k: pos[k] = r}
//! W[index[k]]` (a word lookup is the case `pos[k] = k`; the character n-gram sums of
//! `encoder::char_ngrams` sum several rows into one token), with its own backward pass.
//!
//! Why: burn's path is `embedding` (a `select`) or `select_assign(Add)` into zeros, and its
//! backward fills the table-sized gradient with `TensorData::full`, one element at a time,
//! before the scatter. With tables of tens of thousands of rows and two or three lookups a
//! training step, that fill was a tenth of the step. Here the gradient starts from
//! zeroed memory (`calloc`) and only the rows that were read are written.
//!
//! Semantics are burn's exactly, in the same order of additions (the forward sum runs over
//! `k` in order, from zero; the backward scatter too), which the tests below check against
//! the generic path, values and gradients.
//!
//! [`gather_rows`] serves `burn-ndarray` (f32) and its autodiff; on any other backend it
//! returns `None` and the caller runs burn's own operations.

use crate::lstm_fused::{register_grad, with_values};
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
        // Zeroed memory from the allocator (calloc), then the rows that were read.
        let mut dw = vec![0.0f32; s.n_rows * d];
        with_values(&dout, |dout| {
            for (k, &i) in s.g.index.iter().enumerate() {
                let r = s.g.position.as_ref().map_or(k, |p| p[k]);
                let src = &dout[r * d..(r + 1) * d];
                for (w, v) in dw[i * d..(i + 1) * d].iter_mut().zip(src) {
                    *w += v;
                }
            }
        });
        register_grad(grads, Some(parent.id), dw, vec![s.n_rows, d]);
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
    use burn::tensor::{IndexingUpdateOp, Int};

    fn table() -> Tensor<CpuAd, 2> {
        let v: Vec<f32> = (0..7 * 3)
            .map(|i| ((i * 13) % 11) as f32 * 0.25 - 1.0)
            .collect();
        Tensor::<CpuAd, 2>::from_data(TensorData::new(v, [7, 3]), &Default::default())
            .require_grad()
    }

    fn values<const D: usize, B: Backend>(t: Tensor<B, D>) -> Vec<f32> {
        t.into_data().convert::<f32>().to_vec::<f32>().unwrap()
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
        let index: Vec<i64> = g.index.iter().map(|&i| i as i64).collect();
        let n = index.len();
        let picked = burn::tensor::module::embedding(
            w2.clone(),
            Tensor::<CpuAd, 2, Int>::from_data(TensorData::new(index, [1, n]), &dev),
        )
        .reshape([n, 3]);
        let generic = match &g.position {
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
        };
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

    #[test]
    fn other_backends_decline() {
        type Other = burn::backend::NdArray<f64>;
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
