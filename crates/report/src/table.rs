//! Joins table specs with the loaded results: every cell of every table with its value,
//! the published value it is compared with, the delta, where it came from (benchmark,
//! field, result file) or why it is empty. Renderers only format this model; measured
//! numbers never come from anywhere but result files.

use super::charts::{self, Series};
use super::runs::{resolve, run_hint, Inputs, SystemRuns};
use super::spec::{
    cell_template, fill, matrix_vars, Axis, AxisKey, BaselineMode, Better, ChartKind, Layout,
    Published, PublishedValues, ResolvedColumn, Status, SystemRow, TableSpec, Variant,
};
use serde::Serialize;
use std::collections::BTreeMap;
use std::path::PathBuf;

/// One table, ready to render.
#[derive(Debug, Clone, Serialize)]
pub struct RenderedTable {
    pub name: String,
    pub title: String,
    pub paper: String,
    pub table: String,
    pub source: String,
    pub metric: String,
    pub better: String,
    pub notes: Vec<String>,
    pub blocks: Vec<Block>,
    pub footnotes: Vec<Footnote>,
    /// Published-value markers used in this table, explained.
    pub legend: Vec<String>,
    pub charts: Vec<Chart>,
    /// Measured cells with a number / all measured cells, and how many of the empty
    /// ones are n/a (no data or protocol here), not run yet, failed.
    pub filled: usize,
    pub measured: usize,
    pub na: usize,
    pub not_run: usize,
    pub failed: usize,
    #[serde(skip)]
    pub records: Vec<CellRecord>,
}

/// A footnote: a reason for an empty cell, a derivation, a command to run.
#[derive(Debug, Clone, Serialize)]
pub struct Footnote {
    pub mark: String,
    pub text: String,
}

/// One displayed grid: the whole table (grid layout) or one system's matrix.
#[derive(Debug, Clone, Serialize)]
pub struct Block {
    pub caption: Option<String>,
    /// Shown instead of the grid (a matrix of a system not run yet).
    pub message: Option<String>,
    pub corner: String,
    pub header: Vec<String>,
    pub rows: Vec<Row>,
}

#[derive(Debug, Clone, Serialize)]
pub struct Row {
    pub label: String,
    /// `published` or `measured`.
    pub kind: &'static str,
    pub cells: Vec<Cell>,
}

/// A displayed cell. `class`: `published`, `measured`, `empty` (no published value),
/// `na`, `notrun`, `failed`.
#[derive(Debug, Clone, Serialize)]
pub struct Cell {
    pub text: String,
    pub class: &'static str,
    /// `good`/`bad`/`` for the delta's direction.
    pub trend: &'static str,
    /// Hover text: the source of the number or the reason for its absence.
    pub title: String,
}

/// An inline SVG chart.
#[derive(Debug, Clone, Serialize)]
pub struct Chart {
    pub id: String,
    pub title: String,
    pub svg: String,
}

/// One cell in long form (the CSV export and the consistency test).
#[derive(Debug, Clone, Serialize)]
pub struct CellRecord {
    pub table: String,
    /// `published` or `measured`.
    pub kind: &'static str,
    /// Published row key or system name.
    pub row: String,
    pub row_label: String,
    pub variant: String,
    /// Matrix row key (empty in grids).
    pub matrix_row: String,
    pub column: String,
    pub value: Option<f64>,
    pub display: String,
    /// Published value the measured one is compared with.
    pub reference: Option<f64>,
    pub delta: Option<f64>,
    /// Published: confirmed/derived/unconfirmed. Measured: ok, n/a, not run yet, failed.
    pub status: String,
    pub benchmark: String,
    pub field: String,
    pub scale: Option<f64>,
    pub offset: Option<f64>,
    pub result_file: String,
    /// `relative` / `difference` to the baseline system, when the value is one.
    pub baseline_mode: String,
    pub baseline_file: String,
    pub note: String,
}

/// Footnote registry of one table: the same text gets the same mark.
#[derive(Default)]
struct Notes(Vec<String>);

impl Notes {
    fn mark(&mut self, text: &str) -> String {
        let i = match self.0.iter().position(|t| t == text) {
            Some(i) => i,
            None => {
                self.0.push(text.to_string());
                self.0.len() - 1
            }
        };
        mark_name(i)
    }
    fn into_footnotes(self) -> Vec<Footnote> {
        self.0
            .into_iter()
            .enumerate()
            .map(|(i, text)| Footnote {
                mark: mark_name(i),
                text,
            })
            .collect()
    }
}

/// a, b, …, z, aa, ab, …
fn mark_name(mut i: usize) -> String {
    let mut s = String::new();
    loop {
        s.insert(0, (b'a' + (i % 26) as u8) as char);
        if i < 26 {
            break;
        }
        i = i / 26 - 1;
    }
    s
}

/// Number with fixed decimals, never `-0.0`.
pub fn fmt_num(v: f64, decimals: usize) -> String {
    let s = format!("{v:.decimals$}");
    if s.starts_with('-') && s[1..].chars().all(|c| c == '0' || c == '.') {
        s[1..].to_string()
    } else {
        s
    }
}

/// Signed delta with fixed decimals (`+1.2`, `-0.4`, `+0.0`).
pub fn fmt_delta(d: f64, decimals: usize) -> String {
    let s = fmt_num(d, decimals);
    if s.starts_with('-') {
        s
    } else {
        format!("+{s}")
    }
}

/// The outcome of one measured cell.
enum Measured {
    Value {
        value: f64,
        file: PathBuf,
        baseline_file: Option<PathBuf>,
    },
    Na(String),
    NotRun(String),
    Failed(String),
}

