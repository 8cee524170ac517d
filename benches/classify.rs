//! Throughput of the benchmark classifiers against the machine's GEMM:
//! `cargo bench --bench classify`.
//!
//! For each classifier the protocols train — LASER's XNLI MLP (2048 → 512 → 384 → 3, batch
//! 128), the SIB-200/MLDoc MLP (512 → 10 → 8 → 7, batch 12), SentEval's logistic regression
//! and its MLP (batch 64, summed loss) — on synthetic data of the protocol's shape:
//!
//! (a) the classifier's training, timed end to end (shuffles, dropout masks, activations,
//!     Adam, the dev evaluations: everything `classify::train` does);
//! (b) the same matrix products, shape for shape and as many, run back to back through the
//!     GEMM alone (`harness_kernels::gemm`, matrixmultiply's kernels on the rayon threads);
//!
//! and the ratio (b)/(a): the fraction of the GEMM's throughput the classifier reaches on its
//! own products. 1.0 would mean the rest of training costs nothing. The peak GEMM throughput
//! of a large square product is printed for context. Rounds alternate (a) and (b); the best
//! of each counts. The synthetic labels come from a random linear teacher, so the dev
//! accuracy printed shows the classifier learns (and lets a change be checked for equal
//! results).
//!
//! Environment: `CLASSIFY_BENCH_ROUNDS` (2), `CLASSIFY_BENCH_EPOCHS` (scales the epochs of
//! every case; default 1 = each case's own small count), `CLASSIFY_BENCH_ONLY` (a case name).

use std::time::Instant;

use harness_bench::classify::{
    train, Activation, MlpSpec, Reduction, Selection, TieBreak, TrainConfig,
};
use harness_embed::matrix::Matrix;
use harness_kernels::gemm;

mod common;
use common::{env, Rng};

/// `rows` random feature vectors and the labels a random linear teacher gives them (with
/// noise, so that the task is learnable but not trivially separable).
fn teacher_data(rows: usize, dim: usize, classes: usize, seed: u64) -> (Matrix, Vec<usize>) {
    let mut teacher_rng = Rng(42);
    let teacher: Vec<f32> = (0..dim * classes).map(|_| teacher_rng.uniform()).collect();
    let mut rng = Rng(seed);
    let data: Vec<f32> = (0..rows * dim).map(|_| rng.uniform()).collect();
    let x = Matrix::from_vec(rows, dim, data);
    let y = (0..rows)
        .map(|r| {
            let row = x.row(r);
            let mut best = (0, f32::MIN);
            for c in 0..classes {
                let score: f32 = row
                    .iter()
                    .zip(&teacher[c * dim..(c + 1) * dim])
                    .map(|(a, b)| a * b)
                    .sum::<f32>()
                    + 2.0 * rng.uniform();
                if score > best.1 {
                    best = (c, score);
                }
            }
            best.0
        })
        .collect();
    (x, y)
}

struct Case {
    name: &'static str,
    spec: MlpSpec,
    cfg: TrainConfig,
    dim: usize,
    classes: usize,
    train_rows: usize,
    dev_rows: usize,
}

/// One GEMM call: `m × n` output, inner dimension `k`, and the operands' transposition.
#[derive(Clone, Copy)]
struct Product {
    m: usize,
    n: usize,
    k: usize,
    trans_a: bool,
    trans_b: bool,
}

impl Product {
    fn flops(&self) -> f64 {
        2.0 * (self.m * self.n * self.k) as f64
    }
}

/// Every matrix product `classify::train` does for `case`: per batch, each layer's forward
/// (`batch × out × in`), each layer's weight gradient (`out × in`, inner `batch`) and each
/// hidden layer's input gradient; per evaluation, each layer's forward over the dev rows in
/// chunks of 2,048.
fn products(case: &Case) -> Vec<(Product, usize)> {
    let mut sizes = vec![case.dim];
    sizes.extend(&case.spec.hidden);
    sizes.push(case.classes);
    let b = case.cfg.batch_size;
    let full = case.train_rows / b;
    let last = case.train_rows % b;
    let epochs = case.cfg.epochs;
    let evals = epochs.div_ceil(case.cfg.eval_every);
    let mut out = Vec::new();
    for (rows, count) in [(b, full * epochs), (last, epochs)] {
        if rows == 0 || count == 0 {
            continue;
        }
        for (l, pair) in sizes.windows(2).enumerate() {
            let (n_in, n_out) = (pair[0], pair[1]);
            out.push((
                Product {
                    m: rows,
                    n: n_out,
                    k: n_in,
                    trans_a: false,
                    trans_b: true,
                },
                count,
            ));
            out.push((
                Product {
                    m: n_out,
                    n: n_in,
                    k: rows,
                    trans_a: true,
                    trans_b: false,
                },
                count,
            ));
            if l > 0 {
                out.push((
                    Product {
                        m: rows,
                        n: n_in,
                        k: n_out,
                        trans_a: false,
                        trans_b: false,
                    },
                    count,
                ));
            }
        }
    }
    let mut start = 0;
    while start < case.dev_rows {
        let rows = 2048.min(case.dev_rows - start);
        for pair in sizes.windows(2) {
            out.push((
                Product {
                    m: rows,
                    n: pair[1],
                    k: pair[0],
                    trans_a: false,
                    trans_b: true,
                },
                evals,
            ));
        }
        start += rows;
    }
    out
}

