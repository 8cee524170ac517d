//! ATIS and SNIPS in the joint intent/slot layout of Goo et al. 2018 (MiuLab/SlotGated-SLU
//! `data/{atis,snips}/{train,valid,test}/{seq.in,seq.out,label}`; the same files as
//! monologg/JointBERT, whose `data_loader.py` reads `seq.in` with `text.split()`).
//!
//! Format (see each folder's SOURCE.txt): three line-aligned files per split, no header.
//! `seq.in` is the space-tokenised utterance, `seq.out` one BIO tag per token, `label` the
//! intent. SNIPS has trailing and doubled spaces in `seq.in` and a trailing space on every
//! `seq.out` line, so tokens are runs of non-whitespace (Python's `split()`, as JointBERT);
//! the record's text is those tokens joined by single spaces. A line count that differs
//! between the three files, or a tag count that differs from the token count, is an error
//! naming the file and line.
//!
//! Multi-intent labels (ATIS `atis_flight#atis_airfare`, several occurring only in
//! valid/test) are kept verbatim as one class string, as SlotGated-SLU does; protocols that
//! prefer to accept any component split them with [`intent_components`].

use crate::records::{LabeledText, Splits};
use crate::text::{read_lines, resolve, Encoding};
use crate::DataError;
use std::path::Path;

/// The split folder names, in [`Splits`] order (`valid` is the dev split).
pub const SPLITS: [&str; 3] = ["train", "valid", "test"];

const FIX: &str =
    "the file is truncated or corrupt; re-fetch it with `harness datasets fetch --force`";

/// The components of a (possibly `#`-joined multi-intent) label.
pub fn intent_components(label: &str) -> impl Iterator<Item = &str> {
    label.split('#')
}

/// Loads train/valid/test of an `atis` or `snips` folder; labels are the intents.
pub fn load(dir: &Path) -> Result<Splits<LabeledText>, DataError> {
    Ok(Splits {
        train: load_split(dir, "train")?,
        dev: load_split(dir, "valid")?,
        test: load_split(dir, "test")?,
    })
}

