//! Token-id rows → the padded tensors every model takes: `[batch, time]` ids, right-padded
//! with `<pad>` (0), and a mask that is 1 at real tokens. Training batches and encoding use
//! the same function, so a sentence is encoded the same way in both.

use burn::tensor::backend::Backend;
use burn::tensor::{Int, Tensor, TensorData};
use harness_data::tokenize::ids;

/// Right-padded ids and their mask.
#[derive(Debug, Clone)]
pub struct Padded<B: Backend> {
    /// `[batch, time]` token ids (`<pad>` = 0 after the end).
    pub ids: Tensor<B, 2, Int>,
    /// `[batch, time]`, 1 at real tokens.
    pub mask: Tensor<B, 2>,
    /// Real tokens in the batch.
    pub tokens: usize,
}

/// Pads `rows` into tensors.
pub fn pad<B: Backend>(rows: &[Vec<u32>], device: &B::Device) -> Padded<B> {
    let width = rows.iter().map(Vec::len).max().unwrap_or(0).max(1);
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
    }
}
