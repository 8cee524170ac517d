//! Table specifications as data: one YAML file per paper table in `benchmarks/tables/`,
//! compiled into the binary so `harness report` works from any directory, and read again at
//! run time from `./benchmarks/tables/` and `--spec FILE` ([`load`]).
//!
//! A spec says what a reader should see side by side: the published rows (typed from the
//! paper, each value with its status and the table's source), the systems measured here
//! (recipes and encoders, by name), which benchmark result and JSON field fills each
//! measured cell, the number format, and why a cell has no data. Two layouts:
//!
//! * `grid`: rows are systems (× optional variants), columns are tasks/languages/metrics;
//!   `transpose: true` displays it the other way round (Tatoeba's 112 languages).
//! * `matrix`: a language × language table per system (MLDoc-style train × test,
//!   similarity search source × target), drawn as heat maps.
//!
//! Field paths address the result file (`crates/bench/src/runner.rs` `BenchResult`) serialised as
//! JSON: `scores.accuracy.{key}`, `scores.matrix.accuracy[{r}][{c}]`, or
//! `mean(path, path, ...)`. Object keys may contain dots (`subsets.track3.es-es`): the
//! resolver matches the longest key first. Placeholders: `{key}` (grid column),
//! `{row}`/`{col}` (matrix axis keys), `{r}`/`{c}` (matrix axis indices, from `idx` or the
//! position), and each variant's `vars`.

use super::error::ReportError;
use include_dir::{include_dir, Dir};
use serde::Deserialize;
use std::collections::{BTreeMap, BTreeSet};

static TABLES: Dir<'_> = include_dir!("$CARGO_MANIFEST_DIR/../../benchmarks/tables");

/// Whether a larger number is better (accuracy) or worse (error rate, Ψ).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Better {
    #[default]
    Higher,
    Lower,
    /// Counts and other numbers with no direction.
    None,
}

/// How a published number was obtained (`../shared/papers/laser-published-results.md`
/// uses the same labels).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Status {
    /// Read verbatim from the paper text (or the named source).
    #[default]
    Confirmed,
    /// Follows arithmetically (or by the paper's own statements) from confirmed numbers;
    /// the row's note gives the derivation.
    Derived,
    /// Recalled, not verified against the paper: shown with a `?`.
    Unconfirmed,
}

impl Status {
    /// The marker printed after a published value.
    pub fn marker(self) -> &'static str {
        match self {
            Status::Confirmed => "",
            Status::Derived => "†",
            Status::Unconfirmed => "?",
        }
    }

    /// Lower-case name, as written in specs and CSV.
    pub fn name(self) -> &'static str {
        match self {
            Status::Confirmed => "confirmed",
            Status::Derived => "derived",
            Status::Unconfirmed => "unconfirmed",
        }
    }
}

/// `grid` or `matrix`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Layout {
    #[default]
    Grid,
    Matrix,
}

