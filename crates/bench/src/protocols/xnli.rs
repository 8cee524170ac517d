//! XNLI zero-shot transfer (protocol `xnli-zero-shot`).
//!
//! Reference: LASER (Artetxe & Schwenk 2019, §4.1 "XNLI: cross-lingual NLI" and Appendix B)
//! and its implementation, facebookresearch/LASER `tasks/xnli/xnli.sh` with
//! `source/nli.py`:
//! - premise and hypothesis embeddings are L2-normalised (`faiss.normalize_L2` in
//!   `LoadDataNLI`), the features are `[p, h, |p − h|, p ∗ h]`;
//! - the classifier is `Net(nhid = [512, 384], dropout = 0.3, activation = TANH)`: input
//!   dropout, then `Linear → Tanh → Dropout` per hidden layer, then the output `Linear`
//!   ([`MlpSpec::laser`]);
//! - Adam, lr 0.001, batch 128, 200 epochs (`N=200`), mean cross-entropy, no weight decay;
//!   after every epoch the model is scored on the English XNLI dev set and the best is kept
//!   (`corr >= corr_best`: the later epoch on ties, [`TieBreak::Last`]);
//! - the kept model is applied unchanged to the XNLI test set of every language, and with
//!   `--cross-lingual` to every premise-language × hypothesis-language combination
//!   (labels of the hypothesis file; they are the same in every language).
//!
//! Differences, all reported in the result's `notes`:
//! - LASER trains on MultiNLI train (393k pairs). Neither MultiNLI (train or dev) nor SNLI
//!   train is available here (datasets README, "Known gaps"), so the classifier trains on
//!   the English NLI data that is: SNLI dev + SNLI test + SICK train (SICK-E labels),
//!   ≈ 24k pairs, read from the `snli` and `sick` dataset folders next to `xnli`.
//! - The reference's seed is 159753 with PyTorch's generators; here every random choice
//!   (initialisation, shuffles, dropout) derives from the benchmark seed (ChaCha8 streams).
//!
//! With `own_head: <name>` (multilingual USE Table 4, §3.6: XNLI "fed into" the model's own
//! NLI task head, trained on English NLI with the encoder) no classifier is trained: the
//! encoder's trained pair head of that name (`Encoder::pair_logits`, a run whose recipe
//! has it) classifies raw (unnormalised, as in training) premise and hypothesis vectors;
//! its classes are harness's NLI label order (entailment, neutral, contradiction), the
//! one the `nli_classification` objective trains. The English dev accuracy is reported for
//! information.
//!
//! A run that reads some languages through encoders of their own (`model.languages`,
//! [`harness_embed::Encoder::for_language`]: the XNLI paper's X-BiLSTM and X-CBOW, one
//! target encoder per language aligned to the frozen English one, §4.2.2) has each
//! language's sets embedded by its own encoder; with `unaligned` (default) each such
//! language is also read through the main (English) encoder (`scores.unaligned`: the target
//! encoder before alignment, a copy of the English one) and the mean L2 distance between
//! its embeddings and those of the English sentences they translate is reported for both
//! (`scores.alignment_distance`; Figure 2's alignment loss without its negative terms).
//! The declaration's `split` picks the evaluated sets: `test` (`xnli`, Table 4) or `dev`
//! (`xnli-dev`: the validation sets the paper selects models on, §5.1, and Table 5).
//!
//! Items: a `Correct` group per test language (`de`: right or wrong per test pair, weight 1:
//! the headline is their mean) and, with `matrix`, one per off-diagonal cell
//! (`<premise language>/<hypothesis language>`, weight 0).

use super::def::{
    params_of, parses_as, sub_seed, CheckedParams, Context, Outcome, ProtocolDef, ScoresDef,
};
use crate::benchmark::Benchmark;
use crate::classify::{train, Activation, Mlp, MlpSpec, Selection, TieBreak, TrainConfig};
use crate::error::BenchError;
use crate::items::{Group, Items, Outcomes};
use harness_data::loaders::{sick, snli, xnli};
use harness_data::records::{NliPair, Split};
use harness_embed::matrix::Matrix;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// English NLI training sources available here.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum NliSource {
    /// SNLI 1.0 dev (9,842 gold pairs), folder `snli`.
    SnliDev,
    /// SNLI 1.0 test (9,824 gold pairs), folder `snli`.
    SnliTest,
    /// SICK SemEval-2014 train (4,439 pairs, SICK-E labels), folder `sick`.
    SickTrain,
    /// SICK trial (500 pairs).
    SickDev,
    /// SICK test (4,906 pairs).
    SickTest,
}

impl NliSource {
    fn name(self) -> &'static str {
        match self {
            NliSource::SnliDev => "snli-dev",
            NliSource::SnliTest => "snli-test",
            NliSource::SickTrain => "sick-train",
            NliSource::SickDev => "sick-dev",
            NliSource::SickTest => "sick-test",
        }
    }

    /// The dataset folder and split it is read from.
    fn place(self) -> (&'static str, Split) {
        match self {
            NliSource::SnliDev => ("snli", Split::Dev),
            NliSource::SnliTest => ("snli", Split::Test),
            NliSource::SickTrain => ("sick", Split::Train),
            NliSource::SickDev => ("sick", Split::Dev),
            NliSource::SickTest => ("sick", Split::Test),
        }
    }

    fn load(self, ctx: &Context) -> Result<Vec<NliPair>, BenchError> {
        let (folder, split) = self.place();
        let dir = ctx.side_dataset(folder)?;
        if !dir.is_dir() {
            return Err(ctx.error(format!(
                "the English NLI training data `{}` needs the dataset folder {} next to xnli; \
                 install it with `harness datasets fetch {folder}`",
                self.name(),
                dir.display()
            )));
        }
        Ok(match folder {
            "snli" => snli::load(dir, split)?,
            _ => sick::entailment(dir, split)?,
        })
    }
}

/// The English NLI datasets the classifier trains on (`params.train`): read beside `xnli`.
pub fn side_datasets(benchmark: &Benchmark) -> Result<Vec<String>, BenchError> {
    let params: XnliParams = params_of(benchmark)?;
    let mut out: Vec<String> = Vec::new();
    if params.own_head.is_some() {
        // Nothing is trained: no English training set is read.
        return Ok(out);
    }
    for s in params.train {
        let folder = s.place().0.to_string();
        if !out.contains(&folder) {
            out.push(folder);
        }
    }
    Ok(out)
}

