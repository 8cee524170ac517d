//! Pooled word embeddings: XNLI's X-CBOW baseline (Conneau et al. 2018, §4.2: "the average
//! of the word embeddings"), recipe kind `cbow`. Token embeddings, padding zeroed, pooled
//! over the real positions (`mean` by default; `max` also allowed).

use crate::encoder::char_ngrams::{embed_tokens, CharNgrams, CharNgramsConfig};
use crate::encoder::encoded::Encoded;
use crate::encoder::pool::pool;
use crate::input::Padded;
use crate::random::{dropout_on, Axis::*, Noise};
use burn::module::Module;
use burn::nn::{Embedding, EmbeddingConfig};
use burn::tensor::backend::Backend;
use harness_recipe::schema::{self, Pool};

/// Configuration of a [`CbowEncoder`].
#[derive(Debug, Clone, PartialEq)]
pub struct CbowEncoderConfig {
    /// Vocabulary size.
    pub n_vocab: usize,
    /// Embedding (and sentence) size.
    pub d_embed: usize,
    /// Pooling.
    pub pool: Pool,
    /// Hash buckets of the tokenizer's character n-grams, when it gives them.
    pub ngram_buckets: Option<usize>,
}

impl CbowEncoderConfig {
    /// The configuration a recipe's `cbow` block describes.
    pub fn from_recipe(n_vocab: usize, e: &schema::CbowEncoder) -> Self {
        CbowEncoderConfig {
            n_vocab,
            d_embed: e.embed as usize,
            pool: e.pool,
            ngram_buckets: None,
        }
    }

    /// Builds the encoder.
    pub fn init<B: Backend>(&self, device: &B::Device) -> CbowEncoder<B> {
        CbowEncoder {
            embedding: EmbeddingConfig::new(self.n_vocab, self.d_embed).init(device),
            ngrams: CharNgramsConfig::init_for(self.ngram_buckets, self.d_embed, device),
            pool: self.pool,
            dropout: 0.0,
        }
    }
}

/// Word embeddings, pooled.
#[derive(Module, Debug)]
pub struct CbowEncoder<B: Backend> {
    /// Token embeddings.
    pub embedding: Embedding<B>,
    /// Character n-gram embeddings, with a tokenizer that gives n-grams.
    pub ngrams: Option<CharNgrams<B>>,
    /// Pooling.
    #[module(skip)]
    pub pool: Pool,
    /// Dropout on the embeddings (training only).
    pub dropout: f64,
}

impl<B: Backend> CbowEncoder<B> {
    /// The words of the noise stream a training pass over `rows` rows `width` wide draws
    /// (the embeddings' mask).
    pub fn noise_words(&self, rows: usize, width: usize) -> u64 {
        if self.dropout <= 0.0 {
            return 0;
        }
        let [_, embed] = self.embedding.weight.dims();
        (rows * width * embed) as u64
    }

    /// Encodes a padded batch.
    pub fn forward(&self, input: &Padded<B>, mut noise: Option<&mut Noise>) -> Encoded<B> {
        let embedded = embed_tokens(&self.embedding, self.ngrams.as_ref(), input);
        let embedded = dropout_on(&mut noise, embedded, self.dropout, [Rows, Time, Other]);
        let states = embedded * input.mask.clone().unsqueeze_dim::<3>(2);
        let sentence = pool(self.pool, states.clone(), input.mask.clone(), Vec::new());
        Encoded {
            sentence,
            states,
            mask: input.mask.clone(),
        }
    }
}

/// `Pool` values a `cbow` encoder accepts (`last` and `cls` mean nothing without order).
pub fn accepts(pool: Pool) -> bool {
    matches!(pool, Pool::Mean | Pool::Max)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::input::pad;
    use burn::backend::NdArray;
    use burn::tensor::{Tensor, TensorData};

    type B = NdArray<f32>;

    /// Hand-computed: embeddings of ids 1 and 2 are rows 1 and 2; the mean of a sentence is
    /// their average whatever the padding.
    #[test]
    fn mean_of_the_real_tokens_only() {
        let dev = Default::default();
        let mut enc = CbowEncoderConfig {
            n_vocab: 3,
            d_embed: 2,
            pool: Pool::Mean,
            ngram_buckets: None,
        }
        .init::<B>(&dev);
        enc.embedding.weight = burn::module::Param::from_tensor(Tensor::from_data(
            TensorData::new(vec![9f32, 9., 1., 2., 3., 6.], [3, 2]),
            &dev,
        ));
        let input = pad::<B>(&[vec![1, 2], vec![2]], &dev);
        let v = enc
            .forward(&input, None)
            .sentence
            .into_data()
            .to_vec::<f32>()
            .unwrap();
        assert_eq!(v, vec![2.0, 4.0, 3.0, 6.0]);
    }
}
