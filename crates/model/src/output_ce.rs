//! The decoder's vocabulary projection and its token cross-entropy as one operation on the
//! CPU backend, with its own backward pass (PyTorch's fused `cross_entropy` after a
//! `Linear`, and what `train/objectives/seq2seq_ce.rs` computes step by step elsewhere):
//!
//! - only real (unmasked) positions are projected: padding costs no product;
//! - `logits = h·W + b` is one parallel product; each row's log-sum-exp, the gold token's
//!   log-probability and (with label smoothing ε) the mean log-probability are taken in one
//!   pass, and the softmax is kept for the backward pass;
//! - backward: `dlogits = (softmax − (1−ε)·onehot − ε/V) · g / count`, then `dh = dlogits·Wᵀ`,
//!   `dW = hᵀ·dlogits` and `db = Σ dlogits`, each one parallel product.
//!
//! The loss is `seq2seq_ce`'s exactly: the mean over real target tokens of
//! `(1−ε)·(−log p_gold) + ε·(−mean_v log p_v)`. [`fused_output_ce`] serves
//! `Autodiff<burn-ndarray>`; on any other backend it declines and the caller computes the
//! logits and the loss with burn's ops.

use burn::backend::autodiff::checkpoint::base::Checkpointer;
use burn::backend::autodiff::checkpoint::strategy::NoCheckpointing;
use burn::backend::autodiff::grads::Gradients;
use burn::backend::autodiff::ops::{Backward, Ops, OpsKind};
use burn::backend::{Autodiff, NdArray};
use burn::tensor::backend::Backend;
use burn::tensor::ops::FloatTensorOps;
use burn::tensor::{Int, Tensor, TensorData, TensorPrimitive};
use rayon::prelude::*;
use std::any::Any;
use std::sync::Arc;

type Cpu = NdArray<f32>;
type CpuAd = Autodiff<Cpu>;

/// What the loss is computed from.
pub struct OutputCe<B: Backend> {
    /// `[batch, time, hidden]`: the decoder's top states.
    pub hidden: Tensor<B, 3>,
    /// `[hidden, vocab]` and `[vocab]`: the output projection (burn's `Linear` layout).
    pub weight: Tensor<B, 2>,
    pub bias: Option<Tensor<B, 1>>,
    /// `[batch, time]`: gold token ids.
    pub targets: Tensor<B, 2, Int>,
    /// `[batch, time]`: 1 at real positions, 0 at padding.
    pub mask: Tensor<B, 2>,
    /// Label smoothing ε.
    pub smoothing: f64,
}

/// The mean token cross-entropy `[1]`, computed by the fused CPU operation on
/// `Autodiff<burn-ndarray>`; `Err(input)` (unchanged) on any other backend.
pub fn fused_output_ce<B: Backend>(input: OutputCe<B>) -> Result<Tensor<B, 1>, OutputCe<B>> {
    let any: Box<dyn Any> = Box::new(input);
    match any.downcast::<OutputCe<CpuAd>>() {
        Ok(input) => {
            let out: Box<dyn Any> = Box::new(autodiff_ce(*input));
            Ok(*out
                .downcast::<Tensor<B, 1>>()
                .expect("the same backend type"))
        }
        Err(other) => Err(*other
            .downcast::<OutputCe<B>>()
            .expect("the input's own type")),
    }
}

#[derive(Debug, Clone)]
struct Saved {
    /// Real positions: `rows × hidden` states and their softmax `rows × vocab`.
    h: Arc<Vec<f32>>,
    probs: Arc<Vec<f32>>,
    gold: Arc<Vec<usize>>,
    /// Index of each real row in the flattened `[batch·time]` positions.
    positions: Arc<Vec<usize>>,
    w: Arc<Vec<f32>>,
    all_rows: usize,
    hidden: usize,
    vocab: usize,
    count: f32,
    smoothing: f32,
    batch_time: [usize; 2],
}

#[derive(Debug)]
struct OutputCeBackward;

impl Backward<Cpu, 3> for OutputCeBackward {
    type State = Saved;