/// One table specification (`benchmarks/tables/<name>.yaml`).
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TableSpec {
    /// File stem; what `--table` and a recipe's `report:` name.
    #[serde(skip)]
    pub name: String,
    /// Position in the report (papers in DESIGN.md's order, tables in the paper's);
    /// ties are broken by name.
    #[serde(default = "default_order")]
    pub order: u32,
    /// Heading shown above the table.
    pub title: String,
    /// Paper file stem in `../shared/papers`.
    pub paper: String,
    /// The table or section in the paper (`Table 4`, `§3.4`).
    pub table: String,
    /// Where the published numbers were typed from.
    pub source: String,
    /// Stand-ins, protocol differences and other reasons for gaps.
    #[serde(default)]
    pub notes: Vec<String>,
    /// What the numbers are (`accuracy (%)`).
    pub metric: String,
    #[serde(default)]
    pub better: Better,
    /// Decimals shown (cells may override per column).
    #[serde(default = "default_decimals")]
    pub decimals: usize,
    /// Benchmark filling the cells unless a column names another.
    #[serde(default)]
    pub bench: Option<String>,
    /// Measured value = raw × scale + offset (e.g. 0.01 for Pearson ×100 → r; −1 and 100
    /// for error rate → accuracy).
    #[serde(default = "one")]
    pub scale: f64,
    #[serde(default)]
    pub offset: f64,
    #[serde(default)]
    pub layout: Layout,

    // --- grid
    /// Columns generated from keys with one field template (`{key}`), before `columns`.
    #[serde(default)]
    pub columns_from: Option<ColumnsFrom>,
    /// Explicit columns.
    #[serde(default)]
    pub columns: Vec<Column>,
    /// Show columns as rows (many languages, few systems).
    #[serde(default)]
    pub transpose: bool,
    /// Sub-rows of each measured system (e.g. few-shot / monolingual × language).
    #[serde(default)]
    pub variants: Vec<Variant>,

    // --- matrix
    #[serde(default)]
    pub rows: Option<Axis>,
    #[serde(default)]
    pub cols: Option<Axis>,
    /// Field template of a matrix cell.
    #[serde(default)]
    pub field: Option<String>,
    /// Per-cell field overrides, `"row/col": path`.
    #[serde(default)]
    pub cells: BTreeMap<String, String>,
    /// Why the diagonal has no measured value, when it has none.
    #[serde(default)]
    pub diagonal: Option<String>,

    // --- both
    /// Rows typed from the paper (or its stated source).
    #[serde(default)]
    pub published: Vec<Published>,
    /// Published row that measured cells are compared with (deltas), unless a system or
    /// variant names another.
    #[serde(default)]
    pub compare_to: Option<String>,
    /// Systems measured here: recipe names (`laser`, `laser@layers-3` for a profile) and
    /// evaluation encoders (`hashed-ngrams`, `all-MiniLM-L6-v2`, `multilingual-e5-small`).
    #[serde(default)]
    pub systems: Vec<SystemRow>,
    #[serde(default)]
    pub chart: Option<ChartSpec>,
}

fn default_order() -> u32 {
    1000
}

fn default_decimals() -> usize {
    1
}

fn one() -> f64 {
    1.0
}

/// `columns_from`: one column per key, same field template.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ColumnsFrom {
    pub keys: Vec<AxisKey>,
    pub field: String,
    #[serde(default)]
    pub bench: Option<String>,
}

/// A grid column.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Column {
    pub key: String,
    #[serde(default)]
    pub label: Option<String>,
    /// Field template; `None` with `na` for columns nothing here measures.
    #[serde(default)]
    pub field: Option<String>,
    #[serde(default)]
    pub bench: Option<String>,
    /// Why measured cells of this column are empty (stand-in missing, no data).
    #[serde(default)]
    pub na: Option<String>,
    #[serde(default)]
    pub decimals: Option<usize>,
    #[serde(default)]
    pub scale: Option<f64>,
    #[serde(default)]
    pub offset: Option<f64>,
    /// Left out of bar charts (counts next to scores).
    #[serde(default)]
    pub no_chart: bool,
    /// Direction of this column when it differs from the table's (ablation tables mix
    /// accuracies and error rates).
    #[serde(default)]
    pub better: Option<Better>,
    /// The mean of other columns of the same row (an Average column over benchmarks).
    #[serde(default)]
    pub mean_of: Vec<String>,
}

/// An axis of a matrix (or the keys of `columns_from`).
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Axis {
    /// Axis title (`train language`).
    pub label: String,
    pub keys: Vec<AxisKey>,
}

/// One key of an axis: a plain string or a mapping with a label, the index used by
/// `{r}`/`{c}`, a field overriding the matrix field, and a reason for no data.
#[derive(Debug, Clone, Deserialize)]
#[serde(untagged)]
pub enum AxisKey {
    Plain(String),
    Full(AxisKeyFull),
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AxisKeyFull {
    pub key: String,
    #[serde(default)]
    pub label: Option<String>,
    #[serde(default)]
    pub idx: Option<usize>,
    #[serde(default)]
    pub field: Option<String>,
    #[serde(default)]
    pub na: Option<String>,
}

impl AxisKey {
    pub fn key(&self) -> &str {
        match self {
            AxisKey::Plain(k) => k,
            AxisKey::Full(f) => &f.key,
        }
    }
    pub fn label(&self) -> &str {
        match self {
            AxisKey::Plain(k) => k,
            AxisKey::Full(f) => f.label.as_deref().unwrap_or(&f.key),
        }
    }
    /// Index substituted for `{r}`/`{c}`: `idx`, else the position on the axis.
    pub fn index(&self, position: usize) -> usize {
        match self {
            AxisKey::Full(AxisKeyFull { idx: Some(i), .. }) => *i,
            _ => position,
        }
    }
    pub fn field(&self) -> Option<&str> {
        match self {
            AxisKey::Full(f) => f.field.as_deref(),
            AxisKey::Plain(_) => None,
        }
    }
    pub fn na(&self) -> Option<&str> {
        match self {
            AxisKey::Full(f) => f.na.as_deref(),
            AxisKey::Plain(_) => None,
        }
    }
}

/// Sub-row of every measured system in a grid.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Variant {
    pub key: String,
    pub label: String,
    /// Placeholder values for the column field templates.
    #[serde(default)]
    pub vars: BTreeMap<String, String>,
    #[serde(default)]
    pub compare_to: Option<String>,
    /// Column key → why this variant has no value there.
    #[serde(default)]
    pub na: BTreeMap<String, String>,
}