fn sources(s: &SystemRuns) -> String {
    s.sources
        .iter()
        .map(|src| src.results_dir.display().to_string())
        .collect::<Vec<_>>()
        .join(", ")
}

fn measure_one(
    sys: &SystemRuns,
    bench: &str,
    field: &str,
    scale: f64,
    offset: f64,
) -> Result<(f64, PathBuf), Measured> {
    let Some(r) = sys.results.get(bench) else {
        return Err(Measured::NotRun(format!(
            "no {bench}.json among the results of `{}` ({}): `{}`",
            sys.id,
            sources(sys),
            bench_hint(&sys.id, bench)
        )));
    };
    if let Some(e) = &r.result.error {
        return Err(Measured::Failed(format!(
            "{bench} failed for `{}`: {e}",
            sys.id
        )));
    }
    match resolve(&r.json, field) {
        Some(v) => Ok((v * scale + offset, r.path.clone())),
        None => Err(Measured::Na(format!(
            "`{field}` is not in {} (the protocol did not measure it)",
            r.path.display()
        ))),
    }
}

fn bench_hint(system: &str, bench: &str) -> String {
    if super::runs::EVAL_ENCODERS.contains(&system) {
        format!("harness eval --encoder {system} --bench {bench}")
    } else {
        run_hint(system)
    }
}

fn measure(
    inputs: &Inputs,
    sys: &SystemRuns,
    row: &SystemRow,
    bench: &str,
    field: &str,
    scale: f64,
    offset: f64,
) -> Measured {
    let (value, file) = match measure_one(sys, bench, field, scale, offset) {
        Ok(v) => v,
        Err(m) => return m,
    };
    let Some(b) = row.baseline() else {
        return Measured::Value {
            value,
            file,
            baseline_file: None,
        };
    };
    let Some(base) = inputs.systems.get(&b.system) else {
        return Measured::Na(format!(
            "baseline `{}` not run yet: `{}`",
            b.system,
            run_hint(&b.system)
        ));
    };
    match measure_one(base, bench, field, scale, offset) {
        Ok((bv, bfile)) => {
            let v = match b.mode {
                BaselineMode::Difference => value - bv,
                BaselineMode::Relative if bv != 0.0 => 100.0 * (value - bv) / bv,
                BaselineMode::Relative => {
                    return Measured::Na(format!(
                        "baseline `{}` scores 0: no relative change",
                        b.system
                    ))
                }
            };
            Measured::Value {
                value: v,
                file,
                baseline_file: Some(bfile),
            }
        }
        Err(Measured::NotRun(m)) => Measured::Na(format!("baseline: {m}")),
        Err(other) => other,
    }
}

/// Builds every table of `specs` from `inputs`.
pub fn build(specs: &[TableSpec], inputs: &Inputs) -> Vec<RenderedTable> {
    specs.iter().map(|s| build_one(s, inputs)).collect()
}

struct Ctx<'a> {
    spec: &'a TableSpec,
    inputs: &'a Inputs,
    notes: Notes,
    records: Vec<CellRecord>,
    statuses: [bool; 3],
    filled: usize,
    measured: usize,
}

