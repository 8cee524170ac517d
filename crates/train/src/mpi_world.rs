//! Training across processes, and so across machines, through MPI (the `mpi` crate over the
//! system's Open MPI or MPICH; cargo feature `mpi`). One process per device, launched by
//! `mpirun -np N harness train …` or `srun --mpi=pmix harness train …`: MPI gives each
//! process its rank and the world's size; the gradients of a step are summed over the ranks
//! in one buffer ([`sum_f32`], one `MPI_Allreduce` per step, not one per parameter), so that
//! every rank takes the same optimizer step (`crate::parallel` for the rule that makes the
//! weights equal to the one-process run's).
//!
//! Why not burn-collective's global strategies (burn's own collective operations across
//! processes): 0.21.0 hangs from the second operation (`src/global/node/sync.rs` clears a
//! copy of the synced peers) and burn removed the crate on its main branch (2026-05-08); no
//! release fixes it. Within one process, `crate::local_world` sums the peers' buffers.
//!
//! MPI is initialised with `MPI_THREAD_FUNNELED`: only the thread that called [`init`]
//! makes MPI calls, so the world lives in that thread's local storage (the handles are not
//! `Send`). [`finish`] calls `MPI_Finalize`; a process that exits without it is reported by
//! the launcher as failed.
//!
//! No hang: a collective that does not complete within [`timeout`] (a peer died or diverged
//! from the schedule) ends this process with an error naming the operation and the rank; the
//! launcher (`mpirun`, `srun`) then stops the others.

use crate::TrainError;
use mpi::collective::SystemOperation;
use mpi::traits::*;
use std::cell::RefCell;
use std::time::Duration;

/// This process's place in the world.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Rank {
    /// 0 for the process that writes the run directory.
    pub rank: usize,
    /// How many processes train together.
    pub size: usize,
}

struct World {
    // Dropped last: `MPI_Finalize`.
    comm: mpi::topology::SimpleCommunicator,
    _universe: mpi::environment::Universe,
}

thread_local! {
    static WORLD: RefCell<Option<World>> = const { RefCell::new(None) };
    static TRAFFIC: std::cell::Cell<Traffic> = const { std::cell::Cell::new(Traffic::ZERO) };
}

/// What this rank's collectives cost so far: how many, the bytes each rank contributed, and
/// the seconds spent in them (waiting for the slowest rank included).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Traffic {
    /// Collective calls.
    pub calls: u64,
    /// Bytes of this rank's buffers.
    pub bytes: u64,
    /// Seconds inside the calls.
    pub seconds: f64,
}

impl Traffic {
    const ZERO: Traffic = Traffic {
        calls: 0,
        bytes: 0,
        seconds: 0.0,
    };
}

/// This rank's collectives since [`init`] or the last [`reset_traffic`] ([`Traffic`]).
pub fn traffic() -> Traffic {
    TRAFFIC.with(|t| t.get())
}

/// Starts counting [`traffic`] afresh (after a barrier that waited for the slowest rank's
/// preparation, which is not the training's cost).
pub fn reset_traffic() {
    TRAFFIC.with(|t| t.set(Traffic::ZERO));
}

/// Whether a launcher started this process as one rank of an MPI job (Open MPI's
/// `OMPI_COMM_WORLD_SIZE`, a PMI or PMIx launcher's `PMI_SIZE`/`PMIX_RANK`, MPICH's Hydra
/// `MPI_LOCALNRANKS`). Read before [`init`], which a plain `harness train` never calls.
pub fn launched() -> bool {
    [
        "OMPI_COMM_WORLD_SIZE",
        "PMI_SIZE",
        "PMIX_RANK",
        "MPI_LOCALNRANKS",
    ]
    .iter()
    .any(|k| std::env::var_os(k).is_some())
}

/// This process's rank among those of its machine, as the launcher sets it (Open MPI's
/// `OMPI_COMM_WORLD_LOCAL_RANK`, Slurm's `SLURM_LOCALID`, MPICH's `MPI_LOCALRANKID`, PMIx's
/// `PMIX_LOCAL_RANK`); 0 when none does.
pub fn local_rank() -> usize {
    [
        "OMPI_COMM_WORLD_LOCAL_RANK",
        "SLURM_LOCALID",
        "MPI_LOCALRANKID",
        "PMIX_LOCAL_RANK",
    ]
    .iter()
    .find_map(|k| std::env::var(k).ok()?.trim().parse().ok())
    .unwrap_or(0)
}

/// The GPU index a rank trains on when `--device cuda` names none: its local rank among
/// the GPUs it can see (`CUDA_VISIBLE_DEVICES`, when the launcher bound some to it; all of
/// the machine's otherwise), so that the ranks of one machine take one GPU each.
pub fn local_gpu(local_rank: usize, visible: Option<&str>) -> usize {
    let count = visible
        .map(|v| v.split(',').filter(|d| !d.trim().is_empty()).count())
        .unwrap_or(0);
    if count > 0 {
        local_rank % count
    } else {
        local_rank
    }
}

