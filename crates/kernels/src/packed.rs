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

use rayon::prelude::*;

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
        let mut packed = PackedB {
            k,
            n,
            panels: Vec::new(),
        };
        packed.pack_columns(k, n, b, trans, 0, n);
        packed
    }

    /// `B` made of rows `rows` of `x` (stored row-major, `n` wide), so `k = rows.len()`: a
    /// batch of examples as the right operand of a weight gradient `Dᵀ·X`, packed straight
    /// from the data instead of gathered first. The panels [`PackedB::new`] makes of the
    /// gathered rows.
    pub fn from_rows(x: &[f32], n: usize, rows: &[usize]) -> PackedB {
        let k = rows.len();
        let n_panels = n.div_ceil(NR);
        // Written in order, panel by panel, so nothing is zeroed first but the last panel's
        // padding. Full panels by fixed-size copies (one vector move each): a slice copy of
        // run-time length calls memcpy, which at 64 bytes a call took longer than the
        // packing itself (a SentEval MLP step's 2,048 calls: `memmove` was 7.7 % of its
        // bench's profile).
        let mut panels = Vec::with_capacity(n_panels * k * NR);
        for p in 0..n_panels {
            let (c0, cols) = (p * NR, NR.min(n - p * NR));
            for &r in rows {
                let src = &x[r * n + c0..r * n + c0 + cols];
                if let Ok(full) = <&[f32; NR]>::try_from(src) {
                    panels.extend_from_slice(full);
                } else {
                    panels.extend_from_slice(src);
                    panels.resize(panels.len() + NR - cols, 0.0);
                }
            }
        }
        PackedB { k, n, panels }
    }

    /// Repacks `self` as columns `[col0, col0 + cols)` of `b` (`k × n` row-major, or `n × k`
    /// read transposed when `trans`), reusing its buffer: the panels [`PackedB::new`] makes of
    /// those columns alone.
    fn pack_columns(
        &mut self,
        k: usize,
        n: usize,
        b: &[f32],
        trans: bool,
        col0: usize,
        cols: usize,
    ) {
        let n_panels = cols.div_ceil(NR);
        self.k = k;
        self.n = cols;
        self.panels.clear();
        self.panels.resize(n_panels * k * NR, 0.0);
        for p in 0..n_panels {
            let panel = &mut self.panels[p * k * NR..(p + 1) * k * NR];
            let (c0, w) = (col0 + p * NR, NR.min(cols - p * NR));
            if trans && w == NR && transpose_avx512() {
                // SAFETY: AVX-512F is present; rows c0..c0 + 16 of `b` (each k long) exist
                // (`c0 + 16 <= n` and `b` has n·k floats), and `panel` holds k·16 floats.
                unsafe { avx512::pack_transposed(b[c0 * k..].as_ptr(), k, panel.as_mut_ptr()) };
            } else if trans && w == NR && transpose_avx2() {
                // SAFETY: AVX2 is present; the same bounds as just above.
                unsafe { avx2::pack_transposed(b[c0 * k..].as_ptr(), k, panel.as_mut_ptr()) };
            } else if trans {
                // Column `c0 + j` of op(B) is row `c0 + j` of `b`: read each row once, in order.
                for j in 0..w {
                    let row = &b[(c0 + j) * k..(c0 + j + 1) * k];
                    for (kk, v) in row.iter().enumerate() {
                        panel[kk * NR + j] = *v;
                    }
                }
            } else if w == NR {
                // A fixed-size copy compiles to one vector move; a slice copy of run-time
                // length calls memcpy, which at 64 bytes a call cost as much as the packing.
                for (kk, dst) in panel.chunks_exact_mut(NR).enumerate() {
                    let src: &[f32; NR] = b[kk * n + c0..kk * n + c0 + NR]
                        .try_into()
                        .expect("16 floats");
                    let dst: &mut [f32; NR] = dst.try_into().expect("16 floats");
                    *dst = *src;
                }
            } else {
                for (kk, dst) in panel.chunks_exact_mut(NR).enumerate() {
                    dst[..w].copy_from_slice(&b[kk * n + c0..kk * n + c0 + w]);
                }
            }
        }
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

/// Whether [`PackedB::pack_columns`] may transpose with AVX-512 (a 16 × 16 block in
/// registers; the scalar transpose, one strided store a float, was a fifth of a linear
/// layer's `dY·Wᵀ` at BERT-small's shapes).
fn transpose_avx512() -> bool {
    #[cfg(target_arch = "x86_64")]
    {
        crate::isa::isa() >= crate::isa::Isa::Avx512
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        false
    }
}

/// Whether [`PackedB::pack_columns`] transposes panels in AVX2 registers (8 × 8 blocks): on
/// AVX2 machines without AVX-512, where the element-by-element copy writes 16 floats apart
/// (the XNLI MLP's training in `cargo bench --bench classify` under `scripts/avx2.sh`: 3.76 s
/// before, 3.38-3.50 s after, the same bits).
fn transpose_avx2() -> bool {
    #[cfg(target_arch = "x86_64")]
    {
        crate::isa::isa() >= crate::isa::Isa::Avx2
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        false
    }
}

/// Columns of `op(W)` packed and multiplied at a time by [`gemm_w`]: two panels, the
/// widest register tile.
const W_COLS: usize = 2 * NR;

/// `C (m × n) += A (m × k) · op(W)`, all row-major and contiguous: `W` is stored `k × n`, or
/// `n × k` (read transposed) when `trans_w`. A linear layer's product over a batch of
/// tokens, `X·W` and `dY·Wᵀ`.
///
/// The columns of `op(W)` are cut into one group per rayon thread; each thread packs its
/// columns [`W_COLS`] at a time into a panel that stays in its cache and runs every row of
/// `A` against it, read in place. So `W` is packed once in all and `A` never, where a general
/// GEMM packs both, per block, every call (at BERT-small's shapes that packing was a fifth
/// of the product's time). Every element of `C` is summed over `k` in order by the same
/// micro-kernels as [`gemm_packed`], from zero, then added to `C`: the bits do not depend
/// on the split or the thread count (a test checks).
pub fn gemm_w(m: usize, n: usize, k: usize, a: &[f32], w: &[f32], trans_w: bool, c: &mut [f32]) {
    let groups = if m * n * k < crate::PAR_MIN_FLOPS {
        1
    } else {
        rayon::current_num_threads()
    };
    gemm_w_split(m, n, k, a, w, trans_w, c, groups)
}

/// [`gemm_w`] with the column tiles dealt into `groups` contiguous groups run in parallel.
#[allow(clippy::too_many_arguments)]
fn gemm_w_split(
    m: usize,
    n: usize,
    k: usize,
    a: &[f32],
    w: &[f32],
    trans_w: bool,
    c: &mut [f32],
    groups: usize,
) {
    assert_eq!(a.len(), m * k, "gemm_w: A has the wrong size");
    assert_eq!(w.len(), k * n, "gemm_w: W has the wrong size");
    assert_eq!(c.len(), m * n, "gemm_w: C has the wrong size");
    if m == 0 || n == 0 {
        return;
    }
    // Counted once per call, not per column tile: the threads would share the counter's line.
    crate::count_product(m, n, k);
    let rows: Vec<*const f32> = (0..m).map(|r| a[r * k..].as_ptr()).collect();
    let tiles = n.div_ceil(W_COLS);
    let groups = groups.clamp(1, tiles);
    let pc = crate::SendPtr(c.as_mut_ptr());
    let rows = SendRows(&rows);
    let run_group = move |g: usize| {
        let (rows, pc) = (rows, pc);
        let mut panel = PackedB {
            k,
            n: 0,
            panels: Vec::new(),
        };
        for t in (g * tiles / groups)..((g + 1) * tiles / groups) {
            let col0 = t * W_COLS;
            let cols = W_COLS.min(n - col0);
            panel.pack_columns(k, n, w, trans_w, col0, cols);
            // SAFETY: every row pointer starts a k-long row of `a` (its size was checked);
            // this group alone writes columns [col0, col0 + cols) of C's m rows of n.
            unsafe { run_rows_into(rows.0, &panel, pc.0.add(col0), n) };
        }
    };
    if groups == 1 {
        run_group(0);
    } else {
        (0..groups).into_par_iter().for_each(run_group);
    }
}

/// Row pointers into `A`, shared read-only by the threads of [`gemm_w`].
#[derive(Clone, Copy)]
struct SendRows<'a>(&'a [*const f32]);
// SAFETY: the pointers are only read through, into an `A` borrowed for the whole call
// (`gemm_w_split` holds the borrow until every thread has finished).
unsafe impl Send for SendRows<'_> {}
// SAFETY: as for `Send`: shared use only reads through the pointers, and nothing writes `A`
// while they live.
unsafe impl Sync for SendRows<'_> {}

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
    crate::count_product(m, n, b.k);
    // SAFETY: the row pointers are our caller's promise; `c` is an exclusive borrow of
    // exactly m rows of n = b.n() floats (checked just above), so ldc = n fits it.
    unsafe { run_rows_into(rows, b, c.as_mut_ptr(), n) }
}

