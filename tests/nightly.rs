//! `harness nightly` and `harness compare` through the real binary, on a small
//! configuration (hashed n-grams on STS-B test and four Tatoeba languages, and the LASER
//! recipe shrunk to seconds of training): dated nights land in the history and are never
//! overwritten; a planted regression is flagged with its sign and interval and exits 3; an
//! acknowledgement silences it with its reason; a planted improvement is reported and exits
//! 0; the HTML morning report is laid out in headless Chromium. The rule itself (20 nights of
//! seed noise without an alarm, steps, blips) is tested in `crates/sweep/src/nightly/`.

mod binary;

use binary::{command, text};
use std::path::{Path, PathBuf};
use std::process::Output;

struct Env {
    home: tempfile::TempDir,
}

impl Env {
    fn new() -> Env {
        Env {
            home: tempfile::tempdir().unwrap(),
        }
    }
    fn path(&self, rel: &str) -> PathBuf {
        self.home.path().join(rel)
    }
    fn run(&self, args: &[&str]) -> Output {
        command(self.home.path(), args)
            .env("HARNESS_NIGHTLY_DIR", self.path("store"))
            .env("HARNESS_RUNS_DIR", self.path("runs"))
            .output()
            .unwrap()
    }
    fn config(&self) -> String {
        let recipe = binary::repo().join("recipes/laser.yaml");
        let mut set: Vec<String> = binary::SMALL_LASER
            .chunks(2)
            .map(|kv| format!("{:?}", kv[1]))
            .collect();
        set.extend(
            [
                "train.steps=20",
                "train.eval_every=1000",
                "train.checkpoint_every=20",
            ]
            .iter()
            .map(|s| format!("{s:?}")),
        );
        let path = self.path("small.yaml");
        std::fs::write(
            &path,
            format!(
                "name: small\nseeds: [1]\nspeed_probe_sentences: 200\nentries:\n  \
                 - name: laser\n    recipe: {}\n    set: [{}]\n    benchmarks: [tatoeba]\n    \
                 bench_set: [\"tatoeba.languages=[deu, spa]\"]\n  \
                 - name: hashed\n    encoder: \"hashed-ngrams:dim=64\"\n    \
                 benchmarks: [stsb-test, tatoeba]\n    \
                 bench_set: [\"tatoeba.languages=[deu, fra, spa, ita]\"]\n",
                recipe.display(),
                set.join(", ")
            ),
        )
        .unwrap();
        path.display().to_string()
    }
    fn night_dir(&self, date: &str) -> PathBuf {
        let h = self.path("store/small");
        let d: Vec<PathBuf> = std::fs::read_dir(&h)
            .unwrap()
            .map(|e| e.unwrap().path())
            .filter(|p| p.file_name().unwrap().to_string_lossy().starts_with(date))
            .collect();
        assert_eq!(d.len(), 1, "{d:?}");
        d[0].clone()
    }
}

fn report(dir: &Path) -> String {
    std::fs::read_to_string(dir.join("report/report.txt")).unwrap()
}

