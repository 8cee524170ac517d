//! Checkpoints: `checkpoints/step-NNNNNNNN/` with the model weights (`model.mpk`), the
//! optimizer state (`optim.mpk`), both full precision, and `state.json` (step, every task's
//! data position, seed, counters, best metric so far). A checkpoint is written into a
//! temporary directory and renamed into place, so a killed run leaves either a whole
//! checkpoint or none. Randomness needs no saved state: every random draw of step `s`
//! comes from streams of `(seed, s)` (see `model/random.rs` and `train/mixture.rs`).

use crate::data::Position;
use crate::optim::AnyOptimizer;
use crate::TrainError;
use burn::module::Module;
use burn::record::{FullPrecisionSettings, NamedMpkFileRecorder};
use burn::tensor::backend::{AutodiffBackend, Backend};
use harness_model::system::System;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

type Rec = NamedMpkFileRecorder<FullPrecisionSettings>;

/// The best evaluation so far.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Best {
    /// `benchmark` or `benchmark.metric`.
    pub metric: String,
    pub value: f64,
    pub step: u64,
    /// Whether lower values are better (error rates).
    pub lower_is_better: bool,
}

/// Everything besides weights that a resumed run needs.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TrainState {
    /// Updates done.
    pub step: u64,
    /// Data position of each task, by task name.
    pub positions: BTreeMap<String, Position>,
    /// The recipe's seed (every random stream derives from it and the step).
    pub seed: u64,
    /// Real tokens trained on so far.
    pub tokens: u64,
    /// Training seconds so far (over all sessions).
    pub seconds: f64,
    /// Best evaluation so far.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub best: Option<Best>,
    /// The stage step `step` belongs to (stage numbers as tasks give them; 1 for a
    /// checkpoint written before stages existed).
    #[serde(default = "first_stage")]
    pub stage: u32,
}

fn first_stage() -> u32 {
    1
}

/// The directory of the checkpoint at `step`.
pub fn step_dir(checkpoints: &Path, step: u64) -> PathBuf {
    checkpoints.join(format!("step-{step:08}"))
}

/// Checkpoints present (complete ones only), oldest first.
pub fn list(checkpoints: &Path) -> Vec<(u64, PathBuf)> {
    let Ok(rd) = std::fs::read_dir(checkpoints) else {
        return Vec::new();
    };
    let mut v: Vec<(u64, PathBuf)> = rd
        .flatten()
        .filter_map(|e| {
            let name = e.file_name().into_string().ok()?;
            let step = name.strip_prefix("step-")?.parse().ok()?;
            let p = e.path();
            p.join("state.json").is_file().then_some((step, p))
        })
        .collect();
    v.sort();
    v
}

/// The newest complete checkpoint.
pub fn latest(checkpoints: &Path) -> Option<PathBuf> {
    list(checkpoints).pop().map(|(_, p)| p)
}

/// The checkpoint evaluation should use: the best one when `best.json` names one that is
/// present, else the newest.
pub fn for_inference(checkpoints: &Path) -> Option<PathBuf> {
    let best = std::fs::read_to_string(checkpoints.join("best.json"))
        .ok()
        .and_then(|t| serde_json::from_str::<Best>(&t).ok())
        .map(|b| step_dir(checkpoints, b.step))
        .filter(|p| p.join("state.json").is_file());
    best.or_else(|| latest(checkpoints))
}

fn io(path: &Path, e: std::io::Error) -> TrainError {
    TrainError::Io {
        path: path.to_path_buf(),
        source: e,
    }
}

fn rec(path: &Path, e: impl std::fmt::Display) -> TrainError {
    TrainError::Checkpoint {
        path: path.to_path_buf(),
        detail: e.to_string(),
    }
}

