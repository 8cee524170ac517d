//! Building training corpora from loaded records: language-pair selection and the contamination filter.
//!
//! The contamination filter removes every training pair whose source OR target sentence
//! occurs in any evaluation set the recipe names (e.g. `exclude: [tatoeba]`), and reports
//! how many pairs it removed per language pair. Sentences are compared after
//! [`normalize`]; the evaluation side is an [`EvalSentences`] set built from the evaluation
//! loaders (helpers below for Tatoeba, newstest2012, FLORES-200 and BUCC; the XNLI/STS
//! helpers live with their loaders).

use crate::loaders::{bucc, multiway, tatoeba};
use crate::records::ParallelCorpus;
use crate::DataError;
use std::collections::HashSet;
use std::fmt;
use std::path::Path;
use std::sync::Arc;

/// The matching key of a sentence: Unicode-aware trim, every internal run of whitespace
/// collapsed to one ASCII space, then Unicode lowercase per character (`char::to_lowercase`;
/// no context rules such as the Greek final sigma, so the key never depends on neighbours).
///
/// Why: the same sentence reaches the datasets with different surroundings (FLORES and WMT
/// lines carry stray leading/trailing spaces, wrapped or double-spaced text, sentence-initial
/// capitals that differ between a Tatoeba test line and a manythings pair), and any of those
/// variants leaks the test sentence into training. Trimming and collapsing whitespace never
/// changes what a sentence says; lowercasing merges only case variants, which an encoder
/// with a cased vocabulary would still find near-identical. Punctuation, accents and
/// Unicode normal forms are left alone: stripping them would merge genuinely different
/// short sentences ("Hi." / "Hi!") and remove much more training data than it protects.
pub fn normalize(sentence: &str) -> String {
    let mut out = String::with_capacity(sentence.len());
    normalize_into(sentence, &mut out);
    out
}

/// [`normalize`] into `out` (cleared first), reusing its allocation.
pub fn normalize_into(sentence: &str, out: &mut String) {
    // One pass over the characters: this runs on every sentence of a training corpus and of
    // every excluded evaluation set.
    out.clear();
    if sentence.is_ascii() {
        // Most lines (the English sides, the Latin-script languages' short sentences): bytes
        // in place of chars, the same key (ASCII whitespace is all the whitespace there is).
        normalize_ascii(sentence.as_bytes(), out);
    } else {
        normalize_chars(sentence, out);
    }
}

/// [`normalize_into`] character by character (`out` empty on entry).
fn normalize_chars(sentence: &str, out: &mut String) {
    let mut pending_space = false;
    for c in sentence.chars() {
        if c.is_whitespace() {
            pending_space = !out.is_empty();
        } else {
            if pending_space {
                out.push(' ');
                pending_space = false;
            }
            if c.is_ascii() {
                out.push(c.to_ascii_lowercase());
            } else {
                out.extend(c.to_lowercase());
            }
        }
    }
}

/// [`normalize_into`] of an ASCII line: the same key, byte by byte.
fn normalize_ascii(bytes: &[u8], out: &mut String) {
    let mut key = std::mem::take(out).into_bytes();
    let mut pending_space = false;
    for &b in bytes {
        // `char::is_whitespace` on ASCII: tab, newline, vertical tab, form feed, return, space.
        if matches!(b, b'\t' | b'\n' | 0x0b | 0x0c | b'\r' | b' ') {
            pending_space = !key.is_empty();
        } else {
            if pending_space {
                key.push(b' ');
                pending_space = false;
            }
            key.push(b.to_ascii_lowercase());
        }
    }
    // ASCII in, ASCII out.
    *out = String::from_utf8(key).expect("ASCII bytes are UTF-8");
}

/// The hash of the sentence sets: foldhash's fast hasher with its fixed seed (SipHash, the
/// standard library's, was a fifth of building the sets; the keys are not attacker-chosen
/// and nothing iterates the sets in an order that could reach a result).
type SentenceSet = HashSet<String, foldhash::fast::FixedState>;

