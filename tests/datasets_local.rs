//! `datasets fetch|verify|list` with local directory mirrors and a synthetic lock, plus
//! `ensure_dataset` (fetch on first use) and the CLI path with the real lock.

mod common;

use common::{BIG, NAME};
use harness::cli::Cli;
use harness::commands::datasets::{run_with as datasets_command_with, DatasetsCommand};
use harness_core::settings::Settings;
use harness_data::fetch::{
    ensure_entry, fetch_dataset, quick_state, DatasetState, FetchOptions, Mirror,
};
use harness_data::lock::Lock;
use std::path::Path;
use std::process::ExitCode;

fn opts(force: bool) -> FetchOptions {
    FetchOptions {
        force,
        progress: false,
    }
}

fn settings(data: &Path, mirrors: &[&Path]) -> Settings {
    Settings {
        data_dir: data.to_path_buf(),
        mirrors: mirrors.iter().map(|m| m.display().to_string()).collect(),
        cache_dir: data.join("cache"),
        models_dir: data.join("models"),
        runs_dir: data.join("runs"),
        sweeps_dir: data.join("sweeps"),
    }
}

fn run(cmd: DatasetsCommand, s: &Settings, lock: &Lock) -> (ExitCode, String) {
    let mut out = Vec::new();
    let code = datasets_command_with(&cmd, s, lock, &mut out).unwrap();
    (code, String::from_utf8(out).unwrap())
}

fn verify() -> DatasetsCommand {
    DatasetsCommand::Verify { names: vec![] }
}

#[test]
fn dir_mirror_fetch_installs_verifies_and_skips_verified_files() {
    let (mirror, lock) = common::synthetic();
    let data = tempfile::tempdir().unwrap();
    let s = settings(data.path(), &[mirror.path()]);
    let (code, out) = run(
        DatasetsCommand::Fetch {
            names: vec![],
            from: None,
            force: false,
        },
        &s,
        &lock,
    );
    assert_eq!(code, ExitCode::SUCCESS, "{out}");
    assert!(out.contains("toy: 3 file(s) installed"), "{out}");
    assert_eq!(
        common::tree(&data.path().join(NAME)),
        ["SOURCE.txt", "big.bin", "sub/small.txt"],
        "temporary files left behind?"
    );
    let (code, out) = run(verify(), &s, &lock);
    assert_eq!(code, ExitCode::SUCCESS, "{out}");
    assert!(out.starts_with("ok: 1 datasets, 3 files"), "{out}");

    let again = fetch_dataset(&lock.dataset[0], data.path(), &[], opts(false)).unwrap();
    assert_eq!(
        again.already_present, 3,
        "no mirror needed for verified files"
    );
    let forced = fetch_dataset(
        &lock.dataset[0],
        data.path(),
        &[Mirror::Dir(mirror.path().into())],
        opts(true),
    )
    .unwrap();
    assert_eq!(forced.installed.len(), 3);
}

#[test]
fn flipped_byte_in_installed_file_fails_verify_naming_the_file_with_exit_1() {
    let (mirror, lock) = common::synthetic();
    let data = tempfile::tempdir().unwrap();
    fetch_dataset(
        &lock.dataset[0],
        data.path(),
        &[Mirror::Dir(mirror.path().into())],
        opts(false),
    )
    .unwrap();
    let victim = data.path().join(NAME).join("big.bin");
    let mut b = std::fs::read(&victim).unwrap();
    b[12345] ^= 0x80;
    std::fs::write(&victim, b).unwrap();

    let s = settings(data.path(), &[mirror.path()]);
    let (code, out) = run(verify(), &s, &lock);
    assert_eq!(code, ExitCode::from(1), "{out}");
    let lines: Vec<_> = out.lines().collect();
    assert_eq!(lines.len(), 2, "{out}");
    assert!(lines[0].contains(&victim.display().to_string()), "{out}");
    assert!(lines[0].contains("sha256"), "{out}");
    assert!(
        lines[0].contains("harness datasets fetch toy --force"),
        "{out}"
    );
    assert!(lines[1].starts_with("FAILED: 1 problem(s)"), "{out}");

    // `list` hashes nothing: a same-size change shows as unverified (changed on disk since
    // it was last hashed)...
    let (_, listed) = run(DatasetsCommand::List, &s, &lock);
    assert!(listed.contains("unverified"), "{listed}");
    // ...but a truncated file shows as corrupt.
    std::fs::write(&victim, b"short").unwrap();
    assert!(matches!(
        quick_state(&lock.dataset[0], data.path()),
        DatasetState::Corrupt { .. }
    ));
    let (_, listed) = run(DatasetsCommand::List, &s, &lock);
    assert!(listed.contains("corrupt (big.bin"), "{listed}");

    // A plain fetch replaces the bad file with a verified copy and says so.
    let (code, out) = run(
        DatasetsCommand::Fetch {
            names: vec![NAME.into()],
            from: None,
            force: false,
        },
        &s,
        &lock,
    );
    assert_eq!(code, ExitCode::SUCCESS, "{out}");
    assert!(out.contains("replaced big.bin"), "{out}");
    assert_eq!(std::fs::read(&victim).unwrap(), common::bytes(BIG, 7));
}

