//! Scalar metrics of the benchmark protocols: correlations (STS), similarities of sentence
//! pairs, and classification scores. Everything accumulates in `f64`.
//!
//! Conventions, chosen to match the reference implementations (scipy, scikit-learn):
//! - [`pearson`] and [`spearman`] return `NaN` when a correlation is undefined: fewer than two
//!   points, a constant input, or any `NaN` among the inputs (scipy returns `nan` there too).
//! - Lengths that differ are a caller bug and panic.
//! - Precision, recall and F1 are 0 when their denominator is 0 (scikit-learn's
//!   `zero_division=0`).

use harness_embed::matrix::Matrix;

/// Pearson's r between `x` and `y`, clamped to `[-1, 1]` like `scipy.stats.pearsonr`.
/// `NaN` when `len < 2`, when either input is constant, or when an input holds `NaN`.
/// Panics when the lengths differ.
pub fn pearson(x: &[f64], y: &[f64]) -> f64 {
    assert_eq!(x.len(), y.len(), "pearson: inputs of different lengths");
    let n = x.len();
    if n < 2 {
        return f64::NAN;
    }
    let mx = x.iter().sum::<f64>() / n as f64;
    let my = y.iter().sum::<f64>() / n as f64;
    let (mut sxy, mut sxx, mut syy) = (0.0, 0.0, 0.0);
    for (&a, &b) in x.iter().zip(y) {
        let (dx, dy) = (a - mx, b - my);
        sxy += dx * dy;
        sxx += dx * dx;
        syy += dy * dy;
    }
    if sxx == 0.0 || syy == 0.0 {
        return f64::NAN;
    }
    (sxy / (sxx.sqrt() * syy.sqrt())).clamp(-1.0, 1.0)
}

/// Spearman's ρ: Pearson's r of the ranks, ties given their average rank
/// (`scipy.stats.spearmanr` semantics). `NaN` in the same cases as [`pearson`] (a constant
/// input has constant ranks). Panics when the lengths differ.
pub fn spearman(x: &[f64], y: &[f64]) -> f64 {
    assert_eq!(x.len(), y.len(), "spearman: inputs of different lengths");
    if x.iter().chain(y).any(|v| v.is_nan()) {
        return f64::NAN;
    }
    pearson(&average_ranks(x), &average_ranks(y))
}

/// 1-based ranks with ties given the mean of the ranks they span
/// (`scipy.stats.rankdata(method="average")`). `NaN`s must have been filtered out.
pub fn average_ranks(v: &[f64]) -> Vec<f64> {
    let mut order: Vec<usize> = (0..v.len()).collect();
    order.sort_by(|&a, &b| v[a].total_cmp(&v[b]));
    let mut ranks = vec![0.0; v.len()];
    let mut start = 0;
    while start < order.len() {
        let mut end = start + 1;
        // `==` rather than `total_cmp` so that -0.0 and 0.0 tie, as in scipy.
        while end < order.len() && v[order[end]] == v[order[start]] {
            end += 1;
        }
        // Ranks start+1 ..= end, their mean:
        let rank = (start + 1 + end) as f64 / 2.0;
        for &i in &order[start..end] {
            ranks[i] = rank;
        }
        start = end;
    }
    ranks
}

/// Cosine similarity of two vectors, in `f64`. 0 when either has norm 0 (the convention of
/// L2-normalising first, which leaves a zero vector at zero). Panics when the lengths differ.
pub fn cosine(a: &[f32], b: &[f32]) -> f64 {
    assert_eq!(a.len(), b.len(), "cosine: vectors of different lengths");
    let (mut ab, mut aa, mut bb) = (0.0f64, 0.0f64, 0.0f64);
    for (&x, &y) in a.iter().zip(b) {
        let (x, y) = (f64::from(x), f64::from(y));
        ab += x * y;
        aa += x * x;
        bb += y * y;
    }
    if aa == 0.0 || bb == 0.0 {
        return 0.0;
    }
    ab / (aa.sqrt() * bb.sqrt())
}

/// Cosine similarity of each row pair `(a[i], b[i])` (an STS pair per row).
/// Panics when the shapes differ.
pub fn cosine_rows(a: &Matrix, b: &Matrix) -> Vec<f64> {
    assert_eq!(
        (a.rows, a.cols),
        (b.rows, b.cols),
        "cosine_rows: matrices of different shapes"
    );
    (0..a.rows).map(|i| cosine(a.row(i), b.row(i))).collect()
}