/// Parameters of `xnli-zero-shot` (defaults: LASER `tasks/xnli/xnli.sh`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct XnliParams {
    /// English NLI training sets, concatenated in this order.
    pub train: Vec<NliSource>,
    /// Use only this fraction of the training pairs, from the beginning (LASER's
    /// `--fraction`).
    pub train_fraction: f64,
    /// Language of the dev set that picks the epoch.
    pub dev_language: String,
    /// Hidden layer sizes (`nhid="512 384"`).
    pub hidden: Vec<usize>,
    pub activation: Activation,
    /// Dropout on the input and after every hidden layer (`drop=0.3`).
    pub dropout: f32,
    pub lr: f32,
    pub batch_size: usize,
    /// Epochs (`N=200`); the one of best dev accuracy is kept.
    pub epochs: usize,
    /// L2-normalise the sentence embeddings before building the features.
    pub normalize: bool,
    /// Also evaluate every premise-language × hypothesis-language combination (`--cross-lingual`).
    pub matrix: bool,
    /// Evaluate on only the first this many pairs of the dev set and of each test set (0:
    /// all). For quick smoke runs; the result's notes say so.
    pub eval_limit: usize,
    /// Classify with the encoder's own trained pair head of this name instead of training
    /// a classifier (module doc); `train`, the classifier settings and `normalize` are then
    /// unused.
    pub own_head: Option<String>,
    /// Also read each language that has an encoder of its own through the main encoder
    /// (`scores.unaligned`; the XNLI alignment baselines' target encoders before alignment).
    pub unaligned: bool,
}

impl Default for XnliParams {
    fn default() -> Self {
        XnliParams {
            train: vec![
                NliSource::SnliDev,
                NliSource::SnliTest,
                NliSource::SickTrain,
            ],
            train_fraction: 1.0,
            dev_language: "en".into(),
            hidden: vec![512, 384],
            activation: Activation::Tanh,
            dropout: 0.3,
            lr: 1e-3,
            batch_size: 128,
            epochs: 200,
            normalize: true,
            matrix: false,
            eval_limit: 0,
            own_head: None,
            unaligned: true,
        }
    }
}

/// Embeddings of the premises and of the hypotheses of a set of pairs, and its labels.
struct Embedded {
    premises: Matrix,
    hypotheses: Matrix,
    labels: Vec<usize>,
}

/// Embeds the pairs of `language` through the encoder that reads it (`own`: its own
/// encoder when the run has one, [`Context::embed_in`]; else the main encoder).
fn embed_pairs(
    ctx: &Context,
    language: &str,
    own: bool,
    pairs: &[NliPair],
    normalize: bool,
) -> Result<Embedded, BenchError> {
    let p: Vec<&str> = pairs.iter().map(|x| x.premise.as_str()).collect();
    let h: Vec<&str> = pairs.iter().map(|x| x.hypothesis.as_str()).collect();
    let (mut premises, mut hypotheses) = if own {
        (ctx.embed_in(language, &p)?, ctx.embed_in(language, &h)?)
    } else {
        (ctx.embed(&p)?, ctx.embed(&h)?)
    };
    if normalize {
        premises.l2_normalize_rows();
        hypotheses.l2_normalize_rows();
    }
    Ok(Embedded {
        premises,
        hypotheses,
        labels: pairs.iter().map(|x| x.label.index()).collect(),
    })
}

/// Mean L2 distance between the premise embeddings of `a` and `b` and between their
/// hypothesis embeddings, row by row (translations of each other); `None` when the sets
/// differ in size (not parallel).
fn mean_distance(a: &Embedded, b: &Embedded) -> Option<f64> {
    if (a.premises.rows, a.premises.cols) != (b.premises.rows, b.premises.cols)
        || a.premises.rows == 0
    {
        return None;
    }
    let dist = |x: &[f32], y: &[f32]| -> f64 {
        x.iter()
            .zip(y)
            .map(|(p, q)| ((p - q) as f64).powi(2))
            .sum::<f64>()
            .sqrt()
    };
    let n = a.premises.rows;
    let total: f64 = (0..n)
        .map(|r| {
            dist(a.premises.row(r), b.premises.row(r))
                + dist(a.hypotheses.row(r), b.hypotheses.row(r))
        })
        .sum();
    Some(total / (2 * n) as f64)
}

/// `[p, h, |p − h|, p ∗ h]`, one row per pair.
pub fn nli_features(p: &Matrix, h: &Matrix) -> Matrix {
    assert_eq!(
        (p.rows, p.cols),
        (h.rows, h.cols),
        "nli_features: shapes differ"
    );
    let d = p.cols;
    let mut out = Matrix::zeros(p.rows, 4 * d);
    for r in 0..p.rows {
        let (pr, hr) = (p.row(r), h.row(r));
        let o = out.row_mut(r);
        o[..d].copy_from_slice(pr);
        o[d..2 * d].copy_from_slice(hr);
        for j in 0..d {
            o[2 * d + j] = (pr[j] - hr[j]).abs();
            o[3 * d + j] = pr[j] * hr[j];
        }
    }
    out
}

fn percent(x: f64) -> f64 {
    100.0 * x
}

/// What classifies a premise × hypothesis set.
enum Classifier<'a> {
    /// A classifier trained on the pair features here (LASER's protocol).
    Trained(Mlp),
    /// The encoder's own trained pair head of this name.
    OwnHead(&'a str),
}

