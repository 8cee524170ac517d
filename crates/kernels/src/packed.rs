//! `C += A·B` for a few rows of `A` against a `B` that is used many times: `B` is packed once
//! into 16-column panels ([`PackedB`]), and each product then reads the panels directly,
//! with no per-call packing. This is the recurrent product of an LSTM (a handful of batch
//! rows times the same weights at every time step), where a general GEMM spends as long
//! re-packing the weights as multiplying (measured: packing was half of matrixmultiply's
//! time in the fused LSTM).
//!
//! Register-blocked micro-kernels, chosen at run time: AVX-512 (8 rows × 16 columns in 8
//! registers), AVX2 + FMA (6 rows × 16 columns in 12 registers), and a portable one. Every
//! path accumulates each output over `k` in order with fused multiply-adds, from zero, then
//! adds the sum to `C`: all three give the same bits.

/// Columns per panel.
const NR: usize = 16;

/// `B` (`k × n`) packed into panels of [`NR`] columns: panel `p` holds columns
/// `[16p, 16p + 16)` as `k` rows of 16 floats (the last panel zero-padded).
#[derive(Debug, Clone)]
pub struct PackedB {
    k: usize,
    n: usize,
    panels: Vec<f32>,
}

impl PackedB {
    /// Packs `b`, stored `k × n` row-major, or `n × k` (read transposed) when `trans`.
    pub fn new(k: usize, n: usize, b: &[f32], trans: bool) -> PackedB {
        assert_eq!(b.len(), k * n, "PackedB: B has the wrong size");
        let n_panels = n.div_ceil(NR);
        let mut panels = vec![0.0f32; n_panels * k * NR];
        for p in 0..n_panels {
            let panel = &mut panels[p * k * NR..(p + 1) * k * NR];
            for kk in 0..k {
                for j in 0..NR.min(n - p * NR) {
                    let col = p * NR + j;
                    panel[kk * NR + j] = if trans {
                        b[col * k + kk]
                    } else {
                        b[kk * n + col]
                    };
                }
            }
        }
        PackedB { k, n, panels }
    }

    /// `B` made of rows `rows` of `x` (stored row-major, `n` wide), so `k = rows.len()`: a
    /// batch of examples as the right operand of a weight gradient `Dᵀ·X`, packed straight
    /// from the data instead of gathered first. The panels [`PackedB::new`] makes of the
    /// gathered rows.
    pub fn from_rows(x: &[f32], n: usize, rows: &[usize]) -> PackedB {
        let k = rows.len();
        let n_panels = n.div_ceil(NR);
        let mut panels = vec![0.0f32; n_panels * k * NR];
        for (kk, &r) in rows.iter().enumerate() {
            let row = &x[r * n..(r + 1) * n];
            for p in 0..n_panels {
                let cols = NR.min(n - p * NR);
                let at = p * k * NR + kk * NR;
                panels[at..at + cols].copy_from_slice(&row[p * NR..p * NR + cols]);
            }
        }
        PackedB { k, n, panels }
    }

    /// Rows of `B` (the inner dimension of the product).
    pub fn k(&self) -> usize {
        self.k
    }

    /// Columns of `B`.
    pub fn n(&self) -> usize {
        self.n
    }
}

/// `C (m × n) += A (m × k) · B`, `A` and `C` row-major and contiguous.
pub fn gemm_packed(m: usize, a: &[f32], b: &PackedB, c: &mut [f32]) {
    assert_eq!(a.len(), m * b.k, "gemm_packed: A has the wrong size");
    let rows: Vec<*const f32> = (0..m).map(|r| a[r * b.k..].as_ptr()).collect();
    // SAFETY: each pointer starts a whole k-long row of `a` (its size was checked above).
    unsafe { run_rows(&rows, b, c) }
}

