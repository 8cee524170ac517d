//! A nightly configuration (`nightly/*.yaml`): what is measured each night (recipes trained
//! from scratch, pinned run directories, evaluation encoders, each with its benchmarks and
//! seeds) and how a change is judged (minimum effects by pattern, confidence, speed
//! thresholds). `nightly/example.yaml` is the worked example; docs/nightly.md documents
//! the keys.

use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// A whole configuration.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NightlyConfig {
    /// Name of the history (`<store>/<name>/`); default: the file's stem.
    #[serde(default)]
    pub name: String,
    #[serde(default)]
    pub description: String,
    /// The night every report also compares against (`2026-11-20` or
    /// `2026-11-20-1a2b3c4d`); default: the first night of the history. `--baseline`
    /// overrides it.
    #[serde(default)]
    pub baseline: Option<String>,
    /// Seeds of every entry that names none.
    #[serde(default = "default_seeds")]
    pub seeds: Vec<u64>,
    /// Nights shown in sparklines and trend charts.
    #[serde(default = "default_history")]
    pub history: usize,
    pub entries: Vec<Entry>,
    #[serde(default)]
    pub rules: Rules,
    /// Sentences encoded by each entry's speed probe (sentences/s); 0 turns it off.
    #[serde(default = "default_probe")]
    pub speed_probe_sentences: usize,
}

fn default_seeds() -> Vec<u64> {
    vec![1]
}
fn default_history() -> usize {
    14
}
fn default_probe() -> usize {
    1000
}

/// One thing measured each night: exactly one of `recipe` (trained from scratch every
/// night, then evaluated), `run` (a pinned run directory, evaluated) or `encoder` (an
/// `--encoder` spec, evaluated).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Entry {
    /// Short name (letters, digits, `-`, `_`, `.`): the entry's folder in a night.
    pub name: String,
    #[serde(default)]
    pub recipe: Option<PathBuf>,
    /// Profile of `recipe`.
    #[serde(default)]
    pub profile: Option<String>,
    /// `--set KEY=VALUE` overrides of `recipe` (`train.steps=300`).
    #[serde(default)]
    pub set: Vec<String>,
    #[serde(default)]
    pub run: Option<PathBuf>,
    #[serde(default)]
    pub encoder: Option<String>,
    /// Benchmarks (or groups) evaluated; a recipe entry without any evaluates its
    /// `evaluate:` list.
    #[serde(default)]
    pub benchmarks: Vec<String>,
    /// `BENCH.KEY=VALUE` overrides of the benchmarks (`sst2.kfold=5`).
    #[serde(default)]
    pub bench_set: Vec<String>,
    /// Seeds (training and benchmark seed); default: the config's `seeds`.
    #[serde(default)]
    pub seeds: Option<Vec<u64>>,
}

/// What an entry is.
#[derive(Debug, Clone, PartialEq)]
pub enum Source<'a> {
    Recipe(&'a Path),
    Run(&'a Path),
    Encoder(&'a str),
}

impl Entry {
    /// The entry's source (checked by [`NightlyConfig::check`]).
    pub fn source(&self) -> Source<'_> {
        match (&self.recipe, &self.run, &self.encoder) {
            (Some(r), _, _) => Source::Recipe(r),
            (_, Some(r), _) => Source::Run(r),
            (_, _, Some(e)) => Source::Encoder(e),
            _ => Source::Encoder(""),
        }
    }
}

/// How a change is judged.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct Rules {
    /// Confidence for the whole night: each of M series is judged at 1 − (1 − c)/M.
    pub confidence: f64,
    /// Bootstrap replicates.
    pub replicates: usize,
    /// Seed of the bootstrap's draws (recorded in every report).
    pub bootstrap_seed: u64,
    /// Minimum effect, in the metric's points, by pattern over `entry/benchmark` (`*`
    /// matches any run of characters; the longest matching pattern wins; `default` when
    /// none matches).
    pub min_effect: BTreeMap<String, f64>,
    /// A throughput (training tokens/s, encoding sentences/s) below this ratio of the
    /// previous night's, or a wall time above its inverse, is a speed regression.
    pub speed_ratio: f64,
    /// Timings shorter than this (seconds) are shown but never compared: on a shared
    /// machine a few milliseconds say nothing about speed.
    pub speed_min_seconds: f64,
    /// Multiplier of the step detector's BIC penalty (higher: fewer steps).
    pub step_penalty: f64,
    /// An entry whose CPU share (its children's CPU seconds over their wall seconds) fell
    /// below this ratio of the previous night's ran on a busy machine: its wall time and
    /// training throughput are shown but not judged. Slower code costs more CPU seconds
    /// and keeps its share; other work on the machine takes the share away.
    pub busy_share: f64,
}

