//! An objective defined outside harness-train (here, in a test crate) joins the recipe
//! language and the trainer with no edit anywhere else: its definition added to the list
//! handed to the recipe checks makes it an accepted name (and its parameters checked, with
//! file and line), and its loss added to the registry trains it.

use burn::backend::{Autodiff, NdArray};
use burn::tensor::backend::AutodiffBackend;
use burn::tensor::Tensor;
use harness_data::records::Bitext;
use harness_recipe::check::Finding;
use harness_recipe::{validate, LoadOptions};
use harness_train::corpora::Loaded;
use harness_train::objectives::{
    self, check::param, CheckContext, ExampleKind, Loss, Objective, ObjectiveDef,
};
use harness_train::plan::compile_plan;
use harness_train::step::{Side, Step};
use harness_train::tokenizer::tokenizer_for;
use harness_train::trainer::{train, Options};
use harness_train::TrainError;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// Pulls each pair's two encodings together: `scale · mean ‖u − v‖₁`.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct Mirror {
    #[serde(default = "one")]
    scale: f64,
}

fn one() -> f64 {
    1.0
}

impl Objective for Mirror {
    const NAME: &'static str = "mirror";
    const EXAMPLES: ExampleKind = ExampleKind::Pairs;

    fn check(&self, _cx: &CheckContext<'_>) -> Vec<Finding> {
        if self.scale > 0.0 {
            Vec::new()
        } else {
            vec![Finding::new(
                param("scale"),
                format!("must be > 0, found {}", self.scale),
            )]
        }
    }
}

impl Loss for Mirror {
    fn loss<B: AutodiffBackend>(&self, step: &mut Step<'_, B>) -> Result<Tensor<B, 1>, TrainError> {
        let u = step.encode(Side::First)?.sentence;
        let v = step.encode(Side::Second)?.sentence;
        Ok((u - v).abs().mean() * self.scale)
    }
}

const MIRROR: ObjectiveDef = ObjectiveDef::trainable::<Mirror>();

fn recipe_text(objective: &str, params: &str) -> String {
    format!(
        "name: mirror-test
seed: 4
data:
  tokenizer: {{kind: bpe, vocab: 300, train_on: [pairs]}}
  corpora:
    pairs: {{dataset: parallel-pairs, pairs: [deu-eng]}}
model:
  encoder: {{kind: bilstm, layers: 1, hidden: 8, embed: 8, pool: max}}
tasks:
  - name: mirror
    objective: {objective}
    corpus: pairs
    params: {params}
optimizer: {{kind: adam, lr: 0.01}}
train: {{steps: 12, batch_size: 4, max_len: 12}}
"
    )
}

fn known() -> harness_recipe::Known {
    let mut known = harness_bench::known().unwrap();
    known.objectives = objectives::schemas();
    known.objectives.push(MIRROR.schema());
    known
}

#[test]
fn a_test_objective_is_an_accepted_name_with_checked_parameters() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("r.yaml");
    let check = |text: String| {
        std::fs::write(&path, text).unwrap();
        validate(&path, &LoadOptions::default(), &known())
    };
    // Accepted, its default spelt out in the resolved recipe.
    let ok = check(recipe_text("mirror", "{}")).unwrap();
    assert_eq!(
        ok.recipe.tasks[0].objective.params["scale"].as_f64(),
        Some(1.0)
    );
    // A misspelt name lists it among the accepted ones and suggests it.
    let problems = check(recipe_text("mirrr", "{}")).unwrap_err();
    let text: Vec<String> = problems.iter().map(|p| p.to_string()).collect();
    assert!(
        text.iter()
            .any(|t| t.contains("`mirror`") && t.contains("`seq2seq_ce`")),
        "{text:?}"
    );
    // Its own checks, at the file's line of the parameter.
    let problems = check(recipe_text("mirror", "{scale: -1}")).unwrap_err();
    let text: Vec<String> = problems.iter().map(|p| p.to_string()).collect();
    assert!(
        text.iter().any(|t| t.contains("r.yaml:13")
            && t.contains("params.scale")
            && t.contains("must be > 0")),
        "{text:?}"
    );
    let problems = check(recipe_text("mirror", "{scael: 2}")).unwrap_err();
    let text: Vec<String> = problems.iter().map(|p| p.to_string()).collect();
    assert!(
        text.iter().any(|t| t.contains("unknown key `scael`")),
        "{text:?}"
    );
}

#[test]
fn a_test_objective_trains() {
    type B = Autodiff<NdArray<f32>>;
    let recipe: harness_recipe::Recipe =
        serde_yaml::from_str(&recipe_text("mirror", "{scale: 2.0}")).unwrap();
    let pairs: Vec<Bitext> = (0..16)
        .map(|i| Bitext {
            source: format!("ich sehe {i} katzen"),
            target: format!("i see {i} cats"),
        })
        .collect();
    let mut loaded = BTreeMap::new();
    loaded.insert(
        "pairs".to_string(),
        Loaded::Parallel(vec![("deu".into(), "eng".into(), pairs)]),
    );
    let dir = tempfile::tempdir().unwrap();
    let tok = tokenizer_for(&recipe, &loaded, &dir.path().join("tokenizer.json")).unwrap();
    let mut defs = objectives::ALL.to_vec();
    defs.push(&MIRROR);
    let plan = compile_plan(&recipe, &tok, &loaded, &defs).unwrap();
    let opts = Options::<B> {
        objectives: objectives::registry().with::<Mirror>(),
        run_dir: dir.path().to_path_buf(),
        stop_after: None,
        progress: false,
        keep: 1,
        evaluate: None,
    };
    let out = train::<B>(&plan, &Default::default(), opts).unwrap();
    assert_eq!(out.steps, 12);
    let losses: Vec<f64> = std::fs::read_to_string(dir.path().join("train/metrics.jsonl"))
        .unwrap()
        .lines()
        .map(|l| {
            serde_json::from_str::<serde_json::Value>(l).unwrap()["loss"]
                .as_f64()
                .unwrap()
        })
        .collect();
    assert!(losses[11] < losses[0], "{losses:?}");
    // Without its loss in the registry, the trainer says which objective it cannot train.
    let opts = Options::<B> {
        objectives: objectives::registry(),
        run_dir: tempfile::tempdir().unwrap().path().to_path_buf(),
        stop_after: None,
        progress: false,
        keep: 1,
        evaluate: None,
    };
    let e = train::<B>(&plan, &Default::default(), opts).unwrap_err();
    assert!(e.to_string().contains("`mirror`"), "{e}");
}
