//! BERT (Devlin et al. 2019) as a burn module, for inference with pretrained sentence
//! encoders such as all-MiniLM-L6-v2 and multilingual-e5-small.
//!
//! The file follows HF transformers' `modeling_bert.py` block by block, top to bottom, with
//! the same module tree, so checkpoint tensors land on fields by name:
//! `encoder.layer.3.attention.self.query.weight` is
//! `encoder.layer[3].attention.self_attention.query.weight` here. Only two names differ from
//! the checkpoint: `self` (a Rust keyword) is `self_attention` and `LayerNorm` is
//! `layer_norm`; [`load_bert`] remaps both, and burn-store's PyTorch adapter transposes the
//! `[out, in]` Linear weights and renames LayerNorm `weight`/`bias` to `gamma`/`beta`.
//!
//! Inference only: there is no dropout, and every sequence is one segment (token type 0),
//! which is how sentence encoders are run. Hidden states stay `[batch, seq, hidden]`, but
//! every Linear runs over the flattened `[batch·seq, hidden]` matrix (see [`linear_tokens`]).

use crate::ModelError;
use burn::module::Module;
use burn::nn::{Embedding, EmbeddingConfig, LayerNorm, LayerNormConfig, Linear, LinearConfig};
use burn::store::{ModuleSnapshot, ModuleStore, PyTorchToBurnAdapter, SafetensorsStore};
use burn::tensor::activation::{gelu_approximate, relu};
use burn::tensor::backend::Backend;
use burn::tensor::{DType, Int, Tensor, TensorData};
use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};

// ---------------------------------------------------------------------------------------
// Configuration
// ---------------------------------------------------------------------------------------

/// The activation of the feed-forward block (`hidden_act` in `config.json`).
// https://github.com/huggingface/transformers/blob/6eedfa6dd15dc1e22a55ae036f681914e5a0d9a1/src/transformers/activations.py
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
pub enum HiddenAct {
    /// `gelu`: the exact form `x · Φ(x) = x/2 · (1 + erf(x/√2))` (BERT, MiniLM, e5).
    #[default]
    #[serde(rename = "gelu")]
    Gelu,
    /// `gelu_new` / `gelu_pytorch_tanh`: the tanh approximation.
    #[serde(rename = "gelu_new", alias = "gelu_pytorch_tanh")]
    GeluTanh,
    /// `relu`.
    #[serde(rename = "relu")]
    Relu,
}

/// How positions enter the model (`position_embedding_type`). Only learned absolute
/// positions `0..n` exist in the checkpoints this reads; relative variants are refused when
/// `config.json` is parsed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
pub enum PositionEmbeddingType {
    /// One learned row per position `0..max_position_embeddings`.
    #[default]
    #[serde(rename = "absolute")]
    Absolute,
}

/// A BERT `config.json`, field for field (keys this implementation does not need, such as
/// dropout rates, are ignored; a missing key takes HF `BertConfig`'s default).
// https://github.com/huggingface/transformers/blob/6eedfa6dd15dc1e22a55ae036f681914e5a0d9a1/src/transformers/models/bert/configuration_bert.py
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct BertConfig {
    /// Rows of the word-embedding table.
    pub vocab_size: usize,
    /// Width of every hidden state.
    pub hidden_size: usize,
    /// Number of transformer layers.
    pub num_hidden_layers: usize,
    /// Attention heads per layer; must divide `hidden_size`.
    pub num_attention_heads: usize,
    /// Width of the feed-forward block.
    pub intermediate_size: usize,
    /// Feed-forward activation.
    pub hidden_act: HiddenAct,
    /// Rows of the position-embedding table: the longest input, special tokens included.
    pub max_position_embeddings: usize,
    /// Rows of the token-type table (only row 0 is used).
    pub type_vocab_size: usize,
    /// LayerNorm epsilon.
    pub layer_norm_eps: f64,
    /// Id of the padding token.
    pub pad_token_id: usize,
    /// Kind of position embedding.
    pub position_embedding_type: PositionEmbeddingType,
    /// `model_type`: `bert` when present. RoBERTa-style models (`roberta`, `xlm-roberta`)
    /// number positions from `pad_token_id + 1` and are refused rather than silently misread.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub model_type: Option<String>,
}

impl Default for BertConfig {
    /// HF `BertConfig()`'s defaults (bert-base-uncased).
    fn default() -> Self {
        BertConfig {
            vocab_size: 30522,
            hidden_size: 768,
            num_hidden_layers: 12,
            num_attention_heads: 12,
            intermediate_size: 3072,
            hidden_act: HiddenAct::Gelu,
            max_position_embeddings: 512,
            type_vocab_size: 2,
            layer_norm_eps: 1e-12,
            pad_token_id: 0,
            position_embedding_type: PositionEmbeddingType::Absolute,
            model_type: None,
        }
    }
}

impl BertConfig {
    /// Reads and checks a `config.json`.
    pub fn from_file(path: &Path) -> Result<Self, ModelError> {
        let text = std::fs::read_to_string(path).map_err(|e| ModelError::io(path, e))?;
        let config: BertConfig = serde_json::from_str(&text).map_err(|e| {
            ModelError::format(
                path,
                format!("not a BERT config.json ({e})"),
                "use the config.json shipped with the model; supported: hidden_act gelu, gelu_new, \
                 relu; position_embedding_type absolute",
            )
        })?;
        config
            .check()
            .map_err(|detail| ModelError::format(path, detail, "use a BertModel config.json"))?;
        Ok(config)
    }

    /// Checks the values a model can be built from; the error says which key is wrong.
    pub fn check(&self) -> Result<(), String> {
        if let Some(kind) = &self.model_type {
            if kind != "bert" {
                return Err(format!(
                    "model_type `{kind}` is not `bert` (RoBERTa-family models number positions \
                     differently and use other tensor names)"
                ));
            }
        }
        let sizes = [
            ("vocab_size", self.vocab_size),
            ("hidden_size", self.hidden_size),
            ("num_hidden_layers", self.num_hidden_layers),
            ("num_attention_heads", self.num_attention_heads),
            ("intermediate_size", self.intermediate_size),
            ("max_position_embeddings", self.max_position_embeddings),
            ("type_vocab_size", self.type_vocab_size),
        ];
        if let Some((key, _)) = sizes.iter().find(|(_, v)| *v == 0) {
            return Err(format!("{key} is 0"));
        }
        if !self.hidden_size.is_multiple_of(self.num_attention_heads) {
            return Err(format!(
                "hidden_size {} is not a multiple of num_attention_heads {}",
                self.hidden_size, self.num_attention_heads
            ));
        }
        if !(self.layer_norm_eps > 0.0 && self.layer_norm_eps.is_finite()) {
            return Err(format!(
                "layer_norm_eps {} is not a positive number",
                self.layer_norm_eps
            ));
        }
        Ok(())
    }

    /// The rows per block of the word table on a device whose largest buffer holds
    /// `max_buffer_bytes` (see [`crate::limits::max_buffer_bytes`]): `None` where the whole
    /// table fits in one (every CPU and CUDA device, which have no such limit), else the
    /// most rows one buffer holds (multilingual-e5-small's 250,002 × 384 f32 table is
    /// 384 MB; lavapipe's buffers hold 128 MiB).
    pub fn word_block_rows(&self, max_buffer_bytes: Option<u64>) -> Option<usize> {
        let row_bytes = (self.hidden_size * std::mem::size_of::<f32>()) as u64;
        let limit = max_buffer_bytes?;
        (self.vocab_size as u64 * row_bytes > limit).then(|| (limit / row_bytes).max(1) as usize)
    }

    /// A model with freshly initialised (random) weights; [`load_bert`] fills them from a
    /// checkpoint. burn initialises parameters lazily, so loading never pays for the random
    /// draws of the large embedding tables.
    pub fn init<B: Backend>(&self, device: &B::Device) -> Bert<B> {
        self.init_with_word_blocks(device, None)
    }

    /// [`BertConfig::init`] with the word table in blocks of at most `block_rows` rows
    /// (`None`: one table; see [`BertConfig::word_block_rows`]).
    pub fn init_with_word_blocks<B: Backend>(
        &self,
        device: &B::Device,
        block_rows: Option<usize>,
    ) -> Bert<B> {
        Bert {
            embeddings: BertEmbeddings::new(self, device, block_rows),
            encoder: BertEncoder::new(self, device),
            hidden_size: self.hidden_size,
            max_position_embeddings: self.max_position_embeddings,
            vocab_size: self.vocab_size,
            pad_token_id: self.pad_token_id,
            layer_norm_eps: self.layer_norm_eps,
        }
    }
}

fn layer_norm<B: Backend>(config: &BertConfig, device: &B::Device) -> LayerNorm<B> {
    LayerNormConfig::new(config.hidden_size)
        .with_epsilon(config.layer_norm_eps)
        .init(device)
}