/// `C (rows.len() × n) += A · B` where row `i` of `A` is row `rows[i]` of `x` (stored
/// row-major, `k` wide): a batch of training examples multiplied in place, without gathering
/// them first. The same bits as [`gemm_packed`] on the gathered rows.
pub fn gemm_packed_rows(x: &[f32], rows: &[usize], b: &PackedB, c: &mut [f32]) {
    let k = b.k;
    let ptrs: Vec<*const f32> = rows
        .iter()
        .map(|&r| {
            assert!(
                (r + 1) * k <= x.len(),
                "gemm_packed_rows: row {r} is outside A"
            );
            x[r * k..].as_ptr()
        })
        .collect();
    // SAFETY: each pointer starts a whole k-long row of `x` (checked above).
    unsafe { run_rows(&ptrs, b, c) }
}

/// The kernels' common entry: `C += A·B` for `A` given as row pointers.
///
/// # Safety
/// Every pointer must start `b.k()` readable floats.
unsafe fn run_rows(rows: &[*const f32], b: &PackedB, c: &mut [f32]) {
    let (m, n) = (rows.len(), b.n);
    assert_eq!(c.len(), m * n, "gemm_packed: C has the wrong size");
    if m == 0 || n == 0 {
        return;
    }
    #[cfg(target_arch = "x86_64")]
    {
        if std::arch::is_x86_feature_detected!("avx512f") {
            // SAFETY: the CPU has AVX-512F; the sizes were checked above.
            unsafe { avx512::run(rows, b, c) };
            return;
        }
        if std::arch::is_x86_feature_detected!("avx2") && std::arch::is_x86_feature_detected!("fma")
        {
            // SAFETY: the CPU has AVX2 and FMA; the sizes were checked above.
            unsafe { avx2::run(rows, b, c) };
            return;
        }
    }
    unsafe { portable(rows, b, c) }
}

/// # Safety
/// As [`run_rows`].
unsafe fn portable(rows: &[*const f32], b: &PackedB, c: &mut [f32]) {
    let (k, n) = (b.k, b.n);
    for p in 0..n.div_ceil(NR) {
        let panel = &b.panels[p * k * NR..(p + 1) * k * NR];
        let cols = NR.min(n - p * NR);
        for (r, &row) in rows.iter().enumerate() {
            let mut acc = [0.0f32; NR];
            // SAFETY: the caller guarantees k readable floats at `row`.
            let ar = unsafe { std::slice::from_raw_parts(row, k) };
            for kk in 0..k {
                let bk = &panel[kk * NR..(kk + 1) * NR];
                for j in 0..NR {
                    acc[j] = ar[kk].mul_add(bk[j], acc[j]);
                }
            }
            for j in 0..cols {
                c[r * n + p * NR + j] += acc[j];
            }
        }
    }
}

#[cfg(target_arch = "x86_64")]
mod avx512 {
    use super::{PackedB, NR};
    use std::arch::x86_64::*;

    #[target_feature(enable = "avx512f")]
    pub(super) unsafe fn run(a: &[*const f32], b: &PackedB, c: &mut [f32]) {
        let (k, n, m) = (b.k, b.n, a.len());
        for p in 0..n.div_ceil(NR) {
            let panel = b.panels.as_ptr().add(p * k * NR);
            let cols = NR.min(n - p * NR);
            let mut r = 0;
            while r < m {
                let rows = (m - r).min(8);
                let a0 = &a[r..r + rows];
                let c0 = c.as_mut_ptr().add(r * n + p * NR);
                match rows {
                    8 => tile::<8>(k, a0, panel, c0, n, cols),
                    7 => tile::<7>(k, a0, panel, c0, n, cols),
                    6 => tile::<6>(k, a0, panel, c0, n, cols),
                    5 => tile::<5>(k, a0, panel, c0, n, cols),
                    4 => tile::<4>(k, a0, panel, c0, n, cols),
                    3 => tile::<3>(k, a0, panel, c0, n, cols),
                    2 => tile::<2>(k, a0, panel, c0, n, cols),
                    _ => tile::<1>(k, a0, panel, c0, n, cols),
                }
                r += rows;
            }
        }
    }

