//! The training loop (burn's custom-training-loop shape: forward → loss → backward →
//! `GradientsParams` → global-norm clipping → `optim.step`), with the task mixture, the
//! learning-rate schedule, `train/metrics.jsonl`, a progress bar, evaluation every
//! `eval_every` steps (keeping the best checkpoint by a named metric), checkpoints every
//! `checkpoint_every` steps, exact resume from the newest checkpoint, and Ctrl-C, which
//! saves a checkpoint and stops cleanly.

use crate::checkpoint::{self, Best, TrainState};
use crate::objectives::{Registry, TaskLoss};
use crate::optim::{clip_global_norm, learning_rate, AnyOptimizer};
use crate::plan::Plan;
use crate::step::Step;
use crate::TrainError;
use burn::module::AutodiffModule;
use burn::optim::GradientsParams;
use burn::tensor::backend::AutodiffBackend;
use burn::tensor::{ElementConversion, Tensor};
use harness_model::random::Noise;
use harness_model::system::System;
use serde::Serialize;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Instant;

/// How to run the loop.
pub struct Options<'a, B: AutodiffBackend> {
    /// The losses of the objectives the plan's tasks name (`objectives::registry()`).
    pub objectives: Registry<B>,
    /// The run directory (`checkpoints/`, `train/metrics.jsonl`).
    pub run_dir: PathBuf,
    /// Stop after this step as if killed (after its checkpoint, if one is due): tests.
    pub stop_after: Option<u64>,
    /// Show a progress bar.
    pub progress: bool,
    /// Checkpoints kept besides the best one.
    pub keep: usize,
    /// Evaluates the model: `(metric name, value, lower is better)`.
    #[allow(clippy::type_complexity)]
    pub evaluate: Option<
        &'a mut dyn FnMut(
            &System<B::InnerBackend>,
            u64,
        ) -> Result<Option<(String, f64, bool)>, TrainError>,
    >,
}

/// What a call to [`train`] did.
#[derive(Debug, Clone, Serialize)]
pub struct Outcome {
    /// Steps done in all (over every session).
    pub steps: u64,
    /// Steps done by this call.
    pub session_steps: u64,
    /// Real tokens processed by this call.
    pub session_tokens: u64,
    /// Seconds spent in training steps by this call (evaluation and checkpoints excluded).
    pub session_seconds: f64,
    /// Whether Ctrl-C stopped it.
    pub interrupted: bool,
    /// The last checkpoint written or loaded.
    pub checkpoint: Option<PathBuf>,
    /// Loss of the last step.
    pub last_loss: f64,
}

impl Outcome {
    /// Training throughput of this call.
    pub fn tokens_per_second(&self) -> f64 {
        self.session_tokens as f64 / self.session_seconds.max(1e-9)
    }
}

/// One line of `train/metrics.jsonl`.
#[derive(Debug, Clone, Serialize)]
struct MetricLine<'a> {
    step: u64,
    task: &'a str,
    loss: f64,
    lr: f64,
    grad_norm: f64,
    tokens: usize,
    tokens_per_s: f64,
    seconds: f64,
    #[serde(skip_serializing_if = "Option::is_none")]
    eval: Option<(&'a str, f64)>,
}

static INTERRUPTED: AtomicBool = AtomicBool::new(false);

/// Makes Ctrl-C (SIGINT) set a flag that the loop checks between steps, so an interrupted
/// run saves a checkpoint and exits cleanly instead of dying mid-write.
pub fn install_interrupt_handler() {
    #[cfg(unix)]
    {
        extern "C" fn on_sigint(_: libc::c_int) {
            INTERRUPTED.store(true, Ordering::SeqCst);
        }
        // SAFETY: the handler only stores to an atomic, which is async-signal-safe.
        unsafe {
            libc::signal(
                libc::SIGINT,
                on_sigint as extern "C" fn(libc::c_int) as libc::sighandler_t,
            );
        }
    }
}

/// Whether Ctrl-C was pressed.
pub fn interrupted() -> bool {
    INTERRUPTED.load(Ordering::SeqCst)
}

