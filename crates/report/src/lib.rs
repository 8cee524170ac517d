//! harness-report: every table of the five papers, the published numbers next to the ones
//! measured here. Uses: harness-core, harness-recipe, harness-data, harness-bench (result
//! files and benchmark names); never a model or the trainer.
//!
//! ```text
//! benchmarks/tables/*.yaml ─ spec ─▶ TableSpec ┐
//! run dirs / result dirs ─ runs ─▶ Inputs ─────┴─ table ─▶ RenderedTable ─ render ─▶ report.md,
//!                                   └─ provenance ─▶ Provenance ┘        report.html, cells.csv,
//!                                                                        tables/*.csv, charts/*.svg
//! ```
//! `mteb`: a run's results in MTEB's result-file layout (`harness export-results --format
//! mteb`), for the benchmarks MTEB has.
//!
//! Published numbers are data typed from the papers (each spec names its source);
//! measured numbers only ever come from result files, and `cells.csv` names the file and
//! JSON field of each one.

pub mod ablation;
pub mod charts;
pub mod error;
pub mod mteb;
pub mod provenance;
pub mod render;
pub mod runs;
pub mod spec;
pub mod table;

pub use error::ReportError;

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

/// What `render_report` produced.
#[derive(Debug, Clone)]
pub struct ReportSummary {
    pub out_dir: PathBuf,
    pub files: Vec<PathBuf>,
    pub tables: usize,
    /// Systems found in the inputs.
    pub systems: Vec<String>,
    /// Measured cells with a number, all measured cells, and the empty ones by reason.
    pub filled: usize,
    pub measured: usize,
    pub na: usize,
    pub not_run: usize,
    pub failed: usize,
    pub warnings: Vec<String>,
    /// The tables as terminal text (tabled).
    pub terminal: String,
}

/// Renders the report of `run_dirs` (run directories or result directories, optionally
/// `NAME=DIR`) for `tables` (all when empty) into `out_dir`: report.md, report.html,
/// cells.csv, tables/*.csv, charts/*.svg. `harness run` calls it with the recipe's
/// `report:` list and `<run dir>/report`. Files in `out_dir` that harness did not write are
/// left alone (one in the way is refused), unless `out_dir` is a run directory's own
/// `report/` folder.
pub fn render_report(
    run_dirs: &[PathBuf],
    tables: &[String],
    out_dir: &Path,
    known: &harness_recipe::Known,
) -> Result<ReportSummary, ReportError> {
    let specs = spec::select(spec::load()?, tables)?;
    let inputs = runs::load_inputs(run_dirs, known)?;
    let mut warnings = inputs.warnings.clone();
    let named: BTreeSet<&str> = specs.iter().flat_map(|s| s.system_names()).collect();
    for id in inputs.systems.keys() {
        if !named.contains(id.as_str()) {
            warnings.push(format!(
                "system `{id}` has results but no row in the selected tables; add it to `systems:` in benchmarks/tables/*.yaml (or name it `NAME=DIR` after a listed system)"
            ));
        }
    }
    let rendered = table::build(&specs, &inputs);
    let report = render::Report {
        provenance: provenance::collect(&inputs)?,
        tables: rendered,
        warnings: warnings.clone(),
    };
    let owned = run_dirs
        .iter()
        .any(|d| d.join("report") == out_dir && d.join("results").is_dir());
    let files = render::write_all(&report, out_dir, owned)?;
    Ok(ReportSummary {
        out_dir: out_dir.to_path_buf(),
        files,
        tables: report.tables.len(),
        systems: inputs.systems.keys().cloned().collect(),
        filled: report.tables.iter().map(|t| t.filled).sum(),
        measured: report.tables.iter().map(|t| t.measured).sum(),
        na: report.tables.iter().map(|t| t.na).sum(),
        not_run: report.tables.iter().map(|t| t.not_run).sum(),
        failed: report.tables.iter().map(|t| t.failed).sum(),
        warnings,
        terminal: render::terminal(&report),
    })
}

/// Renders a generated table (no spec names its rows in advance): one row per system of
/// `run_dirs` (a system given by several directories has them as replicates: mean ± std),
/// one column per metric, Δ against the first row. Written like `render_report`'s output.
pub fn render_generated(
    run_dirs: &[PathBuf],
    metrics: &[ablation::Metric],
    out_dir: &Path,
    known: &harness_recipe::Known,
) -> Result<ReportSummary, ReportError> {
    let inputs = runs::load_inputs(run_dirs, known)?;
    // Rows in the order the directories were given.
    let mut order: Vec<String> = Vec::new();
    for s in inputs.systems.values() {
        if !order.contains(&s.id) {
            order.push(s.id.clone());
        }
    }
    let first_arg = |id: &str| {
        let s = &inputs.systems[id];
        run_dirs
            .iter()
            .position(|a| {
                s.sources.iter().any(|src| {
                    let a = a.to_string_lossy();
                    let a = a.rsplit_once('=').map_or(a.as_ref(), |(_, p)| p);
                    src.results_dir.starts_with(a) || Path::new(a) == src.results_dir
                })
            })
            .unwrap_or(usize::MAX)
    };
    order.sort_by_key(|id| first_arg(id));
    let rows: Vec<ablation::AblationRow> = order
        .iter()
        .enumerate()
        .map(|(i, id)| ablation::AblationRow {
            label: id.clone(),
            is_baseline: i == 0,
            replicates: inputs.systems[id]
                .sources
                .iter()
                .map(|src| ablation::Replicate {
                    label: src
                        .run_dir
                        .as_ref()
                        .unwrap_or(&src.results_dir)
                        .display()
                        .to_string(),
                    results_dir: src.results_dir.clone(),
                    failed: None,
                })
                .collect(),
        })
        .collect();
    let table = ablation::build(
        "generated",
        "Generated table",
        vec!["Rows: the systems of the given directories (a system given by several directories is averaged over them); Δ against the first row.".into()],
        &rows,
        metrics,
    );
    let report = render::Report {
        provenance: provenance::collect(&inputs)?,
        tables: vec![table],
        warnings: inputs.warnings.clone(),
    };
    let files = render::write_all(&report, out_dir, false)?;
    let t = &report.tables[0];
    Ok(ReportSummary {
        out_dir: out_dir.to_path_buf(),
        files,
        tables: 1,
        systems: order,
        filled: t.filled,
        measured: t.measured,
        na: t.na,
        not_run: t.not_run,
        failed: t.failed,
        warnings: report.warnings.clone(),
        terminal: render::terminal(&report),
    })
}

/// The default output directory: `<RUN_DIR>/report` for a single run directory (one with
/// `results/` inside), `./report` otherwise.
pub fn default_out_dir(run_dirs: &[PathBuf]) -> PathBuf {
    match run_dirs {
        [one] if one.join("results").is_dir() => one.join("report"),
        _ => PathBuf::from("report"),
    }
}
