//! Helpers for tests and benchmarks that need the pretrained model files: where the
//! unpacked models are, and the parity fixtures of `../shared/models/fixtures`.
//!
//! Tests that need a model call [`minilm_dir`] and return early (printing why) when it gives
//! `None`, so the suite passes on a machine without the model files.

use std::path::PathBuf;

/// The folder of all-MiniLM-L6-v2: `$HARNESS_MODELS_DIR/all-MiniLM-L6-v2`, else the default
/// models directory's. `None`, with a notice on stderr, when it is not there.
pub fn minilm_dir() -> Option<PathBuf> {
    let models = std::env::var_os("HARNESS_MODELS_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| crate::settings::Settings::default().models_dir);
    let dir = models.join(crate::bench::encoder::MINILM);
    if crate::model::encoder::sentence_transformers::is_model_dir(&dir) {
        Some(dir)
    } else {
        eprintln!(
            "skipped: all-MiniLM-L6-v2 is not at {} (set HARNESS_MODELS_DIR to a folder \
             holding all-MiniLM-L6-v2/)",
            dir.display()
        );
        None
    }
}

/// `../shared/models/fixtures` beside the checkout (or `$HARNESS_SHARED_MODELS/fixtures`).
pub fn fixtures_dir() -> PathBuf {
    std::env::var_os("HARNESS_SHARED_MODELS")
        .map(PathBuf::from)
        .unwrap_or_else(|| {
            PathBuf::from(env!("CARGO_MANIFEST_DIR"))
                .join("..")
                .join("shared")
                .join("models")
        })
        .join("fixtures")
}

/// Reads a fixture `text<TAB>fields` file, splitting the fields with `parse`.
fn read_tsv<T>(name: &str, parse: impl Fn(&str) -> T) -> Vec<(String, T)> {
    let path = fixtures_dir().join(name);
    let text = std::fs::read_to_string(&path)
        .unwrap_or_else(|e| panic!("{}: {e} (the parity fixtures)", path.display()));
    text.lines()
        .filter(|l| !l.is_empty())
        .map(|line| {
            let (sentence, rest) = line
                .split_once('\t')
                .unwrap_or_else(|| panic!("{}: no tab in {line:?}", path.display()));
            (sentence.to_string(), parse(rest))
        })
        .collect()
}

/// `<model>.ref.tsv`: each sentence with its reference vector.
pub fn reference_vectors(name: &str) -> Vec<(String, Vec<f32>)> {
    read_tsv(name, |rest| {
        rest.split(',')
            .map(|v| v.trim().parse::<f32>().expect("a float in the fixture"))
            .collect()
    })
}

/// `<model>.tokens.tsv`: each sentence with its token ids (special tokens included).
pub fn reference_tokens(name: &str) -> Vec<(String, Vec<u32>)> {
    read_tsv(name, |rest| {
        rest.split_whitespace()
            .map(|v| v.parse::<u32>().expect("an id in the fixture"))
            .collect()
    })
}

/// Cosine similarity, in f64.
pub fn cosine(a: &[f32], b: &[f32]) -> f64 {
    let dot: f64 = a.iter().zip(b).map(|(x, y)| *x as f64 * *y as f64).sum();
    let na: f64 = a.iter().map(|x| (*x as f64).powi(2)).sum::<f64>().sqrt();
    let nb: f64 = b.iter().map(|x| (*x as f64).powi(2)).sum::<f64>().sqrt();
    dot / (na * nb)
}
