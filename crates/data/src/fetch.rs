//! Installing datasets from mirrors (directories or http(s) URLs), verified against the lock.
//!
//! A mirror is laid out like `../shared/datasets`: `<mirror>/<dataset>/<path>`. For every file
//! the mirrors are tried in order; a copy is written to a temporary file beside its final
//! place, its size and sha256 are checked against `datasets.lock`, and only then is it renamed
//! into place. A copy that fails verification is reported and the next mirror is tried, so an
//! installed file is always one the lock vouches for. Downloads go to `<file>.part`, which is
//! kept when a transfer is cut and resumed with an HTTP `Range` request on the next attempt.

use super::lock::{hash_file, DatasetEntry, FileEntry, Lock};
use super::DataError;
use harness_core::progress::Bar;
use harness_core::settings::Settings;
use indicatif::ProgressBar;
use std::fmt;
use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::time::Duration;

/// Where dataset files can be fetched from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Mirror {
    /// A local directory with one folder per dataset.
    Dir(PathBuf),
    /// An http(s) base URL (no trailing `/`) with one folder per dataset.
    Http(String),
}

impl Mirror {
    /// `http://…` and `https://…` are URLs; anything else is a directory.
    pub fn parse(s: &str) -> Mirror {
        let lower = s.to_ascii_lowercase();
        if lower.starts_with("http://") || lower.starts_with("https://") {
            Mirror::Http(s.trim_end_matches('/').to_string())
        } else {
            Mirror::Dir(PathBuf::from(s))
        }
    }

    /// The mirrors configured in `settings`, in order.
    pub fn from_settings(settings: &Settings) -> Vec<Mirror> {
        settings.mirrors.iter().map(|m| Mirror::parse(m)).collect()
    }
}

impl fmt::Display for Mirror {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Mirror::Dir(p) => write!(f, "{}", p.display()),
            Mirror::Http(u) => f.write_str(u),
        }
    }
}

/// How `fetch_dataset` behaves.
#[derive(Debug, Clone, Copy, Default)]
pub struct FetchOptions {
    /// Fetch every file again even when the installed copy verifies (the installed copy is
    /// only replaced once the new one has verified).
    pub force: bool,
    /// Show a progress bar on stderr (only when stderr is a terminal).
    pub progress: bool,
}

/// What `fetch_dataset` did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct FetchReport {
    pub dataset: String,
    /// Files already installed and verified, left alone.
    pub already_present: usize,
    /// Files installed now: (path in the dataset, mirror it came from).
    pub installed: Vec<(String, String)>,
    /// Installed files that did not match the lock and were replaced by a verified copy.
    pub replaced_corrupt: Vec<String>,
    /// Directories that stood where a file belongs, removed (`--force` only).
    pub removed_directories: Vec<String>,
    /// Bytes copied or downloaded.
    pub bytes: u64,
    /// Mirrors that failed for some file although a later mirror served it (bad copies,
    /// broken transfers). Mirrors that merely lack a file are not listed.
    pub warnings: Vec<String>,
}

/// The folder of dataset `name` in the data directory of `settings`, installed and complete:
/// if any file is missing or has the wrong size (a cheap check, no hashing), the dataset is
/// fetched from the configured mirrors first. This is how a dataset is "fetched on first use".
pub fn ensure_dataset(settings: &Settings, name: &str) -> Result<PathBuf, DataError> {
    let lock = Lock::embedded()?;
    let entry = lock.get(name)?;
    ensure_entry(entry, &settings.data_dir, &Mirror::from_settings(settings))
}

