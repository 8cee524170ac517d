//! Cross-lingual document classification with the MLDoc protocol (protocol `mldoc`), run on
//! SIB-200 because the MLDoc (Reuters RCV1/RCV2) texts are licensed and absent.
//!
//! Reference: LASER (Artetxe & Schwenk 2019, §4.2 "MLDoc: cross-lingual classification",
//! Table 2) and its implementation, facebookresearch/LASER `tasks/mldoc/mldoc.sh` with
//! `source/sent_classif.py`:
//! - for every training language of the list `en de es fr it ja ru zh`, a classifier is
//!   trained on that language's training set, its epoch chosen on the same language's dev
//!   set, and it is tested on the test set of every language of the list: the train-language
//!   × test-language accuracy matrix of the LASER README;
//! - the classifier is `Net(nhid = [10, 8], dropout = 0.2, activation = TANH)` ([`MlpSpec::laser`];
//!   the paper's text says one hidden layer of 10 units, the script uses `nhid="10 8"`),
//!   Adam (lr 0.001, weight decay 0, β = (0.9, 0.999), ε = 1e-8), batch 12, 500 epochs, mean
//!   cross-entropy, the epoch of best dev accuracy kept (`>=`: the later epoch on ties);
//! - the embeddings are used as they are (`sent_classif.py` does not normalise them).
//!
//! Here: SIB-200's 7 topics replace MLDoc's 4 (701 train, 99 dev, 204 test sentences per
//! language instead of 1,000 / 1,000 / 4,000 documents). Languages are named by MLDoc's
//! two-letter codes, mapped to SIB-200 folders (`en` → `eng_Latn`, ...); folder names work
//! too. The main score is the average accuracy of the classifier trained on `train_language`
//! (default en) over the other languages of the list (LASER Table 2's zero-shot transfer
//! row). The `train_language` classifier is also tested on every language of the benchmark
//! (default: every SIB-200 folder). Every random choice derives from the benchmark seed
//! (the reference uses seed 1 with PyTorch's generators).
//!
//! Items: right or wrong per test sentence, a `Correct` group per train × test cell
//! (`en/de`: trained on en, tested on de) and per extra test language of the
//! `train_language` classifier; the `train_language` row's cells off the diagonal weigh 1
//! (the headline is their mean), every other cell 0.

use super::def::{
    no_side_datasets, parses_as, sub_seed, CheckedParams, Context, Outcome, ProtocolDef, ScoresDef,
};
use crate::benchmark::Benchmark;
use crate::classify::{train, Activation, Mlp, MlpSpec, Selection, TieBreak, TrainConfig};
use crate::error::BenchError;
use crate::items::{Group, Items, Outcomes};
use harness_data::loaders::sib200;
use harness_data::records::LabeledText;
use harness_embed::matrix::Matrix;
use rayon::prelude::*;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// Two-letter codes (MLDoc's, XNLI's and a few more) of the SIB-200 folders kept here.
pub const SIB200_CODES: [(&str, &str); 21] = [
    ("ar", "arb_Arab"),
    ("bg", "bul_Cyrl"),
    ("de", "deu_Latn"),
    ("el", "ell_Grek"),
    ("en", "eng_Latn"),
    ("es", "spa_Latn"),
    ("fr", "fra_Latn"),
    ("hi", "hin_Deva"),
    ("it", "ita_Latn"),
    ("ja", "jpn_Jpan"),
    ("ko", "kor_Hang"),
    ("nl", "nld_Latn"),
    ("pl", "pol_Latn"),
    ("pt", "por_Latn"),
    ("ru", "rus_Cyrl"),
    ("sw", "swh_Latn"),
    ("th", "tha_Thai"),
    ("tr", "tur_Latn"),
    ("ur", "urd_Arab"),
    ("vi", "vie_Latn"),
    ("zh", "zho_Hans"),
];

/// The MLDoc languages, in `mldoc.sh`'s order.
pub const MLDOC_LANGUAGES: [&str; 8] = ["en", "de", "es", "fr", "it", "ja", "ru", "zh"];

