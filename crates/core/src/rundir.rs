//! The run directory (DESIGN.md, "The run directory"): where a run lives, who may use it,
//! and the two files that say what it is.
//!
//! ```text
//! runs/<name>[-<profile>]-<fingerprint8>/
//!   recipe.resolved.yaml   the recipe as run (base ⊕ profile ⊕ --set, defaults filled)
//!   env.json               harness version, git commit, backend, device, threads, datasets digest
//!   .lock                  the pid of the one process using it
//!   results/, report/, checkpoints/, train/ ...   written by the layers above
//! ```
//! Training, benchmarks and reports use it from above; [`RunDir::record`] is the one writer
//! of `env.json` and `recipe.resolved.yaml`.

use crate::fsutil::write_atomic;
use serde::Serialize;
use std::path::{Path, PathBuf};

/// Why a run directory cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum RunDirError {
    #[error("{0}")]
    Refused(String),
    #[error("{path}: {source}")]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
}

fn io(path: &Path, source: std::io::Error) -> RunDirError {
    RunDirError::Io {
        path: path.to_path_buf(),
        source,
    }
}

macro_rules! bail {
    ($($t:tt)*) => {
        return Err(RunDirError::Refused(format!($($t)*)))
    };
}

/// `env.json`: where and with what a run happened.
#[derive(Debug, Clone, Serialize, serde::Deserialize)]
pub struct RunEnv {
    /// harness version (Cargo.toml).
    pub harness_version: String,
    /// Git commit the binary was built from (`-dirty` with local changes), or `unknown`.
    pub git_commit: String,
    /// Recipe name and fingerprint.
    pub recipe: String,
    pub recipe_fingerprint: String,
    /// Profile applied, if any.
    pub profile: Option<String>,
    /// `--set` overrides applied after the profile, in order (absent when none). A run with
    /// overrides is not the recipe's own system in reports.
    #[serde(skip_serializing_if = "Vec::is_empty", default)]
    pub overrides: Vec<String>,
    /// Compute backend and device of training and encoding.
    pub backend: String,
    pub device: String,
    /// Worker threads (rayon).
    pub threads: usize,
    /// sha256 of the embedded `datasets.lock`.
    pub datasets: String,
    /// Operating system and CPU architecture.
    pub os: String,
    /// Start of the run (UTC, RFC 3339).
    pub started: String,
}

impl RunEnv {
    /// The `env.json` of run directory `dir`, typed; `Ok(None)` when there is none.
    pub fn read(dir: &Path) -> Result<Option<RunEnv>, RunDirError> {
        let p = dir.join("env.json");
        let text = match std::fs::read_to_string(&p) {
            Ok(t) => t,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(io(&p, e)),
        };
        serde_json::from_str(&text).map(Some).map_err(|e| {
            RunDirError::Refused(format!(
                "{}: not an env.json harness wrote ({e}). Fix: move the file away; `harness run` writes it again",
                p.display()
            ))
        })
    }

    /// The environment of a run starting now on the CPU (training sets `backend` and
    /// `device`): recipe name, fingerprint, profile, `--set` overrides and the digest of the
    /// datasets lock come from the layers above.
    pub fn new(
        recipe: &str,
        recipe_fingerprint: &str,
        profile: Option<String>,
        overrides: &[String],
        datasets: String,
    ) -> Self {
        RunEnv {
            harness_version: crate::VERSION.to_string(),
            git_commit: crate::git_commit().to_string(),
            recipe: recipe.to_string(),
            recipe_fingerprint: recipe_fingerprint.to_string(),
            profile,
            overrides: overrides.to_vec(),
            backend: "cpu".into(),
            device: "cpu".into(),
            threads: rayon_threads(),
            datasets,
            os: format!("{}-{}", std::env::consts::OS, std::env::consts::ARCH),
            started: utc_now(),
        }
    }
}