/// A row (grid) or a matrix (matrix layout) typed from a paper.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Published {
    pub key: String,
    pub label: String,
    /// Status of every value unless `status_of` says otherwise.
    #[serde(default)]
    pub status: Status,
    /// Column key (grid) or `row/col` (matrix) → status.
    #[serde(default)]
    pub status_of: BTreeMap<String, Status>,
    pub values: PublishedValues,
    /// Decimals of this row (counts among scores), else the column's.
    #[serde(default)]
    pub decimals: Option<usize>,
    /// Derivations, caveats.
    #[serde(default)]
    pub note: Option<String>,
}

/// Grid rows map column keys to numbers; matrices are lists of rows. `null` (or a missing
/// key) is a value the paper does not give or the text extract lost.
#[derive(Debug, Clone, Deserialize)]
#[serde(untagged)]
pub enum PublishedValues {
    Map(BTreeMap<String, Option<f64>>),
    Matrix(Vec<Vec<Option<f64>>>),
}

/// A measured system's row (grid) or matrix.
#[derive(Debug, Clone, Deserialize)]
#[serde(untagged)]
pub enum SystemRow {
    Plain(String),
    Full(SystemRowFull),
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SystemRowFull {
    pub system: String,
    /// Other names that fill this row when `system` has no results (a profile equal to
    /// the default, e.g. `laser@layers-1` = `laser`).
    #[serde(default)]
    pub aliases: Vec<String>,
    #[serde(default)]
    pub label: Option<String>,
    #[serde(default)]
    pub compare_to: Option<String>,
    /// Report this system relative to another one (Emu over its base encoder).
    #[serde(default)]
    pub baseline: Option<Baseline>,
    /// Column key (or `row/col`) → why this system has no value there.
    #[serde(default)]
    pub na: BTreeMap<String, String>,
    #[serde(default)]
    pub note: Option<String>,
}

/// Measured value relative to another system's value of the same cell.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Baseline {
    pub system: String,
    pub mode: BaselineMode,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum BaselineMode {
    /// 100 × (value − baseline) / baseline, in %.
    Relative,
    /// value − baseline, in points.
    Difference,
}

impl SystemRow {
    pub fn system(&self) -> &str {
        match self {
            SystemRow::Plain(s) => s,
            SystemRow::Full(f) => &f.system,
        }
    }
    /// `system` and its aliases, in lookup order.
    pub fn names(&self) -> Vec<&str> {
        match self {
            SystemRow::Plain(s) => vec![s.as_str()],
            SystemRow::Full(f) => std::iter::once(f.system.as_str())
                .chain(f.aliases.iter().map(String::as_str))
                .collect(),
        }
    }
    pub fn label(&self) -> String {
        match self {
            SystemRow::Plain(s) => s.clone(),
            SystemRow::Full(f) => f.label.clone().unwrap_or_else(|| f.system.clone()),
        }
    }
    pub fn compare_to(&self) -> Option<&str> {
        match self {
            SystemRow::Full(f) => f.compare_to.as_deref(),
            SystemRow::Plain(_) => None,
        }
    }
    pub fn baseline(&self) -> Option<&Baseline> {
        match self {
            SystemRow::Full(f) => f.baseline.as_ref(),
            SystemRow::Plain(_) => None,
        }
    }
    pub fn na(&self, key: &str) -> Option<&str> {
        match self {
            SystemRow::Full(f) => f.na.get(key).map(String::as_str),
            SystemRow::Plain(_) => None,
        }
    }
    pub fn note(&self) -> Option<&str> {
        match self {
            SystemRow::Full(f) => f.note.as_deref(),
            SystemRow::Plain(_) => None,
        }
    }
}

/// Which chart a table gets.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ChartSpec {
    pub kind: ChartKind,
    /// Bars sorted by the first measured series (Tatoeba: languages by error).
    #[serde(default)]
    pub sort: bool,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ChartKind {
    /// Grouped bars per column: the reference published row and every measured row.
    Bars,
    /// One heat map per matrix (matrix layout).
    Heatmap,
}

/// A grid column after `columns_from` expansion.
#[derive(Debug, Clone)]
pub struct ResolvedColumn {
    pub key: String,
    pub label: String,
    pub field: Option<String>,
    pub bench: Option<String>,
    pub na: Option<String>,
    pub decimals: usize,
    pub scale: f64,
    pub offset: f64,
    pub no_chart: bool,
    pub better: Better,
    pub mean_of: Vec<String>,
}

impl TableSpec {
    /// Grid columns: `columns_from` expanded, then `columns`.
    pub fn grid_columns(&self) -> Vec<ResolvedColumn> {
        let mut out = Vec::new();
        if let Some(cf) = &self.columns_from {
            for k in &cf.keys {
                out.push(ResolvedColumn {
                    key: k.key().to_string(),
                    label: k.label().to_string(),
                    field: Some(k.field().unwrap_or(&cf.field).to_string()),
                    bench: cf.bench.clone().or_else(|| self.bench.clone()),
                    na: k.na().map(String::from),
                    decimals: self.decimals,
                    scale: self.scale,
                    offset: self.offset,
                    no_chart: false,
                    better: self.better,
                    mean_of: Vec::new(),
                });
            }
        }
        for c in &self.columns {
            out.push(ResolvedColumn {
                key: c.key.clone(),
                label: c.label.clone().unwrap_or_else(|| c.key.clone()),
                field: c.field.clone(),
                bench: c.bench.clone().or_else(|| self.bench.clone()),
                na: c.na.clone(),
                decimals: c.decimals.unwrap_or(self.decimals),
                scale: c.scale.unwrap_or(self.scale),
                offset: c.offset.unwrap_or(self.offset),
                no_chart: c.no_chart,
                better: c.better.unwrap_or(self.better),
                mean_of: c.mean_of.clone(),
            });
        }
        out
    }

