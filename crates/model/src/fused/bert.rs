//! BERT's forward pass (HF transformers' `modeling_bert.py`: `BertEmbeddings`, then per layer
//! `BertSelfAttention`, `BertSelfOutput`, `BertIntermediate`, `BertOutput`) for inference on
//! burn's CPU backend, in host memory from the token ids to the last hidden state:
//!
//! ```text
//! x = LayerNorm(word[id] + type[0] + position[t])                    rows: batch·seq tokens
//! per layer:
//!     q, k, v = x·W_q + b_q,  x·W_k + b_k,  x·W_v + b_v              GEMMs, bias in the output
//!     per sentence, head, query i:   s_ij = q_i·k_j / √d_head
//!         e_ij = exp(s_ij − max_j s_ij)                   j over real keys only
//!         c_i  = (Σ_j e_ij v_j) / Σ_j e_ij                            (deferred normalisation)
//!     a = LayerNorm(c·W_o + b_o + x)
//!     x = LayerNorm(gelu(a·W_i + b_i)·W_2 + b_2 + a)
//! ```
//!
//! which is [`Bert::forward_generic`] (burn's tensor ops: the path every other backend and
//! autodiff take) up to float rounding; the tests below compare the two.
//!
//! Why: profiled on all-MiniLM-L6-v2 (STS-B, batches of 32, 2 threads), the generic path
//! spent 37 % of its time outside the GEMM micro-kernel and its packing: copies of permuted
//! views for burn's 4-D attention matmuls, `cat` and `slice` (`memmove` 7 %), the GELU loop
//! and burn's `exp` (10 %), element-wise maps and broadcasts through ndarray (~10 %). Here
//! every Linear is one [`gemm_w`] over all tokens with the bias already in the output, the
//! attention reads each head's 32-float slices in place, GELU is vectorised
//! ([`harness_kernels::gelu`]) and LayerNorm adds the residual in the same pass
//! ([`layer_norm_rows`]).
//!
//! A sentence gets the same bits whatever batch it is encoded in (the property documented at
//! [`crate::encoder::bert::scaled_dot_product_attention`]): every step is a function of the
//! token's own row (the GEMMs accumulate each output over `k` in a fixed order, whatever
//! the number of rows), and the attention sums over the real keys in order, leaving padded
//! ones out (the generic path adds their weights, exact zeros).
//!
//! Inference only, and only on plain `NdArray<f32>`: under `Autodiff` (fine-tuning) the
//! generic path runs, whose gradients burn provides. [`host_forward`] declines (`None`) on any
//! other backend and on inputs the generic path handles differently: a mask value other
//! than 0 or 1, a sentence with no real token, an id outside the vocabulary, a word table in
//! blocks.

use crate::encoder::bert::{Bert, HiddenAct};
use crate::fused::layer_norm::layer_norm_rows;
use crate::fused::lstm::host_values;
use burn::backend::ndarray::NdArrayTensor;
use burn::backend::NdArray;
use burn::module::Param;
use burn::nn::{LayerNorm, Linear};
use burn::tensor::backend::Backend;
use burn::tensor::{Int, Tensor, TensorData};
use harness_kernels::{axpy, dot, gemm_w};
use rayon::prelude::*;
use std::any::Any;
use std::borrow::Cow;

type Cpu = NdArray<f32>;

/// Elements per rayon task of the element-wise GELU.
const GELU_CHUNK: usize = 1 << 16;

