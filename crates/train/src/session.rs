//! A training session in a run directory: prepare (corpora, tokenizer, plan), then train on
//! the chosen backend, resuming from the newest checkpoint, with the recipe's best-checkpoint
//! metric measured through the benchmark runner.

use crate::corpora::{load_corpora_in, CorpusCounts};
use crate::plan::compile_plan_from;
use crate::plan::Plan;
use crate::tokenizer::tokenizer_for;
use crate::trainer::{self, Evaluation, Options, Outcome};
use crate::TrainError;
use burn::tensor::backend::AutodiffBackend;
use harness_bench::registry::Registry;
use harness_bench::runner::{run_benchmark, BenchResult};
use harness_core::device::Device;
use harness_core::settings::Settings;
use harness_data::tokenize::TextTokenizer;
use harness_embed::cache::CachedEncoder;
use harness_embed::Encoder;
use harness_model::pretrained::PretrainedStart;
use harness_model::system::{BaseEncoder, System, BASE_ENCODER_FILE};
use harness_model::trained::TrainedEncoder;
use harness_recipe::Resolved;
use std::collections::BTreeMap;
use std::path::Path;

/// Loads the corpora, learns (or reloads) the tokenizer and compiles the training plan,
/// writing `corpora.json` and `tokenizer.json` into the run directory.
pub fn prepare(
    resolved: &Resolved,
    settings: &Settings,
    run_dir: &Path,
) -> Result<(Plan, TextTokenizer, Vec<CorpusCounts>), TrainError> {
    let recipe = &resolved.recipe;
    let base = harness_core::fsutil::parent_dir(&resolved.path);
    let (loaded, mut counts) = load_corpora_in(recipe, base, settings)?;
    write_corpora(&loaded, &run_dir.join("corpora"))?;
    let tok_path = run_dir.join("tokenizer.json");
    let start = pretrained_start(recipe, settings)?;
    let tokenizer = match &start {
        Some(PretrainedStart::Bert(start)) => {
            crate::tokenizer::pretrained_tokenizer(start, &tok_path)?
        }
        Some(PretrainedStart::Run(start)) => {
            record_base(start, run_dir)?;
            harness_core::note!(
                "encoder: starts from the trained run `{}` (its `{}` encoder and tokenizer)",
                start.record.run,
                start.record.encoder.kind()
            );
            crate::tokenizer::base_run_tokenizer(start, &tok_path)?
        }
        None => tokenizer_for(recipe, &loaded, &tok_path)?,
    };
    let mut plan = compile_plan_from(recipe, &tokenizer, &loaded, crate::objectives::ALL, start)?;
    // Corpora of files are counted while binarizing.
    for c in &plan.corpus_counts {
        if let Some(old) = counts.iter_mut().find(|o| o.corpus == c.corpus) {
            *old = c.clone();
        }
    }
    let p = run_dir.join("corpora.json");
    let text = serde_json::to_string_pretty(&counts).map_err(|e| TrainError::Export {
        path: p.clone(),
        detail: e.to_string(),
    })?;
    harness_core::nofollow::write_atomic(&p, text.as_bytes()).map_err(|e| TrainError::io(&p, e))?;
    write_provenance(&loaded, &plan, run_dir)?;
    if !plan.head_classes.is_empty() {
        let p = run_dir.join(harness_model::system::HEAD_CLASSES_FILE);
        let text =
            serde_json::to_string_pretty(&plan.head_classes).map_err(|e| TrainError::Export {
                path: p.clone(),
                detail: e.to_string(),
            })?;
        harness_core::nofollow::write_atomic(&p, text.as_bytes())
            .map_err(|e| TrainError::io(&p, e))?;
    }
    let open = |spec: &str| {
        harness_encoders::open_encoder(spec, settings).map_err(|e| {
            TrainError::recipe(
                "tasks",
                format!("the hard-negative miner `{spec}` cannot be opened ({e})"),
                "name `hashed-ngrams`, a pretrained model or a trained run directory in `mine_with`",
            )
        })
    };
    for m in crate::hard_negatives::mine(&mut plan, &loaded, run_dir, settings, &open)? {
        harness_core::note!(
            "hard negatives of task `{}`: {} per example for {} examples{}",
            m.task,
            m.k,
            m.examples,
            if m.from_cache {
                " (from the run's cache)"
            } else {
                ""
            }
        );
    }
    Ok((plan, tokenizer, counts))
}

