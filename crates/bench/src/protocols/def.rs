//! What a protocol is: its definition ([`ProtocolDef`], one `DEF` per protocol file), what it
//! is given ([`Context`]) and what it returns ([`Outcome`]), with the helpers every protocol
//! shares (typed parameters, random streams). The protocol files depend on this file and on
//! the declaration type alone; the list of them ([`super::ALL`]) sits above, so nothing here
//! ever names a particular protocol.

use crate::benchmark::Benchmark;
use crate::error::BenchError;
use harness_embed::matrix::Matrix;
use harness_embed::Encoder;
use schemars::JsonSchema;
use serde::de::DeserializeOwned;
use serde::Serialize;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// One evaluation protocol, defined once in its own file (`pub const DEF`) and listed in
/// [`super::ALL`]; the registry's accepted names, the parameter checks, the runner's dispatch
/// and the datasets installed before a run all read it from there.
#[derive(Debug, Clone, Copy)]
pub struct ProtocolDef {
    /// The name a declaration's `protocol:` gives (`xnli-zero-shot`).
    pub name: &'static str,
    /// Whether a declaration's `params` (after any overrides) parse as this protocol's; the
    /// serde message otherwise, naming the offending key in backquotes. Usually
    /// [`parses_as`]`::<Params>`.
    pub check_params: fn(&Benchmark) -> Result<(), String>,
    /// Every dataset a declaration reads besides its own `dataset:` (XNLI's English NLI
    /// training sets), as its parameters determine them: the runner installs and verifies
    /// them before [`ProtocolDef::run`] starts. Usually [`no_side_datasets`].
    pub side_datasets: fn(&Benchmark) -> Result<Vec<String>, BenchError>,
    /// Measures the encoder of the [`Context`] on the declared benchmark.
    pub run: fn(&Context) -> Result<Outcome, BenchError>,
    /// The protocol's typed scores (the struct [`Context::scores`] writes into
    /// [`Outcome::scores`]): [`ScoresDef::of`]`::<Scores>()`.
    pub scores: ScoresDef,
}

/// What the rest of harness knows of a protocol's typed scores without naming the type.
#[derive(Debug, Clone, Copy)]
pub struct ScoresDef {
    /// The struct's JSON Schema: table specs' and grids' field paths are checked against it
    /// ([`super::fields`]).
    pub schema: fn() -> serde_json::Value,
    /// The JSON read as the struct and written again: equal to the input exactly when the
    /// struct holds every field the JSON has (each protocol's tests check their outcomes).
    pub reread: fn(&serde_json::Value) -> Result<serde_json::Value, String>,
}

impl ScoresDef {
    /// The [`ScoresDef`] of a protocol whose scores are `S`.
    pub const fn of<S: JsonSchema + Serialize + DeserializeOwned>() -> Self {
        ScoresDef {
            schema: || schemars::schema_for!(S).to_value(),
            reread: |v| {
                let typed = S::deserialize(v).map_err(|e| e.to_string())?;
                serde_json::to_value(typed).map_err(|e| e.to_string())
            },
        }
    }
}

/// A score that may be undefined (a correlation of constant vectors, a mean over nothing):
/// `None` for NaN and infinities. serde_json writes a non-finite float as `null` anyway; the
/// typed struct says so, and reads the `null` back.
pub fn finite(x: f64) -> Option<f64> {
    Some(x).filter(|v| v.is_finite())
}

/// A protocol's scores read back from a result file's `scores` as its typed struct `S`;
/// the message names the benchmark and says what to do when the file predates the struct.
pub fn read_scores<S: DeserializeOwned>(
    benchmark: &str,
    protocol: &str,
    scores: &serde_json::Value,
) -> Result<S, String> {
    S::deserialize(scores).map_err(|e| {
        format!(
            "the scores of benchmark `{benchmark}` do not read as protocol `{protocol}`'s: {e} \
             (a result file of another harness version: run the benchmark again)"
        )
    })
}

/// A protocol's parameters: parsed from the declaration by serde, then held to the rules
/// serde cannot state (ranges, combinations, the declaration's languages). `harness
/// validate` applies both through [`parses_as`] and the protocol through
/// [`Context::params`]: one rule, one message, refused before any benchmark runs.
pub trait CheckedParams: DeserializeOwned {
    /// The rules past parsing; the message names the key (`params.k must be at least 1`).
    fn check(&self, benchmark: &Benchmark) -> Result<(), String> {
        let _ = benchmark;
        Ok(())
    }
}

/// Each declared language pair is `src-tgt`.
pub fn pairs_well_formed(benchmark: &Benchmark) -> Result<(), String> {
    match benchmark
        .languages
        .iter()
        .find(|p| !matches!(p.split_once('-'), Some((a, b)) if !a.is_empty() && !b.is_empty()))
    {
        Some(p) => Err(format!("`{p}` is not a `src-tgt` language pair")),
        None => Ok(()),
    }
}

/// [`ProtocolDef::check_params`] of a protocol whose parameters are `P`.
pub fn parses_as<P: CheckedParams>(benchmark: &Benchmark) -> Result<(), String> {
    match params_of::<P>(benchmark) {
        Ok(_) => Ok(()),
        Err(BenchError::Params { detail, .. }) => Err(detail),
        Err(e) => Err(e.to_string()),
    }
}

/// [`ProtocolDef::side_datasets`] of a protocol that reads its own dataset only.
pub fn no_side_datasets(_: &Benchmark) -> Result<Vec<String>, BenchError> {
    Ok(Vec::new())
}

