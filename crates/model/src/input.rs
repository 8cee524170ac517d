//! Token rows → the padded tensors every model takes: `[batch, time]` ids, right-padded
//! with `<pad>` (0), and a mask that is 1 at real tokens; for a tokenizer with character
//! n-grams, also every token's n-gram ids ([`NgramBatch`]). Training batches and encoding
//! use the same functions, so a sentence is encoded the same way in both.

use burn::tensor::backend::Backend;
use burn::tensor::{Int, Tensor, TensorData};
use harness_data::tokenize::{ids, Tokens};

/// Right-padded ids and their mask.
#[derive(Debug, Clone)]
pub struct Padded<B: Backend> {
    /// `[batch, time]` token ids (`<pad>` = 0 after the end).
    pub ids: Tensor<B, 2, Int>,
    /// `[batch, time]`, 1 at real tokens.
    pub mask: Tensor<B, 2>,
    /// Real tokens in the batch.
    pub tokens: usize,
    /// The character n-grams of the tokens, from a tokenizer that gives them.
    pub ngrams: Option<NgramBatch<B>>,
}

/// The character n-grams of a batch, flat: n-gram `k` has id `ids[k]` and belongs to the
/// token at `positions[k]` = `row · time + t` of the `[batch, time]` grid.
#[derive(Debug, Clone)]
pub struct NgramBatch<B: Backend> {
    /// `[n]` n-gram ids (empty when no token of the batch has any).
    pub ids: Tensor<B, 1, Int>,
    /// `[n]` flat token positions.
    pub positions: Tensor<B, 1, Int>,
    /// `n`.
    pub count: usize,
}

/// Pads `rows` of ids into tensors (no n-grams), as wide as the longest.
pub fn pad<B: Backend>(rows: &[Vec<u32>], device: &B::Device) -> Padded<B> {
    pad_to(rows, 0, device)
}

/// Pads `rows` of ids into tensors `width` wide (at least the longest row).
pub fn pad_to<B: Backend>(rows: &[Vec<u32>], width: usize, device: &B::Device) -> Padded<B> {
    let width = width
        .max(rows.iter().map(Vec::len).max().unwrap_or(0))
        .max(1);
    let mut idv = Vec::with_capacity(rows.len() * width);
    let mut maskv = Vec::with_capacity(rows.len() * width);
    for r in rows {
        for t in 0..width {
            idv.push(r.get(t).map_or(ids::PAD as i64, |&x| x as i64));
            maskv.push(if t < r.len() { 1f32 } else { 0.0 });
        }
    }
    Padded {
        ids: Tensor::from_data(TensorData::new(idv, [rows.len(), width]), device),
        mask: Tensor::from_data(TensorData::new(maskv, [rows.len(), width]), device),
        tokens: rows.iter().map(Vec::len).sum(),
        ngrams: None,
    }
}

/// Pads token rows into tensors, their n-grams included when the rows have them, as wide
/// as the longest.
pub fn pad_tokens<B: Backend>(rows: &[Tokens], device: &B::Device) -> Padded<B> {
    pad_tokens_to(rows, 0, device)
}

/// [`pad_tokens`] `width` wide (at least the longest row).
pub fn pad_tokens_to<B: Backend>(rows: &[Tokens], width: usize, device: &B::Device) -> Padded<B> {
    let ids: Vec<Vec<u32>> = rows.iter().map(|r| r.ids.clone()).collect();
    let mut padded = pad_to::<B>(&ids, width, device);
    if rows.iter().any(|r| r.ngrams.is_some()) {
        let [_, width] = padded.ids.dims();
        let mut gram_ids: Vec<i64> = Vec::new();
        let mut positions: Vec<i64> = Vec::new();
        for (row, r) in rows.iter().enumerate() {
            for t in 0..r.ids.len() {
                for &g in r.ngrams_of(t) {
                    gram_ids.push(g as i64);
                    positions.push((row * width + t) as i64);
                }
            }
        }
        let count = gram_ids.len();
        padded.ngrams = Some(NgramBatch {
            ids: Tensor::from_data(TensorData::new(gram_ids, [count]), device),
            positions: Tensor::from_data(TensorData::new(positions, [count]), device),
            count,
        });
    }
    padded
}
