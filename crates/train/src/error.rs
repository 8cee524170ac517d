//! Errors of the training layer; each names the file or recipe key and says how to fix it.

use std::path::PathBuf;

/// Anything that stops a training run.
#[derive(Debug, thiserror::Error)]
pub enum TrainError {
    /// The operating system refused a read or write.
    #[error("{path}: {source}")]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    /// A checkpoint could not be written or read.
    #[error("{path}: checkpoint: {detail}. Fix: delete this checkpoint directory; the run resumes from the previous one")]
    Checkpoint { path: PathBuf, detail: String },
    /// The disk holding the checkpoints has too little free space for the next one.
    #[error("{path}: the disk is full: a checkpoint of this run takes about {need_mib} MiB and {free_mib} MiB are free. Fix: free space on that disk or give the run an `--out` on a larger one; the run resumes from its last checkpoint")]
    DiskFull {
        path: PathBuf,
        need_mib: u64,
        free_mib: u64,
    },
    /// The recipe asks for something this trainer cannot do.
    #[error("{key}: {detail}. Fix: {fix}")]
    Recipe {
        key: String,
        detail: String,
        fix: String,
    },
    /// The model could not be built from the recipe.
    #[error(transparent)]
    Model(#[from] harness_model::ModelError),
    /// Tokenisation failed.
    #[error(transparent)]
    Tokenize(#[from] harness_data::tokenize::TokenizeError),
    /// A dataset could not be installed or read.
    #[error(transparent)]
    Data(#[from] harness_data::DataError),
    /// The benchmark declarations (the contamination filter's `exclude:` lists) could not
    /// be read.
    #[error(transparent)]
    Registry(#[from] harness_bench::registry::RegistryError),
    /// A trained run could not be opened.
    #[error(transparent)]
    Encode(#[from] harness_embed::EncodeError),
    /// An output directory is not harness's to write, or a write into it failed.
    #[error(transparent)]
    OutDir(#[from] harness_core::outdir::OutDirError),
    /// One of the recipe's corpora could not be built.
    #[error("building corpus `{name}`: {source}")]
    Corpus {
        name: String,
        #[source]
        source: Box<TrainError>,
    },
    /// The run directory holds another run, or its records cannot be read.
    #[error(transparent)]
    RunDir(#[from] harness_core::rundir::RunDirError),
    /// The run directory holds checkpoints of another recipe.
    #[error("{path}: {detail}. Fix: {fix}")]
    OtherRun {
        path: PathBuf,
        detail: String,
        fix: String,
    },
    /// An exported file could not be written.
    #[error("{path}: {detail}")]
    Export { path: PathBuf, detail: String },
    /// The `--device` value cannot be used, or the device failed.
    #[error(transparent)]
    Device(#[from] harness_core::device::DeviceError),
    /// A GPU backend's device thread panicked during a step (the session names the
    /// device: [`DeviceError::Failed`](harness_core::device::DeviceError::Failed)).
    #[error("step {step}: burn's device thread failed: {detail}")]
    DeviceFailed { step: u64, detail: String },
    /// A data-parallel peer stopped because an all-reduce failed: another peer failed
    /// first (whose error the run reports instead, when there is one) or the collective did.
    #[error("data-parallel peer {rank} stopped: an all-reduce failed ({detail}). Fix: see the error of the device that failed first; to isolate it, train on one device (`--device cpu`)")]
    PeerStopped { rank: usize, detail: String },
    /// The loss became NaN or infinite.
    #[error("step {step}: the loss is {value} (task `{task}`). Fix: lower `optimizer.lr`, set `optimizer.grad_clip`, or resume from an earlier checkpoint")]
    Diverged { step: u64, task: String, value: f64 },
}

impl TrainError {
    /// An I/O failure on `path`.
    pub fn io(path: impl Into<PathBuf>, source: std::io::Error) -> Self {
        TrainError::Io {
            path: path.into(),
            source,
        }
    }

    /// A recipe problem at `key`.
    pub fn recipe(
        key: impl Into<String>,
        detail: impl Into<String>,
        fix: impl Into<String>,
    ) -> Self {
        TrainError::Recipe {
            key: key.into(),
            detail: detail.into(),
            fix: fix.into(),
        }
    }
}