impl Ctx<'_> {
    fn published_cell(
        &mut self,
        p: &Published,
        coord: &str,
        v: Option<f64>,
        decimals: usize,
    ) -> Cell {
        let decimals = p.decimals.unwrap_or(decimals);
        let status = p.status_of.get(coord).copied().unwrap_or(p.status);
        match v {
            Some(v) => {
                self.statuses[status as usize] = true;
                Cell {
                    text: format!("{}{}", fmt_num(v, decimals), status.marker()),
                    class: "published",
                    trend: "",
                    title: format!("{} ({}), {}", self.spec.table, status.name(), p.label),
                }
            }
            None => Cell {
                text: "—".into(),
                class: "empty",
                trend: "",
                title: "not given in the paper (or lost from the text extract)".into(),
            },
        }
    }

    #[allow(clippy::too_many_arguments)]
    fn measured_cell(
        &mut self,
        sys: &SystemRuns,
        row: &SystemRow,
        na: Option<&str>,
        bench: Option<&str>,
        field: Option<&str>,
        scale: f64,
        offset: f64,
        reference: Option<f64>,
        decimals: usize,
        better: Better,
        rec: &mut CellRecord,
    ) -> Cell {
        self.measured += 1;
        let outcome = match (na, bench, field) {
            (Some(reason), _, _) => Measured::Na(reason.to_string()),
            (None, Some(b), Some(f)) => measure(self.inputs, sys, row, b, f, scale, offset),
            _ => Measured::Na("nothing measured here fills this cell".into()),
        };
        rec.benchmark = bench.unwrap_or_default().to_string();
        rec.field = field.unwrap_or_default().to_string();
        rec.scale = Some(scale);
        rec.offset = Some(offset);
        rec.reference = reference;
        rec.baseline_mode = row
            .baseline()
            .map(|b| match b.mode {
                BaselineMode::Relative => format!("relative:{}", b.system),
                BaselineMode::Difference => format!("difference:{}", b.system),
            })
            .unwrap_or_default();
        let (label, class, reason) = match outcome {
            Measured::Value {
                value,
                file,
                baseline_file,
            } => {
                self.filled += 1;
                rec.value = Some(value);
                rec.status = "ok".into();
                rec.result_file = file.display().to_string();
                rec.baseline_file = baseline_file
                    .map(|f| f.display().to_string())
                    .unwrap_or_default();
                let mut text = fmt_num(value, decimals);
                let mut trend = "";
                if let Some(r) = reference {
                    let d = value - r;
                    rec.delta = Some(d);
                    text = format!("{text} ({})", fmt_delta(d, decimals));
                    trend = match better {
                        Better::Higher if d > 0.0 => "good",
                        Better::Higher if d < 0.0 => "bad",
                        Better::Lower if d < 0.0 => "good",
                        Better::Lower if d > 0.0 => "bad",
                        _ => "",
                    };
                }
                rec.display = text.clone();
                let title = format!("{} · {} · {}", rec.benchmark, rec.field, rec.result_file);
                return Cell {
                    text,
                    class: "measured",
                    trend,
                    title,
                };
            }
            Measured::Na(r) => ("n/a", "na", r),
            Measured::NotRun(r) => ("not run yet", "notrun", r),
            Measured::Failed(r) => ("failed", "failed", r),
        };
        let m = self.notes.mark(&reason);
        rec.status = label.into();
        rec.note = reason.clone();
        rec.display = format!("{label} [{m}]");
        Cell {
            text: rec.display.clone(),
            class,
            trend: "",
            title: reason,
        }
    }

    /// Records one published cell (`coord` is its key in the spec's `status_of`): the
    /// value, its display text, status and note.
    fn push_published_record(
        &mut self,
        p: &Published,
        matrix_row: &str,
        column: &str,
        coord: &str,
        v: Option<f64>,
        cell: &Cell,
    ) {
        let mut rec = self.record("published", &p.key, &p.label);
        rec.matrix_row = matrix_row.to_string();
        rec.column = column.to_string();
        rec.value = v;
        rec.display = cell.text.clone();
        rec.status = p
            .status_of
            .get(coord)
            .copied()
            .unwrap_or(p.status)
            .name()
            .into();
        rec.note = p.note.clone().unwrap_or_default();
        self.records.push(rec);
    }

    fn record(&self, kind: &'static str, row: &str, row_label: &str) -> CellRecord {
        CellRecord {
            table: self.spec.name.clone(),
            kind,
            row: row.to_string(),
            row_label: row_label.to_string(),
            variant: String::new(),
            matrix_row: String::new(),
            column: String::new(),
            value: None,
            display: String::new(),
            reference: None,
            delta: None,
            status: String::new(),
            benchmark: String::new(),
            field: String::new(),
            scale: None,
            offset: None,
            result_file: String::new(),
            baseline_mode: String::new(),
            baseline_file: String::new(),
            note: String::new(),
        }
    }

    /// Row label of a system that has no results at all, with the command to run.
    fn not_run_label(&mut self, label: &str, system: &str) -> String {
        let m = self
            .notes
            .mark(&format!("not run yet: `{}`", run_hint(system)));
        format!("{label} [{m}]")
    }

    fn label_with_note(&mut self, label: &str, note: Option<&str>) -> String {
        match note {
            Some(n) => format!("{label} [{}]", self.notes.mark(n)),
            None => label.to_string(),
        }
    }
}

fn build_one(spec: &TableSpec, inputs: &Inputs) -> RenderedTable {
    let mut ctx = Ctx {
        spec,
        inputs,
        notes: Notes::default(),
        records: Vec::new(),
        statuses: [false; 3],
        filled: 0,
        measured: 0,
    };
    let (blocks, charts) = match spec.layout {
        Layout::Grid => grid(&mut ctx),
        Layout::Matrix => matrix(&mut ctx),
    };
    let mut legend = Vec::new();
    if ctx.statuses[Status::Derived as usize] {
        legend.push("† derived from confirmed numbers (see the row's note)".to_string());
    }
    if ctx.statuses[Status::Unconfirmed as usize] {
        legend.push("? unconfirmed: recalled, not verified against the paper's PDF".to_string());
    }
    RenderedTable {
        name: spec.name.clone(),
        title: spec.title.clone(),
        paper: spec.paper.clone(),
        table: spec.table.clone(),
        source: spec.source.clone(),
        metric: spec.metric.clone(),
        better: match spec.better {
            Better::Higher => "higher is better",
            Better::Lower => "lower is better",
            Better::None => "",
        }
        .to_string(),
        notes: spec.notes.clone(),
        blocks,
        footnotes: ctx.notes.into_footnotes(),
        legend,
        charts,
        filled: ctx.filled,
        measured: ctx.measured,
        na: ctx
            .records
            .iter()
            .filter(|r| r.kind == "measured" && r.status == "n/a")
            .count(),
        not_run: ctx
            .records
            .iter()
            .filter(|r| r.kind == "measured" && r.status == "not run yet")
            .count(),
        failed: ctx
            .records
            .iter()
            .filter(|r| r.kind == "measured" && r.status == "failed")
            .count(),
        records: ctx.records,
    }
}

fn default_variant() -> Variant {
    Variant {
        key: String::new(),
        label: String::new(),
        vars: BTreeMap::new(),
        compare_to: None,
        na: BTreeMap::new(),
    }
}

