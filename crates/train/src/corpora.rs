//! A recipe's training corpora: every dataset they read installed up front (one list), each
//! corpus loaded, filtered against the evaluation sets its `exclude:` list names (the
//! contamination filter) and capped, with counts of what was kept and removed
//! (`corpora.json`, and `harness corpora`).

use crate::data::{cap_pairs, ExampleKind};
use crate::TrainError;
use harness_bench::registry::Registry;
use harness_core::settings::Settings;
use harness_data::corpus::{build_parallel, dataset_sentences, BuiltParallel, EvalSentences};
use harness_data::fetch::ensure_dataset;
use harness_data::records::{Bitext, NliPair, Split};
use harness_recipe::de::{path_string, Seg};
use harness_recipe::schema::{Corpus, CorpusKind};
use harness_recipe::Recipe;
use serde::Serialize;
use std::collections::{BTreeMap, BTreeSet};

/// Datasets [`load_corpus`] loads as training corpora (`harness validate` checks recipes
/// against this list: `capability.rs`).
pub const CORPUS_DATASETS: &[&str] = &[
    "parallel-pairs",
    "wmt-news-parallel",
    "snli",
    "sick",
    "conversation-pairs",
    "monolingual-sentences",
    "xsid",
    "atis",
    "snips",
];

/// The evaluation datasets behind a corpus's `exclude:` list (benchmark names or groups).
pub fn excluded_datasets(
    corpus: &Corpus,
    registry: &Registry,
) -> Result<BTreeSet<String>, TrainError> {
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
) -> Result<BTreeSet<String>, TrainError> {
    let mut all = BTreeSet::new();
    for c in corpora {
        all.extend(c.dataset.clone());
        all.extend(excluded_datasets(c, registry)?);
    }
    Ok(all)
}

/// Installs and verifies every dataset in `names` (fetched on first use) before any is read.
pub fn ensure_all(settings: &Settings, names: &BTreeSet<String>) -> Result<(), TrainError> {
    for n in names {
        ensure_dataset(settings, n)?;
    }
    Ok(())
}

/// The evaluation sentences of each excluded dataset, read once per run: the datasets
/// several corpora exclude (the LASER default's two corpora share four, XNLI and FLORES-200
/// among them) are read and hashed once, and the sets are shared, not copied.
#[derive(Default)]
pub struct Exclusions {
    read: std::sync::Mutex<BTreeMap<String, EvalSentences>>,
}

impl Exclusions {
    /// None read yet.
    pub fn new() -> Self {
        Self::default()
    }
}

/// Every sentence of the evaluation datasets a corpus's `exclude:` list names: what the
/// contamination filter removes from it. Each dataset is installed and verified here
/// (every time: a file that changed since is checked again), and read unless `exclusions`
/// already holds it; the datasets to read are read in parallel.
pub fn excluded_sentences(
    corpus: &Corpus,
    registry: &Registry,
    settings: &Settings,
    exclusions: &Exclusions,
) -> Result<EvalSentences, TrainError> {
    use rayon::prelude::*;
    let mut dirs = Vec::new();
    for dataset in excluded_datasets(corpus, registry)? {
        let dir = ensure_dataset(settings, &dataset)?;
        dirs.push((dataset, dir));
    }
    let lock = || exclusions.read.lock().unwrap_or_else(|e| e.into_inner());
    let to_read: Vec<&(String, std::path::PathBuf)> = {
        let read = lock();
        dirs.iter().filter(|(d, _)| !read.contains_key(d)).collect()
    };
    let fresh = to_read
        .par_iter()
        .map(|(dataset, dir)| Ok((dataset.clone(), dataset_sentences(dataset, dir)?)))
        .collect::<Result<Vec<_>, TrainError>>()?;
    let mut read = lock();
    read.extend(fresh);
    let mut eval = EvalSentences::new();
    for (dataset, _) in &dirs {
        eval.merge(read[dataset].clone());
    }
    Ok(eval)
}