impl Default for Rules {
    fn default() -> Self {
        Rules {
            confidence: 0.99,
            replicates: 2000,
            bootstrap_seed: 1,
            min_effect: BTreeMap::from([("default".to_string(), 1.0)]),
            speed_ratio: 0.8,
            speed_min_seconds: 5.0,
            step_penalty: 1.0,
            busy_share: 0.75,
        }
    }
}

impl Rules {
    /// The minimum effect of `series` (`entry/benchmark`).
    pub fn min_effect_of(&self, series: &str) -> f64 {
        self.min_effect
            .iter()
            .filter(|(p, _)| p.as_str() != "default" && glob(p, series))
            .max_by_key(|(p, _)| p.len())
            .or_else(|| self.min_effect.get_key_value("default"))
            .map_or(1.0, |(_, v)| *v)
    }
}

/// `*`-only glob (any run of characters, `/` included). Hand-written: one wildcard kind
/// does not justify a glob crate.
pub fn glob(pattern: &str, text: &str) -> bool {
    let parts: Vec<&str> = pattern.split('*').collect();
    if parts.len() == 1 {
        return pattern == text;
    }
    let (first, last) = (parts[0], parts[parts.len() - 1]);
    if !text.starts_with(first) || text.len() < first.len() + last.len() || !text.ends_with(last) {
        return false;
    }
    let mut rest = &text[first.len()..text.len() - last.len()];
    for mid in &parts[1..parts.len() - 1] {
        match rest.find(mid) {
            Some(i) => rest = &rest[i + mid.len()..],
            None => return false,
        }
    }
    true
}

impl NightlyConfig {
    /// Reads and checks a configuration; errors name the file, the key and the fix.
    pub fn load(path: &Path) -> Result<NightlyConfig, String> {
        let text =
            harness_core::fsutil::read_text_capped(path, harness_core::fsutil::MAX_CONFIG_BYTES)
                .map_err(|e| {
                    format!(
                        "{}: cannot read the nightly configuration ({e})",
                        path.display()
                    )
                })?;
        let mut config: NightlyConfig = serde_yaml::from_str(&text).map_err(|e| {
            format!(
                "{}: {e}. Fix: see nightly/example.yaml for every key",
                path.display()
            )
        })?;
        if config.name.is_empty() {
            config.name = path
                .file_stem()
                .map(|s| s.to_string_lossy().into_owned())
                .unwrap_or_default();
        }
        config
            .check()
            .map_err(|e| format!("{}: {e}", path.display()))?;
        Ok(config)
    }

    /// Structural checks (names, one source per entry, ranges).
    pub fn check(&self) -> Result<(), String> {
        if !safe_name(&self.name) {
            return Err(format!(
                "name `{}`: use letters, digits, `-`, `_` and `.` only",
                self.name
            ));
        }
        self.check_entries()?;
        if self.seeds.is_empty() {
            return Err("seeds: empty. Fix: give at least one seed".into());
        }
        self.rules.check()?;
        if let Some(b) = &self.baseline {
            if !super::store::is_night_ref(b) {
                return Err(format!(
                    "baseline `{b}`: not a night. Fix: a date of the calendar (YYYY-MM-DD) or DATE-COMMIT8, as the history's folders are named"
                ));
            }
        }
        Ok(())
    }

