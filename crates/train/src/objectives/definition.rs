//! What an objective is, apart from its loss: the [`Objective`] trait (its name, typed
//! parameters and their checks, the examples it reads, what it asks of the plan), the
//! [`ObjectiveDef`] entry that lists it, and the options it hands the plan. The plan
//! compiles tasks from these alone; the losses, which read a training step, are in
//! `loss.rs`, and the list of objectives in `mod.rs`.

use super::check::CheckContext;
use crate::data::{Directions, ExampleKind};
use harness_recipe::check::{Finding, ObjectiveCheck, ObjectiveSchema};
use harness_recipe::de;
use harness_recipe::Recipe;
use serde::de::DeserializeOwned;
use serde::Serialize;
use serde_yaml::Value;

/// How a parallel corpus becomes translation examples for an objective.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct PairOptions {
    /// Which directions of each pair become examples.
    pub directions: Directions,
    /// Fraction of one-direction examples decoded from the target itself.
    pub autoencode: f64,
}

impl Default for PairOptions {
    fn default() -> Self {
        PairOptions {
            directions: Directions::Both,
            autoencode: 0.0,
        }
    }
}

/// An inner loop a task runs before each of its main updates (Emu, Algorithm 1: the
/// discriminator's `critic_steps` updates, its weights clipped after each, before every
/// encoder update). Generic: any objective may declare one.
#[derive(Debug, Clone, PartialEq)]
pub struct InnerLoop {
    /// Inner updates per main update.
    pub steps: u32,
    /// The parameter groups the inner updates train (`heads.<name>`, an encoder, ...); the
    /// main update leaves them alone.
    pub trains: Vec<String>,
    /// Learning rate of the inner optimizer (the recipe's optimizer kind, with its own
    /// state, saved with the checkpoints).
    pub lr: f64,
    /// After each inner update the trained groups' weights are clipped to `[−clip, clip]`
    /// (a WGAN critic's Lipschitz constraint).
    pub clip: Option<f64>,
}

/// What an objective asks of the miner.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HardNegatives {
    /// Negatives per example.
    pub k: usize,
    /// The mining encoder, in `--encoder` syntax.
    pub encoder: String,
}

/// An objective's definition apart from its loss: its typed parameters (the struct itself,
/// `#[serde(deny_unknown_fields)]` with defaults), its name and what it reads.
pub trait Objective: Serialize + DeserializeOwned + Send + Sync + 'static {
    /// The name tasks give as `objective:`.
    const NAME: &'static str;
    /// The examples it reads.
    const EXAMPLES: ExampleKind;
    /// Whether it trains through `model.decoder`.
    const USES_DECODER: bool = false;

    /// Problems beyond the types (ranges, references to heads or tasks), at key paths under
    /// the task (`params.head`, `objective`).
    fn check(&self, _cx: &CheckContext<'_>) -> Vec<Finding> {
        Vec::new()
    }

    /// The task whose batches and encodings this loss joins (`params.joint_with`): it is
    /// then computed on that task's batch and added to its loss, weighted by this task's
    /// `weight`, instead of drawing batches of its own.
    fn joint_with(&self) -> Option<&str> {
        None
    }

    /// Whether, joint with another task, it still draws batches of its own corpus beside
    /// its partner's (Emu's adversarial sentences of other languages, next to the labelled
    /// training sentences): its loss reads them with [`crate::step::Step::own_encode`].
    fn draws_own_batches(&self) -> bool {
        false
    }

    /// How its translation pairs are made (objectives that read [`ExampleKind::Pairs`]).
    fn pair_options(&self) -> PairOptions {
        PairOptions::default()
    }

    /// The examples it reads with these parameters (by default [`Objective::EXAMPLES`]).
    fn examples(&self) -> ExampleKind {
        Self::EXAMPLES
    }

    /// Its inner loop, if it has one ([`super::Loss::inner_loss`] is then the inner updates'
    /// loss).
    fn inner_loop(&self) -> Option<InnerLoop> {
        None
    }

    /// The hard negatives it reads, mined before training (`hard_negatives.rs`); its loss
    /// gets them from [`crate::step::Step::hard_negatives`].
    fn hard_negatives(&self) -> Option<HardNegatives> {
        None
    }
}

