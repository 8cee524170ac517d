//! The contamination filter on recipes: every benchmark's dataset yields its evaluation
//! sentences, and a recipe's parallel corpus built through the filter keeps no pair that
//! shares a sentence with the excluded benchmarks.

use harness_bench::registry::Registry;
use harness_core::shared_datasets_dir;
use harness_data::corpus::{build_parallel, dataset_sentences, EvalSentences};
use std::collections::BTreeSet;

#[test]
fn every_benchmark_dataset_yields_evaluation_sentences() {
    let registry = Registry::load().unwrap();
    let datasets: BTreeSet<String> = registry
        .names()
        .iter()
        .map(|n| registry.get(n).unwrap().dataset.clone())
        .collect();
    assert!(datasets.len() >= 14, "{datasets:?}");
    for d in &datasets {
        let sentences = dataset_sentences(d, &shared_datasets_dir().join(d))
            .unwrap_or_else(|e| panic!("{d}: {e}"));
        assert!(
            sentences.len() > 500,
            "{d}: only {} sentences",
            sentences.len()
        );
    }
}

#[test]
fn training_only_dataset_is_not_an_evaluation_set() {
    let err = dataset_sentences(
        "parallel-pairs",
        &shared_datasets_dir().join("parallel-pairs"),
    )
    .unwrap_err()
    .to_string();
    assert!(err.contains("not an evaluation set"), "{err}");
}

#[test]
fn news_pairs_filtered_against_newstest_and_xnli_keep_no_evaluation_sentence() {
    let shared = shared_datasets_dir();
    let mut eval = EvalSentences::new();
    for d in ["newstest2012", "xnli"] {
        eval.merge(dataset_sentences(d, &shared.join(d)).unwrap());
    }
    let built = build_parallel(
        "wmt-news-parallel",
        &shared.join("wmt-news-parallel"),
        &["deu-eng".to_string(), "fra-eng".to_string()],
        &eval,
    )
    .unwrap();
    let removed: usize = built.report.pairs.iter().map(|p| p.removed).sum();
    assert!(removed > 0, "expected some overlap: {}", built.report);
    for c in &built.corpora {
        for p in &c.pairs {
            assert!(
                !eval.contains(&p.source) && !eval.contains(&p.target),
                "{p:?}"
            );
        }
    }
}

#[test]
fn pairs_must_be_spelled_as_dataset_folders() {
    let err = build_parallel(
        "parallel-pairs",
        &shared_datasets_dir().join("parallel-pairs"),
        &["de-en".to_string()],
        &EvalSentences::new(),
    )
    .unwrap_err()
    .to_string();
    assert!(err.contains("xxx-eng"), "{err}");
}
