//! Training through the real `harness` binary: a shrunken LASER recipe trains on the real
//! parallel data, stops after a checkpoint, resumes, and its run directory then works as an
//! encoder (`harness embed --encoder runs/<dir>`) and exports. The default recipes' full
//! runs (`harness run`, train + every benchmark) are `#[ignore]`d: they take tens of minutes.

mod binary;

use binary::{command, embed_npy as embed, harness, repo, text, SMALL_LASER};
use std::path::Path;

/// The LASER recipe shrunk to seconds ([`SMALL_LASER`]), 6 steps, checkpoints every 2.
fn small() -> Vec<&'static str> {
    let mut a = SMALL_LASER.to_vec();
    a.extend_from_slice(&[
        "--set",
        "train={steps: 6, batch_tokens: 300, max_len: 20, checkpoint_every: 2}",
    ]);
    a
}

#[test]
fn train_stop_resume_embed_and_export() {
    let home = tempfile::tempdir().unwrap();
    let out = tempfile::tempdir().unwrap();
    let run = out.path().join("run");
    let recipe = repo().join("recipes/laser.yaml");
    let mut args: Vec<&str> = vec!["train", recipe.to_str().unwrap()];
    args.extend_from_slice(&small());
    args.extend_from_slice(&["--out", run.to_str().unwrap()]);

    // Stop after step 3: the newest checkpoint is step 2.
    let mut first = args.clone();
    first.extend_from_slice(&["--stop-after", "3"]);
    let o = harness(home.path(), &first);
    assert!(o.status.success(), "{}", text(&o));
    assert!(text(&o).contains("trained 3/6 steps"), "{}", text(&o));
    for f in [
        "recipe.resolved.yaml",
        "env.json",
        "corpora.json",
        "tokenizer.json",
    ] {
        assert!(run.join(f).is_file(), "{f} missing");
    }
    assert!(run.join("checkpoints/step-00000002/model.mpk").is_file());
    assert!(!run.join("checkpoints/step-00000003").exists());

    // Resume: steps 3..6 again, metrics.jsonl holds each step once.
    let o = harness(home.path(), &args);
    assert!(o.status.success(), "{}", text(&o));
    assert!(text(&o).contains("trained 6/6 steps"), "{}", text(&o));
    let metrics = std::fs::read_to_string(run.join("train/metrics.jsonl")).unwrap();
    let steps: Vec<u64> = metrics
        .lines()
        .map(|l| {
            serde_json::from_str::<serde_json::Value>(l).unwrap()["step"]
                .as_u64()
                .unwrap()
        })
        .collect();
    assert_eq!(steps, vec![1, 2, 3, 4, 5, 6]);

    // The run directory is an encoder.
    let input = out.path().join("s.txt");
    std::fs::write(&input, "Guten Morgen.\nGood morning.\n").unwrap();
    let npy = out.path().join("s.npy");
    // 2 rows × 32 floats (2 × 16 per direction) after the 128-byte-aligned header.
    let bytes = embed(home.path(), &run, &input, &npy);
    assert!(
        bytes.len() >= 2 * 32 * 4 && bytes.len() < 2 * 32 * 4 + 256,
        "{}",
        bytes.len()
    );

    // Export, into a folder that holds someone's file: refused, the folder untouched.
    let exported = out.path().join("export");
    std::fs::create_dir(&exported).unwrap();
    std::fs::write(exported.join("notes.txt"), "my notes").unwrap();
    let export = |extra: &[&str]| {
        let mut a = vec![
            "export",
            run.to_str().unwrap(),
            "--out",
            exported.to_str().unwrap(),
        ];
        a.extend_from_slice(extra);
        harness(home.path(), &a)
    };
    let o = export(&[]);
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
    assert!(
        text(&o).contains("notes.txt") && text(&o).contains("--force"),
        "{}",
        text(&o)
    );
    let names = |d: &Path| {
        let mut v: Vec<String> = std::fs::read_dir(d)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        v.sort();
        v
    };
    assert_eq!(names(&exported), ["notes.txt"], "nothing written");
    // With --force: the three files beside it; the foreign file kept as it was.
    let o = export(&["--force"]);
    assert!(o.status.success(), "{}", text(&o));
    for f in ["encoder.safetensors", "config.json", "tokenizer.json"] {
        assert!(exported.join(f).is_file(), "{f} missing");
    }
    assert_eq!(
        std::fs::read_to_string(exported.join("notes.txt")).unwrap(),
        "my notes"
    );
    // An earlier export is replaced without --force, still leaving the foreign file.
    let o = export(&[]);
    assert!(o.status.success(), "{}", text(&o));
    assert_eq!(
        std::fs::read_to_string(exported.join("notes.txt")).unwrap(),
        "my notes"
    );
    let cfg: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(exported.join("config.json")).unwrap())
            .unwrap();
    assert_eq!(cfg["d_sentence"], 32);
}

