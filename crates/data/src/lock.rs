//! `datasets.lock`: every dataset file pinned by size and sha256, with the dataset's version,
//! licence, upstream source and format. The lock is compiled into the binary, so a harness
//! build always knows exactly which bytes it was tested against.

use super::DataError;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// The lock file as committed at the repository root.
pub const LOCK_TEXT: &str = include_str!("../../../datasets.lock");

/// The whole lock file.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Lock {
    /// Format version of the lock file itself.
    pub version: u32,
    /// One entry per dataset folder.
    #[serde(default)]
    pub dataset: Vec<DatasetEntry>,
}

/// One dataset folder.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DatasetEntry {
    /// Folder name, also the name used in recipes and on the command line.
    pub name: String,
    /// Upstream version or release date.
    pub version: String,
    /// Licence as stated by the publisher.
    pub licence: String,
    /// Upstream source (repository and commit, or URL).
    pub source: String,
    /// On-disk format, which names the loader that reads it.
    pub format: String,
    /// Every file of the folder.
    #[serde(default)]
    pub file: Vec<FileEntry>,
}

/// One file of a dataset folder.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FileEntry {
    /// Path relative to the dataset folder, `/`-separated.
    pub path: String,
    /// Exact size in bytes.
    pub bytes: u64,
    /// Lowercase hex sha256.
    pub sha256: String,
}

impl DatasetEntry {
    /// Sum of the sizes of every file.
    pub fn total_bytes(&self) -> u64 {
        self.file.iter().map(|f| f.bytes).sum()
    }
}

impl DatasetEntry {
    /// Refuses a name or file path that would place a file outside `<data dir>/<name>/`
    /// (`..`, an absolute path, a backslash, an empty or hidden segment): the paths of a
    /// lock become paths on disk, and a hostile lock must not write anywhere else.
    pub fn check_paths(&self) -> Result<(), String> {
        if !safe_segment(&self.name) {
            return Err(format!(
                "dataset name `{}` is not a plain folder name. Fix: letters, digits, `.`, `_` and `-` only",
                self.name.escape_default()
            ));
        }
        for f in &self.file {
            if f.path.is_empty() || !f.path.split('/').all(safe_segment) {
                return Err(format!(
                    "dataset `{}`: file path `{}` leaves the dataset folder or is not a plain relative path. Fix: `/`-separated names of letters, digits, `.`, `_`, `-`, `+`, `=`, `,`, `@` and spaces, none of them `.`, `..` or hidden",
                    self.name,
                    f.path.escape_default()
                ));
            }
        }
        Ok(())
    }
}

/// A name harness may create inside its data directory: not empty, not hidden (no `.`,
/// `..`, `.harness-…`), and only characters that mean nothing to a path or a shell.
fn safe_segment(s: &str) -> bool {
    !s.is_empty()
        && !s.starts_with('.')
        && s.chars()
            .all(|c| c.is_alphanumeric() || "._-+=,@ ".contains(c))
}

impl FileEntry {
    /// The file's place under `root/<dataset>/`, built from the `/`-separated path.
    pub fn local_path(&self, dataset_dir: &Path) -> PathBuf {
        self.path
            .split('/')
            .fold(dataset_dir.to_path_buf(), |p, c| p.join(c))
    }
}

impl Lock {
    /// The lock compiled into this binary.
    pub fn embedded() -> Result<Lock, DataError> {
        Self::parse(LOCK_TEXT, PathBuf::from("datasets.lock"))
    }

    /// Parses lock text; errors name `path`.
    pub fn parse(text: &str, path: PathBuf) -> Result<Lock, DataError> {
        let lock: Lock = toml::from_str(text).map_err(|e| DataError::Lock {
            path: path.clone(),
            detail: e.to_string(),
        })?;
        for d in &lock.dataset {
            d.check_paths().map_err(|detail| DataError::Lock {
                path: path.clone(),
                detail,
            })?;
        }
        Ok(lock)
    }

    /// Lowercase hex sha256 of the embedded lock text: one short value that pins every dataset
    /// byte (recorded in a run's `env.json`).
    pub fn embedded_digest() -> String {
        harness_core::fsutil::sha256_hex(LOCK_TEXT.as_bytes())
    }

    /// Total number of files and bytes over all datasets.
    pub fn totals(&self) -> (usize, u64) {
        self.dataset
            .iter()
            .fold((0, 0), |(n, b), d| (n + d.file.len(), b + d.total_bytes()))
    }

    /// Every dataset name, in lock order.
    pub fn names(&self) -> Vec<&str> {
        self.dataset.iter().map(|d| d.name.as_str()).collect()
    }

    /// The entry for `name`, or an error with a did-you-mean suggestion.
    pub fn get(&self, name: &str) -> Result<&DatasetEntry, DataError> {
        self.dataset
            .iter()
            .find(|d| d.name == name)
            .ok_or_else(|| DataError::UnknownDataset {
                name: name.to_string(),
                suggestion: harness_core::suggest::did_you_mean(name, &self.names()),
            })
    }
}

