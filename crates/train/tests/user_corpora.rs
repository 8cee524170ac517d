//! Corpora of the user's own files (`data.corpora.X.files`): written here from the shipped
//! pairs of `../shared/datasets` in the formats users have (tab-separated, OPUS/Moses
//! gzipped, JSON lines), binarized into shards and trained on; the same pairs from a file
//! give the batches they give in memory; the shards are reused, and rebuilt when a file
//! changes; the contamination filter removes a planted test sentence.

use burn::backend::{Autodiff, NdArray};
use harness_core::settings::Settings;
use harness_data::records::Bitext;
use harness_recipe::Recipe;
use harness_train::corpora::{load_corpora, load_corpora_in, Loaded};
use harness_train::data::{Examples, PairExample, Position};
use harness_train::objectives;
use harness_train::plan::{compile_plan, Plan};
use harness_train::tokenizer::tokenizer_for;
use harness_train::trainer::{train, Options};
use std::io::Write;
use std::path::{Path, PathBuf};

type B = Autodiff<NdArray<f32>>;

fn settings(home: &Path) -> Settings {
    let shared = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../../shared/datasets");
    Settings {
        data_dir: home.join("datasets"),
        cache_dir: home.join("cache"),
        mirrors: vec![shared.display().to_string()],
        ..Settings::default()
    }
}

/// A small ranking recipe over `corpus` (a YAML flow mapping).
fn recipe(corpus: &str) -> Recipe {
    serde_yaml::from_str(&format!(
        "name: user-corpus
seed: 5
data:
  tokenizer: {{kind: bpe, vocab: 600}}
  corpora:
    pairs: {corpus}
model:
  encoder: {{kind: bilstm, layers: 1, hidden: 16, embed: 16, pool: max}}
tasks:
  - {{name: rank, objective: ranking_softmax, corpus: pairs, params: {{scale: 20.0}}}}
optimizer: {{kind: adam, lr: 0.003}}
train: {{steps: 6, batch_tokens: 400, max_len: 30}}
"
    ))
    .unwrap()
}

/// The shipped German–English pairs as the memory path loads them (capped, shuffled).
fn shipped_pairs(
    settings: &Settings,
) -> (
    Recipe,
    Vec<Bitext>,
    std::collections::BTreeMap<String, Loaded>,
) {
    let r = recipe("{dataset: parallel-pairs, pairs: [deu-eng], max_examples: 1500}");
    let (loaded, _) = load_corpora(&r, settings).unwrap();
    let Loaded::Parallel(parts) = &loaded["pairs"] else {
        panic!("parallel pairs expected")
    };
    let pairs = parts[0].2.clone();
    assert!(pairs
        .iter()
        .all(|p| !p.source.contains(['\t', '\n']) && !p.target.contains(['\t', '\n'])));
    (r, pairs, loaded)
}

fn batches(plan: &Plan, n: usize) -> Vec<Vec<PairExample>> {
    let data = plan.tasks[0].data.as_ref().unwrap();
    let mut pos = Position::default();
    let mut out = Vec::new();
    for _ in 0..n {
        let (b, next) = data.batch_at(pos).unwrap();
        let (examples, index) = b.parts();
        let Examples::Pairs(ex) = examples else {
            panic!("pairs expected")
        };
        out.push(index.iter().map(|&i| ex[i as usize].clone()).collect());
        pos = next;
    }
    out
}

fn train_steps(plan: &Plan, dir: &Path) -> harness_train::trainer::Outcome {
    let opts = Options::<B> {
        objectives: objectives::registry(),
        run_dir: dir.to_path_buf(),
        stop_after: None,
        progress: false,
        keep: 1,
        evaluate: None,
    };
    train::<B>(plan, &Default::default(), opts).unwrap()
}