impl Classifier<'_> {
    /// Predicted classes of the pairs `(p[i], h[i])`.
    fn predict(&self, ctx: &Context, p: &Matrix, h: &Matrix) -> Result<Vec<usize>, BenchError> {
        match self {
            Classifier::Trained(model) => Ok(model.predict(&nli_features(p, h))),
            Classifier::OwnHead(head) => {
                let logits = ctx
                    .encoder
                    .pair_logits(head, p, h)
                    .map_err(|e| ctx.error(e.to_string()))?
                    .ok_or_else(|| {
                        ctx.error(format!(
                            "params.own_head: encoder `{}` has no trained head `{head}`; \
                             evaluate a run whose recipe trains an NLI head of that name, \
                             or drop `own_head` to train a classifier on its embeddings",
                            ctx.encoder.name()
                        ))
                    })?;
                if logits.cols != 3 || logits.rows != p.rows {
                    return Err(ctx.error(format!(
                        "params.own_head: head `{head}` gave {}×{} logits for {} pairs; an \
                         NLI head has 3 classes",
                        logits.rows, logits.cols, p.rows
                    )));
                }
                Ok((0..logits.rows)
                    .map(|r| {
                        let row = logits.row(r);
                        // The first of equal maxima, as `Mlp::predict`.
                        (0..row.len()).fold(0, |best, j| if row[j] > row[best] { j } else { best })
                    })
                    .collect())
            }
        }
    }

    /// Accuracy (%) on `(p, h)` with `labels`, with each pair's right/wrong flag.
    fn outcomes(
        &self,
        ctx: &Context,
        p: &Matrix,
        h: &Matrix,
        labels: &[usize],
    ) -> Result<(f64, Outcomes), BenchError> {
        let predicted = crate::timing::part("classification", || self.predict(ctx, p, h))?;
        let acc = percent(crate::classify::accuracy(&predicted, labels));
        let correct = predicted.iter().zip(labels).map(|(p, l)| p == l).collect();
        Ok((acc, Outcomes::correct(correct)))
    }
}

impl CheckedParams for XnliParams {
    fn check(&self, _: &Benchmark) -> Result<(), String> {
        if self.train.is_empty() && self.own_head.is_none() {
            return Err("params.train names no training set".into());
        }
        if !(self.train_fraction > 0.0 && self.train_fraction <= 1.0) {
            return Err(format!(
                "params.train_fraction {} is outside (0, 1]",
                self.train_fraction
            ));
        }
        Ok(())
    }
}

/// The `scores` of an `xnli-zero-shot` result (accuracies in %). The classifier's fields
/// depend on how it was obtained: `own_head` with `params.own_head`, the training fields
/// (`chosen_epoch` ... `train_sets`) otherwise.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct XnliScores {
    /// Test accuracy per language (`de`), premise and hypothesis in that language.
    pub accuracy: BTreeMap<String, f64>,
    /// Mean of `accuracy` over the languages: the headline.
    pub average: f64,
    /// The evaluated split (the declaration's: `test` or `dev`).
    pub split: String,
    /// Language of the dev set (`params.dev_language`).
    pub dev_language: String,
    /// Accuracy on that dev set of the classifier used (null: the training evaluated none).
    pub dev_accuracy: Option<f64>,
    /// The encoder's own pair head that classified (`params.own_head`; nothing trained).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub own_head: Option<String>,
    /// Trained classifier: the epoch kept (best dev accuracy).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub chosen_epoch: Option<usize>,
    /// Trained classifier: epochs done.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub epochs_run: Option<usize>,
    /// Trained classifier: `[epochs done, dev accuracy]` at each evaluation.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dev_curve: Option<Vec<(usize, f64)>>,
    /// Trained classifier: English training pairs used (after `train_fraction`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub train_pairs: Option<usize>,
    /// Trained classifier: pairs read from each training set (`snli-dev`), before
    /// `train_fraction`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub train_sets: Option<BTreeMap<String, usize>>,
    /// The languages read through encoders of their own, in declaration order (absent when
    /// none is).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub own_encoders: Option<Vec<String>>,
    /// With own encoders and `params.unaligned`: the accuracies with each own-encoder
    /// language read through the main encoder instead (every other language as in
    /// `accuracy`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub unaligned: Option<UnalignedScores>,
    /// With own encoders: mean L2 distances to the English sentences translated.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub alignment_distance: Option<AlignmentDistances>,
    /// With `params.matrix`: every premise language × hypothesis language.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub matrix: Option<CrossLingualMatrix>,
}

/// Accuracies (%) with each own-encoder language read through the main encoder.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct UnalignedScores {
    /// Per language.
    pub accuracy: BTreeMap<String, f64>,
    /// Their mean over the languages.
    pub average: f64,
}

/// Per own-encoder language, the mean L2 distance between its sentences' embeddings and
/// those of the English sentences they translate (premises and hypotheses; a language whose
/// set is not parallel to the English one is absent).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct AlignmentDistances {
    /// Through the language's own encoder.
    pub aligned: BTreeMap<String, f64>,
    /// Through the main encoder (with `params.unaligned`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub unaligned: Option<BTreeMap<String, f64>>,
}

/// The cross-lingual accuracy matrix (%).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct CrossLingualMatrix {
    /// What a row is: `premise language`.
    pub rows: String,
    /// What a column is: `hypothesis language`.
    pub columns: String,
    /// The languages of the rows and of the columns, in order.
    pub languages: Vec<String>,
    /// `accuracy[i][j]`: premises of language `i`, hypotheses (and labels) of language `j`.
    pub accuracy: Vec<Vec<f64>>,
    /// Mean of every cell.
    pub average: f64,
}

/// `xnli-zero-shot`, defined once: [`super::ALL`] lists it.
pub const DEF: ProtocolDef = ProtocolDef {
    name: "xnli-zero-shot",
    check_params: parses_as::<XnliParams>,
    side_datasets,
    run,
    scores: ScoresDef::of::<XnliScores>(),
};

/// The XNLI pairs of `language` in `split`, the first `eval_limit` only when it is not 0.
fn load_limited(
    ctx: &Context,
    language: &str,
    split: Split,
    eval_limit: usize,
) -> Result<Vec<NliPair>, BenchError> {
    let mut v = xnli::load(ctx.dataset_dir, language, split)?;
    if eval_limit > 0 {
        v.truncate(eval_limit);
    }
    Ok(v)
}

/// The classifier of a run, with the dev accuracy and the notes that say how it was had.
struct Fitted<'a> {
    classifier: Classifier<'a>,
    /// On the `dev_language` dev set (%).
    dev_accuracy: Option<f64>,
    /// How it was trained (`None`: the encoder's own head).
    training: Option<Training>,
    notes: Vec<String>,
}

/// What training the classifier reports.
struct Training {
    chosen_epoch: usize,
    epochs_run: usize,
    /// `(epochs done, dev accuracy %)`.
    dev_curve: Vec<(usize, f64)>,
    /// Pairs used, of `total` read.
    train_pairs: usize,
    total: usize,
    /// Pairs read per training set.
    train_sets: BTreeMap<String, usize>,
}

