//! `translation_ranking`: in-batch softmax ranking of translations with k hard negatives
//! (Guo et al. 2018; multilingual USE §3.2). Declared: the recipe language checks its
//! parameters; training it comes with the multilingual USE issue (hard negatives).

use crate::objectives::{CheckContext, ExampleKind, Objective};
use harness_recipe::check::Finding;
use serde::{Deserialize, Serialize};

/// In-batch softmax ranking of translations (Guo et al. 2018; multilingual USE §3).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TranslationRanking {
    /// Hard negatives appended per example.
    #[serde(default)]
    pub hard_negatives: u32,
    /// Rank in both directions (source→target and target→source).
    #[serde(default)]
    pub bidirectional: bool,
    /// Additive margin on the positive score.
    #[serde(default)]
    pub margin: f64,
}

impl Objective for TranslationRanking {
    const NAME: &'static str = "translation_ranking";
    const EXAMPLES: ExampleKind = ExampleKind::Pairs;

    fn check(&self, cx: &CheckContext<'_>) -> Vec<Finding> {
        let mut out = Vec::new();
        cx.non_negative(&mut out, "margin", self.margin);
        out
    }
}
