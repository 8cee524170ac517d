//! SentEval downstream classification tasks (MR, CR, SUBJ, MPQA, TREC, SST-2, SST-5, MRPC),
//! read exactly as facebookresearch/SentEval (commit 5d6dc11) reads them:
//!
//! * `senteval/binary.py`, `BinaryClassifierEval.loadFile`: `io.open(fpath, 'r',
//!   encoding='latin-1')`, `f.read().splitlines()`, `line.split()` per line. Every line is
//!   a sample, so an empty line is an empty sample (CR has 2 + 2, MPQA 1 + 2 of them; that
//!   is how SentEval counts 3775 and 10606). Samples are `pos + neg` with labels 1 then 0;
//!   SUBJ passes `subj.objective` as the first ("pos", label 1) list. SentEval evaluates
//!   these four by 10-fold cross-validation over all samples, so everything lands in
//!   [`Splits::train`] and `dev`/`test` stay empty.
//! * `senteval/trec.py`, `TRECEval.loadFile`: latin-1, `line.strip().split(':', 1)`, the
//!   coarse label before `:` (one of ABBR DESC ENTY HUM LOC NUM), the question after the
//!   first space of the rest. Train `train_5500.label`, test `TREC_10.label`; no dev set
//!   (SentEval cross-validates on train).
//! * `senteval/sst.py`, `SSTEval.loadFile`: UTF-8. SST-2: `line.strip().split('\t')`,
//!   text then label; SST-5: `line.strip().split(' ', 1)`, label then text.
//! * `senteval/mrpc.py`, `MRPCEval.loadFile`: UTF-8, `line.strip().split('\t')`, columns 3
//!   and 4 are the sentences and column 0 the label; the first line (the header, which
//!   starts with a BOM) is dropped. No dev set.
//!
//! Tokenisation: SentEval feeds the encoder `text.split()` token lists. Records keep the
//! text SentEval splits, with the surrounding whitespace trimmed and the inner whitespace
//! untouched; `text.split_whitespace()` gives SentEval's tokens (Python's `str.split()`
//! also splits on U+00A0, which occurs in SST-5 train and is Unicode White_Space too).
//! The MR/CR/SUBJ/MPQA files are pure ASCII (`cat -v` escaped) and contain none of the
//! extra separators `str.splitlines()` knows (\x0b, \x0c, \x1c-\x1e, \x85), so splitting on
//! LF reads the same lines.

use crate::records::{LabeledPair, LabeledText, Splits};
use crate::text::{read_lines, resolve, Encoding};
use crate::DataError;
use std::path::Path;

/// SentEval's names of the tasks this loader reads.
pub const TASKS: &[&str] = &["MR", "CR", "SUBJ", "MPQA", "TREC", "SST2", "SST5", "MRPC"];

/// A single-sentence classification task ([`load`]); MRPC is a pair task ([`load_mrpc`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Task {
    Mr,
    Cr,
    Subj,
    Mpqa,
    Trec,
    Sst2,
    Sst5,
}

impl Task {
    /// All single-sentence tasks, in SentEval's order of [`TASKS`].
    pub const ALL: [Task; 7] = [
        Task::Mr,
        Task::Cr,
        Task::Subj,
        Task::Mpqa,
        Task::Trec,
        Task::Sst2,
        Task::Sst5,
    ];

    /// SentEval's name (`"MR"`, `"SST2"`, ...).
    pub fn name(self) -> &'static str {
        match self {
            Task::Mr => "MR",
            Task::Cr => "CR",
            Task::Subj => "SUBJ",
            Task::Mpqa => "MPQA",
            Task::Trec => "TREC",
            Task::Sst2 => "SST2",
            Task::Sst5 => "SST5",
        }
    }

    /// The task with SentEval's name (case-insensitive; `SST-2` is accepted for `SST2`).
    pub fn from_name(name: &str) -> Option<Task> {
        let norm = name.to_ascii_uppercase().replace('-', "");
        Task::ALL.into_iter().find(|t| t.name() == norm)
    }

    /// The class labels, in SentEval's index order.
    pub fn labels(self) -> &'static [&'static str] {
        match self {
            Task::Mr | Task::Cr | Task::Subj | Task::Mpqa | Task::Sst2 => &["0", "1"],
            Task::Sst5 => &["0", "1", "2", "3", "4"],
            Task::Trec => &TREC_LABELS,
        }
    }

    /// The two files (label 1 first, then label 0) of a binary task.
    fn binary_files(self) -> Option<(&'static str, &'static str, &'static str)> {
        match self {
            Task::Mr => Some(("MR", "rt-polarity.pos", "rt-polarity.neg")),
            Task::Cr => Some(("CR", "custrev.pos", "custrev.neg")),
            Task::Subj => Some(("SUBJ", "subj.objective", "subj.subjective")),
            Task::Mpqa => Some(("MPQA", "mpqa.pos", "mpqa.neg")),
            _ => None,
        }
    }
}

