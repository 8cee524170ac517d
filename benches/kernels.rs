//! Each hand-written matrix-product kernel against the machine's GEMM on the same product:
//! `cargo bench --bench kernels` (and `scripts/avx2.sh cargo bench --bench kernels` for the
//! AVX2 path on an AVX-512 machine).
//!
//! For every shape a system or protocol multiplies through `harness_kernels` (the LSTM's
//! input projection and recurrent step, a classifier's wide and narrow layers, the rows read
//! in place), the same product runs through the kernel and through `harness_kernels::gemm`
//! (matrixmultiply, built for the same instruction set by `scripts/avx2.sh`), on the same
//! rayon pool, alternating, best of the rounds. The ratio is GEMM time / kernel time: above
//! 1.0 the kernel is the faster of the two. The same ratio on both instruction sets is what
//! "tuned to the same share of its machine's peak" means here: each column of the table is
//! measured against that machine's own GEMM.
//!
//! Environment: `KERNELS_BENCH_ROUNDS` (5).

use std::time::Instant;

use harness_kernels::{gemm, gemm_packed, gemm_packed_rows, gemm_w, narrow, PackedB};

mod common;
use common::Rng;

fn values(len: usize, seed: u64) -> Vec<f32> {
    let mut rng = Rng(seed);
    (0..len).map(|_| rng.uniform()).collect()
}

/// Seconds of one call of `f` (a product of `flops`), averaged over enough calls to take
/// about as long as 5 GFLOP.
fn time(flops: f64, mut f: impl FnMut()) -> f64 {
    let calls = ((5e9 / flops) as usize).clamp(3, 100_000);
    let t = Instant::now();
    for _ in 0..calls {
        f();
    }
    t.elapsed().as_secs_f64() / calls as f64
}

/// One line of the table: the product `name` (`m × n × k`), its seconds through our kernel
/// and through the GEMM.
fn print(name: &str, (m, n, k): (usize, usize, usize), ours: f64, peer: f64) {
    let flops = 2.0 * (m * n * k) as f64;
    println!(
        "{:<36} {:>5} {:>5} {:>5} {:>10.1} {:>10.1} {:>7.2}",
        name,
        m,
        n,
        k,
        flops / ours / 1e9,
        flops / peer / 1e9,
        peer / ours
    );
}

