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

use crate::nofollow::write_atomic;
use serde::Serialize;
use std::path::{Path, PathBuf};

/// Why a run directory cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum RunDirError {
    #[error("{0}")]
    Refused(String),
    /// Another process holds the directory's lock.
    #[error("{}: another harness process (pid {}) is using this run directory. Fix: wait for it to finish, or run with --out DIR elsewhere", .lock.display(), .pid.map_or("unknown".into(), |p| p.to_string()))]
    Busy { lock: PathBuf, pid: Option<u32> },
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
    /// The instruction set the CPU kernels ran (`avx512`, `avx2`, `portable`; with the
    /// reason when `HARNESS_ISA` narrowed it). Empty in runs recorded before it was kept.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub isa: String,
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
            isa: String::new(),
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
    let lock = dir.join(".lock");
    let plain_lock = std::fs::symlink_metadata(&lock).is_ok_and(|m| m.is_file());
    let lock_ok = plain_lock
        && std::fs::read_to_string(&lock).is_ok_and(|t| {
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

    /// Opens `path` ([`RunDir::open`]) for the recipe `recipe` of fingerprint `fingerprint`:
    /// a run directory is bound to one resolved recipe, so one that `env.json` says holds
    /// another's run is refused before anything is written, naming both (its results would
    /// otherwise be reported as this recipe's).
    pub fn open_for(path: &Path, recipe: &str, fingerprint: &str) -> Result<RunDir, RunDirError> {
        let dir = RunDir::open(path)?;
        if let Some(env) = RunEnv::read(path)? {
            if env.recipe_fingerprint != fingerprint {
                let short = |f: &str| f.chars().take(8).collect::<String>();
                bail!(
                    "{}: this run directory holds a run of recipe `{}` (fingerprint {}), not of `{recipe}` ({}); one run directory holds one resolved recipe, and nothing was written. Fix: leave --out out (runs/<recipe>-<fingerprint8>), or name a new directory with --out",
                    path.join("env.json").display(),
                    crate::terminal::terminal_safe(&env.recipe),
                    short(&env.recipe_fingerprint),
                    short(fingerprint),
                );
            }
        }
        Ok(dir)
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

/// Exclusive use of a run directory: an advisory lock (`flock`) on `<dir>/.lock`, held by
/// the open file for as long as this value lives; the file holds the owner's pid (and start
/// time) for people and is removed on drop. The kernel releases the lock when its holder
/// dies, however it dies, so a killed run never blocks the next one, and two processes
/// that find a stale lock file cannot both take it (the lock is taken on the open file,
/// not decided by reading and rewriting it).
pub struct RunLock {
    path: PathBuf,
    _file: std::fs::File,
}

impl RunLock {
    /// Takes the lock or explains who holds it.
    pub fn acquire(dir: &Path) -> Result<RunLock, RunDirError> {
        use std::io::Write;
        let path = dir.join(".lock");
        // A holder that releases the lock removes the file first: a process that opened
        // the old file and locked it after that holds a lock on nothing, and tries again.
        for _ in 0..16 {
            let mut file = open_lock_file(&path)?;
            if !try_lock_exclusive(&file).map_err(|e| io(&path, e))? {
                let owner = std::fs::read_to_string(&path).unwrap_or_default();
                let pid = owner
                    .split_whitespace()
                    .next()
                    .and_then(|p| p.parse::<u32>().ok());
                return Err(RunDirError::Busy { lock: path, pid });
            }
            if !still_at(&file, &path) {
                continue;
            }
            // The pid and its start time, for people (`ps`) and `is_run_dir`.
            let me = std::process::id();
            let started = process_start(me).map_or(String::new(), |t| format!(" {t}"));
            file.set_len(0).map_err(|e| io(&path, e))?;
            writeln!(file, "{me}{started}").map_err(|e| io(&path, e))?;
            return Ok(RunLock { path, _file: file });
        }
        bail!("{}: could not take the run lock", path.display())
    }
}

/// Opens (creating it if missing) the lock file `path` without following a link: created
/// with `O_CREAT | O_EXCL | O_NOFOLLOW`, or, when one is there (a killed run's), opened with
/// `O_NOFOLLOW` and used only if it is a plain file of this user with no other name. A link,
/// a hard link to another file, a special file or another user's file is refused: harness
/// writes its pid into the lock, and must never write it into someone else's file.
#[cfg(unix)]
fn open_lock_file(path: &Path) -> Result<std::fs::File, RunDirError> {
    use rustix::fs::{FileType, Mode, OFlags};
    let flags = OFlags::RDWR | OFlags::NOFOLLOW | OFlags::CLOEXEC | OFlags::NONBLOCK;
    let refuse = |what: &str| {
        RunDirError::Refused(format!(
            "{}: {what} is where harness keeps the run's lock; harness never writes into it. Fix: remove it, or run with --out DIR elsewhere",
            path.display()
        ))
    };
    let fd = match rustix::fs::open(
        path,
        flags | OFlags::CREATE | OFlags::EXCL,
        Mode::from_raw_mode(0o644),
    ) {
        Ok(fd) => fd,
        Err(rustix::io::Errno::EXIST) => match rustix::fs::open(path, flags, Mode::empty()) {
            Ok(fd) => fd,
            Err(rustix::io::Errno::LOOP) => return Err(refuse("a symbolic link")),
            Err(e) => return Err(io(path, e.into())),
        },
        Err(e) => return Err(io(path, e.into())),
    };
    let st = rustix::fs::fstat(&fd).map_err(|e| io(path, e.into()))?;
    if FileType::from_raw_mode(st.st_mode) != FileType::RegularFile {
        return Err(refuse("a special file (fifo, device or socket)"));
    }
    if st.st_nlink != 1 {
        return Err(refuse("a file with another name (a hard link)"));
    }
    if st.st_uid != rustix::process::geteuid().as_raw() {
        return Err(refuse("another user's file"));
    }
    Ok(std::fs::File::from(fd))
}

#[cfg(not(unix))]
fn open_lock_file(path: &Path) -> Result<std::fs::File, RunDirError> {
    if std::fs::symlink_metadata(path).is_ok_and(|m| !m.is_file()) {
        bail!(
            "{}: something other than a file is where harness keeps the run's lock. Fix: remove it",
            path.display()
        );
    }
    std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(false)
        .open(path)
        .map_err(|e| io(path, e))
}

/// `flock(LOCK_EX | LOCK_NB)`: `Ok(false)` when another open file holds the lock. By hand:
/// one call, not worth a crate.
#[cfg(unix)]
fn try_lock_exclusive(file: &std::fs::File) -> std::io::Result<bool> {
    use std::os::unix::io::AsRawFd;
    // SAFETY: flock on a file descriptor this `File` owns and keeps open.
    if unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) } == 0 {
        return Ok(true);
    }
    let e = std::io::Error::last_os_error();
    if e.raw_os_error() == Some(libc::EWOULDBLOCK) {
        Ok(false)
    } else {
        Err(e)
    }
}

#[cfg(not(unix))]
fn try_lock_exclusive(_: &std::fs::File) -> std::io::Result<bool> {
    Ok(true)
}

/// Whether `path` still names the file `file` has open (it was not removed or replaced
/// between the open and the lock).
#[cfg(unix)]
fn still_at(file: &std::fs::File, path: &Path) -> bool {
    use std::os::unix::fs::MetadataExt;
    match (file.metadata(), std::fs::symlink_metadata(path)) {
        (Ok(a), Ok(b)) => a.dev() == b.dev() && a.ino() == b.ino(),
        _ => false,
    }
}

#[cfg(not(unix))]
fn still_at(_: &std::fs::File, path: &Path) -> bool {
    path.is_file()
}

/// The start time of process `pid` (clock ticks since boot, `/proc/PID/stat` field 22), on
/// Linux; `None` elsewhere or when the process does not exist.
fn process_start(pid: u32) -> Option<u64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // Field 2 (the command) is in parentheses and may hold spaces: count after the last `)`.
    let rest = &stat[stat.rfind(')')? + 1..];
    rest.split_whitespace().nth(19)?.parse().ok()
}

