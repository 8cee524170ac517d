//! The input layer every trainable encoder reads its tokens through ([`embed_tokens`]):
//! token embeddings, and for a tokenizer with character n-grams (the `words` tokenizer,
//! `harness_data::tokenize`) the n-gram embeddings combined at the word level.
//!
//! Reference: multilingual USE (Chidambaram et al. 2019, §2.1 "Word and Character
//! Embeddings"): "Character n-gram embeddings ... are combined at the word-level by summing
//! their representations and then passing the resulting vector to a single feedforward
//! layer with tanh activation. We average the word and character embeddings before
//! providing them as input". So a token's vector is
//! `½ · (E_w[w] + tanh(W · Σ_g E_c[g] + b))`, with `E_c` over the tokenizer's hash buckets
//! and `W` square (both embeddings have the encoder's `embed` size, as in the paper: "Both
//! the word and character n-gram embedding sizes are 320"). A token without n-grams (`</s>`)
//! gets `tanh(b)` as its character part.
//!
//! Adding an input kind: its tensors in `crate::input::Padded`, what the tokenizer gives per
//! token in `harness_data::tokenize::Tokens`, and its module and arm here.

use crate::fused;
use crate::fused::gather::{gather_rows, Gather};
use crate::input::Padded;
use burn::module::Module;
use burn::nn::{Embedding, EmbeddingConfig, Linear, LinearConfig};
use burn::tensor::backend::Backend;
use burn::tensor::{IndexingUpdateOp, Tensor};

/// Configuration of [`CharNgrams`].
#[derive(Debug, Clone, PartialEq)]
pub struct CharNgramsConfig {
    /// Hash buckets of the n-grams (the tokenizer's `hash_buckets`).
    pub buckets: usize,
    /// Embedding size (the word embeddings').
    pub d_embed: usize,
}

impl CharNgramsConfig {
    /// The n-gram layer of an encoder with `d_embed`-wide embeddings, when its tokenizer
    /// gives n-grams (`buckets`); none otherwise.
    pub fn init_for<B: Backend>(
        buckets: Option<usize>,
        d_embed: usize,
        device: &B::Device,
    ) -> Option<CharNgrams<B>> {
        buckets.map(|buckets| CharNgramsConfig { buckets, d_embed }.init(device))
    }

    /// Builds the layer.
    pub fn init<B: Backend>(&self, device: &B::Device) -> CharNgrams<B> {
        CharNgrams {
            table: EmbeddingConfig::new(self.buckets, self.d_embed).init(device),
            layer: LinearConfig::new(self.d_embed, self.d_embed).init(device),
        }
    }
}

/// Character n-gram embeddings and the tanh layer over their per-word sum.
#[derive(Module, Debug)]
pub struct CharNgrams<B: Backend> {
    /// `[buckets, d_embed]`.
    pub table: Embedding<B>,
    /// The feed-forward layer over the sum.
    pub layer: Linear<B>,
}

impl<B: Backend> CharNgrams<B> {
    /// The character part of every token of `input`, `[batch, time, d_embed]`.
    fn forward(&self, input: &Padded<B>) -> Tensor<B, 3> {
        let [batch, time] = input.ids.dims();
        let [_, d] = self.table.weight.dims();
        let device = self.table.weight.device();
        let sums = match &input.ngrams {
            Some(g) if g.count > 0 && fused::gather::supported::<B>() => {
                let gather = Gather {
                    index: fused::gather::host_indices(&g.ids),
                    position: Some(fused::gather::host_indices(&g.positions)),
                    rows: batch * time,
                };
                gather_rows(&self.table.weight.val(), &gather).expect("a supported backend")
            }
            Some(g) if g.count > 0 => {
                let grams = self
                    .table
                    .forward(g.ids.clone().reshape([1, g.count]))
                    .reshape([g.count, d]);
                Tensor::<B, 2>::zeros([batch * time, d], &device).select_assign(
                    0,
                    g.positions.clone(),
                    grams,
                    IndexingUpdateOp::Add,
                )
            }
            _ => Tensor::<B, 2>::zeros([batch * time, d], &device),
        };
        let y = crate::fused::tanh::tanh(crate::fused::linear::linear(&self.layer, sums));
        crate::fused::reshape::reshape(y, [batch, time, d])
    }
}

