//! The example kinds beyond translation pairs and NLI triples, from the real datasets in
//! `../shared/datasets`: conversation turns (`conversation-pairs`), running text
//! (`monolingual-sentences`, previous / sentence / next) and labelled sentences (`xsid`
//! intents) load through their loaders, become examples, and train through objectives
//! that read them (defined here, as a test crate would).

use burn::backend::{Autodiff, NdArray};
use burn::tensor::backend::AutodiffBackend;
use burn::tensor::Tensor;
use harness_core::settings::Settings;
use harness_recipe::Recipe;
use harness_train::corpora::{load_corpora, load_corpora_in, Loaded};
use harness_train::data::{Examples, Position};
use harness_train::objectives::l2_similarity::l2_similarity;
use harness_train::objectives::nli_classification::classification_ce;
use harness_train::objectives::{self, ExampleKind, Loss, Objective, ObjectiveDef};
use harness_train::plan::compile_plan;
use harness_train::step::{Side, Step};
use harness_train::tokenizer::tokenizer_for;
use harness_train::trainer::{train, Options};
use harness_train::TrainError;
use serde::{Deserialize, Serialize};
use std::path::PathBuf;

/// Pulls each message towards its response.
#[derive(Debug, Clone, Serialize, Deserialize)]
struct Respond {}

impl Objective for Respond {
    const NAME: &'static str = "respond";
    const EXAMPLES: ExampleKind = ExampleKind::Conversation;
}

impl Loss for Respond {
    fn loss<B: AutodiffBackend>(&self, step: &mut Step<'_, B>) -> Result<Tensor<B, 1>, TrainError> {
        let u = step.encode(Side::First)?.sentence;
        let v = step.encode(Side::Second)?.sentence;
        Ok(l2_similarity(u, v, 1.0))
    }
}

/// Pulls a sentence towards its previous and next sentences.
#[derive(Debug, Clone, Serialize, Deserialize)]
struct Neighbours {}

impl Objective for Neighbours {
    const NAME: &'static str = "neighbours";
    const EXAMPLES: ExampleKind = ExampleKind::RunningText;
}

impl Loss for Neighbours {
    fn loss<B: AutodiffBackend>(&self, step: &mut Step<'_, B>) -> Result<Tensor<B, 1>, TrainError> {
        let s = step.encode(Side::First)?.sentence;
        let p = step.encode(Side::Second)?.sentence;
        let n = step.encode(Side::Third)?.sentence;
        Ok((s.clone() - p).powi_scalar(2).mean() + (s - n).powi_scalar(2).mean())
    }
}

/// Classifies labelled sentences through head `cls`.
#[derive(Debug, Clone, Serialize, Deserialize)]
struct Classify {}

impl Objective for Classify {
    const NAME: &'static str = "classify";
    const EXAMPLES: ExampleKind = ExampleKind::Labelled;
}

impl Loss for Classify {
    fn loss<B: AutodiffBackend>(&self, step: &mut Step<'_, B>) -> Result<Tensor<B, 1>, TrainError> {
        let head = step.head("cls")?;
        let u = step.encode(Side::First)?.sentence;
        let labels = step.labels()?;
        Ok(classification_ce(head.forward(u, None, None), labels))
    }
}

type B = Autodiff<NdArray<f32>>;

/// Training options with this file's objectives, into `run_dir`.
fn options(run_dir: &std::path::Path) -> Options<'_, B> {
    Options::<B> {
        objectives: objectives::registry()
            .with::<Respond>()
            .with::<Neighbours>()
            .with::<Classify>(),
        run_dir: run_dir.to_path_buf(),
        stop_after: None,
        progress: false,
        keep: 1,
        evaluate: None,
    }
}

const DEFS: [ObjectiveDef; 3] = [
    ObjectiveDef::trainable::<Respond>(),
    ObjectiveDef::trainable::<Neighbours>(),
    ObjectiveDef::trainable::<Classify>(),
];

fn settings(home: &std::path::Path) -> Settings {
    let shared = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../../shared/datasets");
    Settings {
        data_dir: home.join("datasets"),
        mirrors: vec![shared.display().to_string()],
        ..Settings::default()
    }
}

