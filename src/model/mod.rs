//! Models: burn modules generic over `B: Backend`, one file per component. Pretrained
//! encoders (`encoder/bert.rs` and the folder loaders beside it) run inference only; the
//! trainable encoders and heads of the recipes join them here.

pub mod encoder;
pub mod error;
#[doc(hidden)]
pub mod test_support;

pub use error::ModelError;
