//! Errors of encoding: opening an encoder, encoding, reading and writing embeddings. Every
//! message names the file, the encoder spec or the sentence concerned, and says how to fix
//! the problem.

use std::path::PathBuf;

/// Anything that can go wrong opening an encoder, encoding, or reading and writing embeddings.
#[derive(Debug, thiserror::Error)]
pub enum EncodeError {
    /// A file that cannot be read or written, or whose bytes are not what its format
    /// promises.
    #[error(transparent)]
    File(#[from] harness_core::FileError),

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
    Data(#[from] harness_data::DataError),

    /// The `--device` of a model-based encoder is not in this build, or it failed.
    #[error(transparent)]
    Device(#[from] harness_core::device::DeviceError),

    /// A model could not be opened or run (the model layer's error, which names its file).
    #[error(transparent)]
    Model(Box<dyn std::error::Error + Send + Sync>),

    /// A pretrained model could not be installed (download, hash, unpack). Boxed: the
    /// store's error is large.
    #[error(transparent)]
    ModelStore(Box<harness_data::model_store::ModelStoreError>),
}

impl EncodeError {
    /// A bad parameter in the encoder spec `spec`.
    pub fn bad_spec(spec: &str, detail: impl Into<String>) -> Self {
        EncodeError::BadSpec {
            spec: spec.to_string(),
            detail: detail.into(),
        }
    }
}

impl From<harness_data::model_store::ModelStoreError> for EncodeError {
    fn from(e: harness_data::model_store::ModelStoreError) -> Self {
        EncodeError::ModelStore(Box::new(e))
    }
}

harness_core::file_errors!(EncodeError, File);
