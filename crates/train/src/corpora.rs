//! A recipe's training corpora: every dataset they read installed up front (one list), each
//! corpus loaded, filtered against the evaluation sets its `exclude:` list names (the
//! contamination filter) and capped, with counts of what was kept and removed
//! (`corpora.json`, and `harness corpora`).

use crate::data::cap_pairs;
use crate::TrainError;
use anyhow::Context;
use harness_bench::registry::Registry;
use harness_core::settings::Settings;
use harness_data::corpus::{build_parallel, dataset_sentences, BuiltParallel, EvalSentences};
use harness_data::fetch::ensure_dataset;
use harness_data::records::{Bitext, NliPair, Split};
use harness_recipe::schema::Corpus;
use harness_recipe::Recipe;
use serde::Serialize;
use std::collections::{BTreeMap, BTreeSet};

/// The evaluation datasets behind a corpus's `exclude:` list (benchmark names or groups).
pub fn excluded_datasets(corpus: &Corpus, registry: &Registry) -> anyhow::Result<BTreeSet<String>> {
    let names = registry.expand(&corpus.exclude)?;
    Ok(names
        .iter()
        .filter_map(|n| registry.get(n))
        .map(|b| b.dataset.clone())
        .collect())
}

/// Every dataset the given corpora read: each one's own and the evaluation datasets of its
/// `exclude:` list (the one list a recipe's corpus building installs up front).
pub fn corpus_datasets<'a>(
    corpora: impl IntoIterator<Item = &'a Corpus>,
    registry: &Registry,
) -> anyhow::Result<BTreeSet<String>> {
    let mut all = BTreeSet::new();
    for c in corpora {
        all.insert(c.dataset.clone());
        all.extend(excluded_datasets(c, registry)?);
    }
    Ok(all)
}

/// Installs and verifies every dataset in `names` (fetched on first use) before any is read.
pub fn ensure_all(settings: &Settings, names: &BTreeSet<String>) -> anyhow::Result<()> {
    for n in names {
        ensure_dataset(settings, n)?;
    }
    Ok(())
}

/// Every sentence of the evaluation datasets a corpus's `exclude:` list names: what the
/// contamination filter removes from it.
pub fn excluded_sentences(
    corpus: &Corpus,
    registry: &Registry,
    settings: &Settings,
) -> anyhow::Result<EvalSentences> {
    let mut eval = EvalSentences::new();
    for dataset in excluded_datasets(corpus, registry)? {
        let dir = ensure_dataset(settings, &dataset)?;
        eval.merge(dataset_sentences(&dataset, &dir)?);
    }
    Ok(eval)
}

/// Builds one parallel corpus of a recipe: installs its dataset and every excluded
/// evaluation dataset (fetched on first use), loads the pairs and filters them.
pub fn build_recipe_parallel(
    corpus: &Corpus,
    registry: &Registry,
    settings: &Settings,
) -> anyhow::Result<BuiltParallel> {
    let eval = excluded_sentences(corpus, registry, settings)?;
    let dir = ensure_dataset(settings, &corpus.dataset)?;
    Ok(build_parallel(&corpus.dataset, &dir, &corpus.pairs, &eval)?)
}

/// Corpus sizes after the contamination filter and the `max_examples` cap.
#[derive(Debug, Clone, Serialize)]
pub struct CorpusCounts {
    pub corpus: String,
    pub dataset: String,
    /// `xxx-eng` (or the split) → (kept, removed by the filter).
    pub parts: BTreeMap<String, (usize, usize)>,
    /// Examples used for training after the cap.
    pub used: usize,
}

/// A loaded corpus.
pub enum Loaded {
    Parallel(Vec<(String, String, Vec<Bitext>)>),
    Nli(Vec<NliPair>),
}

impl Loaded {
    /// The examples this corpus gives.
    pub fn kind(&self) -> crate::objectives::ExampleKind {
        match self {
            Loaded::Parallel(_) => crate::objectives::ExampleKind::Pairs,
            Loaded::Nli(_) => crate::objectives::ExampleKind::Nli,
        }
    }
}

fn is_parallel_dataset(d: &str) -> bool {
    matches!(d, "parallel-pairs" | "wmt-news-parallel")
}

fn split_of(name: &str) -> Option<Split> {
    match name {
        "train" => Some(Split::Train),
        "validation" | "dev" => Some(Split::Dev),
        "test" => Some(Split::Test),
        _ => None,
    }
}

