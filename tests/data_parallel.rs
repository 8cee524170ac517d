//! Data-parallel training (`--device cpu,cpu`, the peers' gradients summed in one host buffer
//! per step, `harness_train::local_world`): the same small recipe on the real parallel data,
//! trained on one device and on two, ends with the same weights within float rounding and
//! logs the same loss, gradient norm and tokens per step (`seq2seq_ce` averages over target
//! tokens, which the shards' weights account for; no dropout, whose masks would differ). A
//! device list naming a backend this build lacks is refused before any work.

mod binary;
mod trained;

use binary::{harness, text};
use std::path::Path;
use trained::max_difference;

/// `(loss, grad_norm, tokens)` of each line of the run's `metrics.jsonl`.
fn steps(dir: &Path) -> Vec<(f64, f64, u64)> {
    std::fs::read_to_string(dir.join("train/metrics.jsonl"))
        .unwrap()
        .lines()
        .map(|l| {
            let v: serde_json::Value = serde_json::from_str(l).unwrap();
            (
                v["loss"].as_f64().unwrap(),
                v["grad_norm"].as_f64().unwrap(),
                v["tokens"].as_u64().unwrap(),
            )
        })
        .collect()
}

/// `harness train RECIPE --device DEVICES --out RUN` with `home` as `HARNESS_HOME`.
fn train(home: &Path, recipe: &Path, devices: &str, run: &Path) -> std::process::Output {
    harness(
        home,
        &[
            "train",
            recipe.to_str().unwrap(),
            "--device",
            devices,
            "--out",
            run.to_str().unwrap(),
        ],
    )
}

#[test]
fn two_cpu_devices_train_the_weights_of_one() {
    let home = tempfile::tempdir().unwrap();
    let out = tempfile::tempdir().unwrap();
    let recipe = out.path().join("dp-tiny.yaml");
    std::fs::write(&recipe, binary::TINY_TRANSLATION).unwrap();
    let train = |devices: &str, run: &Path| {
        let o = train(home.path(), &recipe, devices, run);
        assert!(o.status.success(), "--device {devices}: {}", text(&o));
        text(&o)
    };
    let (one, two) = (out.path().join("one"), out.path().join("two"));
    train("cpu", &one);
    let log = train("cpu,cpu", &two);
    assert!(
        log.contains("data-parallel on 2 devices") && log.contains("whole batch"),
        "{log}"
    );

    let (a, b) = (steps(&one), steps(&two));
    assert_eq!(a.len(), 5);
    // The recipe's `grad_clip` (0.1) is below every step's norm, so both runs clip: the
    // comparison covers the clipped update, not only the raw gradients.
    assert!(
        a.iter().chain(&b).all(|s| s.1 > 0.1),
        "a step's gradient norm is under the clip, so it was not clipped: {a:?} {b:?}"
    );
    assert_eq!(a.len(), b.len());
    for (i, (x, y)) in a.iter().zip(&b).enumerate() {
        eprintln!(
            "step {}: loss {:.7} vs {:.7} (diff {:.2e}), grad norm {:.6} vs {:.6}",
            i + 1,
            x.0,
            y.0,
            (x.0 - y.0).abs(),
            x.1,
            y.1
        );
        assert_eq!(x.2, y.2, "step {}: tokens", i + 1);
        assert!(
            (x.0 - y.0).abs() <= 1e-5 * x.0.abs().max(1.0),
            "step {}: {x:?} vs {y:?}",
            i + 1
        );
        assert!(
            (x.1 - y.1).abs() <= 1e-4 * x.1.abs().max(1.0),
            "step {}: {x:?} vs {y:?}",
            i + 1
        );
    }

    let (diff, scale) = max_difference(&one, &two);
    assert!(
        diff <= 1e-5 * scale,
        "max weight difference {diff} (scale {scale})"
    );
}

/// The LASER default (a ranking loss with in-batch negatives, small corpora, no dropout):
/// two devices gather each other's sentence vectors and rank against the whole batch, so
/// they train the one-device losses and weights within float rounding.
#[test]
fn two_cpu_devices_rank_against_the_whole_batch() {
    let home = tempfile::tempdir().unwrap();
    let out = tempfile::tempdir().unwrap();
    let recipe = binary::repo().join("recipes/laser.yaml");
    let mut args: Vec<String> = vec!["train".into(), recipe.display().to_string()];
    args.extend(binary::SMALL_LASER.iter().map(|s| s.to_string()));
    args.extend(
        [
            "--set",
            "train={steps: 4, batch_tokens: 300, max_len: 20, checkpoint_every: 4}",
            "--set",
            "optimizer.dropout=0.0",
        ]
        .map(String::from),
    );
    let run = |devices: &str, dir: &Path| {
        let mut a = args.clone();
        a.extend([
            "--device".into(),
            devices.into(),
            "--out".into(),
            dir.display().to_string(),
        ]);
        let a: Vec<&str> = a.iter().map(String::as_str).collect();
        let o = harness(home.path(), &a);
        assert!(o.status.success(), "--device {devices}: {}", text(&o));
    };
    let (one, two) = (out.path().join("one"), out.path().join("two"));
    run("cpu", &one);
    run("cpu,cpu", &two);
    let (a, b) = (steps(&one), steps(&two));
    assert_eq!(a.len(), 4);
    for (i, (x, y)) in a.iter().zip(&b).enumerate() {
        assert_eq!(x.2, y.2, "step {}: tokens", i + 1);
        // Ranking against a shard only would lower the loss by a visible amount.
        assert!(
            (x.0 - y.0).abs() <= 1e-5 * x.0.abs().max(1.0),
            "step {}: {x:?} vs {y:?}",
            i + 1
        );
    }
    let (diff, _) = max_difference(&one, &two);
    // Adam lifts last-bit differences of the halves' products to ~1e-5 in four steps.
    assert!(diff <= 1e-4, "max weight difference {diff}");
}

#[test]
fn a_device_list_naming_a_missing_backend_is_refused() {
    let home = tempfile::tempdir().unwrap();
    let out = tempfile::tempdir().unwrap();
    let recipe = out.path().join("dp-tiny.yaml");
    std::fs::write(&recipe, binary::TINY_TRANSLATION).unwrap();
    let run = out.path().join("run");
    let refuse = |devices: &str, want: &str| {
        let o = train(home.path(), &recipe, devices, &run);
        assert!(!o.status.success(), "--device {devices}: {}", text(&o));
        assert!(text(&o).contains(want), "--device {devices}: {}", text(&o));
        assert!(
            !run.exists(),
            "--device {devices}: refused after work began"
        );
    };
    if !cfg!(feature = "cuda") {
        refuse(
            "cpu,cuda:1",
            "--device cuda:1: this binary was built without CUDA",
        );
    }
    refuse("cpu,tpu:0", "--device tpu:0: unknown device");
    if cfg!(feature = "cuda") {
        refuse("cpu,cuda:0", "different backends");
    }
}
