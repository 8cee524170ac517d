//! harness-recipe: the recipe language. Serde schema, loading (base inheritance, profiles,
//! `--set`), validation with did-you-mean, and the fingerprint of a resolved recipe. The
//! names a recipe may refer to outside itself (datasets, benchmarks, tables) are handed in
//! as [`Known`] by the layers that own them. Uses: harness-core.
//!
//! ```text
//! file ─ read_chain ─▶ base ⊕ recipe ─ profile, --set ─▶ merged value
//!      ─ check::structure ─▶ Recipe ─ check::semantics ─▶ Resolved { recipe, fingerprint }
//! ```
//! Every stage adds to one list of problems; a recipe is valid only when it is empty.

pub mod check;
pub mod corpus_rules;
pub mod de;
pub mod device;
pub mod error;
pub mod fingerprint;
pub mod load;
pub mod schema;

pub use check::Known;
pub use error::{Problem, RecipeError};
pub use fingerprint::Fingerprint;
pub use schema::Recipe;

use de::Seg;
use load::{Override, Sources};
use serde_yaml::Value;
use std::path::{Path, PathBuf};

/// How to resolve a recipe beyond its files.
#[derive(Debug, Clone, Default)]
pub struct LoadOptions {
    /// Profile to apply (`--profile`).
    pub profile: Option<String>,
    /// `key.path=value` overrides, applied in order after the profile (`--set`).
    pub sets: Vec<String>,
}

/// A valid recipe, fully resolved.
#[derive(Debug, Clone)]
pub struct Resolved {
    /// The recipe file it was loaded from.
    pub path: PathBuf,
    /// The profile applied, if any.
    pub profile: Option<String>,
    /// Profiles the recipe defines (after inheritance), sorted.
    pub profiles: Vec<String>,
    /// Defaults filled; `base` and `profiles` are empty (already applied).
    pub recipe: Recipe,
    pub fingerprint: Fingerprint,
}

impl Resolved {
    /// The resolved recipe as YAML (defaults filled, profiles applied and left out).
    pub fn to_yaml(&self) -> Result<String, RecipeError> {
        serde_yaml::to_string(&self.recipe).map_err(|e| {
            RecipeError::Setup(format!(
                "{}: the resolved recipe does not serialize to YAML ({e})",
                self.path.display()
            ))
        })
    }
}

/// Parses a resolved recipe (`recipe.resolved.yaml`, as [`Resolved::to_yaml`] wrote it).
///
/// Here rather than at each reader: `serde_yaml::from_str::<Recipe>` is generic, and every
/// crate that called it compiled its own copy of the recipe's whole deserializer (about a
/// twentieth of harness-model's machine code).
pub fn parse_resolved(text: &str) -> Result<Recipe, serde_yaml::Error> {
    serde_yaml::from_str(text)
}

/// Loads, resolves and checks a recipe against `known` names. On failure the error holds
/// every problem found, each with its file, key path and (where the text has it) line.
pub fn load_with(path: &Path, opts: &LoadOptions, known: &Known) -> Result<Resolved, RecipeError> {
    load_from(path, None, None, opts, known)
}

/// [`load_with`] of a recipe that another file names (a grid's `recipe:`): the file is
/// read as carefully as a `base:` ([`load::NamedBy`]: a plain file, and none of its text
/// shown in a problem until it reads as a recipe).
pub fn load_named(
    path: &Path,
    named_by: &load::NamedBy,
    opts: &LoadOptions,
    known: &Known,
) -> Result<Resolved, RecipeError> {
    load_from(path, None, Some(named_by), opts, known)
}

/// [`load_with`] on recipe text held in memory (`path` names it in problems and anchors its
/// `base:`, which is read from disk).
pub fn load_text(
    path: &Path,
    text: &str,
    opts: &LoadOptions,
    known: &Known,
) -> Result<Resolved, RecipeError> {
    load_from(path, Some(text), None, opts, known)
}

