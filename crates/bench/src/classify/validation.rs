//! SentEval's validation schemes (facebookresearch/SentEval `senteval/tools/validation.py`,
//! PyTorch path) and scikit-learn's `StratifiedKFold(shuffle=True)`.
//!
//! - [`inner_kfold_classifier`] (`InnerKFoldClassifier`; MR, CR, SUBJ, MPQA): outer stratified
//!   k-fold; on each outer training part, for each penalty, an inner stratified k-fold (same
//!   seed) in which each classifier validates (early stopping) on its inner test fold and is
//!   scored there; the penalty of best mean inner accuracy (percent, rounded to 2 decimals, the
//!   first on ties) is retrained on the whole outer training part with a 5% validation split
//!   and scored on the outer test fold. Dev accuracy: mean of the outer folds' best inner
//!   scores; test accuracy: mean of the outer test accuracies (both rounded).
//! - [`kfold_classifier`] (`KFoldClassifier`; TREC, MRPC): the penalty by stratified k-fold on
//!   train (each classifier validating on its test fold), then trained on all of train with a
//!   5% validation split and tested on the fixed test set. Dev accuracy: the best k-fold score.
//! - [`split_classifier`] (`SplitClassifier`; SST-2, SST-5): each penalty trained on train
//!   with validation on dev; the best dev score picks the penalty; the test accuracy is that
//!   model's. (SentEval trains the chosen penalty once more with the same seed and data; our
//!   training is deterministic, so the scan's model is that model and is reused.)
//!
//! Penalties are SentEval's PyTorch grid `[10**t for t in range(-5, -1)]` (1e-5 … 1e-2), used
//! as Adam's weight decay. (`[2**t for t in range(-2, 4)]` and `range(-1, 6)` in that file are
//! the `C` grids of its scikit-learn path, which this module does not implement.)
//!
//! Independent fits (penalty × fold) run in parallel with rayon, and the inner k-fold's final
//! fit of one outer fold runs alongside the penalty scan of the next; each fit is
//! deterministic and results are collected in a fixed order, so they do not depend on the
//! number of threads.

use super::mlp::{seeded_rng, STREAM_FOLDS};
use super::senteval::{SentEvalClassifier, ValidationSource};
use super::{invalid, round2, ClassifyError};
use harness_embed::matrix::Matrix;
use rand::seq::SliceRandom;
use rayon::prelude::*;
use serde::{Deserialize, Serialize};

/// One split of a cross-validation: row indices, each list ascending.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Fold {
    pub train: Vec<usize>,
    pub test: Vec<usize>,
}

/// scikit-learn's `StratifiedKFold(n_splits=k, shuffle=seed.is_some())`, the algorithm of
/// scikit-learn ≥ 0.22, `_make_test_folds`:
/// 1. classes are numbered in order of first appearance in `labels`;
/// 2. the encoded labels are sorted and dealt round-robin to the folds: fold `i` receives
///    `sorted[i], sorted[i+k], …`; `allocation[i][c]` counts the class-`c` rows dealt to it
///    (so every fold holds each class's count divided by `k`, rounded down or up, and fold
///    sizes differ by at most one);
/// 3. for each class in turn, the list `[0]·allocation[0][c] ++ [1]·allocation[1][c] ++ …` is
///    shuffled (when a seed is given; one generator across classes) and assigned to that
///    class's rows in index order.
///
/// Fold `i` tests the rows assigned to `i` and trains on all others. Errors when `k < 2`,
/// `k > n`, or `k` exceeds every class's count (scikit-learn's conditions).
pub fn stratified_kfold(
    labels: &[usize],
    k: usize,
    seed: Option<u64>,
) -> Result<Vec<Fold>, ClassifyError> {
    let n = labels.len();
    if k < 2 {
        return invalid(format!("k-fold needs k >= 2, got {k}"));
    }
    if k > n {
        return invalid(format!("cannot split {n} rows into {k} folds"));
    }
    let mut classes: Vec<usize> = Vec::new();
    let encoded: Vec<usize> = labels
        .iter()
        .map(|l| match classes.iter().position(|c| c == l) {
            Some(i) => i,
            None => {
                classes.push(*l);
                classes.len() - 1
            }
        })
        .collect();
    let n_classes = classes.len();
    let mut counts = vec![0usize; n_classes];
    encoded.iter().for_each(|&c| counts[c] += 1);
    if counts.iter().all(|&c| k > c) {
        return invalid(format!(
            "k = {k} is greater than the number of members in every class"
        ));
    }
    let mut sorted = encoded.clone();
    sorted.sort_unstable();
    let mut allocation = vec![vec![0usize; n_classes]; k];
    for (pos, &c) in sorted.iter().enumerate() {
        allocation[pos % k][c] += 1;
    }
    let mut rng = seed.map(|s| seeded_rng(s, STREAM_FOLDS));
    let mut test_fold = vec![0usize; n];
    for (c, _) in classes.iter().enumerate() {
        let mut folds_for_class: Vec<usize> = (0..k)
            .flat_map(|i| std::iter::repeat_n(i, allocation[i][c]))
            .collect();
        if let Some(rng) = rng.as_mut() {
            folds_for_class.shuffle(rng);
        }
        let rows = (0..n).filter(|&r| encoded[r] == c);
        for (r, f) in rows.zip(folds_for_class) {
            test_fold[r] = f;
        }
    }
    Ok((0..k)
        .map(|i| {
            let (test, train): (Vec<usize>, Vec<usize>) = (0..n).partition(|&r| test_fold[r] == i);
            Fold { train, test }
        })
        .collect())
}

