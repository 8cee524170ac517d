//! A user's own corpus at the papers' scale: `cargo bench --bench corpora`.
//!
//! For each size in `CORPORA_BENCH_PAIRS` (comma-separated pair counts; default 1,000,000):
//! 1. `scripts/make_synthetic_corpus.py` writes that many tab-separated pairs (the shipped
//!    Tatoeba pairs repeated and perturbed; kept between runs under `CORPORA_BENCH_DIR`,
//!    default `target/corpora-bench`, never committed);
//! 2. `harness corpora recipes/laser.yaml --profile own-corpus` on them, in a fresh
//!    `HARNESS_HOME`: the tokenizer learned on a bounded sample, then the corpus binarized
//!    into shards. Its peak RSS (`/usr/bin/time`), wall time, and the binarization's
//!    sentences/s (both sides of every pair read, over the seconds its manifest records);
//! 3. the peer: Hugging Face `tokenizers` `encode_batch` on the same `tokenizer.json` and the
//!    same files with as many threads as harness's pool (`scripts/bench_tokenize_peer.py`),
//!    in the same run: the line `binarize / tokenizers = R` (sentences/s) is the result;
//! 4. `harness train` in the run directory `harness corpora` prepared: one step
//!    (`--stop-after 1`: its wall time bounds the time to the first step, the corpus is not
//!    read again), then `CORPORA_BENCH_STEPS` more (default 200): peak RSS and tokens/s;
//! 5. once, the LASER default from its shipped datasets (loaded, then binarized into
//!    shards in a temporary folder), then from the same pairs written to one tab-separated
//!    file per corpus (in the order the shipped path holds them; their shards cached): the
//!    same batches, so the same losses, and `files / shipped = R` (tokens/s). Until commit
//!    0024c65 the shipped datasets trained from memory: this ratio was shards / memory.
//!
//! Environment: `CORPORA_BENCH_PAIRS`, `CORPORA_BENCH_STEPS`, `CORPORA_BENCH_ROUNDS` (2: the
//! shipped and files runs of step 5 alternate, best of each), `CORPORA_BENCH_DIR`. Needs
//! python3 (the corpus script; the peer's venv comes from `scripts/pyenv.py`) and
//! `/usr/bin/time` for peak RSS; without them it says what it skipped.

use std::path::{Path, PathBuf};
use std::process::Command;

fn env_list(name: &str, default: &str) -> Vec<u64> {
    std::env::var(name)
        .unwrap_or_else(|_| default.into())
        .split(',')
        .filter_map(|s| s.trim().replace('_', "").parse().ok())
        .collect()
}

fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// What a command measured: peak RSS (MB), wall seconds, its stdout and stderr.
struct Measured {
    rss_mb: f64,
    wall: f64,
    stdout: String,
    stderr: String,
}

/// Runs harness with `args` under `/usr/bin/time` in `home` (HARNESS_HOME).
fn harness(home: &Path, args: &[String]) -> Result<Measured, String> {
    let out = Command::new("/usr/bin/time")
        .args(["-f", "TIME %M %e"])
        .arg(env!("CARGO_BIN_EXE_harness"))
        .args(args)
        .env("HARNESS_HOME", home)
        .env("HARNESS_RUNS_DIR", {
            let runs = home.join("runs");
            let _ = std::fs::create_dir_all(&runs);
            runs
        })
        .current_dir(repo())
        .output()
        .map_err(|e| format!("/usr/bin/time could not start: {e}"))?;
    let stderr = String::from_utf8_lossy(&out.stderr).to_string();
    if !out.status.success() {
        let tail: Vec<&str> = stderr.lines().rev().take(15).collect();
        return Err(format!(
            "harness {} failed: {}",
            args.join(" "),
            tail.into_iter().rev().collect::<Vec<_>>().join("\n")
        ));
    }
    let line = stderr
        .lines()
        .rev()
        .find(|l| l.starts_with("TIME "))
        .ok_or("no /usr/bin/time line")?;
    let mut it = line.split_whitespace().skip(1);
    let kb: f64 = it.next().and_then(|x| x.parse().ok()).ok_or("bad RSS")?;
    let wall: f64 = it.next().and_then(|x| x.parse().ok()).ok_or("bad time")?;
    Ok(Measured {
        rss_mb: kb / 1024.0,
        wall,
        stdout: String::from_utf8_lossy(&out.stdout).to_string(),
        stderr,
    })
}

/// `N tokens in S s of training (R tokens/s)` from `harness train`'s summary.
fn tokens_per_second(m: &Measured) -> Option<f64> {
    let text = format!("{}{}", m.stdout, m.stderr);
    let line = text.lines().find(|l| l.contains("tokens/s)"))?;
    let inner = line.rsplit_once('(')?.1;
    inner.split_whitespace().next()?.parse().ok()
}