/// Builds one parallel corpus of a recipe: installs its dataset and every excluded
/// evaluation dataset (fetched on first use), loads the pairs and filters them.
pub fn build_recipe_parallel(
    corpus: &Corpus,
    registry: &Registry,
    settings: &Settings,
    exclusions: &Exclusions,
) -> Result<BuiltParallel, TrainError> {
    let eval = excluded_sentences(corpus, registry, settings, exclusions)?;
    let dataset = corpus.dataset.as_deref().unwrap_or_default();
    let dir = ensure_dataset(settings, dataset)?;
    Ok(build_parallel(dataset, &dir, &corpus.pairs, &eval)?)
}

/// Corpus sizes after the contamination filter and the `max_examples` cap.
#[derive(Debug, Clone, Serialize, serde::Deserialize)]
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
    /// (message, response) turns of conversations (`source` = message).
    Conversation(Vec<Bitext>),
    /// Running text: documents as their sentences in order (previous / next neighbours).
    Text(Vec<Vec<String>>),
    /// Sentences with a class (an index into `classes`).
    Labelled {
        items: Vec<(String, u32)>,
        classes: Vec<String>,
    },
    /// The user's own files, found and stamped: read while binarizing
    /// ([`crate::binarize`]), never whole into memory.
    Files(Box<crate::files_corpus::FilesCorpus>),
}

impl Loaded {
    /// The examples this corpus gives.
    pub fn kind(&self) -> ExampleKind {
        match self {
            Loaded::Parallel(_) => ExampleKind::Pairs,
            Loaded::Nli(_) => ExampleKind::Nli,
            Loaded::Conversation(_) => ExampleKind::Conversation,
            Loaded::Text(_) => ExampleKind::RunningText,
            Loaded::Labelled { .. } => ExampleKind::Labelled,
            Loaded::Files(f) => match f.kind {
                CorpusKind::Pairs => ExampleKind::Pairs,
                CorpusKind::Nli => ExampleKind::Nli,
                CorpusKind::Conversation => ExampleKind::Conversation,
                CorpusKind::Text => ExampleKind::RunningText,
                CorpusKind::Labelled => ExampleKind::Labelled,
            },
        }
    }

    /// Every sentence of the corpus, in order (what a tokenizer learns from).
    pub fn sentences(&self) -> Vec<&str> {
        match self {
            Loaded::Parallel(c) => c
                .iter()
                .flat_map(|(_, _, p)| {
                    p.iter()
                        .flat_map(|b| [b.source.as_str(), b.target.as_str()])
                })
                .collect(),
            Loaded::Nli(v) => v
                .iter()
                .flat_map(|p| [p.premise.as_str(), p.hypothesis.as_str()])
                .collect(),
            Loaded::Conversation(v) => v
                .iter()
                .flat_map(|b| [b.source.as_str(), b.target.as_str()])
                .collect(),
            Loaded::Text(docs) => docs.iter().flatten().map(String::as_str).collect(),
            Loaded::Labelled { items, .. } => items.iter().map(|(s, _)| s.as_str()).collect(),
            // Sampled from the files ([`crate::files_corpus::FilesCorpus::sample`]).
            Loaded::Files(_) => Vec::new(),
        }
    }
}

/// Conversation turns of `conversation-pairs` (splits: `valid_freq`, `valid_rare`,
/// `test_freq`, `test_rare`; default all four), without pairs that hold an excluded
/// benchmark's sentence, in file order, the first `max_examples` kept.
fn load_conversation(
    dir: &std::path::Path,
    corpus: &Corpus,
    eval: &EvalSentences,
    counts: &mut CorpusCounts,
) -> Result<Loaded, TrainError> {
    let splits: Vec<&str> = if corpus.splits.is_empty() {
        harness_data::loaders::conversation::SPLITS.to_vec()
    } else {
        corpus.splits.iter().map(String::as_str).collect()
    };
    let mut all = Vec::new();
    for s in splits {
        let pairs = harness_data::loaders::conversation::load_pairs(dir, &[s])?;
        let before = pairs.len();
        let kept: Vec<Bitext> = pairs
            .into_iter()
            .filter(|p| !eval.contains(&p.source) && !eval.contains(&p.target))
            .collect();
        counts
            .parts
            .insert(s.to_string(), (kept.len(), before - kept.len()));
        all.extend(kept);
    }
    if let Some(m) = corpus.max_examples {
        all.truncate(m as usize);
    }
    counts.used = all.len();
    Ok(Loaded::Conversation(all))
}

