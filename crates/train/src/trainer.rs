//! The training loop (burn's custom-training-loop shape: forward → loss → backward →
//! `GradientsParams` → global-norm clipping → `optim.step`), with the task mixture, the
//! learning-rate schedule, `train/metrics.jsonl`, a progress bar, evaluation every
//! `eval_every` steps (keeping the best checkpoint by a named metric), checkpoints every
//! `checkpoint_every` steps, exact resume from the newest checkpoint, and Ctrl-C, which
//! saves a checkpoint and stops cleanly.

use crate::checkpoint::{self, Best, TrainState};
use crate::objectives::{Registry, TaskLoss};
use crate::optim::{
    clip_global_norm, clip_global_norm_on_device, learning_rate, scale_gradients, AnyOptimizer,
};
use crate::parallel::{shard_weight, Peer};
use crate::plan::{InnerPlan, Plan, StagePlan};
use crate::step::Step;
use crate::TrainError;
use burn::module::AutodiffModule;
use burn::optim::GradientsParams;
use burn::tensor::backend::AutodiffBackend;
use burn::tensor::Tensor;
use harness_model::best_encoders::BestEncoders;
use harness_model::gpu::host_scalar;
use harness_model::random::Noise;
use harness_model::system::{Group, System};
use serde::Serialize;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::Instant;

/// The indices of the encoders the recipe declares `pretrained`.
fn pretrained_encoders(plan: &Plan) -> Vec<usize> {
    use harness_recipe::schema::Encoder;
    let Some(model) = &plan.recipe.model else {
        return Vec::new();
    };
    std::iter::once((harness_model::system::MAIN_ENCODER, &model.encoder))
        .chain(model.encoders.iter().map(|(n, e)| (n.as_str(), e)))
        .filter(|(_, e)| matches!(e, Encoder::Pretrained(_)))
        .filter_map(|(n, _)| plan.system.encoder_index(n))
        .collect()
}

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
    /// Evaluates the model at a step (`None`: nothing measured).
    #[allow(clippy::type_complexity)]
    pub evaluate: Option<
        &'a mut dyn FnMut(&System<B::InnerBackend>, u64) -> Result<Option<Evaluation>, TrainError>,
    >,
}

/// What an in-training evaluation measured.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Evaluation {
    /// The best-checkpoint metric (`train.best_metric`): name, value, lower is better.
    pub best: Option<(String, f64, bool)>,
    /// The per-language metric (`train.best_per_language`): its name, lower is better,
    /// and each language's value.
    pub per_language: Option<(String, bool, std::collections::BTreeMap<String, f64>)>,
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
    /// On a GPU backend, the autotune keys (kernel shapes) this call tuned: none when every
    /// kernel came from the cache, so that its rate is what a later run gets. `None` on the
    /// CPU.
    pub kernel_shapes_tuned: Option<u64>,
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
    /// Kernels this step launched on the device (`HARNESS_GPU_TRACE=1` on a GPU build).
    #[serde(skip_serializing_if = "Option::is_none")]
    launches: Option<u64>,
    /// Tensors this step read back to the host (with `launches`).
    #[serde(skip_serializing_if = "Option::is_none")]
    host_reads: Option<u64>,
    /// Kernels this step compiled (with `launches`): a first run's cost, none from the cache.
    #[serde(skip_serializing_if = "Option::is_none")]
    kernels_compiled: Option<u64>,
    /// Autotune keys this step tuned (with `launches`), each timing its candidate kernels.
    #[serde(skip_serializing_if = "Option::is_none")]
    keys_tuned: Option<u64>,
}

/// Makes Ctrl-C (SIGINT) and SIGTERM (what `kill`, Slurm's time limit and systemd send
/// first) set a flag that the loop checks between steps, so an interrupted run saves a
/// checkpoint and exits cleanly instead of dying mid-write. For the rest of the process.
pub fn install_interrupt_handler() {
    harness_core::signal::Interrupts::catch().keep();
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

/// The loss of the step's task on its batch plus the losses of the tasks joint with it
/// (each times its weight).
fn step_loss<B: AutodiffBackend>(
    step: &mut Step<'_, B>,
    plan: &Plan,
    losses: &[Box<dyn TaskLoss<B>>],
    t: usize,
) -> Result<Tensor<B, 1>, TrainError> {
    // The forward pass in the recipe's precision (`train.precision`); the graph it records
    // carries the casts, so the backward pass needs no scope.
    let _precision = harness_model::precision::autocast(plan.recipe.precision().is_bf16());
    step.set_current(None);
    let mut loss = losses[t].loss(step)?;
    for &j in &plan.tasks[t].joint {
        step.set_current(Some(j));
        let joint = losses[j].loss(step)?;
        let weight = plan.tasks[j].weight;
        // A weight of 1 adds no multiplication (and no rounding) to the graph.
        loss = loss + if weight == 1.0 { joint } else { joint * weight };
    }
    Ok(loss)
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
    harness_core::nofollow::write_atomic(path, kept.as_bytes()).map_err(|e| io(path, e))
}

/// The loop's state between steps.
struct Loop<'p, B: AutodiffBackend> {
    plan: &'p Plan,
    spec: harness_recipe::schema::Optimizer,
    losses: Vec<Box<dyn TaskLoss<B>>>,
    /// Always `Some` between steps (taken out while the optimizer moves it).
    model: Option<System<B>>,
    optim: AnyOptimizer<System<B>, B>,
    /// The inner optimizer of each task with an inner loop, by task index.
    inner: std::collections::BTreeMap<usize, AnyOptimizer<System<B>, B>>,
    state: TrainState,
    checkpoints: PathBuf,
    metrics_path: PathBuf,
    /// `None` on a data-parallel peer other than the first, which writes no files.
    metrics: Option<std::fs::File>,
    session: Outcome,
    smoothed: Option<f64>,
    keep: usize,
    /// The encoders selected per language so far (`train.best_per_language`).
    best_encoders: Option<BestEncoders>,
    /// This loop's place in a data-parallel run (`None`: the one-device run).
    peer: Option<Peer>,
    /// Steps done whose metrics are not written yet ([`Self::settle`]).
    pending: Vec<Stepped<B>>,
}

/// What one step did, for its metrics line.
struct Stepped<B: AutodiffBackend> {
    /// The step's index (the loop's step count before it), for its metrics line and the
    /// error of a loss that is not finite.
    step: u64,
    task: usize,
    /// The loss, once read back ([`Loop::settle`]); NaN while [`Self::on_device`] holds it.
    loss: f64,
    lr: f64,
    grad_norm: f64,
    tokens: usize,
    /// What the step asked of the device, when traced ([`device_counts`]).
    counted: Option<DeviceCounts>,
    /// The loss and the gradients' global norm still on the device: a GPU step does not
    /// wait for them, they are read back with other steps' ([`Loop::settle`]).
    on_device: Option<[Tensor<B::InnerBackend, 1>; 2]>,
    /// The in-training evaluation done after this step.
    eval: Option<(String, f64)>,
    /// Training seconds and tokens per second of the run when the step ended.
    seconds: f64,
    tokens_per_s: f64,
}

/// What clipping gives a step's update and metrics line.
struct Clipped<B: AutodiffBackend> {
    /// The gradients' global norm before clipping, read back (NaN on a GPU).
    norm: f64,
    /// On a GPU: the loss and the norm, still there (read back by [`Loop::settle`]).
    on_device: Option<[Tensor<B::InnerBackend, 1>; 2]>,
    /// On a GPU with a bound: what the update multiplies every gradient by.
    factor: Option<Tensor<B::InnerBackend, 1>>,
}

/// What a step's backward pass gives its optimizer step and metrics line.
struct Backward<B: AutodiffBackend> {
    grads: GradientsParams,
    /// The loss, still on the device (a GPU step's, read back by [`Loop::settle`]).
    kept: Option<Tensor<B::InnerBackend, 1>>,
    /// The loss read back (NaN while `kept` holds it), summed over the data-parallel peers.
    value: f64,
    /// The step's tokens, summed over the data-parallel peers.
    tokens: usize,
}

/// Steps whose loss and norm a GPU run keeps on the device before reading them back in one
/// transfer (and checking that they are finite). A checkpoint, an evaluation and the end of
/// training read them back at once; so does every step on the CPU backends, where a read
/// costs nothing.
const READ_EVERY: usize = 25;

/// Whether reading a tensor back costs nothing: the CPU backends (ndarray, flex), whose
/// tensors are in host memory already.
fn host_backend<B: AutodiffBackend>() -> bool {
    let id = std::any::TypeId::of::<B::InnerBackend>();
    #[cfg(feature = "flex")]
    if id == std::any::TypeId::of::<burn::backend::Flex>() {
        return true;
    }
    id == std::any::TypeId::of::<burn::backend::NdArray<f32>>()
}