/// Writes the run's `base-encoder.json`; a run that has one must have started from the
/// same base (same architecture, weights and tokenizer), else its checkpoints are another
/// model's.
fn record_base(
    start: &harness_model::pretrained::RunStart,
    run_dir: &Path,
) -> Result<(), TrainError> {
    let path = run_dir.join(BASE_ENCODER_FILE);
    if let Some(old) = BaseEncoder::read(&path)? {
        let same = old.encoder == start.record.encoder
            && old.weights_sha256 == start.record.weights_sha256
            && old.tokenizer_sha256 == start.record.tokenizer_sha256;
        if !same {
            return Err(TrainError::OtherRun {
                path,
                detail: format!(
                    "this run started from another model than `{}` as it is now (its weights, tokenizer or architecture differ)",
                    start.record.run
                ),
                fix: "train in a new run directory".into(),
            });
        }
        return Ok(());
    }
    let text = serde_json::to_string_pretty(&start.record).map_err(|e| TrainError::Export {
        path: path.clone(),
        detail: e.to_string(),
    })?;
    harness_core::nofollow::write_atomic(&path, text.as_bytes())
        .map_err(|e| TrainError::io(&path, e))
}

/// The pretrained model the recipe's encoder starts from, opened (installed on first use),
/// when it is one.
fn pretrained_start(
    recipe: &harness_recipe::Recipe,
    settings: &Settings,
) -> Result<Option<harness_model::pretrained::PretrainedStart>, TrainError> {
    use harness_recipe::schema::Encoder;
    let Some(model) = &recipe.model else {
        return Ok(None);
    };
    let mut names = std::iter::once(&model.encoder)
        .chain(model.encoders.values())
        .filter_map(|e| match e {
            Encoder::Pretrained(p) => Some(p.name.clone()),
            _ => None,
        })
        .collect::<Vec<_>>();
    names.dedup();
    match names.as_slice() {
        [] => Ok(None),
        [name] => Ok(Some(harness_model::pretrained::open(name, settings)?)),
        _ => Err(TrainError::recipe(
            "model.encoders",
            format!(
                "encoders start from several pretrained models ({})",
                names.join(", ")
            ),
            "start every pretrained encoder of a run from the same model (one tokenizer)",
        )),
    }
}

/// Writes every loaded corpus as the trainer sees it (after the contamination filter and the
/// cap) to `dir/<name>.jsonl`: one example per line, `{"src_lang", "tgt_lang", "source",
/// "target"}` for parallel corpora and `{"premise", "hypothesis", "label"}` for NLI. For
/// provenance, and for trainers outside harness (`scripts/bench_torch_laser.py`) to read the
/// same data. A file already there is kept (the content follows from the recipe).
fn write_corpora(
    loaded: &std::collections::BTreeMap<String, crate::corpora::Loaded>,
    dir: &Path,
) -> Result<(), TrainError> {
    use crate::corpora::Loaded;
    use std::fmt::Write as _;
    for (name, corpus) in loaded {
        let path = dir.join(format!("{name}.jsonl"));
        if path.is_file() {
            continue;
        }
        let mut text = String::new();
        match corpus {
            Loaded::Parallel(parts) => {
                for (src, tgt, pairs) in parts {
                    for p in pairs {
                        let line = serde_json::json!({
                            "src_lang": src, "tgt_lang": tgt,
                            "source": p.source, "target": p.target,
                        });
                        let _ = writeln!(text, "{line}");
                    }
                }
            }
            Loaded::Nli(pairs) => {
                for p in pairs {
                    let line = serde_json::json!({
                        "premise": p.premise, "hypothesis": p.hypothesis,
                        "label": p.label.index(),
                    });
                    let _ = writeln!(text, "{line}");
                }
            }
            Loaded::Conversation(pairs) => {
                for p in pairs {
                    let line = serde_json::json!({"message": p.source, "response": p.target});
                    let _ = writeln!(text, "{line}");
                }
            }
            Loaded::Text(docs) => {
                for (d, doc) in docs.iter().enumerate() {
                    for s in doc {
                        let line = serde_json::json!({"document": d, "sentence": s});
                        let _ = writeln!(text, "{line}");
                    }
                }
            }
            // Written nowhere: the user's files are the corpus (their stamps are in
            // `corpora-files.json`).
            Loaded::Files(_) => continue,
            Loaded::Labelled { items, classes } => {
                for (s, c) in items {
                    let line = serde_json::json!({"sentence": s, "label": classes[*c as usize]});
                    let _ = writeln!(text, "{line}");
                }
            }
        }
        harness_core::nofollow::write_atomic(&path, text.as_bytes())
            .map_err(|e| TrainError::io(&path, e))?;
    }
    Ok(())
}

