//! Directories a user names for harness to write into (`--out` of `export` and `report`):
//! harness replaces only files it wrote there itself. Each such directory holds a manifest,
//! `.harness-files.json`, listing the files harness wrote into it; a file in the way that
//! the manifest does not list is someone else's, and is never overwritten or deleted, not
//! even with `--force` (which only lets harness write its files beside such files). A
//! symbolic link where harness would write (the directory of a run's report, a `tables/`
//! folder) is refused rather than followed.

use serde::{Deserialize, Serialize};
use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

/// The manifest's file name.
pub const MANIFEST: &str = ".harness-files.json";

/// What to do with a directory that holds files harness did not write.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Foreign {
    /// Write beside them, refusing only a file in the way of one harness writes.
    LeaveAlone,
    /// Refuse the directory unless it is empty or an earlier output of the same kind.
    RefuseDirectory,
    /// The directory is harness's own (a run directory's `report/`): every file in it is
    /// harness's to replace.
    Ours,
}

/// Why a directory cannot be written.
#[derive(Debug, thiserror::Error)]
pub enum OutDirError {
    #[error("{dir}: this directory holds files harness did not write ({examples}), and is not an earlier harness {kind}; nothing was written. Fix: choose a new or empty directory, or pass --force to write the {kind}'s files beside them (a file of someone else's is never replaced)")]
    ForeignDirectory {
        dir: PathBuf,
        kind: String,
        examples: String,
    },
    #[error("{path}: a file harness did not write is where the {kind} puts `{rel}`; it was left as it is and nothing was written. Fix: move it or choose another directory")]
    InTheWay {
        path: PathBuf,
        rel: String,
        kind: String,
    },
    #[error("{path}: a symbolic link is where the {kind} writes; harness does not write through links. Fix: remove the link, or choose another directory")]
    Link { path: PathBuf, kind: String },
    #[error("{path}: {source}")]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
}

#[derive(Debug, Default, Serialize, Deserialize)]
struct Manifest {
    kind: String,
    files: BTreeSet<String>,
    /// Every file of the last output was written ([`OutDir::finish`]); false from its first
    /// write on, so an output killed halfway is never taken for a whole one.
    #[serde(default)]
    complete: bool,
}

/// Whether `dir` holds a whole output: its manifest says that the last writer wrote every
/// file it meant to ([`OutDir::finish`]), not that it was stopped halfway.
pub fn is_complete(dir: &Path) -> bool {
    std::fs::read(dir.join(MANIFEST))
        .ok()
        .and_then(|b| serde_json::from_slice::<Manifest>(&b).ok())
        .is_some_and(|m| m.complete)
}

/// A user-named output directory, claimed for one kind of output.
#[derive(Debug)]
pub struct OutDir {
    dir: PathBuf,
    kind: String,
    /// Every file in it is harness's ([`Foreign::Ours`]).
    all_ours: bool,
    manifest: Manifest,
}

