//! The three products of a layer with few outputs (a classifier's last layers: SIB-200's
//! 512 → 10 → 8 → 7 network, a 3-way NLI head) as dot products and `axpy`s instead of GEMM
//! calls. With `n` of 16 or fewer outputs, matrixmultiply spends most of such a product
//! packing its operands into panels (measured: 23 % of SIB-200's classifier, against 31 % in
//! the micro-kernel); read in place, each output is one [`dot`] of two contiguous rows.
//!
//! Why by hand: no crate offers small-`n` products without packing. The results are those
//! of a GEMM up to the order of the additions in each sum ([`dot`]'s fixed lanes, then rows
//! in order for the `axpy` sums), the same on every machine and thread count; on x86-64 with
//! AVX2 the same code is compiled for 256-bit vectors, bit-identical to the baseline build.

use crate::dot::{axpy, dot};

/// `C (m × n) += A (m × k) · Wᵀ` with `W` stored `n × k`, all row-major: a linear layer's
/// forward pass (`C` holding the bias).
pub fn add_a_wt(m: usize, n: usize, k: usize, a: &[f32], w: &[f32], c: &mut [f32]) {
    check(m, n, k, a.len(), w.len(), c.len(), "add_a_wt");
    crate::count_product(m, n, k);
    #[cfg(target_arch = "x86_64")]
    if crate::isa::isa() >= crate::isa::Isa::Avx512 {
        // SAFETY: the CPU supports AVX-512F and VL, and so AVX2 (`isa` checks them).
        return unsafe { add_a_wt_avx512(n, k, a, w, c) };
    }
    #[cfg(target_arch = "x86_64")]
    if crate::isa::isa() >= crate::isa::Isa::Avx2 {
        // SAFETY: the CPU supports AVX2 (`isa` checks it).
        return unsafe { add_a_wt_avx2(n, k, a, w, c) };
    }
    add_a_wt_body(n, k, a, w, c, dot)
}

/// [`add_a_wt_avx2`] two input rows at a time: each load of a W row serves both rows, which
/// halves the loads per multiply (the loads, not the arithmetic, bound these products). The
/// sixteen 256-bit accumulators need AVX-512VL's 32 registers; the arithmetic is AVX2's, the
/// same for each output as in `dot_avx2`: the same bits.
///
/// # Safety
/// The CPU must support AVX2, AVX-512F and AVX-512VL. Memory needs nothing more: every raw
/// load reads inside a `k`-long row sliced from `a` or `w` (`i + 32 <= k`).
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,avx512f,avx512vl")]
unsafe fn add_a_wt_avx512(n: usize, k: usize, a: &[f32], w: &[f32], c: &mut [f32]) {
    use crate::dot::{dot_avx2, dot_finish_avx2, LANES};
    use std::arch::x86_64::{_mm256_add_ps, _mm256_loadu_ps, _mm256_mul_ps, _mm256_setzero_ps};
    if k == 0 || n == 0 {
        return;
    }
    let full = k / LANES * LANES;
    let pairs = a.len() / (2 * k);
    let (a_pairs, rest_a) = a.split_at(pairs * 2 * k);
    let (c_pairs, rest_c) = c.split_at_mut(pairs * 2 * n);
    for (rows, outs) in a_pairs
        .chunks_exact(2 * k)
        .zip(c_pairs.chunks_exact_mut(2 * n))
    {
        let (row0, row1) = rows.split_at(k);
        let (out0, out1) = outs.split_at_mut(n);
        let (pr0, pr1) = (row0.as_ptr(), row1.as_ptr());
        let mut o = 0;
        while o + 2 <= n {
            let (w0, w1) = (&w[o * k..(o + 1) * k], &w[(o + 1) * k..(o + 2) * k]);
            let (p0, p1) = (w0.as_ptr(), w1.as_ptr());
            // acc[quarter of the 32-float chunk][row][output].
            let mut acc = [[[_mm256_setzero_ps(); 2]; 2]; 4];
            let mut i = 0;
            while i < full {
                for (r, q) in acc.iter_mut().enumerate() {
                    // SAFETY: i + 32 <= full <= k, the length of both rows and both W rows.
                    let x0 = _mm256_loadu_ps(pr0.add(i + 8 * r));
                    let x1 = _mm256_loadu_ps(pr1.add(i + 8 * r));
                    let v0 = _mm256_loadu_ps(p0.add(i + 8 * r));
                    let v1 = _mm256_loadu_ps(p1.add(i + 8 * r));
                    q[0][0] = _mm256_add_ps(q[0][0], _mm256_mul_ps(x0, v0));
                    q[0][1] = _mm256_add_ps(q[0][1], _mm256_mul_ps(x0, v1));
                    q[1][0] = _mm256_add_ps(q[1][0], _mm256_mul_ps(x1, v0));
                    q[1][1] = _mm256_add_ps(q[1][1], _mm256_mul_ps(x1, v1));
                }
                i += LANES;
            }
            let lanes = |row: usize, out: usize| acc.map(|q| q[row][out]);
            out0[o] += dot_finish_avx2(lanes(0, 0), &row0[full..], &w0[full..]);
            out0[o + 1] += dot_finish_avx2(lanes(0, 1), &row0[full..], &w1[full..]);
            out1[o] += dot_finish_avx2(lanes(1, 0), &row1[full..], &w0[full..]);
            out1[o + 1] += dot_finish_avx2(lanes(1, 1), &row1[full..], &w1[full..]);
            o += 2;
        }
        if o < n {
            let wo = &w[o * k..(o + 1) * k];
            out0[o] += dot_avx2(row0, wo);
            out1[o] += dot_avx2(row1, wo);
        }
    }
    if !rest_a.is_empty() {
        add_a_wt_avx2(n, k, rest_a, w, rest_c);
    }
}