/// Parameters of `mldoc` (defaults: LASER `tasks/mldoc/mldoc.sh`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct MldocParams {
    /// Languages of the train × test matrix (two-letter codes or SIB-200 folder names).
    pub languages: Vec<String>,
    /// The language whose classifier gives the main score (and is tested on every
    /// benchmark language); one of `languages`.
    pub train_language: String,
    /// Hidden layer sizes (`nhid="10 8"`).
    pub hidden: Vec<usize>,
    pub activation: Activation,
    /// Dropout on the input and after every hidden layer (`drop=0.2`).
    pub dropout: f32,
    pub lr: f32,
    pub weight_decay: f32,
    pub batch_size: usize,
    /// Epochs (`N=500`); the one of best dev accuracy is kept.
    pub epochs: usize,
    /// L2-normalise the embeddings (the reference does not).
    pub normalize: bool,
}

impl Default for MldocParams {
    fn default() -> Self {
        MldocParams {
            languages: MLDOC_LANGUAGES.iter().map(|s| s.to_string()).collect(),
            train_language: "en".into(),
            hidden: vec![10, 8],
            activation: Activation::Tanh,
            dropout: 0.2,
            lr: 1e-3,
            weight_decay: 0.0,
            batch_size: 12,
            epochs: 500,
            normalize: false,
        }
    }
}

/// The SIB-200 folder of `code` (a two-letter code or a folder name present in `folders`).
fn folder_of(ctx: &Context, code: &str, folders: &[String]) -> Result<String, BenchError> {
    if folders.iter().any(|f| f == code) {
        return Ok(code.to_string());
    }
    match SIB200_CODES.iter().find(|(c, _)| *c == code) {
        Some((_, f)) if folders.iter().any(|x| x == f) => Ok(f.to_string()),
        _ => Err(ctx.error(format!(
            "language `{code}` is not in {} (codes: {}; folders: {})",
            ctx.dataset_dir.display(),
            SIB200_CODES
                .iter()
                .map(|(c, _)| *c)
                .collect::<Vec<_>>()
                .join(", "),
            folders.join(", ")
        ))),
    }
}

/// One language's embedded splits.
struct Lang {
    train: (Matrix, Vec<usize>),
    dev: (Matrix, Vec<usize>),
    test: (Matrix, Vec<usize>),
}

fn embed_split(
    ctx: &Context,
    rows: &[LabeledText],
    labels: &[String],
    normalize: bool,
) -> Result<(Matrix, Vec<usize>), BenchError> {
    let texts: Vec<&str> = rows.iter().map(|r| r.text.as_str()).collect();
    let mut x = ctx.embed(&texts)?;
    if normalize {
        x.l2_normalize_rows();
    }
    let y = rows
        .iter()
        .map(|r| {
            labels
                .iter()
                .position(|l| *l == r.label)
                .ok_or_else(|| ctx.error(format!("unknown category `{}`", r.label)))
        })
        .collect::<Result<Vec<_>, _>>()?;
    Ok((x, y))
}

fn percent(x: f64) -> f64 {
    100.0 * x
}

fn mean(v: &[f64]) -> f64 {
    if v.is_empty() {
        0.0
    } else {
        v.iter().sum::<f64>() / v.len() as f64
    }
}

impl CheckedParams for MldocParams {
    fn check(&self, _: &Benchmark) -> Result<(), String> {
        if self.languages.is_empty() {
            return Err("params.languages is empty".into());
        }
        if !self.languages.contains(&self.train_language) {
            return Err(format!(
                "params.train_language `{}` is not one of params.languages",
                self.train_language
            ));
        }
        Ok(())
    }
}