/// Running text of `monolingual-sentences`: each book of `languages` (default all) as its
/// sentences in order (`loaders::monolingual::split_sentences` over its paragraphs), excluded
/// benchmark sentences dropped, at most `max_examples` sentences over the books.
fn load_text(
    dir: &std::path::Path,
    corpus: &Corpus,
    eval: &EvalSentences,
    counts: &mut CorpusCounts,
) -> Result<Loaded, TrainError> {
    use harness_data::loaders::monolingual;
    let mut docs = Vec::new();
    let mut left = corpus.max_examples.map_or(usize::MAX, |m| m as usize);
    for (lang, name) in monolingual::books(dir)? {
        if !corpus.languages.is_empty() && !corpus.languages.contains(&lang) {
            continue;
        }
        let book = monolingual::load_book(dir, &lang, &name)?;
        let sentences: Vec<String> = book
            .paragraphs
            .iter()
            .flat_map(|p| monolingual::split_sentences(p))
            .collect();
        let before = sentences.len();
        let mut kept: Vec<String> = sentences
            .into_iter()
            .filter(|s| !eval.contains(s))
            .collect();
        let removed = before - kept.len();
        kept.truncate(left);
        left -= kept.len();
        let part = counts.parts.entry(lang.clone()).or_insert((0, 0));
        part.0 += kept.len();
        part.1 += removed;
        if !kept.is_empty() {
            docs.push(kept);
        }
    }
    counts.used = docs.iter().map(Vec::len).sum();
    Ok(Loaded::Text(docs))
}

/// Intent-labelled utterances of `xsid` for `languages` (default `en`) and `splits`
/// (default `train`, English only: `train-en`), or of the English `atis` / `snips` (the
/// slot-gated splits; a multi-intent label such as `atis_flight#atis_airfare` is one class,
/// as SlotGated-SLU keeps it), excluded benchmark sentences dropped; the classes are the
/// intents seen, sorted.
fn load_labelled(
    dir: &std::path::Path,
    name: &str,
    corpus: &Corpus,
    eval: &EvalSentences,
    counts: &mut CorpusCounts,
) -> Result<Loaded, TrainError> {
    let slot_gated = corpus.dataset.as_deref() != Some("xsid");
    if slot_gated && corpus.languages.iter().any(|l| l != "en") {
        return Err(TrainError::recipe(
            format!("data.corpora.{name}.languages"),
            format!("`{}` is English only", corpus.source_name()),
            "drop `languages` (or give `[en]`)",
        ));
    }
    let languages: Vec<String> = if corpus.languages.is_empty() {
        vec!["en".into()]
    } else {
        corpus.languages.clone()
    };
    let splits: Vec<String> = if corpus.splits.is_empty() {
        vec!["train".into()]
    } else {
        corpus.splits.clone()
    };
    let mut texts: Vec<(String, String)> = Vec::new();
    for lang in &languages {
        for s in &splits {
            let part = labelled_part(dir, name, slot_gated, lang, s)?;
            let before = part.len();
            let kept: Vec<(String, String)> = part
                .into_iter()
                .filter(|(t, _)| !eval.contains(t))
                .collect();
            counts
                .parts
                .insert(format!("{lang}/{s}"), (kept.len(), before - kept.len()));
            texts.extend(kept);
        }
    }
    if let Some(m) = corpus.max_examples {
        texts.truncate(m as usize);
    }
    let classes: Vec<String> = texts
        .iter()
        .map(|(_, l)| l.clone())
        .collect::<BTreeSet<_>>()
        .into_iter()
        .collect();
    let items = texts
        .into_iter()
        .map(|(t, l)| {
            let c = classes.binary_search(&l).unwrap_or(0) as u32;
            (t, c)
        })
        .collect::<Vec<_>>();
    counts.used = items.len();
    Ok(Loaded::Labelled { items, classes })
}

