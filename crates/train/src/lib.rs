//! harness-train: a recipe's tasks and losses become one burn training program (custom loop:
//! forward → weighted sum of the task losses → backward → optimizer step), generic over
//! the backend; CPU (ndarray) by default, CUDA behind `--features cuda`.
//!
//! ```text
//! recipe ─ session::prepare ─▶ corpora (filtered) + tokenizer + Plan (tasks, batches, mixture)
//!        ─ trainer::train ─▶ checkpoints/, train/metrics.jsonl ─ bench ─▶ results/
//! ```
//! The run directory itself (claimed, locked, `env.json`) is `harness_core::rundir`'s; the
//! command layer opens it and hands it here. Uses: harness-core, harness-recipe,
//! harness-data, harness-embed, harness-model, harness-bench (the best-checkpoint metric).

pub mod batch;
pub mod binarize;
pub mod capability;
pub mod checkpoint;
pub mod corpora;
pub mod data;
pub mod error;
pub mod export;
pub mod export_st;
pub mod files_corpus;
pub mod fused_adam;
pub mod hard_negatives;
pub mod local_world;
pub mod mixture;
#[cfg(feature = "mpi")]
pub mod mpi_world;
pub mod objectives;
pub mod optim;
pub mod parallel;
pub mod plan;
pub mod session;
pub mod shape_ordered;
pub mod step;
pub mod streamed;
pub mod task_data;
pub mod tokenizer;
pub mod trainer;

pub use error::TrainError;