fn grid(ctx: &mut Ctx) -> (Vec<Block>, Vec<Chart>) {
    let spec = ctx.spec;
    let cols = spec.grid_columns();
    let published = PublishedGrid::of(spec);
    let mut rows = published_grid_rows(ctx, &cols, &published);
    // Series for the chart: (label, values per column).
    let mut measured_series: Vec<Series> = Vec::new();
    let variants: Vec<Variant> = if spec.variants.is_empty() {
        vec![default_variant()]
    } else {
        spec.variants.clone()
    };
    for s in &spec.systems {
        for v in &variants {
            let base_label = if v.label.is_empty() {
                s.label()
            } else {
                format!("{} — {}", s.label(), v.label)
            };
            let compare = v
                .compare_to
                .as_deref()
                .or(s.compare_to())
                .or(spec.compare_to.as_deref());
            let Some(sys) = lookup(ctx.inputs, s) else {
                rows.push(not_run_grid_row(
                    ctx,
                    s,
                    v,
                    &base_label,
                    &cols,
                    compare,
                    &published,
                ));
                continue;
            };
            let line = GridLine {
                s,
                v,
                base_label: &base_label,
                compare,
            };
            let (row, values) = measured_grid_row(ctx, &line, sys, &cols, &published);
            if values.iter().any(Option::is_some) {
                measured_series.push(Series {
                    label: base_label.clone(),
                    values,
                    published: false,
                });
            }
            rows.push(row);
        }
    }
    let header: Vec<String> = cols.iter().map(|c| c.label.clone()).collect();
    let block = if spec.transpose {
        transpose(&header, &rows)
    } else {
        Block {
            caption: None,
            message: None,
            corner: "system".into(),
            header,
            rows,
        }
    };
    let charts = grid_bars(spec, &cols, &published, measured_series)
        .into_iter()
        .collect();
    (vec![block], charts)
}

/// One row of a grid table: a system under one variant, compared with a published row.
struct GridLine<'a> {
    s: &'a SystemRow,
    v: &'a Variant,
    base_label: &'a str,
    compare: Option<&'a str>,
}

/// A measured grid row and its values by column (for the chart): the plain columns first,
/// then the `mean_of` columns over them.
fn measured_grid_row(
    ctx: &mut Ctx,
    line: &GridLine,
    sys: &SystemRuns,
    cols: &[ResolvedColumn],
    published: &PublishedGrid,
) -> (Row, Vec<Option<f64>>) {
    let label = ctx.label_with_note(line.base_label, line.s.note());
    let mut cells = Vec::new();
    let mut values = Vec::new();
    for c in cols {
        if !c.mean_of.is_empty() {
            // Filled below, once the columns it averages are known.
            cells.push(None);
            values.push(None);
            continue;
        }
        let mut vars = line.v.vars.clone();
        vars.insert("key".into(), c.key.clone());
        let field = c.field.as_deref().and_then(|f| fill(f, &vars).ok());
        let na = line
            .s
            .na(&c.key)
            .or(line.v.na.get(&c.key).map(String::as_str))
            .or(c.na.as_deref());
        let reference = published.value(line.compare, &c.key);
        let mut rec = ctx.record("measured", line.s.system(), line.base_label);
        rec.variant = line.v.key.clone();
        rec.column = c.key.clone();
        let cell = ctx.measured_cell(
            sys,
            line.s,
            na,
            c.bench.as_deref(),
            field.as_deref(),
            c.scale,
            c.offset,
            reference,
            c.decimals,
            c.better,
            &mut rec,
        );
        values.push(rec.value);
        ctx.records.push(rec);
        cells.push(Some(cell));
    }
    for (ci, c) in cols.iter().enumerate() {
        if c.mean_of.is_empty() {
            continue;
        }
        let reference = published.value(line.compare, &c.key);
        let mut rec = ctx.record("measured", line.s.system(), line.base_label);
        rec.variant = line.v.key.clone();
        rec.column = c.key.clone();
        let cell = mean_of_cell(ctx, c, cols, &mut values, ci, reference, &mut rec);
        ctx.records.push(rec);
        cells[ci] = Some(cell);
    }
    let cells: Vec<Cell> = cells.into_iter().flatten().collect();
    let row = Row {
        label,
        kind: "measured",
        cells,
    };
    (row, values)
}

/// The published rows of a grid's spec, by key.
struct PublishedGrid<'a>(BTreeMap<&'a str, &'a Published>);

impl<'a> PublishedGrid<'a> {
    fn of(spec: &'a TableSpec) -> Self {
        PublishedGrid(spec.published.iter().map(|p| (p.key.as_str(), p)).collect())
    }

    /// The published value of row `key` in column `col`.
    fn value(&self, key: Option<&str>, col: &str) -> Option<f64> {
        match &self.0.get(key?)?.values {
            PublishedValues::Map(m) => m.get(col).copied().flatten(),
            PublishedValues::Matrix(_) => None,
        }
    }
}

/// One row per published system, each value with its status.
fn published_grid_rows(
    ctx: &mut Ctx,
    cols: &[ResolvedColumn],
    published: &PublishedGrid,
) -> Vec<Row> {
    let value_of = |key: Option<&str>, col: &str| published.value(key, col);
    let mut rows = Vec::new();
    for p in &ctx.spec.published {
        let label = ctx.label_with_note(&p.label, p.note.as_deref());
        let mut cells = Vec::new();
        for c in cols {
            let v = value_of(Some(&p.key), &c.key);
            let cell = ctx.published_cell(p, &c.key, v, c.decimals);
            ctx.push_published_record(p, "", &c.key, &c.key, v, &cell);
            cells.push(cell);
        }
        rows.push(Row {
            label,
            kind: "published",
            cells,
        });
    }
    rows
}

