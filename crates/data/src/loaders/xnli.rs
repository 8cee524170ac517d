//! XNLI 1.0 dev and test in 15 languages (`xnli/xnli_{validation,test}_<lang>.tsv`, plain or
//! `.gz`), as exported from the Hugging Face `xnli` dataset.
//!
//! Reference: the XNLI paper's evaluation (facebookresearch/XNLI `xnli.{dev,test}.tsv`:
//! sentence1 = premise, sentence2 = hypothesis, gold_label) through the Hugging Face
//! `xnli` loading script's export that these files are: one header line
//! `id<TAB>premise<TAB>hypothesis<TAB>label`, TAB-separated rows without quoting, `id` the
//! running row index 0..N-1 (row `i` is the same pair in every language), label an integer
//! 0 = entailment, 1 = neutral, 2 = contradiction. Every row has a gold label; the ids are
//! checked so that the row alignment across languages holds.

use super::snli::{check_header, hf_label};
use crate::records::{NliPair, Split};
use crate::text::{self, Encoding};
use crate::DataError;
use std::path::Path;

const FIX: &str = "the file is corrupt; re-fetch it with `harness datasets fetch xnli --force`";

/// The 15 XNLI languages, in the paper's table order.
pub const LANGUAGES: [&str; 15] = [
    "en", "fr", "es", "de", "el", "bg", "ru", "tr", "ar", "vi", "th", "zh", "hi", "sw", "ur",
];

/// The file name of `lang` and `split` (`xnli_validation_de.tsv`, `xnli_test_de.tsv`);
/// `None` for train (XNLI has none; the MT train set is not in this dataset).
pub fn file_name(lang: &str, split: Split) -> Option<String> {
    let s = match split {
        Split::Train => return None,
        Split::Dev => "validation",
        Split::Test => "test",
    };
    Some(format!("xnli_{s}_{lang}.tsv"))
}

