//! Input kinds: every trainable encoder kind trains on words with hashed character n-grams
//! (multilingual USE's input, `data.tokenizer: {kind: words, char_ngrams: [3, 4], …}`) on
//! real translation pairs from `../shared/datasets`, its n-gram layer learns, and the trained
//! encoder encodes new text (out-of-vocabulary words included) the way it was trained.

use burn::backend::{Autodiff, NdArray};
use burn::tensor::backend::Backend;
use harness_core::settings::Settings;
use harness_embed::Encoder;
use harness_model::encoder::SentenceEncoder;
use harness_model::trained::{load_weights, TrainedEncoder};
use harness_recipe::Recipe;
use harness_train::corpora::load_corpora;
use harness_train::data::Examples;
use harness_train::objectives;
use harness_train::plan::compile_plan;
use harness_train::tokenizer::tokenizer_for;
use harness_train::trainer::{train, Options};
use std::path::PathBuf;

type B = Autodiff<NdArray<f32>>;
type Cpu = NdArray<f32>;

fn settings(home: &std::path::Path) -> Settings {
    let shared = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../../shared/datasets");
    Settings {
        data_dir: home.join("datasets"),
        mirrors: vec![shared.display().to_string()],
        ..Settings::default()
    }
}

fn recipe(encoder: &str) -> Recipe {
    serde_yaml::from_str(&format!(
        "name: words-{}
seed: 3
data:
  tokenizer: {{kind: words, vocab: 300, oov_buckets: 50, char_ngrams: [3, 4], hash_buckets: 4000, lowercase: true}}
  corpora:
    pairs: {{dataset: parallel-pairs, pairs: [deu-eng], max_examples: 600}}
model:
  encoder: {encoder}
tasks:
  - {{name: translate, objective: l2_similarity, corpus: pairs}}
optimizer: {{kind: adam, lr: 0.01}}
train: {{steps: 30, batch_size: 16, max_len: 16}}
",
        encoder.split_whitespace().nth(1).unwrap_or("x").trim_matches(',')
    ))
    .unwrap()
}

/// The n-gram table of a model's first encoder, flattened.
fn ngram_table<Be: Backend>(e: &SentenceEncoder<Be>) -> Vec<f32> {
    let n = match e {
        SentenceEncoder::Bilstm(e) => e.ngrams.as_ref(),
        SentenceEncoder::Cbow(e) => e.ngrams.as_ref(),
        SentenceEncoder::Transformer(e) => e.ngrams.as_ref(),
        SentenceEncoder::Bert(_) => None,
    };
    n.expect("an n-gram layer")
        .table
        .weight
        .val()
        .into_data()
        .to_vec()
        .unwrap()
}

#[test]
fn every_encoder_kind_trains_on_words_with_char_ngrams() {
    let home = tempfile::tempdir().unwrap();
    let settings = settings(home.path());
    for encoder in [
        "{kind: bilstm, layers: 1, hidden: 12, embed: 16, pool: max}",
        "{kind: lstm, layers: 2, hidden: 12, embed: 16, pool: mean}",
        "{kind: cbow, embed: 16, pool: mean}",
        "{kind: transformer, layers: 1, d_model: 16, d_ff: 32, heads: 2, pool: mean, dropout: 0.0}",
    ] {
        let r = recipe(encoder);
        let (loaded, _) = load_corpora(&r, &settings).unwrap();
        let dir = tempfile::tempdir().unwrap();
        let tok = tokenizer_for(&r, &loaded, &dir.path().join("tokenizer.json")).unwrap();
        assert_eq!(tok.char_ngram_buckets(), Some(4000));
        // 300 kept words after the specials and language tokens, then 50 OOV buckets.
        let base = tok.vocab_size() - 50;
        let plan = compile_plan(&r, &tok, &loaded, objectives::ALL).unwrap();
        let data = plan.tasks[0].data.as_ref().unwrap();
        // Its examples as the shards hold them (n-grams included).
        let all = data.shards.as_ref().unwrap().all().unwrap();
        let Examples::Pairs(ex) = &all else {
            panic!("pairs expected");
        };
        assert!(ex.len() > 500, "{}", ex.len());
        assert!(ex.iter().all(|e| e.src.ngrams.is_some()));
        let oov = ex
            .iter()
            .flat_map(|e| e.src.iter())
            .filter(|&&i| i as usize >= base);
        assert!(
            oov.count() > 100,
            "{encoder}: the OOV buckets are never used"
        );

        let dev = Default::default();
        let before = ngram_table(plan.system.init::<Cpu>(r.seed, &dev).encoder());
        let opts = Options::<B> {
            objectives: objectives::registry(),
            run_dir: dir.path().to_path_buf(),
            stop_after: None,
            progress: false,
            keep: 1,
            evaluate: None,
        };
        let out = train::<B>(&plan, &Default::default(), opts).unwrap();
        assert_eq!(out.steps, 30);
        let losses: Vec<f64> = std::fs::read_to_string(dir.path().join("train/metrics.jsonl"))
            .unwrap()
            .lines()
            .map(|l| {
                serde_json::from_str::<serde_json::Value>(l).unwrap()["loss"]
                    .as_f64()
                    .unwrap()
            })
            .collect();
        let mean = |v: &[f64]| v.iter().sum::<f64>() / v.len() as f64;
        assert!(
            mean(&losses[25..]) < mean(&losses[..5]),
            "{encoder}: the loss did not fall: {losses:?}"
        );
        // The n-gram layer learned.
        let checkpoint = out.checkpoint.expect("a checkpoint");
        let model = load_weights(
            plan.system.init::<Cpu>(r.seed, &dev),
            &checkpoint.join("model"),
            &dev,
        )
        .unwrap();
        let after = ngram_table(model.encoder());
        assert_eq!(before.len(), after.len());
        assert_ne!(before, after, "{encoder}: the n-gram table did not move");

        // The trained encoder encodes unseen text through the same input layer:
        // deterministic, independent of what it is batched with.
        let dim = plan.system.encoder().d_sentence();
        let enc = TrainedEncoder::<Cpu>::new(
            "words-test".into(),
            "test",
            model.into_encoder(),
            dim,
            tok.clone(),
            dev,
        );
        let a = enc
            .encode(&["Die Katzen schlafen.", "Zzyzxw qvorpel!"])
            .unwrap();
        let b = enc.encode(&["Zzyzxw qvorpel!"]).unwrap();
        assert_eq!(a.rows, 2);
        assert!(a.data.iter().all(|x| x.is_finite()));
        for (x, y) in a.row(1).iter().zip(b.row(0)) {
            assert!((x - y).abs() < 1e-5, "batching changed an encoding");
        }
    }
}
