//! The training engine's regression fixture: the LASER and seq2seq+similarity defaults (their
//! real data, tokenizers and model sizes; a short budget) train to exactly the numbers the
//! engine gave before it was made generic (issue 29). Each case records every step's loss,
//! gradient norm and learning rate (`train/metrics.jsonl`), the trained encoder's fingerprint
//! (which holds the sha256 of its weights, `model/trained.rs::weights_digest`) and the scores
//! of one benchmark; all must be equal, bit for bit, to `tests/fixtures/engine/<case>.json`.
//!
//! The fixture was written by the engine before the refactor; `HARNESS_UPDATE_FIXTURES=1
//! cargo test --test engine_fixture` rewrites it (only for a change that is meant to move
//! the numbers, said in the commit). Determinism holds on one backend and CPU kind: the
//! fixture is ndarray on x86-64 with AVX-512 (`matrixmultiply` picks its kernel at run time,
//! and another kernel sums in another order); on another CPU the test says so and compares
//! only what does not depend on the kernel.

mod binary;

use binary::{harness, repo, text};
use serde_json::{json, Value};
use std::path::Path;

/// `(case, recipe, --set overrides)`.
const CASES: &[(&str, &str, &[&str])] = &[
    (
        "laser-default",
        "recipes/laser.yaml",
        &[
            // The default's settings when the fixture was written (the default's vocabulary,
            // width and learning rate moved on 2026-11-28; this fixture is about the engine).
            "data.tokenizer.vocab=5000",
            "model.encoder.hidden=256",
            "optimizer.lr=0.006",
            "train.steps=40",
            "train.eval_every=null",
            "train.checkpoint_every=20",
            "evaluate=[newstest2012]",
            "report=[]",
        ],
    ),
    (
        "seq2seq-default",
        "recipes/seq2seq-similarity.yaml",
        &[
            // The default's rate when the fixture was written (it moved on 2026-11-28).
            "optimizer.lr=0.001",
            "train.steps=24",
            "train.eval_every=null",
            "train.checkpoint_every=12",
            "evaluate=[newstest2012]",
            "report=[]",
        ],
    ),
];

/// What a case must reproduce, read from its run directory.
fn summary(run: &Path) -> Value {
    let metrics = std::fs::read_to_string(run.join("train/metrics.jsonl")).unwrap();
    let steps: Vec<Value> = metrics
        .lines()
        .map(|l| {
            let v: Value = serde_json::from_str(l).unwrap();
            json!({
                "step": v["step"], "task": v["task"], "loss": v["loss"],
                "grad_norm": v["grad_norm"], "lr": v["lr"], "tokens": v["tokens"],
            })
        })
        .collect();
    let mut results = serde_json::Map::new();
    for e in std::fs::read_dir(run.join("results")).unwrap().flatten() {
        // Result files only (not their per-item sidecars `<bench>.items.json.gz`).
        if e.path().extension().is_none_or(|x| x != "json") {
            continue;
        }
        let v: Value = serde_json::from_slice(&std::fs::read(e.path()).unwrap()).unwrap();
        results.insert(
            e.file_name().to_string_lossy().into_owned(),
            json!({
                "encoder": v["encoder"]["fingerprint"],
                "main_score": v["main_score"],
                "scores": v["scores"],
            }),
        );
    }
    json!({ "steps": steps, "results": results })
}

fn avx512() -> bool {
    #[cfg(target_arch = "x86_64")]
    {
        std::arch::is_x86_feature_detected!("avx512f")
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        false
    }
}

// One test per case, so that the cases (and the instruction-set test) run side by side: the
// long single-threaded parts of one (tokenizer, evaluation) leave the other core to the next.
#[test]
fn the_laser_default_trains_to_the_fixture_numbers() {
    trains_to_the_fixture_numbers(&CASES[0]);
}

#[test]
fn the_seq2seq_default_trains_to_the_fixture_numbers() {
    trains_to_the_fixture_numbers(&CASES[1]);
}