/// One language and split of an intent corpus (ATIS/SNIPS: English only; xSID: English
/// training data, every language's `valid` and `test`) as (text, label).
fn labelled_part(
    dir: &std::path::Path,
    name: &str,
    slot_gated: bool,
    lang: &str,
    s: &str,
) -> Result<Vec<(String, String)>, TrainError> {
    use harness_data::loaders::{slot_gated, xsid};
    let part: Vec<(String, String)> = match (s, lang) {
        (split, _) if slot_gated => {
            let folder = match split {
                "train" => "train",
                "valid" | "validation" | "dev" => "valid",
                "test" => "test",
                _ => {
                    return Err(TrainError::recipe(
                        format!("data.corpora.{name}.splits"),
                        format!("unknown split `{split}`"),
                        "use `train`, `valid` or `test`",
                    ))
                }
            };
            slot_gated::load_split(dir, folder)?
                .into_iter()
                .map(|t| (t.text, t.label))
                .collect()
        }
        ("train", "en") => xsid::load_train_en(dir)?
            .into_iter()
            .map(|t| (t.text, t.label))
            .collect(),
        ("train", _) => {
            return Err(TrainError::recipe(
                format!("data.corpora.{name}.splits"),
                format!("xSID has training data in English only, not `{lang}`"),
                "read `valid` or `test` for the other languages",
            ))
        }
        (other, _) => {
            let split = match other {
                "valid" | "validation" | "dev" => xsid::Split::Valid,
                "test" => xsid::Split::Test,
                _ => {
                    return Err(TrainError::recipe(
                        format!("data.corpora.{name}.splits"),
                        format!("unknown split `{other}`"),
                        "use `train`, `valid` or `test`",
                    ))
                }
            };
            xsid::load(dir, lang, split)?
                .into_iter()
                .map(|t| (t.text, t.label))
                .collect()
        }
    };
    Ok(part)
}

/// Translation pairs of `xsid` (`pairs: [de-en, …]`, each `X-en`): every utterance of
/// language X in `splits` (`valid`, `test`; default `valid`) with the English utterance it
/// translates (the alignment of `loaders::xsid::load_aligned`), as `X → en` pairs; pairs
/// with an excluded benchmark sentence on either side dropped, the first `max_examples`
/// kept in the order of `pairs`. Emu-Parallel's adversarial sentences.
fn load_xsid_pairs(
    dir: &std::path::Path,
    name: &str,
    corpus: &Corpus,
    eval: &EvalSentences,
    counts: &mut CorpusCounts,
) -> Result<Loaded, TrainError> {
    use harness_data::loaders::xsid;
    let mut languages = Vec::new();
    for (i, pair) in corpus.pairs.iter().enumerate() {
        match pair.split_once('-') {
            Some((x, "en")) if x != "en" => languages.push(x.to_string()),
            _ => {
                return Err(TrainError::recipe(
                    format!("data.corpora.{name}.pairs.{i}"),
                    format!("`{pair}`: xSID's translations are of English"),
                    "spell each pair `X-en` with an xSID language X (`de-en`)",
                ))
            }
        }
    }
    let splits: Vec<String> = if corpus.splits.is_empty() {
        vec!["valid".into()]
    } else {
        corpus.splits.clone()
    };
    let mut out: Vec<(String, String, Vec<Bitext>)> = languages
        .iter()
        .map(|l| (l.clone(), "en".to_string(), Vec::new()))
        .collect();
    for s in &splits {
        let split = match s.as_str() {
            "valid" | "validation" | "dev" => xsid::Split::Valid,
            "test" => xsid::Split::Test,
            other => {
                return Err(TrainError::recipe(
                    format!("data.corpora.{name}.splits"),
                    format!("xSID has translations in `valid` and `test`, not `{other}`"),
                    "read `valid` (or `test`)",
                ))
            }
        };
        let langs: Vec<&str> = languages.iter().map(String::as_str).collect();
        let aligned = xsid::load_aligned(dir, split, &langs)?;
        for (lang, pairs) in languages.iter().zip(out.iter_mut()) {
            let table = &aligned.langs[lang];
            let mut before = 0;
            let mut kept = 0;
            for (english, translations) in aligned.pivot.iter().zip(table) {
                for t in translations {
                    before += 1;
                    if eval.contains(&t.text) || eval.contains(&english.text) {
                        continue;
                    }
                    kept += 1;
                    pairs.2.push(Bitext {
                        source: t.text.clone(),
                        target: english.text.clone(),
                    });
                }
            }
            counts
                .parts
                .insert(format!("{lang}-en/{s}"), (kept, before - kept));
        }
    }
    let mut left = corpus.max_examples.map_or(usize::MAX, |m| m as usize);
    for (_, _, pairs) in &mut out {
        pairs.truncate(left);
        left -= pairs.len();
    }
    counts.used = out.iter().map(|(_, _, p)| p.len()).sum();
    Ok(Loaded::Parallel(out))
}

