//! STSb Multi MT (`stsb-multi-mt/stsb-<lang>-<split>.csv`): the STS Benchmark translated by
//! DeepL into 10 languages, plus the English original (whitespace-stripped).
//!
//! Reference: the upstream repository PhilipMay/stsb-multi-mt (its `convert.py` writes the
//! files with Python's `csv` module) and the Hugging Face `stsb_multi_mt` loading script,
//! which reads them with `csv.reader(..., delimiter=",", quotechar='"')` into
//! `sentence1, sentence2, similarity_score`. Unlike the other STS files these are real
//! RFC-4180 CSV (Excel dialect: fields with commas or quotes are wrapped in `"…"`, a quote
//! inside is doubled, a quoted field may span lines), CRLF line ends, no header; read with
//! the csv crate through [`text::read_csv`]. Row `i` matches row `i` of the STS Benchmark
//! split (same score).

use crate::records::{ScoredPair, Split};
use crate::text::{self, CsvFormat};
use crate::DataError;
use std::path::Path;

/// The 11 languages (10 translations and English), in the upstream README's order.
pub const LANGUAGES: [&str; 11] = [
    "de", "en", "es", "fr", "it", "ja", "nl", "pl", "pt", "ru", "zh",
];

/// The file name of `lang` and `split`, e.g. `stsb-de-test.csv` (train files are `.gz`).
pub fn file_name(lang: &str, split: Split) -> String {
    format!("stsb-{lang}-{}.csv", split.name())
}

/// Loads one language's split.
pub fn load(dir: &Path, lang: &str, split: Split) -> Result<Vec<ScoredPair>, DataError> {
    let path = text::resolve(dir, &file_name(lang, split))?;
    read_file(&path)
}

/// A file: no header, quoted fields may hold line breaks.
const FORMAT: CsvFormat = CsvFormat {
    delimiter: b',',
    columns: &["sentence1", "sentence2", "score"],
    header: false,
    multiline: true,
};