/// `layer` (ε `eps`) over the last axis of `x`: burn's `LayerNorm`, as one autodiff node
/// with its own backward pass on a GPU ([`crate::fused::device_nodes`]).
fn norm<B: Backend>(layer: &LayerNorm<B>, x: Tensor<B, 3>, eps: f64) -> Tensor<B, 3> {
    crate::fused::device_nodes::layer_norm(layer, x, eps)
}

/// A Linear over every token of a `[batch, seq, in]` tensor as one
/// `[batch·seq, in] × [in, out]` GEMM. burn's broadcasting matmul would instead run one small
/// GEMM per sequence and repack the weight matrix for each.
fn linear_tokens<B: Backend>(layer: &Linear<B>, x: Tensor<B, 3>) -> Tensor<B, 3> {
    let [batch, seq, width] = x.dims();
    let y = crate::precision::linear(layer, x.reshape([batch * seq, width]));
    let [_, out] = y.dims();
    y.reshape([batch, seq, out])
}

// ---------------------------------------------------------------------------------------
// Embeddings
// ---------------------------------------------------------------------------------------

/// Word + position + token-type embeddings, then LayerNorm.
///
/// The word table is one `[vocab, hidden]` tensor, except on a device whose buffers are
/// smaller than it ([`BertConfig::word_block_rows`]): there `word_embeddings` holds its
/// first rows and `word_blocks` the following ones, in order, each within the limit.
// https://github.com/huggingface/transformers/blob/6eedfa6dd15dc1e22a55ae036f681914e5a0d9a1/src/transformers/models/bert/modeling_bert.py#L180
#[derive(Module, Debug)]
pub struct BertEmbeddings<B: Backend> {
    pub word_embeddings: Embedding<B>,
    /// The word table's rows after those of `word_embeddings`, block by block; empty where
    /// the table is one tensor.
    pub word_blocks: Vec<Embedding<B>>,
    pub position_embeddings: Embedding<B>,
    pub token_type_embeddings: Embedding<B>,
    pub layer_norm: LayerNorm<B>,
    /// `layer_norm`'s ε (burn keeps a LayerNorm's own private).
    #[module(skip)]
    pub layer_norm_eps: f64,
}

impl<B: Backend> BertEmbeddings<B> {
    fn new(config: &BertConfig, device: &B::Device, block_rows: Option<usize>) -> Self {
        let mut words = word_block_sizes(config.vocab_size, block_rows)
            .into_iter()
            .map(|rows| EmbeddingConfig::new(rows, config.hidden_size).init(device));
        BertEmbeddings {
            word_embeddings: words.next().expect("a vocabulary has at least one row"),
            word_blocks: words.collect(),
            position_embeddings: EmbeddingConfig::new(
                config.max_position_embeddings,
                config.hidden_size,
            )
            .init(device),
            token_type_embeddings: EmbeddingConfig::new(config.type_vocab_size, config.hidden_size)
                .init(device),
            layer_norm: layer_norm(config, device),
            layer_norm_eps: config.layer_norm_eps,
        }
    }

    /// `[batch, seq]` ids → `[batch, seq, hidden]`. Positions are `0..seq` and every token
    /// has type 0, so both tables are sliced rather than looked up; the sum is taken in HF's
    /// order (words + types, then + positions).
    pub fn forward(&self, input_ids: Tensor<B, 2, Int>) -> Tensor<B, 3> {
        let [_, seq] = input_ids.dims();
        let words = if self.word_blocks.is_empty() {
            self.word_embeddings.forward(input_ids)
        } else {
            self.words_in_blocks(input_ids)
        };
        let types = self
            .token_type_embeddings
            .weight
            .val()
            .slice(0..1)
            .unsqueeze_dim::<3>(0);
        let positions = self
            .position_embeddings
            .weight
            .val()
            .slice(0..seq)
            .unsqueeze_dim::<3>(0);
        norm(
            &self.layer_norm,
            words + types + positions,
            self.layer_norm_eps,
        )
    }
}

impl<B: Backend> BertEmbeddings<B> {
    /// The word vectors of `[batch, seq]` ids from a table in blocks: each block looks up
    /// every id (clamped into its rows), and the rows of the ids at or past a block's start
    /// are taken from it. A selection, no arithmetic on the vectors: the same bits as one
    /// table's lookup.
    fn words_in_blocks(&self, input_ids: Tensor<B, 2, Int>) -> Tensor<B, 3> {
        let [batch, seq] = input_ids.dims();
        let mut words: Option<Tensor<B, 3>> = None;
        let mut start = 0usize;
        for block in std::iter::once(&self.word_embeddings).chain(&self.word_blocks) {
            let rows = block.weight.val().dims()[0];
            let local = input_ids
                .clone()
                .sub_scalar(start as i64)
                .clamp(0, rows as i64 - 1);
            let found = block.forward(local);
            words = Some(match words {
                None => found,
                Some(so_far) => {
                    let hidden = found.dims()[2];
                    let here = input_ids
                        .clone()
                        .greater_equal_elem(start as i64)
                        .unsqueeze_dim::<3>(2)
                        .expand([batch, seq, hidden]);
                    so_far.mask_where(here, found)
                }
            });
            start += rows;
        }
        words.expect("a word table has at least one block")
    }
}

/// The row counts of a `vocab`-row table in blocks of at most `block_rows` rows (one block
/// of `vocab` rows for `None`).
fn word_block_sizes(vocab: usize, block_rows: Option<usize>) -> Vec<usize> {
    let step = block_rows.unwrap_or(vocab).max(1);
    (0..vocab.max(1))
        .step_by(step)
        .map(|start| step.min(vocab - start))
        .collect()
}

// ---------------------------------------------------------------------------------------
// Self-attention
// ---------------------------------------------------------------------------------------

/// Multi-head scaled dot-product attention over one sequence's tokens, padded keys masked.
// https://github.com/huggingface/transformers/blob/6eedfa6dd15dc1e22a55ae036f681914e5a0d9a1/src/transformers/models/bert/modeling_bert.py (class BertSelfAttention)
#[derive(Module, Debug)]
pub struct BertSelfAttention<B: Backend> {
    pub query: Linear<B>,
    pub key: Linear<B>,
    pub value: Linear<B>,
    pub num_attention_heads: usize,
    pub attention_head_size: usize,
}

impl<B: Backend> BertSelfAttention<B> {
    fn new(config: &BertConfig, device: &B::Device) -> Self {
        let h = config.hidden_size;
        BertSelfAttention {
            query: LinearConfig::new(h, h).init(device),
            key: LinearConfig::new(h, h).init(device),
            value: LinearConfig::new(h, h).init(device),
            num_attention_heads: config.num_attention_heads,
            attention_head_size: h / config.num_attention_heads,
        }
    }

    /// `[batch, seq, hidden]` → per-head context `[batch, seq, hidden]`. `mask_bias` is the
    /// additive mask of [`attention_mask_bias`], `[batch, 1, 1, seq]`.
    pub fn forward(&self, hidden: Tensor<B, 3>, mask_bias: Tensor<B, 4>) -> Tensor<B, 3> {
        let [batch, seq, width] = hidden.dims();
        let (heads, head_size) = (self.num_attention_heads, self.attention_head_size);
        // transpose_for_scores' first half, [batch, seq, hidden] → [batch, seq, heads,
        // head_size]; the function swaps the axes where it uses each.
        let heads_of = |x: Tensor<B, 3>| x.reshape([batch, seq, heads, head_size]);
        let query = heads_of(linear_tokens(&self.query, hidden.clone()));
        let key = heads_of(linear_tokens(&self.key, hidden.clone()));
        let value = heads_of(linear_tokens(&self.value, hidden));
        let context = scaled_dot_product_attention(query, key, value, mask_bias);
        context.swap_dims(1, 2).reshape([batch, seq, width])
    }
}