/// The protocol settings around the classifier.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct SentEvalConfig {
    pub classifier: SentEvalClassifier,
    /// Folds, outer and inner alike (SentEval's `params.kfold`: its engine defaults to 5, its
    /// README's recommended setting, and the papers' protocol, is 10).
    pub kfold: usize,
    /// Seed of the stratified folds (SentEval: `random_state=1111` for the inner k-fold, the
    /// task seed, default 1111, for the k-fold).
    pub fold_seed: u64,
    /// Penalty grid (Adam weight decay). `[0.0]` is SentEval's `noreg`.
    pub regs: Vec<f32>,
    /// Validation fraction of the final fits of the k-fold schemes.
    pub final_validation_split: f64,
}

impl Default for SentEvalConfig {
    fn default() -> Self {
        SentEvalConfig {
            classifier: SentEvalClassifier::default(),
            kfold: 10,
            fold_seed: 1111,
            regs: vec![1e-5, 1e-4, 1e-3, 1e-2],
            final_validation_split: 0.05,
        }
    }
}

/// What a validation scheme reports. Accuracies are percentages rounded to 2 decimals, as
/// SentEval reports them.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ValidationResult {
    pub dev_accuracy: f64,
    pub test_accuracy: f64,
    /// The penalty grid.
    pub regs: Vec<f32>,
    /// Score of each penalty: one row per outer fold (inner k-fold) or a single row.
    pub reg_scores: Vec<Vec<f64>>,
    /// The chosen penalty: one per outer fold, or a single one.
    pub chosen_regs: Vec<f32>,
    /// Test accuracy of each outer fold (inner k-fold); the single test accuracy otherwise.
    pub fold_test_accuracies: Vec<f64>,
    /// Predicted class of each test row (the fixed test set; for the inner k-fold, each row's
    /// prediction by the model of the outer fold that tested it, in the input's row order).
    pub test_predictions: Vec<usize>,
    /// The test rows behind each entry of `fold_test_accuracies`: each outer fold's test
    /// rows (inner k-fold), or every row of the fixed test set.
    pub test_folds: Vec<Vec<usize>>,
}

fn check(x: &Matrix, y: &[usize], what: &str) -> Result<(), ClassifyError> {
    if x.rows != y.len() {
        return invalid(format!("{what}: {} rows but {} labels", x.rows, y.len()));
    }
    Ok(())
}

fn pick(y: &[usize], idx: &[usize]) -> Vec<usize> {
    idx.iter().map(|&i| y[i]).collect()
}

/// The first index of the largest score (NumPy's `argmax`).
fn best_index(scores: &[f64]) -> usize {
    let mut best = 0;
    for (i, &s) in scores.iter().enumerate() {
        if s > scores[best] {
            best = i;
        }
    }
    best
}

fn mean(values: &[f64]) -> f64 {
    values.iter().sum::<f64>() / values.len().max(1) as f64
}