/// Angular similarity `1 − arccos(cos)/π` (multilingual USE, Chidambaram et al. 2019 §3.5,
/// after Cer et al. 2018), with `cos` clamped to `[-1, 1]` first so that rounding never
/// produces `NaN`. Maps cos 1 → 1, 0 → 0.5, −1 → 0.
pub fn angular_similarity(cos: f64) -> f64 {
    1.0 - cos.clamp(-1.0, 1.0).acos() / std::f64::consts::PI
}

/// [`angular_similarity`] of each row pair `(a[i], b[i])`.
pub fn angular_rows(a: &Matrix, b: &Matrix) -> Vec<f64> {
    cosine_rows(a, b)
        .into_iter()
        .map(angular_similarity)
        .collect()
}

/// Fraction of positions where `predicted[i] == gold[i]`. `NaN` for empty inputs.
/// Panics when the lengths differ.
pub fn accuracy<T: PartialEq>(predicted: &[T], gold: &[T]) -> f64 {
    assert_eq!(
        predicted.len(),
        gold.len(),
        "accuracy: inputs of different lengths"
    );
    if gold.is_empty() {
        return f64::NAN;
    }
    let right = predicted.iter().zip(gold).filter(|(p, g)| p == g).count();
    right as f64 / gold.len() as f64
}

/// Precision, recall and F1 of one positive class (or of a set of predicted items against a
/// set of gold items, as in BUCC mining).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Prf {
    pub precision: f64,
    pub recall: f64,
    pub f1: f64,
}

impl Prf {
    /// From counts of true positives, false positives and false negatives. Each ratio is 0
    /// when its denominator is 0.
    pub fn from_counts(tp: usize, fp: usize, fn_: usize) -> Self {
        let ratio = |num: usize, den: usize| {
            if den == 0 {
                0.0
            } else {
                num as f64 / den as f64
            }
        };
        let precision = ratio(tp, tp + fp);
        let recall = ratio(tp, tp + fn_);
        let f1 = if precision + recall == 0.0 {
            0.0
        } else {
            2.0 * precision * recall / (precision + recall)
        };
        Self {
            precision,
            recall,
            f1,
        }
    }

    /// Binary scores for the class `positive`. Panics when the lengths differ.
    pub fn binary<T: PartialEq>(predicted: &[T], gold: &[T], positive: &T) -> Self {
        assert_eq!(
            predicted.len(),
            gold.len(),
            "Prf::binary: inputs of different lengths"
        );
        let (mut tp, mut fp, mut fn_) = (0, 0, 0);
        for (p, g) in predicted.iter().zip(gold) {
            match (p == positive, g == positive) {
                (true, true) => tp += 1,
                (true, false) => fp += 1,
                (false, true) => fn_ += 1,
                (false, false) => {}
            }
        }
        Self::from_counts(tp, fp, fn_)
    }
}

