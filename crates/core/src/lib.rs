//! harness-core: the lowest layer, which every other crate may use and which uses none of
//! them. It owns what every layer needs and no layer should write twice: atomic writes and
//! hashing ([`fsutil`]), tool settings ([`settings`]), the clock ([`clock`]), verification
//! stamps of installed files ([`stamp`]), user-named output directories ([`outdir`]),
//! did-you-mean ([`suggest`]), the run directory ([`rundir`]), progress reporting
//! ([`progress`]), the `--device` value ([`device`]), the allocator's settings ([`memory`])
//! and Ctrl-C / SIGTERM as a flag ([`signal`]).

pub mod clock;
pub mod device;
pub mod fsutil;
pub mod memory;
pub mod nofollow;
pub mod outdir;
pub mod progress;
pub mod rundir;
pub mod settings;
pub mod signal;
pub mod specs;
pub mod stamp;
pub mod suggest;
pub mod terminal;

use std::path::PathBuf;

/// harness version (the workspace's `version`).
pub const VERSION: &str = env!("CARGO_PKG_VERSION");

/// Git commit the binary was built from (`-dirty` with local changes), or `unknown`: set by
/// the binary at start ([`set_git_commit`]; its build script reads git), so that a commit
/// rebuilds the binary only, not every crate.
pub fn git_commit() -> &'static str {
    GIT_COMMIT.get().map_or("unknown", String::as_str)
}

static GIT_COMMIT: std::sync::OnceLock<String> = std::sync::OnceLock::new();

/// Records the binary's git commit (the first call wins).
pub fn set_git_commit(commit: &str) {
    let _ = GIT_COMMIT.set(commit.to_string());
}

/// The repository root: under cargo (`test`, `run`, `bench`), the workspace of the package
/// it runs (found above its `CARGO_MANIFEST_DIR` by `Cargo.lock` and `datasets.lock`); else
/// the workspace this crate was built in.
///
/// The build-time path alone goes stale when a target directory is shared by checkouts in
/// different places (`.ci/run`'s default): cargo reuses a path crate compiled in another
/// checkout without rebuilding it, and tests then looked for `../shared` beside that one.
pub fn repo_root() -> PathBuf {
    if let Some(dir) = std::env::var_os("CARGO_MANIFEST_DIR") {
        let mut dir = PathBuf::from(dir);
        loop {
            if dir.join("Cargo.lock").is_file() && dir.join("datasets.lock").is_file() {
                return dir;
            }
            if !dir.pop() {
                break;
            }
        }
    }
    PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/../.."))
}

/// The shared datasets folder beside this checkout (`../shared/datasets`), where the
/// default mirror lives. `HARNESS_SHARED_DATASETS` overrides it (used by tests and CI).
pub fn shared_datasets_dir() -> PathBuf {
    if let Some(dir) = std::env::var_os("HARNESS_SHARED_DATASETS") {
        return PathBuf::from(dir);
    }
    repo_root().join("..").join("shared").join("datasets")
}

/// A file that cannot be read, or whose content is not what its format promises: the two
/// failures the errors of every layer share (each holds one as its `File` variant).
#[derive(Debug, thiserror::Error)]
pub enum FileError {
    /// The operating system refused a read or write.
    #[error("{path}: {source}")]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    /// The bytes are not what the format promises; `fix` says what to do.
    #[error("{path}: {detail}. Fix: {fix}")]
    Format {
        path: PathBuf,
        detail: String,
        fix: String,
    },
}

/// Gives an error enum `io(path, source)`: for a variant `Io { path, source }`, or, written
/// `file_errors!(Ty, File)`, for a variant `File(FileError)` together with
/// `format(path, detail, fix)`. One definition instead of one per crate.
#[macro_export]
macro_rules! file_errors {
    ($ty:ident) => {
        impl $ty {
            /// An I/O error on `path`.
            pub fn io(path: impl Into<std::path::PathBuf>, source: std::io::Error) -> Self {
                $ty::Io {
                    path: path.into(),
                    source,
                }
            }
        }
    };
    ($ty:ident, File) => {
        impl $ty {
            /// An I/O error on `path`.
            pub fn io(path: impl Into<std::path::PathBuf>, source: std::io::Error) -> Self {
                $ty::File($crate::FileError::Io {
                    path: path.into(),
                    source,
                })
            }

            /// A format error in `path`, with a fix.
            pub fn format(
                path: impl Into<std::path::PathBuf>,
                detail: impl Into<String>,
                fix: impl Into<String>,
            ) -> Self {
                $ty::File($crate::FileError::Format {
                    path: path.into(),
                    detail: detail.into(),
                    fix: fix.into(),
                })
            }
        }
    };
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_repo_root_is_this_checkout_with_its_locks() {
        let root = super::repo_root();
        assert!(
            root.join("Cargo.lock").is_file() && root.join("datasets.lock").is_file(),
            "{}",
            root.display()
        );
    }
}
