//! The dot product and `axpy` of the classifiers' hand-written kernels (SentEval's logistic
//! regression computes its gradient row by row with them instead of packing GEMM operands):
//! a fixed lane count and a fixed reduction order, so the result never depends on threads,
//! alignment or the instruction set chosen at run time.

/// Lanes of the dot product below: independent partial sums, which the compiler keeps in
/// SIMD registers.
pub const LANES: usize = 32;

/// `Σ a_i b_i` in f32: `LANES` partial sums over the chunks, a fixed-order reduction, then the
/// remainder. Deterministic (no dependence on threads or alignment), and the same bits in
/// [`dot_avx2`]: every lane is a separate multiply and add, never fused (Rust does not
/// contract `a * b + c` into an FMA).
#[inline(always)]
pub fn dot(a: &[f32], b: &[f32]) -> f32 {
    debug_assert_eq!(a.len(), b.len());
    let mut acc = [0.0f32; LANES];
    let (ca, cb) = (a.chunks_exact(LANES), b.chunks_exact(LANES));
    let (ra, rb) = (ca.remainder(), cb.remainder());
    for (x, y) in ca.zip(cb) {
        for l in 0..LANES {
            acc[l] += x[l] * y[l];
        }
    }
    dot_finish(acc, ra, rb)
}

/// The lanes' reduction (a fixed pairwise tree) plus the remainder, shared by both dots.
#[inline(always)]
fn dot_finish(mut acc: [f32; LANES], ra: &[f32], rb: &[f32]) -> f32 {
    let mut width = LANES / 2;
    while width > 0 {
        for l in 0..width {
            acc[l] += acc[l + width];
        }
        width /= 2;
    }
    let mut sum = acc[0];
    for (x, y) in ra.iter().zip(rb) {
        sum += x * y;
    }
    sum
}

/// [`dot`] with its 32 lanes in four 256-bit registers (the compiler vectorises the portable
/// loop poorly): four independent addition chains, the same bits as [`dot`].
///
/// # Safety
/// The CPU must support AVX2 (`is_x86_feature_detected!("avx2")`); callers compile their
/// own loop for AVX2 around it so that it inlines.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
#[inline]
pub unsafe fn dot_avx2(a: &[f32], b: &[f32]) -> f32 {
    use std::arch::x86_64::{
        __m256, _mm256_add_ps, _mm256_loadu_ps, _mm256_mul_ps, _mm256_setzero_ps,
    };
    const _: () = assert!(LANES == 32);
    let len = a.len().min(b.len());
    let full = len / LANES * LANES;
    let (pa, pb) = (a.as_ptr(), b.as_ptr());
    let mut acc: [__m256; 4] = [_mm256_setzero_ps(); 4];
    let mut i = 0;
    while i < full {
        for (r, reg) in acc.iter_mut().enumerate() {
            // SAFETY: i + 32 <= full <= the length of both slices.
            let prod = _mm256_mul_ps(
                _mm256_loadu_ps(pa.add(i + 8 * r)),
                _mm256_loadu_ps(pb.add(i + 8 * r)),
            );
            *reg = _mm256_add_ps(*reg, prod);
        }
        i += LANES;
    }
    dot_finish_avx2(acc, &a[full..len], &b[full..len])
}

/// [`dot_finish`] on the four registers of [`dot_avx2`]: the same pairwise tree (lanes `l` and
/// `l + 16`, then `l + 8`, `l + 4`, `l + 2`, `l + 1`) done with vector adds and shuffles instead
/// of a round trip through memory and 31 scalar adds (the bits do not change: each lane meets
/// the same partner in the same order), then the remainder in order.
///
/// # Safety
/// The CPU must support AVX2.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
#[inline]
pub unsafe fn dot_finish_avx2(acc: [std::arch::x86_64::__m256; 4], ra: &[f32], rb: &[f32]) -> f32 {
    use std::arch::x86_64::{
        _mm256_add_ps, _mm256_castps256_ps128, _mm256_extractf128_ps, _mm_add_ps, _mm_add_ss,
        _mm_cvtss_f32, _mm_movehl_ps, _mm_shuffle_ps,
    };
    // Width 16 (lanes 0–7 with 16–23, 8–15 with 24–31), then width 8.
    let s = _mm256_add_ps(_mm256_add_ps(acc[0], acc[2]), _mm256_add_ps(acc[1], acc[3]));
    // Width 4, 2 and 1 inside the low eight lanes.
    let q = _mm_add_ps(_mm256_castps256_ps128(s), _mm256_extractf128_ps::<1>(s));
    let q = _mm_add_ps(q, _mm_movehl_ps(q, q));
    let q = _mm_add_ss(q, _mm_shuffle_ps::<0x55>(q, q));
    let mut sum = _mm_cvtss_f32(q);
    for (x, y) in ra.iter().zip(rb) {
        sum += x * y;
    }
    sum
}

/// `out += alpha · x`.
#[inline(always)]
pub fn axpy(alpha: f32, x: &[f32], out: &mut [f32]) {
    for (o, &v) in out.iter_mut().zip(x) {
        *o += alpha * v;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dot_sums_every_product() {
        assert_eq!(dot(&[1.0; 40], &[0.5; 40]), 20.0);
        assert_eq!(dot(&[], &[]), 0.0);
        let mut out = vec![1.0f32; 3];
        axpy(2.0, &[1.0, 2.0, 3.0], &mut out);
        assert_eq!(out, [3.0, 5.0, 7.0]);
    }

    #[test]
    #[cfg(target_arch = "x86_64")]
    fn the_avx2_dot_gives_the_portable_bits() {
        if !std::arch::is_x86_feature_detected!("avx2") {
            return;
        }
        for len in [0, 5, 16, 37, 64, 75, 512] {
            let a: Vec<f32> = (0..len).map(|i| (i as f32 * 0.37).sin()).collect();
            let b: Vec<f32> = (0..len).map(|i| (i as f32 * 0.11).cos()).collect();
            // SAFETY: AVX2 was detected above.
            let wide = unsafe { dot_avx2(&a, &b) };
            assert_eq!(dot(&a, &b).to_bits(), wide.to_bits(), "len {len}");
        }
    }
}
