//! A transformer sentence encoder: multilingual USE's shared encoder (Chidambaram et al.
//! 2019, §3.1 "Transformer Encoder": stacked transformer sub-networks "each containing the
//! feedforward and multi-head attention sub-layers described in Vaswani et al. (2017)", and
//! "we average encodings of all sequence positions in the final layer"), recipe kind
//! `transformer`.
//!
//! Layout, exactly (USE was built with tensor2tensor, whose transformer is pre-norm: layer
//! normalisation before each sub-layer and once more after the stack). It equals PyTorch's
//! `nn.TransformerEncoder(nn.TransformerEncoderLayer(d_model, nhead, d_ff, dropout,
//! activation="relu", batch_first=True, norm_first=True), layers, norm=nn.LayerNorm(d_model))`
//! (LayerNorm ε = 1e-5), which `scripts/make_transformer_fixture.py` checks numerically
//! (`tests/transformer_parity.rs`):
//!
//! ```text
//! x₀ = Dropout(√d_model · P(E(tokens)) + PE)          input layer (below)
//! for each layer:
//!     x = x + Dropout(SelfAttention(LN₁(x), key padding mask))
//!     x = x + Dropout(W₂ · Dropout(relu(W₁ · LN₂(x) + b₁)) + b₂)
//! states = LN(x), zero at padded positions;  sentence = pool(states) (`mean` by default)
//! ```
//!
//! - `E`: the shared input layer ([`embed_tokens`]: word embeddings, averaged with
//!   tanh(Σ char n-gram embeddings) when the tokenizer gives n-grams, USE §2.1/§3.1).
//! - `P`: a linear projection embed → d_model when the recipe's `embed` differs from
//!   `d_model` (the paper's embeddings are 320 wide, its transformer 512); else none.
//! - `√d_model`: the embeddings are scaled by √d_model as in Vaswani et al. §3.4 (and
//!   tensor2tensor's default `multiply_embedding_mode: sqrt_depth`): with harness's U(−0.1,
//!   0.1) initialisation the token vectors would otherwise be ~10× smaller than the position
//!   encodings, which would drown them.
//! - `PE`: fixed sinusoidal position encodings (Vaswani et al. §3.5): dimension 2i of
//!   position p is sin(p / 10000^(2i/d_model)), dimension 2i+1 is cos of the same angle.
//! - Self-attention: one fused QKV projection d → 3d (the rows of PyTorch's
//!   `in_proj_weight [3d, d]`: queries, keys, values), split into heads, scores scaled by
//!   1/√d_head, padded keys masked, softmax, dropout on the attention probabilities, the
//!   heads concatenated and projected by `out_proj`.
//! - Inputs longer than `max_len` tokens are clipped to their first `max_len` (training clips
//!   them earlier, when tokenizing; this keeps encoding of longer inputs in range).
//!
//! Written by hand rather than with `burn::nn::transformer` for two reasons: every dropout
//! here draws from harness's seeded [`Noise`] (exact resume, `crate::random`), which burn's
//! `Dropout` modules cannot; and the fused QKV weight keeps PyTorch's `in_proj` layout, so
//! the parity fixture loads PyTorch's weights by name.
//!
//! Initialisation: `System::init` draws every float parameter from U(−0.1, 0.1) (seeded
//! ChaCha stream, `crate::random::init_uniform`), linear and embedding weights included; the
//! LayerNorm gains and biases are then reset to 1 and 0 ([`TransformerEncoder::reset_norms`]),
//! the identity they start from in every transformer.

use crate::encoder::char_ngrams::{embed_tokens, CharNgrams, CharNgramsConfig};
use crate::encoder::encoded::Encoded;
use crate::encoder::pool::pool;
use crate::fused;
use crate::fused::relu::relu;
use crate::fused::reshape::reshape;
use crate::input::Padded;
use crate::random::{dropout_drawn, mask_on, Axis::*, Noise};
use burn::module::{Module, Param};
use burn::nn::{Embedding, EmbeddingConfig, LayerNorm, LayerNormConfig, Linear, LinearConfig};
use burn::tensor::backend::Backend;
use burn::tensor::{Tensor, TensorData};
use harness_recipe::schema::{self, Pool};