/// Everything a protocol needs.
pub struct Context<'a> {
    /// The benchmark's declaration.
    pub benchmark: &'a Benchmark,
    /// The installed dataset folder (`<data_dir>/<benchmark.dataset>`).
    pub dataset_dir: &'a Path,
    /// The other datasets the protocol reads ([`ProtocolDef::side_datasets`]), installed and
    /// verified by the runner: name → folder. A protocol reaches them only through
    /// [`Context::side_dataset`], never by building a path.
    pub side: &'a BTreeMap<String, PathBuf>,
    /// The encoder under test (cached).
    pub encoder: &'a dyn Encoder,
    /// Root of every random choice of this benchmark (folds, samples, initialisation).
    pub seed: u64,
}

impl Context<'_> {
    /// The declaration's `params`, typed. Use `#[serde(deny_unknown_fields)]` and
    /// `#[serde(default)]` on `T` so a misspelt parameter is an error naming the file.
    pub fn params<T: CheckedParams>(&self) -> Result<T, BenchError> {
        params_of(self.benchmark)
    }

    /// The folder of `name`, one of the side datasets the benchmark declares
    /// ([`ProtocolDef::side_datasets`]). Any other name is an error: the runner installs and
    /// verifies exactly the declared datasets before the protocol starts.
    pub fn side_dataset(&self, name: &str) -> Result<&Path, BenchError> {
        self.side.get(name).map(PathBuf::as_path).ok_or_else(|| {
            self.error(format!(
                "the protocol reads dataset `{name}`, which `side_datasets` does not declare for \
                 this benchmark, so it was not installed and verified before the run (a bug in \
                 harness: declare it in the `side_datasets` of protocol `{}`'s `DEF`)",
                self.benchmark.protocol
            ))
        })
    }

    /// Embeds sentences: one row each, in order.
    pub fn embed<S: AsRef<str>>(&self, sentences: &[S]) -> Result<Matrix, BenchError> {
        let refs: Vec<&str> = sentences.iter().map(AsRef::as_ref).collect();
        Ok(self.encoder.encode(&refs)?)
    }

    /// Embeds sentences of `language` through the encoder that reads it
    /// ([`Encoder::for_language`]: a run that keeps an encoder per language), else as
    /// [`Self::embed`].
    pub fn embed_in<S: AsRef<str>>(
        &self,
        language: &str,
        sentences: &[S],
    ) -> Result<Matrix, BenchError> {
        match self.encoder.for_language(language) {
            Some(own) => {
                let refs: Vec<&str> = sentences.iter().map(AsRef::as_ref).collect();
                Ok(own.encode(&refs)?)
            }
            None => self.embed(sentences),
        }
    }

    /// Whether `language` is read by an encoder of its own ([`Self::embed_in`]).
    pub fn has_own_encoder(&self, language: &str) -> bool {
        self.encoder.for_language(language).is_some()
    }

    /// The protocol's typed scores as the JSON of [`Outcome::scores`].
    pub fn scores<S: Serialize>(&self, scores: &S) -> Result<serde_json::Value, BenchError> {
        serde_json::to_value(scores).map_err(|e| self.error(format!("scores: {e}")))
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

/// A declaration's `params`, typed as `T` and checked ([`CheckedParams::check`]).
pub fn params_of<T: CheckedParams>(benchmark: &Benchmark) -> Result<T, BenchError> {
    let map: serde_yaml::Mapping = benchmark
        .params
        .iter()
        .map(|(k, v)| (serde_yaml::Value::String(k.clone()), v.clone()))
        .collect();
    let bad = |detail: String| BenchError::Params {
        benchmark: benchmark.name.clone(),
        detail,
    };
    let params: T =
        serde_yaml::from_value(serde_yaml::Value::Mapping(map)).map_err(|e| bad(e.to_string()))?;
    params.check(benchmark).map_err(bad)?;
    Ok(params)
}

/// What a protocol measured.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Outcome {
    /// Name of the headline metric (`spearman`, `accuracy`, `error_rate`, `f1`, ...).
    pub main_metric: String,
    /// The headline number, on the scale the papers report (×100 for correlations and
    /// accuracies, % for error rates).
    pub main_score: f64,
    /// Every sub-score (per language, per subset, matrices...): the protocol's typed scores
    /// struct as JSON ([`Context::scores`]), as the report reads them.
    pub scores: serde_json::Value,
    /// The protocol parameters as used (after defaults), for the result file.
    pub params: serde_json::Value,
    /// Caveats a reader must know (stand-in data, missing training split...).
    pub notes: Vec<String>,
    /// Per-item outcomes for paired comparisons ([`crate::items`]); `None` for a protocol
    /// whose headline is no function of per-item outcomes (its notes say so).
    #[serde(skip)]
    pub items: Option<crate::items::Items>,
}

/// The random stream of one named part of a benchmark (a language pair, a direction): the
/// 64-bit FNV-1a hash of `label`. With [`crate::classify::mlp::seeded_rng`]`(ctx.seed,
/// stream_of(label))` each part draws from its own stream, so adding or reordering the
/// declaration's languages leaves the other parts' draws unchanged.
pub fn stream_of(label: &str) -> u64 {
    label.bytes().fold(0xcbf2_9ce4_8422_2325, |h, b| {
        (h ^ u64::from(b)).wrapping_mul(0x0000_0100_0000_01b3)
    })
}

/// The seed of one named random choice under the benchmark's root seed: SplitMix64 of the
/// root mixed with the FNV-1a hash of `tag` (e.g. `"xnli/classifier"`). Distinct tags give
/// unrelated streams; the same root and tag always give the same seed.
pub fn sub_seed(root: u64, tag: &str) -> u64 {
    harness_embed::hashed::splitmix64(root ^ harness_embed::hashed::splitmix64(stream_of(tag)))
}
