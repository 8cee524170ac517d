//! The mapping, the metric conversions and the layout, on result files written here with the
//! runner's own writer (`write_result`, sidecar included).

use super::*;
use harness_bench::benchmark::Overrides;
use harness_bench::items::{Correlation, Group};
use harness_bench::runner::{write_result, BenchResult, CacheCounts, EncoderInfo};

const FP: &str = "trained-bilstm/v2;weights=abc;tokenizer=def;pool=max;max_len=256";

fn result(bench: &str, protocol: &str, dataset: &str, scores: Value, params: Value) -> BenchResult {
    BenchResult {
        benchmark: bench.into(),
        protocol: protocol.into(),
        dataset: dataset.into(),
        main_metric: Some("spearman".into()),
        main_score: Some(50.0),
        scores,
        protocol_params: params,
        notes: Vec::new(),
        datasets: "0123456789abcdef0123".into(),
        encoder: EncoderInfo {
            name: "laser".into(),
            fingerprint: FP.into(),
            dim: 32,
        },
        seed: 1,
        seconds: 2.5,
        seconds_by_part: Default::default(),
        cache: CacheCounts::default(),
        harness_version: "0.1.0".into(),
        overrides: Overrides::default(),
        declaration: String::new(),
        error: None,
        items: None,
        outcomes: None,
    }
}

/// `scores` of an sts result with these sets: (key, n, cosine spearman ×100, pearson ×100),
/// written through the protocol's own struct.
fn sts_scores(sets: &[(&str, usize, f64, f64)], cross: &[&str]) -> Value {
    use harness_bench::protocols::sts::{
        AllScores, CorrelationMeans, Correlations, MeanScores, SetScores,
    };
    let subsets = sets
        .iter()
        .map(|&(k, n, s, p)| {
            let c = |p: f64| Correlations {
                spearman: Some(s),
                pearson: Some(p),
            };
            let set = SetScores {
                n,
                cosine: c(p),
                angular: c(p + 1.0),
            };
            (k.to_string(), set)
        })
        .collect();
    let means = || MeanScores {
        mean: None,
        wmean: None,
    };
    let sim = || CorrelationMeans {
        pearson: means(),
        spearman: means(),
    };
    let all = AllScores {
        sets: sets.len(),
        n: sets.iter().map(|s| s.1).sum(),
        cosine: sim(),
        angular: sim(),
    };
    let owned = |v: Vec<&str>| v.into_iter().map(String::from).collect::<Vec<_>>();
    serde_json::to_value(StsScores {
        main: "all.cosine.spearman.mean".into(),
        scale: 100,
        order: owned(sets.iter().map(|s| s.0).collect()),
        subsets,
        all,
        cross_lingual_order: (!cross.is_empty()).then(|| owned(cross.to_vec())),
        cross_lingual: None,
        cross_lingual_all: None,
    })
    .unwrap()
}

fn write(dir: &Path, r: &BenchResult) -> ResultFile {
    let path = write_result(dir, r).unwrap();
    let result = harness_bench::runner::read_result(&path).unwrap();
    ResultFile {
        json: serde_json::to_value(&result).unwrap(),
        path,
        result,
        modified: None,
    }
}

/// Search outcomes of `n` queries: query `i` retrieves `wrong[i]` where given, else `i`.
fn search(n: usize, wrong: &[(usize, i64)]) -> Outcomes {
    let mut neighbour: Vec<i64> = (0..n as i64).collect();
    for &(i, j) in wrong {
        neighbour[i] = j;
    }
    Outcomes::Correct {
        correct: neighbour
            .iter()
            .enumerate()
            .map(|(i, &j)| j == i as i64)
            .collect(),
        neighbour: Some(neighbour),
    }
}

fn exported(m: Mapping) -> Contribution {
    match m {
        Mapping::Export(c) => c,
        Mapping::Skip(why) => panic!("skipped: {why}"),
    }
}

fn skipped(m: Mapping) -> String {
    match m {
        Mapping::Skip(why) => why,
        Mapping::Export(c) => panic!("exported: {c:?}"),
    }
}

