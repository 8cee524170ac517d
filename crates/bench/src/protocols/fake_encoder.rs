//! Test support for the protocols: a tiny, perfectly cross-lingual fake encoder and a
//! benchmark declaration builder.
//!
//! The fake encoder reads whitespace tokens: `cK` (K < 8) adds the unit vector `e_K`, `neg`
//! adds `e_8`, `nW` (any W) adds a small deterministic noise vector in dimensions 9..16, and
//! every other token (a language tag such as `de:`) is ignored. So a sentence means the same
//! in every "language", and classes built from the `cK` tokens are separable.

use crate::benchmark::Benchmark;
use harness_embed::matrix::Matrix;
use harness_embed::Encoder;
use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::{AtomicUsize, Ordering};

pub(crate) const DIM: usize = 16;

pub(crate) struct FakeEncoder;

impl Encoder for FakeEncoder {
    fn name(&self) -> &str {
        "fake"
    }
    fn fingerprint(&self) -> String {
        "fake-v1".into()
    }
    fn dim(&self) -> usize {
        DIM
    }
    fn encode(&self, sentences: &[&str]) -> Result<Matrix, harness_embed::EncodeError> {
        let mut m = Matrix::zeros(sentences.len(), DIM);
        for (i, s) in sentences.iter().enumerate() {
            let row = m.row_mut(i);
            for tok in s.split_whitespace() {
                if tok == "neg" {
                    row[8] += 1.0;
                } else if let Some(k) = tok.strip_prefix('c').and_then(|k| k.parse::<usize>().ok())
                {
                    row[k % 8] += 1.0;
                } else if let Some(w) = tok.strip_prefix('n').and_then(|w| w.parse::<u64>().ok()) {
                    let mut h = harness_embed::hashed::splitmix64(w);
                    for v in &mut row[9..DIM] {
                        *v += ((h & 0xff) as f32 / 255.0 - 0.5) * 0.3;
                        h >>= 8;
                    }
                }
            }
        }
        Ok(m)
    }
}

/// A pseudo-random vector per sentence text (FNV-1a of the text through SplitMix64), so
/// any real dataset can be run through a protocol in no time: equal sentences give equal
/// rows, different ones unrelated rows.
pub(crate) struct HashEncoder;

impl Encoder for HashEncoder {
    fn name(&self) -> &str {
        "hash"
    }
    fn fingerprint(&self) -> String {
        "hash-v1".into()
    }
    fn dim(&self) -> usize {
        8
    }
    fn encode(&self, sentences: &[&str]) -> Result<Matrix, harness_embed::EncodeError> {
        let mut m = Matrix::zeros(sentences.len(), 8);
        for (i, s) in sentences.iter().enumerate() {
            let mut h = crate::protocols::def::stream_of(s);
            for v in m.row_mut(i) {
                h = harness_embed::hashed::splitmix64(h);
                *v = (h >> 40) as f32 / (1u64 << 24) as f32 - 0.5;
            }
        }
        Ok(m)
    }
}

/// Looks sentences up in a table of fixed rows of length `dim` (an unknown sentence
/// panics) and counts how many sentences it was asked to embed.
pub(crate) struct TableEncoder {
    pub rows: HashMap<String, Vec<f32>>,
    dim: usize,
    asked: AtomicUsize,
}

impl TableEncoder {
    pub fn new(dim: usize, rows: HashMap<String, Vec<f32>>) -> Self {
        TableEncoder {
            rows,
            dim,
            asked: AtomicUsize::new(0),
        }
    }

    /// How many sentences `encode` has been given so far.
    pub fn asked(&self) -> usize {
        self.asked.load(Ordering::SeqCst)
    }
}

impl Encoder for TableEncoder {
    fn name(&self) -> &str {
        "table"
    }
    fn fingerprint(&self) -> String {
        "table".into()
    }
    fn dim(&self) -> usize {
        self.dim
    }
    fn encode(&self, sentences: &[&str]) -> Result<Matrix, harness_embed::EncodeError> {
        self.asked.fetch_add(sentences.len(), Ordering::SeqCst);
        let rows: Vec<Vec<f32>> = sentences.iter().map(|s| self.rows[*s].clone()).collect();
        Ok(Matrix::from_rows(&rows, self.dim))
    }
}

/// A benchmark declaration with these params (YAML text of a mapping).
pub(crate) fn bench(
    name: &str,
    dataset: &str,
    protocol: &str,
    languages: &[&str],
    params_yaml: &str,
) -> Benchmark {
    let params: BTreeMap<String, serde_yaml::Value> = if params_yaml.trim().is_empty() {
        BTreeMap::new()
    } else {
        serde_yaml::from_str(params_yaml).unwrap()
    };
    Benchmark {
        in_all: true,
        name: name.into(),
        description: "test".into(),
        dataset: dataset.into(),
        protocol: protocol.into(),
        split: "test".into(),
        languages: languages.iter().map(|s| s.to_string()).collect(),
        params,
    }
}

/// The params of the declared (embedded registry) benchmark `name`, parsed as its
/// protocol parses them ([`Context::params`](crate::protocols::Context::params)).
pub(crate) fn declared_params<P: super::def::CheckedParams>(name: &str) -> P {
    let registry = crate::registry::Registry::load().unwrap();
    let ctx = crate::protocols::Context {
        benchmark: registry.get(name).unwrap(),
        dataset_dir: std::path::Path::new("."),
        side: &std::collections::BTreeMap::new(),
        encoder: &FakeEncoder,
        seed: 0,
    };
    ctx.params().unwrap()
}

/// Writes `dir/name`, creating folders.
pub(crate) fn write(dir: &std::path::Path, name: &str, contents: &str) {
    let path = dir.join(name);
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(path, contents).unwrap();
}
