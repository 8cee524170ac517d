//! The sweep's report (`<sweep dir>/report/`): the ablation table (one row per grid
//! configuration, seeds aggregated as mean ± std and n, Δ against the baseline row, missing
//! and failed cells marked), a line chart per numeric axis and metric (bars when no axis is
//! numeric), the training curves of every run overlaid, and — where the paper has this
//! ablation — the paper's table from its spec, filled from the sweep's runs. Rendered by
//! harness-report (Markdown, HTML, CSV, terminal) like every other report.

use crate::grid::{Config, Direction, PaperTable};
use crate::ledger::{Ledger, State};
use crate::plan::Sweep;
use harness_report::ablation::{self, AblationRow, Metric, Replicate, Stats};
use harness_report::charts::{self, LineSeries, Series};
use harness_report::spec::Better;
use harness_report::table::{Chart, RenderedTable};
use harness_report::ReportError;
use serde_yaml::Value;
use std::path::PathBuf;

/// What was rendered.
#[derive(Debug, Clone)]
pub struct SweepReport {
    pub out_dir: PathBuf,
    pub files: Vec<PathBuf>,
    /// The tables as terminal text.
    pub terminal: String,
    /// Cells with a value / all cells of the ablation table, and the empty ones by reason.
    pub filled: usize,
    pub measured: usize,
    pub not_run: usize,
    pub failed: usize,
    pub charts: usize,
    pub warnings: Vec<String>,
}

/// The metrics of the table: the grid's, else each benchmark's headline score (direction
/// from the headline metric's name: error rates and Ψ are better lower).
pub fn metrics(sweep: &Sweep) -> Vec<Metric> {
    if !sweep.grid.file.metrics.is_empty() {
        return sweep
            .grid
            .file
            .metrics
            .iter()
            .map(|m| Metric {
                bench: m.bench.clone(),
                field: m.field.clone(),
                label: m.label(),
                better: match m.better {
                    Direction::Higher => Better::Higher,
                    Direction::Lower => Better::Lower,
                },
                scale: m.scale,
                decimals: m.decimals,
            })
            .collect();
    }
    let Some(first) = sweep.points.first() else {
        return Vec::new();
    };
    first
        .benches
        .iter()
        .map(|b| {
            let headline = sweep
                .points
                .iter()
                .find_map(|p| {
                    let text = std::fs::read_to_string(
                        p.run_dir.join("results").join(format!("{b}.json")),
                    )
                    .ok()?;
                    let j: serde_json::Value = serde_json::from_str(&text).ok()?;
                    j.get("main_metric")?.as_str().map(String::from)
                })
                .unwrap_or_default();
            let lower = headline.contains("error") || headline.contains("psi");
            Metric {
                bench: b.clone(),
                field: "main_score".into(),
                label: if headline.is_empty() {
                    b.clone()
                } else {
                    format!("{b} {headline}")
                },
                better: if lower { Better::Lower } else { Better::Higher },
                scale: 1.0,
                decimals: 2,
            }
        })
        .collect()
}

/// Rows of the ablation table: one per configuration, its points as replicates.
pub fn rows(sweep: &Sweep, ledger: &Ledger) -> Vec<AblationRow> {
    sweep
        .expansion
        .configs
        .iter()
        .enumerate()
        .map(|(ci, c)| AblationRow {
            label: c.alias.clone(),
            is_baseline: c.is_baseline,
            replicates: sweep
                .points
                .iter()
                .zip(&ledger.points)
                .filter(|(p, _)| p.point.config == ci)
                .map(|(p, e)| Replicate {
                    label: p.point.seed.map_or("run".into(), |s| format!("seed={s}")),
                    results_dir: p.run_dir.join("results"),
                    failed: (e.state == State::Failed)
                        .then(|| e.error.clone().unwrap_or_else(|| "failed".into())),
                })
                .collect(),
        })
        .collect()
}

/// `(x, mean, ±std)` of a line chart.
type Point = (f64, f64, Option<f64>);

