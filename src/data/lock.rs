//! `datasets.lock`: every dataset file pinned by size and sha256, with the dataset's version,
//! licence, upstream source and format. The lock is compiled into the binary, so a harness
//! build always knows exactly which bytes it was tested against.

use super::DataError;
use serde::{Deserialize, Serialize};
use std::path::PathBuf;

/// The lock file as committed at the repository root.
pub const LOCK_TEXT: &str = include_str!("../../datasets.lock");

/// The whole lock file.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Lock {
    /// Format version of the lock file itself.
    pub version: u32,
    /// One entry per dataset folder.
    #[serde(default)]
    pub dataset: Vec<DatasetEntry>,
}

/// One dataset folder.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DatasetEntry {
    /// Folder name, also the name used in recipes and on the command line.
    pub name: String,
    /// Upstream version or release date.
    pub version: String,
    /// Licence as stated by the publisher.
    pub licence: String,
    /// Upstream source (repository and commit, or URL).
    pub source: String,
    /// On-disk format, which names the loader that reads it.
    pub format: String,
    /// Every file of the folder.
    #[serde(default)]
    pub file: Vec<FileEntry>,
}

/// One file of a dataset folder.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FileEntry {
    /// Path relative to the dataset folder, `/`-separated.
    pub path: String,
    /// Exact size in bytes.
    pub bytes: u64,
    /// Lowercase hex sha256.
    pub sha256: String,
}

impl Lock {
    /// The lock compiled into this binary.
    pub fn embedded() -> Result<Lock, DataError> {
        Self::parse(LOCK_TEXT, PathBuf::from("datasets.lock"))
    }

    /// Parses lock text; errors name `path`.
    pub fn parse(text: &str, path: PathBuf) -> Result<Lock, DataError> {
        toml::from_str(text).map_err(|e| DataError::Lock {
            path,
            detail: e.to_string(),
        })
    }

    /// Every dataset name, in lock order.
    pub fn names(&self) -> Vec<&str> {
        self.dataset.iter().map(|d| d.name.as_str()).collect()
    }

    /// The entry for `name`, or an error with a did-you-mean suggestion.
    pub fn get(&self, name: &str) -> Result<&DatasetEntry, DataError> {
        self.dataset.iter().find(|d| d.name == name).ok_or_else(|| {
            let best = self
                .names()
                .into_iter()
                .map(|n| (strsim::jaro_winkler(n, name), n))
                .filter(|(s, _)| *s > 0.8)
                .max_by(|a, b| a.0.total_cmp(&b.0));
            DataError::UnknownDataset {
                name: name.to_string(),
                suggestion: best.map_or(String::new(), |(_, n)| format!(" (did you mean `{n}`?)")),
            }
        })
    }
}
