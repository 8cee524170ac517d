//! What an objective's [`super::Objective::check`] reads of the recipe, and the checks
//! objectives share: ranges, and references to heads and tasks with a did-you-mean.

use harness_core::suggest::did_you_mean;
use harness_recipe::de::{Path, Seg};
use harness_recipe::Recipe;

/// The recipe and the task being checked.
pub struct CheckContext<'a> {
    /// The whole recipe (heads, tasks, decoder).
    pub recipe: &'a Recipe,
    /// Index of the task in `recipe.tasks`.
    pub task: usize,
}

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
    pub fn non_negative(&self, out: &mut Vec<(Path, String)>, key: &str, v: f64) {
        if !(v >= 0.0 && v.is_finite()) {
            out.push((param(key), format!("must be ≥ 0, found {v}")));
        }
    }

    /// `key` must be > 0 (and finite).
    pub fn positive(&self, out: &mut Vec<(Path, String)>, key: &str, v: f64) {
        if !(v > 0.0 && v.is_finite()) {
            out.push((param(key), format!("must be > 0, found {v}")));
        }
    }

    /// `params.head` must name a head of `model.heads` of one of `kinds`.
    pub fn head(&self, out: &mut Vec<(Path, String)>, objective: &str, head: &str, kinds: &[&str]) {
        let Some(model) = &self.recipe.model else {
            return;
        };
        match model.heads.get(head) {
            None => {
                let names: Vec<&str> = model.heads.keys().map(String::as_str).collect();
                let defined = if names.is_empty() {
                    " (none are defined under `model.heads`)".to_string()
                } else {
                    did_you_mean(head, &names)
                };
                out.push((param("head"), format!("unknown head `{head}`{defined}")));
            }
            Some(h) if !kinds.contains(&h.kind()) => {
                let kinds: Vec<String> = kinds.iter().map(|k| format!("`{k}`")).collect();
                out.push((
                    param("head"),
                    format!(
                        "objective `{objective}` needs a head of kind {}, but `{head}` is `{}`",
                        kinds.join(", "),
                        h.kind()
                    ),
                ));
            }
            Some(_) => {}
        }
    }

    /// `params.joint_with` must name another task of the recipe.
    pub fn joint_with(&self, out: &mut Vec<(Path, String)>, partner: Option<&str>) {
        let Some(partner) = partner else { return };
        let names: Vec<&str> = self.recipe.tasks.iter().map(|t| t.name.as_str()).collect();
        if !names.contains(&partner) {
            out.push((
                param("joint_with"),
                format!("unknown task `{partner}`{}", did_you_mean(partner, &names)),
            ));
        } else if partner == self.task_name() {
            out.push((
                param("joint_with"),
                "a task cannot be joint with itself".into(),
            ));
        }
    }
}
