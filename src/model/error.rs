//! Errors of the model layer: reading configurations, weights and tokenizers, and running a
//! model. Every message names the file (or the in-memory source) and says how to fix it.

use std::path::PathBuf;

/// Anything that can go wrong opening or running a model.
#[derive(Debug, thiserror::Error)]
pub enum ModelError {
    /// The operating system refused a read.
    #[error("{path}: {source}")]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },

    /// A file's content is not what its format promises (bad JSON, a missing key, a value
    /// out of range, a configuration this implementation does not support).
    #[error("{path}: {detail}. Fix: {fix}")]
    Format {
        path: PathBuf,
        detail: String,
        fix: String,
    },

    /// The weights do not fit the model (missing or unexpected tensors, wrong shapes or
    /// dtypes). `origin` is the file, or a description of an in-memory buffer.
    #[error("{origin}: {detail}. Fix: {fix}")]
    Weights {
        origin: String,
        detail: String,
        fix: String,
    },

    /// The tokenizer could not be loaded or failed on an input.
    #[error("{path}: tokenizer: {detail}")]
    Tokenizer { path: PathBuf, detail: String },

    /// An input the model cannot take (e.g. an id outside the vocabulary).
    #[error("{detail}")]
    Input { detail: String },
}

impl ModelError {
    /// An I/O error on `path`.
    pub fn io(path: impl Into<PathBuf>, source: std::io::Error) -> Self {
        ModelError::Io {
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
        ModelError::Format {
            path: path.into(),
            detail: detail.into(),
            fix: fix.into(),
        }
    }
}
