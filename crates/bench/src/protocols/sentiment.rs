//! Cross-lingual sentiment transfer, zero-shot and few-shot (protocol `sentiment-transfer`),
//! run on the MARC Amazon reviews stand-in for Webis-CLS-10.
//!
//! Reference: multilingual USE (Chidambaram et al. 2019), §4.2 "Amazon Reviews", Tables 5–6
//! (no reference implementation is published):
//! - reviews become binary: strictly more than three stars positive, less than three
//!   negative ([`cls_amazon::binary`]: 1–2 negative, 4–5 positive, 3 dropped);
//! - "we only take the first 64 tokens ... as the input" (`max_tokens`, whitespace tokens);
//! - the frozen embeddings feed "a 2-layer feed-forward network culminating in a softmax
//!   layer", "hidden layers of size 512 with tanh", Adam with initial learning rate 0.0005 and
//!   "a learning rate decay of 0.9 at every epoch", batch 16, "20 total epochs in all
//!   experiments"; "the model architecture and parameters are tuned on the development
//!   set": every classifier keeps the epoch of best accuracy on the training language's
//!   dev reviews (`selection: dev`, the default; `last` keeps the last epoch). The English
//!   dev set serves every classifier, few-shot and monolingual ones included, so no
//!   target-language review beyond the X % is ever seen. No dropout is mentioned;
//! - zero-shot (Table 5): train on English, test on the other languages;
//! - few-shot (Table 6): train on "English reviews and only a portion of French and German
//!   reviews" — one classifier trained from scratch on the mixture of all English training
//!   reviews and X % of the target language's (X = 10, 20, 40, 80, 100; not fine-tuning),
//!   compared with the "monolingual" baseline trained on the X % alone.
//!
//! The stand-in (see `cls-amazon-reviews/SOURCE.txt`): MARC reviews (review body only, no
//! summary field to concatenate), 1,024 binary training reviews per language (MARC train
//! sample; the paper has 6,000 English ones, split 90/10 into train and dev), the binary dev
//! set of English reported for information, 4,000 balanced binary test reviews per language
//! (the paper: 6,000). Subsets are nested prefixes of one seeded permutation of the target
//! language's training reviews; every random choice derives from the benchmark seed.
//!
//! Items: right or wrong per test review, a `Correct` group per cell: `zero_shot/<target>`
//! (weight 1: the headline is their mean), and with weight 0 `source/<train language>`,
//! `few_shot/<target>/<fraction>` and `monolingual/<target>/<fraction>`.

use super::def::{
    no_side_datasets, parses_as, sub_seed, CheckedParams, Context, Outcome, ProtocolDef, ScoresDef,
};
use crate::benchmark::Benchmark;
use crate::classify::{train, Activation, Mlp, MlpSpec, Selection, TieBreak, TrainConfig};
use crate::error::BenchError;
use crate::items::{Group, Items, Outcomes};
use harness_data::loaders::cls_amazon;
use harness_data::records::LabeledText;
use harness_embed::matrix::Matrix;
use rand::seq::SliceRandom;
use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// Parameters of `sentiment-transfer` (defaults: multilingual USE §4.2).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct SentimentParams {
    /// The source language of the transfer.
    pub train_language: String,
    /// Keep the first this many whitespace tokens of a review (0: all).
    pub max_tokens: usize,
    /// Hidden layer sizes ("hidden layers of size 512": two).
    pub hidden: Vec<usize>,
    pub activation: Activation,
    /// Dropout on the input and after every hidden layer (the paper mentions none).
    pub dropout: f32,
    pub lr: f32,
    /// Learning-rate factor per epoch.
    pub lr_decay: f32,
    pub batch_size: usize,
    pub epochs: usize,
    /// Which epoch's classifier is kept.
    pub selection: SentimentSelection,
    /// Fractions of the target language's training reviews added for few-shot (empty: no
    /// few-shot table).
    pub few_shot: Vec<f64>,
    /// Also train the monolingual baseline (target-language fraction only) of Table 6.
    pub monolingual: bool,
    /// L2-normalise the embeddings (the paper does not say).
    pub normalize: bool,
    /// Test on only the first this many binary test reviews of each language (0: all). For
    /// quick smoke runs; the result's notes say so.
    pub eval_limit: usize,
}

