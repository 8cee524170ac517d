//! Grid files (`grids/*.yaml`): a base recipe and profile, fixed overrides (the grid's
//! budget), axes whose values multiply (`axes:`), axes whose values move together (`zip:`),
//! combinations left out (`exclude:`), values each changed alone from the baseline
//! (`one_at_a_time:`, the usual ablation), seeds as the replicate axis, and the metrics to
//! tabulate. docs/sweeps.md documents the format with a worked example.
//!
//! Every key an axis names is a dotted recipe key exactly as `--set` takes it
//! (`model.encoder.layers`, `tasks.similarity.params.alpha`), benchmark parameters included
//! (`evaluate.xnli.params.epochs`): a grid point *is* `harness run RECIPE --profile P --set
//! ...`, so a point and the same command typed by hand share their run directory.
//!
//! Hand-written expansion (no crate does product + zip + exclude + one-at-a-time over YAML
//! values); parsing goes through the recipe crate's path-aware deserializer so an error
//! names the grid file, line and key like a recipe error.

use harness_recipe::de::{self, Seg};
use harness_recipe::Problem;
use serde::Deserialize;
use serde_yaml::{Mapping, Value};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use crate::slurm::SlurmOptions;

/// A grid file as written.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct GridFile {
    /// Name of the sweep (default: the file stem).
    #[serde(default)]
    pub name: Option<String>,
    /// One line on what the sweep measures.
    #[serde(default)]
    pub description: Option<String>,
    /// The base recipe, relative to the grid file.
    pub recipe: PathBuf,
    /// The recipe profile every point starts from.
    #[serde(default)]
    pub profile: Option<String>,
    /// Overrides applied to every point before its axis values (the grid's budget).
    #[serde(default)]
    pub set: Mapping,
    /// Each key with its values; points are the product of all axes (and zip groups).
    #[serde(default)]
    pub axes: Mapping,
    /// Groups of keys whose value lists have one length and move together.
    #[serde(default)]
    pub zip: Vec<Mapping>,
    /// Partial assignments; a point matching every key of one of them is left out.
    #[serde(default)]
    pub exclude: Vec<Mapping>,
    /// Each value applied alone to the baseline point.
    #[serde(default)]
    pub one_at_a_time: Mapping,
    /// The row Δ is taken against (an assignment of axis keys); default: the first point.
    #[serde(default)]
    pub baseline: Mapping,
    /// The replicate axis: every point runs once per seed (`seed` of the recipe).
    #[serde(default)]
    pub seeds: Vec<u64>,
    /// What the ablation table shows; default: each benchmark's headline score.
    #[serde(default)]
    pub metrics: Vec<Metric>,
    /// Short names of axis keys in aliases and labels (default: the key's last segment).
    #[serde(default)]
    pub aliases: BTreeMap<String, String>,
    /// The paper's table of this ablation, rendered beside the sweep's.
    #[serde(default)]
    pub paper: Option<PaperTable>,
    /// Cluster requests of `--emit slurm`.
    #[serde(default)]
    pub slurm: Option<SlurmOptions>,
    /// Named variants of the grid (`--profile paper`: the paper-scale budget).
    #[serde(default)]
    pub profiles: BTreeMap<String, GridProfile>,
}

/// A grid profile: more fixed overrides, and optionally other seeds or another recipe
/// profile.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct GridProfile {
    #[serde(default)]
    pub set: Mapping,
    #[serde(default)]
    pub seeds: Option<Vec<u64>>,
    #[serde(default)]
    pub recipe_profile: Option<String>,
}

/// One column of the ablation table: a benchmark result field.
#[derive(Debug, Clone, PartialEq, Deserialize, serde::Serialize)]
#[serde(deny_unknown_fields)]
pub struct Metric {
    /// Benchmark whose result file holds it.
    pub bench: String,
    /// JSON field of the result file (`scores.summary.average`; `main_score` by default).
    #[serde(default = "main_score")]
    pub field: String,
    /// Column label (default: `bench field`).
    #[serde(default)]
    pub label: Option<String>,
    /// Whether a larger number is better.
    #[serde(default)]
    pub better: Direction,
    /// Shown value = raw × scale (e.g. 100 for an F1 in [0, 1]).
    #[serde(default = "unit")]
    pub scale: f64,
    /// Decimals shown.
    #[serde(default = "two")]
    pub decimals: usize,
}

fn main_score() -> String {
    "main_score".into()
}
fn unit() -> f64 {
    1.0
}
fn two() -> usize {
    2
}

impl Metric {
    /// The column label.
    pub fn label(&self) -> String {
        self.label.clone().unwrap_or_else(|| {
            if self.field == "main_score" {
                self.bench.clone()
            } else {
                format!("{} {}", self.bench, self.field)
            }
        })
    }
}

/// Direction of a metric.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Direction {
    #[default]
    Higher,
    Lower,
}

/// `paper:`: a table spec (`benchmarks/tables/<table>.yaml`) and which of its systems each
/// row alias fills.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PaperTable {
    pub table: String,
    /// Row alias (`layers=3`) → the spec's system name (`laser@layers-3`).
    #[serde(default)]
    pub systems: BTreeMap<String, String>,
}

/// A parsed grid with where it came from.
#[derive(Debug, Clone)]
pub struct Grid {
    pub path: PathBuf,
    pub text: String,
    pub file: GridFile,
    /// The grid profile applied, if any.
    pub profile: Option<String>,
    pub name: String,
}

/// One key = value of a point.
pub type Assignment = Vec<(String, Value)>;

/// One row of the ablation table: an assignment of axis values (seeds not included).
#[derive(Debug, Clone, PartialEq)]
pub struct Config {
    /// `layers=3 lr=0.001`, or `baseline` for the empty assignment.
    pub alias: String,
    pub assignment: Assignment,
    /// Whether Δ is taken against this row.
    pub is_baseline: bool,
}

