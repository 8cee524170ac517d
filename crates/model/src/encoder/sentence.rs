//! The trainable sentence encoders as one type: [`SentenceEncoder`] is an enum over the
//! encoder modules (the shape of burn's and candle's examples), with one `forward` from a
//! batch of inputs to [`Encoded`]: per-token states, their mask and the pooled sentence
//! vector. Training, evaluation of a run, export and the `--encoder` factory only ever hold
//! a `SentenceEncoder`; a run records its kind in its resolved recipe and loads whatever
//! kind it holds.
//!
//! Adding an encoder kind: its module file beside this one, a variant in
//! [`SentenceEncoder`] and [`SentenceEncoderConfig`], and its arm in
//! [`SentenceEncoderConfig::from_recipe`]. `Bert` is a pretrained encoder fine-tuned
//! (`kind: pretrained`, `bert_sentence.rs`); its architecture comes from the run's
//! pretrained tokenizer file and its starting weights from the model store.

use super::encoded::Encoded;
use crate::encoder::bert::BertConfig;
use crate::encoder::bert_sentence::{BertSentenceConfig, BertSentenceEncoder};
use crate::encoder::bilstm::{BilstmEncoder, BilstmEncoderConfig};
use crate::encoder::cbow::{CbowEncoder, CbowEncoderConfig};
use crate::encoder::transformer::{TransformerEncoder, TransformerEncoderConfig};
use crate::error::ModelError;
use crate::input::Padded;
use crate::random::Noise;
use burn::module::{Module, ModuleMapper, Param};
use burn::tensor::backend::Backend;
use burn::tensor::Tensor;
use harness_recipe::schema::Encoder;

/// A trainable sentence encoder of any kind.
// A model holds one or two encoders, moved rarely: the variants' sizes do not matter (and a
// boxed variant would need a `Module` impl for `Box`).
#[allow(clippy::large_enum_variant)]
#[derive(Module, Debug)]
pub enum SentenceEncoder<B: Backend> {
    /// Stacked (Bi)LSTM (`bilstm`, `lstm`).
    Bilstm(BilstmEncoder<B>),
    /// Pooled word embeddings (`cbow`).
    Cbow(CbowEncoder<B>),
    /// Pre-norm transformer (`transformer`, multilingual USE).
    Transformer(TransformerEncoder<B>),
    /// A pretrained BERT, fine-tuned (`pretrained`, Emu).
    Bert(BertSentenceEncoder<B>),
}

/// The configuration of a [`SentenceEncoder`].
#[derive(Debug, Clone)]
pub enum SentenceEncoderConfig {
    Bilstm(BilstmEncoderConfig),
    Cbow(CbowEncoderConfig),
    Transformer(TransformerEncoderConfig),
    Bert(BertSentenceConfig),
}

/// `e` pooling with `pool` (the pooling a `pretrained` encoder block asks of the trained
/// run it starts from); `None` for an encoder that cannot start another run.
pub(crate) fn with_pool(e: &Encoder, pool: harness_recipe::schema::Pool) -> Option<Encoder> {
    let mut e = e.clone();
    match &mut e {
        Encoder::Bilstm(b) => b.pool = pool,
        Encoder::Lstm(b) => b.pool = pool,
        Encoder::Cbow(b) if crate::encoder::cbow::accepts(pool) => b.pool = pool,
        Encoder::Transformer(b) => b.pool = pool,
        _ => return None,
    }
    Some(e)
}

