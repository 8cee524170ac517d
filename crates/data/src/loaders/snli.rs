//! SNLI 1.0 dev and test (`snli/validation.tsv`, `snli/test.tsv`, both stored `.gz`): the
//! gold-labelled pairs as exported from the Hugging Face `snli` dataset.
//!
//! Reference: SentEval `senteval/snli.py`, `SNLIEval` (premise = sentence1, hypothesis =
//! sentence2, labels entailment / neutral / contradiction), reading these files the way the
//! Hugging Face export wrote them: one header line `premise<TAB>hypothesis<TAB>label`, then
//! TAB-separated rows without quoting (sentences contain raw `"`), label an integer in HF
//! order 0 = entailment, 1 = neutral, 2 = contradiction. Pairs with no gold label (HF `-1`,
//! SNLI's `-`) are not in these files (SOURCE.txt); should one appear it is skipped, as
//! SentEval's download script and HF users drop them. SNLI train is not in this dataset.

use crate::records::{NliLabel, NliPair, Split};
use crate::text::{self, Encoding};
use crate::DataError;
use std::path::Path;

const FIX: &str = "the file is corrupt; re-fetch it with `harness datasets fetch --force`";

/// The file name of `split`: `validation.tsv` (dev) or `test.tsv`; `None` for train, which
/// this dataset does not hold.
pub fn file_name(split: Split) -> Option<&'static str> {
    match split {
        Split::Train => None,
        Split::Dev => Some("validation.tsv"),
        Split::Test => Some("test.tsv"),
    }
}

/// Loads the gold-labelled pairs of dev or test.
pub fn load(dir: &Path, split: Split) -> Result<Vec<NliPair>, DataError> {
    let Some(name) = file_name(split) else {
        return Err(DataError::Missing {
            path: dir.join("train.tsv"),
            hint: "SNLI train is not part of this dataset (see its SOURCE.txt); use dev or test"
                .into(),
        });
    };
    let path = text::resolve(dir, name)?;
    let lines = text::read_lines(&path, Encoding::Utf8)?;
    check_header(&path, &lines, "premise\thypothesis\tlabel")?;
    let mut pairs = Vec::with_capacity(lines.len());
    for (i, line) in lines.iter().enumerate().skip(1) {
        let f = text::tab_fields(&path, i + 1, line, 3, 3)?;
        if let Some(label) = hf_label(&path, i + 1, f[2])? {
            pairs.push(NliPair {
                premise: f[0].to_string(),
                hypothesis: f[1].to_string(),
                label,
            });
        }
    }
    Ok(pairs)
}

/// Errors naming line 1 unless the file starts with `header`.
pub(crate) fn check_header(path: &Path, lines: &[String], header: &str) -> Result<(), DataError> {
    if lines.first().map(String::as_str) != Some(header) {
        return Err(DataError::format(
            path,
            Some(1),
            format!("expected the header `{}`", header.replace('\t', "\\t")),
            FIX,
        ));
    }
    Ok(())
}

/// A Hugging Face NLI label: `0`/`1`/`2` (entailment, neutral, contradiction); `-1` or `-`
/// (no gold label) is `None`.
pub(crate) fn hf_label(
    path: &Path,
    line_no: usize,
    field: &str,
) -> Result<Option<NliLabel>, DataError> {
    match field.trim() {
        "0" => Ok(Some(NliLabel::Entailment)),
        "1" => Ok(Some(NliLabel::Neutral)),
        "2" => Ok(Some(NliLabel::Contradiction)),
        "-1" | "-" => Ok(None),
        other => Err(DataError::format(
            path,
            Some(line_no),
            format!("label `{other}` is not 0, 1 or 2"),
            FIX,
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::loaders::test_support::*;

    fn counts(pairs: &[NliPair]) -> [usize; 3] {
        let mut c = [0; 3];
        pairs.iter().for_each(|p| c[p.label.index()] += 1);
        c
    }

    #[test]
    fn real_counts_and_known_records() {
        let dir = real("snli");
        let dev = load(&dir, Split::Dev).unwrap();
        assert_eq!(dev.len(), 9842);
        assert_eq!(counts(&dev), [3329, 3235, 3278]);
        let test = load(&dir, Split::Test).unwrap();
        assert_eq!(test.len(), 9824);
        assert_eq!(counts(&test), [3368, 3219, 3237]);
        assert_eq!(
            dev[0].premise,
            "Two women are embracing while holding to go packages."
        );
        assert_eq!(
            dev[0].hypothesis,
            "The sisters are hugging goodbye while holding to go packages after just eating lunch."
        );
        assert_eq!(dev[0].label, NliLabel::Neutral);
        assert_eq!(
            test.last().unwrap().hypothesis,
            "A man is teaching science in a classroom."
        );
        assert_eq!(test.last().unwrap().label, NliLabel::Neutral);
        let quoted = |v: &[NliPair]| {
            v.iter()
                .filter(|p| p.premise.contains('"') || p.hypothesis.contains('"'))
                .count()
        };
        assert!(quoted(&dev) > 0 && quoted(&test) > 0);
    }

    const HEADER: &str = "premise\thypothesis\tlabel\n";

    #[test]
    fn unlabelled_rows_are_skipped_plain_and_gz() {
        let tmp = tempfile::tempdir().unwrap();
        let body = format!("{HEADER}A \"man\tA person\t0\nx\ty\t-1\nc\td\t2\n");
        write(tmp.path(), "validation.tsv", &body);
        write_gz(tmp.path(), "test.tsv", &body);
        for split in [Split::Dev, Split::Test] {
            let p = load(tmp.path(), split).unwrap();
            assert_eq!(p.len(), 2);
            assert_eq!(
                (p[0].premise.as_str(), p[0].label),
                ("A \"man", NliLabel::Entailment)
            );
            assert_eq!(p[1].label, NliLabel::Contradiction);
        }
    }

    #[test]
    fn errors_name_file_and_line() {
        let tmp = tempfile::tempdir().unwrap();
        assert_mentions(
            load(tmp.path(), Split::Dev),
            &["validation.tsv", "not found"],
        );
        assert_mentions(load(tmp.path(), Split::Train), &["train.tsv", "not part"]);
        write_truncated_gz(
            tmp.path(),
            "test.tsv",
            &format!("{HEADER}{}", "a\tb\t1\n".repeat(500)),
        );
        assert_mentions(load(tmp.path(), Split::Test), &["test.tsv.gz", "truncated"]);
        write(
            tmp.path(),
            "validation.tsv",
            &format!("{HEADER}a\tb\t1\na\tb\n"),
        );
        assert_mentions(
            load(tmp.path(), Split::Dev),
            &["validation.tsv:3", "fields"],
        );
        write(
            tmp.path(),
            "validation.tsv",
            &format!("{HEADER}a\tb\tneutral\n"),
        );
        assert_mentions(
            load(tmp.path(), Split::Dev),
            &["validation.tsv:2", "neutral"],
        );
        write(tmp.path(), "validation.tsv", "a\tb\t1\n");
        assert_mentions(
            load(tmp.path(), Split::Dev),
            &["validation.tsv:1", "header"],
        );
    }
}