/// TREC coarse classes in `trec.py`'s `tgt2idx` order.
pub const TREC_LABELS: [&str; 6] = ["ABBR", "DESC", "ENTY", "HUM", "LOC", "NUM"];

const FIX: &str =
    "the file is truncated or corrupt; re-fetch it with `harness datasets fetch --force`";

/// Loads a single-sentence task from the `senteval` folder `dir`. Labels are the strings
/// of SentEval's class indices (`"1"`/`"0"`, SST-5 `"0"`..`"4"`), TREC's coarse names.
pub fn load(dir: &Path, task: Task) -> Result<Splits<LabeledText>, DataError> {
    if let Some((sub, first, second)) = task.binary_files() {
        let d = dir.join(sub);
        let mut train = binary_file(&d, first, "1")?;
        train.extend(binary_file(&d, second, "0")?);
        return Ok(Splits {
            train,
            ..Splits::default()
        });
    }
    match task {
        Task::Trec => {
            let d = dir.join("TREC");
            Ok(Splits {
                train: trec_file(&d, "train_5500.label")?,
                dev: Vec::new(),
                test: trec_file(&d, "TREC_10.label")?,
            })
        }
        Task::Sst2 | Task::Sst5 => {
            let fine = task == Task::Sst5;
            let d = dir.join("SST").join(if fine { "fine" } else { "binary" });
            Ok(Splits {
                train: sst_file(&d, "sentiment-train", fine)?,
                dev: sst_file(&d, "sentiment-dev", fine)?,
                test: sst_file(&d, "sentiment-test", fine)?,
            })
        }
        _ => unreachable!("binary tasks handled above"),
    }
}

/// Loads MRPC (`msr_paraphrase_{train,test}.txt`); `dev` stays empty.
pub fn load_mrpc(dir: &Path) -> Result<Splits<LabeledPair>, DataError> {
    let d = dir.join("MRPC");
    Ok(Splits {
        train: mrpc_file(&d, "msr_paraphrase_train.txt")?,
        dev: Vec::new(),
        test: mrpc_file(&d, "msr_paraphrase_test.txt")?,
    })
}

fn binary_file(dir: &Path, name: &str, label: &str) -> Result<Vec<LabeledText>, DataError> {
    let path = resolve(dir, name)?;
    Ok(read_lines(&path, Encoding::Latin1)?
        .into_iter()
        .map(|line| LabeledText {
            text: line.trim().to_string(),
            label: label.to_string(),
        })
        .collect())
}

fn trec_file(dir: &Path, name: &str) -> Result<Vec<LabeledText>, DataError> {
    let path = resolve(dir, name)?;
    read_lines(&path, Encoding::Latin1)?
        .iter()
        .enumerate()
        .map(|(i, line)| {
            let bad = |detail: &str| DataError::format(&path, Some(i + 1), detail, FIX);
            let (target, rest) = line
                .trim()
                .split_once(':')
                .ok_or_else(|| bad("expected `COARSE:fine question`, found no `:`"))?;
            let (_fine, question) = rest
                .split_once(' ')
                .ok_or_else(|| bad("expected a space between the fine label and the question"))?;
            if !TREC_LABELS.contains(&target) {
                return Err(bad(&format!("unknown TREC coarse label `{target}`")));
            }
            Ok(LabeledText {
                text: question.trim().to_string(),
                label: target.to_string(),
            })
        })
        .collect()
}