impl OutDir {
    /// Claims `dir` for writing the files `will_write` (relative, `/`-separated) of output
    /// `kind` (`export`, `report`). Creates it if missing. Checks every file in the way
    /// before anything is written, so a refusal leaves the directory as it was.
    pub fn claim(
        dir: &Path,
        kind: &str,
        will_write: &[String],
        foreign: Foreign,
        force: bool,
    ) -> Result<OutDir, OutDirError> {
        let io = |path: &Path, source| OutDirError::Io {
            path: path.to_path_buf(),
            source,
        };
        let manifest_path = dir.join(MANIFEST);
        let manifest: Option<Manifest> = std::fs::read(&manifest_path)
            .ok()
            .and_then(|b| serde_json::from_slice(&b).ok());
        let ours = manifest.as_ref().is_some_and(|m| m.kind == kind);
        if dir.exists() && foreign == Foreign::RefuseDirectory && !ours && !force {
            let mut others: Vec<String> = std::fs::read_dir(dir)
                .map_err(|e| io(dir, e))?
                .filter_map(Result::ok)
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .filter(|n| n != MANIFEST)
                .collect();
            if !others.is_empty() {
                others.sort();
                let more = others.len().saturating_sub(3);
                others.truncate(3);
                let mut examples = others.join(", ");
                if more > 0 {
                    examples.push_str(&format!(" and {more} more"));
                }
                return Err(OutDirError::ForeignDirectory {
                    dir: dir.to_path_buf(),
                    kind: kind.to_string(),
                    examples,
                });
            }
        }
        let manifest = manifest.filter(|m| m.kind == kind).unwrap_or(Manifest {
            kind: kind.to_string(),
            files: BTreeSet::new(),
            complete: false,
        });
        // A run's own report folder is harness's only if it is a real folder of the run.
        if foreign == Foreign::Ours && is_link(dir) {
            return Err(OutDirError::Link {
                path: dir.to_path_buf(),
                kind: kind.to_string(),
            });
        }
        for rel in will_write {
            let path = local(dir, rel);
            if let Some(link) = link_between(dir, rel) {
                return Err(OutDirError::Link {
                    path: link,
                    kind: kind.to_string(),
                });
            }
            if foreign != Foreign::Ours
                && std::fs::symlink_metadata(&path).is_ok()
                && !manifest.files.contains(rel)
            {
                return Err(OutDirError::InTheWay {
                    path,
                    rel: rel.clone(),
                    kind: kind.to_string(),
                });
            }
        }
        std::fs::create_dir_all(dir).map_err(|e| io(dir, e))?;
        Ok(OutDir {
            dir: dir.to_path_buf(),
            kind: kind.to_string(),
            all_ours: foreign == Foreign::Ours,
            manifest,
        })
    }

    /// The directory.
    pub fn path(&self) -> &Path {
        &self.dir
    }

    /// Writes `rel` atomically, recording it in the manifest first (so a killed write
    /// leaves a file the next run may replace). A file in the way that harness did not
    /// write is refused (replaced with `--force`); a directory in the way is never removed.
    pub fn write(&mut self, rel: &str, bytes: &[u8]) -> Result<PathBuf, OutDirError> {
        let path = local(&self.dir, rel);
        let io = |source| OutDirError::Io {
            path: path.clone(),
            source,
        };
        if let Some(link) = link_between(&self.dir, rel) {
            return Err(OutDirError::Link {
                path: link,
                kind: self.kind.clone(),
            });
        }
        if let Ok(m) = std::fs::symlink_metadata(&path) {
            if m.is_dir() || (!self.all_ours && !self.manifest.files.contains(rel)) {
                return Err(OutDirError::InTheWay {
                    path: path.clone(),
                    rel: rel.to_string(),
                    kind: self.kind.clone(),
                });
            }
        }
        let new_file = self.manifest.files.insert(rel.to_string());
        let was_complete = std::mem::take(&mut self.manifest.complete);
        if new_file || was_complete {
            self.save_manifest()?;
        }
        // Opened folder by folder without following a link (closing the race between the
        // check above and the write); the directory itself may be a link the user named.
        crate::nofollow::write_atomic_below(&self.dir, &path, bytes)
            .map_err(|e| crate::fsutil::disk_full(e, &self.dir))
            .map_err(io)?;
        Ok(path)
    }

    /// Copies the file `from` to `rel` (as [`OutDir::write`]).
    pub fn copy(&mut self, rel: &str, from: &Path) -> Result<PathBuf, OutDirError> {
        let bytes = std::fs::read(from).map_err(|e| OutDirError::Io {
            path: from.to_path_buf(),
            source: e,
        })?;
        self.write(rel, &bytes)
    }

    /// Records that every file of this output was written ([`is_complete`]).
    pub fn finish(mut self) -> Result<(), OutDirError> {
        self.manifest.complete = true;
        self.save_manifest()
    }