/// `path`'s chain, its own text given or read (as a file `named` by another, if so).
fn chain(
    path: &Path,
    text: Option<&str>,
    named: Option<&load::NamedBy>,
) -> Result<(Value, Vec<load::Layer>), Vec<Problem>> {
    match (text, named) {
        (Some(t), _) => load::read_chain_text(path, t),
        (None, Some(n)) => load::read_chain_named(path, n),
        (None, None) => load::read_chain(path),
    }
}

fn load_from(
    path: &Path,
    text: Option<&str>,
    named: Option<&load::NamedBy>,
    opts: &LoadOptions,
    known: &Known,
) -> Result<Resolved, RecipeError> {
    let invalid = |problems| RecipeError::Invalid { problems };
    let (mut merged, layers) = chain(path, text, named).map_err(invalid)?;
    let mut sources = Sources {
        layers,
        profile: None,
        sets: Vec::new(),
    };
    let mut problems = Vec::new();
    let profiles: Vec<String> = match merged.get("profiles") {
        Some(Value::Mapping(m)) => m
            .keys()
            .filter_map(|k| k.as_str().map(String::from))
            .collect(),
        _ => Vec::new(),
    };

    if let Some(name) = &opts.profile {
        apply_profile(
            path,
            name,
            &profiles,
            &mut merged,
            &mut sources,
            &mut problems,
        );
    }
    apply_sets(path, &opts.sets, &mut merged, &mut sources, &mut problems);

    let mut findings = check::Findings::default();
    let (mut recipe, pruned) = check::structure(&merged, &mut findings);
    if let Some(r) = &mut recipe {
        check::normalise_objectives(r, known);
    }
    if let Some(r) = &recipe {
        check::semantics(r, &merged, &pruned, known, &mut findings);
    }
    problems.extend(findings.into_problems(&sources));
    // File order, then line order; problems without a line keep their place at the end.
    let order: Vec<PathBuf> = sources.layers.iter().map(|l| l.path.clone()).collect();
    problems.sort_by_key(|p| {
        (
            order
                .iter()
                .position(|f| *f == p.file)
                .unwrap_or(usize::MAX),
            p.line.unwrap_or(usize::MAX),
        )
    });
    problems.dedup();

    match recipe {
        Some(mut recipe) if problems.is_empty() => {
            recipe.base = None;
            recipe.profiles.clear();
            Ok(Resolved {
                path: path.to_path_buf(),
                profile: opts.profile.clone(),
                profiles,
                fingerprint: fingerprint::fingerprint(&recipe),
                recipe,
            })
        }
        _ => Err(invalid(problems)),
    }
}

/// Applies profile `name` of the merged recipe (its overrides recorded in `sources`); an
/// unknown profile or an override that does not apply is a problem.
fn apply_profile(
    path: &Path,
    name: &str,
    profiles: &[String],
    merged: &mut Value,
    sources: &mut Sources,
    problems: &mut Vec<Problem>,
) {
    match merged.get("profiles").and_then(|p| p.get(name)).cloned() {
        None => {
            let cands: Vec<&str> = profiles.iter().map(String::as_str).collect();
            let defined = if cands.is_empty() {
                "the recipe defines no profiles".to_string()
            } else {
                format!("defined: {}", cands.join(", "))
            };
            problems.push(Problem {
                suggestion: harness_core::suggest::suggest(name, &cands),
                note: Some(format!("from `--profile {name}`")),
                ..Problem::new(
                    path.into(),
                    None,
                    "profiles",
                    format!("unknown profile `{name}` ({defined})"),
                )
            });
        }
        Some(Value::Mapping(m)) => {
            let mut applied = Vec::new();
            for (k, v) in m {
                let Some(key) = k.as_str().map(String::from) else {
                    continue; // a structural error reported by `check`
                };
                match load::apply(merged, &key, v.clone()) {
                    Ok(p) => applied.push(Override {
                        raw: format!("{key}: ..."),
                        key,
                        value: v,
                        applied: Some(p),
                    }),
                    Err(e) => {
                        let at = [
                            Seg::Key("profiles".into()),
                            Seg::Key(name.to_string()),
                            Seg::Key(key.clone()),
                        ];
                        let (file, line, _) = sources.attribute(&at);
                        problems.push(Problem::new(file, line, de::path_string(&at), e));
                    }
                }
            }
            sources.profile = Some((name.to_string(), applied));
        }
        Some(_) => {} // not a mapping: reported by `check` as a wrong type
    }
}

