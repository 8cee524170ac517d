//! Evaluation protocols, one file each. A protocol reads its benchmark's declaration
//! (`benchmarks/<name>.yaml`: dataset, split, languages, params), loads the installed
//! dataset through the loaders, embeds sentences through the [`Encoder`] it is given (already
//! wrapped in the embedding cache by the runner) and returns an [`Outcome`]. Every protocol
//! file starts with a comment naming its reference: the paper section, and the reference
//! implementation's file where one exists, and defines itself once as its `DEF`
//! ([`ProtocolDef`]). [`ALL`] lists them; everything that names a protocol reads that list.
//!
//! [`Encoder`]: harness_embed::Encoder

pub mod bucc;
pub mod def;
pub mod eigen;
pub mod fields;
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

pub use def::{Context, Outcome, ProtocolDef, ScoresDef};

use crate::benchmark::Benchmark;
use crate::error::BenchError;

/// Every protocol of this build, in the order the registry's messages list them. Adding a
/// protocol is its file, with its `DEF`, and one line here.
pub const ALL: &[ProtocolDef] = &[
    sts::DEF,
    senteval::DEF,
    xnli::DEF,
    mldoc::DEF,
    bucc::DEF,
    tatoeba::DEF,
    multiway::DEF,
    retrieval::DEF,
    intent::DEF,
    sentiment::DEF,
    eigen::DEF,
];

/// The protocol a declaration's `protocol:` names, if this build has it.
pub fn find(name: &str) -> Option<&'static ProtocolDef> {
    ALL.iter().find(|p| p.name == name)
}

/// The names of [`ALL`], in its order.
pub fn names() -> Vec<&'static str> {
    ALL.iter().map(|p| p.name).collect()
}

/// Whether the declaration's parameters (after any overrides) parse as its protocol's;
/// the serde message otherwise (it names the offending key in backquotes).
pub fn check_params(benchmark: &Benchmark) -> Result<(), String> {
    match find(&benchmark.protocol) {
        Some(p) => (p.check_params)(benchmark),
        None => Err(not_implemented(&benchmark.protocol)),
    }
}

/// Checks a result-file field path (`scores.accuracy.fr`, already filled) against the typed
/// scores of `protocol` ([`fields::check_path`]); an unknown protocol is not this check's
/// business (the registry refuses it) and passes.
pub fn check_field(protocol: &str, path: &str) -> Result<(), String> {
    match find(protocol) {
        Some(p) => fields::check_path(&(p.scores.schema)(), protocol, path),
        None => Ok(()),
    }
}

/// Why a declaration's protocol cannot run: this build has no protocol of that name.
pub fn not_implemented(protocol: &str) -> String {
    format!("protocol `{protocol}` is not implemented in this build")
}