/// One run: a config and a seed.
#[derive(Debug, Clone, PartialEq)]
pub struct Point {
    /// Index of its config in [`Expansion::configs`].
    pub config: usize,
    /// `layers=3 seed=2`.
    pub alias: String,
    pub seed: Option<u64>,
    /// `--set` arguments, in order: the grid's, the grid profile's, the axis values, the seed.
    pub sets: Vec<String>,
}

/// A file name for an alias (`layers=3 seed=2` → `layers_3_seed_2`): a point's log and its
/// `runs/` link in the sweep directory; [`Grid::expand`] refuses a grid two of whose points
/// get one name.
pub fn link_name(alias: &str) -> String {
    harness_core::rundir::safe_name(&alias.replace(' ', "_")).replace("__", "_")
}

/// A grid expanded.
#[derive(Debug, Clone)]
pub struct Expansion {
    pub configs: Vec<Config>,
    pub points: Vec<Point>,
    /// Axis keys in order, each with its short name (for charts: one per numeric axis).
    pub axes: Vec<(String, String)>,
}

fn problem(grid: &Path, text: &str, at: &[Seg], message: impl Into<String>) -> Problem {
    Problem::new(
        grid.to_path_buf(),
        harness_recipe::load::locate(text, at),
        de::path_string(at),
        message,
    )
}

fn key(k: &str) -> Seg {
    Seg::Key(k.to_string())
}

/// Largest grid file read (a grid is a few lines; a huge file is a mistake).
const MAX_GRID_BYTES: u64 = 1 << 20;

/// The most points (configs × seeds) a grid may expand to: far beyond a real sweep (the
/// papers' ablations have a few dozen runs), and small enough that a slip such as ten axes
/// of ten values (10^10 points) is an error naming the grid,
/// not an out-of-memory abort.
pub const MAX_POINTS: usize = 10_000;

impl Grid {
    /// Reads and parses a grid file, applying grid profile `profile`. Every problem found
    /// is returned, each with the file, line and key.
    pub fn load(path: &Path, profile: Option<&str>) -> Result<Grid, Vec<Problem>> {
        let fail = |m: String| vec![Problem::new(path.to_path_buf(), None, "", m)];
        let text = match harness_core::fsutil::read_text_capped(path, MAX_GRID_BYTES) {
            Ok(t) => t,
            Err(harness_core::fsutil::CappedReadError::TooLarge(_)) => {
                return Err(fail(format!(
                    "the grid file holds more than the {MAX_GRID_BYTES} bytes a grid may have"
                )))
            }
            Err(e) => {
                return Err(fail(format!(
                    "cannot read the grid file: {e}. Fix: give the path of a grid file (see grids/)"
                )))
            }
        };
        Grid::parse(path, &text, profile)
    }

    /// Parses grid text (`path` names it in errors and anchors the recipe path).
    pub fn parse(path: &Path, text: &str, profile: Option<&str>) -> Result<Grid, Vec<Problem>> {
        let value: Value = serde_yaml::from_str(text).map_err(|e| {
            vec![Problem::new(
                path.to_path_buf(),
                e.location().map(|l| l.line()),
                "",
                format!("not valid YAML: {e}"),
            )]
        })?;
        let mut file: GridFile = de::from_value(&value).map_err(|e| {
            let names = de::expected_names(&e.msg);
            let names: Vec<&str> = names.iter().map(String::as_str).collect();
            let unknown = e
                .msg
                .split('`')
                .nth(1)
                .filter(|_| e.msg.starts_with("unknown field"))
                .unwrap_or("");
            let mut p = problem(path, text, &e.path, e.msg.clone());
            if !unknown.is_empty() {
                p.suggestion = harness_recipe::check::suggest(unknown, &names);
            }
            vec![p]
        })?;
        let mut problems = Vec::new();
        if let Some(name) = profile {
            match file.profiles.get(name).cloned() {
                None => {
                    let known: Vec<&str> = file.profiles.keys().map(String::as_str).collect();
                    problems.push(Problem {
                        suggestion: harness_recipe::check::suggest(name, &known),
                        ..problem(
                            path,
                            text,
                            &[key("profiles")],
                            format!(
                                "unknown grid profile `{name}` (defined: {})",
                                if known.is_empty() {
                                    "none".to_string()
                                } else {
                                    known.join(", ")
                                }
                            ),
                        )
                    });
                }
                Some(p) => {
                    for (k, v) in p.set {
                        file.set.insert(k, v);
                    }
                    if let Some(s) = p.seeds {
                        file.seeds = s;
                    }
                    if p.recipe_profile.is_some() {
                        file.profile = p.recipe_profile;
                    }
                }
            }
        }
        let name = file.name.clone().unwrap_or_else(|| {
            path.file_stem()
                .map(|s| s.to_string_lossy().into_owned())
                .unwrap_or_else(|| "grid".into())
        });
        if name.is_empty() || harness_core::rundir::safe_name(&name) != name {
            problems.push(problem(
                path,
                text,
                &[key("name")],
                format!("`{name}` is not a usable sweep name. Fix: letters, digits, `-`, `_` and `.` only"),
            ));
        }
        let grid = Grid {
            path: path.to_path_buf(),
            text: text.to_string(),
            file,
            profile: profile.map(String::from),
            name,
        };
        problems.extend(grid.check_shape());
        if problems.is_empty() {
            Ok(grid)
        } else {
            Err(problems)
        }
    }

