//! `multiway-search`: multilingual similarity search on an N-way parallel set, the LASER
//! protocol (error-rate matrix over every ordered language pair).
//!
//! Reference: Artetxe & Schwenk (2019) and the LASER repository's `tasks/similarity/`
//! (`wmt.sh` on WMT newstest2012 cs/de/en/es/fr, results in its README), implemented by
//! facebookresearch/LASER `source/similarity_search.py` and `source/lib/indexing.py`
//! (`IndexCreate`, `IndexSearchMultiple`, `IndexPrintConfusionMatrix`).
//!
//! # What LASER does, and this protocol with it
//! - Each language's file is embedded once; embeddings are **L2-normalised**
//!   (`IndexCreate(normalize=True)`, `faiss.normalize_L2`) and put in a flat L2 index. On
//!   unit vectors the L2 nearest neighbour is the cosine nearest neighbour; here the search
//!   is the exact inner product of the normalised rows (ties to the lower index, as FAISS's
//!   top-1 keeps the first best).
//! - For every ordered pair `i ≠ j`, each line of language `i` retrieves its 1-NN among the
//!   lines of language `j`; it is an **error when the neighbour's index differs from the
//!   line's own index** (`err[i, j] = errors / N`). With `textual: true` (LASER
//!   `--textual`) it is an error only when the retrieved line's text differs from the
//!   reference line's text (which forgives duplicated lines).
//! - Row average = `Σ_j err[i, j] / (n − 1)`, column average = `Σ_i err[i, j] / (n − 1)`,
//!   global average = `Σ err / (n (n − 1))` = the mean over the ordered pairs: the headline.
//!   (The LASER README's printed global 1.06 % is not that mean of its own cells, 0.85 %;
//!   `IndexPrintConfusionMatrix`'s formula is the mean, and that is what is reported.)
//!
//! All numbers are percentages.
//!
//! # Datasets
//! Files are found by the `files` pattern of the declaration's params, `{lang}` standing
//! for the language code (`newstest2012.{lang}`, `{lang}.devtest`; `.gz` copies are read
//! too). The languages are the declaration's list; `all` (or no list) means every language
//! with a file in the folder.

use super::def::{
    no_side_datasets, parses_as, CheckedParams, Context, Outcome, ProtocolDef, ScoresDef,
};
use crate::benchmark::Benchmark;
use crate::error::BenchError;
use crate::items::{Group, Items, Outcomes};
use crate::knn::{top_k, KnnError, KnnOptions, Metric};
use harness_data::loaders::multiway::{list_dir, read_aligned};
use harness_data::text;
use harness_embed::matrix::Matrix;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// The `scores` of a `multiway-search` result: error rates in %.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct MultiwayScores {
    /// The languages, in the matrix's order.
    pub languages: Vec<String>,
    /// Lines per language.
    pub lines: usize,
    /// Ordered language pairs searched.
    pub pairs: usize,
    /// Source row → target column.
    pub error_rate: BTreeMap<String, BTreeMap<String, f64>>,
    /// Per source language, the mean over its targets.
    pub row_average: BTreeMap<String, f64>,
    /// Per target language, the mean over its sources.
    pub column_average: BTreeMap<String, f64>,
    /// The mean over every ordered pair: the headline.
    pub average: f64,
}

/// `params:` of a `multiway-search` benchmark.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct MultiwayParams {
    /// File name of a language's lines, `{lang}` standing for its code (required).
    pub files: String,
    /// LASER `--textual`: compare the retrieved text instead of the index.
    pub textual: bool,
}

/// Per query row, the index of its nearest key by inner product (`None` when there are no
/// keys). Rows must already be L2-normalised for this to be cosine.
pub fn nearest(queries: &Matrix, keys: &Matrix) -> Result<Vec<Option<usize>>, KnnError> {
    let knn = top_k(
        queries,
        keys,
        1,
        Metric::InnerProduct,
        &KnnOptions::default(),
    )?;
    Ok(knn.iter().map(|r| r.first().map(|n| n.index)).collect())
}

/// Per query, whether 1-NN search from `queries` into `keys` retrieves the right line (line
/// `i` expects line `i`; with `texts`, the key side's lines, a retrieved line with the same
/// text counts as right), with the index it retrieved (`-1`: none).
pub fn search_outcomes(
    queries: &Matrix,
    keys: &Matrix,
    texts: Option<&[String]>,
) -> Result<Outcomes, KnnError> {
    let nn = nearest(queries, keys)?;
    let correct = nn
        .iter()
        .enumerate()
        .map(|(i, &got)| match (got, texts) {
            (Some(j), Some(t)) => t.get(i) == t.get(j),
            (got, _) => got == Some(i),
        })
        .collect();
    Ok(Outcomes::Correct {
        correct,
        neighbour: Some(nn.iter().map(|n| n.map_or(-1, |j| j as i64)).collect()),
    })
}

