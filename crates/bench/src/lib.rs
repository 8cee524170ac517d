//! harness-bench: the benchmarks. Declarations as data (`benchmarks/*.yaml`: one
//! [`benchmark::Benchmark`] each, collected by the [`registry`]), one file per protocol
//! ([`protocols`], each naming its reference implementation, all listed in
//! [`protocols::ALL`]), the classifiers ([`classify`]), kNN and metrics, and the [`runner`]
//! that evaluates an encoder and writes one result file per benchmark. It also supplies the names a recipe may refer
//! to ([`known`]) and loads recipes against them ([`load_recipe`]).
//! Uses: harness-core, harness-recipe, harness-data, harness-embed (never a model: any
//! [`harness_embed::Encoder`] is measured the same way).

pub mod benchmark;
pub mod classify;
pub mod error;
pub mod items;
pub mod knn;
pub mod metrics;
pub mod protocols;
pub mod registry;
pub mod results_folder;
pub mod runner;
pub mod timing;

pub use error::BenchError;

use harness_recipe::{Known, RecipeError};

/// The names a recipe may refer to in this build: the datasets of `datasets.lock`, the
/// benchmarks, groups and report tables of `benchmarks/`, and the benchmarks' parameters
/// (for `evaluate:` overrides).
pub fn known() -> Result<Known, RecipeError> {
    let lock =
        harness_data::lock::Lock::embedded().map_err(|e| RecipeError::Setup(e.to_string()))?;
    let reg = registry::Registry::load().map_err(|e| RecipeError::Setup(e.to_string()))?;
    Ok(Known {
        datasets: lock.names().into_iter().map(String::from).collect(),
        benchmarks: reg.names().into_iter().map(String::from).collect(),
        groups: reg.group_names().into_iter().map(String::from).collect(),
        tables: reg.tables().to_vec(),
        check_bench: Some(registry::check_overrides),
        check_trainable: None,
        objectives: Vec::new(),
    })
}