fn corpus(dir: &Path, pairs: u64) -> Result<PathBuf, String> {
    let out = dir.join(format!("synthetic-{pairs}"));
    if out.join(".complete").is_file() {
        return Ok(out);
    }
    let status = Command::new("python3")
        .arg(repo().join("scripts/make_synthetic_corpus.py"))
        .args(["--pairs", &pairs.to_string()])
        .arg("--out")
        .arg(&out)
        .status()
        .map_err(|e| format!("python3 could not start: {e}"))?;
    if !status.success() {
        return Err(format!("make_synthetic_corpus.py exited with {status}"));
    }
    std::fs::write(out.join(".complete"), b"").map_err(|e| e.to_string())?;
    Ok(out)
}

fn files_of(dir: &Path) -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = std::fs::read_dir(dir)
        .map(|d| d.flatten().map(|e| e.path()).collect())
        .unwrap_or_default();
    v.retain(|p| p.extension().is_some_and(|e| e == "tsv"));
    v.sort();
    v
}

/// The shard manifests under `home`.
fn manifests(home: &Path) -> Vec<serde_json::Value> {
    let shards = home.join("cache/shards");
    let mut out = Vec::new();
    for e in std::fs::read_dir(shards).into_iter().flatten().flatten() {
        if let Ok(t) = std::fs::read_to_string(e.path().join("manifest.json")) {
            if let Ok(v) = serde_json::from_str(&t) {
                out.push(v);
            }
        }
    }
    out
}

fn peer(tokenizer: &Path, files: &[PathBuf], threads: usize) -> Result<f64, String> {
    let out = Command::new("python3")
        .arg(repo().join("scripts/bench_tokenize_peer.py"))
        .arg("--tokenizer")
        .arg(tokenizer)
        .args(["--threads", &threads.to_string()])
        .arg("--files")
        .args(files)
        .output()
        .map_err(|e| format!("python3 could not start: {e}"))?;
    let stdout = String::from_utf8_lossy(&out.stdout);
    if !out.status.success() {
        return Err(format!(
            "bench_tokenize_peer.py failed: {}",
            String::from_utf8_lossy(&out.stderr)
        ));
    }
    let line = stdout
        .lines()
        .find(|l| l.starts_with("tokenizers:"))
        .ok_or("no `tokenizers:` line")?;
    println!("  {line}");
    line.split(": ")
        .nth(2)
        .and_then(|r| r.split_whitespace().next())
        .and_then(|r| r.parse().ok())
        .ok_or_else(|| format!("cannot read the rate from `{line}`"))
}

