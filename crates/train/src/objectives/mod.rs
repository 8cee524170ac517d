//! Training objectives, defined once each: one file per objective holds its name, its typed
//! parameters and their checks, the kind of examples it reads, and its loss. [`ALL`] lists
//! them; everything else derives from that list: the names the recipe language accepts and
//! the checks of a task's `params` ([`schemas`], handed to `harness_recipe` through
//! `Known::objectives`), what `harness validate` says this build can train
//! (`capability.rs`), and the losses the trainer computes ([`registry`]).
//!
//! What an objective is apart from its loss (`definition.rs`: what the plan compiles tasks
//! from) and what its loss computes (`loss.rs`: what the trainer calls on a step) stand in
//! files of their own, so that the plan needs neither the losses nor the training step.
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
pub(crate) mod definition;
pub(crate) mod loss;

pub use crate::data::ExampleKind;
pub use check::CheckContext;
pub use definition::{
    find, HardNegatives, InnerLoop, Objective, ObjectiveDef, PairOptions, Prepared,
};
pub use loss::{Loss, Registry, TaskLoss};

use burn::tensor::backend::AutodiffBackend;
use harness_recipe::check::ObjectiveSchema;

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
