//! What harness reads and writes on a user's disk, through the real binary:
//! - a dataset file that changed after installation (a flipped byte, a directory in its
//!   place) is refused naming it, and the fix the message gives works;
//! - every command that writes into a user-named path (`--out` of `eval`, `run`, `train`,
//!   `report`, `embed`; `export` is tested with training) leaves foreign files alone: it
//!   refuses, or writes beside them.

mod binary;

use binary::{harness, repo, text};
use std::path::Path;

fn names(d: &Path) -> Vec<String> {
    let mut v: Vec<String> = std::fs::read_dir(d)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    v.sort();
    v
}

fn eval(home: &Path, out: &Path) -> std::process::Output {
    harness(
        home,
        &[
            "eval",
            "--encoder",
            "hashed-ngrams:dim=64",
            "--bench",
            "stsb-test",
            "--out",
            out.to_str().unwrap(),
        ],
    )
}

/// `harness report RESULTS --table muse-t2-stsb-multi --out REP --quiet`.
fn report(home: &Path, results: &Path, rep: &Path) -> std::process::Output {
    harness(
        home,
        &[
            "report",
            results.to_str().unwrap(),
            "--table",
            "muse-t2-stsb-multi",
            "--out",
            rep.to_str().unwrap(),
            "--quiet",
        ],
    )
}

#[test]
fn a_changed_dataset_file_is_refused_and_the_fix_works() {
    let home = tempfile::tempdir().unwrap();
    let out = home.path().join("results");
    let first = eval(home.path(), &out);
    assert!(first.status.success(), "{}", text(&first));
    let score = |o: &Path| -> f64 {
        let r: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(o.join("stsb-test.json")).unwrap())
                .unwrap();
        r["main_score"].as_f64().unwrap()
    };
    let good = score(&out);

    // One byte flipped, same size: the benchmark fails naming the file and the fix.
    let victim = home.path().join("datasets/stsbenchmark/sts-test.csv");
    let mut bytes = std::fs::read(&victim).unwrap();
    let at = bytes.iter().position(|b| b.is_ascii_digit()).unwrap();
    bytes[at] = if bytes[at] == b'1' { b'2' } else { b'1' };
    std::fs::write(&victim, &bytes).unwrap();
    let o = eval(home.path(), &out);
    assert_eq!(o.status.code(), Some(1), "{}", text(&o));
    assert!(
        text(&o).contains("sts-test.csv")
            && text(&o).contains("content changed")
            && text(&o).contains("harness datasets fetch stsbenchmark --force"),
        "{}",
        text(&o)
    );
    // `datasets list` no longer calls it verified.
    let list = harness(home.path(), &["datasets", "list"]);
    let line = text(&list)
        .lines()
        .find(|l| l.starts_with("stsbenchmark"))
        .unwrap()
        .to_string();
    assert!(line.contains("unverified"), "{line}");
    // The fix the message gives.
    let fix = harness(
        home.path(),
        &["datasets", "fetch", "stsbenchmark", "--force"],
    );
    assert!(fix.status.success(), "{}", text(&fix));
    let o = eval(home.path(), &out);
    assert!(o.status.success(), "{}", text(&o));
    assert_eq!(score(&out), good);

    // A directory in the file's place: refused by eval and by a plain fetch, replaced by
    // `fetch --force`.
    std::fs::remove_file(&victim).unwrap();
    std::fs::create_dir(&victim).unwrap();
    let o = eval(home.path(), &out);
    assert_eq!(o.status.code(), Some(1), "{}", text(&o));
    assert!(
        text(&o).contains("sts-test.csv") && text(&o).contains("--force"),
        "{}",
        text(&o)
    );
    assert!(!text(&o).contains("os error 21"), "{}", text(&o));
    let plain = harness(home.path(), &["datasets", "fetch", "stsbenchmark"]);
    assert!(!plain.status.success(), "{}", text(&plain));
    assert!(text(&plain).contains("--force"), "{}", text(&plain));
    let fix = harness(
        home.path(),
        &["datasets", "fetch", "stsbenchmark", "--force"],
    );
    assert!(fix.status.success(), "{}", text(&fix));
    let o = eval(home.path(), &out);
    assert!(o.status.success(), "{}", text(&o));
    assert_eq!(score(&out), good);
}

