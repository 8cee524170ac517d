//! `harness corpora RECIPE`: resolves a recipe, installs the datasets it needs, builds each
//! parallel corpus and runs the contamination filter against the evaluation sets its
//! `exclude:` list names, printing how many pairs were removed per language pair. Training
//! builds its corpora through the same functions.

use crate::bench::registry::Registry;
use crate::cli::CorporaArgs;
use crate::data::corpus::{build_parallel, dataset_sentences, BuiltParallel, EvalSentences};
use crate::data::fetch::ensure_dataset;
use crate::recipe::schema::Corpus;
use crate::recipe::{load, LoadOptions};
use crate::settings::Settings;
use anyhow::Context;
use std::collections::BTreeSet;
use std::process::ExitCode;

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

/// Builds one parallel corpus of a recipe: installs its dataset and every excluded
/// evaluation dataset (fetched on first use), loads the pairs and filters them.
pub fn build_recipe_parallel(
    corpus: &Corpus,
    registry: &Registry,
    settings: &Settings,
) -> anyhow::Result<BuiltParallel> {
    let mut eval = EvalSentences::new();
    for dataset in excluded_datasets(corpus, registry)? {
        let dir = ensure_dataset(settings, &dataset)?;
        eval.merge(dataset_sentences(&dataset, &dir)?);
    }
    let dir = ensure_dataset(settings, &corpus.dataset)?;
    Ok(build_parallel(&corpus.dataset, &dir, &corpus.pairs, &eval)?)
}

/// `harness corpora`.
pub fn corpora_command(args: &CorporaArgs, settings: &Settings) -> anyhow::Result<ExitCode> {
    let opts = LoadOptions {
        profile: args.profile.clone(),
        sets: args.sets.clone(),
    };
    let resolved = load(&args.recipe, &opts).with_context(|| {
        format!(
            "{} is not a valid recipe (run `harness validate` on it)",
            args.recipe.display()
        )
    })?;
    let registry = Registry::embedded()?;
    ensure_all(
        settings,
        &corpus_datasets(resolved.recipe.data.corpora.values(), &registry)?,
    )?;
    for (name, corpus) in &resolved.recipe.data.corpora {
        if !corpus.pairs.iter().any(|p| p.ends_with("-eng")) {
            println!(
                "corpus `{name}` ({}): not a parallel corpus, nothing to filter",
                corpus.dataset
            );
            continue;
        }
        let built = build_recipe_parallel(corpus, &registry, settings)
            .with_context(|| format!("building corpus `{name}` of {}", args.recipe.display()))?;
        println!(
            "corpus `{name}` ({}), excluding {} ({} distinct evaluation sentences):",
            corpus.dataset,
            if corpus.exclude.is_empty() {
                "nothing".to_string()
            } else {
                corpus.exclude.join(", ")
            },
            built.excluded_sentences
        );
        println!("{}", built.report);
    }
    Ok(ExitCode::SUCCESS)
}