fn main() {
    harness_core::memory::keep_freed_memory();
    let rounds = common::env("KERNELS_BENCH_ROUNDS", 5).max(1);
    common::machine();
    println!(
        "{:<36} {:>5} {:>5} {:>5} {:>10} {:>10} {:>7}",
        "kernel (where)", "m", "n", "k", "ours GF/s", "GEMM GF/s", "ratio"
    );

    // `gemm_w`: C += A·op(W), A read in place, W packed a tile at a time.
    for (name, m, n, k, trans_w) in [
        ("gemm_w x·W (LASER LSTM input)", 1000, 768, 128, false),
        ("gemm_w dY·Wᵀ (LASER LSTM input)", 1000, 128, 768, true),
        ("gemm_w x·Wᵀ (XNLI MLP layer 1)", 128, 512, 2048, true),
        ("gemm_w x·Wᵀ (XNLI MLP layer 2)", 128, 384, 512, true),
        ("gemm_w D·W (XNLI MLP layer 2)", 128, 512, 384, false),
        ("gemm_w x·Wᵀ (BERT-small FFN)", 512, 1536, 384, true),
    ] {
        let flops = 2.0 * (m * n * k) as f64;
        let (a, w) = (values(m * k, 1), values(n * k, 2));
        let mut c = vec![0.0f32; m * n];
        let (mut ours, mut peer) = (f64::INFINITY, f64::INFINITY);
        for _ in 0..rounds {
            ours = ours.min(time(flops, || gemm_w(m, n, k, &a, &w, trans_w, &mut c)));
            peer = peer.min(time(flops, || {
                gemm(m, n, k, 1.0, &a, false, &w, trans_w, 1.0, &mut c)
            }));
        }
        print(name, (m, n, k), ours, peer);
    }

    // `gemm_packed`: a few rows against weights packed once (the LSTM's recurrent step:
    // the batch's hidden states times the 4h gate weights, every time step).
    for (name, m, n, k) in [
        ("gemm_packed h·W (LASER LSTM step)", 32, 768, 192),
        ("gemm_packed h·W (LASER paper LSTM)", 32, 2048, 512),
    ] {
        let flops = 2.0 * (m * n * k) as f64;
        let (a, w) = (values(m * k, 3), values(k * n, 4));
        let packed = PackedB::new(k, n, &w, false);
        let mut c = vec![0.0f32; m * n];
        let (mut ours, mut peer) = (f64::INFINITY, f64::INFINITY);
        for _ in 0..rounds {
            ours = ours.min(time(flops, || gemm_packed(m, &a, &packed, &mut c)));
            peer = peer.min(time(flops, || {
                gemm(m, n, k, 1.0, &a, false, &w, false, 1.0, &mut c)
            }));
        }
        print(name, (m, n, k), ours, peer);
    }

    // A classifier's first layer with the batch's rows read in place from the data (the
    // packing of W, or of the rows, counted: the classifier pays it every step); the GEMM
    // gets the rows gathered, untimed.
    {
        let (batch, n_out, n_in) = (64, 50, 512);
        let data_rows = 8000;
        let x = values(data_rows * n_in, 5);
        let w = values(n_out * n_in, 6);
        let rows: Vec<usize> = (0..batch).map(|i| (i * 7919) % data_rows).collect();
        let gathered: Vec<f32> = rows
            .iter()
            .flat_map(|&r| x[r * n_in..(r + 1) * n_in].iter().copied())
            .collect();
        let delta = values(n_out * batch, 7);
        let flops = 2.0 * (batch * n_out * n_in) as f64;
        let mut out = vec![0.0f32; batch * n_out];
        let mut grad = vec![0.0f32; n_out * n_in];
        let (mut fwd, mut fwd_peer, mut dw, mut dw_peer) =
            (f64::INFINITY, f64::INFINITY, f64::INFINITY, f64::INFINITY);
        for _ in 0..rounds {
            fwd = fwd.min(time(flops, || {
                let packed = PackedB::new(n_in, n_out, &w, true);
                gemm_packed_rows(&x, &rows, &packed, &mut out)
            }));
            fwd_peer = fwd_peer.min(time(flops, || {
                gemm(
                    batch, n_out, n_in, 1.0, &gathered, false, &w, true, 1.0, &mut out,
                )
            }));
            dw = dw.min(time(flops, || {
                let packed = PackedB::from_rows(&x, n_in, &rows);
                gemm_packed(n_out, &delta, &packed, &mut grad)
            }));
            dw_peer = dw_peer.min(time(flops, || {
                gemm(
                    n_out, n_in, batch, 1.0, &delta, false, &gathered, false, 0.0, &mut grad,
                )
            }));
        }
        print(
            "packed rows (SentEval MLP layer 1)",
            (batch, n_out, n_in),
            fwd,
            fwd_peer,
        );
        print(
            "packed rows Dᵀ·x (SentEval MLP dW)",
            (n_out, n_in, batch),
            dw,
            dw_peer,
        );
    }

    // `narrow`: layers of 16 outputs or fewer as dot products and `axpy`s (SIB-200's
    // 512 → 10 → 8 → 7 network, batch 12; the XNLI head, 384 → 3, batch 128).
    for (what, m, n, k) in [("SIB-200 layer 1", 12, 10, 512), ("XNLI head", 128, 3, 384)] {
        let (a, w, d) = (values(m * k, 8), values(n * k, 9), values(m * n, 10));
        let flops = 2.0 * (m * n * k) as f64;
        let mut c = vec![0.0f32; m * n];
        let mut g = vec![0.0f32; n * k];
        let mut x = vec![0.0f32; m * k];
        let mut best = [f64::INFINITY; 6];
        for _ in 0..rounds {
            let times = [
                time(flops, || narrow::add_a_wt(m, n, k, &a, &w, &mut c)),
                time(flops, || {
                    gemm(m, n, k, 1.0, &a, false, &w, true, 1.0, &mut c)
                }),
                time(flops, || narrow::dt_a(m, n, k, &d, &a, &mut g)),
                time(flops, || {
                    gemm(n, k, m, 1.0, &d, true, &a, false, 0.0, &mut g)
                }),
                time(flops, || narrow::d_w(m, n, k, &d, &w, &mut x)),
                time(flops, || {
                    gemm(m, k, n, 1.0, &d, false, &w, false, 0.0, &mut x)
                }),
            ];
            for (b, t) in best.iter_mut().zip(times) {
                *b = b.min(t);
            }
        }
        let names = [
            format!("narrow x·Wᵀ ({what})"),
            format!("narrow Dᵀ·A ({what})"),
            format!("narrow D·W ({what})"),
        ];
        let shapes = [(m, n, k), (n, k, m), (m, k, n)];
        for (i, (name, shape)) in names.iter().zip(shapes).enumerate() {
            print(name, shape, best[2 * i], best[2 * i + 1]);
        }
    }
}