impl Drop for RunLock {
    fn drop(&mut self) {
        // Removed while still locked (the file closes after this), see `acquire`.
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

    /// A `.lock` that is a link (or a hard link, or a fifo) is refused and the file it
    /// points to keeps its bytes: harness's pid is never written into someone else's file.
    #[cfg(unix)]
    #[test]
    fn a_lock_that_is_a_link_or_a_special_file_is_refused_and_its_target_untouched() {
        let t = tempfile::tempdir().unwrap();
        let victim = t.path().join("victim");
        std::fs::write(&victim, "secret").unwrap();
        let run = t.path().join("run");
        std::fs::create_dir(&run).unwrap();
        std::os::unix::fs::symlink(&victim, run.join(".lock")).unwrap();
        let err = RunDir::open(&run).err().unwrap().to_string();
        assert!(
            err.contains("symbolic link") && err.contains(".lock"),
            "{err}"
        );
        std::fs::remove_file(run.join(".lock")).unwrap();
        std::fs::hard_link(&victim, run.join(".lock")).unwrap();
        let err = RunLock::acquire(&run).err().unwrap().to_string();
        assert!(err.contains("hard link"), "{err}");
        assert_eq!(std::fs::read_to_string(&victim).unwrap(), "secret");
        std::fs::remove_file(run.join(".lock")).unwrap();
        rustix::fs::mknodat(
            rustix::fs::CWD,
            run.join(".lock"),
            rustix::fs::FileType::Fifo,
            rustix::fs::Mode::from_raw_mode(0o644),
            0,
        )
        .unwrap();
        let err = RunLock::acquire(&run).err().unwrap().to_string();
        assert!(err.contains("special file"), "{err}");
    }

    /// A lock file is only a note: whatever it says (a dead pid, this process's own pid,
    /// the older pid-only format), nobody holds the lock, and it is taken.
    #[test]
    fn a_lock_file_nobody_holds_is_taken_whatever_it_says() {
        let me = std::process::id();
        for text in [
            "0\n".to_string(),
            format!("{me}\n"),
            format!("{me} 1\n"),
            String::new(),
        ] {
            let dir = tempfile::tempdir().unwrap();
            std::fs::write(dir.path().join(".lock"), &text).unwrap();
            let lock = RunLock::acquire(dir.path()).unwrap();
            let written = std::fs::read_to_string(dir.path().join(".lock")).unwrap();
            assert!(
                written.starts_with(&format!("{me}")),
                "{text:?} -> {written:?}"
            );
            drop(lock);
            assert!(!dir.path().join(".lock").exists());
        }
    }

    /// Many takers racing for a directory with a stale lock file: at every moment at most
    /// one holds it, and each gets it in turn.
    #[test]
    fn racing_takers_hold_the_lock_one_at_a_time() {
        use std::sync::atomic::{AtomicUsize, Ordering};
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join(".lock"), "0 12345\n").unwrap();
        let holders = AtomicUsize::new(0);
        let most = AtomicUsize::new(0);
        let taken = AtomicUsize::new(0);
        std::thread::scope(|s| {
            for _ in 0..8 {
                s.spawn(|| {
                    for _ in 0..200 {
                        if let Ok(lock) = RunLock::acquire(dir.path()) {
                            let now = holders.fetch_add(1, Ordering::SeqCst) + 1;
                            most.fetch_max(now, Ordering::SeqCst);
                            taken.fetch_add(1, Ordering::SeqCst);
                            std::thread::yield_now();
                            holders.fetch_sub(1, Ordering::SeqCst);
                            drop(lock);
                        }
                    }
                });
            }
        });
        assert_eq!(most.load(Ordering::SeqCst), 1);
        assert!(taken.load(Ordering::SeqCst) > 0);
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
}