#[test]
fn missing_file_is_reported_by_verify_and_list() {
    let (mirror, lock) = common::synthetic();
    let data = tempfile::tempdir().unwrap();
    let s = settings(data.path(), &[mirror.path()]);
    let (code, out) = run(verify(), &s, &lock);
    assert_eq!(code, ExitCode::from(1));
    assert!(out.contains("not installed"), "{out}");
    let (_, listed) = run(DatasetsCommand::List, &s, &lock);
    assert!(listed.contains("missing"), "{listed}");

    fetch_dataset(
        &lock.dataset[0],
        data.path(),
        &[Mirror::Dir(mirror.path().into())],
        opts(false),
    )
    .unwrap();
    let gone = data.path().join(NAME).join("sub").join("small.txt");
    std::fs::remove_file(&gone).unwrap();
    let (code, out) = run(verify(), &s, &lock);
    assert_eq!(code, ExitCode::from(1), "{out}");
    assert!(out.contains(&gone.display().to_string()), "{out}");
    assert!(out.contains("file not found"), "{out}");
    let (_, listed) = run(DatasetsCommand::List, &s, &lock);
    assert!(listed.contains("missing (1 of 3 files)"), "{listed}");
}

#[test]
fn mirrors_are_tried_in_order_and_bad_copies_reported() {
    let (good, lock) = common::synthetic();
    let bad = common::corrupted_copy(good.path(), "sub/small.txt", 5);
    let absent = good.path().join("no-such-mirror");
    let data = tempfile::tempdir().unwrap();
    let mirrors = [
        Mirror::Dir(absent),
        Mirror::Dir(bad.path().into()),
        Mirror::Dir(good.path().into()),
    ];
    let r = fetch_dataset(&lock.dataset[0], data.path(), &mirrors, opts(false)).unwrap();
    let from: Vec<_> = r
        .installed
        .iter()
        .map(|(p, m)| (p.as_str(), m.clone()))
        .collect();
    assert_eq!(from[0].1, bad.path().display().to_string());
    assert_eq!(
        from[2],
        ("sub/small.txt", good.path().display().to_string())
    );
    assert_eq!(r.warnings.len(), 1, "{:?}", r.warnings);
    assert!(r.warnings[0].contains("sub/small.txt"));
    assert!(r.warnings[0].contains("rejected"));
}

#[test]
fn file_bad_everywhere_installs_nothing_and_keeps_the_verified_copy() {
    let (good, lock) = common::synthetic();
    let bad = common::corrupted_copy(good.path(), "big.bin", 0);
    let data = tempfile::tempdir().unwrap();
    let err = fetch_dataset(
        &lock.dataset[0],
        data.path(),
        &[Mirror::Dir(bad.path().into())],
        opts(false),
    )
    .unwrap_err();
    let msg = err.to_string();
    assert!(
        msg.contains("big.bin") && msg.contains("nothing was installed"),
        "{msg}"
    );
    assert_eq!(common::tree(&data.path().join(NAME)), ["SOURCE.txt"]);

    // A verified installed file survives a forced re-fetch from a bad mirror.
    fetch_dataset(
        &lock.dataset[0],
        data.path(),
        &[Mirror::Dir(good.path().into())],
        opts(false),
    )
    .unwrap();
    let s = settings(data.path(), &[bad.path()]);
    let (code, _) = run(
        DatasetsCommand::Fetch {
            names: vec![],
            from: None,
            force: true,
        },
        &s,
        &lock,
    );
    assert_eq!(code, ExitCode::from(1));
    assert_eq!(
        std::fs::read(data.path().join(NAME).join("big.bin")).unwrap(),
        common::bytes(BIG, 7)
    );
    assert_eq!(
        common::tree(&data.path().join(NAME)),
        ["SOURCE.txt", "big.bin", "sub/small.txt"]
    );
}

#[test]
fn ensure_entry_fetches_on_first_use_only() {
    let (mirror, lock) = common::synthetic();
    let data = tempfile::tempdir().unwrap();
    let mirrors = [Mirror::Dir(mirror.path().into())];
    let dir = ensure_entry(&lock.dataset[0], data.path(), &mirrors).unwrap();
    assert_eq!(dir, data.path().join(NAME));
    assert_eq!(
        quick_state(&lock.dataset[0], data.path()),
        DatasetState::Present
    );
    // Present: no mirror is consulted.
    let dir2 = ensure_entry(&lock.dataset[0], data.path(), &[]).unwrap();
    assert_eq!(dir, dir2);
}