// `Bert::forward` stands here, beside the path it prefers, so that the model's own file
// (`encoder/bert.rs`) need not know this one: this file reads the model, never the reverse.
impl<B: Backend> Bert<B> {
    /// The last hidden state, `[batch, seq, hidden]`, of a padded batch: `input_ids`
    /// `[batch, seq]`, `attention_mask` `[batch, seq]` (1 real token, 0 padding). Rows of
    /// padded positions are computed but meaningless; [`crate::encoder::bert::mean_pool`]
    /// leaves them out.
    ///
    /// `seq` must not exceed `max_position_embeddings` and every id must be below
    /// `vocab_size`; [`crate::encoder::bert::BertBatch::new`] checks both.
    ///
    /// On burn's plain CPU backend (`NdArray<f32>`, not its autodiff) this runs the fused
    /// host path of this module; everywhere else, [`Bert::forward_generic`]. The
    /// two agree up to float rounding.
    pub fn forward(
        &self,
        input_ids: Tensor<B, 2, Int>,
        attention_mask: Tensor<B, 2>,
    ) -> Tensor<B, 3> {
        if let Some(hidden) = host_forward(self, &input_ids, &attention_mask) {
            return hidden;
        }
        if crate::fused::attention::supported::<B>() {
            if let Some(hidden) = self.forward_fused_ops(input_ids.clone(), &attention_mask) {
                return hidden;
            }
        }
        self.forward_generic(input_ids, attention_mask)
    }
}

/// The last hidden state `[batch, seq, hidden]` of [`Bert::forward`], computed as the module
/// documentation says, where `B` is burn's plain CPU backend and the input is one the generic
/// path treats the same way; `None` otherwise (the caller runs the generic path).
fn host_forward<B: Backend>(
    bert: &Bert<B>,
    input_ids: &Tensor<B, 2, Int>,
    attention_mask: &Tensor<B, 2>,
) -> Option<Tensor<B, 3>> {
    let bert = (bert as &dyn Any).downcast_ref::<Bert<Cpu>>()?;
    let ids = (input_ids as &dyn Any).downcast_ref::<Tensor<Cpu, 2, Int>>()?;
    let mask = (attention_mask as &dyn Any).downcast_ref::<Tensor<Cpu, 2>>()?;
    let out: Box<dyn Any> = Box::new(cpu_forward(bert, ids, mask)?);
    out.downcast::<Tensor<B, 3>>().ok().map(|t| *t)
}

/// A primitive's values: borrowed in place when contiguous (loaded weights always are),
/// else a copy.
fn slice(p: &NdArrayTensor) -> Cow<'_, [f32]> {
    if let NdArrayTensor::F32(storage) = p {
        if let Some(values) = storage.view().to_slice() {
            return Cow::Borrowed(values);
        }
    }
    Cow::Owned(host_values(p))
}

fn primitive<const D: usize>(p: &Param<Tensor<Cpu, D>>) -> NdArrayTensor {
    p.val().into_primitive().tensor()
}

fn cpu_forward(
    bert: &Bert<Cpu>,
    ids: &Tensor<Cpu, 2, Int>,
    mask: &Tensor<Cpu, 2>,
) -> Option<Tensor<Cpu, 3>> {
    let [batch, seq] = ids.dims();
    if mask.dims() != [batch, seq] || batch * seq == 0 {
        return None;
    }
    let ids: Vec<i64> = ids.clone().into_data().convert::<i64>().into_vec().ok()?;
    let mask = host_values(&mask.clone().into_primitive().tensor());
    // The generic path gives a row without real tokens uniform attention, and a fractional
    // mask value a fractional bias; both are left to it.
    let binary = mask.iter().all(|&m| m == 0.0 || m == 1.0);
    if !binary
        || mask
            .chunks_exact(seq)
            .any(|row| row.iter().all(|&m| m == 0.0))
    {
        return None;
    }
    let keys: Vec<bool> = mask.iter().map(|&m| m == 1.0).collect();
    let eps = bert.layer_norm_eps as f32;
    let mut x = embeddings(bert, &ids, seq, eps)?;
    let hidden = bert.hidden_size;
    let rows = batch * seq;
    for layer in &bert.encoder.layer {
        let sa = &layer.attention.self_attention;
        let heads = sa.num_attention_heads;
        if heads == 0 || heads * sa.attention_head_size != hidden {
            return None;
        }
        let q = linear(&sa.query, &x, rows)?;
        let k = linear(&sa.key, &x, rows)?;
        let v = linear(&sa.value, &x, rows)?;
        let shape = Shape {
            batch,
            seq,
            heads,
            hidden,
        };
        let context = attention(&q, &k, &v, &keys, shape);
        drop((q, k, v));
        let mut attended = linear(&layer.attention.output.dense, &context, rows)?;
        norm(
            &layer.attention.output.layer_norm,
            &mut attended,
            Some(&x),
            hidden,
            eps,
        )?;
        let mut inner = linear(&layer.intermediate.dense, &attended, rows)?;
        activation(layer.intermediate.act, &mut inner, rows)?;
        let mut out = linear(&layer.output.dense, &inner, rows)?;
        drop(inner);
        norm(
            &layer.output.layer_norm,
            &mut out,
            Some(&attended),
            hidden,
            eps,
        )?;
        x = out;
    }
    Some(Tensor::from_data(
        TensorData::new(x, [batch, seq, hidden]),
        &Default::default(),
    ))
}