/// The encoder's own pair head `head`, scored on the dev set for information.
fn own_head_classifier<'a>(
    ctx: &Context,
    params: &XnliParams,
    head: &'a str,
    dev: &Embedded,
) -> Result<Fitted<'a>, BenchError> {
    let classifier = Classifier::OwnHead(head);
    let (dev_acc, _) = classifier.outcomes(ctx, &dev.premises, &dev.hypotheses, &dev.labels)?;
    let note = format!(
        "Classified by the encoder's own NLI head `{head}`, trained with it on the \
         recipe's English NLI task (multilingual USE Table 4); no classifier is trained \
         here. {} XNLI dev accuracy {dev_acc:.2}% (for information).",
        params.dev_language
    );
    Ok(Fitted {
        classifier,
        dev_accuracy: Some(dev_acc),
        training: None,
        notes: vec![note],
    })
}

/// LASER's classifier, trained on the English NLI sets of `params.train` with its epoch
/// chosen on the dev set.
fn trained_classifier(
    ctx: &Context,
    params: &XnliParams,
    dev: &Embedded,
    normalize: bool,
) -> Result<Fitted<'static>, BenchError> {
    // English training data.
    let mut train_pairs = Vec::new();
    let mut train_counts = BTreeMap::new();
    for source in &params.train {
        let pairs = source.load(ctx)?;
        train_counts.insert(source.name().to_string(), pairs.len());
        train_pairs.extend(pairs);
    }
    let total = train_pairs.len();
    let n_train = ((total as f64 * params.train_fraction) as usize).max(1);
    train_pairs.truncate(n_train);
    let train_set = embed_pairs(ctx, "en", true, &train_pairs, normalize)?;
    let (x_train, x_dev) = crate::timing::part("features", || {
        (
            nli_features(&train_set.premises, &train_set.hypotheses),
            nli_features(&dev.premises, &dev.hypotheses),
        )
    });
    drop(train_pairs);

    let spec = MlpSpec::laser(&params.hidden, params.activation, params.dropout);
    let cfg = TrainConfig {
        lr: params.lr,
        batch_size: params.batch_size,
        epochs: params.epochs,
        selection: Selection::BestOnDev {
            ties: TieBreak::Last,
            tenacity: None,
        },
        seed: sub_seed(ctx.seed, "xnli/classifier"),
        ..TrainConfig::default()
    };
    let (model, report) = crate::timing::part("classifier training", || {
        train(
            &spec,
            &cfg,
            &x_train,
            &train_set.labels,
            3,
            Some((&x_dev, &dev.labels)),
        )
    })
    .map_err(|e| ctx.error(e.to_string()))?;
    let notes = vec![
        format!(
            "Trained on {} English pairs ({}), NOT on MultiNLI train as LASER and XNLI do: \
             MultiNLI (train and dev) and SNLI train are not available (datasets README, \
             Known gaps). Numbers are not comparable to the published ones.",
            n_train,
            params
                .train
                .iter()
                .map(|s| format!("{} {}", s.name(), train_counts[s.name()]))
                .collect::<Vec<_>>()
                .join(" + ")
        ),
        format!(
            "Epoch chosen by {} XNLI dev accuracy: epoch {} of {} ({:.2}%).",
            params.dev_language,
            report.best_epoch,
            report.epochs_run,
            report.best_dev_accuracy.map(percent).unwrap_or(f64::NAN)
        ),
    ];
    Ok(Fitted {
        classifier: Classifier::Trained(model),
        dev_accuracy: report.best_dev_accuracy.map(percent),
        training: Some(Training {
            chosen_epoch: report.best_epoch,
            epochs_run: report.epochs_run,
            dev_curve: report
                .dev_accuracy
                .iter()
                .map(|&(e, a)| (e, percent(a)))
                .collect(),
            train_pairs: n_train,
            total,
            train_sets: train_counts,
        }),
        notes,
    })
}

/// How the run reads the test sets: the evaluated split, the pairs kept, the embeddings'
/// normalisation, and the English set that the languages with encoders of their own are
/// compared with.
struct Reading<'a> {
    split: Split,
    eval_limit: usize,
    normalize: bool,
    /// The languages read by encoders of their own, in declaration order.
    own: Vec<&'a String>,
    /// The English set of `split` (only when `own` is not empty).
    english: Option<Embedded>,
}

/// What the per-language evaluation measured.
struct PerLanguage {
    /// Accuracy (%) per language.
    accuracy: BTreeMap<String, f64>,
    /// Their mean: the headline.
    average: f64,
    /// Every language through the main encoder (`params.unaligned` with own encoders).
    unaligned: BTreeMap<String, f64>,
    unaligned_sum: f64,
    /// Mean distances to English through the own encoders and through the main one.
    distance: BTreeMap<String, f64>,
    unaligned_distance: BTreeMap<String, f64>,
    /// One group per language.
    groups: Vec<Group>,
    /// Each language's test set (kept only for the matrix).
    embedded: Vec<Embedded>,
}

/// Each language, premise and hypothesis in that language.
fn evaluate_languages(
    ctx: &Context,
    params: &XnliParams,
    languages: &[String],
    reading: &Reading,
    classifier: &Classifier,
) -> Result<PerLanguage, BenchError> {
    let (own, english) = (&reading.own, &reading.english);
    let mut out = PerLanguage {
        accuracy: BTreeMap::new(),
        average: 0.0,
        unaligned: BTreeMap::new(),
        unaligned_sum: 0.0,
        distance: BTreeMap::new(),
        unaligned_distance: BTreeMap::new(),
        groups: Vec::new(),
        embedded: Vec::new(),
    };
    let mut sum = 0.0;
    for lang in languages {
        let pairs = load_limited(ctx, lang, reading.split, reading.eval_limit)?;
        let e = embed_pairs(ctx, lang, true, &pairs, reading.normalize)?;
        let (acc, outcomes) = classifier.outcomes(ctx, &e.premises, &e.hypotheses, &e.labels)?;
        if let Some(en) = english.as_ref().filter(|_| own.contains(&lang)) {
            if let Some(d) = mean_distance(&e, en) {
                out.distance.insert(lang.clone(), d);
            }
        }
        if let Some(en) = english.as_ref().filter(|_| params.unaligned) {
            let before = if own.contains(&lang) {
                let b = embed_pairs(ctx, lang, false, &pairs, reading.normalize)?;
                if let Some(d) = mean_distance(&b, en) {
                    out.unaligned_distance.insert(lang.clone(), d);
                }
                classifier
                    .outcomes(ctx, &b.premises, &b.hypotheses, &b.labels)?
                    .0
            } else {
                acc
            };
            out.unaligned.insert(lang.clone(), before);
            out.unaligned_sum += before;
        }
        out.groups.push(Group {
            name: lang.clone(),
            weight: 1.0,
            outcomes,
        });
        sum += acc;
        out.accuracy.insert(lang.clone(), acc);
        if params.matrix {
            out.embedded.push(e);
        }
    }
    out.average = if languages.is_empty() {
        0.0
    } else {
        sum / languages.len() as f64
    };
    Ok(out)
}