/// The parts of a parsed objective the plan needs, whatever its type.
pub trait Prepared: Send + Sync {
    /// See [`Objective::joint_with`].
    fn joint_with(&self) -> Option<&str>;
    /// See [`Objective::draws_own_batches`].
    fn draws_own_batches(&self) -> bool;
    /// See [`Objective::pair_options`].
    fn pair_options(&self) -> PairOptions;
    /// See [`Objective::examples`].
    fn examples(&self) -> ExampleKind;
    /// See [`Objective::inner_loop`].
    fn inner_loop(&self) -> Option<InnerLoop>;
    /// See [`Objective::hard_negatives`].
    fn hard_negatives(&self) -> Option<HardNegatives>;
}

impl<T: Objective> Prepared for T {
    fn joint_with(&self) -> Option<&str> {
        Objective::joint_with(self)
    }
    fn draws_own_batches(&self) -> bool {
        Objective::draws_own_batches(self)
    }
    fn pair_options(&self) -> PairOptions {
        Objective::pair_options(self)
    }
    fn examples(&self) -> ExampleKind {
        Objective::examples(self)
    }
    fn inner_loop(&self) -> Option<InnerLoop> {
        Objective::inner_loop(self)
    }
    fn hard_negatives(&self) -> Option<HardNegatives> {
        Objective::hard_negatives(self)
    }
}

/// One entry of [`super::ALL`]: an objective's name, what it reads, and its parameters' check.
#[derive(Debug, Clone, Copy)]
pub struct ObjectiveDef {
    /// See [`Objective::NAME`].
    pub name: &'static str,
    /// See [`Objective::EXAMPLES`].
    pub examples: ExampleKind,
    /// See [`Objective::USES_DECODER`].
    pub uses_decoder: bool,
    /// Whether this build trains it (it implements [`super::Loss`]).
    pub trainable: bool,
    check: fn(&Value, &Recipe, usize) -> ObjectiveCheck,
    prepare: fn(&Value) -> Result<Box<dyn Prepared>, de::DeError>,
}

fn check_params<T: Objective>(params: &Value, recipe: &Recipe, task: usize) -> ObjectiveCheck {
    let collected = de::collect::<T>(params);
    let mut out = ObjectiveCheck {
        errors: collected.errors,
        ..Default::default()
    };
    if let Some(typed) = collected.value {
        if out.errors.is_empty() {
            out.params = serde_yaml::to_value(&typed).ok();
        }
        out.problems = typed.check(&CheckContext { recipe, task });
    }
    out
}

fn prepare_params<T: Objective>(params: &Value) -> Result<Box<dyn Prepared>, de::DeError> {
    de::from_value::<T>(params).map(|t| Box::new(t) as Box<dyn Prepared>)
}

impl ObjectiveDef {
    /// The definition of an objective the recipe language knows but this build cannot train.
    pub const fn declared<T: Objective>() -> ObjectiveDef {
        ObjectiveDef {
            name: T::NAME,
            examples: T::EXAMPLES,
            uses_decoder: T::USES_DECODER,
            trainable: false,
            check: check_params::<T>,
            prepare: prepare_params::<T>,
        }
    }

    /// What the recipe language needs of it.
    pub fn schema(&self) -> ObjectiveSchema {
        ObjectiveSchema {
            name: self.name,
            uses_decoder: self.uses_decoder,
            check: self.check,
        }
    }

    /// Types a task's `params` (defaults filled in).
    pub fn prepare(&self, params: &Value) -> Result<Box<dyn Prepared>, de::DeError> {
        (self.prepare)(params)
    }
}

/// The definition named `name` among `defs`.
pub fn find<'a>(defs: &[&'a ObjectiveDef], name: &str) -> Option<&'a ObjectiveDef> {
    defs.iter().find(|d| d.name == name).copied()
}
