//! `harness report` end to end on real result files: `hashed-ngrams` is evaluated through
//! the library (STS benchmarks: seconds), the report is rendered, and every measured number
//! in it is checked against the JSON field it names; run directories are identified as the
//! systems the table specs declare; the HTML is opened in headless Chromium.

mod binary;

use harness_bench::registry::Registry;
use harness_bench::runner::{run_benchmark, write_result};
use harness_core::settings::Settings;
use harness_embed::CachedEncoder;
use harness_encoders::open_encoder;
use harness_report::render_report;
use serde_json::Value;
use std::collections::HashMap;
use std::path::{Path, PathBuf};

/// Evaluates hashed-ngrams on `benches` into `dir` (result files as `harness eval` writes).
fn eval_into(dir: &Path, cache: &Path, benches: &[&str]) {
    let settings = Settings {
        cache_dir: cache.to_path_buf(),
        ..Settings::default()
    };
    let registry = Registry::load().unwrap();
    let encoder = CachedEncoder::new(open_encoder("hashed-ngrams", &settings).unwrap(), cache);
    for b in benches {
        let r = run_benchmark(b, &Default::default(), &registry, &encoder, &settings, 1);
        assert!(r.error.is_none(), "{b}: {:?}", r.error);
        write_result(dir, &r).unwrap();
    }
}

/// Field lookup written independently of the library's: dotted keys (longest first) and
/// `[i]` indices.
fn lookup(v: &Value, path: &str) -> Option<f64> {
    fn go(v: &Value, segs: &[&str]) -> Option<f64> {
        if segs.is_empty() {
            return v.as_f64();
        }
        for n in (1..=segs.len()).rev() {
            let joined = segs[..n].join(".");
            let (key, idx) = match joined.find('[') {
                Some(i) => (&joined[..i], &joined[i..]),
                None => (joined.as_str(), ""),
            };
            let Some(mut cur) = v.get(key) else { continue };
            for i in idx.split(['[', ']']).filter(|s| !s.is_empty()) {
                cur = cur.get(i.parse::<usize>().ok()?)?;
            }
            if let Some(x) = go(cur, &segs[n..]) {
                return Some(x);
            }
        }
        None
    }
    if let Some(inner) = path.strip_prefix("mean(").and_then(|p| p.strip_suffix(')')) {
        let xs: Option<Vec<f64>> = inner.split(',').map(|p| lookup(v, p.trim())).collect();
        let xs = xs?;
        return Some(xs.iter().sum::<f64>() / xs.len() as f64);
    }
    go(v, &path.split('.').collect::<Vec<_>>())
}

fn cells(out: &Path) -> Vec<HashMap<String, String>> {
    csv::Reader::from_path(out.join("cells.csv"))
        .unwrap()
        .deserialize()
        .map(Result::unwrap)
        .collect()
}

/// `SOURCE_DATE_EPOCH` fixes the render time, the one line of a report that does not come
/// from its inputs: two renders of the same results are the same bytes; a value that is not
/// whole seconds is refused, named, and nothing is written.
#[test]
fn source_date_epoch_makes_two_renders_the_same_bytes() {
    let tmp = tempfile::tempdir().unwrap();
    let results = tmp.path().join("hashed");
    eval_into(&results, &tmp.path().join("cache"), &["stsb-test"]);
    let render = |out: &str, epoch: &str| {
        binary::command(
            tmp.path(),
            &[
                "report",
                results.to_str().unwrap(),
                "--out",
                tmp.path().join(out).to_str().unwrap(),
            ],
        )
        .env("SOURCE_DATE_EPOCH", epoch)
        .output()
        .unwrap()
    };
    for out in ["a", "b"] {
        let o = render(out, "86400");
        assert!(o.status.success(), "{}", binary::text(&o));
    }
    for file in ["report.md", "report.html"] {
        let a = std::fs::read(tmp.path().join("a").join(file)).unwrap();
        let b = std::fs::read(tmp.path().join("b").join(file)).unwrap();
        assert!(a == b, "{file} differs between two renders");
    }
    let md = std::fs::read_to_string(tmp.path().join("a/report.md")).unwrap();
    assert!(md.contains("| rendered | 1970-01-02 00:00 UTC |"), "{md}");
    let bad = render("c", "yesterday");
    assert!(!bad.status.success());
    assert!(
        binary::text(&bad).contains("SOURCE_DATE_EPOCH=\"yesterday\""),
        "{}",
        binary::text(&bad)
    );
    assert!(!tmp.path().join("c/report.md").exists());
}