/// What the device was asked for: kernels launched, tensors read back, kernels compiled and
/// autotune keys tuned (so far, or in one step).
#[derive(Debug, Clone, Copy)]
struct DeviceCounts {
    launches: u64,
    reads: u64,
    compiled: u64,
    tuned: u64,
}

impl DeviceCounts {
    /// What happened between `before` and `self`.
    fn since(self, before: DeviceCounts) -> DeviceCounts {
        DeviceCounts {
            launches: self.launches - before.launches,
            reads: self.reads - before.reads,
            compiled: self.compiled - before.compiled,
            tuned: self.tuned - before.tuned,
        }
    }
}

/// The counts so far, once the device has finished what was queued (burn's fusion runs
/// queued operations lazily: the sync puts each launch in the step that queued it); `None`
/// unless `HARNESS_GPU_TRACE` counts launches.
fn device_counts<B: AutodiffBackend>(device: &B::Device) -> Option<DeviceCounts> {
    if !harness_model::gpu::tracing() {
        return None;
    }
    B::sync(device).ok()?;
    // `launches` first: it waits for cubecl's logging thread, which carries all three logs.
    let launches = harness_model::gpu::launches()?;
    Some(DeviceCounts {
        launches,
        reads: harness_model::gpu::host_reads(),
        compiled: harness_model::gpu::compiled()?,
        tuned: harness_model::gpu::tuned()?,
    })
}

impl<'p, B: AutodiffBackend> Loop<'p, B> {
    fn model(&self) -> &System<B> {
        self.model
            .as_ref()
            .expect("the model is back after each step")
    }

    /// A fresh model and optimizer, or the newest checkpoint's (resume).
    fn resume(
        plan: &'p Plan,
        device: &B::Device,
        opts: &Options<'_, B>,
        peer: Option<Peer>,
    ) -> Result<Self, TrainError> {
        let leads = peer.as_ref().is_none_or(|p| p.leads());
        let recipe = &plan.recipe;
        let spec = recipe.optimizer.clone().ok_or_else(|| {
            TrainError::recipe(
                "optimizer",
                "missing",
                "add `optimizer: {kind: adam, lr: 0.001}`",
            )
        })?;
        let checkpoints = opts.run_dir.join("checkpoints");
        let metrics_path = opts.run_dir.join("train").join("metrics.jsonl");
        if leads {
            // A link at the run's `train/` is refused, not written through.
            harness_core::nofollow::Dir::open_below(
                &opts.run_dir,
                std::path::Path::new("train"),
                true,
            )
            .map_err(|e| io(&opts.run_dir, e))?;
        }
        let losses = build_losses(plan, &opts.objectives)?;
        let mut model: System<B> = plan.system.init(recipe.seed, device);
        let mut optim = AnyOptimizer::<System<B>, B>::from_spec(&spec);
        let mut state = fresh_state(plan);
        let mut inner: std::collections::BTreeMap<usize, AnyOptimizer<System<B>, B>> = plan
            .tasks
            .iter()
            .enumerate()
            .filter(|(_, t)| t.inner.is_some())
            .map(|(i, _)| (i, AnyOptimizer::from_spec(&spec)))
            .collect();
        let mut last_checkpoint = None;
        // A run starting afresh ignores a list an earlier run left; a resumed one goes on
        // from its list (steps evaluated after its checkpoint are measured again alike, and
        // only a better score replaces an entry).
        let mut best_encoders = None;
        if let Some(dir) = checkpoint::latest(&checkpoints) {
            best_encoders = BestEncoders::read(&checkpoints)?;
            model = checkpoint::load_model(&dir, model, device)?;
            optim = checkpoint::load_optim(&dir, optim, device)?;
            for (i, o) in std::mem::take(&mut inner) {
                let o = checkpoint::load_inner(&dir, &plan.tasks[i].name, o, device)?;
                inner.insert(i, o);
            }
            state = checkpoint::read_state(&dir)?;
            last_checkpoint = Some(dir);
        } else if let Some(start) = &plan.pretrained {
            // A fresh run's `pretrained` encoders start from the model's (or base run's)
            // weights.
            model = start.start(model, &pretrained_encoders(plan), device)?;
        }
        let metrics = if leads {
            Some(open_metrics(&metrics_path, state.step)?)
        } else {
            None
        };
        let session = Outcome {
            steps: state.step,
            session_steps: 0,
            session_tokens: 0,
            session_seconds: 0.0,
            interrupted: false,
            checkpoint: last_checkpoint,
            last_loss: f64::NAN,
            kernel_shapes_tuned: None,
        };
        Ok(Loop {
            plan,
            spec,
            losses,
            model: Some(model),
            optim,
            inner,
            state,
            checkpoints,
            metrics_path,
            metrics,
            session,
            smoothed: None,
            keep: opts.keep,
            best_encoders,
            peer,
            pending: Vec::new(),
        })
    }

    /// One update: the drawn task's batch, its loss (with its joint tasks'), backward,
    /// clipping and the optimizer step. A stage starts with a fresh optimizer (each stage
    /// is its own optimisation, like a separate training run), and every step of a stage
    /// that freezes parameter groups keeps them out of the backward pass.
    fn step(&mut self, device: &B::Device) -> Result<Stepped<B>, TrainError> {
        let plan = self.plan;
        let started = Instant::now();
        let step = self.state.step;
        let stage = self.enter_stage(step);
        let local = step - stage.start;
        let t = stage.mixture.pick(local);
        let task = &plan.tasks[t];
        let data = task.data.as_ref().ok_or_else(|| {
            TrainError::recipe(
                "tasks",
                "the mixture picked a joint task",
                "report this as a bug",
            )
        })?;
        let inner_loops = self.run_inner_loops(t, device)?;
        let (batch, next) = data.batch_at(self.position(&task.name))?;
        let (examples, index) = batch.parts();
        let whole = index;
        let index = self.peer_shard(index, &task.name, step)?;
        let own = self.own_batches(t)?;
        let mut noise = Noise::new(plan.recipe.seed, step);
        let frozen = self.freeze_inner_groups(stage, &inner_loops);
        let model = self
            .model
            .as_ref()
            .expect("the model is back after each step");
        let mut ctx = Step::new(
            model,
            plan,
            task,
            (examples, index),
            &frozen,
            &mut noise,
            device,
        );
        if let Some(p) = &self.peer {
            ctx = ctx.with_peer(p.clone(), whole);
        }
        for (j, b, _) in &own {
            ctx = ctx.with_own(*j, &plan.tasks[*j], b.parts());
        }
        let loss = self.weighted_loss(&mut ctx, t)?;
        let tokens = ctx.tokens();
        let deferred = ctx.take_deferred();
        let mut pass = self.backward(&loss, tokens, ctx.gathered(), step, t, device)?;
        let clipped = self.clip_gradients(&mut pass.grads, pass.kept);
        let lr = self.update(stage, local, pass.grads, clipped.factor, deferred);
        self.state.positions.insert(task.name.clone(), next);
        for (j, _, n) in own {
            self.state.positions.insert(plan.tasks[j].name.clone(), n);
        }
        self.count_step(pass.tokens, started);
        Ok(Stepped {
            step,
            task: t,
            loss: pass.value,
            lr,
            grad_norm: clipped.norm,
            tokens: pass.tokens,
            counted: None,
            on_device: clipped.on_device,
            eval: None,
            seconds: self.state.seconds,
            tokens_per_s: self.session.tokens_per_second(),
        })
    }

    /// Where task `name`'s next batch starts.
    fn position(&self, name: &str) -> crate::data::Position {
        self.state.positions.get(name).copied().unwrap_or_default()
    }

    /// The batches of the tasks joint with task `t` that draw batches of their own: each
    /// task's index, its next batch and the position after it.
    fn own_batches(
        &self,
        t: usize,
    ) -> Result<Vec<(usize, crate::data::Batch<'p>, crate::data::Position)>, TrainError> {
        let plan = self.plan;
        plan.tasks[t]
            .joint
            .iter()
            .filter_map(|&j| {
                let d = plan.tasks[j].data.as_ref()?;
                Some(
                    d.batch_at(self.position(&plan.tasks[j].name))
                        .map(|(b, n)| (j, b, n)),
                )
            })
            .collect()
    }

    /// The groups the main update of a step in `stage` leaves alone: the stage's frozen
    /// ones and those of the inner loops just run (`inner_loops`), which the model then
    /// keeps out of the backward pass too.
    fn freeze_inner_groups(&mut self, stage: &StagePlan, inner_loops: &[usize]) -> Vec<Group> {
        let mut frozen = stage.frozen.clone();
        if !inner_loops.is_empty() {
            for &k in inner_loops {
                let inner = self.plan.tasks[k].inner.as_ref().expect("filtered above");
                frozen.extend(inner.trains.iter().copied());
            }
            self.model = self.model.take().map(|m| m.with_frozen(&frozen));
        }
        frozen
    }

