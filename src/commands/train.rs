//! `harness train RECIPE`: trains a recipe into its run directory (tokenizer, corpora counts,
//! checkpoints, `train/metrics.jsonl`), resuming from the newest checkpoint.

use clap::Args;
use harness_core::device::Device;
use harness_core::settings::Settings;
use harness_recipe::Resolved;
use harness_train::session::Trained;
use std::path::PathBuf;
use std::process::ExitCode;

#[derive(Debug, Args)]
pub struct TrainArgs {
    /// Recipe file (YAML)
    pub recipe: PathBuf,
    /// Apply this profile of the recipe
    #[arg(long)]
    pub profile: Option<String>,
    /// Override one key: `--set train.steps=100` (repeatable; value parsed as YAML)
    #[arg(long = "set", value_name = "KEY=VALUE")]
    pub sets: Vec<String>,
    /// Run directory (default: `<runs_dir>/<recipe>-<fingerprint8>`)
    #[arg(long)]
    pub out: Option<PathBuf>,
    /// `cpu` (burn-ndarray), `flex` (burn-flex, a build made with `--features flex`),
    /// `cuda:N` (a build made with `--features cuda`) or `wgpu` (Vulkan, Metal, DirectX 12:
    /// a build made with `--features wgpu`); several of one kind separated by commas
    /// (`cpu,cpu`, `cuda:0,cuda:1`) train data-parallel, one model copy per device
    #[arg(long, default_value = "cpu")]
    pub device: String,
    /// Stop after this many steps in all, as if killed (only the checkpoints already due
    /// are on disk); the next call resumes from the newest. 0 prepares the corpora and the
    /// tokenizer and trains nothing
    #[arg(long, value_name = "STEPS")]
    pub stop_after: Option<u64>,
}

/// `harness train`.
pub fn run(args: &TrainArgs, settings: &Settings) -> anyhow::Result<ExitCode> {
    // Every device problem is refused before any work.
    let devices = Device::parse_list(&args.device, &super::compiled())?;
    let resolved = super::load_recipe(&args.recipe, args.profile.clone(), &args.sets)?;
    #[cfg(feature = "mpi")]
    if harness_train::mpi_world::launched() {
        return train_mpi(&resolved, &devices, args, settings);
    }
    super::on_device(devices[0], || {
        let (_dir, trained) = train(&resolved, &devices, args, settings)?;
        Ok(exit_code(&trained))
    })
}

/// `harness train` as one rank of an MPI job (`mpirun -np N harness train …`, `srun
/// --mpi=pmix harness train …`): rank 0 claims, locks and writes the run directory and
/// prints the outcome; the other ranks prepare into a temporary folder of their own and
/// write nothing. A rank that fails exits without `MPI_Finalize`, which makes the launcher
/// stop the others; every rank finalises after a whole session.
#[cfg(feature = "mpi")]
fn train_mpi(
    resolved: &Resolved,
    devices: &[Device],
    args: &TrainArgs,
    settings: &Settings,
) -> anyhow::Result<ExitCode> {
    if devices.len() > 1 {
        anyhow::bail!(
            "--device {}: under MPI each process trains on one device. Fix: start one process per device (`mpirun -np N`) and leave --device out",
            args.device
        );
    }
    let world = harness_train::mpi_world::init()?;
    let path = super::run_dir_path(args.out.as_deref(), settings, resolved);
    let (dir, own) = if world.rank == 0 {
        let dir = super::open_run_dir(
            args.out.as_deref(),
            settings,
            resolved,
            &args.sets,
            Some(devices[0]),
        )?;
        (Some(dir), None)
    } else {
        (None, Some(tempfile::tempdir()?))
    };
    let prepare_dir = match (&dir, &own) {
        (Some(d), _) => d.path().to_path_buf(),
        (None, Some(t)) => t.path().to_path_buf(),
        (None, None) => unreachable!("one of the two is set above"),
    };
    let trained = harness_train::session::train_mpi(
        resolved,
        &path,
        &prepare_dir,
        settings,
        devices[0],
        args.stop_after,
        world,
    )?;
    if world.rank == 0 {
        print_outcome(&trained);
    }
    drop(dir);
    harness_train::mpi_world::finish();
    Ok(exit_code(&trained))
}

/// Opens the run directory of a resolved recipe and trains it there; the directory stays
/// locked as long as the returned [`RunDir`](harness_core::rundir::RunDir) lives. Several
/// `devices` (of one backend) train data-parallel; `env.json` records the first.
pub fn train(
    resolved: &Resolved,
    devices: &[Device],
    args: &TrainArgs,
    settings: &Settings,
) -> anyhow::Result<(harness_core::rundir::RunDir, Trained)> {
    let dir = super::open_run_dir(
        args.out.as_deref(),
        settings,
        resolved,
        &args.sets,
        devices.first().copied(),
    )?;
    let trained = harness_train::session::train_on_devices(
        resolved,
        dir.path(),
        settings,
        devices,
        args.stop_after,
    )?;
    print_outcome(&trained);
    Ok((dir, trained))
}

/// 130 for an interrupted session (Ctrl-C), else success.
pub fn exit_code(t: &Trained) -> ExitCode {
    if t.outcome.interrupted {
        ExitCode::from(130)
    } else {
        ExitCode::SUCCESS
    }
}

/// Prints what a training session did (steps, tokens/s, last loss, checkpoint).
pub fn print_outcome(t: &Trained) {
    let o = &t.outcome;
    if t.plan_steps == 0 {
        // `train.steps: 0` is the untrained baseline: there is no loss or rate to report.
        println!(
            "no training steps (train.steps: 0): the encoder keeps its seeded initial weights"
        );
    } else {
        // A session that resumes a finished run trains no step and has no last loss.
        let last_loss = if o.last_loss.is_finite() {
            format!("; last loss {:.4}", o.last_loss)
        } else {
            String::new()
        };
        println!(
            "trained {}/{} steps{}: {} tokens in {:.1} s of training ({:.0} tokens/s){last_loss}",
            o.steps,
            t.plan_steps,
            if o.interrupted { " (interrupted)" } else { "" },
            o.session_tokens,
            o.session_seconds,
            o.tokens_per_second(),
        );
    }
    if let Some(c) = &o.checkpoint {
        println!("checkpoint: {}", c.display());
    }
}
