//! Grid text through `Grid::parse` (every profile) and `expand`: see `harness::fuzz::grid`.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| harness::fuzz::grid(data));