/// Each task's loss on backend `B`, from `registry`.
fn build_losses<B: AutodiffBackend>(
    plan: &Plan,
    registry: &Registry<B>,
) -> Result<Vec<Box<dyn TaskLoss<B>>>, TrainError> {
    plan.tasks
        .iter()
        .map(|t| {
            let key = format!("tasks.{}", t.name);
            match registry.build(t.objective.name(), &t.objective.params) {
                Some(Ok(l)) => Ok(l),
                Some(Err(e)) => Err(TrainError::recipe(
                    format!("{key}.params"),
                    e.msg,
                    "see `harness validate` on the recipe",
                )),
                None => Err(TrainError::recipe(
                    format!("{key}.objective"),
                    format!("this build has no loss for `{}`", t.objective.name()),
                    "use an objective `harness validate` accepts for training",
                )),
            }
        })
        .collect()
}

/// The loss of task `t` on one of its batches plus the losses of the tasks joint with it
/// (each times its weight), and the real tokens read.
fn step_loss<B: AutodiffBackend>(
    model: &System<B>,
    plan: &Plan,
    losses: &[Box<dyn TaskLoss<B>>],
    t: usize,
    index: &[u32],
    noise: &mut Noise,
    device: &B::Device,
) -> Result<(Tensor<B, 1>, usize), TrainError> {
    let task = &plan.tasks[t];
    let mut step = Step::new(model, plan, task, index, noise, device);
    let mut loss = losses[t].loss(&mut step)?;
    for &j in &task.joint {
        let joint = losses[j].loss(&mut step)?;
        let weight = plan.tasks[j].weight;
        // A weight of 1 adds no multiplication (and no rounding) to the graph.
        loss = loss + if weight == 1.0 { joint } else { joint * weight };
    }
    Ok((loss, step.tokens()))
}

fn io(path: &Path, e: std::io::Error) -> TrainError {
    TrainError::Io {
        path: path.to_path_buf(),
        source: e,
    }
}

/// Keeps the first `steps` lines of `metrics.jsonl` (a resumed run rewrites what came
/// after its checkpoint, so the file never holds a step twice).
fn truncate_metrics(path: &Path, steps: u64) -> Result<(), TrainError> {
    let Ok(text) = std::fs::read_to_string(path) else {
        return Ok(());
    };
    let kept: String = text
        .lines()
        .filter(|l| {
            serde_json::from_str::<serde_json::Value>(l)
                .ok()
                .and_then(|v| v.get("step").and_then(|s| s.as_u64()))
                .is_some_and(|s| s <= steps)
        })
        .map(|l| format!("{l}\n"))
        .collect();
    harness_core::fsutil::write_atomic(path, kept.as_bytes()).map_err(|e| io(path, e))
}

