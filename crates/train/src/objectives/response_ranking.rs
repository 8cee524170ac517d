//! `response_ranking`: conversational response ranking (multilingual USE §3.2). Declared:
//! training it comes with the multilingual USE issue (conversation examples).

use crate::objectives::{CheckContext, ExampleKind, Objective};
use harness_recipe::check::Finding;
use serde::{Deserialize, Serialize};

/// Conversational response ranking (multilingual USE §3).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ResponseRanking {
    /// Projection head applied on the response side.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub head: Option<String>,
}

impl Objective for ResponseRanking {
    const NAME: &'static str = "response_ranking";
    const EXAMPLES: ExampleKind = ExampleKind::Conversation;

    fn check(&self, cx: &CheckContext<'_>) -> Vec<Finding> {
        let mut out = Vec::new();
        if let Some(h) = &self.head {
            cx.head(&mut out, Self::NAME, h, &["mlp"]);
        }
        out
    }
}
