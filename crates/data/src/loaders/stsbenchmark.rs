//! STS Benchmark (`stsbenchmark/sts-{train,dev,test}.csv`, the 2017 release).
//!
//! Reference: SentEval `senteval/sts.py`, `STSBenchmarkEval.loadFile`, which splits each
//! line on TAB and keeps columns 5 (score), 6 and 7 (the sentences). Despite the `.csv`
//! name the files are TAB-separated without any quoting (sentences contain unescaped `"`),
//! rows have 7 or 9 fields (the last two are source notes on some rows), and the sentences
//! are kept exactly as released (some carry leading/trailing spaces).

use crate::records::{ScoredPair, Split, Splits};
use crate::text::{self, Encoding};
use crate::DataError;
use std::path::Path;

/// The file name of `split` (`sts-train.csv`, …); the train file is stored as `.gz`.
pub fn file_name(split: Split) -> String {
    format!("sts-{}.csv", split.name())
}

/// Loads one split.
pub fn load(dir: &Path, split: Split) -> Result<Vec<ScoredPair>, DataError> {
    let path = text::resolve(dir, &file_name(split))?;
    read_file(&path)
}

/// Loads train, dev and test.
pub fn load_all(dir: &Path) -> Result<Splits<ScoredPair>, DataError> {
    Ok(Splits {
        train: load(dir, Split::Train)?,
        dev: load(dir, Split::Dev)?,
        test: load(dir, Split::Test)?,
    })
}

/// Reads one STS Benchmark file (plain or `.gz`).
pub fn read_file(path: &Path) -> Result<Vec<ScoredPair>, DataError> {
    let lines = text::read_lines(path, Encoding::Utf8)?;
    let mut pairs = Vec::with_capacity(lines.len());
    for (i, line) in lines.iter().enumerate() {
        let line_no = i + 1;
        let fields = text::tab_fields(path, line_no, line, 7, 9)?;
        if fields.len() == 8 {
            return Err(DataError::format(
                path,
                Some(line_no),
                "expected 7 or 9 tab-separated fields, found 8",
                "the file is corrupt; re-fetch it with `harness datasets fetch --force`",
            ));
        }
        let score = text::parse_f64(path, line_no, fields[4], "similarity score")?;
        pairs.push(ScoredPair {
            sentence1: fields[5].to_string(),
            sentence2: fields[6].to_string(),
            score,
        });
    }
    Ok(pairs)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::loaders::test_support::*;

    #[test]
    fn real_counts_and_known_records() {
        let dir = real("stsbenchmark");
        let all = load_all(&dir).unwrap();
        assert_eq!(
            (all.train.len(), all.dev.len(), all.test.len()),
            (5749, 1500, 1379)
        );
        let first = &all.train[0];
        assert_eq!(first.sentence1, "A plane is taking off.");
        assert_eq!(first.sentence2, "An air plane is taking off.");
        assert_eq!(first.score, 5.0);
        let last = all.train.last().unwrap();
        assert_eq!(
            last.sentence1,
            "Putin spokesman: Doping charges appear unfounded"
        );
        assert_eq!(
            last.sentence2,
            "The Latest on Severe Weather: 1 Dead in Texas After Tornado"
        );
        assert_eq!(last.score, 0.0);
        assert_eq!(all.dev[0].sentence1, "A man with a hard hat is dancing.");
        assert_eq!(
            all.dev.last().unwrap().sentence2,
            "New York police officer critically wounded in hatchet attack"
        );
        assert_eq!(all.test[0].sentence2, "A girl is brushing her hair.");
        assert_eq!(all.test[0].score, 2.5);
        assert_eq!(
            all.test.last().unwrap().sentence1,
            "South Korea declares end to MERS outbreak"
        );
        for split in [&all.train, &all.dev, &all.test] {
            assert!(split.iter().all(|p| (0.0..=5.0).contains(&p.score)));
        }
        // Unescaped quotes stay inside their field; surrounding spaces are kept.
        assert_eq!(
            all.train
                .iter()
                .filter(|p| p.sentence1.contains('"') || p.sentence2.contains('"'))
                .count(),
            252
        );
        assert!(all.train.iter().any(|p| p.sentence1 != p.sentence1.trim()));
    }

    const ROWS: &str = "main-captions\tMSRvid\t2012test\t0001\t5.000\tA \"plane.\tAn air plane.\n\
        main-news\theadlines\t2016\t0002\t1.5\tOne\tTwo\tnote1\tnote2\n";

    #[test]
    fn ragged_rows_quotes_plain_and_gz() {
        let tmp = tempfile::tempdir().unwrap();
        write(tmp.path(), "sts-dev.csv", ROWS);
        write_gz(tmp.path(), "sts-test.csv", &ROWS.replace('\n', "\r\n"));
        for split in [Split::Dev, Split::Test] {
            let pairs = load(tmp.path(), split).unwrap();
            assert_eq!(pairs.len(), 2);
            assert_eq!(pairs[0].sentence1, "A \"plane.");
            assert_eq!(pairs[1].sentence2, "Two");
            assert_eq!(pairs[1].score, 1.5);
        }
    }

    #[test]
    fn errors_name_file_and_line() {
        let tmp = tempfile::tempdir().unwrap();
        assert_mentions(
            load(tmp.path(), Split::Train),
            &["sts-train.csv", "not found"],
        );
        write_truncated_gz(tmp.path(), "sts-train.csv", &ROWS.repeat(200));
        assert_mentions(
            load(tmp.path(), Split::Train),
            &["sts-train.csv.gz", "truncated"],
        );
        write(tmp.path(), "sts-dev.csv", &format!("{ROWS}a\tb\tc\n"));
        assert_mentions(load(tmp.path(), Split::Dev), &["sts-dev.csv:3", "fields"]);
        write(tmp.path(), "sts-test.csv", &ROWS.replace("1.5", "high"));
        assert_mentions(load(tmp.path(), Split::Test), &["sts-test.csv:2", "high"]);
    }
}