/// [`ensure_dataset`] for an explicit lock entry, data directory and mirror list.
///
/// Every file is checked against its verification stamp (see [`harness_core::stamp`]): unchanged
/// files cost one `stat`, a file whose identity moved is hashed again. Missing files are
/// fetched; a file that changed, has the wrong size or is not a file is refused (all of them
/// named), never repaired behind the user's back: `harness datasets fetch NAME --force` is
/// the fix the error gives.
pub fn ensure_entry(
    entry: &DatasetEntry,
    data_dir: &Path,
    mirrors: &[Mirror],
) -> Result<PathBuf, DataError> {
    let dir = data_dir.join(&entry.name);
    let problems = match check_stamped(entry, data_dir) {
        Ok(_) => return Ok(dir),
        Err(p) => p,
    };
    let (missing, bad): (Vec<_>, Vec<_>) = problems
        .into_iter()
        .partition(|p| p.failure == harness_core::stamp::Failure::Missing);
    if !bad.is_empty() {
        return Err(changed_error(&entry.name, &bad));
    }
    let state = if missing.len() == entry.file.len() {
        "missing".to_string()
    } else {
        format!("missing {} of {} files", missing.len(), entry.file.len())
    };
    harness_core::note!(
        "dataset `{}` is {state} in {}: fetching it",
        entry.name,
        data_dir.display()
    );
    let report = fetch_dataset(
        entry,
        data_dir,
        mirrors,
        FetchOptions {
            force: false,
            progress: true,
        },
    )?;
    for w in &report.warnings {
        harness_core::note!("warning: {w}");
    }
    check_stamped(entry, data_dir).map_err(|bad| changed_error(&entry.name, &bad))?;
    Ok(dir)
}

/// The verification stamp of dataset `name`: `<data_dir>/.stamps/<name>.json` (outside the
/// dataset folder, which holds exactly the lock's files).
pub fn stamp_path(data_dir: &Path, name: &str) -> PathBuf {
    data_dir.join(".stamps").join(format!("{name}.json"))
}

/// Every file of `entry` as the stamp check sees it.
pub fn pinned<'a>(
    entry: &'a DatasetEntry,
    data_dir: &Path,
) -> Vec<harness_core::stamp::Pinned<'a>> {
    let files = entry.file.iter();
    crate::store::pinned(
        &data_dir.join(&entry.name),
        files.map(|f| (f.path.as_str(), f.bytes, f.sha256.as_str())),
    )
}

/// Checks an installed dataset against its stamp, re-hashing only files that changed on
/// disk since they were verified. Returns every file that is missing or fails.
pub fn check_stamped(
    entry: &DatasetEntry,
    data_dir: &Path,
) -> Result<harness_core::stamp::Checked, Vec<harness_core::stamp::Problem>> {
    harness_core::stamp::check(&stamp_path(data_dir, &entry.name), &pinned(entry, data_dir))
}

/// The error for files of a dataset that cannot be used as they are.
fn changed_error(dataset: &str, problems: &[harness_core::stamp::Problem]) -> DataError {
    DataError::Changed {
        dataset: dataset.to_string(),
        files: problems
            .iter()
            .map(|p| format!("  - {}: {}", p.path.display(), describe(p)))
            .collect::<Vec<_>>()
            .join("\n"),
    }
}

fn describe(p: &harness_core::stamp::Problem) -> String {
    use harness_core::stamp::Failure;
    match &p.failure {
        Failure::Content { found } => format!(
            "content changed since it was installed: sha256 {found}, datasets.lock says {}",
            p.expected_sha256
        ),
        Failure::Size { found } => format!(
            "size changed: {found} bytes, datasets.lock says {}",
            p.expected_bytes
        ),
        other => other.to_string(),
    }
}