/// A set of normalised evaluation sentences ([`normalize`]); empty sentences are not stored.
///
/// Held as shared sets (one per evaluation dataset, [`Self::merge`] adds a set without
/// copying it), so that the datasets several corpora exclude are read and hashed once per
/// run; a sentence is in the set when any of them holds it.
#[derive(Debug, Clone, Default)]
pub struct EvalSentences {
    sets: Vec<Arc<SentenceSet>>,
}

impl EvalSentences {
    /// An empty set.
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds every sentence of `sentences` (normalised; empty ones skipped).
    pub fn extend<I, S>(&mut self, sentences: I)
    where
        I: IntoIterator<Item = S>,
        S: AsRef<str>,
    {
        if self.sets.is_empty() {
            self.sets.push(Arc::default());
        }
        // A set shared with another `EvalSentences` is copied first (copy on write).
        let set = Arc::make_mut(self.sets.last_mut().expect("pushed above"));
        let mut key = String::new();
        for s in sentences {
            normalize_into(s.as_ref(), &mut key);
            if !key.is_empty() && !set.contains(key.as_str()) {
                set.insert(key.clone());
            }
        }
    }

    /// Adds every sentence of `other` (its sets are shared, not copied).
    pub fn merge(&mut self, other: EvalSentences) {
        self.sets
            .extend(other.sets.into_iter().filter(|s| !s.is_empty()));
    }

    /// Whether `sentence` (normalised) is in the set.
    pub fn contains(&self, sentence: &str) -> bool {
        self.contains_with(sentence, &mut String::new())
    }

    /// [`Self::contains`] using `buf` as scratch space (no allocation per call).
    pub fn contains_with(&self, sentence: &str, buf: &mut String) -> bool {
        normalize_into(sentence, buf);
        self.sets.iter().any(|s| s.contains(buf.as_str()))
    }

    /// Number of distinct normalised sentences.
    pub fn len(&self) -> usize {
        // Each sentence counted in the first set that holds it.
        self.sets
            .iter()
            .enumerate()
            .map(|(i, set)| {
                set.iter()
                    .filter(|k| !self.sets[..i].iter().any(|s| s.contains(k.as_str())))
                    .count()
            })
            .sum()
    }

    /// True when no sentence is stored.
    pub fn is_empty(&self) -> bool {
        self.sets.iter().all(|s| s.is_empty())
    }
}

impl PartialEq for EvalSentences {
    /// The same distinct sentences, however they are split into sets.
    fn eq(&self, other: &Self) -> bool {
        let within = |a: &Self, b: &Self| {
            a.sets
                .iter()
                .flat_map(|s| s.iter())
                .all(|k| b.sets.iter().any(|s| s.contains(k.as_str())))
        };
        within(self, other) && within(other, self)
    }
}

impl Eq for EvalSentences {}

impl<S: AsRef<str>> FromIterator<S> for EvalSentences {
    fn from_iter<I: IntoIterator<Item = S>>(iter: I) -> Self {
        let mut e = EvalSentences::new();
        e.extend(iter);
        e
    }
}

/// Kept/removed counts of one language pair.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PairCounts {
    pub source_lang: String,
    pub target_lang: String,
    pub kept: usize,
    pub removed: usize,
}

/// What [`filter_contaminated`] did, one row per language pair (in input order; corpora of
/// the same pair are summed into one row).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ContaminationReport {
    pub pairs: Vec<PairCounts>,
}

impl ContaminationReport {
    /// Pairs removed over all language pairs.
    pub fn total_removed(&self) -> usize {
        self.pairs.iter().map(|p| p.removed).sum()
    }

    /// Pairs kept over all language pairs.
    pub fn total_kept(&self) -> usize {
        self.pairs.iter().map(|p| p.kept).sum()
    }

    /// The row of `source-target`, if any.
    pub fn get(&self, source_lang: &str, target_lang: &str) -> Option<&PairCounts> {
        self.pairs
            .iter()
            .find(|p| p.source_lang == source_lang && p.target_lang == target_lang)
    }
}

