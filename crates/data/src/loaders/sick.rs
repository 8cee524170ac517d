//! SICK: the SemEval-2014 Task 1 split files (`SICK_train.txt`, `SICK_trial.txt`,
//! `SICK_test_annotated.txt`) and the full release (`SICK.txt`).
//!
//! Reference: SentEval `senteval/sick.py`, `SICKEval.loadFile` (SICK-E) and
//! `SICKRelatednessEval.loadFile` (SICK-R): skip the header line, split on TAB, take
//! sentence A (column 2), sentence B (column 3), the relatedness score (column 4) and the
//! entailment label (column 5; CONTRADICTION / NEUTRAL / ENTAILMENT). SentEval uses train =
//! `SICK_train`, dev = `SICK_trial`, test = `SICK_test_annotated`, as [`load`] does.
//! The full release has 12 columns with the label BEFORE the score and a `SemEval_set`
//! column (TRAIN / TRIAL / TEST); it lacks 87 pairs of the split files. CRLF line ends
//! (test file, full release) and the full release's unterminated last line are handled by
//! the line reader.

use crate::records::{NliLabel, NliPair, ScoredPair, SickPair, Split, Splits};
use crate::text::{self, Encoding};
use crate::DataError;
use std::path::Path;

const FIX: &str = "the file is corrupt; re-fetch it with `harness datasets fetch sick --force`";

/// The SemEval-2014 split file of `split` (train, trial as dev, test_annotated as test).
pub fn file_name(split: Split) -> &'static str {
    match split {
        Split::Train => "SICK_train.txt",
        Split::Dev => "SICK_trial.txt",
        Split::Test => "SICK_test_annotated.txt",
    }
}

/// The full release's file name.
pub const FULL_RELEASE: &str = "SICK.txt";

const SPLIT_HEADER: [&str; 5] = [
    "pair_ID",
    "sentence_A",
    "sentence_B",
    "relatedness_score",
    "entailment_judgment",
];

const FULL_HEADER: [&str; 12] = [
    "pair_ID",
    "sentence_A",
    "sentence_B",
    "entailment_label",
    "relatedness_score",
    "entailment_AB",
    "entailment_BA",
    "sentence_A_original",
    "sentence_B_original",
    "sentence_A_dataset",
    "sentence_B_dataset",
    "SemEval_set",
];

/// Loads one SemEval-2014 split file: every pair with both annotations.
pub fn load(dir: &Path, split: Split) -> Result<Vec<SickPair>, DataError> {
    let path = text::resolve(dir, file_name(split))?;
    let lines = text::read_lines(&path, Encoding::Utf8)?;
    let rows = body(&path, &lines, &SPLIT_HEADER)?;
    rows.map(|(line_no, f)| pair(&path, line_no, f[0], f[1], f[2], f[3], f[4]))
        .collect()
}

/// SICK-R: the relatedness pairs of one split (SentEval's `SICKRelatednessEval`).
pub fn relatedness(dir: &Path, split: Split) -> Result<Vec<ScoredPair>, DataError> {
    Ok(load(dir, split)?.iter().map(SickPair::scored).collect())
}

/// SICK-E: the entailment pairs of one split (SentEval's `SICKEval`).
pub fn entailment(dir: &Path, split: Split) -> Result<Vec<NliPair>, DataError> {
    Ok(load(dir, split)?.iter().map(SickPair::nli).collect())
}

/// Loads the full release `SICK.txt`, divided by its `SemEval_set` column (TRAIN, TRIAL as
/// dev, TEST), in file order.
pub fn load_full(dir: &Path) -> Result<Splits<SickPair>, DataError> {
    let path = text::resolve(dir, FULL_RELEASE)?;
    let lines = text::read_lines(&path, Encoding::Utf8)?;
    let mut out = Splits::default();
    for (line_no, f) in body(&path, &lines, &FULL_HEADER)? {
        let p = pair(&path, line_no, f[0], f[1], f[2], f[4], f[3])?;
        match f[11] {
            "TRAIN" => out.train.push(p),
            "TRIAL" => out.dev.push(p),
            "TEST" => out.test.push(p),
            other => {
                return Err(DataError::format(
                    &path,
                    Some(line_no),
                    format!("SemEval_set `{other}` is not TRAIN, TRIAL or TEST"),
                    FIX,
                ))
            }
        }
    }
    Ok(out)
}