/// Error rate (%) of per-query [`search_outcomes`]: 100 · errors / queries, computed as
/// LASER does (and as this protocol always did: the same bits in the result files).
pub fn error_rate_of(outcomes: &Outcomes) -> f64 {
    match outcomes {
        Outcomes::Correct { correct, .. } => {
            let errors = correct.iter().filter(|&&c| !c).count();
            100.0 * errors as f64 / correct.len().max(1) as f64
        }
        other => 100.0 * (1.0 - other.metric(None)),
    }
}

/// Error rate (%) of 1-NN search from `queries` into `keys` ([`search_outcomes`]).
pub fn error_rate(
    queries: &Matrix,
    keys: &Matrix,
    texts: Option<&[String]>,
) -> Result<f64, KnnError> {
    Ok(error_rate_of(&search_outcomes(queries, keys, texts)?))
}

/// The search outcomes of `embeddings` (one L2-normalised matrix per language, rows
/// aligned) for every ordered pair: `out[i][j]` for `i ≠ j`, `None` on the diagonal.
pub fn outcome_matrix(
    embeddings: &[Matrix],
    texts: Option<&[Vec<String>]>,
) -> Result<Vec<Vec<Option<Outcomes>>>, KnnError> {
    let n = embeddings.len();
    let mut out = vec![vec![None; n]; n];
    for i in 0..n {
        for j in 0..n {
            if i != j {
                let t = texts.map(|t| t[j].as_slice());
                out[i][j] = Some(search_outcomes(&embeddings[i], &embeddings[j], t)?);
            }
        }
    }
    Ok(out)
}

/// The languages to evaluate: the declaration's list, or every language whose file matches
/// the pattern when the list is empty or says `all`.
fn languages(ctx: &Context, pattern: &str) -> Result<Vec<String>, BenchError> {
    let declared = ctx.languages_or(Vec::new());
    if !declared.is_empty() && !declared.iter().any(|l| l == "all") {
        return Ok(declared);
    }
    let (prefix, suffix) = pattern.split_once("{lang}").unwrap_or((pattern, ""));
    let mut langs: Vec<String> = list_dir(ctx.dataset_dir)?
        .into_iter()
        .filter_map(|name| {
            let name = name.strip_suffix(".gz").unwrap_or(&name);
            let lang = name.strip_prefix(prefix)?.strip_suffix(suffix)?;
            (!lang.is_empty()).then(|| lang.to_string())
        })
        .collect();
    langs.sort();
    langs.dedup();
    Ok(langs)
}

impl CheckedParams for MultiwayParams {
    fn check(&self, _: &Benchmark) -> Result<(), String> {
        if !self.files.contains("{lang}") {
            return Err(format!(
                "params.files must be a file name containing `{{lang}}` (e.g. `{{lang}}.devtest`), got `{}`",
                self.files
            ));
        }
        Ok(())
    }
}

/// `multiway-search`, defined once: [`super::ALL`] lists it.
pub const DEF: ProtocolDef = ProtocolDef {
    name: "multiway-search",
    check_params: parses_as::<MultiwayParams>,
    side_datasets: no_side_datasets,
    run,
    scores: ScoresDef::of::<MultiwayScores>(),
};

