//! Benchmark declarations as data: one YAML file per benchmark in `benchmarks/` (dataset,
//! protocol, split, languages, protocol parameters), groups in `benchmarks/groups.yaml`,
//! and the report table specs' names from `benchmarks/tables/*.yaml`. All of it is
//! compiled into the binary, so recipes are checked against the exact set a build runs.
//! Adding a benchmark of an existing protocol is a YAML file, not code. Every declaration
//! names one of [`crate::protocols::ALL`], checked when the registry is read.

// The declaration types live below the protocols (which read them without the registry);
// callers have always named them here.
pub use crate::benchmark::{Benchmark, Overrides};

use crate::protocols;
use include_dir::{include_dir, Dir};
use std::collections::BTreeMap;

static BENCHMARKS: Dir<'_> = include_dir!("$CARGO_MANIFEST_DIR/../../benchmarks");

/// The group that stands for every benchmark.
pub const ALL: &str = "all";

/// [`harness_recipe::Known::check_bench`] for the embedded registry: the overrides of an
/// `evaluate:` entry applied to its benchmark (or each member of its group) must parse as
/// that protocol's parameters.
pub fn check_overrides(
    name: &str,
    params: &BTreeMap<String, serde_yaml::Value>,
    languages: Option<&[String]>,
) -> Vec<(String, String)> {
    let Ok(registry) = Registry::load() else {
        return Vec::new();
    };
    let overrides = Overrides {
        params: params.clone(),
        languages: languages.map(<[String]>::to_vec),
    };
    let Ok(members) = registry.expand(&[name.to_string()]) else {
        return Vec::new();
    };
    let mut out = Vec::new();
    for m in members {
        if let Some(b) = registry.get(&m) {
            if let Err(e) = protocols::check_params(&b.with(&overrides)) {
                let key = params
                    .keys()
                    .find(|k| e.contains(&format!("`{k}`")))
                    .cloned()
                    .unwrap_or_default();
                out.push((key, format!("benchmark `{m}`: {e}")));
            }
        }
    }
    out
}

/// A problem with the declarations themselves, or an unknown name.
#[derive(Debug, Clone, thiserror::Error)]
pub enum RegistryError {
    #[error("benchmarks/{file}: {detail}")]
    Declaration { file: String, detail: String },
    /// A file read at run time (`./benchmarks/`, `--spec`) that cannot be used.
    #[error(transparent)]
    SpecFile(#[from] harness_core::specs::SpecFileError),
    #[error("unknown benchmark `{name}`{suggestion}. Known: {known}")]
    Unknown {
        name: String,
        suggestion: String,
        known: String,
    },
}

/// Every benchmark, group and table spec name.
#[derive(Debug, Clone, PartialEq)]
pub struct Registry {
    benchmarks: BTreeMap<String, Benchmark>,
    groups: BTreeMap<String, Vec<String>>,
    tables: Vec<String>,
}

impl Registry {
    /// The declarations in force: the shipped ones (compiled into this binary) overlaid at
    /// run time by `./benchmarks/` and the `--spec` files (`harness_core::specs`), so a user
    /// adds or changes a benchmark without rebuilding.
    /// Read once per process (the sources are fixed at start) and handed out as copies, so the
    /// recipe checks that ask for it per `evaluate:` entry read no file again.
    pub fn load() -> Result<Registry, RegistryError> {
        static LOADED: std::sync::OnceLock<Result<Registry, RegistryError>> =
            std::sync::OnceLock::new();
        LOADED.get_or_init(Self::read).clone()
    }

    fn read() -> Result<Registry, RegistryError> {
        let shipped: Vec<(String, String)> = BENCHMARKS
            .files()
            .map(|f| (f.path().to_string_lossy().into_owned(), f))
            .filter(|(name, _)| name.ends_with(".yaml"))
            .map(|(name, f)| (name, f.contents_utf8().unwrap_or_default().to_string()))
            .collect();
        let runtime = harness_core::specs::runtime_files(harness_core::specs::Kind::Benchmark)?;
        let files = harness_core::specs::overlay(shipped, runtime);
        let mut tables: Vec<String> = BENCHMARKS
            .get_dir("tables")
            .map(|d| {
                d.files()
                    .filter(|f| f.path().extension().is_some_and(|e| e == "yaml"))
                    .filter_map(|f| f.path().file_stem())
                    .map(|s| s.to_string_lossy().into_owned())
                    .collect()
            })
            .unwrap_or_default();
        let runtime_tables = harness_core::specs::runtime_files(harness_core::specs::Kind::Table)?;
        for t in runtime_tables {
            let stem = t.name.trim_end_matches(".yaml").to_string();
            if !tables.contains(&stem) {
                tables.push(stem);
            }
        }
        Self::from_files(&files, tables)
    }

