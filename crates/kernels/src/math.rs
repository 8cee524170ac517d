//! exp, sigmoid, tanh and the exact (erf) GELU over f32 slices, in place, written so that the compiler vectorises
//! them: no branches (selects), no library calls, rounding by the 1.5·2²³ trick. On x86-64
//! the loops are compiled twice, for the baseline and for AVX2, and the AVX2 build is chosen
//! at run time. Neither build contracts `a·b + c` into an FMA (Rust never does unasked), so
//! both give the same bits.
//!
//! Accuracy (tested against `f64`): exp within 2 ulp over [−87, 88]; sigmoid and tanh within
//! 3e-7 absolute; GELU within 1e-6 absolute plus 1e-6 relative. The polynomials are Cephes'
//! `expf` and `tanhf` (S. Moshier); erf is Abramowitz & Stegun 7.1.26, the formula of
//! PyTorch's vectorised CPU `erf` (which HF BERT's `gelu` runs on).

/// e^x for x in [−87.3, 88.7] (clamped outside: 0 and +∞ are never produced).
#[inline(always)]
#[allow(clippy::excessive_precision)] // the constants as Cephes gives them
fn exp1(x: f32) -> f32 {
    const LOG2E: f32 = std::f32::consts::LOG2_E;
    const C1: f32 = 0.693_359_4;
    const C2: f32 = -2.121_944_4e-4;
    const ROUND: f32 = 12_582_912.0; // 1.5 · 2²³: adding it rounds to an integer
    let x = x.clamp(-87.3, 88.7);
    // n = round(x / ln 2), as a float and as the integer in the low mantissa bits.
    let t = x * LOG2E + ROUND;
    let n = t - ROUND;
    let r = x - n * C1 - n * C2;
    let mut p = 1.987_569_1e-4;
    p = p * r + 1.398_199_9e-3;
    p = p * r + 8.333_452e-3;
    p = p * r + 4.166_579_6e-2;
    p = p * r + 1.666_666_5e-1;
    p = p * r + 5.000_000_1e-1;
    let y = p * r * r + r + 1.0;
    // 2ⁿ built from the integer n held in t's mantissa.
    let n_i = (t.to_bits() as i32).wrapping_sub(ROUND.to_bits() as i32);
    let scale = f32::from_bits(((n_i + 127) as u32) << 23);
    y * scale
}

#[inline(always)]
fn sigmoid1(x: f32) -> f32 {
    1.0 / (1.0 + exp1(-x))
}

#[inline(always)]
#[allow(clippy::excessive_precision)]
fn tanh1(x: f32) -> f32 {
    let a = x.abs();
    // Small |x|: Cephes' odd polynomial (no cancellation near 0).
    let z = x * x;
    let mut p = -5.704_988_7e-3;
    p = p * z + 2.063_908_9e-2;
    p = p * z - 5.373_971_6e-2;
    p = p * z + 1.333_144_2e-1;
    p = p * z - 3.333_328_2e-1;
    let small = p * z * x + x;
    // Otherwise 1 − 2/(e^{2|x|} + 1), with x's sign.
    let large = (1.0 - 2.0 / (exp1(2.0 * a) + 1.0)).copysign(x);
    if a < 0.625 {
        small
    } else {
        large
    }
}

/// `erf` by Abramowitz & Stegun 7.1.26 (absolute error ≤ 1.5·10⁻⁷ in exact arithmetic):
/// `1 − (a₁t + … + a₅t⁵)·e^{−x²}`, `t = 1/(1 + p|x|)`, with x's sign.
// https://github.com/pytorch/pytorch/blob/v2.1.0/aten/src/ATen/cpu/vec/vec256/vec256_float.h#L172-L205
#[inline(always)]
fn erf1(x: f32) -> f32 {
    const P: f32 = 0.327_591_1;
    const A1: f32 = 0.254_829_6;
    const A2: f32 = -0.284_496_74;
    const A3: f32 = 1.421_413_7;
    const A4: f32 = -1.453_152_1;
    const A5: f32 = 1.061_405_4;
    let a = x.abs();
    let t = 1.0 / (1.0 + P * a);
    let poly = ((((A5 * t + A4) * t + A3) * t + A2) * t + A1) * t;
    let y = 1.0 - poly * exp1(-a * a);
    y.copysign(x)
}

