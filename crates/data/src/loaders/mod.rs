//! One loader per on-disk format. Each takes the dataset's folder (inside the data
//! directory) and returns typed records from [`crate::records`]; each has a test on
//! the real files asserting the exact counts of that folder's SOURCE.txt.

pub mod bucc;
pub mod cls_amazon;
pub mod conversation;
pub mod monolingual;
pub mod multiway;
pub mod parallel_pairs;
pub mod senteval;
pub mod sib200;
pub mod sick;
pub mod slot_gated;
pub mod snli;
pub mod sts12_16;
pub mod sts17;
pub mod stsb_multi_mt;
pub mod stsbenchmark;
pub mod tatoeba;
pub mod wmt_news;
pub mod xnli;
pub mod xsid;

#[cfg(test)]
mod bad_input;
#[cfg(test)]
pub(crate) mod test_support;