/// Every dataset a benchmark reads besides its own `dataset:`, as its protocol and
/// parameters determine them ([`ProtocolDef::side_datasets`]). The runner installs and
/// verifies these and the benchmark's own dataset before the protocol starts.
pub fn side_datasets(benchmark: &Benchmark) -> Result<Vec<String>, BenchError> {
    match find(&benchmark.protocol) {
        Some(p) => (p.side_datasets)(benchmark),
        None => Ok(Vec::new()),
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

#[cfg(test)]
mod typed_scores_tests {
    use super::*;

    /// Every protocol declares the shape of its scores: an object with named fields (or a
    /// map of them), never the unconstrained schema of `serde_json::Value`.
    #[test]
    fn every_protocol_has_typed_scores() {
        for p in ALL {
            let schema = (p.scores.schema)();
            let typed = schema.get("properties").is_some()
                || schema
                    .get("additionalProperties")
                    .is_some_and(|v| v.is_object());
            assert!(typed, "{}: scores untyped: {schema}", p.name);
            assert!(
                check_field(p.name, "scores.no_such_field_anywhere").is_err(),
                "{}",
                p.name
            );
        }
    }
}

/// Shared by the protocols' real-data tests.
#[cfg(test)]
pub(crate) mod test_support {
    use super::{find, Context, Outcome};
    use crate::benchmark::Benchmark;
    use crate::registry::Registry;
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
        fn pair_logits(
            &self,
            head: &str,
            u: &Matrix,
            v: &Matrix,
        ) -> Result<Option<Matrix>, harness_embed::EncodeError> {
            self.inner.pair_logits(head, u, v)
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
    /// The scores are exactly the protocol's typed struct: read as it and written again,
    /// they are unchanged (no field the struct lacks, none it adds).
    pub fn assert_typed(protocol: &str, scores: &serde_json::Value) {
        let reread = (find(protocol).unwrap().scores.reread)(scores)
            .unwrap_or_else(|e| panic!("{protocol}'s scores do not read as its struct: {e}"));
        assert_eq!(&reread, scores, "{protocol}'s scores and its struct differ");
    }

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
        let run = find(&bench.protocol).unwrap().run;
        let start = Instant::now();
        let first = run(&ctx).unwrap();
        let t1 = start.elapsed().as_secs_f64();
        assert_typed(&bench.protocol, &first.scores);
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::protocols::fake_encoder::bench;

    #[test]
    fn every_protocol_is_listed_once_under_its_own_name() {
        let names = names();
        let mut unique = names.clone();
        unique.sort();
        unique.dedup();
        assert_eq!(unique.len(), names.len(), "{names:?}");
        for p in ALL {
            assert_eq!(find(p.name).map(|f| f.name), Some(p.name));
        }
    }

    #[test]
    fn checks_and_side_datasets_follow_the_declared_protocol() {
        let xnli = bench("xnli", "xnli", "xnli-zero-shot", &[], "{train: [snli-dev]}");
        assert_eq!(datasets_read(&xnli).unwrap(), ["xnli", "snli"]);
        let sts = bench("sts", "stsb", "sts", &[], "");
        assert_eq!(datasets_read(&sts).unwrap(), ["stsb"]);
        let misspelt = bench("xnli", "xnli", "xnli-zero-shot", &[], "{epoch: 1}");
        assert!(check_params(&misspelt).unwrap_err().contains("`epoch`"));
        let unknown = bench("x", "x", "no-such-protocol", &[], "");
        assert_eq!(
            check_params(&unknown).unwrap_err(),
            "protocol `no-such-protocol` is not implemented in this build"
        );
        assert_eq!(datasets_read(&unknown).unwrap(), ["x"]);
    }

    /// Every rule a protocol holds its parameters to, one bad declaration each: `validate`
    /// (through [`check_params`]) refuses it, and the protocol's `run` refuses it with the
    /// same message before reading anything (the dataset folder does not exist).
    #[test]
    fn validate_refuses_every_bad_declaration_that_run_refuses_with_the_same_message() {
        use crate::protocols::fake_encoder::FakeEncoder;
        let sts = |dataset: &str, languages: &[&str], params: &str| {
            bench("sts", dataset, "sts", languages, params)
        };
        let cases: Vec<(Benchmark, &str)> = vec![
            (
                bench("b", "bucc", "bucc-mining", &[], "{k: 0}"),
                "params.k must be at least 1",
            ),
            (
                bench("b", "bucc", "bucc-mining", &[], "{folds: 1}"),
                "params.folds must be at least 2",
            ),
            (
                bench("b", "bucc", "bucc-mining", &["zhen"], ""),
                "`zhen` is not a `src-tgt`",
            ),
            (
                bench(
                    "e",
                    "flores",
                    "eigen-similarity",
                    &["a-b"],
                    "{sample_size: 1}",
                ),
                "sample_size must be at least 2",
            ),
            (
                bench("e", "flores", "eigen-similarity", &[], ""),
                "list the language pairs",
            ),
            (
                bench("m", "sib", "mldoc", &[], "{languages: []}"),
                "params.languages is empty",
            ),
            (
                bench(
                    "m",
                    "sib",
                    "mldoc",
                    &[],
                    "{languages: [de], train_language: en}",
                ),
                "is not one of params.languages",
            ),
            (
                bench("w", "flores", "multiway-search", &[], "{files: devtest}"),
                "params.files must be a file name containing `{lang}`",
            ),
            (
                bench("r", "tatoeba", "retrieval-p1", &["deu"], ""),
                "`deu` is not a `src-tgt`",
            ),
            (
                bench(
                    "s",
                    "senteval",
                    "senteval-classification",
                    &[],
                    "{task: MR, kfold: 1}",
                ),
                "kfold must be at least 2",
            ),
            (
                bench(
                    "s",
                    "senteval",
                    "senteval-classification",
                    &[],
                    "{task: XYZ}",
                ),
                "is not a SentEval classification task",
            ),
            (
                bench("a", "cls", "sentiment-transfer", &[], "{few_shot: [1.5]}"),
                "fraction 1.5 is outside (0, 1]",
            ),
            (
                bench(
                    "a",
                    "cls",
                    "sentiment-transfer",
                    &["en"],
                    "{train_language: en}",
                ),
                "no target language besides",
            ),
            (
                sts("stsbenchmark", &[], "{year: 2012}"),
                "params.year applies to the `sts12-16` dataset only",
            ),
            (
                sts("stsbenchmark", &["de"], ""),
                "does not apply to `stsbenchmark`",
            ),
            (sts("sts12-16", &[], ""), "params.year is required"),
            (sts("sts12-16", &[], "{year: 2011}"), "2011 is not one of"),
            (sts("sts17", &[], "{tracks: [\"9\"]}"), "unknown track `9`"),
            (
                sts("stsb-multi-mt", &["xx"], ""),
                "language `xx` is not in stsb-multi-mt",
            ),
            (
                sts("stsb-multi-mt", &[], "{cross_lingual: [en-en]}"),
                "is not `l1-l2` with two different",
            ),
            (
                bench("x", "xnli", "xnli-zero-shot", &[], "{train: []}"),
                "params.train names no training set",
            ),
            (
                bench("x", "xnli", "xnli-zero-shot", &[], "{train_fraction: 0}"),
                "is outside (0, 1]",
            ),
        ];
        let mut dev_split = sts("sts17", &[], "");
        dev_split.split = "dev".into();
        let mut cases = cases;
        cases.push((dev_split, "has a test split only"));
        let nowhere = std::path::Path::new("/nonexistent/harness-dataset");
        for (b, expected) in &cases {
            let at_validate = check_params(b).expect_err(expected);
            assert!(
                at_validate.contains(expected),
                "{}: {at_validate}",
                b.protocol
            );
            let ctx = Context {
                benchmark: b,
                dataset_dir: nowhere,
                side: &std::collections::BTreeMap::new(),
                encoder: &FakeEncoder,
                seed: 0,
            };
            match (find(&b.protocol).unwrap().run)(&ctx) {
                Err(BenchError::Params { detail, .. }) => assert_eq!(detail, at_validate),
                other => panic!(
                    "{}: run gave {:?}, not the refusal",
                    b.protocol,
                    other.map(|o| o.main_score)
                ),
            }
        }
    }
}