/// The `scores` of an `mldoc` result (accuracies in %). Maps are keyed by the language as
/// `params.languages` (or the benchmark's languages) name it: a two-letter code or a folder.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct MldocScores {
    /// The languages of the matrix (`params.languages`), in order.
    pub languages: Vec<String>,
    /// Their SIB-200 folders (`eng_Latn`), in the same order.
    pub folders: Vec<String>,
    /// Train language × test language.
    pub matrix: MldocMatrix,
    /// Per train language: mean of its row (every test language).
    pub row_average: BTreeMap<String, f64>,
    /// Per train language: mean of its row without the diagonal (the other languages).
    pub row_transfer_average: BTreeMap<String, f64>,
    /// Per train language: its dev accuracy at the kept epoch (null: no dev evaluation).
    pub dev_accuracy: BTreeMap<String, Option<f64>>,
    /// Per train language: the epoch kept.
    pub chosen_epoch: BTreeMap<String, usize>,
    /// The language whose classifier gives the headline.
    pub train_language: String,
    /// `row_transfer_average` of `train_language`: the headline.
    pub zero_shot_average: f64,
    /// The `train_language` classifier on the test set of every benchmark language.
    pub train_language_on_every_language: BTreeMap<String, f64>,
}

/// The train-language × test-language accuracy matrix (%).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct MldocMatrix {
    /// What a row is: `train language`.
    pub rows: String,
    /// What a column is: `test language`.
    pub columns: String,
    /// `accuracy[i][j]`: trained on `languages[i]`, tested on `languages[j]`.
    pub accuracy: Vec<Vec<f64>>,
    /// Mean of every cell.
    pub average: f64,
}

/// `mldoc`, defined once: [`super::ALL`] lists it.
pub const DEF: ProtocolDef = ProtocolDef {
    name: "mldoc",
    check_params: parses_as::<MldocParams>,
    side_datasets: no_side_datasets,
    run,
    scores: ScoresDef::of::<MldocScores>(),
};

/// Runs the protocol.
pub fn run(ctx: &Context) -> Result<Outcome, BenchError> {
    let params: MldocParams = ctx.params()?;
    let folders = sib200::languages(ctx.dataset_dir)?;
    let codes_of_folders = |f: &String| -> String {
        SIB200_CODES
            .iter()
            .find(|(_, x)| x == f)
            .map_or(f.clone(), |(c, _)| c.to_string())
    };
    // The extra row: every benchmark language (default: every folder), named by code.
    let all_test: Vec<String> = ctx.languages_or(folders.iter().map(codes_of_folders).collect());
    let (labels, cache) = load_languages(ctx, &params, &folders, &all_test)?;

    // The classifiers are independent and tiny (a 512→10→8→7 network in batches of 12, where
    // per-step overhead, not arithmetic, is the cost): one per thread. Each draws from its own
    // seed, so the results do not depend on the number of threads.
    let spec = MlpSpec::laser(&params.hidden, params.activation, params.dropout);
    let trained = params
        .languages
        .par_iter()
        .map(|code| train_classifier(ctx, &params, &spec, &cache[code], labels.len(), code))
        .collect::<Result<Vec<_>, _>>()?;
    let Tested {
        matrix,
        row_average,
        row_transfer_average,
        dev_accuracy,
        chosen_epoch,
        main_score,
        train_language_on_every_language,
        groups,
    } = test_every_classifier(&params, &cache, &all_test, trained);

    let n = params.languages.len() as f64;
    let matrix_avg = matrix.iter().flatten().sum::<f64>() / (n * n);
    let scores = MldocScores {
        languages: params.languages.clone(),
        folders: params
            .languages
            .iter()
            .map(|c| folder_of(ctx, c, &folders))
            .collect::<Result<Vec<_>, _>>()?,
        matrix: MldocMatrix {
            rows: "train language".into(),
            columns: "test language".into(),
            accuracy: matrix,
            average: matrix_avg,
        },
        row_average,
        row_transfer_average,
        dev_accuracy,
        chosen_epoch,
        train_language: params.train_language.clone(),
        zero_shot_average: main_score,
        train_language_on_every_language,
    };
    Ok(Outcome {
        main_metric: "accuracy".into(),
        main_score,
        scores: ctx.scores(&scores)?,
        params: serde_json::to_value(&params).map_err(|e| ctx.error(e.to_string()))?,
        notes: notes(&params),
        items: Some(Items::mean_of(groups)),
    })
}