fn recipe(classes: usize, conversation_objective: &str) -> Recipe {
    serde_yaml::from_str(&format!(
        "name: kinds
seed: 2
data:
  tokenizer: {{kind: bpe, vocab: 400}}
  corpora:
    conv: {{dataset: conversation-pairs, splits: [valid_freq], max_examples: 200}}
    text: {{dataset: monolingual-sentences, languages: [en], max_examples: 300}}
    intents: {{dataset: xsid, languages: [en], splits: [train], max_examples: 300}}
model:
  encoder: {{kind: bilstm, layers: 1, hidden: 8, embed: 8, pool: max}}
  heads:
    cls: {{kind: mlp, hidden: [8], classes: {classes}, features: single}}
tasks:
  - {{name: respond, objective: {conversation_objective}, corpus: conv}}
  - {{name: neighbours, objective: neighbours, corpus: text}}
  - {{name: classify, objective: classify, corpus: intents}}
optimizer: {{kind: adam, lr: 0.01}}
train: {{steps: 9, batch_size: 8, max_len: 24}}
"
    ))
    .unwrap()
}

#[test]
fn conversation_running_text_and_labelled_sentences_train() {
    let home = tempfile::tempdir().unwrap();
    let settings = settings(home.path());
    let (loaded, counts) = load_corpora(&recipe(1, "respond"), &settings).unwrap();
    let used = |c: &str| counts.iter().find(|x| x.corpus == c).unwrap().used;
    assert_eq!(
        (used("conv"), used("text"), used("intents")),
        (200, 300, 300)
    );
    let Some(Loaded::Labelled { classes, items }) = loaded.get("intents") else {
        panic!("intents are not labelled sentences");
    };
    assert!(classes.len() > 1 && items.iter().all(|(_, c)| (*c as usize) < classes.len()));
    let Some(Loaded::Text(docs)) = loaded.get("text") else {
        panic!("running text expected");
    };
    assert_eq!(docs.iter().map(Vec::len).sum::<usize>(), 300);

    let r = recipe(classes.len(), "respond");
    let dir = tempfile::tempdir().unwrap();
    let tok = tokenizer_for(&r, &loaded, &dir.path().join("tokenizer.json")).unwrap();
    let mut defs = objectives::ALL.to_vec();
    defs.extend(DEFS.iter());
    let plan = compile_plan(&r, &tok, &loaded, &defs).unwrap();
    // 300 sentences of one document give 298 (previous, sentence, next) examples.
    let n = |t: usize| plan.tasks[t].data.as_ref().unwrap().len();
    assert_eq!(n(1), 298);
    assert!(n(0) > 150 && n(2) > 250, "{} {}", n(0), n(2));
    let opts = options(dir.path());
    train::<B>(&plan, &Default::default(), opts).unwrap();
    let lines = std::fs::read_to_string(dir.path().join("train/metrics.jsonl")).unwrap();
    let tasks: std::collections::BTreeSet<String> = lines
        .lines()
        .map(|l| {
            let v: serde_json::Value = serde_json::from_str(l).unwrap();
            assert!(v["loss"].as_f64().unwrap().is_finite());
            v["task"].as_str().unwrap().to_string()
        })
        .collect();
    assert_eq!(tasks.len(), 3, "{tasks:?}");

    // An objective that reads translation pairs, on a conversation corpus: refused, naming
    // both kinds.
    let wrong = recipe(classes.len(), "l2_similarity");
    let e = compile_plan(&wrong, &tok, &loaded, &defs).unwrap_err();
    assert!(
        e.to_string().contains("translation pairs") && e.to_string().contains("conversation"),
        "{e}"
    );
}

