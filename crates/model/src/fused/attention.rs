//! The core of multi-head self-attention as one operation on the CPU backend, with its own
//! backward pass: from the fused QKV projection to the concatenated heads,
//!
//! ```text
//! for each sentence b and head h:   (Q, K, V = the head's columns of qkv, time × d_head)
//!     S = Q·Kᵀ / √d_head + key_bias        key_bias: 0 at real keys, −10⁴ at padded ones
//!     P = softmax(S) row by row            P' = P ⊙ dropout mask
//!     context[b, :, h] = P'·V
//! ```
//!
//! which is `encoder::transformer::SelfAttention`'s generic path (burn's reshape, permute,
//! slice, 4-D matmuls, softmax and dropout) exactly, up to float rounding: the tests below
//! compare values and gradients. The dropout mask is drawn from the same [`Noise`] at the
//! same point with the same shape (`[batch, heads, time, time]`), so a training run draws
//! the same masks on either path.
//!
//! Why: burn-ndarray's 4-D matmuls copy their permuted operands (forward and backward), and
//! each of the dozen small operations allocates; on the muse-xling transformer those copies
//! alone were a seventh of a training step. Here each sentence's heads run as small
//! contiguous GEMMs (`harness-kernels`), sentences in parallel over rayon, and the backward
//! pass is the textbook one:
//!
//! ```text
//! dV = P'ᵀ·dC    dP = (dC·Vᵀ) ⊙ mask    dS = P ⊙ (dP − rowsum(dP ⊙ P)) / √d_head
//! dQ = dS·K      dK = dSᵀ·Q
//! ```
//!
//! [`fused_attention`] serves `burn-ndarray` (f32) and its autodiff; on any other backend it
//! declines and the caller runs the generic path.

use crate::fused::lstm::{host_values, register_grad};
use crate::random::Noise;
use burn::backend::autodiff::checkpoint::base::Checkpointer;
use burn::backend::autodiff::checkpoint::strategy::NoCheckpointing;
use burn::backend::autodiff::grads::Gradients;
use burn::backend::autodiff::ops::{Backward, Ops, OpsKind};
use burn::backend::{Autodiff, NdArray};
use burn::tensor::backend::Backend;
use burn::tensor::ops::FloatTensorOps;
use burn::tensor::{Tensor, TensorData, TensorPrimitive};
use harness_kernels::gemm;
use rayon::prelude::*;
use std::any::{Any, TypeId};
use std::sync::Arc;

type Cpu = NdArray<f32>;
type CpuAd = Autodiff<Cpu>;

/// What a padded key adds to its score (`encoder::transformer`'s `MASKED`).
pub const MASKED: f32 = -1.0e4;

/// Whether [`fused_attention`] runs fused on backend `B`.
pub fn supported<B: Backend>() -> bool {
    let b = TypeId::of::<B>();
    b == TypeId::of::<CpuAd>() || b == TypeId::of::<Cpu>()
}

/// Sizes of one attention.
#[derive(Debug, Clone, Copy)]
pub struct Shape {
    pub batch: usize,
    pub time: usize,
    pub heads: usize,
    /// Model width (`heads · d_head`).
    pub d: usize,
}

impl Shape {
    fn d_head(&self) -> usize {
        self.d / self.heads
    }
}

/// `[batch·time, d]`: the heads' contexts, concatenated, for `qkv` (`[batch·time, 3d]`: the
/// queries, keys and values, each `heads` blocks of `d_head` columns) and `key_mask`
/// (`[batch·time]`, 1 at real tokens); dropout `p` on the attention probabilities when
/// `noise` is given. `None` (nothing drawn) on a backend this does not serve.
pub fn fused_attention<B: Backend>(
    qkv: Tensor<B, 2>,
    key_mask: &[f32],
    shape: Shape,
    noise: &mut Option<&mut Noise>,
    p: f64,
) -> Result<Tensor<B, 2>, Tensor<B, 2>> {
    if !supported::<B>() {
        return Err(qkv);
    }
    let n = shape.batch * shape.heads * shape.time * shape.time;
    let mask = match noise {
        Some(noise) => noise.mask(n, p),
        None => None,
    };
    let any: Box<dyn Any> = Box::new(qkv);
    let any = match any.downcast::<Tensor<CpuAd, 2>>() {
        Ok(qkv) => {
            let out: Box<dyn Any> = Box::new(autodiff_attention(*qkv, key_mask, shape, mask));
            return Ok(*out.downcast::<Tensor<B, 2>>().expect("the same backend"));
        }
        Err(other) => other,
    };
    let qkv = *any
        .downcast::<Tensor<Cpu, 2>>()
        .expect("a supported backend");
    let values = host_values(&qkv.into_primitive().tensor());
    let fwd = forward(&values, key_mask, shape, mask.as_deref());
    let out: Box<dyn Any> = Box::new(Tensor::<Cpu, 2>::from_data(
        TensorData::new(fwd.context, [shape.batch * shape.time, shape.d]),
        &Default::default(),
    ));
    Ok(*out.downcast::<Tensor<B, 2>>().expect("the same backend"))
}

