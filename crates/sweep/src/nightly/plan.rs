//! The plan of a night, resolved before anything runs: every entry's recipe loaded and
//! checked (with its profile and `set:`), its benchmarks expanded (groups to their members,
//! each name checked with a did-you-mean), its `bench_set:` overrides checked against the
//! protocols' parameters, its run directory or encoder opened. A misspelt name fails in
//! seconds, before the first entry trains, and nothing is written to the history
//! (`harness nightly --dry-run` prints the plan and stops there). The same plan names the
//! series a night will have, against which `--plant` and `--ack` are checked.

use super::ack::Ack;
use super::config::{glob, NightlyConfig, Source};
use harness_bench::registry::{Overrides, Registry};
use std::path::Path;

/// One entry, resolved.
#[derive(Debug, Clone, PartialEq)]
pub struct EntryPlan {
    pub name: String,
    /// `recipe`, `run` or `encoder`.
    pub kind: &'static str,
    /// The recipe path, run directory or encoder spec, as the configuration gives it.
    pub source: String,
    pub seeds: Vec<u64>,
    /// The `--bench` list of its `harness eval` (its `benchmarks:`, else its recipe's
    /// `evaluate:` names).
    pub bench: String,
    /// The benchmarks it evaluates, groups expanded: its series are `<name>/<benchmark>`.
    pub benchmarks: Vec<String>,
    /// Its `bench_set:` overrides.
    pub bench_set: Vec<String>,
}

/// A whole night, resolved.
#[derive(Debug, Clone, PartialEq)]
pub struct NightPlan {
    pub entries: Vec<EntryPlan>,
}

/// The speed figures every entry has (`<entry>/speed:<figure>`).
pub const SPEED_FIGURES: [&str; 3] = ["tokens_per_s", "sentences_per_s", "wall_s"];

impl NightPlan {
    /// Every series the night can report: `entry/benchmark` and `entry/speed:<figure>`.
    pub fn series(&self) -> Vec<String> {
        let mut out = Vec::new();
        for e in &self.entries {
            out.extend(e.benchmarks.iter().map(|b| format!("{}/{b}", e.name)));
            out.extend(
                SPEED_FIGURES
                    .iter()
                    .map(|f| format!("{}/speed:{f}", e.name)),
            );
        }
        out
    }

    /// The plan as lines of text (`harness nightly --dry-run`).
    pub fn describe(&self) -> String {
        let mut out = String::new();
        for e in &self.entries {
            let seeds: Vec<String> = e.seeds.iter().map(u64::to_string).collect();
            let action = if e.kind == "recipe" {
                "train, then evaluate"
            } else {
                "evaluate"
            };
            out.push_str(&format!(
                "  {} ({} {}): seeds {}; {action} on {}{}\n",
                e.name,
                e.kind,
                e.source,
                seeds.join(", "),
                e.benchmarks.join(", "),
                if e.bench_set.is_empty() {
                    String::new()
                } else {
                    format!(" with {}", e.bench_set.join(", "))
                }
            ));
        }
        out
    }
}

/// Resolves every entry of `config` (read from `path`; relative paths from `cwd`); recipes
/// are loaded against `known` (the command layer's, with the trainer's objectives).
/// `open` checks what an evaluation will open — called with (`run`, the run directory) or
/// (`encoder`, the spec) — and says why it cannot be used. Every problem is returned, each
/// naming the file, the entry and the key.
pub fn resolve(
    config: &NightlyConfig,
    path: &Path,
    cwd: &Path,
    known: &harness_recipe::Known,
    open: &mut dyn FnMut(&str, &str) -> Result<(), String>,
) -> Result<NightPlan, Vec<String>> {
    let registry = match Registry::load() {
        Ok(r) => r,
        Err(e) => return Err(vec![e.to_string()]),
    };
    let mut entries = Vec::new();
    let mut problems = Vec::new();
    for (i, entry) in config.entries.iter().enumerate() {
        let at = format!("{}: entries[{i}] (`{}`)", path.display(), entry.name);
        match resolve_entry(config, entry, &registry, cwd, known, open) {
            Ok(e) => entries.push(e),
            Err(found) => problems.extend(found.into_iter().map(|e| format!("{at}: {e}"))),
        }
    }
    if problems.is_empty() {
        Ok(NightPlan { entries })
    } else {
        Err(problems)
    }
}

