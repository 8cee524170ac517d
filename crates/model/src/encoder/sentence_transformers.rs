//! A sentence-transformers model folder with a BERT transformer, opened as it is shipped
//! (e.g. `sentence-transformers/all-MiniLM-L6-v2`), and used as a benchmark [`Encoder`].
//!
//! What is read, as sentence-transformers reads it:
//! - `modules.json`: the pipeline. Supported: `Transformer` (its folder, usually the root),
//!   then `Pooling`, then optionally `Normalize`. Without `modules.json`, a plain HF folder
//!   (`config.json` + `model.safetensors`) gets mean pooling and no normalisation, which is
//!   what sentence-transformers builds for one.
//! - `<transformer>/config.json`, `model.safetensors` ([`load_bert`]) and `tokenizer.json`
//!   (the `tokenizers` crate). The shipped `tokenizer.json` may fix padding and truncation
//!   (MiniLM's pads and truncates at 128): padding is switched off (batches are padded here,
//!   with an attention mask) and truncation is set to `max_seq_length`.
//! - `<transformer>/sentence_bert_config.json`: `max_seq_length` (default: the model's
//!   positions) and `do_lower_case`. Texts reach the tokenizer as given (with
//!   `do_lower_case`, lowercased): sentence-transformers 6.2.0, the version
//!   `scripts/pyenv.py` pins for parity, no longer strips surrounding whitespace
//!   (`sentence_transformers/base/modules/transformer.py`, `Transformer.preprocess`), and a
//!   unigram tokenizer such as XLM-R's turns a trailing space into a token of its own
//!   (`▁`): stripping it gave multilingual-e5-small vectors at cosine 0.96 from
//!   sentence-transformers' for such sentences (measured 2026-12-04).
//! - `<pooling>/config.json`: only `pooling_mode_mean_tokens` is implemented; any other mode
//!   is refused with an error naming it.
//!
//! Encoding sorts the sentences by token count, cuts them into batches of `batch_size` (32
//! by default, like `SentenceTransformer.encode`; on a GPU, as many as fit in
//! [`super::bert::DEVICE_BATCH_TOKENS`] padded tokens: [`Bert::encoding_batches`]) so each
//! batch pads to a similar length, runs the batches in parallel on rayon's threads (burn's
//! ndarray backend computes each one on a single thread), and returns the rows in input
//! order.

use super::bert::{load_bert, Bert, BertBatch, BertConfig, SafetensorsSource};
use crate::ModelError;
use burn::backend::NdArray;
use burn::tensor::backend::Backend;
use harness_embed::matrix::Matrix;
use harness_embed::EncodeError;
use harness_embed::Encoder;
use rayon::prelude::*;
use serde::Deserialize;
use sha2::{Digest, Sha256};
use std::path::{Path, PathBuf};
use tokenizers::{Tokenizer, TruncationDirection, TruncationParams, TruncationStrategy};

/// The name of the pretrained English MiniLM encoder, which is also its folder in
/// `models_dir`.
pub const MINILM: &str = "all-MiniLM-L6-v2";

/// Version of the encoding rule (tokenisation, pooling, normalisation) in the fingerprint;
/// bump it whenever the output for the same files changes (2: GELU in f32 on the CPU; 3: the
/// fused CPU forward pass, `fused::bert`; 4: surrounding whitespace kept, as
/// sentence-transformers 6.2.0 keeps it).
const VERSION: u32 = 4;

/// Sentences per forward pass unless [`SentenceTransformer::with_batch_size`] says otherwise
/// (sentence-transformers' `encode` default).
pub const DEFAULT_BATCH_SIZE: usize = 32;

/// The CPU backend the benchmark encoders run on.
pub type CpuBackend = NdArray<f32>;

/// How token states become one vector.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Pooling {
    /// Mean over real tokens (`pooling_mode_mean_tokens`).
    Mean,
}

/// One entry of `modules.json`.
#[derive(Debug, Deserialize)]
struct ModuleEntry {
    #[serde(default)]
    path: String,
    #[serde(rename = "type")]
    kind: String,
}