/// Copies head `h`'s block `part` (0 queries, 1 keys, 2 values) of sentence `rows` of qkv
/// (`time` rows of `3d`) into `out` (`time × d_head`).
fn take(rows: &[f32], part: usize, h: usize, s: Shape, out: &mut [f32]) {
    let dh = s.d_head();
    let col = part * s.d + h * dh;
    for t in 0..s.time {
        out[t * dh..(t + 1) * dh].copy_from_slice(&rows[t * 3 * s.d + col..t * 3 * s.d + col + dh]);
    }
}

struct Forward {
    context: Vec<f32>,
    /// `[batch, heads, time, time]` softmax probabilities (before dropout).
    probs: Vec<f32>,
}

fn forward(qkv: &[f32], key_mask: &[f32], s: Shape, mask: Option<&[f32]>) -> Forward {
    let (t, dh) = (s.time, s.d_head());
    let scale = 1.0 / (dh as f64).sqrt();
    let scale = scale as f32;
    let mut context = vec![0.0f32; s.batch * t * s.d];
    let mut probs = vec![0.0f32; s.batch * s.heads * t * t];
    context
        .par_chunks_mut(t * s.d)
        .zip(probs.par_chunks_mut(s.heads * t * t))
        .enumerate()
        .for_each(|(b, (ctx, pb))| {
            let rows = &qkv[b * t * 3 * s.d..(b + 1) * t * 3 * s.d];
            let keys = &key_mask[b * t..(b + 1) * t];
            let (mut q, mut k, mut v) = (vec![0.0; t * dh], vec![0.0; t * dh], vec![0.0; t * dh]);
            let mut c = vec![0.0f32; t * dh];
            let mut dropped = vec![0.0f32; t * t];
            for h in 0..s.heads {
                take(rows, 0, h, s, &mut q);
                take(rows, 1, h, s, &mut k);
                take(rows, 2, h, s, &mut v);
                let ph = &mut pb[h * t * t..(h + 1) * t * t];
                gemm(t, t, dh, 1.0, &q, false, &k, true, 0.0, ph);
                for row in ph.chunks_exact_mut(t) {
                    for (x, &m) in row.iter_mut().zip(keys) {
                        *x = *x * scale + if m > 0.0 { 0.0 } else { MASKED };
                    }
                    softmax_row(row);
                }
                let used: &[f32] = match mask {
                    Some(m) => {
                        let mh = &m[(b * s.heads + h) * t * t..(b * s.heads + h + 1) * t * t];
                        for ((o, p), m) in dropped.iter_mut().zip(ph.iter()).zip(mh) {
                            *o = p * m;
                        }
                        &dropped
                    }
                    None => ph,
                };
                gemm(t, dh, t, 1.0, used, false, &v, false, 0.0, &mut c);
                for i in 0..t {
                    ctx[i * s.d + h * dh..i * s.d + (h + 1) * dh]
                        .copy_from_slice(&c[i * dh..(i + 1) * dh]);
                }
            }
        });
    Forward { context, probs }
}

/// burn's `softmax`: `exp(x − max) / Σ exp(x − max)`. (Not `harness_kernels::exp`: it
/// clamps at −87.3, so a padded key would get e^−87.3 ≈ 1e−38 instead of 0, and the
/// subnormal products that follow slow every later GEMM several times over.)
fn softmax_row(row: &mut [f32]) {
    let max = row.iter().copied().fold(f32::NEG_INFINITY, f32::max);
    let mut sum = 0.0f32;
    for x in row.iter_mut() {
        *x = (*x - max).exp();
        sum += *x;
    }
    for x in row.iter_mut() {
        *x /= sum;
    }
}

#[derive(Debug, Clone)]
struct Saved {
    shape: Shape,
    qkv: Arc<Vec<f32>>,
    probs: Arc<Vec<f32>>,
    mask: Option<Arc<Vec<f32>>>,
}

#[derive(Debug)]
struct AttentionBackward;

impl Backward<Cpu, 1> for AttentionBackward {
    type State = Saved;

    fn backward(self, ops: Ops<Saved, 1>, grads: &mut Gradients, _: &mut Checkpointer) {
        let s = ops.state;
        let dctx = host_values(&grads.consume::<Cpu>(&ops.node));
        let [parent] = ops.parents;
        let Some(parent) = parent else { return };
        let dqkv = backward(&s, &dctx);
        let sh = s.shape;
        register_grad(
            grads,
            Some(parent.id),
            dqkv,
            vec![sh.batch * sh.time, 3 * sh.d],
        );
    }
}