impl SentenceEncoderConfig {
    /// The encoder a recipe's `model.encoder` block describes, over `n_vocab` tokens (and
    /// `ngram_buckets` character n-gram ids when the tokenizer gives them); `dropout` is the
    /// optimizer's, used where the block sets none. A `pretrained` encoder takes its
    /// architecture from `pretrained` (the run's pretrained tokenizer file), or from `base`
    /// when it starts from a trained run (that run's encoder, pooled as the recipe says).
    pub fn from_recipe(
        e: &Encoder,
        n_vocab: usize,
        ngram_buckets: Option<usize>,
        dropout: f64,
        pretrained: Option<&harness_data::pretrained_tokenizer::PretrainedTokenizer>,
        base: Option<&crate::base_encoder::BaseEncoder>,
    ) -> Result<Self, ModelError> {
        let pick = |own: f64| if own > 0.0 { own } else { dropout };
        if let (Encoder::Pretrained(p), Some(base)) = (e, base) {
            let own = with_pool(&base.encoder, p.pool).ok_or_else(|| ModelError::Unsupported {
                key: "model.encoder.name".into(),
                detail: format!(
                    "the encoder of `{}` is a `{}`, which cannot start another run pooling `{:?}`",
                    base.run,
                    base.encoder.kind(),
                    p.pool
                ),
                fix: "start from a run whose encoder is a `bilstm`, `lstm`, `cbow` or `transformer` (a fine-tuned BERT: name its `harness export` folder)".into(),
            })?;
            return Self::from_recipe(&own, n_vocab, ngram_buckets, dropout, None, None);
        }
        Ok(match e {
            Encoder::Bilstm(e) => SentenceEncoderConfig::Bilstm(
                BilstmEncoderConfig::from_bilstm(n_vocab, e)
                    .with_dropout(pick(e.dropout))
                    .with_ngram_buckets(ngram_buckets),
            ),
            Encoder::Lstm(e) => SentenceEncoderConfig::Bilstm(
                BilstmEncoderConfig::from_lstm(n_vocab, e)
                    .with_dropout(pick(e.dropout))
                    .with_ngram_buckets(ngram_buckets),
            ),
            Encoder::Cbow(e) => SentenceEncoderConfig::Cbow(CbowEncoderConfig {
                ngram_buckets,
                ..CbowEncoderConfig::from_recipe(n_vocab, e)
            }),
            Encoder::Transformer(e) => {
                SentenceEncoderConfig::Transformer(TransformerEncoderConfig {
                    ngram_buckets,
                    dropout: pick(e.dropout),
                    ..TransformerEncoderConfig::from_recipe(n_vocab, e)
                })
            }
            Encoder::Pretrained(p) => {
                let Some(t) = pretrained else {
                    return Err(ModelError::Unsupported {
                        key: "data.tokenizer.kind".into(),
                        detail: format!(
                            "the pretrained encoder `{}` reads its own tokenizer's ids",
                            p.name
                        ),
                        fix: "set `data.tokenizer: {kind: pretrained}`".into(),
                    });
                };
                if !crate::encoder::bert_sentence::accepts(p.pool) {
                    return Err(ModelError::Unsupported {
                        key: "model.encoder.pool".into(),
                        detail: format!("a BERT encoder does not pool `{:?}`", p.pool),
                        fix: "use `mean` (sentence-transformers' pooling), `cls` or `max`".into(),
                    });
                }
                let bert: BertConfig =
                    serde_json::from_value(t.config.clone()).map_err(|e| {
                        ModelError::Unsupported {
                            key: "model.encoder".into(),
                            detail: format!(
                                "the configuration saved with `{}`'s tokenizer is not a BERT config ({e})",
                                t.model
                            ),
                            fix: "delete the run's tokenizer.json; training writes it again".into(),
                        }
                    })?;
                bert.check().map_err(|detail| ModelError::Unsupported {
                    key: "model.encoder".into(),
                    detail,
                    fix: "use a BertModel checkpoint".into(),
                })?;
                SentenceEncoderConfig::Bert(BertSentenceConfig {
                    bert,
                    pool: p.pool,
                    model: t.model.clone(),
                })
            }
            other => {
                return Err(ModelError::Unsupported {
                    key: "model.encoder.kind".into(),
                    detail: format!("encoder `{}` cannot be trained by this build", other.kind()),
                    fix: format!(
                        "use one of {} (the pretrained encoders come with a later issue)",
                        TRAINABLE
                            .iter()
                            .map(|k| format!("`{k}`"))
                            .collect::<Vec<_>>()
                            .join(", ")
                    ),
                })
            }
        })
    }

    /// Size of the sentence vector.
    pub fn d_sentence(&self) -> usize {
        match self {
            SentenceEncoderConfig::Bilstm(c) => c.d_sentence(),
            SentenceEncoderConfig::Cbow(c) => c.d_embed,
            SentenceEncoderConfig::Transformer(c) => c.d_model,
            SentenceEncoderConfig::Bert(c) => c.bert.hidden_size,
        }
    }

    /// Builds the encoder (weights to be initialised by the caller).
    pub fn init<B: Backend>(&self, device: &B::Device) -> SentenceEncoder<B> {
        match self {
            SentenceEncoderConfig::Bilstm(c) => SentenceEncoder::Bilstm(c.init(device)),
            SentenceEncoderConfig::Cbow(c) => SentenceEncoder::Cbow(c.init(device)),
            SentenceEncoderConfig::Transformer(c) => SentenceEncoder::Transformer(c.init(device)),
            SentenceEncoderConfig::Bert(c) => SentenceEncoder::Bert(c.init(device)),
        }
    }

