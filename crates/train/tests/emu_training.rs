//! Emu's training on a tiny model (the tests): the WGAN step order of Algorithm 1
//! (the critic updated and clipped first, on the encoder as it was; then the encoder updated
//! with the critic frozen), the centres moving by Wen et al.'s rule and never by the
//! optimizer, and frozen parameters unchanged and absent from every optimizer's state.

use burn::backend::{Autodiff, NdArray};
use burn::module::{Module, ModuleVisitor, Param, ParamId};
use burn::tensor::Tensor;
use harness_train::checkpoint;
use harness_train::corpora::Loaded;
use harness_train::objectives;
use harness_train::optim::AnyOptimizer;
use harness_train::plan::{compile_plan, Plan};
use harness_train::tokenizer::tokenizer_for;
use harness_train::trainer::{train, Options};
use std::collections::BTreeMap;
use std::path::Path;

type B = Autodiff<NdArray<f32>>;
type Inner = NdArray<f32>;

const WORDS: [&str; 6] = ["flight", "hotel", "weather", "alarm", "music", "taxi"];

/// English sentences of three intents, and "other-language" sentences without labels.
fn corpora() -> BTreeMap<String, Loaded> {
    let classes: Vec<String> = ["book", "ask", "play"].map(String::from).to_vec();
    let items: Vec<(String, u32)> = (0..24)
        .map(|i| {
            let c = (i % 3) as u32;
            let verb = ["book a", "what is the", "play some"][c as usize];
            (format!("{verb} {} please", WORDS[i % 6]), c)
        })
        .collect();
    let other: Vec<(String, u32)> = (0..12)
        .map(|i| (format!("bitte {} jetzt {}", WORDS[i % 6], i % 4), 0))
        .collect();
    let mut m = BTreeMap::new();
    m.insert(
        "english".to_string(),
        Loaded::Labelled {
            items,
            classes: classes.clone(),
        },
    );
    m.insert(
        "other".to_string(),
        Loaded::Labelled {
            items: other,
            classes: vec!["none".into()],
        },
    );
    m
}

fn recipe(lambda: f64, critic_steps: u32, frozen: &str) -> harness_recipe::Recipe {
    let yaml = format!(
        "name: tiny-emu
seed: 5
data:
  tokenizer: {{kind: bpe, vocab: 300}}
  corpora:
    english: {{dataset: xsid, splits: [train], languages: [en]}}
    other: {{dataset: xsid, splits: [valid], languages: [de]}}
model:
  encoder: {{kind: bilstm, layers: 1, hidden: 6, embed: 8, pool: max}}
  heads:
    intent: {{kind: l2_softmax, alpha: 4.0}}
    centers: {{kind: centers}}
    language: {{kind: discriminator, hidden: [5], clip: 0.05}}
tasks:
  - {{name: intent, objective: l2_softmax, corpus: english, params: {{head: intent}}}}
  - {{name: center, objective: center_loss, corpus: english, params: {{head: centers, lambda: 0.1, center_lr: 0.5, joint_with: intent}}}}
  - {{name: adversarial, objective: adversarial_language, corpus: other, params: {{head: language, lambda: {lambda}, critic_steps: {critic_steps}, lr: 0.01, joint_with: intent}}}}
stages:
  1: {{frozen: [{frozen}]}}
optimizer: {{kind: adam, lr: 0.01}}
train: {{steps: 3, batch_size: 4, max_len: 12, checkpoint_every: 1}}
"
    );
    serde_yaml::from_str(&yaml).expect("test recipe")
}

fn plan(r: &harness_recipe::Recipe, dir: &Path) -> Plan {
    let loaded = corpora();
    let tok = tokenizer_for(r, &loaded, &dir.join("tokenizer.json")).unwrap();
    compile_plan(r, &tok, &loaded, objectives::ALL).unwrap()
}

fn run(r: &harness_recipe::Recipe, dir: &Path, steps: u64) -> Plan {
    let p = plan(r, dir);
    let opts = Options::<B> {
        objectives: harness_train::objectives::registry(),
        run_dir: dir.to_path_buf(),
        stop_after: Some(steps),
        progress: false,
        keep: 10,
        evaluate: None,
    };
    train::<B>(&p, &Default::default(), opts).unwrap();
    p
}

