//! The inputs of a report: run directories (`runs/<recipe>-<fp8>/` with `results/`,
//! `env.json`, `recipe.resolved.yaml`) and bare result directories (`harness eval --out`).
//! Each input is identified as one *system*, the name table specs use for their rows:
//!
//! 1. `LABEL=PATH` on the command line names it explicitly;
//! 2. `env.json` with `recipe` (and `profile`) keys: `recipe` or `recipe@profile`;
//! 3. `recipe.resolved.yaml`: its `name`, and the profile of `recipes/<name>.yaml` whose
//!    resolved fingerprint equals the run's (the recipe file is looked for in the current
//!    directory and above the run directory; `--set` overrides match no profile);
//! 4. otherwise the encoder name recorded in the result files (`hashed-ngrams`, ...).
//!
//! Several inputs of one system are merged (a later file of the same benchmark wins, with
//! a warning).

use super::error::ReportError;
use harness_bench::runner::BenchResult;
use harness_core::terminal::terminal_safe;
use serde_json::Value;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::SystemTime;

/// One result file, typed (provenance) and as JSON (field paths).
#[derive(Debug, Clone)]
pub struct ResultFile {
    pub path: PathBuf,
    pub result: BenchResult,
    pub json: Value,
    pub modified: Option<SystemTime>,
}

/// Where a system's results came from.
#[derive(Debug, Clone)]
pub struct Source {
    /// The directory holding the result files.
    pub results_dir: PathBuf,
    /// The run directory around it, when there is one.
    pub run_dir: Option<PathBuf>,
    /// How the system name was found.
    pub identified_by: String,
    /// `env.json`, when present.
    pub env: Option<Value>,
    /// Fingerprint of `recipe.resolved.yaml`, when present.
    pub recipe_fingerprint: Option<String>,
}

/// Every result of one system.
#[derive(Debug, Clone)]
pub struct SystemRuns {
    pub id: String,
    pub sources: Vec<Source>,
    /// Benchmark name → result.
    pub results: BTreeMap<String, ResultFile>,
}

/// All inputs of one report.
#[derive(Debug, Clone, Default)]
pub struct Inputs {
    pub systems: BTreeMap<String, SystemRuns>,
    pub warnings: Vec<String>,
}

/// The evaluation-only encoders (recipes without training): their "not run yet" hint is
/// `harness eval`, every other system's is `harness run`.
pub const EVAL_ENCODERS: &[&str] = &["hashed-ngrams", "all-MiniLM-L6-v2", "multilingual-e5-small"];

/// The command that produces a system's results.
pub fn run_hint(system: &str) -> String {
    if EVAL_ENCODERS.contains(&system) {
        return format!("harness eval --encoder {system} --bench all");
    }
    match system.split_once('@') {
        Some((recipe, profile)) => format!("harness run recipes/{recipe}.yaml --profile {profile}"),
        None => format!("harness run recipes/{system}.yaml"),
    }
}

/// Loads every input; a directory without result files is an error. A run without
/// `env.json` is matched to its recipe's profile by loading `recipes/<name>.yaml` against
/// `known` (the command layer's names, the trainer's objectives included).
pub fn load_inputs(args: &[PathBuf], known: &harness_recipe::Known) -> Result<Inputs, ReportError> {
    let mut inputs = Inputs::default();
    for arg in args {
        let (label, path) = split_label(arg);
        let (results_dir, run_dir) = locate(&path)?;
        let (results, mut warnings) = read_results(&results_dir)?;
        let env = match &run_dir {
            Some(d) => read_json(&d.join("env.json"))?,
            None => None,
        };
        let resolved = run_dir.as_ref().map(|d| d.join("recipe.resolved.yaml"));
        let recipe_fingerprint = resolved
            .as_ref()
            .filter(|p| p.is_file())
            .and_then(|p| resolved_fingerprint(p));
        one_encoder(&results).map_err(|detail| ReportError::Input {
            path: path.clone(),
            detail,
            fix: "evaluate each encoder into its own folder (`harness eval --out DIR`), or the stale benchmarks again (`harness run` with --force)".into(),
        })?;
        let (id, identified_by) = match label {
            Some(l) => (l, "named on the command line".to_string()),
            None => identify(
                run_dir.as_deref(),
                env.as_ref(),
                recipe_fingerprint.as_deref(),
                &results,
                known,
            )
            .map_err(|detail| ReportError::Input {
                path: path.clone(),
                detail,
                fix: "name the system explicitly: `harness report NAME=DIR`".into(),
            })?,
        };
        let entry = inputs
            .systems
            .entry(id.clone())
            .or_insert_with(|| SystemRuns {
                id: id.clone(),
                sources: Vec::new(),
                results: BTreeMap::new(),
            });
        for (bench, r) in results {
            if let Some(old) = entry.results.get(&bench) {
                warnings.push(format!(
                    "{id}: {} replaces {} (same benchmark given twice; the later argument wins)",
                    r.path.display(),
                    old.path.display()
                ));
            }
            entry.results.insert(bench, r);
        }
        entry.sources.push(Source {
            results_dir,
            run_dir,
            identified_by,
            env,
            recipe_fingerprint,
        });
        inputs.warnings.extend(warnings);
    }
    Ok(inputs)
}