/// Writes `corpora-files.json`: for each corpus of the user's files, its files (path, size,
/// modification time, the sha256 of their ends), their line counts and its shard set — the
/// provenance `env.json` records for shipped datasets through their lock.
fn write_provenance(
    loaded: &std::collections::BTreeMap<String, crate::corpora::Loaded>,
    plan: &Plan,
    run_dir: &Path,
) -> Result<(), TrainError> {
    use crate::corpora::Loaded;
    let mut out = serde_json::Map::new();
    for (name, l) in loaded {
        let Loaded::Files(f) = l else { continue };
        let shards: Vec<serde_json::Value> = plan
            .tasks
            .iter()
            .filter(|t| {
                plan.recipe
                    .tasks
                    .iter()
                    .any(|r| r.name == t.name && &r.corpus == name)
            })
            .filter_map(|t| t.data.as_ref()?.shards.as_ref())
            .map(|s| {
                serde_json::json!({
                    "examples": s.manifest().examples,
                    "shards": s.manifest().shards.len(),
                    "lines": s.manifest().extra.get("lines"),
                    "bad_lines_skipped": s.manifest().extra.get("bad_lines_skipped"),
                })
            })
            .collect();
        out.insert(
            name.clone(),
            serde_json::json!({"format": f.spec.format, "files": f.files, "shard_sets": shards}),
        );
    }
    if out.is_empty() {
        return Ok(());
    }
    // One line per corpus in env.json, which reports show in their provenance block.
    let env_path = run_dir.join("env.json");
    if let Ok(text) = std::fs::read_to_string(&env_path) {
        if let Ok(serde_json::Value::Object(mut env)) = serde_json::from_str(&text) {
            for (name, l) in loaded {
                let Loaded::Files(f) = l else { continue };
                let bytes: u64 = f.files.iter().map(|x| x.bytes).sum();
                let lines: Option<u64> = plan
                    .tasks
                    .iter()
                    .filter_map(|t| t.data.as_ref()?.shards.as_ref())
                    .filter(|s| s.manifest().extra["counts"]["corpus"] == name.as_str())
                    .find_map(|s| {
                        let files = s.manifest().extra.get("lines")?.as_array()?.clone();
                        Some(files.iter().filter_map(|x| x["lines"].as_u64()).sum())
                    });
                use sha2::Digest;
                let stamp = serde_json::to_string(&f.files).unwrap_or_default();
                let fingerprint = hex::encode(sha2::Sha256::digest(stamp.as_bytes()));
                env.insert(
                    format!("corpus {name}"),
                    serde_json::Value::String(format!(
                        "{} files, {bytes} bytes, {} lines, fingerprint {}",
                        f.files.len(),
                        lines.map_or("?".to_string(), |l| l.to_string()),
                        &fingerprint[..16]
                    )),
                );
            }
            let text = serde_json::to_string_pretty(&env).unwrap_or(text);
            harness_core::nofollow::write_atomic(&env_path, text.as_bytes())
                .map_err(|e| TrainError::io(&env_path, e))?;
        }
    }
    let p = run_dir.join("corpora-files.json");
    let text = serde_json::to_string_pretty(&out).map_err(|e| TrainError::Export {
        path: p.clone(),
        detail: e.to_string(),
    })?;
    harness_core::nofollow::write_atomic(&p, text.as_bytes()).map_err(|e| TrainError::io(&p, e))
}