/// The `multiway-search` protocol.
pub fn run(ctx: &Context) -> Result<Outcome, BenchError> {
    let params: MultiwayParams = ctx.params()?;
    let langs = languages(ctx, &params.files)?;
    if langs.len() < 2 {
        return Err(ctx.error(format!(
            "multi-way search needs at least two languages, got {langs:?}"
        )));
    }
    let files = langs
        .iter()
        .map(|l| {
            let name = params.files.replace("{lang}", l);
            Ok((l.clone(), text::resolve(ctx.dataset_dir, &name)?))
        })
        .collect::<Result<Vec<_>, BenchError>>()?;
    let mut mw = read_aligned(&files)?;
    let lines: Vec<Vec<String>> = langs
        .iter()
        .map(|l| mw.lines.remove(l).unwrap_or_default())
        .collect();
    let n_lines = lines.first().map_or(0, Vec::len);
    let embeddings = lines
        .iter()
        .map(|l| {
            let mut m = ctx.embed(l)?;
            m.l2_normalize_rows();
            Ok(m)
        })
        .collect::<Result<Vec<_>, BenchError>>()?;
    let outcomes = outcome_matrix(&embeddings, params.textual.then_some(lines.as_slice()))
        .map_err(|e| ctx.error(e.to_string()))?;
    let err: Vec<Vec<Option<f64>>> = outcomes
        .iter()
        .map(|row| row.iter().map(|o| o.as_ref().map(error_rate_of)).collect())
        .collect();
    // One group per ordered pair, equally weighted: the headline is the mean over the pairs.
    let groups = outcomes
        .into_iter()
        .enumerate()
        .flat_map(|(i, row)| {
            let langs = &langs;
            row.into_iter().enumerate().filter_map(move |(j, o)| {
                o.map(|outcomes| Group {
                    name: format!("{}-{}", langs[i], langs[j]),
                    weight: 1.0,
                    outcomes,
                })
            })
        })
        .collect();

    let n = langs.len();
    let off = (n - 1) as f64;
    let mut matrix = BTreeMap::new();
    let mut rows = BTreeMap::new();
    let mut cols = BTreeMap::new();
    for (i, li) in langs.iter().enumerate() {
        let row: BTreeMap<String, f64> = langs
            .iter()
            .enumerate()
            .filter_map(|(j, lj)| err[i][j].map(|e| (lj.clone(), e)))
            .collect();
        matrix.insert(li.clone(), row);
        let r: f64 = err[i].iter().flatten().sum();
        rows.insert(li.clone(), r / off);
        let c: f64 = err.iter().filter_map(|row| row[i]).sum();
        cols.insert(li.clone(), c / off);
    }
    let total: f64 = err.iter().flatten().flatten().sum();
    let average = total / (n as f64 * off);
    Ok(Outcome {
        main_metric: "error_rate".into(),
        main_score: average,
        scores: ctx.scores(&MultiwayScores {
            languages: langs.clone(),
            lines: n_lines,
            pairs: n * (n - 1),
            error_rate: matrix,
            row_average: rows,
            column_average: cols,
            average,
        })?,
        params: serde_json::to_value(&params).map_err(|e| ctx.error(e.to_string()))?,
        notes: vec![format!(
            "Error rate (%) of cosine 1-NN search, source row → target column, {} lines per \
             language; an error is a neighbour at another {} (LASER similarity_search.py); the \
             headline is the mean over the {} ordered pairs.",
            n_lines,
            if params.textual { "text" } else { "line index" },
            n * (n - 1)
        )],
        items: Some(Items::error_rate_of(groups)),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::benchmark::Benchmark;
    use crate::protocols::fake_encoder::{declared_params, TableEncoder};
    use crate::protocols::test_support::{run_real_with, Reuse};
    use std::collections::HashMap;

    #[test]
    fn three_language_matrix_with_a_fake_encoder() {
        // 4 lines, directions at 0°, 40°, 80°, 120° for "aa" and "bb"; "cc" has line 3 at 15°
        // (nearest to line 0 of the others) → errors only where cc is involved at line 3,
        // and the others' line 0 retrieves cc's line 0 (0° vs 15°: 0 is nearer).
        let dir = tempfile::tempdir().unwrap();
        let deg = |d: f32| vec![d.to_radians().cos(), d.to_radians().sin()];
        let mut table = HashMap::new();
        let mut files = HashMap::new();
        for (lang, angles) in [
            ("aa", [0.0, 40.0, 80.0, 120.0]),
            ("bb", [0.0, 40.0, 80.0, 120.0]),
            ("cc", [0.0, 40.0, 80.0, 15.0]),
        ] {
            let lines: Vec<String> = (0..4).map(|i| format!("{lang}{i}")).collect();
            for (l, a) in lines.iter().zip(angles) {
                table.insert(l.clone(), deg(a));
            }
            files.insert(lang, lines.join("\n") + "\n");
        }
        for (lang, text) in &files {
            std::fs::write(dir.path().join(format!("t.{lang}")), text).unwrap();
        }
        std::fs::write(dir.path().join("other.txt"), "x\n").unwrap();
        let bench = Benchmark {
            in_all: true,
            name: "toy".into(),
            description: String::new(),
            dataset: "toy".into(),
            protocol: "multiway-search".into(),
            split: "test".into(),
            languages: vec!["all".into()],
            params: [("files".to_string(), serde_yaml::Value::from("t.{lang}"))].into(),
        };
        let enc = TableEncoder::new(2, table);
        let ctx = Context {
            benchmark: &bench,
            dataset_dir: dir.path(),
            side: &std::collections::BTreeMap::new(),
            encoder: &enc,
            seed: 1,
        };
        let o = run(&ctx).unwrap();
        crate::protocols::test_support::assert_typed("multiway-search", &o.scores);
        let s = &o.scores;
        assert_eq!(s["languages"], serde_json::json!(["aa", "bb", "cc"]));
        // aa→cc: line 3 (120°) nearest cc line is 2 (80°, 40° away; cc3 at 15° is 105°):
        // 1 error of 4. cc→aa: cc3 (15°) → aa0: 1 error. aa↔bb: none. Same for bb.
        let e = |a: &str, b: &str| s["error_rate"][a][b].as_f64().unwrap();
        assert_eq!(e("aa", "bb"), 0.0);
        assert_eq!(e("bb", "aa"), 0.0);
        assert_eq!(e("aa", "cc"), 25.0);
        assert_eq!(e("cc", "aa"), 25.0);
        assert_eq!(e("bb", "cc"), 25.0);
        assert_eq!(e("cc", "bb"), 25.0);
        assert_eq!(s["row_average"]["aa"], 12.5);
        assert_eq!(s["row_average"]["cc"], 25.0);
        assert_eq!(s["column_average"]["cc"], 25.0);
        assert_eq!(s["column_average"]["bb"], 12.5);
        // 4 cells of 25 over 6 ordered pairs.
        assert!((o.main_score - 100.0 / 6.0).abs() < 1e-12);
        assert_eq!(s["pairs"], 6);
    }

    #[test]
    fn textual_comparison_forgives_duplicate_lines() {
        // Keys 0 and 1 are the same text (and vector): query 1 finds key 0 (lower index).
        let m = Matrix::from_rows(&[vec![1.0, 0.0], vec![1.0, 0.0], vec![0.0, 1.0]], 2);
        assert!((error_rate(&m, &m, None).unwrap() - 100.0 / 3.0).abs() < 1e-12);
        let texts = vec!["same".to_string(), "same".into(), "other".into()];
        assert_eq!(error_rate(&m, &m, Some(&texts)).unwrap(), 0.0);
    }

    /// Debug-build smoke test on the real files (hashed-ngrams of dimension 16, which
    /// unoptimised code embeds fast enough).
    #[test]
    fn real_newstest2012_and_flores_small_dim() {
        let (o, secs, _) =
            run_real_with("newstest2012", None, "hashed-ngrams:dim=16", Reuse::Memory);
        eprintln!("newstest2012 dim 16 ({secs:.1} s): {:.2}", o.main_score);
        assert_eq!(o.scores["lines"], 3003);
        assert_eq!(o.scores["pairs"], 20);
        // 16 random projections: near chance (99.97 % for 3003 lines); this test checks the
        // wiring and determinism, the ignored `full_` test the numbers.
        assert!((50.0..99.97).contains(&o.main_score), "{}", o.main_score);
        let langs = ["eng_Latn", "fra_Latn", "zho_Hans"];
        let (o, secs, _) = run_real_with(
            "flores200",
            Some(&langs),
            "hashed-ngrams:dim=16",
            Reuse::Memory,
        );
        eprintln!("flores200 dim 16 ({secs:.1} s): {:.2}", o.main_score);
        assert_eq!(o.scores["lines"], 1012);
        assert!((50.0..99.9).contains(&o.main_score), "{}", o.main_score);
    }

    /// The full benchmarks with the default hashed-ngrams (512 dimensions):
    /// `cargo test --release --lib protocols::multiway::tests::full -- --ignored --nocapture`.
    #[test]
    #[ignore]
    fn full_newstest2012_and_flores200_hashed_ngrams() {
        let (o, secs, _) =
            run_real_with("newstest2012", None, "hashed-ngrams:dim=512", Reuse::Memory);
        eprintln!(
            "newstest2012 hashed-ngrams ({secs:.1} s): average {:.2}\n{}\nrows {}\ncols {}",
            o.main_score,
            serde_json::to_string(&o.scores["error_rate"]).unwrap(),
            o.scores["row_average"],
            o.scores["column_average"],
        );
        assert_eq!(o.scores["pairs"], 20);
        // Names, numbers and cognates carry surface n-grams a long way on news text, but
        // far from LASER's ~1 %.
        assert!((2.0..80.0).contains(&o.main_score), "{}", o.main_score);

        let (o, secs, _) = run_real_with("flores200", None, "hashed-ngrams:dim=512", Reuse::Memory);
        eprintln!(
            "flores200 (15 XNLI languages) hashed-ngrams ({secs:.1} s): average {:.2}\nrows {}",
            o.main_score, o.scores["row_average"],
        );
        let e = |a: &str, b: &str| o.scores["error_rate"][a][b].as_f64().unwrap();
        assert_eq!(o.scores["pairs"], 210);
        // Latin-script pairs share far more n-grams than Latin–Han pairs.
        assert!(e("fra_Latn", "spa_Latn") < e("eng_Latn", "zho_Hans"));
        assert!((10.0..99.0).contains(&o.main_score), "{}", o.main_score);
    }

    #[test]
    fn declared_params_parse() {
        for name in ["newstest2012", "flores200"] {
            let p: MultiwayParams = declared_params(name);
            assert!(p.files.contains("{lang}"), "{name}");
        }
    }
}
