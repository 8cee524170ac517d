//! File-system helpers shared by every writer: all writes are atomic (temporary file in the
//! destination directory, then rename), so a killed process never leaves a half-written file.

use std::path::Path;

/// `e` restated as "the disk is full" when it is one (ENOSPC, EDQUOT), naming the free space
/// on the file system of `dir`; any other error as it is.
pub fn disk_full(e: std::io::Error, dir: &Path) -> std::io::Error {
    // The kind survives tempfile's wrapping of the error with its path; the raw code not.
    let full = matches!(
        e.kind(),
        std::io::ErrorKind::StorageFull | std::io::ErrorKind::QuotaExceeded
    );
    if !full {
        return e;
    }
    let free = free_space(dir).map_or(String::new(), |b| format!(": {b} bytes free"));
    std::io::Error::new(
        e.kind(),
        format!(
            "the disk is full{free} on the file system of {}; nothing was replaced. Fix: free space there, or write elsewhere",
            dir.display()
        ),
    )
}

/// Bytes an unprivileged process may still write on the file system holding `path`;
/// `None` where the platform does not say. By hand because std has no call for it and one
/// `statvfs` does not warrant a crate.
#[cfg(unix)]
pub fn free_space(path: &Path) -> Option<u64> {
    use std::os::unix::ffi::OsStrExt;
    let c = std::ffi::CString::new(path.as_os_str().as_bytes()).ok()?;
    let mut st = std::mem::MaybeUninit::<libc::statvfs>::uninit();
    // SAFETY: `c` is a NUL-terminated path and `st` is written by the call before it is read.
    let rc = unsafe { libc::statvfs(c.as_ptr(), st.as_mut_ptr()) };
    if rc != 0 {
        return None;
    }
    // SAFETY: statvfs returned 0, so it filled `st`.
    let st = unsafe { st.assume_init() };
    // The field types differ between platforms (u32 on some), hence the casts.
    #[allow(clippy::unnecessary_cast)]
    Some((st.f_bavail as u64).saturating_mul(st.f_frsize as u64))
}

#[cfg(not(unix))]
pub fn free_space(_: &Path) -> Option<u64> {
    None
}

/// A temporary file in `dir` for a write that is renamed into place, named
/// `.harness-<pid>-XXXXXX.tmp` after the process writing it, so that the leftovers of a
/// writer that died (SIGKILL, power loss) can be told from a live writer's and removed: the
/// first temporary file a process makes in a directory sweeps that directory
/// ([`remove_dead_temporaries`]).
pub fn temp_file_in(dir: &Path) -> std::io::Result<tempfile::NamedTempFile> {
    sweep_once(dir);
    tempfile::Builder::new()
        .prefix(&format!("{TEMP_PREFIX}{}-", std::process::id()))
        .suffix(TEMP_SUFFIX)
        .tempfile_in(dir)
}

const TEMP_PREFIX: &str = ".harness-";
const TEMP_SUFFIX: &str = ".tmp";

/// A temporary file of the older naming, without the writer's pid, is removed once it is
/// this old: no write of harness takes a day.
const UNNAMED_TEMP_AGE: std::time::Duration = std::time::Duration::from_secs(24 * 3600);

/// The name of a new temporary file of this process (`.harness-<pid>-<unique>.tmp`, as
/// [`remove_dead_temporaries`] expects); `attempt` varies it after a name clash.
pub(crate) fn temp_name(attempt: u32) -> String {
    use std::sync::atomic::{AtomicU64, Ordering};
    static NEXT: AtomicU64 = AtomicU64::new(0);
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.subsec_nanos());
    let n = NEXT.fetch_add(1, Ordering::Relaxed);
    format!(
        "{TEMP_PREFIX}{}-{nanos:08x}{n:x}{attempt:x}{TEMP_SUFFIX}",
        std::process::id()
    )
}