/// What a padded key adds to its attention score before the softmax: exp(−10⁴ + s) is 0 in
/// f32 for any score a real key has, and a row whose keys are all padding (an empty
/// sentence) stays finite (uniform) instead of NaN, as it would with −∞. (−10⁴ also fits
/// f16.)
const MASKED: f32 = fused::attention::MASKED;

/// LayerNorm ε (PyTorch's and tensor2tensor's default).
const EPSILON: f64 = 1e-5;

/// Configuration of a [`TransformerEncoder`].
#[derive(Debug, Clone, PartialEq)]
pub struct TransformerEncoderConfig {
    /// Vocabulary size.
    pub n_vocab: usize,
    /// Token embedding size (word and n-gram embeddings).
    pub d_embed: usize,
    /// Model width.
    pub d_model: usize,
    /// Inner size of the feed-forward sub-layer.
    pub d_ff: usize,
    /// Attention heads (dividing `d_model`).
    pub heads: usize,
    /// Stacked layers.
    pub layers: usize,
    /// Pooling.
    pub pool: Pool,
    /// Dropout (embeddings, attention probabilities, sub-layer outputs, feed-forward inner).
    pub dropout: f64,
    /// Longest input in tokens; longer inputs are clipped.
    pub max_len: usize,
    /// Hash buckets of the tokenizer's character n-grams, when it gives them.
    pub ngram_buckets: Option<usize>,
}

impl TransformerEncoderConfig {
    /// The configuration a recipe's `transformer` block describes (its own `dropout`).
    pub fn from_recipe(n_vocab: usize, e: &schema::TransformerEncoder) -> Self {
        let d_model = e.d_model as usize;
        TransformerEncoderConfig {
            n_vocab,
            d_embed: e.embed.map_or(d_model, |d| d as usize),
            d_model,
            d_ff: e.d_ff as usize,
            heads: e.heads as usize,
            layers: e.layers as usize,
            pool: e.pool,
            dropout: e.dropout,
            max_len: e.max_len as usize,
            ngram_buckets: None,
        }
    }

    /// Whether the input layer is followed by a projection to `d_model`.
    pub fn projects(&self) -> bool {
        self.d_embed != self.d_model
    }

    /// Builds the encoder (LayerNorms at 1 and 0; the rest to be initialised by the caller).
    ///
    /// Panics when `heads` does not divide `d_model` (the recipe check refuses such a
    /// recipe first).
    pub fn init<B: Backend>(&self, device: &B::Device) -> TransformerEncoder<B> {
        assert!(
            self.heads > 0 && self.d_model.is_multiple_of(self.heads),
            "d_model ({}) must be divisible by heads ({})",
            self.d_model,
            self.heads
        );
        let d = self.d_model;
        let norm = || LayerNormConfig::new(d).with_epsilon(EPSILON).init(device);
        TransformerEncoder {
            embedding: EmbeddingConfig::new(self.n_vocab, self.d_embed).init(device),
            ngrams: CharNgramsConfig::init_for(self.ngram_buckets, self.d_embed, device),
            projection: self
                .projects()
                .then(|| LinearConfig::new(self.d_embed, d).init(device)),
            layers: (0..self.layers)
                .map(|_| EncoderLayer {
                    self_attn: SelfAttention {
                        in_proj: LinearConfig::new(d, 3 * d).init(device),
                        out_proj: LinearConfig::new(d, d).init(device),
                    },
                    linear1: LinearConfig::new(d, self.d_ff).init(device),
                    linear2: LinearConfig::new(self.d_ff, d).init(device),
                    norm1: norm(),
                    norm2: norm(),
                })
                .collect(),
            norm: norm(),
            d_model: d,
            heads: self.heads,
            max_len: self.max_len,
            pool: self.pool,
            dropout: self.dropout,
            fused: true,
        }
    }
}