/// `C += A·B` into `C` given as a pointer to its first element and its row stride `ldc`
/// (`C` may be a block of columns of a wider matrix).
///
/// # Safety
/// Every pointer in `rows` must start `b.k()` readable floats; `c` must point to `rows.len()`
/// rows of `ldc` floats, the first `b.n()` of each writable and not written by anyone else
/// meanwhile.
unsafe fn run_rows_into(rows: &[*const f32], b: &PackedB, c: *mut f32, ldc: usize) {
    let (m, n) = (rows.len(), b.n);
    if m == 0 || n == 0 {
        return;
    }
    #[cfg(target_arch = "x86_64")]
    {
        if crate::isa::isa() >= crate::isa::Isa::Avx512 {
            // SAFETY: the CPU has AVX-512F (`isa` checks it); `rows` and `c` meet this
            // function's contract, which is `avx512::run`'s.
            unsafe { avx512::run(rows, b, c, ldc) };
            return;
        }
        if crate::isa::isa() >= crate::isa::Isa::Avx2 {
            // SAFETY: the CPU has AVX2 and FMA (`isa` checks them); `rows` and `c` meet
            // this function's contract, which is `avx2::run`'s.
            unsafe { avx2::run(rows, b, c, ldc) };
            return;
        }
    }
    // SAFETY: `portable` needs no CPU feature; its contract on `rows` and `c` is this
    // function's.
    unsafe { portable(rows, b, c, ldc) }
}

