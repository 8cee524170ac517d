//! What this build can train, checked before any work: `harness validate` (and every command
//! that loads a recipe) reports each part of a training recipe that the trainer would refuse
//! — all of them, with their key paths — instead of a valid-looking recipe that fails when
//! training reaches it. The lists mirror what `plan`, `corpora`, `tokenizer`, `trainer` and
//! `harness_model::system` implement: objectives from `objectives::ALL`, encoder kinds from
//! `harness_model::encoder::sentence::TRAINABLE`; a test keeps them in step with the
//! shipped recipes.

use harness_recipe::de::{Path, Seg};
use harness_recipe::schema::{Model, TokenizerKind};
use harness_recipe::Recipe;

/// Encoder kinds `harness_model::system` builds for training.
pub use harness_model::encoder::sentence::TRAINABLE as ENCODERS;
/// Tokenizer kinds it trains with: those it learns on the corpora (`tokenizer.rs`) and a
/// pretrained encoder's own (`harness_model::pretrained`).
pub const TOKENIZERS: &[TokenizerKind] = &[
    TokenizerKind::Bpe,
    TokenizerKind::Sentencepiece,
    TokenizerKind::Words,
    TokenizerKind::Pretrained,
];
/// Head kinds it builds.
pub const HEADS: &[&str] = &["mlp", "l2_softmax", "centers", "discriminator"];
/// Datasets `corpora` loads as training corpora.
pub use crate::corpora::CORPUS_DATASETS;

fn key(s: &str) -> Seg {
    Seg::Key(s.to_string())
}

/// `` `a`, `b` `` for messages.
fn quoted(names: &[&str]) -> String {
    let quoted: Vec<String> = names.iter().map(|n| format!("`{n}`")).collect();
    quoted.join(", ")
}

/// The start of a message about something this build does not train.
const NOT_HERE: &str = "this build cannot train";

/// Every part of `recipe` this build cannot train, as `(key path, problem)`; empty for a
/// recipe without training tasks (evaluation recipes train nothing).
pub fn untrainable(recipe: &Recipe) -> Vec<(Path, String)> {
    let mut out = Vec::new();
    if recipe.tasks.is_empty() {
        return out;
    }
    if let Some(t) = &recipe.data.tokenizer {
        if !TOKENIZERS.contains(&t.kind) {
            out.push((
                vec![key("data"), key("tokenizer"), key("kind")],
                format!("{NOT_HERE} a `{:?}` tokenizer: only vocabularies learned on the corpora (`bpe`, `sentencepiece`, `words`)", t.kind).to_lowercase(),
            ));
        }
    }
    if let Some(m) = &recipe.model {
        encoder_problems(recipe, m, &mut out);
        model_kind_problems(m, &mut out);
    }
    task_problems(recipe, &mut out);
    out
}

/// Adds the problems of `model.encoder` and `model.encoders` to `out`: their options, and
/// a pretrained encoder without its tokenizer (or the reverse).
fn encoder_problems(recipe: &Recipe, m: &Model, out: &mut Vec<(Path, String)>) {
    let encoders = std::iter::once((vec![key("model"), key("encoder")], &m.encoder)).chain(
        m.encoders
            .iter()
            .map(|(n, e)| (vec![key("model"), key("encoders"), key(n)], e)),
    );
    let pretrained_tokenizer = recipe
        .data
        .tokenizer
        .as_ref()
        .is_some_and(|t| t.kind == TokenizerKind::Pretrained);
    let mut any_pretrained = false;
    for (at, e) in encoders {
        if let harness_recipe::schema::Encoder::Pretrained(p) = e {
            any_pretrained = true;
            if !pretrained_tokenizer {
                out.push((
                    vec![key("data"), key("tokenizer"), key("kind")],
                    format!("the pretrained encoder `{}` reads its own tokenizer's ids: set `data.tokenizer: {{kind: pretrained}}`", p.name),
                ));
            }
            if !harness_model::encoder::bert_sentence::accepts(p.pool) {
                let mut at = at.clone();
                at.push(key("pool"));
                out.push((
                    at,
                    "a pretrained (BERT) encoder pools with `mean`, `cls` or `max`".into(),
                ));
            }
        }
        if let harness_recipe::schema::Encoder::Cbow(c) = e {
            if !c.frozen.is_empty() {
                let mut p = at.clone();
                p.push(key("frozen"));
                out.push((
                    p,
                    format!("{NOT_HERE} per-language frozen embeddings yet (X-CBOW keeps English fixed; it comes with the XNLI alignment issue): freeze `<encoder>.embeddings` in a stage instead"),
                ));
            }
            if !harness_model::encoder::cbow::accepts(c.pool) {
                let mut p = at;
                p.push(key("pool"));
                out.push((p, "a `cbow` encoder pools with `mean` or `max`".into()));
            }
        }
    }
    if pretrained_tokenizer && !any_pretrained {
        out.push((
            vec![key("data"), key("tokenizer"), key("kind")],
            "a `pretrained` tokenizer belongs to a pretrained encoder (`model.encoder: {kind: pretrained, name: …}`); learn a vocabulary (`bpe`, `sentencepiece`, `words`) for the others".into(),
        ));
    }
}

