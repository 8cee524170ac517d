//! Errors of the benchmark runner's encoder layer. Every message names the file, the encoder
//! spec or the sentence concerned, and says how to fix the problem.

use std::path::PathBuf;

/// Anything that can go wrong opening an encoder, encoding, or reading and writing embeddings.
#[derive(Debug, thiserror::Error)]
pub enum BenchError {
    /// The operating system refused a read or write.
    #[error("{path}: {source}")]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },

    /// A file's bytes are not what its format promises (a bad `.npy` header, a sentence
    /// list whose length differs from the matrix...).
    #[error("{path}: {detail}. Fix: {fix}")]
    Format {
        path: PathBuf,
        detail: String,
        fix: String,
    },

    /// An encoder spec that names no known encoder.
    #[error("unknown encoder `{spec}`{suggestion}. Known: {known}")]
    UnknownEncoder {
        spec: String,
        suggestion: String,
        known: String,
    },

    /// A known encoder with parameters that do not parse or are out of range.
    #[error("encoder spec `{spec}`: {detail}")]
    BadSpec { spec: String, detail: String },

    /// A precomputed-embedding encoder was asked for a sentence its list does not hold.
    #[error("{path}: sentence {sentence:?} is not in this sentence list ({missing} of the {asked} sentences asked for are missing). Fix: recompute the embeddings over a list that includes every sentence of the benchmark")]
    MissingSentence {
        path: PathBuf,
        sentence: String,
        missing: usize,
        asked: usize,
    },

    /// An encoder broke its contract or failed while encoding.
    #[error("encoder `{name}`: {detail}")]
    Encoder { name: String, detail: String },

    /// A dataset could not be installed or read.
    #[error(transparent)]
    Data(#[from] crate::data::DataError),

    /// A model could not be opened or run.
    #[error(transparent)]
    Model(#[from] crate::model::ModelError),

    /// A pretrained model could not be installed (download, hash, unpack). Boxed: the
    /// store's error is large and every benchmark result carries this type.
    #[error(transparent)]
    ModelStore(Box<crate::model_store::ModelStoreError>),

    /// A benchmark declaration's `params` do not fit its protocol.
    #[error("benchmarks/{benchmark}.yaml: params: {detail}")]
    Params { benchmark: String, detail: String },

    /// A protocol could not produce a score (e.g. a classifier failed to train).
    #[error("benchmark `{benchmark}`: {detail}")]
    Protocol { benchmark: String, detail: String },
}

impl BenchError {
    /// An I/O error on `path`.
    pub fn io(path: impl Into<PathBuf>, source: std::io::Error) -> Self {
        BenchError::Io {
            path: path.into(),
            source,
        }
    }

    /// A format error in `path`, with a fix.
    pub fn format(
        path: impl Into<PathBuf>,
        detail: impl Into<String>,
        fix: impl Into<String>,
    ) -> Self {
        BenchError::Format {
            path: path.into(),
            detail: detail.into(),
            fix: fix.into(),
        }
    }

    /// A bad parameter in the encoder spec `spec`.
    pub fn bad_spec(spec: &str, detail: impl Into<String>) -> Self {
        BenchError::BadSpec {
            spec: spec.to_string(),
            detail: detail.into(),
        }
    }
}

impl From<crate::model_store::ModelStoreError> for BenchError {
    fn from(e: crate::model_store::ModelStoreError) -> Self {
        BenchError::ModelStore(Box::new(e))
    }
}