#[test]
fn a_tab_separated_file_gives_the_batches_the_same_pairs_give_in_memory_and_trains() {
    let home = tempfile::tempdir().unwrap();
    let settings = settings(home.path());
    let (memory_recipe, pairs, loaded) = shipped_pairs(&settings);
    let files = tempfile::tempdir().unwrap();
    let mut text = String::new();
    for p in &pairs {
        text.push_str(&format!("{}\t{}\n", p.source, p.target));
    }
    std::fs::write(files.path().join("mine.deu-eng.tsv"), text).unwrap();

    let run = tempfile::tempdir().unwrap();
    let tok_path = run.path().join("tokenizer.json");
    let tok = tokenizer_for(&memory_recipe, &loaded, &tok_path).unwrap();
    let memory = compile_plan(&memory_recipe, &tok, &loaded, objectives::ALL).unwrap();

    let r = recipe("{files: [mine.*.tsv], format: tsv}");
    let (user, _) = load_corpora_in(&r, files.path(), &settings).unwrap();
    assert!(matches!(user["pairs"], Loaded::Files(_)));
    let from_files = compile_plan(&r, &tok, &user, objectives::ALL).unwrap();
    let shards = from_files.tasks[0]
        .data
        .as_ref()
        .unwrap()
        .shards
        .as_ref()
        .unwrap();
    assert_eq!(shards.len(), pairs.len() as u64);
    assert_eq!(from_files.steps_per_epoch, memory.steps_per_epoch);
    let n = memory.steps_per_epoch as usize + 5;
    assert_eq!(batches(&from_files, n), batches(&memory, n));
    assert_eq!(from_files.corpus_counts[0].used, pairs.len());

    let out = train_steps(&from_files, run.path());
    assert_eq!(out.steps, 6);
    assert!(out.last_loss.is_finite());
}

#[test]
fn moses_gzip_and_json_lines_train_and_their_shards_are_reused_until_a_file_changes() {
    let home = tempfile::tempdir().unwrap();
    let settings = settings(home.path());
    let (_, pairs, _) = shipped_pairs(&settings);
    let files = tempfile::tempdir().unwrap();
    let gz = |name: &str, lines: Vec<&str>| {
        let f = std::fs::File::create(files.path().join(name)).unwrap();
        let mut w = flate2::write::GzEncoder::new(f, flate2::Compression::fast());
        for l in lines {
            writeln!(w, "{l}").unwrap();
        }
        w.finish().unwrap();
    };
    gz(
        "Tatoeba.de-en.de.gz",
        pairs.iter().map(|p| p.source.as_str()).collect(),
    );
    gz(
        "Tatoeba.de-en.en.gz",
        pairs.iter().map(|p| p.target.as_str()).collect(),
    );
    let mut jsonl = String::new();
    for p in &pairs[..700] {
        let line = serde_json::json!({"translation": {"de": p.source, "en": p.target}});
        jsonl.push_str(&format!("{line}\n"));
    }
    std::fs::write(files.path().join("hf.jsonl"), jsonl).unwrap();

    for (corpus, expected) in [
        ("{files: ['Tatoeba.de-en.*'], format: moses}", pairs.len()),
        (
            "{files: [hf.jsonl], format: jsonl, pairs: [de-en], fields: {source: translation.de, target: translation.en}}",
            700,
        ),
    ] {
        let r = recipe(corpus);
        let run = tempfile::tempdir().unwrap();
        let (loaded, _) = load_corpora_in(&r, files.path(), &settings).unwrap();
        let tok = tokenizer_for(&r, &loaded, &run.path().join("tokenizer.json")).unwrap();
        assert!(tok.language_index("de").is_some(), "{corpus}");
        let plan = compile_plan(&r, &tok, &loaded, objectives::ALL).unwrap();
        let used = plan.corpus_counts[0].used;
        assert_eq!(used, expected, "{corpus}");
        let dir = |p: &Plan| {
            p.tasks[0].data.as_ref().unwrap().shards.as_ref().unwrap().manifest().clone()
        };
        let first = dir(&plan);
        let out = train_steps(&plan, run.path());
        assert_eq!(out.steps, 6, "{corpus}");
        // A second plan reuses the shards (the manifest is the same file, not rewritten).
        let (again, _) = load_corpora_in(&r, files.path(), &settings).unwrap();
        let plan2 = compile_plan(&r, &tok, &again, objectives::ALL).unwrap();
        assert_eq!(dir(&plan2), first, "{corpus}");
    }
    let shard_sets = || {
        std::fs::read_dir(home.path().join("cache/shards"))
            .unwrap()
            .count()
    };
    assert_eq!(shard_sets(), 2);

    // A changed file gets shards of its own: its stamp is part of the key.
    let r = recipe(
        "{files: [hf.jsonl], format: jsonl, pairs: [de-en], fields: {source: translation.de, target: translation.en}}",
    );
    let mut f = std::fs::OpenOptions::new()
        .append(true)
        .open(files.path().join("hf.jsonl"))
        .unwrap();
    writeln!(
        f,
        "{}",
        serde_json::json!({"translation": {"de": "ein neuer Satz", "en": "a new sentence"}})
    )
    .unwrap();
    drop(f);
    let run = tempfile::tempdir().unwrap();
    let (loaded, _) = load_corpora_in(&r, files.path(), &settings).unwrap();
    let tok = tokenizer_for(&r, &loaded, &run.path().join("tokenizer.json")).unwrap();
    let plan = compile_plan(&r, &tok, &loaded, objectives::ALL).unwrap();
    assert_eq!(plan.corpus_counts[0].used, 701);
    // The old set of the changed file can never be used again: removed. The Moses set stays.
    assert_eq!(shard_sets(), 2);
}

