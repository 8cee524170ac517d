//! Training: a recipe's tasks and losses become one burn training program (custom loop:
//! forward → weighted sum of the task losses → backward → optimizer step), generic over
//! the backend; CPU (ndarray) by default, CUDA behind `--features cuda`.
//!
//! ```text
//! recipe ─ run::prepare ─▶ corpora (filtered) + tokenizer + Plan (tasks, batches, mixture)
//!        ─ trainer::train ─▶ checkpoints/, train/metrics.jsonl ─ bench ─▶ results/
//! ```

pub mod batch;
pub mod checkpoint;
pub mod data;
pub mod error;
pub mod export;
pub mod mixture;
pub mod objectives;
pub mod optim;
pub mod run;
pub mod trainer;

pub use error::TrainError;