/// The exact GELU, `x/2 · (1 + erf(x/√2))`.
#[inline(always)]
fn gelu1(x: f32) -> f32 {
    0.5 * x * (1.0 + erf1(x * std::f32::consts::FRAC_1_SQRT_2))
}

#[inline(always)]
fn apply(xs: &mut [f32], f: impl Fn(f32) -> f32) {
    for v in xs.iter_mut() {
        *v = f(*v);
    }
}

macro_rules! dispatched {
    ($name:ident, $scalar:ident, $avx2:ident, $doc:literal) => {
        #[doc = $doc]
        pub fn $name(xs: &mut [f32]) {
            #[cfg(target_arch = "x86_64")]
            {
                if crate::isa::isa() >= crate::isa::Isa::Avx2 {
                    // SAFETY: the CPU has AVX2 (`isa` checks it).
                    unsafe { $avx2(xs) };
                    return;
                }
            }
            apply(xs, $scalar);
        }

        /// The same loop compiled for AVX2 (the same bits: no operation is fused).
        ///
        /// # Safety
        /// The CPU must support AVX2 (the body is safe code).
        #[cfg(target_arch = "x86_64")]
        #[target_feature(enable = "avx2")]
        unsafe fn $avx2(xs: &mut [f32]) {
            apply(xs, $scalar);
        }
    };
}

dispatched!(
    exp,
    exp1,
    exp_avx2,
    "`x ← eˣ` for every element (see the module doc)."
);
dispatched!(
    sigmoid,
    sigmoid1,
    sigmoid_avx2,
    "`x ← 1/(1 + e⁻ˣ)` for every element."
);
dispatched!(tanh, tanh1, tanh_avx2, "`x ← tanh x` for every element.");
dispatched!(
    gelu,
    gelu1,
    gelu_avx2,
    "`x ← x/2 · (1 + erf(x/√2))` (the exact GELU of BERT's `hidden_act: gelu`) for every element."
);

/// The exact GELU's derivative, `Φ(x) + x·φ(x)` = `(1 + erf(x/√2))/2 + x·e^{−x²/2}/√(2π)`.
#[inline(always)]
fn gelu_grad1(x: f32) -> f32 {
    const INV_SQRT_2PI: f32 = 0.398_942_3;
    0.5 * (1.0 + erf1(x * std::f32::consts::FRAC_1_SQRT_2)) + x * INV_SQRT_2PI * exp1(-0.5 * x * x)
}

#[inline(always)]
fn gelu_backward_body(d: &mut [f32], x: &[f32]) {
    for (d, &x) in d.iter_mut().zip(x) {
        *d *= gelu_grad1(x);
    }
}

/// `d ← d · GELU′(x)` for every element: the exact GELU's backward pass from its input
/// (`d` the output's gradient on entry, the input's on return). `d` and `x` have one length.
pub fn gelu_backward(d: &mut [f32], x: &[f32]) {
    assert_eq!(
        d.len(),
        x.len(),
        "gelu_backward: gradient and input differ in length"
    );
    #[cfg(target_arch = "x86_64")]
    {
        if crate::isa::isa() >= crate::isa::Isa::Avx2 {
            // SAFETY: the CPU has AVX2 (`isa` checks it).
            unsafe { gelu_backward_avx2(d, x) };
            return;
        }
    }
    gelu_backward_body(d, x);
}

/// [`gelu_backward_body`] compiled for AVX2 (the same bits).
///
/// # Safety
/// The CPU must support AVX2 (the body is safe code).
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
unsafe fn gelu_backward_avx2(d: &mut [f32], x: &[f32]) {
    gelu_backward_body(d, x);
}

#[cfg(test)]
mod tests {
    /// GELU′ against the derivative in f64, and the AVX2 build against the portable one.
    #[test]
    fn gelu_backward_is_the_derivative() {
        let xs: Vec<f32> = (-6000..=6000).map(|i| i as f32 * 1e-3).collect();
        let mut d = vec![1.0f32; xs.len()];
        gelu_backward(&mut d, &xs);
        let mut portable = vec![1.0f32; xs.len()];
        gelu_backward_body(&mut portable, &xs);
        assert_eq!(d, portable);
        for (&x, &g) in xs.iter().zip(&d) {
            let x = x as f64;
            let cdf = 0.5 * (1.0 + erf_series(x / std::f64::consts::SQRT_2));
            let want = cdf + x * (-0.5 * x * x).exp() / (2.0 * std::f64::consts::PI).sqrt();
            assert!(
                (g as f64 - want).abs() <= 2e-6 + 1e-6 * want.abs(),
                "{x}: {g} vs {want}"
            );
        }
    }

