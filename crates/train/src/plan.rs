//! The training plan: a recipe, its loaded corpora and its tokenizer compiled into the model
//! configuration, each task's tokenised and bucketed examples, the joint losses, the
//! mixture and the number of steps.

use crate::batch::FirstToken;
use crate::corpora::Loaded;
use crate::data::{nli_examples, pair_examples, Directions, Examples, TaskData};
use crate::mixture::Mixture;
use crate::trainer::{Joint, Plan, TaskPlan};
use crate::TrainError;
use harness_data::tokenize::TextTokenizer;
use harness_model::system::SystemConfig;
use harness_recipe::schema::{Decoder, Objective, Recipe};
use std::collections::BTreeMap;

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
    for (ti, task) in recipe.tasks.iter().enumerate() {
        let joint = matches!(&task.objective, Objective::L2Similarity(p) if p.joint_with.is_some())
            || matches!(&task.objective, Objective::RankingSoftmax(p) if p.joint_with.is_some());
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
            joint: Vec::new(),
        });
    }
    // Joint losses join their partner task.
    for task in &recipe.tasks {
        let (partner, term) = match &task.objective {
            Objective::L2Similarity(p) => (&p.joint_with, Joint::L2(task.weight * p.alpha)),
            Objective::RankingSoftmax(p) => (
                &p.joint_with,
                Joint::Ranking {
                    weight: task.weight,
                    ranking: crate::trainer::ranking_of(p),
                },
            ),
            _ => (&None, Joint::L2(0.0)),
        };
        {
            if let Some(partner) = partner {
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
                t.joint.push(term);
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