    /// Every system this table has a row for.
    pub fn system_names(&self) -> Vec<&str> {
        let mut out: Vec<&str> = self.systems.iter().flat_map(SystemRow::names).collect();
        out.extend(
            self.systems
                .iter()
                .filter_map(|s| s.baseline())
                .map(|b| b.system.as_str()),
        );
        out
    }

    /// Checks the references inside the spec and against the benchmarks, given as (name,
    /// protocol): a benchmark it names must exist, and every field path, filled, must be a
    /// number the benchmark's protocol writes (its typed scores,
    /// [`harness_bench::protocols::check_field`]). Every problem is listed, prefixed with the
    /// file name.
    pub fn check(&self, benchmarks: &[(&str, &str)]) -> Vec<String> {
        let known = KnownBenchmarks(benchmarks);
        let mut out = self.check_references();
        known.check_name(&self.bench, &mut out);
        match self.layout {
            Layout::Grid => self.check_grid(&known, &mut out),
            Layout::Matrix => self.check_matrix(&known, &mut out),
        }
        out
    }

    /// Published row keys unique, every `compare_to` a published row, systems listed once
    /// and none its own baseline.
    fn check_references(&self) -> Vec<String> {
        let mut out = Vec::new();
        let published: BTreeSet<&str> = self.published.iter().map(|p| p.key.as_str()).collect();
        if published.len() != self.published.len() {
            out.push("two published rows have the same key".to_string());
        }
        let mut refs: Vec<(&str, &str)> = Vec::new();
        if let Some(c) = &self.compare_to {
            refs.push(("compare_to", c));
        }
        for s in &self.systems {
            if let Some(c) = s.compare_to() {
                refs.push(("systems[].compare_to", c));
            }
            if let Some(b) = s.baseline() {
                if b.system == s.system() {
                    out.push(format!("system `{}` is its own baseline", s.system()));
                }
            }
        }
        for v in &self.variants {
            if let Some(c) = &v.compare_to {
                refs.push(("variants[].compare_to", c));
            }
        }
        for (what, r) in refs {
            if !published.contains(r) {
                out.push(format!(
                    "{what}: `{r}` is not a published row; known: {}",
                    published.iter().copied().collect::<Vec<_>>().join(", ")
                ));
            }
        }
        let mut systems = BTreeSet::new();
        for s in &self.systems {
            if !systems.insert(s.system()) {
                out.push(format!("system `{}` is listed twice", s.system()));
            }
        }
        out
    }