impl Default for SentimentParams {
    fn default() -> Self {
        SentimentParams {
            train_language: "en".into(),
            max_tokens: 64,
            hidden: vec![512, 512],
            activation: Activation::Tanh,
            dropout: 0.0,
            lr: 5e-4,
            lr_decay: 0.9,
            batch_size: 16,
            epochs: 20,
            selection: SentimentSelection::Dev,
            few_shot: vec![0.1, 0.2, 0.4, 0.8, 1.0],
            monolingual: true,
            normalize: false,
            eval_limit: 0,
        }
    }
}

/// Which epoch's classifier `sentiment-transfer` keeps.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum SentimentSelection {
    /// The epoch of best accuracy on the training language's dev reviews (the first of
    /// equals, as SentEval).
    Dev,
    /// The last epoch.
    Last,
}

/// The first `max` whitespace tokens of `text`, joined by single spaces (`max` 0: as is).
pub fn truncate_tokens(text: &str, max: usize) -> String {
    if max == 0 {
        return text.to_string();
    }
    text.split_whitespace()
        .take(max)
        .collect::<Vec<_>>()
        .join(" ")
}

struct Data {
    x: Matrix,
    y: Vec<usize>,
}

fn embed(ctx: &Context, rows: &[LabeledText], p: &SentimentParams) -> Result<Data, BenchError> {
    let texts: Vec<String> = rows
        .iter()
        .map(|r| truncate_tokens(&r.text, p.max_tokens))
        .collect();
    let mut x = ctx.embed(&texts)?;
    if p.normalize {
        x.l2_normalize_rows();
    }
    let y = rows.iter().map(|r| usize::from(r.label == "pos")).collect();
    Ok(Data { x, y })
}

/// Rows `a` followed by rows `idx` of `b`.
fn concat(a: Option<&Data>, b: &Data, idx: &[usize]) -> Data {
    let mut x = Vec::new();
    let mut y = Vec::new();
    if let Some(a) = a {
        x.extend_from_slice(&a.x.data);
        y.extend_from_slice(&a.y);
    }
    x.extend_from_slice(&b.x.select_rows(idx).data);
    y.extend(idx.iter().map(|&i| b.y[i]));
    Data {
        x: Matrix::from_vec(y.len(), b.x.cols, x),
        y,
    }
}

fn percent(x: f64) -> f64 {
    100.0 * x
}

impl CheckedParams for SentimentParams {
    fn check(&self, benchmark: &Benchmark) -> Result<(), String> {
        if let Some(f) = self.few_shot.iter().find(|f| !(**f > 0.0 && **f <= 1.0)) {
            return Err(format!("params.few_shot: fraction {f} is outside (0, 1]"));
        }
        let langs = &benchmark.languages;
        if !langs.is_empty() && langs.iter().all(|l| *l == self.train_language) {
            return Err("no target language besides the training language".into());
        }
        Ok(())
    }
}

/// The `scores` of a `sentiment-transfer` result (test accuracies in %).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct SentimentScores {
    /// Per target language: the `train_language` classifier's accuracy (Table 5).
    pub zero_shot: BTreeMap<String, f64>,
    /// Mean of `zero_shot` over the target languages: the headline.
    pub zero_shot_average: f64,
    /// The source language of the transfer.
    pub train_language: String,
    /// The `train_language` classifier on its own language's test set.
    pub source_test_accuracy: f64,
    /// Its dev accuracy at the kept epoch (null: no dev evaluation).
    pub source_dev_accuracy: Option<f64>,
    /// The epoch it kept.
    pub source_best_epoch: usize,
    /// Binary training reviews of `train_language`.
    pub train_reviews: usize,
    /// With `params.few_shot` not empty: Table 6.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub few_shot: Option<FewShotScores>,
}