    /// The base recipe's path (relative paths are taken from the grid file's folder).
    pub fn recipe_path(&self) -> PathBuf {
        let r = &self.file.recipe;
        if r.is_absolute() {
            return r.clone();
        }
        // Lexically normalised (`grids/../recipes/x.yaml` → `recipes/x.yaml`) so commands
        // and run directories name the recipe as a user would type it.
        let joined = harness_core::fsutil::parent_dir(&self.path).join(r);
        let mut out = PathBuf::new();
        for c in joined.components() {
            match c {
                std::path::Component::ParentDir
                    if matches!(
                        out.components().next_back(),
                        Some(std::path::Component::Normal(_))
                    ) =>
                {
                    out.pop();
                }
                std::path::Component::CurDir => {}
                other => out.push(other),
            }
        }
        if out.as_os_str().is_empty() {
            out.push(".");
        }
        out
    }

    fn problem(&self, at: &[Seg], message: impl Into<String>) -> Problem {
        problem(&self.path, &self.text, at, message)
    }

    /// The `metrics:` against the benchmarks in force, given as (name, protocol): each names
    /// a benchmark, and its `field` is a number that benchmark's protocol writes (its typed
    /// scores, [`harness_bench::protocols::check_field`]), so a typo fails here and not as an
    /// empty column after the sweep.
    pub fn check_metrics(&self, benchmarks: &[(&str, &str)]) -> Vec<Problem> {
        let names: Vec<&str> = benchmarks.iter().map(|b| b.0).collect();
        let mut out = Vec::new();
        for (i, m) in self.file.metrics.iter().enumerate() {
            let at = |k: &str| [key("metrics"), Seg::Index(i), key(k)];
            match benchmarks.iter().find(|b| b.0 == m.bench) {
                None if m.bench.is_empty() => {}
                None => out.push(Problem {
                    suggestion: harness_recipe::check::suggest(&m.bench, &names),
                    ..self.problem(&at("bench"), format!("unknown benchmark `{}`", m.bench))
                }),
                Some((_, protocol)) => {
                    if let Err(e) = harness_bench::protocols::check_field(protocol, &m.field) {
                        out.push(self.problem(&at("field"), e));
                    }
                }
            }
        }
        out
    }

    /// Structural checks that need no recipe: string keys, lists of values, zip lengths,
    /// exclude and baseline keys that are axes, seeds distinct, metrics named.
    fn check_shape(&self) -> Vec<Problem> {
        let mut out = Vec::new();
        let (product_keys, axis_keys) = self.check_varied(&mut out);
        self.check_product_refs(&product_keys, &mut out);
        self.check_set(&axis_keys, &mut out);
        self.check_seeds_metrics_paper(&axis_keys, &mut out);
        out
    }

    /// Records `k` as varied, refusing a key varied twice.
    fn note_varied(
        &self,
        k: &str,
        at: &[Seg],
        out: &mut Vec<Problem>,
        axis_keys: &mut Vec<String>,
    ) {
        if axis_keys.iter().any(|a| a == k) {
            out.push(self.problem(at, format!("`{k}` is varied twice (an axis, a zip group or one_at_a_time). Fix: name each key once")));
        }
        axis_keys.push(k.to_string());
    }

    /// The keys of a section of value lists (`axes`, a zip group, `one_at_a_time`), each with
    /// its number of values; a key that is no string or whose value is no non-empty list is
    /// a problem instead.
    fn value_lists(
        &self,
        section: &str,
        m: &Mapping,
        out: &mut Vec<Problem>,
    ) -> Vec<(String, usize)> {
        let mut keys = Vec::new();
        for (k, v) in m {
            let Some(k) = k.as_str() else {
                out.push(self.problem(
                    &[key(section)],
                    format!(
                        "a key of `{section}` is {}, not a dotted recipe key",
                        de::describe(k)
                    ),
                ));
                continue;
            };
            match v {
                Value::Sequence(s) if !s.is_empty() => keys.push((k.to_string(), s.len())),
                Value::Sequence(_) => out.push(self.problem(
                    &[key(section), key(k)],
                    "the list of values is empty. Fix: give at least one value",
                )),
                other => out.push(self.problem(
                    &[key(section), key(k)],
                    format!(
                        "expected a list of values (`{k}: [1, 3, 5]`), found {}",
                        de::describe(other)
                    ),
                )),
            }
        }
        keys
    }

    /// Checks `axes`, `zip` and `one_at_a_time`; returns the product's keys (axes and zip
    /// groups) and every varied key.
    fn check_varied(&self, out: &mut Vec<Problem>) -> (Vec<String>, Vec<String>) {
        let f = &self.file;
        let mut axis_keys: Vec<String> = Vec::new();
        for (k, _) in self.value_lists("axes", &f.axes, out) {
            self.note_varied(&k, &[key("axes"), key(&k)], out, &mut axis_keys);
        }
        for (i, group) in f.zip.iter().enumerate() {
            let section = format!("zip[{i}]");
            let keys = self.value_lists(&section, group, out);
            let at = [key("zip"), Seg::Index(i)];
            if keys.len() < 2 {
                out.push(self.problem(&at, "a zip group moves two or more keys together. Fix: put a single key under `axes:`"));
            }
            if let Some((k0, n0)) = keys.first() {
                for (k, n) in &keys[1..] {
                    if n != n0 {
                        out.push(self.problem(&[key("zip"), Seg::Index(i), key(k)], format!("{n} values, but `{k0}` has {n0}: zipped keys move together and need as many values each")));
                    }
                }
            }
            for (k, _) in keys {
                self.note_varied(
                    &k,
                    &[key("zip"), Seg::Index(i), key(&k)],
                    out,
                    &mut axis_keys,
                );
            }
        }
        let product_keys = axis_keys.clone();
        for (k, _) in self.value_lists("one_at_a_time", &f.one_at_a_time, out) {
            self.note_varied(&k, &[key("one_at_a_time"), key(&k)], out, &mut axis_keys);
        }
        (product_keys, axis_keys)
    }