fn is_parallel_dataset(d: &str) -> bool {
    matches!(d, "parallel-pairs" | "wmt-news-parallel")
}

/// Whether the shipped dataset `d` loads as texts the hard-negative miner reads
/// (`Loaded::Parallel` or `Loaded::Conversation`).
pub(crate) fn holds_texts(d: &str) -> bool {
    is_parallel_dataset(d) || d == "conversation-pairs"
}

fn split_of(name: &str) -> Option<Split> {
    match name {
        "train" => Some(Split::Train),
        "validation" | "valid" | "dev" => Some(Split::Dev),
        "test" => Some(Split::Test),
        _ => None,
    }
}

/// A corpus of the user's files: found (globs relative to `base`, the recipe's folder) and
/// stamped, with the evaluation sentences its `exclude:` list removes; not read yet.
fn files_corpus(
    name: &str,
    corpus: &Corpus,
    base: &std::path::Path,
    registry: &Registry,
    settings: &Settings,
    exclusions: &Exclusions,
) -> Result<crate::files_corpus::FilesCorpus, TrainError> {
    let paths = harness_data::user_corpus::resolve_files(corpus, base)
        .map_err(|e| TrainError::Data(e.into()))?;
    let files = paths
        .iter()
        .map(|p| crate::files_corpus::FileStamp::of(p))
        .collect::<Result<Vec<_>, _>>()?;
    Ok(crate::files_corpus::FilesCorpus {
        name: name.to_string(),
        spec: corpus.clone(),
        kind: harness_data::user_corpus::kind_of(corpus),
        files,
        eval: std::sync::Arc::new(excluded_sentences(corpus, registry, settings, exclusions)?),
        excluded: excluded_datasets(corpus, registry)?.into_iter().collect(),
        cache_dir: settings.cache_dir.clone(),
    })
}

/// Loads one corpus (filtered, capped) and its counts; a corpus of the user's files is
/// found (relative to `base`) and stamped, and read later, while binarizing.
pub fn load_corpus(
    name: &str,
    corpus: &Corpus,
    recipe: &Recipe,
    base: &std::path::Path,
    registry: &Registry,
    settings: &Settings,
    exclusions: &Exclusions,
) -> Result<(Loaded, CorpusCounts), TrainError> {
    let mut counts = CorpusCounts {
        corpus: name.to_string(),
        dataset: corpus.source_name(),
        parts: BTreeMap::new(),
        used: 0,
    };
    let Some(dataset) = corpus.dataset.as_deref() else {
        return Ok((
            Loaded::Files(Box::new(files_corpus(
                name, corpus, base, registry, settings, exclusions,
            )?)),
            counts,
        ));
    };
    check_declaration(name, corpus)?;
    if is_parallel_dataset(dataset) {
        let loaded = load_parallel(corpus, recipe, registry, settings, exclusions, &mut counts)?;
        return Ok((loaded, counts));
    }
    let dir = ensure_dataset(settings, dataset)?;
    let eval = excluded_sentences(corpus, registry, settings, exclusions)?;
    match dataset {
        "conversation-pairs" => {
            return Ok((load_conversation(&dir, corpus, &eval, &mut counts)?, counts))
        }
        "monolingual-sentences" => {
            return Ok((load_text(&dir, corpus, &eval, &mut counts)?, counts))
        }
        "xsid" if !corpus.pairs.is_empty() => {
            return Ok((
                load_xsid_pairs(&dir, name, corpus, &eval, &mut counts)?,
                counts,
            ))
        }
        "xsid" | "atis" | "snips" => {
            return Ok((
                load_labelled(&dir, name, corpus, &eval, &mut counts)?,
                counts,
            ))
        }
        _ => {}
    }
    let loaded = load_nli(&dir, name, dataset, corpus, &eval, &mut counts)?;
    Ok((loaded, counts))
}