/// Runs the products through the GEMM alone; seconds.
fn replay(products: &[(Product, usize)]) -> f64 {
    let size = |p: &Product| (p.m * p.k, p.k * p.n, p.m * p.n);
    let mut rng = Rng(7);
    let mut bufs: Vec<(Vec<f32>, Vec<f32>, Vec<f32>)> = products
        .iter()
        .map(|(p, _)| {
            let (a, b, c) = size(p);
            (
                (0..a).map(|_| rng.uniform()).collect(),
                (0..b).map(|_| rng.uniform()).collect(),
                vec![0.0; c],
            )
        })
        .collect();
    // Interleave the calls as training does (one of each product per step), not all calls
    // of one shape in a row, so that caches see the same working set.
    let steps = products.iter().map(|(_, c)| *c).max().unwrap_or(0);
    let start = Instant::now();
    for s in 0..steps {
        for ((p, count), (a, b, c)) in products.iter().zip(bufs.iter_mut()) {
            if s < *count {
                gemm(p.m, p.n, p.k, 1.0, a, p.trans_a, b, p.trans_b, 0.0, c);
            }
        }
    }
    start.elapsed().as_secs_f64()
}

fn cases(scale: usize) -> Vec<Case> {
    let laser_selection = Selection::BestOnDev {
        ties: TieBreak::Last,
        tenacity: None,
    };
    let senteval_cfg = |epochs: usize| TrainConfig {
        batch_size: 64,
        epochs,
        eval_every: 4,
        reduction: Reduction::Sum,
        weight_decay: 1e-4,
        selection: Selection::BestOnDev {
            ties: TieBreak::First,
            tenacity: None,
        },
        seed: 1111,
        ..TrainConfig::default()
    };
    vec![
        Case {
            // LASER source/nli.py on [u, v, |u−v|, u·v] of 512-d sentences (XNLI protocol).
            name: "xnli-mlp",
            spec: MlpSpec::laser(&[512, 384], Activation::Tanh, 0.3),
            cfg: TrainConfig {
                batch_size: 128,
                epochs: 2 * scale,
                eval_every: 1,
                selection: laser_selection,
                seed: 1,
                ..TrainConfig::default()
            },
            dim: 2048,
            classes: 3,
            train_rows: 24_000,
            dev_rows: 2_490,
        },
        Case {
            // LASER source/mldoc.py settings (SIB-200 protocol): 701 training sentences.
            name: "sib200-mlp",
            spec: MlpSpec::laser(&[10, 8], Activation::Tanh, 0.2),
            cfg: TrainConfig {
                batch_size: 12,
                epochs: 40 * scale,
                eval_every: 1,
                selection: laser_selection,
                seed: 1,
                ..TrainConfig::default()
            },
            dim: 512,
            classes: 7,
            train_rows: 701,
            dev_rows: 99,
        },
        Case {
            // SentEval LogReg (e.g. SUBJ/MPQA-sized, 512-d sentences).
            name: "senteval-logreg",
            spec: MlpSpec::senteval(0, 0.0),
            cfg: senteval_cfg(8 * scale),
            dim: 512,
            classes: 2,
            train_rows: 8_000,
            dev_rows: 2_000,
        },
        Case {
            // SentEval MLP (nhid 50, dropout 0.1), e.g. SST-5-sized.
            name: "senteval-mlp",
            spec: MlpSpec::senteval(50, 0.1),
            cfg: senteval_cfg(8 * scale),
            dim: 512,
            classes: 5,
            train_rows: 8_000,
            dev_rows: 2_000,
        },
    ]
}

fn main() {
    harness_core::memory::keep_freed_memory();
    let rounds = env("CLASSIFY_BENCH_ROUNDS", 2).max(1);
    let scale = env("CLASSIFY_BENCH_EPOCHS", 1).max(1);
    let only = std::env::var("CLASSIFY_BENCH_ONLY").ok();
    let peak = common::machine();
    println!(
        "{:<16} {:>7} {:>10} {:>10} {:>10} {:>9} {:>8} {:>8}",
        "case", "epochs", "train s", "GEMM s", "GFLOP/s", "of peak", "ratio", "dev acc"
    );

    for case in cases(scale) {
        if only.as_deref().is_some_and(|o| o != case.name) {
            continue;
        }
        let (x, y) = teacher_data(case.train_rows, case.dim, case.classes, 1);
        let (dx, dy) = teacher_data(case.dev_rows, case.dim, case.classes, 2);
        let products = products(&case);
        let flops: f64 = products.iter().map(|(p, c)| p.flops() * *c as f64).sum();
        let (mut best_train, mut best_gemm) = (f64::INFINITY, f64::INFINITY);
        let mut acc = 0.0;
        let mut epochs = 0;
        for _ in 0..rounds {
            let t = Instant::now();
            let (_, report) = train(
                &case.spec,
                &case.cfg,
                &x,
                &y,
                case.classes,
                Some((&dx, &dy)),
            )
            .expect("synthetic data is valid");
            best_train = best_train.min(t.elapsed().as_secs_f64());
            acc = report.best_dev_accuracy.unwrap_or(f64::NAN);
            epochs = report.epochs_run;
            best_gemm = best_gemm.min(replay(&products));
        }
        assert_eq!(epochs, case.cfg.epochs, "{}: stopped early", case.name);
        let rate = flops / best_train / 1e9;
        println!(
            "{:<16} {:>7} {:>10.3} {:>10.3} {:>10.1} {:>9.2} {:>8.2} {:>8.4}",
            case.name,
            epochs,
            best_train,
            best_gemm,
            rate,
            rate / peak,
            best_gemm / best_train,
            acc
        );
    }
}