/// `sentence_bert_config.json`.
#[derive(Debug, Deserialize)]
struct SentenceBertConfig {
    max_seq_length: Option<usize>,
    #[serde(default)]
    do_lower_case: bool,
}

/// `1_Pooling/config.json`: every mode flag sentence-transformers knows.
#[derive(Debug, Default, Deserialize)]
#[serde(default)]
struct PoolingConfig {
    word_embedding_dimension: Option<usize>,
    pooling_mode_cls_token: bool,
    pooling_mode_mean_tokens: bool,
    pooling_mode_max_tokens: bool,
    pooling_mode_mean_sqrt_len_tokens: bool,
    pooling_mode_weightedmean_tokens: bool,
    pooling_mode_lasttoken: bool,
}

/// The pipeline `modules.json` describes, resolved to folders.
#[derive(Debug)]
struct Pipeline {
    transformer_dir: PathBuf,
    pooling_config: Option<PathBuf>,
    normalize: bool,
}

/// A sentence-transformers BERT model: tokenizer, weights, pooling and normalisation.
#[derive(Debug)]
pub struct SentenceTransformer<B: Backend = CpuBackend> {
    name: String,
    dir: PathBuf,
    model: Bert<B>,
    tokenizer: Tokenizer,
    pooling: Pooling,
    normalize: bool,
    do_lower_case: bool,
    max_seq_length: usize,
    /// The default prompt (`config_sentence_transformers.json`: `prompts` at
    /// `default_prompt_name`), prepended to every sentence as `encode` does; empty for none.
    prompt: String,
    batch_size: usize,
    device: B::Device,
    fingerprint: String,
}

impl<B: Backend> SentenceTransformer<B> {
    /// Opens the folder `dir` (see the module documentation for what it must hold). The
    /// name (for reports) is the folder's name; [`Self::with_name`] changes it.
    pub fn open(dir: &Path, device: &B::Device) -> Result<Self, ModelError> {
        let pipeline = read_pipeline(dir)?;
        let tdir = &pipeline.transformer_dir;
        let config_path = tdir.join("config.json");
        let weights_path = tdir.join("model.safetensors");
        let tokenizer_path = tdir.join("tokenizer.json");
        for (path, what) in [
            (&config_path, "the BERT configuration"),
            (&weights_path, "the weights (only safetensors is read)"),
            (&tokenizer_path, "the tokenizer (HF tokenizers format)"),
        ] {
            if !path.is_file() {
                return Err(ModelError::format(
                    path,
                    format!("missing: {what}"),
                    "use a complete sentence-transformers model folder",
                ));
            }
        }
        let config = BertConfig::from_file(&config_path)?;

        let st_config_path = tdir.join("sentence_bert_config.json");
        let st_config = read_st_config(&st_config_path, &config)?;
        let max_seq_length = st_config
            .as_ref()
            .and_then(|c| c.max_seq_length)
            .unwrap_or(config.max_position_embeddings);
        let do_lower_case = st_config.as_ref().is_some_and(|c| c.do_lower_case);

        let pooling = match &pipeline.pooling_config {
            Some(path) => read_pooling(path, config.hidden_size)?,
            None => Pooling::Mean,
        };
        let tokenizer = open_tokenizer(&tokenizer_path, max_seq_length)?;
        let prompt = default_prompt(dir)?;
        let vocab = tokenizer.get_vocab_size(true);
        if vocab > config.vocab_size {
            return Err(ModelError::format(
                &tokenizer_path,
                format!(
                    "the tokenizer has {vocab} tokens but the model only {} embedding rows",
                    config.vocab_size
                ),
                "use the tokenizer.json that belongs to these weights",
            ));
        }
        let model = load_bert::<B>(
            &config,
            SafetensorsSource::File(weights_path.clone()),
            device,
        )?;

        // Everything that determines the output: the three files, the pipeline, the length
        // limit, the casing rule, and this code's version.
        let mut files = vec![config_path, weights_path, tokenizer_path];
        files.extend(pipeline.pooling_config.iter().cloned());
        let mut hasher = Sha256::new();
        for path in &files {
            hasher.update(sha256_file(path)?.as_bytes());
        }
        hasher.update(
            format!(
                "pool={pooling:?};normalize={};max_seq_length={max_seq_length};lower={do_lower_case}{}",
                pipeline.normalize,
                if prompt.is_empty() { String::new() } else { format!(";prompt={prompt:?}") }
            )
            .as_bytes(),
        );
        let fingerprint = format!("st-bert-v{VERSION}-{}", hex::encode(hasher.finalize()));

        let name = dir.file_name().map_or_else(
            || dir.display().to_string(),
            |n| n.to_string_lossy().into_owned(),
        );
        Ok(SentenceTransformer {
            name,
            dir: dir.to_path_buf(),
            model,
            tokenizer,
            pooling,
            normalize: pipeline.normalize,
            do_lower_case,
            max_seq_length,
            prompt,
            batch_size: DEFAULT_BATCH_SIZE,
            device: device.clone(),
            fingerprint,
        })
    }

