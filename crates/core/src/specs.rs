//! Where benchmark declarations and table specs come from at run time. The shipped files
//! (`benchmarks/*.yaml`, `benchmarks/tables/*.yaml`) are compiled into the binary as the
//! default; at run time a `benchmarks/` folder in the current directory (a checkout, or a
//! user's own copy) replaces shipped files of the same name and adds new ones, and the files
//! given with `--spec FILE` (a declaration or a table spec, or a folder of them) come last. So
//! a user adds a table or a benchmark without rebuilding.
//!
//! The binary records the `--spec` files once at start ([`set_extra`]); the registry
//! (harness-bench) and the table specs (harness-report) read them through [`runtime_files`].

use std::path::{Path, PathBuf};
use std::sync::OnceLock;

static EXTRA: OnceLock<Vec<PathBuf>> = OnceLock::new();

/// Records the `--spec` paths (the first call wins).
pub fn set_extra(paths: Vec<PathBuf>) {
    let _ = EXTRA.set(paths);
}

/// The `--spec` paths recorded at start.
pub fn extra() -> &'static [PathBuf] {
    EXTRA.get().map_or(&[], Vec::as_slice)
}

/// Which kind of file a spec file is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// `benchmarks/<name>.yaml` (or `groups.yaml`).
    Benchmark,
    /// `benchmarks/tables/<name>.yaml`.
    Table,
}

/// One file read at run time: its name (`xnli.yaml`), text and path.
#[derive(Debug, Clone)]
pub struct RuntimeFile {
    pub name: String,
    pub text: String,
    pub path: PathBuf,
}

impl RuntimeFile {
    fn new(path: PathBuf, text: String) -> RuntimeFile {
        RuntimeFile {
            name: path
                .file_name()
                .unwrap_or_default()
                .to_string_lossy()
                .into_owned(),
            text,
            path,
        }
    }
}

/// A spec file that cannot be used: the file and why.
#[derive(Debug, Clone, thiserror::Error)]
#[error("{path}: {detail}")]
pub struct SpecFileError {
    pub path: PathBuf,
    pub detail: String,
}

fn yaml_files(dir: &Path) -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = std::fs::read_dir(dir)
        .map(|d| {
            d.filter_map(|e| e.ok().map(|e| e.path()))
                .filter(|p| p.is_file() && p.extension().is_some_and(|e| e == "yaml"))
                .collect()
        })
        .unwrap_or_default();
    v.sort();
    v
}

/// The kind of a `--spec` file from its content: a table spec has `title:` and `columns`,
/// `columns_from` or `rows`; a declaration has `protocol:`.
fn kind_of(text: &str) -> Option<Kind> {
    let top = |key: &str| text.lines().any(|l| l.starts_with(&format!("{key}:")));
    if top("protocol") {
        Some(Kind::Benchmark)
    } else if top("title") && (top("columns") || top("columns_from") || top("rows")) {
        Some(Kind::Table)
    } else {
        None
    }
}

/// The run-time files of `kind`, in the order they apply: `./benchmarks/` (or
/// `./benchmarks/tables/`), then the `--spec` files of that kind.
pub fn runtime_files(kind: Kind) -> Result<Vec<RuntimeFile>, SpecFileError> {
    let mut out = Vec::new();
    let read = |p: &Path| {
        crate::fsutil::read_text_capped(p, crate::fsutil::MAX_CONFIG_BYTES).map_err(|e| {
            SpecFileError {
                path: p.to_path_buf(),
                detail: format!("cannot read it: {e}"),
            }
        })
    };
    let local = match kind {
        Kind::Benchmark => PathBuf::from("benchmarks"),
        Kind::Table => PathBuf::from("benchmarks").join("tables"),
    };
    for p in yaml_files(&local) {
        let text = read(&p)?;
        out.push(RuntimeFile::new(p, text));
    }
    for given in extra() {
        let files = if given.is_dir() {
            let mut v = yaml_files(given);
            v.extend(yaml_files(&given.join("tables")));
            v
        } else {
            vec![given.clone()]
        };
        for p in files {
            let text = read(&p)?;
            let Some(k) = kind_of(&text) else {
                return Err(SpecFileError {
                    path: p,
                    detail: "neither a benchmark declaration (a `protocol:` key) nor a table spec (`title:` with `columns:`, `columns_from:` or `rows:`). Fix: see benchmarks/tables/README.md and benchmarks/*.yaml".into(),
                });
            };
            if k == kind {
                out.push(RuntimeFile::new(p, text));
            }
        }
    }
    Ok(out)
}

/// `shipped` (name, text) pairs overlaid by `runtime` files: a file of the same name is
/// replaced, a new one added.
pub fn overlay(shipped: Vec<(String, String)>, runtime: Vec<RuntimeFile>) -> Vec<(String, String)> {
    let mut files = shipped;
    for f in runtime {
        match files.iter_mut().find(|(n, _)| *n == f.name) {
            Some(slot) => slot.1 = f.text,
            None => files.push((f.name, f.text)),
        }
    }
    files
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kinds_are_told_apart_by_their_keys() {
        assert_eq!(kind_of("name: x\nprotocol: sts\n"), Some(Kind::Benchmark));
        assert_eq!(
            kind_of("title: T\npaper: p\ncolumns:\n  - {key: a}\n"),
            Some(Kind::Table)
        );
        assert_eq!(kind_of("name: x\n"), None);
    }

    #[test]
    fn runtime_files_replace_shipped_ones_of_the_same_name() {
        let shipped = vec![
            ("a.yaml".to_string(), "old".to_string()),
            ("b.yaml".into(), "b".into()),
        ];
        let rt = vec![
            RuntimeFile {
                name: "a.yaml".into(),
                text: "new".into(),
                path: "x/a.yaml".into(),
            },
            RuntimeFile {
                name: "c.yaml".into(),
                text: "c".into(),
                path: "x/c.yaml".into(),
            },
        ];
        let got = overlay(shipped, rt);
        assert_eq!(
            got,
            vec![
                ("a.yaml".into(), "new".into()),
                ("b.yaml".into(), "b".into()),
                ("c.yaml".into(), "c".into())
            ]
        );
    }
}