/// `NAME=PATH` → (Some(NAME), PATH) unless the whole argument is an existing path. NAME may
/// hold `=` and `/` when PATH exists (the first `=` whose right side exists splits:
/// `a=b=runs/x`, `lr/0.1=sweeps/lr=0.1`); otherwise the first `=` splits a NAME without `/`
/// (so that the error names the missing PATH).
fn split_label(arg: &Path) -> (Option<String>, PathBuf) {
    if arg.exists() {
        return (None, arg.to_path_buf());
    }
    let s = arg.to_string_lossy();
    let splits = s
        .match_indices('=')
        .map(|(i, _)| (&s[..i], &s[i + 1..]))
        .filter(|(name, path)| !name.is_empty() && !path.is_empty());
    for (name, path) in splits.clone() {
        if Path::new(path).exists() {
            return (Some(name.to_string()), PathBuf::from(path));
        }
    }
    if let Some((name, path)) = splits.into_iter().next() {
        if !name.contains('/') {
            return (Some(name.to_string()), PathBuf::from(path));
        }
    }
    (None, arg.to_path_buf())
}

/// (results directory, run directory) of an argument.
fn locate(path: &Path) -> Result<(PathBuf, Option<PathBuf>), ReportError> {
    if !path.is_dir() {
        return Err(ReportError::Input {
            path: path.to_path_buf(),
            detail: "not a directory".into(),
            fix: "give a run directory (`runs/<recipe>-<fp8>`) or a results directory written by `harness eval --out`".into(),
        });
    }
    if path.join("results").is_dir() {
        return Ok((path.join("results"), Some(path.to_path_buf())));
    }
    let parent = path
        .parent()
        .filter(|p| p.join("env.json").is_file() || p.join("recipe.resolved.yaml").is_file())
        .map(Path::to_path_buf);
    Ok((path.to_path_buf(), parent))
}

/// Every `*.json` result file of a directory. Files that are not result files are
/// skipped with a warning; none at all is an error.
fn read_results(dir: &Path) -> Result<(BTreeMap<String, ResultFile>, Vec<String>), ReportError> {
    let mut out = BTreeMap::new();
    let mut warnings = Vec::new();
    let mut entries: Vec<PathBuf> = std::fs::read_dir(dir)
        .map_err(|e| ReportError::io(dir, e))?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|e| e == "json"))
        .collect();
    entries.sort();
    for path in entries {
        if path.file_name().is_some_and(|n| n == "env.json") {
            continue;
        }
        let text = std::fs::read_to_string(&path).map_err(|e| ReportError::io(&path, e))?;
        let json: Value = match serde_json::from_str(&text) {
            Ok(v) => v,
            Err(e) => {
                warnings.push(format!("{}: skipped, not JSON ({e})", path.display()));
                continue;
            }
        };
        let result: BenchResult = match serde_json::from_value(json.clone()) {
            Ok(r) => r,
            Err(e) => {
                warnings.push(format!(
                    "{}: skipped, not a harness result file ({e})",
                    path.display()
                ));
                continue;
            }
        };
        let modified = std::fs::metadata(&path).and_then(|m| m.modified()).ok();
        out.insert(
            result.benchmark.clone(),
            ResultFile {
                path,
                result,
                json,
                modified,
            },
        );
    }
    if out.is_empty() {
        let why = if warnings.is_empty() {
            String::new()
        } else {
            format!(": {}", warnings.join("; "))
        };
        return Err(ReportError::Input {
            path: dir.to_path_buf(),
            detail: format!("no harness result files (`<benchmark>.json`) here{why}"),
            fix: "run `harness eval --encoder ENC --out DIR` (or `harness run RECIPE`) first, and pass that directory".into(),
        });
    }
    Ok((out, warnings))
}