#[test]
fn bitext_metrics_equal_scikit_learns_weighted_scores() {
    // Values from sklearn 1.9.1 (precision/recall/f1_score(average="weighted",
    // zero_division=0), accuracy_score) on labels 0..n.
    let close = |a: f64, b: f64| (a - b).abs() < 1e-15;
    let cases: [(&[i64], [f64; 4]); 3] = [
        (&[0, 0, 2, 3], [0.625, 0.75, 0.6666666666666666, 0.75]),
        (&[1, 0, 2, 2, -1], [0.1, 0.2, 0.13333333333333333, 0.2]),
        (
            &[2, 2, 2],
            [
                0.1111111111111111,
                0.3333333333333333,
                0.16666666666666666,
                0.3333333333333333,
            ],
        ),
    ];
    for (pred, [p, r, f, a]) in cases {
        let m = bitext_metrics(pred);
        assert!(
            close(m.precision, p) && close(m.recall, r) && close(m.f1, f) && close(m.accuracy, a),
            "{pred:?}: {m:?}"
        );
    }
    let perfect = bitext_metrics(&[0, 1, 2]);
    assert_eq!((perfect.f1, perfect.accuracy), (1.0, 1.0));
}

#[test]
fn sts_benchmark_maps_by_split_and_converts_to_the_unit_scale() {
    let tmp = tempfile::tempdir().unwrap();
    let test = write(
        tmp.path(),
        &result(
            "stsb-test",
            "sts",
            "stsbenchmark",
            sts_scores(&[("test", 1379, 78.5, 80.25)], &[]),
            json!({"split": "test", "similarity": "cosine"}),
        ),
    );
    let c = exported(convert(&test).unwrap());
    assert_eq!(c.task.name, "STSBenchmark");
    let e = &c.entries[0];
    assert_eq!(
        (e.split.as_str(), e.hf_subset.as_str()),
        ("test", "default")
    );
    assert_eq!(e.languages, ["eng-Latn"]);
    assert_eq!(e.main_score, 0.785);
    assert_eq!(e.metrics["cosine_spearman"], 0.785);
    assert_eq!(e.metrics["cosine_pearson"], 0.8025);

    let dev = write(
        tmp.path(),
        &result(
            "stsb-dev",
            "sts",
            "stsbenchmark",
            sts_scores(&[("dev", 1500, 81.0, 82.0)], &[]),
            json!({"split": "dev", "similarity": "angular"}),
        ),
    );
    let c = exported(convert(&dev).unwrap());
    assert_eq!(c.entries[0].split, "validation");
    // The cosine numbers even when the headline was angular.
    assert_eq!(c.entries[0].metrics["cosine_pearson"], 0.82);

    // A set of another size is not MTEB's.
    let odd = write(
        tmp.path(),
        &result(
            "stsb-odd",
            "sts",
            "stsbenchmark",
            sts_scores(&[("test", 1000, 78.5, 80.25)], &[]),
            json!({"split": "test"}),
        ),
    );
    let why = skipped(convert(&odd).unwrap());
    assert!(why.contains("1000 pairs") && why.contains("1379"), "{why}");
}

#[test]
fn sick_r_senteval_bucc_and_failed_results_are_skipped_with_a_reason() {
    let tmp = tempfile::tempdir().unwrap();
    let sick = write(
        tmp.path(),
        &result(
            "sick-r",
            "sts",
            "sick",
            sts_scores(&[("test", 4927, 70.0, 71.0)], &[]),
            json!({"split": "test"}),
        ),
    );
    let why = skipped(convert(&sick).unwrap());
    assert!(why.contains("9927") && why.contains("4927"), "{why}");
    let mr = write(
        tmp.path(),
        &result(
            "mr",
            "senteval-classification",
            "senteval",
            json!({}),
            json!({}),
        ),
    );
    assert!(skipped(convert(&mr).unwrap()).contains("SentEval"));
    let bucc = write(
        tmp.path(),
        &result("bucc", "bucc-mining", "bucc2018", json!({}), json!({})),
    );
    assert!(skipped(convert(&bucc).unwrap()).contains("BUCC"));
    let mut failed = result(
        "stsb-test",
        "sts",
        "stsbenchmark",
        json!({}),
        json!({"split": "test"}),
    );
    failed.main_score = None;
    failed.error = Some("out of memory".into());
    let failed = write(tmp.path(), &failed);
    assert!(skipped(convert(&failed).unwrap()).contains("out of memory"));
    // Scores that are not the protocol's struct (a file of another version) are skipped,
    // saying so, not read as zeros.
    let old = write(
        tmp.path(),
        &result(
            "stsb-test",
            "sts",
            "stsbenchmark",
            json!({"order": ["test"], "subsets": {"test": {"n": 1379}}}),
            json!({"split": "test"}),
        ),
    );
    let why = skipped(convert(&old).unwrap());
    assert!(why.contains("do not read as protocol `sts`'s"), "{why}");
}