/// One entry: every problem found (its source's, its benchmarks', its overrides').
fn resolve_entry(
    config: &NightlyConfig,
    entry: &super::config::Entry,
    registry: &Registry,
    cwd: &Path,
    known: &harness_recipe::Known,
    open: &mut dyn FnMut(&str, &str) -> Result<(), String>,
) -> Result<EntryPlan, Vec<String>> {
    let mut problems = Vec::new();
    let source_checked = check_source(entry, cwd, known, open);
    let names = match source_checked {
        Ok(names) => names,
        Err(e) => {
            problems.push(e);
            entry.benchmarks.clone()
        }
    };
    if !names.is_empty() {
        match check_benchmarks(entry, &names, registry) {
            Ok(benchmarks) if problems.is_empty() => {
                let (kind, source) = match entry.source() {
                    Source::Recipe(p) => ("recipe", p.display().to_string()),
                    Source::Run(p) => ("run", p.display().to_string()),
                    Source::Encoder(e) => ("encoder", e.to_string()),
                };
                return Ok(EntryPlan {
                    name: entry.name.clone(),
                    kind,
                    source,
                    seeds: config.seeds_of(entry).to_vec(),
                    bench: names.join(","),
                    benchmarks,
                    bench_set: entry.bench_set.clone(),
                });
            }
            Ok(_) => {}
            Err(e) => problems.push(e),
        }
    }
    Err(problems)
}

/// Checks what an entry evaluates (its recipe, run directory or encoder); returns the names
/// of its benchmarks (its own, else its recipe's `evaluate:`).
fn check_source(
    entry: &super::config::Entry,
    cwd: &Path,
    known: &harness_recipe::Known,
    open: &mut dyn FnMut(&str, &str) -> Result<(), String>,
) -> Result<Vec<String>, String> {
    let mut names = entry.benchmarks.clone();
    match entry.source() {
        Source::Recipe(recipe) => {
            let load = harness_recipe::LoadOptions {
                profile: entry.profile.clone(),
                sets: entry.set.clone(),
            };
            let resolved = harness_recipe::load_with(&cwd.join(recipe), &load, known)
                .map_err(|e| format!("recipe: {e}"))?;
            if names.is_empty() {
                names = resolved
                    .recipe
                    .evaluate
                    .iter()
                    .map(|e| e.name.clone())
                    .collect();
            }
            if names.is_empty() {
                return Err(
                    "the recipe evaluates nothing and the entry lists no `benchmarks:`. Fix: list them under `benchmarks:`"
                        .into(),
                );
            }
        }
        Source::Run(run) => {
            let dir = cwd.join(run);
            if !dir.is_dir() {
                return Err(format!(
                    "run: {}: no such directory. Fix: the folder `harness train --out DIR` wrote (relative paths start where harness nightly runs)",
                    dir.display()
                ));
            }
            open("run", &dir.display().to_string()).map_err(|e| format!("run: {e}"))?;
        }
        Source::Encoder(spec) => {
            open("encoder", spec).map_err(|e| format!("encoder: {e}"))?;
        }
    }
    Ok(names)
}