/// A stamp problem as the error `verify` reports for it.
fn problem_error(dataset: &str, p: harness_core::stamp::Problem) -> DataError {
    use harness_core::stamp::Failure;
    let checksum = |detail: &str, expected: String, actual: String| DataError::Checksum {
        dataset: dataset.into(),
        path: p.path.clone(),
        detail: detail.into(),
        expected,
        actual,
    };
    match &p.failure {
        Failure::Missing => DataError::Missing {
            path: p.path.clone(),
            hint: format!("fetch it with `harness datasets fetch {dataset}`"),
        },
        Failure::NotAFile => checksum(
            "not a regular file",
            "a file".into(),
            "a directory or something else".into(),
        ),
        Failure::Size { found } => checksum(
            "size differs from datasets.lock",
            format!("{} bytes", p.expected_bytes),
            format!("{found} bytes"),
        ),
        Failure::Content { found } => checksum(
            "content changed: sha256 differs from datasets.lock",
            format!("sha256 {}", p.expected_sha256),
            format!("sha256 {found}"),
        ),
        Failure::Io(e) => DataError::Io {
            path: p.path.clone(),
            source: std::io::Error::other(e.clone()),
        },
    }
}

/// Installation state of a dataset (see [`crate::store::StoreState`]).
pub type DatasetState = crate::store::StoreState;

/// Existence + size check of every file of `entry` under `data_dir` (fast: no hashing).
pub fn quick_state(entry: &DatasetEntry, data_dir: &Path) -> DatasetState {
    crate::store::state(&pinned(entry, data_dir), "the lock", false)
}

/// Recomputes the sha256 of every file of `entry` under `data_dir` (renewing the
/// verification stamps of the files that pass). Returns one problem per missing or changed
/// file (empty when everything verifies). A dataset whose folder does not exist at all gives
/// a single "not installed" problem.
pub fn verify_dataset(entry: &DatasetEntry, data_dir: &Path, pb: &ProgressBar) -> Vec<DataError> {
    let dir = data_dir.join(&entry.name);
    if !dir.is_dir() {
        pb.inc(entry.total_bytes());
        return vec![DataError::Missing {
            path: dir,
            hint: format!(
                "dataset `{}` is not installed ({} files); fetch it with `harness datasets fetch {}`",
                entry.name,
                entry.file.len(),
                entry.name
            ),
        }];
    }
    let start = pb.position();
    let result = harness_core::stamp::verify_all(
        &stamp_path(data_dir, &entry.name),
        &pinned(entry, data_dir),
        &mut |n| pb.inc(n),
    );
    pb.set_position(start + entry.total_bytes());
    match result {
        Ok(_) => Vec::new(),
        Err(problems) => problems
            .into_iter()
            .map(|p| problem_error(&entry.name, p))
            .collect(),
    }
}

/// Why one mirror could not provide one file.
enum Attempt {
    /// The mirror does not have the file (no such file, HTTP 404): not worth a warning.
    NotThere(String),
    /// The mirror has it but the copy or transfer is bad: reported.
    Bad(String),
    /// A local problem (cannot write the data directory): stop, no other mirror helps.
    Local(DataError),
}

