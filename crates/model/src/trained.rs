//! A trained encoder as the benchmark runner sees it (the `Encoder` trait): the encoder of a
//! run's checkpoint plus the run's tokenizer. `--encoder runs/<dir>` opens the run's best
//! checkpoint (or its newest); the trainer wraps its in-training weights the same way, so
//! evaluation during and after training goes through one code path.
//!
//! Encoding: each sentence is tokenised (clipped to [`EVAL_MAX_LEN`] tokens), followed by
//! `</s>`, sorted by length, batched and padded; padding does not change an encoding (see
//! `encoder/bilstm.rs`), so a row depends only on its sentence.

use crate::encoder::SentenceEncoder;
use crate::heads::Mlp;
use crate::system::{LegacySystem, System, SystemConfig};
use burn::module::{Module, ModuleVisitor, Param};
use burn::record::{FullPrecisionSettings, NamedMpkBytesRecorder, Recorder};
use burn::tensor::backend::Backend;
use burn::tensor::Tensor;
use harness_data::tokenize::{TextTokenizer, Tokens};
use harness_embed::matrix::Matrix;
use harness_embed::EncodeError;
use harness_embed::Encoder;
use harness_recipe::schema::Recipe;
use rayon::prelude::*;
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// Longest input in tokens at evaluation (longer sentences are clipped).
pub const EVAL_MAX_LEN: usize = 256;
/// Sentences per forward pass, length-sorted: small batches waste little padding (a
/// LASER-default run encodes 8,032 SIB-200 sentences in 2.79 s at 32 against 3.25 s at 64
/// and 3.75 s at 256, the same bits).
const BATCH: usize = 32;

/// A trained sentence encoder with its tokenizer.
pub struct TrainedEncoder<B: Backend> {
    name: String,
    fingerprint: String,
    encoder: SentenceEncoder<B>,
    tokenizer: TextTokenizer,
    dim: usize,
    device: B::Device,
    /// The run's trained heads by name ([`Self::with_heads`]): `Encoder::pair_logits`
    /// applies a pair-reading one.
    heads: Vec<(String, Mlp<B>)>,
    /// The encoders of the languages the run reads through encoders of their own
    /// (`model.languages`).
    languages: Vec<(String, Arc<dyn Encoder>)>,
}

impl<B: Backend> TrainedEncoder<B> {
    /// Wraps an encoder; `weights_id` must change whenever the weights do ([`weights_digest`],
    /// or the run and step for in-training evaluation).
    pub fn new(
        name: String,
        weights_id: &str,
        encoder: SentenceEncoder<B>,
        dim: usize,
        tokenizer: TextTokenizer,
        device: B::Device,
    ) -> Self {
        let fingerprint = encoder.fingerprint(weights_id, &tokenizer.digest(), EVAL_MAX_LEN);
        TrainedEncoder {
            name,
            fingerprint,
            encoder,
            tokenizer,
            dim,
            device,
            heads: Vec::new(),
            languages: Vec::new(),
        }
    }

    /// The encoder of a whole trained model: its first encoder with the model's heads and,
    /// for each language of `config.languages`, that language's encoder (named
    /// `<name>[<language>]`, with the same heads). `weights_id(i)` identifies encoder `i`'s
    /// weights (see [`Self::new`]).
    pub fn of_system(
        name: &str,
        weights_id: impl Fn(usize, &SentenceEncoder<B>) -> String,
        model: System<B>,
        config: &SystemConfig,
        tokenizer: TextTokenizer,
        device: &B::Device,
    ) -> Self
    where
        B::Device: Sync,
        SentenceEncoder<B>: Sync,
    {
        let heads: Vec<(String, Mlp<B>)> = config
            .heads
            .iter()
            .map(|(n, _)| n.clone())
            .zip(model.heads)
            .collect();
        let encoders = model.encoders;
        let make = |i: usize, name: String| {
            TrainedEncoder::new(
                name,
                &weights_id(i, &encoders[i]),
                encoders[i].clone(),
                config.encoders[i].1.d_sentence(),
                tokenizer.clone(),
                device.clone(),
            )
            .with_heads(heads.clone())
        };
        let languages = config
            .languages
            .iter()
            .map(|(language, i)| {
                let e = make(*i, format!("{name}[{language}]"));
                (language.clone(), Arc::new(e) as Arc<dyn Encoder>)
            })
            .collect();
        let mut main = make(0, name.to_string());
        main.languages = languages;
        main
    }