fn read_json(path: &Path) -> Result<Option<Value>, ReportError> {
    if !path.is_file() {
        return Ok(None);
    }
    let text = std::fs::read_to_string(path).map_err(|e| ReportError::io(path, e))?;
    serde_json::from_str(&text)
        .map(Some)
        .map_err(|e| ReportError::Input {
            path: path.to_path_buf(),
            detail: format!("not JSON ({e})"),
            fix: "delete or repair it; it is written by `harness run`".into(),
        })
}

/// sha256 fingerprint of a resolved recipe file, as `harness validate --resolved` prints.
fn resolved_fingerprint(path: &Path) -> Option<String> {
    let text = std::fs::read_to_string(path).ok()?;
    let recipe = harness_recipe::parse_resolved(&text).ok()?;
    Some(harness_recipe::fingerprint::fingerprint(&recipe).0)
}

fn env_str<'a>(env: Option<&'a Value>, key: &str) -> Option<&'a str> {
    let v = env?.get(key)?;
    v.as_str().or_else(|| v.get("name").and_then(Value::as_str))
}

/// One folder is one system: result files of several encoders (told apart by fingerprint,
/// since two configurations of one encoder share its name) are refused rather than shown
/// as one row, whatever the row is called.
fn one_encoder(results: &BTreeMap<String, ResultFile>) -> Result<(), String> {
    let mut by_fp: BTreeMap<(&str, &str), Vec<&str>> = BTreeMap::new();
    for r in results.values() {
        let e = &r.result.encoder;
        by_fp
            .entry((e.fingerprint.as_str(), e.name.as_str()))
            .or_default()
            .push(r.result.benchmark.as_str());
    }
    if by_fp.len() > 1 {
        let list: Vec<String> = by_fp
            .iter()
            .map(|((fp, name), benches)| {
                format!(
                    "{} from {} `{}`",
                    terminal_safe(&benches.join(", ")),
                    terminal_safe(name),
                    terminal_safe(fp)
                )
            })
            .collect();
        return Err(format!(
            "results of {} encoder states in one directory ({}); one folder is one system",
            by_fp.len(),
            list.join("; ")
        ));
    }
    Ok(())
}

