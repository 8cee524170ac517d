//! Stacked (Bi)LSTM sentence encoder with padding-aware pooling.
//!
//! - LASER (Artetxe & Schwenk 2019, §3): token embeddings (320) → 1–5 BiLSTM layers (512
//!   per direction) → max-pool over time → a 1024-d sentence vector. Recipe kind `bilstm`.
//! - seq2seq + similarity (Yu et al. 2018, §2): a bidirectional first layer, unidirectional
//!   layers above it, the top one possibly wider (`top_hidden`), mean-pooled. Recipe kind
//!   `lstm`.
//! - XNLI's X-BiLSTM: `pool: last` (final forward state ⊕ final backward state).
//!
//! Padding never reaches a real position (see `model/lstm.rs`), pooling ignores it (max:
//! padded positions are −∞; mean: divided by the real length; last: the masked final
//! states), so a sentence's vector does not depend on what it is batched with (tested).
//! Callers append `</s>` to every input, as LASER does, so no sentence is empty.

use crate::encoder::char_ngrams::{embed_tokens, CharNgrams, CharNgramsConfig};
use crate::encoder::encoded::Encoded;
use crate::encoder::pool::pool;
use crate::input::Padded;
use crate::lstm::{MaskedLstm, MaskedLstmConfig};
use crate::random::{dropout_on, Axis::*, Noise};
use burn::config::Config;
use burn::module::Module;
use burn::nn::{Embedding, EmbeddingConfig};
use burn::tensor::backend::Backend;
use burn::tensor::Tensor;
use harness_recipe::schema::{self, Pool};

/// One layer of the stack.
#[derive(Config, Debug, PartialEq)]
pub struct LayerSpec {
    /// Hidden size per direction.
    pub d_hidden: usize,
    /// Run a reverse direction beside the forward one (outputs concatenated).
    pub bidirectional: bool,
}

/// Configuration of a [`BilstmEncoder`].
#[derive(Config, Debug)]
pub struct BilstmEncoderConfig {
    /// Vocabulary size.
    pub n_vocab: usize,
    /// Token embedding size.
    pub d_embed: usize,
    /// Layers, bottom first.
    pub layers: Vec<LayerSpec>,
    /// Pooling: `max`, `mean`, `last` or `cls` (see [`Pool`]).
    pub pool: Pool,
    /// Dropout on the embeddings and between layers (training only).
    #[config(default = 0.0)]
    pub dropout: f64,
    /// Hash buckets of the tokenizer's character n-grams, when it gives them.
    #[config(default = "None")]
    pub ngram_buckets: Option<usize>,
}

/// The encoder: embeddings, the layer stack, pooling.
#[derive(Module, Debug)]
pub struct BilstmEncoder<B: Backend> {
    /// Token embeddings.
    pub embedding: Embedding<B>,
    /// Character n-gram embeddings, with a tokenizer that gives n-grams (`None` in
    /// checkpoints written before input kinds existed, which load unchanged).
    pub ngrams: Option<CharNgrams<B>>,
    /// Forward direction of each layer.
    pub forward: Vec<MaskedLstm<B>>,
    /// Reverse direction of each bidirectional layer (`None` for unidirectional ones).
    pub reverse: Vec<Option<MaskedLstm<B>>>,
    /// Pooling.
    #[module(skip)]
    pub pool: Pool,
    /// Dropout probability.
    pub dropout: f64,
}

impl BilstmEncoderConfig {
    /// The configuration a recipe's `bilstm` encoder block describes.
    pub fn from_bilstm(n_vocab: usize, e: &schema::BilstmEncoder) -> Self {
        let layers = (0..e.layers)
            .map(|_| LayerSpec::new(e.hidden as usize, true))
            .collect();
        BilstmEncoderConfig::new(n_vocab, e.embed as usize, layers, e.pool).with_dropout(e.dropout)
    }

    /// The configuration a recipe's `lstm` encoder block describes.
    pub fn from_lstm(n_vocab: usize, e: &schema::LstmEncoder) -> Self {
        let n = e.layers.max(1) as usize;
        let layers = (0..n)
            .map(|i| {
                let top = i + 1 == n;
                let hidden = if top {
                    e.top_hidden.unwrap_or(e.hidden)
                } else {
                    e.hidden
                };
                LayerSpec::new(hidden as usize, i == 0 && e.bidirectional_first)
            })
            .collect();
        BilstmEncoderConfig::new(n_vocab, e.embed as usize, layers, e.pool).with_dropout(e.dropout)
    }