impl fmt::Display for ContaminationReport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(
            f,
            "{:<12} {:>10} {:>10} {:>8}",
            "pair", "kept", "removed", "removed%"
        )?;
        let row = |f: &mut fmt::Formatter<'_>, name: &str, kept: usize, removed: usize| {
            let total = kept + removed;
            let pct = if total == 0 {
                0.0
            } else {
                100.0 * removed as f64 / total as f64
            };
            writeln!(f, "{name:<12} {kept:>10} {removed:>10} {pct:>7.2}%")
        };
        for p in &self.pairs {
            row(
                f,
                &format!("{}-{}", p.source_lang, p.target_lang),
                p.kept,
                p.removed,
            )?;
        }
        row(f, "total", self.total_kept(), self.total_removed())
    }
}

/// Removes every pair whose source or target sentence is in `eval` (after [`normalize`]),
/// keeping the order of the remaining pairs, and counts kept/removed per language pair.
pub fn filter_contaminated(
    corpora: Vec<ParallelCorpus>,
    eval: &EvalSentences,
) -> (Vec<ParallelCorpus>, ContaminationReport) {
    let mut report = ContaminationReport::default();
    let mut out = Vec::with_capacity(corpora.len());
    let mut buf = String::new();
    for mut corpus in corpora {
        let before = corpus.pairs.len();
        corpus.pairs.retain(|p| {
            !eval.contains_with(&p.source, &mut buf) && !eval.contains_with(&p.target, &mut buf)
        });
        let kept = corpus.pairs.len();
        let idx = match report.pairs.iter().position(|r| {
            r.source_lang == corpus.source_lang && r.target_lang == corpus.target_lang
        }) {
            Some(i) => i,
            None => {
                report.pairs.push(PairCounts {
                    source_lang: corpus.source_lang.clone(),
                    target_lang: corpus.target_lang.clone(),
                    kept: 0,
                    removed: 0,
                });
                report.pairs.len() - 1
            }
        };
        report.pairs[idx].kept += kept;
        report.pairs[idx].removed += before - kept;
        out.push(corpus);
    }
    (out, report)
}

/// Both sides of the Tatoeba test of every language in `dir` (`tatoeba-laser-v1`).
pub fn tatoeba_sentences(dir: &Path) -> Result<EvalSentences, DataError> {
    let langs = tatoeba::languages(dir)?;
    let refs: Vec<&str> = langs.iter().map(String::as_str).collect();
    tatoeba_sentences_for(dir, &refs)
}

/// Both sides of the Tatoeba test of the given languages only (`deu`, ...).
pub fn tatoeba_sentences_for(dir: &Path, langs: &[&str]) -> Result<EvalSentences, DataError> {
    let mut e = EvalSentences::new();
    for l in langs {
        let c = tatoeba::load_language(dir, l)?;
        e.extend(c.pairs.iter().flat_map(|p| [&p.source, &p.target]));
    }
    Ok(e)
}

/// Every line of newstest2012 (all five languages) in `dir`.
pub fn newstest2012_sentences(dir: &Path) -> Result<EvalSentences, DataError> {
    let mw = multiway::load_newstest2012(dir)?;
    Ok(mw.lines.values().flatten().collect())
}

/// Every line of every FLORES-200 devtest language in `dir`.
pub fn flores200_sentences(dir: &Path) -> Result<EvalSentences, DataError> {
    let mw = multiway::load_flores200(dir)?;
    Ok(mw.lines.values().flatten().collect())
}

/// Every zh and en sentence of the BUCC 2018 zh-en sample set in `dir` (all of them, not
/// only the gold ones: the mining task searches the whole collections).
pub fn bucc2018_sentences(dir: &Path) -> Result<EvalSentences, DataError> {
    let set = bucc::load_zh_en_sample(dir)?;
    Ok(set
        .source
        .iter()
        .chain(&set.target)
        .map(|s| s.text.as_str())
        .collect())
}