pub(crate) fn sweep_once(dir: &Path) {
    use std::collections::HashSet;
    use std::sync::{Mutex, OnceLock};
    static SWEPT: OnceLock<Mutex<HashSet<std::path::PathBuf>>> = OnceLock::new();
    let first = SWEPT
        .get_or_init(Default::default)
        .lock()
        .map(|mut s| s.insert(dir.to_path_buf()))
        .unwrap_or(false);
    if first {
        remove_dead_temporaries(dir);
    }
}

/// Removes from `dir` the temporary files of harness writers that are no longer running
/// (`.harness-<pid>-…tmp` whose process is gone on this machine; one of the older,
/// pid-less naming once a day old). Files of live writers, and every other file, are left
/// alone. Returns how many were removed. Best effort: a file that cannot be removed stays.
pub fn remove_dead_temporaries(dir: &Path) -> usize {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return 0;
    };
    let me = std::process::id();
    let mut removed = 0;
    for entry in entries.flatten() {
        let name = entry.file_name();
        let Some(name) = name.to_str() else { continue };
        let Some(rest) = name
            .strip_prefix(TEMP_PREFIX)
            .and_then(|r| r.strip_suffix(TEMP_SUFFIX))
        else {
            continue;
        };
        let Ok(meta) = entry.metadata() else { continue };
        if !meta.is_file() {
            continue;
        }
        let dead = match rest
            .split_once('-')
            .and_then(|(pid, _)| pid.parse::<u32>().ok())
        {
            Some(pid) => pid != me && !process_alive(pid),
            None => meta
                .modified()
                .ok()
                .and_then(|m| m.elapsed().ok())
                .is_some_and(|age| age > UNNAMED_TEMP_AGE),
        };
        if dead && std::fs::remove_file(entry.path()).is_ok() {
            removed += 1;
        }
    }
    removed
}

/// Whether process `pid` runs on this machine (a signal-0 probe; a process of another user
/// counts as running).
#[cfg(unix)]
pub fn process_alive(pid: u32) -> bool {
    let Ok(pid) = i32::try_from(pid) else {
        return false;
    };
    // SAFETY: kill with signal 0 only checks whether the process exists.
    let rc = unsafe { libc::kill(pid, 0) };
    rc == 0 || std::io::Error::last_os_error().raw_os_error() == Some(libc::EPERM)
}

/// Without a way to ask, every process counts as running (nothing is removed).
#[cfg(not(unix))]
pub fn process_alive(_pid: u32) -> bool {
    true
}

/// Why [`read_text_capped`] failed.
#[derive(Debug, thiserror::Error)]
pub enum CappedReadError {
    /// The file could not be read (or is not UTF-8).
    #[error("{0}")]
    Io(#[from] std::io::Error),
    /// It holds more than the cap (read no further than one byte past it).
    #[error("more than {0} bytes")]
    TooLarge(u64),
}

/// The most a hand-written configuration file (nightly configuration, acknowledgements,
/// table and benchmark specs) may hold: far above any real one, far below what a device
/// such as `/dev/zero` or a mistaken data file would make harness read.
pub const MAX_CONFIG_BYTES: u64 = 1 << 20;

/// Reads the UTF-8 text of `path`, refusing more than `cap` bytes without reading past
/// them: the size is counted while reading, since a pipe, a device (`/dev/zero`) or a file
/// growing meanwhile has no size to trust beforehand.
pub fn read_text_capped(path: &Path, cap: u64) -> Result<String, CappedReadError> {
    use std::io::Read;
    let file = std::fs::File::open(path)?;
    let mut bytes = Vec::new();
    file.take(cap + 1).read_to_end(&mut bytes)?;
    if bytes.len() as u64 > cap {
        return Err(CappedReadError::TooLarge(cap));
    }
    String::from_utf8(bytes)
        .map_err(|e| CappedReadError::Io(std::io::Error::new(std::io::ErrorKind::InvalidData, e)))
}

/// Gives a file written through `tempfile` (created 0600) the usual 0644 mode: results,
/// datasets, models and reports are meant to be read by others.
pub fn make_readable(file: &std::fs::File) -> std::io::Result<()> {
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        file.set_permissions(std::fs::Permissions::from_mode(0o644))?;
    }
    #[cfg(not(unix))]
    let _ = file;
    Ok(())
}

