//! A pretrained BERT (multilingual-e5-small, all-MiniLM-L6-v2, a sentence-transformers
//! folder) as a trainable [`SentenceEncoder`](super::SentenceEncoder) variant: the same
//! [`Bert`] module tree the benchmark encoders run ([`super::bert`], plain burn ops, so it
//! trains on `Autodiff<B>` unchanged), its token states zeroed at padding and pooled
//! (`mean` as sentence-transformers' Pooling: over every real token, `[CLS]`/`<s>` and
//! `[SEP]`/`</s>` included; `cls`; `max`).
//!
//! Inputs are the model's own ids (a pretrained tokenizer's rows, start and end tokens
//! included: `harness_data::pretrained_tokenizer`); padded positions carry harness's pad id
//! 0, which the attention mask and the pooling leave out, so their id never matters.
//!
//! No dropout: the encoders are fine-tuned for a few hundred steps on small labelled sets
//! (Emu), where HF's 0.1 changes little; every forward pass is deterministic.

use super::bert::{Bert, BertConfig};
use crate::encoder::encoded::Encoded;
use crate::encoder::pool::pool;
use crate::input::Padded;
use burn::module::Module;
use burn::tensor::backend::Backend;
use harness_recipe::schema::Pool;

/// Configuration of a [`BertSentenceEncoder`].
#[derive(Debug, Clone)]
pub struct BertSentenceConfig {
    /// The model's architecture (its `config.json`).
    pub bert: BertConfig,
    /// `mean`, `cls` or `max`.
    pub pool: Pool,
    /// The pretrained model it starts from (name or folder), for messages and exports.
    pub model: String,
}

/// A BERT with a pooling (module doc).
#[derive(Module, Debug)]
pub struct BertSentenceEncoder<B: Backend> {
    /// The transformer.
    pub bert: Bert<B>,
    /// Pooling.
    #[module(skip)]
    pub pool: Pool,
}

impl BertSentenceConfig {
    /// Builds the encoder with the word table laid out as [`super::bert::load_bert`] lays
    /// it out on `device` (one table, or blocks where buffers are small). burn initialises
    /// parameters lazily: the weights loaded next never pay for random draws.
    pub fn init<B: Backend>(&self, device: &B::Device) -> BertSentenceEncoder<B> {
        let blocks = self
            .bert
            .word_block_rows(crate::limits::max_buffer_bytes::<B>(device));
        BertSentenceEncoder {
            bert: self.bert.init_with_word_blocks(device, blocks),
            pool: self.pool,
        }
    }
}

impl<B: Backend> BertSentenceEncoder<B> {
    /// Encodes a padded batch of the model's ids.
    pub fn forward(&self, input: &Padded<B>) -> Encoded<B> {
        let hidden = self.bert.forward(input.ids.clone(), input.mask.clone());
        let states = hidden * input.mask.clone().unsqueeze_dim::<3>(2);
        let sentence = pool(self.pool, states.clone(), input.mask.clone(), Vec::new());
        Encoded {
            sentence,
            states,
            mask: input.mask.clone(),
        }
    }
}

/// Poolings a BERT encoder takes.
pub fn accepts(pool: harness_recipe::schema::Pool) -> bool {
    use harness_recipe::schema::Pool;
    matches!(pool, Pool::Mean | Pool::Cls | Pool::Max)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::encoder::bert::{mean_pool, BertBatch};
    use burn::backend::NdArray;

    type B = NdArray<f32>;

    #[test]
    fn mean_pooling_of_a_padded_batch_equals_the_benchmark_encoders() {
        let config = BertConfig {
            vocab_size: 30,
            hidden_size: 8,
            num_hidden_layers: 1,
            num_attention_heads: 2,
            intermediate_size: 16,
            max_position_embeddings: 10,
            ..BertConfig::default()
        };
        let dev = Default::default();
        let enc = BertSentenceConfig {
            bert: config,
            pool: Pool::Mean,
            model: "tiny".into(),
        }
        .init::<B>(&dev);
        let rows = vec![vec![1u32, 5, 6, 2], vec![1, 7, 2]];
        let batch = BertBatch::new(&enc.bert, &rows, &dev).unwrap();
        let want = mean_pool(
            enc.bert
                .forward(batch.input_ids.clone(), batch.attention_mask.clone()),
            batch.attention_mask.clone(),
        );
        let input = crate::input::pad::<B>(&rows, &dev);
        let got = enc.forward(&input).sentence;
        let diff: f32 = (got - want).abs().max().into_scalar();
        assert!(diff < 1e-5, "{diff}");
        // Padding never changes a row: the short sentence alone gives the same vector.
        let alone = enc
            .forward(&crate::input::pad::<B>(&rows[1..], &dev))
            .sentence;
        let both = enc.forward(&input).sentence.slice([1..2, 0..8]);
        let diff: f32 = (alone - both).abs().max().into_scalar();
        assert!(diff < 1e-5, "{diff}");
    }
}