    /// The loss of a step of task `t` (with its joint tasks'); on a data-parallel peer,
    /// weighted by the shard's share of the batch.
    fn weighted_loss(&self, ctx: &mut Step<'_, B>, t: usize) -> Result<Tensor<B, 1>, TrainError> {
        let loss = step_loss(ctx, self.plan, &self.losses, t)?;
        // Data-parallel: the shard's loss weighted by its share of the batch's count, so
        // that the gradients summed over the peers are the whole batch's.
        Ok(match &self.peer {
            // A loss that gathered the whole batch is the whole batch's already.
            Some(_) if ctx.gathered() => loss,
            None => loss,
            Some(p) => {
                let count = self.losses[t].averaged_over(ctx)?;
                let total = p.sum("the batch's count", &[count])?[0];
                loss * shard_weight(count, total)
            }
        })
    }

    /// The backward pass of `loss` (of a step of task `t`, over `tokens` tokens; `gathered`:
    /// whether a loss gathered the whole batch): the loss read back (except on a GPU), checked
    /// to be finite, and the gradients, summed over the data-parallel peers.
    fn backward(
        &self,
        loss: &Tensor<B, 1>,
        mut tokens: usize,
        gathered: bool,
        step: u64,
        t: usize,
        device: &B::Device,
    ) -> Result<Backward<B>, TrainError> {
        let task = &self.plan.tasks[t];
        // On a GPU the loss stays there (read back by `settle`); the CPU reads it now.
        let device_side = self.peer.is_none() && !host_backend::<B>();
        let kept = device_side.then(|| loss.clone().inner());
        let mut value: f64 = if device_side {
            f64::NAN
        } else {
            host_scalar(loss.clone())
        };
        let grads = match &self.peer {
            None => {
                if !device_side && !value.is_finite() {
                    return Err(TrainError::Diverged {
                        step,
                        task: task.name.clone(),
                        value,
                    });
                }
                GradientsParams::from_grads(loss.backward(), self.model())
            }
            Some(p) => {
                // The batch's loss and tokens are the sums over the peers; a shard whose loss
                // is not finite makes it so on every peer, which all stop alike.
                // (Every peer's gathered loss is the whole batch's: the first peer's counts.)
                let mine = if gathered && !p.leads() { 0.0 } else { value };
                let sums = p.sum("the batch's loss and tokens", &[mine, tokens as f64])?;
                (value, tokens) = (sums[0], sums[1].round() as usize);
                if !value.is_finite() {
                    return Err(TrainError::Diverged {
                        step,
                        task: task.name.clone(),
                        value,
                    });
                }
                let mut grads = GradientsParams::from_grads(loss.backward(), self.model());
                p.reduce_gradients(self.model(), &mut grads, device)?;
                grads
            }
        };
        Ok(Backward {
            grads,
            kept,
            value,
            tokens,
        })
    }

    /// Scales the embeddings' gradients (`embedding_grad_scale`) and clips the gradients'
    /// global norm: on the CPU in place, on a GPU (the loss `kept` there) by the factor
    /// the update is to multiply them by ([`clip_global_norm_on_device`]).
    fn clip_gradients(
        &self,
        grads: &mut GradientsParams,
        kept: Option<Tensor<B::InnerBackend, 1>>,
    ) -> Clipped<B> {
        if self.spec.embedding_grad_scale != 1.0 {
            let tables = self
                .model()
                .encoders
                .iter()
                .flat_map(|e| e.embedding_tables());
            scale_gradients(grads, self.spec.embedding_grad_scale, tables);
        }
        match kept {
            Some(loss) => {
                let (norm, factor) =
                    clip_global_norm_on_device(self.model(), grads, self.spec.grad_clip);
                Clipped {
                    norm: f64::NAN,
                    on_device: Some([loss, norm]),
                    factor,
                }
            }
            None => Clipped {
                norm: clip_global_norm(self.model(), grads, self.spec.grad_clip),
                on_device: None,
                factor: None,
            },
        }
    }

    /// The optimizer step of step `local` of `stage` at the stage's learning rate (each
    /// gradient multiplied by `factor` first, when given), then the head weights a loss
    /// `deferred` to after it; returns the learning rate.
    fn update(
        &mut self,
        stage: &StagePlan,
        local: u64,
        grads: GradientsParams,
        factor: Option<Tensor<B::InnerBackend, 1>>,
        deferred: Vec<(usize, Tensor<B::InnerBackend, 2>)>,
    ) -> f64 {
        let mut spec = self.spec.clone();
        if let Some(lr) = stage.lr {
            spec.lr = lr;
        }
        let lr = learning_rate(&spec, local, stage.steps, stage.steps_per_epoch);
        self.model = self
            .model
            .take()
            .map(|m| self.optim.step(lr, m, grads, factor));
        for (head, weight) in deferred {
            self.model = self.model.take().map(|m| m.with_head_weight(head, weight));
        }
        lr
    }