    /// Checks that `exclude` and `baseline` name only keys of the product.
    fn check_product_refs(&self, product_keys: &[String], out: &mut Vec<Problem>) {
        let f = &self.file;
        for (i, ex) in f.exclude.iter().enumerate() {
            if ex.is_empty() {
                out.push(self.problem(
                    &[key("exclude"), Seg::Index(i)],
                    "an empty exclusion would leave out every point",
                ));
            }
            for k in ex.keys() {
                let k = k.as_str().unwrap_or_default();
                if !product_keys.iter().any(|a| a == k) {
                    out.push(Problem {
                        suggestion: harness_recipe::check::suggest(k, &product_keys.iter().map(String::as_str).collect::<Vec<_>>()),
                        ..self.problem(&[key("exclude"), Seg::Index(i), key(k)], format!("`{k}` is not a key of `axes` or `zip`: an exclusion names values of the product"))
                    });
                }
            }
        }
        for k in f.baseline.keys() {
            let k = k.as_str().unwrap_or_default();
            if !product_keys.iter().any(|a| a == k) {
                out.push(Problem {
                    suggestion: harness_recipe::check::suggest(k, &product_keys.iter().map(String::as_str).collect::<Vec<_>>()),
                    ..self.problem(&[key("baseline"), key(k)], format!("`{k}` is not a key of `axes` or `zip`: the baseline is one of the product's points"))
                });
            }
        }
    }

    /// Checks that `set` fixes no varied key (nor `seed` beside `seeds:`).
    fn check_set(&self, axis_keys: &[String], out: &mut Vec<Problem>) {
        let f = &self.file;
        for (k, _) in &f.set {
            if let Some(k) = k.as_str() {
                if axis_keys.iter().any(|a| a == k) {
                    out.push(self.problem(&[key("set"), key(k)], format!("`{k}` is both fixed in `set` and varied. Fix: remove it from one of them")));
                }
                if k == "seed" && !f.seeds.is_empty() {
                    out.push(self.problem(
                        &[key("set"), key(k)],
                        "`seed` is set while `seeds:` varies it. Fix: keep `seeds:` only",
                    ));
                }
            } else {
                out.push(self.problem(&[key("set")], "a key of `set` is not a dotted recipe key"));
            }
        }
    }

    /// Checks that `seed` is no axis, the seeds are distinct, and metrics and the paper
    /// table are named.
    fn check_seeds_metrics_paper(&self, axis_keys: &[String], out: &mut Vec<Problem>) {
        let f = &self.file;
        if axis_keys.iter().any(|k| k == "seed") {
            out.push(self.problem(&[key("seeds")], "`seed` is varied as an axis. Fix: use `seeds: [1, 2, 3]`, the replicate axis the table aggregates over"));
        }
        let mut seeds = f.seeds.clone();
        seeds.sort_unstable();
        seeds.dedup();
        if seeds.len() != f.seeds.len() {
            out.push(self.problem(
                &[key("seeds")],
                "a seed is listed twice (its runs would be one run)",
            ));
        }
        for (i, m) in f.metrics.iter().enumerate() {
            if m.bench.is_empty() {
                out.push(self.problem(
                    &[key("metrics"), Seg::Index(i), key("bench")],
                    "empty benchmark name",
                ));
            }
        }
        if let Some(p) = &f.paper {
            if p.table.is_empty() {
                out.push(self.problem(&[key("paper"), key("table")], "empty table name"));
            }
        }
    }

    fn short(&self, k: &str, all: &[String]) -> String {
        if let Some(a) = self.file.aliases.get(k) {
            return a.clone();
        }
        let last = k.rsplit('.').next().unwrap_or(k);
        let clash = all
            .iter()
            .filter(|o| o.rsplit('.').next().unwrap_or(o) == last)
            .count()
            > 1;
        if clash {
            k.to_string()
        } else {
            last.to_string()
        }
    }

    /// Expands the grid into rows and points (pure: no recipe is read).
    pub fn expand(&self) -> Result<Expansion, Vec<Problem>> {
        let axes = self.product_axes();
        let mut assignments = self.product(&axes)?;
        let baseline_index = self.baseline_index(&assignments)?;
        self.add_one_at_a_time(&mut assignments, baseline_index);
        let shorts = self.short_names(&assignments);
        let configs = configs(&assignments, &shorts, baseline_index);
        let points = self.points(&configs)?;
        let clashes = self.name_clashes(&configs, &points);
        if !clashes.is_empty() {
            return Err(clashes);
        }
        Ok(Expansion {
            configs,
            points,
            axes: shorts,
        })
    }

    /// Product axes in file order: each `axes` key, then each zip group, as the list of
    /// assignments each value (or zipped row of values) makes.
    fn product_axes(&self) -> Vec<Vec<Assignment>> {
        let f = &self.file;
        let mut axes: Vec<Vec<Assignment>> = Vec::new();
        for (k, v) in &f.axes {
            let (Some(k), Value::Sequence(vals)) = (k.as_str(), v) else {
                continue;
            };
            axes.push(
                vals.iter()
                    .map(|x| vec![(k.to_string(), x.clone())])
                    .collect(),
            );
        }
        for group in &f.zip {
            let cols: Vec<(&str, &Vec<Value>)> = group
                .iter()
                .filter_map(|(k, v)| Some((k.as_str()?, v.as_sequence()?)))
                .collect();
            let n = cols.first().map_or(0, |c| c.1.len());
            axes.push(
                (0..n)
                    .map(|i| {
                        cols.iter()
                            .map(|(k, vs)| (k.to_string(), vs[i].clone()))
                            .collect()
                    })
                    .collect(),
            );
        }
        axes
    }