#[test]
fn the_contamination_filter_removes_a_planted_test_sentence_from_a_users_file() {
    let home = tempfile::tempdir().unwrap();
    let settings = settings(home.path());
    let (_, pairs, _) = shipped_pairs(&settings);
    // A sentence of the Tatoeba test set (deu side), planted in the user's corpus with a
    // changed case and extra spaces: the filter's normalisation still finds it.
    let tatoeba = harness_data::fetch::ensure_dataset(&settings, "tatoeba-laser-v1").unwrap();
    let test_line = harness_data::loaders::tatoeba::load_language(&tatoeba, "deu")
        .unwrap()
        .pairs[0]
        .source
        .clone();
    let planted = format!("  {}  ", test_line.to_uppercase());
    let files = tempfile::tempdir().unwrap();
    let mut text = format!("{planted}\tplanted\n");
    for p in &pairs[..300] {
        text.push_str(&format!("{}\t{}\n", p.source, p.target));
    }
    std::fs::write(files.path().join("mine.deu-eng.tsv"), text).unwrap();
    let r = recipe("{files: [mine.deu-eng.tsv], format: tsv, exclude: [tatoeba]}");
    let run = tempfile::tempdir().unwrap();
    let (loaded, _) = load_corpora_in(&r, files.path(), &settings).unwrap();
    let tok = tokenizer_for(&r, &loaded, &run.path().join("tokenizer.json")).unwrap();
    let plan = compile_plan(&r, &tok, &loaded, objectives::ALL).unwrap();
    let counts = &plan.corpus_counts[0];
    let (kept, removed) = counts.parts["deu-eng"];
    assert!(removed >= 1, "{counts:?}");
    assert_eq!(kept + removed, 301);
}

/// The losses of a run directory's `train/metrics.jsonl`, by step.
fn losses(dir: &Path) -> Vec<(u64, f64)> {
    std::fs::read_to_string(dir.join("train/metrics.jsonl"))
        .unwrap()
        .lines()
        .filter_map(|l| {
            let v: serde_json::Value = serde_json::from_str(l).ok()?;
            Some((v["step"].as_u64()?, v["loss"].as_f64()?))
        })
        .collect()
}

