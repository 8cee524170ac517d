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

/// `harness train`'s command line: what `run` shares, and the Slurm job it can emit.
#[derive(Debug, Args)]
pub struct TrainCliArgs {
    #[command(flatten)]
    pub train: TrainArgs,
    #[command(flatten)]
    pub slurm: SlurmJobArgs,
}

/// `harness train --emit slurm`: one multi-node training job instead of training here.
#[derive(Debug, Args)]
#[command(next_help_heading = "Slurm job (--emit slurm)")]
pub struct SlurmJobArgs {
    /// Write a batch script for the cluster instead of training: `slurm` (one job of
    /// `--nodes` machines, one MPI rank per device; needs a build with `--features mpi`
    /// where it runs). `--out` then names the script's folder, and the run directory is the
    /// recipe's default one (under HARNESS_RUNS_DIR)
    #[arg(long, value_enum, value_name = "ENGINE")]
    pub emit: Option<super::sweep::EmitArg>,
    /// Machines of the job
    #[arg(long, default_value_t = 1, requires = "emit")]
    pub nodes: u32,
    /// GPUs per machine, one rank each (0: CPU ranks)
    #[arg(long, default_value_t = 0, requires = "emit")]
    pub gpus_per_node: u32,
    /// CPU ranks per machine when `--gpus-per-node` is 0 (default 1)
    #[arg(long, value_name = "N", requires = "emit")]
    pub tasks_per_node: Option<u32>,
    /// CPU cores of each rank
    #[arg(long, default_value_t = 1, requires = "emit")]
    pub cpus_per_task: u32,
    /// `#SBATCH --partition`
    #[arg(long, requires = "emit")]
    pub partition: Option<String>,
    /// `#SBATCH --account`
    #[arg(long, requires = "emit")]
    pub account: Option<String>,
    /// `#SBATCH --time` (`02:00:00`)
    #[arg(long, requires = "emit")]
    pub time: Option<String>,
    /// Write the script into a folder that holds other files too (never over them)
    #[arg(long, requires = "emit")]
    pub force: bool,
}

/// `harness train`.
pub fn run(cli: &TrainCliArgs, settings: &Settings) -> anyhow::Result<ExitCode> {
    let args = &cli.train;
    // Every device problem is refused before any work.
    let devices = Device::parse_list(&args.device, &super::compiled())?;
    let resolved = super::load_recipe(&args.recipe, args.profile.clone(), &args.sets)?;
    harness_train::session::check_devices(&resolved, &devices)?;
    if cli.slurm.emit.is_some() {
        return emit_slurm(args, &cli.slurm, &devices, &resolved, settings);
    }
    #[cfg(feature = "mpi")]
    if harness_train::mpi_world::launched() {
        return train_mpi(&resolved, &devices, args, settings);
    }
    refuse_ranks_without_mpi()?;
    super::on_device(devices[0], super::batch_tokens(&resolved), || {
        let (_dir, trained) = train(&resolved, &devices, args, settings)?;
        Ok(exit_code(&trained))
    })
}

/// `harness train` as one rank of an MPI job (`mpirun -np N harness train …`, `srun
/// --mpi=pmix harness train …`): [`train_as_rank`], then rank 0 prints the outcome and what
/// the collectives cost.
#[cfg(feature = "mpi")]
fn train_mpi(
    resolved: &Resolved,
    devices: &[Device],
    args: &TrainArgs,
    settings: &Settings,
) -> anyhow::Result<ExitCode> {
    match train_as_rank(resolved, devices, args, settings)? {
        Some((_dir, trained, _)) => Ok(exit_code(&trained)),
        None => Ok(ExitCode::SUCCESS),
    }
}