/// Applies each `--set KEY=VALUE` in order (recorded in `sources`); one that does not parse
/// or apply is a problem.
fn apply_sets(
    path: &Path,
    sets: &[String],
    merged: &mut Value,
    sources: &mut Sources,
    problems: &mut Vec<Problem>,
) {
    for raw in sets {
        match load::parse_set(raw).and_then(|mut o| {
            let p = load::apply(merged, &o.key, o.value.clone())?;
            o.applied = Some(p);
            Ok(o)
        }) {
            Ok(o) => sources.sets.push(o),
            Err(e) => problems.push(Problem {
                note: Some(format!("from `--set {raw}`")),
                ..Problem::new(path.into(), None, "", e)
            }),
        }
    }
}

/// The profile names a recipe (and its bases) define; empty when it cannot be read.
pub fn profile_names(path: &Path) -> Vec<String> {
    profile_names_from(path, None)
}

fn profile_names_from(path: &Path, text: Option<&str>) -> Vec<String> {
    match chain(path, text, None) {
        Ok((merged, _)) => match merged.get("profiles") {
            Some(Value::Mapping(m)) => m
                .keys()
                .filter_map(|k| k.as_str().map(String::from))
                .collect(),
            _ => Vec::new(),
        },
        Err(_) => Vec::new(),
    }
}

/// Checks one recipe as `harness validate` does: as given, and, when no `--profile` is
/// chosen, with each of its profiles too (problems a profile adds are marked with it).
pub fn validate(path: &Path, opts: &LoadOptions, known: &Known) -> Result<Resolved, Vec<Problem>> {
    validate_from(path, None, opts, known)
}

/// [`validate`] on recipe text held in memory (see [`load_text`]): the entry point of the
/// recipe fuzz target (`fuzz/`), which feeds it arbitrary text.
pub fn validate_text(
    path: &Path,
    text: &str,
    opts: &LoadOptions,
    known: &Known,
) -> Result<Resolved, Vec<Problem>> {
    validate_from(path, Some(text), opts, known)
}

fn validate_from(
    path: &Path,
    text: Option<&str>,
    opts: &LoadOptions,
    known: &Known,
) -> Result<Resolved, Vec<Problem>> {
    let main = load_from(path, text, None, opts, known);
    let mut problems: Vec<Problem> = match &main {
        Ok(_) => Vec::new(),
        Err(e) => e.problems().to_vec(),
    };
    if let Err(RecipeError::Setup(msg)) = &main {
        problems.push(Problem::new(path.into(), None, "", msg.clone()));
    }
    if opts.profile.is_none() {
        for name in profile_names_from(path, text) {
            let with_profile = LoadOptions {
                profile: Some(name.clone()),
                sets: opts.sets.clone(),
            };
            if let Err(e) = load_from(path, text, None, &with_profile, known) {
                for mut p in e.problems().iter().cloned() {
                    let already = problems
                        .iter()
                        .any(|q| q.key == p.key && q.message == p.message);
                    if !already {
                        let tag = format!("with profile `{name}`");
                        p.note = Some(match p.note {
                            Some(n) if n.contains(&format!("`{name}`")) => n,
                            Some(n) => format!("{n}, {tag}"),
                            None => tag,
                        });
                        problems.push(p);
                    }
                }
            }
        }
    }
    match main {
        Ok(r) if problems.is_empty() => Ok(r),
        _ => Err(problems),
    }
}