#[test]
fn sts17_tracks_become_mteb_subsets_and_track_4b_is_left_out() {
    let tmp = tempfile::tempdir().unwrap();
    let f = write(
        tmp.path(),
        &result(
            "sts17",
            "sts",
            "sts17",
            sts_scores(
                &[
                    ("track1.ar-ar", 250, 10.0, 11.0),
                    ("track2.ar-en", 250, 20.0, 21.0),
                    ("track4a.es-en", 250, 40.0, 41.0),
                    ("track4b.es-en", 250, 45.0, 46.0),
                    ("track6.tr-en", 250, 60.0, 61.0),
                ],
                &[],
            ),
            json!({"split": "test", "tracks": ["1", "2", "4a", "4b", "6"]}),
        ),
    );
    let c = exported(convert(&f).unwrap());
    let got: Vec<(&str, f64, &[String])> = c
        .entries
        .iter()
        .map(|e| (e.hf_subset.as_str(), e.main_score, e.languages.as_slice()))
        .collect();
    assert_eq!(got.len(), 4);
    assert_eq!((got[0].0, got[0].1), ("ar-ar", 0.1));
    assert_eq!((got[1].0, got[1].1), ("en-ar", 0.2));
    assert_eq!(got[1].2, ["eng-Latn", "ara-Arab"]);
    assert_eq!((got[2].0, got[2].1), ("es-en", 0.4));
    assert_eq!((got[3].0, got[3].1), ("en-tr", 0.6));
    assert_eq!(c.left_out.len(), 1);
    assert!(c.left_out[0].contains("track4b"), "{:?}", c.left_out);
}

#[test]
fn stsb_multi_leaves_out_japanese_and_the_cross_lingual_pairs() {
    let tmp = tempfile::tempdir().unwrap();
    let f = write(
        tmp.path(),
        &result(
            "stsb-multi",
            "sts",
            "stsb-multi-mt",
            sts_scores(
                &[
                    ("de", 1379, 60.0, 61.0),
                    ("ja", 1379, 50.0, 51.0),
                    ("zh", 1379, 55.0, 56.0),
                ],
                &["en-de", "en-fr"],
            ),
            json!({"split": "test"}),
        ),
    );
    let c = exported(convert(&f).unwrap());
    assert_eq!(c.task.name, "STSBenchmarkMultilingualSTS");
    let subsets: Vec<&str> = c.entries.iter().map(|e| e.hf_subset.as_str()).collect();
    assert_eq!(subsets, ["de", "zh"]);
    assert_eq!(c.entries[1].languages, ["cmn-Hans"]);
    assert!(c.left_out.iter().any(|l| l.contains("`ja`")));
    assert!(c.left_out.iter().any(|l| l.contains("en-de, en-fr")));
}

