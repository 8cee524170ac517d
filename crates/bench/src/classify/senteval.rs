//! SentEval's `PyTorchClassifier` / `MLP` (facebookresearch/SentEval
//! `senteval/tools/classifier.py`), on top of [`super::mlp::train`].
//!
//! `fit` there: the validation set is the given data or, with `validation_split = s`, the
//! first `int(s·n)` rows of a random permutation of the training data (the rest trains).
//! Then, while not stopped and `nepoch <= max_epoch`: `epoch_size` passes of Adam over
//! shuffled batches, `nepoch += epoch_size`, score on the validation set; a strictly better
//! score saves the model, otherwise (early stop) the counter rule of [`super::Selection`]. The
//! model of best validation accuracy is returned with that accuracy. Evaluations happen at
//! `nepoch = epoch_size, 2·epoch_size, …` up to the first multiple past `max_epoch`, i.e.
//! `⌊max_epoch / epoch_size⌋ + 1` evaluations at most.
//!
//! Loss: SentEval sets `loss_fn.size_average = False` after building `nn.CrossEntropyLoss()`.
//! With the PyTorch of its release (0.3/0.4) that makes the batch loss a sum; from PyTorch 1.0
//! on the attribute is ignored and the loss is a mean. The published SentEval numbers came from
//! the summed loss, which is the default here ([`Reduction::Sum`]); `reduction` selects either.

use super::mlp::{seeded_rng, STREAM_SPLIT};
use super::{
    ClassifyError, Mlp, MlpSpec, Reduction, Selection, TieBreak, TrainConfig, TrainReport,
};
use harness_embed::matrix::Matrix;
use rand::seq::SliceRandom;
use serde::{Deserialize, Serialize};

/// The settings of SentEval's `params['classifier']`, and its seed.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct SentEvalClassifier {
    /// 0: logistic regression; otherwise one sigmoid hidden layer of this size.
    pub nhid: usize,
    pub dropout: f32,
    pub batch_size: usize,
    pub tenacity: usize,
    /// Passes over the training data between two validations.
    pub epoch_size: usize,
    pub max_epoch: usize,
    /// Adam's learning rate (SentEval's `optim = "adam"`: PyTorch's default 1e-3).
    pub lr: f32,
    pub reduction: Reduction,
    /// SentEval reseeds every classifier with the same seed (default 1111).
    pub seed: u64,
}

impl Default for SentEvalClassifier {
    /// SentEval's defaults, which are also its README's recommended "default config"
    /// (`nhid 0, optim adam, batch_size 64, tenacity 5, epoch_size 4`).
    fn default() -> Self {
        SentEvalClassifier {
            nhid: 0,
            dropout: 0.0,
            batch_size: 64,
            tenacity: 5,
            epoch_size: 4,
            max_epoch: 200,
            lr: 1e-3,
            reduction: Reduction::Sum,
            seed: 1111,
        }
    }
}

/// Where `fit` takes its validation set from.
#[derive(Debug, Clone, Copy)]
pub enum ValidationSource<'a> {
    /// `validation_data=(X, y)`.
    Data(&'a Matrix, &'a [usize]),
    /// `validation_split=s`: a random `int(s·n)` rows of the training data.
    Split(f64),
}

impl SentEvalClassifier {
    /// The network shape.
    pub fn spec(&self) -> MlpSpec {
        MlpSpec::senteval(self.nhid, self.dropout)
    }

    /// The optimisation settings for penalty `l2reg`.
    pub fn train_config(&self, l2reg: f32) -> TrainConfig {
        let epoch_size = self.epoch_size.max(1);
        TrainConfig {
            lr: self.lr,
            weight_decay: l2reg,
            batch_size: self.batch_size,
            epochs: (self.max_epoch / epoch_size + 1) * epoch_size,
            eval_every: epoch_size,
            reduction: self.reduction,
            selection: Selection::BestOnDev {
                ties: TieBreak::First,
                tenacity: Some(self.tenacity),
            },
            seed: self.seed,
            ..TrainConfig::default()
        }
    }

    /// SentEval's `MLP(...).fit(X, y, validation_…)` with `l2reg`: the model of best validation
    /// accuracy, that accuracy (a fraction) and the training report.
    pub fn fit(
        &self,
        x: &Matrix,
        y: &[usize],
        n_classes: usize,
        l2reg: f32,
        validation: ValidationSource<'_>,
    ) -> Result<(Mlp, f64, TrainReport), ClassifyError> {
        let cfg = self.train_config(l2reg);
        let (model, report) = match validation {
            ValidationSource::Data(dx, dy) => {
                super::train(&self.spec(), &cfg, x, y, n_classes, Some((dx, dy)))?
            }
            ValidationSource::Split(fraction) => {
                if y.len() != x.rows {
                    return super::invalid("training rows and labels differ in number");
                }
                let mut perm: Vec<usize> = (0..x.rows).collect();
                perm.shuffle(&mut seeded_rng(self.seed, STREAM_SPLIT));
                let n_dev = (fraction * x.rows as f64) as usize;
                if n_dev == 0 || n_dev == x.rows {
                    return super::invalid(format!(
                        "validation split {fraction} of {} rows leaves an empty part",
                        x.rows
                    ));
                }
                let (dev_idx, train_idx) = perm.split_at(n_dev);
                let pick = |idx: &[usize]| idx.iter().map(|&i| y[i]).collect::<Vec<_>>();
                let (tx, ty) = (x.select_rows(train_idx), pick(train_idx));
                let (dx, dy) = (x.select_rows(dev_idx), pick(dev_idx));
                super::train(&self.spec(), &cfg, &tx, &ty, n_classes, Some((&dx, &dy)))?
            }
        };
        let acc = report.best_dev_accuracy.unwrap_or(0.0);
        Ok((model, acc, report))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn evaluation_schedule_matches_senteval_loop() {
        let c = SentEvalClassifier::default();
        let cfg = c.train_config(1e-3);
        // nepoch = 0, 4, …, 200 pass the `nepoch <= max_epoch` test: 51 evaluations.
        assert_eq!((cfg.epochs, cfg.eval_every), (204, 4));
        assert_eq!(cfg.weight_decay, 1e-3);
        let c = SentEvalClassifier {
            max_epoch: 10,
            epoch_size: 3,
            ..c
        };
        assert_eq!(c.train_config(0.0).epochs, 12);
    }

    #[test]
    fn fit_with_a_split_learns_separable_data() {
        let n = 200;
        let rows: Vec<Vec<f32>> = (0..n)
            .map(|i| {
                let s = if i % 2 == 0 { 1.0 } else { -1.0 };
                vec![s + (i as f32 * 0.37).sin() * 0.5, (i as f32 * 0.11).cos()]
            })
            .collect();
        let x = Matrix::from_rows(&rows, 2);
        let y: Vec<usize> = (0..n).map(|i| i % 2).collect();
        for nhid in [0, 10] {
            let c = SentEvalClassifier {
                nhid,
                lr: 0.05,
                max_epoch: 40,
                ..SentEvalClassifier::default()
            };
            let (model, val_acc, report) = c
                .fit(&x, &y, 2, 1e-4, ValidationSource::Split(0.1))
                .unwrap();
            assert_eq!(val_acc, 1.0);
            assert_eq!(model.accuracy(&x, &y), 1.0);
            assert!(report.dev_accuracy.len() <= 11);
        }
        let c = SentEvalClassifier::default();
        assert!(c
            .fit(&x, &y, 2, 0.0, ValidationSource::Split(0.001))
            .is_err());
    }
}
