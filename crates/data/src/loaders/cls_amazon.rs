//! The multilingual reviews stand-in for Webis-CLS-10 (folder `cls-amazon-reviews`): MARC
//! (Keung et al. 2020) Amazon reviews in en/de/fr with 1-5 stars, as sampled by
//! mojave-pku/UniPrompt (`marc/<lang>/{train,dev,test}.csv`).
//!
//! Format (see the folder's SOURCE.txt): comma-separated CSV without header, RFC 4180
//! quoting, UTF-8, columns `row_id,review_text,stars`; no field has a line break. Parsed
//! as Python's `csv` module (default dialect) reads it, with the csv crate through
//! [`read_csv`]. Records keep the review text and the star digit as the label;
//! [`binary`] applies the CLS-style protocol that SOURCE.txt suggests (1-2 negative, 4-5
//! positive, 3 dropped).

use crate::records::{LabeledText, Splits};
use crate::text::{read_csv, resolve, CsvFormat};
use crate::DataError;
use std::path::Path;

/// The languages of the stand-in.
pub const LANGUAGES: [&str; 3] = ["en", "de", "fr"];

/// Star labels.
pub const STARS: [&str; 5] = ["1", "2", "3", "4", "5"];

const FIX: &str =
    "the file is truncated or corrupt; re-fetch it with `harness datasets fetch --force`";

/// A split file: no header, one record per line.
const FORMAT: CsvFormat = CsvFormat {
    delimiter: b',',
    columns: &["row_id", "review_text", "stars"],
    header: false,
    multiline: false,
};

/// Loads `marc/<lang>/{train,dev,test}.csv` (train and dev are both drawn from MARC's
/// train split; test is MARC's full test split). Labels are star digits `"1"`..`"5"`.
pub fn load(dir: &Path, lang: &str) -> Result<Splits<LabeledText>, DataError> {
    let d = dir.join("marc").join(lang);
    Ok(Splits {
        train: csv_file(&d, "train.csv")?,
        dev: csv_file(&d, "dev.csv")?,
        test: csv_file(&d, "test.csv")?,
    })
}

/// The binary sentiment view: stars 1-2 → `"neg"`, 4-5 → `"pos"`, 3 dropped.
pub fn binary(reviews: &[LabeledText]) -> Vec<LabeledText> {
    reviews
        .iter()
        .filter_map(|r| {
            let label = match r.label.as_str() {
                "1" | "2" => "neg",
                "4" | "5" => "pos",
                _ => return None,
            };
            Some(LabeledText {
                text: r.text.clone(),
                label: label.into(),
            })
        })
        .collect()
}

fn csv_file(dir: &Path, name: &str) -> Result<Vec<LabeledText>, DataError> {
    let path = resolve(dir, name)?;
    read_csv(&path, &FORMAT)?
        .into_iter()
        .map(|(line, mut f)| {
            if f[0].parse::<u32>().is_err() || !STARS.contains(&f[2].as_str()) {
                return Err(DataError::format(
                    &path,
                    Some(line),
                    format!(
                        "expected `row_id,review_text,stars` with stars 1-5, found row_id `{}` and stars `{}`",
                        f[0], f[2]
                    ),
                    FIX,
                ));
            }
            let label = f.pop().unwrap_or_default();
            let text = f.pop().unwrap_or_default();
            Ok(LabeledText { text, label })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use harness_core::shared_datasets_dir;

    fn per_star(v: &[LabeledText]) -> Vec<usize> {
        STARS
            .iter()
            .map(|s| v.iter().filter(|r| r.label == *s).count())
            .collect()
    }

    #[test]
    fn every_language_matches_source_counts() {
        let dir = shared_datasets_dir().join("cls-amazon-reviews");
        for lang in LANGUAGES {
            let s = load(&dir, lang).unwrap();
            assert_eq!(per_star(&s.train), [256; 5], "{lang}");
            assert_eq!(per_star(&s.dev), [256; 5], "{lang}");
            assert_eq!(per_star(&s.test), [1000; 5], "{lang}");
            let b = binary(&s.test);
            assert_eq!(b.len(), 4000);
            assert_eq!(b.iter().filter(|r| r.label == "pos").count(), 2000);
            assert_eq!(binary(&s.train).len(), 1024);
        }
    }

    #[test]
    fn known_records() {
        let dir = shared_datasets_dir().join("cls-amazon-reviews");
        let en = load(&dir, "en").unwrap();
        assert!(en.test[0]
            .text
            .starts_with("These are AWFUL. They are see through, the fabric"));
        assert!(en.test[0].text.ends_with("because the quality is so poor."));
        assert_eq!(en.test[0].label, "1");
        assert_eq!(
            en.test[1].text,
            "I bought 4 and NONE of them worked. Yes I used new batteries!"
        );
        assert_eq!(
            en.test[4999].text,
            "Just what I needed! Perfect for western theme party."
        );
        assert_eq!(en.test[4999].label, "5");
        let de = load(&dir, "de").unwrap();
        assert_eq!(
            de.dev[1].text,
            "Umzugskarton hat sich relative leicht zerrissen."
        );
        assert!(de.dev[0]
            .text
            .starts_with("Die Stühle sind nun 3 Monate im Einsatz."));
        let fr = load(&dir, "fr").unwrap();
        assert_eq!(fr.train[0].label, "3");
        assert!(fr.dev[1279]
            .text
            .starts_with("Livraison rapide et conditionnement en bon état."));
        assert_eq!(fr.dev[1279].label, "5");
    }

    #[test]
    fn synthetic_gz_missing_and_malformed() {
        use std::io::Write;
        let tmp = tempfile::tempdir().unwrap();
        let d = tmp.path().join("marc").join("en");
        std::fs::create_dir_all(&d).unwrap();
        std::fs::write(d.join("train.csv"), "1,\"a, \"\"b\"\"\",4\r\n2,plain,2\r\n").unwrap();
        std::fs::write(d.join("dev.csv"), "\u{feff}3,x,3\n").unwrap();
        let msg = load(tmp.path(), "en").unwrap_err().to_string();
        assert!(msg.contains("test.csv"), "{msg}");
        let mut enc = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
        enc.write_all(b"0,ok,5\n").unwrap();
        let gz = enc.finish().unwrap();
        std::fs::write(d.join("test.csv.gz"), &gz).unwrap();
        let s = load(tmp.path(), "en").unwrap();
        assert_eq!(s.train[0].text, "a, \"b\"");
        assert_eq!(s.dev[0].label, "3");
        assert_eq!(s.test[0].text, "ok");
        std::fs::write(d.join("test.csv.gz"), &gz[..gz.len() - 4]).unwrap();
        let msg = load(tmp.path(), "en").unwrap_err().to_string();
        assert!(msg.contains("test.csv.gz"), "{msg}");
        for bad in ["2,\"unterminated,5\n", "2,text,6\n", "2,a,b,5\n"] {
            std::fs::write(d.join("train.csv"), format!("1,fine,1\n{bad}")).unwrap();
            let msg = load(tmp.path(), "en").unwrap_err().to_string();
            assert!(msg.contains("train.csv:2"), "{msg}");
        }
    }
}