fn sst_file(dir: &Path, name: &str, fine: bool) -> Result<Vec<LabeledText>, DataError> {
    let path = resolve(dir, name)?;
    let max = if fine { 4 } else { 1 };
    read_lines(&path, Encoding::Utf8)?
        .iter()
        .enumerate()
        .map(|(i, line)| {
            let line = line.trim();
            let split = if fine {
                line.split_once(' ').map(|(l, t)| (t, l))
            } else {
                line.split_once('\t')
            };
            let bad = |detail: String| DataError::format(&path, Some(i + 1), detail, FIX);
            let (text, label) = split.ok_or_else(|| {
                bad(if fine {
                    "expected `label sentence`".into()
                } else {
                    "expected `sentence<TAB>label`".into()
                })
            })?;
            let label = label.trim();
            match label.parse::<u8>() {
                Ok(l) if l <= max => Ok(LabeledText {
                    text: text.trim().to_string(),
                    label: label.to_string(),
                }),
                _ => Err(bad(format!("label `{label}` is not 0..={max}"))),
            }
        })
        .collect()
}

fn mrpc_file(dir: &Path, name: &str) -> Result<Vec<LabeledPair>, DataError> {
    let path = resolve(dir, name)?;
    let lines = read_lines(&path, Encoding::Utf8)?;
    if lines.is_empty() {
        return Err(DataError::format(
            &path,
            None,
            "empty file (no header)",
            FIX,
        ));
    }
    lines
        .iter()
        .enumerate()
        .skip(1)
        .map(|(i, line)| {
            let f = crate::text::tab_fields(&path, i + 1, line, 5, 5)?;
            let label = match f[0].trim() {
                "1" => true,
                "0" => false,
                other => {
                    return Err(DataError::format(
                        &path,
                        Some(i + 1),
                        format!("quality `{other}` is not 0 or 1"),
                        FIX,
                    ))
                }
            };
            Ok(LabeledPair {
                sentence1: f[3].trim().to_string(),
                sentence2: f[4].trim().to_string(),
                label,
            })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use harness_core::shared_datasets_dir;
    use std::collections::BTreeMap;

    fn dir() -> std::path::PathBuf {
        shared_datasets_dir().join("senteval")
    }

    fn counts(items: &[LabeledText]) -> BTreeMap<&str, usize> {
        let mut m = BTreeMap::new();
        for r in items {
            *m.entry(r.label.as_str()).or_insert(0) += 1;
        }
        m
    }

    fn lab(text: &str, label: &str) -> LabeledText {
        LabeledText {
            text: text.into(),
            label: label.into(),
        }
    }

    #[test]
    fn binary_tasks_match_source_counts_and_keep_empty_lines() {
        // (task, label-1 count, label-0 count, empty samples)
        for (task, pos, neg, empty) in [
            (Task::Mr, 5331, 5331, 0),
            (Task::Cr, 2407, 1368, 4),
            (Task::Subj, 5000, 5000, 0),
            (Task::Mpqa, 3312, 7294, 3),
        ] {
            let s = load(&dir(), task).unwrap();
            assert!(s.dev.is_empty() && s.test.is_empty());
            let c = counts(&s.train);
            assert_eq!((c["1"], c["0"]), (pos, neg), "{task:?}");
            let n_empty = s.train.iter().filter(|r| r.text.is_empty()).count();
            assert_eq!(n_empty, empty, "{task:?}");
            assert!(s.train[..pos].iter().all(|r| r.label == "1"));
        }
    }

    #[test]
    fn binary_tasks_known_records() {
        let cr = load(&dir(), Task::Cr).unwrap().train;
        assert_eq!(cr.len(), 3775);
        assert_eq!(
            cr[0],
            lab(
                "im a more happier person after discovering the i/p button ! .",
                "1"
            )
        );
        let mr = load(&dir(), Task::Mr).unwrap().train;
        assert_eq!(mr.len(), 10662);
        assert!(mr[0]
            .text
            .starts_with("the rock is destined to be the 21st century 's new"));
        assert_eq!(mr[0].label, "1");
        assert_eq!(mr[5331].label, "0");
        assert!(mr[5331]
            .text
            .starts_with("simplistic , silly and tedious ."));
        // cat -v escapes survive as ASCII.
        assert!(mr.iter().filter(|r| r.text.contains("M-")).count() >= 202);
        let subj = load(&dir(), Task::Subj).unwrap().train;
        assert_eq!(subj.len(), 10000);
        assert!(subj[0].text.starts_with("the movie begins in the past where a young boy named sam attempts to save celebi from a hunter ."));
        let mpqa = load(&dir(), Task::Mpqa).unwrap().train;
        assert_eq!(mpqa.len(), 10606);
        assert_eq!(mpqa[0], lab("are also being encouraged", "1"));
        // mpqa.neg ends with an empty line: an empty sample, as in SentEval.
        assert_eq!(mpqa[10605], lab("", "0"));
    }

    #[test]
    fn trec_counts_labels_and_latin1() {
        let s = load(&dir(), Task::Trec).unwrap();
        assert_eq!((s.train.len(), s.dev.len(), s.test.len()), (5452, 0, 500));
        let want_train = [
            ("ABBR", 86),
            ("DESC", 1162),
            ("ENTY", 1250),
            ("HUM", 1223),
            ("LOC", 835),
            ("NUM", 896),
        ];
        let want_test = [
            ("ABBR", 9),
            ("DESC", 138),
            ("ENTY", 94),
            ("HUM", 65),
            ("LOC", 81),
            ("NUM", 113),
        ];
        assert_eq!(counts(&s.train), want_train.into_iter().collect());
        assert_eq!(counts(&s.test), want_test.into_iter().collect());
        assert_eq!(
            s.test[0],
            lab("How far is it from Denver to Aspen ?", "NUM")
        );
        // train line 66 holds the one 0xF0 byte, read as Latin-1 'ð'.
        assert!(
            s.train[65].text.contains("sister\u{f0}city"),
            "{:?}",
            s.train[65]
        );
    }

    #[test]
    fn sst_counts_labels_and_records() {
        let s2 = load(&dir(), Task::Sst2).unwrap();
        assert_eq!(
            (s2.train.len(), s2.dev.len(), s2.test.len()),
            (67349, 872, 1821)
        );
        assert_eq!(counts(&s2.train), [("0", 29780), ("1", 37569)].into());
        assert_eq!(counts(&s2.dev), [("0", 428), ("1", 444)].into());
        assert_eq!(counts(&s2.test), [("0", 912), ("1", 909)].into());
        assert_eq!(
            s2.dev[0],
            lab("it 's a charming and often affecting journey .", "1")
        );
        assert_eq!(s2.dev[1], lab("unflinchingly bleak and desperate", "0"));

        let s5 = load(&dir(), Task::Sst5).unwrap();
        assert_eq!(
            (s5.train.len(), s5.dev.len(), s5.test.len()),
            (8544, 1101, 2210)
        );
        let c = |v: [usize; 5]| -> BTreeMap<&str, usize> {
            ["0", "1", "2", "3", "4"].into_iter().zip(v).collect()
        };
        assert_eq!(counts(&s5.train), c([1092, 2218, 1624, 2322, 1288]));
        assert_eq!(counts(&s5.dev), c([139, 289, 229, 279, 165]));
        assert_eq!(counts(&s5.test), c([279, 633, 389, 510, 399]));
        assert_eq!(s5.dev[1], lab("one long string of cliches .", "1"));
    }

    #[test]
    fn mrpc_counts_and_records() {
        let m = load_mrpc(&dir()).unwrap();
        assert_eq!((m.train.len(), m.dev.len(), m.test.len()), (4076, 0, 1725));
        let pos = |v: &[LabeledPair]| v.iter().filter(|p| p.label).count();
        assert_eq!((pos(&m.train), m.train.len() - pos(&m.train)), (2753, 1323));
        assert_eq!((pos(&m.test), m.test.len() - pos(&m.test)), (1147, 578));
        assert!(m.test[0].label);
        assert!(m.test[0]
            .sentence1
            .starts_with("PCCW 's chief operating officer , Mike Butcher"));
        let quoted = m
            .train
            .iter()
            .flat_map(|p| [&p.sentence1, &p.sentence2])
            .filter(|s| s.starts_with('"'))
            .count();
        assert_eq!(quoted, 768);
    }

    #[test]
    fn task_names_round_trip() {
        for t in Task::ALL {
            assert_eq!(Task::from_name(t.name()), Some(t));
        }
        assert_eq!(Task::from_name("sst-2"), Some(Task::Sst2));
        assert_eq!(Task::from_name("MRPC"), None);
        assert_eq!(TASKS.len(), Task::ALL.len() + 1);
    }

    #[test]
    fn synthetic_errors_name_file_and_line() {
        use std::io::Write;
        let tmp = tempfile::tempdir().unwrap();
        // Missing file.
        let msg = load(tmp.path(), Task::Cr).unwrap_err().to_string();
        assert!(msg.contains("custrev.pos"), "{msg}");
        // Empty lines are samples, CRLF is stripped, .gz is read.
        let cr = tmp.path().join("CR");
        std::fs::create_dir(&cr).unwrap();
        std::fs::write(cr.join("custrev.pos"), "good . \r\n\r\nfine .\r\n").unwrap();
        let mut enc = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
        enc.write_all(b"bad .\n").unwrap();
        let gz = enc.finish().unwrap();
        std::fs::write(cr.join("custrev.neg.gz"), &gz).unwrap();
        let s = load(tmp.path(), Task::Cr).unwrap().train;
        assert_eq!(
            s,
            vec![
                lab("good .", "1"),
                lab("", "1"),
                lab("fine .", "1"),
                lab("bad .", "0")
            ]
        );
        // Truncated gzip.
        std::fs::write(cr.join("custrev.neg.gz"), &gz[..gz.len() - 6]).unwrap();
        let msg = load(tmp.path(), Task::Cr).unwrap_err().to_string();
        assert!(
            msg.contains("custrev.neg.gz") && msg.contains("truncated"),
            "{msg}"
        );
        // Malformed rows.
        let sst = tmp.path().join("SST").join("binary");
        std::fs::create_dir_all(&sst).unwrap();
        std::fs::write(sst.join("sentiment-train"), "ok . \t1\nno label here\n").unwrap();
        let msg = load(tmp.path(), Task::Sst2).unwrap_err().to_string();
        assert!(msg.contains("sentiment-train:2"), "{msg}");
        let trec = tmp.path().join("TREC");
        std::fs::create_dir(&trec).unwrap();
        std::fs::write(
            trec.join("train_5500.label"),
            "NUM:dist How far ?\nXYZ:a b\n",
        )
        .unwrap();
        let msg = load(tmp.path(), Task::Trec).unwrap_err().to_string();
        assert!(msg.contains("train_5500.label:2"), "{msg}");
        let mrpc = tmp.path().join("MRPC");
        std::fs::create_dir(&mrpc).unwrap();
        std::fs::write(
            mrpc.join("msr_paraphrase_train.txt"),
            "\u{feff}Quality\t#1 ID\t#2 ID\t#1 String\t#2 String\r\n1\t1\t2\t\" a\tb \" c\r\n",
        )
        .unwrap();
        std::fs::write(
            mrpc.join("msr_paraphrase_test.txt"),
            "Quality\t#1 ID\t#2 ID\t#1 String\t#2 String\n0\t1\t2\ta\tb\n1\t3\t4\t\"x y\n",
        )
        .unwrap();
        let msg = load_mrpc(tmp.path()).unwrap_err().to_string();
        assert!(msg.contains("msr_paraphrase_test.txt:3"), "{msg}");
        // Unquoted `"` inside tab-separated fields is plain text.
        std::fs::write(
            mrpc.join("msr_paraphrase_test.txt"),
            "Quality\t#1 ID\t#2 ID\t#1 String\t#2 String\n0\t1\t2\ta\tb\n",
        )
        .unwrap();
        let m = load_mrpc(tmp.path()).unwrap();
        assert_eq!(
            m.train,
            vec![LabeledPair {
                sentence1: "\" a".into(),
                sentence2: "b \" c".into(),
                label: true
            }]
        );
        assert!(!m.test[0].label);
    }
}
