//! `adversarial_language`: adversarial language training against a discriminator head (Emu
//! §2.3, Algorithm 1), the discriminator a WGAN critic (Arjovsky et al. 2017, Algorithm 1:
//! the critic maximises `mean D(real) − mean D(fake)` and its weights are clipped after each
//! update; the generator, here the encoder, minimises the same estimate).
//!
//! The task is joint with the labelled task of the training language (`joint_with`) and
//! draws batches of its own corpus, the adversarial sentences of the other languages
//! (never translations of the labelled ones). Emu-Parallel (`parallel: true`, §4 "Emu
//! variants") reads translation pairs instead (`X → en`): both sides of the critic's and
//! the encoder's estimate come from the same pairs, the English targets as the training
//! language and their translations as the other languages. Each step of the labelled task (Algorithm 1)
//! first runs `critic_steps` updates of the discriminator alone, each on a fresh random
//! batch of training-language sentences and one of adversarial sentences, its weights
//! clipped to the head's `clip` after each (the trainer's inner loop, with its own Adam at
//! `lr`); then the main update adds `λ · (mean D(x_en) − mean D(x_other))` on the step's
//! batches to the classifier's loss, the discriminator frozen.

use crate::objectives::{CheckContext, ExampleKind, InnerLoop, Loss, Objective};
use crate::step::{Side, Step};
use crate::TrainError;
use burn::tensor::backend::AutodiffBackend;
use burn::tensor::backend::Backend;
use burn::tensor::Tensor;
use harness_recipe::check::Finding;
use serde::{Deserialize, Serialize};

/// The critic's Wasserstein estimate between the training language's embeddings and the
/// other languages': `mean D(x_en) − mean D(x_other)` over critic scores `[n, 1]`. The critic
/// is trained on its negative; the encoder's adversarial term is λ times it.
pub fn wasserstein_estimate<B: Backend>(
    scores_training: Tensor<B, 2>,
    scores_other: Tensor<B, 2>,
) -> Tensor<B, 1> {
    scores_training.mean() - scores_other.mean()
}

/// Adversarial language training against a discriminator head (Emu §2.3, Algorithm 1).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AdversarialLanguage {
    pub head: String,
    /// Weight of the adversarial term in the encoder's loss (Emu eq. 4).
    pub lambda: f64,
    /// Discriminator updates per encoder update.
    #[serde(default = "five")]
    pub critic_steps: u32,
    /// Learning rate of the discriminator's own Adam.
    #[serde(default = "lr_1e4")]
    pub lr: f64,
    /// The labelled task of the training language, whose batches are the discriminator's
    /// training-language side.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub joint_with: Option<String>,
    /// Emu-Parallel: the task's corpus is translation pairs, whose English side replaces
    /// the labelled batch in the estimate.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub parallel: bool,
}

fn five() -> u32 {
    5
}

fn lr_1e4() -> f64 {
    1e-4
}

impl Objective for AdversarialLanguage {
    const NAME: &'static str = "adversarial_language";
    const EXAMPLES: ExampleKind = ExampleKind::Labelled;

    fn check(&self, cx: &CheckContext<'_>) -> Vec<Finding> {
        let mut out = Vec::new();
        cx.head(&mut out, Self::NAME, &self.head, &["discriminator"]);
        cx.non_negative(&mut out, "lambda", self.lambda);
        if !(self.lr > 0.0 && self.lr.is_finite()) {
            out.push(Finding::new(crate::objectives::check::param("lr"),
                format!("learning rate must be > 0, found {}", self.lr),
            ));
        }
        if self.critic_steps == 0 {
            out.push(Finding::new(crate::objectives::check::param("critic_steps"), "must be ≥ 1, found 0"));
        }
        cx.joint_with(&mut out, self.joint_with.as_deref());
        if self.joint_with.is_none() {
            out.push(Finding::new(
                crate::objectives::check::param("joint_with"),
                "the adversarial task reads the training language's batches: name its labelled task (`joint_with: intent`)",
            ));
        }
        out
    }

    fn joint_with(&self) -> Option<&str> {
        self.joint_with.as_deref()
    }

    fn draws_own_batches(&self) -> bool {
        true
    }

    fn examples(&self) -> ExampleKind {
        if self.parallel {
            ExampleKind::Pairs
        } else {
            ExampleKind::Labelled
        }
    }

    fn inner_loop(&self) -> Option<InnerLoop> {
        Some(InnerLoop {
            steps: self.critic_steps,
            trains: vec![format!("heads.{}", self.head)],
            lr: self.lr,
            // The head's `clip` (the plan fills it in from `model.heads`).
            clip: None,
        })
    }
}

impl AdversarialLanguage {
    /// `mean D(x_en) − mean D(x_other)` on the step's two batches, or on the two sides of
    /// its own batch of pairs (dropout in the critic while training).
    fn estimate<B: AutodiffBackend>(&self, step: &mut Step<'_, B>) -> Result<Tensor<B, 1>, TrainError> {
        let (training, other) = if self.parallel {
            // `X → en` pairs: the English targets against their translations.
            let en = step.own_encode_side(Side::Second)?.sentence;
            (en, step.own_encode()?.sentence)
        } else {
            (
                step.encode(Side::First)?.sentence,
                step.own_encode()?.sentence,
            )
        };
        let critic = step.head(&self.head)?;
        let a = critic.forward(training, None, Some(step.noise()));
        let b = critic.forward(other, None, Some(step.noise()));
        Ok(wasserstein_estimate(a, b))
    }
}

impl Loss for AdversarialLanguage {
    fn loss<B: AutodiffBackend>(&self, step: &mut Step<'_, B>) -> Result<Tensor<B, 1>, TrainError> {
        Ok(self.estimate(step)? * self.lambda)
    }

    fn inner_loss<B: AutodiffBackend>(
        &self,
        step: &mut Step<'_, B>,
    ) -> Result<Tensor<B, 1>, TrainError> {
        Ok(self.estimate(step)?.neg())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use burn::backend::NdArray;

    type B = NdArray<f32>;

    /// By hand: scores (1, 3) against (−1, 0, 1): 2 − 0 = 2.
    #[test]
    fn hand_checked_value() {
        let dev = Default::default();
        let a = Tensor::<B, 1>::from_floats([1.0, 3.0], &dev).unsqueeze_dim(1);
        let b = Tensor::<B, 1>::from_floats([-1.0, 0.0, 1.0], &dev).unsqueeze_dim(1);
        assert_eq!(wasserstein_estimate(a, b).into_scalar(), 2.0);
    }
}