    /// Size of the sentence vector.
    pub fn d_sentence(&self) -> usize {
        self.layers.last().map_or(self.d_embed, |l| {
            l.d_hidden * if l.bidirectional { 2 } else { 1 }
        })
    }

    /// Builds the encoder.
    pub fn init<B: Backend>(&self, device: &B::Device) -> BilstmEncoder<B> {
        let mut d_in = self.d_embed;
        let mut forward = Vec::new();
        let mut reverse = Vec::new();
        for l in &self.layers {
            forward.push(MaskedLstmConfig::new(d_in, l.d_hidden).init(device));
            reverse.push(l.bidirectional.then(|| {
                MaskedLstmConfig::new(d_in, l.d_hidden)
                    .with_reverse(true)
                    .init(device)
            }));
            d_in = l.d_hidden * if l.bidirectional { 2 } else { 1 };
        }
        BilstmEncoder {
            embedding: EmbeddingConfig::new(self.n_vocab, self.d_embed).init(device),
            ngrams: CharNgramsConfig::init_for(self.ngram_buckets, self.d_embed, device),
            forward,
            reverse,
            pool: self.pool,
            dropout: self.dropout,
        }
    }
}

impl<B: Backend> BilstmEncoder<B> {
    /// The words of the noise stream a training pass over `rows` rows `width` wide draws:
    /// the embeddings' mask and each layer's but the last's ([`Self::forward`]).
    pub fn noise_words(&self, rows: usize, width: usize) -> u64 {
        if self.dropout <= 0.0 {
            return 0;
        }
        let [_, embed] = self.embedding.weight.dims();
        let layers = self.forward.len();
        let between: usize = (self.forward.iter().zip(&self.reverse))
            .take(layers.saturating_sub(1))
            .map(|(f, r)| f.d_hidden * (1 + usize::from(r.is_some())))
            .sum();
        ((rows * width) * (embed + between)) as u64
    }

    /// The sentence vectors of a padded batch at inference: `forward(input, None).sentence`,
    /// the same bits, computed on host arrays end to end when the backend is burn-ndarray and
    /// the pooling `max` ([`crate::fused::lstm_stack`]: no tensor copies between layers).
    pub fn encode(&self, input: &Padded<B>) -> Tensor<B, 2> {
        if self.pool == Pool::Max && crate::fused::lstm_stack::supported::<B>() {
            let layers = self
                .forward
                .iter()
                .zip(&self.reverse)
                .map(|(f, r)| std::iter::once(f).chain(r).map(direction).collect())
                .collect();
            let tokens = embed_tokens(&self.embedding, self.ngrams.as_ref(), input);
            if let Some(s) =
                crate::fused::lstm_stack::max_pooled(tokens, input.mask.clone(), layers)
            {
                return s;
            }
        }
        self.forward(input, None).sentence
    }