struct Collect(Vec<f32>, Vec<ParamId>);
impl<Bk: burn::tensor::backend::Backend> ModuleVisitor<Bk> for Collect {
    fn visit_float<const D: usize>(&mut self, p: &Param<Tensor<Bk, D>>) {
        self.0.extend(
            p.val()
                .into_data()
                .convert::<f32>()
                .to_vec::<f32>()
                .unwrap(),
        );
        self.1.push(p.id);
    }
}

fn values<M: Module<Inner>>(m: &M) -> (Vec<f32>, Vec<ParamId>) {
    let mut c = Collect(Vec::new(), Vec::new());
    m.visit(&mut c);
    (c.0, c.1)
}

fn model_at(p: &Plan, dir: &Path, step: u64) -> harness_model::system::System<Inner> {
    let dev = Default::default();
    let ck = checkpoint::step_dir(&dir.join("checkpoints"), step);
    checkpoint::load_model(&ck, p.system.init::<Inner>(0, &dev), &dev).unwrap()
}

fn head(p: &Plan, name: &str) -> usize {
    p.system.head_index(name).unwrap()
}

#[test]
fn the_critic_trains_first_on_the_encoder_as_it_was_then_stays_fixed_while_the_encoder_moves() {
    let dev = Default::default();
    // Two runs that differ only in the adversarial weight λ of the encoder's loss.
    let (a, b) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let pa = run(&recipe(0.0, 3, "encoder.embeddings"), a.path(), 1);
    let pb = run(&recipe(5.0, 3, "encoder.embeddings"), b.path(), 1);
    let (ma, mb) = (model_at(&pa, a.path(), 1), model_at(&pb, b.path(), 1));
    let critic = head(&pa, "language");
    let init = pa.system.init::<Inner>(pa.recipe.seed, &dev);
    let (critic_init, _) = values(&init.heads[critic]);
    let (critic_a, _) = values(&ma.heads[critic]);
    let (critic_b, _) = values(&mb.heads[critic]);
    // The critic moved and is clipped to ±0.05 (the head's `clip`)...
    assert_ne!(critic_a, critic_init);
    assert!(
        critic_a.iter().all(|w| w.abs() <= 0.05 + 1e-7),
        "{critic_a:?}"
    );
    // ...and its updates came before the encoder's (both runs start from the same encoder,
    // so the critic is the same whatever λ does to the encoder afterwards), and the main
    // update left it alone.
    assert_eq!(critic_a, critic_b);
    // λ reaches the encoder: the adversarial term's gradient went through the fixed critic.
    assert_ne!(values(&ma.encoders[0]).0, values(&mb.encoders[0]).0);
}

#[test]
fn centres_move_by_their_own_rule_and_frozen_parameters_get_no_optimizer_state() {
    let dev = Default::default();
    let d = tempfile::tempdir().unwrap();
    let p = run(&recipe(0.5, 2, "encoder.embeddings"), d.path(), 3);
    let init = p.system.init::<Inner>(p.recipe.seed, &dev);
    let last = model_at(&p, d.path(), 3);
    // The centres start at zero and moved (Wen et al.'s update, applied after each step).
    let centers = head(&p, "centers");
    let (c0, _) = values(&init.heads[centers]);
    assert!(c0.iter().all(|&w| w == 0.0));
    let (c3, _) = values(&last.heads[centers]);
    assert!(c3.iter().any(|&w| w != 0.0), "{c3:?}");
    // The frozen embedding table did not move.
    let table = |m: &harness_model::system::System<Inner>| {
        m.encoders[0].embedding_tables()[0]
            .val()
            .into_data()
            .convert::<f32>()
            .to_vec::<f32>()
            .unwrap()
    };
    assert_eq!(table(&init), table(&last));
    // The main optimizer keeps state for the encoder's other weights and the softmax layer
    // only: not the embeddings (frozen), not the centres (their own rule), not the critic
    // (its own optimizer, which in turn holds the critic alone). Ids are the checkpoint's
    // (a parameter's id is saved with it).
    let ck = checkpoint::step_dir(&d.path().join("checkpoints"), 3);
    let spec = p.recipe.optimizer.as_ref().unwrap();
    let main = checkpoint::load_optim(&ck, AnyOptimizer::<_, B>::from_spec(spec), &dev).unwrap();
    let ids = main.state_ids();
    let embedding_id = last.encoders[0].embedding_tables()[0].id;
    let (_, centre_ids) = values(&last.heads[centers]);
    let (_, critic_ids) = values(&last.heads[head(&p, "language")]);
    let (_, softmax_ids) = values(&last.heads[head(&p, "intent")]);
    assert!(
        !ids.contains(&embedding_id),
        "the frozen table has Adam moments"
    );
    assert!(centre_ids.iter().all(|id| !ids.contains(id)));
    assert!(critic_ids.iter().all(|id| !ids.contains(id)));
    assert!(softmax_ids.iter().any(|id| ids.contains(id)));
    let inner = checkpoint::load_inner(
        &ck,
        "adversarial",
        AnyOptimizer::<_, B>::from_spec(spec),
        &dev,
    )
    .unwrap();
    let mut inner_ids = inner.state_ids();
    inner_ids.retain(|id| !critic_ids.contains(id));
    assert!(
        inner_ids.is_empty(),
        "the critic's optimizer holds other parameters"
    );
}

