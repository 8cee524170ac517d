//! Evaluation protocols, one file each. A protocol reads its benchmark's declaration
//! (`benchmarks/<name>.yaml`: dataset, split, languages, params), loads the installed
//! dataset through the loaders, embeds sentences through the [`Encoder`] it is given (already
//! wrapped in the embedding cache by the runner) and returns an [`Outcome`]. Every protocol
//! file starts with a comment naming its reference: the paper section, and the reference
//! implementation's file where one exists.

pub mod bucc;
pub mod eigen;
pub mod intent;
pub mod mldoc;
pub mod multiway;
pub mod retrieval;
pub mod senteval;
pub mod sentiment;
pub mod sts;
pub mod tatoeba;
pub mod xnli;

#[cfg(test)]
pub(crate) mod fake_encoder;

use super::error::BenchError;
use super::registry::Benchmark;
use harness_embed::matrix::Matrix;
use harness_embed::Encoder;
use serde::de::DeserializeOwned;
use serde::Serialize;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// Everything a protocol needs.
pub struct Context<'a> {
    /// The benchmark's declaration.
    pub benchmark: &'a Benchmark,
    /// The installed dataset folder (`<data_dir>/<benchmark.dataset>`).
    pub dataset_dir: &'a Path,
    /// The other datasets the protocol reads ([`side_datasets`]), installed and verified
    /// by the runner: name → folder. A protocol reaches them only through
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
    pub fn params<T: DeserializeOwned>(&self) -> Result<T, BenchError> {
        params_of(self.benchmark)
    }

    /// The folder of `name`, one of the side datasets the benchmark declares
    /// ([`side_datasets`]). Any other name is an error: the runner installs and verifies
    /// exactly the declared datasets before the protocol starts.
    pub fn side_dataset(&self, name: &str) -> Result<&Path, BenchError> {
        self.side.get(name).map(PathBuf::as_path).ok_or_else(|| {
            self.error(format!(
                "the protocol reads dataset `{name}`, which `side_datasets` does not declare for \
                 this benchmark, so it was not installed and verified before the run (a bug in \
                 harness: declare it in src/bench/protocols/mod.rs::side_datasets)"
            ))
        })
    }

    /// Embeds sentences: one row each, in order.
    pub fn embed<S: AsRef<str>>(&self, sentences: &[S]) -> Result<Matrix, BenchError> {
        let refs: Vec<&str> = sentences.iter().map(AsRef::as_ref).collect();
        Ok(self.encoder.encode(&refs)?)
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

/// A declaration's `params`, typed as `T`.
pub fn params_of<T: DeserializeOwned>(benchmark: &Benchmark) -> Result<T, BenchError> {
    let map: serde_yaml::Mapping = benchmark
        .params
        .iter()
        .map(|(k, v)| (serde_yaml::Value::String(k.clone()), v.clone()))
        .collect();
    serde_yaml::from_value(serde_yaml::Value::Mapping(map)).map_err(|e| BenchError::Params {
        benchmark: benchmark.name.clone(),
        detail: e.to_string(),
    })
}

/// Whether the declaration's parameters (after any overrides) parse as its protocol's;
/// the serde message otherwise (it names the offending key in backquotes).
pub fn check_params(benchmark: &Benchmark) -> Result<(), String> {
    fn typed<T: DeserializeOwned>(b: &Benchmark) -> Result<(), String> {
        match params_of::<T>(b) {
            Ok(_) => Ok(()),
            Err(BenchError::Params { detail, .. }) => Err(detail),
            Err(e) => Err(e.to_string()),
        }
    }
    match benchmark.protocol.as_str() {
        "bucc-mining" => typed::<bucc::BuccParams>(benchmark),
        "eigen-similarity" => typed::<eigen::Params>(benchmark),
        "intent-knn" => typed::<intent::Params>(benchmark),
        "mldoc" => typed::<mldoc::MldocParams>(benchmark),
        "multiway-search" => typed::<multiway::MultiwayParams>(benchmark),
        "retrieval-p1" => typed::<retrieval::Params>(benchmark),
        "senteval-classification" => typed::<senteval::Params>(benchmark),
        "sentiment-transfer" => typed::<sentiment::SentimentParams>(benchmark),
        "sts" => typed::<sts::StsParams>(benchmark),
        "tatoeba-search" => typed::<tatoeba::TatoebaParams>(benchmark),
        "xnli-zero-shot" => typed::<xnli::XnliParams>(benchmark),
        other => Err(format!(
            "protocol `{other}` is not implemented in this build"
        )),
    }
}

/// Every dataset a benchmark reads besides its own `dataset:` (XNLI's English NLI training
/// sets), as its protocol and parameters determine them. The runner installs and verifies
/// these and the benchmark's own dataset before the protocol starts; this is the one list.
pub fn side_datasets(benchmark: &Benchmark) -> Result<Vec<String>, BenchError> {
    match benchmark.protocol.as_str() {
        "xnli-zero-shot" => xnli::side_datasets(benchmark),
        _ => Ok(Vec::new()),
    }
}

/// The benchmark's own dataset followed by its [`side_datasets`], without repeats.
pub fn datasets_read(benchmark: &Benchmark) -> Result<Vec<String>, BenchError> {
    let mut all = vec![benchmark.dataset.clone()];
    for d in side_datasets(benchmark)? {
        if !all.contains(&d) {
            all.push(d);
        }
    }
    Ok(all)
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

/// The random stream of one named part of a benchmark (a language pair, a direction): the
/// 64-bit FNV-1a hash of `label`. With [`crate::classify::mlp::seeded_rng`]`(ctx.seed,
/// stream_of(label))` each part draws from its own stream, so adding or reordering the
/// declaration's languages leaves the other parts' draws unchanged.
pub fn stream_of(label: &str) -> u64 {
    label.bytes().fold(0xcbf2_9ce4_8422_2325, |h, b| {
        (h ^ u64::from(b)).wrapping_mul(0x0000_0100_0000_01b3)
    })
}

/// A protocol's entry point.
pub type Protocol = fn(&Context) -> Result<Outcome, BenchError>;

/// The protocol function registered under `name` (see [`super::registry::PROTOCOLS`]).
pub fn protocol(name: &str) -> Option<Protocol> {
    let table: BTreeMap<&str, Protocol> = BTreeMap::from([
        // Each protocol module registers itself here: ("name", module::run as Protocol).
        ("bucc-mining", bucc::run as Protocol),
        ("eigen-similarity", eigen::run as Protocol),
        ("intent-knn", intent::run as Protocol),
        ("mldoc", mldoc::run as Protocol),
        ("multiway-search", multiway::run as Protocol),
        ("retrieval-p1", retrieval::run as Protocol),
        ("senteval-classification", senteval::run as Protocol),
        ("sentiment-transfer", sentiment::run as Protocol),
        ("sts", sts::run as Protocol),
        ("tatoeba-search", tatoeba::run as Protocol),
        ("xnli-zero-shot", xnli::run as Protocol),
    ]);
    table.get(name).copied()
}

/// The seed of one named random choice under the benchmark's root seed: SplitMix64 of the
/// root mixed with the FNV-1a hash of `tag` (e.g. `"xnli/classifier"`). Distinct tags give
/// unrelated streams; the same root and tag always give the same seed.
pub fn sub_seed(root: u64, tag: &str) -> u64 {
    harness_embed::hashed::splitmix64(root ^ harness_embed::hashed::splitmix64(stream_of(tag)))
}

/// Shared by the protocols' real-data tests.
#[cfg(test)]
pub(crate) mod test_support {
    use super::{protocol, Context, Outcome};
    use crate::registry::{Benchmark, Registry};
    use harness_embed::cache::CachedEncoder;
    use harness_embed::matrix::Matrix;
    use harness_embed::Encoder;
    use std::collections::{BTreeMap, HashMap};
    use std::sync::Mutex;
    use std::time::Instant;

    /// Remembers the rows an inner encoder gave, so a second run re-checks the protocol's
    /// determinism without paying for the embeddings again.
    pub struct Memo<E> {
        inner: E,
        rows: Mutex<HashMap<String, Vec<f32>>>,
    }

    impl<E: Encoder> Memo<E> {
        pub fn new(inner: E) -> Self {
            Memo {
                inner,
                rows: Mutex::new(HashMap::new()),
            }
        }
    }

    impl<E: Encoder> Encoder for Memo<E> {
        fn name(&self) -> &str {
            self.inner.name()
        }
        fn fingerprint(&self) -> String {
            self.inner.fingerprint()
        }
        fn dim(&self) -> usize {
            self.inner.dim()
        }
        fn encode(&self, sentences: &[&str]) -> Result<Matrix, harness_embed::EncodeError> {
            let missing: Vec<&str> = {
                let rows = self.rows.lock().unwrap();
                sentences
                    .iter()
                    .copied()
                    .filter(|s| !rows.contains_key(*s))
                    .collect()
            };
            if !missing.is_empty() {
                let m = self.inner.encode(&missing)?;
                let mut rows = self.rows.lock().unwrap();
                for (i, s) in missing.iter().enumerate() {
                    rows.insert(s.to_string(), m.row(i).to_vec());
                }
            }
            let rows = self.rows.lock().unwrap();
            let dim = self.dim();
            Ok(Matrix::from_rows(
                &sentences
                    .iter()
                    .map(|s| rows[*s].clone())
                    .collect::<Vec<_>>(),
                dim,
            ))
        }
    }

    /// Where [`run_real_with`] keeps the first run's embeddings for the second.
    pub enum Reuse {
        /// A [`CachedEncoder`] in a temporary folder, as the runner does (a sentence shared
        /// by two language pairs is encoded once).
        Disk,
        /// A [`Memo`] in memory (cheaper in debug builds).
        Memory,
    }

    /// [`run_real_with`] on the declared languages, reusing embeddings through the disk cache.
    pub fn run_real(name: &str, spec: &str) -> (Outcome, f64, f64) {
        run_real_with(name, None, spec, Reuse::Disk)
    }

    /// Runs the declared benchmark `name` (with `languages` replacing the declared ones when
    /// given) on the shared dataset with the encoder `spec`, twice; asserts both outcomes are
    /// identical and returns the first with the two wall times in seconds. The second run
    /// reuses every embedding of the first (see [`Reuse`]), so its time is the protocol's own.
    pub fn run_real_with(
        name: &str,
        languages: Option<&[&str]>,
        spec: &str,
        reuse: Reuse,
    ) -> (Outcome, f64, f64) {
        let mut bench: Benchmark = Registry::load().unwrap().get(name).unwrap().clone();
        if let Some(l) = languages {
            bench.languages = l.iter().map(|s| s.to_string()).collect();
        }
        let dir = harness_core::shared_datasets_dir().join(&bench.dataset);
        // The protocols' tests run on hashed n-grams (the factory of every other encoder
        // sits above this crate).
        let inner: Box<dyn Encoder> = Box::new(
            harness_embed::hashed::HashedNgrams::from_spec(spec, spec.split_once(':').map(|x| x.1))
                .unwrap(),
        );
        let cache = tempfile::tempdir().unwrap();
        let encoder: Box<dyn Encoder> = match reuse {
            Reuse::Disk => Box::new(CachedEncoder::new(inner, cache.path())),
            Reuse::Memory => Box::new(Memo::new(inner)),
        };
        let side: BTreeMap<String, std::path::PathBuf> = super::side_datasets(&bench)
            .unwrap()
            .into_iter()
            .map(|d| {
                let p = harness_core::shared_datasets_dir().join(&d);
                (d, p)
            })
            .collect();
        let ctx = Context {
            benchmark: &bench,
            dataset_dir: &dir,
            side: &side,
            encoder: &encoder,
            seed: 1,
        };
        let run = protocol(&bench.protocol).unwrap();
        let start = Instant::now();
        let first = run(&ctx).unwrap();
        let t1 = start.elapsed().as_secs_f64();
        let start = Instant::now();
        let second = run(&ctx).unwrap();
        let t2 = start.elapsed().as_secs_f64();
        eprintln!(
            "{name} with {spec}: {} = {:.4} (first run {t1:.1} s, second {t2:.1} s)\n{}\nnotes: {:#?}",
            first.main_metric,
            first.main_score,
            serde_json::to_string_pretty(&first.scores).unwrap(),
            first.notes
        );
        assert_eq!(first, second, "{name}: the second run differs");
        (first, t1, t2)
    }
}
