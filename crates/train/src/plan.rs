//! The training plan: a recipe, its loaded corpora and its tokenizer compiled into the model
//! configuration, each task's tokenised and bucketed examples, the joint losses, the
//! mixture and the number of steps.

use crate::batch::FirstToken;
use crate::binarize::{binarize, PairSettings, Source};
use crate::corpora::Loaded;
use crate::data::ExampleKind;
use crate::mixture::Mixture;
use crate::objectives::definition::{self, HardNegatives, ObjectiveDef, Prepared};
use crate::task_data::TaskData;
use crate::TrainError;
use harness_data::tokenize::TextTokenizer;
use harness_model::system::{Group, SystemConfig};
use harness_recipe::schema::{Decoder, Objective, Recipe};
use std::collections::BTreeMap;

/// One task, ready to train.
#[derive(Debug, Clone)]
pub struct TaskPlan {
    /// The recipe's task name.
    pub name: String,
    /// Its objective's name and parameters, as the recipe gives them.
    pub objective: Objective,
    /// The objective's definition.
    pub def: &'static ObjectiveDef,
    /// Its batches; `None` for a task joint with another.
    pub data: Option<TaskData>,
    /// Sampling weight (tasks with data) or loss weight (joint tasks).
    pub weight: f64,
    /// Indices of the tasks joint with this one: their losses are added to this task's, on
    /// its batches and encodings.
    pub joint: Vec<usize>,
    /// The encoders of the two sides of each example (indices into the model's encoders):
    /// the one the task trains (`encoder:`) and the one it reads (`reads:`).
    pub encoders: [usize; 2],
    /// Its inner loop, with its parameter groups resolved.
    pub inner: Option<InnerPlan>,
    /// The hard negatives its objective reads (mined by `hard_negatives::mine`).
    pub hard_negatives: Option<HardNegatives>,
}

/// A task's inner loop ([`crate::objectives::InnerLoop`]) with its groups resolved.
#[derive(Debug, Clone, PartialEq)]
pub struct InnerPlan {
    /// Inner updates per main update.
    pub steps: u32,
    /// The groups they train.
    pub trains: Vec<Group>,
    /// Their learning rate.
    pub lr: f64,
    /// Weight clipping after each.
    pub clip: Option<f64>,
}

/// Everything the loop needs, compiled from a recipe.
#[derive(Debug, Clone)]
pub struct Plan {
    pub recipe: Recipe,
    /// The class count of each head whose `classes` comes from its task's corpus (saved as
    /// the run's `head-classes.json`).
    pub head_classes: BTreeMap<String, usize>,
    pub system: SystemConfig,
    pub tasks: Vec<TaskPlan>,
    /// The stages, in order (one for a recipe whose tasks are all in stage 1).
    pub stages: Vec<StagePlan>,
    /// The decoder's first input.
    pub first_token: FirstToken,
    /// Updates in all.
    pub total_steps: u64,
    /// Updates per epoch (the sum of every sampled task's batches, over the stages).
    pub steps_per_epoch: u64,
    /// The model the `pretrained` encoders start from (a published one or a trained run).
    pub pretrained: Option<harness_model::pretrained::PretrainedStart>,
    /// The counts of the corpora of files, measured while binarizing them.
    pub corpus_counts: Vec<crate::corpora::CorpusCounts>,
}

/// One stage: its tasks' mixture, its length and learning rate, what it freezes.
#[derive(Debug, Clone)]
pub struct StagePlan {
    /// The stage number tasks give (`stage:`).
    pub number: u32,
    /// Sampling over this stage's tasks.
    pub mixture: Mixture,
    /// The global step this stage starts at.
    pub start: u64,
    /// Its updates.
    pub steps: u64,
    /// Updates per epoch of its tasks.
    pub steps_per_epoch: u64,
    /// Its learning rate, when it sets one (else the optimizer's).
    pub lr: Option<f64>,
    /// Parameter groups out of the backward pass in this stage.
    pub frozen: Vec<Group>,
    /// Encoders that start the stage as a copy of another: `(target, source)` indices.
    pub init: Vec<(usize, usize)>,
}