/// `softmax(q·kᵀ/√d + mask_bias)·v` per head: `query`, `key` and `value` token-major,
/// `[batch, seq, heads, d]`, the result `[batch, heads, seq, d]`.
///
/// Each input's axes are swapped to `[batch, heads, seq, d]` here, right where it is used.
/// On a GPU that order is what lets burn fuse around them: a swap is a view that kernel fusion
/// holds back in case a later operation takes it in, and while one was held, the operations
/// queued after it were held with it and ran unfused (the key's bias after its product, and
/// the scaling, mask and softmax of the scores: three launches a layer more, forwards).
///
/// The softmax is normalised after the product with `v` ("deferred normalisation"): one GEMM
/// of `exp(scores − max)` with `[v | 1]` gives every numerator and, in its last column, the
/// denominator. That is 6 passes over the `seq × seq` scores instead of the 11 of burn's
/// unfused `attention` fallback (burn 0.21 has a fused kernel only on its GPU backends), and it
/// makes each row independent of the padded length: a GEMM sums over the keys in order, so the
/// exact zeros of padded keys change nothing, where a SIMD row sum would regroup its terms.
/// A sentence therefore gets the same bits whatever batch it is encoded in.
///
/// On a GPU backend outside autodiff (encoding), burn's own attention operation runs
/// instead: a flash-attention kernel on cubecl, autotuned against burn's unfused fallback,
/// so the `seq × seq` scores never reach device memory. Its flash kernels ignore an
/// additive bias, so padded keys go in as a boolean mask (masked to −∞ where the bias is
/// f32's minimum: both give a padded key a weight of exactly 0). Training keeps the path
/// below: burn's autodiff differentiates the attention operation through the same unfused
/// fallback. Training on a GPU normalises before the product with `v`, with burn's
/// `softmax` (its maximum taken apart from the gradient): the same values to rounding, and
/// about a third of the kernels of the deferred form's backward (the `[v | 1]`
/// concatenation and the two slices of the product each cost a zeroed tensor and a
/// slice assignment there, the maximum a scatter), where launches, not passes over the
/// scores, are what a GPU step waits on.
pub fn scaled_dot_product_attention<B: Backend>(
    query: Tensor<B, 4>,
    key: Tensor<B, 4>,
    value: Tensor<B, 4>,
    mask_bias: Tensor<B, 4>,
) -> Tensor<B, 4> {
    let on_device = crate::gpu::on_device::<B>();
    let [batch, seq, heads, head_size] = value.dims();
    let heads_first = |x: Tensor<B, 4>| x.swap_dims(1, 2);
    if on_device && !B::ad_enabled(&value.device()) {
        let (query, key, value) = (heads_first(query), heads_first(key), heads_first(value));
        // The bias is 0 or f32::MIN: any threshold between them finds the padded keys.
        // burn's attention takes its mask at the scores' full shape.
        let padded = mask_bias.lower_elem(-1.0).expand([batch, heads, seq, seq]);
        return burn::tensor::module::attention(
            query,
            key,
            value,
            Some(padded),
            None,
            burn::tensor::ops::AttentionModuleOptions::default(),
        );
    }
    // kᵀ: [batch, seq, heads, d] → [batch, heads, d, seq].
    let scores = crate::precision::matmul(heads_first(query), key.permute([0, 2, 3, 1]))
        .div_scalar((head_size as f64).sqrt())
        + mask_bias;
    if on_device {
        let weights = crate::fused::device_nodes::softmax(scores);
        return crate::precision::matmul(weights, heads_first(value));
    }
    let value = heads_first(value);
    let max = scores.clone().max_dim(3);
    let weights = (scores - max).exp();
    let ones = Tensor::ones([batch, heads, seq, 1], &value.device());
    let weighted = crate::precision::matmul(weights, Tensor::cat(vec![value, ones], 3));
    let numerators = weighted
        .clone()
        .slice([0..batch, 0..heads, 0..seq, 0..head_size]);
    let denominators = weighted.slice([0..batch, 0..heads, 0..seq, head_size..head_size + 1]);
    numerators / denominators
}

/// The additive attention mask: 0 for real keys, the most negative f32 for padded ones, as
/// HF's `get_extended_attention_mask` builds it (`(1 − mask) · finfo.min`). `mask` is
/// `[batch, seq]` with 1 for real tokens and 0 for padding; the result is `[batch, 1, 1, seq]`,
/// which the scores `[batch, heads, seq, seq]` broadcast against.
// https://github.com/huggingface/transformers/blob/6eedfa6dd15dc1e22a55ae036f681914e5a0d9a1/src/transformers/modeling_utils.py#L877-L910
pub fn attention_mask_bias<B: Backend>(mask: Tensor<B, 2>) -> Tensor<B, 4> {
    let [batch, seq] = mask.dims();
    mask.neg()
        .add_scalar(1.0)
        .mul_scalar(f32::MIN)
        .reshape([batch, 1, 1, seq])
}

/// `order` (shortest first) cut greedily into runs for which `fits(count, padded length)`
/// holds; a sequence that fits nowhere goes alone.
fn cut_sorted(
    order: &[usize],
    len: impl Fn(usize) -> usize,
    fits: impl Fn(usize, usize) -> bool,
) -> Vec<&[usize]> {
    let mut batches = Vec::new();
    let mut start = 0;
    while start < order.len() {
        let mut end = start + 1;
        // Sorted shortest first: the batch's padded length is its last sequence's.
        while end < order.len() && fits(end + 1 - start, len(order[end])) {
            end += 1;
        }
        batches.push(&order[start..end]);
        start = end;
    }
    batches
}

/// Attention output projection, residual, LayerNorm (post-LN).
// https://github.com/huggingface/transformers/blob/6eedfa6dd15dc1e22a55ae036f681914e5a0d9a1/src/transformers/models/bert/modeling_bert.py (class BertSelfOutput)
#[derive(Module, Debug)]
pub struct BertSelfOutput<B: Backend> {
    pub dense: Linear<B>,
    pub layer_norm: LayerNorm<B>,
    /// `layer_norm`'s ε (burn keeps a LayerNorm's own private).
    #[module(skip)]
    pub layer_norm_eps: f64,
}

impl<B: Backend> BertSelfOutput<B> {
    fn new(config: &BertConfig, device: &B::Device) -> Self {
        BertSelfOutput {
            dense: LinearConfig::new(config.hidden_size, config.hidden_size).init(device),
            layer_norm: layer_norm(config, device),
            layer_norm_eps: config.layer_norm_eps,
        }
    }

    pub fn forward(&self, hidden: Tensor<B, 3>, input: Tensor<B, 3>) -> Tensor<B, 3> {
        norm(
            &self.layer_norm,
            linear_tokens(&self.dense, hidden) + input,
            self.layer_norm_eps,
        )
    }
}

/// Self-attention followed by its output block.
// https://github.com/huggingface/transformers/blob/6eedfa6dd15dc1e22a55ae036f681914e5a0d9a1/src/transformers/models/bert/modeling_bert.py#L392
#[derive(Module, Debug)]
pub struct BertAttention<B: Backend> {
    /// `attention.self` in the checkpoint.
    pub self_attention: BertSelfAttention<B>,
    pub output: BertSelfOutput<B>,
}

impl<B: Backend> BertAttention<B> {
    fn new(config: &BertConfig, device: &B::Device) -> Self {
        BertAttention {
            self_attention: BertSelfAttention::new(config, device),
            output: BertSelfOutput::new(config, device),
        }
    }

    pub fn forward(&self, hidden: Tensor<B, 3>, mask_bias: Tensor<B, 4>) -> Tensor<B, 3> {
        let context = self.self_attention.forward(hidden.clone(), mask_bias);
        self.output.forward(context, hidden)
    }
}

// ---------------------------------------------------------------------------------------
// Feed-forward
// ---------------------------------------------------------------------------------------

/// First feed-forward Linear and the activation.
// https://github.com/huggingface/transformers/blob/6eedfa6dd15dc1e22a55ae036f681914e5a0d9a1/src/transformers/models/bert/modeling_bert.py#L441
#[derive(Module, Debug)]
pub struct BertIntermediate<B: Backend> {
    pub dense: Linear<B>,
    /// No weights: not part of the module's record.
    #[module(skip)]
    pub act: HiddenAct,
}

impl HiddenAct {
    /// Applies the activation. `Gelu` is the exact erf form: [`crate::fused::gelu`] (the
    /// vectorised host GELU, with its own backward pass) on burn's CPU backend and its
    /// autodiff, burn's `gelu` elsewhere.
    // https://github.com/huggingface/transformers/blob/cd4584e3c809bb9e1392ccd3fe38b40daba5519a/src/transformers/activations.py#L213
    pub fn forward<B: Backend, const D: usize>(&self, x: Tensor<B, D>) -> Tensor<B, D> {
        match self {
            HiddenAct::Gelu => crate::fused::gelu::gelu(x),
            HiddenAct::GeluTanh => gelu_approximate(x),
            HiddenAct::Relu => relu(x),
        }
    }
}

impl<B: Backend> BertIntermediate<B> {
    fn new(config: &BertConfig, device: &B::Device) -> Self {
        BertIntermediate {
            dense: LinearConfig::new(config.hidden_size, config.intermediate_size).init(device),
            act: config.hidden_act,
        }
    }

    pub fn forward(&self, hidden: Tensor<B, 3>) -> Tensor<B, 3> {
        self.act.forward(linear_tokens(&self.dense, hidden))
    }
}

/// Second feed-forward Linear, residual, LayerNorm (post-LN).
// https://github.com/huggingface/transformers/blob/6eedfa6dd15dc1e22a55ae036f681914e5a0d9a1/src/transformers/models/bert/modeling_bert.py#L456
#[derive(Module, Debug)]
pub struct BertOutput<B: Backend> {
    pub dense: Linear<B>,
    pub layer_norm: LayerNorm<B>,
    /// `layer_norm`'s ε (burn keeps a LayerNorm's own private).
    #[module(skip)]
    pub layer_norm_eps: f64,
}

impl<B: Backend> BertOutput<B> {
    fn new(config: &BertConfig, device: &B::Device) -> Self {
        BertOutput {
            dense: LinearConfig::new(config.intermediate_size, config.hidden_size).init(device),
            layer_norm: layer_norm(config, device),
            layer_norm_eps: config.layer_norm_eps,
        }
    }