/// The kernel without SIMD intrinsics (the same sums, in the same order, as the others).
///
/// # Safety
/// As [`run_rows_into`]: every pointer in `rows` starts `b.k()` readable floats, and `c`
/// points to `rows.len()` rows of `ldc` floats whose first `b.n()` are writable and not
/// accessed by anyone else meanwhile.
unsafe fn portable(rows: &[*const f32], b: &PackedB, c: *mut f32, ldc: usize) {
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
            for (j, v) in acc.iter().enumerate().take(cols) {
                // SAFETY: the caller guarantees rows.len() writable rows of `ldc` at `c`.
                unsafe { *c.add(r * ldc + p * NR + j) += v };
            }
        }
    }
}

#[cfg(target_arch = "x86_64")]
mod avx512 {
    use super::{PackedB, NR};
    use std::arch::x86_64::*;

    /// [`super::run_rows_into`] on AVX-512 registers: 8 rows × 16 (or 32) columns a tile.
    ///
    /// # Safety
    /// The CPU must support AVX-512F; `a` and `c` as in [`super::run_rows_into`].
    #[target_feature(enable = "avx512f")]
    pub(super) unsafe fn run(a: &[*const f32], b: &PackedB, c: *mut f32, ldc: usize) {
        let (k, n, m) = (b.k, b.n, a.len());
        let panels = n.div_ceil(NR);
        let mut p = 0;
        // Two full panels at a time: 8 broadcasts of A feed 16 multiply-adds instead of 8.
        while p + 2 <= panels && (p + 2) * NR <= n {
            let panel = b.panels.as_ptr().add(p * k * NR);
            let mut r = 0;
            while r < m {
                let rows = (m - r).min(8);
                let a0 = &a[r..r + rows];
                let c0 = c.add(r * ldc + p * NR);
                match rows {
                    8 => tile2::<8>(k, a0, panel, c0, ldc),
                    7 => tile2::<7>(k, a0, panel, c0, ldc),
                    6 => tile2::<6>(k, a0, panel, c0, ldc),
                    5 => tile2::<5>(k, a0, panel, c0, ldc),
                    4 => tile2::<4>(k, a0, panel, c0, ldc),
                    3 => tile2::<3>(k, a0, panel, c0, ldc),
                    2 => tile2::<2>(k, a0, panel, c0, ldc),
                    _ => tile2::<1>(k, a0, panel, c0, ldc),
                }
                r += rows;
            }
            p += 2;
        }
        for p in p..panels {
            let panel = b.panels.as_ptr().add(p * k * NR);
            let cols = NR.min(n - p * NR);
            let mut r = 0;
            while r < m {
                let rows = (m - r).min(8);
                let a0 = &a[r..r + rows];
                let c0 = c.add(r * ldc + p * NR);
                match rows {
                    8 => tile::<8>(k, a0, panel, c0, ldc, cols),
                    7 => tile::<7>(k, a0, panel, c0, ldc, cols),
                    6 => tile::<6>(k, a0, panel, c0, ldc, cols),
                    5 => tile::<5>(k, a0, panel, c0, ldc, cols),
                    4 => tile::<4>(k, a0, panel, c0, ldc, cols),
                    3 => tile::<3>(k, a0, panel, c0, ldc, cols),
                    2 => tile::<2>(k, a0, panel, c0, ldc, cols),
                    _ => tile::<1>(k, a0, panel, c0, ldc, cols),
                }
                r += rows;
            }
        }
    }

