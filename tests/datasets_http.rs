//! `datasets fetch` over HTTP, against a server the test starts on 127.0.0.1: plain download,
//! a corrupted byte (rejected, nothing installed), a transfer cut halfway (resumed with
//! `Range`), a `.part` file left by an interrupted run, a server that ignores `Range`, and one
//! that sends more than the lock's size.

mod common;

use common::{Behaviour, Server, BIG, NAME};
use harness_data::fetch::{fetch_dataset, part_path, FetchOptions, Mirror};
use harness_data::DataError;

fn opts() -> FetchOptions {
    FetchOptions {
        force: false,
        progress: false,
    }
}

#[test]
fn http_fetch_installs_every_file_verified_and_skips_them_next_time() {
    let (mirror, lock) = common::synthetic();
    let entry = &lock.dataset[0];
    let server = Server::start(mirror.path(), Behaviour::default());
    let data = tempfile::tempdir().unwrap();
    let mirrors = [Mirror::parse(&server.url)];

    let report = fetch_dataset(entry, data.path(), &mirrors, opts()).unwrap();
    assert_eq!(report.installed.len(), 3);
    assert_eq!(report.installed[0].1, server.url);
    assert!(report.warnings.is_empty(), "{:?}", report.warnings);
    assert_eq!(
        common::tree(&data.path().join(NAME)),
        ["SOURCE.txt", "big.bin", "sub/small.txt"]
    );
    assert_eq!(
        std::fs::read(data.path().join(NAME).join("big.bin")).unwrap(),
        common::bytes(BIG, 7)
    );
    assert!(server.requests().iter().all(|r| r.range.is_none()));

    let n = server.requests().len();
    let again = fetch_dataset(entry, data.path(), &mirrors, opts()).unwrap();
    assert_eq!(again.already_present, 3);
    assert!(again.installed.is_empty());
    assert_eq!(
        server.requests().len(),
        n,
        "verified files were downloaded again"
    );
}

#[test]
fn http_corrupted_byte_is_rejected_and_not_installed() {
    let (good, lock) = common::synthetic();
    let entry = &lock.dataset[0];
    let bad = common::corrupted_copy(good.path(), "big.bin", BIG / 3);
    let server = Server::start(bad.path(), Behaviour::default());
    let data = tempfile::tempdir().unwrap();

    let err = fetch_dataset(entry, data.path(), &[Mirror::parse(&server.url)], opts()).unwrap_err();
    assert!(matches!(err, DataError::FetchFailed { .. }), "{err:?}");
    let msg = err.to_string();
    assert!(msg.contains("big.bin"), "{msg}");
    assert!(msg.contains("sha256"), "{msg}");
    assert!(msg.contains("rejected"), "{msg}");
    assert!(msg.contains("Fix:"), "{msg}");
    let dest = data.path().join(NAME).join("big.bin");
    assert!(!dest.exists(), "corrupt file installed");
    assert!(!part_path(&dest).exists(), "corrupt download kept");
    // Files before it in lock order verified and stay; nothing unverified is anywhere.
    assert_eq!(common::tree(&data.path().join(NAME)), ["SOURCE.txt"]);

    // With a good mirror after the bad one, the bad copy is reported and the good one used.
    let mirrors = [Mirror::parse(&server.url), Mirror::Dir(good.path().into())];
    let report = fetch_dataset(entry, data.path(), &mirrors, opts()).unwrap();
    assert_eq!(report.already_present, 1);
    assert_eq!(report.installed.len(), 2);
    assert_eq!(report.installed[0].1, good.path().display().to_string());
    assert_eq!(report.warnings.len(), 1, "{:?}", report.warnings);
    assert!(report.warnings[0].contains("big.bin"));
    assert!(report.warnings[0].contains(&server.url));
    assert_eq!(std::fs::read(&dest).unwrap(), common::bytes(BIG, 7));
}

