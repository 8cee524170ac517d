//! Helpers for the loaders' tests: the real shared datasets, and small synthetic files
//! (plain, gzip, truncated gzip) in a temporary folder.

use crate::DataError;
use std::io::Write;
use std::path::{Path, PathBuf};

/// The real dataset folder `name` under the shared datasets directory.
pub fn real(name: &str) -> PathBuf {
    let dir = harness_core::shared_datasets_dir().join(name);
    assert!(
        dir.is_dir(),
        "{} is missing: the loader tests read the shared datasets (set HARNESS_SHARED_DATASETS)",
        dir.display()
    );
    dir
}

/// Writes `dir/name` (creating parent folders).
pub fn write(dir: &Path, name: &str, contents: &str) {
    let path = dir.join(name);
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(path, contents).unwrap();
}

/// Gzip bytes of `contents`.
pub fn gzip(contents: &str) -> Vec<u8> {
    let mut enc = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
    enc.write_all(contents.as_bytes()).unwrap();
    enc.finish().unwrap()
}

/// Writes `dir/name.gz` holding `contents`.
pub fn write_gz(dir: &Path, name: &str, contents: &str) {
    let path = dir.join(format!("{name}.gz"));
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(path, gzip(contents)).unwrap();
}

/// Writes `dir/name.gz` holding only the first half of the gzip stream of `contents`.
pub fn write_truncated_gz(dir: &Path, name: &str, contents: &str) {
    let gz = gzip(contents);
    let path = dir.join(format!("{name}.gz"));
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(path, &gz[..gz.len() / 2]).unwrap();
}

/// Asserts that the error's message contains every one of `needles`.
pub fn assert_mentions<T: std::fmt::Debug>(result: Result<T, DataError>, needles: &[&str]) {
    let msg = result.expect_err("expected an error").to_string();
    for n in needles {
        assert!(msg.contains(n), "error `{msg}` does not mention `{n}`");
    }
}