/// Installs every file of `entry` into `data_dir/<name>/`, trying `mirrors` in order per file
/// and verifying each copy before it is renamed into place. Files already installed and
/// verified are skipped unless `opts.force`. On the first file that no mirror can provide,
/// returns [`DataError::FetchFailed`]; files verified before that stay installed, and no
/// partial or unverified file is ever left at a final path.
pub fn fetch_dataset(
    entry: &DatasetEntry,
    data_dir: &Path,
    mirrors: &[Mirror],
    opts: FetchOptions,
) -> Result<FetchReport, DataError> {
    // Parsing checks this already; an entry built in code is checked here all the same,
    // before any of its paths touches the disk.
    entry.check_paths().map_err(|detail| DataError::Lock {
        path: PathBuf::from("datasets.lock"),
        detail,
    })?;
    let dir = data_dir.join(&entry.name);
    let mut report = FetchReport {
        dataset: entry.name.clone(),
        ..FetchReport::default()
    };
    // Phase 1: which files need fetching, and where they go.
    let todo = files_to_fetch(entry, data_dir, opts, &mut report);
    prepare_destinations(entry, data_dir, &todo, opts, &mut report)?;
    // harness installs into this data directory: its stamps are kept there from now on.
    let stamps = stamp_path(data_dir, &entry.name);
    harness_core::stamp::prepare(&stamps)
        .map_err(|e| DataError::io(harness_core::fsutil::parent_dir(&stamps), e))?;
    if todo.is_empty() {
        return Ok(report);
    }
    // Phase 2: fetch them.
    let total: u64 = todo.iter().map(|(f, _)| f.bytes).sum();
    let pb = progress_bar(total, opts.progress, &entry.name);
    let agent = ureq::AgentBuilder::new()
        // Redirects are followed by `get_following`, which checks their scheme.
        .redirects(0)
        .timeout_connect(Duration::from_secs(15))
        .timeout_read(Duration::from_secs(60))
        .build();
    for (f, was_corrupt) in todo {
        let dest = f.local_path(&dir);
        let done = fetch_from_mirrors(entry, f, &dest, mirrors, &agent, &pb, &mut report)
            .inspect_err(|_| pb.finish_and_clear())?;
        match done {
            Ok(mirror) => {
                report.bytes += f.bytes;
                if was_corrupt {
                    report.replaced_corrupt.push(f.path.clone());
                }
                report.installed.push((f.path.clone(), mirror));
            }
            Err(mut attempts) => {
                pb.finish_and_clear();
                if attempts.is_empty() {
                    attempts.push("  - (no mirror is configured)".into());
                }
                return Err(DataError::FetchFailed {
                    dataset: entry.name.clone(),
                    path: dest,
                    attempts: attempts.join("\n"),
                });
            }
        }
    }
    pb.finish_and_clear();
    Ok(report)
}

/// The files that need fetching, each with whether it was there but corrupt: those missing
/// or failing their check (stamped files that did not change are not hashed again), or every
/// file when forced. Counts the others as already present.
fn files_to_fetch<'e>(
    entry: &'e DatasetEntry,
    data_dir: &Path,
    opts: FetchOptions,
    report: &mut FetchReport,
) -> Vec<(&'e FileEntry, bool)> {
    let mut todo: Vec<(&FileEntry, bool)> = Vec::new();
    if opts.force {
        todo.extend(entry.file.iter().map(|f| (f, false)));
        return todo;
    }
    let problems = check_stamped(entry, data_dir).err().unwrap_or_default();
    for f in &entry.file {
        match problems.iter().find(|p| p.rel == f.path) {
            None => report.already_present += 1,
            Some(p) if p.failure == harness_core::stamp::Failure::Missing => todo.push((f, false)),
            Some(_) => todo.push((f, true)),
        }
    }
    todo
}

/// Makes way for the files to fetch: a directory where a file belongs is removed only when
/// asked to (`--force`: it may hold someone's work), and every folder from the data
/// directory down to each file is a real folder, created if missing (a dataset folder, or a
/// folder inside it, that is a link is refused rather than written through).
fn prepare_destinations(
    entry: &DatasetEntry,
    data_dir: &Path,
    todo: &[(&FileEntry, bool)],
    opts: FetchOptions,
    report: &mut FetchReport,
) -> Result<(), DataError> {
    let dir = data_dir.join(&entry.name);
    for (f, _) in todo {
        let dest = f.local_path(&dir);
        if std::fs::symlink_metadata(&dest).is_ok_and(|m| m.is_dir()) {
            if opts.force {
                std::fs::remove_dir_all(&dest).map_err(|e| DataError::io(&dest, e))?;
                report.removed_directories.push(f.path.clone());
            } else {
                return Err(DataError::Changed {
                    dataset: entry.name.clone(),
                    files: format!(
                        "  - {}: a directory stands where this file belongs",
                        dest.display()
                    ),
                });
            }
        }
    }
    for (f, _) in todo {
        let dest = f.local_path(&dir);
        let rel = dest
            .parent()
            .and_then(|p| p.strip_prefix(data_dir).ok())
            .unwrap_or(Path::new(&entry.name));
        harness_core::nofollow::Dir::open_below(data_dir, rel, true)
            .map_err(|e| DataError::io(&dest, e))?;
    }
    Ok(())
}