/// `LayerNorm(word[id] + type[0] + position[t])` for every token, summed in HF's order
/// (words + types, then + positions).
fn embeddings(bert: &Bert<Cpu>, ids: &[i64], seq: usize, eps: f32) -> Option<Vec<f32>> {
    let e = &bert.embeddings;
    if !e.word_blocks.is_empty() {
        return None;
    }
    let h = bert.hidden_size;
    let [vocab, wh] = e.word_embeddings.weight.dims();
    let [positions, ph] = e.position_embeddings.weight.dims();
    let [types, th] = e.token_type_embeddings.weight.dims();
    if [wh, ph, th] != [h; 3] || positions < seq || types == 0 {
        return None;
    }
    if ids.iter().any(|&id| id < 0 || id as usize >= vocab) {
        return None;
    }
    let (words, position, kind) = (
        primitive(&e.word_embeddings.weight),
        primitive(&e.position_embeddings.weight),
        primitive(&e.token_type_embeddings.weight),
    );
    let (words, position, kind) = (slice(&words), slice(&position), slice(&kind));
    let kind = &kind[..h];
    let mut x = vec![0.0f32; ids.len() * h];
    for (r, (row, &id)) in x.chunks_exact_mut(h).zip(ids).enumerate() {
        let word = &words[id as usize * h..(id as usize + 1) * h];
        let pos = &position[(r % seq) * h..(r % seq + 1) * h];
        for (((o, w), t), p) in row.iter_mut().zip(word).zip(kind).zip(pos) {
            *o = (w + t) + p;
        }
    }
    norm(&e.layer_norm, &mut x, None, h, eps)?;
    Some(x)
}

/// `x·W + b` over `rows` rows: one product ([`gemm_w`]: the weights packed a tile at a time,
/// the rows read in place) added to an output that starts as the bias, so the bias costs no
/// extra pass. `None` when `x` does not have `rows × d_in` values.
fn linear(layer: &Linear<Cpu>, x: &[f32], rows: usize) -> Option<Vec<f32>> {
    let [d_in, d_out] = layer.weight.dims();
    if x.len() != rows * d_in {
        return None;
    }
    let w = primitive(&layer.weight);
    let mut y = match &layer.bias {
        Some(b) => {
            let b = primitive(b);
            let b = slice(&b);
            if b.len() != d_out {
                return None;
            }
            let mut y = Vec::with_capacity(rows * d_out);
            for _ in 0..rows {
                y.extend_from_slice(&b);
            }
            y
        }
        None => vec![0.0f32; rows * d_out],
    };
    gemm_w(rows, d_out, d_in, x, &slice(&w), false, &mut y);
    Some(y)
}