/// For each penalty, the rounded mean accuracy (percent) over `folds` of `(x, y)`, each fit
/// validating on its own test fold.
fn kfold_scores(
    cfg: &SentEvalConfig,
    x: &Matrix,
    y: &[usize],
    n_classes: usize,
    folds: &[Fold],
) -> Result<Vec<f64>, ClassifyError> {
    let jobs: Vec<(usize, usize)> = (0..cfg.regs.len())
        .flat_map(|r| (0..folds.len()).map(move |f| (r, f)))
        .collect();
    let accs = jobs
        .par_iter()
        .map(|&(r, f)| {
            let fold = &folds[f];
            let (tx, ty) = (x.select_rows(&fold.train), pick(y, &fold.train));
            let (vx, vy) = (x.select_rows(&fold.test), pick(y, &fold.test));
            let (model, _, _) = cfg.classifier.fit(
                &tx,
                &ty,
                n_classes,
                cfg.regs[r],
                ValidationSource::Data(&vx, &vy),
            )?;
            Ok(model.accuracy(&vx, &vy))
        })
        .collect::<Result<Vec<f64>, ClassifyError>>()?;
    Ok(accs
        .chunks(folds.len())
        .map(|per_reg| round2(100.0 * mean(per_reg)))
        .collect())
}

fn check_regs(cfg: &SentEvalConfig) -> Result<(), ClassifyError> {
    if cfg.regs.is_empty() {
        return invalid("empty penalty grid");
    }
    Ok(())
}

/// SentEval's `InnerKFoldClassifier` (see the module documentation).
pub fn inner_kfold_classifier(
    x: &Matrix,
    y: &[usize],
    n_classes: usize,
    cfg: &SentEvalConfig,
) -> Result<ValidationResult, ClassifyError> {
    check(x, y, "data")?;
    check_regs(cfg)?;
    let outer = stratified_kfold(y, cfg.kfold, Some(cfg.fold_seed))?;
    let mut result = ValidationResult {
        dev_accuracy: 0.0,
        test_accuracy: 0.0,
        regs: cfg.regs.clone(),
        reg_scores: Vec::new(),
        chosen_regs: Vec::new(),
        fold_test_accuracies: Vec::new(),
        test_predictions: vec![0; x.rows],
        test_folds: Vec::new(),
    };
    // Each outer fold: the penalty scan (its fits in parallel), then the final fit of the
    // chosen penalty. The final fit of fold i runs alongside the scan of fold i + 1. Every
    // fit is deterministic and the results are collected in fold order, so the outcome does
    // not depend on the number of threads.
    let scan = |i: usize| -> Result<(Matrix, Vec<usize>, Vec<f64>), ClassifyError> {
        let fold = &outer[i];
        let (tx, ty) = (x.select_rows(&fold.train), pick(y, &fold.train));
        let inner = stratified_kfold(&ty, cfg.kfold, Some(cfg.fold_seed))?;
        let scores = kfold_scores(cfg, &tx, &ty, n_classes, &inner)?;
        Ok((tx, ty, scores))
    };
    let finish = |i: usize, tx: Matrix, ty: Vec<usize>, scores: Vec<f64>| {
        let best = best_index(&scores);
        let (model, _, _) = cfg.classifier.fit(
            &tx,
            &ty,
            n_classes,
            cfg.regs[best],
            ValidationSource::Split(cfg.final_validation_split),
        )?;
        Ok::<_, ClassifyError>((
            i,
            scores,
            best,
            model.predict(&x.select_rows(&outer[i].test)),
        ))
    };
    let mut dev_results = Vec::new();
    let mut pending = None;
    for i in 0..=outer.len() {
        let (done, next) = rayon::join(
            || {
                pending
                    .take()
                    .map(|(j, tx, ty, scores)| finish(j, tx, ty, scores))
            },
            || (i < outer.len()).then(|| scan(i)),
        );
        if let Some((tx, ty, scores)) = next.transpose()? {
            pending = Some((i, tx, ty, scores));
        }
        let Some((j, scores, best, predictions)) = done.transpose()? else {
            continue;
        };
        let fold = &outer[j];
        dev_results.push(scores[best]);
        let ey = pick(y, &fold.test);
        result
            .fold_test_accuracies
            .push(round2(100.0 * super::accuracy(&predictions, &ey)));
        for (&row, p) in fold.test.iter().zip(predictions) {
            result.test_predictions[row] = p;
        }
        result.test_folds.push(fold.test.clone());
        result.reg_scores.push(scores);
        result.chosen_regs.push(cfg.regs[best]);
    }
    result.dev_accuracy = round2(mean(&dev_results));
    result.test_accuracy = round2(mean(&result.fold_test_accuracies));
    Ok(result)
}