/// Expands an entry's benchmark names and checks its `bench_set:` against them.
fn check_benchmarks(
    entry: &super::config::Entry,
    names: &[String],
    registry: &Registry,
) -> Result<Vec<String>, String> {
    let benchmarks = registry.expand(names).map_err(|e| {
        format!("benchmarks: {e}. Fix: a benchmark or group `harness eval --list` names")
    })?;
    // `bench_set:` as `harness eval --set` takes it: BENCH among the evaluated ones, KEY one
    // of its protocol's parameters.
    let mut planned: Vec<(String, Overrides)> = names
        .iter()
        .map(|n| (n.clone(), Overrides::default()))
        .collect();
    for raw in &entry.bench_set {
        let (bench, param, value) =
            Overrides::parse_set(raw).map_err(|e| format!("bench_set: {e}"))?;
        let members = registry
            .expand(std::slice::from_ref(&bench))
            .map_err(|e| format!("bench_set `{raw}`: {e}"))?;
        if let Some(m) = members.iter().find(|m| !benchmarks.contains(m)) {
            return Err(format!(
                "bench_set `{raw}`: benchmark `{m}` is not among those the entry evaluates ({}). Fix: add it to `benchmarks:`, or drop the override",
                benchmarks.join(", ")
            ));
        }
        let mut o = Overrides::default();
        o.set(&param, value)
            .map_err(|e| format!("bench_set `{raw}`: {e}"))?;
        planned.push((bench, o));
    }
    harness_bench::runner::plan(registry, &planned).map_err(|e| {
        format!("bench_set: {e}. Fix: a parameter the benchmark's protocol takes (see its benchmarks/<name>.yaml)")
    })?;
    Ok(benchmarks)
}

/// Checks fire drills against the plan: each names an entry and one of its benchmarks.
pub fn check_plants(plan: &NightPlan, plants: &[(String, f64)]) -> Result<(), String> {
    for (series, _) in plants {
        let (entry, bench) = series.split_once('/').unwrap_or((series, ""));
        let Some(e) = plan.entries.iter().find(|e| e.name == entry) else {
            let names: Vec<&str> = plan.entries.iter().map(|e| e.name.as_str()).collect();
            return Err(format!(
                "--plant {series}: no entry `{entry}`{}. Fix: ENTRY/BENCH with ENTRY one of: {}",
                harness_core::suggest::did_you_mean(entry, &names),
                names.join(", ")
            ));
        };
        if !e.benchmarks.iter().any(|b| b == bench) {
            let names: Vec<&str> = e.benchmarks.iter().map(String::as_str).collect();
            return Err(format!(
                "--plant {series}: entry `{entry}` does not evaluate `{bench}`{}. Fix: one of its benchmarks: {}",
                harness_core::suggest::did_you_mean(bench, &names),
                names.join(", ")
            ));
        }
    }
    Ok(())
}