fn trains_to_the_fixture_numbers(&(case, recipe, sets): &(&str, &str, &[&str])) {
    let home = tempfile::tempdir().unwrap();
    let out = tempfile::tempdir().unwrap();
    let update = std::env::var_os("HARNESS_UPDATE_FIXTURES").is_some();
    let run = out.path().join(case);
    let recipe = repo().join(recipe);
    let mut args = vec![
        "run",
        recipe.to_str().unwrap(),
        "--out",
        run.to_str().unwrap(),
    ];
    for s in sets {
        args.extend_from_slice(&["--set", s]);
    }
    let o = harness(home.path(), &args);
    assert!(o.status.success(), "{case}: {}", text(&o));
    let got = summary(&run);
    let path = repo().join(format!("tests/fixtures/engine/{case}.json"));
    if update {
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        let mut s = serde_json::to_string_pretty(&got).unwrap();
        s.push('\n');
        std::fs::write(&path, s).unwrap();
        return;
    }
    let want: Value = serde_json::from_slice(&std::fs::read(&path).unwrap()).unwrap();
    if avx512() {
        assert_eq!(got, want, "{case}: the engine's numbers moved");
    } else {
        // Another GEMM kernel: the same steps and tasks, losses within float noise.
        eprintln!("{case}: this CPU has no AVX-512; comparing to 1e-3, not bit for bit");
        let (g, w) = (
            got["steps"].as_array().unwrap(),
            want["steps"].as_array().unwrap(),
        );
        assert_eq!(g.len(), w.len(), "{case}");
        for (a, b) in g.iter().zip(w) {
            assert_eq!(a["task"], b["task"], "{case}");
            let (x, y) = (a["loss"].as_f64().unwrap(), b["loss"].as_f64().unwrap());
            assert!((x - y).abs() < 1e-3 * (1.0 + y.abs()), "{case}: {a} vs {b}");
        }
    }
}

/// The widest instruction set this CPU runs and the next one down (`HARNESS_ISA`: on an
/// AVX-512 machine `avx512` and `avx2`) train a small LASER model and evaluate SIB-200 (the
/// encoder's kernels on 2,008 sentences, then its MLP's narrow layers) to the same bits:
/// each hand-written kernel's paths sum in one order, so the instruction set changes the
/// speed, not the numbers. Each level runs in its own `HARNESS_HOME`, so that the second
/// one encodes instead of reading the first one's embeddings from the cache (the encoder's
/// weights, hence its cache key, are equal when the test passes). (`matrixmultiply` picks
/// its own kernel when compiled: `scripts/avx2.sh` forces it too.)
#[test]
fn every_instruction_set_gives_the_same_bits() {
    use harness_kernels::isa::{detected, Isa};
    let out = tempfile::tempdir().unwrap();
    let recipe = repo().join(CASES[0].1);
    // The widest level and the next one down: AVX-512 and AVX2 are the two kinds of x86-64
    // machine users have (the portable paths are checked kernel by kernel, in their tests).
    let levels: Vec<Isa> = [Isa::Avx512, Isa::Avx2, Isa::Portable]
        .into_iter()
        .filter(|l| *l <= detected())
        .take(2)
        .collect();
    let mut first: Option<(Isa, Value)> = None;
    for level in levels {
        let home = tempfile::tempdir().unwrap();
        let run = out.path().join(level.name());
        let mut args = vec![
            "run",
            recipe.to_str().unwrap(),
            "--out",
            run.to_str().unwrap(),
        ];
        // Small (the next level down on an AVX2 machine is the portable one, which has no
        // hardware FMA: a library call per multiply-add, some 60 sentences a second in the
        // test build): a 64-wide encoder on a tenth of the corpora, a 2,000-token
        // vocabulary, 6 steps (a checkpoint after 3), SIB-200 in English and German with 2
        // epochs. Every kernel path still runs: the encoder's, the losses', the optimizer's,
        // the classifier's narrow layers.
        for s in [
            "data.tokenizer.vocab=2000",
            "data.corpora.tatoeba_pairs.max_examples=6000",
            "data.corpora.news_pairs.max_examples=2000",
            "model.encoder.hidden=64",
            "optimizer.lr=0.006",
            "train.steps=6",
            "train.eval_every=null",
            "train.checkpoint_every=3",
            "evaluate=[{name: sib200, languages: [en, de], params: {epochs: 2, languages: [en, de]}}]",
            "report=[]",
        ] {
            args.extend_from_slice(&["--set", s]);
        }
        let o = binary::command(home.path(), &args)
            .env("HARNESS_ISA", level.name())
            .output()
            .unwrap();
        assert!(o.status.success(), "{}: {}", level.name(), text(&o));
        let env: Value =
            serde_json::from_slice(&std::fs::read(run.join("env.json")).unwrap()).unwrap();
        assert!(
            env["isa"].as_str().unwrap().starts_with(level.name()),
            "{}: env.json says {}",
            level.name(),
            env["isa"]
        );
        let got = summary(&run);
        assert!(
            !got["steps"].as_array().unwrap().is_empty(),
            "{}",
            level.name()
        );
        match &first {
            None => first = Some((level, got)),
            Some((widest, want)) => assert_eq!(
                &got,
                want,
                "{} and {} give different numbers",
                level.name(),
                widest.name()
            ),
        }
    }
}