    pub fn forward(&self, hidden: Tensor<B, 3>, input: Tensor<B, 3>) -> Tensor<B, 3> {
        norm(
            &self.layer_norm,
            linear_tokens(&self.dense, hidden) + input,
            self.layer_norm_eps,
        )
    }
}

// ---------------------------------------------------------------------------------------
// Layers and the model
// ---------------------------------------------------------------------------------------

/// One transformer layer: attention block, then feed-forward block.
// https://github.com/huggingface/transformers/blob/6eedfa6dd15dc1e22a55ae036f681914e5a0d9a1/src/transformers/models/bert/modeling_bert.py#L470
#[derive(Module, Debug)]
pub struct BertLayer<B: Backend> {
    pub attention: BertAttention<B>,
    pub intermediate: BertIntermediate<B>,
    pub output: BertOutput<B>,
}

impl<B: Backend> BertLayer<B> {
    fn new(config: &BertConfig, device: &B::Device) -> Self {
        BertLayer {
            attention: BertAttention::new(config, device),
            intermediate: BertIntermediate::new(config, device),
            output: BertOutput::new(config, device),
        }
    }

    pub fn forward(&self, hidden: Tensor<B, 3>, mask_bias: Tensor<B, 4>) -> Tensor<B, 3> {
        let attended = self.attention.forward(hidden, mask_bias);
        let inner = self.intermediate.forward(attended.clone());
        self.output.forward(inner, attended)
    }
}

/// The stack of layers.
// https://github.com/huggingface/transformers/blob/6eedfa6dd15dc1e22a55ae036f681914e5a0d9a1/src/transformers/models/bert/modeling_bert.py#L556
#[derive(Module, Debug)]
pub struct BertEncoder<B: Backend> {
    pub layer: Vec<BertLayer<B>>,
}

impl<B: Backend> BertEncoder<B> {
    fn new(config: &BertConfig, device: &B::Device) -> Self {
        BertEncoder {
            layer: (0..config.num_hidden_layers)
                .map(|_| BertLayer::new(config, device))
                .collect(),
        }
    }

    pub fn forward(&self, mut hidden: Tensor<B, 3>, mask_bias: Tensor<B, 4>) -> Tensor<B, 3> {
        for layer in &self.layer {
            hidden = layer.forward(hidden, mask_bias.clone());
        }
        hidden
    }
}

/// BertModel without its pooler (sentence encoders pool the token states themselves).
// https://github.com/huggingface/transformers/blob/6eedfa6dd15dc1e22a55ae036f681914e5a0d9a1/src/transformers/models/bert/modeling_bert.py (class BertModel)
#[derive(Module, Debug)]
pub struct Bert<B: Backend> {
    pub embeddings: BertEmbeddings<B>,
    pub encoder: BertEncoder<B>,
    pub hidden_size: usize,
    pub max_position_embeddings: usize,
    pub vocab_size: usize,
    pub pad_token_id: usize,
    /// Every LayerNorm's ε (burn keeps a LayerNorm's own private); the CPU path
    /// ([`crate::fused::bert`]) normalises with it.
    pub layer_norm_eps: f64,
}

/// Padded tokens per batch when a BERT encodes on a GPU (where the CPU takes a fixed number
/// of sentences, sentence-transformers' 32): batches of a few dozen short sentences leave a
/// GPU idle between launches, and one of 16 Ki tokens keeps every layer's products large
/// (16 Ki × 384 activations for MiniLM) while its largest tensors stay far below a GPU's
/// memory. The buffer limit of a device that has one (wgpu) bounds it further.
pub const DEVICE_BATCH_TOKENS: usize = 16_384;

/// On a GPU backend a BERT batch ([`BertBatch`]) is a multiple of this many positions wide
/// (unless [`WIDTH_MULTIPLE_VAR`] says otherwise). cubecl compiles and autotunes a kernel per
/// class of shapes, and a matrix product's class holds each
/// operand's power-of-two factor up to 16 (`pow2_factor` in cubek-matmul 0.2's
/// `MatmulAutotuneKey`): attention's `scores · V` sums over the batch's width, so batches of
/// every width from 3 to 128 tokens take up to five factors, one once rounded to 16. The
/// extra positions are masked like any padding, so only the float rounding of the sums that
/// skip them can change. The LSTM encoders' batches are not rounded: their products do not
/// depend on the width's factors, and each extra position is one more recurrent step
/// (measured on lavapipe: more launches and keys, not fewer; docs/devices.md).
pub const DEVICE_WIDTH_MULTIPLE: usize = 16;

/// Overrides [`DEVICE_WIDTH_MULTIPLE`] (`1`: no rounding), to weigh the padded work against
/// the compilation it saves on a device.
pub const WIDTH_MULTIPLE_VAR: &str = "HARNESS_DEVICE_WIDTH_MULTIPLE";

/// The multiple padded widths are rounded up to on a GPU backend, read once per process
/// (a value [`requested_width_multiple`] refuses counts as unset; the command layer refuses
/// it before any work).
pub fn device_width_multiple() -> usize {
    static MULTIPLE: std::sync::OnceLock<usize> = std::sync::OnceLock::new();
    *MULTIPLE.get_or_init(|| {
        requested_width_multiple()
            .ok()
            .flatten()
            .unwrap_or(DEVICE_WIDTH_MULTIPLE)
    })
}

/// What [`WIDTH_MULTIPLE_VAR`] asks for: `None` when unset, an error naming the fix when it
/// is not a whole number ≥ 1.
pub fn requested_width_multiple() -> Result<Option<usize>, String> {
    width_multiple(std::env::var(WIDTH_MULTIPLE_VAR).ok().as_deref())
}

fn width_multiple(value: Option<&str>) -> Result<Option<usize>, String> {
    match value.map(str::trim) {
        None | Some("") => Ok(None),
        Some(v) => v.parse::<usize>().ok().filter(|&m| m >= 1).map(Some).ok_or_else(|| {
            format!(
                "{WIDTH_MULTIPLE_VAR}={v:?} is not a whole number of at least 1: give the multiple BERT batches are padded to on a GPU (1: none; default {DEVICE_WIDTH_MULTIPLE}), or unset it"
            )
        }),
    }
}

/// The width a BERT batch whose longest sequence has `longest` tokens is padded to on
/// backend `B`: that (at least 1) on the CPU, rounded up to [`device_width_multiple`] on a
/// GPU backend.
pub fn padded_width<B: Backend>(longest: usize) -> usize {
    let width = longest.max(1);
    if crate::gpu::on_device::<B>() {
        width.next_multiple_of(device_width_multiple())
    } else {
        width
    }
}

impl<B: Backend> Bert<B> {
    /// The width [`BertBatch::new`] pads a batch whose longest sequence has `longest` tokens
    /// to: [`padded_width`] within the model's positions (never below `longest`).
    pub fn batch_width(&self, longest: usize) -> usize {
        padded_width::<B>(longest)
            .min(self.max_position_embeddings)
            .max(longest)
    }

    /// Attention heads per layer.
    pub fn heads(&self) -> usize {
        self.encoder
            .layer
            .first()
            .map_or(1, |l| l.attention.self_attention.num_attention_heads)
    }

