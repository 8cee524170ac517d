//! What an objective's [`super::Objective::check`] reads of the recipe, and the checks
//! objectives share: ranges, and references to heads and tasks with a did-you-mean.

use harness_recipe::check::{reference, Finding};
use harness_recipe::de::{Path, Seg};
use harness_recipe::schema::{Encoder, Features, Head};
use harness_recipe::Recipe;

/// The recipe and the task being checked.
pub struct CheckContext<'a> {
    /// The whole recipe (heads, tasks, decoder).
    pub recipe: &'a Recipe,
    /// Index of the task in `recipe.tasks`.
    pub task: usize,
}

/// Why a task cannot have hard negatives on its corpus (`validate` and the miner say it).
pub const HARD_NEGATIVE_TEXTS: &str =
    "hard negatives need the task's corpus texts (a parallel or conversation corpus)";

/// `params.<key>`, the path of a parameter.
pub fn param(key: &str) -> Path {
    vec![Seg::Key("params".into()), Seg::Key(key.into())]
}

impl CheckContext<'_> {
    /// The task's name.
    pub fn task_name(&self) -> &str {
        self.recipe
            .tasks
            .get(self.task)
            .map_or("", |t| t.name.as_str())
    }

    /// `key` must be ≥ 0 (and finite).
    pub fn non_negative(&self, out: &mut Vec<Finding>, key: &str, v: f64) {
        if !(v >= 0.0 && v.is_finite()) {
            out.push(Finding::new(param(key), format!("must be ≥ 0, found {v}")));
        }
    }

    /// `key` must be > 0 (and finite).
    pub fn positive(&self, out: &mut Vec<Finding>, key: &str, v: f64) {
        if !(v > 0.0 && v.is_finite()) {
            out.push(Finding::new(param(key), format!("must be > 0, found {v}")));
        }
    }

    /// `params.head` must name a head of `model.heads` of one of `kinds`.
    pub fn head(&self, out: &mut Vec<Finding>, objective: &str, head: &str, kinds: &[&str]) {
        self.head_at(out, "head", objective, head, kinds);
    }

    /// `params.<key>` must name a head of `model.heads` of one of `kinds`.
    pub fn head_at(
        &self,
        out: &mut Vec<Finding>,
        key: &str,
        objective: &str,
        head: &str,
        kinds: &[&str],
    ) {
        let Some(model) = &self.recipe.model else {
            return;
        };
        let names: Vec<String> = model.heads.keys().cloned().collect();
        if let Some(f) = reference(param(key), "head", head, &names, " under `model.heads`") {
            out.push(f);
            return;
        }
        if let Some(h) = model.heads.get(head).filter(|h| !kinds.contains(&h.kind())) {
            let kinds: Vec<String> = kinds.iter().map(|k| format!("`{k}`")).collect();
            out.push(Finding::new(
                param(key),
                format!(
                    "objective `{objective}` needs a head of kind {}, but `{head}` is `{}`",
                    kinds.join(", "),
                    h.kind()
                ),
            ));
        }
    }

    /// `params.<key>` must name a projection head (an `mlp` of one sentence, without
    /// `classes`) whose output has the sentence vector's size, since a dot product ranks
    /// the projected vector against an encoder's own.
    pub fn projection_head(&self, out: &mut Vec<Finding>, key: &str, objective: &str, head: &str) {
        let before = out.len();
        self.head_at(out, key, objective, head, &["mlp"]);
        if out.len() > before {
            return;
        }
        let Some(model) = &self.recipe.model else {
            return;
        };
        let Some(Head::Mlp(h)) = model.heads.get(head) else {
            return;
        };
        let fix = |what: String| Finding::new(param(key), what);
        if h.classes.is_some() || h.features == Features::Pair {
            out.push(fix(format!(
                "objective `{objective}` projects one sentence through `{head}`, which is a classifier \
                 (`classes` or `features: pair`): remove them to make it a projection"
            )));
            return;
        }
        let Some(&last) = h.hidden.last() else {
            out.push(fix(format!(
                "head `{head}` has no `hidden` layers to project through"
            )));
            return;
        };
        let d = match &model.encoder {
            Encoder::Transformer(e) => Some(e.d_model),
            Encoder::Bilstm(e) => Some(2 * e.hidden),
            Encoder::Cbow(e) => Some(e.embed),
            _ => None,
        };
        if let Some(d) = d.filter(|&d| d != last) {
            out.push(fix(format!(
                "head `{head}` ends in {last} units but the sentence vectors have {d}: the dot \
                 product needs equal sizes; make the head's last `hidden` size {d}"
            )));
        }
    }

    /// Hard negatives (`params.hard_negatives` > 0) are mined over the task corpus's texts,
    /// which only a shipped parallel or conversation dataset holds at hand
    /// (`hard_negatives.rs` reads them; a corpus of the user's files is streamed).
    pub fn hard_negatives_corpus(&self, out: &mut Vec<Finding>, k: u32) {
        let Some(task) = self.recipe.tasks.get(self.task) else {
            return;
        };
        let Some(corpus) = self.recipe.data.corpora.get(&task.corpus) else {
            return;
        };
        if k > 0
            && !corpus
                .dataset
                .as_deref()
                .is_some_and(crate::corpora::holds_texts)
        {
            out.push(Finding::new(
                vec![Seg::Key("corpus".into())],
                format!("{HARD_NEGATIVE_TEXTS}; drop `hard_negatives` from this task"),
            ));
        }
    }

    /// `params.joint_with` must name another task of the recipe.
    pub fn joint_with(&self, out: &mut Vec<Finding>, partner: Option<&str>) {
        let Some(partner) = partner else { return };
        let names: Vec<String> = self.recipe.tasks.iter().map(|t| t.name.clone()).collect();
        if let Some(f) = reference(param("joint_with"), "task", partner, &names, "") {
            out.push(f);
        } else if partner == self.task_name() {
            out.push(Finding::new(
                param("joint_with"),
                "a task cannot be joint with itself",
            ));
        }
    }
}
