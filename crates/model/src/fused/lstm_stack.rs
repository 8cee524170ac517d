//! Encoding with a stack of LSTM layers, max-pooled over time, on host arrays end to end:
//! the inference path of the BiLSTM encoder (`encoder/bilstm.rs` `encode`) on the CPU
//! backend. The layer-by-layer path ([`crate::fused::lstm::fused_layer`] per direction)
//! turns every layer's input and output into tensors: the batch-major embeddings are
//! transposed to time-major and copied out per direction, the directions' outputs are
//! concatenated, transposed back and multiplied by the mask before the pooling copies them
//! out once more; a `perf` profile of `harness embed` with the LASER default put those copies
//! at about a third of the time. Here the embeddings are copied out once, both directions
//! run in parallel straight into one `[time, batch, 2H]` array, and the pooling reads it in
//! place.
//!
//! The arithmetic is the layer-by-layer path's, call for call ([`project`], [`hidden_states`]),
//! and the pooling is `fused::maxpool`'s rule (real positions only, the first maximum wins;
//! the mask's multiplication there is by 1 at every real position), so the vectors are the
//! same bits (tested below).

use crate::fused::lstm::{hidden_states, host, project, to_cpu, Dims};
use burn::backend::NdArray;
use burn::tensor::backend::Backend;
use burn::tensor::Tensor;
use std::any::Any;

type Cpu = NdArray<f32>;

/// One direction of one layer: its weights in [`crate::lstm::MaskedLstm`]'s layout.
pub struct Direction<B: Backend> {
    /// `[d_input, 4·hidden]` and `[4·hidden]`: the input projection and the gates' bias.
    pub w_ih: Tensor<B, 2>,
    pub bias: Option<Tensor<B, 1>>,
    /// `[hidden, 4·hidden]`: the recurrent weights.
    pub w_hh: Tensor<B, 2>,
    /// Runs from the last step to the first.
    pub reverse: bool,
}

/// Whether [`max_pooled`] runs on backend `B` (burn-ndarray, f32, without autodiff).
pub fn supported<B: Backend>() -> bool {
    std::any::TypeId::of::<B>() == std::any::TypeId::of::<Cpu>()
}

/// The max-pooled output of `layers` (bottom first; each one direction or two, whose
/// outputs stand side by side as the next layer's input) over `x: [batch, time, d]` with
/// `mask: [batch, time]` (1 at real tokens): `[batch, Σ hidden of the top layer]`, padded
/// positions left out of the maximum (a sentence without a real position pools to −∞).
/// `None` on a backend other than burn-ndarray (f32), or for an empty sequence, where the
/// caller runs the layers one by one.
pub fn max_pooled<B: Backend>(
    x: Tensor<B, 3>,
    mask: Tensor<B, 2>,
    layers: Vec<Vec<Direction<B>>>,
) -> Option<Tensor<B, 2>> {
    let [batch, time, _] = x.dims();
    if time == 0 || batch == 0 || layers.is_empty() || layers.iter().any(Vec::is_empty) {
        return None;
    }
    let any: Box<dyn Any> = Box::new((x, mask, layers));
    let (x, mask, layers) = *any
        .downcast::<(Tensor<Cpu, 3>, Tensor<Cpu, 2>, Vec<Vec<Direction<Cpu>>>)>()
        .ok()?;
    let pooled: Box<dyn Any> = Box::new(host_stack(x, mask, layers));
    Some(*pooled.downcast::<Tensor<B, 2>>().expect("the same backend"))
}

fn host_stack(
    x: Tensor<Cpu, 3>,
    mask: Tensor<Cpu, 2>,
    layers: Vec<Vec<Direction<Cpu>>>,
) -> Tensor<Cpu, 2> {
    let [batch, time, d_embed] = x.dims();
    let x = host(x);
    let mask = host(mask);
    // Time-major, as the recurrence reads them: row `t·batch + b`.
    let mut input = vec![0.0f32; time * batch * d_embed];
    let mut mask_tm = vec![0.0f32; time * batch];
    for b in 0..batch {
        for t in 0..time {
            let row = (b * time + t) * d_embed;
            input[(t * batch + b) * d_embed..(t * batch + b + 1) * d_embed]
                .copy_from_slice(&x[row..row + d_embed]);
            mask_tm[t * batch + b] = mask[b * time + t];
        }
    }
    let mut width = d_embed;
    for layer in layers {
        let (outs, next_width) = run_layer(&input, &mask_tm, layer, time, batch, width);
        input = side_by_side(&outs, time * batch, next_width);
        width = next_width;
    }
    to_cpu(pool_max(&input, &mask, batch, time, width), [batch, width])
}

/// Every direction of a layer over time-major `input` (`width` features a row), in
/// parallel: each direction's hidden states `[time, batch, hidden]` with its `hidden`, and
/// their total width.
fn run_layer(
    input: &[f32],
    mask_tm: &[f32],
    layer: Vec<Direction<Cpu>>,
    time: usize,
    batch: usize,
    width: usize,
) -> (Vec<(Vec<f32>, usize)>, usize) {
    use rayon::prelude::*;
    let outs: Vec<(Vec<f32>, usize)> = layer
        .into_par_iter()
        .map(|dir| {
            let hidden = dir.w_hh.dims()[0];
            let d = Dims {
                time,
                batch,
                d_input: width,
                hidden,
            };
            let xw = project(
                input,
                &host(dir.w_ih),
                dir.bias.map(host).as_deref(),
                None,
                d,
            );
            let zeros = vec![0.0f32; batch * hidden];
            let states = hidden_states(
                &xw,
                &host(dir.w_hh),
                mask_tm,
                &zeros,
                &zeros,
                d,
                dir.reverse,
            );
            (states, hidden)
        })
        .collect();
    let total = outs.iter().map(|(_, h)| h).sum();
    (outs, total)
}

/// The directions' `[rows, hidden_i]` outputs side by side, `[rows, Σ hidden_i]` (the
/// concatenation on the last axis that the layer-by-layer path makes with `Tensor::cat`).
fn side_by_side(outs: &[(Vec<f32>, usize)], rows: usize, width: usize) -> Vec<f32> {
    if let [(only, _)] = outs {
        return only.clone();
    }
    let mut joined = vec![0.0f32; rows * width];
    for (r, dst) in joined.chunks_exact_mut(width).enumerate() {
        let mut at = 0;
        for (o, h) in outs {
            dst[at..at + h].copy_from_slice(&o[r * h..(r + 1) * h]);
            at += h;
        }
    }
    joined
}

/// The maximum over the real positions of time-major `states` (`[time, batch, width]`),
/// `mask: [batch, time]`: `fused::maxpool`'s rule (a column's running maximum starts at
/// position 0 when it is real and is replaced only by a strictly greater value; −∞ when
/// the sentence has no real position).
fn pool_max(states: &[f32], mask: &[f32], batch: usize, time: usize, width: usize) -> Vec<f32> {
    let mut y = vec![f32::NEG_INFINITY; batch * width];
    for (b, yb) in y.chunks_exact_mut(width).enumerate() {
        for t in (0..time).filter(|&t| mask[b * time + t] != 0.0) {
            let row = &states[(t * batch + b) * width..(t * batch + b + 1) * width];
            for (m, &v) in yb.iter_mut().zip(row) {
                if t == 0 || v > *m {
                    *m = v;
                }
            }
        }
    }
    y
}
