//! Errors of `harness report`: each names the file or table concerned and how to fix it.

use std::path::PathBuf;

#[derive(Debug, thiserror::Error)]
pub enum ReportError {
    /// Table specifications that do not parse or refer to unknown names.
    #[error("invalid table specs (fix the files, then rebuild):\n  {}", problems.join("\n  "))]
    Spec { problems: Vec<String> },
    #[error("unknown table `{name}`{suggestion}. Known: {known}")]
    UnknownTable {
        name: String,
        suggestion: String,
        known: String,
    },
    /// A run or results directory that cannot be used.
    #[error("{path}: {detail}. Fix: {fix}")]
    Input {
        path: PathBuf,
        detail: String,
        fix: String,
    },
    #[error("{path}: {source}")]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    /// Templates that fail to compile or render (a bug in `reports/templates/`).
    #[error("template `{template}`: {detail}")]
    Template { template: String, detail: String },
    #[error("{0}")]
    Setup(String),
}

harness_core::file_errors!(ReportError);