    /// The same encoder with the run's heads (trained with these encoder weights, in the
    /// same checkpoint: the encoder's fingerprint identifies them too).
    pub fn with_heads(mut self, heads: Vec<(String, Mlp<B>)>) -> Self {
        self.heads = heads;
        self
    }

    fn encode_batch(&self, rows: &[Tokens]) -> Result<Vec<f32>, EncodeError> {
        let padded = crate::input::pad_tokens::<B>(rows, &self.device);
        let out = self.encoder.encode(&padded);
        out.into_data()
            .convert::<f32>()
            .to_vec::<f32>()
            .map_err(|e| EncodeError::Encoder {
                name: self.name.clone(),
                detail: format!("reading the encodings back: {e:?}"),
            })
    }
}

impl<B: Backend> Encoder for TrainedEncoder<B>
where
    B::Device: Sync,
    SentenceEncoder<B>: Sync,
{
    fn name(&self) -> &str {
        &self.name
    }

    fn fingerprint(&self) -> String {
        self.fingerprint.clone()
    }

    fn dim(&self) -> usize {
        self.dim
    }

    fn pair_logits(
        &self,
        head: &str,
        u: &Matrix,
        v: &Matrix,
    ) -> Result<Option<Matrix>, EncodeError> {
        let err = |detail: String| EncodeError::Encoder {
            name: self.name.clone(),
            detail,
        };
        let Some((_, mlp)) = self.heads.iter().find(|(name, _)| name == head) else {
            return Ok(None);
        };
        if !mlp.pair || mlp.projection {
            return Err(err(format!(
                "head `{head}` is not a pair classifier (an `mlp` head with `classes` and \
                 `features: pair`)"
            )));
        }
        if (u.rows, u.cols) != (v.rows, v.cols) || u.cols != self.dim {
            return Err(err(format!(
                "pair_logits: {}×{} and {}×{} sentence vectors for a {}-d encoder",
                u.rows, u.cols, v.rows, v.cols, self.dim
            )));
        }
        let tensor = |m: &Matrix| {
            Tensor::<B, 2>::from_data(
                burn::tensor::TensorData::new(m.data.clone(), [m.rows, m.cols]),
                &self.device,
            )
        };
        let logits = mlp.forward(tensor(u), Some(tensor(v)), None);
        let [rows, cols] = logits.dims();
        let data = logits
            .into_data()
            .convert::<f32>()
            .to_vec::<f32>()
            .map_err(|e| err(format!("reading the logits back: {e:?}")))?;
        Ok(Some(Matrix::from_vec(rows, cols, data)))
    }

    fn for_language(&self, language: &str) -> Option<Arc<dyn Encoder>> {
        self.languages
            .iter()
            .find(|(l, _)| l == language)
            .map(|(_, e)| e.clone())
    }

    fn encode(&self, sentences: &[&str]) -> Result<Matrix, EncodeError> {
        let err = |detail: String| EncodeError::Encoder {
            name: self.name.clone(),
            detail,
        };
        let mut rows: Vec<Tokens> = sentences
            .par_iter()
            .map(|s| Ok(self.tokenizer.tokens(s, EVAL_MAX_LEN)?.with_eos()))
            .collect::<Result<_, harness_data::tokenize::TokenizeError>>()
            .map_err(|e| err(e.to_string()))?;
        let mut order: Vec<usize> = (0..rows.len()).collect();
        order.sort_by_key(|&i| rows[i].len());
        let sorted: Vec<Tokens> = order
            .iter()
            .map(|&i| std::mem::take(&mut rows[i]))
            .collect();
        let chunks: Vec<Vec<f32>> = sorted
            .par_chunks(BATCH)
            .map(|c| self.encode_batch(c))
            .collect::<Result<_, _>>()?;
        let flat: Vec<f32> = chunks.into_iter().flatten().collect();
        if flat.len() != sentences.len() * self.dim {
            return Err(err(format!(
                "the encoder returned {} values for {} sentences of dimension {}",
                flat.len(),
                sentences.len(),
                self.dim
            )));
        }
        let mut data = vec![0f32; flat.len()];
        for (k, &i) in order.iter().enumerate() {
            data[i * self.dim..(i + 1) * self.dim]
                .copy_from_slice(&flat[k * self.dim..(k + 1) * self.dim]);
        }
        Ok(Matrix::from_vec(sentences.len(), self.dim, data))
    }
}

