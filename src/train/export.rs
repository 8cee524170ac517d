//! `harness export runs/<dir> --out DIR`: the run's encoder (best, else newest checkpoint)
//! as `encoder.safetensors` + `config.json` + `tokenizer.json`, for use outside harness.
//! The directory is written under a temporary name and renamed into place.

use crate::model::trained::{load_system, run_files};
use anyhow::Context;
use burn::backend::NdArray;
use burn::store::{ModuleSnapshot, SafetensorsStore};
use std::path::Path;

/// Exports the encoder of `run_dir` into `out`.
pub fn export(run_dir: &Path, out: &Path) -> anyhow::Result<()> {
    let files = run_files(run_dir)?;
    let device = Default::default();
    let (system, config, _tokenizer) = load_system::<NdArray<f32>>(&files, &device)?;
    let parent = crate::fsutil::parent_dir(out);
    std::fs::create_dir_all(parent).with_context(|| format!("creating {}", parent.display()))?;
    let tmp = parent.join(format!(".tmp-export-{}", std::process::id()));
    if tmp.exists() {
        std::fs::remove_dir_all(&tmp)?;
    }
    std::fs::create_dir_all(&tmp)?;
    let mut store = SafetensorsStore::from_file(tmp.join("encoder.safetensors"))
        .metadata("harness_recipe", files.recipe.name.clone())
        .overwrite(true);
    system
        .encoder
        .save_into(&mut store)
        .map_err(|e| anyhow::anyhow!("{}: writing safetensors: {e:?}", out.display()))?;
    let cfg = serde_json::json!({
        "architecture": "harness-bilstm",
        "n_vocab": config.encoder.n_vocab,
        "d_embed": config.encoder.d_embed,
        "layers": config.encoder.layers.iter().map(|l| serde_json::json!({
            "d_hidden": l.d_hidden, "bidirectional": l.bidirectional
        })).collect::<Vec<_>>(),
        "pool": config.encoder.pool,
        "d_sentence": config.encoder.d_sentence(),
        "input": "tokenizer.json ids of the sentence followed by </s> (id 3); padding id 0",
        "gates": "fused [input, forget, cell, output]; forward.N / reverse.N per layer",
        "checkpoint": files.checkpoint.display().to_string(),
        "recipe": files.recipe.name,
    });
    std::fs::write(tmp.join("config.json"), serde_json::to_string_pretty(&cfg)?)?;
    std::fs::copy(&files.tokenizer, tmp.join("tokenizer.json"))
        .with_context(|| format!("copying {}", files.tokenizer.display()))?;
    if out.exists() {
        std::fs::remove_dir_all(out).with_context(|| format!("replacing {}", out.display()))?;
    }
    std::fs::rename(&tmp, out).with_context(|| format!("writing {}", out.display()))?;
    Ok(())
}
