//! harness-kernels: the CPU numeric kernels the layers above share, written once: the f32
//! matrix product ([`gemm`], matrixmultiply's kernels split over rayon), the product of a
//! batch of rows with a layer's weights ([`gemm_w`]: only the weights packed, a tile at a
//! time, the rows read in place), vectorisable
//! elementwise functions ([`exp`], [`sigmoid`], [`tanh`], [`gelu`] over slices, Adam's
//! update [`adam`]) and the classifiers' deterministic [`dot`] and [`axpy`], and the products
//! of layers with few outputs ([`narrow`]). Uses no other harness crate.
//!
//! Why by hand: matrixmultiply provides the GEMM micro-kernels but no threading we control
//! (its own `threading` feature splits differently per thread count, which would make results
//! depend on the machine), and no crate offers an exp/sigmoid/tanh/GELU over slices that compiles
//! to AVX2/FMA code chosen at run time without a C library.

use rayon::prelude::*;

pub mod dot;
pub mod isa;
pub mod math;
pub mod narrow;
pub mod packed;

#[cfg(target_arch = "x86_64")]
pub use dot::dot_avx2;
pub use dot::{axpy, dot};
pub use math::{adam, exp, gelu, gelu_backward, sigmoid, tanh, AdamStep};
pub use packed::{gemm_packed, gemm_packed_rows, gemm_w, PackedB};

/// Floating-point operations of the matrix products run so far (2·m·n·k each; all threads).
static PRODUCT_FLOPS: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);

/// Adds a product's `2·m·n·k` to [`product_flops`]'s count (one relaxed add per product).
pub(crate) fn count_product(m: usize, n: usize, k: usize) {
    let flops = 2 * (m as u64) * (n as u64) * (k as u64);
    PRODUCT_FLOPS.fetch_add(flops, std::sync::atomic::Ordering::Relaxed);
}

/// Floating-point operations in the matrix products this process has run through these
/// kernels ([`gemm`], [`gemm_w`], [`gemm_packed`], [`gemm_packed_rows`], [`narrow`]): the
/// benches divide its growth by the wall time and by the GEMM's peak to say what share of
/// the machine a workload's products get.
pub fn product_flops() -> u64 {
    PRODUCT_FLOPS.load(std::sync::atomic::Ordering::Relaxed)
}

/// Products smaller than this many multiply-adds run on one thread.
const PAR_MIN_FLOPS: usize = 1 << 21;
/// A parallel block is at most this many rows (or columns) of C, so that a large product
/// gives each thread several blocks to balance.
const PAR_BLOCK: usize = 256;
/// Block edges are multiples of this: matrixmultiply's widest micro-tile (16 × 16 with
/// AVX-512), so that a split adds no partial tiles.
const PAR_ALIGN: usize = 16;

#[derive(Clone, Copy)]
struct SendPtr(*mut f32);
// SAFETY: each parallel task writes a disjoint block of C through this pointer, and the
// `&mut` borrow of C it came from outlives the tasks (they are joined before it ends).
unsafe impl Send for SendPtr {}
// SAFETY: as for `Send`: the tasks sharing the pointer write disjoint blocks and read none
// of each other's.
unsafe impl Sync for SendPtr {}

/// `C (m × n) = alpha · op(A) · op(B) + beta · C`, all row-major. `op(A)` is `m × k`: `A` is
/// stored `m × k`, or `k × m` when `trans_a`. `op(B)` is `k × n`: `B` is stored `k × n`, or
/// `n × k` when `trans_b`. Large products are split into blocks of rows or columns run in
/// parallel, as many blocks as balance the threads ([`par_blocks`]). Every element of C is
/// the same sum in the same order whatever the split (matrixmultiply never splits `k`
/// across blocks), so the bits do not depend on the number of threads (a test checks).
#[allow(clippy::too_many_arguments)]
pub fn gemm(
    m: usize,
    n: usize,
    k: usize,
    alpha: f32,
    a: &[f32],
    trans_a: bool,
    b: &[f32],
    trans_b: bool,
    beta: f32,
    c: &mut [f32],
) {
    let split = if m * n * k < PAR_MIN_FLOPS {
        1
    } else {
        par_blocks(m.max(n), rayon::current_num_threads())
    };
    gemm_split(m, n, k, alpha, a, trans_a, b, trans_b, beta, c, split)
}

/// How many blocks to cut a dimension of `dim` into for `threads` threads: a multiple of
/// `threads` (a 384-wide product cut into 256 + 128 leaves one of two threads idle a third
/// of the time), each block at most about [`PAR_BLOCK`] and at least [`PAR_ALIGN`].
fn par_blocks(dim: usize, threads: usize) -> usize {
    let threads = threads.max(1);
    let per_thread = dim.div_ceil(threads * PAR_BLOCK);
    (threads * per_thread).min(dim / PAR_ALIGN).max(1)
}