    /// Builds a registry from `(file name, text)` pairs of the `benchmarks/` directory
    /// (`groups.yaml` among them) and the table spec names.
    pub fn from_files(
        files: &[(String, String)],
        mut tables: Vec<String>,
    ) -> Result<Registry, RegistryError> {
        let decl = |file: &str, detail: String| RegistryError::Declaration {
            file: file.to_string(),
            detail,
        };
        let mut benchmarks = BTreeMap::new();
        let mut groups = BTreeMap::new();
        for (file, text) in files {
            if file == "groups.yaml" {
                groups = serde_yaml::from_str::<BTreeMap<String, Vec<String>>>(text)
                    .map_err(|e| decl(file, e.to_string()))?;
                continue;
            }
            let b: Benchmark = serde_yaml::from_str(text).map_err(|e| decl(file, e.to_string()))?;
            if format!("{}.yaml", b.name) != *file {
                return Err(decl(
                    file,
                    format!("`name: {}` must match the file name", b.name),
                ));
            }
            if protocols::find(&b.protocol).is_none() {
                let known = protocols::names();
                return Err(decl(
                    file,
                    format!(
                        "unknown protocol `{}`{}; known: {}",
                        b.protocol,
                        harness_core::suggest::did_you_mean(&b.protocol, &known),
                        known.join(", ")
                    ),
                ));
            }
            benchmarks.insert(b.name.clone(), b);
        }
        if groups.contains_key(ALL) {
            return Err(decl("groups.yaml", format!("`{ALL}` is built in")));
        }
        for (g, members) in &groups {
            if benchmarks.contains_key(g) {
                return Err(decl(
                    "groups.yaml",
                    format!("group `{g}` has a benchmark's name"),
                ));
            }
            for m in members {
                if !benchmarks.contains_key(m) {
                    return Err(decl(
                        "groups.yaml",
                        format!("group `{g}` names unknown benchmark `{m}`"),
                    ));
                }
            }
        }
        let all = benchmarks
            .values()
            .filter(|b| b.in_all)
            .map(|b| b.name.clone())
            .collect();
        groups.insert(ALL.to_string(), all);
        tables.sort();
        Ok(Registry {
            benchmarks,
            groups,
            tables,
        })
    }

    /// Every benchmark name, sorted.
    pub fn names(&self) -> Vec<&str> {
        self.benchmarks.keys().map(String::as_str).collect()
    }

    /// Every benchmark as (name, protocol), sorted by name: what a result-field path is
    /// checked against ([`crate::protocols::check_field`]).
    pub fn protocols(&self) -> Vec<(&str, &str)> {
        self.benchmarks
            .iter()
            .map(|(n, b)| (n.as_str(), b.protocol.as_str()))
            .collect()
    }

    /// Every group name (`all` included), sorted.
    pub fn group_names(&self) -> Vec<&str> {
        self.groups.keys().map(String::as_str).collect()
    }

    /// Members of a group.
    pub fn group(&self, name: &str) -> Option<&[String]> {
        self.groups.get(name).map(Vec::as_slice)
    }

    /// Report table spec names (`benchmarks/tables/*.yaml` stems), sorted.
    pub fn tables(&self) -> &[String] {
        &self.tables
    }

    /// The declaration of one benchmark.
    pub fn get(&self, name: &str) -> Option<&Benchmark> {
        self.benchmarks.get(name)
    }

    /// [`Registry::expand`] for names with overrides: each benchmark once, in order, with
    /// the overrides of every entry that named it (or its group) merged, later ones winning.
    pub fn expand_with(
        &self,
        entries: &[(String, Overrides)],
    ) -> Result<Vec<(String, Overrides)>, RegistryError> {
        let mut out: Vec<(String, Overrides)> = Vec::new();
        for (name, overrides) in entries {
            for m in self.expand(std::slice::from_ref(name))? {
                match out.iter_mut().find(|(n, _)| *n == m) {
                    Some((_, o)) => *o = o.merged(overrides),
                    None => out.push((m, overrides.clone())),
                }
            }
        }
        Ok(out)
    }

