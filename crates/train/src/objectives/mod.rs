//! Training objectives, one file per loss; each is selected by name in a recipe task
//! (`objective: seq2seq_ce`, ...). Every function returns a scalar (`Tensor<B, 1>` of one
//! element) to be weighted and summed by the mixture (`train/mixture.rs`).

pub mod l2_similarity;
pub mod nli_classification;
pub mod ranking_softmax;
pub mod seq2seq_ce;

#[cfg(test)]
pub(crate) mod gradcheck;