    /// A grid's columns (keys, `mean_of`, fields filled for every variant) and the keys of
    /// its published rows, variants and systems.
    fn check_grid(&self, known: &KnownBenchmarks, out: &mut Vec<String>) {
        if self.rows.is_some() || self.cols.is_some() || self.field.is_some() {
            out.push("`rows`, `cols` and `field` belong to `layout: matrix`".into());
        }
        let cols = self.grid_columns();
        if cols.is_empty() {
            out.push("a grid needs `columns` or `columns_from`".into());
        }
        let keys: BTreeSet<&str> = cols.iter().map(|c| c.key.as_str()).collect();
        if keys.len() != cols.len() {
            out.push("two columns have the same key".into());
        }
        let vars: Vec<BTreeMap<String, String>> = if self.variants.is_empty() {
            vec![BTreeMap::new()]
        } else {
            self.variants.iter().map(|v| v.vars.clone()).collect()
        };
        for c in &cols {
            known.check_name(&c.bench, out);
            for m in &c.mean_of {
                if !keys.contains(m.as_str()) || *m == c.key {
                    out.push(format!(
                        "column `{}`: mean_of names `{m}`, not another column",
                        c.key
                    ));
                }
            }
            match (&c.field, &c.na) {
                (None, None) if !c.mean_of.is_empty() => {}
                (None, None) => out.push(format!(
                    "column `{}` has neither `field` nor `na` (say why nothing fills it)",
                    c.key
                )),
                (Some(_), _) if c.bench.is_none() => out.push(format!(
                    "column `{}` has a field but no benchmark (set `bench`)",
                    c.key
                )),
                _ => {}
            }
            if let Some(f) = &c.field {
                for v in &vars {
                    let mut ctx = v.clone();
                    ctx.insert("key".into(), c.key.clone());
                    match fill(f, &ctx) {
                        Err(e) => out.push(format!("column `{}`: {e}", c.key)),
                        Ok(path) => {
                            if let Some(e) = known.field_problem(c.bench.as_ref(), &path) {
                                out.push(format!("column `{}`: {e}", c.key));
                            }
                        }
                    }
                }
            }
        }
        for p in &self.published {
            match &p.values {
                PublishedValues::Map(m) => {
                    for k in m.keys() {
                        if !keys.contains(k.as_str()) {
                            out.push(format!(
                                "published row `{}`: value for unknown column `{k}`",
                                p.key
                            ));
                        }
                    }
                }
                PublishedValues::Matrix(_) => out.push(format!(
                    "published row `{}`: a grid row maps column keys to values",
                    p.key
                )),
            }
            for k in p.status_of.keys() {
                if !keys.contains(k.as_str()) {
                    out.push(format!(
                        "published row `{}`: status for unknown column `{k}`",
                        p.key
                    ));
                }
            }
        }
        for v in &self.variants {
            for k in v.na.keys() {
                if !keys.contains(k.as_str()) {
                    out.push(format!("variant `{}`: na for unknown column `{k}`", v.key));
                }
            }
        }
        for s in &self.systems {
            if let SystemRow::Full(f) = s {
                for k in f.na.keys() {
                    if !keys.contains(k.as_str()) {
                        out.push(format!(
                            "system `{}`: na for unknown column `{k}`",
                            f.system
                        ));
                    }
                }
            }
        }
    }

