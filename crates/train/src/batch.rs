//! Example indices → padded tensors on the training device.
//!
//! Encoder inputs are the tokens followed by `</s>` (LASER appends it; it also means no
//! input is empty), with their character n-grams when the tokenizer gives them. Decoder inputs are a first token — `<s>`, or the target language's
//! `<lang:xxx>` token when the decoder has no language embedding (seq2seq §2) — followed by
//! the target ids; decoder outputs are the target ids followed by `</s>`.

use crate::data::{ContextExample, LabelledExample, NliExample, PairExample};
use burn::tensor::backend::Backend;
use burn::tensor::{Int, Tensor, TensorData};
use harness_data::tokenize::{ids, Tokens};

pub use harness_model::input::{pad, pad_tokens, Padded};

/// The encoder input of examples' token rows: each followed by `</s>`, padded.
pub fn encoder_input<'a, B: Backend>(
    rows: impl IntoIterator<Item = &'a Tokens>,
    device: &B::Device,
) -> Padded<B> {
    let rows: Vec<Tokens> = rows.into_iter().map(Tokens::with_eos).collect();
    pad_tokens(&rows, device)
}

/// The encoder input of several groups of rows padded as one batch (each row followed by
/// `</s>`, as [`encoder_input`] gives it), and each group's rows and the width
/// [`encoder_input`] would give that group alone.
pub fn merged_encoder_input<B: Backend>(
    groups: &[Vec<&Tokens>],
    device: &B::Device,
) -> (Padded<B>, Vec<(std::ops::Range<usize>, usize)>) {
    let mut rows: Vec<Tokens> = Vec::with_capacity(groups.iter().map(Vec::len).sum());
    let mut parts = Vec::with_capacity(groups.len());
    for group in groups {
        let start = rows.len();
        rows.extend(group.iter().map(|t| t.with_eos()));
        let width = rows[start..].iter().map(|t| t.ids.len()).max().unwrap_or(0);
        parts.push((start..rows.len(), width));
    }
    (pad_tokens(&rows, device), parts)
}

/// Teacher-forcing rows of one target: (input, output).
pub fn decoder_rows(target: &[u32], first: u32) -> (Vec<u32>, Vec<u32>) {
    let mut input = Vec::with_capacity(target.len() + 1);
    input.push(first);
    input.extend_from_slice(target);
    let mut output = Vec::with_capacity(target.len() + 1);
    output.extend_from_slice(target);
    output.push(ids::EOS);
    (input, output)
}

/// One side of a translation: what the decoder reads and must predict.
#[derive(Debug, Clone)]
pub struct DecoderSide<B: Backend> {
    pub input: Padded<B>,
    pub output: Tensor<B, 2, Int>,
    /// Language-ID index of each row `[batch]`.
    pub language: Tensor<B, 1, Int>,
}

/// A batch of translation pairs, both sides ready for the encoder and the decoder.
#[derive(Debug, Clone)]
pub struct PairBatch<B: Backend> {
    /// Source side, encoder input.
    pub src: Padded<B>,
    /// Target side, encoder input (similarity loss, reverse direction).
    pub tgt: Padded<B>,
    /// Decode the target from the source.
    pub to_tgt: DecoderSide<B>,
    /// Decode the source from the target.
    pub to_src: DecoderSide<B>,
}

/// How the decoder's first input is chosen: `<s>`, or the language token of each target
/// language (`first_tokens[lang]`).
#[derive(Debug, Clone)]
pub enum FirstToken {
    Bos,
    Language(Vec<u32>),
}

impl FirstToken {
    fn of(&self, lang: u32) -> u32 {
        match self {
            FirstToken::Bos => ids::BOS,
            FirstToken::Language(t) => t.get(lang as usize).copied().unwrap_or(ids::BOS),
        }
    }
}

fn decoder_side<B: Backend>(
    targets: &[&[u32]],
    langs: &[u32],
    first: &FirstToken,
    device: &B::Device,
) -> DecoderSide<B> {
    let (inputs, outputs): (Vec<_>, Vec<_>) = targets
        .iter()
        .zip(langs)
        .map(|(t, &l)| decoder_rows(t, first.of(l)))
        .unzip();
    let input = pad::<B>(&inputs, device);
    let output = pad::<B>(&outputs, device).ids;
    let language = Tensor::from_data(
        TensorData::new(
            langs.iter().map(|&l| l as i64).collect::<Vec<_>>(),
            [langs.len()],
        ),
        device,
    );
    DecoderSide {
        input,
        output,
        language,
    }
}

/// Builds the tensors of a batch of translation examples.
pub fn pair_batch<B: Backend>(
    examples: &[PairExample],
    index: &[u32],
    first: &FirstToken,
    device: &B::Device,
) -> PairBatch<B> {
    let ex: Vec<&PairExample> = index.iter().map(|&i| &examples[i as usize]).collect();
    let tgts: Vec<&[u32]> = ex.iter().map(|e| &e.tgt.ids[..]).collect();
    let srcs: Vec<&[u32]> = ex.iter().map(|e| &e.src.ids[..]).collect();
    let tl: Vec<u32> = ex.iter().map(|e| e.tgt_lang).collect();
    let sl: Vec<u32> = ex.iter().map(|e| e.src_lang).collect();
    PairBatch {
        src: encoder_input(ex.iter().map(|e| &e.src), device),
        tgt: encoder_input(ex.iter().map(|e| &e.tgt), device),
        to_tgt: decoder_side(&tgts, &tl, first, device),
        to_src: decoder_side(&srcs, &sl, first, device),
    }
}