/// The transformer encoder (module doc). Parameter names follow PyTorch's
/// `nn.TransformerEncoder` (`layers.{i}.self_attn.in_proj`, `…linear1`, `…norm1`, `norm`),
/// with burn's layouts (Linear weights `[d_in, d_out]`, LayerNorm `gamma`/`beta`).
#[derive(Module, Debug)]
pub struct TransformerEncoder<B: Backend> {
    /// Token embeddings `[n_vocab, d_embed]`.
    pub embedding: Embedding<B>,
    /// Character n-gram embeddings, with a tokenizer that gives n-grams.
    pub ngrams: Option<CharNgrams<B>>,
    /// embed → d_model, when they differ.
    pub projection: Option<Linear<B>>,
    /// The stacked layers, bottom first.
    pub layers: Vec<EncoderLayer<B>>,
    /// The final LayerNorm.
    pub norm: LayerNorm<B>,
    /// Model width.
    pub d_model: usize,
    /// Attention heads.
    pub heads: usize,
    /// Longest input in tokens.
    pub max_len: usize,
    /// Pooling.
    #[module(skip)]
    pub pool: Pool,
    /// Dropout (training only).
    pub dropout: f64,
    /// Whether attention takes the fused CPU path where the backend has it (always, but for
    /// the tests that compare it with the generic path).
    #[module(skip)]
    pub fused: bool,
}

/// One pre-norm layer: self-attention and feed-forward sub-layers, each with its LayerNorm
/// in front and a residual connection around.
#[derive(Module, Debug)]
pub struct EncoderLayer<B: Backend> {
    /// Multi-head self-attention.
    pub self_attn: SelfAttention<B>,
    /// d_model → d_ff.
    pub linear1: Linear<B>,
    /// d_ff → d_model.
    pub linear2: Linear<B>,
    /// Before the attention.
    pub norm1: LayerNorm<B>,
    /// Before the feed-forward.
    pub norm2: LayerNorm<B>,
}

/// Multi-head self-attention with a fused QKV projection.
#[derive(Module, Debug)]
pub struct SelfAttention<B: Backend> {
    /// d → 3d: queries, keys and values (PyTorch's `in_proj_weight`, transposed).
    pub in_proj: Linear<B>,
    /// The concatenated heads → d.
    pub out_proj: Linear<B>,
}

/// The attention's key mask, in the form each path needs.
struct Keys<B: Backend> {
    /// `[batch, 1, 1, time]`: 0 at real keys and [`MASKED`] at padded ones (generic path).
    bias: Tensor<B, 4>,
    /// `[batch·time]` on the host, 1 at real keys: the fused CPU path
    /// ([`crate::fused::attention`]), where the backend has it.
    host: Option<Vec<f32>>,
}

impl<B: Backend> SelfAttention<B> {
    /// `x: [batch, time, d]`. `drawn`: the attention weights' dropout mask where the caller
    /// has drawn it already (`Some(None)`: there is none); `None`: drawn here.
    fn forward(
        &self,
        x: Tensor<B, 3>,
        keys: &Keys<B>,
        heads: usize,
        noise: &mut Option<&mut Noise>,
        p: f64,
        drawn: Option<Option<Tensor<B, 4>>>,
    ) -> Tensor<B, 3> {
        let [batch, time, d] = x.dims();
        let qkv = fused::linear::linear(&self.in_proj, reshape(x, [batch * time, d]));
        let qkv = match &keys.host {
            Some(mask) => {
                let shape = fused::attention::Shape {
                    batch,
                    time,
                    heads,
                    d,
                };
                match fused::attention::fused_attention(qkv, mask, shape, noise, p) {
                    Ok(context) => {
                        return linear_rows(&self.out_proj, reshape(context, [batch, time, d]))
                    }
                    Err(qkv) => qkv,
                }
            }
            None => qkv,
        };
        let d_head = d / heads;
        // [batch, time, 3d] → [3, batch, heads, time, d_head] in one reshape and permute.
        let qkv = qkv
            .reshape([batch, time, 3, heads, d_head])
            .permute([2, 0, 3, 1, 4]);
        let part = |i: usize| {
            qkv.clone()
                .slice([i..i + 1, 0..batch, 0..heads, 0..time, 0..d_head])
                .reshape([batch, heads, time, d_head])
        };
        let (q, k, v) = (part(0), part(1), part(2));
        let scores = crate::precision::matmul(q, k.swap_dims(2, 3))
            * (1.0 / (d_head as f64).sqrt())
            + keys.bias.clone();
        let probs = fused::device_nodes::softmax(scores);
        let probs = dropout_drawn(noise, probs, p, [Rows, Other, Time, Time], drawn);
        let context = crate::precision::matmul(probs, v) // [batch, heads, time, d_head]
            .swap_dims(1, 2)
            .reshape([batch, time, d]);
        linear_rows(&self.out_proj, context)
    }
}