/// Whether a smaller value of `metric` is better (error rates, losses, Ψ of eigenvalue
/// similarity); every other metric of the protocols (accuracy, F1, correlations, P@1) is
/// better larger. The one place a metric's direction is decided: training curves, the
/// nightly regression rule and comparisons all read it.
pub fn lower_is_better(metric: &str) -> bool {
    let m = metric.to_ascii_lowercase();
    m.contains("error") || m.contains("loss") || m.contains("psi") || m.contains("eigen")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn close(a: f64, b: f64) -> bool {
        (a - b).abs() < 1e-12
    }

    #[test]
    fn pearson_linear_and_known_value() {
        let x = [1.0, 2.0, 3.0, 4.0, 5.0];
        let y: Vec<f64> = x.iter().map(|v| 3.0 * v - 7.0).collect();
        assert!(close(pearson(&x, &y), 1.0));
        let neg: Vec<f64> = x.iter().map(|v| -0.5 * v).collect();
        assert!(close(pearson(&x, &neg), -1.0));
        // x = 1..3, y = (1, 3, 2): centred (-1,0,1)·(-1,1,0) = 1, norms √2·√2 → r = 0.5.
        assert!(close(pearson(&[1.0, 2.0, 3.0], &[1.0, 3.0, 2.0]), 0.5));
    }

    #[test]
    fn pearson_undefined_is_nan() {
        assert!(pearson(&[1.0, 2.0, 3.0], &[4.0, 4.0, 4.0]).is_nan());
        assert!(pearson(&[1.0], &[2.0]).is_nan());
        assert!(pearson(&[], &[]).is_nan());
        assert!(pearson(&[1.0, f64::NAN, 3.0], &[1.0, 2.0, 3.0]).is_nan());
    }

    #[test]
    #[should_panic(expected = "different lengths")]
    fn pearson_length_mismatch_panics() {
        pearson(&[1.0, 2.0], &[1.0]);
    }

    #[test]
    fn average_ranks_ties() {
        assert_eq!(
            average_ranks(&[10.0, 20.0, 10.0, 30.0, 20.0, 10.0]),
            vec![2.0, 4.5, 2.0, 6.0, 4.5, 2.0]
        );
        assert_eq!(average_ranks(&[0.0, -0.0]), vec![1.5, 1.5]);
    }

    #[test]
    fn spearman_with_ties_by_hand() {
        // x = (1, 2, 2, 3) → ranks (1, 2.5, 2.5, 4); y = (1, 3, 2, 4) → ranks (1, 3, 2, 4).
        // Means 2.5; centred rx = (-1.5, 0, 0, 1.5), ry = (-1.5, 0.5, -0.5, 1.5).
        // Σ rx·ry = 4.5, Σ rx² = 4.5, Σ ry² = 5 → ρ = 4.5 / √(4.5·5) = √0.9.
        // (scipy.stats.spearmanr([1,2,2,3],[1,3,2,4]) = 0.9486832980505138.)
        let rho = spearman(&[1.0, 2.0, 2.0, 3.0], &[1.0, 3.0, 2.0, 4.0]);
        assert!(close(rho, 0.9f64.sqrt()), "{rho}");
        assert!(close(rho, 0.948_683_298_050_513_8));
    }

    #[test]
    fn spearman_monotone_and_undefined() {
        let x = [1.0, 5.0, 2.0, 8.0];
        let y: Vec<f64> = x.iter().map(|v: &f64| v.exp()).collect();
        assert!(close(spearman(&x, &y), 1.0));
        let rev: Vec<f64> = x.iter().map(|v| -v * v * v).collect();
        assert!(close(spearman(&x, &rev), -1.0));
        assert!(spearman(&x, &[2.0; 4]).is_nan());
        assert!(spearman(&[1.0, f64::NAN], &[1.0, 2.0]).is_nan());
    }

    #[test]
    fn cosine_and_angular() {
        assert!(close(cosine(&[1.0, 0.0], &[0.0, 3.0]), 0.0));
        assert!(close(cosine(&[1.0, 1.0], &[2.0, 2.0]), 1.0));
        assert!(close(cosine(&[1.0, 0.0], &[1.0, 1.0]), 0.5f64.sqrt()));
        assert_eq!(cosine(&[0.0, 0.0], &[1.0, 2.0]), 0.0);
        assert!(close(angular_similarity(1.0), 1.0));
        assert!(close(angular_similarity(0.0), 0.5));
        assert!(close(angular_similarity(-1.0), 0.0));
        assert!(close(angular_similarity(0.5), 1.0 - 1.0 / 3.0)); // arccos 0.5 = π/3
        assert!(
            close(angular_similarity(1.0 + 1e-9), 1.0),
            "clamped, not NaN"
        );

        let a = Matrix::from_rows(&[vec![1.0, 0.0], vec![1.0, 0.0]], 2);
        let b = Matrix::from_rows(&[vec![0.0, 2.0], vec![-1.0, 0.0]], 2);
        assert_eq!(cosine_rows(&a, &b), vec![0.0, -1.0]);
        assert_eq!(angular_rows(&a, &b), vec![0.5, 0.0]);
    }

    #[test]
    fn accuracy_and_prf() {
        assert!(close(accuracy(&[1, 2, 3, 4], &[1, 2, 0, 4]), 0.75));
        assert!(accuracy::<u8>(&[], &[]).is_nan());

        // tp 2, fp 1, fn 2 → P 2/3, R 1/2, F1 = 2·(1/3)/(7/6) = 4/7.
        let prf = Prf::from_counts(2, 1, 2);
        assert!(close(prf.precision, 2.0 / 3.0));
        assert!(close(prf.recall, 0.5));
        assert!(close(prf.f1, 4.0 / 7.0));
        let pred = [true, true, true, false, false, false];
        let gold = [true, true, false, true, true, false];
        assert_eq!(Prf::binary(&pred, &gold, &true), prf);

        let none = Prf::from_counts(0, 0, 3);
        assert_eq!((none.precision, none.recall, none.f1), (0.0, 0.0, 0.0));
    }
}
