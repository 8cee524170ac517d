//! Benchmarks: declarations (`benchmarks/*.yaml`), the Encoder trait, protocols and metrics.
pub mod cache;
pub mod classify;
pub mod embed;
pub mod encoder;
pub mod error;
pub mod hashed;
pub mod knn;
pub mod matrix;
pub mod metrics;
pub mod npy;
pub mod protocols;
pub mod registry;
pub mod runner;

pub use cache::{CacheStats, CachedEncoder};
pub use encoder::{open_encoder, Encoder};
pub use error::BenchError;