/// How long one collective may take before this rank gives up: `HARNESS_MPI_TIMEOUT`
/// seconds, default 600 (a step's all-reduce takes milliseconds; the first waits for every
/// rank to have prepared its corpora).
pub fn timeout() -> Duration {
    let secs = std::env::var("HARNESS_MPI_TIMEOUT")
        .ok()
        .and_then(|v| v.parse::<u64>().ok())
        .filter(|&s| s > 0)
        .unwrap_or(600);
    Duration::from_secs(secs)
}

fn error(rank: usize, detail: impl Into<String>) -> TrainError {
    TrainError::PeerStopped {
        rank,
        detail: detail.into(),
    }
}

/// Initialises MPI on this thread and returns this process's rank; `Ok` of the same rank
/// when it already is.
pub fn init() -> Result<Rank, TrainError> {
    if let Some(r) = rank() {
        return Ok(r);
    }
    let Some((universe, _level)) = mpi::initialize_with_threading(mpi::Threading::Funneled) else {
        return Err(error(
            0,
            "MPI was initialised already by something else in this process",
        ));
    };
    let comm = universe.world();
    let r = Rank {
        rank: usize::try_from(comm.rank()).unwrap_or(0),
        size: usize::try_from(comm.size()).unwrap_or(1),
    };
    WORLD.with(|w| {
        *w.borrow_mut() = Some(World {
            comm,
            _universe: universe,
        })
    });
    Ok(r)
}

/// This process's rank, once [`init`] ran on this thread.
pub fn rank() -> Option<Rank> {
    WORLD.with(|w| {
        w.borrow().as_ref().map(|w| Rank {
            rank: usize::try_from(w.comm.rank()).unwrap_or(0),
            size: usize::try_from(w.comm.size()).unwrap_or(1),
        })
    })
}

/// `MPI_Finalize` (waits for every rank to get here). Nothing when MPI is not initialised.
pub fn finish() {
    WORLD.with(|w| drop(w.borrow_mut().take()));
}

/// Runs `op` on the world, ending the process with an error naming `what` if it does not
/// return within [`timeout`].
fn with_world<T>(
    what: &str,
    bytes: usize,
    op: impl FnOnce(&mpi::topology::SimpleCommunicator) -> T,
) -> Result<T, TrainError> {
    WORLD.with(|w| {
        let w = w.borrow();
        let Some(world) = w.as_ref() else {
            return Err(error(
                0,
                format!("{what}: MPI is not initialised on this thread"),
            ));
        };
        let rank = usize::try_from(world.comm.rank()).unwrap_or(0);
        let _watch = Watchdog::start(rank, what);
        let started = std::time::Instant::now();
        let out = op(&world.comm);
        let seconds = started.elapsed().as_secs_f64();
        TRAFFIC.with(|t| {
            let mut now = t.get();
            now.calls += 1;
            now.bytes += bytes as u64;
            now.seconds += seconds;
            t.set(now);
        });
        Ok(out)
    })
}

/// Sums `values` over the ranks, in place (every rank passes as many, in the same order).
/// `what` names the operation in a timeout's error.
pub fn sum_f32(what: &str, values: &mut [f32]) -> Result<(), TrainError> {
    with_world(what, 4 * values.len(), |c| {
        let send = values.to_vec();
        c.all_reduce_into(&send[..], values, SystemOperation::sum());
    })
}

/// The element-wise sum of `values` over the ranks. `what` names the operation in a
/// timeout's error.
pub fn sum_f64(what: &str, values: &[f64]) -> Result<Vec<f64>, TrainError> {
    with_world(what, 8 * values.len(), |c| {
        let mut out = vec![0.0; values.len()];
        c.all_reduce_into(values, &mut out[..], SystemOperation::sum());
        out
    })
}

/// Waits for every rank.
pub fn barrier() -> Result<(), TrainError> {
    with_world("barrier", 0, |c| c.barrier())
}

/// Ends the process if dropped later than [`timeout`] after it started: a collective that
/// never completes (a dead or diverged peer) must not hang the job. By hand: one thread and a
/// channel, not worth a crate.
struct Watchdog {
    done: Option<std::sync::mpsc::Sender<()>>,
}

impl Watchdog {
    fn start(rank: usize, what: &str) -> Watchdog {
        let (tx, rx) = std::sync::mpsc::channel::<()>();
        let what = what.to_string();
        let limit = timeout();
        std::thread::spawn(move || {
            if let Err(std::sync::mpsc::RecvTimeoutError::Timeout) = rx.recv_timeout(limit) {
                eprintln!(
                    "error: rank {rank}: the {what} did not complete within {} s: another rank stopped or diverged. Fix: see that rank's error above; raise HARNESS_MPI_TIMEOUT if a step is really that slow",
                    limit.as_secs()
                );
                std::process::exit(1);
            }
        });
        Watchdog { done: Some(tx) }
    }
}

impl Drop for Watchdog {
    fn drop(&mut self) {
        if let Some(tx) = self.done.take() {
            let _ = tx.send(());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_local_rank_takes_one_visible_gpu() {
        assert_eq!(local_gpu(3, None), 3);
        // Slurm bound one GPU to each task: it is the task's cuda:0.
        assert_eq!(local_gpu(3, Some("5")), 0);
        assert_eq!(local_gpu(3, Some("0,1")), 1);
        assert_eq!(local_gpu(2, Some("")), 2);
    }
}