    /// `R` rows of `A` (each `k` long) against one panel, added into `C` (row stride `ldc`,
    /// `cols` valid columns).
    #[target_feature(enable = "avx512f")]
    unsafe fn tile<const R: usize>(
        k: usize,
        a: &[*const f32],
        panel: *const f32,
        c: *mut f32,
        ldc: usize,
        cols: usize,
    ) {
        let a: [*const f32; R] = std::array::from_fn(|r| a[r]);
        let mut acc = [_mm512_setzero_ps(); R];
        for kk in 0..k {
            let bv = _mm512_loadu_ps(panel.add(kk * NR));
            for (r, acc) in acc.iter_mut().enumerate() {
                *acc = _mm512_fmadd_ps(_mm512_set1_ps(*a[r].add(kk)), bv, *acc);
            }
        }
        let mask: __mmask16 = if cols == NR {
            0xffff
        } else {
            (1u16 << cols) - 1
        };
        for (r, acc) in acc.iter().enumerate() {
            let cr = c.add(r * ldc);
            let cv = _mm512_maskz_loadu_ps(mask, cr);
            _mm512_mask_storeu_ps(cr, mask, _mm512_add_ps(cv, *acc));
        }
    }
}

#[cfg(target_arch = "x86_64")]
mod avx2 {
    use super::{PackedB, NR};
    use std::arch::x86_64::*;

    #[target_feature(enable = "avx2,fma")]
    pub(super) unsafe fn run(a: &[*const f32], b: &PackedB, c: &mut [f32]) {
        let (k, n, m) = (b.k, b.n, a.len());
        for p in 0..n.div_ceil(NR) {
            let panel = b.panels.as_ptr().add(p * k * NR);
            let cols = NR.min(n - p * NR);
            let mut r = 0;
            while r < m {
                let rows = (m - r).min(6);
                let a0 = &a[r..r + rows];
                let c0 = c.as_mut_ptr().add(r * n + p * NR);
                match rows {
                    6 => tile::<6>(k, a0, panel, c0, n, cols),
                    5 => tile::<5>(k, a0, panel, c0, n, cols),
                    4 => tile::<4>(k, a0, panel, c0, n, cols),
                    3 => tile::<3>(k, a0, panel, c0, n, cols),
                    2 => tile::<2>(k, a0, panel, c0, n, cols),
                    _ => tile::<1>(k, a0, panel, c0, n, cols),
                }
                r += rows;
            }
        }
    }

