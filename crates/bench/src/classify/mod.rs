//! Classifiers over frozen sentence embeddings: logistic regression and MLPs trained with
//! Adam, and SentEval's validation schemes around them.
//!
//! References, followed structurally:
//! - facebookresearch/SentEval `senteval/tools/classifier.py` (`PyTorchClassifier`, `MLP`):
//!   LogReg is one `Linear`; the MLP is `Linear → Dropout → Sigmoid → Linear`; Adam (lr 1e-3),
//!   batch 64, `tenacity` 5, `epoch_size` 4, `max_epoch` 200, `l2reg` as Adam's weight decay on
//!   every parameter, `CrossEntropyLoss` with `size_average = False` (a summed loss),
//!   validation on given data or on a `validation_split` of the training data, keep the model
//!   of best validation accuracy. Reproduced in [`senteval`].
//! - facebookresearch/SentEval `senteval/tools/validation.py` (`InnerKFoldClassifier`,
//!   `KFoldClassifier`, `SplitClassifier`): which folds, which penalties
//!   (`[10**t for t in range(-5, -1)]` on the PyTorch path), how the best penalty is picked
//!   (arg-max of the rounded mean accuracy, first on ties), how the final model is trained and
//!   what is reported. Reproduced in [`validation`].
//! - facebookresearch/LASER `source/sent_classif.py` (`Net`): input dropout, then
//!   `Linear → act → Dropout` per hidden layer, Adam, the epoch of best dev accuracy (`>=`, the
//!   later epoch on ties). [`MlpSpec::laser`] and [`Selection::BestOnDev`] cover it.
//!
//! Numbers match the references within noise, not bit for bit: every random choice (weight
//! initialisation, shuffles, folds, validation splits, dropout masks) comes from a `u64` seed
//! through ChaCha8 streams rather than PyTorch's and NumPy's generators. With a given seed the
//! results are bit-identical from run to run and independent of the number of threads.
//!
//! Every matrix product goes through the private [`gemm`] below, except the training steps of
//! logistic regression, which have their own kernel (`mlp::logreg_gradient`: thousands of
//! 64-row steps of a `C × d` layer, where GEMM's packing cost more than the arithmetic).

pub mod mlp;
pub mod senteval;
pub mod validation;

pub use mlp::{
    train, Activation, DropoutAt, Mlp, MlpSpec, Reduction, Selection, TieBreak, TrainConfig,
    TrainReport,
};
pub use senteval::{SentEvalClassifier, ValidationSource};
pub use validation::{
    inner_kfold_classifier, kfold_classifier, pair_features, split_classifier, stratified_kfold,
    Fold, SentEvalConfig, ValidationResult,
};

/// Errors from bad inputs (shapes, labels, fold counts).
#[derive(Debug, thiserror::Error, PartialEq)]
pub enum ClassifyError {
    #[error("invalid classifier input: {0}")]
    Invalid(String),
}

pub(crate) fn invalid<T>(msg: impl Into<String>) -> Result<T, ClassifyError> {
    Err(ClassifyError::Invalid(msg.into()))
}

pub(crate) use harness_kernels::gemm;

/// Index of the largest value, the first one on ties (NaN never wins).
pub(crate) fn argmax(values: &[f32]) -> usize {
    let mut best = 0;
    for (i, &v) in values.iter().enumerate() {
        if v > values[best] {
            best = i;
        }
    }
    best
}

/// Fraction of equal entries ([`crate::metrics::accuracy`]), but 0 on an empty set.
pub fn accuracy(predicted: &[usize], truth: &[usize]) -> f64 {
    // 0, not metrics' NaN, on an empty set: early stopping compares dev accuracies with
    // `>=`, which NaN would silently break.
    if truth.is_empty() {
        return 0.0;
    }
    crate::metrics::accuracy(predicted, truth)
}

/// NumPy's `round(x, 2)`: half to even at the second decimal.
pub(crate) fn round2(x: f64) -> f64 {
    (x * 100.0).round_ties_even() / 100.0
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rounding_is_numpy_half_to_even() {
        assert_eq!(round2(81.125), 81.12);
        assert_eq!(round2(0.375), 0.38);
        assert_eq!(round2(12.3456), 12.35);
    }
}

#[cfg(test)]
mod timing {
    use super::*;
    use std::time::Instant;

    #[test]
    #[ignore]
    fn gemm_throughput() {
        for &(m, n, k, ta, tb) in &[
            (64, 512, 4096, false, true),
            (128, 512, 4096, false, true),
            (512, 4096, 64, true, false),
            (512, 4096, 128, true, false),
            (1024, 1024, 1024, false, false),
        ] {
            let a = vec![0.5f32; m * k];
            let b = vec![0.25f32; k * n];
            let mut c = vec![0.0f32; m * n];
            let reps = 20;
            let start = Instant::now();
            for _ in 0..reps {
                gemm(m, n, k, 1.0, &a, ta, &b, tb, 0.0, &mut c);
            }
            let s = start.elapsed().as_secs_f64();
            let single = Instant::now();
            for _ in 0..reps {
                // SAFETY: `a` holds m·k floats, `b` k·n and `c` m·n (allocated just above),
                // and the strides below read them as op(A) m × k, op(B) k × n and C m × n
                // row-major, each inside its own buffer; `c` is borrowed by nothing else.
                unsafe {
                    let (rsa, csa) = if ta { (1, m as isize) } else { (k as isize, 1) };
                    let (rsb, csb) = if tb { (1, k as isize) } else { (n as isize, 1) };
                    matrixmultiply::sgemm(
                        m,
                        k,
                        n,
                        1.0,
                        a.as_ptr(),
                        rsa,
                        csa,
                        b.as_ptr(),
                        rsb,
                        csb,
                        0.0,
                        c.as_mut_ptr(),
                        n as isize,
                        1,
                    );
                }
            }
            let s1 = single.elapsed().as_secs_f64();
            let gf = 2.0 * (m * n * k * reps) as f64 / 1e9;
            eprintln!(
                "{m}x{n}x{k} ta={ta} tb={tb}: ours {:.1} GFLOPS, one call {:.1} GFLOPS",
                gf / s,
                gf / s1
            );
        }
    }
}
