//! What the dataset store and the model store share: the state of an installed folder of
//! pinned files (every file with its size and sha256 in a lock), judged by `stat` alone or by
//! hashing every file. `datasets list` and `models list` show it; verification stamps
//! ([`harness_core::stamp`]) decide what a use must re-hash.

use harness_core::stamp::Pinned;
use std::fmt;
use std::path::Path;

/// Installation state of a store folder.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum StoreState {
    /// Every file is there with its pinned size and sha256 (hashed).
    Verified,
    /// Every file is there with its pinned size (not hashed).
    Present,
    /// `missing` of `of` files are absent (and no present file is wrong).
    Missing { missing: usize, of: usize },
    /// A file has the wrong size or content, is not a file, or cannot be read.
    Corrupt { path: String, detail: String },
}

impl fmt::Display for StoreState {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            StoreState::Verified => f.write_str("verified"),
            StoreState::Present => f.write_str("present"),
            StoreState::Missing { missing, of } if missing == of => f.write_str("missing"),
            StoreState::Missing { missing, of } => write!(f, "missing ({missing} of {of} files)"),
            StoreState::Corrupt { path, detail } => write!(f, "corrupt ({path}: {detail})"),
        }
    }
}

/// The pinned files `(path in the folder, bytes, sha256)` of a store folder `dir`, as the
/// state and stamp checks see them.
pub fn pinned<'a>(
    dir: &Path,
    files: impl IntoIterator<Item = (&'a str, u64, &'a str)>,
) -> Vec<Pinned<'a>> {
    files
        .into_iter()
        .map(|(rel, bytes, sha256)| Pinned {
            rel,
            path: rel.split('/').fold(dir.to_path_buf(), |p, c| p.join(c)),
            bytes,
            sha256,
        })
        .collect()
}

/// The state of `files` (pinned by the lock named `lock`, for messages): existence and size
/// of each, and with `hash` their sha256 too.
pub fn state(files: &[Pinned], lock: &str, hash: bool) -> StoreState {
    let mut missing = 0;
    for f in files {
        let corrupt = |detail: String| StoreState::Corrupt {
            path: f.rel.to_string(),
            detail,
        };
        match std::fs::metadata(&f.path) {
            Ok(m) if m.is_file() && m.len() == f.bytes => {}
            Ok(m) if m.is_file() => {
                return corrupt(format!("{} bytes, {lock} says {}", m.len(), f.bytes))
            }
            Ok(_) => return corrupt("not a regular file".into()),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => missing += 1,
            Err(e) => return corrupt(e.to_string()),
        }
    }
    if missing > 0 {
        return StoreState::Missing {
            missing,
            of: files.len(),
        };
    }
    if !hash {
        return StoreState::Present;
    }
    for f in files {
        match harness_core::fsutil::hash_file(&f.path, &mut |_| {}) {
            Ok((_, sha)) if sha == f.sha256 => {}
            Ok((_, sha)) => {
                return StoreState::Corrupt {
                    path: f.rel.to_string(),
                    detail: format!("sha256 {sha}, {lock} says {}", f.sha256),
                }
            }
            Err(e) => {
                return StoreState::Corrupt {
                    path: f.rel.to_string(),
                    detail: e.to_string(),
                }
            }
        }
    }
    StoreState::Verified
}
