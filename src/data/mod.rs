//! Data: the lock file, fetching from mirrors, one loader per on-disk format, and corpus
//! building (contamination filter). Everything reads from the data directory, which
//! `datasets fetch` fills from the mirrors (by default `../shared/datasets`).

pub mod build;
pub mod corpus;
pub mod error;
pub mod fetch;
pub mod loaders;
pub mod lock;
pub mod records;
pub mod text;
pub mod tokenize;

pub use error::DataError;

use std::path::PathBuf;

/// The shared datasets folder beside this checkout (`../shared/datasets`), where the
/// default mirror lives. `HARNESS_SHARED_DATASETS` overrides it (used by tests and CI).
pub fn shared_datasets_dir() -> PathBuf {
    if let Some(dir) = std::env::var_os("HARNESS_SHARED_DATASETS") {
        return PathBuf::from(dir);
    }
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("..")
        .join("shared")
        .join("datasets")
}
