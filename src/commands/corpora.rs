//! `harness corpora RECIPE`: resolves a recipe, installs the datasets it needs, builds each
//! parallel corpus and runs the contamination filter against the evaluation sets its
//! `exclude:` list names, printing how many pairs were removed per language pair (training
//! builds its corpora through the same functions).

use anyhow::Context;
use clap::Args;
use harness_bench::registry::Registry;
use harness_core::settings::Settings;
use harness_core::terminal::terminal_safe;
use harness_train::corpora::{build_recipe_parallel, corpus_datasets, ensure_all, Exclusions};
use std::path::PathBuf;
use std::process::ExitCode;

#[derive(Debug, Args)]
pub struct CorporaArgs {
    /// Recipe file (YAML)
    pub recipe: PathBuf,
    /// Apply this profile of the recipe
    #[arg(long)]
    pub profile: Option<String>,
    /// Override one key: `--set data.corpora.pairs.pairs=[deu-eng]` (repeatable)
    #[arg(long = "set", value_name = "KEY=VALUE")]
    pub sets: Vec<String>,
}

/// `harness corpora`.
pub fn run(args: &CorporaArgs, settings: &Settings) -> anyhow::Result<ExitCode> {
    let resolved = super::load_recipe(&args.recipe, args.profile.clone(), &args.sets)?;
    if resolved
        .recipe
        .data
        .corpora
        .values()
        .any(|c| c.dataset.is_none())
    {
        return prepare_files(args, &resolved, settings);
    }
    let registry = Registry::load()?;
    ensure_all(
        settings,
        &corpus_datasets(resolved.recipe.data.corpora.values(), &registry)?,
    )?;
    let exclusions = Exclusions::new();
    for (name, corpus) in &resolved.recipe.data.corpora {
        if !corpus.pairs.iter().any(|p| p.ends_with("-eng")) {
            println!(
                "corpus `{name}` ({}): not a parallel corpus, nothing to filter",
                corpus.source_name()
            );
            continue;
        }
        let built = build_recipe_parallel(corpus, &registry, settings, &exclusions)
            .with_context(|| format!("building corpus `{name}` of {}", args.recipe.display()))?;
        println!(
            "corpus `{name}` ({}), excluding {} ({} distinct evaluation sentences):",
            corpus.source_name(),
            if corpus.exclude.is_empty() {
                "nothing".to_string()
            } else {
                corpus.exclude.join(", ")
            },
            built.excluded_sentences
        );
        println!("{}", terminal_safe(&built.report.to_string()));
    }
    Ok(ExitCode::SUCCESS)
}

/// A recipe with corpora of the user's files: they are tokenised with the run's tokenizer,
/// so they are prepared as training prepares them — in the recipe's run directory (the
/// tokenizer learned on a sample, each corpus binarized into shards, with progress), which
/// `harness train` / `run` then reuse — and their counts printed.
fn prepare_files(
    args: &CorporaArgs,
    resolved: &harness_recipe::Resolved,
    settings: &Settings,
) -> anyhow::Result<ExitCode> {
    let dir = super::open_run_dir(None, settings, resolved, &args.sets, None)?;
    let (_, _, counts) = harness_train::session::prepare(resolved, settings, dir.path())
        .with_context(|| format!("preparing the corpora of {}", args.recipe.display()))?;
    for c in &counts {
        let kept: usize = c.parts.values().map(|p| p.0).sum();
        let removed: usize = c.parts.values().map(|p| p.1).sum();
        println!(
            "corpus `{}` ({}): {kept} kept, {removed} removed by the contamination filter, {} used",
            c.corpus, c.dataset, c.used
        );
        let mut table = tabled::builder::Builder::default();
        table.push_record(["part", "kept", "removed"]);
        for (part, (k, r)) in &c.parts {
            table.push_record([part.clone(), k.to_string(), r.to_string()]);
        }
        println!("{}", terminal_safe(&table.build().to_string()));
    }
    Ok(ExitCode::SUCCESS)
}