    /// Enters the stage of step `step`: a fresh optimizer at the first step of every stage
    /// but the first, the stage's encoder copies before its first update, and its frozen
    /// groups out of training.
    fn enter_stage(&mut self, step: u64) -> &'p StagePlan {
        let plan = self.plan;
        let stage = plan.stage_at(step);
        if step == stage.start && stage.start > 0 {
            self.optim = AnyOptimizer::from_spec(&self.spec);
        }
        self.state.stage = stage.number;
        // The stage's copies happen before its first update (a run resumed from the
        // checkpoint at the end of the previous stage makes them here too).
        if step == stage.start {
            for &(target, source) in &stage.init {
                self.model = self.model.take().map(|m| m.copy_encoder(target, source));
            }
        }
        if plan.freezes() {
            self.model = self.model.take().map(|m| m.with_frozen(&stage.frozen));
        }
        stage
    }

    /// The inner loops of a step of task `t`: the task's own, then those of the tasks joint
    /// with it, each alone on its groups (Emu Algorithm 1: the critic before the encoder).
    /// Returns the tasks that have one, in that order.
    fn run_inner_loops(&mut self, t: usize, device: &B::Device) -> Result<Vec<usize>, TrainError> {
        let plan = self.plan;
        let inner_loops: Vec<usize> = std::iter::once(t)
            .chain(plan.tasks[t].joint.iter().copied())
            .filter(|&k| plan.tasks[k].inner.is_some())
            .collect();
        for &k in &inner_loops {
            let inner = plan.tasks[k].inner.as_ref().expect("filtered above");
            self.inner_loop(t, k, inner, device)?;
        }
        Ok(inner_loops)
    }

    /// The examples of a batch (`index`, of task `task` at step `step`) that this loop
    /// computes: all of them on one device, a data-parallel peer's shard otherwise. Every
    /// peer sees the same batch, so all refuse one too small alike, before any all-reduce.
    fn peer_shard<'b>(
        &self,
        index: &'b [u32],
        task: &str,
        step: u64,
    ) -> Result<&'b [u32], TrainError> {
        match &self.peer {
            None => Ok(index),
            Some(p) if index.len() < p.peers => Err(TrainError::recipe(
                "train.batch_tokens",
                format!(
                    "step {step}: a batch of task `{task}` holds {} examples, fewer than the {} devices",
                    index.len(),
                    p.peers
                ),
                "raise `train.batch_tokens` (or the task's `batch_size`) or list fewer devices",
            )),
            Some(p) => Ok(crate::parallel::shard(index, p.rank, p.peers)),
        }
    }

    /// Counts a step done, of `tokens` tokens, begun at `started`: in the run's state (saved
    /// with its checkpoints) and in this session's throughput.
    fn count_step(&mut self, tokens: usize, started: Instant) {
        self.state.step += 1;
        self.state.tokens += tokens as u64;
        let secs = started.elapsed().as_secs_f64();
        self.state.seconds += secs;
        self.session.session_steps += 1;
        self.session.session_tokens += tokens as u64;
        self.session.session_seconds += secs;
    }

    /// Reads back the loss and norm of every pending step in one transfer, stops at the
    /// first loss that is not finite (naming its step), and writes the metrics lines. The
    /// wait for the device counts as training time.
    fn settle(&mut self) -> Result<(), TrainError> {
        if self.pending.is_empty() {
            return Ok(());
        }
        let started = Instant::now();
        let mut held = Vec::new();
        let mut owners = Vec::new();
        for (i, s) in self.pending.iter_mut().enumerate() {
            if let Some(pair) = s.on_device.take() {
                held.extend(pair);
                owners.push(i);
            }
        }
        if !held.is_empty() {
            let values = harness_model::gpu::host_read(Tensor::cat(held, 0))
                .convert::<f64>()
                .to_vec::<f64>()
                .unwrap_or_default();
            for (i, pair) in owners.into_iter().zip(values.chunks(2)) {
                if let &[loss, norm] = pair {
                    (self.pending[i].loss, self.pending[i].grad_norm) = (loss, norm);
                }
            }
            let secs = started.elapsed().as_secs_f64();
            self.state.seconds += secs;
            self.session.session_seconds += secs;
        }
        for s in std::mem::take(&mut self.pending) {
            if !s.loss.is_finite() {
                return Err(TrainError::Diverged {
                    step: s.step,
                    task: self.plan.tasks[s.task].name.clone(),
                    value: s.loss,
                });
            }
            self.session.last_loss = s.loss;
            self.smoothed = Some(self.smoothed.map_or(s.loss, |m| 0.95 * m + 0.05 * s.loss));
            self.record(&s)?;
        }
        Ok(())
    }

    /// Task `k`'s inner loop before the main update of a step of task `t` (`k` is `t`, or a
    /// task joint with it): each inner update trains only the loop's groups (everything else
    /// out of the backward pass), on a batch of `t` drawn for it (and, for a joint task
    /// that draws its own, one of its own corpus), with task `k`'s own inner optimizer, then
    /// clips their weights.
    fn inner_loop(
        &mut self,
        t: usize,
        k: usize,
        inner: &InnerPlan,
        device: &B::Device,
    ) -> Result<(), TrainError> {
        let plan = self.plan;
        let task = &plan.tasks[t];
        let own = (k != t).then(|| plan.tasks[k].data.as_ref()).flatten();
        let data = task.data.as_ref().ok_or_else(|| {
            TrainError::recipe(
                format!("tasks.{}", task.name),
                "a joint task cannot have an inner loop",
                "give the task its own corpus",
            )
        })?;
        let frozen: Vec<Group> = plan
            .system
            .all_groups()
            .into_iter()
            .filter(|g| !inner.trains.contains(g))
            .collect();
        let step = self.state.step;
        for i in 0..inner.steps {
            let batch = data.inner_batch(step, i)?;
            let own_batch = own.map(|o| o.inner_batch(step, i)).transpose()?;
            // Its own random stream (dropout), apart from the main update's (and from
            // another joint task's loop).
            let loop_key = if k == t { 0 } else { (k as u64 + 1) << 40 };
            let mut noise = Noise::new(
                plan.recipe.seed ^ 0x6a09_e667_f3bc_c908 ^ loop_key,
                step.wrapping_mul(1 << 16).wrapping_add(i as u64),
            );
            let model = self.model.take().map(|m| m.with_frozen(&frozen));
            self.model = model;
            let model = self
                .model
                .as_ref()
                .expect("the model is back after each step");
            let mut ctx = Step::new(
                model,
                plan,
                task,
                batch.parts(),
                &frozen,
                &mut noise,
                device,
            );
            if let Some(b) = &own_batch {
                ctx = ctx.with_own(k, &plan.tasks[k], b.parts());
            }
            ctx.set_current((k != t).then_some(k));
            let precision = harness_model::precision::autocast(plan.recipe.precision().is_bf16());
            let loss = self.losses[k].inner_loss(&mut ctx)?;
            drop(precision);
            let value: f64 = host_scalar(loss.clone());
            if !value.is_finite() {
                return Err(TrainError::Diverged {
                    step,
                    task: format!("{} (inner update {})", plan.tasks[k].name, i + 1),
                    value,
                });
            }
            let grads = GradientsParams::from_grads(loss.backward(), model);
            let optim = self
                .inner
                .get_mut(&k)
                .expect("an inner optimizer per inner loop");
            let updated = self
                .model
                .take()
                .map(|m| optim.step(inner.lr, m, grads, None));
            self.model = match inner.clip {
                Some(c) => updated.map(|m| m.clamp_groups(&inner.trains, c)),
                None => updated,
            };
        }
        Ok(())
    }

    /// The recipe's best-checkpoint metric, when an evaluation is due; records a new best.
    fn evaluate(
        &mut self,
        opts: &mut Options<'_, B>,
        eval_every: u64,
        bar: &indicatif::ProgressBar,
    ) -> Result<Option<(String, f64)>, TrainError> {
        let step = self.state.step;
        let due =
            eval_every > 0 && (step.is_multiple_of(eval_every) || step == self.plan.total_steps);
        let Some(f) = opts.evaluate.as_mut().filter(|_| due) else {
            return Ok(None);
        };
        let Some(evaluation) = bar.suspend(|| f(&self.model().valid(), step))? else {
            return Ok(None);
        };
        if let Some((metric, lower, scores)) = &evaluation.per_language {
            self.select_per_language(metric, *lower, scores)?;
        }
        let Some((name, v, lower)) = evaluation.best else {
            return Ok(None);
        };
        let better =
            self.state
                .best
                .as_ref()
                .is_none_or(|b| if lower { v < b.value } else { v > b.value });
        if better {
            self.state.best = Some(Best {
                metric: name.clone(),
                value: v,
                step,
                lower_is_better: lower,
            });
        }
        Ok(Some((name, v)))
    }

    /// Keeps each `model.languages` encoder that this step's stage trains, whose language
    /// scored better than at its recorded best (XNLI §5.1: model selection on each target
    /// language's validation set).
    fn select_per_language(
        &mut self,
        metric: &str,
        lower: bool,
        scores: &std::collections::BTreeMap<String, f64>,
    ) -> Result<(), TrainError> {
        let step = self.state.step;
        let mut list = self
            .best_encoders
            .take()
            .filter(|l| l.metric == metric && l.lower_is_better == lower)
            .unwrap_or_else(|| BestEncoders::new(metric, lower));
        for (language, i) in &self.plan.system.languages {
            let Some(&value) = scores.get(language) else {
                continue;
            };
            let name = &self.plan.system.encoders[*i].0;
            if self.plan.trains_encoder(step, *i) && value.is_finite() && list.improves(name, value)
            {
                let model = self
                    .model
                    .as_ref()
                    .expect("the model is back after each step");
                list.record(
                    &self.checkpoints,
                    name,
                    language,
                    step,
                    value,
                    &model.encoders[*i],
                )?;
            }
        }
        self.best_encoders = Some(list);
        Ok(())
    }

    /// Appends the step's line to `train/metrics.jsonl`.
    fn record(&mut self, s: &Stepped<B>) -> Result<(), TrainError> {
        let Some(metrics) = self.metrics.as_mut() else {
            return Ok(());
        };
        let line = MetricLine {
            step: s.step + 1,
            task: &self.plan.tasks[s.task].name,
            loss: s.loss,
            lr: s.lr,
            grad_norm: s.grad_norm,
            tokens: s.tokens,
            tokens_per_s: s.tokens_per_s,
            seconds: s.seconds,
            eval: s.eval.as_ref().map(|(n, v)| (n.as_str(), *v)),
            launches: s.counted.map(|c| c.launches),
            host_reads: s.counted.map(|c| c.reads),
            kernels_compiled: s.counted.map(|c| c.compiled),
            keys_tuned: s.counted.map(|c| c.tuned),
        };
        let mut text = serde_json::to_string(&line).map_err(|e| TrainError::Checkpoint {
            path: self.metrics_path.clone(),
            detail: format!("a metrics line did not serialize ({e})"),
        })?;
        text.push('\n');
        metrics
            .write_all(text.as_bytes())
            .map_err(|e| io(&self.metrics_path, e))
    }

    /// Writes a checkpoint of the model, the optimizer and the loop's state.
    fn checkpoint(&mut self) -> Result<(), TrainError> {
        // Never a checkpoint of weights that a pending step's non-finite loss reached.
        self.settle()?;
        // Only the first data-parallel peer writes (every peer holds the same state).
        let Some(metrics) = self.metrics.as_mut() else {
            return Ok(());
        };
        metrics.flush().map_err(|e| io(&self.metrics_path, e))?;
        let inner: Vec<(&str, &AnyOptimizer<System<B>, B>)> = self
            .inner
            .iter()
            .map(|(i, o)| (self.plan.tasks[*i].name.as_str(), o))
            .collect();
        self.session.checkpoint = Some(checkpoint::save(
            &self.checkpoints,
            self.model(),
            &self.optim,
            &inner,
            &self.state,
            self.keep,
        )?);
        Ok(())
    }
}

/// Trains `plan` on `device`, resuming from the newest checkpoint in the run directory.
pub fn train<B: AutodiffBackend>(
    plan: &Plan,
    device: &B::Device,
    opts: Options<'_, B>,
) -> Result<Outcome, TrainError> {
    train_peer(plan, device, opts, None)
}
/// The state of a run that starts afresh: step 0 of the first stage, every task at its start.
fn fresh_state(plan: &Plan) -> TrainState {
    TrainState {
        step: 0,
        positions: plan
            .tasks
            .iter()
            .filter(|t| t.data.is_some())
            .map(|t| (t.name.clone(), Default::default()))
            .collect(),
        seed: plan.recipe.seed,
        tokens: 0,
        seconds: 0.0,
        best: None,
        stage: plan.stage_at(0).number,
    }
}

