//! Models on burn, generic over `B: Backend` (training runs them on `Autodiff<B>`), one file
//! per component, plus the readers that turn pretrained files into their weights. Pretrained
//! encoders (`encoder/bert.rs` and the folder loaders beside it) run inference only.

pub mod decoder;
pub mod encoder;
pub mod error;
pub mod heads;
pub mod lstm;
pub mod random;
pub mod system;
#[doc(hidden)]
pub mod test_support;
pub mod trained;

pub use error::ModelError;
