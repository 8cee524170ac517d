//! `adversarial_language`: adversarial language training against a discriminator head (Emu
//! §2.3, Algorithm 1). Declared: training it comes with the Emu issue (inner critic loop).

use crate::objectives::{CheckContext, ExampleKind, Objective};
use harness_recipe::check::Finding;
use serde::{Deserialize, Serialize};

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
        out
    }
}
