//! The sentence-transformers export of a fine-tuned pretrained encoder against harness
//! itself: all-MiniLM-L6-v2 (WordPiece, `tokenizer.json` as shipped) and
//! multilingual-e5-small (its XLM-R unigram written as a `tokenizers` pipeline, the `query: `
//! prefix as the folder's default prompt) are fine-tuned for two steps with the real binary,
//! exported (`harness export`), and multilingual sentences are encoded by
//! `harness embed --encoder RUN` and by `SentenceTransformer(DIR).encode` through
//! `scripts/st_encode.py`; every row must agree (cosine >= 0.9999). The folder also reads
//! back through `--encoder DIR` with the same vectors.
//!
//! The script runs in the venv of `scripts/pyenv.py` (the first run installs it from PyPI);
//! like the other parity tests this one never passes by skipping.

mod binary;

use binary::{command, repo, text};
use harness_embed::npy::read_npy;
use std::path::Path;
use std::process::Command;

/// The tolerance the issue asks for.
const MIN_COSINE: f64 = 0.9999;

fn sentences() -> Vec<String> {
    [
        "book a flight to boston tomorrow morning",
        "Wie wird das Wetter morgen in Berlin?",
        "imposta una sveglia alle sette",
        "明日の天気はどうですか",
        "yarın sabah için alarm kur",
        "播放一些轻松的音乐",
        "What time does the pool open tonight?",
        "a",
        "Emoji 🐈 and ñandú, naïve café, Straße.",
        "remind me to call mom at 5 pm on friday",
        // Surrounding whitespace reaches the tokenizer (sentence-transformers 6.2.0 keeps
        // it): XLM-R's unigram makes a trailing space a token of its own.
        "I would look at this way: ",
        "  spaces on both sides  ",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect()
}

fn recipe(dir: &Path, model: &str) -> std::path::PathBuf {
    let text = format!(
        "name: st-export-{}
seed: 1
data:
  tokenizer: {{kind: pretrained}}
  corpora:
    intents: {{dataset: xsid, splits: [train], languages: [en], exclude: [xsid], max_examples: 64}}
model:
  encoder: {{kind: pretrained, name: {model}, trainable: true, pool: mean}}
  heads:
    intent: {{kind: l2_softmax, alpha: 16.0}}
tasks:
  - {{name: intent, objective: l2_softmax, corpus: intents, params: {{head: intent}}}}
stages:
  1: {{frozen: [encoder.embeddings]}}
optimizer: {{kind: adam, lr: 1.0e-4}}
train: {{steps: 2, batch_size: 8, max_len: 32, checkpoint_every: 2}}
evaluate: []
",
        model.to_lowercase()
    );
    let path = dir.join(format!("{model}.yaml"));
    std::fs::write(&path, text).unwrap();
    path
}

fn run(home: &Path, models: &Path, args: &[&str]) {
    let o = command(home, args)
        .env("HARNESS_MODELS_DIR", models)
        .output()
        .expect("running harness");
    assert!(o.status.success(), "harness {args:?}:\n{}", text(&o));
}

fn embed(home: &Path, models: &Path, encoder: &Path, input: &Path, out: &Path) {
    run(
        home,
        models,
        &[
            "embed",
            "--encoder",
            encoder.to_str().unwrap(),
            "--input",
            input.to_str().unwrap(),
            "--out",
            out.to_str().unwrap(),
            "--no-cache",
        ],
    );
}

fn cosine(a: &[f32], b: &[f32]) -> f64 {
    let dot: f64 = a.iter().zip(b).map(|(x, y)| *x as f64 * *y as f64).sum();
    let na: f64 = a.iter().map(|x| (*x as f64).powi(2)).sum::<f64>().sqrt();
    let nb: f64 = b.iter().map(|x| (*x as f64).powi(2)).sum::<f64>().sqrt();
    dot / (na * nb)
}

fn assert_rows_agree(what: &str, lines: &[String], a: &Path, b: &Path) {
    let a = read_npy(a).unwrap();
    let b = read_npy(b).unwrap();
    assert_eq!((a.rows, a.cols), (lines.len(), 384), "{what}");
    assert_eq!((b.rows, b.cols), (a.rows, a.cols), "{what}");
    let mut worst = 1f64;
    for (i, line) in lines.iter().enumerate() {
        let cos = cosine(a.row(i), b.row(i));
        assert!(
            cos >= MIN_COSINE,
            "{what}: row {i} ({line:?}): cosine {cos}"
        );
        worst = worst.min(cos);
    }
    // The sentences give different vectors (the comparison is not vacuous).
    assert!(cosine(a.row(0), a.row(1)) < 0.999, "{what}");
    println!("{what}: {} rows, min cosine {worst:.7}", a.rows);
}

fn export_round_trip(model: &str) {
    let models = harness_model::test_support::installed_model(model);
    let models = models.parent().unwrap();
    let home = tempfile::tempdir().unwrap();
    let out = tempfile::tempdir().unwrap();
    let run_dir = out.path().join("run");
    let export = out.path().join("export");
    let recipe = recipe(out.path(), model);
    run(
        home.path(),
        models,
        &[
            "train",
            recipe.to_str().unwrap(),
            "--out",
            run_dir.to_str().unwrap(),
        ],
    );
    run(
        home.path(),
        models,
        &[
            "export",
            run_dir.to_str().unwrap(),
            "--out",
            export.to_str().unwrap(),
        ],
    );
    for f in harness_train::export_st::FILES {
        assert!(export.join(f).is_file(), "{f} missing from the export");
    }
    let input = out.path().join("s.txt");
    let lines = sentences();
    std::fs::write(&input, lines.join("\n") + "\n").unwrap();
    let h = out.path().join("h.npy");
    embed(home.path(), models, &run_dir, &input, &h);

    let s = out.path().join("s.npy");
    let python = std::env::var("HARNESS_PYTHON").unwrap_or_else(|_| "python3".to_string());
    let o = Command::new(&python)
        .arg(repo().join("scripts/st_encode.py"))
        .arg("--model")
        .arg(&export)
        .arg("--input")
        .arg(&input)
        .arg("--out")
        .arg(&s)
        .args(["--batch-size", "4"])
        .current_dir(repo())
        .output()
        .unwrap_or_else(|e| panic!("running {python} scripts/st_encode.py: {e}"));
    assert!(
        o.status.success(),
        "scripts/st_encode.py failed:\n{}",
        text(&o)
    );
    assert_rows_agree(&format!("{model}: sentence-transformers"), &lines, &h, &s);

    // `--encoder DIR` reads the folder back.
    let back = out.path().join("back.npy");
    embed(home.path(), models, &export, &input, &back);
    assert_rows_agree(&format!("{model}: --encoder DIR"), &lines, &h, &back);
}

#[test]
fn minilm_fine_tuned_export_loads_in_sentence_transformers_with_equal_vectors() {
    export_round_trip("all-MiniLM-L6-v2");
}

#[test]
fn e5_fine_tuned_export_loads_in_sentence_transformers_with_equal_vectors() {
    export_round_trip("multilingual-e5-small");
}
