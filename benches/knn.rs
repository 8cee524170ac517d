//! Throughput of the k-NN engine against the machine's own GEMM: `cargo bench --bench knn`.
//!
//! (a) a plain f32 GEMM (4096 × 1024 by 1024 × 4096) with the same crate (matrixmultiply),
//!     single-threaded and split over the rayon threads the engine uses;
//! (b) `top_k` (k = 4, cosine and inner product) of 12k × 12k random unit vectors of dimension 1024, as
//!     effective GFLOP/s = 2·n·m·d / seconds;
//! and the ratio (b)/(a). A ratio near 1 means the top-k selection costs next to nothing.
//!
//! Environment: `KNN_BENCH_N` (default 12000) sets n = m, `KNN_BENCH_ROUNDS` (default 2) the
//! interleaved rounds whose best counts; `KNN_BENCH_SWEEP=1` also times
//! block sizes on an 8k × 8k problem (`KNN_BENCH_BLOCKS="256x2048,1024x1024"` picks them).

use std::time::Instant;

use harness_bench::knn::{top_k, KnnOptions, Metric};
use harness_embed::matrix::Matrix;

mod common;
use common::Rng;

fn unit_vectors(rows: usize, cols: usize, rng: &mut Rng) -> Matrix {
    let data = (0..rows * cols).map(|_| rng.uniform()).collect();
    let mut m = Matrix::from_vec(rows, cols, data);
    m.l2_normalize_rows();
    m
}

/// CPU seconds (user + system, all threads) this process has used, from `/proc/self/stat`
/// (clock ticks of 1/100 s); `NaN` where that file does not exist.
fn cpu_seconds() -> f64 {
    let Ok(stat) = std::fs::read_to_string("/proc/self/stat") else {
        return f64::NAN;
    };
    // Fields after the parenthesised command name; utime and stime are fields 14 and 15.
    let rest = stat.rsplit_once(')').map_or("", |(_, r)| r);
    let f: Vec<f64> = rest
        .split_whitespace()
        .skip(11)
        .take(2)
        .filter_map(|v| v.parse().ok())
        .collect();
    f.iter().sum::<f64>() / 100.0
}

/// Best of `reps` runs: (wall seconds, CPU seconds / threads). On a loaded machine the wall
/// time counts other processes' turns; the CPU time divided by the threads is what the run
/// would take with the cores to itself.
fn best_of(reps: usize, threads: usize, mut f: impl FnMut()) -> (f64, f64) {
    (0..reps)
        .map(|_| {
            let (t, c) = (Instant::now(), cpu_seconds());
            f();
            (
                t.elapsed().as_secs_f64(),
                (cpu_seconds() - c) / threads as f64,
            )
        })
        .fold((f64::INFINITY, f64::INFINITY), |a, b| {
            (a.0.min(b.0), a.1.min(b.1))
        })
}

fn load_average() -> String {
    std::fs::read_to_string("/proc/loadavg").map_or_else(|_| "?".into(), |s| s.trim().into())
}

/// `c = a · b` for row-major `a` (m × k) and `b` (k × n), or `b` given as its n × k transpose,
/// with the rows of `a` split over `threads` rayon tasks.
fn gemm(
    a: &[f32],
    b: &[f32],
    c: &mut [f32],
    (m, k, n): (usize, usize, usize),
    b_t: bool,
    threads: usize,
) {
    let rows_per = m.div_ceil(threads);
    let (rsb, csb) = if b_t {
        (1, k as isize)
    } else {
        (n as isize, 1)
    };
    rayon::scope(|s| {
        for (i, c_part) in c.chunks_mut(rows_per * n).enumerate() {
            let a_part = &a[i * rows_per * k..];
            let rows = c_part.len() / n;
            s.spawn(move |_| {
                // SAFETY: a_part holds rows × k, b holds k × n under (rsb, csb), c_part
                // holds rows × n; no aliasing.
                unsafe {
                    matrixmultiply::sgemm(
                        rows,
                        k,
                        n,
                        1.0,
                        a_part.as_ptr(),
                        k as isize,
                        1,
                        b.as_ptr(),
                        rsb,
                        csb,
                        0.0,
                        c_part.as_mut_ptr(),
                        n as isize,
                        1,
                    )
                }
            });
        }
    });
}

/// GFLOP/s from (wall, CPU-per-thread) seconds: (wall rate, rate with the cores to itself).
fn rates(flops: f64, (wall, cpu): (f64, f64)) -> (f64, f64) {
    (flops / wall / 1e9, flops / cpu / 1e9)
}