    /// Encodes a padded batch.
    pub fn forward(&self, input: &Padded<B>, mut noise: Option<&mut Noise>) -> Encoded<B> {
        let [_, time] = input.ids.dims();
        let mask = input.mask.clone();
        let tokens = embed_tokens(&self.embedding, self.ngrams.as_ref(), input);
        let embedded = dropout_on(&mut noise, tokens, self.dropout, [Rows, Time, Other]);
        // Time-major through the layers: each layer is one fused operation over the sequence.
        let mask_tm = mask.clone().swap_dims(0, 1);
        let mut x = embedded.swap_dims(0, 1);
        let mut finals: Vec<Tensor<B, 2>> = Vec::new();
        let n = self.forward.len();
        // The final state of a direction: its last step, or its first for the reverse one.
        let last = |hs: &Tensor<B, 3>, step: usize| {
            let [_, b, h] = hs.dims();
            hs.clone()
                .slice([step..step + 1, 0..b, 0..h])
                .reshape([b, h])
        };
        for (i, (fwd, rev)) in self.forward.iter().zip(&self.reverse).enumerate() {
            // On a GPU backend both directions run in the same launches, their outputs
            // side by side: each direction's final state is a slice of them.
            let both = match rev {
                Some(rev) => fwd.forward_bi_tm(rev, x.clone(), mask_tm.clone()),
                None => None,
            };
            if let Some(out) = both {
                let [_, b, h2] = out.dims();
                let h = h2 / 2;
                let fin = vec![
                    out.clone()
                        .slice([time - 1..time, 0..b, 0..h])
                        .reshape([b, h]),
                    out.clone().slice([0..1, 0..b, h..h2]).reshape([b, h]),
                ];
                if i + 1 == n {
                    finals = fin;
                    x = out;
                } else {
                    x = dropout_on(&mut noise, out, self.dropout, [Time, Rows, Other]);
                }
                continue;
            }
            let out_f = fwd.forward_tm(x.clone(), mask_tm.clone(), None, None);
            let (out, finals_i) = match rev {
                Some(rev) => {
                    let out_r = rev.forward_tm(x, mask_tm.clone(), None, None);
                    let fin = if time > 0 {
                        vec![last(&out_f, time - 1), last(&out_r, 0)]
                    } else {
                        Vec::new()
                    };
                    (Tensor::cat(vec![out_f, out_r], 2), fin)
                }
                None => {
                    let fin = if time > 0 {
                        vec![last(&out_f, time - 1)]
                    } else {
                        Vec::new()
                    };
                    (out_f, fin)
                }
            };
            if i + 1 == n {
                finals = finals_i;
                x = out;
            } else {
                x = dropout_on(&mut noise, out, self.dropout, [Time, Rows, Other]);
            }
        }
        // Max-pooling reads the time-major states in place on the CPU backend (it skips the
        // padded positions, so it needs no masked copy).
        let pooled = match self.pool {
            Pool::Max => crate::fused::maxpool::max_pool_time_major(x.clone(), mask_tm),
            _ => None,
        };
        let x = x.swap_dims(0, 1);
        // Zero the padded positions: the forward direction carries its last state there.
        let states = x * mask.clone().unsqueeze_dim::<3>(2);
        let sentence = match pooled {
            Some(sentence) => sentence,
            None => pool(self.pool, states.clone(), mask.clone(), finals),
        };
        Encoded {
            sentence,
            states,
            mask,
        }
    }
}