#[test]
fn unknown_device_is_a_usage_error() {
    let home = tempfile::tempdir().unwrap();
    let out = tempfile::tempdir().unwrap();
    let recipe = repo().join("recipes/laser.yaml");
    let mut args: Vec<&str> = vec!["train", recipe.to_str().unwrap()];
    args.extend_from_slice(&small());
    let run = out.path().join("run");
    args.extend_from_slice(&["--out", run.to_str().unwrap(), "--device", "tpu:0"]);
    let o = harness(home.path(), &args);
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
    assert!(text(&o).contains("use `cpu`, `flex`"), "{}", text(&o));
    // The flex backend asked of a build without it: refused before any work, with the fix.
    if !cfg!(feature = "flex") {
        let last = args.len() - 1;
        args[last] = "flex";
        let o = harness(home.path(), &args);
        assert_eq!(o.status.code(), Some(2), "{}", text(&o));
        assert!(text(&o).contains("--features flex"), "{}", text(&o));
        assert!(!run.join("env.json").exists(), "nothing prepared");
    }
    // A CUDA device that is not a number, and CUDA asked of a build without it: the same.
    let last = args.len() - 1;
    args[last] = "cuda:first";
    let o = harness(home.path(), &args);
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
    let expected = if cfg!(feature = "cuda") {
        "is not a device number"
    } else {
        "--features cuda"
    };
    assert!(text(&o).contains(expected), "{}", text(&o));
    assert!(!run.join("env.json").exists(), "nothing prepared");
}