/// Worker threads of the global pool: `RAYON_NUM_THREADS`, else the machine's cores (what
/// rayon uses; read here so this crate needs no rayon).
fn rayon_threads() -> usize {
    std::env::var("RAYON_NUM_THREADS")
        .ok()
        .and_then(|v| v.parse().ok())
        .filter(|n| *n > 0)
        .unwrap_or_else(|| std::thread::available_parallelism().map_or(1, |n| n.get()))
}

/// The default run directory of a resolved recipe: `<runs_dir>/<name>[-<profile>]-<fp8>`
/// (`fingerprint8`: the fingerprint's short form).
pub fn default_dir(
    runs_dir: &Path,
    name: &str,
    profile: Option<&str>,
    fingerprint8: &str,
) -> PathBuf {
    let mut dir = safe_name(name);
    if let Some(p) = profile {
        dir.push('-');
        dir.push_str(&safe_name(p));
    }
    runs_dir.join(format!("{dir}-{fingerprint8}"))
}

/// `s` with anything but letters, digits, `-`, `_` and `.` replaced by `_`.
pub fn safe_name(s: &str) -> String {
    s.chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.') {
                c
            } else {
                '_'
            }
        })
        .collect()
}

/// Whether `dir` is a harness run directory: the first files every run writes into it
/// (`.lock`, `recipe.resolved.yaml`, `env.json`).
fn is_run_dir(dir: &Path) -> bool {
    let env_ok = std::fs::read_to_string(dir.join("env.json"))
        .ok()
        .and_then(|t| serde_json::from_str::<serde_json::Value>(&t).ok())
        .is_some_and(|v| v.get("harness_version").is_some());
    // The lock holds `PID [START]` (the holder's start time since a70012f).
    let lock_ok = std::fs::read_to_string(dir.join(".lock")).is_ok_and(|t| {
        t.split_whitespace()
            .next()
            .is_some_and(|pid| pid.parse::<u32>().is_ok())
    });
    // A run killed before its first record leaves only its own temporary files.
    let only_ours = std::fs::read_dir(dir).is_ok_and(|d| {
        d.filter_map(Result::ok).all(|e| {
            let n = e.file_name().to_string_lossy().into_owned();
            n == ".lock" || (n.starts_with(".harness-") && n.ends_with(".tmp"))
        })
    });
    env_ok || lock_ok || only_ours || dir.join("recipe.resolved.yaml").is_file()
}

/// A run directory (`--out DIR` of `run` and `train`) must be new, empty, or a harness run
/// directory: harness never writes its files among someone else's.
pub fn claim(dir: &Path) -> Result<(), RunDirError> {
    let Ok(entries) = std::fs::read_dir(dir) else {
        if dir.exists() {
            bail!(
                "{}: not a directory. Fix: name a new or empty directory with --out",
                dir.display()
            );
        }
        return Ok(());
    };
    let mut names: Vec<String> = entries
        .filter_map(Result::ok)
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect();
    if names.is_empty() || is_run_dir(dir) {
        return Ok(());
    }
    names.sort();
    let more = names.len().saturating_sub(3);
    names.truncate(3);
    bail!(
        "{}: this directory holds files harness did not write ({}{}) and is not a harness run directory; nothing was written. Fix: name a new or empty directory with --out, or leave --out out (runs/<recipe>-<fingerprint8>)",
        dir.display(),
        names.join(", "),
        if more > 0 {
            format!(" and {more} more")
        } else {
            String::new()
        }
    )
}

/// A claimed, locked run directory.
pub struct RunDir {
    path: PathBuf,
    _lock: RunLock,
}

impl RunDir {
    /// Claims `path` ([`claim`]), creates it and takes its lock.
    pub fn open(path: &Path) -> Result<RunDir, RunDirError> {
        claim(path)?;
        std::fs::create_dir_all(path).map_err(|e| io(path, e))?;
        let lock = RunLock::acquire(path)?;
        Ok(RunDir {
            path: path.to_path_buf(),
            _lock: lock,
        })
    }

