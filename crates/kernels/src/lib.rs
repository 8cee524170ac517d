//! harness-kernels: the CPU numeric kernels the layers above share, written once: the f32
//! matrix product ([`gemm`], matrixmultiply's kernels split over rayon), vectorisable
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
pub mod math;
pub mod narrow;
pub mod packed;

#[cfg(target_arch = "x86_64")]
pub use dot::dot_avx2;
pub use dot::{axpy, dot};
pub use math::{adam, exp, gelu, gelu_backward, sigmoid, tanh, AdamStep};
pub use packed::{gemm_packed, gemm_packed_rows, PackedB};

/// Products smaller than this many multiply-adds run on one thread.
const PAR_MIN_FLOPS: usize = 1 << 21;
/// Products are split into blocks of this many rows (or columns) of C. Fixed, so that the
/// result does not depend on the number of threads.
const PAR_BLOCK: usize = 256;

#[derive(Clone, Copy)]
struct SendPtr(*mut f32);
// SAFETY: each parallel task writes a disjoint block of C through this pointer.
unsafe impl Send for SendPtr {}
unsafe impl Sync for SendPtr {}

/// `C (m × n) = alpha · op(A) · op(B) + beta · C`, all row-major. `op(A)` is `m × k`: `A` is
/// stored `m × k`, or `k × m` when `trans_a`. `op(B)` is `k × n`: `B` is stored `k × n`, or
/// `n × k` when `trans_b`. Large products are split into fixed blocks of rows or columns run
/// in parallel (the result does not depend on the number of threads).
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
    assert_eq!(a.len(), m * k, "gemm: A has the wrong size");
    assert_eq!(b.len(), k * n, "gemm: B has the wrong size");
    assert_eq!(c.len(), m * n, "gemm: C has the wrong size");
    if m == 0 || n == 0 {
        return;
    }
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
    // SAFETY (all calls below): the strides describe in-bounds views of `a`, `b` and `c`, whose
    // sizes were checked above; parallel blocks write disjoint rows or columns of `c`.
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
    if m * n * k < PAR_MIN_FLOPS || (m <= PAR_BLOCK && n <= PAR_BLOCK) {
        run(0, m, 0, n);
    } else if m >= n {
        (0..m.div_ceil(PAR_BLOCK)).into_par_iter().for_each(|i| {
            let r0 = i * PAR_BLOCK;
            run(r0, PAR_BLOCK.min(m - r0), 0, n);
        });
    } else {
        (0..n.div_ceil(PAR_BLOCK)).into_par_iter().for_each(|j| {
            let c0 = j * PAR_BLOCK;
            run(0, m, c0, PAR_BLOCK.min(n - c0));
        });
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
}
