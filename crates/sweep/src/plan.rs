//! A grid expanded and resolved: every point is loaded and checked as the recipe it is
//! (base recipe ⊕ profile ⊕ the point's `--set`s) before anything runs, and keyed by the
//! resolved recipe's fingerprint: its run directory is the one `harness run` would use for
//! the same command, so a point with all its results there is done, whoever ran it.

use crate::grid::{Expansion, Grid, Point};
use harness_recipe::load::NamedBy;
use harness_recipe::{Known, LoadOptions, Problem, RecipeError};
use std::path::{Path, PathBuf};

/// One point, resolved.
#[derive(Debug, Clone)]
pub struct PlannedPoint {
    pub point: Point,
    /// Recipe name and fingerprint (full hex).
    pub recipe_name: String,
    pub fingerprint: String,
    /// `<runs_dir>/<recipe>[-<profile>]-<fp8>`.
    pub run_dir: PathBuf,
    /// Every benchmark its `evaluate:` list runs (groups expanded): the point is done when
    /// each has a result file without an error.
    pub benches: Vec<String>,
    /// Whether the recipe trains (has tasks).
    pub trains: bool,
    /// Whether its run renders a report (the recipe lists `report:` tables): then the point
    /// is done only once that report is whole.
    pub reports: bool,
    /// The arguments after `harness` that run it: `run RECIPE [--profile P] --set ... --out DIR`.
    pub args: Vec<String>,
}

/// A sweep: the grid, its expansion, its resolved points and its directory.
#[derive(Debug, Clone)]
pub struct Sweep {
    pub grid: Grid,
    pub expansion: Expansion,
    pub points: Vec<PlannedPoint>,
    /// sha256 over the points' aliases and recipe fingerprints.
    pub fingerprint: String,
    /// `<sweeps_dir>/<grid>[-<profile>]-<fp8>`.
    pub dir: PathBuf,
}

/// Where a point stands on disk.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Progress {
    /// Every benchmark has a result without an error.
    Done,
    /// Some benchmark results are missing (`have` of `of` present).
    Missing { have: usize, of: usize },
    /// A result file holds an error.
    Failed { bench: String, error: String },
    /// Every result is there, but the run was stopped while writing its report.
    Unreported,
}

impl PlannedPoint {
    /// Reads the point's result files: done, missing or failed.
    pub fn progress(&self) -> Progress {
        let mut have = 0;
        for b in &self.benches {
            let path = self.run_dir.join("results").join(format!("{b}.json"));
            let Ok(text) = std::fs::read_to_string(&path) else {
                continue;
            };
            let Ok(json) = serde_json::from_str::<serde_json::Value>(&text) else {
                continue; // unreadable: treated as missing, rerun rewrites it
            };
            if let Some(e) = json.get("error").and_then(|e| e.as_str()) {
                return Progress::Failed {
                    bench: b.clone(),
                    error: e.to_string(),
                };
            }
            have += 1;
        }
        if have == self.benches.len() {
            if self.reports && !harness_core::outdir::is_complete(&self.run_dir.join("report")) {
                Progress::Unreported
            } else {
                Progress::Done
            }
        } else {
            Progress::Missing {
                have,
                of: self.benches.len(),
            }
        }
    }
}

/// The line in the grid file of the key a `--set k=v` came from.
fn grid_line(grid: &Grid, set_key: &str) -> Option<usize> {
    use harness_recipe::de::Seg;
    let k = |s: &str| Seg::Key(s.to_string());
    let text = &grid.text;
    let locate = |p: &[Seg]| harness_recipe::load::locate(text, p);
    if set_key == "seed" {
        return locate(&[k("seeds")]);
    }
    locate(&[k("set"), k(set_key)])
        .or_else(|| locate(&[k("axes"), k(set_key)]))
        .or_else(|| locate(&[k("one_at_a_time"), k(set_key)]))
        .or_else(|| {
            (0..grid.file.zip.len()).find_map(|i| locate(&[k("zip"), Seg::Index(i), k(set_key)]))
        })
        .or_else(|| {
            grid.profile
                .as_ref()
                .and_then(|p| locate(&[k("profiles"), k(p), k("set"), k(set_key)]))
        })
}