#[test]
fn eval_writes_beside_foreign_files_and_refuses_one_in_the_way() {
    let home = tempfile::tempdir().unwrap();
    let out = home.path().join("mine");
    std::fs::create_dir(&out).unwrap();
    std::fs::write(out.join("notes.txt"), "my notes").unwrap();
    let o = eval(home.path(), &out);
    assert!(o.status.success(), "{}", text(&o));
    // The result and its per-item outcomes' sidecar.
    assert_eq!(
        names(&out),
        ["notes.txt", "stsb-test.items.json.gz", "stsb-test.json"]
    );
    assert_eq!(
        std::fs::read_to_string(out.join("notes.txt")).unwrap(),
        "my notes"
    );
    // A foreign file where the result goes.
    std::fs::write(out.join("stsb-test.json"), "my own json").unwrap();
    let o = eval(home.path(), &out);
    assert_ne!(o.status.code(), Some(0), "{}", text(&o));
    assert!(text(&o).contains("stsb-test.json"), "{}", text(&o));
    assert_eq!(
        std::fs::read_to_string(out.join("stsb-test.json")).unwrap(),
        "my own json"
    );
}

#[test]
fn run_and_train_refuse_a_foreign_directory() {
    let home = tempfile::tempdir().unwrap();
    let out = home.path().join("mine");
    std::fs::create_dir(&out).unwrap();
    std::fs::write(out.join("notes.txt"), "my notes").unwrap();
    let hashed = repo().join("recipes/hashed-ngrams.yaml");
    let laser = repo().join("recipes/laser.yaml");
    for args in [
        vec![
            "run",
            hashed.to_str().unwrap(),
            "--set",
            "evaluate=[stsb-test]",
        ],
        vec!["train", laser.to_str().unwrap()],
        vec!["run", laser.to_str().unwrap()],
    ] {
        let mut a = args.clone();
        a.extend_from_slice(&["--out", out.to_str().unwrap()]);
        let o = harness(home.path(), &a);
        assert_eq!(o.status.code(), Some(2), "{args:?}: {}", text(&o));
        assert!(
            text(&o).contains("notes.txt") && text(&o).contains("not a harness run directory"),
            "{args:?}: {}",
            text(&o)
        );
        assert_eq!(names(&out), ["notes.txt"], "{args:?}: nothing written");
    }
}

#[test]
fn report_leaves_foreign_files_alone_and_embed_never_replaces_unasked() {
    let home = tempfile::tempdir().unwrap();
    let results = home.path().join("results");
    let o = eval(home.path(), &results);
    assert!(o.status.success(), "{}", text(&o));

    // report --out: beside a foreign file; a foreign file in the way is refused.
    let report = |rep: &Path| report(home.path(), &results, rep);
    let rep = home.path().join("rep");
    std::fs::create_dir(&rep).unwrap();
    std::fs::write(rep.join("notes.md"), "my notes").unwrap();
    let o = report(&rep);
    assert!(o.status.success(), "{}", text(&o));
    assert!(rep.join("report.md").is_file());
    assert_eq!(
        std::fs::read_to_string(rep.join("notes.md")).unwrap(),
        "my notes"
    );
    // Its own earlier output is replaced.
    let o = report(&rep);
    assert!(o.status.success(), "{}", text(&o));
    // Someone's cells.csv where the report writes one: refused, nothing written.
    let rep2 = home.path().join("rep2");
    std::fs::create_dir(&rep2).unwrap();
    std::fs::write(rep2.join("cells.csv"), "mine").unwrap();
    let o = report(&rep2);
    assert_ne!(o.status.code(), Some(0), "{}", text(&o));
    assert!(text(&o).contains("cells.csv"), "{}", text(&o));
    assert_eq!(names(&rep2), ["cells.csv"]);
    assert_eq!(
        std::fs::read_to_string(rep2.join("cells.csv")).unwrap(),
        "mine"
    );

    // embed --out: an existing file is replaced only with --force; a directory never.
    let input = home.path().join("s.txt");
    std::fs::write(&input, "one\ntwo\n").unwrap();
    let npy = home.path().join("mine.npy");
    std::fs::write(&npy, "not a matrix").unwrap();
    let embed = |extra: &[&str]| {
        let mut a = vec![
            "embed",
            "--encoder",
            "hashed-ngrams:dim=8",
            "--input",
            input.to_str().unwrap(),
            "--out",
            npy.to_str().unwrap(),
        ];
        a.extend_from_slice(extra);
        harness(home.path(), &a)
    };
    let o = embed(&[]);
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
    assert!(text(&o).contains("--force"), "{}", text(&o));
    assert_eq!(std::fs::read_to_string(&npy).unwrap(), "not a matrix");
    let o = embed(&["--force"]);
    assert!(o.status.success(), "{}", text(&o));
}

