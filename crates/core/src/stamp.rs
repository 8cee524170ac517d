//! Verification stamps: which installed files were verified against their pinned sha256,
//! and the file-system identity each had then (size, modification and change times, inode).
//! Before a dataset or model is used, every file is `stat`ed and compared with its stamp;
//! only a file whose identity no longer matches is hashed again. This is how git's index and
//! build tools fingerprint sources: cheap on every use, and no write goes unnoticed, because
//! any write to a file moves its change time (`ctime`), which no unprivileged call can set
//! back (`touch -r` restores the modification time only).
//!
//! Written by hand because no maintained crate keeps a stat cache over pinned hashes; the
//! hashing itself is [`crate::fsutil::hash_file`] (`sha2`).

use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Instant;

/// One file that must match a pinned size and sha256.
#[derive(Debug, Clone)]
pub struct Pinned<'a> {
    /// Path relative to the store folder, `/`-separated (the stamp's key).
    pub rel: &'a str,
    /// Where the file is.
    pub path: PathBuf,
    pub bytes: u64,
    pub sha256: &'a str,
}

/// Why a pinned file cannot be used.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Failure {
    /// Nothing at the path.
    Missing,
    /// A directory (or another non-file) stands where the file belongs.
    NotAFile,
    /// The size differs from the pin.
    Size { found: u64 },
    /// Same size, other content.
    Content { found: String },
    /// The file cannot be read.
    Io(String),
}

impl std::fmt::Display for Failure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Failure::Missing => f.write_str("missing"),
            Failure::NotAFile => {
                f.write_str("not a regular file (a directory stands in its place)")
            }
            Failure::Size { found } => write!(f, "size changed to {found} bytes"),
            Failure::Content { found } => {
                write!(f, "content changed since it was installed (sha256 {found})")
            }
            Failure::Io(e) => write!(f, "cannot be read: {e}"),
        }
    }
}

/// A pinned file that failed its check.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Problem {
    pub rel: String,
    pub path: PathBuf,
    pub expected_bytes: u64,
    pub expected_sha256: String,
    pub failure: Failure,
}

/// What one check did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Checked {
    /// Files looked at.
    pub files: usize,
    /// Files hashed again because their stamp did not match.
    pub rehashed: usize,
    /// Bytes hashed again.
    pub rehashed_bytes: u64,
}

/// The identity a file had when it was verified.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
struct Identity {
    bytes: u64,
    mtime_ns: i128,
    ctime_ns: i128,
    inode: u64,
    device: u64,
    sha256: String,
}

impl Identity {
    fn of(meta: &std::fs::Metadata, sha256: &str) -> Identity {
        #[cfg(unix)]
        {
            use std::os::unix::fs::MetadataExt;
            Identity {
                bytes: meta.len(),
                mtime_ns: i128::from(meta.mtime()) * 1_000_000_000 + i128::from(meta.mtime_nsec()),
                ctime_ns: i128::from(meta.ctime()) * 1_000_000_000 + i128::from(meta.ctime_nsec()),
                inode: meta.ino(),
                device: meta.dev(),
                sha256: sha256.to_string(),
            }
        }
        #[cfg(not(unix))]
        {
            let mtime = meta
                .modified()
                .ok()
                .and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok())
                .map_or(0, |d| d.as_nanos() as i128);
            Identity {
                bytes: meta.len(),
                mtime_ns: mtime,
                ctime_ns: 0,
                inode: 0,
                device: 0,
                sha256: sha256.to_string(),
            }
        }
    }
}

/// The stamp file of one store folder.
#[derive(Debug, Default, Serialize, Deserialize)]
struct StampFile {
    version: u32,
    files: BTreeMap<String, Identity>,
}

const VERSION: u32 = 1;

/// Files changed more recently than this are hashed on every check until they are older.
const RACY_NS: i128 = 2_000_000_000;

/// Process-wide totals of every check (for the cost line `harness run` prints).
static FILES: AtomicU64 = AtomicU64::new(0);
static REHASHED: AtomicU64 = AtomicU64::new(0);
static REHASHED_BYTES: AtomicU64 = AtomicU64::new(0);
static NANOS: AtomicU64 = AtomicU64::new(0);

/// Totals of every [`check`] in this process: files checked, files re-hashed, bytes
/// re-hashed, and the time spent.
pub fn totals() -> (u64, u64, u64, std::time::Duration) {
    (
        FILES.load(Ordering::Relaxed),
        REHASHED.load(Ordering::Relaxed),
        REHASHED_BYTES.load(Ordering::Relaxed),
        std::time::Duration::from_nanos(NANOS.load(Ordering::Relaxed)),
    )
}

