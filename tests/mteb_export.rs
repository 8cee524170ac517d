//! `harness export-results --format mteb` end to end, read back by MTEB itself: a run
//! directory of the `hashed-ngrams` recipe is evaluated on the benchmarks that have an MTEB
//! counterpart (and two that do not), exported, and loaded with mteb's own result loader
//! (`scripts/mteb_load_results.py`: `ResultCache.load_results` of the mteb version pinned in
//! `scripts/pyenv.py`, the model metadata validated as a `ModelMeta`, every task validated
//! against MTEB's task definition). The task names, splits, hf_subsets, languages and main
//! scores MTEB reads must be the ones the run recorded, each recomputed here from the result
//! files (cosine correlations ÷ 100; STS12 pooled over its subsets; bitext F1 from the
//! retrieved indices of the items sidecar).
//!
//! The script runs in the venv of `scripts/pyenv.py`; the first run installs mteb and its
//! dependencies from PyPI (a few minutes, needs the network). Like the other tests that use
//! the venv, it never passes by skipping: no Python, no venv or no network is a failure.

mod binary;

use binary::{harness, repo, text};
use harness_bench::items::{read_items, ItemsRef, Outcomes};
use serde_json::Value;
use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::process::Command;

/// The recipe's `evaluate:` for the test: every exported kind, kept small, and two benchmarks
/// MTEB does not have in the same form (SICK-R: MTEB's holds all of SICK; retrieval P@1).
const EVALUATE: &str = "evaluate=[stsb-test, stsb-dev, sts12, \
    {name: sts17, params: {tracks: [1, 2, 3, 4a, 4b, 5, 6]}}, \
    {name: stsb-multi, languages: [en, de, ja], params: {cross_lingual: [en-de]}}, \
    {name: tatoeba, languages: [deu, fra, cmn, fry]}, \
    {name: flores200, languages: [eng_Latn, deu_Latn, zho_Hans]}, \
    sick-r, {name: retrieval-p1, params: {distractors: 10}, languages: [deu-eng]}]";