/// A batch of NLI examples.
#[derive(Debug, Clone)]
pub struct NliBatch<B: Backend> {
    pub premise: Padded<B>,
    pub hypothesis: Padded<B>,
    pub labels: Tensor<B, 1, Int>,
}

/// Builds the tensors of a batch of NLI examples.
pub fn nli_batch<B: Backend>(
    examples: &[NliExample],
    index: &[u32],
    device: &B::Device,
) -> NliBatch<B> {
    let ex: Vec<&NliExample> = index.iter().map(|&i| &examples[i as usize]).collect();
    NliBatch {
        premise: encoder_input(ex.iter().map(|e| &e.premise), device),
        hypothesis: encoder_input(ex.iter().map(|e| &e.hypothesis), device),
        labels: Tensor::from_data(
            TensorData::new(
                ex.iter().map(|e| e.label as i64).collect::<Vec<_>>(),
                [ex.len()],
            ),
            device,
        ),
    }
}

/// A batch of running-text examples: each sentence and its two neighbours.
#[derive(Debug, Clone)]
pub struct ContextBatch<B: Backend> {
    pub sentence: Padded<B>,
    pub previous: Padded<B>,
    pub next: Padded<B>,
}

/// Builds the tensors of a batch of running-text examples.
pub fn context_batch<B: Backend>(
    examples: &[ContextExample],
    index: &[u32],
    device: &B::Device,
) -> ContextBatch<B> {
    let ex: Vec<&ContextExample> = index.iter().map(|&i| &examples[i as usize]).collect();
    let side = |f: fn(&ContextExample) -> &Tokens| encoder_input(ex.iter().map(|e| f(e)), device);
    ContextBatch {
        sentence: side(|e| &e.sentence),
        previous: side(|e| &e.previous),
        next: side(|e| &e.next),
    }
}

/// A batch of labelled sentences.
#[derive(Debug, Clone)]
pub struct LabelledBatch<B: Backend> {
    pub sentence: Padded<B>,
    pub labels: Tensor<B, 1, Int>,
}

/// Builds the tensors of a batch of labelled sentences.
pub fn labelled_batch<B: Backend>(
    examples: &[LabelledExample],
    index: &[u32],
    device: &B::Device,
) -> LabelledBatch<B> {
    let ex: Vec<&LabelledExample> = index.iter().map(|&i| &examples[i as usize]).collect();
    let labels: Vec<i64> = ex.iter().map(|e| e.label as i64).collect();
    LabelledBatch {
        sentence: encoder_input(ex.iter().map(|e| &e.ids), device),
        labels: Tensor::from_data(TensorData::new(labels, [ex.len()]), device),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use burn::backend::NdArray;

    type B = NdArray<f32>;

    #[test]
    fn rows_and_padding() {
        assert_eq!(
            decoder_rows(&[9, 8], 5),
            (vec![5, 9, 8], vec![9, 8, ids::EOS])
        );
        let p = pad::<B>(&[vec![4, 5, 6], vec![7]], &Default::default());
        assert_eq!(
            p.ids.into_data().to_vec::<i64>().unwrap(),
            vec![4, 5, 6, 7, 0, 0]
        );
        assert_eq!(
            p.mask.into_data().to_vec::<f32>().unwrap(),
            vec![1., 1., 1., 1., 0., 0.]
        );
        assert_eq!(p.tokens, 4);
        let ex = vec![PairExample {
            src: Tokens::from_ids(vec![10, 11]),
            tgt: Tokens::from_ids(vec![12]),
            src_lang: 0,
            tgt_lang: 1,
            origin: 0,
            forward: true,
        }];
        let b = pair_batch::<B>(
            &ex,
            &[0],
            &FirstToken::Language(vec![4, 5]),
            &Default::default(),
        );
        assert_eq!(
            b.to_tgt.input.ids.into_data().to_vec::<i64>().unwrap(),
            vec![5, 12]
        );
        assert_eq!(
            b.to_src.input.ids.into_data().to_vec::<i64>().unwrap(),
            vec![4, 10, 11]
        );
        assert_eq!(
            b.to_tgt.output.into_data().to_vec::<i64>().unwrap(),
            vec![12, 3]
        );
        assert_eq!(
            b.src.ids.into_data().to_vec::<i64>().unwrap(),
            vec![10, 11, ids::EOS as i64]
        );
        assert!(b.src.ngrams.is_none());
    }

    #[test]
    fn merged_input_holds_each_group_as_its_own_input_would() {
        let (a, b) = (Tokens::from_ids(vec![10, 11]), Tokens::from_ids(vec![12]));
        let c = Tokens::from_ids(vec![13, 14, 15, 16]);
        let device = Default::default();
        let (merged, parts) = merged_encoder_input::<B>(&[vec![&a, &b], vec![&c, &b]], &device);
        assert_eq!(parts, vec![(0..2, 3), (2..4, 5)]);
        let eos = ids::EOS as i64;
        assert_eq!(
            merged.ids.into_data().to_vec::<i64>().unwrap(),
            [
                [10, 11, eos, 0, 0],
                [12, eos, 0, 0, 0],
                [13, 14, 15, 16, eos],
                [12, eos, 0, 0, 0]
            ]
            .concat()
        );
        let alone = encoder_input::<B>([&a, &b], &device);
        assert_eq!(alone.ids.dims(), [2, parts[0].1]);
        assert_eq!(merged.tokens, alone.tokens + 7);
    }
}