/// Checks every pinned file against the stamp at `stamp_path`: a file whose size, times and
/// inode equal its stamp passes without reading it; any other file is hashed, and passes
/// (its stamp renewed) only when it matches its pin. Returns every failing file, not only
/// the first. The stamp is rewritten atomically when it changed (and its folder exists:
/// see [`prepare`]); failing files are dropped from it, so they are hashed again next time.
pub fn check(stamp_path: &Path, files: &[Pinned]) -> Result<Checked, Vec<Problem>> {
    check_with(stamp_path, files, false, &mut |_| {}, RACY_NS)
}

/// [`check`] that hashes every file whatever its stamp (`harness datasets verify`), telling
/// `on_bytes` the size of each hashed chunk; the stamp is renewed for the files that pass.
pub fn verify_all(
    stamp_path: &Path,
    files: &[Pinned],
    on_bytes: &mut dyn FnMut(u64),
) -> Result<Checked, Vec<Problem>> {
    check_with(stamp_path, files, true, on_bytes, RACY_NS)
}

/// Whether every file still has the identity it was stamped with (nothing is hashed): the
/// state `list` commands show.
pub fn all_stamped(stamp_path: &Path, files: &[Pinned]) -> bool {
    let stamp = read(stamp_path);
    files.iter().all(|f| {
        std::fs::metadata(&f.path).is_ok_and(|m| {
            m.is_file() && stamp.files.get(f.rel) == Some(&Identity::of(&m, f.sha256))
        })
    })
}

fn check_with(
    stamp_path: &Path,
    files: &[Pinned],
    rehash_all: bool,
    on_bytes: &mut dyn FnMut(u64),
    racy_ns: i128,
) -> Result<Checked, Vec<Problem>> {
    let start = Instant::now();
    let now_ns = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as i128);
    let mut stamp = read(stamp_path);
    let mut changed = false;
    let mut done = Checked::default();
    let mut problems = Vec::new();
    for f in files {
        done.files += 1;
        let fail = |failure| Problem {
            rel: f.rel.to_string(),
            path: f.path.clone(),
            expected_bytes: f.bytes,
            expected_sha256: f.sha256.to_string(),
            failure,
        };
        let meta = match std::fs::metadata(&f.path) {
            Ok(m) => m,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                problems.push(fail(Failure::Missing));
                changed |= stamp.files.remove(f.rel).is_some();
                continue;
            }
            Err(e) => {
                problems.push(fail(Failure::Io(e.to_string())));
                changed |= stamp.files.remove(f.rel).is_some();
                continue;
            }
        };
        if !meta.is_file() {
            problems.push(fail(Failure::NotAFile));
            changed |= stamp.files.remove(f.rel).is_some();
            continue;
        }
        if meta.len() != f.bytes {
            problems.push(fail(Failure::Size { found: meta.len() }));
            changed |= stamp.files.remove(f.rel).is_some();
            continue;
        }
        let now = Identity::of(&meta, f.sha256);
        if !rehash_all && stamp.files.get(f.rel) == Some(&now) {
            continue;
        }
        done.rehashed += 1;
        done.rehashed_bytes += meta.len();
        match crate::fsutil::hash_file(&f.path, on_bytes).map(|(_, sha)| sha) {
            Ok(sha) if sha == f.sha256 => {
                // Stamp the identity seen before hashing: a write during the hash moves
                // ctime, so the next check hashes again. A file changed in the last two
                // seconds is not stamped at all: file-system clocks tick coarsely, and a
                // second write within the same tick would leave its times unchanged (git's
                // "racily clean" entries).
                if now.ctime_ns < now_ns - racy_ns {
                    stamp.files.insert(f.rel.to_string(), now);
                    changed = true;
                }
            }
            Ok(sha) => {
                problems.push(fail(Failure::Content { found: sha }));
                changed |= stamp.files.remove(f.rel).is_some();
            }
            Err(e) => {
                problems.push(fail(Failure::Io(e.to_string())));
                changed |= stamp.files.remove(f.rel).is_some();
            }
        }
    }
    // Stamps are kept only where the store keeps them already (the folder is made when
    // harness installs into the store): verifying a folder harness does not own, such as a
    // read-only mirror given as the data directory, writes nothing there.
    if changed && stamp_path.parent().is_some_and(Path::is_dir) {
        // Best effort: a stamp that cannot be written only costs a re-hash next time.
        stamp.version = VERSION;
        if let Ok(text) = serde_json::to_string(&stamp) {
            let _ = crate::nofollow::write_atomic(stamp_path, text.as_bytes());
        }
    }
    FILES.fetch_add(done.files as u64, Ordering::Relaxed);
    REHASHED.fetch_add(done.rehashed as u64, Ordering::Relaxed);
    REHASHED_BYTES.fetch_add(done.rehashed_bytes, Ordering::Relaxed);
    NANOS.fetch_add(start.elapsed().as_nanos() as u64, Ordering::Relaxed);
    if problems.is_empty() {
        Ok(done)
    } else {
        Err(problems)
    }
}