/// Loads one split folder (`"train"`, `"valid"` or `"test"`).
pub fn load_split(dir: &Path, split: &str) -> Result<Vec<LabeledText>, DataError> {
    let d = dir.join(split);
    let in_path = resolve(&d, "seq.in")?;
    let out_path = resolve(&d, "seq.out")?;
    let label_path = resolve(&d, "label")?;
    let texts = read_lines(&in_path, Encoding::Utf8)?;
    let tags = read_lines(&out_path, Encoding::Utf8)?;
    let labels = read_lines(&label_path, Encoding::Utf8)?;
    for (path, n) in [(&out_path, tags.len()), (&label_path, labels.len())] {
        if n != texts.len() {
            let (short, line) = if n < texts.len() {
                (path, n + 1)
            } else {
                (&in_path, texts.len() + 1)
            };
            return Err(DataError::format(
                short,
                Some(line),
                format!(
                    "{} has {} lines but {} has {n}; the files of a split are line-aligned",
                    in_path.display(),
                    texts.len(),
                    path.display()
                ),
                FIX,
            ));
        }
    }
    texts
        .iter()
        .zip(&tags)
        .zip(&labels)
        .enumerate()
        .map(|(i, ((text, tag), label))| {
            let tokens: Vec<&str> = text.split_whitespace().collect();
            let n_tags = tag.split_whitespace().count();
            if n_tags != tokens.len() {
                return Err(DataError::format(
                    &out_path,
                    Some(i + 1),
                    format!(
                        "{n_tags} slot tags for the {} tokens of line {} of {}",
                        tokens.len(),
                        i + 1,
                        in_path.display()
                    ),
                    FIX,
                ));
            }
            let label = label.trim();
            if label.is_empty() || tokens.is_empty() {
                let (path, what) = if label.is_empty() {
                    (&label_path, "empty intent label")
                } else {
                    (&in_path, "empty utterance")
                };
                return Err(DataError::format(path, Some(i + 1), what, FIX));
            }
            Ok(LabeledText {
                text: tokens.join(" "),
                label: label.to_string(),
            })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use harness_core::shared_datasets_dir;
    use std::collections::{BTreeMap, BTreeSet};

    fn dist(v: &[LabeledText]) -> BTreeMap<String, usize> {
        let mut m = BTreeMap::new();
        for r in v {
            *m.entry(r.label.clone()).or_default() += 1;
        }
        m
    }

    fn map(items: &[(&str, usize)]) -> BTreeMap<String, usize> {
        items.iter().map(|(k, v)| (k.to_string(), *v)).collect()
    }

    #[test]
    fn atis_counts_labels_and_records() {
        let s = load(&shared_datasets_dir().join("atis")).unwrap();
        assert_eq!((s.train.len(), s.dev.len(), s.test.len()), (4478, 500, 893));
        let (tr, va, te) = (dist(&s.train), dist(&s.dev), dist(&s.test));
        assert_eq!((tr.len(), va.len(), te.len()), (21, 16, 20));
        let all: BTreeSet<_> = tr.keys().chain(va.keys()).chain(te.keys()).collect();
        assert_eq!(all.len(), 26);
        assert_eq!(tr["atis_flight"], 3309);
        assert_eq!(tr["atis_flight#atis_airfare"], 19);
        assert_eq!(va["atis_flight"], 357);
        assert_eq!(va["atis_airfare#atis_flight_time"], 1);
        assert_eq!(
            te,
            map(&[
                ("atis_flight", 632),
                ("atis_airfare", 48),
                ("atis_airline", 38),
                ("atis_ground_service", 36),
                ("atis_abbreviation", 33),
                ("atis_capacity", 21),
                ("atis_airport", 18),
                ("atis_flight#atis_airfare", 12),
                ("atis_distance", 10),
                ("atis_aircraft", 9),
                ("atis_flight_no", 8),
                ("atis_ground_fare", 7),
                ("atis_meal", 6),
                ("atis_city", 6),
                ("atis_quantity", 3),
                ("atis_day_name", 2),
                ("atis_flight_time", 1),
                ("atis_airfare#atis_flight", 1),
                ("atis_flight#atis_airline", 1),
                ("atis_flight_no#atis_airline", 1),
            ])
        );
        assert_eq!(
            s.train[0],
            LabeledText {
                text: "i want to fly from baltimore to dallas round trip".into(),
                label: "atis_flight".into()
            }
        );
        assert_eq!(
            s.test[0].text,
            "i would like to find a flight from charlotte to las vegas that makes a stop in st. louis"
        );
        assert_eq!(
            intent_components("atis_flight#atis_airfare").collect::<Vec<_>>(),
            ["atis_flight", "atis_airfare"]
        );
    }

    #[test]
    fn snips_counts_labels_and_whitespace() {
        let s = load(&shared_datasets_dir().join("snips")).unwrap();
        assert_eq!(
            (s.train.len(), s.dev.len(), s.test.len()),
            (13084, 700, 700)
        );
        assert_eq!(
            dist(&s.train),
            map(&[
                ("PlayMusic", 1914),
                ("GetWeather", 1896),
                ("BookRestaurant", 1881),
                ("RateBook", 1876),
                ("SearchScreeningEvent", 1852),
                ("SearchCreativeWork", 1847),
                ("AddToPlaylist", 1818),
            ])
        );
        assert!(dist(&s.dev).values().all(|&n| n == 100) && dist(&s.dev).len() == 7);
        assert_eq!(
            dist(&s.test),
            map(&[
                ("AddToPlaylist", 124),
                ("SearchScreeningEvent", 107),
                ("SearchCreativeWork", 107),
                ("GetWeather", 104),
                ("BookRestaurant", 92),
                ("PlayMusic", 86),
                ("RateBook", 80),
            ])
        );
        // valid line 1 ends with a space in seq.in; the text is trimmed.
        assert_eq!(
            s.dev[0].text,
            "i d like to have this track onto my classical relaxations playlist"
        );
        assert_eq!(s.test[699].text, "rate this album two out of 6");
        assert_eq!(s.test[699].label, "RateBook");
        assert!(s
            .train
            .iter()
            .all(|r| !r.text.contains("  ") && r.text.trim() == r.text));
        assert!(s.train.iter().filter(|r| !r.text.is_ascii()).count() == 260);
    }

    #[test]
    fn synthetic_gz_missing_ragged() {
        use std::io::Write;
        let tmp = tempfile::tempdir().unwrap();
        let d = tmp.path().join("test");
        std::fs::create_dir(&d).unwrap();
        let msg = load_split(tmp.path(), "test").unwrap_err().to_string();
        assert!(msg.contains("seq.in"), "{msg}");
        let mut enc = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
        enc.write_all(b"play  some jazz \nhi\n").unwrap();
        let gz = enc.finish().unwrap();
        std::fs::write(d.join("seq.in.gz"), &gz).unwrap();
        std::fs::write(d.join("seq.out"), "O O B-genre \r\nO \r\n").unwrap();
        std::fs::write(d.join("label"), "PlayMusic\r\nGreet\r\n").unwrap();
        let v = load_split(tmp.path(), "test").unwrap();
        assert_eq!(v[0].text, "play some jazz");
        assert_eq!(v[1].label, "Greet");
        // Label file one line short: names it and the missing line.
        std::fs::write(d.join("label"), "PlayMusic\n").unwrap();
        let msg = load_split(tmp.path(), "test").unwrap_err().to_string();
        assert!(msg.contains("label:2"), "{msg}");
        // Tag count differs from token count.
        std::fs::write(d.join("label"), "PlayMusic\nGreet\n").unwrap();
        std::fs::write(d.join("seq.out"), "O O B-genre\nO O\n").unwrap();
        let msg = load_split(tmp.path(), "test").unwrap_err().to_string();
        assert!(msg.contains("seq.out:2"), "{msg}");
        // Truncated gzip.
        std::fs::write(d.join("seq.out"), "O O B-genre\nO\n").unwrap();
        std::fs::write(d.join("seq.in.gz"), &gz[..gz.len() - 3]).unwrap();
        let msg = load_split(tmp.path(), "test").unwrap_err().to_string();
        assert!(msg.contains("seq.in.gz"), "{msg}");
    }
}