/// Every premise language × hypothesis language (labels are aligned), with a group per
/// off-diagonal cell appended to `groups`.
fn cross_lingual_matrix(
    ctx: &Context,
    languages: &[String],
    embedded: &[Embedded],
    classifier: &Classifier,
    groups: &mut Vec<Group>,
) -> Result<CrossLingualMatrix, BenchError> {
    // Rows: premise language; columns: hypothesis language (labels are aligned).
    let mut rows = Vec::with_capacity(languages.len());
    for (i, p) in embedded.iter().enumerate() {
        let mut row = Vec::with_capacity(languages.len());
        for (j, h) in embedded.iter().enumerate() {
            if p.premises.rows != h.hypotheses.rows {
                return Err(ctx.error("XNLI test sets of different sizes cannot be crossed"));
            }
            let (acc, outcomes) =
                classifier.outcomes(ctx, &p.premises, &h.hypotheses, &h.labels)?;
            row.push(acc);
            // The diagonal holds the same items as the language's own group.
            if i != j {
                groups.push(Group {
                    name: format!("{}/{}", languages[i], languages[j]),
                    weight: 0.0,
                    outcomes,
                });
            }
        }
        rows.push(row);
    }
    let n = languages.len() as f64;
    let average = rows.iter().flatten().sum::<f64>() / (n * n).max(1.0);
    Ok(CrossLingualMatrix {
        rows: "premise language".into(),
        columns: "hypothesis language".into(),
        languages: languages.to_vec(),
        accuracy: rows,
        average,
    })
}

/// The note on the languages read through encoders of their own.
fn own_encoders_note(ctx: &Context, params: &XnliParams, own: &[&String]) -> String {
    format!(
        "{} read through encoders of their own (the run's `model.languages`), every other \
         language through the main encoder.{} `alignment_distance`: mean L2 distance \
         between the {} embeddings of each language's sentences and of the English \
         sentences they translate (XNLI Figure 2's alignment loss without its negative \
         terms).",
        own.iter()
            .map(|l| l.as_str())
            .collect::<Vec<_>>()
            .join(", "),
        if params.unaligned {
            " `unaligned` reads each of them through the main (English) encoder instead: \
             the target encoder as it starts alignment, a copy of the English one."
        } else {
            ""
        },
        ctx.benchmark.split
    )
}

/// Runs the protocol.
pub fn run(ctx: &Context) -> Result<Outcome, BenchError> {
    let params: XnliParams = ctx.params()?;
    let languages = ctx.languages_or(xnli::LANGUAGES.iter().map(|s| s.to_string()).collect());

    // The own head reads the vectors it was trained on: unnormalised.
    let normalize = params.normalize && params.own_head.is_none();
    let split = split_of(ctx)?;
    let dev_pairs = load_limited(ctx, &params.dev_language, Split::Dev, params.eval_limit)?;
    let dev = embed_pairs(ctx, &params.dev_language, true, &dev_pairs, normalize)?;

    let fitted = match &params.own_head {
        Some(head) => own_head_classifier(ctx, &params, head, &dev)?,
        None => trained_classifier(ctx, &params, &dev, normalize)?,
    };
    let mut notes = fitted.notes;

    let reading = reading(ctx, &params, &languages, split, normalize)?;

    let per = evaluate_languages(ctx, &params, &languages, &reading, &fitted.classifier)?;
    let mut groups = per.groups;
    let (mut unaligned, mut alignment_distance) = (None, None);
    if reading.english.is_some() {
        if params.unaligned {
            unaligned = Some(UnalignedScores {
                accuracy: per.unaligned,
                average: per.unaligned_sum / languages.len().max(1) as f64,
            });
        }
        alignment_distance = Some(AlignmentDistances {
            aligned: per.distance,
            unaligned: params.unaligned.then_some(per.unaligned_distance),
        });
        notes.push(own_encoders_note(ctx, &params, &reading.own));
    }
    let matrix = if params.matrix {
        Some(cross_lingual_matrix(
            ctx,
            &languages,
            &per.embedded,
            &fitted.classifier,
            &mut groups,
        )?)
    } else {
        None
    };

    let training = fitted.training;
    notes.extend(limit_notes(&params, training.as_ref()));
    let scores = XnliScores {
        accuracy: per.accuracy,
        average: per.average,
        split: ctx.benchmark.split.clone(),
        dev_language: params.dev_language.clone(),
        dev_accuracy: fitted.dev_accuracy,
        own_head: params.own_head.clone(),
        chosen_epoch: training.as_ref().map(|t| t.chosen_epoch),
        epochs_run: training.as_ref().map(|t| t.epochs_run),
        train_pairs: training.as_ref().map(|t| t.train_pairs),
        dev_curve: training.as_ref().map(|t| t.dev_curve.clone()),
        train_sets: training.map(|t| t.train_sets),
        own_encoders: (!reading.own.is_empty())
            .then(|| reading.own.iter().map(|l| l.to_string()).collect()),
        unaligned,
        alignment_distance,
        matrix,
    };
    Ok(Outcome {
        main_metric: "accuracy".into(),
        main_score: scores.average,
        scores: ctx.scores(&scores)?,
        params: serde_json::to_value(&params).map_err(|e| ctx.error(e.to_string()))?,
        notes,
        items: Some(Items::mean_of(groups)),
    })
}

/// The benchmark's split: XNLI has `dev` (or `validation`) and `test` here.
fn split_of(ctx: &Context) -> Result<Split, BenchError> {
    match ctx.benchmark.split.as_str() {
        "test" => Ok(Split::Test),
        "dev" | "validation" => Ok(Split::Dev),
        other => Err(ctx.error(format!(
            "split `{other}`: XNLI has `dev` and `test` here (no train split)"
        ))),
    }
}