/// A parallel dataset's language pairs, built as the recipe says (exclusions, caps).
fn load_parallel(
    corpus: &Corpus,
    recipe: &Recipe,
    registry: &Registry,
    settings: &Settings,
    exclusions: &Exclusions,
    counts: &mut CorpusCounts,
) -> Result<Loaded, TrainError> {
    let built = build_recipe_parallel(corpus, registry, settings, exclusions)?;
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
    Ok(Loaded::Parallel(c))
}

/// An NLI dataset's pairs (SNLI, SICK) of the corpus's splits, evaluation sentences left out.
fn load_nli(
    dir: &std::path::Path,
    name: &str,
    dataset: &str,
    corpus: &Corpus,
    eval: &EvalSentences,
    counts: &mut CorpusCounts,
) -> Result<Loaded, TrainError> {
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
        let pairs = match dataset {
            "snli" => harness_data::loaders::snli::load(dir, split)?,
            "sick" => harness_data::loaders::sick::entailment(dir, split)?,
            other => {
                return Err(TrainError::recipe(
                    format!("data.corpora.{name}.dataset"),
                    format!("`{other}` cannot be a training corpus in this build"),
                    format!("use one of {}", CORPUS_DATASETS.join(", ")),
                ))
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
    Ok(Loaded::Nli(all))
}

/// [`load_corpora_in`] with files relative to the current folder.
pub fn load_corpora(
    recipe: &Recipe,
    settings: &Settings,
) -> Result<(BTreeMap<String, Loaded>, Vec<CorpusCounts>), TrainError> {
    load_corpora_in(recipe, std::path::Path::new("."), settings)
}
/// Refuses the splits, languages and pairs a shipped corpus cannot read, before anything is
/// fetched or read (`harness_recipe::corpus_rules`: `validate` refuses the same).
fn check_declaration(name: &str, corpus: &Corpus) -> Result<(), TrainError> {
    let Some(r) = harness_recipe::corpus_rules::corpus_refusal(corpus) else {
        return Ok(());
    };
    let mut at: Vec<Seg> = ["data", "corpora", name]
        .iter()
        .map(|k| Seg::Key(k.to_string()))
        .collect();
    at.extend(r.at);
    Err(TrainError::recipe(path_string(&at), r.detail, r.fix))
}

/// Loads every corpus the recipe's tasks and tokenizer use (their datasets installed and
/// verified first, all of them, before any is read), with their counts; the paths of
/// corpora of the user's files are relative to `base` (the recipe's folder).
pub fn load_corpora_in(
    recipe: &Recipe,
    base: &std::path::Path,
    settings: &Settings,
) -> Result<(BTreeMap<String, Loaded>, Vec<CorpusCounts>), TrainError> {
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
    for name in &needed {
        if let Some(corpus) = recipe.data.corpora.get(*name) {
            check_declaration(name, corpus)?;
        }
    }
    ensure_all(settings, &corpus_datasets(used, &registry)?)?;
    let mut loaded = BTreeMap::new();
    let mut counts = Vec::new();
    let exclusions = Exclusions::new();
    for name in needed {
        let corpus = recipe.data.corpora.get(name).ok_or_else(|| {
            TrainError::recipe(
                format!("data.corpora.{name}"),
                "a task or the tokenizer names this corpus but it is not declared",
                "declare it under `data.corpora`",
            )
        })?;
        let (l, c) = load_corpus(name, corpus, recipe, base, &registry, settings, &exclusions)
            .map_err(|e| TrainError::Corpus {
                name: name.clone(),
                source: Box::new(e),
            })?;
        loaded.insert(name.clone(), l);
        counts.push(c);
    }
    Ok((loaded, counts))
}