/// SentEval's `KFoldClassifier` (see the module documentation).
pub fn kfold_classifier(
    train_x: &Matrix,
    train_y: &[usize],
    test_x: &Matrix,
    test_y: &[usize],
    n_classes: usize,
    cfg: &SentEvalConfig,
) -> Result<ValidationResult, ClassifyError> {
    check(train_x, train_y, "train")?;
    check(test_x, test_y, "test")?;
    check_regs(cfg)?;
    let folds = stratified_kfold(train_y, cfg.kfold, Some(cfg.fold_seed))?;
    let scores = kfold_scores(cfg, train_x, train_y, n_classes, &folds)?;
    let best = best_index(&scores);
    let (model, _, _) = cfg.classifier.fit(
        train_x,
        train_y,
        n_classes,
        cfg.regs[best],
        ValidationSource::Split(cfg.final_validation_split),
    )?;
    let predictions = model.predict(test_x);
    let test_accuracy = round2(100.0 * super::accuracy(&predictions, test_y));
    Ok(ValidationResult {
        dev_accuracy: scores[best],
        test_accuracy,
        regs: cfg.regs.clone(),
        chosen_regs: vec![cfg.regs[best]],
        reg_scores: vec![scores],
        fold_test_accuracies: vec![test_accuracy],
        test_predictions: predictions,
        test_folds: vec![(0..test_y.len()).collect()],
    })
}

/// SentEval's `SplitClassifier` (see the module documentation).
#[allow(clippy::too_many_arguments)]
pub fn split_classifier(
    train_x: &Matrix,
    train_y: &[usize],
    dev_x: &Matrix,
    dev_y: &[usize],
    test_x: &Matrix,
    test_y: &[usize],
    n_classes: usize,
    cfg: &SentEvalConfig,
) -> Result<ValidationResult, ClassifyError> {
    check(train_x, train_y, "train")?;
    check(dev_x, dev_y, "dev")?;
    check(test_x, test_y, "test")?;
    check_regs(cfg)?;
    let models = cfg
        .regs
        .par_iter()
        .map(|&reg| {
            let (model, _, _) = cfg.classifier.fit(
                train_x,
                train_y,
                n_classes,
                reg,
                ValidationSource::Data(dev_x, dev_y),
            )?;
            let score = round2(100.0 * model.accuracy(dev_x, dev_y));
            Ok((model, score))
        })
        .collect::<Result<Vec<_>, ClassifyError>>()?;
    let scores: Vec<f64> = models.iter().map(|(_, s)| *s).collect();
    let best = best_index(&scores);
    let predictions = models[best].0.predict(test_x);
    let test_accuracy = round2(100.0 * super::accuracy(&predictions, test_y));
    Ok(ValidationResult {
        dev_accuracy: scores[best],
        test_accuracy,
        regs: cfg.regs.clone(),
        chosen_regs: vec![cfg.regs[best]],
        reg_scores: vec![scores],
        fold_test_accuracies: vec![test_accuracy],
        test_predictions: predictions,
        test_folds: vec![(0..test_y.len()).collect()],
    })
}

