//! SIB-200 topic classification (Adelani et al. 2024; dadelani/sib-200 `data/annotated`),
//! one folder per language (`eng_Latn`, `deu_Latn`, ...) holding `train.tsv`, `dev.tsv`,
//! `test.tsv` and `labels.txt`.
//!
//! Format (see the folder's SOURCE.txt): UTF-8, one header line `index_id<TAB>category<TAB>text`,
//! written by `pandas.to_csv(sep='\t')`, so a text containing `"` is CSV-quoted with inner
//! quotes doubled; parsed as `pandas.read_csv(sep='\t')` reads it back (RFC 4180 quoting
//! with a tab delimiter, read with the csv crate through [`read_csv`]). Every row has
//! exactly three fields and no field holds a line break. Row `k` of a split is the
//! translation of row `k` of the same split in every other language (same `index_id` and
//! category), so the returned vectors align by index.

use crate::records::{LabeledText, Splits};
use crate::text::{read_csv, read_lines, resolve, CsvFormat, Encoding};
use crate::DataError;
use std::path::{Path, PathBuf};

/// The split file names, in [`Splits`] order.
pub const SPLITS: [&str; 3] = ["train", "dev", "test"];

const FIX: &str =
    "the file is truncated or corrupt; re-fetch it with `harness datasets fetch --force`";

/// A split file: header `index_id<TAB>category<TAB>text`, one record per line.
const FORMAT: CsvFormat = CsvFormat {
    delimiter: b'\t',
    columns: &["index_id", "category", "text"],
    header: true,
    multiline: false,
};

/// Language folders present in `dir` (e.g. `eng_Latn`), sorted.
pub fn languages(dir: &Path) -> Result<Vec<String>, DataError> {
    let mut out = Vec::new();
    for entry in std::fs::read_dir(dir).map_err(|e| DataError::io(dir, e))? {
        let entry = entry.map_err(|e| DataError::io(dir, e))?;
        if entry.path().is_dir() {
            out.push(entry.file_name().to_string_lossy().into_owned());
        }
    }
    out.sort();
    Ok(out)
}

/// The category names of `lang` (`labels.txt`, one per line, in file order).
pub fn labels(dir: &Path, lang: &str) -> Result<Vec<String>, DataError> {
    Ok(read_labels(dir, lang)?.1)
}

/// `labels.txt` of `lang`: its path (a split row with another category names it, since a
/// truncated `labels.txt` is as likely the culprit as the row) and its categories.
fn read_labels(dir: &Path, lang: &str) -> Result<(PathBuf, Vec<String>), DataError> {
    let path = resolve(&dir.join(lang), "labels.txt")?;
    let labels = read_lines(&path, Encoding::Utf8)?
        .into_iter()
        .map(|l| l.trim().to_string())
        .filter(|l| !l.is_empty())
        .collect();
    Ok((path, labels))
}

/// Loads the three splits of `lang` (e.g. `"eng_Latn"`); each label is a category name
/// from `labels.txt`.
pub fn load(dir: &Path, lang: &str) -> Result<Splits<LabeledText>, DataError> {
    let labels = read_labels(dir, lang)?;
    let d = dir.join(lang);
    Ok(Splits {
        train: split_file(&d, "train.tsv", &labels)?,
        dev: split_file(&d, "dev.tsv", &labels)?,
        test: split_file(&d, "test.tsv", &labels)?,
    })
}

