//! `l2_softmax`: L2-constrained softmax classification through an `l2_softmax` head (Emu
//! §2.1). Declared: training it comes with the Emu issue.

use crate::objectives::{CheckContext, ExampleKind, Objective};
use harness_recipe::check::Finding;
use serde::{Deserialize, Serialize};

/// A loss computed by one head (L2-constrained softmax).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct L2Softmax {
    pub head: String,
}

impl Objective for L2Softmax {
    const NAME: &'static str = "l2_softmax";
    const EXAMPLES: ExampleKind = ExampleKind::Labelled;

    fn check(&self, cx: &CheckContext<'_>) -> Vec<Finding> {
        let mut out = Vec::new();
        cx.head(&mut out, Self::NAME, &self.head, &["l2_softmax"]);
        out
    }
}