fn main() {
    let threads = rayon::current_num_threads();
    let isa = if std::arch::is_x86_feature_detected!("avx512f") {
        "AVX-512"
    } else {
        "AVX2"
    };
    println!("corpora bench: {threads} threads, {isa}");
    let dir = std::env::var("CORPORA_BENCH_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|_| repo().join("target/corpora-bench"));
    let steps = env_list("CORPORA_BENCH_STEPS", "200")
        .first()
        .copied()
        .unwrap_or(200);
    std::fs::create_dir_all(&dir).expect("the bench folder");
    for pairs in env_list("CORPORA_BENCH_PAIRS", "1000000") {
        println!("\n{pairs} pairs");
        let corpus = match corpus(&dir, pairs) {
            Ok(c) => c,
            Err(e) => {
                println!("  skipped: {e}");
                continue;
            }
        };
        let files = files_of(&corpus);
        let home = dir.join(format!("home-{pairs}"));
        let _ = std::fs::remove_dir_all(&home);
        let glob = format!("data.corpora.pairs.files=[{}/*.tsv]", corpus.display());
        let base = |extra: &[&str]| -> Vec<String> {
            let mut v: Vec<String> = vec![
                "recipes/laser.yaml".into(),
                "--profile".into(),
                "own-corpus".into(),
                "--set".into(),
                glob.clone(),
            ];
            v.extend(extra.iter().map(|s| s.to_string()));
            v
        };
        let prepared = match harness(&home, &{
            let mut a = vec!["corpora".to_string()];
            a.extend(base(&[]));
            a
        }) {
            Ok(m) => m,
            Err(e) => {
                println!("  harness corpora: {e}");
                continue;
            }
        };
        let m = manifests(&home);
        let records: f64 = m
            .iter()
            .filter_map(|v| v["extra"]["records"].as_f64())
            .sum();
        let seconds: f64 = m
            .iter()
            .filter_map(|v| v["extra"]["seconds"].as_f64())
            .sum();
        let rate = 2.0 * records / seconds.max(1e-9);
        println!(
            "  harness corpora: peak RSS {:.0} MB, {:.1} s wall; binarized {records} pairs in {seconds:.1} s: {rate:.0} sentences/s",
            prepared.rss_mb, prepared.wall
        );
        let tokenizer = std::fs::read_dir(home.join("runs"))
            .ok()
            .and_then(|d| d.flatten().next())
            .map(|e| e.path().join("tokenizer.json"));
        match tokenizer
            .ok_or("no run directory".to_string())
            .and_then(|t| peer(&t, &files, threads))
        {
            Ok(p) => println!("  binarize / tokenizers = {:.2}", rate / p),
            Err(e) => println!("  peer skipped: {e}"),
        }
        // The first step from the prepared run directory (tokenizer learned, shards in the
        // cache): what `harness train` does after `harness corpora`.
        let stop = |n: u64| -> Vec<String> {
            let mut a = vec!["train".to_string()];
            a.extend(base(&["--stop-after", &n.to_string()]));
            a
        };
        match harness(&home, &stop(1)) {
            Ok(t) => println!(
                "  first step from the prepared run (shards in the cache): {:.1} s wall, peak RSS {:.0} MB",
                t.wall, t.rss_mb
            ),
            Err(e) => println!("  first step: {e}"),
        }
        match harness(&home, &stop(steps + 1)) {
            Ok(t) => println!(
                "  harness train ({steps} more steps from shards): peak RSS {:.0} MB, {:.1} s wall, {} tokens/s",
                t.rss_mb,
                t.wall,
                tokens_per_second(&t).map_or("?".into(), |r| format!("{r:.0}"))
            ),
            Err(e) => println!("  train: {e}"),
        }
    }
    same_pairs(&dir, steps);
}

/// The LASER default from its shipped datasets, then from the same pairs written to a
/// tab-separated file per corpus (in the order the shipped path holds them, languages
/// per row): the same batches, so the same losses; the tokens/s of both.
fn same_pairs(dir: &Path, steps: u64) {
    let home = dir.join("home-same-pairs");
    let _ = std::fs::remove_dir_all(&home);
    let shipped = home.join("shipped");
    let stop = steps.to_string();
    let args = |extra: &[String], out: &Path| -> Vec<String> {
        let mut a: Vec<String> = ["train", "recipes/laser.yaml", "--stop-after", &stop]
            .iter()
            .map(|s| s.to_string())
            .collect();
        for e in extra {
            a.push("--set".into());
            a.push(e.clone());
        }
        a.push("--out".into());
        a.push(out.display().to_string());
        a
    };
    println!(
        "
LASER default, {steps} steps: shipped datasets, then the same pairs from files"
    );
    let m = match harness(&home, &args(&[], &shipped)) {
        Ok(m) => m,
        Err(e) => {
            println!("  shipped run: {e}");
            return;
        }
    };
    // Each corpus as the shipped path trained on it (`corpora/<name>.jsonl`), as TSV.
    let files = home.join("files");
    std::fs::create_dir_all(&files).expect("a folder");
    let mut sets = Vec::new();
    for name in ["tatoeba_pairs", "news_pairs"] {
        let text = std::fs::read_to_string(shipped.join(format!("corpora/{name}.jsonl")))
            .expect("the shipped run's corpora");
        let mut tsv = String::new();
        for line in text.lines() {
            let v: serde_json::Value = serde_json::from_str(line).expect("a JSON line");
            let f = |k: &str| v[k].as_str().unwrap_or_default().to_string();
            tsv.push_str(&format!(
                "{}\t{}\t{}\t{}\n",
                f("src_lang"),
                f("tgt_lang"),
                f("source"),
                f("target")
            ));
        }
        let path = files.join(format!("{name}.tsv"));
        std::fs::write(&path, tsv).expect("writes");
        // The corpus's `exclude:` and `max_examples` stay the recipe's (the pairs were
        // filtered and capped already: the filter finds nothing more, the cap is their count).
        sets.extend([
            format!("data.corpora.{name}.dataset=null"),
            format!("data.corpora.{name}.pairs=[]"),
            format!("data.corpora.{name}.files=['{}']", path.display()),
            format!("data.corpora.{name}.format=tsv"),
            format!("data.corpora.{name}.fields={{source_lang: '0', target_lang: '1', source: '2', target: '3'}}"),
        ]);
    }
    // Alternating rounds (the first shipped run above is round 1's), best of each side.
    let rounds = env_list("CORPORA_BENCH_ROUNDS", "2")
        .first()
        .copied()
        .unwrap_or(2);
    let summary = |m: &Measured| {
        format!("{}{}", m.stdout, m.stderr)
            .lines()
            .find(|l| l.contains("tokens/s)"))
            .map(str::to_string)
            .unwrap_or_default()
    };
    let (mut best_shipped, mut best_files) = (tokens_per_second(&m), None::<f64>);
    println!("  shipped: {}", summary(&m));
    for round in 0..rounds {
        if round > 0 {
            match harness(&home, &args(&[], &home.join(format!("shipped-{round}")))) {
                Ok(m) => {
                    println!("  shipped: {}", summary(&m));
                    best_shipped = best(best_shipped, tokens_per_second(&m));
                }
                Err(e) => println!("  shipped run: {e}"),
            }
        }
        match harness(
            &home,
            &args(&sets, &home.join(format!("from-files-{round}"))),
        ) {
            Ok(f) => {
                println!("  files:  {}", summary(&f));
                best_files = best(best_files, tokens_per_second(&f));
            }
            Err(e) => println!("  files run: {e}"),
        }
    }
    if let (Some(a), Some(b)) = (best_shipped, best_files) {
        println!(
            "  files / shipped = {:.2} (tokens/s, best of {rounds} each)",
            b / a
        );
    }
}

/// The larger of two optional rates.
fn best(a: Option<f64>, b: Option<f64>) -> Option<f64> {
    match (a, b) {
        (Some(x), Some(y)) => Some(x.max(y)),
        (x, y) => x.or(y),
    }
}