/// Checks acknowledgements against the series that exist (`known`: the plan's and the
/// history's): an ack that matches none is a typo, and would silence nothing.
pub fn check_acks(acks: &[Ack], known: &[String], file: &Path) -> Result<(), String> {
    for (i, a) in acks.iter().enumerate() {
        if !known.iter().any(|s| glob(&a.series, s)) {
            let names: Vec<&str> = known.iter().map(String::as_str).collect();
            return Err(format!(
                "--ack {}: entry {i}: series `{}` matches no series of this configuration{}. Fix: ENTRY/BENCH (or ENTRY/speed:FIGURE, `*` allowed) with one of: {}",
                file.display(),
                a.series,
                harness_core::suggest::did_you_mean(&a.series, &names),
                names.join(", ")
            ));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn plan() -> NightPlan {
        NightPlan {
            entries: vec![EntryPlan {
                name: "hashed".into(),
                kind: "encoder",
                source: "hashed-ngrams".into(),
                seeds: vec![1],
                bench: "stsb-test,tatoeba".into(),
                benchmarks: vec!["stsb-test".into(), "tatoeba".into()],
                bench_set: vec![],
            }],
        }
    }

    #[test]
    fn plants_and_acks_must_name_series_that_exist() {
        let p = plan();
        assert!(check_plants(&p, &[("hashed/tatoeba".into(), -5.0)]).is_ok());
        let e = check_plants(&p, &[("hashd/tatoeba".into(), -5.0)]).unwrap_err();
        assert!(
            e.contains("no entry `hashd`") && e.contains("`hashed`"),
            "{e}"
        );
        let e = check_plants(&p, &[("hashed/tatoeeba".into(), -5.0)]).unwrap_err();
        assert!(e.contains("did you mean `tatoeba`"), "{e}");
        let ack = |series: &str| Ack {
            series: series.into(),
            reason: "r".into(),
            expires: None,
        };
        let known = p.series();
        let file = Path::new("acks.yaml");
        assert!(check_acks(&[ack("hashed/*"), ack("hashed/speed:wall_s")], &known, file).is_ok());
        let e = check_acks(&[ack("hashed/tatoeeba")], &known, file).unwrap_err();
        assert!(
            e.contains("acks.yaml") && e.contains("matches no series") && e.contains("tatoeba"),
            "{e}"
        );
    }

    #[test]
    fn misspelt_benchmarks_and_overrides_are_caught_before_the_night() {
        let dir = tempfile::tempdir().unwrap();
        let cfg = |yaml: &str| {
            let p = dir.path().join("c.yaml");
            std::fs::write(&p, yaml).unwrap();
            (NightlyConfig::load(&p).unwrap(), p)
        };
        let mut opened = Vec::new();
        let mut open = |kind: &str, spec: &str| {
            opened.push(format!("{kind}:{spec}"));
            if spec == "hashed-ngram" {
                Err("unknown encoder `hashed-ngram` (did you mean `hashed-ngrams`?)".into())
            } else {
                Ok(())
            }
        };
        let known = harness_bench::known().unwrap();
        let (c, p) = cfg("entries: [{name: h, encoder: hashed-ngrams, benchmarks: [stsb-test, tatoeba], bench_set: [\"tatoeba.languages=[deu]\"]}]");
        let plan = resolve(&c, &p, dir.path(), &known, &mut open).unwrap();
        assert_eq!(plan.entries[0].benchmarks, ["stsb-test", "tatoeba"]);
        let (c, p) = cfg("entries: [{name: h, encoder: hashed-ngrams, benchmarks: [stsb-tset]}]");
        let e = resolve(&c, &p, dir.path(), &known, &mut open)
            .unwrap_err()
            .join("\n");
        assert!(
            e.contains("c.yaml: entries[0] (`h`): benchmarks:") && e.contains("stsb-test"),
            "{e}"
        );
        let (c, p) = cfg("entries: [{name: h, encoder: hashed-ngram, benchmarks: [mr]}]");
        let e = resolve(&c, &p, dir.path(), &known, &mut open)
            .unwrap_err()
            .join("\n");
        assert!(e.contains("encoder: unknown encoder"), "{e}");
        let (c, p) = cfg("entries: [{name: h, run: no/such/run, benchmarks: [mr]}]");
        let e = resolve(&c, &p, dir.path(), &known, &mut open)
            .unwrap_err()
            .join("\n");
        assert!(
            e.contains("run: ") && e.contains("no such directory"),
            "{e}"
        );
        let (c, p) = cfg("entries: [{name: h, encoder: hashed-ngrams, benchmarks: [mr], bench_set: [\"tatoeba.languages=[deu]\"]}]");
        let e = resolve(&c, &p, dir.path(), &known, &mut open)
            .unwrap_err()
            .join("\n");
        assert!(e.contains("not among those the entry evaluates"), "{e}");
        let (c, p) = cfg("entries: [{name: h, encoder: hashed-ngrams, benchmarks: [mr], bench_set: [\"mr.kfodl=3\"]}]");
        let e = resolve(&c, &p, dir.path(), &known, &mut open)
            .unwrap_err()
            .join("\n");
        assert!(e.contains("bench_set") && e.contains("kfodl"), "{e}");
    }
}
