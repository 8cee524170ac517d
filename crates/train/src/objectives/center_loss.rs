//! `center_loss`: center loss added with weight λ (Emu eq. 2). Declared: training it comes
//! with the Emu issue.

use crate::objectives::{CheckContext, ExampleKind, Objective};
use harness_recipe::check::Finding;
use serde::{Deserialize, Serialize};

/// Center loss, added with weight `lambda` (Emu eq. 2).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CenterLoss {
    pub head: String,
    pub lambda: f64,
    /// Learning rate of the centroid updates.
    #[serde(default = "half")]
    pub center_lr: f64,
}

fn half() -> f64 {
    0.5
}

impl Objective for CenterLoss {
    const NAME: &'static str = "center_loss";
    const EXAMPLES: ExampleKind = ExampleKind::Labelled;

    fn check(&self, cx: &CheckContext<'_>) -> Vec<Finding> {
        let mut out = Vec::new();
        cx.head(&mut out, Self::NAME, &self.head, &["centers"]);
        cx.non_negative(&mut out, "lambda", self.lambda);
        cx.positive(&mut out, "center_lr", self.center_lr);
        out
    }
}