/// The few-shot table: one column per fraction of `params.few_shot`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct FewShotScores {
    /// The fractions of the target language's training reviews, in % (`10.0`).
    pub percent: Vec<f64>,
    /// What the rows are (`100% en + X% target (few_shot), X% target alone (monolingual)`).
    pub rows: String,
    /// Per target language.
    pub languages: BTreeMap<String, FewShotLanguage>,
}

/// One target language's few-shot rows, one value per fraction.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct FewShotLanguage {
    /// Target-language training reviews of each fraction.
    pub target_train_reviews: Vec<usize>,
    /// Trained on every source review and the fraction of the target's.
    pub few_shot: Vec<f64>,
    /// The zero-shot accuracy, for comparison.
    pub zero_shot: f64,
    /// Trained on the fraction of the target's alone (with `params.monolingual`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub monolingual: Option<Vec<f64>>,
}

/// `sentiment-transfer`, defined once: [`super::ALL`] lists it.
pub const DEF: ProtocolDef = ProtocolDef {
    name: "sentiment-transfer",
    check_params: parses_as::<SentimentParams>,
    side_datasets: no_side_datasets,
    run,
    scores: ScoresDef::of::<SentimentScores>(),
};

/// Runs the protocol.
pub fn run(ctx: &Context) -> Result<Outcome, BenchError> {
    let p: SentimentParams = ctx.params()?;
    let languages = ctx.languages_or(
        cls_amazon::LANGUAGES
            .iter()
            .map(|s| s.to_string())
            .collect(),
    );
    let targets: Vec<String> = languages
        .iter()
        .filter(|l| **l != p.train_language)
        .cloned()
        .collect();
    if targets.is_empty() {
        return Err(ctx.error("no target language besides the training language"));
    }
    let fitter = Fitter {
        ctx,
        p: &p,
        spec: MlpSpec::laser(&p.hidden, p.activation, p.dropout),
    };

    let source = load_language(ctx, &p, &p.train_language)?;
    let (model, report) = fitter.fit(&source.train, "sentiment/zero-shot", &source.dev)?;
    let mut zero_shot = BTreeMap::new();
    let mut few_shot = BTreeMap::new();
    let mut sum = 0.0;
    let mut groups = Vec::new();
    for t in &targets {
        let target = load_language(ctx, &p, t)?;
        let (acc, group) = test_acc(&model, &target.test, format!("zero_shot/{t}"), 1.0);
        groups.push(group);
        sum += acc;
        zero_shot.insert(t.clone(), acc);
        if p.few_shot.is_empty() {
            continue;
        }
        let language = fitter.few_shot(&source, t, &target, acc, &mut groups)?;
        few_shot.insert(t.clone(), language);
    }
    let main_score = sum / targets.len() as f64;
    let (source_acc, source_group) = test_acc(
        &model,
        &source.test,
        format!("source/{}", p.train_language),
        0.0,
    );
    groups.push(source_group);
    let scores = SentimentScores {
        zero_shot,
        zero_shot_average: main_score,
        train_language: p.train_language.clone(),
        source_test_accuracy: source_acc,
        source_dev_accuracy: report.best_dev_accuracy.map(percent),
        source_best_epoch: report.best_epoch,
        train_reviews: source.train.y.len(),
        few_shot: (!p.few_shot.is_empty()).then(|| FewShotScores {
            percent: p.few_shot.iter().map(|f| 100.0 * f).collect(),
            rows: format!(
                "100% {} + X% target (few_shot), X% target alone (monolingual)",
                p.train_language
            ),
            languages: few_shot,
        }),
    };
    Ok(Outcome {
        main_metric: "accuracy".into(),
        main_score,
        scores: ctx.scores(&scores)?,
        params: serde_json::to_value(&p).map_err(|e| ctx.error(e.to_string()))?,
        notes: notes(&p, &targets),
        items: Some(Items::mean_of(groups)),
    })
}

/// One language's embedded binary splits (the test split cut to `eval_limit` when set).
struct Splits {
    train: Data,
    dev: Data,
    test: Data,
}

