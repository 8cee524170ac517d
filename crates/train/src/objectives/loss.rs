//! What a trainable objective computes: its [`Loss`] on a training step's batch, the
//! type-erased [`TaskLoss`] the trainer holds, and the [`Registry`] that builds one by
//! objective name.

use super::definition::{Objective, ObjectiveDef};
use crate::step::Step;
use crate::TrainError;
use burn::tensor::backend::AutodiffBackend;
use burn::tensor::Tensor;
use harness_recipe::de;
use serde_yaml::Value;

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

impl ObjectiveDef {
    /// The definition of an objective the trainer trains.
    pub const fn trainable<T: Loss>() -> ObjectiveDef {
        // Here, not beside `declared`, because it names `Loss`, which the plan (a reader
        // of the definitions) must not reach.
        let mut def = ObjectiveDef::declared::<T>();
        def.trainable = true;
        def
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

/// The losses the trainer can compute on backend `B`, by objective name
/// ([`super::registry`] gives every trainable objective of [`super::ALL`]).
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