    /// `order` (sequence indices, shortest first; `len(i)` the padded length of sequence
    /// `i`) cut into encoding batches: `batch_size` sequences each on the CPU; on a GPU
    /// backend ([`crate::gpu::on_device`]) as many as fit in [`DEVICE_BATCH_TOKENS`] padded
    /// tokens and, where the device limits one buffer, whose largest tensor (the attention
    /// mask or scores, `heads × seq²` per sequence, or the feed-forward activations,
    /// `seq × intermediate`) fits in it. Either way a pure function of the input.
    pub fn encoding_batches<'a>(
        &self,
        order: &'a [usize],
        len: impl Fn(usize) -> usize,
        batch_size: usize,
        device: &B::Device,
    ) -> Vec<&'a [usize]> {
        if !crate::gpu::on_device::<B>() {
            return order.chunks(batch_size.max(1)).collect();
        }
        let limit = crate::limits::max_buffer_bytes::<B>(device);
        let widest_row = self
            .encoder
            .layer
            .first()
            .map_or(self.hidden_size, |l| l.intermediate.dense.weight.dims()[1])
            .max(self.hidden_size);
        let fits = |count: usize, seq: usize| {
            let seq = self.batch_width(seq);
            let tokens_ok = count * seq <= DEVICE_BATCH_TOKENS;
            let per_sequence = 4 * seq * (self.heads() * seq).max(widest_row);
            let buffer_ok = limit.is_none_or(|l| (count * per_sequence) as u64 <= l);
            tokens_ok && buffer_ok
        };
        cut_sorted(order, len, fits)
    }

    // `Bert::forward`, which picks the host path, these fused operations or the generic
    // path, is defined beside the host path (`fused/bert.rs`), which reads this file.

    /// [`Bert::forward_generic`] through harness's fused CPU operations, each with its own
    /// backward pass, on the `[batch·seq, hidden]` matrix: the linear layers
    /// ([`crate::fused::linear`]), the attention core with the queries, keys and values side
    /// by side ([`crate::fused::attention`]), LayerNorm ([`crate::fused::layer_norm`]) and GELU
    /// ([`crate::fused::gelu`]); the reshapes copy nothing ([`crate::fused::reshape`]). This is
    /// what fine-tuning differentiates on burn's CPU autodiff backend, where burn's own
    /// operations copied transposed operands, built a node per element-wise step and took
    /// GELU's erf in f64 (most of a step outside the GEMM). `None` (nothing computed) where
    /// the fused attention does not run. Padded keys add −10⁴ to their scores where HF adds
    /// f32's minimum: both vanish in the softmax's `exp`.
    pub fn forward_fused_ops(
        &self,
        input_ids: Tensor<B, 2, Int>,
        attention_mask: &Tensor<B, 2>,
    ) -> Option<Tensor<B, 3>> {
        use crate::fused::layer_norm::layer_norm;
        use crate::fused::linear::linear;
        use crate::fused::reshape::reshape;
        let [batch, seq] = input_ids.dims();
        let d = self.hidden_size;
        let heads = self.heads();
        let key_mask: Vec<f32> = attention_mask
            .clone()
            .into_data()
            .convert::<f32>()
            .into_vec::<f32>()
            .ok()?;
        let shape = crate::fused::attention::Shape {
            batch,
            time: seq,
            heads,
            d,
        };
        let eps = self.layer_norm_eps;
        let mut h = reshape(self.embeddings.forward(input_ids), [batch * seq, d]);
        for layer in &self.encoder.layer {
            let sa = &layer.attention.self_attention;
            let qkv = Tensor::cat(
                vec![
                    linear(&sa.query, h.clone()),
                    linear(&sa.key, h.clone()),
                    linear(&sa.value, h.clone()),
                ],
                1,
            );
            let context =
                crate::fused::attention::fused_attention(qkv, &key_mask, shape, &mut None, 0.0)
                    .ok()?;
            let out = &layer.attention.output;
            let attended = layer_norm(&out.layer_norm, linear(&out.dense, context) + h, eps);
            let inner = layer
                .intermediate
                .act
                .forward(linear(&layer.intermediate.dense, attended.clone()));
            h = layer_norm(
                &layer.output.layer_norm,
                linear(&layer.output.dense, inner) + attended,
                eps,
            );
        }
        Some(reshape(h, [batch, seq, d]))
    }

    /// [`Bert::forward`] through burn's tensor operations on every backend (what the CPU
    /// path is tested against, and what autodiff differentiates).
    pub fn forward_generic(
        &self,
        input_ids: Tensor<B, 2, Int>,
        attention_mask: Tensor<B, 2>,
    ) -> Tensor<B, 3> {
        let mask_bias = attention_mask_bias(attention_mask);
        let hidden = self.embeddings.forward(input_ids);
        self.encoder.forward(hidden, mask_bias)
    }

    /// Mean-pooled, optionally L2-normalised sentence vectors `[batch, hidden]` of a batch.
    pub fn embed(&self, batch: &BertBatch<B>, normalize: bool) -> Tensor<B, 2> {
        let hidden = self.forward(batch.input_ids.clone(), batch.attention_mask.clone());
        let pooled = mean_pool(hidden, batch.attention_mask.clone());
        if normalize {
            l2_normalize(pooled)
        } else {
            pooled
        }
    }
}

// ---------------------------------------------------------------------------------------
// Batching, pooling, normalisation
// ---------------------------------------------------------------------------------------

/// A right-padded batch of token-id sequences, ready for [`Bert::forward`].
#[derive(Debug, Clone)]
pub struct BertBatch<B: Backend> {
    /// `[batch, seq]`, padding filled with `pad_token_id`.
    pub input_ids: Tensor<B, 2, Int>,
    /// `[batch, seq]`: 1.0 for real tokens, 0.0 for padding.
    pub attention_mask: Tensor<B, 2>,
}

impl<B: Backend> BertBatch<B> {
    /// Pads `sequences` (special tokens already added) to the longest one (on a GPU, to
    /// [`padded_width`] of it within the model's positions). Refuses an empty
    /// batch, an empty sequence, a sequence longer than the model's positions and an id
    /// outside its vocabulary, so that [`Bert::forward`] cannot index out of bounds.
    pub fn new(
        model: &Bert<B>,
        sequences: &[Vec<u32>],
        device: &B::Device,
    ) -> Result<Self, ModelError> {
        let seq = sequences.iter().map(Vec::len).max().unwrap_or(0);
        if sequences.is_empty() || sequences.iter().any(Vec::is_empty) {
            return Err(ModelError::Input {
                detail: "a BERT batch needs at least one sequence, each with at least one token"
                    .into(),
            });
        }
        if seq > model.max_position_embeddings {
            return Err(ModelError::Input {
                detail: format!(
                    "a sequence of {seq} tokens is longer than the model's {} positions; \
                     truncate the input (max_seq_length)",
                    model.max_position_embeddings
                ),
            });
        }
        let seq = model.batch_width(seq);
        let batch = sequences.len();
        let mut ids = vec![model.pad_token_id as i64; batch * seq];
        let mut mask = vec![0f32; batch * seq];
        for (row, sequence) in sequences.iter().enumerate() {
            for (col, &id) in sequence.iter().enumerate() {
                if id as usize >= model.vocab_size {
                    return Err(ModelError::Input {
                        detail: format!(
                            "token id {id} is outside the model's vocabulary of {} rows; the \
                             tokenizer does not belong to these weights",
                            model.vocab_size
                        ),
                    });
                }
                ids[row * seq + col] = id as i64;
                mask[row * seq + col] = 1.0;
            }
        }
        Ok(BertBatch {
            input_ids: Tensor::from_data(TensorData::new(ids, [batch, seq]), device),
            attention_mask: Tensor::from_data(TensorData::new(mask, [batch, seq]), device),
        })
    }
}

/// Mean of the token states over real tokens (`[CLS]` and `[SEP]` included), as
/// sentence-transformers' Pooling with `pooling_mode_mean_tokens`: masked sum divided by the
/// token count clamped at 1e-9. `hidden` `[batch, seq, h]`, `mask` `[batch, seq]` → `[batch, h]`.
// https://github.com/UKPLab/sentence-transformers/blob/85ec64559f4414aa536eca4bf53538291e0a333f/sentence_transformers/models/Pooling.py#L166-L180
pub fn mean_pool<B: Backend>(hidden: Tensor<B, 3>, mask: Tensor<B, 2>) -> Tensor<B, 2> {
    let mask = mask.unsqueeze_dim::<3>(2);
    let sum: Tensor<B, 2> = (hidden * mask.clone()).sum_dim(1).squeeze_dim(1);
    let count: Tensor<B, 2> = mask.sum_dim(1).squeeze_dim(1);
    sum / count.clamp_min(1e-9)
}

/// Each row divided by its L2 norm clamped at 1e-12 (`torch.nn.functional.normalize`, as
/// sentence-transformers' Normalize module applies it).
// https://github.com/UKPLab/sentence-transformers/blob/85ec64559f4414aa536eca4bf53538291e0a333f/sentence_transformers/models/Normalize.py#L20-L21
pub fn l2_normalize<B: Backend>(x: Tensor<B, 2>) -> Tensor<B, 2> {
    let norm = x.clone().powi_scalar(2).sum_dim(1).sqrt().clamp_min(1e-12);
    x / norm
}

// ---------------------------------------------------------------------------------------
// Weights
// ---------------------------------------------------------------------------------------

/// Where the weights of [`load_bert`] come from. Either way they are a safetensors file with
/// HF BertModel key names (optionally prefixed `bert.`), f32, Linear weights `[out, in]`.
#[derive(Debug, Clone)]
pub enum SafetensorsSource {
    /// A `.safetensors` file (memory-mapped while loading).
    File(PathBuf),
    /// A safetensors buffer built in memory (e.g. converted from another format); `name`
    /// says where it came from, for error messages.
    Bytes { name: String, bytes: Vec<u8> },
}

impl SafetensorsSource {
    /// How error messages name this source.
    pub fn describe(&self) -> String {
        match self {
            SafetensorsSource::File(path) => path.display().to_string(),
            SafetensorsSource::Bytes { name, .. } => format!("{name} (in-memory safetensors)"),
        }
    }
}

/// Checkpoint tensors that [`Bert`] does not use: the `position_ids` / `token_type_ids`
/// buffers some exports include, and the pooler (sentence encoders pool for themselves).
fn is_unused_tensor(key: &str) -> bool {
    let key = key.strip_prefix("bert.").unwrap_or(key);
    key == "embeddings.position_ids"
        || key == "embeddings.token_type_ids"
        || key.starts_with("pooler.")
}