/// Resolves every point of `grid` against `known` (the names and capabilities of this
/// build). Every problem of every point is returned, each pointing into the grid file
/// where an override of the grid caused it, else into the recipe.
pub fn plan(
    grid: Grid,
    known: &Known,
    runs_dir: &Path,
    sweeps_dir: &Path,
) -> Result<Sweep, Vec<Problem>> {
    let expansion = grid.expand()?;
    let recipe = grid.recipe_path();
    let named_by = named_recipe(&grid, &recipe)?;
    let registry = harness_bench::registry::Registry::load()
        .map_err(|e| vec![Problem::new(grid.path.clone(), None, "", e.to_string())])?;
    let mut problems: Vec<Problem> = grid.check_metrics(&registry.protocols());
    let resolver = PointResolver {
        grid: &grid,
        recipe: &recipe,
        named_by: &named_by,
        known,
        registry: &registry,
        runs_dir,
    };
    let mut points = Vec::new();
    for point in &expansion.points {
        match resolver.resolve(point) {
            Ok(p) => points.push(p),
            Err(ps) => problems.extend(ps),
        }
    }
    drop_repeats(&mut problems);
    if !problems.is_empty() {
        return Err(problems);
    }
    let (fingerprint, dir) = sweep_dir(&grid, &points, sweeps_dir);
    Ok(Sweep {
        grid,
        expansion,
        points,
        fingerprint,
        dir,
    })
}

/// Who names the recipe (the grid's `recipe:` key), once the recipe is a file.
fn named_recipe(grid: &Grid, recipe: &Path) -> Result<NamedBy, Vec<Problem>> {
    let line =
        harness_recipe::load::locate(&grid.text, &[harness_recipe::de::Seg::Key("recipe".into())]);
    // The grid names the recipe: until it reads as one, none of its text is shown.
    let named_by = NamedBy {
        file: grid.path.clone(),
        line,
        key: "recipe".into(),
    };
    if !recipe.is_file() {
        return Err(vec![Problem::new(
            grid.path.clone(),
            line,
            "recipe",
            format!(
                "{} is not a recipe file (paths are taken from the grid file's folder). Fix: e.g. `recipe: ../recipes/laser.yaml`",
                recipe.display()
            ),
        )]);
    }
    Ok(named_by)
}

/// What resolving a point needs: the grid, its recipe, this build's names and benchmarks,
/// and where runs go.
struct PointResolver<'a> {
    grid: &'a Grid,
    recipe: &'a Path,
    named_by: &'a NamedBy,
    known: &'a Known,
    registry: &'a harness_bench::registry::Registry,
    runs_dir: &'a Path,
}

impl PointResolver<'_> {
    /// Loads `point` as the recipe it is and plans its benchmarks; its problems, pointed
    /// into the grid where they can be.
    fn resolve(&self, point: &Point) -> Result<PlannedPoint, Vec<Problem>> {
        let grid = self.grid;
        let opts = LoadOptions {
            profile: grid.file.profile.clone(),
            sets: point.sets.clone(),
        };
        let resolved =
            match harness_recipe::load_named(self.recipe, self.named_by, &opts, self.known) {
                Ok(r) => r,
                Err(RecipeError::Setup(m)) => {
                    return Err(vec![Problem::new(grid.path.clone(), None, "", m)]);
                }
                Err(RecipeError::Invalid { problems: ps }) => {
                    return Err(ps
                        .into_iter()
                        .map(|p| attribute(grid, &point.alias, p))
                        .collect());
                }
            };
        let entries = harness_bench::runner::entries(&resolved.recipe);
        let benches = match harness_bench::runner::plan(self.registry, &entries) {
            Ok(plan) => plan.into_iter().map(|(name, _)| name).collect(),
            Err(e) => {
                return Err(vec![Problem::new(
                    grid.path.clone(),
                    None,
                    "evaluate",
                    format!("point `{}`: {e}", point.alias),
                )]);
            }
        };
        let fp = resolved.fingerprint.clone();
        let run_dir = harness_core::rundir::default_dir(
            self.runs_dir,
            &resolved.recipe.name,
            resolved.profile.as_deref(),
            fp.short(),
        );
        let args = self.args(point, &run_dir);
        Ok(PlannedPoint {
            point: point.clone(),
            recipe_name: resolved.recipe.name.clone(),
            fingerprint: fp.0.clone(),
            run_dir,
            benches,
            trains: !resolved.recipe.tasks.is_empty(),
            reports: !resolved.recipe.report.is_empty(),
            args,
        })
    }

    /// The arguments after `harness` that run `point` into `run_dir`.
    fn args(&self, point: &Point, run_dir: &Path) -> Vec<String> {
        let mut args = vec!["run".to_string(), self.recipe.display().to_string()];
        if let Some(p) = &self.grid.file.profile {
            args.push("--profile".into());
            args.push(p.clone());
        }
        for s in &point.sets {
            args.push("--set".into());
            args.push(s.clone());
        }
        args.push("--out".into());
        args.push(run_dir.display().to_string());
        args
    }
}

