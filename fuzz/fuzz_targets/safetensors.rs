//! BertModel safetensors bytes through `load_bert`: see `harness::fuzz::safetensors`.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| harness::fuzz::safetensors(data));