    /// One panel of 16 columns of `op(B) = Bᵀ`: `src` points to 16 rows of `B`, each `k`
    /// long and `k` apart; `dst` gets `k` rows of 16 (row `kk` holds element `kk` of each).
    /// 16 × 16 blocks are transposed in registers; the last `k % 16` rows one by one.
    ///
    /// # Safety
    /// The CPU must support AVX-512F; `src` must point to `16 · k` readable floats and `dst`
    /// to `16 · k` writable ones, not overlapping them.
    #[target_feature(enable = "avx512f")]
    pub(super) unsafe fn pack_transposed(src: *const f32, k: usize, dst: *mut f32) {
        let full = k - k % NR;
        let mut kk = 0;
        while kk < full {
            let mut r: [__m512; 16] = std::array::from_fn(|j| _mm512_loadu_ps(src.add(j * k + kk)));
            transpose16(&mut r);
            for (i, v) in r.iter().enumerate() {
                _mm512_storeu_ps(dst.add((kk + i) * NR), *v);
            }
            kk += NR;
        }
        for kk in full..k {
            for j in 0..NR {
                *dst.add(kk * NR + j) = *src.add(j * k + kk);
            }
        }
    }

    /// Transposes the 16 × 16 matrix whose rows are `r`, in place (unpack pairs, then
    /// shuffle pairs of pairs, then 128-bit lanes twice).
    ///
    /// # Safety
    /// The CPU must support AVX-512F (it touches no memory but `r`).
    #[target_feature(enable = "avx512f")]
    unsafe fn transpose16(r: &mut [__m512; 16]) {
        let mut t = [_mm512_setzero_ps(); 16];
        for i in 0..8 {
            t[2 * i] = _mm512_unpacklo_ps(r[2 * i], r[2 * i + 1]);
            t[2 * i + 1] = _mm512_unpackhi_ps(r[2 * i], r[2 * i + 1]);
        }
        for b in (0..16).step_by(4) {
            r[b] = _mm512_shuffle_ps::<0x44>(t[b], t[b + 2]);
            r[b + 1] = _mm512_shuffle_ps::<0xEE>(t[b], t[b + 2]);
            r[b + 2] = _mm512_shuffle_ps::<0x44>(t[b + 1], t[b + 3]);
            r[b + 3] = _mm512_shuffle_ps::<0xEE>(t[b + 1], t[b + 3]);
        }
        for b in [0, 8] {
            for i in 0..4 {
                t[b + i] = _mm512_shuffle_f32x4::<0x88>(r[b + i], r[b + 4 + i]);
                t[b + 4 + i] = _mm512_shuffle_f32x4::<0xDD>(r[b + i], r[b + 4 + i]);
            }
        }
        for i in 0..8 {
            r[i] = _mm512_shuffle_f32x4::<0x88>(t[i], t[8 + i]);
            r[8 + i] = _mm512_shuffle_f32x4::<0xDD>(t[i], t[8 + i]);
        }
    }