/// Every sentence an evaluation dataset can show an encoder (all splits a benchmark reads,
/// both sides of every pair, every language), for the contamination filter. `dir` is the installed
/// dataset folder. Training-only datasets (parallel corpora, conversations, books) have
/// no evaluation sentences and give an error naming the dataset.
pub fn dataset_sentences(dataset: &str, dir: &Path) -> Result<EvalSentences, DataError> {
    let mut e = EvalSentences::new();
    match dataset {
        "tatoeba-laser-v1" => return tatoeba_sentences(dir),
        "newstest2012" => return newstest2012_sentences(dir),
        "flores200-devtest" => return flores200_sentences(dir),
        "bucc2018" => return bucc2018_sentences(dir),
        _ => {}
    }
    if pair_sentences(dataset, dir, &mut e)? || labelled_sentences(dataset, dir, &mut e)? {
        return Ok(e);
    }
    Err(DataError::format(
        dir,
        None,
        format!("dataset `{dataset}` is not an evaluation set, so it has no sentences to exclude"),
        "name benchmarks (e.g. `tatoeba`, `xnli`) in the corpus's `exclude:` list",
    ))
}

/// The sentences of a dataset of sentence pairs (NLI, STS) into `e`; `false` when
/// `dataset` is not one.
fn pair_sentences(dataset: &str, dir: &Path, e: &mut EvalSentences) -> Result<bool, DataError> {
    use crate::loaders::{sick, sts12_16, sts17, stsb_multi_mt, stsbenchmark, xnli};
    use crate::records::{ScoredPair, Split};
    fn scored(e: &mut EvalSentences, pairs: &[ScoredPair]) {
        e.extend(pairs.iter().flat_map(|p| [&p.sentence1, &p.sentence2]));
    }
    match dataset {
        "xnli" => {
            for lang in xnli::LANGUAGES {
                for split in [Split::Dev, Split::Test] {
                    let pairs = xnli::load(dir, lang, split)?;
                    e.extend(pairs.iter().flat_map(|p| [&p.premise, &p.hypothesis]));
                }
            }
        }
        "snli" => {
            for split in [Split::Dev, Split::Test] {
                let pairs = crate::loaders::snli::load(dir, split)?;
                e.extend(pairs.iter().flat_map(|p| [&p.premise, &p.hypothesis]));
            }
        }
        "stsbenchmark" => {
            for split in Split::ALL {
                scored(e, &stsbenchmark::load(dir, split)?);
            }
        }
        "sts12-16" => {
            for year in sts12_16::YEARS {
                for subset in sts12_16::load(dir, year)? {
                    scored(e, &subset.pairs);
                }
            }
        }
        "sts17" => {
            for track in &sts17::TRACKS {
                scored(e, &sts17::load(dir, track)?);
            }
        }
        "stsb-multi-mt" => {
            for lang in stsb_multi_mt::LANGUAGES {
                for split in Split::ALL {
                    scored(e, &stsb_multi_mt::load(dir, lang, split)?);
                }
            }
        }
        "sick" => {
            for split in Split::ALL {
                let pairs = sick::load(dir, split)?;
                e.extend(pairs.iter().flat_map(|p| [&p.sentence_a, &p.sentence_b]));
            }
        }
        _ => return Ok(false),
    }
    Ok(true)
}

