//! STS 2012–2016 English test sets in SentEval's layout (`sts12-16/STS/STS1x-en-test/`,
//! `STS.input.<subset>.txt` + `STS.gs.<subset>.txt`).
//!
//! Reference: SentEval `senteval/sts.py`, `STSEval.loadFile` with the subset lists of
//! `STS12Eval` … `STS16Eval`: the input file is read by line and split on TAB (sentence 1,
//! sentence 2; the STS16 files add two source-note fields, which are ignored), the gold file
//! is read by line, aligned by line number, and pairs whose gold line is empty (not scored,
//! STS15/16) are skipped. SentEval then Moses-tokenises and sorts by length; here the text is
//! returned untouched and in file order. The three largest STS16 inputs are stored `.gz`.

use crate::records::ScoredPair;
use crate::text::{self, Encoding};
use crate::DataError;
use std::path::{Path, PathBuf};

/// The years, as SentEval's task names STS12 … STS16 number them.
pub const YEARS: [u16; 5] = [2012, 2013, 2014, 2015, 2016];

/// The subsets of `year` (2012–2016), in SentEval's order; empty for any other year.
pub fn subsets(year: u16) -> &'static [&'static str] {
    match year {
        2012 => &[
            "MSRpar",
            "MSRvid",
            "SMTeuroparl",
            "surprise.OnWN",
            "surprise.SMTnews",
        ],
        2013 => &["FNWN", "headlines", "OnWN"],
        2014 => &[
            "deft-forum",
            "deft-news",
            "headlines",
            "images",
            "OnWN",
            "tweet-news",
        ],
        2015 => &[
            "answers-forums",
            "answers-students",
            "belief",
            "headlines",
            "images",
        ],
        2016 => &[
            "answer-answer",
            "headlines",
            "plagiarism",
            "postediting",
            "question-question",
        ],
        _ => &[],
    }
}

/// The scored pairs of one subset.
#[derive(Debug, Clone, PartialEq)]
pub struct Subset {
    pub name: &'static str,
    pub pairs: Vec<ScoredPair>,
}

/// The folder of `year` inside the dataset folder: `STS/STS12-en-test`, ….
pub fn year_dir(dir: &Path, year: u16) -> PathBuf {
    dir.join("STS")
        .join(format!("STS{:02}-en-test", year % 100))
}

/// Loads every subset of `year` (2012–2016), in SentEval's order, skipping unscored pairs.
pub fn load(dir: &Path, year: u16) -> Result<Vec<Subset>, DataError> {
    let names = subsets(year);
    if names.is_empty() {
        return Err(DataError::Missing {
            path: year_dir(dir, year),
            hint: format!("STS {year} is not in this dataset; the years are 2012 to 2016"),
        });
    }
    names
        .iter()
        .map(|&name| {
            Ok(Subset {
                name,
                pairs: load_subset(dir, year, name)?,
            })
        })
        .collect()
}

/// Loads one subset of `year` (a name from [`subsets`]), skipping unscored pairs.
pub fn load_subset(dir: &Path, year: u16, subset: &str) -> Result<Vec<ScoredPair>, DataError> {
    let ydir = year_dir(dir, year);
    let input = text::resolve(&ydir, &format!("STS.input.{subset}.txt"))?;
    let gold = text::resolve(&ydir, &format!("STS.gs.{subset}.txt"))?;
    // STS16 inputs carry two source-note columns after the sentences.
    let fields = if year == 2016 { 4 } else { 2 };
    read_pair(&input, &gold, fields)
}