fn number(v: &Value) -> Option<f64> {
    match v {
        Value::Number(n) => n.as_f64(),
        _ => None,
    }
}

/// A line chart per numeric axis and metric: x the axis value, y the mean over seeds with
/// ± std bars, one line per combination of the other axes' values.
fn axis_charts(sweep: &Sweep, rows: &[AblationRow], metrics: &[Metric]) -> Vec<Chart> {
    let mut out = Vec::new();
    for (key, short) in &sweep.expansion.axes {
        let Some(xs) = numeric_xs(&sweep.expansion.configs, key) else {
            continue; // not numeric, or a single value: nothing to draw a line through
        };
        for (mi, m) in metrics.iter().enumerate() {
            let st = ablation::column_stats(rows, m);
            let groups = line_groups(sweep, key, &xs, m, &st);
            if groups.is_empty() {
                continue;
            }
            out.push(line_chart(sweep, short, mi, m, groups));
        }
    }
    if out.is_empty() {
        // No numeric axis: one bar chart per metric over the configurations.
        out = bar_charts(sweep, rows, metrics);
    }
    out
}

/// Each configuration's value of axis `key` as a number; `None` when the axis is not
/// numeric or takes a single value.
fn numeric_xs(configs: &[Config], key: &str) -> Option<Vec<Option<f64>>> {
    let xs: Vec<Option<f64>> = configs
        .iter()
        .map(|c| {
            c.assignment
                .iter()
                .find(|(k, _)| k == key)
                .and_then(|(_, v)| number(v))
        })
        .collect();
    let present = configs
        .iter()
        .filter(|c| c.assignment.iter().any(|(k, _)| k == key))
        .count();
    let mut distinct: Vec<f64> = xs.iter().flatten().copied().collect();
    distinct.sort_by(f64::total_cmp);
    distinct.dedup();
    if distinct.len() < 2 || xs.iter().flatten().count() != present {
        return None;
    }
    Some(xs)
}

/// The lines of metric `m` over axis `key` (x values `xs`, column stats `st`): one per
/// combination of the other axes' values, labelled by it, points sorted by x.
fn line_groups(
    sweep: &Sweep,
    key: &str,
    xs: &[Option<f64>],
    m: &Metric,
    st: &[(String, Option<Stats>)],
) -> Vec<(String, Vec<Point>)> {
    let mut groups: Vec<(String, Vec<Point>)> = Vec::new();
    for (ci, c) in sweep.expansion.configs.iter().enumerate() {
        let (Some(x), Some(s)) = (xs[ci], st[ci].1) else {
            continue;
        };
        let rest = other_axes(sweep, c, key);
        let label = if rest.is_empty() {
            m.label.clone()
        } else {
            rest.join(" ")
        };
        match groups.iter_mut().find(|(l, _)| *l == label) {
            Some((_, pts)) => pts.push((x, s.mean, s.std)),
            None => groups.push((label, vec![(x, s.mean, s.std)])),
        }
    }
    for g in &mut groups {
        g.1.sort_by(|a, b| a.0.total_cmp(&b.0));
    }
    groups
}

/// `short=value` of each axis of `c` but `key`.
fn other_axes(sweep: &Sweep, c: &Config, key: &str) -> Vec<String> {
    c.assignment
        .iter()
        .filter(|(k, _)| k != key)
        .map(|(k, v)| {
            let short = sweep
                .expansion
                .axes
                .iter()
                .find(|(a, _)| a == k)
                .map_or(k.as_str(), |(_, s)| s.as_str());
            format!("{short}={}", crate::grid::value_text(v))
        })
        .collect()
}