#[test]
fn sts12_pools_every_pair_of_the_items_as_mteb_does() {
    let tmp = tempfile::tempdir().unwrap();
    // Two subsets that are each perfectly ranked but on shifted scales: per subset Spearman
    // is 1, pooled it is not. 3108 pairs in all, as MTEB's STS12.
    let n1 = 1000;
    let n2 = 3108 - n1;
    let g1: Vec<f64> = (0..n1).map(|i| i as f64).collect();
    let g2: Vec<f64> = (0..n2).map(|i| i as f64).collect();
    let p1: Vec<f64> = g1.iter().map(|x| x / 1000.0 + 0.5).collect();
    let p2: Vec<f64> = g2.iter().map(|x| x / 3000.0).collect();
    let mut r = result(
        "sts12",
        "sts",
        "sts12-16",
        sts_scores(&[("A", n1, 100.0, 100.0), ("B", n2, 100.0, 100.0)], &[]),
        json!({"split": "test", "similarity": "cosine", "year": 2012}),
    );
    let group = |name: &str, p: &[f64], g: &[f64]| Group {
        name: name.into(),
        weight: g.len() as f64,
        outcomes: Outcomes::Scored {
            correlation: Correlation::Spearman,
            predicted: p.to_vec(),
            gold: g.to_vec(),
        },
    };
    r.outcomes = Some(Items::mean_of(vec![
        group("A", &p1, &g1),
        group("B", &p2, &g2),
    ]));
    let f = write(tmp.path(), &r);
    let c = exported(convert(&f).unwrap());
    assert_eq!(c.task.name, "STS12");
    let (p, g): (Vec<f64>, Vec<f64>) = (
        p1.iter().chain(&p2).copied().collect(),
        g1.iter().chain(&g2).copied().collect(),
    );
    let e = &c.entries[0];
    assert_eq!(e.main_score, harness_bench::metrics::spearman(&p, &g));
    assert_eq!(
        e.metrics["cosine_pearson"],
        harness_bench::metrics::pearson(&p, &g)
    );
    assert!(
        e.main_score < 0.99,
        "pooled, not per subset: {}",
        e.main_score
    );

    // Angular per-pair similarities are not MTEB's cosine: not exported.
    r.protocol_params = json!({"split": "test", "similarity": "angular", "year": 2012});
    r.benchmark = "sts12-angular".into();
    let f = write(tmp.path(), &r);
    assert!(skipped(convert(&f).unwrap()).contains("cosine"));
    // Without a sidecar there is nothing to pool.
    r.outcomes = None;
    r.protocol_params = json!({"split": "test", "similarity": "cosine", "year": 2012});
    r.benchmark = "sts12-old".into();
    let f = write(tmp.path(), &r);
    assert!(skipped(convert(&f).unwrap()).contains("sidecar"));
}

/// One language of [`tatoeba_result`]: code, pairs, wrong retrievals xx→eng (query, line).
type Lang<'a> = (&'a str, usize, &'a [(usize, i64)]);

/// A Tatoeba result for `langs`, with its sidecar.
fn tatoeba_result(langs: &[Lang]) -> BenchResult {
    use harness_bench::protocols::tatoeba::{LanguageScore, TatoebaSummary};
    let mut per_language = BTreeMap::new();
    let mut groups = Vec::new();
    for (l, n, wrong) in langs {
        let to_eng = search(*n, wrong);
        let err = 100.0 * wrong.len() as f64 / *n as f64;
        per_language.insert(
            (*l).into(),
            LanguageScore {
                pairs: *n,
                xx_to_eng: err,
                eng_to_xx: 0.0,
                mean: err / 2.0,
            },
        );
        groups.push(Group {
            name: format!("{l}/xx_to_eng"),
            weight: 1.0,
            outcomes: to_eng,
        });
        groups.push(Group {
            name: format!("{l}/eng_to_xx"),
            weight: 1.0,
            outcomes: search(*n, &[]),
        });
    }
    let mut r = result(
        "tatoeba",
        "tatoeba-search",
        "tatoeba-laser-v1",
        serde_json::to_value(TatoebaScores {
            summary: TatoebaSummary {
                languages: langs.len(),
                average: 0.0,
                average_xx_to_eng: 0.0,
                average_eng_to_xx: 0.0,
                under_5: 0,
                under_10: 0,
                under_20: 0,
                over_50: 0,
            },
            per_language,
        })
        .unwrap(),
        json!({}),
    );
    r.outcomes = Some(Items::error_rate_of(groups));
    r
}