/// Reads an input file with `fields` TAB-separated fields per line (sentences first) and its
/// line-aligned gold file; lines with an empty gold score are skipped. Both files must have
/// the same number of lines.
pub fn read_pair(input: &Path, gold: &Path, fields: usize) -> Result<Vec<ScoredPair>, DataError> {
    let in_lines = text::read_lines(input, Encoding::Utf8)?;
    let gs_lines = text::read_lines(gold, Encoding::Utf8)?;
    check_aligned(input, in_lines.len(), gold, gs_lines.len())?;
    let mut pairs = Vec::new();
    for (i, (line, gs)) in in_lines.iter().zip(&gs_lines).enumerate() {
        let f = text::tab_fields(input, i + 1, line, fields, fields)?;
        if gs.trim().is_empty() {
            continue;
        }
        let score = text::parse_f64(gold, i + 1, gs, "gold score")?;
        pairs.push(ScoredPair {
            sentence1: f[0].to_string(),
            sentence2: f[1].to_string(),
            score,
        });
    }
    Ok(pairs)
}

/// Errors, naming the shorter file and its first missing line, when the input and gold
/// files have different numbers of lines.
pub(crate) fn check_aligned(
    input: &Path,
    n_input: usize,
    gold: &Path,
    n_gold: usize,
) -> Result<(), DataError> {
    if n_input == n_gold {
        return Ok(());
    }
    let (short, n, other, m) = if n_input < n_gold {
        (input, n_input, gold, n_gold)
    } else {
        (gold, n_gold, input, n_input)
    };
    Err(DataError::format(
        short,
        Some(n + 1),
        format!(
            "file ends after {n} lines but {} has {m}; the two are aligned line by line",
            other.display()
        ),
        "the file is truncated; re-fetch the dataset with `harness datasets fetch --force`",
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::loaders::test_support::*;

    /// (year, subset, scored pairs) exactly as SOURCE.txt lists them.
    const COUNTS: [(u16, &str, usize); 24] = [
        (2012, "MSRpar", 750),
        (2012, "MSRvid", 750),
        (2012, "SMTeuroparl", 459),
        (2012, "surprise.OnWN", 750),
        (2012, "surprise.SMTnews", 399),
        (2013, "FNWN", 189),
        (2013, "headlines", 750),
        (2013, "OnWN", 561),
        (2014, "deft-forum", 450),
        (2014, "deft-news", 300),
        (2014, "headlines", 750),
        (2014, "images", 750),
        (2014, "OnWN", 750),
        (2014, "tweet-news", 750),
        (2015, "answers-forums", 375),
        (2015, "answers-students", 750),
        (2015, "belief", 375),
        (2015, "headlines", 750),
        (2015, "images", 750),
        (2016, "answer-answer", 254),
        (2016, "headlines", 249),
        (2016, "plagiarism", 230),
        (2016, "postediting", 244),
        (2016, "question-question", 209),
    ];

    #[test]
    fn real_counts_per_subset_and_year() {
        let dir = real("sts12-16");
        let mut totals = Vec::new();
        for year in YEARS {
            let subs = load(&dir, year).unwrap();
            let expected: Vec<(&str, usize)> = COUNTS
                .iter()
                .filter(|c| c.0 == year)
                .map(|c| (c.1, c.2))
                .collect();
            let got: Vec<(&str, usize)> = subs.iter().map(|s| (s.name, s.pairs.len())).collect();
            assert_eq!(got, expected, "STS{year}");
            for s in &subs {
                assert!(s.pairs.iter().all(|p| (0.0..=5.0).contains(&p.score)));
            }
            totals.push(subs.iter().map(|s| s.pairs.len()).sum::<usize>());
        }
        assert_eq!(totals, vec![3108, 1500, 3750, 3000, 1186]);
    }

    #[test]
    fn real_known_records() {
        let dir = real("sts12-16");
        let msrpar = load_subset(&dir, 2012, "MSRpar").unwrap();
        assert_eq!(
            msrpar[0].sentence1,
            "The problem likely will mean corrective changes before the shuttle fleet starts flying again."
        );
        assert_eq!(
            msrpar[0].sentence2,
            "He said the problem needs to be corrected before the space shuttle fleet is cleared to fly again."
        );
        assert_eq!(msrpar[0].score, 4.4);
        // STS16 (a .gz input with 4 fields), first and last scored pairs.
        let qq = load_subset(&dir, 2016, "question-question").unwrap();
        assert_eq!(qq[0].sentence1, QQ_FIRST.0);
        assert_eq!(qq[0].sentence2, QQ_FIRST.1);
        assert_eq!(qq[0].score, QQ_FIRST.2);
        let last = qq.last().unwrap();
        assert_eq!(last.sentence1, QQ_LAST.0);
        assert_eq!(last.sentence2, QQ_LAST.1);
        assert_eq!(last.score, QQ_LAST.2);
    }

    const QQ_FIRST: (&str, &str, f64) = (
        "How do I make a height adjustable desk?",
        "How can I build a wall mounted adjustable height desk?",
        4.0,
    );
    const QQ_LAST: (&str, &str, f64) = (
        "What could be wrong with my furnace?",
        "What is wrong with my gas furnace?",
        4.0,
    );

    #[test]
    fn unscored_pairs_are_skipped_plain_and_gz() {
        let tmp = tempfile::tempdir().unwrap();
        let y15 = "STS/STS15-en-test";
        write(
            tmp.path(),
            &format!("{y15}/STS.input.belief.txt"),
            "a \"b\tc\nd\te\nf\tg\n",
        );
        write(
            tmp.path(),
            &format!("{y15}/STS.gs.belief.txt"),
            "3.8\n\n4.000\n",
        );
        let p = load_subset(tmp.path(), 2015, "belief").unwrap();
        assert_eq!(p.len(), 2);
        assert_eq!((p[0].sentence1.as_str(), p[0].score), ("a \"b", 3.8));
        assert_eq!((p[1].sentence2.as_str(), p[1].score), ("g", 4.0));
        let y16 = "STS/STS16-en-test";
        write_gz(
            tmp.path(),
            &format!("{y16}/STS.input.plagiarism.txt"),
            "a\tb\tn1\tn2\nc\td\tn1\tn2\n",
        );
        write(tmp.path(), &format!("{y16}/STS.gs.plagiarism.txt"), "\n2\n");
        let p = load_subset(tmp.path(), 2016, "plagiarism").unwrap();
        assert_eq!(
            p,
            vec![ScoredPair {
                sentence1: "c".into(),
                sentence2: "d".into(),
                score: 2.0
            }]
        );
    }

    #[test]
    fn errors_name_file_and_line() {
        let tmp = tempfile::tempdir().unwrap();
        let y = "STS/STS13-en-test";
        assert_mentions(
            load_subset(tmp.path(), 2013, "FNWN"),
            &["STS.input.FNWN.txt", "not found"],
        );
        assert_mentions(load(tmp.path(), 2011), &["2011", "2012 to 2016"]);
        write_truncated_gz(
            tmp.path(),
            &format!("{y}/STS.input.FNWN.txt"),
            &"a\tb\n".repeat(500),
        );
        write(
            tmp.path(),
            &format!("{y}/STS.gs.FNWN.txt"),
            &"1\n".repeat(500),
        );
        assert_mentions(
            load_subset(tmp.path(), 2013, "FNWN"),
            &["STS.input.FNWN.txt.gz", "truncated"],
        );
        write(
            tmp.path(),
            &format!("{y}/STS.input.OnWN.txt"),
            "a\tb\nc d\n",
        );
        write(tmp.path(), &format!("{y}/STS.gs.OnWN.txt"), "1\n2\n");
        assert_mentions(
            load_subset(tmp.path(), 2013, "OnWN"),
            &["STS.input.OnWN.txt:2", "fields"],
        );
        write(
            tmp.path(),
            &format!("{y}/STS.input.headlines.txt"),
            "a\tb\nc\td\ne\tf\n",
        );
        write(tmp.path(), &format!("{y}/STS.gs.headlines.txt"), "1\nx\n");
        assert_mentions(
            load_subset(tmp.path(), 2013, "headlines"),
            &["STS.gs.headlines.txt:3", "truncated"],
        );
        write(
            tmp.path(),
            &format!("{y}/STS.gs.headlines.txt"),
            "1\nx\n3\n",
        );
        assert_mentions(
            load_subset(tmp.path(), 2013, "headlines"),
            &["STS.gs.headlines.txt:2", "`x`"],
        );
    }
}