    /// The directory.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Writes `recipe.resolved.yaml` and `env.json`: the one writer of both.
    pub fn record(&self, resolved_yaml: &str, env: &RunEnv) -> Result<(), RunDirError> {
        let p = self.path.join("recipe.resolved.yaml");
        write_atomic(&p, resolved_yaml.as_bytes()).map_err(|e| io(&p, e))?;
        let p = self.path.join("env.json");
        let mut text =
            serde_json::to_string_pretty(env).map_err(|e| io(&p, std::io::Error::other(e)))?;
        text.push('\n');
        write_atomic(&p, text.as_bytes()).map_err(|e| io(&p, e))
    }
}

/// Exclusive use of a run directory: `<dir>/.lock` created with `create_new`, holding the
/// owner's pid, removed on drop. A lock whose process is gone (Linux: no `/proc/<pid>`) is
/// taken over, so a killed run does not block the next one.
pub struct RunLock {
    path: PathBuf,
}

impl RunLock {
    /// Takes the lock or explains who holds it.
    pub fn acquire(dir: &Path) -> Result<RunLock, RunDirError> {
        let path = dir.join(".lock");
        for _ in 0..2 {
            match std::fs::OpenOptions::new()
                .write(true)
                .create_new(true)
                .open(&path)
            {
                Ok(mut f) => {
                    use std::io::Write;
                    // The pid and its start time: a later process that reuses the pid (after
                    // a reboot or a container restart) is told apart by its start time.
                    let me = std::process::id();
                    let started = process_start(me).map_or(String::new(), |t| format!(" {t}"));
                    writeln!(f, "{me}{started}").map_err(|e| io(&path, e))?;
                    return Ok(RunLock { path });
                }
                Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {
                    let owner = std::fs::read_to_string(&path).unwrap_or_default();
                    let mut fields = owner.split_whitespace();
                    let pid = fields.next().and_then(|p| p.parse::<u32>().ok());
                    let recorded_start = fields.next().and_then(|t| t.parse::<u64>().ok());
                    let alive = pid.is_some_and(|p| holder_alive(p, recorded_start));
                    if alive || !Path::new("/proc/self").exists() {
                        bail!(
                            "{}: another harness process (pid {}) is using this run directory. \
                             Fix: wait for it to finish, or run with --out DIR elsewhere; if no \
                             such process exists, delete the lock file",
                            path.display(),
                            pid.map_or("unknown".into(), |p| p.to_string())
                        );
                    }
                    // Stale: its owner was killed. Remove and retry once.
                    let _ = std::fs::remove_file(&path);
                }
                Err(e) => {
                    return Err(io(&path, e));
                }
            }
        }
        bail!("{}: could not take the run lock", path.display())
    }
}

/// The start time of process `pid` (clock ticks since boot, `/proc/PID/stat` field 22), on
/// Linux; `None` elsewhere or when the process does not exist.
fn process_start(pid: u32) -> Option<u64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // Field 2 (the command) is in parentheses and may hold spaces: count after the last `)`.
    let rest = &stat[stat.rfind(')')? + 1..];
    rest.split_whitespace().nth(19)?.parse().ok()
}

/// Whether process `pid` is a zombie (`/proc/PID/stat` state `Z`): dead, not yet reaped.
fn zombie(pid: u32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .ok()
        .and_then(|stat| {
            let rest = stat[stat.rfind(')')? + 1..].to_string();
            rest.split_whitespace().next().map(|s| s == "Z")
        })
        .unwrap_or(false)
}