    /// `R` rows of `A` (each `k` long) against two whole adjacent panels, added into `C`
    /// (row stride `ldc`). Each output is the same sum in the same order as in [`tile`].
    ///
    /// # Safety
    /// The CPU must support AVX-512F; `a` holds at least `R` pointers, each to `k` readable
    /// floats; `panel` points to two panels (`2 · k · 16` readable floats); `c` points to `R`
    /// rows of stride `ldc` whose first 32 floats are writable and not accessed meanwhile.
    #[target_feature(enable = "avx512f")]
    unsafe fn tile2<const R: usize>(
        k: usize,
        a: &[*const f32],
        panel: *const f32,
        c: *mut f32,
        ldc: usize,
    ) {
        let a: [*const f32; R] = std::array::from_fn(|r| a[r]);
        let next = panel.add(k * NR);
        let mut lo = [_mm512_setzero_ps(); R];
        let mut hi = [_mm512_setzero_ps(); R];
        for kk in 0..k {
            let b0 = _mm512_loadu_ps(panel.add(kk * NR));
            let b1 = _mm512_loadu_ps(next.add(kk * NR));
            for r in 0..R {
                let av = _mm512_set1_ps(*a[r].add(kk));
                lo[r] = _mm512_fmadd_ps(av, b0, lo[r]);
                hi[r] = _mm512_fmadd_ps(av, b1, hi[r]);
            }
        }
        for r in 0..R {
            let cr = c.add(r * ldc);
            _mm512_storeu_ps(cr, _mm512_add_ps(_mm512_loadu_ps(cr), lo[r]));
            _mm512_storeu_ps(
                cr.add(NR),
                _mm512_add_ps(_mm512_loadu_ps(cr.add(NR)), hi[r]),
            );
        }
    }

    /// `R` rows of `A` (each `k` long) against one panel, added into `C` (row stride `ldc`,
    /// `cols` valid columns).
    ///
    /// # Safety
    /// The CPU must support AVX-512F; `a` holds at least `R` pointers, each to `k` readable
    /// floats; `panel` points to `k · 16` readable floats; `cols <= 16`; `c` points to `R`
    /// rows of stride `ldc` whose first `cols` floats are writable and not accessed
    /// meanwhile (the masked loads and stores touch no others).
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

    /// One panel of 16 columns of `op(B) = Bᵀ`, as `avx512::pack_transposed` makes it: `src`
    /// points to 16 rows of `B`, each `k` long and `k` apart; `dst` gets `k` rows of 16 (row
    /// `kk` holds element `kk` of each). Each half of the panel (8 rows of `B`) is transposed
    /// 8 × 8 in registers; the last `k % 8` elements one by one.
    ///
    /// # Safety
    /// The CPU must support AVX2; `src` must point to `16 · k` readable floats and `dst` to
    /// `16 · k` writable ones, not overlapping them.
    #[target_feature(enable = "avx2")]
    pub(super) unsafe fn pack_transposed(src: *const f32, k: usize, dst: *mut f32) {
        const B: usize = 8;
        let full = k - k % B;
        let mut kk = 0;
        while kk < full {
            for half in 0..2 {
                let rows = src.add(half * B * k + kk);
                let mut r: [__m256; B] = std::array::from_fn(|j| _mm256_loadu_ps(rows.add(j * k)));
                transpose8(&mut r);
                for (i, v) in r.iter().enumerate() {
                    _mm256_storeu_ps(dst.add((kk + i) * NR + half * B), *v);
                }
            }
            kk += B;
        }
        for kk in full..k {
            for j in 0..NR {
                *dst.add(kk * NR + j) = *src.add(j * k + kk);
            }
        }
    }

    /// Transposes the 8 × 8 matrix whose rows are `r`, in place (unpack pairs, shuffle pairs
    /// of pairs, then swap 128-bit lanes).
    ///
    /// # Safety
    /// The CPU must support AVX2 (it touches no memory but `r`).
    #[target_feature(enable = "avx2")]
    unsafe fn transpose8(r: &mut [__m256; 8]) {
        let mut t = [_mm256_setzero_ps(); 8];
        for i in 0..4 {
            t[2 * i] = _mm256_unpacklo_ps(r[2 * i], r[2 * i + 1]);
            t[2 * i + 1] = _mm256_unpackhi_ps(r[2 * i], r[2 * i + 1]);
        }
        let mut u = [_mm256_setzero_ps(); 8];
        for b in [0, 4] {
            u[b] = _mm256_shuffle_ps::<0x44>(t[b], t[b + 2]);
            u[b + 1] = _mm256_shuffle_ps::<0xEE>(t[b], t[b + 2]);
            u[b + 2] = _mm256_shuffle_ps::<0x44>(t[b + 1], t[b + 3]);
            u[b + 3] = _mm256_shuffle_ps::<0xEE>(t[b + 1], t[b + 3]);
        }
        for i in 0..4 {
            r[i] = _mm256_permute2f128_ps::<0x20>(u[i], u[4 + i]);
            r[4 + i] = _mm256_permute2f128_ps::<0x31>(u[i], u[4 + i]);
        }
    }