/// Builds a [`Bert`] from `config` and fills every parameter from `weights`.
///
/// Names are mapped by three regex rules (no per-tensor list): drop a leading `bert.`,
/// `.self.` → `.self_attention.`, `LayerNorm` → `layer_norm`; burn-store's
/// `PyTorchToBurnAdapter` transposes Linear weights and renames LayerNorm `weight`/`bias`.
/// Fails, naming the tensors, when one is missing, has another shape, is not f32, or when
/// the file holds tensors other than the model's and the known unused ones
/// (`embeddings.position_ids`, `pooler.*`).
pub fn load_bert<B: Backend>(
    config: &BertConfig,
    weights: SafetensorsSource,
    device: &B::Device,
) -> Result<Bert<B>, ModelError> {
    // Where the device cannot hold the word table in one buffer, it is loaded in blocks.
    let block_rows = config.word_block_rows(crate::limits::max_buffer_bytes::<B>(device));
    load_bert_in_blocks(config, weights, device, block_rows)
}

/// [`load_bert`] with the word table in blocks of at most `block_rows` rows (`None`: one
/// tensor, loaded by burn-store like every other).
fn load_bert_in_blocks<B: Backend>(
    config: &BertConfig,
    weights: SafetensorsSource,
    device: &B::Device,
    block_rows: Option<usize>,
) -> Result<Bert<B>, ModelError> {
    config.check().map_err(|detail| ModelError::Weights {
        origin: weights.describe(),
        detail: format!("invalid configuration: {detail}"),
        fix: "pass the config.json that belongs to these weights".into(),
    })?;
    let label = weights.describe();
    let fail = |detail: String, fix: &str| ModelError::Weights {
        origin: label.clone(),
        detail,
        fix: fix.to_string(),
    };
    let store = match weights {
        SafetensorsSource::File(path) => SafetensorsStore::from_file(path),
        SafetensorsSource::Bytes { bytes, .. } => SafetensorsStore::from_bytes(Some(bytes)),
    };
    // A table in blocks is loaded block by block below, past burn-store (which would load
    // it whole); otherwise the store loads every tensor, this one included.
    let store = store
        .with_from_adapter(PyTorchToBurnAdapter)
        .with_key_remapping(r"^bert\.", "")
        .with_key_remapping(r"\.self\.", ".self_attention.")
        .with_key_remapping(r"LayerNorm", "layer_norm");
    let mut store = match block_rows {
        None => store.allow_partial(false),
        Some(_) => store
            .with_predicate(|path, _| path != WORD_TABLE)
            .allow_partial(true),
    };

    // burn-store would copy an f16/bf16 tensor into the model as it is; refuse instead.
    let snapshots = store.get_all_snapshots().map_err(|e| {
        fail(
            format!("cannot read the safetensors data ({e})"),
            "re-create the file; it is truncated or not safetensors",
        )
    })?;
    let wrong_dtype = not_f32(snapshots);
    if !wrong_dtype.is_empty() {
        return Err(fail(
            format!("tensors are not f32: {}", preview(&wrong_dtype)),
            "convert the checkpoint to float32",
        ));
    }

    let word_table = snapshots.get(WORD_TABLE).cloned();
    let mut model = config.init_with_word_blocks::<B>(device, block_rows);
    let result = model.load_from(&mut store).map_err(|e| {
        fail(
            format!("the tensors do not fit the configured model: {e}"),
            "check that config.json belongs to these weights (sizes, layer count) and that the \
             file is a BertModel checkpoint with HF key names",
        )
    })?;
    if !result.errors.is_empty() {
        let errors: Vec<String> = result.errors.iter().map(|e| e.to_string()).collect();
        return Err(fail(
            format!("tensors could not be loaded: {}", preview(&errors)),
            "check that config.json belongs to these weights",
        ));
    }
    if block_rows.is_some() {
        // `allow_partial` let the blocks through unloaded; nothing else may be missing.
        let missing = missing_besides_blocks(&result);
        if !missing.is_empty() {
            return Err(fail(
                format!("tensors are missing: {}", preview(&missing)),
                "check that the file is a complete BertModel checkpoint",
            ));
        }
        let Some(table) = word_table else {
            return Err(fail(
                format!("the tensor {WORD_TABLE} is missing"),
                "check that the file is a complete BertModel checkpoint",
            ));
        };
        load_word_blocks(&mut model.embeddings, config, block_rows, &table, device)
            .map_err(|detail| fail(detail, "check that config.json belongs to these weights"))?;
    }
    let unexpected = unexpected_tensors(&result);
    if !unexpected.is_empty() {
        return Err(fail(
            format!(
                "{} tensors match no parameter of the model: {}",
                unexpected.len(),
                preview(&unexpected)
            ),
            "this loader reads plain BertModel checkpoints (HF key names, optionally prefixed \
             `bert.`); a head or another architecture needs its own loader",
        ));
    }
    Ok(model)
}

/// The tensors (known unused ones aside) that are not f32, with their dtype.
fn not_f32(
    snapshots: &std::collections::BTreeMap<String, burn::store::TensorSnapshot>,
) -> Vec<String> {
    snapshots
        .iter()
        .filter(|(key, s)| !is_unused_tensor(key) && s.dtype != DType::F32)
        .map(|(key, s)| format!("{key} ({:?})", s.dtype))
        .collect()
}

/// The model's parameters the checkpoint lacks, besides the word table's blocks (loaded
/// apart).
fn missing_besides_blocks(result: &burn::store::ApplyResult) -> Vec<String> {
    result
        .missing
        .iter()
        .map(|(path, _)| path.clone())
        .filter(|path| !path.starts_with("embeddings.word_blocks."))
        .collect()
}

/// The checkpoint's tensors that match no parameter (known unused ones aside).
fn unexpected_tensors(result: &burn::store::ApplyResult) -> Vec<String> {
    // burn-store lists LayerNorm `weight`/`bias` as unused even when it applied them through
    // the adapter's alternative names `gamma`/`beta`; those are not strangers.
    let applied: std::collections::HashSet<&str> =
        result.applied.iter().map(String::as_str).collect();
    let applied_as_alias = |key: &str| {
        let alias = match key.rsplit_once('.') {
            Some((module, "weight")) => format!("{module}.gamma"),
            Some((module, "bias")) => format!("{module}.beta"),
            _ => return false,
        };
        applied.contains(alias.as_str())
    };
    result
        .unused
        .iter()
        .filter(|key| !is_unused_tensor(key) && !applied_as_alias(key))
        .cloned()
        .collect()
}

/// The word table's key (after the `bert.` prefix is dropped).
const WORD_TABLE: &str = "embeddings.word_embeddings.weight";

/// Fills the blocks of a word table in blocks ([`BertConfig::init_with_word_blocks`]) from
/// the checkpoint's `[vocab, hidden]` table, block by block onto `device`.
fn load_word_blocks<B: Backend>(
    embeddings: &mut BertEmbeddings<B>,
    config: &BertConfig,
    block_rows: Option<usize>,
    table: &burn::store::TensorSnapshot,
    device: &B::Device,
) -> Result<(), String> {
    let data = table
        .to_data()
        .map_err(|e| format!("cannot read {WORD_TABLE} ({e:?})"))?;
    let (vocab, hidden) = (config.vocab_size, config.hidden_size);
    if data.shape.as_slice() != [vocab, hidden] {
        return Err(format!(
            "{WORD_TABLE} has shape {:?}, the configuration says [{vocab}, {hidden}]",
            data.shape.as_slice()
        ));
    }
    let values: Vec<f32> = data
        .into_vec()
        .map_err(|e| format!("{WORD_TABLE} is not f32 ({e:?})"))?;
    let mut start = 0;
    let blocks =
        std::iter::once(&mut embeddings.word_embeddings).chain(&mut embeddings.word_blocks);
    for (block, rows) in blocks.zip(word_block_sizes(vocab, block_rows)) {
        let part = values[start * hidden..(start + rows) * hidden].to_vec();
        block.weight = burn::module::Param::from_tensor(Tensor::from_data(
            TensorData::new(part, [rows, hidden]),
            device,
        ));
        start += rows;
    }
    Ok(())
}

/// The first few items of a list, for error messages.
fn preview(items: &[String]) -> String {
    const SHOWN: usize = 5;
    let mut s = items
        .iter()
        .take(SHOWN)
        .cloned()
        .collect::<Vec<_>>()
        .join(", ");
    if items.len() > SHOWN {
        s.push_str(&format!(", … ({} in all)", items.len()));
    }
    s
}

#[cfg(test)]
pub(crate) mod tests {
    #[test]
    fn encoding_batches_are_cut_where_the_padded_size_stops_fitting() {
        let order = [3, 0, 2, 1];
        let lens = [3usize, 8, 5, 2];
        let got = cut_sorted(&order, |i| lens[i], |count, seq| count * seq <= 10);
        // 2 + 3 tokens padded to 3 (6); adding the 5 pads three to 15; the 8 goes alone.
        assert_eq!(got, vec![&[3, 0][..], &[2][..], &[1][..]]);
        // Nothing fits: one sequence per batch, none lost.
        let alone = cut_sorted(&order, |i| lens[i], |_, _| false);
        assert_eq!(alone.concat(), order.to_vec());
        assert_eq!(alone.len(), 4);
    }