/// Per-dataset metadata as written in `datasets.meta.toml` (one table per dataset folder).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DatasetMeta {
    pub version: String,
    pub licence: String,
    pub source: String,
    pub format: String,
}

/// Reads `datasets.meta.toml`.
pub fn read_meta(path: &Path) -> Result<BTreeMap<String, DatasetMeta>, DataError> {
    let text = std::fs::read_to_string(path).map_err(|e| DataError::io(path, e))?;
    toml::from_str(&text).map_err(|e| DataError::Lock {
        path: path.to_path_buf(),
        detail: format!(
            "{e}. Fix: one table per dataset folder with version, licence, source, format"
        ),
    })
}

/// Builds a lock from the dataset folders under `root` (one sub-directory per dataset; files
/// directly under `root`, such as its README, are not datasets) and their metadata. Every
/// folder must have a metadata table and every table a folder. `on_bytes` is called with the
/// size of each hashed chunk (for a progress bar).
pub fn generate(
    root: &Path,
    meta: &BTreeMap<String, DatasetMeta>,
    on_bytes: &mut dyn FnMut(u64),
) -> Result<Lock, DataError> {
    let mut folders = Vec::new();
    for entry in std::fs::read_dir(root).map_err(|e| DataError::io(root, e))? {
        let entry = entry.map_err(|e| DataError::io(root, e))?;
        let kind = entry
            .file_type()
            .map_err(|e| DataError::io(entry.path(), e))?;
        if kind.is_dir() {
            folders.push(entry.file_name().to_string_lossy().into_owned());
        }
    }
    folders.sort();
    if let Some(extra) = meta.keys().find(|k| !folders.contains(k)) {
        return Err(DataError::Lock {
            path: root.join(extra),
            detail: format!(
                "datasets.meta.toml has a table [{extra}] but there is no such folder. Fix: remove the table or restore the folder"
            ),
        });
    }
    let mut lock = Lock {
        version: 1,
        dataset: Vec::new(),
    };
    for name in folders {
        let m = meta.get(&name).ok_or_else(|| DataError::Lock {
            path: root.join(&name),
            detail: format!(
                "dataset folder has no metadata. Fix: add a [{name}] table (version, licence, source, format) to datasets.meta.toml, summarising its SOURCE.txt"
            ),
        })?;
        let dir = root.join(&name);
        let mut paths = Vec::new();
        list_files(&dir, "", &mut paths)?;
        paths.sort();
        let mut files = Vec::with_capacity(paths.len());
        for rel in paths {
            let path = dir.join(&rel);
            let (bytes, sha256) = hash_file(&path, on_bytes)?;
            files.push(FileEntry {
                path: rel,
                bytes,
                sha256,
            });
        }
        lock.dataset.push(DatasetEntry {
            name,
            version: m.version.clone(),
            licence: m.licence.clone(),
            source: m.source.clone(),
            format: m.format.clone(),
            file: files,
        });
    }
    Ok(lock)
}

/// Every regular file under `dir`, as `/`-separated paths relative to the dataset folder.
fn list_files(dir: &Path, prefix: &str, out: &mut Vec<String>) -> Result<(), DataError> {
    for entry in std::fs::read_dir(dir).map_err(|e| DataError::io(dir, e))? {
        let entry = entry.map_err(|e| DataError::io(dir, e))?;
        let path = entry.path();
        let name = entry
            .file_name()
            .into_string()
            .map_err(|n| DataError::Lock {
                path: path.clone(),
                detail: format!("file name {n:?} is not UTF-8. Fix: rename it"),
            })?;
        let rel = if prefix.is_empty() {
            name
        } else {
            format!("{prefix}/{name}")
        };
        let kind = entry.file_type().map_err(|e| DataError::io(&path, e))?;
        if kind.is_dir() {
            list_files(&path, &rel, out)?;
        } else if kind.is_file() {
            out.push(rel);
        } else {
            return Err(DataError::Lock {
                path,
                detail: "neither a regular file nor a directory (a symlink?). Fix: replace it by a copy of the file".into(),
            });
        }
    }
    Ok(())
}

/// Size and lowercase hex sha256 of a file ([`harness_core::fsutil::hash_file`]); errors
/// name the file.
pub fn hash_file(path: &Path, on_bytes: &mut dyn FnMut(u64)) -> Result<(u64, String), DataError> {
    harness_core::fsutil::hash_file(path, on_bytes).map_err(|e| DataError::io(path, e))
}

/// A TOML string literal (quoted and escaped).
fn toml_str(s: &str) -> String {
    toml::Value::String(s.to_string()).to_string()
}