/// `linear` applied to `x: [batch, time, d_in]` as one `[batch·time, d_in]` matrix: the
/// same values, through the fused CPU layer ([`crate::fused::linear`]) where the backend has
/// it (burn-ndarray's matmul copies its transposed operands in the backward pass), and
/// reshaped without copies ([`crate::fused::reshape`]).
fn linear_rows<B: Backend>(linear: &Linear<B>, x: Tensor<B, 3>) -> Tensor<B, 3> {
    let [batch, time, d_in] = x.dims();
    let y = fused::linear::linear(linear, reshape(x, [batch * time, d_in]));
    let [_, d_out] = y.dims();
    reshape(y, [batch, time, d_out])
}

/// `norm` applied to `x: [batch, time, d]` as one `[batch·time, d]` matrix, through the
/// fused CPU operation ([`crate::fused::layer_norm`]) where the backend has it.
fn norm_rows<B: Backend>(norm: &LayerNorm<B>, x: Tensor<B, 3>) -> Tensor<B, 3> {
    let [batch, time, d] = x.dims();
    let y = fused::layer_norm::layer_norm(norm, reshape(x, [batch * time, d]), EPSILON);
    reshape(y, [batch, time, d])
}

impl<B: Backend> EncoderLayer<B> {
    fn forward(
        &self,
        x: Tensor<B, 3>,
        keys: &Keys<B>,
        heads: usize,
        noise: &mut Option<&mut Noise>,
        p: f64,
    ) -> Tensor<B, 3> {
        self.forward_with(x, keys, heads, noise, p, crate::gpu::on_device::<B>())
    }

    /// [`Self::forward`]; with `masks_first` (on a GPU) the layer's four dropout masks are
    /// drawn and uploaded before its arithmetic, in the order they are drawn where they are
    /// used (nothing else draws in between: the same masks). Why: on a GPU an upload queued
    /// between an operation and the multiply by its mask ends burn's fusion there, and each
    /// multiply ran as a launch of its own.
    fn forward_with(
        &self,
        x: Tensor<B, 3>,
        keys: &Keys<B>,
        heads: usize,
        noise: &mut Option<&mut Noise>,
        p: f64,
        masks_first: bool,
    ) -> Tensor<B, 3> {
        let [batch, time, d] = x.dims();
        let d_ff = self.linear1.weight.dims()[1];
        let device = x.device();
        let rows = [Rows, Time, Other];
        // `Some(mask)` drawn here, `None` drawn at its site.
        let first = |noise: &mut Option<&mut Noise>, dims: [usize; 3]| {
            masks_first.then(|| mask_on(noise, dims, p, rows, &device))
        };
        let probs = masks_first.then(|| {
            let axes = [Rows, Other, Time, Time];
            mask_on(noise, [batch, heads, time, time], p, axes, &device)
        });
        let attended = first(noise, [batch, time, d]);
        let hidden = first(noise, [batch, time, d_ff]);
        let out = first(noise, [batch, time, d]);
        let dropped = |noise: &mut Option<&mut Noise>, x: Tensor<B, 3>, drawn| {
            dropout_drawn(noise, x, p, rows, drawn)
        };
        let a = self.self_attn.forward(
            norm_rows(&self.norm1, x.clone()),
            keys,
            heads,
            noise,
            p,
            probs,
        );
        let x = x + dropped(noise, a, attended);
        let h = relu(linear_rows(
            &self.linear1,
            norm_rows(&self.norm2, x.clone()),
        ));
        let h = linear_rows(&self.linear2, dropped(noise, h, hidden));
        x + dropped(noise, h, out)
    }
}

