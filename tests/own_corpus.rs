//! The LASER recipe's `own-corpus` profile through the real binary, on a user's own files: a
//! gzipped tab-separated download (the shipped German–English manythings file, read where it
//! lies in `../shared`, never copied) and, with the `parquet` feature, the same pairs as a
//! Parquet file. `harness corpora` prepares the run (the vocabulary from a sample, the shards,
//! the counts table), `harness train` trains from the shards it left, and a second run of
//! another directory reuses them.

mod binary;

use binary::{command, repo, text};
use std::path::Path;
use std::process::Output;

/// `harness ARGS` with its own `HARNESS_HOME` and runs folder (never the repository's).
fn harness(home: &Path, args: &[String]) -> Output {
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    command(home, &args)
        .env("HARNESS_RUNS_DIR", home.join("runs"))
        .output()
        .expect("running the harness binary")
}

/// The LASER recipe, its `own-corpus` profile on `files` (a YAML list), shrunk to seconds.
fn own_corpus(cmd: &str, files: &str, extra: &[&str]) -> Vec<String> {
    let recipe = repo().join("recipes/laser.yaml");
    let mut a: Vec<String> = [cmd, recipe.to_str().unwrap(), "--profile", "own-corpus"]
        .iter()
        .map(|s| s.to_string())
        .collect();
    for set in [
        format!("data.corpora.pairs.files={files}"),
        "data.corpora.pairs.max_examples=400".into(),
        "data.tokenizer.vocab=600".into(),
        "model.encoder={kind: bilstm, layers: 1, hidden: 16, embed: 16, pool: max}".into(),
        "train={steps: 4, batch_tokens: 300, max_len: 20}".into(),
    ] {
        a.push("--set".into());
        a.push(set);
    }
    a.extend(extra.iter().map(|s| s.to_string()));
    a
}

fn shared_pairs() -> std::path::PathBuf {
    repo().join("../shared/datasets/parallel-pairs/deu-eng/deu.txt.gz")
}

#[test]
fn a_gzipped_download_is_prepared_trained_on_and_its_shards_reused() {
    let home = tempfile::tempdir().unwrap();
    // manythings: English, German, attribution; the languages are declared.
    let files = format!("['{}']", shared_pairs().display());
    let mut corpora = own_corpus("corpora", &files, &[]);
    corpora.extend(["--set".into(), "data.corpora.pairs.pairs=[eng-deu]".into()]);
    let o = harness(home.path(), &corpora);
    let out = text(&o);
    assert!(o.status.success(), "{out}");
    // The counts table: the corpus, its language pair, 400 used.
    assert!(out.contains("pairs") && out.contains("eng-deu"), "{out}");
    assert!(out.contains("400"), "{out}");

    let run = home.path().join("run-a");
    let mut train = own_corpus("train", &files, &["--out", run.to_str().unwrap()]);
    train.extend(["--set".into(), "data.corpora.pairs.pairs=[eng-deu]".into()]);
    let o = harness(home.path(), &train);
    let out = text(&o);
    assert!(o.status.success(), "{out}");
    assert!(out.contains("trained 4/4 steps"), "{out}");
    let env = std::fs::read_to_string(run.join("env.json")).unwrap();
    assert!(env.contains("corpus pairs"), "{env}");
    assert!(run.join("corpora-files.json").is_file());
    // The shards `harness corpora` wrote are the ones this run read: one set in the cache.
    let sets = std::fs::read_dir(home.path().join("cache/shards"))
        .unwrap()
        .count();
    assert_eq!(sets, 1);
    assert!(out.contains("reused"), "{out}");
}

#[cfg(feature = "parquet")]
#[test]
fn a_parquet_file_trains() {
    use std::io::BufRead;
    let home = tempfile::tempdir().unwrap();
    let dir = tempfile::tempdir().unwrap();
    // The first 2,000 manythings pairs as a Hugging Face dataset file: columns en and de.
    let gz = std::process::Command::new("gzip")
        .args(["-dc", shared_pairs().to_str().unwrap()])
        .output()
        .expect("gzip");
    let rows: Vec<Vec<String>> = gz
        .stdout
        .lines()
        .map_while(Result::ok)
        .take(2000)
        .map(|l| l.split('\t').take(2).map(String::from).collect::<Vec<_>>())
        .filter(|r| r.len() == 2)
        .collect();
    assert_eq!(rows.len(), 2000);
    let file = dir.path().join("train-00000-of-00001.parquet");
    harness_data::user_corpus::parquet::write_text_columns(&file, &["en", "de"], &rows).unwrap();
    let run = home.path().join("run");
    let mut train = own_corpus(
        "train",
        &format!("['{}']", file.display()),
        &["--out", run.to_str().unwrap()],
    );
    for set in [
        "data.corpora.pairs.format=parquet",
        "data.corpora.pairs.pairs=[en-de]",
        "data.corpora.pairs.fields={source: en, target: de}",
    ] {
        train.extend(["--set".into(), set.into()]);
    }
    let o = harness(home.path(), &train);
    let out = text(&o);
    assert!(o.status.success(), "{out}");
    assert!(out.contains("trained 4/4 steps"), "{out}");
}
