//! One loader per on-disk format. Each takes the dataset's folder (inside the data
//! directory) and returns typed records from [`crate::data::records`]; each has a test on
//! the real files asserting the exact counts of that folder's SOURCE.txt.

pub mod cls_amazon;
pub mod rfc4180;
pub mod senteval;
pub mod sib200;
pub mod slot_gated;
pub mod xsid;