#[test]
fn a_run_stopped_mid_epoch_resumes_from_the_shards_as_if_never_stopped() {
    let home = tempfile::tempdir().unwrap();
    let settings = settings(home.path());
    let (_, pairs, _) = shipped_pairs(&settings);
    let files = tempfile::tempdir().unwrap();
    let mut text = String::new();
    for p in &pairs {
        text.push_str(&format!("{}\t{}\n", p.source, p.target));
    }
    std::fs::write(files.path().join("mine.deu-eng.tsv"), text).unwrap();
    // Checkpoints every 2 steps; an epoch is many more than 8 batches, so the stop after
    // step 4 falls mid-epoch.
    let mut r = recipe("{files: [mine.deu-eng.tsv], format: tsv}");
    r.train.as_mut().unwrap().steps = Some(8);
    r.train.as_mut().unwrap().checkpoint_every = Some(2);
    let (loaded, _) = load_corpora_in(&r, files.path(), &settings).unwrap();
    let whole = tempfile::tempdir().unwrap();
    let tok = tokenizer_for(&r, &loaded, &whole.path().join("tokenizer.json")).unwrap();
    let plan = compile_plan(&r, &tok, &loaded, objectives::ALL).unwrap();
    assert!(plan.steps_per_epoch > 8, "{}", plan.steps_per_epoch);
    let run = |dir: &Path, stop_after: Option<u64>| {
        let opts = Options::<B> {
            objectives: objectives::registry(),
            run_dir: dir.to_path_buf(),
            stop_after,
            progress: false,
            keep: 1,
            evaluate: None,
        };
        train::<B>(&plan, &Default::default(), opts).unwrap()
    };
    let uninterrupted = run(whole.path(), None);
    assert_eq!(uninterrupted.steps, 8);
    let stopped = tempfile::tempdir().unwrap();
    let first = run(stopped.path(), Some(4));
    assert_eq!(first.steps, 4);
    let rest = run(stopped.path(), None);
    assert_eq!(rest.session_steps, 4);
    assert_eq!(rest.last_loss, uninterrupted.last_loss);
    let a = losses(whole.path());
    let b = losses(stopped.path());
    assert_eq!(a.len(), 8);
    assert_eq!(a, b);
}

#[test]
fn shards_whose_writer_died_before_the_manifest_are_never_taken_as_complete() {
    let home = tempfile::tempdir().unwrap();
    let settings = settings(home.path());
    let (_, pairs, _) = shipped_pairs(&settings);
    let files = tempfile::tempdir().unwrap();
    let mut text = String::new();
    for p in &pairs[..400] {
        text.push_str(&format!("{}\t{}\n", p.source, p.target));
    }
    std::fs::write(files.path().join("mine.deu-eng.tsv"), text).unwrap();
    let r = recipe("{files: [mine.deu-eng.tsv], format: tsv}");
    let run = tempfile::tempdir().unwrap();
    let (loaded, _) = load_corpora_in(&r, files.path(), &settings).unwrap();
    let tok = tokenizer_for(&r, &loaded, &run.path().join("tokenizer.json")).unwrap();
    let plan = compile_plan(&r, &tok, &loaded, objectives::ALL).unwrap();
    let shards = plan.tasks[0]
        .data
        .as_ref()
        .unwrap()
        .shards
        .as_ref()
        .unwrap();
    let manifest = shards.manifest().clone();
    let set = std::fs::read_dir(home.path().join("cache/shards"))
        .unwrap()
        .next()
        .unwrap()
        .unwrap()
        .path();
    // A writer killed after its shards and before its manifest: the shard is there, the
    // manifest is not. (A shard cut short is the other half: `shards` refuses its size.)
    std::fs::remove_file(set.join("manifest.json")).unwrap();
    let shard = set.join(&manifest.shards[0].file);
    let len = std::fs::metadata(&shard).unwrap().len();
    std::fs::OpenOptions::new()
        .write(true)
        .open(&shard)
        .unwrap()
        .set_len(len / 2)
        .unwrap();
    let again = compile_plan(&r, &tok, &loaded, objectives::ALL).unwrap();
    let rebuilt = again.tasks[0]
        .data
        .as_ref()
        .unwrap()
        .shards
        .as_ref()
        .unwrap();
    assert_eq!(rebuilt.manifest().shards, manifest.shards);
    assert_eq!(std::fs::metadata(&shard).unwrap().len(), len);
    assert_eq!(batches(&again, 3), batches(&plan, 3));
}