/// [`gemm`] with the larger of C's two dimensions cut into `blocks` blocks of equal size
/// (rounded up to [`PAR_ALIGN`]), run in parallel.
#[allow(clippy::too_many_arguments)]
fn gemm_split(
    m: usize,
    n: usize,
    k: usize,
    alpha: f32,
    a: &[f32],
    trans_a: bool,
    b: &[f32],
    trans_b: bool,
    beta: f32,
    c: &mut [f32],
    blocks: usize,
) {
    assert_eq!(a.len(), m * k, "gemm: A has the wrong size");
    assert_eq!(b.len(), k * n, "gemm: B has the wrong size");
    assert_eq!(c.len(), m * n, "gemm: C has the wrong size");
    if m == 0 || n == 0 {
        return;
    }
    count_product(m, n, k);
    let (rsa, csa) = if trans_a {
        (1, m as isize)
    } else {
        (k as isize, 1)
    };
    let (rsb, csb) = if trans_b {
        (1, k as isize)
    } else {
        (n as isize, 1)
    };
    let (rsc, csc) = (n as isize, 1isize);
    let pc = SendPtr(c.as_mut_ptr());
    // SAFETY: for every call below, the strides describe in-bounds views of `a`, `b` and `c`,
    // whose sizes were checked above (rows r0..r0 + rows and columns c0..c0 + cols stay inside
    // m × n); parallel blocks write disjoint rows or columns of `c`, and nothing else reads
    // or writes `c` until they are joined.
    let run = move |r0: usize, rows: usize, c0: usize, cols: usize| unsafe {
        let pc = pc;
        matrixmultiply::sgemm(
            rows,
            k,
            cols,
            alpha,
            a.as_ptr().offset(r0 as isize * rsa),
            rsa,
            csa,
            b.as_ptr().offset(c0 as isize * csb),
            rsb,
            csb,
            beta,
            pc.0.offset(r0 as isize * rsc + c0 as isize * csc),
            rsc,
            csc,
        );
    };
    if blocks <= 1 {
        run(0, m, 0, n);
        return;
    }
    let dim = m.max(n);
    let size = dim.div_ceil(blocks).next_multiple_of(PAR_ALIGN);
    let starts = (0..dim.div_ceil(size)).into_par_iter().map(|i| i * size);
    if m >= n {
        starts.for_each(|r0| run(r0, size.min(m - r0), 0, n));
    } else {
        starts.for_each(|c0| run(0, m, c0, size.min(n - c0)));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn naive(m: usize, n: usize, k: usize, a: &[f32], ta: bool, b: &[f32], tb: bool) -> Vec<f32> {
        let mut c = vec![0.0f32; m * n];
        for i in 0..m {
            for j in 0..n {
                let mut s = 0.0f64;
                for p in 0..k {
                    let av = if ta { a[p * m + i] } else { a[i * k + p] };
                    let bv = if tb { b[j * k + p] } else { b[p * n + j] };
                    s += av as f64 * bv as f64;
                }
                c[i * n + j] = s as f32;
            }
        }
        c
    }

    #[test]
    fn gemm_matches_naive_product_for_every_transpose_and_the_parallel_path() {
        for &(m, n, k) in &[(3, 4, 5), (130, 70, 300), (300, 600, 40), (600, 100, 50)] {
            let a: Vec<f32> = (0..m * k)
                .map(|i| ((i * 37 % 101) as f32 - 50.0) / 50.0)
                .collect();
            let b: Vec<f32> = (0..k * n)
                .map(|i| ((i * 53 % 97) as f32 - 48.0) / 48.0)
                .collect();
            for &(ta, tb) in &[(false, false), (true, false), (false, true), (true, true)] {
                let mut c = vec![1.0f32; m * n];
                gemm(m, n, k, 1.0, &a, ta, &b, tb, 0.0, &mut c);
                let want = naive(m, n, k, &a, ta, &b, tb);
                for (x, y) in c.iter().zip(&want) {
                    assert!((x - y).abs() < 1e-3 * (1.0 + y.abs()), "{x} vs {y}");
                }
            }
        }
    }

    /// The bits of C do not depend on how the product is split, so neither on the number of
    /// threads: every split from one block to many, for each transpose, with β = 0 and β = 1.
    #[test]
    fn every_split_gives_the_same_bits() {
        for &(m, n, k) in &[
            (320, 384, 300),
            (384, 1152, 40),
            (100, 37, 129),
            (51, 400, 17),
        ] {
            let a: Vec<f32> = (0..m * k)
                .map(|i| ((i * 37 % 101) as f32 - 50.0) / 37.0)
                .collect();
            let b: Vec<f32> = (0..k * n)
                .map(|i| ((i * 53 % 97) as f32 - 48.0) / 41.0)
                .collect();
            let c0: Vec<f32> = (0..m * n).map(|i| (i % 13) as f32 / 7.0).collect();
            for &(ta, tb) in &[(false, false), (true, false), (false, true), (true, true)] {
                for beta in [0.0, 1.0] {
                    let mut whole = c0.clone();
                    gemm_split(m, n, k, 1.0, &a, ta, &b, tb, beta, &mut whole, 1);
                    for blocks in [2, 3, 4, 6, 7, 24] {
                        let mut split = c0.clone();
                        gemm_split(m, n, k, 1.0, &a, ta, &b, tb, beta, &mut split, blocks);
                        assert!(
                            whole
                                .iter()
                                .zip(&split)
                                .all(|(x, y)| x.to_bits() == y.to_bits()),
                            "{m}×{n}×{k} (ta {ta}, tb {tb}, β {beta}) in {blocks} blocks"
                        );
                    }
                }
            }
        }
    }

    #[test]
    fn blocks_are_a_multiple_of_the_threads_and_not_too_small() {
        assert_eq!(par_blocks(384, 2), 2);
        assert_eq!(par_blocks(1152, 2), 6);
        assert_eq!(par_blocks(1536, 2), 6);
        assert_eq!(par_blocks(320, 1), 2);
        assert_eq!(par_blocks(40, 8), 2);
        assert_eq!(par_blocks(10, 8), 1);
    }
}
