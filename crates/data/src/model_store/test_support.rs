//! Helpers for the tests of the model store and of the `harness models` command: a toy wheel
//! and its lock entry. Not part of the API.

use super::lock::{ModelEntry, ModelFile};
use super::wheel::hash_file;
use std::io::Write;
use std::path::{Path, PathBuf};

/// A zip file at `path` holding `members` (name, bytes), deflate-compressed.
pub fn write_zip(path: &Path, members: &[(&str, &[u8])]) {
    let file = std::fs::File::create(path).unwrap();
    let mut zip = zip::ZipWriter::new(file);
    let opts = zip::write::SimpleFileOptions::default()
        .compression_method(zip::CompressionMethod::Deflated);
    for (name, bytes) in members {
        zip.start_file(*name, opts).unwrap();
        zip.write_all(bytes).unwrap();
    }
    zip.finish().unwrap();
}

/// A wheel `toy_pkg-1.0-py3-none-any.whl` in `dir` with two data files and a stray
/// member the lock does not list, and the lock entry that pins it.
pub fn toy_wheel(dir: &Path) -> (PathBuf, ModelEntry) {
    let a: &[u8] = b"first file\n";
    let b: Vec<u8> = (0..100_000u32).map(|i| (i % 251) as u8).collect();
    let wheel = dir.join("toy_pkg-1.0-py3-none-any.whl");
    write_zip(
        &wheel,
        &[
            ("toy_pkg/a.txt", a),
            ("toy_pkg/data/b.bin", &b),
            ("toy_pkg/__init__.py", b"# not listed\n"),
        ],
    );
    let (bytes, sha) = hash_file(&wheel).unwrap();
    let entry = ModelEntry {
        name: "toy".into(),
        description: "toy".into(),
        format: "test".into(),
        licence: "MIT".into(),
        source: "synthetic".into(),
        package: "toy-pkg".into(),
        package_version: "1.0".into(),
        package_licence: "MIT".into(),
        wheel: "toy_pkg-1.0-py3-none-any.whl".into(),
        wheel_bytes: bytes,
        wheel_sha256: sha,
        pip_platform: None,
        file: vec![
            ModelFile {
                from: "toy_pkg/a.txt".into(),
                path: "a.txt".into(),
                bytes: a.len() as u64,
                sha256: harness_core::fsutil::sha256_hex(a),
            },
            ModelFile {
                from: "toy_pkg/data/b.bin".into(),
                path: "sub/b.bin".into(),
                bytes: b.len() as u64,
                sha256: harness_core::fsutil::sha256_hex(&b),
            },
        ],
    };
    (wheel, entry)
}

/// Every entry directly under `dir`, sorted.
pub fn names(dir: &Path) -> Vec<String> {
    let mut v: Vec<String> = std::fs::read_dir(dir)
        .map(|r| {
            r.map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
                .collect()
        })
        .unwrap_or_default();
    v.sort();
    v
}
