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

use crate::encoder::pool::pool;
use crate::encoder::sentence::Encoded;
use crate::lstm::{MaskedLstm, MaskedLstmConfig};
use crate::random::{dropout, Noise};
use burn::config::Config;
use burn::module::Module;
use burn::nn::{Embedding, EmbeddingConfig};
use burn::tensor::backend::Backend;
use burn::tensor::{Int, Tensor};
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
    pub pool: String,
    /// Dropout on the embeddings and between layers (training only).
    #[config(default = 0.0)]
    pub dropout: f64,
}

/// The encoder: embeddings, the layer stack, pooling.
#[derive(Module, Debug)]
pub struct BilstmEncoder<B: Backend> {
    /// Token embeddings.
    pub embedding: Embedding<B>,
    /// Forward direction of each layer.
    pub forward: Vec<MaskedLstm<B>>,
    /// Reverse direction of each bidirectional layer (`None` for unidirectional ones).
    pub reverse: Vec<Option<MaskedLstm<B>>>,
    /// Pooling, as its recipe name.
    pub pool: String,
    /// Dropout probability.
    pub dropout: f64,
}

impl BilstmEncoderConfig {
    /// The configuration a recipe's `bilstm` encoder block describes.
    pub fn from_bilstm(n_vocab: usize, e: &schema::BilstmEncoder) -> Self {
        let layers = (0..e.layers)
            .map(|_| LayerSpec::new(e.hidden as usize, true))
            .collect();
        BilstmEncoderConfig::new(n_vocab, e.embed as usize, layers, pool_name(e.pool))
            .with_dropout(e.dropout)
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
        BilstmEncoderConfig::new(n_vocab, e.embed as usize, layers, pool_name(e.pool))
            .with_dropout(e.dropout)
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
            forward,
            reverse,
            pool: self.pool.clone(),
            dropout: self.dropout,
        }
    }
}

/// The recipe name of a pooling.
pub fn pool_name(p: Pool) -> String {
    match p {
        Pool::Max => "max",
        Pool::Mean => "mean",
        Pool::Last => "last",
        Pool::Cls => "cls",
    }
    .to_string()
}

impl<B: Backend> BilstmEncoder<B> {
    /// Encodes right-padded token ids `[batch, time]` with `mask` (1 real, 0 padding).
    pub fn forward(
        &self,
        tokens: Tensor<B, 2, Int>,
        mask: Tensor<B, 2>,
        mut noise: Option<&mut Noise>,
    ) -> Encoded<B> {
        let [_, time] = tokens.dims();
        let embedded = dropout(&mut noise, self.embedding.forward(tokens), self.dropout);
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
                x = dropout(&mut noise, out, self.dropout);
            }
        }
        let x = x.swap_dims(0, 1);
        // Zero the padded positions: the forward direction carries its last state there.
        let states = x * mask.clone().unsqueeze_dim::<3>(2);
        let sentence = pool(&self.pool, states.clone(), mask.clone(), finals);
        Encoded {
            sentence,
            states,
            mask,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::random::init_uniform;
    use burn::backend::NdArray;
    use burn::tensor::TensorData;

    type B = NdArray<f32>;

    fn batch(rows: &[Vec<i64>], pad_to: usize) -> (Tensor<B, 2, Int>, Tensor<B, 2>) {
        let dev = Default::default();
        let mut ids = Vec::new();
        let mut mask = Vec::new();
        for r in rows {
            for t in 0..pad_to {
                ids.push(*r.get(t).unwrap_or(&0));
                mask.push(if t < r.len() { 1f32 } else { 0.0 });
            }
        }
        (
            Tensor::from_data(TensorData::new(ids, [rows.len(), pad_to]), &dev),
            Tensor::from_data(TensorData::new(mask, [rows.len(), pad_to]), &dev),
        )
    }

    fn rows(t: Tensor<B, 2>) -> Vec<Vec<f32>> {
        let [n, d] = t.dims();
        let v = t.into_data().to_vec::<f32>().unwrap();
        (0..n).map(|i| v[i * d..(i + 1) * d].to_vec()).collect()
    }

    /// The masking test: padding a batch does not change any encoding, for every
    /// pooling, with 2 stacked bidirectional layers and with the seq2seq layout.
    #[test]
    fn padding_does_not_change_any_encoding() {
        let dev = Default::default();
        let sentences = vec![vec![5, 9, 3], vec![7, 3], vec![4, 8, 6, 11, 3], vec![3]];
        for pool in ["max", "mean", "last", "cls"] {
            for layers in [
                vec![LayerSpec::new(6, true), LayerSpec::new(5, true)],
                vec![LayerSpec::new(6, true), LayerSpec::new(7, false)],
            ] {
                let cfg = BilstmEncoderConfig::new(12, 4, layers, pool.into());
                let enc = init_uniform(cfg.init::<B>(&dev), 11, 0.3);
                // Each sentence alone, unpadded.
                let alone: Vec<Vec<f32>> = sentences
                    .iter()
                    .map(|s| {
                        let (ids, m) = batch(std::slice::from_ref(s), s.len());
                        rows(enc.forward(ids, m, None).sentence).remove(0)
                    })
                    .collect();
                // All together, padded to 5 and to 9.
                for pad_to in [5, 9] {
                    let (ids, m) = batch(&sentences, pad_to);
                    let together = rows(enc.forward(ids, m, None).sentence);
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
        assert_eq!(c.pool, "max");
    }
}