    /// Sets the name reports use.
    pub fn with_name(mut self, name: impl Into<String>) -> Self {
        self.name = name.into();
        self
    }

    /// Sets the number of sentences per forward pass (at least 1).
    pub fn with_batch_size(mut self, batch_size: usize) -> Self {
        self.batch_size = batch_size.max(1);
        self
    }

    /// The model folder.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// The longest token sequence fed to the model; longer inputs are truncated.
    pub fn max_seq_length(&self) -> usize {
        self.max_seq_length
    }

    /// Token ids of each sentence as the model sees them (special tokens included,
    /// truncated to `max_seq_length`).
    // sentence-transformers 6.2.0 (scripts/pyenv.py's pin):
    // sentence_transformers/base/modules/transformer.py, `Transformer.preprocess`: the
    // prompt prepended, the text handed to the tokenizer unstripped.
    pub fn tokenize(&self, sentences: &[&str]) -> Result<Vec<Vec<u32>>, ModelError> {
        sentences
            .par_iter()
            .map(|s| {
                let text = format!("{}{s}", self.prompt);
                let text = if self.do_lower_case {
                    text.to_lowercase()
                } else {
                    text
                };
                self.tokenizer
                    .encode_fast(text, true)
                    .map(|e| e.get_ids().to_vec())
                    .map_err(|e| ModelError::Tokenizer {
                        path: self.dir.join("tokenizer.json"),
                        detail: format!("cannot encode {s:?}: {e}"),
                    })
            })
            .collect()
    }

    /// Sentence vectors, one row per sentence, in input order.
    // https://github.com/UKPLab/sentence-transformers/blob/85ec64559f4414aa536eca4bf53538291e0a333f/sentence_transformers/SentenceTransformer.py#L1057-L1134
    pub fn embed(&self, sentences: &[&str]) -> Result<Matrix, ModelError> {
        let dim = self.model.hidden_size;
        let ids = self.tokenize(sentences)?;
        // Shortest first; ties keep input order, so the batches are a pure function of the input.
        let mut order: Vec<usize> = (0..ids.len()).collect();
        order.sort_by_key(|&i| ids[i].len());
        let chunks =
            self.model
                .encoding_batches(&order, |i| ids[i].len(), self.batch_size, &self.device);
        let rows: Vec<Vec<f32>> = chunks
            .par_iter()
            .map(|chunk| {
                let seqs: Vec<Vec<u32>> = chunk.iter().map(|&i| ids[i].clone()).collect();
                let batch = BertBatch::new(&self.model, &seqs, &self.device)?;
                let pooled = match self.pooling {
                    Pooling::Mean => self.model.embed(&batch, self.normalize),
                };
                pooled
                    .into_data()
                    .to_vec::<f32>()
                    .map_err(|e| ModelError::Input {
                        detail: format!("reading the embeddings back failed: {e:?}"),
                    })
            })
            .collect::<Result<_, _>>()?;
        let mut out = Matrix::zeros(sentences.len(), dim);
        for (chunk, values) in chunks.iter().zip(rows) {
            for (r, &i) in chunk.iter().enumerate() {
                out.row_mut(i)
                    .copy_from_slice(&values[r * dim..(r + 1) * dim]);
            }
        }
        Ok(out)
    }
}

impl<B: Backend> Encoder for SentenceTransformer<B>
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