impl Plan {
    /// The stage of global step `step` (the last one past the end).
    pub fn stage_at(&self, step: u64) -> &StagePlan {
        self.stages
            .iter()
            .find(|s| step < s.start + s.steps)
            .or(self.stages.last())
            .expect("a plan has a stage")
    }

    /// Whether the update of step `step` (the `step`-th, counting from 1) trains encoder
    /// `i`: a task of its stage reads through it and the stage does not freeze it.
    pub fn trains_encoder(&self, step: u64, i: usize) -> bool {
        if step == 0 {
            return false;
        }
        let stage = self.stage_at(step - 1);
        !stage.frozen.contains(&Group::Encoder(i))
            && self
                .tasks
                .iter()
                .zip(&self.recipe.tasks)
                .any(|(t, r)| r.stage == stage.number && t.encoders.contains(&i))
    }

    /// Whether any stage freezes a parameter group, or any task has an inner loop (whose
    /// groups the main update leaves alone).
    pub fn freezes(&self) -> bool {
        self.stages.iter().any(|s| !s.frozen.is_empty())
            || self.tasks.iter().any(|t| t.inner.is_some())
    }
}

/// The groups no optimizer moves (see [`compile_stages`]).
fn always_frozen(recipe: &Recipe, system: &SystemConfig) -> Vec<Group> {
    use harness_recipe::schema::Encoder;
    let mut out: Vec<Group> = system
        .center_heads
        .iter()
        .map(|&i| Group::Head(i))
        .collect();
    if let Some(model) = &recipe.model {
        let encoders = std::iter::once((harness_model::system::MAIN_ENCODER, &model.encoder))
            .chain(model.encoders.iter().map(|(n, e)| (n.as_str(), e)));
        for (name, e) in encoders {
            if let Encoder::Pretrained(p) = e {
                if !p.trainable {
                    out.extend(system.encoder_index(name).map(Group::Encoder));
                }
            }
        }
    }
    out
}

/// The stages of a recipe: the distinct `stage:` numbers of its tasks, in order, each with
/// the settings of `stages.<n>` over `train` and `optimizer`. Stage 1 of a recipe without
/// stages draws its mixture from the recipe's seed, as before stages existed.
fn compile_stages(
    recipe: &Recipe,
    train_spec: &harness_recipe::schema::Train,
    system: &SystemConfig,
    tasks: &[TaskPlan],
    joint: &[bool],
) -> Result<Vec<StagePlan>, TrainError> {
    let numbers: std::collections::BTreeSet<u32> = recipe.tasks.iter().map(|t| t.stage).collect();
    let mut stages = Vec::new();
    let mut start = 0;
    for (k, n) in numbers.into_iter().enumerate() {
        let weights: Vec<Option<f64>> = tasks
            .iter()
            .zip(&recipe.tasks)
            .zip(joint)
            // A joint task never draws a step of its own, even when it has batches.
            .map(|((t, r), &j)| {
                t.data
                    .as_ref()
                    .filter(|_| r.stage == n && !j)
                    .map(|_| t.weight)
            })
            .collect();
        let seed = recipe.seed.wrapping_add(k as u64);
        let mixture = Mixture::new(&weights, seed).ok_or_else(|| {
            TrainError::recipe(
                "tasks",
                format!("no task of stage {n} has batches and a positive weight"),
                "give the stage a task with its own corpus",
            )
        })?;
        let steps_per_epoch: u64 = tasks
            .iter()
            .zip(&weights)
            .filter(|(_, w)| w.is_some())
            .filter_map(|(t, _)| t.data.as_ref())
            .map(|d| d.batches_per_epoch())
            .sum();
        let own = recipe.stages.get(&n).cloned().unwrap_or_default();
        let steps = match (own.steps, own.epochs, train_spec.steps, train_spec.epochs) {
            (Some(s), _, _, _) => s,
            (None, Some(e), _, _) => e as u64 * steps_per_epoch,
            (None, None, Some(s), _) => s,
            (None, None, None, Some(e)) => e as u64 * steps_per_epoch,
            (None, None, None, None) => steps_per_epoch,
        };
        let mut frozen = own
            .frozen
            .iter()
            .map(|g| {
                system.group(g).ok_or_else(|| {
                    TrainError::recipe(
                        format!("stages.{n}.frozen"),
                        format!("no parameter group `{g}`"),
                        "name an encoder, `<encoder>.embeddings`, `decoder` or `heads.<name>`",
                    )
                })
            })
            .collect::<Result<Vec<_>, _>>()?;
        // Out of every stage's optimizer: the centre heads (moved by the center loss's own
        // rule) and pretrained encoders the recipe does not fine-tune (`trainable: false`).
        for g in always_frozen(recipe, system) {
            if !frozen.contains(&g) {
                frozen.push(g);
            }
        }
        let init = stage_init(system, n, &own.init)?;
        stages.push(StagePlan {
            number: n,
            mixture,
            start,
            steps,
            steps_per_epoch,
            lr: own.lr,
            frozen,
            init,
        });
        start += steps;
    }
    Ok(stages)
}