    /// The problem of a grid past [`MAX_POINTS`]: `what` more, at key `at`.
    fn too_many(&self, what: &str, at: &str) -> Vec<Problem> {
        vec![self.problem(
            &[key(at)],
            format!("{what} more than {MAX_POINTS} points, the most a grid may have. Fix: split the sweep into several grids, or vary fewer values at once"),
        )]
    }

    /// The product of `axes` (the last varying fastest) less the excluded combinations;
    /// refused when it is too large or nothing is left.
    fn product(&self, axes: &[Vec<Assignment>]) -> Result<Vec<Assignment>, Vec<Problem>> {
        let n_product = axes
            .iter()
            .try_fold(1usize, |n, axis| n.checked_mul(axis.len()));
        if n_product.is_none_or(|n| n > MAX_POINTS) {
            return Err(self.too_many("the axes and zip groups multiply to", "axes"));
        }
        let mut product: Vec<Assignment> = vec![Vec::new()];
        for axis in axes {
            let mut next = Vec::with_capacity(product.len() * axis.len());
            for p in &product {
                for values in axis {
                    let mut a = p.clone();
                    a.extend(values.iter().cloned());
                    next.push(a);
                }
            }
            product = next;
        }
        product.retain(|a| !self.file.exclude.iter().any(|ex| assigns(a, ex)));
        if product.is_empty() {
            return Err(vec![self.problem(
                &[key("exclude")],
                "the exclusions leave no point of the product. Fix: exclude fewer combinations",
            )]);
        }
        Ok(product)
    }

    /// Index in `product` of the point `baseline:` names (the first when it names none);
    /// refused unless exactly one point matches.
    fn baseline_index(&self, product: &[Assignment]) -> Result<usize, Vec<Problem>> {
        let f = &self.file;
        if f.baseline.is_empty() {
            return Ok(0);
        }
        let matches: Vec<usize> = product
            .iter()
            .enumerate()
            .filter(|(_, a)| assigns(a, &f.baseline))
            .map(|(i, _)| i)
            .collect();
        match matches.as_slice() {
            [i] => Ok(*i),
            [] => Err(vec![self.problem(
                &[key("baseline")],
                "no point of the grid has these values (or it is excluded). Fix: name values the axes list",
            )]),
            _ => Err(vec![self.problem(
                &[key("baseline")],
                format!(
                    "{} points have these values. Fix: give a value for every axis so that one point matches",
                    matches.len()
                ),
            )]),
        }
    }

    /// One at a time: each value applied alone to the baseline point, appended unless
    /// the product already has that assignment.
    fn add_one_at_a_time(&self, assignments: &mut Vec<Assignment>, baseline_index: usize) {
        let base = assignments[baseline_index].clone();
        for (k, v) in &self.file.one_at_a_time {
            let (Some(k), Value::Sequence(vals)) = (k.as_str(), v) else {
                continue;
            };
            for x in vals {
                let mut a = base.clone();
                a.push((k.to_string(), x.clone()));
                if !assignments.iter().any(|b| same_assignment(b, &a)) {
                    assignments.push(a);
                }
            }
        }
    }

    /// Every key the assignments set, in order of first use, with its short name.
    fn short_names(&self, assignments: &[Assignment]) -> Vec<(String, String)> {
        let mut all_keys: Vec<String> = Vec::new();
        for a in assignments {
            for (k, _) in a {
                if !all_keys.contains(k) {
                    all_keys.push(k.clone());
                }
            }
        }
        all_keys
            .iter()
            .map(|k| (k.clone(), self.short(k, &all_keys)))
            .collect()
    }

    /// Every configuration once per seed (once with the recipe's seed when `seeds:` is
    /// empty), with its `--set` arguments: the fixed ones, the axis values, the seed.
    fn points(&self, configs: &[Config]) -> Result<Vec<Point>, Vec<Problem>> {
        let f = &self.file;
        let mut fixed: Vec<String> = Vec::new();
        for (k, v) in &f.set {
            if let Some(k) = k.as_str() {
                fixed.push(set_arg(k, v));
            }
        }
        let seeds: Vec<Option<u64>> = if f.seeds.is_empty() {
            vec![None]
        } else {
            f.seeds.iter().copied().map(Some).collect()
        };
        if configs.len().saturating_mul(seeds.len()) > MAX_POINTS {
            return Err(self.too_many("its configurations times its seeds make", "seeds"));
        }
        let mut points = Vec::new();
        for (ci, c) in configs.iter().enumerate() {
            for seed in &seeds {
                let mut sets = fixed.clone();
                sets.extend(c.assignment.iter().map(|(k, v)| set_arg(k, v)));
                let mut alias = c.alias.clone();
                if let Some(s) = seed {
                    sets.push(format!("seed={s}"));
                    alias = if c.assignment.is_empty() {
                        format!("seed={s}")
                    } else {
                        format!("{alias} seed={s}")
                    };
                }
                points.push(Point {
                    config: ci,
                    alias,
                    seed: *seed,
                    sets,
                });
            }
        }
        Ok(points)
    }

