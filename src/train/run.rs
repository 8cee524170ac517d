//! The run directory and the `harness train` / `harness run` / `harness export` commands.
//!
//! `runs/<recipe>-<fingerprint8>/`: `recipe.resolved.yaml`, `env.json`, `corpora.json`
//! (pairs kept and removed by the contamination filter, per corpus and language pair),
//! `tokenizer.json`, `train/metrics.jsonl`, `checkpoints/`, `results/<bench>.json`.
//! Re-running the same resolved recipe resumes training from the newest checkpoint and
//! skips benchmarks whose result is already there (unless `--force`).

use crate::bench::cache::CachedEncoder;
use crate::bench::encoder::Encoder;
use crate::bench::registry::Registry;
use crate::bench::runner::{run_benchmark, BenchResult};
use crate::data::build::{build_recipe_parallel, excluded_datasets};
use crate::data::corpus::{dataset_sentences, EvalSentences};
use crate::data::fetch::ensure_dataset;
use crate::data::records::{Bitext, NliPair, Split};
use crate::data::tokenize::TextTokenizer;
use crate::model::system::{System, SystemConfig};
use crate::model::trained::TrainedEncoder;
use crate::recipe::schema::{Corpus, Decoder, Objective, Recipe, TokenizerKind};
use crate::recipe::{load, LoadOptions, Resolved};
use crate::settings::Settings;
use crate::train::batch::FirstToken;
use crate::train::data::{cap_pairs, nli_examples, pair_examples, Directions, Examples, TaskData};
use crate::train::mixture::Mixture;
use crate::train::trainer::{self, Options, Outcome, Plan, TaskPlan};
use crate::train::TrainError;
use anyhow::Context;
use burn::tensor::backend::AutodiffBackend;
use serde::Serialize;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

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

