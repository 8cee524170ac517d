//! Training throughput of harness against a hand-written PyTorch trainer of the same model:
//! `cargo bench --bench train`.
//!
//! For each recipe (by default the LASER default and the seq2seq-similarity default;
//! `TRAIN_BENCH_RECIPES=recipes/muse-xling.yaml cargo bench --bench train` measures the
//! multilingual-USE transformer, `recipes/xnli-align.yaml` XNLI's X-BiLSTM, `recipes/emu.yaml`
//! Emu's fine-tuned multilingual-e5-small), the corpora and the tokenizer are prepared once
//! into a scratch run directory, as `harness run` does (the run directory keeps the filtered
//! corpora, `corpora/*.jsonl`, the mined hard negatives, `hard-negatives/*.json`, and the
//! resolved recipe). Then, alternating in every round so that both see the same machine:
//!
//! (a) harness trains the recipe's first `TRAIN_BENCH_STEPS` steps (burn-ndarray with harness's
//!     fused CPU kernels) in a fresh directory;
//! (b) a hand-written PyTorch trainer of the same model, objectives, batches, stages, Adam
//!     and clipping trains on the same corpora and tokenizer, with as many threads as
//!     harness's pool, for the same steps (its venv comes from `scripts/pyenv.py`). The peer
//!     is the first of [`PEERS`] that trains every encoder kind and every objective of the
//!     recipe: `scripts/bench_torch_muse.py` for a `transformer` encoder (PyTorch's own CPU
//!     `nn.TransformerEncoderLayer`, the fair peer), `scripts/bench_torch_laser.py` for the
//!     LSTM encoders with translation, L2 and ranking losses, `scripts/bench_torch_xnli.py`
//!     for NLI classification and XNLI's alignment (several encoders, stages),
//!     `scripts/bench_torch_emu.py` for Emu's fine-tuning of a `pretrained` BERT (transformers'
//!     `BertModel`; the bench first writes the encoder's starting weights into the prepared
//!     run as `peer-model/`, with `harness train` of no steps and `harness export`).
//!
//! The recipe runs with `train.steps` set to `TRAIN_BENCH_STEPS`, no evaluation and no
//! checkpoint before the end; both trainers stop after that many steps in all. `train.steps`
//! is the length of every stage that sets none of its own, so a recipe whose later stages
//! set theirs (XNLI: stage 2's 8,000 steps) measures its first stage only, unless
//! `TRAIN_BENCH_SETS` shortens the first (e.g. `train.steps=30;stages.2.steps=30`: 30 steps
//! of each).
//!
//! Tokens/s is each trainer's own count: real tokens over the seconds spent in training steps.
//! The best round of each counts; the line `harness / pytorch = R` is the result. Without
//! Python or its packages, or without a peer for the recipe, the PyTorch half is skipped and
//! the bench says why.
//!
//! Environment: `TRAIN_BENCH_STEPS` (60), `TRAIN_BENCH_ROUNDS` (2), `TRAIN_BENCH_RECIPES`
//! (comma-separated recipe paths; default the two above), `TRAIN_BENCH_SETS` (`;`-separated
//! `--set` overrides applied after the bench's own, to every recipe), `TRAIN_BENCH_DEVICE`
//! (`cpu`; `cuda:N` in a build with `--features cuda`, `wgpu` with `--features wgpu`: harness
//! trains on that device and the PyTorch peer with `--device cuda:N`, on the interpreter's own
//! CUDA torch, `scripts/pyenv.py`). Datasets come from the usual settings
//! (`../shared/datasets`). `--features flex` also measures burn-flex.

mod common;
use common::env;

use burn::backend::{Autodiff, NdArray};
use burn::tensor::backend::AutodiffBackend;
use harness_core::device::Device;
use harness_core::settings::{FlagOverrides, Settings};
use harness_recipe::Recipe;
use harness_train::plan::Plan;
use harness_train::session::{prepare, train_on};
use std::path::{Path, PathBuf};
use std::process::Command;