/// The directory a file lives in (`.` for a bare file name).
pub fn parent_dir(path: &Path) -> &Path {
    match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p,
        _ => Path::new("."),
    }
}

/// Size and lowercase hex sha256 of a file, read in chunks; `on_bytes` sees each chunk's
/// size (for a progress bar). The one file hasher of harness (datasets, models, stamps).
pub fn hash_file(path: &Path, on_bytes: &mut dyn FnMut(u64)) -> std::io::Result<(u64, String)> {
    use sha2::{Digest, Sha256};
    use std::io::Read;
    let mut file = std::fs::File::open(path)?;
    let mut hasher = Sha256::new();
    let mut buf = vec![0u8; 1 << 16];
    let mut total = 0u64;
    loop {
        let n = match file.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(e),
        };
        hasher.update(&buf[..n]);
        total += n as u64;
        on_bytes(n as u64);
    }
    Ok((total, hex::encode(hasher.finalize())))
}

/// Lowercase hex sha256 of a byte slice.
pub fn sha256_hex(bytes: &[u8]) -> String {
    use sha2::{Digest, Sha256};
    hex::encode(Sha256::digest(bytes))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::nofollow::write_atomic;

    /// A dead writer's temporary file goes at the next write into its directory; a live
    /// writer's (this process's, pid 1's), a fresh pid-less one and anyone else's file stay.
    #[test]
    fn temporaries_of_dead_writers_are_removed_and_no_others() {
        let dir = tempfile::tempdir().unwrap();
        // A pid above Linux's maximum (2^22) belongs to no process.
        let dead = dir.path().join(".harness-4194305-abc123.tmp");
        let mine = dir
            .path()
            .join(format!(".harness-{}-abc123.tmp", std::process::id()));
        let init = dir.path().join(".harness-1-abc123.tmp");
        let unnamed = dir.path().join(".harness-Xy12ab.tmp");
        let foreign = dir.path().join("notes.tmp");
        for p in [&dead, &mine, &init, &unnamed, &foreign] {
            std::fs::write(p, b"x").unwrap();
        }
        write_atomic(&dir.path().join("result.json"), b"{}").unwrap();
        assert!(!dead.exists());
        for p in [&mine, &init, &unnamed, &foreign] {
            assert!(p.exists(), "{}", p.display());
        }
        assert_eq!(remove_dead_temporaries(dir.path()), 0);
    }

    #[test]
    fn capped_reads_stop_past_the_cap_even_without_a_size() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("r.yaml");
        std::fs::write(&p, "a: 1\n").unwrap();
        assert_eq!(read_text_capped(&p, 5).unwrap(), "a: 1\n");
        assert!(matches!(
            read_text_capped(&p, 4),
            Err(CappedReadError::TooLarge(4))
        ));
        #[cfg(unix)]
        assert!(matches!(
            read_text_capped(Path::new("/dev/zero"), 1 << 20),
            Err(CappedReadError::TooLarge(_))
        ));
    }

    #[test]
    fn atomic_write_replaces_whole_file_and_leaves_no_temporaries() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("a.txt");
        write_atomic(&path, b"first").unwrap();
        write_atomic(&path, b"second").unwrap();
        assert_eq!(std::fs::read(&path).unwrap(), b"second");
        let names: Vec<_> = std::fs::read_dir(dir.path()).unwrap().collect();
        assert_eq!(names.len(), 1, "temporary files left behind");
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            let mode = std::fs::metadata(&path).unwrap().permissions().mode();
            assert_eq!(mode & 0o777, 0o644, "written files are readable by others");
        }
    }

    #[test]
    fn sha256_of_empty_input_is_the_known_constant() {
        assert_eq!(
            sha256_hex(b""),
            "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"
        );
    }
}
