//! Models on burn, generic over `B: Backend` (training runs them on `Autodiff<B>`), plus the
//! readers that turn pretrained files into their weights.

pub mod decoder;
pub mod encoder;
pub mod heads;
pub mod lstm;
pub mod random;
pub mod system;
pub mod trained;