/// Reads one STSb Multi MT CSV file (plain or `.gz`).
pub fn read_file(path: &Path) -> Result<Vec<ScoredPair>, DataError> {
    text::read_csv(path, &FORMAT)?
        .into_iter()
        .map(|(line, fields)| {
            let score = text::parse_f64(path, line, &fields[2], "similarity score")?;
            let mut fields = fields.into_iter();
            Ok(ScoredPair {
                sentence1: fields.next().unwrap(),
                sentence2: fields.next().unwrap(),
                score,
            })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::loaders::test_support::*;

    #[test]
    fn real_counts_every_language_and_split() {
        let dir = real("stsb-multi-mt");
        let sts = crate::loaders::stsbenchmark::load_all(&real("stsbenchmark")).unwrap();
        for lang in LANGUAGES {
            for (split, n) in [
                (Split::Train, 5749),
                (Split::Dev, 1500),
                (Split::Test, 1379),
            ] {
                let pairs = load(&dir, lang, split).unwrap();
                assert_eq!(pairs.len(), n, "{lang} {split:?}");
                assert!(pairs
                    .iter()
                    .all(|p| !p.sentence1.is_empty() && !p.sentence2.is_empty()));
                // Row i has the score of row i of the original STS Benchmark.
                let orig = sts.get(split);
                assert!(
                    pairs.iter().zip(orig).all(|(p, o)| p.score == o.score),
                    "{lang} {split:?}"
                );
                if lang == "en" {
                    assert!(pairs
                        .iter()
                        .zip(orig)
                        .all(|(p, o)| p.sentence1 == o.sentence1.trim()
                            && p.sentence2 == o.sentence2.trim()));
                }
            }
        }
    }

    #[test]
    fn real_known_records() {
        let dir = real("stsb-multi-mt");
        let de = load(&dir, "de", Split::Dev).unwrap();
        assert_eq!(de[0].sentence1, "Ein Mann mit einem Schutzhelm tanzt.");
        assert_eq!(de[0].sentence2, "Ein Mann mit einem Schutzhelm tanzt.");
        assert_eq!(de[0].score, 5.0);
        let last = de.last().unwrap();
        assert_eq!(
            last.sentence1,
            "Neues Video zeigt US-Polizisten, die einen psychisch kranken Mann schlagen"
        );
        assert_eq!(
            last.sentence2,
            "New Yorker Polizist bei Beilangriff schwer verwundet"
        );
        assert_eq!(last.score, 0.0);
        let en = load(&dir, "en", Split::Train).unwrap();
        assert_eq!(en[0].sentence1, "A plane is taking off.");
        assert_eq!(en[0].score, 5.0);
    }

    /// The fields of the one record in `record` (the error message when it is malformed).
    fn parse_csv_record(record: &str) -> Result<Vec<String>, String> {
        match text::parse_csv(Path::new("x.csv"), &format!("{record}\n"), &FORMAT) {
            Ok(mut records) => Ok(records.remove(0).1),
            Err(e) => Err(e.to_string()),
        }
    }

    #[test]
    fn csv_quoting() {
        assert_eq!(parse_csv_record("a,b,1").unwrap(), vec!["a", "b", "1"]);
        assert_eq!(
            parse_csv_record("\"a, \"\"x\"\"\",b\"c,2.5").unwrap(),
            vec!["a, \"x\"", "b\"c", "2.5"]
        );
        assert_eq!(parse_csv_record(",,").unwrap(), vec!["", "", ""]);
        assert!(parse_csv_record("\"a,b")
            .unwrap_err()
            .contains("never closed"));
        assert!(parse_csv_record("\"a\"x,b")
            .unwrap_err()
            .contains("unexpected `x` after the closing quote"));
    }

    const ROWS: &str = "\"One, two\",\"He said \"\"hi\"\"\",3.8\r\nplain,\"multi\nline\",1\r\n";

    #[test]
    fn crlf_quotes_and_gz() {
        let tmp = tempfile::tempdir().unwrap();
        write(tmp.path(), "stsb-xx-dev.csv", ROWS);
        write_gz(tmp.path(), "stsb-xx-train.csv", ROWS);
        for split in [Split::Dev, Split::Train] {
            let p = load(tmp.path(), "xx", split).unwrap();
            assert_eq!(p.len(), 2);
            assert_eq!(p[0].sentence1, "One, two");
            assert_eq!(p[0].sentence2, "He said \"hi\"");
            assert_eq!(p[0].score, 3.8);
            assert_eq!(p[1].sentence2, "multi\nline");
        }
    }

    #[test]
    fn errors_name_file_and_line() {
        let tmp = tempfile::tempdir().unwrap();
        assert_mentions(
            load(tmp.path(), "de", Split::Test),
            &["stsb-de-test.csv", "not found"],
        );
        write_truncated_gz(tmp.path(), "stsb-de-train.csv", &"a,b,1\r\n".repeat(500));
        assert_mentions(
            load(tmp.path(), "de", Split::Train),
            &["stsb-de-train.csv.gz", "truncated"],
        );
        write(tmp.path(), "stsb-de-dev.csv", "a,b,1\r\na,b\r\n");
        assert_mentions(
            load(tmp.path(), "de", Split::Dev),
            &["stsb-de-dev.csv:2", "3 comma"],
        );
        write(tmp.path(), "stsb-de-dev.csv", "a,b,1\r\na,b,c\r\n");
        assert_mentions(
            load(tmp.path(), "de", Split::Dev),
            &["stsb-de-dev.csv:2", "`c`"],
        );
        write(tmp.path(), "stsb-de-dev.csv", "a,b,1\r\n\"a,b,1\r\n");
        assert_mentions(
            load(tmp.path(), "de", Split::Dev),
            &["stsb-de-dev.csv:2", "never closed"],
        );
    }
}