/// A stage's `init` pairs as encoder indices (target, source): both named, and of one
/// architecture.
fn stage_init(
    system: &SystemConfig,
    n: u32,
    pairs: &BTreeMap<String, String>,
) -> Result<Vec<(usize, usize)>, TrainError> {
    let index = |name: &String| {
        system.encoder_index(name).ok_or_else(|| {
            TrainError::recipe(
                format!("stages.{n}.init"),
                format!("no encoder `{name}`"),
                "name `encoder` or a key of `model.encoders`",
            )
        })
    };
    let mut init = Vec::new();
    for (target, source) in pairs {
        let (t, s) = (index(target)?, index(source)?);
        if system.encoders[t].1.describe() != system.encoders[s].1.describe() {
            return Err(TrainError::recipe(
                format!("stages.{n}.init.{target}"),
                format!("encoder `{target}` cannot start as a copy of `{source}`: their architectures differ"),
                "give both the same kind and sizes in `model`",
            ));
        }
        init.push((t, s));
    }
    Ok(init)
}

/// The class count of each `l2_softmax` / `centers` head without `classes`: the labels of
/// the labelled corpus of the tasks that name it (`params.head`). Two tasks whose corpora
/// have different label counts cannot share a head.
fn head_classes(
    recipe: &Recipe,
    loaded: &BTreeMap<String, Loaded>,
    binarized: &BTreeMap<String, Vec<String>>,
) -> Result<BTreeMap<String, usize>, TrainError> {
    use harness_recipe::schema::Head;
    let mut out: BTreeMap<String, (usize, String)> = BTreeMap::new();
    let Some(model) = &recipe.model else {
        return Ok(BTreeMap::new());
    };
    for task in &recipe.tasks {
        let Some(head) = task.objective.params.get("head").and_then(|h| h.as_str()) else {
            continue;
        };
        let open = match model.heads.get(head) {
            Some(Head::L2Softmax(h)) => h.classes.is_none(),
            Some(Head::Centers(h)) => h.classes.is_none(),
            _ => false,
        };
        // The classes the corpus's shards numbered (a shipped dataset's: its own).
        let classes = match (binarized.get(&task.corpus), loaded.get(&task.corpus)) {
            (Some(c), _) => c,
            (None, Some(Loaded::Labelled { classes, .. })) => classes,
            _ => continue,
        };
        if !open {
            continue;
        }
        let n = classes.len();
        match out.get(head) {
            Some((m, other)) if *m != n => {
                return Err(TrainError::recipe(
                    format!("model.heads.{head}.classes"),
                    format!(
                        "task `{other}` gives this head {m} classes and task `{}` {n}",
                        task.name
                    ),
                    "give each corpus its own head, or set `classes`",
                ))
            }
            _ => {
                out.insert(head.to_string(), (n, task.name.clone()));
            }
        }
    }
    Ok(out.into_iter().map(|(k, (n, _))| (k, n)).collect())
}

