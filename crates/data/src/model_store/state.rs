//! The state of an installed model folder, as `harness models list` shows it and as an
//! install must see it before and after: every file by `stat` alone ([`quick_state`]), by
//! hashing ([`verified_state`]), or against its verification stamp ([`check_stamped`]).
//! Installing ([`super::fetch`]) and unpacking ([`super::wheel`]) both ask it, so it sits
//! below both.

use super::lock::ModelEntry;
use std::path::{Path, PathBuf};

/// Installation state of a model folder (see [`crate::store::StoreState`]).
pub type ModelState = crate::store::StoreState;

/// Existence and size of every file of `entry` under `models_dir/<name>/` (no hashing).
pub fn quick_state(entry: &ModelEntry, models_dir: &Path) -> ModelState {
    crate::store::state(&pinned(entry, models_dir), "models.lock", false)
}

/// Like [`quick_state`], and also re-hashes every file (`Verified` when all match).
pub fn verified_state(entry: &ModelEntry, models_dir: &Path) -> ModelState {
    crate::store::state(&pinned(entry, models_dir), "models.lock", true)
}

/// Every file of `entry` as the state and stamp checks see it.
fn pinned<'a>(entry: &'a ModelEntry, models_dir: &Path) -> Vec<harness_core::stamp::Pinned<'a>> {
    let files = entry.file.iter();
    crate::store::pinned(
        &models_dir.join(&entry.name),
        files.map(|f| (f.path.as_str(), f.bytes, f.sha256.as_str())),
    )
}

/// The verification stamp of model `name`: `<models_dir>/.stamps/<name>.json`.
pub fn stamp_path(models_dir: &Path, name: &str) -> PathBuf {
    models_dir.join(".stamps").join(format!("{name}.json"))
}

/// Checks an installed model against its stamp, re-hashing only the files that changed on
/// disk since they were verified.
pub fn check_stamped(
    entry: &ModelEntry,
    models_dir: &Path,
) -> Result<harness_core::stamp::Checked, Vec<harness_core::stamp::Problem>> {
    harness_core::stamp::check(
        &stamp_path(models_dir, &entry.name),
        &pinned(entry, models_dir),
    )
}
