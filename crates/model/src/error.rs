//! Errors of the model layer: reading configurations, weights and tokenizers, and running a
//! model. Every message names the file (or the in-memory source) and says how to fix it.

use std::path::PathBuf;

/// Anything that can go wrong opening or running a model.
#[derive(Debug, thiserror::Error)]
pub enum ModelError {
    /// A file that cannot be read or written, or whose bytes are not what its format
    /// promises.
    #[error(transparent)]
    File(#[from] harness_core::FileError),

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

    /// A recipe asks for a component this build cannot build or train.
    #[error("{key}: {detail}. Fix: {fix}")]
    Unsupported {
        key: String,
        detail: String,
        fix: String,
    },

    /// A trained run to start from could not be opened.
    #[error(transparent)]
    Run(Box<harness_embed::EncodeError>),
}

impl From<harness_embed::EncodeError> for ModelError {
    fn from(e: harness_embed::EncodeError) -> Self {
        ModelError::Run(Box::new(e))
    }
}

/// A model error seen through the Encoder interface (it names its file itself).
impl From<ModelError> for harness_embed::EncodeError {
    fn from(e: ModelError) -> Self {
        harness_embed::EncodeError::Model(Box::new(e))
    }
}

harness_core::file_errors!(ModelError, File);
