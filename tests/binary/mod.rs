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