/// Whether the lock's holder still runs: its pid exists and, when the lock recorded one, with
/// the same start time (else the pid was reused by another process and the lock is stale).
fn holder_alive(pid: u32, recorded_start: Option<u64>) -> bool {
    if !Path::new(&format!("/proc/{pid}")).exists() {
        return false;
    }
    // A killed holder whose parent has not reaped it yet (a container's pid 1 may never
    // reap) is a zombie: it still has a /proc entry but holds nothing.
    if zombie(pid) {
        return false;
    }
    match (recorded_start, process_start(pid)) {
        (Some(recorded), Some(now)) => recorded == now,
        _ => true,
    }
}

impl Drop for RunLock {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.path);
    }
}

/// Current UTC time as RFC 3339 (`2026-11-22T16:20:00Z`), from the system clock.
pub fn utc_now() -> String {
    rfc3339(crate::clock::unix_secs(std::time::SystemTime::now()))
}

fn rfc3339(secs: i64) -> String {
    let (year, month, day, h, m, sec) = crate::clock::civil(secs);
    format!("{year:04}-{month:02}-{day:02}T{h:02}:{m:02}:{sec:02}Z")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rfc3339_matches_known_instants() {
        assert_eq!(rfc3339(0), "1970-01-01T00:00:00Z");
        assert_eq!(rfc3339(951_782_400), "2000-02-29T00:00:00Z");
        assert_eq!(rfc3339(1_795_350_896), "2026-11-22T12:34:56Z");
    }

    #[test]
    fn a_second_lock_on_the_same_directory_is_refused_and_released_on_drop() {
        let dir = tempfile::tempdir().unwrap();
        let first = RunLock::acquire(dir.path()).unwrap();
        let err = RunLock::acquire(dir.path()).err().unwrap().to_string();
        assert!(
            err.contains(".lock") && err.contains("another harness process"),
            "{err}"
        );
        drop(first);
        RunLock::acquire(dir.path()).unwrap();
    }

    #[test]
    fn a_lock_whose_pid_was_reused_by_another_process_is_taken_over() {
        let dir = tempfile::tempdir().unwrap();
        // A live process (this test) with another start time than the one recorded: the
        // recorded holder is gone and its pid now names someone else.
        let me = std::process::id();
        let start = process_start(me).expect("a Linux /proc");
        std::fs::write(dir.path().join(".lock"), format!("{me} {}\n", start + 1)).unwrap();
        RunLock::acquire(dir.path()).unwrap();
        // The same pid with its true start time is a live holder.
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join(".lock"), format!("{me} {start}\n")).unwrap();
        assert!(RunLock::acquire(dir.path()).is_err());
    }

    #[test]
    fn a_lock_left_by_a_dead_process_is_taken_over() {
        let dir = tempfile::tempdir().unwrap();
        // pid 0 never names a user process, so no /proc/0 exists.
        std::fs::write(dir.path().join(".lock"), "0\n").unwrap();
        RunLock::acquire(dir.path()).unwrap();
    }

    #[test]
    fn a_run_killed_before_its_first_record_can_be_claimed_again() {
        // What a killed run leaves: its lock (`PID START`) and a temporary file.
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join(".lock"), "0 12345\n").unwrap();
        std::fs::write(dir.path().join(".harness-AbC123.tmp"), "half").unwrap();
        claim(dir.path()).unwrap();
        std::fs::remove_file(dir.path().join(".lock")).unwrap();
        claim(dir.path()).unwrap();
        // Anything else is someone else's.
        std::fs::write(dir.path().join("notes.txt"), "mine").unwrap();
        let err = claim(dir.path()).unwrap_err().to_string();
        assert!(err.contains("notes.txt"), "{err}");
    }

    #[test]
    fn a_zombie_holds_no_lock() {
        // A child that exited and is not reaped yet is a zombie.
        let child = std::process::Command::new("true").spawn().unwrap();
        let pid = child.id();
        std::thread::sleep(std::time::Duration::from_millis(200));
        assert!(zombie(pid));
        assert!(!holder_alive(pid, None));
        drop(child);
        assert!(!zombie(std::process::id()));
    }
}
