//! Determinism of result files on the CPU backend: the same evaluation twice, each from a
//! cold home, writes byte-identical result files apart from the wall times (`seconds`,
//! `seconds_by_part`), and with 1 or 2 threads (`RAYON_NUM_THREADS`) the same scores; the
//! same training recipe twice, the same training log and result file (1 thread against 2: a documented
//! tolerance); a sweep run with `--jobs 1` and `--jobs 2`, the same results.

mod binary;

use binary::{command, text};

const BENCHES: [&str; 2] = ["stsb-test", "sick-r"];

/// `harness eval` of hashed-ngrams on [`BENCHES`] from a cold home with `threads` rayon
/// threads; each result file's text without its wall-time line, and its JSON.
fn eval(threads: &str) -> Vec<(String, serde_json::Value)> {
    let home = tempfile::tempdir().unwrap();
    let out = home.path().join("results");
    let o = command(
        home.path(),
        &[
            "eval",
            "--encoder",
            "hashed-ngrams",
            "--bench",
            &BENCHES.join(","),
            "--out",
            out.to_str().unwrap(),
        ],
    )
    .env("RAYON_NUM_THREADS", threads)
    .output()
    .unwrap();
    assert!(o.status.success(), "{}", text(&o));
    BENCHES
        .iter()
        .map(|b| {
            let text = std::fs::read_to_string(out.join(format!("{b}.json"))).unwrap();
            let v: serde_json::Value = serde_json::from_str(&text).unwrap();
            assert!(v["seconds"].is_number(), "{b}: {v}");
            assert!(v["seconds_by_part"].is_object(), "{b}: {v}");
            let kept = without_wall_times(&text);
            assert!(
                !kept
                    .lines()
                    .any(|l| l.trim_start().starts_with("\"seconds")),
                "{b}: wall times left in {kept}"
            );
            (kept, v)
        })
        .collect()
}

#[test]
fn the_same_evaluation_twice_writes_the_same_result_files() {
    let first = eval("2");
    let second = eval("2");
    for ((a, _), (b, _)) in first.iter().zip(&second) {
        assert_eq!(a, b);
    }
    // One thread: the same scores (the protocols' sums run in a fixed order).
    let single = eval("1");
    for ((_, x), (_, y)) in first.iter().zip(&single) {
        assert_eq!(x["scores"], y["scores"], "{}", x["benchmark"]);
        assert_eq!(x["main_score"], y["main_score"]);
    }
}

/// The small LASER recipe (`binary::SMALL_LASER`, 30 steps) run by `harness run` from a cold
/// home with `threads` rayon threads and evaluated on STS-B test: the result file's text
/// without its wall-time line, and each training step's task, tokens, loss, gradient norm
/// and learning rate.
fn train_and_evaluate(threads: &str) -> (String, Vec<serde_json::Value>) {
    let home = tempfile::tempdir().unwrap();
    let run = home.path().join("run");
    let recipe = binary::repo().join("recipes/laser.yaml");
    let mut args: Vec<&str> = vec!["run", recipe.to_str().unwrap()];
    args.extend_from_slice(binary::SMALL_LASER);
    args.extend_from_slice(&[
        "--set",
        "train={steps: 30, batch_tokens: 300, max_len: 20, checkpoint_every: 10}",
        "--set",
        "evaluate=[stsb-test]",
        "--set",
        "report=[]",
        "--out",
        run.to_str().unwrap(),
    ]);
    let o = command(home.path(), &args)
        .env("RAYON_NUM_THREADS", threads)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", text(&o));
    let result = std::fs::read_to_string(run.join("results/stsb-test.json")).unwrap();
    let kept = without_wall_times(&result);
    let steps = std::fs::read_to_string(run.join("train/metrics.jsonl"))
        .unwrap()
        .lines()
        .map(|l| {
            let mut v: serde_json::Value = serde_json::from_str(l).unwrap();
            let m = v.as_object_mut().unwrap();
            // Wall times and the throughput derived from them.
            m.remove("seconds");
            m.remove("tokens_per_s");
            v
        })
        .collect();
    (kept, steps)
}