/// The sentences of a dataset of labelled sentences (classification, intents) into `e`;
/// `false` when `dataset` is not one.
fn labelled_sentences(dataset: &str, dir: &Path, e: &mut EvalSentences) -> Result<bool, DataError> {
    use crate::loaders::{cls_amazon, senteval, sib200, slot_gated, xsid};
    match dataset {
        "senteval" => {
            for task in senteval::Task::ALL {
                let s = senteval::load(dir, task)?;
                e.extend(s.train.iter().chain(&s.dev).chain(&s.test).map(|t| &t.text));
            }
            let m = senteval::load_mrpc(dir)?;
            e.extend(
                m.train
                    .iter()
                    .chain(&m.dev)
                    .chain(&m.test)
                    .flat_map(|p| [&p.sentence1, &p.sentence2]),
            );
        }
        "sib200" => {
            for lang in sib200::languages(dir)? {
                let s = sib200::load(dir, &lang)?;
                e.extend(s.train.iter().chain(&s.dev).chain(&s.test).map(|t| &t.text));
            }
        }
        // The `xsid` benchmark reads the test split only: the valid split (translations of
        // English valid sentences, not of the English training set) stays available for
        // training, e.g. as Emu's unlabelled adversarial sentences of other languages.
        "xsid" => {
            for lang in xsid::languages(dir)? {
                e.extend(
                    xsid::load(dir, &lang, xsid::Split::Test)?
                        .iter()
                        .map(|t| &t.text),
                );
            }
        }
        // The intent benchmarks read the declared split (`test`, or `valid`) and never
        // `train`, which stays available for training (Emu's ATIS column), as xSID's
        // English training set does.
        "atis" | "snips" => {
            let s = slot_gated::load(dir)?;
            e.extend(s.dev.iter().chain(&s.test).map(|t| &t.text));
        }
        "cls-amazon-reviews" => {
            for lang in cls_amazon::LANGUAGES {
                let s = cls_amazon::load(dir, lang)?;
                e.extend(s.train.iter().chain(&s.dev).chain(&s.test).map(|t| &t.text));
            }
        }
        _ => return Ok(false),
    }
    Ok(true)
}

/// A training corpus of parallel pairs after the contamination filter.
#[derive(Debug, Clone)]
pub struct BuiltParallel {
    /// One corpus per language pair, in the recipe's order.
    pub corpora: Vec<ParallelCorpus>,
    /// Kept/removed pairs per language pair.
    pub report: ContaminationReport,
    /// Distinct normalised evaluation sentences the filter compared against.
    pub excluded_sentences: usize,
}

