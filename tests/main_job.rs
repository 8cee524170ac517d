//! The README's first command, `harness run recipes/laser.yaml`, end to end through the real
//! binary from an empty `HARNESS_HOME` (fresh datasets, models and cache, as on a new
//! machine), at tiny scale: `--set` overrides shrink the model, the corpora, the training
//! and every benchmark (few classifier epochs, few languages), but keep every stage — the
//! contamination filter against all evaluation sets, BPE, training, all five benchmarks of
//! the recipe with the datasets they read beside their own, and the report.

mod binary;

use binary::{harness, repo, text};

/// The recipe's own training, shrunk; the corpora keep their `exclude:` lists.
const TINY: &[&str] = &[
    "--set",
    "data.corpora.tatoeba_pairs.pairs=[deu-eng, spa-eng]",
    "--set",
    "data.corpora.tatoeba_pairs.max_examples=300",
    "--set",
    "data.corpora.news_pairs.pairs=[fra-eng]",
    "--set",
    "data.corpora.news_pairs.max_examples=100",
    "--set",
    "data.tokenizer.vocab=500",
    "--set",
    "model.encoder={kind: bilstm, layers: 1, hidden: 16, embed: 16, pool: max}",
    "--set",
    "train={steps: 3, batch_tokens: 300, max_len: 20, checkpoint_every: 3}",
    // Every benchmark of the recipe, cheap: the XNLI classifier 2 epochs on 2% of the
    // English pairs, 2 languages; SIB-200's 1 epoch; Tatoeba 2 languages.
    "--set",
    "evaluate.xnli.params={epochs: 2, train_fraction: 0.02, eval_limit: 60}",
    "--set",
    "evaluate.xnli.languages=[en, de]",
    "--set",
    "evaluate.sib200.params={epochs: 2, languages: [en, de]}",
    "--set",
    "evaluate.tatoeba.languages=[deu, fra, spa]",
];

#[test]
fn the_main_job_runs_end_to_end_from_an_empty_home() {
    let home = tempfile::tempdir().unwrap();
    let out = tempfile::tempdir().unwrap();
    let run = out.path().join("run");
    let recipe = repo().join("recipes/laser.yaml");
    let mut args: Vec<&str> = vec!["run", recipe.to_str().unwrap()];
    args.extend_from_slice(TINY);
    args.extend_from_slice(&["--out", run.to_str().unwrap()]);
    let o = harness(home.path(), &args);
    assert!(o.status.success(), "{}", text(&o));
    for bench in ["tatoeba", "newstest2012", "bucc", "sib200", "xnli"] {
        let path = run.join(format!("results/{bench}.json"));
        let r: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
        assert!(r.get("error").is_none(), "{bench}: {r}");
        assert!(
            r["main_score"].as_f64().is_some_and(f64::is_finite),
            "{bench}: {r}"
        );
    }
    // The overrides are part of the result, and of the declaration it was kept for.
    let xnli: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(run.join("results/xnli.json")).unwrap())
            .unwrap();
    assert_eq!(xnli["overrides"]["params"]["epochs"], 2);
    assert_eq!(xnli["protocol_params"]["epochs"], 2);
    assert_eq!(xnli["scores"]["epochs_run"], 2);
    // XNLI's classifier read SNLI and SICK, installed on first use like XNLI itself.
    for d in ["xnli", "snli", "sick", "tatoeba-laser-v1", "parallel-pairs"] {
        assert!(
            home.path().join("datasets").join(d).is_dir(),
            "{d} not installed"
        );
    }
    for f in [
        "report/report.html",
        "report/report.md",
        "recipe.resolved.yaml",
        "env.json",
    ] {
        assert!(run.join(f).is_file(), "{f} missing: {}", text(&o));
    }
    assert!(text(&o).contains("0 failed"), "{}", text(&o));
}
