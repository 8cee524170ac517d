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