    /// The encoder's architecture as `config.json` of an export describes it.
    pub fn describe(&self) -> serde_json::Value {
        match self {
            SentenceEncoderConfig::Bilstm(c) => serde_json::json!({
                "architecture": "harness-bilstm",
                "n_vocab": c.n_vocab,
                "d_embed": c.d_embed,
                "layers": c.layers.iter().map(|l| serde_json::json!({
                    "d_hidden": l.d_hidden, "bidirectional": l.bidirectional
                })).collect::<Vec<_>>(),
                "pool": c.pool,
                "d_sentence": c.d_sentence(),
                "gates": "fused [input, forget, cell, output]; forward.N / reverse.N per layer",
                "char_ngrams": describe_ngrams(c.ngram_buckets),
            }),
            SentenceEncoderConfig::Cbow(c) => serde_json::json!({
                "architecture": "harness-cbow",
                "n_vocab": c.n_vocab,
                "d_embed": c.d_embed,
                "pool": c.pool,
                "d_sentence": c.d_embed,
                "char_ngrams": describe_ngrams(c.ngram_buckets),
            }),
            SentenceEncoderConfig::Transformer(c) => serde_json::json!({
                "architecture": "harness-transformer",
                "n_vocab": c.n_vocab,
                "d_embed": c.d_embed,
                "d_model": c.d_model,
                "d_ff": c.d_ff,
                "heads": c.heads,
                "layers": c.layers,
                "max_len": c.max_len,
                "pool": c.pool,
                "d_sentence": c.d_model,
                "projection": c.projects(),
                "input": "x = sqrt(d_model) * projection(token vectors) + sinusoidal positions (sin on even, cos on odd dims; projection only when d_embed != d_model); inputs clipped to max_len tokens",
                "layer": "pre-norm, as torch nn.TransformerEncoderLayer(norm_first=True, activation=relu): x += attn(norm1(x)); x += linear2(relu(linear1(norm2(x)))); final LayerNorm `norm` (eps 1e-5), padded positions zero, then pool",
                "attention": "layers.N.self_attn.in_proj [d_model, 3*d_model] fused queries|keys|values (torch in_proj_weight transposed), heads split contiguously, scores / sqrt(d_head), padded keys masked; out_proj",
                "char_ngrams": describe_ngrams(c.ngram_buckets),
            }),
            SentenceEncoderConfig::Bert(c) => serde_json::json!({
                "architecture": "bert",
                "from": c.model,
                "config": c.bert,
                "pool": c.pool,
                "d_sentence": c.bert.hidden_size,
                "input": "the model's own ids ([CLS]/<s> ... [SEP]/</s>) from tokenizer.json",
            }),
        }
    }
}

/// How `config.json` describes the character n-gram input (`null` without one).
fn describe_ngrams(buckets: Option<usize>) -> serde_json::Value {
    match buckets {
        None => serde_json::Value::Null,
        Some(b) => serde_json::json!({
            "buckets": b,
            "rule": "token vector = (word embedding + tanh(ngrams.layer(sum of ngrams.table rows))) / 2; n-gram ids from tokenizer.json's <words:…> settings",
        }),
    }
}

/// Recipe encoder kinds this build trains.
pub const TRAINABLE: &[&str] = &["bilstm", "lstm", "cbow", "transformer", "pretrained"];

impl<B: Backend> SentenceEncoder<B> {
    /// Encodes a padded batch (`noise`: dropout draws while training, `None` at inference).
    pub fn forward(&self, input: &Padded<B>, noise: Option<&mut Noise>) -> Encoded<B> {
        match self {
            SentenceEncoder::Bilstm(e) => e.forward(input, noise),
            SentenceEncoder::Cbow(e) => e.forward(input, noise),
            SentenceEncoder::Transformer(e) => e.forward(input, noise),
            SentenceEncoder::Bert(e) => e.forward(input),
        }
    }

    /// The words of the noise stream a training pass over `rows` rows `width` wide draws.
    /// Every encoder draws each mask by [`Noise::dropout_on`], so a pass over a batch that
    /// holds those rows among others draws theirs as their own pass would
    /// ([`Noise::split`]); with the same masks each row is encoded the same whatever rows
    /// share its batch (up to rounding): padded positions are masked out of every encoder's
    /// output.
    pub fn noise_words(&self, rows: usize, width: usize) -> u64 {
        match self {
            SentenceEncoder::Bilstm(e) => e.noise_words(rows, width),
            SentenceEncoder::Cbow(e) => e.noise_words(rows, width),
            SentenceEncoder::Transformer(e) => e.noise_words(rows, width),
            SentenceEncoder::Bert(_) => 0,
        }
    }