    /// The AVX2 build of the Adam update gives the portable build's bits, and one step
    /// moves a parameter against its gradient by about the learning rate.
    #[test]
    fn adam_paths_agree_and_step_against_the_gradient() {
        let n = 37;
        let grad: Vec<f32> = (0..n).map(|i| ((i as f32) * 0.7).sin()).collect();
        let s = AdamStep {
            beta1: 0.9,
            beta2: 0.999,
            eps: 1e-8,
            weight_decay: 0.01,
            step_size: 0.001 / (1.0 - 0.9),
            bias2_sqrt: (1.0f32 - 0.999).sqrt(),
        };
        let start: Vec<f32> = (0..n).map(|i| i as f32 * 0.01).collect();
        let (mut p1, mut m1, mut v1) = (start.clone(), vec![0.0; n], vec![0.0; n]);
        adam(&mut p1, &mut m1, &mut v1, &grad, s);
        let (mut p2, mut m2, mut v2) = (start.clone(), vec![0.0; n], vec![0.0; n]);
        adam_body(&mut p2, &mut m2, &mut v2, &grad, s);
        assert_eq!((&p1, &m1, &v1), (&p2, &m2, &v2));
        for ((p, p0), g) in p1.iter().zip(&start).zip(&grad) {
            let g = g + 0.01 * p0;
            if g.abs() > 1e-3 {
                assert!(
                    ((p0 - p) - 0.001 * g.signum()).abs() < 1e-5,
                    "{p0} → {p} (g {g})"
                );
            }
        }
    }
    use super::*;

    fn grid() -> Vec<f32> {
        (-40_000..=40_000).map(|i| i as f32 * 2.2e-3).collect()
    }

    #[test]
    fn exp_is_within_two_ulp() {
        let mut xs: Vec<f32> = (-8700..=8800).map(|i| i as f32 * 0.01).collect();
        let want: Vec<f64> = xs.iter().map(|&x| (x as f64).exp()).collect();
        exp(&mut xs);
        for (got, want) in xs.iter().zip(&want) {
            let ulp = (*want as f32).abs() * f32::EPSILON;
            assert!(
                ((*got as f64) - want).abs() <= 2.0 * ulp as f64,
                "{got} vs {want}"
            );
        }
    }

    #[test]
    fn sigmoid_and_tanh_are_within_3e7_absolute_and_saturate() {
        let xs = grid();
        let mut s = xs.clone();
        let mut t = xs.clone();
        sigmoid(&mut s);
        tanh(&mut t);
        for ((x, s), t) in xs.iter().zip(&s).zip(&t) {
            let x = *x as f64;
            assert!(
                (*s as f64 - 1.0 / (1.0 + (-x).exp())).abs() < 3e-7,
                "sigmoid({x}) = {s}"
            );
            assert!((*t as f64 - x.tanh()).abs() < 3e-7, "tanh({x}) = {t}");
        }
        let mut edge = vec![-1e30f32, -100.0, 100.0, 1e30, 0.0];
        let mut edge2 = edge.clone();
        sigmoid(&mut edge);
        tanh(&mut edge2);
        assert!(edge[0] < 1e-30 && edge[1] < 1e-30, "{edge:?}");
        assert_eq!(&edge[2..], [1.0, 1.0, 0.5]);
        assert_eq!(edge2, [-1.0, -1.0, 1.0, 1.0, 0.0]);
    }

    /// erf by its Maclaurin series in f64 (accurate to ~1e-11 on [-4, 4]); 1 beyond ±6.
    fn erf_series(x: f64) -> f64 {
        if x.abs() > 6.0 {
            return x.signum();
        }
        let (mut term, mut sum, mut n) = (x, x, 0.0);
        while term.abs() > 1e-17 * sum.abs().max(1e-300) {
            n += 1.0;
            term *= -x * x / n;
            sum += term / (2.0 * n + 1.0);
        }
        sum * 2.0 / std::f64::consts::PI.sqrt()
    }

