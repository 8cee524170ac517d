//! harness — reproduce, extend and compare multilingual sentence-embedding systems from one
//! YAML recipe. This root package is the command layer: [`cli`] parses, [`commands`] holds one
//! file per verb, the only code that prints final output and picks exit codes. Everything
//! else is a crate under `crates/`, one per layer of `../shared/DESIGN.md` (README, "Layout").
//! Each arrow is a dependency in a `Cargo.toml`, and every such dependency between the
//! workspace's packages is an arrow (`tests/crate_graph.rs` holds both to `cargo metadata`):
//!
//! ```text
//! harness (commands) ─▶ sweep, report, train, encoders, bench, model, embed, data, recipe, kernels, core
//! sweep              ─▶ report, bench, recipe, core
//! report             ─▶ bench, data, recipe, core
//! train              ─▶ encoders, bench, model, embed, data, recipe, core
//! encoders           ─▶ model, embed, data, core
//! bench              ─▶ embed, data, recipe, kernels, core
//! model              ─▶ embed, data, recipe, kernels, core
//! embed              ─▶ data, core
//! data               ─▶ recipe, core
//! recipe             ─▶ core
//! kernels, core         (no other crate of the workspace)
//! ```

pub mod cli;
pub mod commands;
pub mod fuzz;