fn split_file(
    dir: &Path,
    name: &str,
    (labels_path, labels): &(PathBuf, Vec<String>),
) -> Result<Vec<LabeledText>, DataError> {
    let path = resolve(dir, name)?;
    read_csv(&path, &FORMAT)?
        .into_iter()
        .map(|(line, mut f)| {
            if f[0].trim().parse::<u32>().is_err() || !labels.iter().any(|l| *l == f[1]) {
                return Err(DataError::format(
                    &path,
                    Some(line),
                    format!(
                        "expected a numeric index_id and a category listed in {}, found `{}` and `{}`",
                        labels_path.display(), f[0], f[1]
                    ),
                    FIX,
                ));
            }
            let text = std::mem::take(&mut f[2]);
            let label = std::mem::take(&mut f[1]);
            Ok(LabeledText { text, label })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use harness_core::shared_datasets_dir;
    use std::collections::BTreeMap;

    const LANGS: [&str; 21] = [
        "arb_Arab", "bul_Cyrl", "deu_Latn", "ell_Grek", "eng_Latn", "fra_Latn", "hin_Deva",
        "ita_Latn", "jpn_Jpan", "kor_Hang", "nld_Latn", "pol_Latn", "por_Latn", "rus_Cyrl",
        "spa_Latn", "swh_Latn", "tha_Thai", "tur_Latn", "urd_Arab", "vie_Latn", "zho_Hans",
    ];
    const LABELS: [&str; 7] = [
        "science/technology",
        "travel",
        "politics",
        "sports",
        "health",
        "entertainment",
        "geography",
    ];

    fn dist(v: &[LabeledText]) -> Vec<usize> {
        let mut m: BTreeMap<&str, usize> = BTreeMap::new();
        for r in v {
            *m.entry(r.label.as_str()).or_default() += 1;
        }
        LABELS
            .iter()
            .map(|l| m.get(l).copied().unwrap_or(0))
            .collect()
    }

    #[test]
    fn every_language_matches_source_counts_and_aligns_with_english() {
        let dir = shared_datasets_dir().join("sib200");
        assert_eq!(languages(&dir).unwrap(), LANGS);
        let eng = load(&dir, "eng_Latn").unwrap();
        for lang in LANGS {
            assert_eq!(labels(&dir, lang).unwrap(), LABELS, "{lang}");
            let s = load(&dir, lang).unwrap();
            assert_eq!((s.train.len(), s.dev.len(), s.test.len()), (701, 99, 204));
            assert_eq!(dist(&s.train), [176, 138, 102, 85, 77, 65, 58], "{lang}");
            assert_eq!(dist(&s.dev), [25, 20, 14, 12, 11, 9, 8], "{lang}");
            assert_eq!(dist(&s.test), [51, 40, 30, 25, 22, 19, 17], "{lang}");
            for (a, b) in [
                (&s.train, &eng.train),
                (&s.dev, &eng.dev),
                (&s.test, &eng.test),
            ] {
                assert!(a.iter().zip(b).all(|(x, y)| x.label == y.label), "{lang}");
            }
        }
    }

    #[test]
    fn known_records_and_csv_quoting() {
        let dir = shared_datasets_dir().join("sib200");
        let eng = load(&dir, "eng_Latn").unwrap();
        assert_eq!(eng.test[0].label, "science/technology");
        assert_eq!(
            eng.test[0].text,
            "Mutation adds new genetic variation, and selection removes it from the pool of expressed variation."
        );
        assert_eq!(
            eng.train[700].text,
            "Interactive design requires that components of a project connect to each other, but also make sense as a separate entity."
        );
        let quoted = |v: &[LabeledText]| v.iter().filter(|r| r.text.contains('"')).count();
        // pandas quotes exactly the texts holding a `"` (no text has a tab or line break).
        assert_eq!(
            (quoted(&eng.train), quoted(&eng.dev), quoted(&eng.test)),
            (41, 6, 6)
        );
        // The documented example: quotes undone, no stray outer quotes.
        assert!(eng
            .train
            .iter()
            .chain(&eng.dev)
            .chain(&eng.test)
            .any(|r| r.text.starts_with("\"We now have 4-month-old mice")));
        let zho = load(&dir, "zho_Hans").unwrap();
        assert_eq!(zho.test[203].label, "geography");
        assert_eq!(
            zho.test[203].text,
            "该洞穴坐落在麦加 (Mecca) 北部的一座山顶上，与外界完全隔绝。"
        );
    }

    #[test]
    fn synthetic_gz_crlf_errors() {
        use std::io::Write;
        let tmp = tempfile::tempdir().unwrap();
        let d = tmp.path().join("xx_Latn");
        std::fs::create_dir(&d).unwrap();
        std::fs::write(d.join("labels.txt"), "travel\r\nhealth\r\n").unwrap();
        let body = "index_id\tcategory\ttext\r\n1\ttravel\t\"\"\"Hi,\"\" he said.\"\r\n";
        std::fs::write(d.join("train.tsv"), body).unwrap();
        std::fs::write(d.join("dev.tsv"), "\u{feff}index_id\tcategory\ttext\n").unwrap();
        let mut enc = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
        enc.write_all(b"index_id\tcategory\ttext\n2\thealth\tx \"y\" z\n")
            .unwrap();
        let gz = enc.finish().unwrap();
        // Missing test split.
        let msg = load(tmp.path(), "xx_Latn").unwrap_err().to_string();
        assert!(msg.contains("test.tsv"), "{msg}");
        std::fs::write(d.join("test.tsv.gz"), &gz).unwrap();
        let s = load(tmp.path(), "xx_Latn").unwrap();
        assert_eq!(s.train[0].text, "\"Hi,\" he said.");
        assert_eq!(s.test[0].text, "x \"y\" z");
        assert!(s.dev.is_empty());
        std::fs::write(d.join("test.tsv.gz"), &gz[..gz.len() - 5]).unwrap();
        let msg = load(tmp.path(), "xx_Latn").unwrap_err().to_string();
        assert!(msg.contains("test.tsv.gz"), "{msg}");
        std::fs::write(d.join("test.tsv.gz"), &gz).unwrap();
        // Malformed rows: ragged, unknown label, open quote.
        for bad in ["3\ttravel\n", "3\tsports\tx\n", "3\ttravel\t\"open\n"] {
            std::fs::write(
                d.join("train.tsv"),
                format!("index_id\tcategory\ttext\n{bad}"),
            )
            .unwrap();
            let msg = load(tmp.path(), "xx_Latn").unwrap_err().to_string();
            assert!(msg.contains("train.tsv:2"), "{msg}");
        }
    }
}