/// `metrics.jsonl` cut after `step` (the steps a resumed run does again) and open to append.
fn open_metrics(path: &Path, step: u64) -> Result<std::fs::File, TrainError> {
    truncate_metrics(path, step)?;
    std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(path)
        .map_err(|e| io(path, e))
}

/// Whether training stops here for Ctrl-C. Data-parallel peers stop together: each sees
/// Ctrl-C at its own moment, so they agree on it (a sum over the peers) before the step.
fn interrupted(peer: Option<&Peer>) -> Result<bool, TrainError> {
    let interrupted = harness_core::signal::interrupted();
    Ok(match peer {
        None => interrupted,
        Some(p) => p.sum("Ctrl-C", &[f64::from(u8::from(interrupted))])?[0] > 0.0,
    })
}

/// The training progress bar at `step` of `total` (hidden unless `shown`).
fn progress_bar(shown: bool, total: u64, step: u64) -> harness_core::progress::Bar {
    if !shown {
        return harness_core::progress::Bar::hidden();
    }
    let b = harness_core::progress::bar(total, "train [{bar:30}] step {pos}/{len} {msg} ETA {eta}");
    b.set_position(step);
    b
}

/// [`train`] as one peer of a data-parallel run (`crate::parallel`), or alone (`None`).
pub(crate) fn train_peer<B: AutodiffBackend>(
    plan: &Plan,
    device: &B::Device,
    mut opts: Options<'_, B>,
    peer: Option<Peer>,
) -> Result<Outcome, TrainError> {
    let train_spec = plan.recipe.train.clone().ok_or_else(|| {
        TrainError::recipe(
            "train",
            "missing",
            "add `train: {steps: 1000, batch_tokens: 2000}`",
        )
    })?;
    // Each step allocates and frees the same large buffers: keep them in the process (a
    // no-op when this process's `main` already did it).
    harness_core::memory::keep_freed_memory();
    let mut l = Loop::resume(plan, device, &opts, peer)?;
    let total = plan.total_steps;
    let bar = progress_bar(opts.progress, total, l.state.step);
    // A GPU's first steps can stand still for minutes while kernels compile and tune.
    let on_device = harness_model::gpu::on_device::<B>();
    let tuning = on_device.then(|| bar.ticker(harness_model::gpu::tuning_message));
    let tuned_before = on_device.then(harness_model::gpu::tuned_keys);
    let ckpt_every = train_spec.checkpoint_every.unwrap_or(0);
    let eval_every = train_spec.eval_every.unwrap_or(0);
    while l.state.step < total {
        // `--stop-after N` stops once N steps are done in all: `--stop-after 0` prepares
        // (corpora, tokenizer) and trains none, and a resumed run already past N trains none.
        if opts.stop_after.is_some_and(|s| l.state.step >= s) {
            break;
        }
        if interrupted(l.peer.as_ref())? {
            harness_core::note!("interrupted: saving a checkpoint at step {}", l.state.step);
            l.checkpoint()?;
            l.session.interrupted = true;
            break;
        }
        let before = device_counts::<B>(device);
        let mut stepped = l.step(device)?;
        if let (Some(b), Some(a)) = (before, device_counts::<B>(device)) {
            stepped.counted = Some(a.since(b));
        }
        // A panic on a GPU backend's device thread leaves this thread with whatever the
        // buffers held: stop before it reaches metrics.jsonl or a checkpoint.
        if let Some(detail) = harness_core::device::device_failure() {
            return Err(TrainError::DeviceFailed {
                step: l.state.step,
                detail,
            });
        }
        stepped.eval = l.evaluate(&mut opts, eval_every, &bar)?;
        let evaluated = stepped.eval.is_some();
        l.pending.push(stepped);
        let step = l.state.step;
        if evaluated
            || l.pending.len() >= READ_EVERY
            || step >= total
            || opts.stop_after.is_some_and(|s| step >= s)
        {
            l.settle()?;
        }
        bar.set_position(step);
        // A GPU run's first losses are still on the device until the first read-back.
        bar.set_message(match l.smoothed {
            Some(loss) => format!(
                "loss {loss:.3} | {:.0} tok/s",
                l.session.tokens_per_second()
            ),
            None => format!("{:.0} tok/s", l.session.tokens_per_second()),
        });
        // A checkpoint is due on the cadence, at the end of each stage, and whenever a new
        // best was found (the best step must exist on disk).
        let new_best = l.state.best.as_ref().is_some_and(|b| b.step == step);
        let stage_end = plan.stages.iter().any(|s| s.start + s.steps == step);
        if (ckpt_every > 0 && step.is_multiple_of(ckpt_every)) || stage_end || new_best {
            l.checkpoint()?;
        }
        if opts.stop_after.is_some_and(|s| step >= s) {
            break;
        }
    }
    l.settle()?;
    drop(tuning);
    bar.finish_and_clear();
    // A run of zero steps (the untrained baseline) still leaves a checkpoint to evaluate.
    if l.session.checkpoint.is_none() && l.state.step >= total {
        l.checkpoint()?;
    }
    l.session.steps = l.state.step;
    l.session.kernel_shapes_tuned =
        tuned_before.map(|b| harness_model::gpu::tuned_keys().saturating_sub(b));
    Ok(l.session)
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
        // Conversation turns: "question" → "answer" about the same number.
        let turns: Vec<Bitext> = (0..n)
            .map(|i| Bitext {
                source: format!(
                    "how many cats are {} {}",
                    NUMS[i % 8].1,
                    NUMS[(i / 8) % 8].1
                ),
                target: format!(
                    "there are {} and {} cats",
                    NUMS[i % 8].1,
                    NUMS[(i / 8) % 8].1
                ),
            })
            .collect();
        m.insert("chat".to_string(), Loaded::Conversation(turns));
        // Running text: each document counts up from a number.
        let docs: Vec<Vec<String>> = (0..n.div_ceil(4))
            .map(|d| {
                (0..6)
                    .map(|k| {
                        format!(
                            "now comes {} then {}",
                            NUMS[(d + k) % 8].1,
                            NUMS[(d * 3 + k) % 8].1
                        )
                    })
                    .collect()
            })
            .collect();
        m.insert("text".to_string(), Loaded::Text(docs));
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
    chat: {{dataset: conversation-pairs}}
    text: {{dataset: monolingual-sentences}}
model:
  encoder: {{kind: bilstm, layers: 2, hidden: 8, embed: 8, pool: max}}
  decoder: {{kind: lstm, layers: 1, hidden: 16, embed: 8, lang_embed: 4, targets: [eng]}}
  heads:
    nli: {{kind: mlp, hidden: [8], classes: 3, features: pair}}
    project: {{kind: mlp, hidden: [12, 16]}}
    project2: {{kind: mlp, hidden: [16]}}
tasks:
{tasks}
optimizer: {{kind: adam, lr: 0.01, dropout: {dropout}, grad_clip: 1.0}}
train: {train}
"
        );
        serde_yaml::from_str(&yaml).expect("test recipe")
    }

    fn plan(r: &Recipe, n: usize, dir: &Path) -> Plan {
        let loaded = corpora(n);
        let tok = tokenizer_for(r, &loaded, &dir.join("tokenizer.json")).unwrap();
        compile_plan(r, &tok, &loaded, crate::objectives::ALL).unwrap()
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

    /// What `read` takes from the first batch of `plan`'s first task in one pass (a GPU's
    /// way, [`Step::encode_sides`]) and in a pass per side, once both have read the same
    /// tokens and left the noise stream in the same place (a later draw of the step, a
    /// decoder's dropout, takes the same mask).
    fn one_pass_and_own<T>(plan: &Plan, read: impl Fn(&mut Step<'_, B>) -> T) -> (T, T) {
        let dev = Default::default();
        let model = plan.system.init::<B>(0, &dev);
        let task = &plan.tasks[0];
        let (batch, _) = task
            .data
            .as_ref()
            .unwrap()
            .batch_at(Default::default())
            .unwrap();
        let (examples, index) = batch.parts();
        assert!(index.len() > 1, "a batch of one pair says little");
        let encode = |merged: bool| {
            let mut noise = Noise::new(7, 1);
            let mut step = Step::new(&model, plan, task, (examples, index), &[], &mut noise, &dev)
                .merging_sides(merged);
            let out = read(&mut step);
            let tokens = step.tokens();
            (out, tokens, noise.mask(9, 0.5))
        };
        let (one, tokens, next) = encode(true);
        let (own, own_tokens, own_next) = encode(false);
        assert_eq!(tokens, own_tokens);
        assert_eq!(
            next, own_next,
            "the stream goes on where the own passes left it"
        );
        (one, own)
    }

    /// The largest difference between two tensors' elements.
    fn max_diff<const D: usize>(x: Tensor<B, D>, y: Tensor<B, D>) -> f32 {
        assert_eq!(x.dims(), y.dims());
        (x - y).abs().max().into_scalar()
    }

    /// [`Step::encode_sides`] in one pass (a GPU's way) gives each side the encodings of its
    /// own pass, with and without dropout (each side's masks drawn as its own pass would).
    #[test]
    fn sides_encoded_in_one_pass_are_their_own_passes() {
        use crate::step::Side;
        let dir = tempfile::tempdir().unwrap();
        let tasks = "  - {name: rank, objective: ranking_softmax, corpus: pairs, weight: 1.0}";
        let encoders = [
            None,
            Some("{kind: lstm, layers: 3, hidden: 6, embed: 8, bidirectional_first: true, pool: mean}"),
            Some("{kind: cbow, embed: 8, pool: mean}"),
            Some("{kind: transformer, layers: 2, d_model: 8, d_ff: 12, heads: 2, pool: mean}"),
            // Clipped to 4 tokens: both sides' widths.
            Some("{kind: transformer, layers: 1, d_model: 8, d_ff: 12, heads: 2, pool: mean, max_len: 4}"),
        ];
        for (dropout, encoder) in [0.0, 0.2]
            .into_iter()
            .flat_map(|d| encoders.map(|e| (d, e)))
        {
            let mut r = recipe(tasks, "{steps: 1, batch_tokens: 200}", dropout);
            if let Some(e) = encoder {
                r.model.as_mut().unwrap().encoder = serde_yaml::from_str(e).unwrap();
            }
            let plan = plan(&r, 24, dir.path());
            let (one_pass, own_passes) = one_pass_and_own(&plan, |step| {
                step.encode_sides([Side::First, Side::Second]).unwrap()
            });
            for (a, b) in one_pass.iter().zip(&own_passes) {
                assert_eq!(a.mask.to_data(), b.mask.to_data());
                let sentence = max_diff(a.sentence.clone(), b.sentence.clone());
                let states = max_diff(a.states.clone(), b.states.clone());
                for diff in [sentence, states] {
                    assert!(
                        diff < 1e-5,
                        "dropout {dropout}: one pass differs from its own by {diff}"
                    );
                }
            }
            // The test says something: the two sides are of different widths here (but
            // where the encoder clips them).
            let widths = one_pass.map(|e| e.mask.dims()[1]);
            if encoder.is_some_and(|e| e.contains("max_len: 4")) {
                assert_eq!(widths, [4, 4]);
            } else {
                assert_ne!(widths[0], widths[1]);
            }
        }
    }

    /// [`Step::encode_ranked`] in one pass gives the sources, the targets and the mined hard
    /// negatives the encodings of their own passes, with the same dropout masks.
    #[test]
    fn hard_negatives_encoded_in_the_sides_pass_are_their_own_pass() {
        let dir = tempfile::tempdir().unwrap();
        let tasks = "  - {name: rank, objective: ranking_softmax, corpus: pairs, weight: 1.0, params: {hard_negatives: 2}}";
        let r = recipe(tasks, "{steps: 1, batch_tokens: 200}", 0.2);
        let mut plan = plan(&r, 24, dir.path());
        // Two other examples' targets each, as the miner would name them.
        let data = plan.tasks[0].data.as_mut().unwrap();
        let crate::data::Examples::Pairs(pairs) = &data.examples else {
            panic!("translation pairs in memory")
        };
        let n = pairs.len() as u32;
        data.negatives = Some((0..n).map(|i| vec![(i + 1) % n, (i + 5) % n]).collect());
        let (one_pass, own_passes) = one_pass_and_own(&plan, |step| {
            let ([u, v], extra) = step.encode_ranked().unwrap();
            let extra = extra.expect("mined hard negatives");
            [u.sentence, v.sentence, extra.flatten(0, 1)]
        });
        for (x, y) in one_pass.into_iter().zip(own_passes) {
            let diff = max_diff(x, y);
            assert!(diff < 1e-5, "one pass differs from its own by {diff}");
        }
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
        assert_decreases_in(tasks, 60, 0.5);
    }

    /// The mean of the last five losses is below `ratio` times that of the first five.
    fn assert_decreases_in(tasks: &str, steps: u32, ratio: f64) {
        let r = recipe(
            tasks,
            &format!("{{steps: {steps}, batch_size: 8, max_len: 20}}"),
            0.0,
        );
        let dir = tempfile::tempdir().unwrap();
        let p = plan(&r, 8, dir.path());
        train::<B>(&p, &Default::default(), opts(dir.path(), None)).unwrap();
        let l = losses(dir.path());
        let head: f64 = l[..5].iter().sum::<f64>() / 5.0;
        let tail: f64 = l[l.len() - 5..].iter().sum::<f64>() / 5.0;
        assert!(tail < ratio * head, "{tasks}: loss {head} → {tail}: {l:?}");
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

    #[test]
    fn translation_ranking_overfits_a_tiny_set() {
        assert_decreases_in(
            "  - {name: t, objective: translation_ranking, corpus: pairs, params: {bidirectional: true}}",
            200,
            0.75,
        );
    }

    // The in-batch rankings start from dot products near 0 (uniform ±0.1 weights, no
    // normalisation, as the paper) and this tiny BiLSTM's max-pooled vectors plateau where
    // sentences differing in one word look alike: the check is that the loss clearly falls.
    #[test]
    fn response_ranking_overfits_a_tiny_set() {
        assert_decreases_in(
            "  - {name: r, objective: response_ranking, corpus: chat, params: {head: project}}",
            200,
            0.8,
        );
    }

    #[test]
    fn quick_thought_overfits_a_tiny_set() {
        assert_decreases_in(
            "  - {name: q, objective: quick_thought, corpus: text, params: {input_head: project, previous_head: project2, next_head: project}}",
            200,
            0.92,
        );
    }

    /// The embedding gradient multiplier (multilingual USE §4): one SGD step with the
    /// multiplier at 100 moves the token embeddings 100 times as far as without it, and every
    /// other weight exactly as far.
    #[test]
    fn the_embedding_gradient_multiplier_scales_only_the_embeddings() {
        let tasks = "  - {name: s, objective: l2_similarity, corpus: pairs}";
        let step = |scale: f64| -> (Vec<f32>, Vec<f32>, Vec<f32>, Vec<f32>) {
            let mut r = recipe(tasks, "{steps: 1, batch_size: 8, max_len: 20}", 0.0);
            let o = r.optimizer.as_mut().unwrap();
            o.kind = harness_recipe::schema::OptimizerKind::Sgd;
            o.lr = 0.5;
            o.grad_clip = None;
            o.embedding_grad_scale = scale;
            let dir = tempfile::tempdir().unwrap();
            let p = plan(&r, 8, dir.path());
            train::<B>(&p, &Default::default(), opts(dir.path(), None)).unwrap();
            let dev = Default::default();
            let init = p.system.init::<NdArray<f32>>(p.recipe.seed, &dev);
            let ck = checkpoint::latest(&dir.path().join("checkpoints")).unwrap();
            let after =
                checkpoint::load_model(&ck, p.system.init::<NdArray<f32>>(0, &dev), &dev).unwrap();
            let split = |m: &System<NdArray<f32>>| {
                let tables = m.encoders[0].embedding_tables();
                let emb = flat(tables[0].val());
                let mut all = Collect(Vec::new());
                m.encoders[0].visit(&mut all);
                (emb, all.0)
            };
            let (e0, a0) = split(&init);
            let (e1, a1) = split(&after);
            (e0, e1, a0, a1)
        };
        let (e0, e1, a0, a1) = step(1.0);
        let (f0, f1, b0, b1) = step(100.0);
        assert_eq!(e0, f0, "the same initial weights");
        let moved: Vec<(f32, f32)> = e0
            .iter()
            .zip(&e1)
            .zip(&f1)
            .map(|((i, a), b)| (a - i, b - i))
            .filter(|(d, _)| d.abs() > 1e-6)
            .collect();
        assert!(!moved.is_empty(), "the step moved some embeddings");
        for (d1, d100) in moved {
            assert!((d100 / d1 - 100.0).abs() < 0.5, "{d1} vs {d100}");
        }
        // Everything after the embedding table moved as far in both runs.
        let n = e0.len();
        let rest = |x: &[f32], y: &[f32]| -> Vec<f32> {
            x[n..].iter().zip(&y[n..]).map(|(a, b)| b - a).collect()
        };
        let (r1, r100) = (rest(&a0, &a1), rest(&b0, &b1));
        assert!(r1.iter().any(|d| d.abs() > 1e-6));
        for (x, y) in r1.iter().zip(&r100) {
            assert!((x - y).abs() < 1e-5, "{x} vs {y}");
        }
    }

    fn flat<Bk: burn::tensor::backend::Backend>(t: Tensor<Bk, 2>) -> Vec<f32> {
        t.into_data().convert::<f32>().to_vec::<f32>().unwrap()
    }

    /// Weights of the model's encoder `i` in a checkpoint directory.
    fn encoder_weights(plan: &Plan, ck: &Path, i: usize) -> Vec<f32> {
        let dev = Default::default();
        let m =
            checkpoint::load_model(ck, plan.system.init::<NdArray<f32>>(0, &dev), &dev).unwrap();
        let mut c = Collect(Vec::new());
        m.encoders[i].visit(&mut c);
        c.0
    }

    /// The two-stage test: stage 1 trains encoder A (`encoder`) on pairs; stage 2
    /// trains B (`xx`) towards the frozen A. A is bit-identical after stage 2; a run killed
    /// in stage 2 resumes in stage 2 to the uninterrupted run's weights and losses.
    #[test]
    fn two_stages_freeze_and_resume_in_the_second_stage() {
        let tasks = "  - {name: rank, objective: l2_similarity, corpus: pairs}
  - {name: align, stage: 2, objective: l2_similarity, corpus: pairs, encoder: xx, reads: encoder}
stages:
  2: {steps: 8, lr: 0.05, frozen: [encoder]}";
        let mut r = recipe(
            tasks,
            "{steps: 6, batch_size: 4, max_len: 20, checkpoint_every: 3}",
            0.1,
        );
        r.model.as_mut().unwrap().decoder = None;
        r.model.as_mut().unwrap().encoders.insert(
            "xx".into(),
            serde_yaml::from_str("{kind: bilstm, layers: 1, hidden: 8, embed: 8, pool: max}")
                .unwrap(),
        );
        let a = tempfile::tempdir().unwrap();
        let b = tempfile::tempdir().unwrap();
        let pa = plan(&r, 16, a.path());
        let pb = plan(&r, 16, b.path());
        assert_eq!(pa.stages.len(), 2);
        assert_eq!((pa.stages[1].start, pa.total_steps), (6, 14));
        let dev = Default::default();
        train::<B>(&pa, &dev, opts(a.path(), None)).unwrap();
        let ck = |dir: &Path, step| checkpoint::step_dir(&dir.join("checkpoints"), step);
        // Stage 1's end has a checkpoint; A did not move in stage 2, B did.
        let keep_all = |dir: &Path| checkpoint::list(&dir.join("checkpoints")).len();
        assert!(keep_all(a.path()) >= 1);
        let final_a = encoder_weights(&pa, &ck(a.path(), 14), 0);
        let final_b = encoder_weights(&pa, &ck(a.path(), 14), 1);
        // Retrain stage 1 alone to read A at its end (the checkpoint may be pruned).
        let c = tempfile::tempdir().unwrap();
        let pc = plan(&r, 16, c.path());
        train::<B>(&pc, &dev, opts(c.path(), Some(6))).unwrap();
        let stage1_a = encoder_weights(&pc, &ck(c.path(), 6), 0);
        let stage1_b = encoder_weights(&pc, &ck(c.path(), 6), 1);
        assert_eq!(final_a, stage1_a, "the frozen encoder moved in stage 2");
        assert_ne!(final_b, stage1_b, "stage 2 trained nothing");
        // Killed after step 11 (checkpoint at 9, in stage 2), resumed.
        train::<B>(&pb, &dev, opts(b.path(), Some(11))).unwrap();
        let state =
            checkpoint::read_state(&checkpoint::latest(&b.path().join("checkpoints")).unwrap())
                .unwrap();
        assert_eq!((state.step, state.stage), (9, 2));
        let resumed = train::<B>(&pb, &dev, opts(b.path(), None)).unwrap();
        assert_eq!(resumed.session_steps, 5);
        assert_eq!(weights(&pa, a.path()), weights(&pb, b.path()));
        assert_eq!(losses(a.path()), losses(b.path()));
        // The metrics name each stage's task.
        let lines = std::fs::read_to_string(a.path().join("train/metrics.jsonl")).unwrap();
        let tasks: Vec<String> = lines
            .lines()
            .map(|l| {
                serde_json::from_str::<serde_json::Value>(l).unwrap()["task"]
                    .as_str()
                    .unwrap()
                    .to_string()
            })
            .collect();
        assert!(
            tasks[..6].iter().all(|t| t == "rank") && tasks[6..].iter().all(|t| t == "align"),
            "{tasks:?}"
        );
    }

    /// Weights of the model's head `i` in a checkpoint directory.
    fn head_weights_of(plan: &Plan, ck: &Path, i: usize) -> Vec<f32> {
        let dev = Default::default();
        let m =
            checkpoint::load_model(ck, plan.system.init::<NdArray<f32>>(0, &dev), &dev).unwrap();
        let mut c = Collect(Vec::new());
        m.heads[i].visit(&mut c);
        c.0
    }

    /// The XNLI alignment shape: stage 1 trains the English encoder and NLI head (`train`
    /// gives its steps); stage 2 (`stage2` steps) starts target encoder `xx` as a copy of
    /// the English one and aligns it, the English encoder and the head frozen.
    fn alignment_recipe(stage2: u64, train: &str) -> Recipe {
        let tasks = format!("  - {{name: nli, objective: nli_classification, corpus: nli, params: {{head: nli}}}}
  - {{name: align, stage: 2, objective: alignment_l2, corpus: pairs, encoder: xx, reads: encoder, params: {{lambda: 0.25}}}}
stages:
  2: {{steps: {stage2}, frozen: [encoder, heads.nli], init: {{xx: encoder}}}}");
        let mut r = recipe(&tasks, train, 0.1);
        let m = r.model.as_mut().unwrap();
        m.decoder = None;
        m.encoders.insert(
            "xx".into(),
            serde_yaml::from_str("{kind: bilstm, layers: 2, hidden: 8, embed: 8, pool: max}")
                .unwrap(),
        );
        r
    }

    /// The XNLI alignment shape (X-BiLSTM): stage 1 trains the English encoder and its NLI
    /// head; stage 2 starts target encoder `xx` as a copy of it and aligns it with
    /// `alignment_l2`, the English encoder and the head frozen. Both are bit-identical after
    /// stage 2; `xx` starts as the English encoder and then moves; the alignment loss falls.
    #[test]
    fn the_english_encoder_and_head_stay_bit_identical_through_alignment() {
        let r = alignment_recipe(30, "{steps: 6, batch_size: 4, max_len: 20}");
        let dev = Default::default();
        let ck = |dir: &Path, step| checkpoint::step_dir(&dir.join("checkpoints"), step);
        // Stage 1 alone, and the two stages.
        let a = tempfile::tempdir().unwrap();
        let pa = plan(&r, 16, a.path());
        train::<B>(&pa, &dev, opts(a.path(), Some(6))).unwrap();
        let b = tempfile::tempdir().unwrap();
        let pb = plan(&r, 16, b.path());
        assert_eq!(pb.stages[1].init, vec![(1, 0)]);
        train::<B>(&pb, &dev, opts(b.path(), None)).unwrap();
        let nli = pb.system.head_index("nli").unwrap();
        let english = encoder_weights(&pa, &ck(a.path(), 6), 0);
        assert_eq!(english, encoder_weights(&pb, &ck(b.path(), 36), 0));
        assert_eq!(
            head_weights_of(&pa, &ck(a.path(), 6), nli),
            head_weights_of(&pb, &ck(b.path(), 36), nli)
        );
        // Before stage 2, `xx` is untouched and unlike the English encoder; after it, it
        // has moved away from its copy of the English weights.
        let xx_before = encoder_weights(&pa, &ck(a.path(), 6), 1);
        assert_ne!(xx_before, english);
        let xx_after = encoder_weights(&pb, &ck(b.path(), 36), 1);
        assert_ne!(xx_after, english);
        let moved = xx_after
            .iter()
            .zip(&english)
            .map(|(x, e)| (x - e).abs())
            .fold(0f32, f32::max);
        // 30 Adam steps of lr 0.01 move a weight by at most about 0.3.
        assert!(moved > 0.0 && moved < 0.5, "{moved}");
        let l = losses(b.path());
        let head: f64 = l[6..11].iter().sum::<f64>() / 5.0;
        let tail: f64 = l[l.len() - 5..].iter().sum::<f64>() / 5.0;
        assert!(tail < head, "alignment loss {head} → {tail}: {l:?}");
    }

    /// Model selection per language (XNLI §5.1): encoder `xx` (language `de`) keeps its
    /// weights from the evaluation where `de` scored best among those of the stage that
    /// trains it (a higher score in stage 1, where `xx` is untouched, does not count);
    /// loading the run reads them over the checkpoint's, and a changed file is refused.
    #[test]
    fn each_language_keeps_its_encoder_from_its_own_best_evaluation() {
        let mut r = alignment_recipe(12, "{steps: 4, batch_size: 4, max_len: 20, eval_every: 2}");
        let model = r.model.as_mut().unwrap();
        model.languages.insert("de".into(), "xx".into());
        let dir = tempfile::tempdir().unwrap();
        let p = plan(&r, 16, dir.path());
        assert!(!p.trains_encoder(4, 1) && p.trains_encoder(5, 1) && !p.trains_encoder(5, 0));
        // Scores peak at step 10 in stage 2; step 2 (stage 1) scores higher still.
        let score = |step: u64| {
            if step == 2 {
                99.0
            } else {
                50.0 - (step as f64 - 10.0).abs()
            }
        };
        let mut at_best = Vec::new();
        let mut eval = |m: &System<NdArray<f32>>,
                        step: u64|
         -> Result<Option<Evaluation>, TrainError> {
            if step == 10 {
                at_best = values(&m.encoders[1]);
            }
            let scores = [("de".to_string(), score(step)), ("fr".to_string(), 1e9)];
            Ok(Some(Evaluation {
                best: None,
                per_language: Some(("dev.accuracy".into(), false, scores.into_iter().collect())),
            }))
        };
        let base = opts(dir.path(), None);
        let o = Options {
            objectives: base.objectives,
            run_dir: base.run_dir,
            stop_after: None,
            progress: false,
            keep: base.keep,
            evaluate: Some(&mut eval),
        };
        train::<B>(&p, &Default::default(), o).unwrap();
        let checkpoints = dir.path().join("checkpoints");
        let list = BestEncoders::read(&checkpoints).unwrap().unwrap();
        assert_eq!(list.encoders.len(), 1, "{list:?}");
        let xx = &list.encoders["xx"];
        assert_eq!((xx.language.as_str(), xx.step, xx.value), ("de", 10, 50.0));
        // Only the selected file is left.
        let files: Vec<_> = std::fs::read_dir(checkpoints.join("best-encoders"))
            .unwrap()
            .map(|e| e.unwrap().file_name().into_string().unwrap())
            .collect();
        assert_eq!(files, vec![xx.file.clone()]);
        let dev = Default::default();
        let last = checkpoint::load_model(
            &checkpoint::step_dir(&checkpoints, 16),
            p.system.init::<NdArray<f32>>(0, &dev),
            &dev,
        )
        .unwrap();
        let (loaded, _) =
            harness_model::best_encoders::apply(last.clone(), &p.system, &checkpoints, &dev)
                .unwrap();
        assert_eq!(values(&loaded.encoders[1]), at_best);
        assert_ne!(
            values(&last.encoders[1]),
            at_best,
            "the last step's xx differs"
        );
        assert_eq!(values(&loaded.encoders[0]), values(&last.encoders[0]));
        // A weights file that changed after training wrote it is refused.
        let path = BestEncoders::path(&checkpoints, xx);
        let mut bytes = std::fs::read(&path).unwrap();
        let n = bytes.len();
        bytes[n - 1] ^= 1;
        std::fs::write(&path, bytes).unwrap();
        let e = harness_model::best_encoders::apply(last, &p.system, &checkpoints, &dev)
            .unwrap_err()
            .to_string();
        assert!(e.contains("sha256") && e.contains(&xx.file), "{e}");
    }

    /// A module's float parameters, flattened in module order.
    fn values<M: Module<NdArray<f32>>>(m: &M) -> Vec<f32> {
        let mut c = Collect(Vec::new());
        m.visit(&mut c);
        c.0
    }

    /// A test objective with an inner loop (the shape of Emu's adversarial training): the
    /// inner updates train head `head` to call every pair class 0; the main update pulls the
    /// pair together and pushes the (then fixed) head away from class 0.
    #[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
    struct Critic {
        head: String,
        critic_steps: u32,
        clip: f64,
    }

    impl crate::objectives::Objective for Critic {
        const NAME: &'static str = "critic";
        const EXAMPLES: crate::objectives::ExampleKind = crate::objectives::ExampleKind::Pairs;

        fn inner_loop(&self) -> Option<crate::objectives::InnerLoop> {
            Some(crate::objectives::InnerLoop {
                steps: self.critic_steps,
                trains: vec![format!("heads.{}", self.head)],
                lr: 0.05,
                clip: Some(self.clip),
            })
        }
    }

    impl Critic {
        fn class0<Bk: AutodiffBackend>(
            &self,
            step: &mut Step<'_, Bk>,
        ) -> Result<Tensor<Bk, 1>, TrainError> {
            use crate::step::Side;
            let head = step.head(&self.head)?;
            let [u, v] = step
                .encode_sides([Side::First, Side::Second])?
                .map(|e| e.sentence);
            let [n, _] = u.dims();
            let logits = head.forward(u, Some(v), None);
            let zeros = Tensor::<Bk, 1, burn::tensor::Int>::zeros([n], step.device());
            Ok(crate::objectives::nli_classification::classification_ce(
                logits, zeros,
            ))
        }
    }

    impl crate::objectives::Loss for Critic {
        fn loss<Bk: AutodiffBackend>(
            &self,
            step: &mut Step<'_, Bk>,
        ) -> Result<Tensor<Bk, 1>, TrainError> {
            use crate::step::Side;
            let [u, v] = step
                .encode_sides([Side::First, Side::Second])?
                .map(|e| e.sentence);
            let pull = crate::objectives::l2_similarity::l2_similarity(u, v, 1.0);
            Ok(pull - self.class0(step)? * 0.1)
        }

        fn inner_loss<Bk: AutodiffBackend>(
            &self,
            step: &mut Step<'_, Bk>,
        ) -> Result<Tensor<Bk, 1>, TrainError> {
            self.class0(step)
        }
    }

    fn critic_plan(steps: u32, dir: &Path) -> Plan {
        let tasks = format!(
            "  - {{name: adv, objective: critic, corpus: pairs, params: {{head: nli, critic_steps: {steps}, clip: 0.05}}}}"
        );
        let mut r = recipe(
            &tasks,
            "{steps: 8, batch_size: 4, max_len: 20, checkpoint_every: 3}",
            0.0,
        );
        r.model.as_mut().unwrap().decoder = None;
        let loaded = corpora(16);
        let tok = tokenizer_for(&r, &loaded, &dir.join("tokenizer.json")).unwrap();
        const CRITIC: crate::objectives::ObjectiveDef =
            crate::objectives::ObjectiveDef::trainable::<Critic>();
        let mut defs = crate::objectives::ALL.to_vec();
        defs.push(&CRITIC);
        crate::plan::compile_plan(&r, &tok, &loaded, &defs).unwrap()
    }

    fn critic_opts(dir: &Path, stop_after: Option<u64>) -> Options<'static, B> {
        Options {
            objectives: crate::objectives::registry().with::<Critic>(),
            ..opts(dir, stop_after)
        }
    }

    fn head_weights(plan: &Plan, ck: &Path) -> Vec<f32> {
        head_weights_of(plan, ck, 0)
    }

    /// The inner-loop test: the inner updates train only their group and clip it;
    /// the main update leaves that group alone; a killed run resumes to the same weights
    /// (the inner optimizer's state is in the checkpoints).
    #[test]
    fn an_inner_loop_trains_its_group_first_and_alone() {
        let dev = Default::default();
        // No inner update: the main update never touches the head, which keeps its
        // initial weights (some beyond the clip of 0.05).
        let d0 = tempfile::tempdir().unwrap();
        let p0 = critic_plan(0, d0.path());
        train::<B>(&p0, &dev, critic_opts(d0.path(), None)).unwrap();
        let init: Vec<f32> = {
            let m = p0.system.init::<NdArray<f32>>(p0.recipe.seed, &dev);
            let mut c = Collect(Vec::new());
            m.heads[0].visit(&mut c);
            c.0
        };
        let last = |d: &Path| checkpoint::latest(&d.join("checkpoints")).unwrap();
        assert_eq!(head_weights(&p0, &last(d0.path())), init);
        assert!(init.iter().any(|w| w.abs() > 0.05));
        // Three inner updates per step: the head moved and is clipped.
        let a = tempfile::tempdir().unwrap();
        let pa = critic_plan(3, a.path());
        train::<B>(&pa, &dev, critic_opts(a.path(), None)).unwrap();
        let head = head_weights(&pa, &last(a.path()));
        assert_ne!(head, init);
        assert!(head.iter().all(|w| w.abs() <= 0.05 + 1e-7), "{head:?}");
        // Killed after step 5 (checkpoint at 3) and resumed: the same weights and losses.
        let b = tempfile::tempdir().unwrap();
        let pb = critic_plan(3, b.path());
        train::<B>(&pb, &dev, critic_opts(b.path(), Some(5))).unwrap();
        train::<B>(&pb, &dev, critic_opts(b.path(), None)).unwrap();
        assert_eq!(weights(&pa, a.path()), weights(&pb, b.path()));
        assert_eq!(losses(a.path()), losses(b.path()));
    }
}