/// The files of a run directory that an evaluation needs.
#[derive(Debug, Clone)]
pub struct RunFiles {
    pub recipe: Recipe,
    pub tokenizer: PathBuf,
    /// The class counts of its heads ([`crate::system::HEAD_CLASSES_FILE`]; may be absent).
    pub head_classes: PathBuf,
    /// The checkpoint directory used (best, else newest).
    pub checkpoint: PathBuf,
    /// The trained run its encoder started from ([`crate::base_encoder::BASE_ENCODER_FILE`]).
    pub base_encoder: Option<crate::base_encoder::BaseEncoder>,
}

/// Whether `path` is a run directory (it has `recipe.resolved.yaml`).
pub fn is_run_dir(path: &Path) -> bool {
    path.join("recipe.resolved.yaml").is_file()
}

/// Finds the recipe, tokenizer and checkpoint of a run directory.
pub fn run_files(dir: &Path) -> Result<RunFiles, EncodeError> {
    let recipe_path = dir.join("recipe.resolved.yaml");
    let text =
        std::fs::read_to_string(&recipe_path).map_err(|e| EncodeError::io(&recipe_path, e))?;
    let recipe: Recipe = harness_recipe::parse_resolved(&text).map_err(|e| {
        EncodeError::format(
            recipe_path.clone(),
            format!("not a resolved recipe ({e})"),
            "re-run `harness train` on the recipe to rewrite it",
        )
    })?;
    let checkpoints = dir.join("checkpoints");
    let checkpoint = best_or_latest(&checkpoints).ok_or_else(|| {
        EncodeError::format(
            checkpoints.clone(),
            "no complete checkpoint",
            format!(
                "train it first: `harness train` with the recipe of {}",
                dir.display()
            ),
        )
    })?;
    let base_encoder =
        crate::base_encoder::BaseEncoder::read(&dir.join(crate::base_encoder::BASE_ENCODER_FILE))?;
    Ok(RunFiles {
        recipe,
        tokenizer: dir.join("tokenizer.json"),
        head_classes: dir.join(crate::system::HEAD_CLASSES_FILE),
        checkpoint,
        base_encoder,
    })
}

/// `checkpoints/best.json`'s step if present, else the newest `step-*` with a
/// `state.json`. (The same rule as `train::checkpoint::for_inference`; `bench` and `model`
/// never import `train`.)
fn best_or_latest(checkpoints: &Path) -> Option<PathBuf> {
    let best = std::fs::read_to_string(checkpoints.join("best.json"))
        .ok()
        .and_then(|t| serde_json::from_str::<serde_json::Value>(&t).ok())
        .and_then(|v| v.get("step").and_then(|s| s.as_u64()))
        .map(|s| checkpoints.join(format!("step-{s:08}")))
        .filter(|p| p.join("state.json").is_file());
    if best.is_some() {
        return best;
    }
    let mut steps: Vec<(u64, PathBuf)> = std::fs::read_dir(checkpoints)
        .ok()?
        .flatten()
        .filter_map(|e| {
            let n = e.file_name().into_string().ok()?;
            let s: u64 = n.strip_prefix("step-")?.parse().ok()?;
            e.path().join("state.json").is_file().then(|| (s, e.path()))
        })
        .collect();
    steps.sort();
    steps.pop().map(|(_, p)| p)
}

/// The class counts a run recorded for its heads ([`crate::system::HEAD_CLASSES_FILE`]);
/// none when the file is absent (a run whose heads all set `classes`, or written before).
pub fn read_head_classes(
    path: &Path,
) -> Result<std::collections::BTreeMap<String, usize>, EncodeError> {
    if !path.is_file() {
        return Ok(Default::default());
    }
    let text = std::fs::read_to_string(path).map_err(|e| EncodeError::io(path, e))?;
    serde_json::from_str(&text).map_err(|e| {
        EncodeError::format(
            path,
            format!("not a map of head names to class counts ({e})"),
            "delete it and run `harness train` on the run's recipe again to rewrite it",
        )
    })
}