    /// Points whose aliases make one file name ([`link_name`]: `a/b` and `a_b`
    /// both `a_b`) would share a log and a `runs/` link in the sweep directory: refused, one
    /// problem per pair of configurations, at the grid key whose values tell them apart.
    fn name_clashes(&self, configs: &[Config], points: &[Point]) -> Vec<Problem> {
        let mut first: BTreeMap<String, usize> = BTreeMap::new();
        let mut reported: Vec<(usize, usize)> = Vec::new();
        let mut out = Vec::new();
        for (j, p) in points.iter().enumerate() {
            let name = link_name(&p.alias);
            let Some(&i) = first.get(&name) else {
                first.insert(name, j);
                continue;
            };
            let q = &points[i];
            if reported.contains(&(q.config, p.config)) {
                continue;
            }
            reported.push((q.config, p.config));
            let (a, b) = (&configs[q.config], &configs[p.config]);
            // The first key whose value differs between them (any key when none does: a
            // value listed twice).
            let differs = b
                .assignment
                .iter()
                .find(|(k, v)| {
                    !a.assignment
                        .iter()
                        .any(|(ak, av)| ak == k && same_value(av, v))
                })
                .or(b.assignment.first())
                .map(|(k, _)| k.as_str());
            let at = differs.map_or_else(|| vec![key("axes")], |k| self.key_path(k));
            let message = if q.alias == p.alias {
                format!(
                    "two points are both named `{}` (a value listed twice, or two keys with one short name in `aliases:`), so they would share a log and a runs/ link in the sweep directory. Fix: list each value once, or give the keys different names in `aliases:`",
                    q.alias
                )
            } else {
                format!(
                    "points `{}` and `{}` would share the file name `{name}` (the log logs/{name}.log and the link runs/{name} in the sweep directory), since a file name keeps only letters, digits, `-`, `_` and `.` (anything else becomes `_`, and `__` one `_`). Fix: make the values differ in those characters, or sweep one of them in a grid of its own",
                    q.alias, p.alias
                )
            };
            out.push(self.problem(&at, message));
        }
        out
    }

    /// Where the grid varies `k`: `axes.k`, `zip[i].k` or `one_at_a_time.k`.
    fn key_path(&self, k: &str) -> Vec<Seg> {
        let f = &self.file;
        if f.axes.contains_key(k) {
            return vec![key("axes"), key(k)];
        }
        if let Some(i) = f.zip.iter().position(|g| g.contains_key(k)) {
            return vec![key("zip"), Seg::Index(i), key(k)];
        }
        if f.one_at_a_time.contains_key(k) {
            return vec![key("one_at_a_time"), key(k)];
        }
        vec![key("axes")]
    }
}

/// `key=value` as `--set` takes it: the value as JSON, which YAML reads back unchanged.
pub fn set_arg(k: &str, v: &Value) -> String {
    format!("{k}={}", value_text(v))
}

/// A value in one line: scalars as written (`3`, `0.001`, `true`, `abc`), lists and maps
/// as JSON (`[1,2]`).
pub fn value_text(v: &Value) -> String {
    match v {
        Value::String(s) => {
            // A string that YAML would read as something else keeps its quotes.
            match serde_yaml::from_str::<Value>(s) {
                Ok(Value::String(back)) if &back == s && !s.contains(['\n', ',', '[', '{']) => {
                    s.clone()
                }
                // A JSON string literal: quoted and escaped (it cannot fail on a string).
                _ => serde_json::to_string(s).unwrap_or_else(|_| format!("{s:?}")),
            }
        }
        Value::Null => "null".into(),
        Value::Bool(b) => b.to_string(),
        Value::Number(n) => n.to_string(),
        other => serde_json::to_string(other).unwrap_or_else(|_| format!("{other:?}")),
    }
}

/// Value equality where `1` and `1.0` are the same number.
pub fn same_value(a: &Value, b: &Value) -> bool {
    match (a, b) {
        (Value::Number(x), Value::Number(y)) => x.as_f64() == y.as_f64(),
        _ => a == b,
    }
}

/// One table row per assignment, its alias made of the keys' short names (`baseline` for
/// the empty assignment).
fn configs(
    assignments: &[Assignment],
    shorts: &[(String, String)],
    baseline_index: usize,
) -> Vec<Config> {
    let short_of = |k: &str| {
        shorts
            .iter()
            .find(|(a, _)| a == k)
            .map(|(_, s)| s.clone())
            .unwrap_or_else(|| k.to_string())
    };
    assignments
        .iter()
        .enumerate()
        .map(|(i, a)| Config {
            alias: if a.is_empty() {
                "baseline".to_string()
            } else {
                a.iter()
                    .map(|(k, v)| format!("{}={}", short_of(k), value_text(v)))
                    .collect::<Vec<_>>()
                    .join(" ")
            },
            assignment: a.clone(),
            is_baseline: i == baseline_index,
        })
        .collect()
}

/// Whether assignment `a` gives every key of `m` its value (an `exclude:` entry, the
/// `baseline:`).
fn assigns(a: &Assignment, m: &Mapping) -> bool {
    m.iter().all(|(k, v)| {
        a.iter()
            .any(|(ak, av)| Some(ak.as_str()) == k.as_str() && same_value(av, v))
    })
}