#[test]
fn tatoeba_scores_the_xx_to_eng_search_with_mtebs_metrics() {
    let tmp = tempfile::tempdir().unwrap();
    // deu: 3 of 1000 wrong, two of them onto line 0 (which query 0 also retrieves).
    let f = write(
        tmp.path(),
        &tatoeba_result(&[
            ("deu", 1000, &[(5, 0), (6, 0), (7, 9)]),
            ("fry", 173, &[]),
            ("xxx", 10, &[]),
        ]),
    );
    let c = exported(convert(&f).unwrap());
    assert_eq!(c.task.name, "Tatoeba");
    let deu = &c.entries[0];
    assert_eq!(deu.hf_subset, "deu-eng");
    assert_eq!(deu.languages, ["deu-Latn", "eng-Latn"]);
    assert_eq!(deu.metrics["accuracy"], 0.997);
    assert_eq!(deu.metrics["recall"], 0.997);
    // Line 0 retrieved by 3 queries (one right), line 9 by 2 (one right): the right ones
    // count 1/3 and 1/2 in precision, 2/4 and 2/3 in F1; the other 995 count 1.
    let f1 = (995.0 + 0.5 + 2.0 / 3.0) / 1000.0;
    assert!((deu.main_score - f1).abs() < 1e-15, "{}", deu.main_score);
    assert!((deu.metrics["precision"] - (995.0 + 1.0 / 3.0 + 0.5) / 1000.0).abs() < 1e-15);
    assert_eq!(c.entries[1].hf_subset, "fry-eng");
    assert_eq!(c.entries[1].main_score, 1.0);
    assert!(
        c.left_out.iter().any(|l| l.contains("xxx")),
        "{:?}",
        c.left_out
    );

    // A language whose size is not MTEB's is left out.
    let other = tempfile::tempdir().unwrap();
    let f = write(
        other.path(),
        &tatoeba_result(&[("deu", 999, &[]), ("fry", 173, &[])]),
    );
    let c = exported(convert(&f).unwrap());
    assert_eq!(c.entries.len(), 1);
    assert!(c.left_out[0].contains("999"), "{:?}", c.left_out);
}

#[test]
fn a_sidecar_that_disagrees_with_its_result_is_an_error() {
    let tmp = tempfile::tempdir().unwrap();
    let mut r = tatoeba_result(&[("deu", 1000, &[(5, 0)])]);
    r.scores["per_language"]["deu"]["xx_to_eng"] = json!(0.5);
    let f = write(tmp.path(), &r);
    let e = convert(&f).unwrap_err().to_string();
    assert!(e.contains("deu-eng") && e.contains("Fix:"), "{e}");
}

#[test]
fn model_names_and_paths_follow_mteb() {
    assert_eq!(model_name_as_path("harness/laser"), "harness__laser");
    assert_eq!(sanitize("laser@paper [x]"), "laser-paper--x-");
    assert!(check_model_name("org/laser-small.v2").is_ok());
    for bad in ["laser", "org/", "/x", "a/b/c", "org/../x", "org/la ser"] {
        assert!(check_model_name(bad).is_err(), "{bad}");
    }
}

fn names(dir: &Path) -> Vec<String> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).unwrap() {
            let p = e.unwrap().path();
            if p.is_dir() {
                stack.push(p);
            } else {
                out.push(
                    p.strip_prefix(dir)
                        .unwrap()
                        .to_string_lossy()
                        .replace('\\', "/"),
                );
            }
        }
    }
    out.sort();
    out
}

