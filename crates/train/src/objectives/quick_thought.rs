//! `quick_thought`: predict the previous and next sentence (modified Quick-Thought;
//! multilingual USE §3.2). Declared: training it comes with the multilingual USE issue
//! (running-text examples).

use crate::objectives::{CheckContext, ExampleKind, Objective};
use harness_recipe::check::Finding;
use serde::{Deserialize, Serialize};

/// Predict the previous and next sentence (modified Quick-Thought; multilingual USE §3).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct QuickThought {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub head: Option<String>,
    /// Sentences of context on each side.
    #[serde(default = "one")]
    pub context: u32,
}

fn one() -> u32 {
    1
}

impl Objective for QuickThought {
    const NAME: &'static str = "quick_thought";
    const EXAMPLES: ExampleKind = ExampleKind::RunningText;

    fn check(&self, cx: &CheckContext<'_>) -> Vec<Finding> {
        let mut out = Vec::new();
        if let Some(h) = &self.head {
            cx.head(&mut out, Self::NAME, h, &["mlp"]);
        }
        if self.context == 0 {
            out.push(Finding::new(crate::objectives::check::param("context"), "must be ≥ 1, found 0"));
        }
        out
    }
}