/// Why a task has no example to train on: none decodes into a target language, or its
/// corpus (of files, or a dataset after the contamination filter) is empty.
fn empty_task(
    task: &harness_recipe::schema::Task,
    b: &crate::binarize::Binarized,
    from_files: bool,
) -> TrainError {
    if b.untargeted > 0 {
        TrainError::recipe(
            format!("tasks.{}", task.name),
            format!(
                "no training pair can be decoded into a target language ({} skipped)",
                b.untargeted
            ),
            "list a language of the corpus's pairs in `model.decoder.targets`",
        )
    } else if from_files {
        TrainError::recipe(
            format!("tasks.{}.corpus", task.name),
            format!(
                "corpus `{}` has no example left to train on (see its counts)",
                task.corpus
            ),
            "check the files, their languages and the decoder's targets",
        )
    } else {
        TrainError::recipe(
            format!("tasks.{}.corpus", task.name),
            format!(
                "corpus `{}` has no example left to train on (see the counts of the contamination filter above)",
                task.corpus
            ),
            "use other splits, pairs or datasets, or drop the task",
        )
    }
}

/// The definition of a task's objective among `defs`, if this build trains it.
fn trainable_def(
    defs: &[&'static ObjectiveDef],
    task: &harness_recipe::schema::Task,
) -> Result<&'static ObjectiveDef, TrainError> {
    let key = format!("tasks.{}.objective", task.name);
    match definition::find(defs, task.objective.name()) {
        Some(d) if d.trainable => Ok(d),
        Some(d) => Err(TrainError::recipe(
            key,
            format!("this build cannot train the objective `{}`", d.name),
            "`harness validate` lists what the recipe needs; use a trainable objective",
        )),
        None => Err(TrainError::recipe(
            key,
            format!("unknown objective `{}`", task.objective.name()),
            format!(
                "use one of {}",
                defs.iter()
                    .filter(|d| d.trainable)
                    .map(|d| format!("`{}`", d.name))
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
        )),
    }
}

/// Compiles the training plan: the model configuration, each task's tokenised and
/// bucketed examples, the joint losses, the mixture and the number of steps. `defs` are the
/// objectives tasks may name (this build's: [`crate::objectives::ALL`]; handed in, so that
/// the plan needs only the objectives' definitions, never their losses).
pub fn compile_plan(
    recipe: &Recipe,
    tokenizer: &TextTokenizer,
    loaded: &BTreeMap<String, Loaded>,
    defs: &[&'static ObjectiveDef],
) -> Result<Plan, TrainError> {
    compile(recipe, tokenizer, loaded, defs, None)
}

/// [`compile_plan`] for a run whose `pretrained` encoders start from `start` (a published
/// model or a trained run, whose architecture they then take).
pub fn compile_plan_from(
    recipe: &Recipe,
    tokenizer: &TextTokenizer,
    loaded: &BTreeMap<String, Loaded>,
    defs: &[&'static ObjectiveDef],
    start: Option<harness_model::pretrained::PretrainedStart>,
) -> Result<Plan, TrainError> {
    compile(recipe, tokenizer, loaded, defs, start)
}

/// [`compile_plan_from`]'s work: the tasks prepared and binarized, the model configured
/// for them, the tasks' plans joined and staged.
fn compile(
    recipe: &Recipe,
    tokenizer: &TextTokenizer,
    loaded: &BTreeMap<String, Loaded>,
    defs: &[&'static ObjectiveDef],
    start: Option<harness_model::pretrained::PretrainedStart>,
) -> Result<Plan, TrainError> {
    use harness_model::pretrained::PretrainedStart;
    let train_spec = recipe
        .train
        .clone()
        .ok_or_else(|| TrainError::recipe("train", "missing", "add a `train:` block"))?;
    let (targets, first_token) = decoder_start(recipe, tokenizer);
    let prepared = prepare_tasks(recipe, tokenizer, loaded, defs, &train_spec, &targets)?;
    let head_classes = head_classes(recipe, loaded, &prepared.classes)?;
    let base = match &start {
        Some(PretrainedStart::Run(r)) => Some(&r.record),
        _ => None,
    };
    let system = SystemConfig::from_recipe(recipe, tokenizer, &head_classes, base)?;
    let mut tasks = Vec::new();
    let mut partners = Vec::new();
    for (task, (def, p, data)) in recipe.tasks.iter().zip(prepared.tasks) {
        partners.push(p.joint_with().map(String::from));
        tasks.push(task_plan(recipe, &system, task, def, &*p, data)?);
    }
    join_partners(&mut tasks, &partners)?;
    let joint: Vec<bool> = partners.iter().map(Option::is_some).collect();
    let stages = compile_stages(recipe, &train_spec, &system, &tasks, &joint)?;
    let total_steps = stages.last().map_or(0, |s| s.start + s.steps);
    let steps_per_epoch = stages.iter().map(|s| s.steps_per_epoch).sum();
    Ok(Plan {
        recipe: recipe.clone(),
        head_classes,
        system,
        tasks,
        stages,
        first_token,
        total_steps,
        steps_per_epoch,
        pretrained: start,
        corpus_counts: prepared.corpus_counts,
    })
}

/// The decoder's languages and first input (none and BOS without a decoder).
fn decoder_start(recipe: &Recipe, tokenizer: &TextTokenizer) -> (Vec<String>, FirstToken) {
    match recipe.model.as_ref().and_then(|m| m.decoder.as_ref()) {
        Some(Decoder::Lstm(d)) => {
            let first = if d.lang_embed == 0 {
                FirstToken::Language(
                    tokenizer
                        .languages()
                        .iter()
                        .map(|l| {
                            tokenizer
                                .lang_token_id(l)
                                .unwrap_or(harness_data::tokenize::ids::BOS)
                        })
                        .collect(),
                )
            } else {
                FirstToken::Bos
            };
            (d.targets.clone(), first)
        }
        None => (Vec::new(), FirstToken::Bos),
    }
}

/// Each task's objective prepared, with its batches (none for a joint task that draws
/// none of its own), and what binarizing their corpora measured.
struct PreparedTasks {
    /// Per task of the recipe, in order: its objective's definition, the objective
    /// prepared, its batches.
    tasks: Vec<(&'static ObjectiveDef, Box<dyn Prepared>, Option<TaskData>)>,
    /// The counts of the corpora of files, each once.
    corpus_counts: Vec<crate::corpora::CorpusCounts>,
    /// The classes of each labelled corpus binarized, by corpus name.
    classes: BTreeMap<String, Vec<String>>,
}

/// Prepares every task's objective and binarizes its corpus into its batches.
fn prepare_tasks(
    recipe: &Recipe,
    tokenizer: &TextTokenizer,
    loaded: &BTreeMap<String, Loaded>,
    defs: &[&'static ObjectiveDef],
    train_spec: &harness_recipe::schema::Train,
    targets: &[String],
) -> Result<PreparedTasks, TrainError> {
    let max_len = train_spec.max_len as usize;
    // Every task's batches come from its corpus binarized ([`crate::binarize`]): the user's
    // files and the shipped datasets alike.
    let mut prepared_tasks = Vec::new();
    let mut corpus_counts = Vec::new();
    let mut classes: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for (ti, task) in recipe.tasks.iter().enumerate() {
        let def = trainable_def(defs, task)?;
        let prepared = def.prepare(&task.objective.params).map_err(|e| {
            TrainError::recipe(
                format!("tasks.{}.params", task.name),
                e.msg.clone(),
                "see `harness validate` on the recipe",
            )
        })?;
        let data = if prepared.joint_with().is_some() && !prepared.draws_own_batches() {
            None
        } else {
            let corpus = TaskCorpus {
                recipe,
                ti,
                tokenizer,
                loaded,
                targets,
                max_len,
                batch_tokens: train_spec.batch_tokens.map(|x| x as usize),
                batch_size: task
                    .batch_size
                    .or(train_spec.batch_size)
                    .map(|x| x as usize),
            };
            let (data, b) = corpus.data(def, &*prepared)?;
            if !b.classes.is_empty() {
                classes.insert(task.corpus.clone(), b.classes.clone());
            }
            if matches!(loaded.get(&task.corpus), Some(Loaded::Files(_)))
                && !corpus_counts
                    .iter()
                    .any(|c: &crate::corpora::CorpusCounts| c.corpus == task.corpus)
            {
                corpus_counts.push(b.counts);
            }
            Some(data)
        };
        prepared_tasks.push((def, prepared, data));
    }
    Ok(PreparedTasks {
        tasks: prepared_tasks,
        corpus_counts,
        classes,
    })
}

/// The plan of `task` (its encoders and inner loop resolved against `system`), joint with
/// no task yet.
fn task_plan(
    recipe: &Recipe,
    system: &SystemConfig,
    task: &harness_recipe::schema::Task,
    def: &'static ObjectiveDef,
    prepared: &dyn Prepared,
    data: Option<TaskData>,
) -> Result<TaskPlan, TrainError> {
    let encoder = |key: &str, name: Option<&String>| {
        let name = name.map_or(harness_model::system::MAIN_ENCODER, String::as_str);
        system.encoder_index(name).ok_or_else(|| {
            TrainError::recipe(
                format!("tasks.{}.{key}", task.name),
                format!("no encoder named `{name}`"),
                "name `encoder` or a key of `model.encoders`",
            )
        })
    };
    let first = encoder("encoder", task.encoder.as_ref())?;
    let second = match &task.reads {
        Some(r) => encoder("reads", Some(r))?,
        None => first,
    };
    let inner = match prepared.inner_loop() {
        None => None,
        Some(l) => Some(inner_plan(recipe, system, task, l)?),
    };
    Ok(TaskPlan {
        name: task.name.clone(),
        objective: task.objective.clone(),
        def,
        data,
        weight: task.weight,
        joint: Vec::new(),
        encoders: [first, second],
        inner,
        hard_negatives: prepared.hard_negatives(),
    })
}

/// A task's inner loop with its groups resolved against `system`.
fn inner_plan(
    recipe: &Recipe,
    system: &SystemConfig,
    task: &harness_recipe::schema::Task,
    l: definition::InnerLoop,
) -> Result<InnerPlan, TrainError> {
    let trains = l
        .trains
        .iter()
        .map(|g| {
            system.group(g).ok_or_else(|| {
                TrainError::recipe(
                    format!("tasks.{}.params", task.name),
                    format!("the inner loop trains `{g}`, which is no parameter group"),
                    "name an encoder, `<encoder>.embeddings`, `decoder` or `heads.<name>`",
                )
            })
        })
        .collect::<Result<Vec<_>, _>>()?;
    // An inner loop that trains a discriminator head clips to the head's `clip`.
    let clip = l.clip.or_else(|| {
        l.trains.iter().find_map(|g| {
            let name = g.strip_prefix("heads.")?;
            match recipe.model.as_ref()?.heads.get(name)? {
                harness_recipe::schema::Head::Discriminator(d) => Some(d.clip),
                _ => None,
            }
        })
    });
    Ok(InnerPlan {
        steps: l.steps,
        trains,
        lr: l.lr,
        clip,
    })
}

/// Joins each joint task's loss to its partner task (`partners`: the partner each task
/// names), which must draw its own batches.
fn join_partners(tasks: &mut [TaskPlan], partners: &[Option<String>]) -> Result<(), TrainError> {
    for (i, partner) in partners.iter().enumerate() {
        let Some(partner) = partner else { continue };
        let key = format!("tasks.{}.params.joint_with", tasks[i].name);
        let p = tasks
            .iter()
            .position(|t| &t.name == partner)
            .ok_or_else(|| {
                TrainError::recipe(
                    key.clone(),
                    format!("no task named `{partner}`"),
                    "name another task of this recipe",
                )
            })?;
        if tasks[p].data.is_none() || partners[p].is_some() {
            return Err(TrainError::recipe(
                key,
                format!("task `{partner}` is itself joint with another task"),
                "name a task that draws its own batches",
            ));
        }
        tasks[p].joint.push(i);
    }
    Ok(())
}

/// What binarizing a task's corpus needs beside the corpus.
struct TaskCorpus<'a> {
    recipe: &'a Recipe,
    /// The task's index in the recipe.
    ti: usize,
    tokenizer: &'a TextTokenizer,
    loaded: &'a BTreeMap<String, Loaded>,
    /// The decoder's languages.
    targets: &'a [String],
    max_len: usize,
    batch_tokens: Option<usize>,
    batch_size: Option<usize>,
}

impl TaskCorpus<'_> {
    /// The task's batches, read from its corpus's shards (binarized now, or reused); a task
    /// whose hard negatives are mined holds its examples decoded in memory, whose batches
    /// are the same.
    fn data(
        &self,
        def: &ObjectiveDef,
        prepared: &dyn Prepared,
    ) -> Result<(TaskData, crate::binarize::Binarized), TrainError> {
        let task = &self.recipe.tasks[self.ti];
        let Some(loaded) = self.loaded.get(&task.corpus) else {
            return Err(TrainError::recipe(
                format!("tasks.{}.corpus", task.name),
                format!("corpus `{}` was not loaded", task.corpus),
                "declare it under `data.corpora`",
            ));
        };
        let want = prepared.examples();
        if want != loaded.kind() {
            return Err(TrainError::recipe(
                format!("tasks.{}.corpus", task.name),
                format!(
                    "objective `{}` reads {}, but corpus `{}` gives {}",
                    def.name,
                    want.describe(),
                    task.corpus,
                    loaded.kind().describe()
                ),
                "give the task a corpus of the kind its objective reads",
            ));
        }
        let source = match loaded {
            Loaded::Files(fc) => Source::Files(fc),
            other => Source::Loaded {
                name: &task.corpus,
                loaded: other,
            },
        };
        let o = prepared.pair_options();
        let pair_settings = PairSettings {
            targets: self.targets.to_vec(),
            both: crate::binarize::both(o.directions),
            autoencode: o.autoencode,
            seed: self.recipe.seed + self.ti as u64,
        };
        let b = binarize(
            source,
            self.tokenizer,
            self.max_len,
            (want == ExampleKind::Pairs).then_some(&pair_settings),
        )?;
        if let Source::Files(_) = source {
            harness_core::note!(
                "corpus `{}`: {} examples in {} shards ({}){}",
                task.corpus,
                b.manifest.examples,
                b.manifest.shards.len(),
                b.dir.display(),
                if b.reused { ", reused" } else { "" }
            );
        }
        if b.manifest.examples == 0 {
            // An empty task would have no batch to draw (the contamination filter can
            // remove a whole corpus: SICK train against SICK-R).
            return Err(empty_task(task, &b, matches!(source, Source::Files(_))));
        }
        let seed = self
            .recipe
            .seed
            .wrapping_mul(31)
            .wrapping_add(self.ti as u64);
        let kind = crate::binarize::shard_kind(source.kind());
        let mut sharded = crate::streamed::ShardedExamples::new(
            &b.dir,
            b.manifest.clone(),
            kind,
            self.batch_tokens,
            self.batch_size,
            seed,
        );
        if let Some(t) = &b.temp {
            sharded = sharded.owning(t.clone());
        }
        let data = if prepared.hard_negatives().is_some() {
            TaskData::new(sharded.all()?, self.batch_tokens, self.batch_size, seed)
        } else {
            let mut d = TaskData::new(kind.no_examples(), self.batch_tokens, self.batch_size, seed);
            d.shards = Some(sharded);
            d
        };
        Ok((data, b))
    }
}