fn main() {
    harness_core::memory::keep_freed_memory();
    let threads = rayon::current_num_threads();
    let mut rng = Rng(42);
    println!("load average before: {}", load_average());

    let env = |name: &str, default: usize| {
        std::env::var(name)
            .ok()
            .and_then(|v| v.parse().ok())
            .unwrap_or(default)
    };
    let size = env("KNN_BENCH_N", 12_000);
    let rounds = env("KNN_BENCH_ROUNDS", 2);

    // (a) The machine's GEMM.
    let (m, k, n) = (4096, 1024, 4096);
    let a: Vec<f32> = (0..m * k).map(|_| rng.uniform()).collect();
    let b: Vec<f32> = (0..k * n).map(|_| rng.uniform()).collect();
    let mut c = vec![0.0f32; m * n];
    let gemm_flops = 2.0 * (m * n * k) as f64;
    let mut gemm_time = |b_t: bool, t: usize, reps: usize| {
        best_of(reps, t, || gemm(&a, &b, &mut c, (m, k, n), b_t, t))
    };
    let single = rates(gemm_flops, gemm_time(false, 1, 3));

    // (b) The engine, timed in rounds interleaved with (a) so that both see the same load;
    // the best of the rounds counts.
    let d = 1024;
    let q = unit_vectors(size, d, &mut rng);
    let keys = unit_vectors(size, d, &mut rng);
    let opts = KnnOptions::default();
    let flops = 2.0 * (size * size * d) as f64;
    let mut checksum = 0usize;
    let mut run = |metric: Metric, o: &KnnOptions, q: &Matrix, keys: &Matrix, reps: usize| {
        best_of(reps, threads, || {
            let r = top_k(q, keys, 4, metric, o).expect("top_k");
            checksum = checksum.wrapping_add(r.row(0)[0].index);
        })
    };
    let best = |x: (f64, f64), y: (f64, f64)| (x.0.min(y.0), x.1.min(y.1));
    let inf = (f64::INFINITY, f64::INFINITY);
    let (mut t_gemm, mut t_gemm_t, mut t_cos, mut t_ip) = (inf, inf, inf, inf);
    for _ in 0..rounds {
        t_gemm = best(t_gemm, gemm_time(false, threads, 2));
        t_gemm_t = best(t_gemm_t, gemm_time(true, threads, 2));
        t_cos = best(t_cos, run(Metric::Cosine, &opts, &q, &keys, 1));
        t_ip = best(t_ip, run(Metric::InnerProduct, &opts, &q, &keys, 1));
    }
    let (multi, multi_t) = (rates(gemm_flops, t_gemm), rates(gemm_flops, t_gemm_t));
    let (cos, ip) = (rates(flops, t_cos), rates(flops, t_ip));

    println!("GEMM {m}×{k} · {k}×{n} f32 (matrixmultiply), GFLOP/s wall | per CPU time × threads:");
    println!(
        "  1 thread                  {:7.1} | {:7.1}",
        single.0, single.1
    );
    println!(
        "  {threads} threads                 {:7.1} | {:7.1}",
        multi.0, multi.1
    );
    println!(
        "  {threads} threads, B transposed   {:7.1} | {:7.1}  (the engine's Q·Kᵀ layout)",
        multi_t.0, multi_t.1
    );
    println!(
        "top_k k=4 {size}×{size}×{d}, blocks {}×{}, {threads} threads, best of {rounds}, effective GFLOP/s wall | per CPU time × threads:",
        opts.query_block, opts.key_block
    );
    for (name, t, r) in [("cosine", t_cos, cos), ("inner product", t_ip, ip)] {
        println!(
            "  {name:13} {:6.2} s  {:7.1} | {:7.1}   ratio to GEMM {:.3} | {:.3}",
            t.0,
            r.0,
            r.1,
            r.0 / multi.0,
            r.1 / multi.1
        );
    }

    let scratch = opts.peak_scratch_bytes(200_000, 200_000, 10, threads);
    println!(
        "200k×200k×1024, k=10, {threads} threads: scratch bound {:.1} MiB beyond the 2 × {:.0} MB inputs",
        scratch as f64 / (1 << 20) as f64,
        (200_000 * 1024 * 4) as f64 / 1e6
    );

    if std::env::var("KNN_BENCH_SWEEP").is_ok_and(|v| v == "1") {
        let s = 8192;
        let q = unit_vectors(s, d, &mut rng);
        let keys = unit_vectors(s, d, &mut rng);
        let flops = 2.0 * (s * s * d) as f64;
        let blocks = std::env::var("KNN_BENCH_BLOCKS").unwrap_or_else(|_| {
            "128x1024,256x2048,512x1024,512x2048,1024x1024,1024x2048,2048x1024".into()
        });
        for (qb, kb) in blocks.split(',').filter_map(|p| {
            let (q, k) = p.split_once('x')?;
            Some((q.trim().parse().ok()?, k.trim().parse().ok()?))
        }) {
            let o = KnnOptions {
                query_block: qb,
                key_block: kb,
                threads: None,
            };
            let r = rates(flops, run(Metric::Cosine, &o, &q, &keys, 2));
            println!(
                "  sweep {s}² blocks {qb:4}×{kb:4}: {:6.1} | {:6.1} GFLOP/s",
                r.0, r.1
            );
        }
    }
    println!("load average after: {}", load_average());
    std::hint::black_box(checksum);
}