/// The sinusoidal position encodings of positions `0..time`, `[time, d]` (Vaswani et al.
/// §3.5), computed in f64 and rounded once.
pub fn positions(time: usize, d: usize) -> Vec<f32> {
    let mut table = Vec::with_capacity(time * d);
    for pos in 0..time {
        for j in 0..d {
            let i = (j / 2) as f64;
            let angle = pos as f64 / 10000f64.powf(2.0 * i / d as f64);
            table.push(if j % 2 == 0 { angle.sin() } else { angle.cos() } as f32);
        }
    }
    table
}

impl<B: Backend> TransformerEncoder<B> {
    /// The words of the noise stream a training pass over `rows` rows `width` wide draws
    /// ([`Self::forward`]): the input's mask, then per layer the attention weights', the
    /// two residual branches' and the feed-forward hidden layer's.
    pub fn noise_words(&self, rows: usize, width: usize) -> u64 {
        if self.dropout <= 0.0 {
            return 0;
        }
        let (t, d) = (width.min(self.max_len), self.d_model);
        let d_ff: usize = self
            .layers
            .first()
            .map_or(0, |l| l.linear1.weight.dims()[1]);
        let layer = self.heads * t * t + t * (2 * d + d_ff);
        (rows * (t * d + self.layers.len() * layer)) as u64
    }

    /// Encodes a padded batch (`noise`: dropout draws while training, `None` at inference).
    pub fn forward(&self, input: &Padded<B>, mut noise: Option<&mut Noise>) -> Encoded<B> {
        let p = self.dropout;
        let embedded = embed_tokens(&self.embedding, self.ngrams.as_ref(), input);
        let [batch, time, d_embed] = embedded.dims();
        // Clipped after the input layer, whose n-gram positions index the full grid.
        let (embedded, mask) = if time > self.max_len {
            (
                embedded.slice([0..batch, 0..self.max_len, 0..d_embed]),
                input.mask.clone().slice([0..batch, 0..self.max_len]),
            )
        } else {
            (embedded, input.mask.clone())
        };
        let time = time.min(self.max_len);
        let d = self.d_model;
        let device = embedded.device();
        // On a GPU the input's dropout mask and the position table are uploaded before the
        // arithmetic they enter (see `EncoderLayer::forward_with`).
        let on_device = crate::gpu::on_device::<B>();
        let early = on_device.then(|| {
            mask_on(
                &mut noise,
                [batch, time, d],
                p,
                [Rows, Time, Other],
                &device,
            )
        });
        let table =
            Tensor::<B, 2>::from_data(TensorData::new(positions(time, d), [time, d]), &device);
        let x = match &self.projection {
            Some(proj) => linear_rows(proj, embedded),
            None => embedded,
        };
        let x = x * (d as f64).sqrt() + table.unsqueeze::<3>();
        let mut x = dropout_drawn(&mut noise, x, p, [Rows, Time, Other], early);
        let keys = Keys {
            bias: (mask.clone() - 1.0)
                .mul_scalar(-MASKED)
                .reshape([batch, 1, 1, time]),
            // A split pass (`Noise::split`) draws the attention's masks per axis, which the
            // fused CPU attention does not.
            host: (self.fused
                && fused::attention::supported::<B>()
                && !noise.as_ref().is_some_and(|n| n.is_split()))
            .then(|| {
                mask.clone()
                    .into_data()
                    .convert::<f32>()
                    .into_vec::<f32>()
                    .expect("f32 mask")
            }),
        };
        for layer in &self.layers {
            x = layer.forward(x, &keys, self.heads, &mut noise, p);
        }
        let states = norm_rows(&self.norm, x) * mask.clone().unsqueeze_dim::<3>(2);
        let sentence = pool(self.pool, states.clone(), mask.clone(), Vec::new());
        Encoded {
            sentence,
            states,
            mask,
        }
    }