#[test]
fn numbers_in_the_report_equal_those_in_the_result_files() {
    let tmp = tempfile::tempdir().unwrap();
    let results = tmp.path().join("hashed");
    eval_into(
        &results,
        &tmp.path().join("cache"),
        &[
            "stsb-dev",
            "stsb-test",
            "sts17",
            "stsb-multi",
            "retrieval-p1",
            "eigen-similarity",
        ],
    );
    let out = tmp.path().join("report");
    let s = render_report(
        std::slice::from_ref(&results),
        &[],
        &out,
        &harness::commands::known().unwrap(),
    )
    .unwrap();
    assert_eq!(s.systems, vec!["hashed-ngrams".to_string()]);
    assert!(s.tables >= 20);
    let md = std::fs::read_to_string(out.join("report.md")).unwrap();
    let html = std::fs::read_to_string(out.join("report.html")).unwrap();

    let mut checked = 0;
    let mut in_markdown = 0;
    for c in cells(&out) {
        if c["kind"] != "measured" || c["status"] != "ok" || c["field"].starts_with("mean_of") {
            continue;
        }
        let json: Value =
            serde_json::from_str(&std::fs::read_to_string(&c["result_file"]).unwrap()).unwrap();
        let raw = lookup(&json, &c["field"])
            .unwrap_or_else(|| panic!("{} not in {}", c["field"], c["result_file"]));
        let scale: f64 = c["scale"].parse().unwrap();
        let offset: f64 = c["offset"].parse().unwrap();
        let value: f64 = c["value"].parse().unwrap();
        assert_eq!(value, raw * scale + offset, "{c:?}");
        // The displayed number is the value rounded to the shown decimals ...
        let shown = c["display"].split(' ').next().unwrap();
        let decimals = shown.split('.').nth(1).map_or(0, str::len);
        assert_eq!(shown, format!("{value:.decimals$}"), "{c:?}");
        // ... and its delta, when there is one, is value − published.
        if !c["reference"].is_empty() {
            let r: f64 = c["reference"].parse().unwrap();
            assert_eq!(c["delta"].parse::<f64>().unwrap(), value - r, "{c:?}");
            let mut d = format!("{:+.decimals$}", value - r);
            if d[1..].chars().all(|ch| ch == '0' || ch == '.') {
                d = d.replace('-', "+"); // no "-0.0"
            }
            assert!(c["display"].ends_with(&format!("({d})")), "{c:?}");
        }
        assert!(html.contains(&c["display"]), "HTML lacks {c:?}");
        // In a grid table's Markdown, the cell sits on the system's row.
        let row = format!("| {}", c["row_label"]);
        if c["matrix_row"].is_empty() && md.lines().any(|l| l.starts_with(&row)) {
            let on_row = md.lines().filter(|l| l.starts_with(&row)).any(|l| {
                l.split(" | ")
                    .any(|cell| cell.trim_end_matches(" |") == c["display"])
            });
            assert!(on_row, "Markdown row {row} lacks {}", c["display"]);
            in_markdown += 1;
        }
        checked += 1;
    }
    // stsb-dev/-test (muse T1: 2), stsb-multi (T2: 6), sts17 (T3: 2), retrieval (4), Ψ (4).
    assert!(checked >= 18, "only {checked} measured cells checked");
    assert!(
        in_markdown >= 18,
        "only {in_markdown} cells found on their Markdown rows"
    );

    // One cell by hand: multilingual USE Table 3, es-es = sts17 track 3 angular Pearson / 100.
    let sts17: Value =
        serde_json::from_str(&std::fs::read_to_string(results.join("sts17.json")).unwrap())
            .unwrap();
    let r = sts17["scores"]["subsets"]["track3.es-es"]["angular"]["pearson"]
        .as_f64()
        .unwrap()
        / 100.0;
    let c = cells(&out)
        .into_iter()
        .find(|c| {
            c["table"] == "muse-t3-sts17" && c["row"] == "hashed-ngrams" && c["column"] == "es-es"
        })
        .unwrap();
    assert_eq!(c["value"].parse::<f64>().unwrap(), r);
    assert!(c["display"].starts_with(&format!("{r:.3} (")), "{c:?}");
}

