//! The committed `datasets.lock` against `../shared/datasets`: it lists every dataset folder,
//! every entry verifies byte for byte, and regenerating it changes nothing.

use harness_data::fetch::verify_dataset;
use harness_data::lock::{generate, read_meta, Lock};
use indicatif::ProgressBar;
use std::path::Path;

/// The real data is part of the test environment (`../shared` beside the clone): its
/// absence is a failure, not a skip.
fn shared() -> Option<std::path::PathBuf> {
    let dir = harness_core::shared_datasets_dir();
    assert!(
        dir.is_dir(),
        "{} not found: clone harness beside ../shared or set HARNESS_SHARED_DATASETS",
        dir.display()
    );
    Some(dir)
}

#[test]
fn embedded_lock_lists_every_shared_folder_with_metadata() {
    let lock = Lock::embedded().unwrap();
    assert_eq!(lock.dataset.len(), 21);
    for d in &lock.dataset {
        assert!(!d.file.is_empty(), "{}", d.name);
        assert!(d.file.iter().any(|f| f.path == "SOURCE.txt"), "{}", d.name);
        for field in [&d.version, &d.licence, &d.source, &d.format] {
            assert!(!field.is_empty() && !field.contains('\n'), "{}", d.name);
        }
        let paths: Vec<_> = d.file.iter().map(|f| f.path.clone()).collect();
        let mut sorted = paths.clone();
        sorted.sort();
        assert_eq!(paths, sorted, "{}: paths not sorted", d.name);
    }
    let Some(shared) = shared() else { return };
    let mut folders: Vec<String> = std::fs::read_dir(&shared)
        .unwrap()
        .map(|e| e.unwrap())
        .filter(|e| e.file_type().unwrap().is_dir())
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect();
    folders.sort();
    assert_eq!(lock.names(), folders);
}

#[test]
fn every_locked_file_verifies_against_shared_datasets() {
    let Some(shared) = shared() else { return };
    let lock = Lock::embedded().unwrap();
    let pb = ProgressBar::hidden();
    let problems: Vec<String> = lock
        .dataset
        .iter()
        .flat_map(|d| verify_dataset(d, &shared, &pb))
        .map(|p| p.to_string())
        .collect();
    assert!(problems.is_empty(), "{problems:#?}");
}

#[test]
fn regenerating_the_lock_from_shared_datasets_changes_nothing() {
    let Some(shared) = shared() else { return };
    let meta =
        read_meta(&Path::new(env!("CARGO_MANIFEST_DIR")).join("datasets.meta.toml")).unwrap();
    let fresh = generate(&shared, &meta, &mut |_| {}).unwrap();
    let embedded = Lock::embedded().unwrap();
    assert_eq!(
        fresh,
        embedded,
        "run `harness datasets lock --from {}`",
        shared.display()
    );
    assert_eq!(fresh.render(), harness_data::lock::LOCK_TEXT);
}