/// `x ← LayerNorm(x + residual)` row by row with `layer`'s γ and β.
fn norm(
    layer: &LayerNorm<Cpu>,
    x: &mut [f32],
    residual: Option<&[f32]>,
    d: usize,
    eps: f32,
) -> Option<()> {
    let gamma = primitive(&layer.gamma);
    let beta = layer.beta.as_ref().map(primitive);
    let (gamma, beta) = (slice(&gamma), beta.as_ref().map(slice));
    let fits = gamma.len() == d && beta.as_ref().is_none_or(|b| b.len() == d);
    if !fits || residual.is_some_and(|r| r.len() != x.len()) {
        return None;
    }
    layer_norm_rows(x, residual, &gamma, beta.as_deref(), d, eps);
    Some(())
}

/// The feed-forward activation in place: the exact GELU vectorised; the others through
/// [`HiddenAct::forward`] (burn's ops), which is what the generic path runs.
fn activation(act: HiddenAct, x: &mut Vec<f32>, rows: usize) -> Option<()> {
    match act {
        HiddenAct::Gelu => {
            x.par_chunks_mut(GELU_CHUNK).for_each(harness_kernels::gelu);
        }
        other => {
            let cols = x.len() / rows.max(1);
            let t = Tensor::<Cpu, 2>::from_data(
                TensorData::new(std::mem::take(x), [rows, cols]),
                &Default::default(),
            );
            *x = host_values(&other.forward(t).into_primitive().tensor());
        }
    }
    Some(())
}

/// Sizes of one attention.
#[derive(Debug, Clone, Copy)]
struct Shape {
    batch: usize,
    seq: usize,
    heads: usize,
    hidden: usize,
}

/// The heads' contexts, concatenated (`[batch·seq, hidden]`), of queries, keys and values
/// `q`, `k`, `v` (`[batch·seq, hidden]`, head `h` in columns `h·d_head..`), `keys` telling
/// the real tokens. Sentences in parallel.
///
/// Scores are dot products of each head's `d_head` contiguous values, read in place (no
/// transposed copies; at sentence lengths of 10–60 tokens the products are too small for a
/// GEMM's packing to pay). Each query's scores are a function of its row and the keys' rows
/// only, and both sums over keys (the numerators and the denominator) run over the real keys
/// in key order, padded ones left out: a row's bits do not depend on the padded length.
fn attention(q: &[f32], k: &[f32], v: &[f32], keys: &[bool], s: Shape) -> Vec<f32> {
    let (seq, hidden) = (s.seq, s.hidden);
    let dh = hidden / s.heads;
    // The generic path divides by √d_head computed in f64 and applied as an f32 scalar.
    let scale = (dh as f64).sqrt() as f32;
    let mut context = vec![0.0f32; s.batch * seq * hidden];
    context
        .par_chunks_mut(seq * hidden)
        .enumerate()
        .for_each(|(b, context)| {
            let rows = b * seq..(b + 1) * seq;
            let (q, k, v) = (
                &q[rows.start * hidden..rows.end * hidden],
                &k[rows.start * hidden..rows.end * hidden],
                &v[rows.start * hidden..rows.end * hidden],
            );
            let keys = &keys[rows];
            let mut e = vec![0.0f32; seq * seq];
            for h in 0..s.heads {
                let col = h * dh;
                for (i, row) in e.chunks_exact_mut(seq).enumerate() {
                    let qi = rows_at(q, i * hidden + col, dh);
                    let mut max = f32::NEG_INFINITY;
                    for (j, x) in row.iter_mut().enumerate() {
                        if keys[j] {
                            *x = dot(qi, rows_at(k, j * hidden + col, dh)) / scale;
                            max = max.max(*x);
                        }
                    }
                    for (x, &real) in row.iter_mut().zip(keys) {
                        *x = if real { *x - max } else { 0.0 };
                    }
                }
                harness_kernels::exp(&mut e);
                for (i, row) in e.chunks_exact(seq).enumerate() {
                    let out = &mut context[i * hidden + col..i * hidden + col + dh];
                    let mut sum = 0.0f32;
                    for (j, (&w, &real)) in row.iter().zip(keys).enumerate() {
                        if real {
                            sum += w;
                            axpy(w, rows_at(v, j * hidden + col, dh), out);
                        }
                    }
                    for o in out.iter_mut() {
                        *o /= sum;
                    }
                }
            }
        });
    context
}