    fn backward(self, ops: Ops<Saved, 3>, grads: &mut Gradients, _: &mut Checkpointer) {
        let s = ops.state;
        let g = crate::fused::lstm::host_values(&grads.consume::<Cpu>(&ops.node))[0];
        let (rows, h, v) = (s.gold.len(), s.hidden, s.vocab);
        let eps = s.smoothing;
        let scale = g / s.count;
        // dlogits, row by row, in place of a copy of the softmax.
        let mut dlogits = (*s.probs).clone();
        dlogits
            .par_chunks_mut(v.max(1))
            .zip(s.gold.par_iter())
            .for_each(|(row, &y)| {
                for p in row.iter_mut() {
                    *p = (*p - eps / v as f32) * scale;
                }
                row[y] -= (1.0 - eps) * scale;
            });
        let [p_h, p_w, p_b] = ops.parents.map(|p| p.map(|n| n.id));
        let device = Default::default();
        if let Some(id) = p_h {
            let mut dh_real = vec![0.0f32; rows * h];
            harness_kernels::gemm(
                rows,
                h,
                v,
                1.0,
                &dlogits,
                false,
                &s.w,
                true,
                0.0,
                &mut dh_real,
            );
            let mut dh = vec![0.0f32; s.all_rows * h];
            for (r, &pos) in s.positions.iter().enumerate() {
                dh[pos * h..(pos + 1) * h].copy_from_slice(&dh_real[r * h..(r + 1) * h]);
            }
            let [b, t] = s.batch_time;
            let p = Cpu::float_from_data(TensorData::new(dh, [b, t, h]), &device);
            grads.register::<Cpu>(id, p);
        }
        if let Some(id) = p_w {
            let mut dw = vec![0.0f32; h * v];
            harness_kernels::gemm(h, v, rows, 1.0, &s.h, true, &dlogits, false, 0.0, &mut dw);
            let p = Cpu::float_from_data(TensorData::new(dw, [h, v]), &device);
            grads.register::<Cpu>(id, p);
        }
        if let Some(id) = p_b {
            let mut db = vec![0.0f32; v];
            for row in dlogits.chunks_exact(v.max(1)) {
                for (a, b) in db.iter_mut().zip(row) {
                    *a += b;
                }
            }
            let p = Cpu::float_from_data(TensorData::new(db, [v]), &device);
            grads.register::<Cpu>(id, p);
        }
    }
}