    /// The encoder with every LayerNorm at gain 1 and bias 0 (what `System::init` calls after
    /// its uniform draw, which covers these too). Deterministic; parameter ids and whether
    /// they take gradients are kept.
    pub fn reset_norms(mut self) -> Self {
        self.layers = self
            .layers
            .into_iter()
            .map(|mut l| {
                l.norm1 = reset_norm(l.norm1);
                l.norm2 = reset_norm(l.norm2);
                l
            })
            .collect();
        self.norm = reset_norm(self.norm);
        self
    }
}

fn reset_norm<B: Backend>(mut norm: LayerNorm<B>) -> LayerNorm<B> {
    norm.gamma = fill(norm.gamma, 1.0);
    norm.beta = norm.beta.map(|b| fill(b, 0.0));
    norm
}

fn fill<B: Backend, const D: usize>(param: Param<Tensor<B, D>>, value: f32) -> Param<Tensor<B, D>> {
    crate::random::replace_value(param, |t| Tensor::full(t.shape(), value, &t.device()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::input::pad;
    use burn::backend::NdArray;

    type B = NdArray<f32>;

    fn config() -> TransformerEncoderConfig {
        TransformerEncoderConfig {
            n_vocab: 20,
            d_embed: 8,
            d_model: 8,
            d_ff: 16,
            heads: 2,
            layers: 2,
            pool: Pool::Mean,
            dropout: 0.1,
            max_len: 16,
            ngram_buckets: None,
        }
    }

    fn encoder(c: &TransformerEncoderConfig, seed: u64) -> TransformerEncoder<B> {
        crate::random::init_uniform(c.init::<B>(&Default::default()), seed, 0.1).reset_norms()
    }

    fn values<const D: usize>(t: Tensor<B, D>) -> Vec<f32> {
        t.into_data().to_vec::<f32>().unwrap()
    }

    fn max_diff(a: &[f32], b: &[f32]) -> f32 {
        assert_eq!(a.len(), b.len());
        a.iter()
            .zip(b)
            .map(|(x, y)| (x - y).abs())
            .fold(0.0, f32::max)
    }

    #[test]
    fn a_sentence_encodes_the_same_alone_and_padded_in_a_batch() {
        let dev = Default::default();
        let enc = encoder(&config(), 3);
        let short = vec![4, 7, 9];
        let alone = enc.forward(&pad::<B>(std::slice::from_ref(&short), &dev), None);
        let batch = enc.forward(
            &pad::<B>(&[vec![5, 6, 7, 8, 9, 10, 11], short.clone()], &dev),
            None,
        );
        let a = values(alone.sentence);
        let b = values(batch.sentence.slice([1..2, 0..8]));
        assert!(max_diff(&a, &b) <= 1e-5, "{a:?} vs {b:?}");
        // Padded positions of the states are zero.
        let padded = values(batch.states.slice([1..2, 3..7, 0..8]));
        assert!(padded.iter().all(|&v| v == 0.0));
        // 16 wide: every column past the longest masked in every row (max_len 16 keeps
        // them all).
        let wide = crate::input::pad_to::<B>(&[vec![5, 6, 7, 8, 9, 10, 11], short], 16, &dev);
        let c = values(enc.forward(&wide, None).sentence.slice([1..2, 0..8]));
        assert!(max_diff(&a, &c) <= 1e-5, "{a:?} vs {c:?}");
    }

    #[test]
    fn mean_pooling_averages_the_real_states_only() {
        let dev = Default::default();
        let enc = encoder(&config(), 4);
        let out = enc.forward(&pad::<B>(&[vec![1, 2, 3, 4, 5], vec![6, 7]], &dev), None);
        let states = values(out.states.clone().slice([1..2, 0..2, 0..8]));
        let want: Vec<f32> = (0..8).map(|j| (states[j] + states[8 + j]) / 2.0).collect();
        let got = values(out.sentence.slice([1..2, 0..8]));
        assert!(max_diff(&got, &want) <= 1e-6, "{got:?} vs {want:?}");
    }

    #[test]
    fn the_same_seed_gives_the_same_weights_and_norms_start_at_identity() {
        let c = TransformerEncoderConfig {
            d_embed: 6,
            ..config()
        };
        let a = encoder(&c, 9);
        let b = encoder(&c, 9);
        let other = encoder(&c, 10);
        let qkv = |e: &TransformerEncoder<B>| values(e.layers[1].self_attn.in_proj.weight.val());
        assert_eq!(qkv(&a), qkv(&b));
        assert_ne!(qkv(&a), qkv(&other));
        let proj = |e: &TransformerEncoder<B>| values(e.projection.as_ref().unwrap().weight.val());
        assert_eq!(proj(&a), proj(&b));
        assert_eq!(a.layers[0].self_attn.in_proj.weight.dims(), [8, 24]);
        for norm in [&a.layers[0].norm1, &a.layers[1].norm2, &a.norm] {
            assert!(values(norm.gamma.val()).iter().all(|&v| v == 1.0));
            assert!(values(norm.beta.as_ref().unwrap().val())
                .iter()
                .all(|&v| v == 0.0));
        }
    }

    #[test]
    fn layer_norms_are_identity_after_system_init() {
        use crate::encoder::{SentenceEncoder, SentenceEncoderConfig};
        let system = crate::system::SystemConfig {
            encoders: vec![(
                "encoder".into(),
                SentenceEncoderConfig::Transformer(config()),
            )],
            decoder: None,
            heads: vec![],
            languages: Vec::new(),
            center_heads: Vec::new(),
        }
        .init::<B>(7, &Default::default());
        let SentenceEncoder::Transformer(e) = system.encoder() else {
            panic!("a transformer expected");
        };
        for l in &e.layers {
            for norm in [&l.norm1, &l.norm2] {
                assert!(values(norm.gamma.val()).iter().all(|&v| v == 1.0));
                assert!(values(norm.beta.as_ref().unwrap().val())
                    .iter()
                    .all(|&v| v == 0.0));
            }
        }
        assert!(values(e.norm.gamma.val()).iter().all(|&v| v == 1.0));
        // Everything else is the seeded uniform draw.
        let w = values(e.layers[0].linear1.weight.val());
        assert!(w.iter().all(|v| v.abs() < 0.1) && w.iter().any(|v| v.abs() > 0.01));
    }

    #[test]
    fn inputs_longer_than_max_len_are_clipped() {
        let dev = Default::default();
        let c = TransformerEncoderConfig {
            max_len: 4,
            ..config()
        };
        let enc = encoder(&c, 5);
        let long: Vec<u32> = (1..=9).collect();
        let out = enc.forward(&pad::<B>(&[long.clone(), vec![2, 3]], &dev), None);
        assert_eq!(out.states.dims(), [2, 4, 8]);
        assert_eq!(out.mask.dims(), [2, 4]);
        let clipped = enc.forward(&pad::<B>(&[long[..4].to_vec()], &dev), None);
        let a = values(out.sentence.slice([0..1, 0..8]));
        assert!(max_diff(&a, &values(clipped.sentence)) <= 1e-6);
    }

    #[test]
    fn dropout_draws_from_the_seeded_noise() {
        let dev = Default::default();
        let enc = encoder(&config(), 6);
        let input = pad::<B>(&[vec![1, 2, 3], vec![4, 5]], &dev);
        let run = |stream| {
            values(
                enc.forward(&input, Some(&mut Noise::new(1, stream)))
                    .sentence,
            )
        };
        assert_eq!(run(0), run(0));
        assert_ne!(run(0), run(1));
        assert_ne!(run(0), values(enc.forward(&input, None).sentence));
    }

    /// A GPU layer draws its four masks before its arithmetic: the same masks in the same
    /// order as drawing each where it is used, so the same output and the stream after.
    #[test]
    fn a_layer_with_its_masks_drawn_first_is_the_same_layer() {
        let dev = Default::default();
        let enc = encoder(&config(), 7);
        let (batch, time, d) = (2, 5, 8);
        let x = Tensor::<B, 3>::from_data(
            TensorData::new(
                (0..batch * time * d)
                    .map(|i| (i as f32 * 0.37).sin())
                    .collect(),
                [batch, time, d],
            ),
            &dev,
        );
        let mask = Tensor::<B, 2>::from_data(
            TensorData::new(
                vec![1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 0.0, 0.0],
                [2, 5],
            ),
            &dev,
        );
        // The generic attention (no host mask), which the GPU runs.
        let keys = Keys {
            bias: (mask - 1.0)
                .mul_scalar(-MASKED)
                .reshape([batch, 1, 1, time]),
            host: None,
        };
        let layer = &enc.layers[0];
        for p in [0.0, 0.3] {
            let (mut a, mut b) = (Noise::new(5, 0), Noise::new(5, 0));
            let own = layer.forward_with(x.clone(), &keys, 2, &mut Some(&mut a), p, false);
            let first = layer.forward_with(x.clone(), &keys, 2, &mut Some(&mut b), p, true);
            assert_eq!(values(own), values(first), "p {p}");
            assert_eq!(
                a.below(1 << 30),
                b.below(1 << 30),
                "p {p}: the stream after"
            );
        }
    }

    #[test]
    fn fused_attention_equals_the_generic_path_with_gradients() {
        use burn::backend::Autodiff;
        use burn::module::{ModuleVisitor, Param, ParamId};
        type Ad = Autodiff<B>;
        let dev = Default::default();
        let c = TransformerEncoderConfig {
            d_model: 12,
            d_embed: 12,
            d_ff: 16,
            heads: 3,
            ..config()
        };
        let fused = crate::random::init_uniform(c.init::<Ad>(&dev), 11, 0.3).reset_norms();
        assert!(fused.fused);
        let generic = TransformerEncoder {
            fused: false,
            ..fused.clone()
        };
        let input = pad::<Ad>(&[vec![1, 2, 3, 4, 5, 6], vec![7, 8], vec![9, 10, 11]], &dev);
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
        // With dropout (the same noise stream on both paths) and without.
        for noisy in [true, false] {
            let run = |e: &TransformerEncoder<Ad>| {
                let mut noise = Noise::new(5, 2);
                let out = e.forward(&input, noisy.then_some(&mut noise));
                let w: Vec<f32> = (0..3 * 12).map(|i| (i as f32 * 0.7).cos()).collect();
                let w = Tensor::<Ad, 2>::from_data(TensorData::new(w, [3, 12]), &dev);
                let loss = (out.sentence.clone() * w).sum();
                let grads = loss.backward();
                let mut g = Grads {
                    grads: &grads,
                    out: Vec::new(),
                };
                e.visit(&mut g);
                (out.sentence.into_data().to_vec::<f32>().unwrap(), g.out)
            };
            let (a, ga) = run(&fused);
            let (b, gb) = run(&generic);
            assert!(max_diff(&a, &b) <= 1e-5, "{a:?} vs {b:?}");
            assert_eq!(ga.len(), gb.len());
            assert!(ga.len() >= 10, "every parameter has a gradient");
            for ((ia, x), (ib, y)) in ga.iter().zip(&gb) {
                assert_eq!(ia, ib);
                let scale = y.iter().fold(1e-3f32, |m, v| m.max(v.abs()));
                assert!(
                    max_diff(x, y) <= 1e-4 * scale,
                    "{ia}: {} (scale {scale})",
                    max_diff(x, y)
                );
            }
        }
    }

    #[test]
    fn position_encodings_alternate_sin_and_cos() {
        let t = positions(3, 4);
        // Position 0: sin 0, cos 0, sin 0, cos 0.
        assert_eq!(&t[..4], &[0.0, 1.0, 0.0, 1.0]);
        // Position 2, dims 2 and 3: angle 2 / 10000^(2/4) = 0.02.
        assert!((t[10] - 0.02f32.sin()).abs() < 1e-7);
        assert!((t[11] - 0.02f32.cos()).abs() < 1e-7);
    }
}