    #[test]
    fn the_device_width_multiple_is_a_whole_number_of_at_least_one() {
        assert_eq!(width_multiple(None), Ok(None));
        assert_eq!(width_multiple(Some(" ")), Ok(None));
        assert_eq!(width_multiple(Some("1")), Ok(Some(1)));
        assert_eq!(width_multiple(Some(" 8 ")), Ok(Some(8)));
        for bad in ["0", "-4", "sixteen"] {
            let e = width_multiple(Some(bad)).unwrap_err();
            assert!(
                e.contains(WIDTH_MULTIPLE_VAR) && e.contains("unset it"),
                "{e}"
            );
        }
        // On the CPU a batch is as wide as its longest sequence.
        assert_eq!(padded_width::<B>(5), 5);
        assert_eq!(padded_width::<B>(0), 1);
    }

    use super::*;
    use burn::backend::NdArray;

    pub(crate) type B = NdArray<f32>;

    /// A 2-layer model small enough to build in a test, with random weights.
    pub(crate) fn tiny_config() -> BertConfig {
        BertConfig {
            vocab_size: 50,
            hidden_size: 16,
            num_hidden_layers: 2,
            num_attention_heads: 4,
            intermediate_size: 32,
            max_position_embeddings: 12,
            model_type: Some("bert".into()),
            ..BertConfig::default()
        }
    }

    pub(crate) fn values(t: Tensor<B, 2>) -> Vec<f32> {
        t.into_data().to_vec::<f32>().unwrap()
    }

    /// erf by its Maclaurin series in f64 (accurate to ~1e-11 on [-4, 4]).
    #[test]
    fn host_gelu_matches_burns_gelu() {
        let device = Default::default();
        let x: Tensor<B, 2> = Tensor::from_data(
            TensorData::new(
                (0..200).map(|i| (i as f32 - 100.0) / 15.0).collect(),
                [10, 20],
            ),
            &device,
        );
        let fast = values(HiddenAct::Gelu.forward(x.clone()));
        let exact = values(burn::tensor::activation::gelu(x));
        for (f, e) in fast.iter().zip(&exact) {
            assert!((f - e).abs() <= 1e-6 * e.abs().max(1.0), "{f} vs {e}");
        }
    }

    #[test]
    fn gelu_is_the_exact_erf_form_not_the_tanh_approximation() {
        let device = Default::default();
        let x = Tensor::<B, 1>::from_floats([-3.0, -1.0, 0.0, 0.5, 1.0, 2.0], &device);
        let y = HiddenAct::Gelu
            .forward(x)
            .into_data()
            .to_vec::<f32>()
            .unwrap();
        // x·Φ(x), Φ the standard normal CDF (values from scipy.stats.norm.cdf).
        let exact = [
            -0.004_049_963_f32,
            -0.158_655_25,
            0.0,
            0.345_731_37,
            0.841_344_8,
            1.954_499_7,
        ];
        for (got, want) in y.iter().zip(exact) {
            assert!((got - want).abs() < 1e-6, "gelu: got {got}, want {want}");
        }
        // The tanh form gives 0.841192 at 1.0: 1.5e-4 away, far outside the tolerance above.
        let tanh_at_one = 0.5 * (1.0 + ((2.0f32 / std::f32::consts::PI).sqrt() * 1.044_715).tanh());
        assert!((y[4] - tanh_at_one).abs() > 1e-4);
    }