/// `X → en` translation pairs for Emu-Parallel's adversarial task.
fn pairs() -> Loaded {
    let pairs = (0..12)
        .map(|i| harness_data::records::Bitext {
            source: format!("bitte {} jetzt {}", WORDS[i % 6], i % 4),
            target: format!("please {} now {}", WORDS[i % 6], i % 4),
        })
        .collect();
    Loaded::Parallel(vec![("de".into(), "en".into(), pairs)])
}

/// The tiny Emu with `parallel: true` on a corpus `pairs`.
fn parallel_recipe() -> harness_recipe::Recipe {
    let mut r = recipe(1.0, 2, "encoder.embeddings");
    r.tasks[2].corpus = "pairs".into();
    if let serde_yaml::Value::Mapping(m) = &mut r.tasks[2].objective.params {
        m.insert("parallel".into(), true.into());
    }
    r
}

/// Emu-Parallel: the critic reads the two sides of its own translation pairs, not the
/// labelled batch. Two runs whose labelled sentences differ (same tokenizer, same counts)
/// train the same critic in the first step's inner loop; without `parallel` they do not.
/// A parallel task on labelled sentences is refused, naming both kinds.
#[test]
fn emu_parallel_critic_reads_translation_pairs_only() {
    let dev = Default::default();
    let critic_after_one_step = |parallel: bool, english_suffix: &str| {
        let d = tempfile::tempdir().unwrap();
        let mut loaded = corpora();
        loaded.insert("pairs".into(), pairs());
        // Same words, so that one tokenizer (learned on the unchanged corpora) serves both.
        if let Some(Loaded::Labelled { items, .. }) = loaded.get_mut("english") {
            for (text, _) in items.iter_mut() {
                text.push_str(english_suffix);
            }
        }
        let r = if parallel {
            parallel_recipe()
        } else {
            recipe(1.0, 2, "encoder.embeddings")
        };
        let mut base = corpora();
        base.insert("pairs".into(), pairs());
        let tok = tokenizer_for(&r, &base, &d.path().join("tokenizer.json")).unwrap();
        let p = compile_plan(&r, &tok, &loaded, objectives::ALL).unwrap();
        let opts = Options::<B> {
            objectives: harness_train::objectives::registry(),
            run_dir: d.path().to_path_buf(),
            stop_after: Some(1),
            progress: false,
            keep: 10,
            evaluate: None,
        };
        train::<B>(&p, &dev, opts).unwrap();
        let m = model_at(&p, d.path(), 1);
        values(&m.heads[head(&p, "language")]).0
    };
    assert_eq!(
        critic_after_one_step(true, ""),
        critic_after_one_step(true, " flight flight")
    );
    assert_ne!(
        critic_after_one_step(false, ""),
        critic_after_one_step(false, " flight flight")
    );

    let d = tempfile::tempdir().unwrap();
    let mut r = parallel_recipe();
    r.tasks[2].corpus = "other".into();
    let loaded = corpora();
    let tok = tokenizer_for(&r, &loaded, &d.path().join("tokenizer.json")).unwrap();
    let e = compile_plan(&r, &tok, &loaded, objectives::ALL)
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("translation pairs") && e.contains("labelled sentences"),
        "{e}"
    );
}
