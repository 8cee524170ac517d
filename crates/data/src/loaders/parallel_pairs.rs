//! `parallel-pairs`: Tatoeba sentence pairs as packaged by manythings.org/anki, one folder
//! per pair (`deu-eng/deu.txt[.gz]`). Tab-separated, no header, no quoting (`"` is literal);
//! column 1 = English, column 2 = language X, an optional column 3 = per-pair attribution
//! (CC-BY 2.0 FR, "tatoeba.org #id (user) & #id (user)"), which is read and ignored here (the
//! dataset-level attribution lives in SOURCE.txt and `datasets.lock`).
//!
//! Rows are kept as published, in file order (manythings sorts by English length), duplicates
//! included (deu has 38 exact duplicate pairs; many English sentences repeat with alternative
//! translations). `tha.txt` has CRLF line ends and `tur.txt` no final newline: both handled by
//! [`crate::text`]. An empty line or a row with 1 or more than 3 fields is an error at
//! file:line (SOURCE.txt: no empty lines, 2 or 3 columns).
//!
//! These pairs OVERLAP the LASER Tatoeba test: build training corpora through
//! [`crate::corpus::filter_contaminated`].

use super::multiway::list_dir;
use crate::records::{Bitext, ParallelCorpus};
use crate::text::{self, Encoding};
use crate::DataError;
use std::path::Path;

/// Languages X with a folder `X-eng` holding `X.txt` or `X.txt.gz`, sorted.
pub fn languages(dir: &Path) -> Result<Vec<String>, DataError> {
    Ok(list_dir(dir)?
        .into_iter()
        .filter_map(|name| {
            let lang = name.strip_suffix("-eng")?.to_string();
            text::resolve(&dir.join(&name), &format!("{lang}.txt"))
                .is_ok()
                .then_some(lang)
        })
        .collect())
}

/// Loads `X-eng/X.txt[.gz]`: `source_lang` = X (column 2), `target_lang` = `eng` (column 1).
pub fn load_language(dir: &Path, lang: &str) -> Result<ParallelCorpus, DataError> {
    let path = text::resolve(&dir.join(format!("{lang}-eng")), &format!("{lang}.txt"))?;
    let lines = text::read_lines(&path, Encoding::Utf8)?;
    let mut pairs = Vec::with_capacity(lines.len());
    for (i, line) in lines.iter().enumerate() {
        let f = text::tab_fields(&path, i + 1, line, 2, 3)?;
        pairs.push(Bitext {
            source: f[1].to_string(),
            target: f[0].to_string(),
        });
    }
    Ok(ParallelCorpus {
        source_lang: lang.to_string(),
        target_lang: "eng".to_string(),
        pairs,
    })
}

/// Loads every pair in `dir`, in [`languages`] order.
pub fn load_all(dir: &Path) -> Result<Vec<ParallelCorpus>, DataError> {
    languages(dir)?
        .iter()
        .map(|l| load_language(dir, l))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use harness_core::shared_datasets_dir;
    use std::io::Write;

    #[test]
    fn real_counts_for_all_12_pairs_and_known_records() {
        let dir = shared_datasets_dir().join("parallel-pairs");
        let expected = [
            ("ara", 11_446),
            ("bul", 15_173),
            ("cmn", 21_116),
            ("deu", 169_197),
            ("fra", 167_130),
            ("hin", 2_779),
            ("jpn", 62_487),
            ("spa", 118_964),
            ("tha", 3_018),
            ("tur", 41_098),
            ("urd", 1_143),
            ("vie", 8_050),
        ];
        let all = load_all(&dir).unwrap();
        let got: Vec<(&str, usize)> = all
            .iter()
            .map(|c| (c.source_lang.as_str(), c.pairs.len()))
            .collect();
        assert_eq!(got, expected);
        assert_eq!(all.iter().map(|c| c.pairs.len()).sum::<usize>(), 621_601);

        let by = |l: &str| all.iter().find(|c| c.source_lang == l).unwrap();
        let deu = by("deu");
        assert_eq!(
            deu.pairs[0],
            Bitext {
                source: "Hallo!".into(),
                target: "Hi.".into()
            }
        );
        assert!(deu.pairs[169_196]
            .target
            .starts_with("It may be impossible to get a completely error-free corpus"));
        let distinct: std::collections::HashSet<&Bitext> = deu.pairs.iter().collect();
        assert_eq!(distinct.len(), 169_159, "uniq pairs per SOURCE.txt");
        let uniq_eng: std::collections::HashSet<&String> =
            deu.pairs.iter().map(|p| &p.target).collect();
        assert_eq!(uniq_eng.len(), 134_922);
        // 3-column file: attribution dropped.
        assert_eq!(
            by("jpn").pairs[0],
            Bitext {
                source: "行け。".into(),
                target: "Go.".into()
            }
        );
        // CRLF file: no stray CR.
        let tha = by("tha");
        assert_eq!(tha.pairs[0].target, "Hi.");
        assert!(tha.pairs.iter().all(|p| !p.source.contains('\r')));
        // No final newline: the last line is still read whole.
        assert!(by("tur").pairs[41_097].source.ends_with("söyledim."));
    }

    #[test]
    fn quotes_bom_crlf_and_gz() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir(dir.path().join("abc-eng")).unwrap();
        let mut enc = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
        enc.write_all(
            "\u{feff}He said \"hi.\tEr sagte \"hallo.\r\nGo.\tGeh.\tCC-BY\r\n".as_bytes(),
        )
        .unwrap();
        std::fs::write(dir.path().join("abc-eng/abc.txt.gz"), enc.finish().unwrap()).unwrap();
        let c = load_language(dir.path(), "abc").unwrap();
        assert_eq!(c.pairs.len(), 2);
        assert_eq!(c.pairs[0].source, "Er sagte \"hallo.");
        assert_eq!(c.pairs[0].target, "He said \"hi.");
        assert_eq!(c.pairs[1].source, "Geh.");
    }

    #[test]
    fn malformed_row_truncated_gz_and_missing_file() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir(dir.path().join("abc-eng")).unwrap();
        std::fs::write(dir.path().join("abc-eng/abc.txt"), "a\tb\n\nc\td\n").unwrap();
        let msg = load_language(dir.path(), "abc").unwrap_err().to_string();
        assert!(msg.contains("abc.txt:2"), "{msg}");

        std::fs::remove_file(dir.path().join("abc-eng/abc.txt")).unwrap();
        let msg = load_language(dir.path(), "abc").unwrap_err().to_string();
        assert!(msg.contains("abc.txt"), "{msg}");

        let mut enc = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
        enc.write_all("x\ty\n".repeat(500).as_bytes()).unwrap();
        let g = enc.finish().unwrap();
        std::fs::write(dir.path().join("abc-eng/abc.txt.gz"), &g[..g.len() / 2]).unwrap();
        let msg = load_language(dir.path(), "abc").unwrap_err().to_string();
        assert!(
            msg.contains("abc.txt.gz") && msg.contains("truncated"),
            "{msg}"
        );
    }
}