impl Lock {
    /// The lock as committed: a header comment, then one `[[dataset]]` table per dataset with
    /// one inline table per file on its own line (so diffs show exactly which file changed).
    pub fn render(&self) -> String {
        let (files, bytes) = self.totals();
        let mut out = String::new();
        out.push_str(
            "# datasets.lock — every dataset file harness reads, pinned by size and sha256.\n",
        );
        out.push_str("# Regenerate with `harness datasets lock --from DIR` (metadata from datasets.meta.toml);\n");
        out.push_str("# never edit by hand.\n");
        out.push_str(&format!(
            "# {} datasets, {files} files, {bytes} bytes.\n",
            self.dataset.len()
        ));
        out.push_str(&format!("version = {}\n", self.version));
        for d in &self.dataset {
            out.push_str("\n[[dataset]]\n");
            out.push_str(&format!("name = {}\n", toml_str(&d.name)));
            out.push_str(&format!("version = {}\n", toml_str(&d.version)));
            out.push_str(&format!("licence = {}\n", toml_str(&d.licence)));
            out.push_str(&format!("source = {}\n", toml_str(&d.source)));
            out.push_str(&format!("format = {}\n", toml_str(&d.format)));
            out.push_str("file = [\n");
            for f in &d.file {
                out.push_str(&format!(
                    "  {{ path = {}, bytes = {}, sha256 = {} }},\n",
                    toml_str(&f.path),
                    f.bytes,
                    toml_str(&f.sha256)
                ));
            }
            out.push_str("]\n");
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn meta(format: &str) -> DatasetMeta {
        DatasetMeta {
            version: "1.0".into(),
            licence: "CC0 \"quoted\"".into(),
            source: "test".into(),
            format: format.into(),
        }
    }

    /// A hostile lock: names and paths that would leave the data directory are refused
    /// when the lock is read, naming the lock and the path.
    #[test]
    fn paths_leaving_the_dataset_folder_are_refused() {
        let lock = |name: &str, path: &str| {
            format!(
                "version = 1\n[[dataset]]\nname = {name:?}\nversion = \"1\"\nlicence = \"x\"\nsource = \"x\"\nformat = \"x\"\n[[dataset.file]]\npath = {path:?}\nbytes = 1\nsha256 = \"{}\"\n",
                "0".repeat(64)
            )
        };
        assert!(Lock::parse(&lock("ok", "a/b c+d=e,f@g.txt"), "l.lock".into()).is_ok());
        for (name, path) in [
            ("ok", "../escape.txt"),
            ("ok", "a/../../escape.txt"),
            ("ok", "/etc/passwd"),
            ("ok", "a//b"),
            ("ok", ""),
            ("ok", "a\\..\\b"),
            ("ok", ".hidden"),
            ("ok", "a/./b"),
            ("ok", "a:b"),
            ("ok", "$(rm -rf ~)"),
            ("..", "a.txt"),
            ("../x", "a.txt"),
            ("", "a.txt"),
            ("a/b", "a.txt"),
        ] {
            let err = Lock::parse(&lock(name, path), "hostile.lock".into())
                .expect_err(&format!("{name:?} {path:?} accepted"))
                .to_string();
            assert!(err.contains("hostile.lock"), "{err}");
            assert!(err.contains("not a plain"), "{name:?} {path:?}: {err}");
        }
    }

    #[test]
    fn generate_lists_every_file_sorted_with_size_and_hash_and_round_trips() {
        let root = tempfile::tempdir().unwrap();
        std::fs::write(root.path().join("README.md"), "not a dataset").unwrap();
        let d = root.path().join("alpha");
        std::fs::create_dir_all(d.join("sub/deeper")).unwrap();
        std::fs::write(d.join("SOURCE.txt"), "src").unwrap();
        std::fs::write(d.join("sub/deeper/z.txt"), "").unwrap();
        std::fs::write(d.join("b.gz"), [0u8, 1, 2]).unwrap();
        let metas = BTreeMap::from([("alpha".to_string(), meta("tsv"))]);
        let mut seen = 0;
        let lock = generate(root.path(), &metas, &mut |n| seen += n).unwrap();
        assert_eq!(seen, 6);
        assert_eq!(lock.names(), ["alpha"]);
        let paths: Vec<_> = lock.dataset[0]
            .file
            .iter()
            .map(|f| f.path.as_str())
            .collect();
        assert_eq!(paths, ["SOURCE.txt", "b.gz", "sub/deeper/z.txt"]);
        assert_eq!(lock.dataset[0].file[1].bytes, 3);
        assert_eq!(
            lock.dataset[0].file[2].sha256,
            harness_core::fsutil::sha256_hex(b"")
        );
        let text = lock.render();
        let back = Lock::parse(&text, "x".into()).unwrap();
        assert_eq!(back, lock);
    }

    #[test]
    fn folder_without_metadata_and_metadata_without_folder_are_errors() {
        let root = tempfile::tempdir().unwrap();
        std::fs::create_dir(root.path().join("alpha")).unwrap();
        let err = generate(root.path(), &BTreeMap::new(), &mut |_| {}).unwrap_err();
        assert!(err.to_string().contains("[alpha]"), "{err}");
        let metas = BTreeMap::from([
            ("alpha".to_string(), meta("tsv")),
            ("beta".to_string(), meta("tsv")),
        ]);
        let err = generate(root.path(), &metas, &mut |_| {}).unwrap_err();
        assert!(err.to_string().contains("[beta]"), "{err}");
    }

    #[test]
    fn committed_meta_file_parses() {
        let path = harness_core::repo_root().join("datasets.meta.toml");
        let meta = read_meta(&path).unwrap();
        assert_eq!(meta.len(), 21);
    }
}