/// A direction's weights for [`crate::fused::lstm_stack::max_pooled`].
fn direction<B: Backend>(l: &MaskedLstm<B>) -> crate::fused::lstm_stack::Direction<B> {
    crate::fused::lstm_stack::Direction {
        w_ih: l.input.weight.val(),
        bias: l.input.bias.as_ref().map(|b| b.val()),
        w_hh: l.hidden.weight.val(),
        reverse: l.reverse,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::input::pad_tokens;
    use crate::random::init_uniform;
    use burn::backend::NdArray;
    use harness_data::tokenize::{Ngrams, Tokens};

    type B = NdArray<f32>;

    /// `rows` batched with one more sentence of `pad_to` tokens, so that they are padded to
    /// `pad_to` positions (its encoding is dropped by the callers).
    fn batch(rows: &[Tokens], pad_to: usize) -> Padded<B> {
        let mut all = rows.to_vec();
        let mut wide = Tokens::from_ids(vec![2; pad_to]);
        if rows.iter().any(|r| r.ngrams.is_some()) {
            wide.ngrams = Some(Ngrams {
                ids: (0..pad_to as u32).map(|j| j % 5).collect(),
                ends: (1..=pad_to as u32).collect(),
            });
        }
        all.push(wide);
        pad_tokens::<B>(&all, &Default::default())
    }

    fn sentences(ngrams: bool) -> Vec<Tokens> {
        let ids: Vec<Vec<u32>> = vec![vec![5, 9, 3], vec![7, 3], vec![4, 8, 6, 11, 3], vec![3]];
        ids.into_iter()
            .enumerate()
            .map(|(i, ids)| {
                let mut t = Tokens::from_ids(ids);
                if ngrams {
                    // Token j of sentence i: n-grams {(i + j) % 5, (3 i + j) % 5}; `</s>` none.
                    let mut g = Ngrams::default();
                    for j in 0..t.ids.len() {
                        if t.ids[j] != 3 {
                            g.ids.push(((i + j) % 5) as u32);
                            g.ids.push(((3 * i + j) % 5) as u32);
                        }
                        g.ends.push(g.ids.len() as u32);
                    }
                    t.ngrams = Some(g);
                }
                t
            })
            .collect()
    }

    fn rows(t: Tensor<B, 2>) -> Vec<Vec<f32>> {
        let [n, d] = t.dims();
        let v = t.into_data().to_vec::<f32>().unwrap();
        (0..n).map(|i| v[i * d..(i + 1) * d].to_vec()).collect()
    }

    /// The masking test: padding a batch does not change any encoding, for every
    /// pooling, with 2 stacked bidirectional layers and with the seq2seq layout, on subword
    /// ids and on words with character n-grams.
    #[test]
    fn padding_does_not_change_any_encoding() {
        let dev = Default::default();
        for (pool, ngrams) in [Pool::Max, Pool::Mean, Pool::Last, Pool::Cls]
            .into_iter()
            .flat_map(|p| [(p, false), (p, true)])
        {
            let sentences = sentences(ngrams);
            for layers in [
                vec![LayerSpec::new(6, true), LayerSpec::new(5, true)],
                vec![LayerSpec::new(6, true), LayerSpec::new(7, false)],
            ] {
                let cfg = BilstmEncoderConfig::new(12, 4, layers, pool)
                    .with_ngram_buckets(ngrams.then_some(5));
                let enc = init_uniform(cfg.init::<B>(&dev), 11, 0.3);
                // Each sentence alone, unpadded.
                let alone: Vec<Vec<f32>> = sentences
                    .iter()
                    .map(|s| {
                        let input = batch(std::slice::from_ref(s), s.len());
                        rows(enc.forward(&input, None).sentence).remove(0)
                    })
                    .collect();
                // All together, padded to 5 and to 9.
                for pad_to in [5, 9] {
                    let input = batch(&sentences, pad_to);
                    let together = rows(enc.forward(&input, None).sentence);
                    for (i, (a, b)) in alone.iter().zip(&together).enumerate() {
                        assert_eq!(a.len(), cfg.d_sentence());
                        for (x, y) in a.iter().zip(b) {
                            assert!(
                                (x - y).abs() < 1e-5,
                                "pool {pool}, sentence {i}, pad {pad_to}: {a:?} vs {b:?}"
                            );
                        }
                    }
                }
                // Padded wider than the longest sentence: every column past it masked in
                // every row.
                let wide = crate::input::pad_tokens_to::<B>(&sentences, 16, &dev);
                assert_eq!(wide.ids.dims(), [sentences.len(), 16]);
                let together = rows(enc.forward(&wide, None).sentence);
                for (i, (a, b)) in alone.iter().zip(&together).enumerate() {
                    for (x, y) in a.iter().zip(b) {
                        assert!(
                            (x - y).abs() < 1e-5,
                            "pool {pool}, sentence {i}, 16 wide: {a:?} vs {b:?}"
                        );
                    }
                }
            }
        }
    }

    /// The inference path on host arrays (`encode`) gives `forward`'s max-pooled vectors bit
    /// for bit: stacked and mixed-direction layers, subword ids and character n-grams, padded.
    #[test]
    fn encode_gives_the_bits_of_forward() {
        let dev = Default::default();
        for ngrams in [false, true] {
            let sentences = sentences(ngrams);
            for layers in [
                vec![LayerSpec::new(6, true)],
                vec![LayerSpec::new(6, true), LayerSpec::new(5, true)],
                vec![LayerSpec::new(6, true), LayerSpec::new(7, false)],
            ] {
                let cfg = BilstmEncoderConfig::new(12, 4, layers, Pool::Max)
                    .with_ngram_buckets(ngrams.then_some(5));
                let enc = init_uniform(cfg.init::<B>(&dev), 11, 0.3);
                let input = batch(&sentences, 9);
                let bits = |t: Tensor<B, 2>| -> Vec<u32> {
                    rows(t).concat().iter().map(|x| x.to_bits()).collect()
                };
                assert_eq!(
                    bits(enc.encode(&input)),
                    bits(enc.forward(&input, None).sentence),
                    "n-grams {ngrams}, {} layers",
                    cfg.layers.len()
                );
            }
        }
    }

    #[test]
    fn recipe_blocks_map_to_layer_stacks() {
        let lstm = schema::LstmEncoder {
            layers: 2,
            hidden: 128,
            top_hidden: Some(256),
            embed: 64,
            bidirectional_first: true,
            pool: Pool::Mean,
            dropout: 0.0,
        };
        let c = BilstmEncoderConfig::from_lstm(100, &lstm);
        assert_eq!(
            c.layers,
            vec![LayerSpec::new(128, true), LayerSpec::new(256, false)]
        );
        assert_eq!(c.d_sentence(), 256);
        let bi = schema::BilstmEncoder {
            layers: 3,
            hidden: 512,
            embed: 320,
            pool: Pool::Max,
            dropout: 0.1,
        };
        let c = BilstmEncoderConfig::from_bilstm(100, &bi);
        assert_eq!(c.layers.len(), 3);
        assert_eq!(c.d_sentence(), 1024);
        assert_eq!(c.pool, Pool::Max);
    }
}