/// Makes the folder of `stamp_path`, so that checks keep stamps there: called by the
/// installers (`datasets fetch`, `models fetch`), which own the store they install into.
pub fn prepare(stamp_path: &Path) -> std::io::Result<()> {
    std::fs::create_dir_all(crate::fsutil::parent_dir(stamp_path))
}

/// Forgets the stamp (after a store folder was replaced wholesale).
pub fn forget(stamp_path: &Path) {
    let _ = std::fs::remove_file(stamp_path);
}

/// A stamp that is missing or unreadable counts as empty: everything is hashed again.
fn read(path: &Path) -> StampFile {
    std::fs::read(path)
        .ok()
        .and_then(|b| serde_json::from_slice::<StampFile>(&b).ok())
        .filter(|s| s.version == VERSION)
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pin<'a>(dir: &Path, rel: &'a str, content: &[u8], sha: &'a str) -> Pinned<'a> {
        Pinned {
            rel,
            path: dir.join(rel),
            bytes: content.len() as u64,
            sha256: sha,
        }
    }

    #[test]
    fn unchanged_files_are_not_hashed_again_and_a_flipped_byte_is_caught() {
        let dir = tempfile::tempdir().unwrap();
        let stamp = dir.path().join("stamps/stamp.json");
        // Without its folder, a check writes nothing (a store harness does not own).
        std::fs::write(dir.path().join("a.txt"), b"hello").unwrap();
        let sha0 = crate::fsutil::sha256_hex(b"hello");
        std::thread::sleep(std::time::Duration::from_millis(50));
        check_with(
            &stamp,
            &[pin(dir.path(), "a.txt", b"hello", &sha0)],
            false,
            &mut |_| {},
            0,
        )
        .unwrap();
        assert!(!dir.path().join("stamps").exists());
        prepare(&stamp).unwrap();
        let sha = crate::fsutil::sha256_hex(b"hello");
        let files = [pin(dir.path(), "a.txt", b"hello", &sha)];
        // A file written just now is hashed on every check (racily clean)...
        assert_eq!(check(&stamp, &files).unwrap().rehashed, 1);
        assert_eq!(check(&stamp, &files).unwrap().rehashed, 1);
        // ...and stamped once it is older than the clock's tick (here: no racy window).
        std::thread::sleep(std::time::Duration::from_millis(50));
        let first = check_with(&stamp, &files, false, &mut |_| {}, 0).unwrap();
        assert_eq!((first.files, first.rehashed), (1, 1));
        assert!(all_stamped(&stamp, &files));
        let second = check(&stamp, &files).unwrap();
        assert_eq!((second.files, second.rehashed), (1, 0), "stamp reused");
        // Same size, one byte flipped.
        std::fs::write(dir.path().join("a.txt"), b"hellp").unwrap();
        assert!(!all_stamped(&stamp, &files));
        let problems = check(&stamp, &files).unwrap_err();
        assert!(matches!(problems[0].failure, Failure::Content { .. }));
        // Restored content passes again (re-hashed).
        std::fs::write(dir.path().join("a.txt"), b"hello").unwrap();
        assert_eq!(check(&stamp, &files).unwrap().rehashed, 1);
    }

    #[test]
    fn missing_wrong_size_and_directory_are_each_reported() {
        let dir = tempfile::tempdir().unwrap();
        let stamp = dir.path().join("stamp.json");
        std::fs::write(dir.path().join("short"), b"abc").unwrap();
        std::fs::create_dir(dir.path().join("dir")).unwrap();
        let sha = crate::fsutil::sha256_hex(b"abcd");
        let files = [
            pin(dir.path(), "gone", b"abcd", &sha),
            pin(dir.path(), "short", b"abcd", &sha),
            pin(dir.path(), "dir", b"abcd", &sha),
        ];
        let problems = check(&stamp, &files).unwrap_err();
        let got: Vec<_> = problems.iter().map(|p| p.failure.clone()).collect();
        assert_eq!(
            got,
            [
                Failure::Missing,
                Failure::Size { found: 3 },
                Failure::NotAFile
            ]
        );
    }
}