/// Strings from result files reach every report format escaped: a system name made of HTML
/// is text in report.md as in report.html.
#[test]
fn untrusted_names_are_escaped_in_markdown_and_html() {
    let home = tempfile::tempdir().unwrap();
    let results = home.path().join("results");
    let o = eval(home.path(), &results);
    assert!(o.status.success(), "{}", text(&o));
    let path = results.join("stsb-test.json");
    let mut r: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
    let evil = "<script>alert(1)</script>\"><img src=x onerror=alert(1)>|[x](javascript:y)";
    r["encoder"]["name"] = evil.into();
    std::fs::write(&path, serde_json::to_string_pretty(&r).unwrap()).unwrap();
    let rep = home.path().join("rep");
    let o = report(home.path(), &results, &rep);
    assert!(o.status.success(), "{}", text(&o));
    for f in ["report.md", "report.html"] {
        let body = std::fs::read_to_string(rep.join(f)).unwrap();
        assert!(
            body.contains("&lt;script&gt;"),
            "{f}: the name is not shown"
        );
        assert!(!body.contains("<script>"), "{f}: raw <script>");
        assert!(!body.contains("<img"), "{f}: raw <img>");
    }
    let md = std::fs::read_to_string(rep.join("report.md")).unwrap();
    assert!(
        !md.contains("[x](javascript:"),
        "report.md: a live Markdown link"
    );
}

/// `<script>` from every place a user's text enters a report is text, never markup:
/// - a sentence quoted in a failed result's error (shown as the cell's footnote), through
///   `harness report` (a system name in a result file: the test above);
/// - a grid's axis alias (in every row label) and metric label (a column), through the
///   sweep report;
/// - a recipe name is refused outright (it names the run directory), naming the key.
#[test]
fn script_tags_from_data_recipes_grids_and_results_stay_text() {
    const EVIL: &str = "<script>alert(1)</script>";
    let escaped = |body: &str, f: &str| {
        assert!(!body.contains("<script"), "{f}: raw <script>");
        assert!(
            body.contains("&lt;script&gt;"),
            "{f}: the text is not shown"
        );
    };
    let home = tempfile::tempdir().unwrap();

    // A result file: a failed benchmark quoting a sentence.
    let results = home.path().join("results");
    let o = eval(home.path(), &results);
    assert!(o.status.success(), "{}", text(&o));
    let path = results.join("stsb-test.json");
    let mut r: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
    r["error"] = format!("row 7 (`{EVIL}`): the encoder returned NaN").into();
    std::fs::write(&path, serde_json::to_string_pretty(&r).unwrap()).unwrap();
    let rep = home.path().join("rep");
    let o = report(home.path(), &results, &rep);
    assert!(o.status.success(), "{}", text(&o));
    for f in ["report.md", "report.html"] {
        let body = std::fs::read_to_string(rep.join(f)).unwrap();
        escaped(&body, f);
        assert!(
            body.contains("the encoder returned NaN"),
            "{f}: no footnote"
        );
    }

    // A grid: an axis alias and a metric label.
    let grid = home.path().join("grid.yaml");
    std::fs::write(
        &grid,
        format!(
            "name: evil\nrecipe: {}\nset:\n  evaluate: [stsb-test]\naxes:\n  model.encoder.dim: [16, 32]\naliases:\n  model.encoder.dim: \"{EVIL}\"\nmetrics:\n  - {{bench: stsb-test, field: main_score, label: \"{EVIL}\", better: higher}}\n",
            repo().join("recipes/hashed-ngrams.yaml").display()
        ),
    )
    .unwrap();
    let o = binary::command(home.path(), &["sweep", grid.to_str().unwrap()])
        .env("HARNESS_RUNS_DIR", home.path().join("runs"))
        .env("HARNESS_SWEEPS_DIR", home.path().join("sweeps"))
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", text(&o));
    let sweep = std::fs::read_dir(home.path().join("sweeps"))
        .unwrap()
        .next()
        .unwrap()
        .unwrap()
        .path();
    for f in ["report.md", "report.html"] {
        let body = std::fs::read_to_string(sweep.join("report").join(f)).unwrap();
        escaped(&body, f);
    }

    // A recipe name: refused before anything runs.
    let recipe = home.path().join("evil.yaml");
    let hashed = std::fs::read_to_string(repo().join("recipes/hashed-ngrams.yaml")).unwrap();
    std::fs::write(
        &recipe,
        hashed.replace("name: hashed-ngrams", &format!("name: \"{EVIL}\"")),
    )
    .unwrap();
    let o = harness(home.path(), &["validate", recipe.to_str().unwrap()]);
    assert!(!o.status.success(), "{}", text(&o));
    assert!(text(&o).contains("evil.yaml:4: name:"), "{}", text(&o));
    assert!(
        text(&o).contains("name") && text(&o).contains("letters, digits"),
        "{}",
        text(&o)
    );
}
