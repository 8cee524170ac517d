//! harness — reproduce, extend and compare multilingual sentence-embedding systems from one
//! YAML recipe. This root package is the command layer: [`cli`] parses, [`commands`] holds one
//! file per verb, the only code that prints final output and picks exit codes. Everything
//! else is a crate under `crates/`, one per layer of `../shared/DESIGN.md` (README, "Layout"):
//!
//! ```text
//! harness (commands) ─▶ report ─▶ train ─▶ encoders ─▶ model ─┐
//!                              └▶ bench ───────────────────────┴▶ embed ─▶ data ─▶ recipe ─▶ core
//! ```

pub mod cli;
pub mod commands;
pub mod fuzz;
