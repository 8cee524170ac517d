//! `bucc2018`: BUCC 2018 shared-task zh-en **sample** set: `zh-en.sample.zh[.gz]` and
//! `zh-en.sample.en[.gz]` (`<id>\t<sentence>`), `zh-en.sample.gold` (`<zh-id>\t<en-id>`).
//!
//! Reference: LASER `tasks/bucc/bucc.sh` (its `ExtractOrig` cuts each sentence file into a
//! `.id` column and a `.txt` column, in file order) and `tasks/bucc/bucc.py` (reads
//! `--src-text/--src-ids`, `--trg-text/--trg-ids` and the gold file of `src-id\ttrg-id`
//! lines, mines candidates and scores F1 against the gold). Each line is split on its FIRST
//! tab only (SOURCE.txt), the text is kept verbatim. Ids must be unique per file and every
//! gold id must exist; violations are errors at file:line.

use crate::records::{IdSentence, MiningSet};
use crate::text::{self, Encoding};
use crate::DataError;
use std::collections::HashSet;
use std::path::{Path, PathBuf};

/// Loads `<src>-<trg>.<part>.{src,trg,gold}` from `dir`, e.g. `("zh", "en", "sample")`.
pub fn load(dir: &Path, src: &str, trg: &str, part: &str) -> Result<MiningSet, DataError> {
    let stem = format!("{src}-{trg}.{part}");
    let (source, src_path) = read_ids(dir, &format!("{stem}.{src}"))?;
    let (target, trg_path) = read_ids(dir, &format!("{stem}.{trg}"))?;
    let gold_path = text::resolve(dir, &format!("{stem}.gold"))?;
    let src_ids: HashSet<&str> = source.iter().map(|s| s.id.as_str()).collect();
    let trg_ids: HashSet<&str> = target.iter().map(|s| s.id.as_str()).collect();
    let mut gold = Vec::new();
    for (i, line) in text::read_lines(&gold_path, Encoding::Utf8)?
        .iter()
        .enumerate()
    {
        let f = text::tab_fields(&gold_path, i + 1, line, 2, 2)?;
        for (id, ids, file) in [(f[0], &src_ids, &src_path), (f[1], &trg_ids, &trg_path)] {
            if !ids.contains(id) {
                return Err(DataError::format(
                    &gold_path,
                    Some(i + 1),
                    format!("gold id `{id}` does not occur in {}", file.display()),
                    "the gold and sentence files are from different releases; re-fetch the dataset with `harness datasets fetch --force`",
                ));
            }
        }
        gold.push((f[0].to_string(), f[1].to_string()));
    }
    Ok(MiningSet {
        source_lang: src.to_string(),
        target_lang: trg.to_string(),
        source,
        target,
        gold,
    })
}

/// Loads the zh-en sample set, the only BUCC 2018 part available here.
pub fn load_zh_en_sample(dir: &Path) -> Result<MiningSet, DataError> {
    load(dir, "zh", "en", "sample")
}

/// Reads an `<id>\t<sentence>` file, splitting each line on its first tab.
fn read_ids(dir: &Path, name: &str) -> Result<(Vec<IdSentence>, PathBuf), DataError> {
    let path = text::resolve(dir, name)?;
    let mut seen = HashSet::new();
    let mut out = Vec::new();
    for (i, line) in text::read_lines(&path, Encoding::Utf8)?
        .into_iter()
        .enumerate()
    {
        let Some((id, sentence)) = line.split_once('\t') else {
            return Err(DataError::format(
                &path,
                Some(i + 1),
                "expected `<id>\\t<sentence>`, found no tab",
                "the file is truncated or corrupt; re-fetch it with `harness datasets fetch --force`",
            ));
        };
        if id.is_empty() || !seen.insert(id.to_string()) {
            return Err(DataError::format(
                &path,
                Some(i + 1),
                format!("sentence id `{id}` is empty or repeated"),
                "ids must be unique; re-fetch the file with `harness datasets fetch --force`",
            ));
        }
        out.push(IdSentence {
            id: id.to_string(),
            text: sentence.to_string(),
        });
    }
    Ok((out, path))
}