/// A real kill: the training process gets SIGKILL once a checkpoint exists (wherever it is
/// then, possibly inside a checkpoint write), the same command resumes it, and the run
/// directory then encodes exactly like an uninterrupted run's.
#[test]
fn sigkilled_run_resumes_to_the_uninterrupted_weights() {
    let home = tempfile::tempdir().unwrap();
    let out = tempfile::tempdir().unwrap();
    let recipe = repo().join("recipes/laser.yaml");
    let args = |run: &Path| -> Vec<String> {
        // The `paper` profile: LASER's translation through the decoder (the default is a
        // dual encoder), so that resuming covers the decoder and its optimizer state too.
        let mut a = vec![
            "train".to_string(),
            recipe.to_str().unwrap().to_string(),
            "--profile".to_string(),
            "paper".to_string(),
        ];
        a.extend(small().iter().map(|s| s.to_string()));
        a.extend(
            [
                "--set",
                "model.decoder.hidden=32",
                "--set",
                "model.decoder.embed=16",
                "--set",
                "train={steps: 24, batch_tokens: 300, max_len: 20, checkpoint_every: 2}",
                // The profile trains by epochs; a `--set` map merges into it.
                "--set",
                "train.epochs=null",
                "--out",
                run.to_str().unwrap(),
            ]
            .map(String::from),
        );
        a
    };
    fn strs(a: &[String]) -> Vec<&str> {
        a.iter().map(String::as_str).collect()
    }

    let whole = out.path().join("whole");
    let o = harness(home.path(), &strs(&args(&whole)));
    assert!(o.status.success(), "{}", text(&o));

    let killed = out.path().join("killed");
    let mut child = command(home.path(), &strs(&args(&killed)))
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let first_checkpoint = killed.join("checkpoints/step-00000002");
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(300);
    while !first_checkpoint.exists() && std::time::Instant::now() < deadline {
        assert!(
            child.try_wait().unwrap().is_none(),
            "ended before its first checkpoint"
        );
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    child.kill().unwrap(); // SIGKILL: no handler runs
    child.wait().unwrap();
    let metrics = std::fs::read_to_string(killed.join("train/metrics.jsonl")).unwrap();
    assert!(metrics.lines().count() < 24, "killed before the end");

    let o = harness(home.path(), &strs(&args(&killed)));
    assert!(o.status.success(), "{}", text(&o));
    assert!(text(&o).contains("trained 24/24 steps"), "{}", text(&o));

    let input = out.path().join("s.txt");
    std::fs::write(
        &input,
        "Guten Morgen.\nGood morning.\nBuenos días a todos.\n",
    )
    .unwrap();
    assert_eq!(
        embed(home.path(), &whole, &input, &out.path().join("whole.npy")),
        embed(home.path(), &killed, &input, &out.path().join("killed.npy"))
    );
}

/// SIGTERM (what `kill`, Slurm's time limit and systemd send first) is handled as Ctrl-C:
/// the run finishes its step, saves a checkpoint there and exits.
#[test]
fn sigterm_saves_a_checkpoint_at_the_current_step() {
    let home = tempfile::tempdir().unwrap();
    let out = tempfile::tempdir().unwrap();
    let run = out.path().join("run");
    let recipe = repo().join("recipes/laser.yaml");
    let mut args: Vec<&str> = vec!["train", recipe.to_str().unwrap()];
    args.extend_from_slice(SMALL_LASER);
    args.extend_from_slice(&[
        "--set",
        "train={steps: 5000, batch_tokens: 300, max_len: 20, checkpoint_every: 4000}",
        "--out",
        run.to_str().unwrap(),
    ]);
    let child = command(home.path(), &args)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let metrics = run.join("train/metrics.jsonl");
    let steps = || {
        std::fs::read_to_string(&metrics)
            .map(|t| t.lines().count())
            .unwrap_or(0)
    };
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(300);
    while steps() < 3 && std::time::Instant::now() < deadline {
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    let kill = std::process::Command::new("kill")
        .args(["-TERM", &child.id().to_string()])
        .status()
        .unwrap();
    assert!(kill.success());
    let o = child.wait_with_output().unwrap();
    assert!(
        text(&o).contains("interrupted: saving a checkpoint"),
        "{}",
        text(&o)
    );
    let done = steps();
    assert!((3..5000).contains(&done), "{done}");
    assert!(
        run.join(format!("checkpoints/step-{done:08}/state.json"))
            .is_file(),
        "no checkpoint at step {done}: {}",
        text(&o)
    );
}

/// The default recipes end to end (`harness run`: corpora, tokenizer, training, every
/// benchmark of the recipe). Long: run with `--ignored`.
#[test]
#[ignore]
fn default_recipes_run_end_to_end() {
    let home = tempfile::tempdir().unwrap();
    let out = tempfile::tempdir().unwrap();
    for name in ["laser", "seq2seq-similarity", "emu"] {
        let recipe = repo().join(format!("recipes/{name}.yaml"));
        let run = out.path().join(name);
        let o = harness(
            home.path(),
            &[
                "run",
                recipe.to_str().unwrap(),
                "--out",
                run.to_str().unwrap(),
            ],
        );
        assert!(o.status.success(), "{name}: {}", text(&o));
        assert!(
            run.join("results").read_dir().unwrap().count() >= 3,
            "{name}"
        );
    }
}

#[test]
fn a_run_directory_of_another_recipe_is_refused() {
    let home = tempfile::tempdir().unwrap();
    let out = tempfile::tempdir().unwrap();
    let run = out.path().join("run");
    let recipe = repo().join("recipes/laser.yaml");
    let mut args: Vec<&str> = vec!["train", recipe.to_str().unwrap()];
    args.extend_from_slice(&small());
    args.extend_from_slice(&["--out", run.to_str().unwrap(), "--stop-after", "2"]);
    let o = harness(home.path(), &args);
    assert!(o.status.success(), "{}", text(&o));
    let before = std::fs::read(run.join("checkpoints/step-00000002/model.mpk")).unwrap();
    // Same directory, another learning rate: refused, nothing touched.
    args.extend_from_slice(&["--set", "optimizer.lr=0.002"]);
    let o = harness(home.path(), &args);
    assert!(!o.status.success(), "{}", text(&o));
    assert!(
        text(&o).contains("one resolved recipe") && text(&o).contains("env.json"),
        "{}",
        text(&o)
    );
    let after = std::fs::read(run.join("checkpoints/step-00000002/model.mpk")).unwrap();
    assert_eq!(before, after);
}

/// A task whose corpus the contamination filter empties is a recipe error naming the task,
/// not a crash in the middle of training (SICK train against SICK-R: every pair removed).
#[test]
fn a_task_left_without_examples_is_a_recipe_error() {
    let home = tempfile::tempdir().unwrap();
    let out = tempfile::tempdir().unwrap();
    let recipe = repo().join("recipes/laser.yaml");
    let run = out.path().join("run");
    let mut args: Vec<&str> = vec!["train", recipe.to_str().unwrap(), "--profile", "nli"];
    args.extend_from_slice(&small());
    args.extend_from_slice(&[
        "--set",
        "data.corpora.sick_nli={dataset: sick, splits: [train], exclude: [sick-r]}",
        "--set",
        "tasks.nli-snli.corpus=sick_nli",
        "--out",
        run.to_str().unwrap(),
    ]);
    let o = harness(home.path(), &args);
    // 2: a setup error (the recipe itself is valid; the data leaves nothing).
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
    let t = text(&o);
    assert!(!t.contains("panicked"), "{t}");
    assert!(t.contains("tasks.nli-snli.corpus"), "{t}");
    assert!(t.contains("corpus `sick_nli` has no example left"), "{t}");
}

/// The result file of benchmark `name` in a run directory (`results/<name>.json`).
fn result(run: &Path, name: &str) -> serde_json::Value {
    let path = run.join(format!("results/{name}.json"));
    let bytes = std::fs::read(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    serde_json::from_slice(&bytes).unwrap()
}

/// Multilingual USE's default profile end to end at tiny scale (`harness run`): the mined
/// hard negatives, the four cycled tasks on the transformer, and the paper's own protocols
/// (XNLI through the model's own NLI head, retrieval P@1 by dot product) on the real data.
#[test]
fn muse_xling_default_runs_end_to_end_at_tiny_scale() {
    let home = tempfile::tempdir().unwrap();
    let out = tempfile::tempdir().unwrap();
    let run = out.path().join("muse");
    let recipe = repo().join("recipes/muse-xling.yaml");
    let sets = [
        "data.corpora.translation.max_examples=200",
        "data.corpora.conversation.max_examples=100",
        "data.corpora.running_text.max_examples=200",
        "data.tokenizer.vocab=2000",
        "data.tokenizer.hash_buckets=500",
        "model.encoder={kind: transformer, layers: 1, d_model: 16, d_ff: 32, heads: 2, pool: mean, dropout: 0.1, max_len: 16}",
        "model.heads.response.hidden=[24, 16]",
        "model.heads.qt_input.hidden=[24, 16]",
        "model.heads.qt_previous.hidden=[24, 16]",
        "model.heads.qt_next.hidden=[24, 16]",
        "model.heads.nli.hidden=[8]",
        "train={steps: 40, batch_size: 8, max_len: 16, checkpoint_every: 40}",
        "evaluate=[{name: xnli, params: {own_head: nli, eval_limit: 60}, languages: [en, fr]}, \
         {name: retrieval-p1, params: {score: dot}, languages: [fra-eng]}, stsb-test]",
    ];
    let mut args = vec![
        "run",
        recipe.to_str().unwrap(),
        "--out",
        run.to_str().unwrap(),
    ];
    for s in &sets {
        args.extend(["--set", s]);
    }
    let o = harness(home.path(), &args);
    assert!(o.status.success(), "{}", text(&o));
    assert!(
        text(&o).contains("mining 5 hard negatives per example of task `translate`"),
        "{}",
        text(&o)
    );
    // Every task took optimisation steps.
    let metrics = std::fs::read_to_string(run.join("train/metrics.jsonl")).unwrap();
    for task in ["translate", "respond", "quick-thought", "nli-snli"] {
        assert!(
            metrics.contains(&format!("\"task\":\"{task}\"")),
            "{task} never trained:\n{metrics}"
        );
    }
    // XNLI went through the trained head: no classifier, no training pairs.
    let xnli = result(&run, "xnli");
    assert_eq!(xnli["benchmark"], "xnli", "{xnli}");
    assert_eq!(xnli["scores"]["own_head"], "nli", "{xnli}");
    assert!(xnli["scores"].get("train_pairs").is_none(), "{xnli}");
    let acc = xnli["scores"]["accuracy"]["fr"].as_f64().unwrap();
    assert!((0.0..=100.0).contains(&acc), "{xnli}");
    let retrieval = result(&run, "retrieval-p1");
    assert_eq!(retrieval["benchmark"], "retrieval-p1", "{retrieval}");
    assert_eq!(retrieval["protocol_params"]["score"], "dot", "{retrieval}");
    assert!(run.join("report/report.html").is_file());
}

/// The XNLI alignment baseline's default profile end to end at tiny scale (`harness run`):
/// stage 1 trains the English encoder and NLI head, stage 2 starts the target encoders as
/// copies of it and aligns two of them, and XNLI reads each language through its own
/// encoder into the English head, beside the same languages through the English encoder.
#[test]
fn xnli_align_default_runs_end_to_end_at_tiny_scale() {
    let home = tempfile::tempdir().unwrap();
    let out = tempfile::tempdir().unwrap();
    let run = out.path().join("xnli");
    let recipe = repo().join("recipes/xnli-align.yaml");
    let tiny = "{kind: bilstm, layers: 1, hidden: 8, embed: 8, pool: max}";
    let targets = [
        "ar", "bg", "de", "es", "fr", "hi", "ru", "th", "tr", "ur", "vi", "zh",
    ];
    let mut sets: Vec<String> = vec![
        "data.tokenizer.vocab=3000".into(),
        "data.corpora.snli.max_examples=300".into(),
        format!("model.encoder={tiny}"),
        "model.heads.nli.hidden=[8]".into(),
        "tasks=[{name: nli-snli, objective: nli_classification, corpus: snli, params: {head: nli}}, \
         {name: align-fr, stage: 2, objective: alignment_l2, corpus: pairs_fr, encoder: fr, reads: encoder}, \
         {name: align-de, stage: 2, objective: alignment_l2, corpus: pairs_de, encoder: de, reads: encoder}]"
            .into(),
        "train={steps: 20, batch_size: 8, max_len: 16, eval_every: 10, best_metric: xnli-dev.average, best_per_language: xnli-dev.accuracy}"
            .into(),
        "stages.2.steps=20".into(),
        "evaluate=[{name: xnli, params: {own_head: nli, eval_limit: 60}, languages: [en, fr, de, el]}, \
         {name: xnli-dev, params: {own_head: nli, eval_limit: 60, unaligned: false}, languages: [en, fr, de]}]"
            .into(),
    ];
    for t in targets {
        sets.push(format!("model.encoders.{t}={tiny}"));
        sets.push(format!("data.corpora.pairs_{t}.max_examples=200"));
    }
    let mut args = vec![
        "run",
        recipe.to_str().unwrap(),
        "--out",
        run.to_str().unwrap(),
    ];
    for s in &sets {
        args.extend(["--set", s.as_str()]);
    }
    let o = harness(home.path(), &args);
    assert!(o.status.success(), "{}", text(&o));
    let metrics = std::fs::read_to_string(run.join("train/metrics.jsonl")).unwrap();
    for task in ["nli-snli", "align-fr", "align-de"] {
        assert!(
            metrics.contains(&format!("\"task\":\"{task}\"")),
            "{task} never trained:\n{metrics}"
        );
    }
    // The best checkpoint was chosen on the validation sets, whose per-language scores
    // (and alignment distances) along training are in `train/evals.jsonl`.
    assert!(metrics.contains("xnli-dev.average"), "{metrics}");
    let evals = std::fs::read_to_string(run.join("train/evals.jsonl")).unwrap();
    let evals: Vec<serde_json::Value> = evals
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(evals.len(), 4, "{evals:?}");
    assert_eq!(evals[3]["step"], 40);
    assert!(evals[3]["scores"]["alignment_distance"]["aligned"]["fr"].is_number());
    // Each aligned encoder was selected on its own language's validation accuracy, among
    // the stage-2 evaluations (steps 30 and 40), and evaluation reads it with those weights:
    // its final validation accuracy is the one it was selected with.
    let list: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(run.join("checkpoints/best-encoders.json")).unwrap(),
    )
    .unwrap();
    let selected = list["encoders"].as_object().unwrap();
    assert_eq!(selected.keys().collect::<Vec<_>>(), ["de", "fr"], "{list}");
    let dev = result(&run, "xnli-dev");
    let xnli = result(&run, "xnli");
    let s = &xnli["scores"];
    assert_eq!(s["own_head"], "nli", "{xnli}");
    assert_eq!(s["own_encoders"], serde_json::json!(["fr", "de"]), "{xnli}");
    for l in ["en", "fr", "de", "el"] {
        let a = s["accuracy"][l].as_f64().unwrap();
        let u = s["unaligned"]["accuracy"][l].as_f64().unwrap();
        assert!(
            (0.0..=100.0).contains(&a) && (0.0..=100.0).contains(&u),
            "{xnli}"
        );
        if l == "en" || l == "el" {
            // Read by the English encoder either way.
            assert_eq!(a, u, "{l}: {xnli}");
        }
    }
    assert!(s["alignment_distance"]["aligned"]["fr"].as_f64().unwrap() > 0.0);
    assert_eq!(dev["scores"]["split"], "dev", "{dev}");
    assert!(dev["scores"].get("unaligned").is_none(), "{dev}");
    for (name, b) in selected {
        assert_eq!(b["language"], name.as_str(), "{list}");
        let step = b["step"].as_u64().unwrap();
        assert!(step == 30 || step == 40, "{list}");
        let at = evals.iter().find(|e| e["step"] == step).unwrap();
        assert_eq!(b["value"], at["scores"]["accuracy"][name], "{list}");
        for e in &evals[2..] {
            assert!(
                e["scores"]["accuracy"][name].as_f64() <= b["value"].as_f64(),
                "{list}"
            );
        }
        assert_eq!(dev["scores"]["accuracy"][name], b["value"], "{dev}\n{list}");
    }
    let report = std::fs::read_to_string(run.join("report/report.md")).unwrap();
    assert!(report.contains("aligned vs unaligned"), "{report}");
}

#[test]
fn bf16_is_refused_on_a_device_without_it_before_any_work() {
    let home = tempfile::tempdir().unwrap();
    let out = tempfile::tempdir().unwrap();
    let recipe = repo().join("recipes/laser.yaml");
    let run = out.path().join("run");
    let mut args: Vec<&str> = vec!["train", recipe.to_str().unwrap()];
    args.extend_from_slice(SMALL_LASER);
    args.extend_from_slice(&[
        "--set",
        "train={steps: 2, batch_tokens: 300, max_len: 20, precision: bf16}",
        "--out",
        run.to_str().unwrap(),
        "--device",
        "cpu",
    ]);
    let o = harness(home.path(), &args);
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
    assert!(text(&o).contains("train.precision"), "{}", text(&o));
    assert!(text(&o).contains("`cuda:N`"), "{}", text(&o));
    assert!(!run.join("train").exists(), "nothing trained");
    // An unknown precision is a recipe error naming the choices.
    let last = args.len() - 5;
    args[last] = "train={steps: 2, batch_tokens: 300, max_len: 20, precision: fp8}";
    let o = harness(home.path(), &args);
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
    assert!(text(&o).contains("bf16"), "{}", text(&o));
}
