//! `harness nightly CONFIG` (issue 30): an append-only history of dated nights, each the
//! results (with per-item outcomes) of a configuration's entries and the environment they
//! ran in; a regression rule for accuracy-style metrics (direction, minimum effect, paired
//! bootstrap over test items and seeds, step detection); and the morning report (Markdown,
//! self-contained HTML, terminal) with an exit status for cron.
//!
//! ```text
//! nightly/<config>.yaml ─ config ─ plan (every entry resolved and checked: exit 2 before
//!   anything runs) ─▶ entries × seeds ─ night (child `harness train/eval`)
//!   ─▶ <store>/<config>/<date>-<commit8>/ (night.json, results + items, report, sealed last
//!   by SHA256SUMS) ─ store (verified) ─▶ history ─ rule + morning ─▶ report.{md,html,txt},
//!   exit 0 / 3 / 1
//! ```

pub mod ack;
pub mod compare;
pub mod config;
pub mod morning;
pub mod night;
pub mod plan;
pub mod plant;
pub mod rule;
pub mod store;