/// The row of a system with no results yet: every cell says so and how to fill it.
fn not_run_grid_row(
    ctx: &mut Ctx,
    s: &SystemRow,
    v: &Variant,
    base_label: &str,
    cols: &[ResolvedColumn],
    compare: Option<&str>,
    published: &PublishedGrid,
) -> Row {
    let label = ctx.not_run_label(base_label, s.system());
    for c in cols {
        ctx.measured += 1;
        let mut rec = ctx.record("measured", s.system(), base_label);
        rec.variant = v.key.clone();
        rec.column = c.key.clone();
        rec.status = "not run yet".into();
        rec.display = "not run yet".into();
        rec.reference = published.value(compare, &c.key);
        rec.note = format!("`{}`", run_hint(s.system()));
        ctx.records.push(rec);
    }
    let cells = cols
        .iter()
        .map(|_| Cell {
            text: "not run yet".into(),
            class: "notrun",
            trend: "",
            title: run_hint(s.system()),
        })
        .collect();
    Row {
        label,
        kind: "measured",
        cells,
    }
}

/// A `mean_of` column's cell: the mean of the columns it names once every one has a value
/// (`values[ci]` takes it), else n/a saying so.
fn mean_of_cell(
    ctx: &mut Ctx,
    c: &ResolvedColumn,
    cols: &[ResolvedColumn],
    values: &mut [Option<f64>],
    ci: usize,
    reference: Option<f64>,
    rec: &mut CellRecord,
) -> Cell {
    let parts: Option<Vec<f64>> = c
        .mean_of
        .iter()
        .map(|k| {
            cols.iter()
                .position(|x| &x.key == k)
                .and_then(|i| values[i])
        })
        .collect();
    rec.field = format!("mean_of({})", c.mean_of.join(", "));
    match parts {
        Some(p) if !p.is_empty() => {
            let mean = p.iter().sum::<f64>() / p.len() as f64;
            ctx.measured += 1;
            ctx.filled += 1;
            let mut text = fmt_num(mean, c.decimals);
            if let Some(r) = reference {
                rec.delta = Some(mean - r);
                text = format!("{text} ({})", fmt_delta(mean - r, c.decimals));
            }
            rec.value = Some(mean);
            rec.reference = reference;
            rec.status = "ok".into();
            rec.display = text.clone();
            values[ci] = Some(mean);
            Cell {
                text,
                class: "measured",
                trend: "",
                title: format!("mean of {}", c.mean_of.join(", ")),
            }
        }
        _ => {
            ctx.measured += 1;
            let reason = format!("needs every one of {}", c.mean_of.join(", "));
            let m = ctx.notes.mark(&reason);
            rec.status = "n/a".into();
            rec.note = reason.clone();
            rec.display = format!("n/a [{m}]");
            Cell {
                text: rec.display.clone(),
                class: "na",
                trend: "",
                title: reason,
            }
        }
    }
}

/// The bar chart of a grid (`chart: {kind: bars}`): the published row compared with, then
/// every measured series, columns in order or sorted by the first measured series.
fn grid_bars(
    spec: &TableSpec,
    cols: &[ResolvedColumn],
    published: &PublishedGrid,
    measured_series: Vec<Series>,
) -> Option<Chart> {
    let ch = spec.chart.as_ref()?;
    if ch.kind != ChartKind::Bars || measured_series.is_empty() {
        return None;
    }
    let keep: Vec<usize> = (0..cols.len()).filter(|&i| !cols[i].no_chart).collect();
    let mut series = Vec::new();
    if let Some(key) = spec.compare_to.as_deref() {
        let vals: Vec<Option<f64>> = cols
            .iter()
            .map(|c| published.value(Some(key), &c.key))
            .collect();
        if vals.iter().any(Option::is_some) {
            series.push(Series {
                label: format!("{} (published)", published.0[key].label),
                values: vals,
                published: true,
            });
        }
    }
    series.extend(measured_series);
    let mut order = keep;
    if ch.sort {
        let first = series.iter().position(|s| !s.published).unwrap_or(0);
        let key = |i: &usize| series[first].values[*i];
        order.sort_by(|a, b| match (key(a), key(b)) {
            (Some(x), Some(y)) => {
                let o = x.partial_cmp(&y).unwrap_or(std::cmp::Ordering::Equal);
                if spec.better == Better::Higher {
                    o.reverse()
                } else {
                    o
                }
            }
            (Some(_), None) => std::cmp::Ordering::Less,
            (None, Some(_)) => std::cmp::Ordering::Greater,
            (None, None) => std::cmp::Ordering::Equal,
        });
    }
    let categories: Vec<String> = order.iter().map(|&i| cols[i].label.clone()).collect();
    let series: Vec<Series> = series
        .into_iter()
        .map(|s| Series {
            values: order.iter().map(|&i| s.values[i]).collect(),
            ..s
        })
        .collect();
    let id = format!("{}-bars", spec.name);
    let title = format!(
        "{} — {}{}",
        spec.table,
        spec.metric,
        if ch.sort { ", sorted" } else { "" }
    );
    Some(Chart {
        svg: charts::bars(&id, &title, &spec.metric, &categories, &series),
        id,
        title,
    })
}

/// Columns become rows: for many languages and few systems.
fn transpose(header: &[String], rows: &[Row]) -> Block {
    let out_rows = header
        .iter()
        .enumerate()
        .map(|(ci, h)| Row {
            label: h.clone(),
            kind: "measured",
            cells: rows.iter().map(|r| r.cells[ci].clone()).collect(),
        })
        .collect();
    Block {
        caption: None,
        message: None,
        corner: String::new(),
        header: rows.iter().map(|r| r.label.clone()).collect(),
        rows: out_rows,
    }
}