#[test]
fn unknown_dataset_name_gets_a_suggestion() {
    let (_mirror, lock) = common::synthetic();
    let data = tempfile::tempdir().unwrap();
    let s = settings(data.path(), &[]);
    let err = datasets_command_with(
        &DatasetsCommand::Verify {
            names: vec!["toys".into()],
        },
        &s,
        &lock,
        &mut Vec::new(),
    )
    .unwrap_err();
    assert!(err.to_string().contains("did you mean `toy`"), "{err}");
}

// ---- the real lock and ../shared/datasets ----

fn shared() -> Option<std::path::PathBuf> {
    let dir = harness_core::shared_datasets_dir();
    if dir.is_dir() {
        Some(dir)
    } else {
        eprintln!("skipped: {} not found", dir.display());
        None
    }
}

#[test]
fn ensure_dataset_fetches_a_real_dataset_from_the_shared_mirror() {
    let Some(shared) = shared() else { return };
    let data = tempfile::tempdir().unwrap();
    let s = settings(&data.path().join("datasets"), &[&shared]);
    let dir = harness_data::fetch::ensure_dataset(&s, "sts17").unwrap();
    assert_eq!(dir, data.path().join("datasets").join("sts17"));
    assert!(dir.join("STS2017.gs/STS.gs.track5.en-en.txt").is_file());
    let lock = Lock::embedded().unwrap();
    let (code, out) = run(
        DatasetsCommand::Verify {
            names: vec!["sts17".into()],
        },
        &s,
        &lock,
    );
    assert_eq!(code, ExitCode::SUCCESS, "{out}");
}

#[test]
fn cli_fetch_from_shared_then_verify_through_the_command_line() {
    use clap::Parser;
    let Some(shared) = shared() else { return };
    let data = tempfile::tempdir().unwrap();
    let d = data.path().display().to_string();
    let from = shared.display().to_string();
    let code = harness::cli::run(Cli::parse_from([
        "harness",
        "--data-dir",
        &d,
        "datasets",
        "fetch",
        "snli",
        "--from",
        &from,
    ]))
    .unwrap();
    assert_eq!(code, ExitCode::SUCCESS);
    let code = harness::cli::run(Cli::parse_from([
        "harness",
        "--data-dir",
        &d,
        "datasets",
        "verify",
        "snli",
    ]))
    .unwrap();
    assert_eq!(code, ExitCode::SUCCESS);
    let err = harness::cli::run(Cli::parse_from([
        "harness",
        "--data-dir",
        &d,
        "datasets",
        "verify",
        "tatoeba-laser",
    ]))
    .unwrap_err();
    assert!(
        err.to_string().contains("did you mean `tatoeba-laser-v1`"),
        "{err}"
    );
}

/// A dataset folder (or a folder inside it) that is a link is refused, not written through:
/// the folder it points to keeps exactly what it held.
#[cfg(unix)]
#[test]
fn a_dataset_folder_that_is_a_link_is_refused() {
    let (mirror, lock) = common::synthetic();
    let data = tempfile::tempdir().unwrap();
    let elsewhere = tempfile::tempdir().unwrap();
    std::fs::write(elsewhere.path().join("notes.txt"), "mine").unwrap();
    std::os::unix::fs::symlink(elsewhere.path(), data.path().join(NAME)).unwrap();
    let entry = lock.get(NAME).unwrap();
    let err = fetch_dataset(
        entry,
        data.path(),
        &[Mirror::parse(&mirror.path().display().to_string())],
        opts(false),
    )
    .unwrap_err()
    .to_string();
    assert!(err.contains("symbolic link"), "{err}");
    let names: Vec<_> = std::fs::read_dir(elsewhere.path())
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    assert_eq!(names, ["notes.txt"]);
    // A link inside a real dataset folder: refused the same way.
    std::fs::remove_file(data.path().join(NAME)).unwrap();
    std::fs::create_dir(data.path().join(NAME)).unwrap();
    std::os::unix::fs::symlink(elsewhere.path(), data.path().join(NAME).join("sub")).unwrap();
    let err = fetch_dataset(
        entry,
        data.path(),
        &[Mirror::parse(&mirror.path().display().to_string())],
        opts(false),
    )
    .unwrap_err()
    .to_string();
    assert!(
        err.contains("symbolic link") && err.contains("sub"),
        "{err}"
    );
    assert_eq!(std::fs::read_dir(elsewhere.path()).unwrap().count(), 1);
}