/// Loads the whole trained model of a run on `device`: its checkpoint's weights, with the
/// encoders it selected per language (`best_encoders`) over them.
pub fn load_system<B: Backend>(
    files: &RunFiles,
    device: &B::Device,
) -> Result<(System<B>, SystemConfig, TextTokenizer), EncodeError> {
    let tokenizer = TextTokenizer::load(&files.tokenizer).map_err(|e| {
        EncodeError::format(
            files.tokenizer.clone(),
            e.to_string(),
            "re-run `harness train` to rewrite the run's tokenizer",
        )
    })?;
    let head_classes = read_head_classes(&files.head_classes)?;
    let config = SystemConfig::from_recipe(
        &files.recipe,
        &tokenizer,
        &head_classes,
        files.base_encoder.as_ref(),
    )
    .map_err(|e| {
        EncodeError::format(
            files.checkpoint.clone(),
            e.to_string(),
            "evaluate runs of recipes whose encoder this build trains",
        )
    })?;
    let model = config.init::<B>(files.recipe.seed, device);
    let model = load_weights(model, &files.checkpoint.join("model"), device)?;
    // Encoders selected per language (`train.best_per_language`) replace the checkpoint's.
    let checkpoints = harness_core::fsutil::parent_dir(&files.checkpoint);
    let (model, _) = crate::best_encoders::apply(model, &config, checkpoints, device)?;
    Ok((model, config, tokenizer))
}

/// Loads `weights` (`model.mpk` without its extension) into `model`. A checkpoint written
/// before encoders became an enum (one BiLSTM named `encoder`) is read through
/// [`LegacySystem`], so older runs keep loading.
pub fn load_weights<B: Backend>(
    model: System<B>,
    weights: &Path,
    device: &B::Device,
) -> Result<System<B>, EncodeError> {
    // Read whole and decoded from memory, as the per-language encoders are
    // (`best_encoders`): MessagePack's decoder is compiled once per record type and reader
    // type, and a second reader type (a file's) doubled the decoder's machine code, a fifth
    // of this crate's.
    let file = weights.with_extension("mpk");
    let bytes = std::fs::read(&file).map_err(|e| {
        EncodeError::format(
            file.clone(),
            format!("cannot read the weights ({e})"),
            "delete this checkpoint; the previous one is used instead",
        )
    })?;
    let recorder = NamedMpkBytesRecorder::<FullPrecisionSettings>::new();
    let fresh = model.clone();
    let error = match recorder.load(bytes, device) {
        Ok(record) => return Ok(model.load_record(record)),
        Err(e) => e,
    };
    // The older layout only when the current one failed: the file is read again then,
    // rather than its bytes kept twice for every load.
    if let (Some(legacy), Ok(bytes)) = (LegacySystem::from_system(fresh), std::fs::read(&file)) {
        if let Ok(record) = recorder.load(bytes, device) {
            return Ok(legacy.load_record(record).into_system());
        }
    }
    Err(EncodeError::format(
        file,
        format!("cannot load the weights ({error})"),
        "delete this checkpoint; the previous one is used instead",
    ))
}

/// sha256 of a module's parameter values: for each float parameter in module order, its
/// shape and its values as little-endian f32.
///
/// Why not the digest of `model.mpk`: the file also holds burn's parameter ids, which are
/// random per process, so the same weights saved by two runs would get two fingerprints and
/// never share the embedding cache.
pub fn weights_digest<B: Backend, M: Module<B>>(module: &M) -> String {
    use sha2::{Digest, Sha256};
    struct Values(Sha256);
    impl<B: Backend> ModuleVisitor<B> for Values {
        fn visit_float<const D: usize>(&mut self, param: &Param<Tensor<B, D>>) {
            let tensor = param.val();
            for d in tensor.dims() {
                self.0.update((d as u64).to_le_bytes());
            }
            // Converted to f32 just before: reading it back as f32 cannot fail, and an empty
            // fallback would hash every model alike.
            let values = tensor
                .into_data()
                .convert::<f32>()
                .to_vec::<f32>()
                .expect("tensor data converted to f32");
            let bytes: Vec<u8> = values.iter().flat_map(|v| v.to_le_bytes()).collect();
            self.0.update(&bytes);
        }
    }
    let mut values = Values(Sha256::new());
    module.visit(&mut values);
    hex::encode(values.0.finalize())
}

