//! LSTM decoder conditioned on a sentence embedding (no attention).
//!
//! LASER (Artetxe & Schwenk 2019, §3.1, Figure 1): the decoder's initial state is a linear
//! map of the sentence embedding, and at every step its input is the previous target token's
//! embedding concatenated with the sentence embedding and a 32-d language-ID embedding of
//! the target language. The sentence and language parts are the same at every step, so
//! their contribution to the gates is projected once per sentence (`context`) and added to
//! each step; this is the same function as concatenating them to every input.
//!
//! seq2seq + similarity (Yu et al. 2018, §2): the same decoder with `lang_embed: 0`; the
//! target language is then a `<lang:xxx>` token given as the first decoder input (the
//! caller builds the inputs, see `train/batch.rs`).

use crate::lstm::{MaskedLstm, MaskedLstmConfig, State};
use crate::precision;
use crate::random::{dropout, Noise};
use burn::config::Config;
use burn::module::Module;
use burn::nn::{Embedding, EmbeddingConfig, Linear, LinearConfig};
use burn::tensor::backend::Backend;
use burn::tensor::{Int, Tensor};

/// Configuration of an [`LstmDecoder`].
#[derive(Config, Debug)]
pub struct LstmDecoderConfig {
    /// Vocabulary size (inputs and outputs share it).
    pub n_vocab: usize,
    /// Token embedding size.
    pub d_embed: usize,
    /// Hidden size of every layer.
    pub d_hidden: usize,
    /// Stacked layers.
    #[config(default = 1)]
    pub n_layers: usize,
    /// Size of the sentence embedding it is conditioned on.
    pub d_sentence: usize,
    /// Number of languages of the language-ID embedding.
    pub n_languages: usize,
    /// Language-ID embedding size; 0: none (a language token is the first input instead).
    #[config(default = 32)]
    pub d_lang: usize,
    /// Dropout on the input embeddings and every layer's output (training only).
    #[config(default = 0.0)]
    pub dropout: f64,
}

/// The decoder.
#[derive(Module, Debug)]
pub struct LstmDecoder<B: Backend> {
    /// Target token embeddings.
    pub embedding: Embedding<B>,
    /// Language-ID embeddings (LASER), absent when `d_lang` is 0.
    pub lang_embedding: Option<Embedding<B>>,
    /// Sentence embedding → initial hidden state of every layer.
    pub init_hidden: Linear<B>,
    /// Sentence embedding → initial cell state of every layer.
    pub init_cell: Linear<B>,
    /// `[sentence ; language]` → the first layer's four gates (the constant part of its
    /// input).
    pub context: Linear<B>,
    /// The stacked layers.
    pub layers: Vec<MaskedLstm<B>>,
    /// Top hidden state → vocabulary logits.
    pub output: Linear<B>,
    /// Hidden size.
    pub d_hidden: usize,
    /// Dropout probability.
    pub dropout: f64,
}

impl LstmDecoderConfig {
    /// Builds the decoder.
    pub fn init<B: Backend>(&self, device: &B::Device) -> LstmDecoder<B> {
        let layers = (0..self.n_layers.max(1))
            .map(|i| {
                let d_in = if i == 0 { self.d_embed } else { self.d_hidden };
                MaskedLstmConfig::new(d_in, self.d_hidden).init(device)
            })
            .collect();
        let n = self.n_layers.max(1);
        LstmDecoder {
            embedding: EmbeddingConfig::new(self.n_vocab, self.d_embed).init(device),
            lang_embedding: (self.d_lang > 0)
                .then(|| EmbeddingConfig::new(self.n_languages.max(1), self.d_lang).init(device)),
            init_hidden: LinearConfig::new(self.d_sentence, n * self.d_hidden).init(device),
            init_cell: LinearConfig::new(self.d_sentence, n * self.d_hidden).init(device),
            context: LinearConfig::new(self.d_sentence + self.d_lang, 4 * self.d_hidden)
                .with_bias(false)
                .init(device),
            layers,
            output: LinearConfig::new(self.d_hidden, self.n_vocab).init(device),
            d_hidden: self.d_hidden,
            dropout: self.dropout,
        }
    }
}