/// Steps 2-4 of the module doc.
fn identify(
    run_dir: Option<&Path>,
    env: Option<&Value>,
    recipe_fp: Option<&str>,
    results: &BTreeMap<String, ResultFile>,
    known: &harness_recipe::Known,
) -> Result<(String, String), String> {
    if let Some(recipe) = env_str(env, "recipe") {
        let mut id = match env_str(env, "profile") {
            Some(p) if !p.is_empty() && p != "default" => format!("{recipe}@{p}"),
            _ => recipe.to_string(),
        };
        // `--set` overrides make it another system than the recipe's row (e.g. an
        // untrained baseline); name it `LABEL=DIR` to place it in a table.
        let overrides: Vec<&str> = env
            .and_then(|e| e.get("overrides"))
            .and_then(Value::as_array)
            .map(|a| a.iter().filter_map(Value::as_str).collect())
            .unwrap_or_default();
        if !overrides.is_empty() {
            id = format!("{id} [--set {}]", overrides.join(" --set "));
        }
        return Ok((id, "env.json `recipe`/`profile`/`overrides`".into()));
    }
    if let Some(dir) = run_dir {
        let resolved = dir.join("recipe.resolved.yaml");
        if let Some(name) = std::fs::read_to_string(&resolved)
            .ok()
            .and_then(|t| serde_yaml::from_str::<serde_yaml::Value>(&t).ok())
            .and_then(|v| v.get("name").and_then(|n| n.as_str()).map(String::from))
        {
            let dir_fp8 = dir
                .file_name()
                .and_then(|n| n.to_str())
                .and_then(|n| n.rsplit_once('-'))
                .map(|(_, fp)| fp.to_string())
                .filter(|fp| fp.len() == 8 && fp.chars().all(|c| c.is_ascii_hexdigit()));
            return Ok(match match_profile(&name, dir, recipe_fp, dir_fp8.as_deref(), known) {
                Some((None, file)) => (name, format!("recipe.resolved.yaml matches {} (no profile)", file.display())),
                Some((Some(p), file)) => (
                    format!("{name}@{p}"),
                    format!("recipe.resolved.yaml matches profile `{p}` of {}", file.display()),
                ),
                None => (
                    name.clone(),
                    format!("recipe.resolved.yaml name; no profile of recipes/{name}.yaml has its fingerprint (overrides?)"),
                ),
            });
        }
    }
    let mut names: Vec<&str> = results
        .values()
        .map(|r| r.result.encoder.name.as_str())
        .collect();
    names.sort();
    names.dedup();
    match names.as_slice() {
        [one] => Ok((one.to_string(), "encoder name in the result files".into())),
        _ => Err(format!(
            "result files of several encoders ({}) in one directory",
            names.join(", ")
        )),
    }
}

/// The profile (None: the recipe as written) of `recipes/<name>.yaml` whose fingerprint
/// equals the run's.
fn match_profile(
    name: &str,
    run_dir: &Path,
    recipe_fp: Option<&str>,
    dir_fp8: Option<&str>,
    known: &harness_recipe::Known,
) -> Option<(Option<String>, PathBuf)> {
    if recipe_fp.is_none() && dir_fp8.is_none() {
        return None;
    }
    let file = format!("{name}.yaml");
    let mut candidates = vec![PathBuf::from("recipes").join(&file)];
    candidates.extend(
        run_dir
            .ancestors()
            .skip(1)
            .map(|a| a.join("recipes").join(&file)),
    );
    let path = candidates.into_iter().find(|p| p.is_file())?;
    let mut profiles: Vec<Option<String>> = vec![None];
    profiles.extend(harness_recipe::profile_names(&path).into_iter().map(Some));
    for p in profiles {
        let opts = harness_recipe::LoadOptions {
            profile: p.clone(),
            sets: Vec::new(),
        };
        if let Ok(r) = harness_recipe::load_with(&path, &opts, known) {
            let fp = &r.fingerprint.0;
            let hit = match (recipe_fp, dir_fp8) {
                (Some(full), _) => fp == full,
                (None, Some(short)) => fp.starts_with(short),
                (None, None) => false,
            };
            if hit {
                return Some((p, path));
            }
        }
    }
    None
}

/// Resolves a field path in a result file's JSON: `a.b[2][0]`; object keys may contain
/// dots (the longest matching key wins); `mean(p, q, ...)` averages several paths.
pub fn resolve(json: &Value, path: &str) -> Option<f64> {
    let path = path.trim();
    if let Some(inner) = path.strip_prefix("mean(").and_then(|p| p.strip_suffix(')')) {
        let parts: Vec<&str> = inner
            .split(',')
            .map(str::trim)
            .filter(|p| !p.is_empty())
            .collect();
        let vals: Option<Vec<f64>> = parts.iter().map(|p| resolve(json, p)).collect();
        let vals = vals?;
        return (!vals.is_empty()).then(|| vals.iter().sum::<f64>() / vals.len() as f64);
    }
    let segs: Vec<&str> = path.split('.').collect();
    walk(json, &segs)?.as_f64()
}

