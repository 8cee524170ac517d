//! harness-sweep: ablation sweeps from a grid file. Uses harness-core, harness-recipe,
//! harness-bench (benchmark names) and harness-report (rendering); never a model or the
//! trainer: a point runs through the `harness run` path, as a child process of the binary
//! or as a Slurm array task.
//!
//! ```text
//! grids/*.yaml ─ grid ─▶ Grid ─ expand ─▶ configs × seeds ─ plan ─▶ Sweep (resolved points,
//!   run directories keyed by fingerprint) ─ run ─▶ run directories + status.json ledger
//!   ─ report ─▶ ablation table (mean ± std, Δ), charts, paper table   |  ─ slurm ─▶ job arrays
//! ```

pub mod grid;
pub mod ledger;
pub mod nightly;
pub mod plan;
pub mod report;
pub mod run;
pub mod slurm;
pub mod slurm_train;

pub use grid::Grid;
pub use plan::{plan, Sweep};
