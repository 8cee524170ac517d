//! Removing the files of an earlier output that the current one no longer writes (an
//! emit of fewer Slurm arrays than the last), under the rule of [`crate::outdir`]: only a
//! file the directory's manifest lists as harness's own is removed; anything else is
//! someone else's and stays. (Kept beside `outdir.rs` rather than in it while that file is
//! being changed elsewhere; it reads and writes the same manifest.)

use crate::outdir::{OutDirError, MANIFEST};
use std::path::{Path, PathBuf};

/// Removes from `dir` each file that its manifest of output `kind` lists and `stale`
/// selects (relative, `/`-separated names), and drops it from the manifest. The manifest
/// is rewritten first: a run killed halfway leaves a file harness no longer claims (kept
/// forever, like any foreign file), never a claim on a file that is gone (which a foreign
/// file put there later could be taken for). A listed path that is now a folder or a
/// symbolic link, or lies under one, was put there by someone else: it is left, and stays
/// listed. Without a manifest of `kind` nothing is removed. Returns the paths removed.
pub fn remove_stale(
    dir: &Path,
    kind: &str,
    stale: impl Fn(&str) -> bool,
) -> Result<Vec<PathBuf>, OutDirError> {
    let manifest_path = dir.join(MANIFEST);
    let io = |path: &Path, source| OutDirError::Io {
        path: path.to_path_buf(),
        source,
    };
    let Ok(bytes) = std::fs::read(&manifest_path) else {
        return Ok(Vec::new());
    };
    let Ok(mut manifest) = serde_json::from_slice::<serde_json::Value>(&bytes) else {
        return Ok(Vec::new());
    };
    if manifest.get("kind").and_then(|k| k.as_str()) != Some(kind) {
        return Ok(Vec::new());
    }
    let Some(files) = manifest.get_mut("files").and_then(|f| f.as_array_mut()) else {
        return Ok(Vec::new());
    };
    let mut remove: Vec<PathBuf> = Vec::new();
    files.retain(|f| {
        let Some(rel) = f.as_str() else { return true };
        if !stale(rel) || !plain_file_under(dir, rel) {
            return true;
        }
        remove.push(local(dir, rel));
        false
    });
    if remove.is_empty() {
        return Ok(remove);
    }
    let text = serde_json::to_string_pretty(&manifest)
        .map_err(|e| io(&manifest_path, std::io::Error::other(e)))?;
    crate::fsutil::write_atomic(&manifest_path, text.as_bytes())
        .map_err(|e| io(&manifest_path, e))?;
    let mut removed = Vec::with_capacity(remove.len());
    for path in remove {
        match std::fs::remove_file(&path) {
            Ok(()) => removed.push(path),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => return Err(io(&path, e)),
        }
    }
    Ok(removed)
}

/// Whether `rel` under `dir` is a plain file (or absent) reached through real folders only.
fn plain_file_under(dir: &Path, rel: &str) -> bool {
    let mut p = dir.to_path_buf();
    let parts: Vec<&str> = rel.split('/').collect();
    for (i, part) in parts.iter().enumerate() {
        if part.is_empty() || *part == "." || *part == ".." {
            return false;
        }
        p.push(part);
        let Ok(m) = std::fs::symlink_metadata(&p) else {
            // Absent: nothing to remove, but no longer ours to claim either.
            return true;
        };
        let last = i + 1 == parts.len();
        if m.file_type().is_symlink() || (last && !m.is_file()) || (!last && !m.is_dir()) {
            return false;
        }
    }
    true
}

fn local(dir: &Path, rel: &str) -> PathBuf {
    rel.split('/').fold(dir.to_path_buf(), |p, c| p.join(c))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::outdir::{Foreign, OutDir};

    fn names(dir: &Path) -> Vec<String> {
        let mut v: Vec<String> = std::fs::read_dir(dir)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        v.sort();
        v
    }

    #[test]
    fn only_listed_files_are_removed_and_unlisted() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("out");
        let files = vec!["a-0.txt".to_string(), "a-1.txt".to_string()];
        let mut out =
            OutDir::claim(&dir, "thing", &files, Foreign::RefuseDirectory, false).unwrap();
        out.write("a-0.txt", b"0").unwrap();
        out.write("a-1.txt", b"1").unwrap();
        out.finish().unwrap();
        // Someone else's file with a name the predicate selects.
        std::fs::write(dir.join("a-2.txt"), "theirs").unwrap();
        let removed = remove_stale(&dir, "thing", |r| r != "a-0.txt").unwrap();
        assert_eq!(removed, [dir.join("a-1.txt")]);
        assert_eq!(names(&dir), [MANIFEST, "a-0.txt", "a-2.txt"]);
        assert!(
            crate::outdir::is_complete(&dir),
            "the manifest keeps its state"
        );
        // No longer listed: a file of that name put there now is someone else's.
        std::fs::write(dir.join("a-1.txt"), "theirs now").unwrap();
        let err = OutDir::claim(&dir, "thing", &files, Foreign::RefuseDirectory, false)
            .unwrap_err()
            .to_string();
        assert!(err.contains("a-1.txt"), "{err}");
        // Another kind's manifest removes nothing.
        assert!(remove_stale(&dir, "other", |_| true).unwrap().is_empty());
        assert_eq!(names(&dir), [MANIFEST, "a-0.txt", "a-1.txt", "a-2.txt"]);
    }

    #[cfg(unix)]
    #[test]
    fn a_listed_path_now_a_link_or_folder_is_left() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("out");
        let elsewhere = tmp.path().join("elsewhere");
        std::fs::create_dir_all(&elsewhere).unwrap();
        std::fs::write(elsewhere.join("1.args"), "theirs").unwrap();
        let files = vec!["t/1.args".to_string(), "x.txt".to_string()];
        let mut out =
            OutDir::claim(&dir, "thing", &files, Foreign::RefuseDirectory, false).unwrap();
        out.write("t/1.args", b"1").unwrap();
        out.write("x.txt", b"x").unwrap();
        out.finish().unwrap();
        std::fs::remove_dir_all(dir.join("t")).unwrap();
        std::os::unix::fs::symlink(&elsewhere, dir.join("t")).unwrap();
        std::fs::remove_file(dir.join("x.txt")).unwrap();
        std::fs::create_dir(dir.join("x.txt")).unwrap();
        assert!(remove_stale(&dir, "thing", |_| true).unwrap().is_empty());
        assert_eq!(
            std::fs::read_to_string(elsewhere.join("1.args")).unwrap(),
            "theirs"
        );
        assert!(dir.join("x.txt").is_dir());
    }
}