fn walk<'a>(v: &'a Value, segs: &[&str]) -> Option<&'a Value> {
    if segs.is_empty() {
        return Some(v);
    }
    // Longest key first: `subsets.track3.es-es.angular` → key `track3.es-es`.
    for take in (1..=segs.len()).rev() {
        let joined = segs[..take].join(".");
        let (key, indices) = split_indices(&joined)?;
        let mut cur = match v.get(key) {
            Some(c) => c,
            None => continue,
        };
        for i in &indices {
            cur = cur.get(*i)?;
        }
        if let Some(found) = walk(cur, &segs[take..]) {
            return Some(found);
        }
    }
    None
}

/// `accuracy[0][3]` → ("accuracy", [0, 3]).
fn split_indices(seg: &str) -> Option<(&str, Vec<usize>)> {
    let Some(open) = seg.find('[') else {
        return Some((seg, Vec::new()));
    };
    let (key, mut rest) = seg.split_at(open);
    let mut idx = Vec::new();
    while let Some(r) = rest.strip_prefix('[') {
        let close = r.find(']')?;
        idx.push(r[..close].parse().ok()?);
        rest = &r[close + 1..];
    }
    rest.is_empty().then_some((key, idx))
}

/// `YYYY-MM-DD HH:MM UTC` of a system time.
pub fn utc(t: SystemTime) -> String {
    let (y, m, d, h, min, _) = harness_core::clock::civil(harness_core::clock::unix_secs(t));
    format!("{y:04}-{m:02}-{d:02} {h:02}:{min:02} UTC")
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn resolve_handles_dotted_keys_indices_and_means() {
        let j = json!({"scores": {
            "subsets": {"track3.es-es": {"angular": {"pearson": 75.5}}, "track3": {"x": 1.0}},
            "matrix": {"accuracy": [[1.0, 2.0], [3.0, 4.0]]},
            "accuracy": {"en": 80.0, "fr": 70.0}
        }});
        assert_eq!(
            resolve(&j, "scores.subsets.track3.es-es.angular.pearson"),
            Some(75.5)
        );
        assert_eq!(resolve(&j, "scores.subsets.track3.x"), Some(1.0));
        assert_eq!(resolve(&j, "scores.matrix.accuracy[1][0]"), Some(3.0));
        assert_eq!(
            resolve(&j, "mean(scores.accuracy.en, scores.accuracy.fr)"),
            Some(75.0)
        );
        assert_eq!(resolve(&j, "scores.matrix.accuracy[2][0]"), None);
        assert_eq!(
            resolve(&j, "mean(scores.accuracy.en, scores.accuracy.de)"),
            None
        );
        assert_eq!(
            resolve(&j, "scores.accuracy"),
            None,
            "an object is not a number"
        );
    }

    #[test]
    fn utc_formats_known_instants() {
        let t = SystemTime::UNIX_EPOCH + std::time::Duration::from_secs(951_782_400 + 3_723);
        assert_eq!(utc(t), "2000-02-29 01:02 UTC");
        assert_eq!(utc(SystemTime::UNIX_EPOCH), "1970-01-01 00:00 UTC");
    }

    #[test]
    fn hints_name_the_command_that_fills_a_row() {
        assert_eq!(
            run_hint("hashed-ngrams"),
            "harness eval --encoder hashed-ngrams --bench all"
        );
        assert_eq!(
            run_hint("laser@layers-3"),
            "harness run recipes/laser.yaml --profile layers-3"
        );
        assert_eq!(run_hint("emu"), "harness run recipes/emu.yaml");
    }

    #[test]
    fn labels_split_only_when_the_argument_is_not_a_path() {
        assert_eq!(
            split_label(Path::new("mine=/nowhere/x")),
            (Some("mine".to_string()), PathBuf::from("/nowhere/x"))
        );
        assert_eq!(
            split_label(Path::new("/no/such=dir")),
            (None, PathBuf::from("/no/such=dir"))
        );
        // A name with `/` or `=` before an existing directory (which may hold `=` too).
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("lr=0.1");
        std::fs::create_dir(&dir).unwrap();
        for name in ["e5/tuned", "a=b", "plain"] {
            let arg = format!("{name}={}", dir.display());
            assert_eq!(
                split_label(Path::new(&arg)),
                (Some(name.to_string()), dir.clone()),
                "{arg}"
            );
        }
        assert_eq!(split_label(&dir), (None, dir.clone()));
    }
}