/// The line chart of metric `m` (the `mi`th) over the axis named `short`.
fn line_chart(
    sweep: &Sweep,
    short: &str,
    mi: usize,
    m: &Metric,
    groups: Vec<(String, Vec<Point>)>,
) -> Chart {
    let series: Vec<LineSeries> = groups
        .into_iter()
        .map(|(label, points)| LineSeries { label, points })
        .collect();
    let id = format!(
        "sweep-{}-{}-{mi}",
        sweep.grid.name,
        harness_core::rundir::safe_name(short)
    );
    let title = format!("{} over {short} (mean ± std over seeds)", m.label);
    Chart {
        svg: charts::lines(&id, &title, short, &m.label, &series),
        id,
        title,
    }
}

/// One bar chart per metric over the configurations (mean over seeds).
fn bar_charts(sweep: &Sweep, rows: &[AblationRow], metrics: &[Metric]) -> Vec<Chart> {
    let categories: Vec<String> = rows.iter().map(|r| r.label.clone()).collect();
    let mut out = Vec::new();
    for (mi, m) in metrics.iter().enumerate() {
        let values = ablation::column_stats(rows, m)
            .into_iter()
            .map(|(_, s)| s.map(|s| s.mean))
            .collect();
        let id = format!("sweep-{}-bars-{mi}", sweep.grid.name);
        let title = format!("{} per configuration (mean over seeds)", m.label);
        out.push(Chart {
            svg: charts::bars(
                &id,
                &title,
                &m.label,
                &categories,
                &[Series {
                    label: "mean".into(),
                    values,
                    published: false,
                }],
            ),
            id,
            title,
        });
    }
    out
}

/// Renders the sweep's report into `<sweep dir>/report/` (runs matched to recipes against
/// `known`, see `harness_report::runs::load_inputs`).
pub fn render(
    sweep: &Sweep,
    ledger: &Ledger,
    known: &harness_recipe::Known,
) -> Result<SweepReport, ReportError> {
    let metrics = metrics(sweep);
    let rows = rows(sweep, ledger);
    let mut tables: Vec<RenderedTable> = vec![ablation_table(sweep, ledger, &rows, &metrics)];
    let mut warnings = Vec::new();
    let inputs = harness_report::runs::load_inputs(&provenance_inputs(sweep), known)?;
    if let Some(paper) = &sweep.grid.file.paper {
        tables.extend(paper_tables(sweep, paper, known, &mut warnings)?);
    }
    let report = harness_report::render::Report {
        provenance: harness_report::provenance::collect(&inputs)?,
        tables,
        warnings: warnings.clone(),
    };
    let out_dir = sweep.dir.join("report");
    let files = harness_report::render::write_all(&report, &out_dir, true)?;
    let t = &report.tables[0];
    Ok(SweepReport {
        out_dir,
        files,
        terminal: harness_report::render::terminal(&report),
        filled: t.filled,
        measured: t.measured,
        not_run: t.not_run,
        failed: t.failed,
        charts: report.tables.iter().map(|t| t.charts.len()).sum(),
        warnings,
    })
}

/// The notes of the ablation table: the grid and its size, the overrides every run gets,
/// the grid's description, and the runs by state.
fn notes(sweep: &Sweep, ledger: &Ledger) -> Vec<String> {
    let g = &sweep.grid;
    let mut notes = vec![format!(
        "Grid `{}`{} over recipe {}{}: {} configurations × {} seed(s) = {} runs; sweep directory {}.",
        g.path.display(),
        g.profile.as_ref().map_or(String::new(), |p| format!(" (grid profile `{p}`)")),
        g.recipe_path().display(),
        g.file.profile.as_ref().map_or(String::new(), |p| format!(" (profile `{p}`)")),
        sweep.expansion.configs.len(),
        g.file.seeds.len().max(1),
        sweep.points.len(),
        sweep.dir.display()
    )];
    if !g.file.set.is_empty() {
        let fixed: Vec<String> = g
            .file
            .set
            .iter()
            .filter_map(|(k, v)| Some(crate::grid::set_arg(k.as_str()?, v)))
            .collect();
        notes.push(format!("Every run: `--set {}`.", fixed.join("` `--set ")));
    }
    if let Some(d) = &g.file.description {
        notes.push(d.clone());
    }
    let counts = ledger.counts();
    notes.push(format!(
        "Runs: {}.",
        counts
            .iter()
            .map(|(k, v)| format!("{v} {k}"))
            .collect::<Vec<_>>()
            .join(", ")
    ));
    notes
}

