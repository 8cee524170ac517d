//! Line-aligned text files: one sentence per line, line `i` of every file is a translation
//! of line `i` of every other file. Serves `newstest2012` (cs de en es fr, 3003 lines, the
//! files LASER's `tasks/similarity/wmt.sh` extracts) and `flores200-devtest` (204 languages
//! × 1012 lines, `<lang>.devtest.gz`); the Tatoeba and WMT-news loaders reuse
//! [`read_aligned`] for their two-file pairs.
//!
//! Lines are kept exactly as in the file (FLORES has lines with surrounding spaces and a few
//! duplicated lines; newstest2012 has duplicates within cs, de, es, fr): alignment is by line
//! number, so nothing is stripped, dropped or deduplicated here. Normalisation for matching
//! happens in [`crate::corpus`].

use crate::records::{Bitext, MultiWay, ParallelCorpus};
use crate::text::{self, Encoding};
use crate::DataError;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// The five newstest2012 languages, in file-name order.
pub const NEWSTEST2012_LANGUAGES: [&str; 5] = ["cs", "de", "en", "es", "fr"];

/// Reads line-aligned files (`language → path`, plain or `.gz`) into a [`MultiWay`]. Files
/// whose line counts differ give an error naming both files and both counts.
pub fn read_aligned(files: &[(String, PathBuf)]) -> Result<MultiWay, DataError> {
    let mut lines = BTreeMap::new();
    let mut first: Option<(&Path, usize)> = None;
    for (lang, path) in files {
        let l = text::read_lines(path, Encoding::Utf8)?;
        match first {
            None => first = Some((path, l.len())),
            Some((p0, n0)) if n0 != l.len() => {
                return Err(DataError::format(
                    path,
                    None,
                    format!(
                        "has {} lines but {} has {n0}; line-aligned files must have the same number of lines",
                        l.len(),
                        p0.display()
                    ),
                    "one of the two files is truncated or from another version; re-fetch the dataset with `harness datasets fetch --force`",
                ));
            }
            Some(_) => {}
        }
        lines.insert(lang.clone(), l);
    }
    Ok(MultiWay { lines })
}

/// Reads two line-aligned files (`lang` and English) into a `lang`→`eng` corpus, pairs in
/// line order. A line-count mismatch is an error naming both files.
pub fn read_parallel(lang: &str, xxx: PathBuf, eng: PathBuf) -> Result<ParallelCorpus, DataError> {
    let mut mw = read_aligned(&[("x".to_string(), xxx), ("eng".to_string(), eng)])?;
    let src = mw.lines.remove("x").unwrap_or_default();
    let tgt = mw.lines.remove("eng").unwrap_or_default();
    Ok(ParallelCorpus {
        source_lang: lang.to_string(),
        target_lang: "eng".to_string(),
        pairs: src
            .into_iter()
            .zip(tgt)
            .map(|(source, target)| Bitext { source, target })
            .collect(),
    })
}

/// The newstest2012 languages as owned strings (`cs de en es fr`).
pub fn newstest2012_languages() -> Vec<String> {
    NEWSTEST2012_LANGUAGES
        .iter()
        .map(|s| s.to_string())
        .collect()
}

/// Loads `newstest2012.{cs,de,en,es,fr}` from `dir` (the `newstest2012` folder).
pub fn load_newstest2012(dir: &Path) -> Result<MultiWay, DataError> {
    let files = NEWSTEST2012_LANGUAGES
        .iter()
        .map(|l| {
            Ok((
                l.to_string(),
                text::resolve(dir, &format!("newstest2012.{l}"))?,
            ))
        })
        .collect::<Result<Vec<_>, DataError>>()?;
    read_aligned(&files)
}

/// The FLORES-200 language codes (`eng_Latn`, ...) present in `dir`, sorted: every
/// `<code>.devtest` or `<code>.devtest.gz`.
pub fn flores200_languages(dir: &Path) -> Result<Vec<String>, DataError> {
    let mut langs: Vec<String> = list_dir(dir)?
        .into_iter()
        .filter_map(|name| {
            let stem = name.strip_suffix(".gz").unwrap_or(&name);
            stem.strip_suffix(".devtest").map(str::to_string)
        })
        .collect();
    langs.sort();
    langs.dedup();
    Ok(langs)
}

/// Loads the FLORES-200 devtest files of `languages` (codes such as `eng_Latn`).
pub fn load_flores200_languages(dir: &Path, languages: &[&str]) -> Result<MultiWay, DataError> {
    let files = languages
        .iter()
        .map(|l| Ok((l.to_string(), text::resolve(dir, &format!("{l}.devtest"))?)))
        .collect::<Result<Vec<_>, DataError>>()?;
    read_aligned(&files)
}

/// Loads every FLORES-200 devtest language in `dir` (the `flores200-devtest` folder).
pub fn load_flores200(dir: &Path) -> Result<MultiWay, DataError> {
    let langs = flores200_languages(dir)?;
    if langs.is_empty() {
        return Err(DataError::Missing {
            path: dir.join("eng_Latn.devtest"),
            hint: "no <lang>.devtest(.gz) file in the folder; run `harness datasets fetch flores200-devtest`".into(),
        });
    }
    let refs: Vec<&str> = langs.iter().map(String::as_str).collect();
    load_flores200_languages(dir, &refs)
}

/// File names in `dir`; a missing folder is a [`DataError::Missing`].
pub fn list_dir(dir: &Path) -> Result<Vec<String>, DataError> {
    let entries = std::fs::read_dir(dir).map_err(|e| {
        if e.kind() == std::io::ErrorKind::NotFound {
            DataError::Missing {
                path: dir.to_path_buf(),
                hint: "dataset folder absent; run `harness datasets fetch`".into(),
            }
        } else {
            DataError::io(dir, e)
        }
    })?;
    let mut names = Vec::new();
    for entry in entries {
        let entry = entry.map_err(|e| DataError::io(dir, e))?;
        if let Some(name) = entry.file_name().to_str() {
            names.push(name.to_string());
        }
    }
    names.sort();
    Ok(names)
}