/// The vectors an encoder reads for `input`'s tokens, `[batch, time, d_embed]`: the word
/// embeddings alone (exactly as before n-grams existed) without an n-gram layer, else the
/// average of word and character parts (module doc).
pub fn embed_tokens<B: Backend>(
    words: &Embedding<B>,
    ngrams: Option<&CharNgrams<B>>,
    input: &Padded<B>,
) -> Tensor<B, 3> {
    let w = if fused::gather::supported::<B>() {
        let [batch, time] = input.ids.dims();
        let [_, d] = words.weight.dims();
        let gather = Gather {
            index: fused::gather::host_indices(&input.ids),
            position: None,
            rows: batch * time,
        };
        let w = gather_rows(&words.weight.val(), &gather).expect("a supported backend");
        crate::fused::reshape::reshape(w, [batch, time, d])
    } else {
        words.forward(input.ids.clone())
    };
    match ngrams {
        None => w,
        Some(c) => (w + c.forward(input)) * 0.5,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::input::pad_tokens;
    use burn::backend::NdArray;
    use burn::module::Param;
    use burn::tensor::TensorData;
    use harness_data::tokenize::{Ngrams, Tokens};

    type B = NdArray<f32>;

    fn tensor<const D: usize>(v: Vec<f32>, shape: [usize; D]) -> Tensor<B, D> {
        Tensor::from_data(TensorData::new(v, shape), &Default::default())
    }

    /// By hand, d = 2: word rows E_w[1] = (1, 2), E_w[2] = (3, 4); n-gram rows
    /// E_c[0] = (0.1, 0.2), E_c[1] = (0.3, −0.1), E_c[2] = (0.5, 0.5); W = I, b = (0, 0.1).
    /// Sentence [1, 2] where token 1 has n-grams {0, 1, 1} and token 2 has {2}:
    /// token 1: ½((1, 2) + tanh((0.7, 0.1)))       = (0.5 + ½tanh 0.7, 1 + ½tanh 0.1)
    ///        (sum (0.1+0.3+0.3, 0.2−0.1−0.1) = (0.7, 0.0), plus b = (0.7, 0.1))
    /// token 2: ½((3, 4) + tanh((0.5, 0.6)))
    /// and in a second, padded row a token with no n-grams: ½(E_w + tanh(b)).
    #[test]
    fn word_plus_summed_char_ngrams_by_hand() {
        let dev = Default::default();
        let mut words = EmbeddingConfig::new(3, 2).init::<B>(&dev);
        words.weight = Param::from_tensor(tensor(vec![0., 0., 1., 2., 3., 4.], [3, 2]));
        let mut c = CharNgramsConfig {
            buckets: 3,
            d_embed: 2,
        }
        .init::<B>(&dev);
        c.table.weight = Param::from_tensor(tensor(vec![0.1, 0.2, 0.3, -0.1, 0.5, 0.5], [3, 2]));
        // burn's Linear computes x · W with W [d_in, d_out].
        c.layer.weight = Param::from_tensor(tensor(vec![1., 0., 0., 1.], [2, 2]));
        c.layer.bias = Some(Param::from_tensor(tensor(vec![0.0, 0.1], [2])));
        let rows = [
            Tokens {
                ids: vec![1, 2],
                ngrams: Some(Ngrams {
                    ids: vec![0, 1, 1, 2],
                    ends: vec![3, 4],
                }),
                complete: false,
            },
            Tokens {
                ids: vec![2],
                ngrams: Some(Ngrams {
                    ids: vec![],
                    ends: vec![0],
                }),
                complete: false,
            },
        ];
        let input = pad_tokens::<B>(&rows, &dev);
        let got = embed_tokens(&words, Some(&c), &input)
            .into_data()
            .to_vec::<f32>()
            .unwrap();
        let t = |x: f32| x.tanh();
        let want = [
            0.5 * (1.0 + t(0.7)),
            0.5 * (2.0 + t(0.1)),
            0.5 * (3.0 + t(0.5)),
            0.5 * (4.0 + t(0.6)),
            0.5 * (3.0 + t(0.0)),
            0.5 * (4.0 + t(0.1)),
        ];
        // Row 2, position 1 is padding: whatever it holds, the encoders mask it.
        for (i, w) in want.iter().enumerate() {
            assert!((got[i] - w).abs() < 1e-6, "{i}: {} vs {w}", got[i]);
        }
        // Without an n-gram layer the word embeddings pass unchanged.
        let plain = embed_tokens(&words, None, &input);
        assert_eq!(
            plain.into_data().to_vec::<f32>().unwrap(),
            vec![1., 2., 3., 4., 3., 4., 0., 0.]
        );
    }
}