    /// The sentence vectors of a padded batch at inference: `forward(input, None).sentence`
    /// (the BiLSTM's own faster path on the CPU backend gives the same bits).
    pub fn encode(&self, input: &Padded<B>) -> Tensor<B, 2> {
        match self {
            SentenceEncoder::Bilstm(e) => e.encode(input),
            _ => self.forward(input, None).sentence,
        }
    }

    /// The embedding cache's fingerprint of this encoder with weights `weights_id`, a
    /// tokenizer of digest `tokenizer` and inputs clipped to `max_len` tokens. (The BiLSTM's
    /// is the one runs written before encoders became an enum have in their caches.)
    pub fn fingerprint(&self, weights_id: &str, tokenizer: &str, max_len: usize) -> String {
        let (tag, pool) = match self {
            SentenceEncoder::Bilstm(e) => ("trained-bilstm/v2", &e.pool),
            SentenceEncoder::Cbow(e) => ("trained-cbow/v1", &e.pool),
            SentenceEncoder::Transformer(e) => ("trained-transformer/v1", &e.pool),
            SentenceEncoder::Bert(e) => ("trained-bert/v1", &e.pool),
        };
        format!("{tag};weights={weights_id};tokenizer={tokenizer};pool={pool};max_len={max_len}")
    }

    /// The encoder with `mapper` applied to its input layer: the token embeddings and the
    /// character n-gram layer (the `<encoder>.embeddings` group of a stage's `frozen:`).
    pub fn map_embeddings(self, mapper: &mut impl ModuleMapper<B>) -> Self {
        match self {
            SentenceEncoder::Bilstm(mut e) => {
                e.embedding = e.embedding.map(mapper);
                e.ngrams = e.ngrams.map(|n| n.map(mapper));
                SentenceEncoder::Bilstm(e)
            }
            SentenceEncoder::Cbow(mut e) => {
                e.embedding = e.embedding.map(mapper);
                e.ngrams = e.ngrams.map(|n| n.map(mapper));
                SentenceEncoder::Cbow(e)
            }
            SentenceEncoder::Transformer(mut e) => {
                e.embedding = e.embedding.map(mapper);
                e.ngrams = e.ngrams.map(|n| n.map(mapper));
                e.projection = e.projection.map(|p| p.map(mapper));
                SentenceEncoder::Transformer(e)
            }
            SentenceEncoder::Bert(mut e) => {
                e.bert.embeddings = e.bert.embeddings.map(mapper);
                SentenceEncoder::Bert(e)
            }
        }
    }

    /// The token and character n-gram embedding tables (multilingual USE's embedding
    /// gradient multiplier scales their gradients, §4).
    pub fn embedding_tables(&self) -> Vec<&Param<Tensor<B, 2>>> {
        let (embedding, ngrams) = match self {
            SentenceEncoder::Bert(e) => {
                let words = &e.bert.embeddings;
                return std::iter::once(&words.word_embeddings.weight)
                    .chain(words.word_blocks.iter().map(|b| &b.weight))
                    .collect();
            }
            SentenceEncoder::Bilstm(e) => (&e.embedding, &e.ngrams),
            SentenceEncoder::Cbow(e) => (&e.embedding, &e.ngrams),
            SentenceEncoder::Transformer(e) => (&e.embedding, &e.ngrams),
        };
        let mut out = vec![&embedding.weight];
        out.extend(ngrams.iter().map(|n| &n.table.weight));
        out
    }

    /// The device of the weights.
    pub fn device(&self) -> B::Device {
        match self {
            SentenceEncoder::Bilstm(e) => e.embedding.weight.device(),
            SentenceEncoder::Cbow(e) => e.embedding.weight.device(),
            SentenceEncoder::Transformer(e) => e.embedding.weight.device(),
            SentenceEncoder::Bert(e) => e.bert.embeddings.word_embeddings.weight.device(),
        }
    }

    /// The encoder after `System::init`'s uniform draw: parameters that must not start
    /// random get their fixed start (a transformer's LayerNorms: gain 1, bias 0).
    pub fn after_init(self) -> Self {
        match self {
            SentenceEncoder::Transformer(e) => SentenceEncoder::Transformer(e.reset_norms()),
            other => other,
        }
    }
}