#[cfg(test)]
mod tests {
    use super::*;
    use harness_core::shared_datasets_dir;
    use std::io::Write;

    fn gz(bytes: &[u8]) -> Vec<u8> {
        let mut enc = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
        enc.write_all(bytes).unwrap();
        enc.finish().unwrap()
    }

    #[test]
    fn newstest2012_real_counts_and_known_lines() {
        let mw = load_newstest2012(&shared_datasets_dir().join("newstest2012")).unwrap();
        assert_eq!(
            mw.lines.keys().cloned().collect::<Vec<_>>(),
            newstest2012_languages()
        );
        for (lang, lines) in &mw.lines {
            assert_eq!(lines.len(), 3003, "{lang}");
        }
        assert_eq!(
            mw.lines["en"][0],
            "Parliament Does Not Support Amendment Freeing Tymoshenko"
        );
        assert_eq!(
            mw.lines["de"][0],
            "Keine befreiende Novelle für Tymoshenko durch das Parlament"
        );
        assert_eq!(
            mw.lines["en"][3002],
            "A good idea, provided that it will, prove realistic this time."
        );
        assert_eq!(
            mw.lines["cs"][3002],
            "Dobrá myšlenka, pod podmínkou, že se tentokrát ukáže být realistickou."
        );
        // Duplicates SOURCE.txt lists (1-based): kept, alignment is by line.
        assert_eq!(mw.lines["cs"][2520], mw.lines["cs"][2542]);
        assert_eq!(mw.lines["de"][1976], mw.lines["de"][1977]);
        assert_eq!(mw.lines["fr"][69], mw.lines["fr"][74]);
        let en: std::collections::HashSet<&String> = mw.lines["en"].iter().collect();
        assert_eq!(en.len(), 3003, "en has no duplicates");
    }

    #[test]
    fn flores200_real_counts_and_known_lines() {
        let dir = shared_datasets_dir().join("flores200-devtest");
        let langs = flores200_languages(&dir).unwrap();
        assert_eq!(langs.len(), 204);
        assert_eq!(langs[0], "ace_Arab");
        assert_eq!(langs[203], "zul_Latn");
        let mw = load_flores200(&dir).unwrap();
        assert_eq!(mw.lines.len(), 204);
        for (lang, lines) in &mw.lines {
            assert_eq!(lines.len(), 1012, "{lang}");
        }
        assert_eq!(mw.lines.values().map(Vec::len).sum::<usize>(), 206_448);
        let eng = &mw.lines["eng_Latn"];
        assert!(eng[0].starts_with("\"We now have 4-month-old mice that are non-diabetic"));
        assert!(eng[1011].starts_with("Workers must often get their superiors' approval"));
        assert!(mw.lines["deu_Latn"][0].starts_with("„Wir haben jetzt 4 Monate alte Mäuse"));
        // Surrounding spaces are kept (zul_Latn line 1 ends with a space).
        assert!(mw.lines["zul_Latn"][0].ends_with("wanezela. "));
        // Per-file counts of lines with surrounding whitespace (SOURCE.txt column `ws`).
        let ws = |l: &str| {
            mw.lines[l]
                .iter()
                .filter(|s| s.trim() != s.as_str())
                .count()
        };
        assert_eq!(ws("eng_Latn"), 0);
        assert_eq!(ws("ast_Latn"), 295);
        assert_eq!(ws("kac_Latn"), 549);
        // Exact duplicates (column `dup`): bam_Latn 3 extra copies.
        let distinct: std::collections::HashSet<&String> = mw.lines["bam_Latn"].iter().collect();
        assert_eq!(1012 - distinct.len(), 3);
    }

    #[test]
    fn gz_and_plain_both_load_and_mismatch_names_both_files() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("aaa_Latn.devtest"), "one\r\ntwo\n").unwrap();
        std::fs::write(
            dir.path().join("bbb_Latn.devtest.gz"),
            gz(b"\xEF\xBB\xBFeins\nzwei"),
        )
        .unwrap();
        let mw = load_flores200(dir.path()).unwrap();
        assert_eq!(mw.lines["aaa_Latn"], vec!["one", "two"]);
        assert_eq!(mw.lines["bbb_Latn"], vec!["eins", "zwei"]);

        std::fs::write(dir.path().join("ccc_Latn.devtest"), "uno\n").unwrap();
        let msg = load_flores200(dir.path()).unwrap_err().to_string();
        assert!(
            msg.contains("ccc_Latn.devtest") && msg.contains("aaa_Latn.devtest"),
            "{msg}"
        );
    }

    #[test]
    fn truncated_gz_and_missing_file_name_the_file() {
        let dir = tempfile::tempdir().unwrap();
        let g = gz("a line of text\n".repeat(200).as_bytes());
        std::fs::write(dir.path().join("xxx_Latn.devtest.gz"), &g[..g.len() / 2]).unwrap();
        let msg = load_flores200(dir.path()).unwrap_err().to_string();
        assert!(
            msg.contains("xxx_Latn.devtest.gz") && msg.contains("truncated"),
            "{msg}"
        );

        let msg = load_newstest2012(dir.path()).unwrap_err().to_string();
        assert!(msg.contains("newstest2012.cs"), "{msg}");
        let msg = load_flores200_languages(dir.path(), &["yyy_Latn"])
            .unwrap_err()
            .to_string();
        assert!(msg.contains("yyy_Latn.devtest"), "{msg}");
    }
}