/// SentEval's MRPC features `np.c_[|a − b|, a ∗ b]`: each row is `[|a−b|…, a∗b…]`.
pub fn pair_features(a: &Matrix, b: &Matrix) -> Matrix {
    assert_eq!(
        (a.rows, a.cols),
        (b.rows, b.cols),
        "pair_features: shapes differ"
    );
    let d = a.cols;
    let mut out = Matrix::zeros(a.rows, 2 * d);
    for r in 0..a.rows {
        let (ra, rb) = (a.row(r), b.row(r));
        let row = out.row_mut(r);
        for j in 0..d {
            row[j] = (ra[j] - rb[j]).abs();
            row[d + j] = ra[j] * rb[j];
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unshuffled_folds_match_sklearn_on_a_worked_example() {
        // sklearn: StratifiedKFold(3).split(X, [0]*6 + [1]*4) tests
        // [0 1 6 7], [2 3 8], [4 5 9].
        let y = [0, 0, 0, 0, 0, 0, 1, 1, 1, 1];
        let folds = stratified_kfold(&y, 3, None).unwrap();
        let tests: Vec<Vec<usize>> = folds.iter().map(|f| f.test.clone()).collect();
        assert_eq!(tests, vec![vec![0, 1, 6, 7], vec![2, 3, 8], vec![4, 5, 9]]);
        assert_eq!(folds[0].train, vec![2, 3, 4, 5, 8, 9]);
    }

    #[test]
    fn shuffled_folds_partition_the_rows_and_keep_class_proportions() {
        // Three classes of 23, 11 and 6 rows, interleaved irregularly.
        let y: Vec<usize> = (0..40)
            .map(|i| match (i * 7) % 40 {
                v if v < 23 => 2,
                v if v < 34 => 0,
                _ => 1,
            })
            .collect();
        let counts = |rows: &[usize], c: usize| rows.iter().filter(|&&r| y[r] == c).count();
        for k in [2, 5, 10] {
            let folds = stratified_kfold(&y, k, Some(1111)).unwrap();
            assert_eq!(folds.len(), k);
            let mut seen = vec![0; y.len()];
            for f in &folds {
                f.test.iter().for_each(|&r| seen[r] += 1);
                let mut all: Vec<usize> = f.train.iter().chain(&f.test).copied().collect();
                all.sort_unstable();
                assert_eq!(all, (0..y.len()).collect::<Vec<_>>());
                assert!(f.train.windows(2).all(|w| w[0] < w[1]));
                for c in 0..3 {
                    let total = counts(&(0..y.len()).collect::<Vec<_>>(), c);
                    let got = counts(&f.test, c);
                    assert!(
                        got == total / k || got == total.div_ceil(k),
                        "k={k} c={c} got {got}"
                    );
                }
            }
            assert!(seen.iter().all(|&s| s == 1));
            let sizes: Vec<usize> = folds.iter().map(|f| f.test.len()).collect();
            assert!(sizes.iter().max().unwrap() - sizes.iter().min().unwrap() <= 1);
        }
        let a = stratified_kfold(&y, 5, Some(1)).unwrap();
        assert_eq!(a, stratified_kfold(&y, 5, Some(1)).unwrap());
        assert_ne!(a, stratified_kfold(&y, 5, Some(2)).unwrap());
        assert_ne!(a, stratified_kfold(&y, 5, None).unwrap());
    }

    #[test]
    fn impossible_fold_counts_are_errors() {
        assert!(stratified_kfold(&[0, 1, 0, 1], 1, None).is_err());
        assert!(stratified_kfold(&[0, 1, 0, 1], 5, None).is_err());
        assert!(stratified_kfold(&[0, 1, 0, 1, 2], 3, None).is_err());
        assert!(stratified_kfold(&[0, 0, 0, 1, 2], 3, None).is_ok());
    }

    #[test]
    fn pair_features_are_abs_difference_then_product() {
        let a = Matrix::from_rows(&[vec![1.0, -2.0]], 2);
        let b = Matrix::from_rows(&[vec![3.0, 4.0]], 2);
        assert_eq!(pair_features(&a, &b).data, vec![2.0, 6.0, 3.0, -8.0]);
    }

    /// Two noisy classes in 4 dimensions, separable along the first axis.
    fn data(n: usize, offset: usize) -> (Matrix, Vec<usize>) {
        let y: Vec<usize> = (0..n).map(|i| ((i + offset) * 5 / 3) % 2).collect();
        let rows: Vec<Vec<f32>> = (0..n)
            .map(|i| {
                let t = (i + offset) as f32;
                let s = if y[i] == 1 { 1.0 } else { -1.0 };
                vec![
                    s * (1.0 + 0.3 * (t * 0.7).sin()),
                    (t * 1.3).cos(),
                    (t * 0.2).sin(),
                    0.5,
                ]
            })
            .collect();
        (Matrix::from_rows(&rows, 4), y)
    }

    fn small_config() -> SentEvalConfig {
        SentEvalConfig {
            classifier: SentEvalClassifier {
                // Tiny data: few Adam steps per evaluation, so a larger step than 1e-3.
                lr: 0.05,
                max_epoch: 12,
                batch_size: 16,
                tenacity: 2,
                ..SentEvalClassifier::default()
            },
            kfold: 3,
            regs: vec![1e-2, 1e-4],
            final_validation_split: 0.1,
            ..SentEvalConfig::default()
        }
    }

    #[test]
    fn the_inner_kfold_gives_the_same_result_on_one_thread_and_on_many() {
        let cfg = small_config();
        let (x, y) = data(60, 7);
        let run = |threads: usize| {
            let pool = rayon::ThreadPoolBuilder::new()
                .num_threads(threads)
                .build()
                .unwrap();
            pool.install(|| inner_kfold_classifier(&x, &y, 2, &cfg).unwrap())
        };
        assert_eq!(run(1), run(3));
    }

    #[test]
    fn best_penalty_is_numpy_argmax() {
        assert_eq!(best_index(&[81.5, 82.25, 82.25, 80.0]), 1);
        assert_eq!(best_index(&[70.0]), 0);
    }

    #[test]
    fn the_three_schemes_follow_senteval_and_score_separable_data_perfectly() {
        let cfg = small_config();
        let (x, y) = data(90, 0);
        let (tx, ty) = data(40, 1000);
        let (dx, dy) = data(30, 500);
        let chosen = |scores: &[f64]| cfg.regs[best_index(scores)];

        let r = inner_kfold_classifier(&x, &y, 2, &cfg).unwrap();
        assert_eq!(r.reg_scores.len(), 3);
        assert_eq!(r.fold_test_accuracies.len(), 3);
        for (scores, reg) in r.reg_scores.iter().zip(&r.chosen_regs) {
            assert_eq!(*reg, chosen(scores));
        }
        let best: Vec<f64> = r
            .reg_scores
            .iter()
            .map(|s| s.iter().cloned().fold(0.0, f64::max))
            .collect();
        assert_eq!(r.dev_accuracy, round2(mean(&best)));
        assert_eq!((r.dev_accuracy, r.test_accuracy), (100.0, 100.0));
        // Every penalty scores 100 here: the first wins, as with np.argmax.
        assert_eq!(r.chosen_regs, vec![1e-2; 3]);
        assert_eq!(r.test_predictions, y);
        let mut rows: Vec<usize> = r.test_folds.concat();
        rows.sort_unstable();
        assert_eq!(rows, (0..90).collect::<Vec<_>>());

        let r = kfold_classifier(&x, &y, &tx, &ty, 2, &cfg).unwrap();
        assert_eq!(r.chosen_regs, vec![chosen(&r.reg_scores[0])]);
        assert_eq!((r.dev_accuracy, r.test_accuracy), (100.0, 100.0));
        assert_eq!(r.test_predictions, ty);

        let r = split_classifier(&x, &y, &dx, &dy, &tx, &ty, 2, &cfg).unwrap();
        assert_eq!(r.chosen_regs, vec![chosen(&r.reg_scores[0])]);
        assert_eq!((r.dev_accuracy, r.test_accuracy), (100.0, 100.0));

        // Deterministic, including under parallel fits.
        assert_eq!(
            r,
            split_classifier(&x, &y, &dx, &dy, &tx, &ty, 2, &cfg).unwrap()
        );
        assert!(kfold_classifier(&x, &y[1..], &tx, &ty, 2, &cfg).is_err());
    }
}

#[cfg(test)]
mod timing {
    use super::*;
    use rand::Rng;
    use std::time::Instant;

    /// `cargo test --release --lib senteval_protocol -- --ignored --nocapture`: the default
    /// protocol (10 × (4 penalties × 10 inner folds + 1) fits) on a noisy two-class problem
    /// the size of CR (3,775 rows), 512 dims, Bayes accuracy ≈ 92%.
    #[test]
    #[ignore]
    fn senteval_protocol_end_to_end() {
        let (n, d) = (3775, 512);
        let mut rng = seeded_rng(3, 77);
        let y: Vec<usize> = (0..n).map(|i| usize::from(i % 3 == 0)).collect();
        let mut data = Vec::with_capacity(n * d);
        for &label in &y {
            for j in 0..d {
                let shift = if j < 16 {
                    if label == 1 {
                        0.35
                    } else {
                        -0.35
                    }
                } else {
                    0.0
                };
                let noise: f32 = (0..3).map(|_| rng.random::<f32>() - 0.5).sum::<f32>() * 2.0;
                data.push(shift + noise);
            }
        }
        let x = Matrix::from_vec(n, d, data);
        let start = Instant::now();
        let r = inner_kfold_classifier(&x, &y, 2, &SentEvalConfig::default()).unwrap();
        eprintln!(
            "inner k-fold, {n} x {d}: dev {} test {} chosen {:?} in {:.1} s",
            r.dev_accuracy,
            r.test_accuracy,
            r.chosen_regs,
            start.elapsed().as_secs_f64()
        );
        assert!(r.test_accuracy > 85.0);
    }
}
