//! Benchmarks: declarations (`benchmarks/*.yaml`), the Encoder trait, protocols and metrics.
pub mod classify;
pub mod matrix;