    #[test]
    fn gelu_is_the_erf_form_within_its_bound() {
        // [-6, 6] finely (the series is exact there), then far values where GELU saturates.
        let mut xs: Vec<f32> = (-6000..=6000).map(|i| i as f32 * 1e-3).collect();
        xs.extend([-1e30f32, -100.0, -20.0, 20.0, 100.0, 1e30]);
        let mut g = xs.clone();
        gelu(&mut g);
        let mut worst = 0f64;
        for (x, g) in xs.iter().zip(&g) {
            let x = *x as f64;
            let want = 0.5 * x * (1.0 + erf_series(x / std::f64::consts::SQRT_2));
            let err = (*g as f64 - want).abs();
            assert!(
                err <= 1e-6 + 1e-6 * want.abs(),
                "gelu({x}) = {g}, want {want}"
            );
            worst = worst.max(err / (1.0 + want.abs()));
        }
        // Not vacuous: the tanh approximation is 1.5e-4 off at x = 1.
        assert!(worst < 1e-6, "{worst:e}");
        let tanh_form = 0.5 * (1.0 + ((2.0f64 / std::f64::consts::PI).sqrt() * 1.044_715).tanh());
        assert!((g[7000] as f64 - tanh_form).abs() > 1e-4);
    }

    #[test]
    fn the_avx2_build_gives_the_baseline_bits() {
        let xs = grid();
        type Scalar = fn(f32) -> f32;
        type Slice = fn(&mut [f32]);
        let pairs: [(Scalar, Slice); 4] = [
            (exp1, exp),
            (sigmoid1, sigmoid),
            (tanh1, tanh),
            (gelu1, gelu),
        ];
        for (scalar, dispatched) in pairs {
            let mut base = xs.clone();
            apply(&mut base, scalar);
            let mut fast = xs.clone();
            dispatched(&mut fast);
            assert!(base
                .iter()
                .zip(&fast)
                .all(|(a, b)| a.to_bits() == b.to_bits()));
        }
    }
}

/// The coefficients of one Adam step ([`adam`]), as PyTorch's `torch.optim.Adam` computes
/// them (`bias_correction2_sqrt`, `step_size = lr / bias_correction1`).
#[derive(Debug, Clone, Copy)]
pub struct AdamStep {
    pub beta1: f32,
    pub beta2: f32,
    pub eps: f32,
    pub weight_decay: f32,
    /// `lr / (1 − β₁ᵗ)`.
    pub step_size: f32,
    /// `√(1 − β₂ᵗ)`.
    pub bias2_sqrt: f32,
}

/// One Adam update of `params` from `grad`, with moments `m` and `v`, elementwise in
/// PyTorch's order of operations: `g += wd·p; m = β₁m + (1−β₁)g; v = β₂v + (1−β₂)g²;
/// p −= step · m / (√v / √(1−β₂ᵗ) + ε)`. On x86-64 with AVX2 the same code is compiled for
/// 256-bit vectors (chosen at run time): the same bits, as every operation is a separate
/// IEEE multiply, add, divide or square root (Rust never fuses them).
pub fn adam(params: &mut [f32], m: &mut [f32], v: &mut [f32], grad: &[f32], s: AdamStep) {
    #[cfg(target_arch = "x86_64")]
    if crate::isa::isa() >= crate::isa::Isa::Avx2 {
        // SAFETY: the CPU supports AVX2 (`isa` checks it).
        return unsafe { adam_avx2(params, m, v, grad, s) };
    }
    adam_body(params, m, v, grad, s)
}

/// [`adam_body`] compiled for AVX2 (the same bits).
///
/// # Safety
/// The CPU must support AVX2 (the body is safe code).
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
unsafe fn adam_avx2(params: &mut [f32], m: &mut [f32], v: &mut [f32], grad: &[f32], s: AdamStep) {
    adam_body(params, m, v, grad, s)
}

#[inline(always)]
fn adam_body(params: &mut [f32], m: &mut [f32], v: &mut [f32], grad: &[f32], s: AdamStep) {
    let AdamStep {
        beta1: b1,
        beta2: b2,
        eps,
        weight_decay: wd,
        step_size: step,
        bias2_sqrt,
    } = s;
    // Zipped slices (no bounds checks) so that the compiler vectorises the loop.
    for (((p, m), v), g) in params
        .iter_mut()
        .zip(m.iter_mut())
        .zip(v.iter_mut())
        .zip(grad)
    {
        let gi = g + wd * *p;
        *m = b1 * *m + (1.0 - b1) * gi;
        *v = b2 * *v + (1.0 - b2) * gi * gi;
        let denom = v.sqrt() / bias2_sqrt + eps;
        *p -= step * *m / denom;
    }
}