fn autodiff_ce(input: OutputCe<CpuAd>) -> Tensor<CpuAd, 1> {
    let [batch, time, hidden] = input.hidden.dims();
    let vocab = input.weight.dims()[1];
    let device = input.hidden.device();
    let has_bias = input.bias.is_some();
    let bias = input
        .bias
        .unwrap_or_else(|| Tensor::zeros([0], &device))
        .into_primitive()
        .tensor();
    let hs = input.hidden.into_primitive().tensor();
    let w = input.weight.into_primitive().tensor();
    let h_all = crate::fused::lstm::host_values(&hs.primitive);
    let w_host = crate::fused::lstm::host_values(&w.primitive);
    let mask = crate::fused::lstm::host_values(&input.mask.inner().into_primitive().tensor());
    let targets: Vec<i64> = input
        .targets
        .inner()
        .into_data()
        .convert::<i64>()
        .into_vec::<i64>()
        .expect("integer targets");
    // Real positions only.
    let positions: Vec<usize> = (0..batch * time).filter(|&p| mask[p] != 0.0).collect();
    let rows = positions.len();
    let mut h = vec![0.0f32; rows * hidden];
    for (r, &p) in positions.iter().enumerate() {
        h[r * hidden..(r + 1) * hidden].copy_from_slice(&h_all[p * hidden..(p + 1) * hidden]);
    }
    let gold: Vec<usize> = positions
        .iter()
        .map(|&p| (targets[p].max(0) as usize).min(vocab.saturating_sub(1)))
        .collect();
    let mut logits = vec![0.0f32; rows * vocab];
    if has_bias {
        let b = crate::fused::lstm::host_values(&bias.primitive);
        for row in logits.chunks_exact_mut(vocab.max(1)) {
            row.copy_from_slice(&b);
        }
    }
    // The weights packed a tile at a time and the rows read in place (`gemm_w`): a general
    // GEMM cut the vocabulary into blocks and packed all the rows again for each.
    harness_kernels::gemm_w(rows, vocab, hidden, &h, &w_host, false, &mut logits);
    let eps = input.smoothing as f32;
    // Per row: log-sum-exp, the loss, and the softmax in place of the logits.
    let losses: Vec<f64> = logits
        .par_chunks_mut(vocab.max(1))
        .zip(gold.par_iter())
        .map(|(row, &y)| {
            let max = row.iter().copied().fold(f32::NEG_INFINITY, f32::max);
            let sum_logits: f64 = row.iter().map(|&x| x as f64).sum();
            let gold_logit = row[y];
            for x in row.iter_mut() {
                *x -= max;
            }
            harness_kernels::exp(row);
            let z: f64 = row.iter().map(|&x| x as f64).sum();
            let lse = max as f64 + z.ln();
            let inv = (1.0 / z) as f32;
            for x in row.iter_mut() {
                *x *= inv;
            }
            let nll_gold = lse - gold_logit as f64;
            let nll_mean = lse - sum_logits / vocab as f64;
            (1.0 - eps as f64) * nll_gold + eps as f64 * nll_mean
        })
        .collect();
    let count = (rows as f32).max(1.0);
    let loss = (losses.iter().sum::<f64>() / count as f64) as f32;
    let out = Cpu::float_from_data(TensorData::new(vec![loss], [1]), &Default::default());
    let prep = OutputCeBackward
        .prepare::<NoCheckpointing>([hs.node.clone(), w.node.clone(), bias.node.clone()])
        .compute_bound()
        .stateful();
    let result = match prep {
        OpsKind::Tracked(prep) => prep.finish(
            Saved {
                h: Arc::new(h),
                probs: Arc::new(logits),
                gold: Arc::new(gold),
                positions: Arc::new(positions),
                w: Arc::new(w_host),
                all_rows: batch * time,
                hidden,
                vocab,
                count,
                smoothing: eps,
                batch_time: [batch, time],
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
    use burn::nn::LinearConfig;
    use burn::tensor::activation::log_softmax;

    /// `seq2seq_ce` as the objective computes it with burn's ops (the reference).
    fn reference(
        logits: Tensor<CpuAd, 3>,
        targets: Tensor<CpuAd, 2, Int>,
        mask: Tensor<CpuAd, 2>,
        eps: f64,
    ) -> Tensor<CpuAd, 1> {
        let [b, t, v] = logits.dims();
        let n = b * t;
        let logp = log_softmax(logits.reshape([n, v]), 1);
        let gold = logp
            .clone()
            .gather(1, targets.reshape([n, 1]))
            .reshape([n])
            .neg();
        let uniform = logp.mean_dim(1).reshape([n]).neg();
        let per = gold * (1.0 - eps) + uniform * eps;
        let mask = mask.reshape([n]);
        let count = mask.clone().sum().clamp_min(1.0);
        (per * mask).sum() / count
    }

    fn v<const D: usize>(t: Tensor<Cpu, D>) -> Vec<f32> {
        t.into_data().into_vec::<f32>().unwrap()
    }

    #[test]
    fn fused_loss_and_gradients_equal_the_reference() {
        let dev = Default::default();
        let (b, t, h, vocab) = (3, 4, 5, 11);
        for eps in [0.0, 0.1] {
            let lin = crate::random::init_uniform(
                LinearConfig::new(h, vocab).init::<CpuAd>(&dev),
                5,
                0.5,
            );
            let hidden =
                crate::random::uniform_tensor::<CpuAd, 3>([b, t, h], 1.0, 101, &dev).require_grad();
            let targets = Tensor::<CpuAd, 2, Int>::from_data(
                TensorData::new(
                    (0..b * t)
                        .map(|i| (i * 7 % vocab) as i64)
                        .collect::<Vec<_>>(),
                    [b, t],
                ),
                &dev,
            );
            let mask = Tensor::<CpuAd, 2>::from_data(
                TensorData::new(
                    vec![1f32, 1., 1., 0., 1., 1., 0., 0., 1., 1., 1., 1.],
                    [b, t],
                ),
                &dev,
            );
            let run = |fused: bool| {
                let loss = if fused {
                    fused_output_ce(OutputCe {
                        hidden: hidden.clone(),
                        weight: lin.weight.val(),
                        bias: lin.bias.as_ref().map(|x| x.val()),
                        targets: targets.clone(),
                        mask: mask.clone(),
                        smoothing: eps,
                    })
                    .ok()
                    .expect("fused on the CPU backend")
                } else {
                    reference(
                        lin.forward(hidden.clone()),
                        targets.clone(),
                        mask.clone(),
                        eps,
                    )
                };
                let grads = loss.backward();
                (
                    v(loss.inner()),
                    v(hidden.grad(&grads).unwrap()),
                    v(lin.weight.val().grad(&grads).unwrap()),
                    v(lin.bias.as_ref().unwrap().val().grad(&grads).unwrap()),
                )
            };
            let a = run(true);
            let r = run(false);
            for (x, y, what) in [
                (&a.0, &r.0, "loss"),
                (&a.1, &r.1, "dh"),
                (&a.2, &r.2, "dW"),
                (&a.3, &r.3, "db"),
            ] {
                for (p, q) in x.iter().zip(y) {
                    assert!(
                        (p - q).abs() < 1e-5 * (1.0 + q.abs()),
                        "{what} (ε {eps}): {p} vs {q}"
                    );
                }
            }
        }
    }
}