#[test]
fn run_directories_fill_the_rows_their_recipe_and_profile_declare() {
    let tmp = tempfile::tempdir().unwrap();
    let results = tmp.path().join("eval");
    eval_into(&results, &tmp.path().join("cache"), &["stsb-test", "sts17"]);
    // A run directory whose env.json names recipe and profile, and one identified by its
    // resolved recipe's fingerprint (the muse-xling `paper` profile).
    let copy = |dir: &Path| {
        std::fs::create_dir_all(dir.join("results")).unwrap();
        for f in ["stsb-test.json", "sts17.json"] {
            std::fs::copy(results.join(f), dir.join("results").join(f)).unwrap();
        }
    };
    let by_env = tmp.path().join("runs/muse-xling-0123abcd");
    copy(&by_env);
    std::fs::write(
        by_env.join("env.json"),
        r#"{"recipe": "muse-xling", "profile": null, "backend": "ndarray", "device": "cpu", "threads": 2}"#,
    )
    .unwrap();
    let resolved = harness::commands::load_recipe(
        Path::new("recipes/muse-xling.yaml"),
        Some("paper".into()),
        &[],
    )
    .unwrap();
    let by_fp = tmp
        .path()
        .join(format!("runs/muse-xling-{}", &resolved.fingerprint.0[..8]));
    copy(&by_fp);
    std::fs::write(
        by_fp.join("recipe.resolved.yaml"),
        resolved.to_yaml().unwrap(),
    )
    .unwrap();

    let out = tmp.path().join("out");
    let args: Vec<PathBuf> = vec![
        by_env.clone(),
        by_fp.clone(),
        format!("mine={}", results.display()).into(),
    ];
    let s = render_report(
        &args,
        &["muse-t3-sts17".to_string()],
        &out,
        &harness::commands::known().unwrap(),
    )
    .unwrap();
    assert_eq!(s.systems, vec!["mine", "muse-xling", "muse-xling@paper"]);
    assert!(
        s.warnings
            .iter()
            .any(|w| w.contains("`mine` has results but no row")),
        "{:?}",
        s.warnings
    );
    let filled: Vec<String> = cells(&out)
        .into_iter()
        .filter(|c| c["kind"] == "measured" && c["status"] == "ok")
        .map(|c| c["row"].clone())
        .collect();
    assert_eq!(
        filled,
        vec![
            "muse-xling",
            "muse-xling",
            "muse-xling@paper",
            "muse-xling@paper"
        ]
    );
    let md = std::fs::read_to_string(out.join("report.md")).unwrap();
    assert!(
        md.contains("| backend / device | ndarray / cpu |"),
        "env.json provenance"
    );
    assert!(
        md.contains(&resolved.fingerprint.0),
        "recipe fingerprint in the provenance"
    );
    assert!(
        md.contains("matches profile `paper`"),
        "how the system was identified"
    );

    // The CLI: default output directory of a single run directory is <run>/report.
    let cli = <harness::cli::Cli as clap::Parser>::parse_from([
        "harness",
        "report",
        by_env.to_str().unwrap(),
        "--table",
        "muse-t3-sts17",
        "--quiet",
    ]);
    harness::cli::run(cli).unwrap();
    assert!(by_env.join("report/report.html").is_file());
    let err = render_report(
        &[tmp.path().join("nowhere")],
        &[],
        &out,
        &harness::commands::known().unwrap(),
    )
    .unwrap_err()
    .to_string();
    assert!(
        err.contains("not a directory") && err.contains("Fix:"),
        "{err}"
    );
    let err = render_report(
        &args,
        &["muse-t3-sts7".to_string()],
        &out,
        &harness::commands::known().unwrap(),
    )
    .unwrap_err()
    .to_string();
    assert!(err.contains("did you mean `muse-t3-sts17`"), "{err}");
}

/// Opens the HTML report in headless Chromium through `scripts/check_report_html.sh`.
/// Skipped with a notice when no Chromium is installed, unless `HARNESS_BROWSER_CHECK` is
/// set (then the script installs Debian's `chromium` package if it may, and the test fails
/// when it cannot).
#[test]
fn html_report_renders_in_headless_chromium() {
    if !binary::browser_check_wanted() {
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let results = tmp.path().join("hashed");
    eval_into(
        &results,
        &tmp.path().join("cache"),
        &["stsb-dev", "stsb-test", "sts17", "stsb-multi"],
    );
    let out = tmp.path().join("report");
    render_report(&[results], &[], &out, &harness::commands::known().unwrap()).unwrap();
    let shot = out.join("report.png");
    let run = binary::check_report_html(&out.join("report.html"), &shot, "4000");
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&run.stdout),
        String::from_utf8_lossy(&run.stderr)
    );
    assert!(run.status.success(), "{text}");
    assert!(
        text.contains("OK: every table and chart rendered"),
        "{text}"
    );
    assert!(std::fs::metadata(&shot).unwrap().len() > 10_000);
}