fn same_assignment(a: &Assignment, b: &Assignment) -> bool {
    a.len() == b.len()
        && a.iter()
            .all(|(k, v)| b.iter().any(|(bk, bv)| bk == k && same_value(bv, v)))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn grid(text: &str) -> Grid {
        Grid::parse(Path::new("grids/t.yaml"), text, None).unwrap_or_else(|p| {
            panic!(
                "{}",
                p.iter()
                    .map(|p| p.to_string())
                    .collect::<Vec<_>>()
                    .join("\n")
            )
        })
    }

    fn aliases(e: &Expansion) -> Vec<String> {
        e.points.iter().map(|p| p.alias.clone()).collect()
    }

    #[test]
    fn a_grid_of_too_many_points_is_an_error_not_an_allocation() {
        // Ten axes of ten values: 10^10 points.
        let axes: String = (0..10)
            .map(|i| format!("  k{i}: [0, 1, 2, 3, 4, 5, 6, 7, 8, 9]\n"))
            .collect();
        let err = grid(&format!("recipe: r.yaml\naxes:\n{axes}"))
            .expand()
            .unwrap_err();
        assert!(err[0].message.contains("more than 10000 points"), "{err:?}");
        // Few configurations, but too many seeds.
        let seeds: Vec<String> = (0..2_000).map(|s| s.to_string()).collect();
        let text = format!(
            "recipe: r.yaml\naxes:\n  k: [1, 2, 3, 4, 5, 6]\nseeds: [{}]\n",
            seeds.join(", ")
        );
        let err = grid(&text).expand().unwrap_err();
        assert!(
            err[0].message.contains("times its seeds") && err[0].key == "seeds",
            "{err:?}"
        );
    }

    #[test]
    fn product_of_axes_in_file_order_times_seeds() {
        let g = grid("recipe: r.yaml\naxes:\n  model.encoder.layers: [1, 3]\n  optimizer.lr: [0.001, 0.003]\nseeds: [1, 2]\n");
        let e = g.expand().unwrap();
        assert_eq!(
            e.configs
                .iter()
                .map(|c| c.alias.as_str())
                .collect::<Vec<_>>(),
            [
                "layers=1 lr=0.001",
                "layers=1 lr=0.003",
                "layers=3 lr=0.001",
                "layers=3 lr=0.003"
            ]
        );
        assert_eq!(e.points.len(), 8);
        assert_eq!(e.points[1].alias, "layers=1 lr=0.001 seed=2");
        assert_eq!(
            e.points[1].sets,
            ["model.encoder.layers=1", "optimizer.lr=0.001", "seed=2"]
        );
        assert!(e.configs[0].is_baseline && !e.configs[1].is_baseline);
    }

    #[test]
    fn zip_moves_keys_together_and_exclude_drops_matches() {
        let g = grid(
            "recipe: r.yaml\nset: {train.steps: 50}\naxes:\n  model.encoder.layers: [1, 3, 5]\nzip:\n  - {optimizer.lr: [0.001, 0.003], train.batch_tokens: [1000, 2000]}\nexclude:\n  - {model.encoder.layers: 5, optimizer.lr: 0.003}\n",
        );
        let e = g.expand().unwrap();
        assert_eq!(
            e.configs
                .iter()
                .map(|c| c.alias.as_str())
                .collect::<Vec<_>>(),
            [
                "layers=1 lr=0.001 batch_tokens=1000",
                "layers=1 lr=0.003 batch_tokens=2000",
                "layers=3 lr=0.001 batch_tokens=1000",
                "layers=3 lr=0.003 batch_tokens=2000",
                "layers=5 lr=0.001 batch_tokens=1000",
            ]
        );
        // No seeds: one replicate with the recipe's own seed; the fixed set comes first.
        assert_eq!(
            e.points[3].sets,
            [
                "train.steps=50",
                "model.encoder.layers=3",
                "optimizer.lr=0.003",
                "train.batch_tokens=2000"
            ]
        );
        assert_eq!(e.points[3].seed, None);
    }

    #[test]
    fn one_at_a_time_changes_each_value_alone_from_the_baseline() {
        let g = grid("recipe: r.yaml\none_at_a_time:\n  model.encoder.layers: [3, 5]\n  optimizer.dropout: [0.0]\nseeds: [7]\n");
        let e = g.expand().unwrap();
        assert_eq!(
            aliases(&e),
            [
                "seed=7",
                "layers=3 seed=7",
                "layers=5 seed=7",
                "dropout=0.0 seed=7"
            ]
        );
        assert_eq!(e.configs[0].alias, "baseline");
        assert!(e.configs[0].is_baseline);
        assert_eq!(e.points[3].sets, ["optimizer.dropout=0.0", "seed=7"]);
    }

    #[test]
    fn one_at_a_time_from_a_named_baseline_of_the_product() {
        let g = grid("recipe: r.yaml\naxes: {a.x: [1, 2]}\nbaseline: {a.x: 2}\none_at_a_time: {b.y: [true]}\n");
        let e = g.expand().unwrap();
        assert_eq!(
            e.configs
                .iter()
                .map(|c| (c.alias.as_str(), c.is_baseline))
                .collect::<Vec<_>>(),
            [("x=1", false), ("x=2", true), ("x=2 y=true", false)]
        );
    }

    #[test]
    fn clashing_short_names_fall_back_to_the_whole_key_and_aliases_win() {
        let g = grid("recipe: r.yaml\naxes: {model.encoder.hidden: [64], model.decoder.hidden: [32], optimizer.lr: [0.1]}\naliases: {optimizer.lr: rate}\n");
        let e = g.expand().unwrap();
        assert_eq!(
            e.configs[0].alias,
            "model.encoder.hidden=64 model.decoder.hidden=32 rate=0.1"
        );
    }

    #[test]
    fn the_recipe_path_is_taken_from_the_grid_folder() {
        let g = Grid::parse(
            Path::new("grids/g.yaml"),
            "recipe: ../recipes/laser.yaml\n",
            None,
        )
        .unwrap();
        assert_eq!(g.recipe_path(), PathBuf::from("recipes/laser.yaml"));
        let g = Grid::parse(Path::new("/a/g.yaml"), "recipe: ./b/../r.yaml\n", None).unwrap();
        assert_eq!(g.recipe_path(), PathBuf::from("/a/r.yaml"));
    }

    #[test]
    fn string_values_stay_strings() {
        assert_eq!(value_text(&Value::String("max".into())), "max");
        assert_eq!(value_text(&Value::String("3".into())), "\"3\"");
        assert_eq!(value_text(&Value::String("true".into())), "\"true\"");
        let list: Value = serde_yaml::from_str("[deu-eng, fra-eng]").unwrap();
        assert_eq!(value_text(&list), "[\"deu-eng\",\"fra-eng\"]");
        let back = harness_recipe::load::parse_set(&set_arg("k", &list)).unwrap();
        assert_eq!(back.value, list);
    }

    fn errors(text: &str) -> Vec<String> {
        match Grid::parse(Path::new("grids/bad.yaml"), text, None)
            .and_then(|g| g.expand().map(|_| g))
        {
            Ok(_) => panic!("expected errors"),
            Err(p) => p.iter().map(|p| p.to_string()).collect(),
        }
    }

    /// Aliases that make one file name (`a/b` and `a_b`: `k_a_b`; `x` and `x_` beside a seed:
    /// `k_x_seed_1`) or are one alias (a value listed twice; two keys given one short
    /// name) would share a log and a `runs/` link: refused, naming both and the grid line,
    /// once per pair of configurations whatever the seeds.
    #[test]
    fn points_whose_names_clash_are_refused() {
        let e = errors(
            "recipe: r.yaml\naxes:\n  layers: [1, 2]\n  data.path: [a/b, c, a_b]\nseeds: [1, 2]\n",
        );
        assert_eq!(e.len(), 2, "one per pair of configurations: {e:?}");
        assert!(
            e[0].starts_with("grids/bad.yaml:4: axes.data.path: points `layers=1 path=a/b seed=1` and `layers=1 path=a_b seed=1` would share the file name `layers_1_path_a_b_seed_1`")
                && e[0].contains("logs/layers_1_path_a_b_seed_1.log")
                && e[0].contains("Fix:"),
            "{e:?}"
        );
        assert!(
            e[1].contains("`layers=2 path=a/b seed=1` and `layers=2 path=a_b seed=1`"),
            "{e:?}"
        );
        let e = errors("recipe: r.yaml\naxes:\n  k: [x, x_]\nseeds: [1]\n");
        assert!(e[0].contains("`k=x seed=1` and `k=x_ seed=1`"), "{e:?}");
        let e = errors("recipe: r.yaml\nzip:\n  - {a: [1, 2, 1], b: [3, 4, 3]}\n");
        assert!(
            e[0].starts_with("grids/bad.yaml:3: zip[0].a: two points are both named `a=1 b=3`"),
            "{e:?}"
        );
        let e = errors(
            "recipe: r.yaml\naliases: {x.n: n, y.n: n}\none_at_a_time:\n  x.n: [1]\n  y.n: [1]\n",
        );
        assert!(
            e[0].starts_with(
                "grids/bad.yaml:5: one_at_a_time.y.n: two points are both named `n=1`"
            ) && e[0].contains("aliases:"),
            "{e:?}"
        );
        // Names that differ only where a file name keeps them are fine.
        let g = grid("recipe: r.yaml\naxes:\n  data.path: [a-b, a_b, a.b]\n");
        assert_eq!(g.expand().unwrap().points.len(), 3);
    }

    #[test]
    fn errors_name_file_line_and_key() {
        let e = errors("recipe: r.yaml\naxes:\n  model.encoder.layers: 3\n");
        assert_eq!(e.len(), 1, "{e:?}");
        assert!(
            e[0].starts_with("grids/bad.yaml:3: axes.model.encoder.layers: expected a list"),
            "{e:?}"
        );

        let e = errors("recipe: r.yaml\naxis:\n  a: [1]\n");
        assert!(
            e[0].starts_with("grids/bad.yaml:2: axis: unknown field")
                && e[0].contains("did you mean `axes`"),
            "{e:?}"
        );

        let e = errors("recipe: r.yaml\nzip:\n  - {a.b: [1, 2],\n     c.d: [1]}\n");
        assert!(
            e.iter()
                .any(|l| l.starts_with("grids/bad.yaml:4: zip[0].c.d: 1 values, but `a.b` has 2")),
            "{e:?}"
        );

        let e = errors("recipe: r.yaml\naxes: {a.b: [1]}\nexclude:\n  - {a.c: 1}\n");
        assert!(
            e[0].starts_with("grids/bad.yaml:4: exclude[0].a.c: `a.c` is not a key")
                && e[0].contains("did you mean `a.b`"),
            "{e:?}"
        );

        let e = errors("recipe: r.yaml\naxes: {a.b: [1, 2]}\nexclude: [{a.b: 1}, {a.b: 2}]\n");
        assert!(e[0].contains("leave no point"), "{e:?}");

        let e = errors("recipe: r.yaml\naxes: {a.b: [1, 2]}\nbaseline: {a.b: 3}\n");
        assert!(
            e[0].starts_with("grids/bad.yaml:3: baseline: no point"),
            "{e:?}"
        );

        let e = errors("recipe: r.yaml\nseeds: [1, 1]\naxes: {seed: [1]}\n");
        assert_eq!(e.len(), 2, "{e:?}");

        let e = errors("recipe: r.yaml\naxes: {a.b: [1]\n");
        assert!(
            e[0].starts_with("grids/bad.yaml:") && e[0].contains("not valid YAML"),
            "{e:?}"
        );
    }

    #[test]
    fn grid_profiles_add_overrides_and_seeds() {
        let text = "recipe: r.yaml\nset: {train.steps: 10}\nseeds: [1]\nprofiles:\n  paper: {set: {train.steps: 1000}, seeds: [1, 2, 3], recipe_profile: paper}\n";
        let g = Grid::parse(Path::new("g.yaml"), text, Some("paper")).unwrap();
        let e = g.expand().unwrap();
        assert_eq!(e.points.len(), 3);
        assert_eq!(e.points[2].sets, ["train.steps=1000", "seed=3"]);
        assert_eq!(g.file.profile.as_deref(), Some("paper"));
        let err = Grid::parse(Path::new("g.yaml"), text, Some("papr")).unwrap_err();
        assert!(
            err[0].to_string().contains("did you mean `paper`"),
            "{}",
            err[0]
        );
    }

    #[test]
    fn link_names_are_plain_file_names() {
        assert_eq!(link_name("layers=3 seed=2"), "layers_3_seed_2");
        assert_eq!(link_name("baseline"), "baseline");
    }
}