/// Writes a checkpoint atomically and removes older ones beyond the `keep` newest (the
/// best one is always kept). Returns its directory.
pub fn save<B: AutodiffBackend>(
    checkpoints: &Path,
    model: &System<B>,
    optim: &AnyOptimizer<System<B>, B>,
    inner: &[(&str, &AnyOptimizer<System<B>, B>)],
    state: &TrainState,
    keep: usize,
) -> Result<PathBuf, TrainError> {
    std::fs::create_dir_all(checkpoints).map_err(|e| io(checkpoints, e))?;
    let tmp = checkpoints.join(format!(
        ".tmp-step-{:08}-{}",
        state.step,
        std::process::id()
    ));
    if tmp.exists() {
        std::fs::remove_dir_all(&tmp).map_err(|e| io(&tmp, e))?;
    }
    std::fs::create_dir_all(&tmp).map_err(|e| io(&tmp, e))?;
    model
        .clone()
        .save_file(tmp.join("model"), &Rec::new())
        .map_err(|e| rec(&tmp, e))?;
    optim.save(&tmp.join("optim")).map_err(|e| rec(&tmp, e))?;
    for (task, o) in inner {
        o.save(&tmp.join(inner_name(task)))
            .map_err(|e| rec(&tmp, e))?;
    }
    let json = serde_json::to_string_pretty(state).map_err(|e| rec(&tmp, e))?;
    harness_core::fsutil::write_atomic(&tmp.join("state.json"), json.as_bytes())
        .map_err(|e| io(&tmp, e))?;
    let dest = step_dir(checkpoints, state.step);
    if dest.exists() {
        std::fs::remove_dir_all(&dest).map_err(|e| io(&dest, e))?;
    }
    std::fs::rename(&tmp, &dest).map_err(|e| io(&dest, e))?;
    if let Some(best) = &state.best {
        let json = serde_json::to_string_pretty(best).map_err(|e| rec(&dest, e))?;
        harness_core::fsutil::write_atomic(&checkpoints.join("best.json"), json.as_bytes())
            .map_err(|e| io(checkpoints, e))?;
    }
    let best_step = state.best.as_ref().map(|b| b.step);
    let all = list(checkpoints);
    let n = all.len();
    for (i, (step, path)) in all.into_iter().enumerate() {
        if i + keep < n && Some(step) != best_step {
            std::fs::remove_dir_all(&path).map_err(|e| io(&path, e))?;
        }
    }
    Ok(dest)
}

/// Reads a checkpoint's `state.json`.
pub fn read_state(dir: &Path) -> Result<TrainState, TrainError> {
    let p = dir.join("state.json");
    let text = std::fs::read_to_string(&p).map_err(|e| io(&p, e))?;
    serde_json::from_str(&text).map_err(|e| rec(&p, e))
}

/// Loads a checkpoint's weights into `model` (which must have the same architecture).
pub fn load_model<B: Backend>(
    dir: &Path,
    model: System<B>,
    device: &B::Device,
) -> Result<System<B>, TrainError> {
    // Through the model crate's loader: it also reads checkpoints of the layout before
    // encoders became an enum, so a run started by an older harness resumes.
    harness_model::trained::load_weights(model, &dir.join("model"), device).map_err(|e| {
        TrainError::Checkpoint {
            path: dir.join("model.mpk"),
            detail: e.to_string(),
        }
    })
}

/// The file stem of the inner optimizer of task `task` (its inner loop).
fn inner_name(task: &str) -> String {
    format!("optim-inner-{task}")
}

/// Loads a checkpoint's inner optimizer of task `task`, if it saved one.
pub fn load_inner<B: AutodiffBackend>(
    dir: &Path,
    task: &str,
    optim: AnyOptimizer<System<B>, B>,
    device: &B::Device,
) -> Result<AnyOptimizer<System<B>, B>, TrainError> {
    let stem = dir.join(inner_name(task));
    if !stem.with_extension("mpk").is_file() {
        return Ok(optim);
    }
    optim
        .load(&stem, device)
        .map_err(|e| rec(&stem.with_extension("mpk"), e))
}

/// Loads a checkpoint's optimizer state.
pub fn load_optim<B: AutodiffBackend>(
    dir: &Path,
    optim: AnyOptimizer<System<B>, B>,
    device: &B::Device,
) -> Result<AnyOptimizer<System<B>, B>, TrainError> {
    optim
        .load(&dir.join("optim"), device)
        .map_err(|e| rec(&dir.join("optim.mpk"), e))
}