/// Whether `dir` looks like a model folder this module opens.
pub fn is_model_dir(dir: &Path) -> bool {
    dir.join("modules.json").is_file()
        || (dir.join("config.json").is_file() && dir.join("model.safetensors").is_file())
}

fn read_json<T: for<'de> Deserialize<'de>>(path: &Path) -> Result<T, ModelError> {
    let text = std::fs::read_to_string(path).map_err(|e| ModelError::io(path, e))?;
    serde_json::from_str(&text).map_err(|e| {
        ModelError::format(
            path,
            format!("unreadable JSON ({e})"),
            "restore the file from the model's release",
        )
    })
}

/// Resolves `modules.json` (or its absence) to the folders to read.
/// The folder of a sentence-transformers model's transformer module (`modules.json`'s
/// Transformer entry; the folder itself for a bare BERT folder).
pub fn transformer_dir(dir: &Path) -> Result<PathBuf, ModelError> {
    Ok(read_pipeline(dir)?.transformer_dir)
}
/// `sentence_bert_config.json`, when the folder has one; its `max_seq_length` within the
/// model's positions.
fn read_st_config(
    path: &Path,
    config: &BertConfig,
) -> Result<Option<SentenceBertConfig>, ModelError> {
    let st_config = if path.is_file() {
        Some(read_json::<SentenceBertConfig>(path)?)
    } else {
        None
    };
    let max_seq_length = st_config
        .as_ref()
        .and_then(|c| c.max_seq_length)
        .unwrap_or(config.max_position_embeddings);
    if max_seq_length == 0 || max_seq_length > config.max_position_embeddings {
        return Err(ModelError::format(
            path,
            format!(
                "max_seq_length {max_seq_length} is outside 1..={} (max_position_embeddings)",
                config.max_position_embeddings
            ),
            "set max_seq_length to at most the model's max_position_embeddings",
        ));
    }
    Ok(st_config)
}

fn read_pipeline(dir: &Path) -> Result<Pipeline, ModelError> {
    let modules_path = dir.join("modules.json");
    if !modules_path.is_file() {
        if dir.join("config.json").is_file() {
            return Ok(Pipeline {
                transformer_dir: dir.to_path_buf(),
                pooling_config: None,
                normalize: false,
            });
        }
        return Err(ModelError::format(
            dir,
            "not a model folder: neither modules.json nor config.json is there",
            "point at a sentence-transformers folder (modules.json, config.json, \
             model.safetensors, tokenizer.json)",
        ));
    }
    let modules: Vec<ModuleEntry> = read_json(&modules_path)?;
    let short = |kind: &str| kind.rsplit('.').next().unwrap_or(kind).to_string();
    let mut transformer_dir = None;
    let mut pooling_config = None;
    let mut normalize = false;
    for (i, module) in modules.iter().enumerate() {
        let expected = match i {
            0 => "Transformer",
            1 => "Pooling",
            _ => "Normalize",
        };
        let kind = short(&module.kind);
        if kind != expected {
            return Err(ModelError::format(
                &modules_path,
                format!(
                    "module {i} is `{}`, but only the pipeline Transformer → Pooling → \
                     [Normalize] is supported",
                    module.kind
                ),
                "use a model whose modules.json lists Transformer, Pooling and optionally \
                 Normalize (Dense and other modules are not implemented)",
            ));
        }
        let folder = dir.join(&module.path);
        match i {
            0 => transformer_dir = Some(folder),
            1 => pooling_config = Some(folder.join("config.json")),
            _ => normalize = true,
        }
    }
    let (Some(transformer_dir), Some(pooling_config)) = (transformer_dir, pooling_config) else {
        return Err(ModelError::format(
            &modules_path,
            "the pipeline lacks a Transformer or a Pooling module",
            "list Transformer and Pooling in modules.json",
        ));
    };
    Ok(Pipeline {
        transformer_dir,
        pooling_config: Some(pooling_config),
        normalize,
    })
}