/// The same conversation turns, running text and labelled sentences written to the user's
/// own files (JSON lines, plain text with blank lines between documents) give the batches
/// the shipped datasets give — both binarized into shards by one pipeline — and train.
#[test]
fn conversation_running_text_and_labelled_files_give_the_shipped_datasets_batches() {
    let home = tempfile::tempdir().unwrap();
    let settings = settings(home.path());
    let (loaded, _) = load_corpora(&recipe(1, "respond"), &settings).unwrap();
    let Some(Loaded::Labelled { classes, items }) = loaded.get("intents") else {
        panic!("labelled sentences expected");
    };
    let (Some(Loaded::Conversation(turns)), Some(Loaded::Text(docs))) =
        (loaded.get("conv"), loaded.get("text"))
    else {
        panic!("conversation turns and running text expected");
    };
    let files = tempfile::tempdir().unwrap();
    let mut conv = String::new();
    for t in turns {
        conv += &format!(
            "{}\n",
            serde_json::json!({"message": t.source, "response": t.target})
        );
    }
    let mut text = String::new();
    for d in docs {
        for sentence in d {
            // A blank line or a line break inside would change the documents.
            assert!(!sentence.trim().is_empty() && !sentence.contains('\n'));
            text += &format!("{sentence}\n");
        }
        text += "\n";
    }
    let mut intents = String::new();
    for (t, c) in items {
        intents += &format!(
            "{}\n",
            serde_json::json!({"text": t, "label": classes[*c as usize]})
        );
    }
    std::fs::write(files.path().join("conv.jsonl"), conv).unwrap();
    std::fs::write(files.path().join("text.txt.gz"), gzip(text.as_bytes())).unwrap();
    std::fs::write(files.path().join("intents.jsonl"), intents).unwrap();

    let shipped = recipe(classes.len(), "respond");
    let mut own = shipped.clone();
    let corpus = |yaml: &str| serde_yaml::from_str(yaml).unwrap();
    own.data.corpora.insert(
        "conv".into(),
        corpus("{files: [conv.jsonl], format: jsonl, kind: conversation}"),
    );
    own.data.corpora.insert(
        "text".into(),
        corpus("{files: ['text.txt.gz'], format: text, kind: text}"),
    );
    own.data.corpora.insert(
        "intents".into(),
        corpus("{files: [intents.jsonl], format: jsonl, kind: labelled}"),
    );
    let (own_loaded, _) = load_corpora_in(&own, files.path(), &settings).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let tok = tokenizer_for(&shipped, &loaded, &dir.path().join("tokenizer.json")).unwrap();
    let mut defs = objectives::ALL.to_vec();
    defs.extend(DEFS.iter());
    let a = compile_plan(&shipped, &tok, &loaded, &defs).unwrap();
    let b = compile_plan(&own, &tok, &own_loaded, &defs).unwrap();
    assert_eq!(a.head_classes, b.head_classes);
    for t in 0..3 {
        let (da, db) = (
            a.tasks[t].data.as_ref().unwrap(),
            b.tasks[t].data.as_ref().unwrap(),
        );
        assert_eq!(da.len(), db.len(), "task {t}");
        assert_eq!(da.batches_per_epoch(), db.batches_per_epoch(), "task {t}");
        let mut pos = Position::default();
        for _ in 0..da.batches_per_epoch() + 2 {
            let ((ba, next_a), (bb, next_b)) =
                (da.batch_at(pos).unwrap(), db.batch_at(pos).unwrap());
            let (ea, ia) = ba.parts();
            let (eb, ib) = bb.parts();
            let pick = |e: &Examples, i: &[u32]| -> Vec<String> {
                i.iter()
                    .map(|&i| match e {
                        Examples::Pairs(v) => format!("{:?}", v[i as usize]),
                        Examples::Context(v) => format!("{:?}", v[i as usize]),
                        // Files number their classes in order of appearance: compare names.
                        Examples::Labelled(v) => format!("{:?}", v[i as usize].ids),
                        Examples::Nli(v) => format!("{:?}", v[i as usize]),
                    })
                    .collect()
            };
            assert_eq!(pick(ea, ia), pick(eb, ib), "task {t} at {pos:?}");
            if let (Examples::Labelled(va), Examples::Labelled(vb)) = (ea, eb) {
                let own_classes: Vec<String> = serde_json::from_value(
                    db.shards.as_ref().unwrap().manifest().extra["classes"].clone(),
                )
                .unwrap();
                for (&i, &j) in ia.iter().zip(ib) {
                    assert_eq!(
                        classes[va[i as usize].label as usize],
                        own_classes[vb[j as usize].label as usize]
                    );
                }
            }
            assert_eq!(next_a, next_b);
            pos = next_a;
        }
    }
    let opts = options(dir.path());
    let outcome = train::<B>(&b, &Default::default(), opts).unwrap();
    assert_eq!(outcome.steps, 9);
}

fn gzip(bytes: &[u8]) -> Vec<u8> {
    use std::io::Write;
    let mut e = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
    e.write_all(bytes).unwrap();
    e.finish().unwrap()
}