    /// Refuses no entries, an entry's unsafe or repeated name, and what [`Entry::check`]
    /// refuses.
    fn check_entries(&self) -> Result<(), String> {
        if self.entries.is_empty() {
            return Err("entries: empty. Fix: list at least one recipe, run or encoder".into());
        }
        let mut seen = std::collections::BTreeSet::new();
        for (i, e) in self.entries.iter().enumerate() {
            let at = format!("entries[{i}] (`{}`)", e.name);
            if !safe_name(&e.name) {
                return Err(format!(
                    "{at}: name: use letters, digits, `-`, `_` and `.` only"
                ));
            }
            if !seen.insert(&e.name) {
                return Err(format!(
                    "{at}: a second entry of this name. Fix: rename one"
                ));
            }
            e.check(&at)?;
        }
        Ok(())
    }

    /// The seeds of `entry`.
    pub fn seeds_of<'a>(&'a self, entry: &'a Entry) -> &'a [u64] {
        entry.seeds.as_deref().unwrap_or(&self.seeds)
    }
}

/// Whether `s` can name a history or an entry's folder: letters, digits, `-`, `_` and `.`,
/// not empty and not starting with `.`.
fn safe_name(s: &str) -> bool {
    !s.is_empty()
        && !s.starts_with('.')
        && s.chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'))
}

impl Entry {
    /// Refuses anything but one source, `profile:`/`set:` off a recipe, no benchmarks
    /// where none come from a recipe, and empty seeds; `at` names the entry.
    fn check(&self, at: &str) -> Result<(), String> {
        let sources = [
            self.recipe.is_some(),
            self.run.is_some(),
            self.encoder.is_some(),
        ]
        .iter()
        .filter(|&&b| b)
        .count();
        if sources != 1 {
            return Err(format!(
                "{at}: give exactly one of `recipe:` (trained each night), `run:` (a pinned \
                 run directory) or `encoder:` (an --encoder spec); found {sources}"
            ));
        }
        if self.recipe.is_none() && (self.profile.is_some() || !self.set.is_empty()) {
            return Err(format!(
                "{at}: `profile:` and `set:` apply to a `recipe:` entry only"
            ));
        }
        if self.recipe.is_none() && self.benchmarks.is_empty() {
            return Err(format!(
                "{at}: benchmarks: empty. Fix: list the benchmarks to evaluate (`harness eval --list` names them)"
            ));
        }
        if self.seeds.as_ref().is_some_and(Vec::is_empty) {
            return Err(format!(
                "{at}: seeds: empty. Fix: remove the key or give seeds"
            ));
        }
        Ok(())
    }
}