    /// [`super::run_rows_into`] on AVX2 registers: 6 rows × 16 columns a tile, the last
    /// rows in tiles of 3 to 5 ([`tile_rows`]).
    ///
    /// # Safety
    /// The CPU must support AVX2 and FMA; `a` and `c` as in [`super::run_rows_into`].
    #[target_feature(enable = "avx2,fma")]
    pub(super) unsafe fn run(a: &[*const f32], b: &PackedB, c: *mut f32, ldc: usize) {
        let (k, n, m) = (b.k, b.n, a.len());
        for p in 0..n.div_ceil(NR) {
            let panel = b.panels.as_ptr().add(p * k * NR);
            let cols = NR.min(n - p * NR);
            let mut r = 0;
            while r < m {
                let rows = tile_rows(m - r);
                let a0 = &a[r..r + rows];
                let c0 = c.add(r * ldc + p * NR);
                match rows {
                    6 => tile::<6>(k, a0, panel, c0, ldc, cols),
                    5 => tile::<5>(k, a0, panel, c0, ldc, cols),
                    4 => tile::<4>(k, a0, panel, c0, ldc, cols),
                    3 => tile::<3>(k, a0, panel, c0, ldc, cols),
                    2 => tile::<2>(k, a0, panel, c0, ldc, cols),
                    _ => tile::<1>(k, a0, panel, c0, ldc, cols),
                }
                r += rows;
            }
        }
    }

    /// Rows of the next tile when `left` rows remain: 6, except that the last 7 to 9 rows go
    /// in two tiles of 3 to 5 (4 + 3, 4 + 4, 5 + 4) rather than 6 and 1 to 3. A tile of 1 or
    /// 2 rows has 2 or 4 accumulators, too few to hide the multiply-add's latency, and costs
    /// nearly as long as a full one (measured: 32 rows as 6 + … + 6 + 2 took 1.14× as long as
    /// 30 rows). Each output is summed alone, so the tiling changes no bit.
    pub(super) fn tile_rows(left: usize) -> usize {
        match left {
            7 | 8 => 4,
            9 => 5,
            _ => left.min(6),
        }
    }

    /// `R` rows of `A` (each `k` long) against one panel, added into `C` (row stride `ldc`,
    /// `cols` valid columns).
    ///
    /// # Safety
    /// The CPU must support AVX2 and FMA; `a` holds at least `R` pointers, each to `k`
    /// readable floats; `panel` points to `k · 16` readable floats; `cols <= 16`; `c` points
    /// to `R` rows of stride `ldc` whose first `cols` floats (all 16 when `cols == 16`) are
    /// writable and not accessed meanwhile.
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

    /// The AVX2 register transpose packs the same panels as the element-by-element copy,
    /// whatever `k` (whole 8 × 8 blocks and a remainder).
    #[cfg(target_arch = "x86_64")]
    #[test]
    fn transposed_panels_from_avx2_registers_equal_the_copied_ones() {
        if !is_x86_feature_detected!("avx2") {
            return;
        }
        for k in [1, 7, 8, 9, 16, 17, 64, 67] {
            let b: Vec<f32> = (0..NR * k).map(|i| i as f32 * 0.5 - 3.0).collect();
            let mut want = vec![0.0f32; NR * k];
            for j in 0..NR {
                for kk in 0..k {
                    want[kk * NR + j] = b[j * k + kk];
                }
            }
            let mut got = vec![f32::NAN; NR * k];
            // SAFETY: AVX2 is present (checked above); `b` and `got` hold 16·k floats each.
            unsafe { avx2::pack_transposed(b.as_ptr(), k, got.as_mut_ptr()) };
            assert_eq!(got, want, "k = {k}");
        }
    }

    #[test]
    fn products_of_rows_in_place_give_the_bits_of_the_gathered_rows() {
        // Rows of 37 (two full panels and a ragged one) and of 32 (full panels only).
        for k in [37, 32] {
            rows_in_place_give_the_bits_of_the_gathered_rows(k);
        }
    }