/// [`add_a_wt_body`] with [`crate::dot::dot_avx2`]'s lanes, two outputs at a time: both dot
/// products read each chunk of the input row once (the loads, not the arithmetic, bound a
/// lone dot). Each output's lanes, reduction and remainder are `dot_avx2`'s: the same bits.
///
/// # Safety
/// The CPU must support AVX2. Memory needs nothing more: every raw load reads inside a
/// `k`-long row sliced from `a` or `w` (`i + 32 <= k`).
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
unsafe fn add_a_wt_avx2(n: usize, k: usize, a: &[f32], w: &[f32], c: &mut [f32]) {
    use crate::dot::{dot_avx2, dot_finish_avx2, LANES};
    use std::arch::x86_64::{_mm256_add_ps, _mm256_loadu_ps, _mm256_mul_ps, _mm256_setzero_ps};
    if k == 0 || n == 0 {
        return;
    }
    let full = k / LANES * LANES;
    for (row, out) in a.chunks_exact(k).zip(c.chunks_exact_mut(n)) {
        let pr = row.as_ptr();
        let mut o = 0;
        while o + 2 <= n {
            let (w0, w1) = (&w[o * k..(o + 1) * k], &w[(o + 1) * k..(o + 2) * k]);
            let (p0, p1) = (w0.as_ptr(), w1.as_ptr());
            let mut acc0 = [_mm256_setzero_ps(); 4];
            let mut acc1 = [_mm256_setzero_ps(); 4];
            let mut i = 0;
            while i < full {
                for r in 0..4 {
                    // SAFETY: i + 32 <= full <= k, the length of the row and of both W rows.
                    let x = _mm256_loadu_ps(pr.add(i + 8 * r));
                    acc0[r] = _mm256_add_ps(
                        acc0[r],
                        _mm256_mul_ps(x, _mm256_loadu_ps(p0.add(i + 8 * r))),
                    );
                    acc1[r] = _mm256_add_ps(
                        acc1[r],
                        _mm256_mul_ps(x, _mm256_loadu_ps(p1.add(i + 8 * r))),
                    );
                }
                i += LANES;
            }
            out[o] += dot_finish_avx2(acc0, &row[full..], &w0[full..]);
            out[o + 1] += dot_finish_avx2(acc1, &row[full..], &w1[full..]);
            o += 2;
        }
        if o < n {
            out[o] += dot_avx2(row, &w[o * k..(o + 1) * k]);
        }
    }
}

