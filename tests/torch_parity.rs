//! The PyTorch reference of the exported LASER encoder (`scripts/laser_torch.py`) against
//! harness itself: a shrunken LASER recipe is trained with the real binary, exported
//! (`harness export`), and ~20 multilingual sentences of very different lengths are encoded
//! by `harness embed --encoder RUN` and by the script from the export folder alone; every
//! row must agree (max abs difference <= 1e-5, cosine >= 0.99999). The export's tensor names
//! and shapes are checked against the layout the script documents.
//!
//! The script runs in the venv of `scripts/pyenv.py` (torch, safetensors, tokenizers, numpy
//! at pinned versions, under ~/.cache/harness-bench or $HARNESS_BENCH_VENV). The first run
//! installs it from PyPI (a few minutes, needs the network); like the other parity tests this
//! one never passes by skipping: no Python, no venv or no network is a failure.

mod binary;

use binary::{harness, repo, text, SMALL_LASER};
use harness_embed::npy::read_npy;
use std::path::Path;
use std::process::Command;

/// The LASER recipe shrunk to seconds ([`SMALL_LASER`]), 6 steps.
fn small() -> Vec<&'static str> {
    let mut a = SMALL_LASER.to_vec();
    a.extend_from_slice(&[
        "--set",
        "train={steps: 6, batch_tokens: 300, max_len: 20, checkpoint_every: 3}",
    ]);
    a
}