/// A matrix table: a block per published matrix and per system, each with its heat map.
fn matrix(ctx: &mut Ctx) -> (Vec<Block>, Vec<Chart>) {
    let spec = ctx.spec;
    let (Some(rax), Some(cax)) = (&spec.rows, &spec.cols) else {
        return (Vec::new(), Vec::new());
    };
    let layout = MatrixLayout {
        spec,
        rax,
        cax,
        header: cax.keys.iter().map(|k| k.label().to_string()).collect(),
        row_labels: rax.keys.iter().map(|k| k.label().to_string()).collect(),
        corner: format!("{} \\ {}", rax.label, cax.label),
        published: spec.published.iter().map(|p| (p.key.as_str(), p)).collect(),
    };
    let mut blocks = Vec::new();
    let mut charts = Vec::new();
    for p in &spec.published {
        let (rows, grid) = published_matrix_rows(ctx, &layout, p);
        let caption = ctx.label_with_note(&format!("{} (published)", p.label), p.note.as_deref());
        layout.heat(&mut charts, &format!("{} (published)", p.label), grid);
        blocks.push(layout.block(caption, rows));
    }
    for s in &spec.systems {
        let compare = s.compare_to().or(spec.compare_to.as_deref());
        let vs = compare
            .and_then(|k| layout.published.get(k))
            .map(|p| format!(" (deltas to {})", p.label))
            .unwrap_or_default();
        let label = s.label();
        let Some(sys) = lookup(ctx.inputs, s) else {
            blocks.push(not_run_matrix_block(ctx, &layout, s, &label));
            continue;
        };
        let (rows, grid) = measured_matrix_rows(ctx, &layout, s, sys, compare, &label);
        let caption = ctx.label_with_note(&format!("{label}{vs}"), s.note());
        layout.heat(&mut charts, &label, grid);
        blocks.push(layout.block(caption, rows));
    }
    (blocks, charts)
}

/// A matrix's values by row and column, for its heat map.
type HeatGrid = Vec<Vec<Option<f64>>>;

/// What every block of a matrix table shares: its axes, header, corner and published values.
struct MatrixLayout<'a> {
    spec: &'a TableSpec,
    rax: &'a Axis,
    cax: &'a Axis,
    header: Vec<String>,
    row_labels: Vec<String>,
    corner: String,
    published: BTreeMap<&'a str, &'a Published>,
}

impl MatrixLayout<'_> {
    /// The published value of matrix `key` at row `ri`, column `ci`.
    fn published_value(&self, key: Option<&str>, ri: usize, ci: usize) -> Option<f64> {
        match &self.published.get(key?)?.values {
            PublishedValues::Matrix(m) => m.get(ri)?.get(ci).copied().flatten(),
            PublishedValues::Map(_) => None,
        }
    }

    /// A heat map of `grid` under `caption`, when it has any value.
    fn heat(&self, charts: &mut Vec<Chart>, caption: &str, grid: HeatGrid) {
        if !grid.iter().flatten().any(Option::is_some) {
            return;
        }
        let spec = self.spec;
        let id = format!("{}-heat-{}", spec.name, charts.len());
        let title = format!("{} — {caption}", spec.table);
        charts.push(Chart {
            svg: charts::heatmap(
                &id,
                &title,
                &self.corner,
                &self.row_labels,
                &self.header,
                &grid,
                spec.better == Better::Lower,
                spec.decimals,
            ),
            id,
            title,
        });
    }

    /// A block of the table's full matrix.
    fn block(&self, caption: String, rows: Vec<Row>) -> Block {
        Block {
            caption: Some(caption),
            message: None,
            corner: self.corner.clone(),
            header: self.header.clone(),
            rows,
        }
    }
}

/// One published matrix's rows, and its values for the heat map.
fn published_matrix_rows(
    ctx: &mut Ctx,
    layout: &MatrixLayout,
    p: &Published,
) -> (Vec<Row>, HeatGrid) {
    let mut rows = Vec::new();
    let mut grid = Vec::new();
    for (ri, r) in layout.rax.keys.iter().enumerate() {
        let mut cells = Vec::new();
        let mut gr = Vec::new();
        for (ci, c) in layout.cax.keys.iter().enumerate() {
            let v = layout.published_value(Some(&p.key), ri, ci);
            let coord = format!("{}/{}", r.key(), c.key());
            let cell = ctx.published_cell(p, &coord, v, layout.spec.decimals);
            ctx.push_published_record(p, r.key(), c.key(), &coord, v, &cell);
            cells.push(cell);
            gr.push(v);
        }
        rows.push(Row {
            label: r.label().to_string(),
            kind: "published",
            cells,
        });
        grid.push(gr);
    }
    (rows, grid)
}

/// The block of a system with no results yet: every cell recorded as such, with the command.
fn not_run_matrix_block(ctx: &mut Ctx, layout: &MatrixLayout, s: &SystemRow, label: &str) -> Block {
    let caption = ctx.not_run_label(label, s.system());
    for r in &layout.rax.keys {
        for c in &layout.cax.keys {
            ctx.measured += 1;
            let mut rec = ctx.record("measured", s.system(), label);
            rec.matrix_row = r.key().to_string();
            rec.column = c.key().to_string();
            rec.status = "not run yet".into();
            rec.display = "not run yet".into();
            rec.note = format!("`{}`", run_hint(s.system()));
            ctx.records.push(rec);
        }
    }
    Block {
        caption: Some(caption),
        message: Some(format!("not run yet: `{}`", run_hint(s.system()))),
        corner: layout.corner.clone(),
        header: Vec::new(),
        rows: Vec::new(),
    }
}

