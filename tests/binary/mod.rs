//! Helpers for the tests that run the real `harness` binary: a clean environment (its own
//! `HARNESS_HOME`, no inherited data/mirror/config settings), run from the repository root.
#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

/// Runs `harness ARGS` with `HARNESS_HOME=home` from the repository root.
pub fn harness(home: &Path, args: &[&str]) -> Output {
    command(home, args)
        .output()
        .expect("running the harness binary")
}

/// The `harness ARGS` command of [`harness`], not yet started (to spawn and kill it).
pub fn command(home: &Path, args: &[&str]) -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_harness"));
    c.args(args)
        .env("HARNESS_HOME", home)
        .env_remove("HARNESS_DATA_DIR")
        .env_remove("HARNESS_MIRRORS")
        .env_remove("HARNESS_CONFIG")
        .current_dir(env!("CARGO_MANIFEST_DIR"));
    c
}

/// stdout then stderr, for assertions and failure messages.
pub fn text(o: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}

/// `harness embed --encoder ENCODER --input INPUT --out NPY --no-cache`, which must succeed;
/// the `.npy` file's bytes.
pub fn embed_npy(home: &Path, encoder: &Path, input: &Path, npy: &Path) -> Vec<u8> {
    let o = harness(
        home,
        &[
            "embed",
            "--encoder",
            encoder.to_str().unwrap(),
            "--input",
            input.to_str().unwrap(),
            "--out",
            npy.to_str().unwrap(),
            "--no-cache",
        ],
    );
    assert!(o.status.success(), "{}", text(&o));
    std::fs::read(npy).unwrap()
}

/// The repository root.
pub fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// `--set` overrides that shrink the LASER recipe's data and model to seconds of training:
/// two small corpora, a tiny vocabulary and a tiny 2-layer BiLSTM max-pool encoder. Each test
/// adds its own `train=` line.
pub const SMALL_LASER: &[&str] = &[
    "--set",
    "data.corpora.tatoeba_pairs.pairs=[deu-eng, spa-eng]",
    "--set",
    "data.corpora.tatoeba_pairs.exclude=[tatoeba]",
    "--set",
    "data.corpora.tatoeba_pairs.max_examples=300",
    "--set",
    "data.corpora.news_pairs.pairs=[fra-eng]",
    "--set",
    "data.corpora.news_pairs.exclude=[]",
    "--set",
    "data.corpora.news_pairs.max_examples=100",
    "--set",
    "data.tokenizer.vocab=600",
    "--set",
    "model.encoder={kind: bilstm, layers: 2, hidden: 16, embed: 16, pool: max}",
];

/// Whether the headless-Chromium check of a report runs: a browser is installed, or
/// `HARNESS_BROWSER_CHECK=1` asks for it (the check script then installs one or fails).
/// Says why on stderr when it does not.
pub fn browser_check_wanted() -> bool {
    let forced = std::env::var("HARNESS_BROWSER_CHECK").is_ok_and(|v| !v.is_empty() && v != "0");
    let present = ["chromium", "chromium-browser", "google-chrome"]
        .iter()
        .any(|b| {
            std::process::Command::new("sh")
                .args(["-c", &format!("command -v {b}")])
                .output()
                .is_ok_and(|o| o.status.success())
        });
    if !present && !forced {
        eprintln!("skipped: no chromium installed (set HARNESS_BROWSER_CHECK=1 to install it and run the check)");
    }
    present || forced
}

/// Runs `scripts/check_report_html.sh HTML SHOT HEIGHT` from the repository root; its output.
pub fn check_report_html(html: &Path, shot: &Path, height: &str) -> Output {
    Command::new("scripts/check_report_html.sh")
        .arg(html)
        .arg(shot)
        .arg(height)
        .current_dir(repo())
        .output()
        .expect("running scripts/check_report_html.sh")
}

/// Writes `dir/grid.yaml`: a grid over the hashed n-gram encoder, `model.encoder.dim` over
/// `dims` (a YAML list) × seeds 1, 2, evaluated on STS-B test with its headline as the one
/// metric (seconds per point); its path.
pub fn hashed_grid(dir: &Path, dims: &str) -> PathBuf {
    let recipe = repo().join("recipes/hashed-ngrams.yaml");
    let path = dir.join("grid.yaml");
    std::fs::write(
        &path,
        format!(
            "name: hashed-dims\nrecipe: {}\nset:\n  evaluate: [stsb-test]\naxes:\n  model.encoder.dim: {dims}\nseeds: [1, 2]\nmetrics:\n  - {{bench: stsb-test, field: main_score, label: STS-B, better: higher}}\n",
            recipe.display()
        ),
    )
    .unwrap();
    path
}

/// A tiny translation model (BiLSTM encoder, LSTM decoder) on German–English pairs; Adam
/// with a clip below every step's gradient norm, so both the optimizer's state and the
/// clipped update are compared (tests/data_parallel.rs, tests/mpi.rs).
pub const TINY_TRANSLATION: &str = "name: tiny-translation
seed: 5
data:
  tokenizer: {kind: bpe, vocab: 400, train_on: [pairs]}
  corpora:
    pairs:
      dataset: parallel-pairs
      pairs: [deu-eng]
      exclude: [tatoeba]
      max_examples: 200
model:
  encoder: {kind: bilstm, layers: 1, hidden: 12, embed: 12, pool: max}
  decoder: {kind: lstm, layers: 1, hidden: 16, embed: 12, lang_embed: 4, targets: [eng]}
tasks:
  - {name: translate, objective: seq2seq_ce, corpus: pairs, weight: 1.0}
optimizer: {kind: adam, lr: 0.003, eps: 1.0e-8, dropout: 0.0, grad_clip: 0.1}
train: {steps: 5, batch_tokens: 300, max_len: 20, checkpoint_every: 5}
evaluate: []
report: []
";
