//! Training throughput of harness against a hand-written PyTorch trainer of the same model:
//! `cargo bench --bench train`.
//!
//! For each recipe (by default the LASER default and the seq2seq-similarity default;
//! `TRAIN_BENCH_RECIPES=recipes/muse-xling.yaml cargo bench --bench train` measures the
//! multilingual-USE transformer), the corpora and the tokenizer are prepared once into a
//! scratch run directory, as `harness run` does (the run directory keeps the filtered corpora,
//! `corpora/*.jsonl`, the mined hard negatives, `hard-negatives/*.json`, and the resolved
//! recipe). Then, alternating in every round so that both see the same machine:
//!
//! (a) harness trains the recipe's first `TRAIN_BENCH_STEPS` steps (burn-ndarray with harness's
//!     fused CPU kernels) in a fresh directory;
//! (b) a hand-written PyTorch trainer of the same model, objectives, batches, Adam and
//!     clipping trains on the same corpora and tokenizer, with as many threads as harness's
//!     pool, for the same number of steps (its venv comes from `scripts/pyenv.py`):
//!     `scripts/bench_torch_muse.py` for a `transformer` encoder (PyTorch's own CPU
//!     `nn.TransformerEncoderLayer`, the fair peer), `scripts/bench_torch_laser.py` for the
//!     LSTM encoders.
//!
//! Tokens/s is each trainer's own count: real tokens over the seconds spent in training steps.
//! The best round of each counts; the line `harness / pytorch = R` is the result. Without
//! Python or its packages the PyTorch half is skipped and the bench says why.
//!
//! Environment: `TRAIN_BENCH_STEPS` (60), `TRAIN_BENCH_ROUNDS` (2), `TRAIN_BENCH_RECIPES`
//! (comma-separated recipe paths; default the two above). Datasets come from the usual
//! settings (`../shared/datasets`). `--features flex` also measures burn-flex.

use burn::backend::{Autodiff, NdArray};
use burn::tensor::backend::AutodiffBackend;
use harness_bench::load_recipe as load;
use harness_core::settings::{FlagOverrides, Settings};
use harness_recipe::LoadOptions;
use harness_train::plan::Plan;
use harness_train::session::{prepare, train_on};
use std::path::{Path, PathBuf};
use std::process::Command;

fn env(name: &str, default: usize) -> usize {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// Trains `plan` on backend `B` in a fresh directory under `scratch`; tokens per second.
fn harness_rate<B: AutodiffBackend>(
    name: &str,
    plan: &Plan,
    tokenizer: &harness_data::tokenize::TextTokenizer,
    scratch: &Path,
    settings: &Settings,
) -> f64
where
    burn::tensor::Device<B::InnerBackend>: Sync,
    harness_model::encoder::SentenceEncoder<B::InnerBackend>: Sync,
{
    let dir = scratch.join(format!("harness-{name}"));
    // A fresh directory: the trainer resumes from any checkpoint it finds.
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("a scratch run directory");
    let outcome = train_on::<B>(plan, tokenizer, &dir, settings, &Default::default(), None)
        .unwrap_or_else(|e| panic!("training on {name} failed: {e:#}"));
    assert_eq!(
        outcome.session_steps, plan.total_steps,
        "{name} stopped early"
    );
    let rate = outcome.session_tokens as f64 / outcome.session_seconds;
    println!(
        "  harness ({name}): {} steps, {} tokens in {:.1} s = {rate:.0} tokens/s, last loss {:.4}",
        outcome.session_steps, outcome.session_tokens, outcome.session_seconds, outcome.last_loss
    );
    rate
}

/// The PyTorch trainer of a recipe whose model encoder is of kind `encoder_kind`.
fn pytorch_script(encoder_kind: Option<&str>) -> &'static str {
    match encoder_kind {
        Some("transformer") => "scripts/bench_torch_muse.py",
        _ => "scripts/bench_torch_laser.py",
    }
}

/// Runs the PyTorch trainer `script` (relative to the repository) on the prepared run
/// directory; its tokens/s, or why not.
fn pytorch_rate(script: &str, run: &Path, steps: usize, threads: usize) -> Result<f64, String> {
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join(script);
    let out = Command::new("python3")
        .arg(&script)
        .arg("--run")
        .arg(run)
        .args(["--steps", &steps.to_string()])
        .args(["--threads", &threads.to_string()])
        .output()
        .map_err(|e| format!("python3 could not start: {e}"))?;
    let stdout = String::from_utf8_lossy(&out.stdout);
    if !out.status.success() {
        let stderr = String::from_utf8_lossy(&out.stderr);
        let tail: Vec<&str> = stderr.lines().rev().take(5).collect();
        return Err(format!(
            "{} exited with {}: {}",
            script.display(),
            out.status,
            tail.into_iter().rev().collect::<Vec<_>>().join(" | ")
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

fn bench_recipe(recipe: &Path, steps: usize, rounds: usize, settings: &Settings) {
    let sets = vec![
        format!("train.steps={steps}"),
        // No checkpoints during the measured steps (the trainer writes the last one).
        format!("train.checkpoint_every={}", steps + 1),
    ];
    let resolved = load(
        recipe,
        &LoadOptions {
            profile: None,
            sets,
        },
    )
    .expect("the recipe resolves");
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
    let script = pytorch_script(resolved.recipe.model.as_ref().map(|m| m.encoder.kind()));
    let train = resolved.recipe.train.as_ref();
    let batches = match (
        train.and_then(|t| t.batch_tokens),
        train.and_then(|t| t.batch_size),
    ) {
        (Some(n), _) => format!("batches of up to {n} tokens"),
        (None, Some(n)) => format!("batches of {n} examples"),
        (None, None) => "default batches".to_string(),
    };
    println!(
        "{}: {steps} steps, {batches}, {threads} threads; PyTorch peer {script}",
        recipe.display(),
    );

    let (mut ours, mut theirs) = (0f64, None::<f64>);
    let mut skipped = None;
    #[cfg(feature = "flex")]
    let mut flex = 0f64;
    for round in 1..=rounds {
        println!(" round {round}/{rounds}");
        ours = ours.max(harness_rate::<Autodiff<NdArray<f32>>>(
            "ndarray",
            &plan,
            &tokenizer,
            scratch.path(),
            settings,
        ));
        #[cfg(feature = "flex")]
        {
            flex = flex.max(harness_rate::<Autodiff<burn::backend::Flex>>(
                "flex",
                &plan,
                &tokenizer,
                scratch.path(),
                settings,
            ));
        }
        if skipped.is_none() {
            match pytorch_rate(script, &run, steps, threads) {
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
    harness_recipe::check::install_objectives(harness_train::objectives::schemas());
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
    let settings = Settings::load(&FlagOverrides::default()).expect("settings");
    for recipe in &recipes {
        bench_recipe(recipe, steps, rounds, &settings);
    }
}