/// Different scripts and lengths: empty, one token, a CRLF line, surrounding spaces,
/// special-token text, emoji, and one line longer than the 256-token evaluation clip.
fn sentences() -> Vec<String> {
    let mut s: Vec<String> = [
        "Hello world.",
        "Die Katze saß auf der Matte.",
        "¿Dónde está la biblioteca más cercana?",
        "Le chat était assis sur le tapis, et le chien dormait près de la cheminée.",
        "猫坐在垫子上。",
        "Кошка сидела на коврике, а собака спала у камина.",
        "القطة جلست على الحصيرة.",
        "Kedi paspasın üzerinde oturuyordu.",
        "",
        "a",
        "  leading and trailing spaces  ",
        "Windows line\r",
        "</s> <pad> <lang:eng> are plain text here",
        "Emoji 🐈‍⬛ and ñandú, naïve café, Straße.",
        "1234567890 + 3.14159 = ?",
        "Tom didn't know what to say. Mary smiled at him, and everyone laughed.",
        "Ich habe keine Ahnung, wovon du sprichst, aber es klingt interessant.",
        "Es ist ein schöner Tag.",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    // Far past the 256-token clip of the evaluation path.
    s.push("Der schnelle braune Fuchs springt über den faulen Hund. ".repeat(40));
    s.push("Un pequeño texto. ".repeat(3));
    s
}

#[test]
fn pytorch_reference_reproduces_harness_vectors() {
    let home = tempfile::tempdir().unwrap();
    let out = tempfile::tempdir().unwrap();
    let run = out.path().join("run");
    let export = out.path().join("export");
    let recipe = repo().join("recipes/laser.yaml");
    let mut args: Vec<&str> = vec!["train", recipe.to_str().unwrap()];
    args.extend_from_slice(&small());
    args.extend_from_slice(&["--out", run.to_str().unwrap()]);
    let o = harness(home.path(), &args);
    assert!(o.status.success(), "{}", text(&o));

    let o = harness(
        home.path(),
        &[
            "export",
            run.to_str().unwrap(),
            "--out",
            export.to_str().unwrap(),
        ],
    );
    assert!(o.status.success(), "{}", text(&o));
    check_layout(&export);

    let input = out.path().join("s.txt");
    let lines = sentences();
    std::fs::write(&input, lines.join("\n") + "\n").unwrap();
    let h_npy = out.path().join("h.npy");
    binary::embed_npy(home.path(), &run, &input, &h_npy);

    // The script batches by 5 here (harness: one batch of 64), so the rows also show that
    // batching does not change a vector.
    let t_npy = out.path().join("t.npy");
    let python = std::env::var("HARNESS_PYTHON").unwrap_or_else(|_| "python3".to_string());
    let o = Command::new(&python)
        .arg(repo().join("scripts/laser_torch.py"))
        .args(["embed", "--model"])
        .arg(&export)
        .arg("--input")
        .arg(&input)
        .arg("--out")
        .arg(&t_npy)
        .args(["--batch-size", "5"])
        .current_dir(repo())
        .output()
        .unwrap_or_else(|e| panic!("running {python} scripts/laser_torch.py: {e}"));
    assert!(
        o.status.success(),
        "scripts/laser_torch.py failed:\n{}",
        text(&o)
    );

    let h = read_npy(&h_npy).unwrap();
    let t = read_npy(&t_npy).unwrap();
    assert_eq!((h.rows, h.cols), (lines.len(), 32));
    assert_eq!((t.rows, t.cols), (h.rows, h.cols));
    let mut worst = (0f32, 1f64);
    for (i, line) in lines.iter().enumerate() {
        let a = h.row(i);
        let b = t.row(i);
        let diff = a
            .iter()
            .zip(b)
            .map(|(x, y)| (x - y).abs())
            .fold(0f32, f32::max);
        let cos = cosine(a, b);
        assert!(
            diff <= 1e-5 && cos >= 0.99999,
            "row {i} ({line:?}): max abs difference {diff}, cosine {cos}\nharness {a:?}\npytorch {b:?}"
        );
        worst = (worst.0.max(diff), worst.1.min(cos));
    }
    // The sentences give different vectors (the model is not degenerate).
    assert!(cosine(&h.data[..32], &h.data[32..64]) < 0.99999);
    println!(
        "{} rows: max abs difference {:e}, min cosine {:.9}",
        h.rows, worst.0, worst.1
    );
}

fn cosine(a: &[f32], b: &[f32]) -> f64 {
    let dot: f64 = a.iter().zip(b).map(|(x, y)| *x as f64 * *y as f64).sum();
    let na: f64 = a.iter().map(|x| (*x as f64).powi(2)).sum::<f64>().sqrt();
    let nb: f64 = b.iter().map(|x| (*x as f64).powi(2)).sum::<f64>().sqrt();
    dot / (na * nb)
}

/// `encoder.safetensors` holds exactly the tensors `scripts/laser_torch.py` documents, with
/// the documented shapes, for the exported configuration (2 bidirectional layers of 16,
/// 16-d embeddings, the run's vocabulary).
fn check_layout(export: &Path) {
    let cfg: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(export.join("config.json")).unwrap())
            .unwrap();
    assert_eq!(cfg["architecture"], "harness-bilstm");
    assert_eq!(cfg["pool"], "max");
    assert_eq!(cfg["d_sentence"], 32);
    let n_vocab = cfg["n_vocab"].as_u64().unwrap() as usize;
    let bytes = std::fs::read(export.join("encoder.safetensors")).unwrap();
    let st = safetensors::SafeTensors::deserialize(&bytes).unwrap();
    let mut want: Vec<(String, Vec<usize>)> = vec![("embedding.weight".into(), vec![n_vocab, 16])];
    for (i, d_in) in [(0, 16), (1, 32)] {
        for side in ["forward", "reverse"] {
            want.push((format!("{side}.{i}.input.weight"), vec![d_in, 64]));
            want.push((format!("{side}.{i}.input.bias"), vec![64]));
            want.push((format!("{side}.{i}.hidden.weight"), vec![16, 64]));
        }
    }
    want.sort();
    let mut got: Vec<(String, Vec<usize>)> = st
        .tensors()
        .into_iter()
        .map(|(name, view)| {
            assert_eq!(view.dtype(), safetensors::Dtype::F32, "{name}");
            (name, view.shape().to_vec())
        })
        .collect();
    got.sort();
    assert_eq!(got, want);
    let doc = std::fs::read_to_string(repo().join("scripts/laser_torch.py")).unwrap();
    for documented in [
        "embedding.weight",
        "forward.{i}.input.weight",
        "forward.{i}.input.bias",
        "forward.{i}.hidden.weight",
        "reverse.{i}.input.weight",
        "[input, forget, cell (g),",
    ] {
        assert!(
            doc.contains(documented),
            "the script's layout doc lacks {documented}"
        );
    }
}
