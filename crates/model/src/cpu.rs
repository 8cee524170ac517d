//! The CPU backend's entry points, compiled once, in this crate.
//!
//! Why they exist: at opt-level 3 rustc does not share generic instances between crates (it
//! does only at opt-level 0 and 1), so every crate that calls a generic model function with
//! burn-ndarray compiles that function, and every burn and ndarray operation under it,
//! again. harness-encoders' `open_with::<NdArray<f32>>` did: 93 % of its unoptimised LLVM IR
//! were functions this crate already had, 129 s of a 13-minute cold `cargo build
//! --release` on 2 cores. These functions are not generic, so their bodies (and the
//! instances they need) are compiled here, and a higher crate that calls them compiles a
//! call. Higher crates use them for the CPU backend and keep the generic functions for the
//! GPU backends (`docs/performance-log.md`, "the cold release build from 13 min 11 s to 9 min
//! 09 s").

use crate::encoder::bert::{load_bert as load_bert_on, Bert, BertConfig, SafetensorsSource};
use crate::encoder::e5::E5Encoder;
use crate::encoder::sentence_transformers::SentenceTransformer;
use crate::encoder::unigram::E5Prefix;
use crate::system::{System, SystemConfig};
use crate::trained::{self, RunFiles};
use crate::ModelError;
use harness_data::tokenize::TextTokenizer;
use harness_embed::{EncodeError, Encoder};
use std::path::Path;

/// The CPU backend (burn-ndarray, f32): the benchmark encoders' backend.
pub use crate::encoder::sentence_transformers::CpuBackend as Cpu;

/// [`trained::open_run`], boxed.
pub fn open_run(dir: &Path) -> Result<Box<dyn Encoder>, EncodeError> {
    Ok(Box::new(trained::open_run(dir)?))
}

/// [`SentenceTransformer::open`] on the CPU, named `name` when given, boxed.
pub fn open_sentence_transformer(
    dir: &Path,
    name: Option<&str>,
) -> Result<Box<dyn Encoder>, ModelError> {
    let encoder = SentenceTransformer::<Cpu>::open(dir, &Default::default())?;
    Ok(match name {
        Some(name) => Box::new(encoder.with_name(name)),
        None => Box::new(encoder),
    })
}

/// [`E5Encoder::open`] on the CPU, boxed.
pub fn open_e5(
    path: &Path,
    sha256: &str,
    prefix: E5Prefix,
) -> Result<Box<dyn Encoder>, ModelError> {
    Ok(Box::new(E5Encoder::<Cpu>::open(
        path,
        sha256,
        prefix,
        &Default::default(),
    )?))
}

/// [`trained::load_system`] on the CPU.
pub fn load_system(
    files: &RunFiles,
) -> Result<(System<Cpu>, SystemConfig, TextTokenizer), EncodeError> {
    trained::load_system::<Cpu>(files, &Default::default())
}

/// [`crate::encoder::bert::load_bert`] on the CPU.
pub fn load_bert(config: &BertConfig, weights: SafetensorsSource) -> Result<Bert<Cpu>, ModelError> {
    load_bert_on::<Cpu>(config, weights, &Default::default())
}

/// [`BertConfig::init`] on the CPU.
pub fn init_bert(config: &BertConfig) -> Bert<Cpu> {
    config.init::<Cpu>(&Default::default())
}