/// Opens the encoder of a run directory on the CPU backend.
pub fn open_run(dir: &Path) -> Result<TrainedEncoder<burn::backend::NdArray<f32>>, EncodeError> {
    open_run_on(dir, &Default::default())
}

/// Opens the encoder of a run directory on backend `B`'s `device`.
pub fn open_run_on<B: Backend>(
    dir: &Path,
    device: &B::Device,
) -> Result<TrainedEncoder<B>, EncodeError> {
    let files = run_files(dir)?;
    let (model, config, tokenizer) = load_system::<B>(&files, device)?;
    let name = format!(
        "run:{}",
        dir.file_name().map_or_else(
            || dir.display().to_string(),
            |n| n.to_string_lossy().into_owned()
        )
    );
    Ok(TrainedEncoder::of_system(
        &name,
        |_, e| weights_digest(e),
        model,
        &config,
        tokenizer,
        device,
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::encoder::bilstm::{BilstmEncoder, BilstmEncoderConfig, LayerSpec};
    use crate::random::init_uniform;
    use burn::backend::NdArray;

    type B = NdArray<f32>;

    fn encoder(seed: u64) -> BilstmEncoder<B> {
        let cfg = BilstmEncoderConfig::new(
            12,
            4,
            vec![LayerSpec::new(6, true)],
            harness_recipe::schema::Pool::Max,
        );
        init_uniform(cfg.init::<B>(&Default::default()), seed, 0.3)
    }

    /// Two initialisations with the same seed have the same values but different parameter
    /// ids (what made two runs' identical checkpoints look different); the digest follows
    /// the values only.
    #[test]
    fn weights_digest_follows_values_not_parameter_ids() {
        let (a, b) = (encoder(7), encoder(7));
        assert_ne!(a.embedding.weight.id, b.embedding.weight.id);
        assert_eq!(weights_digest(&a), weights_digest(&b));
        assert_ne!(weights_digest(&a), weights_digest(&encoder(8)));
        assert_eq!(weights_digest(&a).len(), 64);
    }

    /// A checkpoint written before encoders became an enum (`encoder` a BiLSTM, not a list
    /// of encoders) still loads, to the same weights.
    #[test]
    fn a_checkpoint_of_the_legacy_layout_loads() {
        use crate::encoder::{SentenceEncoder, SentenceEncoderConfig};
        let dev = Default::default();
        let cfg = SystemConfig {
            encoders: vec![(
                "encoder".into(),
                SentenceEncoderConfig::Bilstm(BilstmEncoderConfig::new(
                    12,
                    4,
                    vec![LayerSpec::new(6, true)],
                    harness_recipe::schema::Pool::Max,
                )),
            )],
            decoder: None,
            heads: Vec::new(),
            languages: Vec::new(),
            center_heads: Vec::new(),
        };
        let trained = cfg.init::<B>(5, &dev);
        let digest = weights_digest(&trained);
        let legacy = LegacySystem::from_system(trained).unwrap();
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("model");
        legacy
            .save_file(
                path.clone(),
                &burn::record::NamedMpkFileRecorder::<FullPrecisionSettings>::new(),
            )
            .unwrap();
        let loaded = load_weights(cfg.init::<B>(9, &dev), &path, &dev).unwrap();
        assert_eq!(weights_digest(&loaded), digest);
        assert!(matches!(loaded.encoders[0], SentenceEncoder::Bilstm(_)));
        // The current layout loads directly, and a file of neither layout is an error
        // naming it.
        loaded
            .clone()
            .save_file(
                path.clone(),
                &burn::record::NamedMpkFileRecorder::<FullPrecisionSettings>::new(),
            )
            .unwrap();
        let again = load_weights(cfg.init::<B>(9, &dev), &path, &dev).unwrap();
        assert_eq!(weights_digest(&again), digest);
        std::fs::write(path.with_extension("mpk"), b"not msgpack").unwrap();
        let e = load_weights(cfg.init::<B>(9, &dev), &path, &dev).unwrap_err();
        assert!(e.to_string().contains("model.mpk"), "{e}");
    }
}