/// Trains `plan` on `device`, resuming from the newest checkpoint in the run directory.
pub fn train<B: AutodiffBackend>(
    plan: &Plan,
    device: &B::Device,
    mut opts: Options<'_, B>,
) -> Result<Outcome, TrainError> {
    let recipe = &plan.recipe;
    let spec = recipe.optimizer.clone().ok_or_else(|| {
        TrainError::recipe(
            "optimizer",
            "missing",
            "add `optimizer: {kind: adam, lr: 0.001}`",
        )
    })?;
    let train_spec = recipe.train.clone().ok_or_else(|| {
        TrainError::recipe(
            "train",
            "missing",
            "add `train: {steps: 1000, batch_tokens: 2000}`",
        )
    })?;
    let checkpoints = opts.run_dir.join("checkpoints");
    let metrics_path = opts.run_dir.join("train").join("metrics.jsonl");
    std::fs::create_dir_all(metrics_path.parent().unwrap_or(&opts.run_dir))
        .map_err(|e| io(&opts.run_dir, e))?;

    let losses = build_losses(plan, &opts.objectives)?;
    let mut model: System<B> = plan.system.init(recipe.seed, device);
    let mut optim = AnyOptimizer::<System<B>, B>::from_spec(&spec);
    let mut state = TrainState {
        step: 0,
        positions: plan
            .tasks
            .iter()
            .filter(|t| t.data.is_some())
            .map(|t| (t.name.clone(), Default::default()))
            .collect(),
        seed: recipe.seed,
        tokens: 0,
        seconds: 0.0,
        best: None,
    };
    let mut last_checkpoint = None;
    if let Some(dir) = checkpoint::latest(&checkpoints) {
        model = checkpoint::load_model(&dir, model, device)?;
        optim = checkpoint::load_optim(&dir, optim, device)?;
        state = checkpoint::read_state(&dir)?;
        last_checkpoint = Some(dir);
    }
    truncate_metrics(&metrics_path, state.step)?;
    let mut metrics = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(&metrics_path)
        .map_err(|e| io(&metrics_path, e))?;

    let total = plan.total_steps;
    let bar = if opts.progress {
        let b =
            harness_core::progress::bar(total, "train [{bar:30}] step {pos}/{len} {msg} ETA {eta}");
        b.set_position(state.step);
        b
    } else {
        indicatif::ProgressBar::hidden()
    };
    let mut session = Outcome {
        steps: state.step,
        session_steps: 0,
        session_tokens: 0,
        session_seconds: 0.0,
        interrupted: false,
        checkpoint: last_checkpoint,
        last_loss: f64::NAN,
    };
    let mut smoothed: Option<f64> = None;
    let ckpt_every = train_spec.checkpoint_every.unwrap_or(0);
    let eval_every = train_spec.eval_every.unwrap_or(0);
    while state.step < total {
        if interrupted() {
            harness_core::note!("interrupted: saving a checkpoint at step {}", state.step);
            session.checkpoint = Some(checkpoint::save(
                &checkpoints,
                &model,
                &optim,
                &state,
                opts.keep,
            )?);
            session.interrupted = true;
            break;
        }
        let started = Instant::now();
        let step = state.step;
        let t = plan.mixture.pick(step);
        let task = &plan.tasks[t];
        let data = task.data.as_ref().ok_or_else(|| {
            TrainError::recipe(
                "tasks",
                "the mixture picked a joint task",
                "report this as a bug",
            )
        })?;
        let pos = state.positions.get(&task.name).copied().unwrap_or_default();
        let (index, next) = data.batch_at(pos);
        let mut noise = Noise::new(recipe.seed, step);
        let (loss, tokens) = step_loss(&model, plan, &losses, t, index, &mut noise, device)?;
        let value: f64 = loss.clone().into_scalar().elem();
        if !value.is_finite() {
            return Err(TrainError::Diverged {
                step,
                task: task.name.clone(),
                value,
            });
        }
        let mut grads = GradientsParams::from_grads(loss.backward(), &model);
        let grad_norm = clip_global_norm(&model, &mut grads, spec.grad_clip);
        let lr = learning_rate(&spec, step, total, plan.steps_per_epoch);
        model = optim.step(lr, model, grads);
        state.positions.insert(task.name.clone(), next);
        state.step += 1;
        state.tokens += tokens as u64;
        let secs = started.elapsed().as_secs_f64();
        state.seconds += secs;
        session.session_steps += 1;
        session.session_tokens += tokens as u64;
        session.session_seconds += secs;
        session.last_loss = value;
        let s = smoothed.map_or(value, |m| 0.95 * m + 0.05 * value);
        smoothed = Some(s);

        let mut eval = None;
        if eval_every > 0 && (state.step.is_multiple_of(eval_every) || state.step == total) {
            if let Some(f) = opts.evaluate.as_mut() {
                if let Some((name, v, lower)) = bar.suspend(|| f(&model.valid(), state.step))? {
                    let better = state.best.as_ref().is_none_or(|b| {
                        if lower {
                            v < b.value
                        } else {
                            v > b.value
                        }
                    });
                    if better {
                        state.best = Some(Best {
                            metric: name.clone(),
                            value: v,
                            step: state.step,
                            lower_is_better: lower,
                        });
                    }
                    eval = Some((name, v));
                }
            }
        }
        let line = MetricLine {
            step: state.step,
            task: &task.name,
            loss: value,
            lr,
            grad_norm,
            tokens,
            tokens_per_s: session.tokens_per_second(),
            seconds: state.seconds,
            eval: eval.as_ref().map(|(n, v)| (n.as_str(), *v)),
        };
        let mut text = serde_json::to_string(&line).unwrap_or_default();
        text.push('\n');
        metrics
            .write_all(text.as_bytes())
            .map_err(|e| io(&metrics_path, e))?;
        bar.set_position(state.step);
        bar.set_message(format!(
            "loss {s:.3} | {:.0} tok/s",
            session.tokens_per_second()
        ));
        // A checkpoint is due on the cadence, at the end, and whenever a new best was found
        // (the best step must exist on disk).
        let new_best = state.best.as_ref().is_some_and(|b| b.step == state.step);
        if (ckpt_every > 0 && state.step.is_multiple_of(ckpt_every))
            || state.step == total
            || new_best
        {
            metrics.flush().map_err(|e| io(&metrics_path, e))?;
            session.checkpoint = Some(checkpoint::save(
                &checkpoints,
                &model,
                &optim,
                &state,
                opts.keep,
            )?);
        }
        if opts.stop_after.is_some_and(|s| state.step >= s) {
            break;
        }
    }
    bar.finish_and_clear();
    // A run of zero steps (the untrained baseline) still leaves a checkpoint to evaluate.
    if session.checkpoint.is_none() && state.step >= total {
        session.checkpoint = Some(checkpoint::save(
            &checkpoints,
            &model,
            &optim,
            &state,
            opts.keep,
        )?);
    }
    session.steps = state.step;
    Ok(session)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::corpora::Loaded;
    use crate::plan::compile_plan;
    use crate::tokenizer::tokenizer_for;
    use burn::backend::{Autodiff, NdArray};
    use burn::module::{Module, ModuleVisitor, Param};
    use harness_data::records::{Bitext, NliLabel, NliPair};
    use harness_recipe::Recipe;
    use std::collections::BTreeMap;

    type B = Autodiff<NdArray<f32>>;

    const NUMS: [(&str, &str); 8] = [
        ("eins", "one"),
        ("zwei", "two"),
        ("drei", "three"),
        ("vier", "four"),
        ("fünf", "five"),
        ("sechs", "six"),
        ("sieben", "seven"),
        ("acht", "eight"),
    ];

    fn corpora(n: usize) -> BTreeMap<String, Loaded> {
        let pairs: Vec<Bitext> = (0..n)
            .map(|i| {
                let (d, e) = NUMS[i % NUMS.len()];
                let (d2, e2) = NUMS[(i / NUMS.len()) % NUMS.len()];
                Bitext {
                    source: format!("ich sehe {d} und {d2} katzen"),
                    target: format!("i see {e} and {e2} cats"),
                }
            })
            .collect();
        let nli: Vec<NliPair> = (0..n)
            .map(|i| NliPair {
                premise: format!("i see {} cats", NUMS[i % 8].1),
                hypothesis: format!("i see {} dogs", NUMS[(i + i / 8) % 8].1),
                label: [
                    NliLabel::Entailment,
                    NliLabel::Neutral,
                    NliLabel::Contradiction,
                ][i % 3],
            })
            .collect();
        let mut m = BTreeMap::new();
        m.insert(
            "pairs".to_string(),
            Loaded::Parallel(vec![("deu".into(), "eng".into(), pairs)]),
        );
        m.insert("nli".to_string(), Loaded::Nli(nli));
        m
    }

    fn recipe(tasks: &str, train: &str, dropout: f64) -> Recipe {
        let yaml = format!(
            "name: tiny
seed: 3
data:
  tokenizer: {{kind: bpe, vocab: 320, train_on: [pairs, nli]}}
  corpora:
    pairs: {{dataset: parallel-pairs, pairs: [deu-eng]}}
    nli: {{dataset: snli}}
model:
  encoder: {{kind: bilstm, layers: 2, hidden: 8, embed: 8, pool: max}}
  decoder: {{kind: lstm, layers: 1, hidden: 16, embed: 8, lang_embed: 4, targets: [eng]}}
  heads:
    nli: {{kind: mlp, hidden: [8], classes: 3, features: pair}}
tasks:
{tasks}
optimizer: {{kind: adam, lr: 0.02, dropout: {dropout}, grad_clip: 1.0}}
train: {train}
"
        );
        serde_yaml::from_str(&yaml).expect("test recipe")
    }

    fn plan(r: &Recipe, n: usize, dir: &Path) -> Plan {
        let loaded = corpora(n);
        let tok = tokenizer_for(r, &loaded, &dir.join("tokenizer.json")).unwrap();
        compile_plan(r, &tok, &loaded).unwrap()
    }

    fn opts(dir: &Path, stop_after: Option<u64>) -> Options<'static, B> {
        Options {
            objectives: crate::objectives::registry(),
            run_dir: dir.to_path_buf(),
            stop_after,
            progress: false,
            keep: 2,
            evaluate: None,
        }
    }

    struct Collect(Vec<f32>);
    impl<Bk: burn::tensor::backend::Backend> ModuleVisitor<Bk> for Collect {
        fn visit_float<const D: usize>(&mut self, p: &Param<Tensor<Bk, D>>) {
            self.0.extend(
                p.val()
                    .into_data()
                    .convert::<f32>()
                    .to_vec::<f32>()
                    .unwrap(),
            );
        }
    }

    fn weights(plan: &Plan, dir: &Path) -> Vec<f32> {
        let dev = Default::default();
        let ck = checkpoint::latest(&dir.join("checkpoints")).unwrap();
        let m =
            checkpoint::load_model(&ck, plan.system.init::<NdArray<f32>>(0, &dev), &dev).unwrap();
        let mut c = Collect(Vec::new());
        m.visit(&mut c);
        c.0
    }

    fn losses(dir: &Path) -> Vec<f64> {
        std::fs::read_to_string(dir.join("train/metrics.jsonl"))
            .unwrap()
            .lines()
            .map(|l| {
                serde_json::from_str::<serde_json::Value>(l).unwrap()["loss"]
                    .as_f64()
                    .unwrap()
            })
            .collect()
    }

    /// The resume test: a run killed after a checkpoint and resumed ends with the
    /// same weights as an uninterrupted one (CPU backend), with dropout, two tasks of
    /// which one is joint, and several epochs.
    #[test]
    fn killed_and_resumed_run_equals_uninterrupted_run() {
        let tasks = "  - {name: translate, objective: seq2seq_ce, corpus: pairs, weight: 1.0}
  - {name: sim, objective: l2_similarity, corpus: pairs, weight: 1.0, params: {alpha: 0.5, joint_with: translate}}
  - {name: nli, objective: nli_classification, corpus: nli, weight: 0.5, params: {head: nli}}";
        let r = recipe(
            tasks,
            "{steps: 14, batch_tokens: 60, max_len: 20, checkpoint_every: 4}",
            0.1,
        );
        let a = tempfile::tempdir().unwrap();
        let b = tempfile::tempdir().unwrap();
        let pa = plan(&r, 24, a.path());
        let pb = plan(&r, 24, b.path());
        assert!(
            pa.steps_per_epoch < 14,
            "several epochs: {}",
            pa.steps_per_epoch
        );
        let dev = Default::default();
        let full = train::<B>(&pa, &dev, opts(a.path(), None)).unwrap();
        assert_eq!(full.steps, 14);
        // "Killed" after step 6: its last checkpoint is step 4; steps 5-6 are lost.
        let first = train::<B>(&pb, &dev, opts(b.path(), Some(6))).unwrap();
        assert_eq!(first.steps, 6);
        assert_eq!(
            checkpoint::latest(&b.path().join("checkpoints")).unwrap(),
            checkpoint::step_dir(&b.path().join("checkpoints"), 4)
        );
        let resumed = train::<B>(&pb, &dev, opts(b.path(), None)).unwrap();
        assert_eq!(resumed.session_steps, 10, "resumed from step 4");
        assert_eq!(weights(&pa, a.path()), weights(&pb, b.path()));
        assert_eq!(losses(a.path()), losses(b.path()));
        // Only the newest two checkpoints remain.
        assert_eq!(checkpoint::list(&b.path().join("checkpoints")).len(), 2);
    }

    fn assert_decreases(tasks: &str) {
        let r = recipe(tasks, "{steps: 60, batch_size: 8, max_len: 20}", 0.0);
        let dir = tempfile::tempdir().unwrap();
        let p = plan(&r, 8, dir.path());
        train::<B>(&p, &Default::default(), opts(dir.path(), None)).unwrap();
        let l = losses(dir.path());
        let head: f64 = l[..5].iter().sum::<f64>() / 5.0;
        let tail: f64 = l[l.len() - 5..].iter().sum::<f64>() / 5.0;
        assert!(tail < 0.5 * head, "{tasks}: loss {head} → {tail}");
    }

    #[test]
    fn seq2seq_ce_overfits_a_tiny_set() {
        assert_decreases(
            "  - {name: t, objective: seq2seq_ce, corpus: pairs, params: {label_smoothing: 0.1}}",
        );
    }

    #[test]
    fn l2_similarity_overfits_a_tiny_set() {
        assert_decreases("  - {name: s, objective: l2_similarity, corpus: pairs}");
    }

    #[test]
    fn nli_classification_overfits_a_tiny_set() {
        assert_decreases(
            "  - {name: n, objective: nli_classification, corpus: nli, params: {head: nli}}",
        );
    }
}
