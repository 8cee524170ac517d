//! One loader per on-disk format. Each takes the dataset's folder (inside the data
//! directory) and returns typed records from [`crate::data::records`]; each has a test on
//! the real files asserting the exact counts of that folder's SOURCE.txt.
