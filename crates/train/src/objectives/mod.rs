//! Training objectives, defined once each: one file per objective holds its name, its typed
//! parameters and their checks, the kind of examples it reads, and its loss. [`ALL`] lists
//! them; everything else derives from that list: the names the recipe language accepts and
//! the checks of a task's `params` ([`schemas`], handed to `harness_recipe` through
//! `Known::objectives`), what `harness validate` says this build can train
//! (`capability.rs`), and the losses the trainer computes ([`registry`]).
//!
//! Adding an objective: a file here with a parameter struct implementing [`Objective`] (and
//! [`Loss`] once it trains), and its line in the `objectives!` list at the bottom. An
//! objective defined elsewhere (a test, another crate) joins with
//! [`ObjectiveDef::trainable`] / [`Registry::with`].
//!
//! Declared objectives (`trainable: false`) are part of the recipe language, with their
//! parameters checked, but this build cannot train them (none at present: the list stays
//! for objectives added to the language before their loss).

pub mod check;

use crate::data::Directions;
pub use crate::hard_negatives::HardNegatives;
use crate::step::Step;
use crate::TrainError;
use burn::tensor::backend::AutodiffBackend;
use burn::tensor::Tensor;
use harness_recipe::check::{Finding, ObjectiveCheck, ObjectiveSchema};
use harness_recipe::de;
use harness_recipe::Recipe;
use serde::de::DeserializeOwned;
use serde::Serialize;
use serde_yaml::Value;

pub use check::CheckContext;

/// The training examples an objective reads (its task's corpus must give them).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ExampleKind {
    /// Translation pairs (a parallel corpus).
    Pairs,
    /// Premise, hypothesis and label (an NLI corpus).
    Nli,
    /// An input and its response (a conversation corpus).
    Conversation,
    /// A sentence with its neighbours in running text (previous, sentence, next).
    RunningText,
    /// A sentence and its class (intent classes, languages).
    Labelled,
}

impl ExampleKind {
    /// How messages name it.
    pub fn describe(self) -> &'static str {
        match self {
            ExampleKind::Pairs => "translation pairs (a parallel corpus)",
            ExampleKind::Nli => "NLI triples (an NLI corpus)",
            ExampleKind::Conversation => "conversation turns (input, response)",
            ExampleKind::RunningText => "running text (previous, sentence, next)",
            ExampleKind::Labelled => "labelled sentences",
        }
    }
}

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
    /// training sentences): its loss reads them with [`Step::own_encode`].
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

    /// Its inner loop, if it has one ([`Loss::inner_loss`] is then the inner updates' loss).
    fn inner_loop(&self) -> Option<InnerLoop> {
        None
    }

    /// The hard negatives it reads, mined before training (`hard_negatives.rs`); its loss
    /// gets them from [`Step::hard_negatives`].
    fn hard_negatives(&self) -> Option<HardNegatives> {
        None
    }
}

