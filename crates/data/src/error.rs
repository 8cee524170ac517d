//! Errors of the data layer. Every message names the file (and line where known) and says
//! how to fix the problem.

use std::path::PathBuf;

/// Anything that can go wrong reading, verifying or fetching a dataset.
#[derive(Debug, thiserror::Error)]
pub enum DataError {
    /// A file the loader or lock expects is not there (neither `name` nor `name.gz`).
    #[error("{path}: file not found ({hint})")]
    Missing { path: PathBuf, hint: String },

    /// The operating system refused a read or write.
    #[error("{path}: {source}")]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },

    /// The bytes are not what the format promises (truncated gzip, bad UTF-8, wrong column
    /// count, unparsable number...). `line` is 1-based when known.
    #[error("{}: {detail}. Fix: {fix}", location(path, *line))]
    Format {
        path: PathBuf,
        line: Option<usize>,
        detail: String,
        fix: String,
    },

    /// The file's size or sha256 differs from `datasets.lock`.
    #[error("{path}: {detail} (expected {expected}, found {actual}). Fix: re-fetch it with `harness datasets fetch {dataset} --force`, or restore it from a mirror")]
    Checksum {
        dataset: String,
        path: PathBuf,
        detail: String,
        expected: String,
        actual: String,
    },

    /// Installed files of a dataset changed since they were verified (content, size, or a
    /// directory in a file's place); nothing was read from them. `files` has one line each.
    #[error("dataset `{dataset}` cannot be used: these files differ from datasets.lock:\n{files}\nFix: `harness datasets fetch {dataset} --force` replaces them with verified copies from the mirrors (a directory standing in a file's place too)")]
    Changed { dataset: String, files: String },

    /// A dataset name that the lock file does not know.
    #[error("unknown dataset `{name}`{suggestion}. `harness datasets list` shows them all")]
    UnknownDataset { name: String, suggestion: String },

    /// The lock file itself is unreadable.
    #[error("{path}: {detail}")]
    Lock { path: PathBuf, detail: String },

    /// No mirror gave a copy of a file that matches the lock; nothing was installed for it.
    /// `attempts` has one line per mirror tried, saying why it failed.
    #[error("{path}: no mirror gave a verified copy of this file of dataset `{dataset}`, so nothing was installed for it. Tried:\n{attempts}\nFix: check the mirrors (`--mirror DIR|URL`, or `mirrors` in harness.toml) and run `harness datasets fetch {dataset}` again (an interrupted download resumes), or fetch from a known-good copy with `harness datasets fetch {dataset} --from DIR|URL`")]
    FetchFailed {
        dataset: String,
        path: PathBuf,
        attempts: String,
    },

    /// Reading a corpus of the user's own files failed (the message names the file, the
    /// line and the fix).
    #[error(transparent)]
    UserCorpus(#[from] crate::user_corpus::UserCorpusError),

    /// Downloading or copying from a mirror failed.
    #[error("fetching {what} from {mirror}: {detail}")]
    Fetch {
        what: String,
        mirror: String,
        detail: String,
    },
}

fn location(path: &std::path::Path, line: Option<usize>) -> String {
    match line {
        Some(l) => format!("{}:{l}", path.display()),
        None => path.display().to_string(),
    }
}

impl DataError {
    /// A format error at `path`, line `line` (1-based), with a fix.
    pub fn format(
        path: impl Into<PathBuf>,
        line: Option<usize>,
        detail: impl Into<String>,
        fix: impl Into<String>,
    ) -> Self {
        DataError::Format {
            path: path.into(),
            line,
            detail: detail.into(),
            fix: fix.into(),
        }
    }
}

harness_core::file_errors!(DataError);
