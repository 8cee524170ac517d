//! The commands: one file per verb, each holding its clap arguments and its `run`. This is
//! the only code that prints final output and chooses exit codes (0 success, 1 a check found
//! problems or a benchmark failed, 2 a usage or setup error, 130 interrupted); the crates
//! below take plain typed options and return typed results.

pub mod compare;
pub mod corpora;
pub mod datasets;
pub mod embed;
pub mod eval;
pub mod export;
pub mod export_results;
pub mod models;
pub mod nightly;
pub mod report;
pub mod run;
pub mod sweep;
pub mod train;
pub mod validate;

use anyhow::Context;
use harness_core::device::{Compiled, Device};
use harness_core::rundir::{default_dir, RunDir, RunEnv};
use harness_core::settings::Settings;
use harness_recipe::{LoadOptions, Resolved};
use std::path::Path;

/// The burn backends this binary was built with, for [`Device::parse`].
pub fn compiled() -> Compiled {
    Compiled {
        flex: cfg!(feature = "flex"),
        cuda: cfg!(feature = "cuda"),
        wgpu: cfg!(feature = "wgpu"),
    }
}

/// Runs `work` (training or encoding on `device`) so that a failed GPU becomes an error
/// naming `--device`: a panic on burn's device thread (recorded while `work` runs) or one
/// that reaches this thread; out of memory, its fix naming half of `batch_tokens` (the
/// recipe's `train.batch_tokens`, where it trains). On the CPU backends `work` simply runs.
pub fn on_device<T>(
    device: Device,
    batch_tokens: Option<u32>,
    work: impl FnOnce() -> anyhow::Result<T>,
) -> anyhow::Result<T> {
    if !device.is_gpu() {
        return work();
    }
    harness_core::device::watch_device_threads();
    if let Some(note) = harness_model::gpu::first_use_note(&device.to_string()) {
        harness_core::note!("{note}");
    }
    let result = std::panic::catch_unwind(std::panic::AssertUnwindSafe(work));
    let detail = match (result, harness_core::device::device_failure()) {
        (Ok(done), None) => return done,
        (Ok(Err(e)), Some(detail)) => match failed_step(&e) {
            Some(step) => format!("in training step {step}: {detail}"),
            None => detail,
        },
        (Ok(Ok(_)), Some(detail)) => detail,
        (Err(payload), thread) => {
            thread.unwrap_or_else(|| harness_core::device::panic_message(&*payload))
        }
    };
    Err(device.failed_batching(detail, batch_tokens).into())
}

/// The training step in which the trainer saw its device fail, where `e` says
/// ([`TrainError::DeviceFailed`](harness_train::TrainError::DeviceFailed); 0 is no step).
fn failed_step(e: &anyhow::Error) -> Option<u64> {
    e.chain().find_map(|c| match c.downcast_ref() {
        Some(harness_train::TrainError::DeviceFailed { step, .. }) if *step > 0 => Some(*step),
        _ => None,
    })
}

/// The recipe's `train.batch_tokens`, for [`on_device`]'s out-of-memory fix.
pub fn batch_tokens(resolved: &Resolved) -> Option<u32> {
    resolved.recipe.train.as_ref().and_then(|t| t.batch_tokens)
}

/// Loads and checks a recipe (base ⊕ profile ⊕ `--set`) against this build's names, once.
/// The names and capabilities of this build that a recipe is checked against: the benchmark
/// registry's and, for training recipes, what the trainer can train.
pub fn known() -> anyhow::Result<harness_recipe::Known> {
    let mut known = harness_bench::known()?;
    known.check_trainable = Some(harness_train::capability::untrainable);
    known.objectives = harness_train::objectives::schemas();
    Ok(known)
}

pub fn load_recipe(
    path: &Path,
    profile: Option<String>,
    sets: &[String],
) -> anyhow::Result<Resolved> {
    let opts = LoadOptions {
        profile,
        sets: sets.to_vec(),
    };
    harness_recipe::load_with(path, &opts, &known()?).with_context(|| {
        format!(
            "{} is not a valid recipe (run `harness validate` on it)",
            path.display()
        )
    })
}

/// Where the run directory of a resolved recipe is: `--out`, else
/// `runs/<name>[-<profile>]-<fp8>`.
pub fn run_dir_path(
    out: Option<&Path>,
    settings: &Settings,
    resolved: &Resolved,
) -> std::path::PathBuf {
    out.map(Path::to_path_buf).unwrap_or_else(|| {
        default_dir(
            &settings.runs_dir,
            &resolved.recipe.name,
            resolved.profile.as_deref(),
            resolved.fingerprint.short(),
        )
    })
}

/// The run directory of a resolved recipe (`--out`, else `runs/<name>[-<profile>]-<fp8>`):
/// claimed (new, empty or a harness run directory), locked, refused when it holds a run of
/// another resolved recipe, and recorded (`recipe.resolved.yaml`,
/// `env.json`, with the training `device` when there is one).
pub fn open_run_dir(
    out: Option<&Path>,
    settings: &Settings,
    resolved: &Resolved,
    sets: &[String],
    training: Option<Device>,
) -> anyhow::Result<RunDir> {
    let path = run_dir_path(out, settings, resolved);
    harness_core::note!("run directory: {}", path.display());
    let dir = RunDir::open_for(&path, &resolved.recipe.name, &resolved.fingerprint.0)?;
    let mut env = RunEnv::new(
        &resolved.recipe.name,
        &resolved.fingerprint.0,
        resolved.profile.clone(),
        sets,
        harness_data::lock::Lock::embedded_digest(),
    );
    env.isa = harness_kernels::isa::describe();
    if let Some(device) = training {
        harness_train::session::refuse_other_recipe(dir.path(), resolved)?;
        env.backend = device.backend().into();
        env.device = device.name();
    }
    dir.record(&resolved.to_yaml()?, &env)?;
    Ok(dir)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_failed_device_is_an_error_naming_it() {
        // The CPU backends run the work as it is.
        assert_eq!(on_device(Device::Cpu, None, || Ok(7)).unwrap(), 7);
        // A panic that reaches this thread.
        let e = on_device(Device::Wgpu, None, || -> anyhow::Result<()> {
            panic!("lost the device")
        })
        .unwrap_err()
        .to_string();
        assert!(
            e.starts_with("--device wgpu: the device failed") && e.contains("lost the device"),
            "{e}"
        );
        // A panic on another thread (burn's device thread), the work itself returning Ok.
        let e = on_device(Device::Wgpu, None, || {
            let _ = std::thread::spawn(|| panic!("validation error")).join();
            Ok(())
        })
        .unwrap_err()
        .to_string();
        assert!(
            e.starts_with("--device wgpu: the device failed") && e.contains("validation error"),
            "{e}"
        );
        // The trainer's error names the step it stopped in; a step 0 (none) is left out.
        for (step, said) in [(7, "(in training step 7: "), (0, "failed (thread")] {
            let e = on_device(Device::Wgpu, None, || -> anyhow::Result<()> {
                let _ = std::thread::spawn(|| panic!("validation error")).join();
                Err(harness_train::TrainError::DeviceFailed {
                    step,
                    detail: "burn's device thread failed".into(),
                }
                .into())
            })
            .unwrap_err()
            .to_string();
            assert!(e.contains(said), "{e}");
        }
    }
}