/// How the languages are read. Languages read by encoders of their own (the XNLI alignment
/// baselines) are each also measured through the main (English) encoder, the target encoder
/// as it was before alignment, and both are compared with the English sentences they
/// translate: the English set is embedded for them.
fn reading<'a>(
    ctx: &Context,
    params: &XnliParams,
    languages: &'a [String],
    split: Split,
    normalize: bool,
) -> Result<Reading<'a>, BenchError> {
    let own: Vec<&String> = languages
        .iter()
        .filter(|l| ctx.has_own_encoder(l))
        .collect();
    let english = if own.is_empty() {
        None
    } else {
        let pairs = load_limited(ctx, "en", split, params.eval_limit)?;
        Some(embed_pairs(ctx, "en", true, &pairs, normalize)?)
    };
    Ok(Reading {
        split,
        eval_limit: params.eval_limit,
        normalize,
        own,
        english,
    })
}

/// Notes on what a smoke run or a training fraction left out.
fn limit_notes(params: &XnliParams, training: Option<&Training>) -> Vec<String> {
    let mut notes = Vec::new();
    if params.eval_limit > 0 {
        notes.push(format!(
            "Smoke run: only the first {} pairs of the dev and test sets were evaluated.",
            params.eval_limit
        ));
    }
    if let Some(t) = training.filter(|t| t.train_pairs < t.total) {
        notes.push(format!(
            "Only the first {} of {} training pairs were used (train_fraction {}).",
            t.train_pairs, t.total, params.train_fraction
        ));
    }
    notes
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::protocols::fake_encoder::{bench, declared_params, write, FakeEncoder};
    use crate::protocols::test_support::assert_typed;
    use harness_embed::cache::CachedEncoder;
    use harness_embed::hashed::HashedNgrams;
    use harness_embed::Encoder;
    use std::path::Path;

    /// A synthetic NLI pair of concept `k` and label `l`: entailment repeats the concept,
    /// neutral names the next one, contradiction negates it.
    fn pair_line(k: usize, l: usize, lang: &str, noise: usize) -> (String, String) {
        let p = format!("{lang}: c{k} n{noise}");
        let h = match l {
            0 => format!("{lang}: c{k} n{}", noise + 1000),
            1 => format!("{lang}: c{} n{}", (k + 1) % 8, noise + 1000),
            _ => format!("{lang}: neg c{k} n{}", noise + 1000),
        };
        (p, h)
    }

    fn synthetic_dir(langs: &[&str]) -> tempfile::TempDir {
        let tmp = tempfile::tempdir().unwrap();
        let root = tmp.path();
        let mut snli_dev = String::from("premise\thypothesis\tlabel\n");
        for i in 0..240 {
            let (p, h) = pair_line(i % 8, i % 3, "en", i);
            snli_dev.push_str(&format!("{p}\t{h}\t{}\n", i % 3));
        }
        write(root, "snli/validation.tsv", &snli_dev);
        write(root, "snli/test.tsv", "premise\thypothesis\tlabel\n");
        let names = ["ENTAILMENT", "NEUTRAL", "CONTRADICTION"];
        let mut sick = String::from(
            "pair_ID\tsentence_A\tsentence_B\trelatedness_score\tentailment_judgment\n",
        );
        for i in 0..60 {
            let (p, h) = pair_line((i * 3) % 8, (i + 1) % 3, "en", 5000 + i);
            sick.push_str(&format!("{i}\t{p}\t{h}\t3.0\t{}\n", names[(i + 1) % 3]));
        }
        write(root, "sick/SICK_train.txt", &sick);
        for lang in langs {
            for (split, n) in [("validation", 60), ("test", 90)] {
                let mut body = String::from("id\tpremise\thypothesis\tlabel\n");
                for i in 0..n {
                    let (p, h) = pair_line((i * 5 + 1) % 8, i % 3, lang, 9000 + i);
                    body.push_str(&format!("{i}\t{p}\t{h}\t{}\n", i % 3));
                }
                write(root, &format!("xnli/xnli_{split}_{lang}.tsv"), &body);
            }
        }
        tmp
    }

    /// The side datasets of the synthetic (or shared) data root `dir`.
    fn side(dir: &Path) -> BTreeMap<String, std::path::PathBuf> {
        ["snli", "sick"]
            .map(|d| (d.to_string(), dir.join(d)))
            .into_iter()
            .collect()
    }

    /// The outcome's scores as [`XnliScores`], checked to be exactly the struct.
    fn typed(o: &Outcome) -> XnliScores {
        assert_typed(DEF.name, &o.scores);
        serde_json::from_value(o.scores.clone()).unwrap()
    }

    fn run_on(
        dir: &Path,
        encoder: &dyn Encoder,
        langs: &[&str],
        params: &str,
        seed: u64,
    ) -> Outcome {
        let b = bench("xnli", "xnli", "xnli-zero-shot", langs, params);
        run(&Context {
            benchmark: &b,
            dataset_dir: &dir.join("xnli"),
            side: &side(dir),
            encoder,
            seed,
        })
        .unwrap()
    }

    #[test]
    fn side_datasets_follow_the_training_sets() {
        let b = bench("xnli", "xnli", "xnli-zero-shot", &[], "");
        assert_eq!(side_datasets(&b).unwrap(), ["snli", "sick"]);
        let b = bench("xnli", "xnli", "xnli-zero-shot", &[], "{train: [snli-dev]}");
        assert_eq!(side_datasets(&b).unwrap(), ["snli"]);
    }

    #[test]
    fn an_undeclared_side_dataset_is_refused() {
        let tmp = synthetic_dir(&["en"]);
        let b = bench("xnli", "xnli", "xnli-zero-shot", &["en"], "{epochs: 1}");
        let only_snli: BTreeMap<String, std::path::PathBuf> =
            [("snli".to_string(), tmp.path().join("snli"))]
                .into_iter()
                .collect();
        let msg = run(&Context {
            benchmark: &b,
            dataset_dir: &tmp.path().join("xnli"),
            side: &only_snli,
            encoder: &FakeEncoder,
            seed: 1,
        })
        .unwrap_err()
        .to_string();
        assert!(
            msg.contains("`sick`") && msg.contains("side_datasets"),
            "{msg}"
        );
    }

    #[test]
    fn the_declared_params_parse_to_the_reference_defaults() {
        assert_eq!(declared_params::<XnliParams>("xnli"), XnliParams::default());
    }

    #[test]
    fn synthetic_separable_nli_is_learnt_in_every_language_and_the_matrix() {
        let langs = ["en", "de", "zh"];
        let tmp = synthetic_dir(&langs);
        let o = run_on(
            tmp.path(),
            &FakeEncoder,
            &langs,
            "{hidden: [32, 16], epochs: 40, batch_size: 16, lr: 0.01, dropout: 0.1, matrix: true}",
            7,
        );
        let s = typed(&o);
        assert_eq!(s.train_pairs, Some(300));
        assert_eq!(s.train_sets.as_ref().unwrap()["snli-dev"], 240);
        assert!(o.main_score > 95.0, "{:?}", o.scores);
        assert_eq!(s.average, o.main_score);
        for l in langs {
            assert!(s.accuracy[l] > 95.0);
        }
        // One dev evaluation per epoch, the kept one among them.
        let curve = s.dev_curve.as_ref().unwrap();
        assert_eq!((curve.len(), s.epochs_run), (40, Some(40)));
        let chosen = s.chosen_epoch.unwrap();
        assert_eq!(Some(curve[chosen - 1].1), s.dev_accuracy);
        assert_eq!(o.scores["dev_curve"][0][0], 1);
        assert!(s.own_head.is_none() && s.own_encoders.is_none() && s.unaligned.is_none());
        let matrix = s.matrix.as_ref().unwrap();
        assert!(matrix.average > 95.0);
        assert_eq!(matrix.languages, langs);
        assert!(o.notes[0].contains("NOT on MultiNLI"));
        assert_eq!(o.params["hidden"], serde_json::json!([32, 16]));
        // Three languages (weight 1) and six cross-lingual cells (weight 0) of 90 pairs.
        let items = o.items.as_ref().unwrap();
        assert!((items.headline() - o.main_score).abs() < 1e-9);
        assert_eq!((items.groups.len(), items.count()), (9, 9 * 90));
        assert_eq!(items.groups[3].name, "en/de");
        let cell = items.groups[3].outcomes.metric(None) * 100.0;
        assert!((cell - matrix.accuracy[0][1]).abs() < 1e-9);
    }

    /// [`FakeEncoder`] with a hand-written NLI head `nli` over its vectors: contradiction
    /// when the hypothesis has `neg`, entailment when both name the same concept, else
    /// neutral (the synthetic data's rule); logits one-hot.
    struct WithNliHead;

    impl Encoder for WithNliHead {
        fn name(&self) -> &str {
            "fake-with-head"
        }
        fn fingerprint(&self) -> String {
            "fake-with-head-v1".into()
        }
        fn dim(&self) -> usize {
            FakeEncoder.dim()
        }
        fn encode(&self, sentences: &[&str]) -> Result<Matrix, harness_embed::EncodeError> {
            FakeEncoder.encode(sentences)
        }
        fn pair_logits(
            &self,
            head: &str,
            u: &Matrix,
            v: &Matrix,
        ) -> Result<Option<Matrix>, harness_embed::EncodeError> {
            if head != "nli" {
                return Ok(None);
            }
            let concept = |r: &[f32]| (0..8).fold(0, |b, j| if r[j] > r[b] { j } else { b });
            let mut out = Matrix::zeros(u.rows, 3);
            for i in 0..u.rows {
                let (p, h) = (u.row(i), v.row(i));
                // Unnormalised vectors: `neg` adds exactly 1 to dimension 8.
                let class = if h[8] == 1.0 {
                    2
                } else if concept(p) == concept(h) {
                    0
                } else {
                    1
                };
                out.row_mut(i)[class] = 1.0;
            }
            Ok(Some(out))
        }
    }

    #[test]
    fn own_head_classifies_without_training_or_side_datasets() {
        let langs = ["en", "de"];
        let tmp = synthetic_dir(&langs);
        let b = bench(
            "xnli",
            "xnli",
            "xnli-zero-shot",
            &langs,
            "{own_head: nli, matrix: true}",
        );
        assert!(side_datasets(&b).unwrap().is_empty());
        let none = BTreeMap::new();
        let dir = tmp.path().join("xnli");
        let ctx = |encoder: &'static dyn Encoder| Context {
            benchmark: &b,
            dataset_dir: &dir,
            side: &none,
            encoder,
            seed: 1,
        };
        let o = run(&ctx(&WithNliHead)).unwrap();
        let s = typed(&o);
        for l in langs {
            assert_eq!(s.accuracy[l], 100.0, "{:?}", o.scores);
        }
        assert_eq!(s.matrix.unwrap().average, 100.0);
        assert_eq!(s.own_head.as_deref(), Some("nli"));
        assert_eq!(s.dev_accuracy, Some(100.0));
        assert_eq!((s.train_pairs, s.dev_curve), (None, None));
        assert!(o.scores.get("train_pairs").is_none());
        assert!(o.notes[0].contains("own NLI head `nli`"), "{:?}", o.notes);
        // An encoder without that head: an error saying what to do.
        let msg = run(&ctx(&FakeEncoder)).unwrap_err().to_string();
        assert!(
            msg.contains("no trained head `nli`") && msg.contains("drop `own_head`"),
            "{msg}"
        );
    }

    /// A run with an encoder of its own for German (the XNLI alignment baselines): its
    /// main encoder reads only English (every other sentence is the zero vector), German
    /// goes through [`WithNliHead`], which reads every language alike.
    struct Routed;

    impl Encoder for Routed {
        fn name(&self) -> &str {
            "routed"
        }
        fn fingerprint(&self) -> String {
            "routed-v1".into()
        }
        fn dim(&self) -> usize {
            FakeEncoder.dim()
        }
        fn encode(&self, sentences: &[&str]) -> Result<Matrix, harness_embed::EncodeError> {
            let mut m = FakeEncoder.encode(sentences)?;
            for (i, s) in sentences.iter().enumerate() {
                if !s.starts_with("en:") {
                    m.row_mut(i).fill(0.0);
                }
            }
            Ok(m)
        }
        fn pair_logits(
            &self,
            head: &str,
            u: &Matrix,
            v: &Matrix,
        ) -> Result<Option<Matrix>, harness_embed::EncodeError> {
            WithNliHead.pair_logits(head, u, v)
        }
        fn for_language(&self, language: &str) -> Option<std::sync::Arc<dyn Encoder>> {
            (language == "de")
                .then(|| std::sync::Arc::new(WithNliHead) as std::sync::Arc<dyn Encoder>)
        }
    }

    /// Own head, own encoders: German through its own encoder is classified perfectly;
    /// through the English-only main encoder every German vector is zero, so the head says
    /// entailment (the same concept, no `neg`) for all 90 test pairs, right for the 30 of
    /// label 0: 33.33 %. The German encoder's vectors equal the English ones (distance 0);
    /// the main encoder's do not. The dev split is read with `split: dev`.
    #[test]
    fn own_encoders_read_their_languages_and_are_compared_with_the_main_one() {
        let langs = ["en", "de"];
        let tmp = synthetic_dir(&langs);
        let none = BTreeMap::new();
        let dir = tmp.path().join("xnli");
        let mut b = bench("xnli", "xnli", "xnli-zero-shot", &langs, "{own_head: nli}");
        let o = run(&Context {
            benchmark: &b,
            dataset_dir: &dir,
            side: &none,
            encoder: &Routed,
            seed: 1,
        })
        .unwrap();
        let s = typed(&o);
        assert_eq!(s.accuracy["en"], 100.0, "{s:?}");
        assert_eq!(s.accuracy["de"], 100.0, "{s:?}");
        assert_eq!(s.own_encoders, Some(vec!["de".to_string()]));
        let unaligned = s.unaligned.as_ref().unwrap();
        assert_eq!(unaligned.accuracy["en"], 100.0);
        let before = unaligned.accuracy["de"];
        assert!((before - 100.0 / 3.0).abs() < 1e-9, "{before}");
        let avg = unaligned.average;
        assert!((avg - (100.0 + 100.0 / 3.0) / 2.0).abs() < 1e-9, "{avg}");
        let distance = s.alignment_distance.as_ref().unwrap();
        assert_eq!(distance.aligned["de"], 0.0);
        assert!(distance.unaligned.as_ref().unwrap()["de"] > 0.5);
        assert_eq!(s.split, "test");
        // The dev split: 60 pairs per language, 20 of each label.
        b.split = "dev".into();
        let o = run(&Context {
            benchmark: &b,
            dataset_dir: &dir,
            side: &none,
            encoder: &Routed,
            seed: 1,
        })
        .unwrap();
        let s = typed(&o);
        let before = s.unaligned.unwrap().accuracy["de"];
        assert!((before - 100.0 / 3.0).abs() < 1e-9, "{before}");
        assert_eq!(s.split, "dev");
        // Without `unaligned`: the own encoders' distances alone.
        b.split = "test".into();
        b.params
            .insert("unaligned".into(), serde_yaml::Value::Bool(false));
        let o = run(&Context {
            benchmark: &b,
            dataset_dir: &dir,
            side: &none,
            encoder: &Routed,
            seed: 1,
        })
        .unwrap();
        let s = typed(&o);
        assert!(s.unaligned.is_none() && o.scores.get("unaligned").is_none());
        let distance = s.alignment_distance.unwrap();
        assert_eq!((distance.aligned["de"], distance.unaligned), (0.0, None));
        assert!(o.scores["alignment_distance"].get("unaligned").is_none());
        assert_eq!(s.own_encoders, Some(vec!["de".to_string()]));
        b.split = "train".into();
        let e = run(&Context {
            benchmark: &b,
            dataset_dir: &dir,
            side: &none,
            encoder: &Routed,
            seed: 1,
        })
        .unwrap_err();
        assert!(e.to_string().contains("split `train`"), "{e}");
    }

    #[test]
    fn missing_training_folder_and_bad_params_are_errors() {
        let tmp = synthetic_dir(&["en"]);
        std::fs::remove_dir_all(tmp.path().join("sick")).unwrap();
        let b = bench("xnli", "xnli", "xnli-zero-shot", &["en"], "{epochs: 1}");
        let side = side(tmp.path());
        let ctx = Context {
            benchmark: &b,
            dataset_dir: &tmp.path().join("xnli"),
            side: &side,
            encoder: &FakeEncoder,
            seed: 1,
        };
        let msg = run(&ctx).unwrap_err().to_string();
        assert!(msg.contains("harness datasets fetch sick"), "{msg}");
        let b = bench("xnli", "xnli", "xnli-zero-shot", &["en"], "{epoch: 1}");
        let ctx = Context {
            benchmark: &b,
            ..ctx
        };
        let msg = run(&ctx).unwrap_err().to_string();
        assert!(msg.contains("epoch"), "{msg}");
    }

    /// Real data, reduced: 128-d hashed n-grams, a tenth of the training pairs, 3 epochs,
    /// 1000 dev and test pairs in 3 languages. The second run reads the embedding cache, so
    /// it checks that the classifier alone is deterministic.
    #[test]
    fn real_data_hashed_ngrams_reduced() {
        let data = harness_core::shared_datasets_dir();
        let cache = tempfile::tempdir().unwrap();
        let enc = CachedEncoder::new(
            HashedNgrams::from_spec("hashed-ngrams", Some("dim=128")).unwrap(),
            cache.path(),
        );
        let params = "{train_fraction: 0.1, epochs: 3, hidden: [64], eval_limit: 1000}";
        let langs = ["en", "de", "zh"];
        let a = run_on(&data, &enc, &langs, params, 1);
        let b = run_on(&data, &enc, &langs, params, 1);
        assert_eq!(a, b);
        let s = typed(&a);
        assert_eq!(s.train_pairs, Some(2416));
        let items = a.items.as_ref().unwrap();
        assert!((items.headline() - a.main_score).abs() < 1e-9);
        assert_eq!(items.count(), 3000);
        let en = s.accuracy["en"];
        assert!((36.0..70.0).contains(&en), "{:?}", a.scores);
        assert!(a.main_score > 33.0 && a.main_score < 65.0, "{:?}", a.scores);
    }

    /// The full protocol with hashed-ngrams: `cargo test --release --lib
    /// protocols::xnli::tests::full -- --ignored --nocapture`.
    #[test]
    #[ignore]
    fn full_protocol_hashed_ngrams() {
        let data = harness_core::shared_datasets_dir();
        let enc = HashedNgrams::new(Default::default());
        let langs: Vec<&str> = xnli::LANGUAGES.to_vec();
        let start = std::time::Instant::now();
        let o = run_on(&data, &enc, &langs, "{matrix: true}", 1);
        eprintln!(
            "xnli full: {:.1} s\n{}\nnotes: {:?}",
            start.elapsed().as_secs_f64(),
            serde_json::to_string_pretty(&o.scores).unwrap(),
            o.notes
        );
        assert!(o.main_score > 33.4);
    }
}