    fn save_manifest(&self) -> Result<(), OutDirError> {
        let path = self.dir.join(MANIFEST);
        let text = serde_json::to_string_pretty(&self.manifest).map_err(|e| OutDirError::Io {
            path: path.clone(),
            source: std::io::Error::other(e),
        })?;
        crate::nofollow::write_atomic(&path, text.as_bytes())
            .map_err(|e| OutDirError::Io { path, source: e })
    }
}

/// Removes from `dir` each file that its manifest of output `kind` lists and `stale`
/// selects (relative, `/`-separated names: the files of an earlier output that the current
/// one no longer writes, say an emit of fewer Slurm arrays than the last), and drops it from
/// the manifest. The manifest is rewritten first: a run killed halfway leaves a file harness
/// no longer claims (kept forever, like any foreign file), never a claim on a file that is
/// gone (which a foreign file put there later could be taken for). A listed path that is now
/// a folder or a symbolic link, or lies under one, was put there by someone else: it is
/// left, and stays listed. Without a manifest of `kind` nothing is removed. Returns the
/// paths removed.
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
    let Some(mut manifest) = std::fs::read(&manifest_path)
        .ok()
        .and_then(|b| serde_json::from_slice::<Manifest>(&b).ok())
        .filter(|m| m.kind == kind)
    else {
        return Ok(Vec::new());
    };
    let remove: Vec<String> = manifest
        .files
        .iter()
        .filter(|rel| stale(rel) && plain_file_under(dir, rel))
        .cloned()
        .collect();
    if remove.is_empty() {
        return Ok(Vec::new());
    }
    for rel in &remove {
        manifest.files.remove(rel);
    }
    let text = serde_json::to_string_pretty(&manifest)
        .map_err(|e| io(&manifest_path, std::io::Error::other(e)))?;
    crate::nofollow::write_atomic(&manifest_path, text.as_bytes())
        .map_err(|e| io(&manifest_path, e))?;
    let mut removed = Vec::with_capacity(remove.len());
    for rel in remove {
        let path = local(dir, &rel);
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

fn is_link(path: &Path) -> bool {
    std::fs::symlink_metadata(path).is_ok_and(|m| m.file_type().is_symlink())
}

/// The first folder of `rel` under `dir` that is a symbolic link, if any.
fn link_between(dir: &Path, rel: &str) -> Option<PathBuf> {
    let parts: Vec<&str> = rel.split('/').collect();
    let mut p = dir.to_path_buf();
    for part in &parts[..parts.len().saturating_sub(1)] {
        p.push(part);
        if is_link(&p) {
            return Some(p);
        }
    }
    None
}

fn local(dir: &Path, rel: &str) -> PathBuf {
    rel.split('/').fold(dir.to_path_buf(), |p, c| p.join(c))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_output_is_complete_only_after_finish_and_until_the_next_write() {
        let d = tempfile::tempdir().unwrap();
        let out = d.path().join("out");
        let files = ["a.txt".to_string(), "b/c.txt".to_string()];
        let mut w = OutDir::claim(&out, "report", &files, Foreign::RefuseDirectory, false).unwrap();
        w.write("a.txt", b"a").unwrap();
        assert!(!is_complete(&out), "one of two files written");
        w.write("b/c.txt", b"c").unwrap();
        assert!(!is_complete(&out));
        w.finish().unwrap();
        assert!(is_complete(&out));
        // A second render: incomplete from its first write (even of a file already listed).
        let mut w = OutDir::claim(&out, "report", &files, Foreign::RefuseDirectory, false).unwrap();
        w.write("a.txt", b"a2").unwrap();
        assert!(!is_complete(&out));
        drop(w);
        assert!(!is_complete(&out), "killed before finish");
        assert!(!is_complete(d.path()), "no manifest");
    }

    fn names(dir: &Path) -> Vec<String> {
        let mut v: Vec<String> = std::fs::read_dir(dir)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        v.sort();
        v
    }

    #[test]
    fn a_foreign_directory_is_refused_unless_forced_and_its_files_survive() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("out");
        std::fs::create_dir(&dir).unwrap();
        std::fs::write(dir.join("notes.txt"), "mine").unwrap();
        let files = vec!["a.json".to_string()];
        let err = OutDir::claim(&dir, "export", &files, Foreign::RefuseDirectory, false)
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("notes.txt") && err.contains("--force"),
            "{err}"
        );
        assert_eq!(names(&dir), ["notes.txt"]);
        let mut out =
            OutDir::claim(&dir, "export", &files, Foreign::RefuseDirectory, true).unwrap();
        out.write("a.json", b"{}").unwrap();
        assert_eq!(names(&dir), [MANIFEST, "a.json", "notes.txt"]);
        // --force never replaces someone else's file in the way.
        let theirs = vec!["notes.txt".to_string()];
        let err = OutDir::claim(&dir, "export", &theirs, Foreign::RefuseDirectory, true)
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("notes.txt") && !err.contains("--force"),
            "{err}"
        );
        assert_eq!(
            std::fs::read_to_string(dir.join("notes.txt")).unwrap(),
            "mine"
        );
        // An earlier export is replaced without --force; the foreign file stays.
        let mut again =
            OutDir::claim(&dir, "export", &files, Foreign::RefuseDirectory, false).unwrap();
        again.write("a.json", b"{\"v\": 2}").unwrap();
        assert_eq!(
            std::fs::read_to_string(dir.join("notes.txt")).unwrap(),
            "mine"
        );
    }

    #[test]
    fn a_foreign_file_in_the_way_is_refused_before_anything_is_written() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().to_path_buf();
        std::fs::write(dir.join("report.md"), "my notes").unwrap();
        let files = vec!["report.html".to_string(), "report.md".to_string()];
        let err = OutDir::claim(&dir, "report", &files, Foreign::LeaveAlone, false)
            .unwrap_err()
            .to_string();
        assert!(err.contains("report.md"), "{err}");
        assert_eq!(names(&dir), ["report.md"], "nothing written");
        assert_eq!(
            std::fs::read_to_string(dir.join("report.md")).unwrap(),
            "my notes"
        );
        // Beside foreign files with other names: fine.
        std::fs::rename(dir.join("report.md"), dir.join("notes.md")).unwrap();
        let mut out = OutDir::claim(&dir, "report", &files, Foreign::LeaveAlone, false).unwrap();
        out.write("report.md", b"# r").unwrap();
        assert_eq!(
            std::fs::read_to_string(dir.join("notes.md")).unwrap(),
            "my notes"
        );
    }

    /// A run's report folder that is a link, or a link in the way of a subfolder, is
    /// refused: nothing is written through it.
    #[cfg(unix)]
    #[test]
    fn links_where_harness_writes_are_refused() {
        let tmp = tempfile::tempdir().unwrap();
        let elsewhere = tmp.path().join("elsewhere");
        std::fs::create_dir(&elsewhere).unwrap();
        std::fs::write(elsewhere.join("report.md"), "someone's").unwrap();
        let report = tmp.path().join("report");
        std::os::unix::fs::symlink(&elsewhere, &report).unwrap();
        let files = vec!["report.md".to_string()];
        let err = OutDir::claim(&report, "report", &files, Foreign::Ours, false)
            .unwrap_err()
            .to_string();
        assert!(err.contains("symbolic link"), "{err}");
        let out = tmp.path().join("out");
        std::fs::create_dir(&out).unwrap();
        std::os::unix::fs::symlink(&elsewhere, out.join("tables")).unwrap();
        let files = vec!["tables/t.csv".to_string()];
        let err = OutDir::claim(&out, "report", &files, Foreign::LeaveAlone, false)
            .unwrap_err()
            .to_string();
        assert!(err.contains("symbolic link"), "{err}");
        assert_eq!(names(&elsewhere), ["report.md"]);
        assert_eq!(
            std::fs::read_to_string(elsewhere.join("report.md")).unwrap(),
            "someone's"
        );
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
        assert!(is_complete(&dir), "the manifest keeps its state");
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
