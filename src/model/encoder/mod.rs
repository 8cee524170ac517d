//! Sentence encoders. `bert` is the BERT family as a burn module (MiniLM,
//! multilingual-e5-small); `sentence_transformers` opens a sentence-transformers model folder
//! (weights, tokenizer, pooling) as a benchmark [`Encoder`](crate::bench::Encoder).

pub mod bert;
pub mod sentence_transformers;