    /// Expands benchmark and group names into benchmark names, in order, without
    /// duplicates; an unknown name is an error with a did-you-mean.
    pub fn expand(&self, names: &[String]) -> Result<Vec<String>, RegistryError> {
        let mut out: Vec<String> = Vec::new();
        for n in names {
            let members: Vec<String> = if let Some(g) = self.groups.get(n) {
                g.clone()
            } else if self.benchmarks.contains_key(n) {
                vec![n.clone()]
            } else {
                let mut known = self.names();
                known.extend(self.group_names());
                return Err(RegistryError::Unknown {
                    name: n.clone(),
                    suggestion: harness_core::suggest::did_you_mean(n, &known),
                    known: known.join(", "),
                });
            };
            for m in members {
                if !out.contains(&m) {
                    out.push(m);
                }
            }
        }
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn embedded_declarations_load_and_cover_the_papers_benchmarks() {
        let r = Registry::load().unwrap();
        for n in [
            "stsb-dev",
            "stsb-test",
            "sts12",
            "sts13",
            "sts14",
            "sts15",
            "sts16",
            "sts17",
            "sick-r",
            "stsb-multi",
            "mr",
            "cr",
            "subj",
            "mpqa",
            "trec",
            "sst2",
            "sst5",
            "mrpc",
            "xnli",
            "sib200",
            "bucc",
            "tatoeba",
            "newstest2012",
            "flores200",
            "retrieval-p1",
            "xsid",
            "atis",
            "snips",
            "sentiment",
            "eigen-similarity",
        ] {
            assert!(r.get(n).is_some(), "{n} missing");
        }
        assert_eq!(r.names().len(), 31);
        assert_eq!(r.group("senteval").unwrap().len(), 8);
        // `xnli-dev` only serves model selection.
        assert_eq!(r.group(ALL).unwrap().len(), 30);
        assert!(!r.group(ALL).unwrap().iter().any(|n| n == "xnli-dev"));
        assert_eq!(r.get("bucc").unwrap().dataset, "bucc2018");
        assert!(
            r.tables().iter().any(|t| t == "laser-xnli"),
            "table specs are registered"
        );
    }

    #[test]
    fn expand_resolves_groups_and_rejects_unknown_names_with_a_suggestion() {
        let r = Registry::load().unwrap();
        let names = ["xnli", "senteval", "mr"].map(String::from);
        let got = r.expand(&names).unwrap();
        assert_eq!(got[0], "xnli");
        assert_eq!(got.len(), 9, "mr is not repeated");
        let err = r.expand(&["tatoeb".to_string()]).unwrap_err().to_string();
        assert!(err.contains("did you mean `tatoeba`"), "{err}");
    }

    #[test]
    fn an_unknown_protocol_is_refused_naming_the_protocols_of_this_build() {
        let yaml = "name: x\ndescription: d\ndataset: d\nprotocol: tatoeba-serch\nsplit: test\n";
        let files = [("x.yaml".to_string(), yaml.to_string())];
        let err = Registry::from_files(&files, Vec::new())
            .unwrap_err()
            .to_string();
        assert!(
            err.starts_with("benchmarks/x.yaml: unknown protocol `tatoeba-serch`")
                && err.contains("did you mean `tatoeba-search`"),
            "{err}"
        );
        let known = err.split("; known: ").nth(1).unwrap();
        assert_eq!(known, crate::protocols::names().join(", "));
    }

    #[test]
    fn declarations_name_datasets_the_shared_folder_has() {
        // The lock may still be empty; the shared folder is the ground truth meanwhile.
        let dir = harness_core::shared_datasets_dir();
        if !dir.is_dir() {
            return;
        }
        let r = Registry::load().unwrap();
        for n in r.names() {
            let ds = &r.get(n).unwrap().dataset;
            assert!(
                dir.join(ds).is_dir(),
                "{n}: dataset folder `{ds}` not found"
            );
        }
    }
}
