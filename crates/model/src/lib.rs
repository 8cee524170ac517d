//! harness-model: models on burn, generic over `B: Backend` (training runs them on
//! `Autodiff<B>`), one file per component, plus the readers that turn pretrained files into
//! their weights. Pretrained encoders (`encoder/bert.rs` and the folder loaders beside it)
//! run inference only. Every encoder here implements [`harness_embed::Encoder`].
//! Uses: harness-core, harness-recipe (model specs), harness-data (tokenizers, model files),
//! harness-embed; never a benchmark.

pub mod base_encoder;
pub mod best_encoders;
pub mod cpu;
pub mod decoder;
pub mod encoder;
pub mod error;
pub mod fused;
pub mod gpu;
pub mod heads;
pub mod input;
pub mod limits;
pub mod lstm;
pub mod output_ce;
pub mod precision;
pub mod pretrained;
pub mod random;
pub mod system;
#[doc(hidden)]
pub mod test_support;
pub mod trained;

pub use error::ModelError;
