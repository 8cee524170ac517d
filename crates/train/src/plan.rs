//! The training plan: a recipe, its loaded corpora and its tokenizer compiled into the model
//! configuration, each task's tokenised and bucketed examples, the joint losses, the
//! mixture and the number of steps.

use crate::batch::FirstToken;
use crate::corpora::Loaded;
use crate::data::{nli_examples, pair_examples, Examples, TaskData};
use crate::mixture::Mixture;
use crate::objectives::{self, ExampleKind, ObjectiveDef};
use crate::TrainError;
use harness_data::tokenize::TextTokenizer;
use harness_model::system::SystemConfig;
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
}

/// Everything the loop needs, compiled from a recipe.
#[derive(Debug, Clone)]
pub struct Plan {
    pub recipe: Recipe,
    pub system: SystemConfig,
    pub tasks: Vec<TaskPlan>,
    pub mixture: Mixture,
    /// The decoder's first input.
    pub first_token: FirstToken,
    /// Updates in all.
    pub total_steps: u64,
    /// Updates per epoch (the sum of every sampled task's batches).
    pub steps_per_epoch: u64,
}

/// [`compile_plan_with`] the objectives of this build ([`objectives::ALL`]).
pub fn compile_plan(
    recipe: &Recipe,
    tokenizer: &TextTokenizer,
    loaded: &BTreeMap<String, Loaded>,
) -> Result<Plan, TrainError> {
    compile_plan_with(recipe, tokenizer, loaded, objectives::ALL)
}

/// The definition of a task's objective among `defs`, if this build trains it.
fn trainable_def(
    defs: &[&'static ObjectiveDef],
    task: &harness_recipe::schema::Task,
) -> Result<&'static ObjectiveDef, TrainError> {
    let key = format!("tasks.{}.objective", task.name);
    match objectives::find(defs, task.objective.name()) {
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
/// objectives tasks may name.
pub fn compile_plan_with(
    recipe: &Recipe,
    tokenizer: &TextTokenizer,
    loaded: &BTreeMap<String, Loaded>,
    defs: &[&'static ObjectiveDef],
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
    };
    let mut tasks = Vec::new();
    let mut partners = Vec::new();
    for (ti, task) in recipe.tasks.iter().enumerate() {
        let def = trainable_def(defs, task)?;
        let prepared = def.prepare(&task.objective.params).map_err(|e| {
            TrainError::recipe(
                format!("tasks.{}.params", task.name),
                e.msg.clone(),
                "see `harness validate` on the recipe",
            )
        })?;
        partners.push(prepared.joint_with().map(String::from));
        let data = if prepared.joint_with().is_some() {
            None
        } else {
            let examples = match (loaded.get(&task.corpus), def.examples) {
                (Some(Loaded::Parallel(c)), ExampleKind::Pairs) => {
                    let o = prepared.pair_options();
                    let (ex, skipped) = pair_examples(
                        tokenizer,
                        c,
                        &targets,
                        o.directions,
                        o.autoencode,
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
                (Some(Loaded::Nli(v)), ExampleKind::Nli) => {
                    Examples::Nli(nli_examples(tokenizer, v, max_len)?)
                }
                (Some(other), kind) => {
                    return Err(TrainError::recipe(
                        format!("tasks.{}.corpus", task.name),
                        format!(
                            "objective `{}` reads {}, but corpus `{}` gives {}",
                            def.name,
                            kind.describe(),
                            task.corpus,
                            other.kind().describe()
                        ),
                        "give the task a corpus of the kind its objective reads",
                    ))
                }
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
            def,
            data,
            weight: task.weight,
            joint: Vec::new(),
        });
    }
    // Joint losses join their partner task.
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
        if tasks[p].data.is_none() {
            return Err(TrainError::recipe(
                key,
                format!("task `{partner}` is itself joint with another task"),
                "name a task that draws its own batches",
            ));
        }
        tasks[p].joint.push(i);
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
