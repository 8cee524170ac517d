//! Benchmarks: declarations (`benchmarks/*.yaml`), the Encoder trait, protocols and metrics.
pub mod registry;