/// Tries each mirror in turn for file `f`: the mirror it came from, or every mirror's
/// reason for not giving it (a bad copy is also a warning in `report`). A local error (the
/// disk) stops at once.
fn fetch_from_mirrors(
    entry: &DatasetEntry,
    f: &FileEntry,
    dest: &Path,
    mirrors: &[Mirror],
    agent: &ureq::Agent,
    pb: &ProgressBar,
    report: &mut FetchReport,
) -> Result<Result<String, Vec<String>>, DataError> {
    let mut attempts = Vec::new();
    for mirror in mirrors {
        let start = pb.position();
        let result = match mirror {
            Mirror::Dir(root) => copy_verified(&f.local_path(&root.join(&entry.name)), f, dest, pb),
            Mirror::Http(base) => {
                download_verified(agent, &file_url(base, &entry.name, &f.path), f, dest, pb)
            }
        };
        match result {
            Ok(()) => return Ok(Ok(mirror.to_string())),
            Err(Attempt::Local(e)) => return Err(e),
            Err(Attempt::NotThere(why)) => {
                pb.set_position(start);
                attempts.push(format!("  - {mirror}: {why}"));
            }
            Err(Attempt::Bad(why)) => {
                pb.set_position(start);
                report
                    .warnings
                    .push(format!("{}/{} from {mirror}: {why}", entry.name, f.path));
                attempts.push(format!("  - {mirror}: {why}"));
            }
        }
    }
    Ok(Err(attempts))
}

/// `base/<dataset>/<path>` with every path segment percent-encoded.
fn file_url(base: &str, dataset: &str, path: &str) -> String {
    let mut url = base.trim_end_matches('/').to_string();
    for seg in std::iter::once(dataset).chain(path.split('/')) {
        url.push('/');
        for b in seg.bytes() {
            if b.is_ascii_alphanumeric() || b"-._~".contains(&b) {
                url.push(b as char);
            } else {
                url.push_str(&format!("%{b:02X}"));
            }
        }
    }
    url
}

/// Creates the directory that will hold `dest`.
fn prepare_parent(dest: &Path) -> Result<&Path, Attempt> {
    let dir = harness_core::fsutil::parent_dir(dest);
    std::fs::create_dir_all(dir).map_err(|e| Attempt::Local(DataError::io(dir, e)))?;
    Ok(dir)
}

/// Compares a finished copy with the lock: `None` when size and sha256 match.
fn mismatch(f: &FileEntry, bytes: u64, sha: &str) -> Option<String> {
    if bytes != f.bytes {
        Some(format!(
            "size {bytes} bytes, datasets.lock says {}: rejected",
            f.bytes
        ))
    } else if sha != f.sha256 {
        Some(format!(
            "sha256 {sha}, datasets.lock says {}: rejected (corrupt copy)",
            f.sha256
        ))
    } else {
        None
    }
}

