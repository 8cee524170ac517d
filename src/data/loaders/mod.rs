//! One loader per on-disk format. Each takes the dataset's folder (inside the data
//! directory) and returns typed records from [`crate::data::records`]; each has a test on
//! the real files asserting the exact counts of that folder's SOURCE.txt.

pub mod bucc;
pub mod conversation;
pub mod monolingual;
pub mod multiway;
pub mod parallel_pairs;
pub mod tatoeba;
pub mod wmt_news;