    /// A matrix's axes, published matrices' shapes, `cells` keys and every cell's field.
    fn check_matrix(&self, known: &KnownBenchmarks, out: &mut Vec<String>) {
        let (Some(rows), Some(cols)) = (&self.rows, &self.cols) else {
            out.push("`layout: matrix` needs `rows` and `cols`".into());
            return;
        };
        if self.field.is_none() && self.bench.is_some() {
            out.push("a matrix with a `bench` needs a `field` template".into());
        }
        if !self.columns.is_empty() || self.columns_from.is_some() || self.transpose {
            out.push("`columns`, `columns_from` and `transpose` belong to grids".into());
        }
        let (nr, nc) = (rows.keys.len(), cols.keys.len());
        for p in &self.published {
            match &p.values {
                PublishedValues::Matrix(m) => {
                    if m.len() != nr || m.iter().any(|r| r.len() != nc) {
                        out.push(format!("published matrix `{}` is not {nr} × {nc}", p.key));
                    }
                }
                PublishedValues::Map(_) => out.push(format!(
                    "published row `{}`: a matrix needs a list of rows",
                    p.key
                )),
            }
        }
        let cell_keys: BTreeSet<String> = rows
            .keys
            .iter()
            .flat_map(|r| {
                cols.keys
                    .iter()
                    .map(move |c| format!("{}/{}", r.key(), c.key()))
            })
            .collect();
        for k in self.cells.keys() {
            if !cell_keys.contains(k) {
                out.push(format!("cells: `{k}` is not a `row/col` of the axes"));
            }
        }
        if let Some(field) = &self.field {
            for (ri, r) in rows.keys.iter().enumerate() {
                for (ci, c) in cols.keys.iter().enumerate() {
                    let t = cell_template(self, r, c).unwrap_or(field);
                    match fill(t, &matrix_vars(r, ri, c, ci)) {
                        Err(e) => out.push(format!("cell {}/{}: {e}", r.key(), c.key())),
                        Ok(path) => {
                            if let Some(e) = known.field_problem(self.bench.as_ref(), &path) {
                                out.push(format!("cell {}/{}: {e}", r.key(), c.key()));
                            }
                        }
                    }
                }
            }
        }
    }
}

/// The benchmarks a spec may name, as (name, protocol).
struct KnownBenchmarks<'a>(&'a [(&'a str, &'a str)]);

impl KnownBenchmarks<'_> {
    /// An unknown benchmark name, with a suggestion.
    fn check_name(&self, bench: &Option<String>, out: &mut Vec<String>) {
        if let Some(b) = bench {
            let names: Vec<&str> = self.0.iter().map(|(n, _)| *n).collect();
            if !names.contains(&b.as_str()) {
                out.push(format!(
                    "unknown benchmark `{b}`{}",
                    harness_core::suggest::did_you_mean(b, &names)
                ));
            }
        }
    }

    /// Why a filled path is no number the protocol of `bench` writes; `None` when it is, or
    /// when the benchmark is unknown (reported by [`Self::check_name`]).
    fn field_problem(&self, bench: Option<&String>, path: &str) -> Option<String> {
        let bench = bench?;
        let (_, protocol) = self.0.iter().find(|(n, _)| *n == bench.as_str())?;
        harness_bench::protocols::check_field(protocol, path).err()
    }
}

/// The field template of a matrix cell: explicit `cells` entry, else the column's, else
/// the row's field (the matrix `field` is the caller's fallback).
pub fn cell_template<'a>(spec: &'a TableSpec, r: &'a AxisKey, c: &'a AxisKey) -> Option<&'a str> {
    spec.cells
        .get(&format!("{}/{}", r.key(), c.key()))
        .map(String::as_str)
        .or_else(|| c.field())
        .or_else(|| r.field())
}

/// Placeholder values of one matrix cell.
pub fn matrix_vars(r: &AxisKey, ri: usize, c: &AxisKey, ci: usize) -> BTreeMap<String, String> {
    BTreeMap::from([
        ("row".to_string(), r.key().to_string()),
        ("col".to_string(), c.key().to_string()),
        ("r".to_string(), r.index(ri).to_string()),
        ("c".to_string(), c.index(ci).to_string()),
    ])
}