/// Refuses a run directory that already holds checkpoints of another resolved recipe
/// (`env.json`'s `recipe_fingerprint`): resuming them would train one recipe's weights under
/// another's settings, and overwriting them would lose a run.
pub fn refuse_other_recipe(run_dir: &Path, resolved: &Resolved) -> Result<(), TrainError> {
    let env_path = run_dir.join("env.json");
    let previous = harness_core::rundir::RunEnv::read(run_dir)?.map(|e| e.recipe_fingerprint);
    let has_checkpoints = std::fs::read_dir(run_dir.join("checkpoints"))
        .map(|mut d| d.next().is_some())
        .unwrap_or(false);
    match previous {
        Some(fp) if fp != resolved.fingerprint.0 && has_checkpoints => Err(TrainError::OtherRun {
            path: env_path,
            detail: format!(
                "this run directory holds checkpoints of another recipe (fingerprint {}), not of this one ({})",
                &fp[..fp.len().min(16)],
                resolved.fingerprint.short(),
            ),
            fix: format!(
                "train into another directory (`--out`, or leave it out for `runs/<recipe>-<fingerprint8>`), or delete {} to start over",
                run_dir.display()
            ),
        }),
        _ => Ok(()),
    }
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
    harness_bench::metrics::lower_is_better(metric)
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

/// The numbers under a result's `scores.<path>` by key (a score per language).
fn language_values(r: &BenchResult, path: &str) -> BTreeMap<String, f64> {
    let mut v = &r.scores;
    for seg in path.split('.') {
        match v.get(seg) {
            Some(x) => v = x,
            None => return BTreeMap::new(),
        }
    }
    v.as_object()
        .map(|o| {
            o.iter()
                .filter_map(|(k, x)| Some((k.clone(), x.as_f64()?)))
                .collect()
        })
        .unwrap_or_default()
}

/// Appends an in-training evaluation's scores to `train/evals.jsonl` (one line per
/// evaluation: `step`, `benchmark`, `main_score`, `scores`; e.g. XNLI's per-language
/// validation accuracies and alignment distances along training, the XNLI paper's Figure
/// 2), dropping lines of this step or later that a resumed run measures again.
fn record_evaluation(path: &Path, step: u64, r: &BenchResult) -> Result<(), TrainError> {
    let kept: String = std::fs::read_to_string(path)
        .unwrap_or_default()
        .lines()
        .filter(|l| {
            serde_json::from_str::<serde_json::Value>(l)
                .ok()
                .and_then(|v| v.get("step").and_then(|s| s.as_u64()))
                .is_some_and(|s| s < step)
        })
        .map(|l| format!("{l}\n"))
        .collect();
    let line = serde_json::json!({
        "step": step,
        "benchmark": r.benchmark,
        "main_score": r.main_score,
        "scores": r.scores,
    });
    let text = format!("{kept}{line}\n");
    harness_core::nofollow::write_atomic(path, text.as_bytes()).map_err(|e| TrainError::io(path, e))
}

/// Trains a prepared plan on backend `B`.
pub fn train_on<B: AutodiffBackend>(
    plan: &Plan,
    tokenizer: &TextTokenizer,
    run_dir: &Path,
    settings: &Settings,
    device: &B::Device,
    stop_after: Option<u64>,
) -> Result<Outcome, TrainError>
where
    burn::tensor::Device<B::InnerBackend>: Sync,
    harness_model::encoder::SentenceEncoder<B::InnerBackend>: Sync,
{
    let train_spec = plan.recipe.train.as_ref();
    let best_metric = train_spec.and_then(|t| t.best_metric.clone());
    let per_language = train_spec.and_then(|t| t.best_per_language.clone());
    // The benchmarks the two metrics name, each run once per evaluation.
    let mut benches: Vec<&str> = Vec::new();
    for m in best_metric.iter().chain(&per_language) {
        let (bench, _) = split_metric(m);
        if !benches.contains(&bench) {
            benches.push(bench);
        }
    }
    let registry = Registry::load()?;
    let mut eval_fn =
        |model: &System<B::InnerBackend>, step: u64| -> Result<Option<Evaluation>, TrainError> {
            if benches.is_empty() {
                return Ok(None);
            }
            let enc = TrainedEncoder::of_system(
                &format!("{}@{step}", plan.recipe.name),
                |i, _| format!("{}:{step}:{i}", run_dir.display()),
                model.clone(),
                &plan.system,
                tokenizer.clone(),
                &model.encoder().device(),
            );
            let cache_dir = run_dir.join(".eval-cache");
            let boxed: Box<dyn Encoder> = Box::new(enc);
            let cached = CachedEncoder::new(boxed, &cache_dir);
            let mut evaluation = Evaluation::default();
            for bench in &benches {
                let overrides = harness_bench::runner::entries(&plan.recipe)
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
                if let Some(e) = r.error {
                    harness_core::note!("evaluation at step {step} failed: {e}");
                    continue;
                }
                record_evaluation(&run_dir.join("train").join("evals.jsonl"), step, &r)?;
                if let Some(metric) = best_metric
                    .as_deref()
                    .filter(|m| split_metric(m).0 == *bench)
                {
                    evaluation.best = metric_value(&r, split_metric(metric).1).map(|(n, v)| {
                        let lower = lower_is_better(&n);
                        (format!("{bench}.{n}"), v, lower)
                    });
                }
                if let Some(metric) = per_language
                    .as_deref()
                    .filter(|m| split_metric(m).0 == *bench)
                {
                    let path = split_metric(metric).1.unwrap_or_default();
                    evaluation.per_language = Some((
                        metric.to_string(),
                        lower_is_better(path),
                        language_values(&r, path),
                    ));
                }
            }
            let _ = std::fs::remove_dir_all(&cache_dir);
            Ok(Some(evaluation))
        };
    trainer::install_interrupt_handler();
    let opts = Options {
        objectives: crate::objectives::registry(),
        run_dir: run_dir.to_path_buf(),
        stop_after,
        progress: true,
        keep: 2,
        evaluate: Some(&mut eval_fn),
    };
    trainer::train::<B>(plan, device, opts)
}

/// [`train_on`] data-parallel on `devices` (two or more; `crate::parallel`): peer 0
/// evaluates, logs and checkpoints into `run_dir`.
pub fn train_parallel_on<B: AutodiffBackend>(
    plan: &Plan,
    run_dir: &Path,
    devices: &[B::Device],
    stop_after: Option<u64>,
) -> Result<Outcome, TrainError>
where
    B::Device: Sync,
{
    if plan
        .recipe
        .train
        .as_ref()
        .is_some_and(|t| t.best_metric.is_some() || t.best_per_language.is_some())
    {
        return Err(TrainError::recipe(
            "train.best_metric",
            "data-parallel training (a `--device` list) does not evaluate during training yet",
            "drop `train.best_metric` / `train.best_per_language`, or train on one device",
        ));
    }
    trainer::install_interrupt_handler();
    let options = |progress| Options {
        objectives: crate::objectives::registry::<B>(),
        run_dir: run_dir.to_path_buf(),
        stop_after,
        progress,
        keep: 2,
        evaluate: None,
    };
    crate::parallel::train::<B, _>(
        plan,
        devices,
        |peer| trainer::train_peer(plan, &devices[0], options(true), Some(peer)),
        |peer| trainer::train_peer(plan, &devices[peer.rank], options(false), Some(peer)),
    )
}

/// [`train`] as one rank of an MPI job (`mpirun -np N harness train …`, `srun`), on the
/// CPU: `rank` 0 prepares into and writes `run_dir` (claimed, locked and recorded by the
/// caller); every other rank prepares the same corpora and tokenizer (deterministic) into
/// `prepare_dir`, a folder of its own, reads `run_dir`'s checkpoints to resume from the same
/// step, and writes nothing there. Each step's gradients are summed over the ranks in one
/// all-reduce (`crate::mpi_world`), as `--device cpu,cpu` sums them over threads.
#[cfg(feature = "mpi")]
pub fn train_mpi(
    resolved: &Resolved,
    run_dir: &Path,
    prepare_dir: &Path,
    settings: &Settings,
    device: Device,
    stop_after: Option<u64>,
    rank: crate::mpi_world::Rank,
) -> Result<Trained, TrainError> {
    check_devices(resolved, &[device])?;
    let (plan, _tokenizer, _counts) = prepare(resolved, settings, prepare_dir)?;
    crate::parallel::check_plan(&plan)?;
    if plan
        .recipe
        .train
        .as_ref()
        .is_some_and(|t| t.best_metric.is_some() || t.best_per_language.is_some())
    {
        return Err(TrainError::recipe(
            "train.best_metric",
            "training under MPI does not evaluate during training yet",
            "drop `train.best_metric` / `train.best_per_language`, or train in one process",
        ));
    }
    if rank.rank == 0 {
        harness_core::note!(
            "MPI: {} ranks, one device each (rank 0 on {device}); each step's batch is split by \
             examples, and ranking losses gather the whole batch's vectors",
            rank.size
        );
    }
    // Every rank has prepared before the first step is timed.
    crate::mpi_world::barrier()?;
    crate::mpi_world::reset_traffic();
    trainer::install_interrupt_handler();
    let peer = crate::parallel::Peer {
        rank: rank.rank,
        peers: rank.size,
        transport: crate::parallel::Transport::Mpi,
    };
    // One call for every backend: the gradients cross processes through host buffers.
    macro_rules! mpi_with {
        ($backend:ty, $device:expr) => {{
            let opts = Options {
                objectives: crate::objectives::registry(),
                run_dir: run_dir.to_path_buf(),
                stop_after,
                progress: rank.rank == 0,
                keep: 2,
                evaluate: None,
            };
            trainer::train_peer::<burn::backend::Autodiff<$backend>>(
                &plan,
                $device,
                opts,
                Some(peer),
            )?
        }};
    }
    let outcome = match device {
        Device::Cpu => mpi_with!(burn::backend::NdArray<f32>, &Default::default()),
        #[cfg(feature = "cuda")]
        Device::Cuda(index) => mpi_with!(
            burn::backend::Cuda<f32, i32>,
            &burn::backend::cuda::CudaDevice::new(index)
        ),
        #[cfg(feature = "flex")]
        Device::Flex => mpi_with!(burn::backend::Flex, &Default::default()),
        #[cfg(feature = "wgpu")]
        Device::Wgpu => mpi_with!(
            burn::backend::Wgpu<f32, i32>,
            &burn::backend::wgpu::WgpuDevice::DefaultDevice
        ),
        #[allow(unreachable_patterns)]
        other => return Err(TrainError::Device(other.not_compiled())),
    };
    Ok(Trained {
        plan_steps: plan.total_steps,
        outcome,
    })
}

/// Refuses a recipe that cannot train on `devices` ([`harness_recipe::device`]: the rules
/// `harness validate --device` applies, in the same words), before any work.
pub fn check_devices(resolved: &Resolved, devices: &[Device]) -> Result<(), TrainError> {
    match harness_recipe::device::device_refusal(&resolved.recipe, devices) {
        Some(r) => Err(TrainError::recipe(r.key, r.detail, r.fix)),
        None => Ok(()),
    }
}

/// What a training session did.
pub struct Trained {
    pub outcome: Outcome,
    pub plan_steps: u64,
}

/// Prepares and trains a resolved recipe in `run_dir` (claimed, locked and recorded by the
/// caller) on `device`, resuming from its newest checkpoint; `stop_after` stops after that
/// many steps in all, as if killed.
pub fn train(
    resolved: &Resolved,
    run_dir: &Path,
    settings: &Settings,
    device: Device,
    stop_after: Option<u64>,
) -> Result<Trained, TrainError> {
    train_on_devices(resolved, run_dir, settings, &[device], stop_after)
}

/// [`train`] on one device, or data-parallel on several of one backend (`--device
/// cpu,cpu`, `cuda:0,cuda:1`: `harness_core::device::Device::parse_list`).
pub fn train_on_devices(
    resolved: &Resolved,
    run_dir: &Path,
    settings: &Settings,
    devices: &[Device],
    stop_after: Option<u64>,
) -> Result<Trained, TrainError> {
    let Some(&device) = devices.first() else {
        return Err(TrainError::recipe(
            "--device",
            "no device given",
            "name one: `--device cpu`",
        ));
    };
    check_devices(resolved, devices)?;
    if devices.len() > 1 {
        crate::parallel::check_recipe(&resolved.recipe, crate::objectives::ALL)?;
    }
    let (plan, tokenizer, counts) = prepare(resolved, settings, run_dir)?;
    note_prepared(&plan, &tokenizer, &counts);
    // One call for every backend: only the backend type and its device differ.
    macro_rules! train_with {
        ($backend:ty, $device:expr) => {
            train_on::<burn::backend::Autodiff<$backend>>(
                &plan, &tokenizer, run_dir, settings, $device, stop_after,
            )?
        };
    }
    // Several devices: data-parallel peers on one backend (the parse refused mixed lists).
    macro_rules! parallel_with {
        ($backend:ty, $device:expr) => {{
            let list: Vec<burn::tensor::Device<$backend>> = devices.iter().map($device).collect();
            train_parallel_on::<burn::backend::Autodiff<$backend>>(
                &plan, run_dir, &list, stop_after,
            )?
        }};
    }
    let outcome = match device {
        Device::Cpu if devices.len() > 1 => {
            parallel_with!(burn::backend::NdArray<f32>, |_| Default::default())
        }
        #[cfg(feature = "cuda")]
        Device::Cuda(_) if devices.len() > 1 => parallel_with!(
            burn::backend::Cuda<f32, i32>,
            |d: &Device| match d {
                Device::Cuda(i) => burn::backend::cuda::CudaDevice::new(*i),
                _ => Default::default(),
            }
        ),
        _ if devices.len() > 1 => {
            return Err(TrainError::recipe(
                "--device",
                format!(
                    "data-parallel training runs on `cpu` or `cuda:N` lists, not on `{device}`"
                ),
                "list `cpu,cpu` or `cuda:0,cuda:1`, or name one device",
            ))
        }
        Device::Cpu => train_with!(burn::backend::NdArray<f32>, &Default::default()),
        #[cfg(feature = "cuda")]
        Device::Cuda(index) => train_with!(
            burn::backend::Cuda<f32, i32>,
            &burn::backend::cuda::CudaDevice::new(index)
        ),
        // burn-flex, burn's newer CPU backend.
        #[cfg(feature = "flex")]
        Device::Flex => train_with!(burn::backend::Flex, &Default::default()),
        // burn-wgpu on the default adapter (Vulkan, Metal, DirectX 12; lavapipe in the tests).
        #[cfg(feature = "wgpu")]
        Device::Wgpu => train_with!(
            burn::backend::Wgpu<f32, i32>,
            &burn::backend::wgpu::WgpuDevice::DefaultDevice
        ),
        // `Device::parse` refuses a backend this build lacks; a caller that skipped it
        // gets the same error here.
        #[allow(unreachable_patterns)]
        other => return Err(TrainError::Device(other.not_compiled())),
    };
    note_selected_encoders(run_dir)?;
    Ok(Trained {
        plan_steps: plan.total_steps,
        outcome,
    })
}

/// Says what was prepared: each corpus's examples used and removed, the tokenizer, the steps.
fn note_prepared(plan: &Plan, tokenizer: &TextTokenizer, counts: &[CorpusCounts]) {
    for c in counts {
        let removed: usize = c.parts.values().map(|p| p.1).sum();
        harness_core::note!(
            "corpus `{}` ({}): {} examples used, {removed} removed by the contamination filter",
            c.corpus,
            c.dataset,
            c.used
        );
    }
    harness_core::note!(
        "tokenizer: {} tokens, {} languages; model: {} steps ({} per epoch)",
        tokenizer.vocab_size(),
        tokenizer.languages().len(),
        plan.total_steps,
        plan.steps_per_epoch
    );
}

/// Says which encoder was kept per language, when the run selects them on a metric.
fn note_selected_encoders(run_dir: &Path) -> Result<(), TrainError> {
    let checkpoints = run_dir.join("checkpoints");
    if let Some(list) = harness_model::best_encoders::BestEncoders::read(&checkpoints)? {
        let chosen: Vec<String> = list
            .encoders
            .values()
            .map(|b| format!("{} step {} ({:.2})", b.language, b.step, b.value))
            .collect();
        harness_core::note!(
            "encoders selected per language on {}: {}",
            list.metric,
            chosen.join(", ")
        );
    }
    Ok(())
}