/// The ablation table with its notes, its axis charts and the training curves of every run.
fn ablation_table(
    sweep: &Sweep,
    ledger: &Ledger,
    rows: &[AblationRow],
    metrics: &[Metric],
) -> RenderedTable {
    let g = &sweep.grid;
    let notes = notes(sweep, ledger);
    let title = format!("Sweep `{}` — ablation table", g.name);
    let mut table = ablation::build(&format!("sweep-{}", g.name), &title, notes, rows, metrics);
    table.paper = format!("sweep {}", g.name);
    table.table = g.path.display().to_string();
    table.charts = axis_charts(sweep, rows, metrics);
    let trained: Vec<(String, PathBuf)> = sweep
        .points
        .iter()
        .filter(|p| p.trains)
        .map(|p| (p.point.alias.clone(), p.run_dir.clone()))
        .collect();
    if let Some(c) = ablation::curves_chart(
        &format!("sweep-{}-curves", g.name),
        "Training loss of every run (train/metrics.jsonl)",
        &trained,
    ) {
        table.charts.push(c);
    }
    table
}

/// Inputs for provenance: every run with results, named by its point.
fn provenance_inputs(sweep: &Sweep) -> Vec<PathBuf> {
    sweep
        .points
        .iter()
        .filter(|p| has_results(&p.run_dir))
        .map(|p| {
            PathBuf::from(format!(
                "{}={}",
                crate::grid::link_name(&p.point.alias),
                p.run_dir.display()
            ))
        })
        .collect()
}

/// The paper's tables of this ablation (`paper:`), filled from the sweep's runs; a
/// `paper.systems` alias that is no configuration of the grid is a warning.
fn paper_tables(
    sweep: &Sweep,
    paper: &PaperTable,
    known: &harness_recipe::Known,
    warnings: &mut Vec<String>,
) -> Result<Vec<RenderedTable>, ReportError> {
    let g = &sweep.grid;
    let specs = harness_report::spec::select(
        harness_report::spec::load()?,
        std::slice::from_ref(&paper.table),
    )?;
    // Each mapped configuration's first replicate with results fills the spec's system.
    let mut named = Vec::new();
    for (ci, c) in sweep.expansion.configs.iter().enumerate() {
        let Some(system) = paper.systems.get(&c.alias) else {
            continue;
        };
        if let Some(p) = sweep
            .points
            .iter()
            .find(|p| p.point.config == ci && has_results(&p.run_dir))
        {
            named.push(PathBuf::from(format!("{system}={}", p.run_dir.display())));
        }
    }
    for alias in paper.systems.keys() {
        if !sweep.expansion.configs.iter().any(|c| &c.alias == alias) {
            warnings.push(format!(
                "{}: paper.systems names `{alias}`, which is not a configuration of the grid (they are: {})",
                g.path.display(),
                sweep.expansion.configs.iter().map(|c| c.alias.as_str()).collect::<Vec<_>>().join(", ")
            ));
        }
    }
    let paper_inputs = harness_report::runs::load_inputs(&named, known)?;
    let mut tables = harness_report::table::build(&specs, &paper_inputs);
    for t in &mut tables {
        t.notes.insert(
            0,
            format!("Filled from sweep `{}`: each row from the first seed of its configuration (the ablation table above has the mean ± std over seeds).", g.name),
        );
    }
    Ok(tables)
}

fn has_results(run_dir: &std::path::Path) -> bool {
    std::fs::read_dir(run_dir.join("results"))
        .map(|mut d| d.any(|e| e.is_ok_and(|e| e.path().extension().is_some_and(|x| x == "json"))))
        .unwrap_or(false)
}
