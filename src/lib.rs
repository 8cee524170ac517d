//! harness — reproduce, extend and compare multilingual sentence-embedding systems from one
//! YAML recipe. See `DESIGN.md` (in `../shared`) and the README for the architecture; the
//! modules below follow it one concern each.

pub mod bench;
pub mod cli;
pub mod clock;
pub mod data;
pub mod fsutil;
pub mod model;
pub mod model_store;
pub mod outdir;
pub mod recipe;
pub mod report;
pub mod run;
pub mod settings;
pub mod stamp;
pub mod train;