    fn rows_in_place_give_the_bits_of_the_gathered_rows(k: usize) {
        let (m, n) = (23, 41);
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

    /// `gemm_w` gives the bits of `gemm_packed` on the whole packed `W`, for every split of
    /// its columns over threads, both layouts of `W`, and ragged edges.
    #[test]
    fn products_with_w_packed_a_tile_at_a_time_give_the_bits_of_the_whole_packing() {
        for &(m, k, n) in &[(1, 3, 5), (13, 33, 41), (37, 64, 100), (240, 96, 384)] {
            let a: Vec<f32> = (0..m * k)
                .map(|i| ((i * 37 % 101) as f32 - 50.0) / 50.0)
                .collect();
            let w: Vec<f32> = (0..k * n)
                .map(|i| ((i * 53 % 97) as f32 - 48.0) / 48.0)
                .collect();
            let c0: Vec<f32> = (0..m * n).map(|i| (i % 13) as f32 / 7.0).collect();
            for trans in [false, true] {
                let mut want = c0.clone();
                gemm_packed(m, &a, &PackedB::new(k, n, &w, trans), &mut want);
                let near = naive(m, k, n, &a, &w, trans);
                for ((x, y), z) in want.iter().zip(&near).zip(&c0) {
                    assert!((x - z - y).abs() < 1e-4 * (1.0 + y.abs()), "{x} vs {y}");
                }
                for groups in [1, 2, 3, 5, 64] {
                    let mut got = c0.clone();
                    gemm_w_split(m, n, k, &a, &w, trans, &mut got, groups);
                    assert!(
                        got.iter()
                            .zip(&want)
                            .all(|(x, y)| x.to_bits() == y.to_bits()),
                        "{m}×{k}×{n} (trans {trans}) in {groups} groups"
                    );
                }
                let mut got = c0.clone();
                gemm_w(m, n, k, &a, &w, trans, &mut got);
                assert_eq!(got, want);
            }
        }
    }

    /// The AVX2 row tiles cover every row once and, past 6 rows, leave no tile under 3.
    #[test]
    #[cfg(target_arch = "x86_64")]
    fn the_avx2_row_tiles_cover_the_rows_without_a_short_last_tile() {
        for m in 1..100 {
            let mut tiles = Vec::new();
            let mut r = 0;
            while r < m {
                tiles.push(avx2::tile_rows(m - r));
                r += tiles.last().unwrap();
            }
            assert_eq!(tiles.iter().sum::<usize>(), m);
            assert!(
                tiles.iter().all(|&t| (1..=6).contains(&t)),
                "{m}: {tiles:?}"
            );
            if m > 6 {
                assert!(tiles.iter().all(|&t| t >= 3), "{m}: {tiles:?}");
            }
        }
    }

    #[test]
    fn packed_product_matches_the_naive_one_and_every_path_gives_the_same_bits() {
        for &(m, k, n) in &[
            (1, 3, 5),
            (7, 20, 16),
            (13, 33, 41),
            (20, 64, 256),
            (9, 256, 30),
            (8, 40, 32),
            (32, 24, 48),
            (33, 17, 16),
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
                // SAFETY: every pointer starts a k-long row of `a`; `p` is m rows of n.
                unsafe { portable(&ptrs, &packed, p.as_mut_ptr(), n) };
                assert!(
                    c.iter().zip(&p).all(|(x, y)| x.to_bits() == y.to_bits()),
                    "the dispatched kernel and the portable one differ ({m}×{k}×{n})"
                );
                #[cfg(target_arch = "x86_64")]
                if std::arch::is_x86_feature_detected!("avx2")
                    && std::arch::is_x86_feature_detected!("fma")
                {
                    let mut q = vec![0.5f32; m * n];
                    // SAFETY: AVX2 and FMA are present (checked above); the pointers start
                    // k-long rows of `a` and `q` is m rows of n.
                    unsafe { avx2::run(&ptrs, &packed, q.as_mut_ptr(), n) };
                    assert!(
                        q.iter().zip(&p).all(|(x, y)| x.to_bits() == y.to_bits()),
                        "the AVX2 kernel and the portable one differ ({m}×{k}×{n})"
                    );
                }
            }
        }
    }
}