/// The run directory of a resolved recipe (one rule for every kind of run: [`crate::run::run_dir`]).
pub fn run_dir_for(settings: &Settings, resolved: &Resolved) -> PathBuf {
    crate::run::run_dir(settings, resolved)
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
fn load_corpus(
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
    let mut eval = EvalSentences::new();
    for d in excluded_datasets(corpus, registry)? {
        let ddir = ensure_dataset(settings, &d)?;
        eval.merge(dataset_sentences(&d, &ddir)?);
    }
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
            "snli" => crate::data::loaders::snli::load(&dir, split)?,
            "sick" => crate::data::loaders::sick::entailment(&dir, split)?,
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

/// Loads the corpora, learns (or reloads) the tokenizer and compiles the training plan,
/// writing `recipe.resolved.yaml`, `env.json`, `corpora.json` and `tokenizer.json`.
pub fn prepare(
    resolved: &Resolved,
    settings: &Settings,
    run_dir: &Path,
    device_name: &str,
    sets: &[String],
) -> anyhow::Result<(Plan, TextTokenizer, Vec<CorpusCounts>)> {
    let recipe = &resolved.recipe;
    std::fs::create_dir_all(run_dir).with_context(|| format!("creating {}", run_dir.display()))?;
    let write = |name: &str, text: &str| -> anyhow::Result<()> {
        let p = run_dir.join(name);
        crate::fsutil::write_atomic(&p, text.as_bytes())
            .with_context(|| format!("writing {}", p.display()))
    };
    refuse_other_recipe(run_dir, resolved)?;
    write("recipe.resolved.yaml", &resolved.to_yaml())?;
    let mut env = crate::run::RunEnv::capture(resolved, sets);
    match device_name {
        "cpu" => env.backend = "ndarray".into(),
        "flex" => env.backend = "flex".into(),
        _ => {
            env.backend = "cuda".into();
            env.device = device_name.into();
        }
    }
    write("env.json", &serde_json::to_string_pretty(&env)?)?;

    let registry = Registry::embedded()?;
    let mut loaded: BTreeMap<String, Loaded> = BTreeMap::new();
    let mut counts = Vec::new();
    let needed: std::collections::BTreeSet<&String> = recipe
        .tasks
        .iter()
        .map(|t| &t.corpus)
        .chain(recipe.data.tokenizer.iter().flat_map(|t| t.train_on.iter()))
        .collect();
    // One list of every dataset the corpora read, installed and verified before any is.
    let used: Vec<&Corpus> = needed
        .iter()
        .filter_map(|n| recipe.data.corpora.get(*n))
        .collect();
    crate::data::build::ensure_all(
        settings,
        &crate::data::build::corpus_datasets(used, &registry)?,
    )?;
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
    write("corpora.json", &serde_json::to_string_pretty(&counts)?)?;

    let tokenizer = tokenizer_for(recipe, &loaded, &run_dir.join("tokenizer.json"))?;
    let plan = compile_plan(recipe, &tokenizer, &loaded)?;
    Ok((plan, tokenizer, counts))
}

/// Refuses a run directory that already holds checkpoints of another resolved recipe
/// (`env.json`'s `recipe_fingerprint`): resuming them would train one recipe's weights under
/// another's settings, and overwriting them would lose a run.
fn refuse_other_recipe(run_dir: &Path, resolved: &Resolved) -> anyhow::Result<()> {
    let env_path = run_dir.join("env.json");
    let Ok(text) = std::fs::read_to_string(&env_path) else {
        return Ok(());
    };
    let previous = serde_json::from_str::<serde_json::Value>(&text)
        .ok()
        .and_then(|v| v["recipe_fingerprint"].as_str().map(str::to_string));
    let has_checkpoints = std::fs::read_dir(run_dir.join("checkpoints"))
        .map(|mut d| d.next().is_some())
        .unwrap_or(false);
    match previous {
        Some(fp) if fp != resolved.fingerprint.0 && has_checkpoints => anyhow::bail!(
            "{}: this run directory holds checkpoints of another recipe (fingerprint {}), not of this one ({}). Fix: train into another directory (`--out`, or leave it out for `runs/<recipe>-<fingerprint8>`), or delete {} to start over",
            env_path.display(),
            &fp[..fp.len().min(16)],
            resolved.fingerprint.short(),
            run_dir.display()
        ),
        _ => Ok(()),
    }
}

/// Loads `path` if it exists, else learns the recipe's vocabulary on its `train_on`
/// corpora (every language of a parallel corpus, and every decoder target, gets a
/// language token) and saves it there.
pub fn tokenizer_for(
    recipe: &Recipe,
    loaded: &BTreeMap<String, Loaded>,
    tok_path: &Path,
) -> Result<TextTokenizer, TrainError> {
    // Tokenizer: languages of every parallel corpus get a language token.
    let mut languages: Vec<String> = Vec::new();
    for l in loaded.values() {
        if let Loaded::Parallel(c) = l {
            for (s, t, _) in c {
                languages.push(s.clone());
                languages.push(t.clone());
            }
        }
    }
    if let Some(Decoder::Lstm(d)) = recipe.model.as_ref().and_then(|m| m.decoder.as_ref()) {
        languages.extend(d.targets.iter().cloned());
    }
    if languages.is_empty() {
        languages.push("eng".into());
    }
    let tokenizer = if tok_path.is_file() {
        TextTokenizer::load(tok_path)?
    } else {
        let spec = recipe.data.tokenizer.clone().ok_or_else(|| {
            TrainError::recipe(
                "data.tokenizer",
                "missing",
                "add `data.tokenizer: {kind: bpe, vocab: 8000}`",
            )
        })?;
        if !matches!(spec.kind, TokenizerKind::Bpe | TokenizerKind::Sentencepiece) {
            return Err(TrainError::recipe(
                "data.tokenizer.kind",
                "only learned subword vocabularies can be trained here",
                "use `bpe` or `sentencepiece`",
            ));
        }
        let train_on: Vec<&String> = if spec.train_on.is_empty() {
            loaded.keys().collect()
        } else {
            spec.train_on.iter().collect()
        };
        let mut sentences: Vec<&str> = Vec::new();
        for n in train_on {
            match loaded.get(n) {
                Some(Loaded::Parallel(c)) => {
                    for (_, _, pairs) in c {
                        for p in pairs {
                            sentences.push(&p.source);
                            sentences.push(&p.target);
                        }
                    }
                }
                Some(Loaded::Nli(v)) => {
                    for p in v {
                        sentences.push(&p.premise);
                        sentences.push(&p.hypothesis);
                    }
                }
                None => {}
            }
        }
        let t = TextTokenizer::train(&spec, &languages, sentences.into_iter())?;
        t.save(tok_path)?;
        t
    };

    Ok(tokenizer)
}

/// Compiles the training plan: the model configuration, each task's tokenised and
/// bucketed examples, the joint losses, the mixture and the number of steps.
pub fn compile_plan(
    recipe: &Recipe,
    tokenizer: &TextTokenizer,
    loaded: &BTreeMap<String, Loaded>,
) -> Result<Plan, TrainError> {
    let system =
        SystemConfig::from_recipe(recipe, tokenizer.vocab_size(), tokenizer.languages().len())?;
    let train_spec = recipe
        .train
        .clone()
        .ok_or_else(|| TrainError::recipe("train", "missing", "add a `train:` block"))?;
    let max_len = train_spec.max_len as usize;
    let (targets, first_token) = match recipe.model.as_ref().and_then(|m| m.decoder.as_ref()) {
        Some(Decoder::Lstm(d)) => {
            let first = if d.lang_embed == 0 {
                FirstToken::Language(
                    tokenizer
                        .languages()
                        .iter()
                        .map(|l| {
                            tokenizer
                                .lang_token_id(l)
                                .unwrap_or(crate::data::tokenize::ids::BOS)
                        })
                        .collect(),
                )
            } else {
                FirstToken::Bos
            };
            (d.targets.clone(), first)
        }
        None => (Vec::new(), FirstToken::Bos),
    };
    let mut tasks = Vec::new();
    for (ti, task) in recipe.tasks.iter().enumerate() {
        let joint = matches!(&task.objective, Objective::L2Similarity(p) if p.joint_with.is_some());
        let data = if joint {
            None
        } else {
            let examples = match (loaded.get(&task.corpus), &task.objective) {
                (Some(Loaded::Parallel(c)), o) => {
                    let (dirs, autoencode) = match o {
                        Objective::Seq2seqCe(p) if p.both_directions => (Directions::Both, 0.0),
                        Objective::Seq2seqCe(p) => (Directions::OneInto, p.autoencode),
                        _ => (Directions::Both, 0.0),
                    };
                    let (ex, skipped) = pair_examples(
                        tokenizer,
                        c,
                        &targets,
                        dirs,
                        autoencode,
                        max_len,
                        recipe.seed + ti as u64,
                    )?;
                    if ex.is_empty() && skipped > 0 {
                        return Err(TrainError::recipe(
                            format!("tasks.{}", task.name),
                            format!("no training pair can be decoded into a target language ({skipped} skipped)"),
                            "list a language of the corpus's pairs in `model.decoder.targets`",
                        ));
                    }
                    Examples::Pairs(ex)
                }
                (Some(Loaded::Nli(v)), _) => Examples::Nli(nli_examples(tokenizer, v, max_len)?),
                (None, _) => {
                    return Err(TrainError::recipe(
                        format!("tasks.{}.corpus", task.name),
                        format!("corpus `{}` was not loaded", task.corpus),
                        "declare it under `data.corpora`",
                    ))
                }
            };
            // An empty task would have no batch to draw (the contamination filter can
            // remove a whole corpus: SICK train against SICK-R).
            if examples.is_empty() {
                return Err(TrainError::recipe(
                    format!("tasks.{}.corpus", task.name),
                    format!(
                        "corpus `{}` has no example left to train on (see the counts of the contamination filter above)",
                        task.corpus
                    ),
                    "use other splits, pairs or datasets, or drop the task",
                ));
            }
            Some(TaskData::new(
                examples,
                train_spec.batch_tokens.map(|x| x as usize),
                task.batch_size
                    .or(train_spec.batch_size)
                    .map(|x| x as usize),
                recipe.seed.wrapping_mul(31).wrapping_add(ti as u64),
            ))
        };
        tasks.push(TaskPlan {
            name: task.name.clone(),
            objective: task.objective.clone(),
            data,
            weight: task.weight,
            joint_l2: Vec::new(),
        });
    }
    // Joint similarity losses join their partner task.
    for task in &recipe.tasks {
        if let Objective::L2Similarity(p) = &task.objective {
            if let Some(partner) = &p.joint_with {
                let t = tasks
                    .iter_mut()
                    .find(|t| &t.name == partner)
                    .ok_or_else(|| {
                        TrainError::recipe(
                            format!("tasks.{}.params.joint_with", task.name),
                            format!("no task named `{partner}`"),
                            "name a translation task of this recipe",
                        )
                    })?;
                t.joint_l2.push(task.weight * p.alpha);
            }
        }
    }
    let weights: Vec<Option<f64>> = tasks
        .iter()
        .map(|t| t.data.as_ref().map(|_| t.weight))
        .collect();
    let mixture = Mixture::new(&weights, recipe.seed).ok_or_else(|| {
        TrainError::recipe(
            "tasks",
            "no task has batches and a positive weight",
            "add a translation task",
        )
    })?;
    let steps_per_epoch: u64 = tasks
        .iter()
        .filter_map(|t| t.data.as_ref())
        .map(|d| d.batches.len() as u64)
        .sum();
    let total_steps = match (train_spec.steps, train_spec.epochs) {
        (Some(s), _) => s,
        (None, Some(e)) => e as u64 * steps_per_epoch,
        (None, None) => steps_per_epoch,
    };
    Ok(Plan {
        recipe: recipe.clone(),
        system,
        tasks,
        mixture,
        first_token,
        total_steps,
        steps_per_epoch,
    })
}

/// Splits `bench.metric` into the benchmark and an optional sub-score path.
fn split_metric(m: &str) -> (&str, Option<&str>) {
    match m.split_once('.') {
        Some((b, s)) => (b, Some(s)),
        None => (m, None),
    }
}

/// Whether a metric is better when lower (error rates, losses, Ψ).
pub fn lower_is_better(metric: &str) -> bool {
    let m = metric.to_ascii_lowercase();
    m.contains("error") || m.contains("loss") || m.contains("psi")
}

/// The value of `metric` in a result (`main_score`, or a sub-score by dotted path).
fn metric_value(r: &BenchResult, sub: Option<&str>) -> Option<(String, f64)> {
    match sub {
        None => Some((r.main_metric.clone()?, r.main_score?)),
        Some(path) => {
            let mut v = &r.scores;
            for seg in path.split('.') {
                v = v.get(seg)?;
            }
            Some((path.to_string(), v.as_f64()?))
        }
    }
}

/// Trains a prepared plan on backend `B`.
pub fn train_on<B: AutodiffBackend>(
    plan: &Plan,
    tokenizer: &TextTokenizer,
    run_dir: &Path,
    settings: &Settings,
    device: &B::Device,
    stop_after: Option<u64>,
) -> anyhow::Result<Outcome>
where
    burn::tensor::Device<B::InnerBackend>: Sync,
    crate::model::encoder::bilstm::BilstmEncoder<B::InnerBackend>: Sync,
{
    let best_metric = plan
        .recipe
        .train
        .as_ref()
        .and_then(|t| t.best_metric.clone());
    let registry = Registry::embedded()?;
    let mut eval_fn = |model: &System<B::InnerBackend>,
                       step: u64|
     -> Result<Option<(String, f64, bool)>, TrainError> {
        let Some(metric) = &best_metric else {
            return Ok(None);
        };
        let (bench, sub) = split_metric(metric);
        let enc = TrainedEncoder::new(
            format!("{}@{step}", plan.recipe.name),
            &format!("{}:{step}", run_dir.display()),
            model.encoder.clone(),
            plan.system.encoder.d_sentence(),
            tokenizer.clone(),
            model.encoder.embedding.weight.device(),
        );
        let cache_dir = run_dir.join(".eval-cache");
        let boxed: Box<dyn Encoder> = Box::new(enc);
        let cached = CachedEncoder::new(boxed, &cache_dir);
        let overrides = crate::run::evaluate_entries(&plan.recipe)
            .into_iter()
            .find(|(n, _)| n == bench)
            .map(|(_, o)| o)
            .unwrap_or_default();
        let r = run_benchmark(
            bench,
            &overrides,
            &registry,
            &cached,
            settings,
            plan.recipe.seed,
        );
        let _ = std::fs::remove_dir_all(&cache_dir);
        if let Some(e) = r.error {
            eprintln!("evaluation at step {step} failed: {e}");
            return Ok(None);
        }
        Ok(metric_value(&r, sub).map(|(n, v)| {
            let lower = lower_is_better(&n);
            (format!("{bench}.{n}"), v, lower)
        }))
    };
    trainer::install_interrupt_handler();
    let opts = Options {
        run_dir: run_dir.to_path_buf(),
        stop_after,
        progress: true,
        keep: 2,
        evaluate: Some(&mut eval_fn),
    };
    Ok(trainer::train::<B>(plan, device, opts)?)
}

/// Options of `harness train` and `harness run`.
#[derive(Debug, Clone)]
pub struct TrainArgs {
    pub recipe: PathBuf,
    pub profile: Option<String>,
    pub sets: Vec<String>,
    pub out: Option<PathBuf>,
    pub device: String,
    pub stop_after: Option<u64>,
}

/// What `harness train` did.
pub struct Trained {
    pub run_dir: PathBuf,
    pub outcome: Outcome,
    pub plan_steps: u64,
    /// Exclusive use of the run directory, held until this value is dropped (so `harness
    /// run` keeps it through the evaluation that follows training).
    pub lock: crate::run::RunLock,
}

/// Resolves, prepares and trains a recipe on the device `args.device` names.
pub fn train_recipe(args: &TrainArgs, settings: &Settings) -> anyhow::Result<(Resolved, Trained)> {
    // Every device problem is refused here, before any corpus or tokenizer work.
    let cuda_index = check_device(&args.device)?;
    let resolved = load(
        &args.recipe,
        &LoadOptions {
            profile: args.profile.clone(),
            sets: args.sets.clone(),
        },
    )
    .with_context(|| {
        format!(
            "{} is not a valid recipe (run `harness validate` on it)",
            args.recipe.display()
        )
    })?;
    let run_dir = args
        .out
        .clone()
        .unwrap_or_else(|| run_dir_for(settings, &resolved));
    eprintln!("run directory: {}", run_dir.display());
    crate::run::claim_run_dir(&run_dir)?;
    std::fs::create_dir_all(&run_dir)
        .with_context(|| format!("creating the run directory {}", run_dir.display()))?;
    let lock = crate::run::RunLock::acquire(&run_dir)?;
    let (plan, tokenizer, counts) =
        prepare(&resolved, settings, &run_dir, &args.device, &args.sets)?;
    for c in &counts {
        let removed: usize = c.parts.values().map(|p| p.1).sum();
        eprintln!(
            "corpus `{}` ({}): {} examples used, {removed} removed by the contamination filter",
            c.corpus, c.dataset, c.used
        );
    }
    eprintln!(
        "tokenizer: {} tokens, {} languages; model: {} steps ({} per epoch)",
        tokenizer.vocab_size(),
        tokenizer.languages().len(),
        plan.total_steps,
        plan.steps_per_epoch
    );
    // One call for every backend: only the backend type and its device differ.
    macro_rules! train_with {
        ($backend:ty, $device:expr) => {
            train_on::<burn::backend::Autodiff<$backend>>(
                &plan,
                &tokenizer,
                &run_dir,
                settings,
                $device,
                args.stop_after,
            )?
        };
    }
    let outcome = match (args.device.as_str(), cuda_index) {
        #[cfg(feature = "cuda")]
        (_, Some(index)) => train_with!(
            burn::backend::Cuda<f32, i32>,
            &burn::backend::cuda::CudaDevice::new(index)
        ),
        // burn-flex, burn's newer CPU backend.
        #[cfg(feature = "flex")]
        ("flex", _) => train_with!(burn::backend::Flex, &Default::default()),
        // `check_device` let only `cpu` through to here.
        _ => train_with!(burn::backend::NdArray<f32>, &Default::default()),
    };
    Ok((
        resolved,
        Trained {
            run_dir,
            plan_steps: plan.total_steps,
            outcome,
            lock,
        },
    ))
}

/// Checks `--device` against this build: `cpu`, `flex` (built with `--features flex`) or
/// `cuda:N` / `cuda` (built with `--features cuda`); the CUDA device index for the latter.
fn check_device(device: &str) -> anyhow::Result<Option<usize>> {
    match device {
        "cpu" => Ok(None),
        "flex" if cfg!(feature = "flex") => Ok(None),
        "flex" => anyhow::bail!("--device flex: this binary was built without burn-flex. Fix: build with `cargo build --release --features flex`"),
        d if d == "cuda" || d.starts_with("cuda:") => {
            if !cfg!(feature = "cuda") {
                anyhow::bail!("--device {d}: this binary was built without CUDA. Fix: build with `cargo build --release --features cuda`");
            }
            let index = d.strip_prefix("cuda:").unwrap_or("0");
            let index = index
                .parse()
                .with_context(|| format!("--device {d}: `{index}` is not a device number. Fix: use `cuda:0`, `cuda:1`, …"))?;
            Ok(Some(index))
        }
        other => anyhow::bail!(
            "--device {other}: unknown device. Fix: use `cpu`, `flex` (a build made with `--features flex`) or `cuda:N` (with `--features cuda`)"
        ),
    }
}

/// Prints what a training session did (steps, tokens/s, last loss, checkpoint).
pub fn print_outcome(t: &Trained) {
    let o = &t.outcome;
    if t.plan_steps == 0 {
        // `train.steps: 0` is the untrained baseline: there is no loss or rate to report.
        println!(
            "no training steps (train.steps: 0): the encoder keeps its seeded initial weights"
        );
    } else {
        // A session that resumes a finished run trains no step and has no last loss.
        let last_loss = if o.last_loss.is_finite() {
            format!("; last loss {:.4}", o.last_loss)
        } else {
            String::new()
        };
        println!(
            "trained {}/{} steps{}: {} tokens in {:.1} s of training ({:.0} tokens/s){last_loss}",
            o.steps,
            t.plan_steps,
            if o.interrupted { " (interrupted)" } else { "" },
            o.session_tokens,
            o.session_seconds,
            o.tokens_per_second(),
        );
    }
    if let Some(c) = &o.checkpoint {
        println!("checkpoint: {}", c.display());
    }
}

/// `harness train`.
pub fn train_command(
    args: &TrainArgs,
    settings: &Settings,
) -> anyhow::Result<std::process::ExitCode> {
    let (_, t) = train_recipe(args, settings)?;
    print_outcome(&t);
    Ok(if t.outcome.interrupted {
        std::process::ExitCode::from(130)
    } else {
        std::process::ExitCode::SUCCESS
    })
}
