//! Errors of the benchmarks: declarations, protocols, their data and their encoder. Every
//! message names the file, the benchmark or the sentence concerned, and says how to fix it.

/// Anything that can go wrong opening an encoder, encoding, or reading and writing embeddings.
#[derive(Debug, thiserror::Error)]
pub enum BenchError {
    /// A file that cannot be read or written, or whose bytes are not what its format
    /// promises.
    #[error(transparent)]
    File(#[from] harness_core::FileError),

    /// Encoding failed (the encoder's own error, which names its file or sentence).
    #[error(transparent)]
    Encode(#[from] harness_embed::EncodeError),

    /// A dataset could not be installed or read.
    #[error(transparent)]
    Data(#[from] harness_data::DataError),

    /// A benchmark declaration's `params` do not fit its protocol.
    #[error("benchmarks/{benchmark}.yaml: params: {detail}")]
    Params { benchmark: String, detail: String },

    /// A protocol could not produce a score (e.g. a classifier failed to train).
    #[error("benchmark `{benchmark}`: {detail}")]
    Protocol { benchmark: String, detail: String },
}

harness_core::file_errors!(BenchError, File);