/// `m[at..at + len]`: one head's values of one token.
#[inline(always)]
fn rows_at(m: &[f32], at: usize, len: usize) -> &[f32] {
    &m[at..at + len]
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::encoder::bert::tests::{sentences, tiny_config, values, wider_config, B};
    use crate::encoder::bert::BertBatch;

    #[test]
    fn the_cpu_path_equals_the_generic_path() {
        let device = Default::default();
        for config in [
            tiny_config(),
            wider_config(HiddenAct::Gelu),
            wider_config(HiddenAct::GeluTanh),
            wider_config(HiddenAct::Relu),
        ] {
            let model = config.init::<B>(&device);
            let longest = config.max_position_embeddings.min(31);
            let batch = BertBatch::new(&model, &sentences(40, 12, longest), &device).unwrap();
            let (ids, mask) = (batch.input_ids.clone(), batch.attention_mask.clone());
            let fused =
                host_forward(&model, &ids, &mask).expect("the CPU path serves NdArray<f32>");
            let generic = model.forward_generic(ids.clone(), mask.clone());
            let [b, t, h] = fused.dims();
            assert_eq!([b, t, h], generic.dims());
            // Every position, padded ones included (both paths compute them the same way).
            let (f, g) = (
                values(fused.reshape([b * t, h])),
                values(generic.reshape([b * t, h])),
            );
            let worst = f
                .iter()
                .zip(&g)
                .map(|(x, y)| (x - y).abs())
                .fold(0.0f32, f32::max);
            eprintln!(
                "{:?}, hidden {}: max |fused − generic| = {worst:e}",
                config.hidden_act, config.hidden_size
            );
            assert!(
                worst <= 1e-5,
                "{:?}: max |fused − generic| = {worst:e}",
                config.hidden_act
            );
            // Not vacuous: the hidden states are LayerNorm outputs of unit scale.
            assert!(g.iter().map(|x| x.abs()).fold(0.0f32, f32::max) > 0.5);
            // `forward` takes the CPU path on this backend.
            assert_eq!(values(model.forward(ids, mask).reshape([b * t, h])), f);
        }
    }

    #[test]
    fn the_cpu_path_declines_what_the_generic_path_treats_differently() {
        let device = Default::default();
        let model = tiny_config().init::<B>(&device);
        let ids =
            Tensor::<B, 2, Int>::from_data(TensorData::new(vec![1i64, 2, 3, 4], [2, 2]), &device);
        let mask = |m: Vec<f32>| Tensor::<B, 2>::from_data(TensorData::new(m, [2, 2]), &device);
        let run = |m| host_forward(&model, &ids, &mask(m));
        assert!(run(vec![1.0, 1.0, 1.0, 0.0]).is_some());
        // A sentence without a real token, a fractional mask value.
        assert!(run(vec![1.0, 1.0, 0.0, 0.0]).is_none());
        assert!(run(vec![1.0, 0.5, 1.0, 1.0]).is_none());
        // An id outside the vocabulary.
        let bad =
            Tensor::<B, 2, Int>::from_data(TensorData::new(vec![1i64, 50, 3, 4], [2, 2]), &device);
        assert!(host_forward(&model, &bad, &mask(vec![1.0; 4])).is_none());
        // Autodiff (fine-tuning) is not served here: `Bert::forward_fused_ops` serves it.
        type Ad = burn::backend::Autodiff<B>;
        let trainable = tiny_config().init::<Ad>(&device);
        let ids = Tensor::<Ad, 2, Int>::from_data(TensorData::new(vec![1i64, 2], [1, 2]), &device);
        let ones = Tensor::<Ad, 2>::ones([1, 2], &device);
        assert!(host_forward(&trainable, &ids, &ones).is_none());
    }
}