/// Trains the first `steps` steps of `plan` on backend `B` in a fresh directory under
/// `scratch`; tokens per second.
fn harness_rate<B: AutodiffBackend>(
    name: &str,
    plan: &Plan,
    steps: u64,
    tokenizer: &harness_data::tokenize::TextTokenizer,
    scratch: &Path,
    settings: &Settings,
    device: &B::Device,
) -> f64
where
    burn::tensor::Device<B::InnerBackend>: Sync,
    harness_model::encoder::SentenceEncoder<B::InnerBackend>: Sync,
{
    let dir = scratch.join(format!("harness-{name}"));
    // A fresh directory: the trainer resumes from any checkpoint it finds.
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("a scratch run directory");
    let flops = harness_kernels::product_flops();
    let outcome = train_on::<B>(plan, tokenizer, &dir, settings, device, Some(steps))
        .unwrap_or_else(|e| panic!("training on {name} failed: {e:#}"));
    assert_eq!(
        outcome.session_steps,
        plan.total_steps.min(steps),
        "{name} stopped early"
    );
    let rate = outcome.session_tokens as f64 / outcome.session_seconds;
    println!(
        "  harness ({name}): {} steps, {} tokens in {:.1} s = {rate:.0} tokens/s, first loss {:.4}, last loss {:.4}",
        outcome.session_steps,
        outcome.session_tokens,
        outcome.session_seconds,
        first_loss(&dir),
        outcome.last_loss
    );
    if let Some(peak) = peak() {
        println!(
            "  harness ({name}): {}",
            common::products_line(
                harness_kernels::product_flops() - flops,
                outcome.session_seconds,
                peak
            )
        );
    }
    rate
}

/// The CPU's GEMM peak, measured once ([`common::machine`]); `None` when it was not (the
/// products of a GPU backend do not go through the CPU kernels).
fn peak() -> Option<f64> {
    PEAK.get().copied()
}

static PEAK: std::sync::OnceLock<f64> = std::sync::OnceLock::new();

/// [`harness_rate`] on `device` (`TRAIN_BENCH_DEVICE`), or why this build cannot.
fn device_rate(
    device: Device,
    plan: &Plan,
    steps: u64,
    tokenizer: &harness_data::tokenize::TextTokenizer,
    scratch: &Path,
    settings: &Settings,
) -> f64 {
    match device {
        Device::Cpu => harness_rate::<Autodiff<NdArray<f32>>>(
            "ndarray",
            plan,
            steps,
            tokenizer,
            scratch,
            settings,
            &Default::default(),
        ),
        #[cfg(feature = "cuda")]
        Device::Cuda(index) => harness_rate::<Autodiff<burn::backend::Cuda<f32, i32>>>(
            &format!("cuda:{index}"),
            plan,
            steps,
            tokenizer,
            scratch,
            settings,
            &burn::backend::cuda::CudaDevice::new(index),
        ),
        #[cfg(feature = "wgpu")]
        Device::Wgpu => harness_rate::<Autodiff<burn::backend::Wgpu<f32, i32>>>(
            "wgpu",
            plan,
            steps,
            tokenizer,
            scratch,
            settings,
            &burn::backend::wgpu::WgpuDevice::DefaultDevice,
        ),
        #[allow(unreachable_patterns)]
        other => panic!("TRAIN_BENCH_DEVICE: {}", other.not_compiled()),
    }
}

/// `TRAIN_BENCH_DEVICE` (default `cpu`), parsed as `--device` is.
fn bench_device() -> Device {
    // The backends this build has, as `--device` sees them.
    let compiled = harness::commands::compiled();
    let value = std::env::var("TRAIN_BENCH_DEVICE").unwrap_or_else(|_| "cpu".into());
    Device::parse(&value, &compiled).unwrap_or_else(|e| panic!("TRAIN_BENCH_DEVICE: {e}"))
}

/// The loss of the first step recorded in run directory `dir` (`train/metrics.jsonl`), NaN
/// when there is none.
fn first_loss(dir: &Path) -> f64 {
    std::fs::read_to_string(dir.join("train").join("metrics.jsonl"))
        .ok()
        .and_then(|text| {
            let line = text.lines().next()?.to_string();
            serde_json::from_str::<serde_json::Value>(&line).ok()
        })
        .and_then(|v| v.get("loss")?.as_f64())
        .unwrap_or(f64::NAN)
}

/// The PyTorch peers: each script, the encoder kinds and the objectives it trains.
const PEERS: &[(&str, &[&str], &[&str])] = &[
    (
        "scripts/bench_torch_muse.py",
        &["transformer"],
        &[
            "translation_ranking",
            "response_ranking",
            "quick_thought",
            "nli_classification",
        ],
    ),
    (
        "scripts/bench_torch_laser.py",
        &["bilstm", "lstm"],
        &["seq2seq_ce", "l2_similarity", "ranking_softmax"],
    ),
    (
        "scripts/bench_torch_xnli.py",
        &["bilstm", "lstm", "cbow"],
        &["nli_classification", "alignment_l2"],
    ),
    (
        "scripts/bench_torch_emu.py",
        &["pretrained"],
        &["l2_softmax", "center_loss", "adversarial_language"],
    ),
];

/// The kinds of `recipe`'s encoders (the main one and every `model.encoders` entry).
fn encoder_kinds(recipe: &Recipe) -> Vec<&str> {
    recipe
        .model
        .iter()
        .flat_map(|m| std::iter::once(&m.encoder).chain(m.encoders.values()))
        .map(|e| e.kind())
        .collect()
}