/// Loads and embeds `lang`'s train, dev and test reviews.
fn load_language(ctx: &Context, p: &SentimentParams, lang: &str) -> Result<Splits, BenchError> {
    let s = cls_amazon::load(ctx.dataset_dir, lang)?;
    let mut test = cls_amazon::binary(&s.test);
    if p.eval_limit > 0 {
        test.truncate(p.eval_limit);
    }
    Ok(Splits {
        train: embed(ctx, &cls_amazon::binary(&s.train), p)?,
        dev: embed(ctx, &cls_amazon::binary(&s.dev), p)?,
        test: embed(ctx, &test, p)?,
    })
}

/// Test accuracy (%) and the group of per-review right/wrong flags it comes from.
fn test_acc(m: &Mlp, d: &Data, name: String, weight: f64) -> (f64, Group) {
    let predicted = m.predict(&d.x);
    let acc = percent(crate::classify::accuracy(&predicted, &d.y));
    let correct = predicted.iter().zip(&d.y).map(|(p, y)| p == y).collect();
    let group = Group {
        name,
        weight,
        outcomes: Outcomes::correct(correct),
    };
    (acc, group)
}

/// Trains the protocol's classifiers: one spec and schedule, a seed per tag.
struct Fitter<'a> {
    ctx: &'a Context<'a>,
    p: &'a SentimentParams,
    spec: MlpSpec,
}

impl Fitter<'_> {
    /// The training configuration of the classifier named `tag`.
    fn config(&self, tag: &str) -> TrainConfig {
        let p = self.p;
        TrainConfig {
            lr: p.lr,
            lr_decay: p.lr_decay,
            batch_size: p.batch_size,
            epochs: p.epochs,
            selection: match p.selection {
                SentimentSelection::Dev => Selection::BestOnDev {
                    ties: TieBreak::First,
                    tenacity: None,
                },
                SentimentSelection::Last => Selection::Last,
            },
            seed: sub_seed(self.ctx.seed, tag),
            ..TrainConfig::default()
        }
    }

    /// A classifier trained on `data`, its epoch chosen on `dev`.
    fn fit(
        &self,
        data: &Data,
        tag: &str,
        dev: &Data,
    ) -> Result<(Mlp, crate::classify::TrainReport), BenchError> {
        train(
            &self.spec,
            &self.config(tag),
            &data.x,
            &data.y,
            2,
            Some((&dev.x, &dev.y[..])),
        )
        .map_err(|e| self.ctx.error(e.to_string()))
    }

    /// Target language `t`'s few-shot row: for each fraction, a classifier on the source
    /// data plus that share of `t`'s training reviews (and on the share alone when
    /// `monolingual`), tested on `t`; their groups go to `groups`.
    fn few_shot(
        &self,
        source: &Splits,
        t: &str,
        target: &Splits,
        zero_shot: f64,
        groups: &mut Vec<Group>,
    ) -> Result<FewShotLanguage, BenchError> {
        let p = self.p;
        let mut order: Vec<usize> = (0..target.train.y.len()).collect();
        order.shuffle(&mut ChaCha8Rng::seed_from_u64(sub_seed(
            self.ctx.seed,
            &format!("sentiment/sample/{t}"),
        )));
        let mut mixed = Vec::new();
        let mut mono = Vec::new();
        let mut rows = Vec::new();
        for &f in &p.few_shot {
            let n = ((f * order.len() as f64).round() as usize).clamp(1, order.len());
            let idx = &order[..n];
            rows.push(n);
            let tag = format!("sentiment/few-shot/{t}/{f}");
            let (m, _) = self.fit(
                &concat(Some(&source.train), &target.train, idx),
                &tag,
                &source.dev,
            )?;
            let (acc, group) = test_acc(&m, &target.test, format!("few_shot/{t}/{f}"), 0.0);
            mixed.push(acc);
            groups.push(group);
            if p.monolingual {
                let tag = format!("sentiment/monolingual/{t}/{f}");
                let (m, _) = self.fit(&concat(None, &target.train, idx), &tag, &source.dev)?;
                let (acc, group) = test_acc(&m, &target.test, format!("monolingual/{t}/{f}"), 0.0);
                mono.push(acc);
                groups.push(group);
            }
        }
        Ok(FewShotLanguage {
            target_train_reviews: rows,
            few_shot: mixed,
            zero_shot,
            monolingual: p.monolingual.then_some(mono),
        })
    }
}