/// ATIS as a labelled training corpus (Emu's ATIS column): every train utterance of the
/// slot-gated split (4,478, its SOURCE.txt) is used or removed as a benchmark sentence,
/// each with one of the intents seen; a language other than English is refused.
#[test]
fn atis_train_is_a_labelled_corpus() {
    let home = tempfile::tempdir().unwrap();
    let settings = settings(home.path());
    let atis = |extra: &str| -> Recipe {
        serde_yaml::from_str(&format!(
            "name: atis
seed: 2
data:
  tokenizer: {{kind: bpe, vocab: 400}}
  corpora:
    intents: {{dataset: atis, splits: [train], exclude: [atis]{extra}}}
model:
  encoder: {{kind: bilstm, layers: 1, hidden: 8, embed: 8, pool: max}}
  heads:
    cls: {{kind: mlp, hidden: [8], classes: 2, features: single}}
tasks:
  - {{name: classify, objective: classify, corpus: intents}}
optimizer: {{kind: adam, lr: 0.01}}
train: {{steps: 1, batch_size: 8, max_len: 24}}
"
        ))
        .unwrap()
    };
    let (loaded, counts) = load_corpora(&atis(""), &settings).unwrap();
    let c = &counts[0];
    let (kept, removed) = c.parts["en/train"];
    assert_eq!((kept + removed, c.used), (4478, kept), "{c:?}");
    let Some(Loaded::Labelled { classes, items }) = loaded.get("intents") else {
        panic!("ATIS is not labelled sentences");
    };
    assert_eq!(items.len(), kept);
    assert!(classes.contains(&"atis_flight".to_string()), "{classes:?}");
    assert!(items.iter().all(|(_, c)| (*c as usize) < classes.len()));
    let Err(err) = load_corpora(&atis(", languages: [de]"), &settings) else {
        panic!("a German ATIS corpus was accepted");
    };
    let err = err.to_string();
    assert!(err.contains("English only"), "{err}");
}

/// xSID as translation pairs (Emu-Parallel): `X-en` pairs of the valid split, each
/// utterance with the English one it translates (300 valid blocks per language; ja covers
/// the first 150), every pair used or removed by the contamination filter; a pair not into
/// English is refused.
#[test]
fn xsid_valid_gives_translation_pairs_into_english() {
    let home = tempfile::tempdir().unwrap();
    let settings = settings(home.path());
    let xsid = |pairs: &str| -> Recipe {
        serde_yaml::from_str(&format!(
            "name: xsid-pairs
seed: 2
data:
  tokenizer: {{kind: bpe, vocab: 400}}
  corpora:
    pairs: {{dataset: xsid, splits: [valid], pairs: [{pairs}], exclude: [xsid]}}
model:
  encoder: {{kind: bilstm, layers: 1, hidden: 8, embed: 8, pool: max}}
tasks:
  - {{name: rank, objective: translation_ranking, corpus: pairs}}
optimizer: {{kind: adam, lr: 0.01}}
train: {{steps: 1, batch_size: 8, max_len: 24}}
"
        ))
        .unwrap()
    };
    let (loaded, counts) = load_corpora(&xsid("de-en, ja-en"), &settings).unwrap();
    let c = &counts[0];
    let (de_kept, de_removed) = c.parts["de-en/valid"];
    let (ja_kept, ja_removed) = c.parts["ja-en/valid"];
    assert_eq!(
        (de_kept + de_removed, ja_kept + ja_removed),
        (300, 150),
        "{c:?}"
    );
    assert_eq!(c.used, de_kept + ja_kept);
    let Some(Loaded::Parallel(corpora)) = loaded.get("pairs") else {
        panic!("xSID pairs are not a parallel corpus");
    };
    assert_eq!(corpora[0].0, "de");
    assert_eq!(corpora[0].1, "en");
    assert_eq!(corpora[0].2.len(), de_kept);
    assert!(corpora[0]
        .2
        .iter()
        .all(|p| p.source != p.target || p.source.is_empty()));
    let Err(err) = load_corpora(&xsid("en-de"), &settings) else {
        panic!("a pair out of English was accepted");
    };
    assert!(err.to_string().contains("X-en"), "{err}");
}
