//! A recipe's `model:` block compiled into one burn module: the sentence encoder, the
//! optional decoder and the named heads. Training and evaluation build it the same way, so
//! a checkpoint always loads into the model that wrote it.

use crate::decoder::{LstmDecoder, LstmDecoderConfig};
use crate::encoder::bilstm::{BilstmEncoder, BilstmEncoderConfig};
use crate::error::ModelError;
use crate::heads::{Mlp, MlpConfig};
use crate::random::init_uniform;
use burn::module::Module;
use burn::tensor::backend::Backend;
use harness_recipe::schema::{Decoder, Encoder, Head, Recipe};

/// Scale of the uniform initialisation (fairseq's LSTM models, which LASER used).
pub const INIT_SCALE: f64 = 0.1;

/// Everything needed to build a [`System`].
#[derive(Debug, Clone)]
pub struct SystemConfig {
    /// The sentence encoder.
    pub encoder: BilstmEncoderConfig,
    /// The decoder, when a task translates.
    pub decoder: Option<LstmDecoderConfig>,
    /// Heads by name (sorted).
    pub heads: Vec<(String, MlpConfig)>,
}

/// The trainable model.
#[derive(Module, Debug)]
pub struct System<B: Backend> {
    /// The sentence encoder (what evaluation and export use).
    pub encoder: BilstmEncoder<B>,
    /// The decoder.
    pub decoder: Option<LstmDecoder<B>>,
    /// Heads, in the order of [`SystemConfig::heads`].
    pub heads: Vec<Mlp<B>>,
}

impl SystemConfig {
    /// Compiles `recipe.model` for a vocabulary of `n_vocab` tokens and `n_languages`
    /// language IDs. Dropout: a component's own `dropout` if set, else the optimizer's.
    pub fn from_recipe(
        recipe: &Recipe,
        n_vocab: usize,
        n_languages: usize,
    ) -> Result<Self, ModelError> {
        let model = recipe
            .model
            .as_ref()
            .ok_or_else(|| ModelError::Unsupported {
                key: "model".into(),
                detail: "the recipe has no model".into(),
                fix: "add a `model:` block with an encoder".into(),
            })?;
        let global_dropout = recipe.optimizer.as_ref().map_or(0.0, |o| o.dropout);
        let pick = |own: f64| if own > 0.0 { own } else { global_dropout };
        let encoder = match &model.encoder {
            Encoder::Bilstm(e) => {
                let c = BilstmEncoderConfig::from_bilstm(n_vocab, e);
                let d = pick(e.dropout);
                c.with_dropout(d)
            }
            Encoder::Lstm(e) => {
                let c = BilstmEncoderConfig::from_lstm(n_vocab, e);
                let d = pick(e.dropout);
                c.with_dropout(d)
            }
            other => {
                return Err(ModelError::Unsupported {
                    key: "model.encoder.kind".into(),
                    detail: format!("encoder `{}` cannot be trained by this build", other.kind()),
                    fix: "use `bilstm` or `lstm` (the transformer, cbow and pretrained encoders come with later issues)".into(),
                })
            }
        };
        let d_sentence = encoder.d_sentence();
        let decoder = model.decoder.as_ref().map(|Decoder::Lstm(d)| {
            LstmDecoderConfig::new(
                n_vocab,
                d.embed as usize,
                d.hidden as usize,
                d_sentence,
                n_languages,
            )
            .with_n_layers(d.layers as usize)
            .with_d_lang(d.lang_embed as usize)
            .with_dropout(global_dropout)
        });
        let mut heads = Vec::new();
        for (name, head) in &model.heads {
            let Head::Mlp(h) = head else {
                return Err(ModelError::Unsupported {
                    key: format!("model.heads.{name}.kind"),
                    detail: format!(
                        "head kind `{}` cannot be trained by this build",
                        head.kind()
                    ),
                    fix: "use an `mlp` head".into(),
                });
            };
            let c =
                MlpConfig::from_recipe(d_sentence, h).ok_or_else(|| ModelError::Unsupported {
                    key: format!("model.heads.{name}.classes"),
                    detail: "an MLP head without `classes` has nothing to predict".into(),
                    fix: "set `classes` (3 for NLI)".into(),
                })?;
            heads.push((name.clone(), c));
        }
        Ok(SystemConfig {
            encoder,
            decoder,
            heads,
        })
    }

    /// Builds the model with harness's seeded uniform initialisation.
    pub fn init<B: Backend>(&self, seed: u64, device: &B::Device) -> System<B> {
        let system = System {
            encoder: self.encoder.init(device),
            decoder: self.decoder.as_ref().map(|d| d.init(device)),
            heads: self.heads.iter().map(|(_, h)| h.init(device)).collect(),
        };
        init_uniform(system, seed, INIT_SCALE)
    }

    /// Index of a head by name.
    pub fn head_index(&self, name: &str) -> Option<usize> {
        self.heads.iter().position(|(n, _)| n == name)
    }
}
