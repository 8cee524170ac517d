//! What every sentence encoder hands back.

use burn::tensor::backend::Backend;
use burn::tensor::Tensor;

/// What an encoder gives its callers.
#[derive(Debug, Clone)]
pub struct Encoded<B: Backend> {
    /// The sentence vectors `[batch, d_sentence]`.
    pub sentence: Tensor<B, 2>,
    /// Top-layer states `[batch, time, d_states]` (zero at padded positions).
    pub states: Tensor<B, 3>,
    /// `[batch, time]`, 1 at real tokens.
    pub mask: Tensor<B, 2>,
}