/// Copies `src` to a temporary file beside `dest`, hashing on the way; renames it into place
/// only when size and sha256 match the lock.
fn copy_verified(src: &Path, f: &FileEntry, dest: &Path, pb: &ProgressBar) -> Result<(), Attempt> {
    use sha2::{Digest, Sha256};
    let mut input = match std::fs::File::open(src) {
        Ok(file) => file,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            return Err(Attempt::NotThere(format!("{} not found", src.display())))
        }
        Err(e) => return Err(Attempt::Bad(format!("{}: {e}", src.display()))),
    };
    match input.metadata() {
        Ok(m) if m.len() != f.bytes => {
            return Err(Attempt::Bad(format!(
                "{}: size {} bytes, datasets.lock says {}: rejected",
                src.display(),
                m.len(),
                f.bytes
            )))
        }
        Ok(_) => {}
        Err(e) => return Err(Attempt::Bad(format!("{}: {e}", src.display()))),
    }
    let dir = prepare_parent(dest)?;
    let mut tmp = harness_core::fsutil::temp_file_in(dir)
        .map_err(|e| Attempt::Local(DataError::io(dir, e)))?;
    let mut hasher = Sha256::new();
    let mut buf = vec![0u8; 1 << 16];
    let mut total = 0u64;
    loop {
        let n = match input.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(Attempt::Bad(format!("reading {}: {e}", src.display()))),
        };
        hasher.update(&buf[..n]);
        tmp.write_all(&buf[..n])
            .map_err(|e| Attempt::Local(DataError::io(tmp.path(), e)))?;
        total += n as u64;
        pb.inc(n as u64);
    }
    let sha = hex::encode(hasher.finalize());
    if let Some(why) = mismatch(f, total, &sha) {
        return Err(Attempt::Bad(format!("{}: {why}", src.display())));
    }
    harness_core::fsutil::make_readable(tmp.as_file())
        .and_then(|()| tmp.as_file().sync_all())
        .map_err(|e| Attempt::Local(DataError::io(tmp.path(), e)))?;
    tmp.persist(dest)
        .map_err(|e| Attempt::Local(DataError::io(dest, e.error)))?;
    Ok(())
}

/// `<dest>.part`, where a download accumulates until it verifies.
pub fn part_path(dest: &Path) -> PathBuf {
    let mut name = dest.file_name().unwrap_or_default().to_os_string();
    name.push(".part");
    dest.with_file_name(name)
}

/// How many times one mirror is asked again (resuming) after a transfer is cut, as long as
/// each attempt makes progress.
const RESUME_ATTEMPTS: usize = 4;

/// Downloads `url` into `<dest>.part` (resuming from what is there with a `Range` request),
/// verifies the whole file, then renames it to `dest`. A cut transfer keeps the `.part` file
/// for the next attempt; a complete but wrong file is deleted.
fn download_verified(
    agent: &ureq::Agent,
    url: &str,
    f: &FileEntry,
    dest: &Path,
    pb: &ProgressBar,
) -> Result<(), Attempt> {
    prepare_parent(dest)?;
    let part = part_path(dest);
    let part_len = || std::fs::metadata(&part).map(|m| m.len()).unwrap_or(0);
    let remove = || remove_part(&part);
    let start = pb.position();
    let mut tries = 0;
    loop {
        let mut have = part_len();
        if have > f.bytes {
            remove()?;
            have = 0;
        }
        pb.set_position(start + have);
        if have == f.bytes {
            break;
        }
        let range = (have > 0).then(|| format!("bytes={have}-"));
        let response = match get_following(agent, url, range.as_deref())? {
            Ok(r) => r,
            Err(ureq::Error::Status(404 | 410, _)) => {
                return Err(Attempt::NotThere(format!("{url}: not found (HTTP 404)")))
            }
            Err(ureq::Error::Status(416, _)) if have > 0 => {
                // The server does not accept our range: start over.
                remove()?;
                tries += 1;
                if tries >= RESUME_ATTEMPTS {
                    return Err(Attempt::Bad(format!("{url}: range requests refused")));
                }
                continue;
            }
            Err(ureq::Error::Status(code, r)) => {
                return Err(Attempt::Bad(format!(
                    "{url}: HTTP {code} {}",
                    r.status_text()
                )))
            }
            Err(ureq::Error::Transport(t)) => return Err(Attempt::Bad(format!("{url}: {t}"))),
        };
        let append = match response.status() {
            200 => false,
            206 if content_range_start(&response) == Some(have) => have > 0,
            206 => {
                // A range we did not ask for: start over without one.
                remove()?;
                tries += 1;
                if tries >= RESUME_ATTEMPTS {
                    return Err(Attempt::Bad(format!("{url}: inconsistent range responses")));
                }
                continue;
            }
            code => {
                return Err(Attempt::Bad(format!(
                    "{url}: unexpected HTTP {code} {}",
                    response.status_text()
                )))
            }
        };
        let before = if append { have } else { 0 };
        pb.set_position(start + before);
        let cut = receive(response, &part, append, before, f, url, pb)?;
        let now = part_len();
        if now >= f.bytes {
            break;
        }
        tries += 1;
        let why = cut.unwrap_or_else(|| "connection closed early".into());
        if now <= before || tries >= RESUME_ATTEMPTS {
            return Err(Attempt::Bad(format!(
                "{url}: transfer interrupted after {now} of {} bytes ({why}); {} is kept and the next fetch resumes from it",
                f.bytes,
                part.display()
            )));
        }
        // Progress was made: resume from where the transfer stopped.
    }
    let (bytes, sha) = hash_file(&part, &mut |_| {}).map_err(Attempt::Local)?;
    if let Some(why) = mismatch(f, bytes, &sha) {
        // A complete but wrong file is no use for resuming: delete it.
        remove()?;
        return Err(Attempt::Bad(format!("{url}: {why}")));
    }
    let file = std::fs::File::open(&part).map_err(|e| Attempt::Local(DataError::io(&part, e)))?;
    file.sync_all()
        .map_err(|e| Attempt::Local(DataError::io(&part, e)))?;
    std::fs::rename(&part, dest).map_err(|e| Attempt::Local(DataError::io(dest, e)))?;
    Ok(())
}

