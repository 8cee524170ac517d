//! harness-model: models on burn, generic over `B: Backend` (training runs them on
//! `Autodiff<B>`), one file per component, plus the readers that turn pretrained files into
//! their weights. Pretrained encoders (`encoder/bert.rs` and the folder loaders beside it)
//! run inference only. Every encoder here implements [`harness_embed::Encoder`].
//! Uses: harness-core, harness-recipe (model specs), harness-data (tokenizers, model files),
//! harness-embed; never a benchmark.

pub mod attention_fused;
pub mod base_encoder;
pub mod bert_fused;
pub mod best_encoders;
pub mod decoder;
pub mod encoder;
pub mod error;
pub mod gather_fused;
pub mod gelu_fused;
pub mod gpu;
pub mod heads;
pub mod input;
pub mod layer_norm_fused;
pub mod limits;
pub mod linear_fused;
pub mod lstm;
#[cfg(any(feature = "wgpu", feature = "cuda"))]
mod lstm_cube;
pub mod lstm_fused;
pub mod maxpool_fused;
pub mod output_ce;
pub mod precision;
pub mod pretrained;
pub mod random;
pub mod relu_fused;
pub mod reshape_fused;
pub mod system;
pub mod tanh_fused;
#[doc(hidden)]
pub mod test_support;
pub mod trained;
pub mod unary_fused;

pub use error::ModelError;
