//! docs/reliability.md: what harness refuses rather than follows, mixes or silences, through
//! the real binary on the hashed-ngrams evaluation recipe (seconds each). A `.lock` or a
//! `results/` that is a link, a run directory of another recipe, two encoders in one folder,
//! control characters from result files, stdout closed early, and the small refusals
//! (`--bench ''`, `evaluate: []` with a report, an unknown Tatoeba language). `--stop-after 0`
//! training nothing: tests/fault_injection.rs.
//! Links in a dataset folder: tests/datasets_local.rs; emitted Slurm folders: tests/sweep_slurm.rs;
//! nightly history: tests/nightly.rs.

mod binary;

use binary::{harness, repo, text};
use std::path::Path;

fn hashed() -> String {
    repo()
        .join("recipes/hashed-ngrams.yaml")
        .to_string_lossy()
        .into_owned()
}

/// `harness run recipes/hashed-ngrams.yaml --set evaluate=[BENCH] --out OUT [EXTRA...]`.
fn run_into(home: &Path, out: &Path, bench: &str, extra: &[&str]) -> std::process::Output {
    let set = format!("evaluate=[{bench}]");
    let out = out.to_string_lossy().into_owned();
    let hashed = hashed();
    let mut args = vec![
        "run",
        hashed.as_str(),
        "--set",
        set.as_str(),
        "--out",
        out.as_str(),
    ];
    args.extend_from_slice(extra);
    harness(home, &args)
}

#[cfg(unix)]
#[test]
fn a_lock_or_results_folder_that_is_a_link_is_refused_and_the_target_kept() {
    let home = tempfile::tempdir().unwrap();
    let victim = home.path().join("victim.txt");
    std::fs::write(&victim, "someone's file").unwrap();
    let out = home.path().join("run");
    std::fs::create_dir(&out).unwrap();
    std::os::unix::fs::symlink(&victim, out.join(".lock")).unwrap();
    let o = run_into(home.path(), &out, "stsb-test", &[]);
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
    assert!(text(&o).contains("symbolic link"), "{}", text(&o));
    assert_eq!(std::fs::read_to_string(&victim).unwrap(), "someone's file");

    // A whole run, then its results/ replaced by a link to someone's folder: a forced
    // re-evaluation refuses to write through it.
    std::fs::remove_file(out.join(".lock")).unwrap();
    let o = run_into(home.path(), &out, "stsb-test", &[]);
    assert!(o.status.success(), "{}", text(&o));
    let theirs = home.path().join("theirs");
    std::fs::rename(out.join("results"), &theirs).unwrap();
    let before = std::fs::read(theirs.join("stsb-test.json")).unwrap();
    std::os::unix::fs::symlink(&theirs, out.join("results")).unwrap();
    let o = run_into(home.path(), &out, "stsb-test", &["--force"]);
    assert_ne!(o.status.code(), Some(0), "{}", text(&o));
    assert!(
        text(&o).contains("symbolic link") && text(&o).contains("results"),
        "{}",
        text(&o)
    );
    assert_eq!(
        std::fs::read(theirs.join("stsb-test.json")).unwrap(),
        before
    );
    assert!(!theirs.join(".lock").exists());
}

#[test]
fn a_run_directory_of_another_recipe_is_refused_naming_both() {
    let home = tempfile::tempdir().unwrap();
    let out = home.path().join("run");
    let o = run_into(home.path(), &out, "stsb-test", &[]);
    assert!(o.status.success(), "{}", text(&o));
    let env_before = std::fs::read(out.join("env.json")).unwrap();
    // Another resolved recipe (another fingerprint) into the same directory.
    let o = run_into(home.path(), &out, "sick-r", &[]);
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
    let t = text(&o);
    assert!(
        t.contains("env.json") && t.contains("hashed-ngrams") && t.contains("one resolved recipe"),
        "{t}"
    );
    assert!(
        !out.join("results/sick-r.json").exists(),
        "nothing evaluated"
    );
    assert_eq!(std::fs::read(out.join("env.json")).unwrap(), env_before);
}

#[test]
fn a_folder_of_two_encoders_is_refused_by_eval_and_by_the_report() {
    let home = tempfile::tempdir().unwrap();
    let a = home.path().join("a");
    let b = home.path().join("b");
    let eval = |enc: &str, out: &Path| {
        harness(
            home.path(),
            &[
                "eval",
                "--encoder",
                enc,
                "--bench",
                "stsb-test",
                "--out",
                &out.to_string_lossy(),
            ],
        )
    };
    let o = eval("hashed-ngrams:dim=64", &a);
    assert!(o.status.success(), "{}", text(&o));
    // Another configuration of the same encoder (same name, another fingerprint).
    let o = eval("hashed-ngrams:dim=32", &a);
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
    assert!(text(&o).contains("another encoder"), "{}", text(&o));
    // A folder mixed by hand is refused by the report rather than shown as one row.
    let o = eval("hashed-ngrams:dim=32", &b);
    assert!(o.status.success(), "{}", text(&o));
    let mut other: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(b.join("stsb-test.json")).unwrap()).unwrap();
    other["benchmark"] = "sick-r".into();
    other["items"] = serde_json::Value::Null;
    std::fs::write(a.join("sick-r.json"), other.to_string()).unwrap();
    let o = harness(
        home.path(),
        &[
            "report",
            &a.to_string_lossy(),
            "--out",
            &home.path().join("r").to_string_lossy(),
        ],
    );
    assert_ne!(o.status.code(), Some(0), "{}", text(&o));
    assert!(text(&o).contains("2 encoder states"), "{}", text(&o));
}