fn json(path: &Path) -> Value {
    serde_json::from_str(&std::fs::read_to_string(path).unwrap())
        .unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

fn close(a: f64, b: f64) -> bool {
    (a - b).abs() <= 1e-9
}

/// MTEB's bitext F1 (scikit-learn's weighted F1 of retrieved index against the query's own):
/// a right retrieval of a line `c` queries retrieved counts `2 / (c + 1)`.
fn bitext_f1(neighbour: &[i64]) -> f64 {
    let mut count: BTreeMap<i64, f64> = BTreeMap::new();
    for &j in neighbour {
        *count.entry(j).or_default() += 1.0;
    }
    let right: f64 = neighbour
        .iter()
        .enumerate()
        .filter(|&(i, &j)| j == i as i64)
        .map(|(_, j)| 2.0 / (count[j] + 1.0))
        .sum();
    right / neighbour.len() as f64
}

/// The retrieved indices of each group of a result's sidecar.
fn neighbours(results: &Path, bench: &str) -> BTreeMap<String, Vec<i64>> {
    let r = json(&results.join(format!("{bench}.json")));
    let reference: ItemsRef = serde_json::from_value(r["items"].clone()).unwrap();
    read_items(results, &reference)
        .unwrap()
        .groups
        .into_iter()
        .filter_map(|g| match g.outcomes {
            Outcomes::Correct {
                neighbour: Some(n), ..
            } => Some((g.name, n)),
            _ => None,
        })
        .collect()
}

/// STS12's correlation over all its pairs, as MTEB computes it.
fn pooled_spearman(results: &Path) -> f64 {
    let r = json(&results.join("sts12.json"));
    let reference: ItemsRef = serde_json::from_value(r["items"].clone()).unwrap();
    let (mut p, mut g) = (Vec::new(), Vec::new());
    for group in read_items(results, &reference).unwrap().groups {
        if let Outcomes::Scored {
            predicted, gold, ..
        } = group.outcomes
        {
            p.extend(predicted);
            g.extend(gold);
        }
    }
    assert_eq!(p.len(), 3108);
    harness_bench::metrics::spearman(&p, &g)
}

fn cosine_spearman(results: &Path, bench: &str, set: &str) -> f64 {
    json(&results.join(format!("{bench}.json")))["scores"]["subsets"][set]["cosine"]["spearman"]
        .as_f64()
        .unwrap_or_else(|| panic!("{bench}: no cosine spearman of `{set}`"))
        / 100.0
}

#[test]
fn mtebs_loader_reads_the_exported_run_with_the_recorded_scores() {
    let home = tempfile::tempdir().unwrap();
    let run = home.path().join("run");
    let out = home.path().join("mteb");
    let recipe = repo().join("recipes/hashed-ngrams.yaml");
    let o = harness(
        home.path(),
        &[
            "run",
            recipe.to_str().unwrap(),
            "--set",
            EVALUATE,
            "--out",
            run.to_str().unwrap(),
        ],
    );
    assert!(o.status.success(), "{}", text(&o));

    let o = harness(
        home.path(),
        &[
            "export-results",
            run.to_str().unwrap(),
            "--format",
            "mteb",
            "--out",
            out.to_str().unwrap(),
        ],
    );
    assert!(o.status.success(), "{}", text(&o));
    let said = text(&o);
    let skipped = said
        .lines()
        .find(|l| l.starts_with("skipped (no MTEB counterpart"))
        .unwrap_or_else(|| panic!("no skipped line:\n{said}"));
    assert!(
        skipped.contains("sick-r (") && skipped.contains("retrieval-p1 ("),
        "{skipped}"
    );

    let python = std::env::var("HARNESS_PYTHON").unwrap_or_else(|_| "python3".to_string());
    let o = Command::new(&python)
        .arg(repo().join("scripts/mteb_load_results.py"))
        .arg(&out)
        .current_dir(repo())
        .output()
        .unwrap_or_else(|e| panic!("running {python} scripts/mteb_load_results.py: {e}"));
    assert!(
        o.status.success(),
        "scripts/mteb_load_results.py failed:\n{}",
        text(&o)
    );
    let loaded: Value = serde_json::from_slice(&o.stdout)
        .unwrap_or_else(|e| panic!("not JSON ({e}):\n{}", text(&o)));
    assert_eq!(loaded["mteb_version"], "2.26.24", "{loaded}");
    let models = loaded["models"].as_array().unwrap();
    assert_eq!(models.len(), 1, "{loaded}");
    let model = &models[0];
    assert_eq!(model["name"], "harness/hashed-ngrams");
    assert_eq!(model["meta_name"], "harness/hashed-ngrams");
    assert_eq!(model["meta_revision"], model["revision"]);
    let revision = model["revision"].as_str().unwrap();
    assert!(
        said.contains(&format!("revision {revision}")),
        "the printed revision is the loaded one: {said}"
    );

    let tasks = model["tasks"].as_object().unwrap();
    let names: BTreeSet<&str> = tasks.keys().map(String::as_str).collect();
    assert_eq!(
        names,
        BTreeSet::from([
            "FloresBitextMining",
            "STS12",
            "STS17",
            "STSBenchmark",
            "STSBenchmarkMultilingualSTS",
            "Tatoeba",
        ]),
        "{loaded}"
    );

    // The main score MTEB read for (task, split, subset), and its languages.
    let score = |task: &str, split: &str, subset: &str| -> f64 {
        tasks[task]["scores"][split][subset]
            .as_f64()
            .unwrap_or_else(|| panic!("{task} {split}/{subset} not loaded: {}", tasks[task]))
    };
    let subsets = |task: &str, split: &str| -> BTreeSet<String> {
        tasks[task]["scores"][split]
            .as_object()
            .unwrap_or_else(|| panic!("{task}: no split {split}: {}", tasks[task]))
            .keys()
            .cloned()
            .collect()
    };
    let set = |v: &[&str]| -> BTreeSet<String> { v.iter().map(|s| s.to_string()).collect() };
    let results = run.join("results");

    // STS: the result's cosine Spearman ÷ 100.
    assert!(close(
        score("STSBenchmark", "test", "default"),
        cosine_spearman(&results, "stsb-test", "test")
    ));
    assert!(close(
        score("STSBenchmark", "validation", "default"),
        cosine_spearman(&results, "stsb-dev", "dev")
    ));
    for (track, subset) in [
        ("track1.ar-ar", "ar-ar"),
        ("track2.ar-en", "en-ar"),
        ("track3.es-es", "es-es"),
        ("track4a.es-en", "es-en"),
        ("track5.en-en", "en-en"),
        ("track6.tr-en", "en-tr"),
    ] {
        assert!(
            close(
                score("STS17", "test", subset),
                cosine_spearman(&results, "sts17", track)
            ),
            "{subset}"
        );
    }
    assert_eq!(
        subsets("STS17", "test"),
        set(&["ar-ar", "en-ar", "es-es", "es-en", "en-en", "en-tr"]),
        "track 4b has no MTEB subset"
    );
    assert_eq!(
        tasks["STS17"]["languages"]["test"]["en-ar"],
        serde_json::json!(["eng-Latn", "ara-Arab"])
    );
    for lang in ["en", "de"] {
        assert!(close(
            score("STSBenchmarkMultilingualSTS", "test", lang),
            cosine_spearman(&results, "stsb-multi", lang)
        ));
    }
    assert_eq!(
        subsets("STSBenchmarkMultilingualSTS", "test"),
        set(&["de", "en"]),
        "ja and en-de have no MTEB subset"
    );
    // STS12: MTEB's correlation over all pairs, not harness's weighted mean of subsets.
    let pooled = pooled_spearman(&results);
    assert!(close(score("STS12", "test", "default"), pooled));
    let headline = json(&results.join("sts12.json"))["main_score"]
        .as_f64()
        .unwrap()
        / 100.0;
    assert!(
        (pooled - headline).abs() > 1e-6,
        "pooled {pooled} equals the weighted mean {headline}: the test cannot tell them apart"
    );

    // Bitext mining: MTEB's F1 of the retrieved indices, xxx → eng for Tatoeba.
    let tatoeba = neighbours(&results, "tatoeba");
    for lang in ["deu", "fra", "cmn", "fry"] {
        let n = &tatoeba[&format!("{lang}/xx_to_eng")];
        assert!(
            close(
                score("Tatoeba", "test", &format!("{lang}-eng")),
                bitext_f1(n)
            ),
            "{lang}"
        );
    }
    assert_eq!(
        subsets("Tatoeba", "test"),
        set(&["cmn-eng", "deu-eng", "fra-eng", "fry-eng"])
    );
    assert_eq!(
        tasks["Tatoeba"]["languages"]["test"]["cmn-eng"],
        serde_json::json!(["cmn-Hans", "eng-Latn"])
    );
    let flores = neighbours(&results, "flores200");
    assert_eq!(flores.len(), 6);
    for (pair, n) in &flores {
        assert!(
            close(score("FloresBitextMining", "devtest", pair), bitext_f1(n)),
            "{pair}"
        );
    }
    assert_eq!(
        subsets("FloresBitextMining", "devtest"),
        flores.keys().cloned().collect()
    );
    // hashed n-grams are no translation model: the scores are not trivially 0 or 1.
    let f1 = score("Tatoeba", "test", "deu-eng");
    assert!(f1 > 0.05 && f1 < 0.99, "{f1}");

    // MTEB's validation against its task definitions keeps every exported subset of its
    // eval splits, with the same score (so every hf_subset is one MTEB knows); STSBenchmark's
    // validation split is not an eval split, and STS17's five other subsets are filled in.
    for (task, t) in tasks {
        for (split, subsets) in t["scores"].as_object().unwrap() {
            if task == "STSBenchmark" && split == "validation" {
                assert!(t["validated"].get("validation").is_none(), "{t}");
                continue;
            }
            for (subset, v) in subsets.as_object().unwrap() {
                assert_eq!(
                    t["validated"][split][subset], *v,
                    "{task} {split}/{subset} after MTEB's validation: {t}"
                );
            }
        }
        assert!(t["dataset_revision"]
            .as_str()
            .unwrap()
            .contains("@harness-datasets-lock-"));
        assert_eq!(t["mteb_version"], "2.26.24");
    }
    assert_eq!(tasks["STS17"]["filled_in"], 5);
}

#[test]
fn the_format_is_required_and_mteb_is_the_only_one() {
    let home = tempfile::tempdir().unwrap();
    let o = harness(home.path(), &["export-results", ".", "--out", "x"]);
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
    assert!(text(&o).contains("--format"), "{}", text(&o));
    let o = harness(
        home.path(),
        &["export-results", ".", "--format", "csv", "--out", "x"],
    );
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
    assert!(text(&o).contains("mteb"), "{}", text(&o));
    // A folder without results: an error naming it and the fix, nothing written.
    let empty = home.path().join("empty");
    std::fs::create_dir(&empty).unwrap();
    let out = home.path().join("out");
    let o = harness(
        home.path(),
        &[
            "export-results",
            empty.to_str().unwrap(),
            "--format",
            "mteb",
            "--out",
            out.to_str().unwrap(),
        ],
    );
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
    assert!(
        text(&o).contains("empty") && text(&o).contains("Fix:"),
        "{}",
        text(&o)
    );
    assert!(!out.exists());
}