/// The default prompt of a folder's `config_sentence_transformers.json` (empty without one:
/// no file, no `default_prompt_name`).
// https://github.com/UKPLab/sentence-transformers/blob/85ec64559f4414aa536eca4bf53538291e0a333f/sentence_transformers/SentenceTransformer.py (encode: prompt_name, default_prompt_name)
fn default_prompt(dir: &Path) -> Result<String, ModelError> {
    let path = dir.join("config_sentence_transformers.json");
    if !path.is_file() {
        return Ok(String::new());
    }
    let v: serde_json::Value = read_json(&path)?;
    let Some(name) = v.get("default_prompt_name").and_then(|n| n.as_str()) else {
        return Ok(String::new());
    };
    v.get("prompts")
        .and_then(|p| p.get(name))
        .and_then(|p| p.as_str())
        .map(String::from)
        .ok_or_else(|| {
            ModelError::format(
                &path,
                format!("default_prompt_name `{name}` is not a key of `prompts`"),
                "name one of `prompts`, or remove default_prompt_name",
            )
        })
}

/// Reads the pooling configuration; only plain mean pooling is implemented.
fn read_pooling(path: &Path, hidden_size: usize) -> Result<Pooling, ModelError> {
    let c: PoolingConfig = read_json(path)?;
    let others = [
        ("pooling_mode_cls_token", c.pooling_mode_cls_token),
        ("pooling_mode_max_tokens", c.pooling_mode_max_tokens),
        (
            "pooling_mode_mean_sqrt_len_tokens",
            c.pooling_mode_mean_sqrt_len_tokens,
        ),
        (
            "pooling_mode_weightedmean_tokens",
            c.pooling_mode_weightedmean_tokens,
        ),
        ("pooling_mode_lasttoken", c.pooling_mode_lasttoken),
    ];
    let set: Vec<&str> = others
        .iter()
        .filter(|(_, on)| *on)
        .map(|(k, _)| *k)
        .collect();
    if !set.is_empty() || !c.pooling_mode_mean_tokens {
        return Err(ModelError::format(
            path,
            if set.is_empty() {
                "pooling_mode_mean_tokens is off and no other mode is set".to_string()
            } else {
                format!("pooling mode {} is not implemented", set.join(", "))
            },
            "only mean pooling (pooling_mode_mean_tokens: true alone) is supported",
        ));
    }
    if let Some(d) = c.word_embedding_dimension {
        if d != hidden_size {
            return Err(ModelError::format(
                path,
                format!("word_embedding_dimension {d} differs from the model's hidden_size {hidden_size}"),
                "use the pooling config that belongs to this model",
            ));
        }
    }
    Ok(Pooling::Mean)
}

/// Loads `tokenizer.json` with padding off and truncation at `max_seq_length`.
fn open_tokenizer(path: &Path, max_seq_length: usize) -> Result<Tokenizer, ModelError> {
    let fail = |detail: String| ModelError::Tokenizer {
        path: path.to_path_buf(),
        detail,
    };
    // `from_str`, not the generic `from_file`: that one compiled tokenizers' whole JSON
    // deserializer into this crate again (a fourteenth of its machine code).
    let text = std::fs::read_to_string(path).map_err(|e| fail(e.to_string()))?;
    let mut tokenizer: Tokenizer = text.parse().map_err(|e| fail(format!("{e}")))?;
    tokenizer.with_padding(None);
    tokenizer
        .with_truncation(Some(TruncationParams {
            max_length: max_seq_length,
            strategy: TruncationStrategy::LongestFirst,
            stride: 0,
            direction: TruncationDirection::Right,
        }))
        .map_err(|e| fail(format!("cannot truncate at {max_seq_length}: {e}")))?;
    Ok(tokenizer)
}

/// Hex sha256 of a file, read in 1 MiB pieces.
fn sha256_file(path: &Path) -> Result<String, ModelError> {
    use std::io::Read;
    let mut file = std::fs::File::open(path).map_err(|e| ModelError::io(path, e))?;
    let mut hasher = Sha256::new();
    let mut buf = vec![0u8; 1 << 20];
    loop {
        let n = file.read(&mut buf).map_err(|e| ModelError::io(path, e))?;
        if n == 0 {
            break;
        }
        hasher.update(&buf[..n]);
    }
    Ok(hex::encode(hasher.finalize()))
}