/// The category order (the first matrix language's) and every needed language's embedded
/// splits, by code; every language must have the same set of categories.
fn load_languages(
    ctx: &Context,
    params: &MldocParams,
    folders: &[String],
    all_test: &[String],
) -> Result<(Vec<String>, BTreeMap<String, Lang>), BenchError> {
    let first = folder_of(ctx, &params.languages[0], folders)?;
    let labels = sib200::labels(ctx.dataset_dir, &first)?;
    let mut cache: BTreeMap<String, Lang> = Default::default();
    for code in params.languages.iter().chain(all_test) {
        if cache.contains_key(code) {
            continue;
        }
        let folder = folder_of(ctx, code, folders)?;
        let mut own = sib200::labels(ctx.dataset_dir, &folder)?;
        let mut want = labels.clone();
        own.sort();
        want.sort();
        if own != want {
            return Err(ctx.error(format!(
                "{folder}/labels.txt has other categories than {first}/labels.txt"
            )));
        }
        let s = sib200::load(ctx.dataset_dir, &folder)?;
        let lang = Lang {
            train: embed_split(ctx, &s.train, &labels, params.normalize)?,
            dev: embed_split(ctx, &s.dev, &labels, params.normalize)?,
            test: embed_split(ctx, &s.test, &labels, params.normalize)?,
        };
        cache.insert(code.clone(), lang);
    }
    Ok((labels, cache))
}

/// One language's classifier, its epoch chosen on that language's dev set.
fn train_classifier(
    ctx: &Context,
    params: &MldocParams,
    spec: &MlpSpec,
    lang: &Lang,
    n_labels: usize,
    code: &str,
) -> Result<(Mlp, crate::classify::TrainReport), BenchError> {
    let cfg = TrainConfig {
        lr: params.lr,
        weight_decay: params.weight_decay,
        batch_size: params.batch_size,
        epochs: params.epochs,
        selection: Selection::BestOnDev {
            ties: TieBreak::Last,
            tenacity: None,
        },
        seed: sub_seed(ctx.seed, &format!("mldoc/classifier/{code}")),
        ..TrainConfig::default()
    };
    crate::timing::part("classifier training", || {
        train(
            spec,
            &cfg,
            &lang.train.0,
            &lang.train.1,
            n_labels,
            Some((&lang.dev.0, &lang.dev.1)),
        )
    })
    .map_err(|e| ctx.error(e.to_string()))
}

/// Test accuracy (%) of `model` on `lang` and the per-sentence right/wrong flags it comes from.
fn test_on(model: &Mlp, lang: &Lang) -> (f64, Outcomes) {
    let predicted = crate::timing::part("classification", || model.predict(&lang.test.0));
    let acc = percent(crate::classify::accuracy(&predicted, &lang.test.1));
    let correct = predicted
        .iter()
        .zip(&lang.test.1)
        .map(|(p, y)| p == y)
        .collect();
    (acc, Outcomes::correct(correct))
}

/// What testing every trained classifier gives: the matrix and its summaries, by train language.
struct Tested {
    matrix: Vec<Vec<f64>>,
    row_average: BTreeMap<String, f64>,
    row_transfer_average: BTreeMap<String, f64>,
    dev_accuracy: BTreeMap<String, Option<f64>>,
    chosen_epoch: BTreeMap<String, usize>,
    main_score: f64,
    train_language_on_every_language: BTreeMap<String, f64>,
    groups: Vec<Group>,
}