/// Trains as one rank of an MPI job: rank 0 claims, locks and writes the run directory and
/// prints the outcome and what the collectives cost; the other ranks prepare into a
/// temporary folder of their own and write nothing. Every rank finalises MPI after a whole
/// session (a rank that fails exits without `MPI_Finalize`, which makes the launcher stop
/// the others), so what rank 0 does afterwards (`harness run`'s evaluation) keeps no other
/// rank waiting. Rank 0 gets its run directory (still locked), the outcome and its device;
/// the others `None`.
#[cfg(feature = "mpi")]
pub fn train_as_rank(
    resolved: &Resolved,
    devices: &[Device],
    args: &TrainArgs,
    settings: &Settings,
) -> anyhow::Result<Option<(harness_core::rundir::RunDir, Trained, Device)>> {
    if devices.len() > 1 {
        anyhow::bail!(
            "--device {}: under MPI each process trains on one device. Fix: start one process per device (`mpirun -np N`) and leave --device out",
            args.device
        );
    }
    // `--device cuda` without an index: one GPU per rank of each machine.
    let device = match devices[0] {
        Device::Cuda(_) if args.device.trim() == "cuda" => {
            Device::Cuda(harness_train::mpi_world::local_gpu(
                harness_train::mpi_world::local_rank(),
                std::env::var("CUDA_VISIBLE_DEVICES").ok().as_deref(),
            ))
        }
        d => d,
    };
    let world = harness_train::mpi_world::init()?;
    let path = super::run_dir_path(args.out.as_deref(), settings, resolved);
    let (dir, own) = if world.rank == 0 {
        let dir = super::open_run_dir(
            args.out.as_deref(),
            settings,
            resolved,
            &args.sets,
            Some(device),
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
        device,
        args.stop_after,
        world,
    )?;
    harness_train::mpi_world::finish();
    match dir {
        Some(dir) => {
            print_outcome(&trained);
            print_traffic(&trained, harness_train::mpi_world::traffic(), world.size);
            Ok(Some((dir, trained, device)))
        }
        None => Ok(None),
    }
}

/// Refuses to train as one of several ranks that mpirun or srun started (Open MPI's
/// `OMPI_COMM_WORLD_SIZE`, PMI's `PMI_SIZE`, a Slurm job step's `SLURM_STEP_NUM_TASKS`) in
/// a build without MPI: each would train alone into the same run directory.
pub fn refuse_ranks_without_mpi() -> anyhow::Result<()> {
    if cfg!(feature = "mpi") {
        return Ok(());
    }
    let ranks: Option<u64> = ["OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "SLURM_STEP_NUM_TASKS"]
        .iter()
        .find_map(|k| std::env::var(k).ok()?.trim().parse().ok());
    if let Some(ranks) = ranks.filter(|&n| n > 1) {
        anyhow::bail!(
            "this process is one of {ranks} ranks started by mpirun or srun, but this harness was built without MPI: each rank would train alone into the same run directory. Fix: build with `cargo build --release --features mpi` (bash scripts/install-test-deps.sh mpi installs Open MPI), or start one process"
        );
    }
    Ok(())
}

/// Writes the Slurm batch script of one multi-node training job (`crate::slurm_train`):
/// every rank runs `harness train` on this recipe, with its profile and `--set`s, into the
/// recipe's default run directory (absolute), on `cpu` or, with GPUs, `cuda` (each rank
/// takes its machine's GPU of its local rank).
fn emit_slurm(
    args: &TrainArgs,
    slurm: &SlurmJobArgs,
    devices: &[Device],
    resolved: &Resolved,
    settings: &Settings,
) -> anyhow::Result<ExitCode> {
    use anyhow::Context;
    let Some(out) = &args.out else {
        anyhow::bail!(
            "--emit slurm writes a batch script into a folder: add `--out DIR` (the run directory is the recipe's default one)"
        );
    };
    if devices.len() > 1 {
        anyhow::bail!(
            "--device {}: each rank of the job trains on one device. Fix: give --gpus-per-node (or --tasks-per-node) instead of a device list",
            args.device
        );
    }
    let device = if slurm.gpus_per_node > 0 {
        "cuda".to_string()
    } else {
        match devices[0] {
            Device::Cuda(_) => anyhow::bail!(
                "--device {} without --gpus-per-node: the job would ask for no GPU. Fix: add --gpus-per-node G",
                args.device
            ),
            d => d.name(),
        }
    };
    let recipe = std::path::absolute(&args.recipe).context("resolving the recipe path")?;
    let run_dir = std::path::absolute(super::run_dir_path(None, settings, resolved))
        .context("resolving the run directory")?;
    let mut rank_args = vec!["train".to_string(), recipe.display().to_string()];
    if let Some(p) = &args.profile {
        rank_args.extend(["--profile".to_string(), p.clone()]);
    }
    for s in &args.sets {
        rank_args.extend(["--set".to_string(), s.clone()]);
    }
    if let Some(n) = args.stop_after {
        rank_args.extend(["--stop-after".to_string(), n.to_string()]);
    }
    rank_args.extend([
        "--out".to_string(),
        run_dir.display().to_string(),
        "--device".to_string(),
        device,
    ]);
    let shape = harness_sweep::slurm_train::JobShape {
        nodes: slurm.nodes,
        gpus_per_node: slurm.gpus_per_node,
        tasks_per_node: slurm.tasks_per_node.unwrap_or(slurm.gpus_per_node.max(1)),
        cpus_per_task: slurm.cpus_per_task,
        partition: slurm.partition.clone(),
        account: slurm.account.clone(),
        time: slurm.time.clone(),
    };
    let exe = std::env::current_exe().context("locating the harness binary")?;
    let workdir = std::env::current_dir().context("reading the current directory")?;
    let emitted = harness_sweep::slurm_train::emit(&harness_sweep::slurm_train::TrainJob {
        name: &resolved.recipe.name,
        args: &rank_args,
        shape: &shape,
        harness: &exe,
        workdir: &workdir,
        out,
        force: slurm.force,
    })?;
    println!(
        "one training job: {} node(s) × {} rank(s) ({} in all) into {}",
        shape.nodes,
        shape.tasks_per_node,
        shape.ranks(),
        run_dir.display()
    );
    for f in &emitted.files {
        println!("  {}", f.display());
    }
    println!("submit with: sbatch {}", emitted.script.display());
    if !cfg!(feature = "mpi") {
        harness_core::note!(
            "this harness was built without MPI: the job needs one built with `--features mpi` (each rank runs {})",
            exe.display()
        );
    }
    Ok(ExitCode::SUCCESS)
}

/// What the collectives cost rank 0 in this session: their share of the training time, and
/// the bytes each rank sent per step.
#[cfg(feature = "mpi")]
fn print_traffic(t: &Trained, traffic: harness_train::mpi_world::Traffic, ranks: usize) {
    let o = &t.outcome;
    if o.session_steps == 0 {
        return;
    }
    let share = if o.session_seconds > 0.0 {
        100.0 * traffic.seconds / o.session_seconds
    } else {
        0.0
    };
    println!(
        "MPI: {ranks} ranks; {} collectives, {:.2} MB per rank per step; {:.2} s of the {:.1} s of training in them ({share:.1} %)",
        traffic.calls,
        traffic.bytes as f64 / o.session_steps as f64 / 1e6,
        traffic.seconds,
        o.session_seconds,
    );
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

/// What a GPU run's closing line says of kernel tuning: whether its rate includes it.
pub fn tuned_note(keys: u64) -> String {
    match keys {
        0 => "; every kernel shape from the cache (no tuning in this run)".into(),
        1 => "; 1 kernel shape tuned in this run (kept for later runs)".into(),
        n => format!("; {n} kernel shapes tuned in this run (kept for later runs)"),
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
            "trained {}/{} steps{}: {} tokens in {:.1} s of training ({:.0} tokens/s){last_loss}{}",
            o.steps,
            t.plan_steps,
            if o.interrupted { " (interrupted)" } else { "" },
            o.session_tokens,
            o.session_seconds,
            o.tokens_per_second(),
            o.kernel_shapes_tuned.map(tuned_note).unwrap_or_default(),
        );
    }
    if let Some(c) = &o.checkpoint {
        println!("checkpoint: {}", c.display());
    }
}
