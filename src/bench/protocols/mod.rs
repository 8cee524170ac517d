//! Evaluation protocols, one file each. A protocol reads its benchmark's declaration
//! (`benchmarks/<name>.yaml`: dataset, split, languages, params), loads the installed
//! dataset through the loaders, embeds sentences through the [`Encoder`] it is given (already
//! wrapped in the embedding cache by the runner) and returns an [`Outcome`]. Every protocol
//! file starts with a comment naming its reference: the paper section, and the reference
//! implementation's file where one exists.

pub mod senteval;

use super::encoder::Encoder;
use super::error::BenchError;
use super::matrix::Matrix;
use super::registry::Benchmark;
use serde::de::DeserializeOwned;
use serde::Serialize;
use std::collections::BTreeMap;
use std::path::Path;

/// Everything a protocol needs.
pub struct Context<'a> {
    /// The benchmark's declaration.
    pub benchmark: &'a Benchmark,
    /// The installed dataset folder (`<data_dir>/<benchmark.dataset>`).
    pub dataset_dir: &'a Path,
    /// The encoder under test (cached).
    pub encoder: &'a dyn Encoder,
    /// Root of every random choice of this benchmark (folds, samples, initialisation).
    pub seed: u64,
}

impl Context<'_> {
    /// The declaration's `params`, typed. Use `#[serde(deny_unknown_fields)]` and
    /// `#[serde(default)]` on `T` so a misspelt parameter is an error naming the file.
    pub fn params<T: DeserializeOwned>(&self) -> Result<T, BenchError> {
        let map: serde_yaml::Mapping = self
            .benchmark
            .params
            .iter()
            .map(|(k, v)| (serde_yaml::Value::String(k.clone()), v.clone()))
            .collect();
        serde_yaml::from_value(serde_yaml::Value::Mapping(map)).map_err(|e| BenchError::Params {
            benchmark: self.benchmark.name.clone(),
            detail: e.to_string(),
        })
    }

    /// Embeds sentences: one row each, in order.
    pub fn embed<S: AsRef<str>>(&self, sentences: &[S]) -> Result<Matrix, BenchError> {
        let refs: Vec<&str> = sentences.iter().map(AsRef::as_ref).collect();
        self.encoder.encode(&refs)
    }

    /// An error of this benchmark.
    pub fn error(&self, detail: impl Into<String>) -> BenchError {
        BenchError::Protocol {
            benchmark: self.benchmark.name.clone(),
            detail: detail.into(),
        }
    }

    /// The languages to evaluate: the declaration's list, or `all` when it has none.
    pub fn languages_or(&self, all: Vec<String>) -> Vec<String> {
        if self.benchmark.languages.is_empty() {
            all
        } else {
            self.benchmark.languages.clone()
        }
    }
}

/// What a protocol measured.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Outcome {
    /// Name of the headline metric (`spearman`, `accuracy`, `error_rate`, `f1`, ...).
    pub main_metric: String,
    /// The headline number, on the scale the papers report (×100 for correlations and
    /// accuracies, % for error rates).
    pub main_score: f64,
    /// Every sub-score (per language, per subset, matrices...), as the report reads them.
    pub scores: serde_json::Value,
    /// The protocol parameters as used (after defaults), for the result file.
    pub params: serde_json::Value,
    /// Caveats a reader must know (stand-in data, missing training split...).
    pub notes: Vec<String>,
}

/// A protocol's entry point.
pub type Protocol = fn(&Context) -> Result<Outcome, BenchError>;

/// The protocol function registered under `name` (see [`super::registry::PROTOCOLS`]).
pub fn protocol(name: &str) -> Option<Protocol> {
    let table: BTreeMap<&str, Protocol> = BTreeMap::from([
        // Each protocol module registers itself here: ("name", module::run as Protocol).
        ("senteval-classification", senteval::run as Protocol),
    ]);
    table.get(name).copied()
}