/// Tests each language's classifier on every matrix language, and the train language's on
/// every benchmark language too; the main score is the train language's zero-shot average.
fn test_every_classifier(
    params: &MldocParams,
    cache: &BTreeMap<String, Lang>,
    all_test: &[String],
    trained: Vec<(Mlp, crate::classify::TrainReport)>,
) -> Tested {
    let mut out = Tested {
        matrix: Vec::new(),
        row_average: BTreeMap::new(),
        row_transfer_average: BTreeMap::new(),
        dev_accuracy: BTreeMap::new(),
        chosen_epoch: BTreeMap::new(),
        main_score: 0.0,
        train_language_on_every_language: BTreeMap::new(),
        groups: Vec::new(),
    };
    for ((i, code), (model, report)) in params.languages.iter().enumerate().zip(trained) {
        let is_main = *code == params.train_language;
        let mut row: Vec<f64> = Vec::with_capacity(params.languages.len());
        for (j, t) in params.languages.iter().enumerate() {
            let (acc, outcomes) = test_on(&model, &cache[t]);
            row.push(acc);
            out.groups.push(Group {
                name: format!("{code}/{t}"),
                weight: if is_main && j != i { 1.0 } else { 0.0 },
                outcomes,
            });
        }
        let others: Vec<f64> = row
            .iter()
            .enumerate()
            .filter(|&(j, _)| j != i)
            .map(|(_, &a)| a)
            .collect();
        out.row_average.insert(code.clone(), mean(&row));
        out.row_transfer_average.insert(code.clone(), mean(&others));
        out.dev_accuracy
            .insert(code.clone(), report.best_dev_accuracy.map(percent));
        out.chosen_epoch.insert(code.clone(), report.best_epoch);
        if is_main {
            out.main_score = mean(&others);
            for t in all_test {
                let (acc, outcomes) = test_on(&model, &cache[t]);
                out.train_language_on_every_language.insert(t.clone(), acc);
                // Cells of the matrix are recorded above already.
                if !params.languages.contains(t) {
                    out.groups.push(Group {
                        name: format!("{code}/{t}"),
                        weight: 0.0,
                        outcomes,
                    });
                }
            }
        }
        out.matrix.push(row);
    }
    out
}

