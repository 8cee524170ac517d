//! The results folder a benchmark writes into, opened without following links, and the
//! atomic writes into it (the runner's result files, the items' per-item files).

use std::path::Path;

/// The results folder `dir` (a run's `results/`, an `--out` folder), created if missing and
/// opened without following a link: a link planted there is refused rather than written
/// through (the folder above it may be one).
pub fn results_folder(dir: &Path) -> std::io::Result<harness_core::nofollow::Dir> {
    let name = dir.file_name().map(Path::new).unwrap_or(Path::new(""));
    harness_core::nofollow::Dir::open_below(harness_core::fsutil::parent_dir(dir), name, true)
}

/// Writes `path`, a file of the results folder `dir`, atomically ([`results_folder`]).
pub fn write_below_parent(dir: &Path, path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    let name = path.file_name().unwrap_or_default();
    results_folder(dir)?.write_atomic(Path::new(name), bytes)?;
    Ok(())
}