#[test]
fn http_transfer_cut_halfway_resumes_with_a_range_request() {
    let (mirror, lock) = common::synthetic();
    let entry = &lock.dataset[0];
    let half = BIG / 2;
    let server = Server::start(
        mirror.path(),
        Behaviour {
            cut_after: Some(half),
            cut_requests: 1,
            ignore_range: false,
            redirect: None,
        },
    );
    let data = tempfile::tempdir().unwrap();
    let report = fetch_dataset(entry, data.path(), &[Mirror::parse(&server.url)], opts()).unwrap();
    assert_eq!(report.installed.len(), 3);
    let dest = data.path().join(NAME).join("big.bin");
    assert_eq!(std::fs::read(&dest).unwrap(), common::bytes(BIG, 7));
    assert!(!part_path(&dest).exists());
    let big: Vec<_> = server
        .requests()
        .into_iter()
        .filter(|r| r.path.ends_with("big.bin"))
        .collect();
    assert_eq!(big.len(), 2, "{big:?}");
    assert_eq!(big[0].range, None);
    assert_eq!(big[1].range.as_deref(), Some(&*format!("bytes={half}-")));
}

#[test]
fn http_part_file_of_an_interrupted_run_is_kept_and_resumed() {
    let (mirror, lock) = common::synthetic();
    let entry = &lock.dataset[0];
    // Every request is cut after a tenth of the file: the run gives up with a .part file.
    let tenth = BIG / 10;
    let server = Server::start(
        mirror.path(),
        Behaviour {
            cut_after: Some(tenth),
            cut_requests: usize::MAX,
            ignore_range: false,
            redirect: None,
        },
    );
    let data = tempfile::tempdir().unwrap();
    let mirrors = [Mirror::parse(&server.url)];
    let err = fetch_dataset(entry, data.path(), &mirrors, opts()).unwrap_err();
    let msg = err.to_string();
    assert!(msg.contains("interrupted"), "{msg}");
    assert!(msg.contains("resume"), "{msg}");
    let dest = data.path().join(NAME).join("big.bin");
    assert!(!dest.exists(), "partial file at the final path");
    let kept = std::fs::metadata(part_path(&dest)).unwrap().len() as usize;
    assert!(kept >= tenth && kept < BIG, "kept {kept}");
    assert_eq!(
        std::fs::read(part_path(&dest)).unwrap(),
        common::bytes(BIG, 7)[..kept]
    );

    // The next run (the server now behaves) continues from the kept bytes.
    server.behaviour.lock().unwrap().cut_after = None;
    let before = server.requests().len();
    let report = fetch_dataset(entry, data.path(), &mirrors, opts()).unwrap();
    assert_eq!(report.installed.len(), 2);
    let resumed: Vec<_> = server.requests()[before..]
        .iter()
        .filter(|r| r.path.ends_with("big.bin"))
        .cloned()
        .collect();
    assert_eq!(resumed.len(), 1, "{resumed:?}");
    assert_eq!(
        resumed[0].range.as_deref(),
        Some(&*format!("bytes={kept}-"))
    );
    assert_eq!(std::fs::read(&dest).unwrap(), common::bytes(BIG, 7));
    assert!(!part_path(&dest).exists());
}

#[test]
fn http_server_ignoring_range_restarts_from_zero() {
    let (mirror, lock) = common::synthetic();
    let entry = &lock.dataset[0];
    let server = Server::start(
        mirror.path(),
        Behaviour {
            ignore_range: true,
            redirect: None,
            ..Behaviour::default()
        },
    );
    let data = tempfile::tempdir().unwrap();
    let dest = data.path().join(NAME).join("big.bin");
    std::fs::create_dir_all(dest.parent().unwrap()).unwrap();
    // A stale .part with wrong bytes: the 200 answer must replace, not extend, it.
    std::fs::write(part_path(&dest), vec![0xAA; 1000]).unwrap();
    fetch_dataset(entry, data.path(), &[Mirror::parse(&server.url)], opts()).unwrap();
    assert_eq!(std::fs::read(&dest).unwrap(), common::bytes(BIG, 7));
    let big: Vec<_> = server
        .requests()
        .into_iter()
        .filter(|r| r.path.ends_with("big.bin"))
        .collect();
    assert_eq!(big.len(), 1);
    assert_eq!(big[0].range.as_deref(), Some("bytes=1000-"));
}