/// Keeps the first of problems that differ only in the point they name.
fn drop_repeats(problems: &mut Vec<Problem>) {
    // One problem of an axis value shows once per seed: keep the first.
    let mut seen = std::collections::BTreeSet::new();
    problems.retain(|p| {
        seen.insert((
            p.file.clone(),
            p.line,
            p.key.clone(),
            strip_point(&p.message),
        ))
    });
}

/// The sweep's fingerprint (over its name, profile, and points' aliases and recipe
/// fingerprints) and its directory in `sweeps_dir`.
fn sweep_dir(grid: &Grid, points: &[PlannedPoint], sweeps_dir: &Path) -> (String, PathBuf) {
    let mut text = format!("{}\n{:?}\n", grid.name, grid.profile);
    for p in points {
        text.push_str(&format!("{}\t{}\n", p.point.alias, p.fingerprint));
    }
    let fingerprint = harness_core::fsutil::sha256_hex(text.as_bytes());
    let dir = harness_core::rundir::default_dir(
        sweeps_dir,
        &grid.name,
        grid.profile.as_deref(),
        &fingerprint[..8],
    );
    (fingerprint, dir)
}

fn strip_point(message: &str) -> String {
    match message.split_once("`: ") {
        Some((head, tail)) if head.starts_with("point `") => tail.to_string(),
        _ => message.to_string(),
    }
}

