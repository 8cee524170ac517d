//! `harness export runs/<dir> --out DIR`: the run's encoder (best, else newest checkpoint)
//! as `encoder.safetensors` + `config.json` + `tokenizer.json`, for use outside harness; a
//! fine-tuned pretrained (BERT) encoder as a sentence-transformers folder instead
//! ([`crate::export_st`]).
//! Each file is written atomically. `DIR` must be new, empty or an earlier export (listed in
//! its `.harness-files.json`); with `--force` a directory holding other files is written
//! into too, replacing only the three files export writes. Nothing else is ever touched.

use crate::TrainError;
use burn::store::{ModuleSnapshot, SafetensorsStore};
use harness_core::outdir::{Foreign, OutDir};
use harness_model::cpu::load_system;
use harness_model::encoder::SentenceEncoder;
use harness_model::trained::run_files;
use std::path::Path;

/// The files export writes.
pub const FILES: [&str; 3] = ["encoder.safetensors", "config.json", "tokenizer.json"];

/// Exports the encoder of `run_dir` into `out`.
pub fn export(run_dir: &Path, out: &Path, force: bool) -> Result<(), TrainError> {
    let files = run_files(run_dir)?;
    // A fine-tuned published (BERT) model; one that started from a trained run has that
    // run's architecture and exports as it does.
    if files.base_encoder.is_none()
        && matches!(
            files.recipe.model.as_ref().map(|m| &m.encoder),
            Some(harness_recipe::schema::Encoder::Pretrained(_))
        )
    {
        return crate::export_st::export(&files, out, force);
    }
    let will_write: Vec<String> = FILES.iter().map(|f| f.to_string()).collect();
    // Refuse before any work if `out` is not ours to write.
    let mut dir = OutDir::claim(out, "export", &will_write, Foreign::RefuseDirectory, force)?;
    let (system, config, _tokenizer) = load_system(&files)?;
    // The tensors go through a scratch file in the system's temporary folder (burn's store
    // writes a path), then into `out` atomically.
    let scratch = tempfile::tempdir().map_err(|e| TrainError::io(std::env::temp_dir(), e))?;
    let tensors = scratch.path().join("encoder.safetensors");
    let mut store = SafetensorsStore::from_file(&tensors)
        .metadata("harness_recipe", files.recipe.name.clone())
        .overwrite(true);
    // The encoder module itself, not the enum around it: tensor names stay those of its
    // architecture (`embedding.weight`, `forward.0…`), whatever the variant.
    let saved = match system.encoder() {
        SentenceEncoder::Bilstm(e) => e.save_into(&mut store),
        SentenceEncoder::Cbow(e) => e.save_into(&mut store),
        SentenceEncoder::Transformer(e) => e.save_into(&mut store),
        SentenceEncoder::Bert(_) => {
            return Err(TrainError::Export {
                path: out.to_path_buf(),
                detail: "a BERT encoder is exported as a sentence-transformers folder, from a recipe whose `model.encoder` is pretrained".into(),
            })
        }
    };
    saved.map_err(|e| TrainError::Export {
        path: tensors.clone(),
        detail: format!("writing safetensors: {e:?}"),
    })?;
    let mut cfg = config.encoder().describe();
    if let Some(m) = cfg.as_object_mut() {
        m.insert(
            "input".into(),
            "tokenizer.json ids of the sentence followed by </s> (id 3); padding id 0".into(),
        );
        m.insert(
            "checkpoint".into(),
            files.checkpoint.display().to_string().into(),
        );
        m.insert("recipe".into(), files.recipe.name.clone().into());
    }
    dir.copy("encoder.safetensors", &tensors)?;
    let text = serde_json::to_string_pretty(&cfg).map_err(|e| TrainError::Export {
        path: out.join("config.json"),
        detail: e.to_string(),
    })?;
    dir.write("config.json", text.as_bytes())?;
    dir.copy("tokenizer.json", &files.tokenizer)?;
    dir.finish()?;
    Ok(())
}