/// One system's measured rows (deltas to `compare`'s published matrix), and its values for
/// the heat map.
fn measured_matrix_rows(
    ctx: &mut Ctx,
    layout: &MatrixLayout,
    s: &SystemRow,
    sys: &SystemRuns,
    compare: Option<&str>,
    label: &str,
) -> (Vec<Row>, HeatGrid) {
    let spec = layout.spec;
    let mut rows = Vec::new();
    let mut grid = Vec::new();
    for (ri, r) in layout.rax.keys.iter().enumerate() {
        let mut cells = Vec::new();
        let mut gr = Vec::new();
        for (ci, c) in layout.cax.keys.iter().enumerate() {
            let coord = format!("{}/{}", r.key(), c.key());
            let template = cell_template(spec, r, c).or(spec.field.as_deref());
            let field = template.and_then(|t| fill(t, &matrix_vars(r, ri, c, ci)).ok());
            // The diagonal reason does not hide explicit `cells` (avg/avg).
            let diag = (r.key() == c.key() && !spec.cells.contains_key(&coord))
                .then_some(())
                .and(spec.diagonal.as_deref());
            let na = s.na(&coord).or(axis_na(c)).or(axis_na(r)).or(diag);
            let mut rec = ctx.record("measured", s.system(), label);
            rec.matrix_row = r.key().to_string();
            rec.column = c.key().to_string();
            let reference = layout.published_value(compare, ri, ci);
            let cell = ctx.measured_cell(
                sys,
                s,
                na,
                spec.bench.as_deref(),
                field.as_deref(),
                spec.scale,
                spec.offset,
                reference,
                spec.decimals,
                spec.better,
                &mut rec,
            );
            gr.push(rec.value);
            ctx.records.push(rec);
            cells.push(cell);
        }
        rows.push(Row {
            label: r.label().to_string(),
            kind: "measured",
            cells,
        });
        grid.push(gr);
    }
    (rows, grid)
}

/// The results filling a system row: its own, else an alias's.
fn lookup<'a>(inputs: &'a Inputs, row: &SystemRow) -> Option<&'a SystemRuns> {
    row.names().into_iter().find_map(|n| inputs.systems.get(n))
}