/// Loads one corpus (filtered, capped) and its counts.
pub fn load_corpus(
    name: &str,
    corpus: &Corpus,
    recipe: &Recipe,
    registry: &Registry,
    settings: &Settings,
) -> anyhow::Result<(Loaded, CorpusCounts)> {
    let mut counts = CorpusCounts {
        corpus: name.to_string(),
        dataset: corpus.dataset.clone(),
        parts: BTreeMap::new(),
        used: 0,
    };
    if is_parallel_dataset(&corpus.dataset) {
        let built = build_recipe_parallel(corpus, registry, settings)?;
        for p in &built.report.pairs {
            counts.parts.insert(
                format!("{}-{}", p.source_lang, p.target_lang),
                (p.kept, p.removed),
            );
        }
        let mut c: Vec<(String, String, Vec<Bitext>)> = built
            .corpora
            .into_iter()
            .map(|c| (c.source_lang, c.target_lang, c.pairs))
            .collect();
        cap_pairs(
            &mut c,
            corpus.max_examples.map_or(usize::MAX, |m| m as usize),
            recipe.seed,
        );
        counts.used = c.iter().map(|x| x.2.len()).sum();
        return Ok((Loaded::Parallel(c), counts));
    }
    let dir = ensure_dataset(settings, &corpus.dataset)?;
    let eval = excluded_sentences(corpus, registry, settings)?;
    let splits: Vec<String> = if corpus.splits.is_empty() {
        vec!["train".into()]
    } else {
        corpus.splits.clone()
    };
    let mut all = Vec::new();
    for s in &splits {
        let split = split_of(s).ok_or_else(|| {
            TrainError::recipe(
                format!("data.corpora.{name}.splits"),
                format!("unknown split `{s}`"),
                "use `train`, `validation` or `test`",
            )
        })?;
        let pairs = match corpus.dataset.as_str() {
            "snli" => harness_data::loaders::snli::load(&dir, split)?,
            "sick" => harness_data::loaders::sick::entailment(&dir, split)?,
            other => {
                return Err(TrainError::recipe(
                    format!("data.corpora.{name}.dataset"),
                    format!("`{other}` cannot be a training corpus in this build"),
                    "use parallel-pairs, wmt-news-parallel, snli or sick",
                )
                .into())
            }
        };
        let before = pairs.len();
        let kept: Vec<NliPair> = pairs
            .into_iter()
            .filter(|p| !eval.contains(&p.premise) && !eval.contains(&p.hypothesis))
            .collect();
        counts
            .parts
            .insert(s.clone(), (kept.len(), before - kept.len()));
        all.extend(kept);
    }
    if let Some(m) = corpus.max_examples {
        all.truncate(m as usize);
    }
    counts.used = all.len();
    Ok((Loaded::Nli(all), counts))
}

/// Loads every corpus the recipe's tasks and tokenizer use (their datasets installed and
/// verified first, all of them, before any is read), with their counts.
pub fn load_corpora(
    recipe: &Recipe,
    settings: &Settings,
) -> anyhow::Result<(BTreeMap<String, Loaded>, Vec<CorpusCounts>)> {
    let registry = Registry::load()?;
    let needed: std::collections::BTreeSet<&String> = recipe
        .tasks
        .iter()
        .map(|t| &t.corpus)
        .chain(recipe.data.tokenizer.iter().flat_map(|t| t.train_on.iter()))
        .collect();
    let used: Vec<&Corpus> = needed
        .iter()
        .filter_map(|n| recipe.data.corpora.get(*n))
        .collect();
    ensure_all(settings, &corpus_datasets(used, &registry)?)?;
    let mut loaded = BTreeMap::new();
    let mut counts = Vec::new();
    for name in needed {
        let corpus = recipe.data.corpora.get(name).ok_or_else(|| {
            TrainError::recipe(
                format!("data.corpora.{name}"),
                "a task or the tokenizer names this corpus but it is not declared",
                "declare it under `data.corpora`",
            )
        })?;
        let (l, c) = load_corpus(name, corpus, recipe, &registry, settings)
            .with_context(|| format!("building corpus `{name}`"))?;
        loaded.insert(name.clone(), l);
        counts.push(c);
    }
    Ok((loaded, counts))
}