/// A recipe problem of one point, pointed at the grid key that caused it when a `--set`
/// of the grid did.
fn attribute(grid: &Grid, alias: &str, p: Problem) -> Problem {
    let raw = p.note.as_deref().and_then(|n| {
        let start = n.find("--set ")? + "--set ".len();
        let rest = &n[start..];
        Some(rest[..rest.find('`').unwrap_or(rest.len())].to_string())
    });
    match raw {
        Some(raw) => {
            let key = raw.split_once('=').map_or(raw.as_str(), |(k, _)| k);
            Problem {
                file: grid.path.clone(),
                line: grid_line(grid, key),
                key: p.key,
                message: format!("point `{alias}`: {}", p.message),
                suggestion: p.suggestion,
                note: Some(format!("`--set {raw}` on {}", p.file.display())),
            }
        }
        None => Problem {
            message: format!("point `{alias}`: {}", p.message),
            ..p
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn known() -> Known {
        harness_bench::known().unwrap()
    }

    fn write_grid(dir: &Path, text: &str) -> Grid {
        let path = dir.join("g.yaml");
        std::fs::write(&path, text).unwrap();
        Grid::load(&path, None).unwrap()
    }

    fn recipes() -> String {
        harness_core::repo_root()
            .join("recipes")
            .display()
            .to_string()
    }

    #[test]
    fn points_resolve_to_the_run_directories_of_harness_run() {
        let tmp = tempfile::tempdir().unwrap();
        let grid = write_grid(
            tmp.path(),
            &format!(
                "recipe: {}/hashed-ngrams.yaml\nset: {{evaluate: [stsb-test]}}\naxes: {{model.encoder.dim: [64, 128]}}\nseeds: [1, 2]\n",
                recipes()
            ),
        );
        let sweep = plan(grid, &known(), Path::new("runs"), Path::new("sweeps")).unwrap();
        assert_eq!(sweep.points.len(), 4);
        let dirs: std::collections::BTreeSet<_> =
            sweep.points.iter().map(|p| p.run_dir.clone()).collect();
        assert_eq!(dirs.len(), 4, "one run directory per point");
        // The same command typed by hand resolves to the same directory.
        let by_hand = harness_recipe::load_with(
            &harness_core::repo_root().join("recipes/hashed-ngrams.yaml"),
            &LoadOptions {
                profile: None,
                sets: vec![
                    "evaluate=[\"stsb-test\"]".into(),
                    "model.encoder.dim=128".into(),
                    "seed=2".into(),
                ],
            },
            &known(),
        )
        .unwrap();
        assert_eq!(sweep.points[3].fingerprint, by_hand.fingerprint.0);
        assert_eq!(sweep.points[3].benches, ["stsb-test"]);
        assert!(sweep.dir.starts_with("sweeps") && sweep.dir.to_string_lossy().contains("/g-"));
        assert_eq!(
            sweep.points[0].progress(),
            Progress::Missing { have: 0, of: 1 }
        );
    }

    #[test]
    fn a_metric_the_benchmarks_protocol_never_writes_is_refused_at_its_grid_line() {
        let tmp = tempfile::tempdir().unwrap();
        let grid = write_grid(
            tmp.path(),
            &format!(
                "recipe: {}/hashed-ngrams.yaml\nset: {{evaluate: [stsb-test]}}\naxes: {{model.encoder.dim: [64]}}\nmetrics:\n  - {{bench: stsb-test, field: scores.all.cosine.spearman.wmean}}\n  - {{bench: stsb-test, field: scores.all.cosine.spearmen.wmean}}\n  - {{bench: stsb-tset}}\n",
                recipes()
            ),
        );
        let err = plan(grid, &known(), Path::new("runs"), Path::new("sweeps")).unwrap_err();
        let lines: Vec<String> = err.iter().map(|p| p.to_string()).collect();
        assert_eq!(lines.len(), 2, "{lines:#?}");
        assert!(
            lines[0].contains(":6:")
                && lines[0].contains("metrics[1].field")
                && lines[0]
                    .contains("under `scores.all.cosine` it writes the fields pearson, spearman"),
            "{lines:#?}"
        );
        assert!(
            lines[1].contains(":7:") && lines[1].contains("unknown benchmark `stsb-tset`"),
            "{lines:#?}"
        );
    }

    #[test]
    fn a_bad_axis_value_is_reported_at_its_grid_line_for_every_point_once() {
        let tmp = tempfile::tempdir().unwrap();
        let grid = write_grid(
            tmp.path(),
            &format!(
                "recipe: {}/laser.yaml\nseeds: [1, 2]\naxes:\n  model.encoder.layers: [1, 0]\n  model.encoder.poool: [max]\n",
                recipes()
            ),
        );
        let err = plan(grid, &known(), Path::new("runs"), Path::new("sweeps")).unwrap_err();
        let lines: Vec<String> = err.iter().map(|p| p.to_string()).collect();
        assert!(
            lines
                .iter()
                .any(|l| l.contains("g.yaml:4: model.encoder.layers: point `layers=0")),
            "{lines:#?}"
        );
        assert!(
            lines
                .iter()
                .any(|l| l.contains("g.yaml:5:") && l.contains("poool")),
            "{lines:#?}"
        );
        // Seeds do not repeat a problem.
        assert_eq!(
            lines
                .iter()
                .filter(|l| l.contains("model.encoder.layers:"))
                .count(),
            1,
            "{lines:#?}"
        );
    }

    #[test]
    fn a_missing_recipe_names_the_grid_line() {
        let tmp = tempfile::tempdir().unwrap();
        let grid = write_grid(tmp.path(), "name: x\nrecipe: nowhere.yaml\n");
        let err = plan(grid, &known(), Path::new("runs"), Path::new("sweeps")).unwrap_err();
        assert!(
            err[0].to_string().contains("g.yaml:2: recipe:"),
            "{}",
            err[0]
        );
    }
}