fn axis_na(k: &AxisKey) -> Option<&str> {
    k.na()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::runs::{ResultFile, Source};
    use crate::spec::parse_all;
    use harness_bench::runner::{BenchResult, CacheCounts, EncoderInfo};
    use serde_json::json;

    fn result(bench: &str, scores: serde_json::Value) -> ResultFile {
        let r = BenchResult {
            benchmark: bench.into(),
            protocol: "p".into(),
            dataset: "d".into(),
            main_metric: Some("m".into()),
            main_score: Some(1.0),
            scores,
            protocol_params: json!({}),
            notes: vec![],
            datasets: "x".into(),
            encoder: EncoderInfo {
                name: "enc".into(),
                fingerprint: "f".into(),
                dim: 2,
            },
            seed: 1,
            seconds: 0.5,
            seconds_by_part: Default::default(),
            cache: CacheCounts::default(),
            harness_version: "0".into(),
            overrides: Default::default(),
            declaration: String::new(),
            error: None,
            items: None,
            outcomes: None,
        };
        ResultFile {
            path: format!("/r/{bench}.json").into(),
            json: serde_json::to_value(&r).unwrap(),
            result: r,
            modified: None,
        }
    }

    fn inputs(systems: &[(&str, Vec<ResultFile>)]) -> Inputs {
        let mut i = Inputs::default();
        for (id, results) in systems {
            i.systems.insert(
                id.to_string(),
                SystemRuns {
                    id: id.to_string(),
                    sources: vec![Source {
                        results_dir: format!("/runs/{id}").into(),
                        run_dir: None,
                        identified_by: "test".into(),
                        env: None,
                        recipe_fingerprint: None,
                    }],
                    results: results
                        .iter()
                        .map(|r| (r.result.benchmark.clone(), r.clone()))
                        .collect(),
                },
            );
        }
        i
    }

    fn spec(yaml: &str) -> TableSpec {
        parse_all(
            &[("t.yaml".into(), yaml.into())],
            // Result files of made-up shapes: a protocol no build has, so no field is held
            // to a typed struct (the spec tests do that).
            &[("xnli", "made-up"), ("sib200", "made-up")],
        )
        .unwrap()
        .remove(0)
    }

    fn cell<'a>(t: &'a RenderedTable, row: &str, col: &str) -> &'a CellRecord {
        t.records
            .iter()
            .find(|r| r.row == row && r.column == col && r.kind == "measured")
            .unwrap_or_else(|| panic!("no cell {row}/{col}"))
    }

    const GRID: &str = concat!(
        "title: t\npaper: p\ntable: T\nsource: s\nmetric: m\nbench: xnli\n",
        "columns:\n",
        "  - {key: en, field: scores.acc.en}\n",
        "  - {key: fr, field: scores.acc.fr}\n",
        "  - {key: sw, na: no data}\n",
        "  - {key: avg, mean_of: [en, fr]}\n",
        "published:\n",
        "  - {key: p, label: P, values: {en: 70.0, fr: 60.0, avg: 66.0}}\n",
        "compare_to: p\n",
        "systems:\n",
        "  - a\n",
        "  - {system: b, baseline: {system: a, mode: relative}}\n",
        "  - c\n",
        "  - d\n",
    );

    #[test]
    fn grid_cells_carry_values_deltas_reasons_and_sources() {
        let inp = inputs(&[
            (
                "a",
                vec![result("xnli", json!({"acc": {"en": 80.0, "fr": 50.0}}))],
            ),
            (
                "b",
                vec![result("xnli", json!({"acc": {"en": 88.0, "fr": 55.0}}))],
            ),
            ("d", vec![result("sib200", json!({}))]),
        ]);
        let t = build(&[spec(GRID)], &inp).remove(0);
        let en = cell(&t, "a", "en");
        assert_eq!(
            (en.value, en.reference, en.delta),
            (Some(80.0), Some(70.0), Some(10.0))
        );
        assert_eq!(en.display, "80.0 (+10.0)");
        assert_eq!(en.result_file, "/r/xnli.json");
        assert_eq!(en.field, "scores.acc.en");
        let avg = cell(&t, "a", "avg");
        assert_eq!((avg.value, avg.delta), (Some(65.0), Some(-1.0)));
        assert_eq!(cell(&t, "a", "sw").status, "n/a");
        assert_eq!(cell(&t, "a", "sw").note, "no data");
        // b relative to a: 100 × (88 − 80) / 80 = 10.
        let b = cell(&t, "b", "en");
        assert!((b.value.unwrap() - 10.0).abs() < 1e-12, "{b:?}");
        assert_eq!(b.baseline_mode, "relative:a");
        // c has no results at all; d lacks the benchmark.
        assert_eq!(cell(&t, "c", "en").status, "not run yet");
        let d = cell(&t, "d", "fr");
        assert_eq!(d.status, "not run yet");
        assert!(d.note.contains("no xnli.json"), "{}", d.note);
        assert_eq!(t.blocks.len(), 1);
        let rows = &t.blocks[0].rows;
        assert_eq!(rows.len(), 5, "1 published + 4 systems");
        assert!(
            rows[3].label.starts_with("c ["),
            "not-run label carries the hint mark: {}",
            rows[3].label
        );
        assert!(t
            .footnotes
            .iter()
            .any(|f| f.text.contains("harness run recipes/c.yaml")));
        // Filled: a en fr avg, b en fr avg. Not run: c's 4 cells, d's en and fr (d's avg is
        // n/a: it needs both).
        assert_eq!((t.filled, t.not_run), (6, 6));
        assert_eq!(cell(&t, "d", "avg").status, "n/a");
    }

    #[test]
    fn transposed_grids_swap_rows_and_columns() {
        let t = build(&[spec(&format!("{GRID}transpose: true\n"))], &inputs(&[])).remove(0);
        let b = &t.blocks[0];
        assert_eq!(b.rows.len(), 4, "one row per column");
        assert_eq!(b.header.len(), 5, "one column per published row and system");
        assert_eq!(b.rows[0].label, "en");
        assert_eq!(b.rows[0].cells[0].text, "70.0");
    }

    #[test]
    fn matrix_cells_use_indices_overrides_and_the_diagonal_reason() {
        let yaml = concat!(
            "title: t\npaper: p\ntable: T\nsource: s\nmetric: m\nbench: sib200\nlayout: matrix\n",
            "better: lower\ndiagonal: self\nscale: -1\noffset: 100\n",
            "rows: {label: train, keys: [{key: de, idx: 1}, {key: en, idx: 0}, {key: avg, field: 'scores.avg.{col}'}]}\n",
            "cols: {label: test, keys: [{key: de, idx: 1}, {key: en, idx: 0}]}\n",
            "field: 'scores.m[{r}][{c}]'\n",
            "published:\n",
            "  - {key: p, label: P, values: [[null, 50.0], [40.0, null], [null, null]]}\n",
            "compare_to: p\n",
            "systems: [a, z]\n",
        );
        let inp = inputs(&[(
            "a",
            vec![result(
                "sib200",
                json!({"m": [[90.0, 80.0], [70.0, 60.0]], "avg": {"de": 20.0}}),
            )],
        )]);
        let t = build(&[spec(yaml)], &inp).remove(0);
        let find = |r: &str, c: &str| {
            t.records
                .iter()
                .find(|x| {
                    x.kind == "measured" && x.row == "a" && x.matrix_row == r && x.column == c
                })
                .unwrap()
        };
        // de (idx 1) → en (idx 0): m[1][0] = 70 → 100 − 70 = 30; reference 50.
        let x = find("de", "en");
        assert_eq!((x.value, x.reference), (Some(30.0), Some(50.0)));
        assert_eq!(x.delta, Some(-20.0));
        assert_eq!(find("en", "de").value, Some(100.0 - 80.0));
        assert_eq!(find("de", "de").status, "n/a");
        assert_eq!(find("avg", "de").value, Some(80.0));
        assert_eq!(find("avg", "en").status, "n/a", "scores.avg.en is missing");
        // One published block, one measured, one not-run block with its command.
        assert_eq!(t.blocks.len(), 3);
        assert!(t.blocks[2]
            .message
            .as_deref()
            .unwrap()
            .contains("harness run recipes/z.yaml"));
        assert_eq!(t.charts.len(), 2, "heat maps of P and a");
    }

    #[test]
    fn marks_and_numbers_format_stably() {
        assert_eq!(mark_name(0), "a");
        assert_eq!(mark_name(25), "z");
        assert_eq!(mark_name(26), "aa");
        assert_eq!(mark_name(27), "ab");
        assert_eq!(fmt_num(-0.04, 1), "0.0");
        assert_eq!(fmt_num(61.117, 1), "61.1");
        assert_eq!(fmt_delta(-12.84, 1), "-12.8");
        assert_eq!(fmt_delta(0.0, 2), "+0.00");
        assert_eq!(fmt_delta(1.25, 1), "+1.2");
    }

    #[test]
    fn notes_reuse_marks_for_the_same_text() {
        let mut n = Notes::default();
        assert_eq!(n.mark("x"), "a");
        assert_eq!(n.mark("y"), "b");
        assert_eq!(n.mark("x"), "a");
        assert_eq!(n.into_footnotes().len(), 2);
    }
}