#[inline(always)]
fn add_a_wt_body(
    n: usize,
    k: usize,
    a: &[f32],
    w: &[f32],
    c: &mut [f32],
    dot: impl Fn(&[f32], &[f32]) -> f32,
) {
    if k == 0 || n == 0 {
        return;
    }
    for (row, out) in a.chunks_exact(k).zip(c.chunks_exact_mut(n)) {
        for (o, wo) in out.iter_mut().zip(w.chunks_exact(k)) {
            *o += dot(row, wo);
        }
    }
}

/// `G (n × k) = Dᵀ · A` with `D` stored `m × n` and `A` `m × k`: a linear layer's weight
/// gradient (`G` overwritten), summed over the rows in order.
pub fn dt_a(m: usize, n: usize, k: usize, d: &[f32], a: &[f32], g: &mut [f32]) {
    check(m, n, k, a.len(), g.len(), d.len(), "dt_a");
    crate::count_product(m, n, k);
    #[cfg(target_arch = "x86_64")]
    if crate::isa::isa() >= crate::isa::Isa::Avx512 {
        // SAFETY: the CPU supports AVX-512F (`isa` checks it).
        return unsafe { dt_a_avx512(n, k, d, a, g) };
    }
    #[cfg(target_arch = "x86_64")]
    if crate::isa::isa() >= crate::isa::Isa::Avx2 {
        // SAFETY: the CPU supports AVX2 (`isa` checks it).
        return unsafe { dt_a_avx2(n, k, d, a, g) };
    }
    dt_a_body(n, k, d, a, g)
}

/// [`dt_a_body`] built for AVX-512: every element is its own chain of multiplies and adds
/// (never fused), so the vector width changes the speed, not the bits.
///
/// # Safety
/// The CPU must support AVX2 and AVX-512F (the body is safe code).
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,avx512f")]
unsafe fn dt_a_avx512(n: usize, k: usize, d: &[f32], a: &[f32], g: &mut [f32]) {
    dt_a_body(n, k, d, a, g)
}

/// [`dt_a_body`] built for AVX2 (the same bits, as for [`dt_a_avx512`]).
///
/// # Safety
/// The CPU must support AVX2 (the body is safe code).
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
unsafe fn dt_a_avx2(n: usize, k: usize, d: &[f32], a: &[f32], g: &mut [f32]) {
    dt_a_body(n, k, d, a, g)
}

#[inline(always)]
fn dt_a_body(n: usize, k: usize, d: &[f32], a: &[f32], g: &mut [f32]) {
    if k == 0 || n == 0 {
        g.fill(0.0);
        return;
    }
    // Each element is `Σ_r d[r][o]·a[r][j]` from 0, rows in order (as `axpy` row by row would
    // give), accumulated in registers over a block of columns instead of in `g`.
    // Two outputs at a time share each load of `a`'s rows.
    let mut column = Vec::with_capacity(d.len() / n);
    let mut column2 = Vec::with_capacity(d.len() / n);
    let mut pairs = g.chunks_exact_mut(2 * k);
    for (p, gp) in pairs.by_ref().enumerate() {
        column.clear();
        column.extend(d.iter().skip(2 * p).step_by(n));
        column2.clear();
        column2.extend(d.iter().skip(2 * p + 1).step_by(n));
        let (g0, g1) = gp.split_at_mut(k);
        weighted_rows2(g0, g1, k, a, &column, &column2);
    }
    let last = pairs.into_remainder();
    if !last.is_empty() {
        column.clear();
        column.extend(d.iter().skip(n - 1).step_by(n));
        weighted_rows(last, k, a, &column);
    }
}