impl<B: Backend> LstmDecoder<B> {
    /// Teacher-forced decoding: `inputs: [batch, time]` (the first input `<s>` or the
    /// language token, then the target shifted right), `mask: [batch, time]`,
    /// `sentence: [batch, d_sentence]`, `languages: [batch]` (language-ID indices; ignored
    /// without a language embedding). Returns the top layer's states `[batch, time,
    /// hidden]` (after dropout), which [`LstmDecoder::project`] turns into logits.
    pub fn states(
        &self,
        sentence: Tensor<B, 2>,
        languages: Tensor<B, 1, Int>,
        inputs: Tensor<B, 2, Int>,
        mask: Tensor<B, 2>,
        mut noise: Option<&mut Noise>,
    ) -> Tensor<B, 3> {
        let [batch, _] = sentence.dims();
        let h = self.d_hidden;
        let ctx_in = match &self.lang_embedding {
            Some(emb) => {
                let lang = emb.forward(languages.unsqueeze_dim::<2>(1)); // [batch, 1, d_lang]
                let d_lang = lang.dims()[2];
                Tensor::cat(vec![sentence.clone(), lang.reshape([batch, d_lang])], 1)
            }
            None => sentence.clone(),
        };
        let context = precision::linear(&self.context, ctx_in);
        let init_h = precision::linear(&self.init_hidden, sentence.clone());
        let init_c = precision::linear(&self.init_cell, sentence);

        let embedded = dropout(&mut noise, self.embedding.forward(inputs), self.dropout);
        // Time-major through the layers: each layer is one fused operation over the sequence.
        let mask_tm = mask.swap_dims(0, 1);
        let mut x = embedded.swap_dims(0, 1);
        for (i, layer) in self.layers.iter().enumerate() {
            let state = State {
                hidden: init_h.clone().slice([0..batch, i * h..(i + 1) * h]),
                cell: init_c.clone().slice([0..batch, i * h..(i + 1) * h]),
            };
            let ctx = (i == 0).then(|| context.clone());
            let out = layer.forward_tm(x, mask_tm.clone(), ctx, Some(state));
            x = dropout(&mut noise, out, self.dropout);
        }
        x.swap_dims(0, 1)
    }

    /// The vocabulary logits `[batch, time, n_vocab]` of top states `[batch, time, hidden]`
    /// (one 2-D product: the vocabulary projection is the largest one).
    pub fn project(&self, states: Tensor<B, 3>) -> Tensor<B, 3> {
        let [b, t, d] = states.dims();
        let logits = precision::linear(&self.output, states.reshape([b * t, d]));
        let n_vocab = logits.dims()[1];
        logits.reshape([b, t, n_vocab])
    }

    /// Teacher-forced logits: [`LstmDecoder::states`] then [`LstmDecoder::project`].
    pub fn forward(
        &self,
        sentence: Tensor<B, 2>,
        languages: Tensor<B, 1, Int>,
        inputs: Tensor<B, 2, Int>,
        mask: Tensor<B, 2>,
        noise: Option<&mut Noise>,
    ) -> Tensor<B, 3> {
        self.project(self.states(sentence, languages, inputs, mask, noise))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::random::init_uniform;
    use burn::backend::NdArray;
    use burn::tensor::TensorData;

    type B = NdArray<f32>;

    #[test]
    fn shapes_and_conditioning() {
        let dev = Default::default();
        let cfg = LstmDecoderConfig::new(20, 6, 8, 10, 3).with_n_layers(2);
        let dec = init_uniform(cfg.init::<B>(&dev), 2, 0.3);
        let sent = Tensor::<B, 2>::from_data(
            TensorData::new(
                (0..20).map(|i| i as f32 / 20.0).collect::<Vec<_>>(),
                [2, 10],
            ),
            &dev,
        );
        let inputs = Tensor::<B, 2, Int>::from_data(
            TensorData::new(vec![2i64, 5, 7, 2, 9, 0], [2, 3]),
            &dev,
        );
        let mask = Tensor::<B, 2>::from_data(
            TensorData::new(vec![1f32, 1., 1., 1., 1., 0.], [2, 3]),
            &dev,
        );
        let langs =
            |a: i64, b: i64| Tensor::<B, 1, Int>::from_data(TensorData::new(vec![a, b], [2]), &dev);
        let out = dec.forward(
            sent.clone(),
            langs(0, 1),
            inputs.clone(),
            mask.clone(),
            None,
        );
        assert_eq!(out.dims(), [2, 3, 20]);
        // The language ID changes the output: the decoder is told which language to write.
        let other = dec.forward(
            sent.clone(),
            langs(2, 1),
            inputs.clone(),
            mask.clone(),
            None,
        );
        let a = out
            .clone()
            .slice([0..1, 0..3, 0..20])
            .into_data()
            .to_vec::<f32>()
            .unwrap();
        let b = other
            .clone()
            .slice([0..1, 0..3, 0..20])
            .into_data()
            .to_vec::<f32>()
            .unwrap();
        assert_ne!(a, b);
        // ... and only for the row whose language changed.
        let a = out
            .slice([1..2, 0..3, 0..20])
            .into_data()
            .to_vec::<f32>()
            .unwrap();
        let b = other
            .slice([1..2, 0..3, 0..20])
            .into_data()
            .to_vec::<f32>()
            .unwrap();
        assert_eq!(a, b);
        // The sentence embedding changes it too.
        let out2 = dec.forward(sent.clone() * 2.0, langs(0, 1), inputs, mask, None);
        let c = out2.into_data().to_vec::<f32>().unwrap();
        let d = dec
            .forward(
                sent,
                langs(0, 1),
                Tensor::from_data(TensorData::new(vec![2i64, 5, 7, 2, 9, 0], [2, 3]), &dev),
                Tensor::ones([2, 3], &dev),
                None,
            )
            .into_data()
            .to_vec::<f32>()
            .unwrap();
        assert_ne!(c[..20], d[..20]);
    }
}
