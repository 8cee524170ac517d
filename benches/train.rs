//! Training throughput of the LASER default recipe on each CPU backend built in:
//! `cargo bench --bench train` (burn-ndarray alone) and `cargo bench --bench train --features
//! flex` (also burn-flex, with its ratio to ndarray measured in the same run).
//!
//! The recipe's corpora and tokenizer are prepared once, as `harness run recipes/laser.yaml`
//! does; then every backend trains the recipe's first `TRAIN_BENCH_STEPS` (30) steps in a
//! fresh run directory, from the same seed and the same batches. Tokens/s is the trainer's own
//! count: real tokens over the seconds spent in training steps (checkpoints excluded). Rounds
//! alternate the backends so that both see the same machine; the best round counts.
//!
//! Environment: `TRAIN_BENCH_STEPS` (30), `TRAIN_BENCH_ROUNDS` (2), `TRAIN_BENCH_RECIPE`
//! (`recipes/laser.yaml`). Datasets come from the usual settings (`../shared/datasets`).

use burn::backend::{Autodiff, NdArray};
use burn::tensor::backend::AutodiffBackend;
use harness_bench::load_recipe as load;
use harness_core::settings::{FlagOverrides, Settings};
use harness_recipe::LoadOptions;
use harness_train::session::{prepare, train_on};
use harness_train::trainer::Plan;
use std::path::Path;

fn env(name: &str, default: usize) -> usize {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// Trains `plan` on backend `B` in a fresh directory under `scratch`; tokens per second.
fn tokens_per_second<B: AutodiffBackend>(
    name: &str,
    plan: &Plan,
    tokenizer: &harness_data::tokenize::TextTokenizer,
    scratch: &Path,
    settings: &Settings,
) -> f64
where
    burn::tensor::Device<B::InnerBackend>: Sync,
    harness_model::encoder::bilstm::BilstmEncoder<B::InnerBackend>: Sync,
{
    let dir = scratch.join(name);
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
        "{name}: {} steps, {} tokens in {:.1} s = {rate:.0} tokens/s, last loss {:.4}",
        outcome.session_steps, outcome.session_tokens, outcome.session_seconds, outcome.last_loss
    );
    rate
}

fn main() {
    let steps = env("TRAIN_BENCH_STEPS", 30);
    let rounds = env("TRAIN_BENCH_ROUNDS", 2).max(1);
    let recipe = std::env::var("TRAIN_BENCH_RECIPE")
        .unwrap_or_else(|_| concat!(env!("CARGO_MANIFEST_DIR"), "/recipes/laser.yaml").into());
    let settings = Settings::load(&FlagOverrides::default()).expect("settings");
    let sets = vec![
        format!("train.steps={steps}"),
        // No checkpoints during the measured steps (the trainer writes the last one).
        format!("train.checkpoint_every={}", steps + 1),
    ];
    let resolved = load(
        Path::new(&recipe),
        &LoadOptions {
            profile: None,
            sets: sets.clone(),
        },
    )
    .expect("the recipe resolves");
    let scratch = tempfile::tempdir().expect("a scratch directory");
    let (plan, tokenizer, _) =
        prepare(&resolved, &settings, scratch.path()).expect("corpora and tokenizer");
    println!(
        "{recipe}: {steps} steps of up to {} tokens, {} threads",
        resolved
            .recipe
            .train
            .as_ref()
            .map_or(0, |t| t.batch_tokens.unwrap_or(0)),
        rayon::current_num_threads()
    );

    let mut ndarray = 0f64;
    #[cfg(feature = "flex")]
    let mut flex = 0f64;
    for round in 1..=rounds {
        println!("round {round}/{rounds}");
        ndarray = ndarray.max(tokens_per_second::<Autodiff<NdArray<f32>>>(
            "ndarray",
            &plan,
            &tokenizer,
            scratch.path(),
            &settings,
        ));
        #[cfg(feature = "flex")]
        {
            flex = flex.max(tokens_per_second::<Autodiff<burn::backend::Flex>>(
                "flex",
                &plan,
                &tokenizer,
                scratch.path(),
                &settings,
            ));
        }
    }
    println!("burn-ndarray: {ndarray:.0} tokens/s (best of {rounds})");
    #[cfg(feature = "flex")]
    println!(
        "burn-flex: {flex:.0} tokens/s (best of {rounds}); flex / ndarray = {:.2}",
        flex / ndarray
    );
    #[cfg(not(feature = "flex"))]
    println!("(build with `--features flex` to compare burn-flex)");
}