/// Removes a `.part` file, if there is one.
fn remove_part(part: &Path) -> Result<(), Attempt> {
    match std::fs::remove_file(part) {
        Ok(()) => Ok(()),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
        Err(e) => Err(Attempt::Local(DataError::io(part, e))),
    }
}

/// Writes a response's body into `part` after its first `before` bytes (appending when
/// `append`), refusing more than the lock's size, and counts it on `pb`: why the transfer
/// was cut, if it was.
fn receive(
    response: ureq::Response,
    part: &Path,
    append: bool,
    before: u64,
    f: &FileEntry,
    url: &str,
    pb: &ProgressBar,
) -> Result<Option<String>, Attempt> {
    let mut out = std::fs::OpenOptions::new()
        .create(true)
        .write(true)
        .append(append)
        .truncate(!append)
        .open(part)
        .map_err(|e| Attempt::Local(DataError::io(part, e)))?;
    let mut reader = response.into_reader();
    let mut buf = vec![0u8; 1 << 16];
    let mut cut = None;
    let mut received = 0u64;
    loop {
        let n = match reader.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(e) => {
                cut = Some(e.to_string());
                break;
            }
        };
        received += n as u64;
        // A server sending more than the lock's size would fill the disk: stop at the
        // first byte too many.
        if before + received > f.bytes {
            drop(out);
            remove_part(part)?;
            return Err(Attempt::Bad(format!(
                "{url}: the server sent more than the {} bytes datasets.lock gives: rejected",
                f.bytes
            )));
        }
        // Unbuffered writes: whatever arrived is in the .part file if we are killed.
        out.write_all(&buf[..n])
            .map_err(|e| Attempt::Local(DataError::io(part, e)))?;
        pb.inc(n as u64);
    }
    Ok(cut)
}

/// Redirects followed for one request (ureq's own default).
const MAX_REDIRECTS: usize = 5;

