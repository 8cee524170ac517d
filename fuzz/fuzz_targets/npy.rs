//! `.npy` bytes through the npy reader and its write/read round trip: see `harness::fuzz::npy`.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| harness::fuzz::npy(data));