/// The last five lines of a finished command's stderr, joined with ` | `.
fn stderr_tail(out: &std::process::Output) -> String {
    let stderr = String::from_utf8_lossy(&out.stderr);
    let tail: Vec<&str> = stderr.lines().rev().take(5).collect();
    tail.into_iter().rev().collect::<Vec<_>>().join(" | ")
}

/// Writes `run/peer-model`, the starting weights of a recipe's `pretrained` encoder as a
/// sentence-transformers folder, for a peer that fine-tunes it: `harness train` of the recipe
/// with no steps, then `harness export` (crates/train/src/export_st.rs).
fn export_starting_encoder(recipe: &Path, sets: &[String], run: &Path) -> Result<(), String> {
    let initial = run.join("initial");
    let folder = run.join("peer-model");
    let mut train: Vec<String> = vec!["train".into(), recipe.display().to_string()];
    for s in sets.iter().map(String::as_str).chain(["train.steps=0"]) {
        train.extend(["--set".into(), s.to_string()]);
    }
    train.extend(["--out".into(), initial.display().to_string()]);
    let export = vec![
        "export".to_string(),
        initial.display().to_string(),
        "--out".into(),
        folder.display().to_string(),
    ];
    for args in [train, export] {
        let out = Command::new(env!("CARGO_BIN_EXE_harness"))
            .args(&args)
            .output()
            .map_err(|e| format!("harness could not start: {e}"))?;
        if !out.status.success() {
            return Err(format!(
                "`harness {}` exited with {}: {}",
                args.join(" "),
                out.status,
                stderr_tail(&out)
            ));
        }
    }
    Ok(())
}

/// The PyTorch trainer of `recipe`: the first of [`PEERS`] that trains all its encoders'
/// kinds and all its tasks' objectives, or why none does.
fn pytorch_script(recipe: &Recipe) -> Result<&'static str, String> {
    let mut kinds = encoder_kinds(recipe);
    let mut objectives: Vec<&str> = recipe.tasks.iter().map(|t| t.objective.name()).collect();
    for v in [&mut kinds, &mut objectives] {
        v.sort_unstable();
        v.dedup();
    }
    PEERS
        .iter()
        .find(|(_, k, o)| {
            kinds.iter().all(|x| k.contains(x)) && objectives.iter().all(|x| o.contains(x))
        })
        .map(|(script, _, _)| *script)
        .ok_or_else(|| {
            format!(
                "no PyTorch peer trains encoders {} with objectives {}",
                kinds.join(", "),
                objectives.join(", ")
            )
        })
}

/// Runs the PyTorch trainer `script` (relative to the repository) on the prepared run
/// directory; its tokens/s, or why not.
fn pytorch_rate(
    script: &str,
    run: &Path,
    steps: u64,
    threads: usize,
    device: Device,
) -> Result<f64, String> {
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join(script);
    let mut cmd = Command::new("python3");
    cmd.arg(&script)
        .arg("--run")
        .arg(run)
        .args(["--steps", &steps.to_string()])
        .args(["--threads", &threads.to_string()]);
    match device {
        Device::Cuda(index) => {
            cmd.args(["--device", &format!("cuda:{index}")]);
        }
        Device::Cpu | Device::Flex => {}
        Device::Wgpu => return Err("PyTorch has no wgpu backend".into()),
    }
    let out = cmd
        .output()
        .map_err(|e| format!("python3 could not start: {e}"))?;
    let stdout = String::from_utf8_lossy(&out.stdout);
    if !out.status.success() {
        return Err(format!(
            "{} exited with {}: {}",
            script.display(),
            out.status,
            stderr_tail(&out)
        ));
    }
    let line = stdout
        .lines()
        .find(|l| l.starts_with("pytorch:"))
        .ok_or_else(|| format!("no `pytorch:` line in its output: {stdout}"))?;
    println!("  {line}");
    // "... in S s of training: RATE tokens/s; ..."
    line.split("training: ")
        .nth(1)
        .and_then(|rest| rest.split(' ').next())
        .and_then(|r| r.parse::<f64>().ok())
        .ok_or_else(|| format!("cannot read the rate from `{line}`"))
}