impl Rules {
    /// Refuses a rule out of its range (NaN and infinity included).
    fn check(&self) -> Result<(), String> {
        if !(0.5..1.0).contains(&self.confidence) {
            return Err(format!(
                "rules.confidence: {} is not in [0.5, 1). Fix: e.g. 0.95",
                self.confidence
            ));
        }
        if self.replicates < 100 {
            return Err(format!(
                "rules.replicates: {} is too few for a percentile interval. Fix: 1000 or more",
                self.replicates
            ));
        }
        if !(self.busy_share > 0.0 && self.busy_share <= 1.0) {
            return Err(format!(
                "rules.busy_share: {} is not in (0, 1]. Fix: e.g. 0.75 (a quarter of the CPU share lost means the machine was busy)",
                self.busy_share
            ));
        }
        if !(self.speed_ratio > 0.0 && self.speed_ratio <= 1.0) {
            return Err(format!(
                "rules.speed_ratio: {} is not in (0, 1]. Fix: e.g. 0.8 (20 % slower alerts)",
                self.speed_ratio
            ));
        }
        if let Some((p, v)) = self
            .min_effect
            .iter()
            .find(|(_, v)| !v.is_finite() || **v < 0.0)
        {
            return Err(format!(
                "rules.min_effect.{p}: {v} is not a finite size ≥ 0. Fix: a size in the metric's points, e.g. 1.0"
            ));
        }
        if !(self.speed_min_seconds.is_finite() && self.speed_min_seconds >= 0.0) {
            return Err(format!(
                "rules.speed_min_seconds: {} is not a finite number of seconds ≥ 0. Fix: e.g. 5",
                self.speed_min_seconds
            ));
        }
        if !(self.step_penalty.is_finite() && self.step_penalty > 0.0) {
            return Err(format!(
                "rules.step_penalty: {} is not a finite number > 0. Fix: e.g. 1.0",
                self.step_penalty
            ));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn glob_and_min_effect_patterns() {
        assert!(glob("*", "a/b"));
        assert!(glob("minilm/*", "minilm/stsb-test"));
        assert!(glob("*/sts*", "laser/stsb-test"));
        assert!(!glob("*/sts*", "laser/tatoeba"));
        assert!(glob("a*b*c", "axxbyyc"));
        assert!(!glob("a*b*c", "axxc"));
        let mut r = Rules::default();
        r.min_effect.insert("*/sts*".into(), 0.5);
        r.min_effect.insert("minilm/stsb*".into(), 0.25);
        assert_eq!(r.min_effect_of("laser/tatoeba"), 1.0);
        assert_eq!(r.min_effect_of("laser/stsb-test"), 0.5);
        assert_eq!(r.min_effect_of("minilm/stsb-test"), 0.25);
    }

    #[test]
    fn the_example_config_loads_and_bad_ones_name_the_fix() {
        let example = harness_core::repo_root().join("nightly/example.yaml");
        let c = NightlyConfig::load(&example).unwrap();
        assert_eq!(c.name, "example");
        assert!(c
            .entries
            .iter()
            .any(|e| matches!(e.source(), Source::Recipe(_))));
        let bad = |yaml: &str| {
            let dir = tempfile::tempdir().unwrap();
            let p = dir.path().join("bad.yaml");
            std::fs::write(&p, yaml).unwrap();
            NightlyConfig::load(&p).unwrap_err()
        };
        let e = bad("entries: [{name: a, encoder: x, run: y, benchmarks: [mr]}]");
        assert!(e.contains("bad.yaml") && e.contains("exactly one"), "{e}");
        let e = bad("entries: [{name: a, encoder: x}]");
        assert!(e.contains("benchmarks: empty"), "{e}");
        let e = bad("entries: [{name: a, encoder: x, benchmarks: [mr], sedes: [1]}]");
        assert!(e.contains("sedes"), "{e}");
        let e = bad("rules: {confidence: 2}\nentries: [{name: a, encoder: x, benchmarks: [mr]}]");
        assert!(e.contains("rules.confidence"), "{e}");
        // NaN and infinity are refused wherever a rule takes a number: NaN compares false
        // with everything, and would turn the rule off without a word.
        for (key, yaml) in [
            ("rules.confidence", "confidence: .nan"),
            ("rules.min_effect.default", "min_effect: {default: .nan}"),
            ("rules.min_effect.a/*", "min_effect: {'a/*': .inf}"),
            ("rules.speed_ratio", "speed_ratio: .nan"),
            ("rules.busy_share", "busy_share: .nan"),
            ("rules.speed_min_seconds", "speed_min_seconds: .nan"),
            ("rules.step_penalty", "step_penalty: .nan"),
        ] {
            let e = bad(&format!(
                "rules: {{{yaml}}}\nentries: [{{name: a, encoder: x, benchmarks: [mr]}}]"
            ));
            assert!(e.contains("bad.yaml") && e.contains(key), "{key}: {e}");
        }
        let e = bad("baseline: 2026-02-30\nentries: [{name: a, encoder: x, benchmarks: [mr]}]");
        assert!(e.contains("baseline `2026-02-30`"), "{e}");
    }
}