/// [`weighted_rows`] for two coefficient columns at once (`out0` from `c0`, `out1` from `c1`),
/// each element summed exactly as `weighted_rows` sums it.
#[inline(always)]
fn weighted_rows2(
    out0: &mut [f32],
    out1: &mut [f32],
    k: usize,
    rows: &[f32],
    c0: &[f32],
    c1: &[f32],
) {
    let full = k / BLOCK * BLOCK;
    for start in (0..full).step_by(BLOCK) {
        let mut acc0 = [0.0f32; BLOCK];
        let mut acc1 = [0.0f32; BLOCK];
        for (i, (&x0, &x1)) in c0.iter().zip(c1).enumerate() {
            let chunk = &rows[i * k + start..i * k + start + BLOCK];
            for l in 0..BLOCK {
                acc0[l] += x0 * chunk[l];
                acc1[l] += x1 * chunk[l];
            }
        }
        out0[start..start + BLOCK].copy_from_slice(&acc0);
        out1[start..start + BLOCK].copy_from_slice(&acc1);
    }
    for (out, c) in [(out0, c0), (out1, c1)] {
        let tail = &mut out[full..];
        tail.fill(0.0);
        for (i, &ci) in c.iter().enumerate() {
            axpy(ci, &rows[i * k + full..(i + 1) * k], tail);
        }
    }
}

/// `out[j] = Σ_i c[i] · rows[i][j]` from 0, `i` in order, for the `k`-long rows of `rows`:
/// [`BLOCK`] columns at a time in registers, then the remainder.
#[inline(always)]
fn weighted_rows(out: &mut [f32], k: usize, rows: &[f32], c: &[f32]) {
    let full = k / BLOCK * BLOCK;
    for start in (0..full).step_by(BLOCK) {
        let mut acc = [0.0f32; BLOCK];
        for (i, &ci) in c.iter().enumerate() {
            let chunk = &rows[i * k + start..i * k + start + BLOCK];
            for l in 0..BLOCK {
                acc[l] += ci * chunk[l];
            }
        }
        out[start..start + BLOCK].copy_from_slice(&acc);
    }
    let tail = &mut out[full..];
    tail.fill(0.0);
    for (i, &ci) in c.iter().enumerate() {
        axpy(ci, &rows[i * k + full..(i + 1) * k], tail);
    }
}

/// Columns [`weighted_rows`] keeps in registers at once (four 256-bit vectors).
const BLOCK: usize = 32;

/// `X (m × k) = D (m × n) · W (n × k)`, all row-major: the gradient with respect to a linear
/// layer's input (`X` overwritten), summed over the outputs in order.
pub fn d_w(m: usize, n: usize, k: usize, d: &[f32], w: &[f32], x: &mut [f32]) {
    check(m, n, k, x.len(), w.len(), d.len(), "d_w");
    crate::count_product(m, n, k);
    #[cfg(target_arch = "x86_64")]
    if crate::isa::isa() >= crate::isa::Isa::Avx2 {
        // SAFETY: the CPU supports AVX2 (`isa` checks it).
        return unsafe { d_w_avx2(n, k, d, w, x) };
    }
    d_w_body(n, k, d, w, x)
}

/// [`d_w_body`] built for AVX2: each element its own chain of multiplies and adds, the
/// same bits as the baseline build.
///
/// # Safety
/// The CPU must support AVX2 (the body is safe code).
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
unsafe fn d_w_avx2(n: usize, k: usize, d: &[f32], w: &[f32], x: &mut [f32]) {
    d_w_body(n, k, d, w, x)
}

#[inline(always)]
fn d_w_body(n: usize, k: usize, d: &[f32], w: &[f32], x: &mut [f32]) {
    if k == 0 || n == 0 {
        x.fill(0.0);
        return;
    }
    // `Σ_o d[r][o]·w[o][j]` from 0, outputs in order, a block of columns in registers.
    for (out, delta) in x.chunks_exact_mut(k).zip(d.chunks_exact(n)) {
        weighted_rows(out, k, w, delta);
    }
}