/// The result's notes: the stand-in dataset, the main score, a smoke run's cut.
fn notes(p: &SentimentParams, targets: &[String]) -> Vec<String> {
    let mut notes = vec![
        "STAND-IN: MARC Amazon reviews (en/de/fr, stars 1-2 negative, 4-5 positive, 3 dropped; \
         review body only, 1,024 training reviews per language) replace Webis-CLS-10. Numbers \
         are not comparable to multilingual USE Tables 5-6."
            .to_string(),
        format!(
            "main score: average zero-shot test accuracy over {} of the classifier trained on {}.",
            targets.join(", "),
            p.train_language
        ),
    ];
    if p.eval_limit > 0 {
        notes.push(format!(
            "Smoke run: only the first {} binary test reviews per language were evaluated.",
            p.eval_limit
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

    #[test]
    fn the_declared_params_parse_to_the_reference_defaults() {
        assert_eq!(
            declared_params::<SentimentParams>("sentiment"),
            SentimentParams::default()
        );
    }

    #[test]
    fn truncation_keeps_the_first_tokens() {
        assert_eq!(truncate_tokens("a  b\tc d", 3), "a b c");
        assert_eq!(truncate_tokens("a  b", 0), "a  b");
    }

    fn synthetic_dir() -> tempfile::TempDir {
        let tmp = tempfile::tempdir().unwrap();
        for lang in ["en", "de", "fr"] {
            for (split, n) in [("train", 100), ("dev", 50), ("test", 100)] {
                let mut body = String::new();
                for i in 0..n {
                    let stars = i % 5 + 1;
                    // Positive reviews say c1, negative c0; 3 stars says both.
                    let words = match stars {
                        1 | 2 => "c0",
                        3 => "c0 c1",
                        _ => "c1",
                    };
                    body.push_str(&format!("{i},\"{lang}: {words} n{i} , end\",{stars}\n"));
                }
                write(tmp.path(), &format!("marc/{lang}/{split}.csv"), &body);
            }
        }
        tmp
    }

    /// The outcome's scores as [`SentimentScores`], checked to be exactly the struct.
    fn typed(o: &Outcome) -> SentimentScores {
        assert_typed(DEF.name, &o.scores);
        serde_json::from_value(o.scores.clone()).unwrap()
    }

    fn run_on(dir: &Path, enc: &dyn Encoder, langs: &[&str], params: &str) -> Outcome {
        let b = bench(
            "sentiment",
            "cls-amazon-reviews",
            "sentiment-transfer",
            langs,
            params,
        );
        run(&Context {
            benchmark: &b,
            dataset_dir: dir,
            side: &std::collections::BTreeMap::new(),
            encoder: enc,
            seed: 5,
        })
        .unwrap()
    }

    #[test]
    fn synthetic_sentiment_transfers_zero_and_few_shot() {
        let tmp = synthetic_dir();
        let o = run_on(
            tmp.path(),
            &FakeEncoder,
            &[],
            "{hidden: [16], epochs: 10, lr: 0.01, few_shot: [0.1, 1.0]}",
        );
        assert_eq!(o.main_score, 100.0, "{:?}", o.scores);
        let s = typed(&o);
        assert_eq!(s.train_reviews, 80);
        assert_eq!(s.zero_shot_average, o.main_score);
        let few_shot = s.few_shot.as_ref().unwrap();
        assert_eq!(few_shot.percent, [10.0, 100.0]);
        let de = &few_shot.languages["de"];
        assert_eq!(de.target_train_reviews, [8, 80]);
        assert_eq!(de.few_shot, [100.0, 100.0]);
        assert_eq!(de.zero_shot, s.zero_shot["de"]);
        assert_eq!(de.monolingual.as_ref().unwrap()[1], 100.0);
        assert_eq!(o.params["lr_decay"], serde_json::json!(0.9f32));
        // Zero-shot de and fr (weight 1), 2 × 2 few-shot cells each, the source (weight 0).
        let items = o.items.as_ref().unwrap();
        assert!((items.headline() - o.main_score).abs() < 1e-9);
        assert_eq!(items.groups.len(), 2 * 5 + 1);
        assert_eq!(items.groups[0].name, "zero_shot/de");
        assert_eq!(items.groups[1].name, "few_shot/de/0.1");
        assert_eq!(items.groups[10].name, "source/en");
    }

    /// Without few-shot fractions the table is absent; without `monolingual` its rows are.
    #[test]
    fn the_few_shot_table_and_its_monolingual_rows_are_optional() {
        let tmp = synthetic_dir();
        let o = run_on(
            tmp.path(),
            &FakeEncoder,
            &["en", "fr"],
            "{hidden: [8], epochs: 2, few_shot: []}",
        );
        let s = typed(&o);
        assert!(s.few_shot.is_none() && o.scores.get("few_shot").is_none());
        assert_eq!(s.zero_shot.keys().collect::<Vec<_>>(), ["fr"]);
        let o = run_on(
            tmp.path(),
            &FakeEncoder,
            &["de", "en"],
            "{hidden: [8], epochs: 2, few_shot: [0.3], monolingual: false, train_language: de}",
        );
        let s = typed(&o);
        let en = &s.few_shot.as_ref().unwrap().languages["en"];
        assert_eq!((en.target_train_reviews.len(), &en.monolingual), (1, &None));
        assert!(o.scores["few_shot"]["languages"]["en"]
            .get("monolingual")
            .is_none());
        assert_eq!(s.train_language, "de");
    }

    /// Real data, reduced: 128-d hashed n-grams, 3 epochs, 1000 test reviews, one few-shot
    /// fraction; the second run reads the embedding cache.
    #[test]
    fn real_data_hashed_ngrams_reduced() {
        let dir = harness_core::shared_datasets_dir().join("cls-amazon-reviews");
        let cache = tempfile::tempdir().unwrap();
        let enc = CachedEncoder::new(
            HashedNgrams::from_spec("hashed-ngrams", Some("dim=128")).unwrap(),
            cache.path(),
        );
        let params = "{epochs: 3, hidden: [64], eval_limit: 1000, few_shot: [0.5]}";
        let a = run_on(&dir, &enc, &["en", "de"], params);
        let b = run_on(&dir, &enc, &["en", "de"], params);
        assert_eq!(a, b);
        let items = a.items.as_ref().unwrap();
        assert!((items.headline() - a.main_score).abs() < 1e-9);
        let s = typed(&a);
        let en = s.source_test_accuracy;
        assert!((55.0..95.0).contains(&en), "{:?}", a.scores);
        // Lexical features barely transfer: zero-shot near chance, in-language data helps.
        assert!(a.main_score > 35.0 && a.main_score < 80.0, "{:?}", a.scores);
        let few = s.few_shot.as_ref().unwrap().languages["de"].few_shot[0];
        assert!((50.0..95.0).contains(&few), "{:?}", a.scores);
    }

    /// `cargo test --release --lib protocols::sentiment::tests::full -- --ignored --nocapture`
    #[test]
    #[ignore]
    fn full_protocol_hashed_ngrams() {
        let dir = harness_core::shared_datasets_dir().join("cls-amazon-reviews");
        let enc = HashedNgrams::new(Default::default());
        let start = std::time::Instant::now();
        let o = run_on(&dir, &enc, &["en", "de", "fr"], "{}");
        eprintln!(
            "sentiment full: {:.1} s, main {:.2}\n{}",
            start.elapsed().as_secs_f64(),
            o.main_score,
            serde_json::to_string_pretty(&o.scores).unwrap()
        );
        assert!(o.main_score > 40.0);
    }
}