#[test]
fn http_missing_file_and_unreachable_server_are_named_in_the_error() {
    let (mirror, lock) = common::synthetic();
    let entry = &lock.dataset[0];
    std::fs::remove_file(mirror.path().join(NAME).join("sub/small.txt")).unwrap();
    let server = Server::start(mirror.path(), Behaviour::default());
    let data = tempfile::tempdir().unwrap();
    let mirrors = [
        Mirror::parse(&server.url),
        Mirror::parse("http://127.0.0.1:9/nothing-listens-here"),
    ];
    let err = fetch_dataset(entry, data.path(), &mirrors, opts()).unwrap_err();
    let msg = err.to_string();
    assert!(
        msg.contains("sub/small.txt") || msg.contains("small.txt"),
        "{msg}"
    );
    assert!(msg.contains("404"), "{msg}");
    assert!(msg.contains("127.0.0.1:9"), "{msg}");
    assert!(!data.path().join(NAME).join("sub/small.txt").exists());
}

/// A server sending more bytes than the lock gives is cut off at the first byte too many:
/// the download is rejected and nothing of it is kept (a larger file would fill the disk).
#[test]
fn http_file_larger_than_the_lock_is_cut_off_and_rejected() {
    let (good, lock) = common::synthetic();
    let entry = &lock.dataset[0];
    let bad = tempfile::tempdir().unwrap();
    common::copy_tree(good.path(), bad.path());
    let big = bad.path().join(NAME).join("big.bin");
    let mut bytes = std::fs::read(&big).unwrap();
    bytes.extend(std::iter::repeat_n(0u8, 10 * BIG));
    std::fs::write(&big, bytes).unwrap();
    let server = Server::start(bad.path(), Behaviour::default());
    let data = tempfile::tempdir().unwrap();

    let err = fetch_dataset(entry, data.path(), &[Mirror::parse(&server.url)], opts()).unwrap_err();
    let msg = err.to_string();
    assert!(
        msg.contains("big.bin") && msg.contains("more than"),
        "{msg}"
    );
    let dest = data.path().join(NAME).join("big.bin");
    assert!(!dest.exists());
    assert!(
        !part_path(&dest).exists(),
        "the oversized download was kept"
    );
}

/// Redirects are followed only within the mirror's scheme: a redirect to `file:` (which
/// would read a local file into the data directory), `ftp:` or `https:` is refused naming
/// where it pointed, and nothing is installed; a redirect within http is followed.
#[test]
fn http_redirects_to_other_schemes_are_refused() {
    let (mirror, lock) = common::synthetic();
    let entry = &lock.dataset[0];
    for target in [
        "file:///etc/passwd",
        "ftp://127.0.0.1/{path}",
        "https://127.0.0.1:9/{path}",
    ] {
        let server = Server::start(
            mirror.path(),
            Behaviour {
                redirect: Some(target.to_string()),
                ..Behaviour::default()
            },
        );
        let data = tempfile::tempdir().unwrap();
        let err =
            fetch_dataset(entry, data.path(), &[Mirror::parse(&server.url)], opts()).unwrap_err();
        let msg = err.to_string();
        let scheme = target.split(':').next().unwrap();
        assert!(
            msg.contains("refused") && msg.contains(&format!("{scheme}:")),
            "{target}: {msg}"
        );
        assert!(
            common::tree(data.path())
                .iter()
                .all(|p| !p.contains("SOURCE.txt")
                    && !p.contains("big.bin")
                    && !p.contains("small.txt")),
            "{target}: {:?}",
            common::tree(data.path())
        );
    }
    // Within http (a relative Location): followed, and every file verifies.
    let server = Server::start(
        mirror.path(),
        Behaviour {
            redirect: Some("/real/{path}".to_string()),
            ..Behaviour::default()
        },
    );
    let data = tempfile::tempdir().unwrap();
    let report = fetch_dataset(entry, data.path(), &[Mirror::parse(&server.url)], opts()).unwrap();
    assert_eq!(report.installed.len(), 3);
    assert!(server
        .requests()
        .iter()
        .any(|r| r.path.ends_with("big.bin")));
}
