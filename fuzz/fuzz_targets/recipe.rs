//! Recipe text through `harness validate`'s loader and checks: see `harness::fuzz::recipe`.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| harness::fuzz::recipe(data));