/// Loads the language pairs of a parallel dataset (`parallel-pairs`, `wmt-news-parallel`;
/// pairs spelled as the dataset's folders, e.g. `deu-eng`) from `dir` and removes every pair
/// that shares a sentence with `eval`.
pub fn build_parallel(
    dataset: &str,
    dir: &Path,
    pairs: &[String],
    eval: &EvalSentences,
) -> Result<BuiltParallel, DataError> {
    use crate::loaders::{parallel_pairs, wmt_news};
    let mut corpora = Vec::with_capacity(pairs.len());
    for pair in pairs {
        let Some((lang, "eng")) = pair.split_once('-') else {
            return Err(DataError::format(
                dir,
                None,
                format!("language pair `{pair}` is not of the form `xxx-eng`"),
                "spell pairs as the dataset's folders, e.g. `deu-eng`",
            ));
        };
        corpora.push(match dataset {
            "parallel-pairs" => parallel_pairs::load_language(dir, lang)?,
            "wmt-news-parallel" => wmt_news::load_language(dir, lang)?,
            other => {
                return Err(DataError::format(
                    dir,
                    None,
                    format!("dataset `{other}` is not a parallel corpus"),
                    "use `parallel-pairs` or `wmt-news-parallel` for translation pairs",
                ))
            }
        });
    }
    let (corpora, report) = filter_contaminated(corpora, eval);
    Ok(BuiltParallel {
        corpora,
        report,
        excluded_sentences: eval.len(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::loaders::parallel_pairs;
    use crate::records::Bitext;
    use harness_core::shared_datasets_dir;

    #[test]
    fn the_ascii_key_is_the_character_key() {
        // Every ASCII byte, alone and between letters, runs of mixed whitespace, edges.
        let mut lines: Vec<String> = (0u8..128)
            .flat_map(|b| {
                let c = b as char;
                [
                    c.to_string(),
                    format!("Ab{c}Cd"),
                    format!("{c}{c}X{c} y{c}"),
                ]
            })
            .collect();
        lines.extend(
            [
                "",
                " ",
                "\t\x0b\x0c\r\n",
                "  Hello,\tWORLD!  ",
                "a \x1c b\x1f",
                "Q",
            ]
            .map(String::from),
        );
        for line in &lines {
            assert!(line.is_ascii());
            let (mut fast, mut slow) = (String::from("stale"), String::new());
            normalize_into(line, &mut fast);
            normalize_chars(line, &mut slow);
            assert_eq!(fast, slow, "{line:?}");
        }
    }

    #[test]
    fn merged_sets_are_shared_and_counted_once() {
        let a: EvalSentences = ["One.", "two", "Three"].into_iter().collect();
        let b: EvalSentences = ["one.", "Four"].into_iter().collect();
        let mut both = a.clone();
        both.merge(b.clone());
        // "One." and "one." share a key: four distinct sentences, in two sets.
        assert_eq!(both.len(), 4);
        assert!(both.contains("  FOUR ") && both.contains("THREE") && !both.contains("five"));
        let flat: EvalSentences = ["one.", "Two", "three", "four"].into_iter().collect();
        assert_eq!(both, flat);
        assert_ne!(a, flat);
        // Extending a merged set copies the shared one first: `b` is unchanged.
        both.extend(["five"]);
        assert!(both.contains("Five") && !b.contains("five") && b.len() == 2);
    }

    fn corpus(src: &str, pairs: &[(&str, &str)]) -> ParallelCorpus {
        ParallelCorpus {
            source_lang: src.into(),
            target_lang: "eng".into(),
            pairs: pairs
                .iter()
                .map(|(s, t)| Bitext {
                    source: s.to_string(),
                    target: t.to_string(),
                })
                .collect(),
        }
    }

    #[test]
    fn normalize_rule() {
        assert_eq!(normalize("  Hello\u{a0}\tWORLD \n"), "hello world");
        assert_eq!(normalize("Ärger  ÜBER"), "ärger über");
        assert_eq!(normalize("Hi."), "hi.");
        assert_ne!(normalize("Hi."), normalize("Hi!"));
        assert_eq!(normalize(" \t "), "");
    }

    #[test]
    fn synthetic_either_side_removes_and_counts_per_pair() {
        let eval: EvalSentences = ["Guten Morgen.", " good  NIGHT. ", ""]
            .into_iter()
            .collect();
        assert_eq!(eval.len(), 2);
        let corpora = vec![
            corpus(
                "deu",
                &[
                    ("guten morgen.", "Good morning."), // source matches
                    ("Gute Nacht.", "Good night."),     // target matches
                    ("Hallo.", "Hello."),               // clean
                    ("", ""),                           // empty never matches
                ],
            ),
            corpus(
                "fra",
                &[
                    ("Bonjour.", "Good morning."),
                    ("Bonne nuit.", "Good  night."),
                ],
            ),
            corpus("deu", &[("Guten Morgen.", "Morning!")]),
        ];
        let (kept, report) = filter_contaminated(corpora, &eval);
        assert_eq!(kept.len(), 3);
        assert_eq!(kept[0].pairs.len(), 2);
        assert_eq!(kept[0].pairs[0].source, "Hallo.");
        assert_eq!(kept[1].pairs.len(), 1);
        assert!(kept[2].pairs.is_empty());
        assert_eq!(report.pairs.len(), 2);
        let deu = report.get("deu", "eng").unwrap();
        assert_eq!((deu.kept, deu.removed), (2, 3));
        let fra = report.get("fra", "eng").unwrap();
        assert_eq!((fra.kept, fra.removed), (1, 1));
        assert_eq!(report.total_removed(), 4);
        let table = report.to_string();
        assert!(table.contains("deu-eng"), "{table}");
        assert!(
            table.lines().last().unwrap().starts_with("total"),
            "{table}"
        );
    }

    #[test]
    fn real_parallel_pairs_deu_against_tatoeba_deu() {
        let ds = shared_datasets_dir();
        let tdir = ds.join("tatoeba-laser-v1");
        let test = tatoeba::load_language(&tdir, "deu").unwrap();
        let pairs = parallel_pairs::load_language(&ds.join("parallel-pairs"), "deu").unwrap();
        assert_eq!(pairs.pairs.len(), 169_197);

        // SOURCE.txt's measurement (exact match after stripping surrounding whitespace).
        let strip: HashSet<&str> = test
            .pairs
            .iter()
            .flat_map(|p| [p.source.trim(), p.target.trim()])
            .collect();
        let exact = pairs
            .pairs
            .iter()
            .filter(|p| strip.contains(p.source.trim()) || strip.contains(p.target.trim()))
            .count();
        assert_eq!(exact, 712);

        let eval = tatoeba_sentences_for(&tdir, &["deu"]).unwrap();
        let (kept, report) = filter_contaminated(vec![pairs], &eval);
        let row = report.get("deu", "eng").unwrap();
        eprintln!("{report}");
        assert_eq!(row.kept + row.removed, 169_197);
        assert!(row.removed >= exact, "normalised matching is a superset");
        assert_eq!(row.removed, DEU_REMOVED);
        assert!(kept[0]
            .pairs
            .iter()
            .all(|p| !eval.contains(&p.source) && !eval.contains(&p.target)));
        assert!(kept[0]
            .pairs
            .iter()
            .all(|p| !strip.contains(p.source.trim()) && !strip.contains(p.target.trim())));
    }

    const DEU_REMOVED: usize = 713;

    /// All 12 pairs of `parallel-pairs` against the Tatoeba test of the same language:
    /// SOURCE.txt's table (rows whose eng or xx side is in the test, exact match after
    /// stripping surrounding whitespace) reproduced. The normalised filter removes the same
    /// numbers except deu 713 (vs 712) and fra 879 (vs 878), measured once; only deu is
    /// re-run here (above), to keep the suite fast in debug builds.
    #[test]
    fn real_all_pairs_match_source_table() {
        let ds = shared_datasets_dir();
        let expected = [
            ("ara", 499),
            ("bul", 898),
            ("cmn", 442),
            ("deu", 712),
            ("fra", 878),
            ("hin", 265),
            ("jpn", 989),
            ("spa", 789),
            ("tha", 156),
            ("tur", 38),
            ("urd", 716),
            ("vie", 456),
        ];
        let got: Vec<(&str, usize)> = std::thread::scope(|scope| {
            let handles: Vec<_> = expected
                .iter()
                .map(|&(lang, _)| {
                    let ds = &ds;
                    scope.spawn(move || {
                        let tdir = ds.join("tatoeba-laser-v1");
                        let test = tatoeba::load_language(&tdir, lang).unwrap();
                        let strip: HashSet<&str> = test
                            .pairs
                            .iter()
                            .flat_map(|p| [p.source.trim(), p.target.trim()])
                            .collect();
                        let pairs = parallel_pairs::load_language(&ds.join("parallel-pairs"), lang)
                            .unwrap();
                        let exact = pairs
                            .pairs
                            .iter()
                            .filter(|p| {
                                strip.contains(p.source.trim()) || strip.contains(p.target.trim())
                            })
                            .count();
                        (lang, exact)
                    })
                })
                .collect();
            handles.into_iter().map(|h| h.join().unwrap()).collect()
        });
        assert_eq!(got, expected);
    }

    #[test]
    fn real_eval_helpers_load() {
        let ds = shared_datasets_dir();
        let t = tatoeba_sentences(&ds.join("tatoeba-laser-v1")).unwrap();
        let n = newstest2012_sentences(&ds.join("newstest2012")).unwrap();
        let b = bucc2018_sentences(&ds.join("bucc2018")).unwrap();
        eprintln!(
            "tatoeba {} newstest2012 {} bucc {}",
            t.len(),
            n.len(),
            b.len()
        );
        assert!(t.contains("Can I pay by credit card?"));
        assert!(n.contains("parliament does not support amendment freeing tymoshenko"));
        assert!(b.len() > 20_000 && b.len() <= 8_624 + 13_589);
    }
}
