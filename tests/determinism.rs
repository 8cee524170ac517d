//! Determinism of result files on the CPU backend: the same evaluation twice, each from a
//! cold home, writes byte-identical result files apart from the wall time (`seconds`), and
//! with 1 or 2 threads (`RAYON_NUM_THREADS`) the same scores.

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
            let kept: Vec<&str> = text
                .lines()
                .filter(|l| !l.trim_start().starts_with("\"seconds\":"))
                .collect();
            assert_eq!(
                kept.len() + 1,
                text.lines().count(),
                "{b}: one wall-time line"
            );
            (kept.join("\n"), v)
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
