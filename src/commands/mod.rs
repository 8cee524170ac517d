//! The commands: one file per verb, each holding its clap arguments and its `run`. This is
//! the only code that prints final output and chooses exit codes (0 success, 1 a check found
//! problems or a benchmark failed, 2 a usage or setup error, 130 interrupted); the crates
//! below take plain typed options and return typed results.

pub mod corpora;
pub mod datasets;
pub mod embed;
pub mod eval;
pub mod export;
pub mod models;
pub mod report;
pub mod run;
pub mod sweep;
pub mod train;
pub mod validate;

use anyhow::Context;
use harness_core::rundir::{default_dir, RunDir, RunEnv};
use harness_core::settings::Settings;
use harness_recipe::{LoadOptions, Resolved};
use harness_train::session::Device;
use std::path::Path;

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

/// The run directory of a resolved recipe (`--out`, else `runs/<name>[-<profile>]-<fp8>`):
/// claimed (new, empty or a harness run directory), locked, refused when it holds
/// checkpoints of another recipe (`training`), and recorded (`recipe.resolved.yaml`,
/// `env.json`, with the training `device` when there is one).
pub fn open_run_dir(
    out: Option<&Path>,
    settings: &Settings,
    resolved: &Resolved,
    sets: &[String],
    training: Option<Device>,
) -> anyhow::Result<RunDir> {
    let path = out.map(Path::to_path_buf).unwrap_or_else(|| {
        default_dir(
            &settings.runs_dir,
            &resolved.recipe.name,
            resolved.profile.as_deref(),
            resolved.fingerprint.short(),
        )
    });
    harness_core::note!("run directory: {}", path.display());
    let dir = RunDir::open(&path)?;
    let mut env = RunEnv::new(
        &resolved.recipe.name,
        &resolved.fingerprint.0,
        resolved.profile.clone(),
        sets,
        harness_data::lock::Lock::embedded_digest(),
    );
    if let Some(device) = training {
        harness_train::session::refuse_other_recipe(dir.path(), resolved)?;
        env.backend = device.backend().into();
        env.device = device.name();
    }
    dir.record(&resolved.to_yaml()?, &env)?;
    Ok(dir)
}