/// Checks the header (line 1) and splits the remaining lines into exactly `header.len()`
/// TAB-separated fields, yielding (1-based line number, fields).
fn body<'a>(
    path: &Path,
    lines: &'a [String],
    header: &[&str],
) -> Result<impl Iterator<Item = (usize, Vec<&'a str>)>, DataError> {
    let first = lines.first().map(String::as_str).unwrap_or("");
    if first.split('\t').ne(header.iter().copied()) {
        return Err(DataError::format(
            path,
            Some(1),
            format!("expected the header `{}`", header.join("\\t")),
            FIX,
        ));
    }
    let n = header.len();
    let rows = lines[1..]
        .iter()
        .enumerate()
        .map(|(i, line)| {
            let line_no = i + 2;
            text::tab_fields(path, line_no, line, n, n).map(|f| (line_no, f))
        })
        .collect::<Result<Vec<_>, _>>()?;
    Ok(rows.into_iter())
}

fn pair(
    path: &Path,
    line_no: usize,
    id: &str,
    a: &str,
    b: &str,
    score: &str,
    label: &str,
) -> Result<SickPair, DataError> {
    let id = id.trim().parse::<u32>().map_err(|_| {
        DataError::format(
            path,
            Some(line_no),
            format!("pair_ID `{id}` is not a number"),
            FIX,
        )
    })?;
    let relatedness = text::parse_f64(path, line_no, score, "relatedness score")?;
    let entailment = match label {
        "ENTAILMENT" => NliLabel::Entailment,
        "NEUTRAL" => NliLabel::Neutral,
        "CONTRADICTION" => NliLabel::Contradiction,
        other => {
            return Err(DataError::format(
                path,
                Some(line_no),
                format!("entailment label `{other}` is not ENTAILMENT, NEUTRAL or CONTRADICTION"),
                FIX,
            ))
        }
    };
    Ok(SickPair {
        id,
        sentence_a: a.to_string(),
        sentence_b: b.to_string(),
        relatedness,
        entailment,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::loaders::test_support::*;
    use std::collections::HashMap;

    fn label_counts(pairs: &[SickPair]) -> [usize; 3] {
        let mut c = [0; 3];
        for p in pairs {
            c[p.entailment.index()] += 1;
        }
        c
    }

    fn mean(pairs: &[SickPair]) -> f64 {
        pairs.iter().map(|p| p.relatedness).sum::<f64>() / pairs.len() as f64
    }

    #[test]
    fn real_split_files_counts_and_known_records() {
        let dir = real("sick");
        // (pairs, [entailment, neutral, contradiction], relatedness mean) from SOURCE.txt.
        for (split, n, labels, m) in [
            (Split::Train, 4500, [1299, 2536, 665], 3.5209),
            (Split::Dev, 500, [144, 282, 74], 3.5944),
            (Split::Test, 4927, [1414, 2793, 720], 3.5300),
        ] {
            let pairs = load(&dir, split).unwrap();
            assert_eq!(pairs.len(), n, "{split:?}");
            assert_eq!(label_counts(&pairs), labels, "{split:?}");
            assert!(
                (mean(&pairs) - m).abs() < 5e-5,
                "{split:?} mean {}",
                mean(&pairs)
            );
            assert!(pairs.iter().all(|p| (1.0..=5.0).contains(&p.relatedness)));
        }
        let train = load(&dir, Split::Train).unwrap();
        assert_eq!(train[0].id, 1);
        assert_eq!(
            train[0].sentence_a,
            "A group of kids is playing in a yard and an old man is standing in the background"
        );
        assert_eq!(train[0].relatedness, 4.5);
        assert_eq!(train[0].entailment, NliLabel::Neutral);
        let last = train.last().unwrap();
        assert_eq!(last.id, 10000);
        assert_eq!(
            last.sentence_b,
            "The woman with a knife is slicing a pepper"
        );
        assert_eq!(last.relatedness, 1.0);
        let e = entailment(&dir, Split::Dev).unwrap();
        assert_eq!(
            e[0].premise,
            "The young boys are playing outdoors and the man is smiling nearby"
        );
        assert_eq!(e[0].label, NliLabel::Contradiction);
        let r = relatedness(&dir, Split::Test).unwrap();
        assert_eq!(
            r[0].sentence1,
            "There is no boy playing outdoors and there is no man smiling"
        );
        assert_eq!(r[0].score, 3.3);
        // CRLF is stripped from the test file's last column.
        assert!(r.iter().all(|p| !p.sentence2.ends_with('\r')));
        assert_eq!(
            r.last().unwrap().sentence2,
            "The snowboarder is leaping fearlessly over white snow"
        );
    }

    #[test]
    fn real_full_release_counts_and_agreement_with_split_files() {
        let dir = real("sick");
        let full = load_full(&dir).unwrap();
        assert_eq!(
            (full.train.len(), full.dev.len(), full.test.len()),
            (4439, 495, 4906)
        );
        let all: Vec<&SickPair> = full
            .train
            .iter()
            .chain(&full.dev)
            .chain(&full.test)
            .collect();
        assert_eq!(all.len(), 9840);
        let mut labels = [0; 3];
        all.iter().for_each(|p| labels[p.entailment.index()] += 1);
        assert_eq!(labels, [2821, 5595, 1424]);
        // The unterminated last line is a full record.
        assert_eq!(full.train.last().unwrap().id, 10000);
        assert_eq!(full.train.last().unwrap().relatedness, 1.0);
        // Every pair of the full release equals its split-file pair; 61/5/21 are missing.
        for (split, missing) in [(Split::Train, 61), (Split::Dev, 5), (Split::Test, 21)] {
            let files = load(&dir, split).unwrap();
            let by_id: HashMap<u32, &SickPair> = files.iter().map(|p| (p.id, p)).collect();
            let part = full.get(split);
            for p in part {
                assert_eq!(by_id.get(&p.id), Some(&p), "pair {} ({split:?})", p.id);
            }
            assert_eq!(files.len() - part.len(), missing, "{split:?}");
        }
    }

    const HEADER: &str = "pair_ID\tsentence_A\tsentence_B\trelatedness_score\tentailment_judgment";

    #[test]
    fn crlf_header_and_gz() {
        let tmp = tempfile::tempdir().unwrap();
        let body = format!("{HEADER}\r\n7\tA \"dog\tA cat\t2.5\tCONTRADICTION\r\n");
        write_gz(tmp.path(), "SICK_trial.txt", &body);
        let p = load(tmp.path(), Split::Dev).unwrap();
        assert_eq!(p.len(), 1);
        assert_eq!((p[0].id, p[0].sentence_a.as_str()), (7, "A \"dog"));
        assert_eq!(p[0].relatedness, 2.5);
        assert_eq!(p[0].entailment, NliLabel::Contradiction);
        let full = format!(
            "{}\r\n8\ta\tb\tENTAILMENT\t4\tA_entails_B\tB_neutral_A\ta0\tb0\tFLICKR\tFLICKR\tTRIAL",
            FULL_HEADER.join("\t")
        );
        write(tmp.path(), "SICK.txt", &full);
        let f = load_full(tmp.path()).unwrap();
        assert_eq!(f.dev.len(), 1);
        assert_eq!(
            (f.dev[0].relatedness, f.dev[0].entailment),
            (4.0, NliLabel::Entailment)
        );
    }

    #[test]
    fn errors_name_file_and_line() {
        let tmp = tempfile::tempdir().unwrap();
        assert_mentions(
            load(tmp.path(), Split::Train),
            &["SICK_train.txt", "not found"],
        );
        write_truncated_gz(
            tmp.path(),
            "SICK_train.txt",
            &format!("{HEADER}\n{}", "1\ta\tb\t1\tNEUTRAL\n".repeat(300)),
        );
        assert_mentions(
            load(tmp.path(), Split::Train),
            &["SICK_train.txt.gz", "truncated"],
        );
        write(
            tmp.path(),
            "SICK_trial.txt",
            &format!("{HEADER}\n1\ta\tb\t1\tNEUTRAL\n2\ta\tb\t1\n"),
        );
        assert_mentions(
            load(tmp.path(), Split::Dev),
            &["SICK_trial.txt:3", "fields"],
        );
        write(
            tmp.path(),
            "SICK_trial.txt",
            &format!("{HEADER}\n1\ta\tb\tx\tNEUTRAL\n"),
        );
        assert_mentions(load(tmp.path(), Split::Dev), &["SICK_trial.txt:2", "`x`"]);
        write(
            tmp.path(),
            "SICK_trial.txt",
            &format!("{HEADER}\n1\ta\tb\t1\tMAYBE\n"),
        );
        assert_mentions(load(tmp.path(), Split::Dev), &["SICK_trial.txt:2", "MAYBE"]);
        write(tmp.path(), "SICK_trial.txt", "1\ta\tb\t1\tNEUTRAL\n");
        assert_mentions(
            load(tmp.path(), Split::Dev),
            &["SICK_trial.txt:1", "header"],
        );
    }
}