/// Loads the pairs of one language's dev or test split, in row (id) order.
pub fn load(dir: &Path, lang: &str, split: Split) -> Result<Vec<NliPair>, DataError> {
    let Some(name) = file_name(lang, split) else {
        return Err(DataError::Missing {
            path: dir.join(format!("xnli_train_{lang}.tsv")),
            hint: "XNLI has no train split in this dataset (see its SOURCE.txt); use dev or test"
                .into(),
        });
    };
    let path = text::resolve(dir, &name)?;
    let lines = text::read_lines(&path, Encoding::Utf8)?;
    check_header(&path, &lines, "id\tpremise\thypothesis\tlabel")?;
    let mut pairs = Vec::with_capacity(lines.len());
    for (i, line) in lines.iter().enumerate().skip(1) {
        let line_no = i + 1;
        let f = text::tab_fields(&path, line_no, line, 4, 4)?;
        if f[0].trim().parse::<usize>().ok() != Some(i - 1) {
            return Err(DataError::format(
                &path,
                Some(line_no),
                format!("id `{}` should be {} (ids run 0..N-1)", f[0], i - 1),
                FIX,
            ));
        }
        let Some(label) = hf_label(&path, line_no, f[3])? else {
            return Err(DataError::format(
                &path,
                Some(line_no),
                format!("label `{}`: every XNLI pair has a gold label", f[3]),
                FIX,
            ));
        };
        pairs.push(NliPair {
            premise: f[1].to_string(),
            hypothesis: f[2].to_string(),
            label,
        });
    }
    Ok(pairs)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::loaders::test_support::*;
    use crate::records::NliLabel;

    #[test]
    fn real_counts_every_language_and_split() {
        let dir = real("xnli");
        let en_dev = load(&dir, "en", Split::Dev).unwrap();
        let en_test = load(&dir, "en", Split::Test).unwrap();
        for lang in LANGUAGES {
            for (split, n, en) in [(Split::Dev, 2490, &en_dev), (Split::Test, 5010, &en_test)] {
                let pairs = load(&dir, lang, split).unwrap();
                assert_eq!(pairs.len(), n, "{lang} {split:?}");
                let mut c = [0; 3];
                pairs.iter().for_each(|p| c[p.label.index()] += 1);
                assert_eq!(c, [n / 3; 3], "{lang} {split:?}");
                // Row i has the same label in every language.
                assert!(pairs.iter().zip(en.iter()).all(|(p, e)| p.label == e.label));
            }
        }
    }

    #[test]
    fn real_known_records() {
        let dir = real("xnli");
        let en = load(&dir, "en", Split::Dev).unwrap();
        assert_eq!(en[0].premise, "And he said, Mama, I'm home.");
        assert_eq!(
            en[0].hypothesis,
            "He called his mom as soon as the school bus dropped him off."
        );
        assert_eq!(en[0].label, NliLabel::Neutral);
        let last = en.last().unwrap();
        assert_eq!(last.hypothesis, "Statement is preferable.");
        assert_eq!(last.label, NliLabel::Entailment);
        let zh = load(&dir, "zh", Split::Test).unwrap();
        assert_eq!(
            zh[0].premise,
            "嗯，我根本没想过，但是我很沮丧，最后我又和他说话了。"
        );
        assert_eq!(zh[0].label, NliLabel::Contradiction);
        assert_eq!(
            zh.last().unwrap().hypothesis,
            "25美元的20万字的小说相当于每美元8000个字。"
        );
        let en_test = load(&dir, "en", Split::Test).unwrap();
        assert_eq!(
            en_test.last().unwrap().premise,
            "The average novel of 200,000 words for $25 works out at 8,000 words per dollar."
        );
    }

    const HEADER: &str = "id\tpremise\thypothesis\tlabel\n";

    #[test]
    fn plain_gz_and_quotes() {
        let tmp = tempfile::tempdir().unwrap();
        let body = format!("{HEADER}0\tHe said \"hi\tOk\t2\n1\t a \tb\t0\n");
        write(tmp.path(), "xnli_validation_xx.tsv", &body);
        write_gz(tmp.path(), "xnli_test_xx.tsv", &body);
        for split in [Split::Dev, Split::Test] {
            let p = load(tmp.path(), "xx", split).unwrap();
            assert_eq!(p.len(), 2);
            assert_eq!(p[0].premise, "He said \"hi");
            assert_eq!(p[0].label, NliLabel::Contradiction);
            assert_eq!(p[1].premise, " a ");
        }
    }

    #[test]
    fn errors_name_file_and_line() {
        let tmp = tempfile::tempdir().unwrap();
        assert_mentions(
            load(tmp.path(), "de", Split::Dev),
            &["xnli_validation_de.tsv", "not found"],
        );
        assert_mentions(
            load(tmp.path(), "de", Split::Train),
            &["xnli_train_de.tsv", "no train"],
        );
        let many: String = (0..500).map(|i| format!("{i}\ta\tb\t1\n")).collect();
        write_truncated_gz(tmp.path(), "xnli_test_de.tsv", &format!("{HEADER}{many}"));
        assert_mentions(
            load(tmp.path(), "de", Split::Test),
            &["xnli_test_de.tsv.gz", "truncated"],
        );
        let bad = |body: &str| {
            write(
                tmp.path(),
                "xnli_validation_fr.tsv",
                &format!("{HEADER}{body}"),
            );
            load(tmp.path(), "fr", Split::Dev)
        };
        assert_mentions(
            bad("0\ta\tb\t1\n1\ta\tb\n"),
            &["xnli_validation_fr.tsv:3", "fields"],
        );
        assert_mentions(
            bad("0\ta\tb\t1\n1\ta\tb\t7\n"),
            &["xnli_validation_fr.tsv:3", "`7`"],
        );
        assert_mentions(
            bad("0\ta\tb\t1\n2\ta\tb\t1\n"),
            &["xnli_validation_fr.tsv:3", "id"],
        );
        assert_mentions(
            bad("0\ta\tb\t-1\n"),
            &["xnli_validation_fr.tsv:2", "gold label"],
        );
    }
}