/// An objective the trainer can train: its loss on one batch.
pub trait Loss: Objective {
    /// The loss (a one-element tensor) on the batch of `step`, whose encodings are shared by
    /// every loss computed on it (joint tasks).
    fn loss<B: AutodiffBackend>(&self, step: &mut Step<'_, B>) -> Result<Tensor<B, 1>, TrainError>;

    /// How many items [`Self::loss`] averages over on the batch of `step`: its examples
    /// unless the objective says otherwise (`seq2seq_ce`: the target tokens). Data-parallel
    /// training (`--device cpu,cpu`) weights each device's shard of a batch by its share of
    /// this count, so that the summed gradients are those of the whole batch.
    fn averaged_over<B: AutodiffBackend>(&self, step: &mut Step<'_, B>) -> Result<f64, TrainError> {
        Ok(step.batch_examples() as f64)
    }

    /// The loss of one inner update ([`Objective::inner_loop`]) on the batch of `step`.
    fn inner_loss<B: AutodiffBackend>(
        &self,
        _step: &mut Step<'_, B>,
    ) -> Result<Tensor<B, 1>, TrainError> {
        Err(TrainError::recipe(
            "tasks",
            format!("objective `{}` declares no inner loop", Self::NAME),
            "report this as a bug in the objective's definition",
        ))
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

/// One entry of [`ALL`]: an objective's name, what it reads, and its parameters' check.
#[derive(Debug, Clone, Copy)]
pub struct ObjectiveDef {
    /// See [`Objective::NAME`].
    pub name: &'static str,
    /// See [`Objective::EXAMPLES`].
    pub examples: ExampleKind,
    /// See [`Objective::USES_DECODER`].
    pub uses_decoder: bool,
    /// Whether this build trains it (it implements [`Loss`]).
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
    /// The definition of an objective the trainer trains.
    pub const fn trainable<T: Loss>() -> ObjectiveDef {
        ObjectiveDef {
            trainable: true,
            ..ObjectiveDef::declared::<T>()
        }
    }

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

/// A loss on backend `B`, whatever the objective's type.
pub trait TaskLoss<B: AutodiffBackend>: Send + Sync {
    /// See [`Loss::loss`].
    fn loss(&self, step: &mut Step<'_, B>) -> Result<Tensor<B, 1>, TrainError>;
    /// See [`Loss::inner_loss`].
    fn inner_loss(&self, step: &mut Step<'_, B>) -> Result<Tensor<B, 1>, TrainError>;
    /// See [`Loss::averaged_over`].
    fn averaged_over(&self, step: &mut Step<'_, B>) -> Result<f64, TrainError>;
}

impl<B: AutodiffBackend, T: Loss> TaskLoss<B> for T {
    fn loss(&self, step: &mut Step<'_, B>) -> Result<Tensor<B, 1>, TrainError> {
        Loss::loss(self, step)
    }
    fn inner_loss(&self, step: &mut Step<'_, B>) -> Result<Tensor<B, 1>, TrainError> {
        Loss::inner_loss(self, step)
    }
    fn averaged_over(&self, step: &mut Step<'_, B>) -> Result<f64, TrainError> {
        Loss::averaged_over(self, step)
    }
}

type Build<B> = fn(&Value) -> Result<Box<dyn TaskLoss<B>>, de::DeError>;

fn build<B: AutodiffBackend, T: Loss>(params: &Value) -> Result<Box<dyn TaskLoss<B>>, de::DeError> {
    de::from_value::<T>(params).map(|t| Box::new(t) as Box<dyn TaskLoss<B>>)
}

/// The losses the trainer can compute on backend `B`, by objective name ([`registry`]
/// gives every trainable objective of [`ALL`]).
pub struct Registry<B: AutodiffBackend> {
    entries: Vec<(&'static str, Build<B>)>,
}

impl<B: AutodiffBackend> Registry<B> {
    /// No objective.
    pub fn empty() -> Self {
        Registry {
            entries: Vec::new(),
        }
    }

    /// Adds (or replaces) objective `T`.
    pub fn with<T: Loss>(mut self) -> Self {
        self.entries.retain(|(n, _)| *n != T::NAME);
        self.entries.push((T::NAME, build::<B, T>));
        self
    }

    /// The loss of objective `name` with `params`.
    pub fn build(
        &self,
        name: &str,
        params: &Value,
    ) -> Option<Result<Box<dyn TaskLoss<B>>, de::DeError>> {
        self.entries
            .iter()
            .find(|(n, _)| *n == name)
            .map(|(_, b)| b(params))
    }
}

/// The definition named `name` among `defs`.
pub fn find<'a>(defs: &[&'a ObjectiveDef], name: &str) -> Option<&'a ObjectiveDef> {
    defs.iter().find(|d| d.name == name).copied()
}

/// What the recipe language needs of every objective of [`ALL`].
pub fn schemas() -> Vec<ObjectiveSchema> {
    ALL.iter().map(|d| d.schema()).collect()
}

/// The names of the objectives of [`ALL`] this build trains.
pub fn trainable_names() -> Vec<&'static str> {
    ALL.iter().filter(|d| d.trainable).map(|d| d.name).collect()
}

/// Declares the objective files and derives [`ALL`] and [`registry`] from one list.
macro_rules! objectives {
    (trainable: [$($t:ident :: $tt:ident),* $(,)?], declared: [$($d:ident :: $dt:ident),* $(,)?] $(,)?) => {
        $(pub mod $t;)*
        $(pub mod $d;)*
        /// Every objective of the recipe language: the trainable ones, then those this
        /// build only declares.
        pub const ALL: &[&ObjectiveDef] = &[
            $(&ObjectiveDef::trainable::<$t::$tt>(),)*
            $(&ObjectiveDef::declared::<$d::$dt>(),)*
        ];
        /// The losses of every trainable objective of [`ALL`], on backend `B`.
        pub fn registry<B: AutodiffBackend>() -> Registry<B> {
            Registry::empty()$(.with::<$t::$tt>())*
        }
    };
}

objectives! {
    trainable: [
        seq2seq_ce::Seq2seqCe,
        l2_similarity::L2Similarity,
        ranking_softmax::RankingSoftmax,
        nli_classification::NliClassification,
        translation_ranking::TranslationRanking,
        response_ranking::ResponseRanking,
        quick_thought::QuickThought,
        alignment_l2::AlignmentL2,
        l2_softmax::L2Softmax,
        center_loss::CenterLoss,
        adversarial_language::AdversarialLanguage,
    ],
    declared: [],
}

#[cfg(test)]
pub(crate) mod gradcheck;
