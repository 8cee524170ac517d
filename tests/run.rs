//! `harness run` through the real binary on an evaluation recipe: the run directory holds
//! the resolved recipe, env.json and one result per benchmark; a second run keeps the results
//! (same numbers, no recomputation); a concurrent run on the same directory is refused.
//! (Training recipes through `harness run` are tested with the trainer.)

mod binary;

use binary::{harness, text};
use std::path::{Path, PathBuf};

fn recipe(name: &str) -> String {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("recipes")
        .join(name)
        .to_string_lossy()
        .into_owned()
}

fn json(path: &Path) -> serde_json::Value {
    serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
}

#[test]
fn evaluation_recipe_writes_a_run_directory_and_reuses_its_results() {
    let home = tempfile::tempdir().unwrap();
    let out = home.path().join("run");
    let out_s = out.to_string_lossy().into_owned();
    let hashed = recipe("hashed-ngrams.yaml");
    let args = [
        "run",
        hashed.as_str(),
        "--set",
        "evaluate=[stsb-test,sick-r]",
        "--out",
        out_s.as_str(),
    ];
    let first = harness(home.path(), &args);
    assert!(first.status.success(), "{}", text(&first));
    for f in [
        "recipe.resolved.yaml",
        "env.json",
        "results/stsb-test.json",
        "results/sick-r.json",
    ] {
        assert!(out.join(f).is_file(), "{f} missing: {}", text(&first));
    }
    let env = json(&out.join("env.json"));
    assert_eq!(env["recipe"], "hashed-ngrams");
    assert_eq!(env["recipe_fingerprint"].as_str().unwrap().len(), 64);
    let before = json(&out.join("results/stsb-test.json"));
    assert!(before["main_score"].as_f64().unwrap() > 30.0, "{before}");

    let second = harness(home.path(), &args);
    assert!(second.status.success(), "{}", text(&second));
    assert!(
        text(&second).contains("stsb-test: kept"),
        "{}",
        text(&second)
    );
    let after = json(&out.join("results/stsb-test.json"));
    assert_eq!(
        before, after,
        "a kept result must be byte-for-byte the same file"
    );
}

#[test]
fn a_run_directory_in_use_is_refused_naming_the_lock() {
    let home = tempfile::tempdir().unwrap();
    let out = home.path().join("run");
    std::fs::create_dir_all(&out).unwrap();
    // This test process holds the run lock (a flock on `.lock`) while harness tries.
    let _held = harness_core::rundir::RunLock::acquire(&out).unwrap();
    let hashed = recipe("hashed-ngrams.yaml");
    let o = harness(
        home.path(),
        &["run", &hashed, "--out", &out.to_string_lossy()],
    );
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
    assert!(
        text(&o).contains(".lock") && text(&o).contains("another harness process"),
        "{}",
        text(&o)
    );
}