#[test]
fn export_writes_mtebs_layout_and_never_replaces_a_foreign_file() {
    let tmp = tempfile::tempdir().unwrap();
    let results = tmp.path().join("results");
    std::fs::create_dir(&results).unwrap();
    write(
        &results,
        &result(
            "stsb-test",
            "sts",
            "stsbenchmark",
            sts_scores(&[("test", 1379, 78.5, 80.25)], &[]),
            json!({"split": "test"}),
        ),
    );
    write(
        &results,
        &result(
            "stsb-dev",
            "sts",
            "stsbenchmark",
            sts_scores(&[("dev", 1500, 81.0, 82.0)], &[]),
            json!({"split": "dev"}),
        ),
    );
    write(&results, &tatoeba_result(&[("deu", 1000, &[(5, 0)])]));
    write(
        &results,
        &result(
            "mr",
            "senteval-classification",
            "senteval",
            json!({}),
            json!({}),
        ),
    );
    let out = tmp.path().join("mteb");
    let opts = ExportOptions::default();
    let x = export(&results, &out, &opts, &harness_bench::known().unwrap()).unwrap();
    assert_eq!(x.model_name, "harness/laser");
    let rev = &harness_core::fsutil::sha256_hex(FP.as_bytes())[..16];
    assert_eq!(&x.revision, rev);
    let base = format!("harness__laser/{rev}");
    assert_eq!(
        names(&out),
        [
            ".harness-files.json".to_string(),
            format!("{base}/STSBenchmark.json"),
            format!("{base}/Tatoeba.json"),
            format!("{base}/model_meta.json"),
        ]
    );
    assert_eq!(x.skipped.len(), 1);
    assert_eq!(x.skipped[0].0, "mr");

    let task: Value =
        serde_json::from_slice(&std::fs::read(out.join(&base).join("STSBenchmark.json")).unwrap())
            .unwrap();
    assert_eq!(task["task_name"], "STSBenchmark");
    assert_eq!(task["mteb_version"], MTEB_VERSION);
    assert_eq!(task["evaluation_time"], 5.0);
    assert_eq!(
        task["dataset_revision"],
        "stsbenchmark@harness-datasets-lock-0123456789ab"
    );
    assert_eq!(task["scores"]["test"][0]["main_score"], 0.785);
    assert_eq!(task["scores"]["test"][0]["hf_subset"], "default");
    assert_eq!(task["scores"]["validation"][0]["cosine_spearman"], 0.81);
    assert_eq!(
        task["harness"]["mteb_dataset"]["revision"],
        "b0fddb56ed78048fa8b90373c8a3cfc37b684831"
    );
    let meta: Value =
        serde_json::from_slice(&std::fs::read(out.join(&base).join("model_meta.json")).unwrap())
            .unwrap();
    assert_eq!(meta["name"], "harness/laser");
    assert_eq!(meta["revision"], rev.to_string());
    assert_eq!(meta["embed_dim"], 32);

    // Again: its own files are replaced.
    export(&results, &out, &opts, &harness_bench::known().unwrap()).unwrap();
    // A file this command did not write, in the way of one it writes: refused, untouched,
    // and nothing else written.
    let named = ExportOptions {
        model_name: Some("me/laser".into()),
    };
    let theirs = out.join(format!("me__laser/{rev}/Tatoeba.json"));
    std::fs::create_dir_all(theirs.parent().unwrap()).unwrap();
    std::fs::write(&theirs, "mine").unwrap();
    let e = export(&results, &out, &named, &harness_bench::known().unwrap())
        .unwrap_err()
        .to_string();
    assert!(e.contains("Tatoeba.json"), "{e}");
    assert_eq!(std::fs::read_to_string(&theirs).unwrap(), "mine");
    assert!(!out
        .join(format!("me__laser/{rev}/STSBenchmark.json"))
        .exists());
    // Other people's files beside: left alone.
    std::fs::remove_file(&theirs).unwrap();
    std::fs::write(out.join("notes.txt"), "mine").unwrap();
    let x = export(&results, &out, &named, &harness_bench::known().unwrap()).unwrap();
    assert_eq!(x.model_dir, out.join("me__laser").join(rev));
    assert_eq!(
        std::fs::read_to_string(out.join("notes.txt")).unwrap(),
        "mine"
    );
}

#[test]
fn two_results_for_one_subset_or_two_encoder_states_are_refused() {
    let tmp = tempfile::tempdir().unwrap();
    let results = tmp.path().join("results");
    std::fs::create_dir(&results).unwrap();
    let stsb = |bench: &str| {
        result(
            bench,
            "sts",
            "stsbenchmark",
            sts_scores(&[("test", 1379, 78.5, 80.25)], &[]),
            json!({"split": "test"}),
        )
    };
    write(&results, &stsb("stsb-test"));
    write(&results, &stsb("stsb-test-copy"));
    let e = export(
        &results,
        &tmp.path().join("a"),
        &ExportOptions::default(),
        &harness_bench::known().unwrap(),
    )
    .unwrap_err()
    .to_string();
    assert!(e.contains("stsb-test-copy") && e.contains("Fix:"), "{e}");

    std::fs::remove_file(results.join("stsb-test-copy.json")).unwrap();
    let mut stale = result(
        "stsb-dev",
        "sts",
        "stsbenchmark",
        sts_scores(&[("dev", 1500, 81.0, 82.0)], &[]),
        json!({"split": "dev"}),
    );
    stale.encoder.fingerprint = "trained-bilstm/v2;weights=old".into();
    write(&results, &stale);
    let e = export(
        &results,
        &tmp.path().join("b"),
        &ExportOptions::default(),
        &harness_bench::known().unwrap(),
    )
    .unwrap_err()
    .to_string();
    assert!(
        e.contains("2 encoder states") && e.contains("weights=old"),
        "{e}"
    );
    assert!(!tmp.path().join("b").exists(), "nothing written");
}
