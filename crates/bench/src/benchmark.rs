//! One benchmark's declaration (`benchmarks/<name>.yaml`) and the changes a run makes to it
//! ([`Overrides`]). The protocols read a declaration and nothing else of the registry, so this
//! type sits below both: the registry collects declarations and checks them against
//! [`crate::protocols::ALL`]; a protocol only ever sees the one it runs.

use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// One benchmark, as declared in `benchmarks/<name>.yaml`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Benchmark {
    pub name: String,
    pub description: String,
    /// Dataset name in `datasets.lock`.
    pub dataset: String,
    /// The name of one of [`crate::protocols::ALL`].
    pub protocol: String,
    pub split: String,
    /// Languages or language pairs evaluated (default: every one the dataset has).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub languages: Vec<String>,
    /// Protocol-specific parameters.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub params: BTreeMap<String, serde_yaml::Value>,
    /// Whether the group `all` includes it; `false` for a benchmark that only serves a
    /// recipe's model selection (`xnli-dev`: XNLI's validation sets).
    #[serde(default = "yes", skip_serializing_if = "is_yes")]
    pub in_all: bool,
}

fn yes() -> bool {
    true
}

fn is_yes(v: &bool) -> bool {
    *v
}

/// Changes to a benchmark's declaration for one run (a recipe's `evaluate:` entry, or
/// `harness eval --set BENCH.KEY=VALUE`): `params` merge over the declared parameters,
/// `languages` replaces the declared list. Recorded in every result file.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Overrides {
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub params: BTreeMap<String, serde_yaml::Value>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub languages: Option<Vec<String>>,
}

impl Overrides {
    /// Whether nothing is overridden.
    pub fn is_empty(&self) -> bool {
        self.params.is_empty() && self.languages.is_none()
    }

    /// `other` on top of `self` (its params win, its languages replace).
    pub fn merged(&self, other: &Overrides) -> Overrides {
        let mut params = self.params.clone();
        params.extend(other.params.iter().map(|(k, v)| (k.clone(), v.clone())));
        Overrides {
            params,
            languages: other.languages.clone().or_else(|| self.languages.clone()),
        }
    }

    /// Parses `KEY=VALUE` for one benchmark (`epochs=5`, `languages=[en, de]`); the value
    /// is read as YAML.
    pub fn parse_set(raw: &str) -> Result<(String, String, serde_yaml::Value), String> {
        let (key, value) = raw.split_once('=').ok_or_else(|| {
            format!("`--set {raw}`: expected BENCH.KEY=VALUE, for example `--set xnli.epochs=20`")
        })?;
        let (bench, param) = key.trim().split_once('.').ok_or_else(|| {
            format!(
                "`--set {raw}`: the key names a benchmark (or group) and one of its parameters, \
                 for example `xnli.epochs`"
            )
        })?;
        if bench.is_empty() || param.is_empty() || param.contains('.') {
            return Err(format!(
                "`--set {raw}`: expected BENCH.KEY=VALUE with one parameter name, for example `xnli.epochs=20`"
            ));
        }
        let value = serde_yaml::from_str::<serde_yaml::Value>(value)
            .unwrap_or_else(|_| serde_yaml::Value::String(value.into()));
        Ok((bench.to_string(), param.to_string(), value))
    }

    /// Adds one parsed `--set` (`languages` replaces the list; any other key is a parameter).
    pub fn set(&mut self, param: &str, value: serde_yaml::Value) -> Result<(), String> {
        if param == "languages" {
            let list: Vec<String> = serde_yaml::from_value(value).map_err(|e| {
                format!("`languages` takes a list of language names, like `[en, de]` ({e})")
            })?;
            self.languages = Some(list);
        } else {
            self.params.insert(param.to_string(), value);
        }
        Ok(())
    }
}

impl Benchmark {
    /// The declaration with `overrides` applied.
    pub fn with(&self, overrides: &Overrides) -> Benchmark {
        let mut b = self.clone();
        b.params
            .extend(overrides.params.iter().map(|(k, v)| (k.clone(), v.clone())));
        if let Some(l) = &overrides.languages {
            b.languages = l.clone();
        }
        b
    }

    /// Identity of everything in the declaration that can change a number (dataset,
    /// protocol, split, languages, parameters; not the description): sha256 of its
    /// canonical JSON. A kept result is reused only while this is unchanged.
    pub fn identity(&self) -> String {
        let json = serde_json::json!({
            "name": self.name,
            "dataset": self.dataset,
            "protocol": self.protocol,
            "split": self.split,
            "languages": self.languages,
            "params": self.params,
        });
        // serde_json maps are sorted (no `preserve_order`), so this text is canonical.
        harness_core::fsutil::sha256_hex(json.to_string().as_bytes())
    }
}