/// Panics unless the `m × k`, `n × k` and `m × n` operands have those sizes (a caller bug).
fn check(m: usize, n: usize, k: usize, mk: usize, nk: usize, mn: usize, what: &str) {
    assert!(
        mk == m * k && nk == n * k && mn == m * n,
        "narrow::{what}: operand sizes {mk}, {nk}, {mn} do not fit m={m} n={n} k={k}"
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    fn values(len: usize, seed: f32) -> Vec<f32> {
        (0..len).map(|i| ((i as f32 + seed) * 0.37).sin()).collect()
    }

    /// Each product against the GEMM on the same operands, within float rounding.
    #[test]
    fn the_three_products_equal_the_gemm() {
        for (m, n, k) in [(12, 10, 512), (7, 3, 37), (1, 1, 1), (5, 8, 10), (3, 0, 4)] {
            let (a, w, d) = (values(m * k, 1.0), values(n * k, 2.0), values(m * n, 3.0));
            let close = |x: &[f32], y: &[f32]| {
                x.iter()
                    .zip(y)
                    .all(|(p, q)| (p - q).abs() <= 1e-4 * (1.0 + q.abs()))
            };

            let mut c = values(m * n, 4.0);
            let mut want = c.clone();
            add_a_wt(m, n, k, &a, &w, &mut c);
            crate::gemm(m, n, k, 1.0, &a, false, &w, true, 1.0, &mut want);
            assert!(close(&c, &want), "add_a_wt {m}×{n}×{k}");

            let mut g = vec![9.0; n * k];
            let mut want = vec![0.0; n * k];
            dt_a(m, n, k, &d, &a, &mut g);
            crate::gemm(n, k, m, 1.0, &d, true, &a, false, 0.0, &mut want);
            assert!(close(&g, &want), "dt_a {m}×{n}×{k}");

            let mut x = vec![9.0; m * k];
            let mut want = vec![0.0; m * k];
            d_w(m, n, k, &d, &w, &mut x);
            crate::gemm(m, k, n, 1.0, &d, false, &w, false, 0.0, &mut want);
            assert!(close(&x, &want), "d_w {m}×{n}×{k}");
        }
    }

    /// The fast paths (two outputs at a time, two rows at a time, the AVX2 and AVX-512
    /// builds, whichever this CPU takes) give the bits of the plain definitions: one
    /// portable `dot` per output, one `weighted_rows` per output. Odd row and output counts
    /// exercise the remainders.
    #[test]
    fn the_paired_and_avx2_paths_give_the_one_at_a_time_bits() {
        for (m, n, k) in [
            (12, 10, 512),
            (12, 7, 10),
            (5, 3, 75),
            (4, 1, 33),
            (64, 5, 50),
            (13, 10, 512),
            (1, 4, 64),
        ] {
            let (a, w, d) = (values(m * k, 1.0), values(n * k, 2.0), values(m * n, 3.0));
            let mut c = values(m * n, 4.0);
            let mut want = c.clone();
            add_a_wt(m, n, k, &a, &w, &mut c);
            add_a_wt_body(n, k, &a, &w, &mut want, dot);
            let bits = |v: &[f32]| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
            assert_eq!(bits(&c), bits(&want), "add_a_wt {m}×{n}×{k}");

            let mut g = vec![9.0; n * k];
            dt_a(m, n, k, &d, &a, &mut g);
            let mut want = vec![0.0; n * k];
            for (o, go) in want.chunks_exact_mut(k).enumerate() {
                let column: Vec<f32> = d.iter().skip(o).step_by(n).copied().collect();
                weighted_rows(go, k, &a, &column);
            }
            assert_eq!(bits(&g), bits(&want), "dt_a {m}×{n}×{k}");
        }
    }

    #[test]
    #[should_panic(expected = "do not fit")]
    fn wrong_sizes_are_a_caller_bug() {
        add_a_wt(2, 2, 2, &[0.0; 3], &[0.0; 4], &mut [0.0; 4]);
    }
}