#[cfg(test)]
mod tests {
    use super::*;
    use harness_core::shared_datasets_dir;
    use std::io::Write;

    #[test]
    fn real_counts_and_known_records() {
        let set = load_zh_en_sample(&shared_datasets_dir().join("bucc2018")).unwrap();
        assert_eq!(set.source.len(), 8_624);
        assert_eq!(set.target.len(), 13_589);
        assert_eq!(set.gold.len(), 257);
        assert_eq!(set.source[0].id, "zh-000000001");
        assert_eq!(
            set.source[0].text,
            "辽宁省，简称辽，舊稱奉天省，中國的一个省，省會位于沈阳市。"
        );
        assert_eq!(set.source[8_623].id, "zh-000008624");
        assert_eq!(
            set.target[13_588],
            IdSentence {
                id: "en-000013589".into(),
                text: "The collection includes 17 linear feet of materials and is known as the Holland Collection.".into()
            }
        );
        assert_eq!(
            set.gold[0],
            ("zh-000000057".to_string(), "en-000008530".to_string())
        );
        assert_eq!(
            set.gold[256],
            ("zh-000008614".to_string(), "en-000002701".to_string())
        );
        let zh: HashSet<&String> = set.gold.iter().map(|g| &g.0).collect();
        let en: HashSet<&String> = set.gold.iter().map(|g| &g.1).collect();
        assert_eq!((zh.len(), en.len()), (257, 257));
    }

    fn write_set(dir: &Path, zh: &[u8], en: &str, gold: &str) {
        let mut enc = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
        enc.write_all(zh).unwrap();
        std::fs::write(dir.join("zh-en.sample.zh.gz"), enc.finish().unwrap()).unwrap();
        std::fs::write(dir.join("zh-en.sample.en"), en).unwrap();
        std::fs::write(dir.join("zh-en.sample.gold"), gold).unwrap();
    }

    #[test]
    fn first_tab_split_gold_checks_and_errors() {
        let dir = tempfile::tempdir().unwrap();
        write_set(
            dir.path(),
            "\u{feff}zh-1\t一\tzwei \"x\"\r\nzh-2\t二\r\n".as_bytes(),
            "en-1\tone\nen-2\ttwo",
            "zh-2\ten-1\n",
        );
        let s = load_zh_en_sample(dir.path()).unwrap();
        assert_eq!(s.source[0].text, "一\tzwei \"x\"");
        assert_eq!(s.target[1].text, "two");
        assert_eq!(s.gold, vec![("zh-2".into(), "en-1".into())]);

        write_set(
            dir.path(),
            b"zh-1\ta\n",
            "en-1\tone\nbroken\n",
            "zh-1\ten-1\n",
        );
        let msg = load_zh_en_sample(dir.path()).unwrap_err().to_string();
        assert!(msg.contains("zh-en.sample.en:2"), "{msg}");

        write_set(
            dir.path(),
            b"zh-1\ta\n",
            "en-1\tone\n",
            "zh-1\ten-1\nzh-1\ten-9\n",
        );
        let msg = load_zh_en_sample(dir.path()).unwrap_err().to_string();
        assert!(
            msg.contains("zh-en.sample.gold:2") && msg.contains("en-9"),
            "{msg}"
        );
    }

    #[test]
    fn truncated_gz_and_missing_file() {
        let dir = tempfile::tempdir().unwrap();
        let mut enc = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
        enc.write_all("zh-x\tsentence\n".repeat(300).as_bytes())
            .unwrap();
        let g = enc.finish().unwrap();
        std::fs::write(dir.path().join("zh-en.sample.zh.gz"), &g[..g.len() / 2]).unwrap();
        let msg = load_zh_en_sample(dir.path()).unwrap_err().to_string();
        assert!(msg.contains("zh-en.sample.zh.gz"), "{msg}");
        std::fs::remove_file(dir.path().join("zh-en.sample.zh.gz")).unwrap();
        let msg = load_zh_en_sample(dir.path()).unwrap_err().to_string();
        assert!(msg.contains("zh-en.sample.zh"), "{msg}");
    }
}