/// Adds to `out` the main encoder's kind and the head kinds this build does not train.
fn model_kind_problems(m: &Model, out: &mut Vec<(Path, String)>) {
    let kind = m.encoder.kind();
    if !ENCODERS.contains(&kind) {
        out.push((
            vec![key("model"), key("encoder"), key("kind")],
            format!(
                "{NOT_HERE} a `{kind}` encoder (it trains {})",
                quoted(ENCODERS)
            ),
        ));
    }
    for (name, h) in &m.heads {
        let kind = h.kind();
        if !HEADS.contains(&kind) {
            out.push((
                vec![key("model"), key("heads"), key(name), key("kind")],
                format!("{NOT_HERE} a `{kind}` head (it trains {})", quoted(HEADS)),
            ));
        }
    }
}

/// Adds to `out` the tasks' objectives this build does not train and the shipped datasets
/// it cannot read as their corpora (each corpus once).
fn task_problems(recipe: &Recipe, out: &mut Vec<(Path, String)>) {
    let mut corpora_reported = std::collections::BTreeSet::new();
    for (i, t) in recipe.tasks.iter().enumerate() {
        let base = vec![key("tasks"), Seg::Index(i)];
        let objective = t.objective.name();
        let trainable = crate::objectives::trainable_names();
        let known = crate::objectives::find(crate::objectives::ALL, objective).is_some();
        // An unknown name is the recipe check's to report (with its did-you-mean).
        if known && !trainable.contains(&objective) {
            let mut p = base.clone();
            p.push(key("objective"));
            out.push((
                p,
                format!(
                    "{NOT_HERE} the objective `{objective}` (task `{}`; it trains {})",
                    t.name,
                    quoted(&trainable)
                ),
            ));
        }
        if let Some(c) = recipe.data.corpora.get(&t.corpus) {
            let shipped = c.dataset.as_deref();
            if shipped.is_some_and(|d| !CORPUS_DATASETS.contains(&d))
                && corpora_reported.insert(&t.corpus)
            {
                out.push((
                    vec![key("data"), key("corpora"), key(&t.corpus), key("dataset")],
                    format!(
                        "`{}` cannot be a training corpus in this build (task `{}`; it reads {})",
                        c.source_name(),
                        t.name,
                        quoted(CORPUS_DATASETS)
                    ),
                ));
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use harness_recipe::{de::path_string, load_with, LoadOptions};

    fn recipe(name: &str, profile: Option<&str>) -> Recipe {
        let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../../recipes")
            .join(name);
        load_with(
            &path,
            &LoadOptions {
                profile: profile.map(String::from),
                sets: vec![],
            },
            &harness_bench::known().unwrap(),
        )
        .unwrap_or_else(|e| panic!("{name}: {e}"))
        .recipe
    }

    fn keys(r: &Recipe) -> Vec<String> {
        untrainable(r).iter().map(|(p, _)| path_string(p)).collect()
    }

    #[test]
    fn the_trainable_recipes_pass_in_every_profile() {
        for profile in [None, Some("paper"), Some("nli"), Some("layers-3")] {
            assert_eq!(keys(&recipe("laser.yaml", profile)), Vec::<String>::new());
        }
        for profile in [None, Some("paper"), Some("alpha-0")] {
            assert_eq!(
                keys(&recipe("seq2seq-similarity.yaml", profile)),
                Vec::<String>::new()
            );
        }
        // Evaluation recipes train nothing.
        assert!(keys(&recipe("hashed-ngrams.yaml", None)).is_empty());
    }

    #[test]
    fn every_untrainable_part_of_the_other_recipes_is_named() {
        // muse-xling trains: its transformer encoder and its three ranking objectives.
        for profile in [None, Some("paper"), Some("transranking"), Some("en-zh")] {
            assert_eq!(
                keys(&recipe("muse-xling.yaml", profile)),
                Vec::<String>::new()
            );
        }
        // xnli-align trains: alignment_l2, stages with copies, several encoders, X-CBOW.
        for profile in [
            None,
            Some("paper"),
            Some("x-bilstm-last"),
            Some("x-cbow"),
            Some("no-negatives"),
            Some("lambda-0.5"),
            Some("fixed-embeddings"),
        ] {
            assert_eq!(
                keys(&recipe("xnli-align.yaml", profile)),
                Vec::<String>::new(),
                "{profile:?}"
            );
        }
        // emu trains: the pretrained encoder fine-tuned, its three heads and objectives.
        for profile in [
            None,
            Some("paper"),
            Some("no-ld"),
            Some("no-ld-cl"),
            Some("atis"),
        ] {
            assert_eq!(
                keys(&recipe("emu.yaml", profile)),
                Vec::<String>::new(),
                "{profile:?}"
            );
        }
        // A pretrained encoder needs its own tokenizer, and the reverse.
        let mut r = recipe("emu.yaml", None);
        r.data.tokenizer.as_mut().unwrap().kind = TokenizerKind::Bpe;
        assert_eq!(keys(&r), vec!["data.tokenizer.kind".to_string()]);
        let mut r = recipe("laser.yaml", None);
        r.data.tokenizer.as_mut().unwrap().kind = TokenizerKind::Pretrained;
        assert_eq!(keys(&r), vec!["data.tokenizer.kind".to_string()]);
    }
}
