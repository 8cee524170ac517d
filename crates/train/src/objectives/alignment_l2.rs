//! `alignment_l2`: align a target-language encoder to a frozen English one on parallel data
//! (XNLI §4.3). Declared: training it comes with the XNLI alignment issue (stages, frozen
//! encoders).

use crate::objectives::{CheckContext, ExampleKind, Objective};
use harness_recipe::check::Finding;
use serde::{Deserialize, Serialize};

/// Align a target-language encoder to a frozen English one on parallel data (XNLI §4.3).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AlignmentL2 {
    /// Weight of the negative (contrastive) terms.
    #[serde(default = "quarter")]
    pub lambda: f64,
    /// Random negatives per pair.
    #[serde(default = "one")]
    pub negatives: u32,
    /// Language of the frozen side.
    #[serde(default = "english")]
    pub pivot: String,
    /// Fine-tune the target side's token embeddings.
    #[serde(default = "yes")]
    pub tune_embeddings: bool,
}

fn quarter() -> f64 {
    0.25
}

fn one() -> u32 {
    1
}

fn english() -> String {
    "en".into()
}

fn yes() -> bool {
    true
}

impl Objective for AlignmentL2 {
    const NAME: &'static str = "alignment_l2";
    const EXAMPLES: ExampleKind = ExampleKind::Pairs;

    fn check(&self, cx: &CheckContext<'_>) -> Vec<Finding> {
        let mut out = Vec::new();
        cx.non_negative(&mut out, "lambda", self.lambda);
        if self.pivot.is_empty() {
            out.push(Finding::new(crate::objectives::check::param("pivot"), "must name a language"));
        }
        out
    }
}