/// Fills `{name}` placeholders; an unknown name is an error naming it.
pub fn fill(template: &str, vars: &BTreeMap<String, String>) -> Result<String, String> {
    let mut out = String::with_capacity(template.len());
    let mut rest = template;
    while let Some(open) = rest.find('{') {
        out.push_str(&rest[..open]);
        let after = &rest[open + 1..];
        let close = after
            .find('}')
            .ok_or_else(|| format!("unclosed `{{` in `{template}`"))?;
        let name = &after[..close];
        let v = vars.get(name).ok_or_else(|| {
            format!(
                "unknown placeholder `{{{name}}}` in `{template}`; known here: {}",
                vars.keys()
                    .map(|k| format!("{{{k}}}"))
                    .collect::<Vec<_>>()
                    .join(", ")
            )
        })?;
        out.push_str(v);
        rest = &after[close + 1..];
    }
    out.push_str(rest);
    Ok(out)
}

/// Every spec in force, sorted, each checked: the shipped ones (compiled into this binary)
/// overlaid at run time by `./benchmarks/tables/` and the `--spec` files
/// (`harness_core::specs`), so a user adds a table without rebuilding.
pub fn load() -> Result<Vec<TableSpec>, ReportError> {
    let shipped: Vec<(String, String)> = TABLES
        .files()
        .filter(|f| f.path().extension().is_some_and(|e| e == "yaml"))
        .map(|f| {
            (
                f.path().to_string_lossy().into_owned(),
                f.contents_utf8().unwrap_or_default().to_string(),
            )
        })
        .collect();
    let runtime = harness_core::specs::runtime_files(harness_core::specs::Kind::Table)
        .map_err(|e| ReportError::Setup(e.to_string()))?;
    let files = harness_core::specs::overlay(shipped, runtime);
    let registry =
        harness_bench::registry::Registry::load().map_err(|e| ReportError::Setup(e.to_string()))?;
    parse_all(&files, &registry.protocols())
}

/// Parses and checks spec files given as `(file name, text)` against the benchmarks, given
/// as (name, protocol) ([`TableSpec::check`]).
pub fn parse_all(
    files: &[(String, String)],
    benchmarks: &[(&str, &str)],
) -> Result<Vec<TableSpec>, ReportError> {
    let mut specs = Vec::new();
    let mut problems = Vec::new();
    for (file, text) in files {
        let stem = file.strip_suffix(".yaml").unwrap_or(file).to_string();
        match serde_yaml::from_str::<TableSpec>(text) {
            Ok(mut s) => {
                s.name = stem;
                for p in s.check(benchmarks) {
                    problems.push(format!("benchmarks/tables/{file}: {p}"));
                }
                specs.push(s);
            }
            Err(e) => problems.push(format!("benchmarks/tables/{file}: {e}")),
        }
    }
    if !problems.is_empty() {
        return Err(ReportError::Spec { problems });
    }
    specs.sort_by(|a, b| (a.order, &a.name).cmp(&(b.order, &b.name)));
    Ok(specs)
}

