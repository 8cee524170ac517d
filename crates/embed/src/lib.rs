//! harness-embed: sentence embeddings as benchmarks and models share them. It owns the
//! [`Encoder`] trait and the sentence [`Matrix`] (the one currency between encoders and
//! benchmarks), the embedding cache, and the two encoders that need no model: hashed
//! n-grams and precomputed `npy:` files. It sits below both `harness-model` (whose models
//! implement the trait) and `harness-bench` (whose protocols call it), so neither has to
//! rebuild when the other changes. Uses: harness-core, harness-data.

pub mod cache;
pub mod encoder;
pub mod error;
pub mod hashed;
pub mod matrix;
pub mod npy;

pub use cache::{CacheStats, CachedEncoder};
pub use encoder::{read_sentences, split_lines, Encoder};
pub use error::EncodeError;
pub use matrix::Matrix;