    #[test]
    fn config_json_parses_with_defaults_and_refuses_what_it_cannot_run() {
        let c: BertConfig = serde_json::from_str(
            r#"{"hidden_size": 384, "num_attention_heads": 12, "architectures": ["BertModel"],
                "hidden_act": "gelu", "model_type": "bert", "hidden_dropout_prob": 0.1}"#,
        )
        .unwrap();
        assert_eq!(
            (c.hidden_size, c.num_hidden_layers, c.vocab_size),
            (384, 12, 30522)
        );
        assert_eq!(c.layer_norm_eps, 1e-12);
        assert!(c.check().is_ok());
        let err = serde_json::from_str::<BertConfig>(r#"{"hidden_act": "swish"}"#).unwrap_err();
        assert!(err.to_string().contains("swish"), "{err}");
        let err =
            serde_json::from_str::<BertConfig>(r#"{"position_embedding_type": "relative_key"}"#)
                .unwrap_err();
        assert!(err.to_string().contains("relative_key"), "{err}");
        let roberta = BertConfig {
            model_type: Some("xlm-roberta".into()),
            ..BertConfig::default()
        };
        assert!(roberta.check().unwrap_err().contains("xlm-roberta"));
        let odd = BertConfig {
            hidden_size: 100,
            ..BertConfig::default()
        };
        assert!(odd.check().unwrap_err().contains("multiple"));
    }

    #[test]
    fn padding_a_batch_does_not_change_any_row() {
        let device = Default::default();
        let model = tiny_config().init::<B>(&device);
        let short = vec![1u32, 7, 9, 2];
        let long = vec![1u32, 5, 6, 7, 8, 9, 10, 11, 2];
        let alone = model.embed(
            &BertBatch::new(&model, std::slice::from_ref(&short), &device).unwrap(),
            true,
        );
        let padded = model.embed(
            &BertBatch::new(&model, &[short, long.clone()], &device).unwrap(),
            true,
        );
        let long_alone = model.embed(&BertBatch::new(&model, &[long], &device).unwrap(), true);
        let (alone, padded, long_alone) = (values(alone), values(padded), values(long_alone));
        let h = 16;
        let max_diff = |a: &[f32], b: &[f32]| {
            a.iter()
                .zip(b)
                .map(|(x, y)| (x - y).abs())
                .fold(0.0f32, f32::max)
        };
        // Bit for bit: the attention sums over keys in a fixed order (see
        // `scaled_dot_product_attention`), so padding adds exact zeros and nothing else.
        assert_eq!(alone, padded[..h], "padding changed the short row");
        assert_eq!(long_alone, padded[h..], "batching changed the long row");
        // Without the mask the padded keys would be attended to: the check above is not vacuous.
        let ones = Tensor::<B, 2>::ones([2, 9], &device);
        let ids = BertBatch::new(
            &model,
            &[
                vec![1, 7, 9, 2, 0, 0, 0, 0, 0],
                vec![1, 5, 6, 7, 8, 9, 10, 11, 2],
            ],
            &device,
        )
        .unwrap()
        .input_ids;
        let unmasked = model.forward(ids, ones.clone());
        let mask4 =
            Tensor::<B, 2>::from_floats([[1., 1., 1., 1., 0., 0., 0., 0., 0.], [1.; 9]], &device);
        let unmasked = values(l2_normalize(mean_pool(unmasked, mask4)));
        assert!(max_diff(&alone, &unmasked[..h]) > 1e-4);
    }

    /// A 2-layer model wide enough that every GEMM of a 40-sentence batch crosses
    /// `harness_kernels::gemm`'s threshold for splitting into parallel blocks.
    pub(crate) fn wider_config(act: HiddenAct) -> BertConfig {
        BertConfig {
            vocab_size: 97,
            hidden_size: 64,
            num_attention_heads: 4,
            intermediate_size: 256,
            max_position_embeddings: 40,
            hidden_act: act,
            ..tiny_config()
        }
    }

    /// `n` sentences of 1 to `longest` tokens with varied ids below `vocab`.
    pub(crate) fn sentences(n: usize, vocab: u32, longest: usize) -> Vec<Vec<u32>> {
        (0..n)
            .map(|i| {
                let len = 1 + (i * 7 + 3) % longest;
                (0..len as u32)
                    .map(|t| (t * 13 + i as u32 * 5 + 1) % vocab)
                    .collect()
            })
            .collect()
    }

    /// Fine-tuning's path (`forward_fused_ops` on the CPU autodiff backend, which `forward`
    /// takes there) against burn's generic operations: the hidden states and every
    /// parameter's gradient of a loss over the real tokens.
    #[test]
    fn the_fused_operations_equal_the_generic_path_with_gradients() {
        use burn::module::{ModuleVisitor, Param, ParamId};
        type Ad = burn::backend::Autodiff<B>;
        struct Grads<'a> {
            grads: &'a <Ad as burn::tensor::backend::AutodiffBackend>::Gradients,
            out: Vec<(ParamId, Vec<f32>)>,
        }
        impl ModuleVisitor<Ad> for Grads<'_> {
            fn visit_float<const D: usize>(&mut self, p: &Param<Tensor<Ad, D>>) {
                if let Some(g) = p.val().grad(self.grads) {
                    self.out
                        .push((p.id, g.into_data().to_vec::<f32>().unwrap()));
                }
            }
        }
        let max_diff = |a: &[f32], b: &[f32]| {
            a.iter()
                .zip(b)
                .map(|(x, y)| (x - y).abs())
                .fold(0.0f32, f32::max)
        };
        let device = Default::default();
        for config in [tiny_config(), wider_config(HiddenAct::Gelu)] {
            let model = config.init::<Ad>(&device);
            let longest = config.max_position_embeddings.min(13);
            let batch = BertBatch::new(&model, &sentences(9, 12, longest), &device).unwrap();
            let (ids, mask) = (batch.input_ids.clone(), batch.attention_mask.clone());
            let [b, t] = ids.dims();
            let h = config.hidden_size;
            let w: Vec<f32> = (0..b * t * h).map(|i| (i as f32 * 0.37).cos()).collect();
            let w = Tensor::<Ad, 3>::from_data(TensorData::new(w, [b, t, h]), &device)
                * mask.clone().unsqueeze_dim::<3>(2);
            let run = |hidden: Tensor<Ad, 3>| {
                let real = hidden.clone() * mask.clone().unsqueeze_dim::<3>(2);
                let grads = (hidden * w.clone()).sum().backward();
                let mut g = Grads {
                    grads: &grads,
                    out: Vec::new(),
                };
                model.visit(&mut g);
                let real: Tensor<Ad, 2> = real.reshape([b * t, h]);
                (real.into_data().to_vec::<f32>().unwrap(), g.out)
            };
            let (a, ga) = run(model
                .forward_fused_ops(ids.clone(), &mask)
                .expect("the fused operations serve the CPU autodiff backend"));
            let (c, gc) = run(model.forward_generic(ids.clone(), mask.clone()));
            assert!(max_diff(&a, &c) <= 1e-5, "hidden: {}", max_diff(&a, &c));
            assert_eq!(ga.len(), gc.len());
            assert!(
                ga.len() >= 16,
                "every parameter has a gradient: {}",
                ga.len()
            );
            for ((ia, x), (ic, y)) in ga.iter().zip(&gc) {
                assert_eq!(ia, ic);
                // Relative to the largest gradient of the parameter (at least 0.01: the
                // smallest gradients are sums of rounding-sized terms).
                let scale = y.iter().fold(1e-2f32, |m, v| m.max(v.abs()));
                assert!(
                    max_diff(x, y) <= 1e-4 * scale,
                    "{ia}: {} (scale {scale})",
                    max_diff(x, y)
                );
            }
            // `forward` takes the fused operations on this backend.
            let (f, _) = run(model.forward(ids, mask.clone()));
            assert_eq!(f, a);
        }
    }

    #[test]
    fn a_sentence_gets_the_same_bits_in_any_batch_on_the_cpu_path() {
        let device = Default::default();
        let model = wider_config(HiddenAct::Gelu).init::<B>(&device);
        // 40 sentences of 1 to 31 tokens: 40 × 31 rows, so the GEMMs run split in parallel
        // blocks, where one sentence alone runs as one small product.
        let all = sentences(40, 97, 31);
        let together = values(model.embed(&BertBatch::new(&model, &all, &device).unwrap(), true));
        let h = 64;
        for (i, sentence) in all.iter().enumerate() {
            let alone = values(model.embed(
                &BertBatch::new(&model, std::slice::from_ref(sentence), &device).unwrap(),
                true,
            ));
            let bits = |v: &[f32]| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
            assert_eq!(
                bits(&alone),
                bits(&together[i * h..(i + 1) * h]),
                "sentence {i} ({} tokens) changed with its batch",
                sentence.len()
            );
        }
        // Reversed, in other company and with other padding: still the same bits.
        let reversed: Vec<Vec<u32>> = all.iter().rev().take(7).cloned().collect();
        let some = values(model.embed(&BertBatch::new(&model, &reversed, &device).unwrap(), true));
        assert_eq!(some[..h], together[39 * h..40 * h]);
    }

    #[test]
    fn mean_pool_counts_only_real_tokens_and_normalize_gives_unit_rows() {
        let device = Default::default();
        let hidden =
            Tensor::<B, 3>::from_floats([[[1.0, 2.0], [3.0, 4.0], [100.0, 100.0]]], &device);
        let mask = Tensor::<B, 2>::from_floats([[1.0, 1.0, 0.0]], &device);
        assert_eq!(values(mean_pool(hidden, mask.clone())), vec![2.0, 3.0]);
        let unit = values(l2_normalize(Tensor::from_floats(
            [[3.0, 4.0], [0.0, 0.0]],
            &device,
        )));
        assert_eq!(unit, vec![0.6, 0.8, 0.0, 0.0]);
    }

    #[test]
    fn batches_refuse_what_would_index_out_of_bounds() {
        let device = Default::default();
        let model = tiny_config().init::<B>(&device);
        let too_long = vec![1u32; 13];
        let err = BertBatch::new(&model, &[too_long], &device).unwrap_err();
        assert!(err.to_string().contains("12 positions"), "{err}");
        let err = BertBatch::new(&model, &[vec![1, 50]], &device).unwrap_err();
        assert!(err.to_string().contains("token id 50"), "{err}");
        assert!(BertBatch::new(&model, &[], &device).is_err());
    }

    #[test]
    fn weights_round_trip_through_hf_names_and_refuse_strangers() {
        use burn::store::BurnToPyTorchAdapter;
        let device = Default::default();
        let config = tiny_config();
        let model = config.init::<B>(&device);
        // Save with HF names (the inverse remapping and adapter) plus a pooler and the
        // position_ids buffer the loader must skip.
        let mut out = SafetensorsStore::from_bytes(None)
            .with_to_adapter(BurnToPyTorchAdapter)
            .with_key_remapping(r"\.self_attention\.", ".self.")
            .with_key_remapping(r"layer_norm", "LayerNorm");
        model.save_into(&mut out).unwrap();
        let bytes = out.get_bytes().unwrap();
        let names = SafetensorsStore::from_bytes(Some(bytes.clone()))
            .keys()
            .unwrap();
        assert!(names.contains(&"encoder.layer.1.attention.self.query.weight".to_string()));
        assert!(names.contains(&"embeddings.LayerNorm.weight".to_string()));

        let loaded = load_bert::<B>(
            &config,
            SafetensorsSource::Bytes {
                name: "test".into(),
                bytes: bytes.clone(),
            },
            &device,
        )
        .unwrap();
        let batch = BertBatch::new(&model, &[vec![1, 4, 2]], &device).unwrap();
        assert_eq!(
            values(model.embed(&batch, true)),
            values(loaded.embed(&batch, true))
        );

        let smaller = BertConfig {
            num_hidden_layers: 1,
            ..config.clone()
        };
        let err = load_bert::<B>(
            &smaller,
            SafetensorsSource::Bytes {
                name: "test".into(),
                bytes,
            },
            &device,
        )
        .unwrap_err();
        assert!(err.to_string().contains("encoder.layer.1"), "{err}");
    }

    #[test]
    fn a_word_table_in_blocks_gives_the_same_bits() {
        use burn::store::BurnToPyTorchAdapter;
        let device = Default::default();
        let config = tiny_config();
        assert_eq!(config.word_block_rows(None), None);
        assert_eq!(config.word_block_rows(Some(50 * 16 * 4)), None);
        assert_eq!(config.word_block_rows(Some(20 * 16 * 4 + 3)), Some(20));
        assert_eq!(word_block_sizes(50, Some(20)), [20, 20, 10]);
        assert_eq!(word_block_sizes(50, None), [50]);
        let model = config.init::<B>(&device);
        let mut out = SafetensorsStore::from_bytes(None)
            .with_to_adapter(BurnToPyTorchAdapter)
            .with_key_remapping(r"\.self_attention\.", ".self.")
            .with_key_remapping(r"layer_norm", "LayerNorm");
        model.save_into(&mut out).unwrap();
        let bytes = out.get_bytes().unwrap();
        let source = || SafetensorsSource::Bytes {
            name: "test".into(),
            bytes: bytes.clone(),
        };
        let whole = load_bert::<B>(&config, source(), &device).unwrap();
        let blocks = load_bert_in_blocks::<B>(&config, source(), &device, Some(20)).unwrap();
        assert!(whole.embeddings.word_blocks.is_empty());
        let rows: Vec<usize> = std::iter::once(&blocks.embeddings.word_embeddings)
            .chain(&blocks.embeddings.word_blocks)
            .map(|e| e.weight.val().dims()[0])
            .collect();
        assert_eq!(rows, [20, 20, 10]);
        // Ids from every block, the first and last row of each included.
        let batch = BertBatch::new(
            &whole,
            &[vec![0, 19, 20, 39, 40, 49], vec![7, 33, 45]],
            &device,
        )
        .unwrap();
        // Blocks exist for devices with small buffers, which take the generic path; both
        // models take it here (on the CPU, `embed` would run the whole table on the host).
        let generic = |m: &Bert<B>| {
            let (ids, mask) = (batch.input_ids.clone(), batch.attention_mask.clone());
            values(mean_pool(m.forward_generic(ids, mask.clone()), mask))
        };
        let (a, b) = (generic(&whole), generic(&blocks));
        assert_eq!(
            a.iter().map(|v| v.to_bits()).collect::<Vec<_>>(),
            b.iter().map(|v| v.to_bits()).collect::<Vec<_>>()
        );
    }
}