    #[target_feature(enable = "avx2,fma")]
    unsafe fn tile<const R: usize>(
        k: usize,
        a: &[*const f32],
        panel: *const f32,
        c: *mut f32,
        ldc: usize,
        cols: usize,
    ) {
        let a: [*const f32; R] = std::array::from_fn(|r| a[r]);
        let mut lo = [_mm256_setzero_ps(); R];
        let mut hi = [_mm256_setzero_ps(); R];
        for kk in 0..k {
            let b0 = _mm256_loadu_ps(panel.add(kk * NR));
            let b1 = _mm256_loadu_ps(panel.add(kk * NR + 8));
            for r in 0..R {
                let av = _mm256_set1_ps(*a[r].add(kk));
                lo[r] = _mm256_fmadd_ps(av, b0, lo[r]);
                hi[r] = _mm256_fmadd_ps(av, b1, hi[r]);
            }
        }
        for r in 0..R {
            let cr = c.add(r * ldc);
            if cols == NR {
                _mm256_storeu_ps(cr, _mm256_add_ps(_mm256_loadu_ps(cr), lo[r]));
                _mm256_storeu_ps(cr.add(8), _mm256_add_ps(_mm256_loadu_ps(cr.add(8)), hi[r]));
            } else {
                let mut sums = [0.0f32; NR];
                _mm256_storeu_ps(sums.as_mut_ptr(), lo[r]);
                _mm256_storeu_ps(sums.as_mut_ptr().add(8), hi[r]);
                for (j, s) in sums.iter().enumerate().take(cols) {
                    *cr.add(j) += s;
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn naive(m: usize, k: usize, n: usize, a: &[f32], b: &[f32], trans: bool) -> Vec<f32> {
        let mut c = vec![0.0f32; m * n];
        for i in 0..m {
            for j in 0..n {
                let mut s = 0.0f64;
                for p in 0..k {
                    let bv = if trans { b[j * k + p] } else { b[p * n + j] };
                    s += a[i * k + p] as f64 * bv as f64;
                }
                c[i * n + j] = s as f32;
            }
        }
        c
    }

    #[test]
    fn products_of_rows_in_place_give_the_bits_of_the_gathered_rows() {
        let (m, k, n) = (23, 37, 41);
        let x: Vec<f32> = (0..m * k)
            .map(|i| ((i * 37 % 101) as f32 - 50.0) / 50.0)
            .collect();
        let rows = [5, 0, 22, 5, 17, 9, 3, 11, 20];
        let gathered: Vec<f32> = rows
            .iter()
            .flat_map(|&r| x[r * k..(r + 1) * k].to_vec())
            .collect();
        let w: Vec<f32> = (0..k * n)
            .map(|i| ((i * 53 % 97) as f32 - 48.0) / 48.0)
            .collect();
        let packed = PackedB::new(k, n, &w, true);
        let mut want = vec![0.25f32; rows.len() * n];
        gemm_packed(rows.len(), &gathered, &packed, &mut want);
        let mut got = vec![0.25f32; rows.len() * n];
        gemm_packed_rows(&x, &rows, &packed, &mut got);
        assert_eq!(got, want);
        // The gathered rows as B: the same panels as packing the gathered matrix.
        let from_rows = PackedB::from_rows(&x, k, &rows);
        let plain = PackedB::new(rows.len(), k, &gathered, false);
        assert_eq!((from_rows.k, from_rows.n), (plain.k, plain.n));
        assert_eq!(from_rows.panels, plain.panels);
    }

    #[test]
    fn packed_product_matches_the_naive_one_and_every_path_gives_the_same_bits() {
        for &(m, k, n) in &[
            (1, 3, 5),
            (7, 20, 16),
            (13, 33, 41),
            (20, 64, 256),
            (9, 256, 30),
        ] {
            let a: Vec<f32> = (0..m * k)
                .map(|i| ((i * 37 % 101) as f32 - 50.0) / 50.0)
                .collect();
            let b: Vec<f32> = (0..k * n)
                .map(|i| ((i * 53 % 97) as f32 - 48.0) / 48.0)
                .collect();
            for trans in [false, true] {
                let packed = PackedB::new(k, n, &b, trans);
                let mut c = vec![0.5f32; m * n];
                gemm_packed(m, &a, &packed, &mut c);
                let want = naive(m, k, n, &a, &b, trans);
                for (x, y) in c.iter().zip(&want) {
                    assert!((x - 0.5 - y).abs() < 1e-4 * (1.0 + y.abs()), "{x} vs {y}");
                }
                let ptrs: Vec<*const f32> = (0..m).map(|r| a[r * k..].as_ptr()).collect();
                let mut p = vec![0.5f32; m * n];
                // SAFETY: every pointer starts a k-long row of `a`.
                unsafe { portable(&ptrs, &packed, &mut p) };
                assert!(
                    c.iter().zip(&p).all(|(x, y)| x.to_bits() == y.to_bits()),
                    "the dispatched kernel and the portable one differ ({m}×{k}×{n})"
                );
                #[cfg(target_arch = "x86_64")]
                if std::arch::is_x86_feature_detected!("avx2")
                    && std::arch::is_x86_feature_detected!("fma")
                {
                    let mut q = vec![0.5f32; m * n];
                    // SAFETY: AVX2 and FMA are present (checked above).
                    unsafe { avx2::run(&ptrs, &packed, &mut q) };
                    assert!(
                        q.iter().zip(&p).all(|(x, y)| x.to_bits() == y.to_bits()),
                        "the AVX2 kernel and the portable one differ ({m}×{k}×{n})"
                    );
                }
            }
        }
    }
}