fn backward(saved: &Saved, dctx: &[f32]) -> Vec<f32> {
    let s = saved.shape;
    let (t, dh) = (s.time, s.d_head());
    let scale = (1.0 / (dh as f64).sqrt()) as f32;
    let mut dqkv = vec![0.0f32; s.batch * t * 3 * s.d];
    dqkv.par_chunks_mut(t * 3 * s.d)
        .enumerate()
        .for_each(|(b, dout)| {
            let rows = &saved.qkv[b * t * 3 * s.d..(b + 1) * t * 3 * s.d];
            let (mut q, mut k, mut v) = (vec![0.0; t * dh], vec![0.0; t * dh], vec![0.0; t * dh]);
            let mut dc = vec![0.0f32; t * dh];
            let (mut dq, mut dk, mut dv) =
                (vec![0.0; t * dh], vec![0.0; t * dh], vec![0.0; t * dh]);
            let mut dropped = vec![0.0f32; t * t];
            let mut dp = vec![0.0f32; t * t];
            for h in 0..s.heads {
                take(rows, 0, h, s, &mut q);
                take(rows, 1, h, s, &mut k);
                take(rows, 2, h, s, &mut v);
                for i in 0..t {
                    let at = (b * t + i) * s.d + h * dh;
                    dc[i * dh..(i + 1) * dh].copy_from_slice(&dctx[at..at + dh]);
                }
                let bh = b * s.heads + h;
                let ph = &saved.probs[bh * t * t..(bh + 1) * t * t];
                let mh = saved
                    .mask
                    .as_ref()
                    .map(|m| &m[bh * t * t..(bh + 1) * t * t]);
                let used: &[f32] = match mh {
                    Some(m) => {
                        for ((o, p), m) in dropped.iter_mut().zip(ph).zip(m) {
                            *o = p * m;
                        }
                        &dropped
                    }
                    None => ph,
                };
                // dV = P'ᵀ·dC; dP' = dC·Vᵀ.
                gemm(t, dh, t, 1.0, used, true, &dc, false, 0.0, &mut dv);
                gemm(t, t, dh, 1.0, &dc, false, &v, true, 0.0, &mut dp);
                if let Some(m) = mh {
                    for (x, m) in dp.iter_mut().zip(m) {
                        *x *= m;
                    }
                }
                // Softmax backward, then the score scale.
                for (drow, prow) in dp.chunks_exact_mut(t).zip(ph.chunks_exact(t)) {
                    let dot: f32 = drow.iter().zip(prow).map(|(d, p)| d * p).sum();
                    for (d, p) in drow.iter_mut().zip(prow) {
                        *d = p * (*d - dot) * scale;
                    }
                }
                // dQ = dS·K; dK = dSᵀ·Q.
                gemm(t, dh, t, 1.0, &dp, false, &k, false, 0.0, &mut dq);
                gemm(t, dh, t, 1.0, &dp, true, &q, false, 0.0, &mut dk);
                for i in 0..t {
                    let row = &mut dout[i * 3 * s.d..(i + 1) * 3 * s.d];
                    for (part, g) in [(0, &dq), (1, &dk), (2, &dv)] {
                        let col = part * s.d + h * dh;
                        row[col..col + dh].copy_from_slice(&g[i * dh..(i + 1) * dh]);
                    }
                }
            }
        });
    dqkv
}

fn autodiff_attention(
    qkv: Tensor<CpuAd, 2>,
    key_mask: &[f32],
    shape: Shape,
    mask: Option<Vec<f32>>,
) -> Tensor<CpuAd, 2> {
    let qkv = qkv.into_primitive().tensor();
    let values = host_values(&qkv.primitive);
    let fwd = forward(&values, key_mask, shape, mask.as_deref());
    let out = <Cpu as FloatTensorOps<Cpu>>::float_from_data(
        TensorData::new(fwd.context, [shape.batch * shape.time, shape.d]),
        &Default::default(),
    );
    let result = match AttentionBackward
        .prepare::<NoCheckpointing>([qkv.node.clone()])
        .compute_bound()
        .stateful()
    {
        OpsKind::Tracked(prep) => prep.finish(
            Saved {
                shape,
                qkv: Arc::new(values),
                probs: Arc::new(fwd.probs),
                mask: mask.map(Arc::new),
            },
            out,
        ),
        OpsKind::UnTracked(prep) => prep.finish(out),
    };
    Tensor::from_primitive(TensorPrimitive::Float(result))
}