fn bench_recipe(
    recipe: &Path,
    steps: usize,
    rounds: usize,
    extra: &[String],
    settings: &Settings,
    device: Device,
) {
    let mut sets = vec![
        format!("train.steps={steps}"),
        // No checkpoints during the measured steps (the trainer writes the last one).
        format!("train.checkpoint_every={}", steps + 1),
        // No evaluation (a recipe that selects its best checkpoint evaluates at the end).
        "train.eval_every=null".to_string(),
    ];
    sets.extend(extra.iter().cloned());
    let resolved =
        harness::commands::load_recipe(recipe, None, &sets).expect("the recipe resolves");
    let scratch = tempfile::tempdir().expect("a scratch directory");
    let run = scratch.path().join("prepared");
    std::fs::create_dir_all(&run).expect("a scratch run directory");
    std::fs::write(
        run.join("recipe.resolved.yaml"),
        resolved.to_yaml().expect("a resolved recipe serializes"),
    )
    .expect("writing the resolved recipe");
    let (plan, tokenizer, _) = prepare(&resolved, settings, &run).expect("corpora and tokenizer");
    let threads = rayon::current_num_threads();
    let (script, mut skipped) = match pytorch_script(&resolved.recipe) {
        Ok(s) => (Some(s), None),
        Err(why) => (None, Some(why)),
    };
    let pretrained = encoder_kinds(&resolved.recipe).contains(&"pretrained");
    if pretrained && skipped.is_none() {
        if let Err(why) = export_starting_encoder(recipe, &sets, &run) {
            skipped = Some(why);
        }
    }
    let train = resolved.recipe.train.as_ref();
    let batches = match (
        train.and_then(|t| t.batch_tokens),
        train.and_then(|t| t.batch_size),
    ) {
        (Some(n), _) => format!("batches of up to {n} tokens"),
        (None, Some(n)) => format!("batches of {n} examples"),
        (None, None) => "default batches".to_string(),
    };
    let measured = plan.total_steps.min(steps as u64);
    let stages: Vec<String> = plan
        .stages
        .iter()
        .filter(|s| s.start < measured)
        .map(|s| {
            let end = (s.start + s.steps).min(measured);
            format!("stage {} steps {}-{end}", s.number, s.start + 1)
        })
        .collect();
    println!(
        "{}: {measured} steps ({}), {batches}, {threads} threads, device {}; PyTorch peer {}",
        recipe.display(),
        stages.join(", "),
        device.backend(),
        script.unwrap_or("none"),
    );

    let (mut ours, mut theirs) = (0f64, None::<f64>);
    #[cfg(feature = "flex")]
    let mut flex = 0f64;
    for round in 1..=rounds {
        println!(" round {round}/{rounds}");
        ours = ours.max(device_rate(
            device,
            &plan,
            measured,
            &tokenizer,
            scratch.path(),
            settings,
        ));
        #[cfg(feature = "flex")]
        {
            flex = flex.max(harness_rate::<Autodiff<burn::backend::Flex>>(
                "flex",
                &plan,
                measured,
                &tokenizer,
                scratch.path(),
                settings,
                &Default::default(),
            ));
        }
        if let (None, Some(script)) = (&skipped, script) {
            match pytorch_rate(script, &run, measured, threads, device) {
                Ok(r) => theirs = Some(theirs.map_or(r, |t: f64| t.max(r))),
                Err(why) => skipped = Some(why),
            }
        }
    }
    println!("  harness: {ours:.0} tokens/s (best of {rounds})");
    #[cfg(feature = "flex")]
    println!(
        "  burn-flex: {flex:.0} tokens/s (best of {rounds}); flex / ndarray = {:.2}",
        flex / ours
    );
    match (theirs, skipped) {
        (Some(t), None) => {
            println!("  pytorch: {t:.0} tokens/s (best of {rounds})");
            println!("  harness / pytorch = {:.2}", ours / t);
        }
        (_, Some(why)) => println!("  pytorch skipped: {why}"),
        (None, None) => unreachable!("every round either measured PyTorch or gave a reason"),
    }
}

fn main() {
    harness_core::memory::keep_freed_memory();
    let steps = env("TRAIN_BENCH_STEPS", 60);
    let rounds = env("TRAIN_BENCH_ROUNDS", 2).max(1);
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let recipes: Vec<PathBuf> = match std::env::var("TRAIN_BENCH_RECIPES") {
        Ok(list) => list.split(',').map(PathBuf::from).collect(),
        Err(_) => vec![
            root.join("recipes/laser.yaml"),
            root.join("recipes/seq2seq-similarity.yaml"),
        ],
    };
    let extra: Vec<String> = std::env::var("TRAIN_BENCH_SETS")
        .map(|s| {
            s.split(';')
                .map(str::trim)
                .filter(|x| !x.is_empty())
                .map(String::from)
                .collect()
        })
        .unwrap_or_default();
    let settings = Settings::load(&FlagOverrides::default()).expect("settings");
    let device = bench_device();
    if device.backend() == "ndarray" {
        let _ = PEAK.set(common::machine());
    }
    // As `harness` does: cubecl's autotune results and kernels under HARNESS_HOME.
    harness_model::gpu::configure(&settings.cache_dir.join("cubecl"));
    for recipe in &recipes {
        bench_recipe(recipe, steps, rounds, &extra, &settings, device);
    }
}
