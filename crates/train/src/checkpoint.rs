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
    // The run's `checkpoints/` is harness's own folder: a link there is refused, not
    // written through.
    let base = harness_core::fsutil::parent_dir(checkpoints);
    let name = checkpoints.file_name().unwrap_or_default();
    harness_core::nofollow::Dir::open_below(base, Path::new(name), true)
        .map_err(|e| io(checkpoints, e))?;
    remove_dead_partials(checkpoints);
    // The previous checkpoint's size is what the next one needs (same model, same
    // optimizer); refusing before writing leaves the disk as it was.
    let need = check_room(checkpoints)?;
    let tmp = checkpoints.join(format!(
        ".tmp-step-{:08}-{}",
        state.step,
        std::process::id()
    ));
    if tmp.exists() {
        std::fs::remove_dir_all(&tmp).map_err(|e| io(&tmp, e))?;
    }
    std::fs::create_dir_all(&tmp).map_err(|e| io(&tmp, e))?;
    if let Err(e) = write_files(&tmp, model, optim, inner, state) {
        // The MessagePack writer hides the operating system's error; a disk with (almost)
        // nothing left free when the write failed is the likely cause, and the one worth
        // naming. Measured before the partial files are removed (which frees the space).
        let free_then = free_space(checkpoints);
        let written = dir_size(&tmp);
        // A half-written checkpoint is harness's own and useless: remove it so that it
        // does not hold the space it ran out of.
        let _ = std::fs::remove_dir_all(&tmp);
        return Err(match free_then {
            Some(then) if then < LOW_SPACE => {
                disk_full(checkpoints, need.unwrap_or(written).max(written), then)
            }
            _ => e,
        });
    }
    let dest = step_dir(checkpoints, state.step);
    if dest.exists() {
        std::fs::remove_dir_all(&dest).map_err(|e| io(&dest, e))?;
    }
    std::fs::rename(&tmp, &dest).map_err(|e| io(&dest, e))?;
    if let Some(best) = &state.best {
        let json = serde_json::to_string_pretty(best).map_err(|e| rec(&dest, e))?;
        harness_core::nofollow::write_atomic(&checkpoints.join("best.json"), json.as_bytes())
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

/// Removes the half-written checkpoints (`.tmp-step-NNNNNNNN-<pid>`) of processes that
/// are gone (killed during a write); a live writer's is left alone. Best effort.
fn remove_dead_partials(checkpoints: &Path) {
    let Ok(entries) = std::fs::read_dir(checkpoints) else {
        return;
    };
    for e in entries.flatten() {
        let name = e.file_name();
        let Some(pid) = name
            .to_str()
            .and_then(|n| n.strip_prefix(".tmp-step-"))
            .and_then(|r| r.rsplit_once('-'))
            .and_then(|(_, pid)| pid.parse::<u32>().ok())
        else {
            continue;
        };
        if pid != std::process::id() && !harness_core::fsutil::process_alive(pid) {
            let _ = std::fs::remove_dir_all(e.path());
        }
    }
}

/// The size of the newest checkpoint, the room the next one needs; an error when the disk
/// has less free.
fn check_room(checkpoints: &Path) -> Result<Option<u64>, TrainError> {
    let need = list(checkpoints).last().map(|(_, p)| dir_size(p));
    if let (Some(need), Some(free)) = (need, free_space(checkpoints)) {
        if free < need {
            return Err(disk_full(checkpoints, need, free));
        }
    }
    Ok(need)
}

/// Below this much free space a failed write is reported as a full disk.
const LOW_SPACE: u64 = 64 << 20;

/// The model, optimizer and state files of a checkpoint, into `dir`.
fn write_files<B: AutodiffBackend>(
    dir: &Path,
    model: &System<B>,
    optim: &AnyOptimizer<System<B>, B>,
    inner: &[(&str, &AnyOptimizer<System<B>, B>)],
    state: &TrainState,
) -> Result<(), TrainError> {
    model
        .clone()
        .save_file(dir.join("model"), &Rec::new())
        .map_err(|e| rec(dir, e))?;
    optim.save(&dir.join("optim")).map_err(|e| rec(dir, e))?;
    for (task, o) in inner {
        o.save(&dir.join(inner_name(task)))
            .map_err(|e| rec(dir, e))?;
    }
    let json = serde_json::to_string_pretty(state).map_err(|e| rec(dir, e))?;
    harness_core::nofollow::write_atomic(&dir.join("state.json"), json.as_bytes())
        .map_err(|e| io(dir, e))
}

fn disk_full(path: &Path, need: u64, free: u64) -> TrainError {
    TrainError::DiskFull {
        path: path.to_path_buf(),
        need_mib: need.div_ceil(1 << 20),
        free_mib: free >> 20,
    }
}

/// Bytes in the files directly inside `dir` (a checkpoint has no subdirectories).
fn dir_size(dir: &Path) -> u64 {
    std::fs::read_dir(dir)
        .map(|rd| {
            rd.flatten()
                .filter_map(|e| e.metadata().ok())
                .filter(|m| m.is_file())
                .map(|m| m.len())
                .sum()
        })
        .unwrap_or(0)
}

use harness_core::fsutil::free_space;

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

#[cfg(test)]
mod tests {
    use super::*;

    fn fake_checkpoint(checkpoints: &Path, step: u64, bytes: u64) {
        let dir = step_dir(checkpoints, step);
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join("state.json"), "{}").unwrap();
        // Sparse: its length counts, its blocks are never written.
        let f = std::fs::File::create(dir.join("model.mpk")).unwrap();
        f.set_len(bytes).unwrap();
    }

    #[test]
    fn half_written_checkpoints_of_dead_processes_are_removed() {
        let t = tempfile::tempdir().unwrap();
        let dead = t.path().join(".tmp-step-00000004-4194305");
        let live = t.path().join(".tmp-step-00000004-1");
        let other = t.path().join("notes");
        for d in [&dead, &live, &other] {
            std::fs::create_dir_all(d).unwrap();
            std::fs::write(d.join("model.mpk"), b"half").unwrap();
        }
        remove_dead_partials(t.path());
        assert!(!dead.exists());
        assert!(live.exists() && other.exists());
    }

    #[test]
    fn the_next_checkpoint_needs_the_size_of_the_last_one() {
        let t = tempfile::tempdir().unwrap();
        assert_eq!(check_room(t.path()).unwrap(), None);
        fake_checkpoint(t.path(), 2, 1000);
        assert_eq!(check_room(t.path()).unwrap(), Some(1002));
    }

    #[cfg(unix)]
    #[test]
    fn a_checkpoint_larger_than_the_free_space_is_refused_before_writing() {
        let t = tempfile::tempdir().unwrap();
        let free = free_space(t.path()).expect("statvfs of a temporary directory");
        fake_checkpoint(t.path(), 4, free + (1 << 30));
        let e = check_room(t.path()).unwrap_err();
        assert!(matches!(e, TrainError::DiskFull { .. }), "{e}");
        let msg = e.to_string();
        assert!(
            msg.contains("the disk is full") && msg.contains("Fix:"),
            "{msg}"
        );
    }
}