#[test]
fn a_folder_another_evaluation_holds_is_refused() {
    let home = tempfile::tempdir().unwrap();
    let out = home.path().join("o");
    std::fs::create_dir(&out).unwrap();
    let _held = harness_core::rundir::RunLock::acquire(&out).unwrap();
    let o = harness(
        home.path(),
        &[
            "eval",
            "--encoder",
            "hashed-ngrams",
            "--bench",
            "stsb-test",
            "--out",
            &out.to_string_lossy(),
        ],
    );
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
    assert!(
        text(&o).contains("evaluating into this folder"),
        "{}",
        text(&o)
    );
}

#[test]
fn control_characters_from_result_files_never_reach_the_terminal() {
    let home = tempfile::tempdir().unwrap();
    let a = home.path().join("a");
    let o = harness(
        home.path(),
        &[
            "eval",
            "--encoder",
            "hashed-ngrams",
            "--bench",
            "stsb-test",
            "--out",
            &a.to_string_lossy(),
        ],
    );
    assert!(o.status.success(), "{}", text(&o));
    // The system's name comes from the result files: plant ESC and BEL in it.
    let p = a.join("stsb-test.json");
    let mut r: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&p).unwrap()).unwrap();
    r["encoder"]["name"] = "evil\u{1b}]0;owned\u{7}".into();
    std::fs::write(&p, r.to_string()).unwrap();
    let o = harness(
        home.path(),
        &[
            "report",
            &a.to_string_lossy(),
            "--out",
            &home.path().join("r").to_string_lossy(),
        ],
    );
    let t = text(&o);
    assert!(t.contains("systems: evil\\u{1b}"), "{t}");
    assert!(!t.contains('\u{1b}') && !t.contains('\u{7}'), "{t}");
}

/// `harness report --list | head -0`: stdout is a pipe whose reader is already gone, so the
/// first line printed meets a broken pipe.
#[test]
fn stdout_closed_early_is_a_quiet_exit() {
    let home = tempfile::tempdir().unwrap();
    let (reader, writer) = std::io::pipe().unwrap();
    drop(reader);
    let o = binary::command(home.path(), &["report", "--list"])
        .stdout(writer)
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(!err.contains("panicked"), "{err}");
    assert_eq!(o.status.code(), Some(0), "{err}");
}

#[test]
fn inputs_that_would_run_nothing_or_the_wrong_thing_are_refused() {
    let home = tempfile::tempdir().unwrap();
    let o = harness(
        home.path(),
        &["eval", "--encoder", "hashed-ngrams", "--bench", ""],
    );
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
    assert!(text(&o).contains("names no benchmark"), "{}", text(&o));

    let recipe = home.path().join("r.yaml");
    std::fs::write(
        &recipe,
        format!("base: {}\nname: nothing\nevaluate: []\n", hashed()),
    )
    .unwrap();
    let o = harness(home.path(), &["validate", &recipe.to_string_lossy()]);
    assert!(
        text(&o).contains("warning") && text(&o).contains("`harness run` would"),
        "{}",
        text(&o)
    );
    let out = home.path().join("nothing");
    let o = harness(
        home.path(),
        &[
            "run",
            &recipe.to_string_lossy(),
            "--out",
            &out.to_string_lossy(),
        ],
    );
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
    assert!(
        text(&o).contains("evaluate: lists no benchmark"),
        "{}",
        text(&o)
    );
    assert!(!out.exists(), "refused before the run directory was made");

    for lang in ["dee", "../../etc"] {
        let set = format!("tatoeba.languages=[\"{lang}\"]");
        let o = harness(
            home.path(),
            &[
                "eval",
                "--encoder",
                "hashed-ngrams",
                "--bench",
                "tatoeba",
                "--set",
                &set,
                "--out",
                &home.path().join("t").to_string_lossy(),
            ],
        );
        let t = text(&o);
        assert_eq!(o.status.code(), Some(1), "{t}");
        let result = std::fs::read_to_string(home.path().join("t/tatoeba.json")).unwrap();
        assert!(result.contains("is not one of the dataset's"), "{result}");
        assert!(!result.contains("datasets fetch"), "{result}");
    }
}