/// The same training recipe twice (each from a cold home): the same training log step by
/// step and a byte-identical result file apart from its wall time. With 1 thread instead of
/// 2 the tolerance docs/tests.md documents holds: the same batches and the first step's loss
/// exactly, each of the first five steps' losses and gradient norms within 1e-5 relative
/// (the BiLSTM's weight gradient is summed over one block of rows per thread, so its
/// rounding depends on the thread count, and later steps drift further apart).
#[test]
fn the_same_training_recipe_twice_writes_the_same_result_file() {
    let (result, steps) = train_and_evaluate("2");
    assert_eq!(steps.len(), 30);
    let again = train_and_evaluate("2");
    assert_eq!(again.1, steps, "the training log differs");
    assert_eq!(again.0, result, "the result file differs");

    let (_, single) = train_and_evaluate("1");
    assert_eq!(single.len(), 30);
    for (a, b) in steps.iter().zip(&single) {
        assert_eq!(a["task"], b["task"]);
        assert_eq!(a["tokens"], b["tokens"]);
    }
    assert_eq!(steps[0]["loss"], single[0]["loss"]);
    for (a, b) in steps.iter().zip(&single).take(5) {
        for k in ["loss", "grad_norm"] {
            let (x, y) = (a[k].as_f64().unwrap(), b[k].as_f64().unwrap());
            assert!(
                (x - y).abs() <= 1e-5 * x.abs().max(y.abs()),
                "step {}: {k} {x} with 2 threads, {y} with 1",
                a["step"]
            );
        }
    }
}

/// A sweep's results do not depend on `--jobs`: a grid of four points (hashed n-grams of two
/// sizes × seeds 1, 2 on STS-B test) run with `--jobs 1` (each point with both threads) and
/// `--jobs 2` (two points at once, one thread each) from cold homes gives the same result
/// files apart from wall times, and the same ablation table.
#[test]
fn a_sweep_gives_the_same_results_with_one_or_two_jobs() {
    let sweep = |jobs: &str| {
        let home = tempfile::tempdir().unwrap();
        let grid = binary::hashed_grid(home.path(), "[16, 32]");
        let o = command(
            home.path(),
            &["sweep", grid.to_str().unwrap(), "--jobs", jobs],
        )
        .env("HARNESS_RUNS_DIR", home.path().join("runs"))
        .env("HARNESS_SWEEPS_DIR", home.path().join("sweeps"))
        .output()
        .unwrap();
        assert!(o.status.success(), "{}", text(&o));
        let dir = std::fs::read_dir(home.path().join("sweeps"))
            .unwrap()
            .next()
            .unwrap()
            .unwrap()
            .path();
        let ledger: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(dir.join("status.json")).unwrap())
                .unwrap();
        let mut results: Vec<(String, String)> = ledger["points"]
            .as_array()
            .unwrap()
            .iter()
            .map(|p| {
                let run = std::path::PathBuf::from(p["run_dir"].as_str().unwrap());
                let text = std::fs::read_to_string(run.join("results/stsb-test.json")).unwrap();
                (
                    p["alias"].as_str().unwrap().to_string(),
                    without_wall_times(&text),
                )
            })
            .collect();
        results.sort();
        let cells = std::fs::read_to_string(dir.join("report/cells.csv"))
            .unwrap()
            .replace(&home.path().display().to_string(), "HOME");
        (results, cells)
    };
    let one = sweep("1");
    assert_eq!(one.0.len(), 4);
    let two = sweep("2");
    assert_eq!(one, two);
}

/// A result file's text without its wall times: the `"seconds"` line and the
/// `"seconds_by_part"` object (a flat object of numbers, one line each, then its `}`).
fn without_wall_times(text: &str) -> String {
    let mut kept = Vec::new();
    let mut in_parts = false;
    for line in text.lines() {
        let t = line.trim_start();
        if in_parts {
            in_parts = !t.starts_with('}');
        } else if t.starts_with("\"seconds_by_part\":") {
            in_parts = !t.ends_with("},") && !t.ends_with('}');
        } else if !t.starts_with("\"seconds\":") {
            kept.push(line);
        }
    }
    kept.join("\n")
}