#[test]
fn nights_plants_acks_and_compare() {
    let env = Env::new();
    let config = env.config();
    // Night 1: no previous night, nothing to flag.
    let o = env.run(&["nightly", &config, "--date", "2026-11-01"]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    let n1 = env.night_dir("2026-11-01");
    let record: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(n1.join("night.json")).unwrap()).unwrap();
    assert_eq!(record["entries"].as_array().unwrap().len(), 2);
    assert!(
        record["entries"][0]["seeds"][0]["tokens_per_s"]
            .as_f64()
            .unwrap()
            > 0.0
    );
    assert!(record["entries"][0]["sentences_per_s"].as_f64().unwrap() > 0.0);
    assert!(!record["env"]["cpu_model"].as_str().unwrap().is_empty());
    assert!(n1
        .join("hashed/seed-1/results/tatoeba.items.json.gz")
        .is_file());
    for f in ["report.md", "report.html", "report.txt"] {
        assert!(n1.join("report").join(f).is_file(), "{f}");
    }
    // The same date and commit again: refused, the night left as it is.
    let o = env.run(&["nightly", &config, "--date", "2026-11-01"]);
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
    assert!(text(&o).contains("never overwritten"), "{}", text(&o));

    // Night 2 with a planted regression: Tatoeba's error rate up by 5 points.
    let o = env.run(&[
        "nightly",
        &config,
        "--date",
        "2026-11-02",
        "--plant",
        "hashed/tatoeba=-5",
    ]);
    assert_eq!(o.status.code(), Some(3), "{}", text(&o));
    let n2 = env.night_dir("2026-11-02");
    let r = report(&n2);
    assert!(r.contains("FIRE DRILL"), "{r}");
    let line = r
        .lines()
        .find(|l| l.contains("hashed/tatoeba error_rate") && l.contains("Δ +"))
        .unwrap_or_else(|| panic!("{r}"));
    assert!(line.contains("CI [+"), "{line}");
    // Nothing else moved: the fixed encoder gives the same numbers night after night.
    assert!(r.contains("1 regression,"), "{r}");
    // Acknowledged: the same night re-judged exits 0 and shows the reason.
    let ack = env.path("ack.yaml");
    std::fs::write(
        &ack,
        "- {series: hashed/tatoeba, reason: fire drill of the test}\n",
    )
    .unwrap();
    let o = env.run(&[
        "nightly",
        &config,
        "--report-only",
        "--ack",
        ack.to_str().unwrap(),
    ]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    assert!(text(&o).contains("fire drill of the test"), "{}", text(&o));

    // Night 3 with a planted improvement (laser's Tatoeba error down by 5 points): reported,
    // exit 0; the hashed Tatoeba's return to its level is an improvement too.
    let o = env.run(&[
        "nightly",
        &config,
        "--date",
        "2026-11-03",
        "--plant",
        "laser/tatoeba=5",
    ]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    let r = report(&env.night_dir("2026-11-03"));
    assert!(
        r.contains("improvements:") && r.contains("laser/tatoeba"),
        "{r}"
    );

    // compare: night 1 against night 2's hashed results.
    let a = n1.join("hashed/seed-1");
    let b = n2.join("hashed/seed-1");
    let o = env.run(&["compare", a.to_str().unwrap(), b.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(3), "{}", text(&o));
    assert!(text(&o).contains("REGRESSION"), "{}", text(&o));
    let o = env.run(&["compare", a.to_str().unwrap(), a.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));

    // The HTML report in a real browser.
    if binary::browser_check_wanted() {
        let html = n2.join("report/report.html");
        let run = binary::check_report_html(&html, &env.path("shot.png"), "3000");
        let out = text(&run);
        assert!(run.status.success(), "{out}");
        assert!(out.contains("laid out:   tables 3/3 charts 3/3"), "{out}");
    }
}

/// A cheap configuration (seconds a night): hashed n-grams on Tatoeba, two languages, no
/// speed probe; `extra` adds entries (YAML list items).
fn cheap(env: &Env, file: &str, extra: &str) -> String {
    let path = env.path(file);
    std::fs::write(
        &path,
        format!(
            "name: cheap\nseeds: [1]\nspeed_probe_sentences: 0\nentries:\n  \
             - name: hashed\n    encoder: \"hashed-ngrams:dim=64\"\n    \
             benchmarks: [tatoeba]\n    bench_set: [\"tatoeba.languages=[deu, fra]\"]\n{extra}"
        ),
    )
    .unwrap();
    path.display().to_string()
}

fn cheap_night(env: &Env, date: &str) -> PathBuf {
    let h = env.path("store/cheap");
    let d: Vec<PathBuf> = std::fs::read_dir(&h)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.file_name().unwrap().to_string_lossy().starts_with(date))
        .collect();
    assert_eq!(d.len(), 1, "{d:?}");
    d[0].clone()
}

fn flip_byte(path: &Path, at: usize) {
    let mut bytes = std::fs::read(path).unwrap();
    let at = at.min(bytes.len() - 1);
    bytes[at] ^= 0x01;
    std::fs::write(path, bytes).unwrap();
}

/// A night's files are sealed by SHA256SUMS: one flipped byte in a past night's per-item
/// sidecar, or an edited headline in its result file, gets that night named (the file, on
/// the terminal and in report.txt) and left out of every comparison — tonight's planted
/// regression is still caught against the night before it, and the run exits 1 (the history
/// needs a person). `--report-only --date` of a day without a night is an error naming the
/// nights nearby.
#[test]
fn a_tampered_night_is_named_and_left_out() {
    let env = Env::new();
    let config = cheap(&env, "cheap.yaml", "");
    for date in ["2026-11-01", "2026-11-02"] {
        let o = env.run(&["nightly", &config, "--date", date]);
        assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    }
    let n2 = cheap_night(&env, "2026-11-02");
    let sums = std::fs::read_to_string(n2.join("SHA256SUMS")).unwrap();
    assert!(
        sums.contains("  hashed/seed-1/results/tatoeba.items.json.gz\n")
            && sums.contains("  night.json\n")
            && sums.contains("  report/report.txt\n"),
        "{sums}"
    );
    // One flipped byte in the previous night's sidecar.
    let sidecar = n2.join("hashed/seed-1/results/tatoeba.items.json.gz");
    flip_byte(&sidecar, 100);
    let o = env.run(&[
        "nightly",
        &config,
        "--date",
        "2026-11-03",
        "--plant",
        "hashed/tatoeba=-5",
    ]);
    let out = text(&o);
    assert_eq!(o.status.code(), Some(1), "{out}");
    let named = format!(
        "night {} failed verification",
        n2.file_name().unwrap().to_string_lossy()
    );
    assert!(
        out.contains(&named) && out.contains("tatoeba.items.json.gz"),
        "{out}"
    );
    let n3 = cheap_night(&env, "2026-11-03");
    let r = report(&n3);
    assert!(r.contains(&named) && r.contains("1 left out"), "{r}");
    let n1 = cheap_night(&env, "2026-11-01");
    let line = r
        .lines()
        .find(|l| l.contains("hashed/tatoeba error_rate") && l.contains("Δ +"))
        .unwrap_or_else(|| panic!("the planted regression is not caught: {r}"));
    assert!(line.contains("CI [+"), "{line}");
    let md = std::fs::read_to_string(n3.join("report/report.md")).unwrap();
    let n1_name = n1.file_name().unwrap().to_string_lossy().to_string();
    assert!(
        md.contains(&format!("against the previous night {n1_name}")),
        "{md}"
    );

    // The sidecar restored, the result file's headline edited instead (an error rate made
    // 37.88 points better: a fake best night).
    flip_byte(&sidecar, 100);
    let result = n2.join("hashed/seed-1/results/tatoeba.json");
    let original = std::fs::read(&result).unwrap();
    let mut json: serde_json::Value = serde_json::from_slice(&original).unwrap();
    let v = json["main_score"].as_f64().unwrap();
    json["main_score"] = serde_json::json!(v - 37.88);
    std::fs::write(&result, serde_json::to_string_pretty(&json).unwrap()).unwrap();
    let o = env.run(&["nightly", &config, "--report-only"]);
    let out = text(&o);
    assert_eq!(o.status.code(), Some(1), "{out}");
    assert!(
        out.contains(&named) && out.contains("tatoeba.json: sha256"),
        "{out}"
    );
    assert!(out.contains("REGRESSIONS:\n  - hashed/tatoeba"), "{out}");
    assert!(!out.contains("within noise"), "{out}");
    // `harness compare` has no seal to check; it judges the headline's Δ as shown, never
    // "within noise" because the untouched items say nothing moved.
    let o = env.run(&[
        "compare",
        n1.join("hashed/seed-1").to_str().unwrap(),
        n2.join("hashed/seed-1").to_str().unwrap(),
    ]);
    let out = text(&o);
    assert!(
        out.contains("-37.88") && out.contains("improvement") && !out.contains("within noise"),
        "{out}"
    );
    // Both restored: the history verifies again; the drill is a plain regression, exit 3.
    std::fs::write(&result, original).unwrap();
    let o = env.run(&["nightly", &config, "--report-only"]);
    assert_eq!(o.status.code(), Some(3), "{}", text(&o));

    // --report-only --date of a day without a night: an error naming the nights nearby.
    let o = env.run(&["nightly", &config, "--report-only", "--date", "2026-11-05"]);
    let out = text(&o);
    assert_eq!(o.status.code(), Some(2), "{out}");
    assert!(
        out.contains("--date 2026-11-05: no night of that date")
            && out.contains(&n3.file_name().unwrap().to_string_lossy().to_string()),
        "{out}"
    );
    // … and of a day with one: that night's report.
    let o = env.run(&["nightly", &config, "--report-only", "--date", "2026-11-02"]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    assert!(text(&o).contains("cheap 2026-11-02-"), "{}", text(&o));
}

/// Everything a night takes is checked before it starts: a misspelt benchmark, encoder, run
/// path or `bench_set:` key, a bad `--plant`, `--ack` or `--date`, a NaN rule — each is
/// exit 2 with the fix, in well under a second, and nothing is written to the history.
/// `--dry-run` prints the plan of a good configuration and exits 0, writing nothing.
#[test]
fn inputs_are_checked_before_the_night() {
    let env = Env::new();
    let store = env.path("store");
    let refused = |args: &[&str], wants: &[&str]| {
        let o = env.run(args);
        let out = text(&o);
        assert_eq!(o.status.code(), Some(2), "{args:?}: {out}");
        for w in wants {
            assert!(out.contains(w), "{args:?}: wants `{w}`: {out}");
        }
        assert!(!store.exists(), "{args:?} wrote to the history: {out}");
    };
    let entry = |file: &str, body: &str| {
        let p = env.path(file);
        std::fs::write(
            &p,
            format!("name: cheap\nspeed_probe_sentences: 0\nentries:\n  - {{name: e, {body}}}\n"),
        )
        .unwrap();
        p.display().to_string()
    };
    let c = entry("b.yaml", "encoder: hashed-ngrams, benchmarks: [tatoeeba]");
    refused(
        &["nightly", &c],
        &[
            "b.yaml: entries[0] (`e`): benchmarks:",
            "did you mean `tatoeba`",
        ],
    );
    let c = entry("e.yaml", "encoder: hashed-ngram, benchmarks: [tatoeba]");
    refused(
        &["nightly", &c],
        &["e.yaml: entries[0] (`e`): encoder:", "hashed-ngrams"],
    );
    let c = entry("r.yaml", "run: runs/no-such-run, benchmarks: [tatoeba]");
    refused(
        &["nightly", &c],
        &["r.yaml: entries[0] (`e`): run:", "no such directory"],
    );
    let c = entry(
        "k.yaml",
        "encoder: hashed-ngrams, benchmarks: [tatoeba], bench_set: ['tatoeba.langauges=[deu]']",
    );
    refused(
        &["nightly", &c],
        &["k.yaml: entries[0] (`e`): bench_set", "langauges"],
    );
    let c = entry(
        "s.yaml",
        "encoder: hashed-ngrams, benchmarks: [tatoeba], bench_set: ['tatoeeba.languages=[deu]']",
    );
    refused(
        &["nightly", &c],
        &["s.yaml: entries[0] (`e`): bench_set", "tatoeeba"],
    );
    let c = env.path("n.yaml");
    std::fs::write(
        &c,
        "name: cheap\nrules: {min_effect: {default: .nan}}\nentries: [{name: e, encoder: hashed-ngrams, benchmarks: [tatoeba]}]\n",
    )
    .unwrap();
    refused(
        &["nightly", c.to_str().unwrap()],
        &["n.yaml", "rules.min_effect.default"],
    );

    let good = cheap(&env, "cheap.yaml", "");
    refused(
        &["nightly", &good, "--date", "2026-02-30"],
        &["--date 2026-02-30: not a day of the calendar"],
    );
    refused(
        &["nightly", &good, "--plant", "hashed/tatoeeba=-5"],
        &["--plant", "did you mean `tatoeba`"],
    );
    refused(
        &["nightly", &good, "--plant", "hashd/tatoeba=-5"],
        &["--plant", "no entry `hashd`"],
    );
    refused(
        &["nightly", &good, "--plant", "hashed/tatoeba=NaN"],
        &["--plant hashed/tatoeba=NaN"],
    );
    let ack = env.path("ack.yaml");
    std::fs::write(
        &ack,
        "- {series: hashed/tatoeba, reason: r, expires: 2026-13-45}\n",
    )
    .unwrap();
    refused(
        &["nightly", &good, "--ack", ack.to_str().unwrap()],
        &["ack.yaml", "expires 2026-13-45: not a day of the calendar"],
    );
    std::fs::write(&ack, "- {series: hashed/tatoeeba, reason: r}\n").unwrap();
    refused(
        &["nightly", &good, "--ack", ack.to_str().unwrap()],
        &[
            "ack.yaml",
            "`hashed/tatoeeba` matches no series",
            "hashed/tatoeba",
        ],
    );
    // The same numbers of `harness compare`.
    refused(
        &["compare", "a", "b", "--min-effect=NaN"],
        &["--min-effect NaN"],
    );
    refused(
        &["compare", "a", "b", "--confidence=NaN"],
        &["--confidence NaN"],
    );

    // A good configuration: its plan, exit 0, nothing written.
    std::fs::write(
        &ack,
        "- {series: 'hashed/*', reason: r, expires: 2026-10-01}\n",
    )
    .unwrap();
    let o = env.run(&[
        "nightly",
        &good,
        "--dry-run",
        "--date",
        "2026-11-01",
        "--plant",
        "hashed/tatoeba=-5",
        "--ack",
        ack.to_str().unwrap(),
    ]);
    let out = text(&o);
    assert_eq!(o.status.code(), Some(0), "{out}");
    assert!(
        out.contains("hashed (encoder hashed-ngrams:dim=64): seeds 1; evaluate on tatoeba")
            && out.contains("series: hashed/tatoeba,")
            && out.contains("nothing was run, nothing written to the history")
            && out.contains("expired on 2026-10-01"),
        "{out}"
    );
    assert!(!store.exists(), "{out}");
}

/// A night that fails (here a benchmark of its second entry cannot run) is kept, marked
/// failed in its record, and never used as another night's previous night or baseline; the
/// control characters of its error messages reach report.txt escaped, never raw.
#[test]
fn a_failed_night_is_never_a_baseline() {
    let env = Env::new();
    let good = cheap(&env, "cheap.yaml", "");
    // The language's name carries ESC and BEL (a YAML escape in the override's value).
    let failing = cheap(
        &env,
        "failing.yaml",
        "  - name: broken\n    encoder: \"hashed-ngrams:dim=64\"\n    benchmarks: [tatoeba]\n    \
         bench_set: ['tatoeba.languages=[\"x\\e]0;owned\\a\"]']\n",
    );
    let o = env.run(&["nightly", &failing, "--date", "2026-11-01"]);
    assert_eq!(o.status.code(), Some(1), "{}", text(&o));
    let n1 = cheap_night(&env, "2026-11-01");
    let record: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(n1.join("night.json")).unwrap()).unwrap();
    assert_eq!(record["failed"], true, "{record}");
    let r = report(&n1);
    assert!(
        !r.contains(['\u{1b}', '\u{7}']),
        "raw control characters: {r}"
    );
    assert!(r.contains("x\\u{1b}]0;owned\\u{7}"), "{r}");
    assert!(!text(&o).contains('\u{1b}'), "{}", text(&o));
    let o = env.run(&["nightly", &good, "--date", "2026-11-02"]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    // A failed night whose hashed/tatoeba is 5 points worse: were it tomorrow's previous
    // night, tomorrow would show a 5-point improvement.
    let o = env.run(&[
        "nightly",
        &failing,
        "--date",
        "2026-11-03",
        "--plant",
        "hashed/tatoeba=-5",
    ]);
    assert_eq!(o.status.code(), Some(1), "{}", text(&o));
    let o = env.run(&["nightly", &good, "--date", "2026-11-04"]);
    let out = text(&o);
    assert_eq!(o.status.code(), Some(0), "{out}");
    assert!(
        out.contains("0 improvements") && out.contains("2 left out"),
        "{out}"
    );
    let n2 = cheap_night(&env, "2026-11-02")
        .file_name()
        .unwrap()
        .to_string_lossy()
        .to_string();
    let n3 = cheap_night(&env, "2026-11-03")
        .file_name()
        .unwrap()
        .to_string_lossy()
        .to_string();
    assert!(
        out.contains(&format!(
            "night {n3}: left out of every comparison: a failed night"
        )),
        "{out}"
    );
    let md =
        std::fs::read_to_string(cheap_night(&env, "2026-11-04").join("report/report.md")).unwrap();
    assert!(
        md.contains(&format!(
            "against the previous night {n2} and the baseline {n2}"
        )),
        "{md}"
    );
}