/// GETs `url` (with a `Range` header when given), following redirects by hand, and only
/// within the URL's own scheme: a mirror that points elsewhere (`file:`, `ftp:`, or from
/// https down to http) is refused with the URL it named, so a hostile or misconfigured
/// mirror can neither read a local file into the data directory nor strip TLS. ureq's own
/// redirect handling would follow http → https and report other schemes only as unknown.
/// The outer error is that refusal; the inner result is the final request's.
fn get_following(
    agent: &ureq::Agent,
    url: &str,
    range: Option<&str>,
) -> Result<Result<ureq::Response, ureq::Error>, Attempt> {
    let first =
        url::Url::parse(url).map_err(|e| Attempt::Bad(format!("{url}: not a URL ({e})")))?;
    let mut current = first.clone();
    for _ in 0..=MAX_REDIRECTS {
        let mut request = agent.get(current.as_str());
        if let Some(r) = range {
            request = request.set("Range", r);
        }
        let response = match request.call() {
            Ok(r) => r,
            Err(e) => return Ok(Err(e)),
        };
        if !(300..400).contains(&response.status()) {
            return Ok(Ok(response));
        }
        let code = response.status();
        let Some(location) = response.header("Location") else {
            return Err(Attempt::Bad(format!(
                "{current}: HTTP {code} redirect without a Location"
            )));
        };
        let next = current.join(location).map_err(|e| {
            Attempt::Bad(format!(
                "{current}: HTTP {code} redirect to `{location}`, not a URL ({e})"
            ))
        })?;
        if next.scheme() != first.scheme() {
            return Err(Attempt::Bad(format!(
                "{current}: HTTP {code} redirect to {next} refused: a mirror may redirect only within {}:",
                first.scheme()
            )));
        }
        current = next;
    }
    Err(Attempt::Bad(format!(
        "{url}: more than {MAX_REDIRECTS} redirects"
    )))
}

/// The first byte position of a `Content-Range: bytes START-END/TOTAL` header.
fn content_range_start(response: &ureq::Response) -> Option<u64> {
    let value = response.header("Content-Range")?;
    let rest = value.trim().strip_prefix("bytes")?.trim_start();
    rest.split('-').next()?.trim().parse().ok()
}

/// A byte progress bar on stderr unless `enabled` is false: drawn on a terminal; in a log,
/// one line `message: done 1.20 MiB in 0.4 s` when it ends (and progress lines if it runs
/// longer than the log's interval), never a `0 B/...` line.
pub fn progress_bar(total: u64, enabled: bool, message: &str) -> Bar {
    if !enabled {
        return Bar::hidden();
    }
    let pb = harness_core::progress::bar(
        total,
        "{msg:>20} [{bar:30}] {bytes}/{total_bytes} {bytes_per_sec} eta {eta}",
    )
    .logged_as(message);
    pb.set_message(message.to_string());
    pb
}

/// `12.3 MB` (decimal units).
pub fn human_bytes(n: u64) -> String {
    const UNITS: [&str; 4] = ["kB", "MB", "GB", "TB"];
    if n < 1000 {
        return format!("{n} B");
    }
    let mut v = n as f64 / 1000.0;
    let mut unit = 0;
    while v >= 1000.0 && unit + 1 < UNITS.len() {
        v /= 1000.0;
        unit += 1;
    }
    format!("{v:.1} {}", UNITS[unit])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mirrors_parse_urls_and_directories() {
        assert_eq!(
            Mirror::parse("https://example.org/data/"),
            Mirror::Http("https://example.org/data".into())
        );
        assert_eq!(
            Mirror::parse("../shared/datasets"),
            Mirror::Dir("../shared/datasets".into())
        );
    }

    #[test]
    fn urls_encode_each_segment() {
        assert_eq!(
            file_url("http://h/m/", "sts 17", "a b/c#.txt"),
            "http://h/m/sts%2017/a%20b/c%23.txt"
        );
    }

    #[test]
    fn human_bytes_uses_decimal_units() {
        assert_eq!(human_bytes(999), "999 B");
        assert_eq!(human_bytes(15_794_343), "15.8 MB");
    }

    #[test]
    fn part_file_sits_beside_the_final_file() {
        assert_eq!(
            part_path(Path::new("/d/x/a.tsv.gz")),
            PathBuf::from("/d/x/a.tsv.gz.part")
        );
    }
}