/// Selects specs by name (all when `names` is empty); an unknown name is an error with a
/// suggestion.
pub fn select(specs: Vec<TableSpec>, names: &[String]) -> Result<Vec<TableSpec>, ReportError> {
    if names.is_empty() {
        return Ok(specs);
    }
    let known: Vec<&str> = specs.iter().map(|s| s.name.as_str()).collect();
    for n in names {
        if !known.contains(&n.as_str()) {
            return Err(ReportError::UnknownTable {
                name: n.clone(),
                suggestion: harness_core::suggest::did_you_mean(n, &known),
                known: known.join(", "),
            });
        }
    }
    // Keep the order the user gave.
    let mut by_name: BTreeMap<String, TableSpec> =
        specs.into_iter().map(|s| (s.name.clone(), s)).collect();
    let mut out = Vec::new();
    for n in names {
        if let Some(s) = by_name.remove(n) {
            out.push(s);
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    const BENCH: &[(&str, &str)] = &[
        ("xnli", "xnli-zero-shot"),
        ("sib200", "mldoc"),
        ("stsb-test", "sts"),
    ];

    fn parse(text: &str) -> Result<Vec<TableSpec>, ReportError> {
        parse_all(&[("t.yaml".to_string(), text.to_string())], BENCH)
    }

    #[test]
    fn every_embedded_spec_loads_and_checks() {
        let specs = load().unwrap();
        assert!(specs.len() >= 20, "only {} specs", specs.len());
        for s in &specs {
            assert!(
                !s.systems.is_empty() || !s.published.is_empty(),
                "{} is empty",
                s.name
            );
        }
    }

    #[test]
    fn fill_substitutes_and_names_unknown_placeholders() {
        let vars = BTreeMap::from([("key".to_string(), "fr".to_string())]);
        assert_eq!(
            fill("scores.accuracy.{key}", &vars).unwrap(),
            "scores.accuracy.fr"
        );
        let e = fill("scores.{lang}", &vars).unwrap_err();
        assert!(e.contains("{lang}") && e.contains("{key}"), "{e}");
        assert!(fill("a.{key", &vars).is_err());
    }

    #[test]
    fn check_lists_every_problem_with_the_file() {
        let err = parse(concat!(
            "title: t\npaper: p\ntable: T1\nsource: s\nmetric: m\nbench: xnl\ncompare_to: nope\n",
            "columns:\n",
            "  - {key: en, field: 'scores.x.{lang}'}\n",
            "  - {key: fr}\n",
            "published:\n",
            "  - {key: a, label: A, values: {de: 1.0}}\n",
        ))
        .unwrap_err()
        .to_string();
        for want in [
            "t.yaml: unknown benchmark `xnl` (did you mean `xnli`?)",
            "compare_to: `nope` is not a published row",
            "unknown placeholder `{lang}`",
            "column `fr` has neither `field` nor `na`",
            "value for unknown column `de`",
        ] {
            assert!(err.contains(want), "missing `{want}` in:\n{err}");
        }
    }

    #[test]
    fn a_field_the_benchmarks_protocol_never_writes_is_refused_with_what_it_writes() {
        let err = parse(concat!(
            "title: t\npaper: p\ntable: T1\nsource: s\nmetric: m\nbench: stsb-test\n",
            "columns:\n",
            "  - {key: ok, field: 'scores.subsets.test.cosine.spearman'}\n",
            "  - {key: typo, field: 'scores.subsets.test.cosine.spearmen'}\n",
            "  - {key: mean, field: 'mean(scores.all.n, scores.al.n)'}\n",
            "  - {key: top, field: main_score}\n",
        ))
        .unwrap_err()
        .to_string();
        assert!(
            !err.contains("column `ok`") && !err.contains("column `top`"),
            "{err}"
        );
        for want in [
            "column `typo`: `scores.subsets.test.cosine.spearmen` is not a number that protocol \
             `sts` writes: under `scores.subsets.test.cosine` it writes the fields pearson, \
             spearman",
            "column `mean`: `scores.al.n` is not a number that protocol `sts` writes: under \
             `scores` it writes the fields",
        ] {
            assert!(err.contains(want), "missing `{want}` in:\n{err}");
        }
    }

    #[test]
    fn matrix_specs_check_shapes_and_cells() {
        let err = parse(concat!(
            "title: t\npaper: p\ntable: T1\nsource: s\nmetric: m\nbench: sib200\nlayout: matrix\n",
            "field: 'scores.m[{r}][{c}]'\n",
            "rows: {label: train, keys: [en, de]}\n",
            "cols: {label: test, keys: [en, de]}\n",
            "cells: {'en/xx': a}\n",
            "published:\n",
            "  - {key: a, label: A, values: [[1.0, 2.0]]}\n",
        ))
        .unwrap_err()
        .to_string();
        assert!(err.contains("published matrix `a` is not 2 × 2"), "{err}");
        assert!(err.contains("`en/xx` is not a `row/col`"), "{err}");
    }

    #[test]
    fn select_keeps_order_and_suggests() {
        let specs = load().unwrap();
        let names = vec!["laser-xnli".to_string(), "laser-bucc".to_string()];
        let got = select(specs.clone(), &names).unwrap();
        assert_eq!(got[0].name, "laser-xnli");
        assert_eq!(got[1].name, "laser-bucc");
        let e = select(specs, &["laser-xnl".to_string()])
            .unwrap_err()
            .to_string();
        assert!(e.contains("did you mean `laser-xnli`"), "{e}");
    }
}