/// The result's notes: the stand-in dataset and how the main score is made.
fn notes(params: &MldocParams) -> Vec<String> {
    vec![
        "SIB-200 (7 topics, FLORES-200 sentences) stands in for MLDoc (4 Reuters genres): \
         the Reuters texts are licensed and absent. Numbers are not comparable to LASER Table 2."
            .to_string(),
        format!(
            "main score: average test accuracy of the {}-trained classifier over the other {} \
             languages of the list ({}); each classifier's epoch is chosen on its training \
             language's dev set.",
            params.train_language,
            params.languages.len() - 1,
            params.languages.join(" ")
        ),
    ]
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

    const TOPICS: [&str; 4] = ["science/technology", "travel", "politics", "sports"];

    fn synthetic_dir(folders: &[&str]) -> tempfile::TempDir {
        let tmp = tempfile::tempdir().unwrap();
        for (li, f) in folders.iter().enumerate() {
            // labels.txt in a different order per language: categories are matched by name.
            let mut labels: Vec<&str> = TOPICS.to_vec();
            labels.rotate_left(li % TOPICS.len());
            write(tmp.path(), &format!("{f}/labels.txt"), &labels.join("\n"));
            for (split, n) in [("train", 80), ("dev", 20), ("test", 40)] {
                let mut body = String::from("index_id\tcategory\ttext\n");
                for i in 0..n {
                    let k = i % TOPICS.len();
                    body.push_str(&format!(
                        "{i}\t{}\t{f}: c{} c{} n{}\n",
                        TOPICS[k],
                        2 * k,
                        2 * k + 1,
                        i * 7 + li
                    ));
                }
                write(tmp.path(), &format!("{f}/{split}.tsv"), &body);
            }
        }
        tmp
    }

    /// The outcome's scores as [`MldocScores`], checked to be exactly the struct.
    fn typed(o: &Outcome) -> MldocScores {
        assert_typed(DEF.name, &o.scores);
        serde_json::from_value(o.scores.clone()).unwrap()
    }

    fn run_on(dir: &Path, enc: &dyn Encoder, langs: &[&str], params: &str, seed: u64) -> Outcome {
        let b = bench("sib200", "sib200", "mldoc", langs, params);
        run(&Context {
            benchmark: &b,
            dataset_dir: dir,
            side: &std::collections::BTreeMap::new(),
            encoder: enc,
            seed,
        })
        .unwrap()
    }

    #[test]
    fn the_declared_params_parse_to_the_reference_defaults() {
        assert_eq!(
            declared_params::<MldocParams>("sib200"),
            MldocParams::default()
        );
    }

    #[test]
    fn synthetic_topics_transfer_across_languages() {
        let tmp = synthetic_dir(&["eng_Latn", "deu_Latn", "jpn_Jpan", "xyz_Latn"]);
        let o = run_on(
            tmp.path(),
            &FakeEncoder,
            &[],
            "{languages: [en, de, ja], epochs: 60, lr: 0.01}",
            3,
        );
        let s = typed(&o);
        assert_eq!(s.folders, ["eng_Latn", "deu_Latn", "jpn_Jpan"]);
        assert_eq!(o.main_score, 100.0, "{:?}", o.scores);
        assert_eq!(s.zero_shot_average, o.main_score);
        assert_eq!(s.matrix.average, 100.0);
        // The en classifier is also tested on every folder, unmapped ones by folder name.
        assert_eq!(s.train_language_on_every_language["xyz_Latn"], 100.0);
        assert_eq!(s.train_language_on_every_language.len(), 4);
        assert_eq!(s.row_average["ja"], 100.0);
        assert_eq!(s.dev_accuracy["de"], Some(100.0));
        assert!(s.chosen_epoch["en"] <= 60);
        // 3 × 3 cells (en/de and en/ja in the headline) and en on the extra folder.
        let items = o.items.as_ref().unwrap();
        assert_eq!(items.headline(), o.main_score);
        assert_eq!(items.groups.len(), 9 + 1);
        let extra = items
            .groups
            .iter()
            .find(|g| g.name == "en/xyz_Latn")
            .unwrap();
        assert_eq!(extra.weight, 0.0);
        let weighted: Vec<&str> = items
            .groups
            .iter()
            .filter(|g| g.weight > 0.0)
            .map(|g| g.name.as_str())
            .collect();
        assert_eq!(weighted, ["en/de", "en/ja"]);
        let err = run(&Context {
            benchmark: &bench("sib200", "sib200", "mldoc", &[], "{languages: [en, qq]}"),
            dataset_dir: tmp.path(),
            side: &std::collections::BTreeMap::new(),
            encoder: &FakeEncoder,
            seed: 3,
        })
        .unwrap_err()
        .to_string();
        assert!(err.contains("`qq`"), "{err}");
    }

    /// Real data, reduced: 128-d hashed n-grams, en/de/zh, 60 epochs at lr 0.005; the second run reads
    /// the embedding cache.
    #[test]
    fn real_data_hashed_ngrams_reduced() {
        let dir = harness_core::shared_datasets_dir().join("sib200");
        let cache = tempfile::tempdir().unwrap();
        let enc = CachedEncoder::new(
            HashedNgrams::from_spec("hashed-ngrams", Some("dim=128")).unwrap(),
            cache.path(),
        );
        let langs = ["en", "de", "zh"];
        let params = "{languages: [en, de, zh], epochs: 60, lr: 0.005}";
        let a = run_on(&dir, &enc, &langs, params, 1);
        let b = run_on(&dir, &enc, &langs, params, 1);
        assert_eq!(a, b);
        let items = a.items.as_ref().unwrap();
        assert!((items.headline() - a.main_score).abs() < 1e-9);
        assert_eq!((items.groups.len(), items.count()), (9, 9 * 204));
        let s = typed(&a);
        let en_en = s.matrix.accuracy[0][0];
        // 7 topics: chance is 14 %, the majority class about 25 %; 128-d hashed n-grams
        // and a (10, 8) network reach about 37 % in-language.
        assert!((25.0..95.0).contains(&en_en), "{:?}", a.scores);
        assert!(
            a.main_score > 10.0 && a.main_score < en_en,
            "{:?}",
            a.scores
        );
    }

    /// `cargo test --release --lib protocols::mldoc::tests::full -- --ignored --nocapture`
    #[test]
    #[ignore]
    fn full_protocol_hashed_ngrams() {
        let dir = harness_core::shared_datasets_dir().join("sib200");
        let enc = HashedNgrams::new(Default::default());
        let start = std::time::Instant::now();
        let o = run_on(&dir, &enc, &[], "{}", 1);
        eprintln!(
            "mldoc full: {:.1} s, main {:.2}\n{}",
            start.elapsed().as_secs_f64(),
            o.main_score,
            serde_json::to_string_pretty(&o.scores).unwrap()
        );
        assert!(o.main_score > 14.0);
    }
}
