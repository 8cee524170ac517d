//! LASER Tatoeba similarity-search test set v1 (`tatoeba-laser-v1`): for each of 112
//! languages, `tatoeba.XXX-eng.XXX` and `tatoeba.XXX-eng.eng`, one sentence per line, line
//! `i` of one file the translation of line `i` of the other.
//!
//! Reference: LASER `data/tatoeba/v1` and its evaluation, `source/similarity_search.py`
//! (later `xsim`): the nearest neighbour of line `i` must be line `i`, in both directions
//! (xxx→eng and eng→xxx). Evaluation is by line index, so lines are kept exactly as in the
//! file (no stripping, no deduplication); the English side differs per language (this is
//! not a multi-way set).

use super::multiway::{list_dir, read_parallel};
use crate::records::ParallelCorpus;
use crate::text;
use crate::DataError;
use std::path::Path;

/// Language codes (`afr`, `amh`, ...) with a `tatoeba.XXX-eng.XXX` file (plain or `.gz`) in
/// `dir`, sorted.
pub fn languages(dir: &Path) -> Result<Vec<String>, DataError> {
    let mut langs: Vec<String> = list_dir(dir)?
        .into_iter()
        .filter_map(|name| {
            let name = name.strip_suffix(".gz").unwrap_or(&name).to_string();
            let rest = name.strip_prefix("tatoeba.")?;
            let (lang, ext) = rest.split_once("-eng.")?;
            (lang == ext && !lang.is_empty()).then(|| lang.to_string())
        })
        .collect();
    langs.sort();
    langs.dedup();
    Ok(langs)
}

/// Loads one language: `source_lang` = `lang`, `target_lang` = `eng`, pairs in line order.
/// The two files must have the same number of lines; otherwise the error names both.
pub fn load_language(dir: &Path, lang: &str) -> Result<ParallelCorpus, DataError> {
    let xxx = text::resolve(dir, &format!("tatoeba.{lang}-eng.{lang}"))?;
    let eng = text::resolve(dir, &format!("tatoeba.{lang}-eng.eng"))?;
    read_parallel(lang, xxx, eng)
}

/// Loads every language in `dir`, in [`languages`] order.
pub fn load_all(dir: &Path) -> Result<Vec<ParallelCorpus>, DataError> {
    languages(dir)?
        .iter()
        .map(|l| load_language(dir, l))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::records::Bitext;
    use harness_core::shared_datasets_dir;
    use std::io::Write;

    /// `lang pairs` for all 112 languages, from SOURCE.txt's per-language table.
    const COUNTS: &str =
        "afr 1000 amh 168 ang 134 ara 1000 arq 911 arz 477 ast 127 awa 231 aze 1000 \
        bel 1000 ben 1000 ber 1000 bos 354 bre 1000 bul 1000 cat 1000 cbk 1000 ceb 600 ces 1000 \
        cha 137 cmn 1000 cor 1000 csb 253 cym 575 dan 1000 deu 1000 dsb 479 dtp 1000 ell 1000 \
        epo 1000 est 1000 eus 1000 fao 262 fin 1000 fra 1000 fry 173 gla 829 gle 1000 glg 1000 \
        gsw 117 heb 1000 hin 1000 hrv 1000 hsb 483 hun 1000 hye 742 ido 1000 ile 1000 ina 1000 \
        ind 1000 isl 1000 ita 1000 jav 205 jpn 1000 kab 1000 kat 746 kaz 575 khm 722 kor 1000 \
        kur 410 kzj 1000 lat 1000 lfn 1000 lit 1000 lvs 1000 mal 687 mar 1000 max 284 mhr 1000 \
        mkd 1000 mon 440 nds 1000 nld 1000 nno 1000 nob 1000 nov 257 oci 1000 orv 835 pam 1000 \
        pes 1000 pms 525 pol 1000 por 1000 ron 1000 rus 1000 slk 1000 slv 823 spa 1000 sqi 1000 \
        srp 1000 swe 1000 swg 112 swh 390 tam 307 tat 1000 tel 234 tgl 1000 tha 548 tuk 203 \
        tur 1000 tzl 104 uig 1000 ukr 1000 urd 1000 uzb 428 vie 1000 war 1000 wuu 1000 xho 142 \
        yid 848 yue 1000 zsm 1000";

    #[test]
    fn real_counts_for_all_112_languages_and_known_records() {
        let dir = shared_datasets_dir().join("tatoeba-laser-v1");
        let expected: Vec<(String, usize)> = COUNTS
            .split_whitespace()
            .collect::<Vec<_>>()
            .chunks(2)
            .map(|c| (c[0].to_string(), c[1].parse().unwrap()))
            .collect();
        assert_eq!(expected.len(), 112);
        let langs = languages(&dir).unwrap();
        assert_eq!(
            langs,
            expected.iter().map(|(l, _)| l.clone()).collect::<Vec<_>>()
        );
        let all = load_all(&dir).unwrap();
        for (corpus, (lang, n)) in all.iter().zip(&expected) {
            assert_eq!(&corpus.source_lang, lang);
            assert_eq!(corpus.target_lang, "eng");
            assert_eq!(corpus.pairs.len(), *n, "{lang}");
        }
        assert_eq!(all.iter().map(|c| c.pairs.len()).sum::<usize>(), 88_877);
        assert_eq!(all.iter().filter(|c| c.pairs.len() == 1000).count(), 72);

        let deu = &all[langs.iter().position(|l| l == "deu").unwrap()];
        assert_eq!(
            deu.pairs[0],
            Bitext {
                source: "Maria sagte, sie wisse nicht, wo Tom sei.".into(),
                target: "Mary said she didn't know where Tom was.".into(),
            }
        );
        assert_eq!(
            deu.pairs[999],
            Bitext {
                source: "Kann ich mit Kreditkarte bezahlen?".into(),
                target: "Can I pay by credit card?".into(),
            }
        );
    }

    fn gz(bytes: &[u8]) -> Vec<u8> {
        let mut enc = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
        enc.write_all(bytes).unwrap();
        enc.finish().unwrap()
    }

    #[test]
    fn plain_and_gz_load_with_bom_and_crlf() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(
            dir.path().join("tatoeba.abc-eng.abc"),
            "\u{feff}a1\r\na2\r\n",
        )
        .unwrap();
        std::fs::write(dir.path().join("tatoeba.abc-eng.eng.gz"), gz(b"e1\ne2")).unwrap();
        assert_eq!(languages(dir.path()).unwrap(), vec!["abc"]);
        let c = load_language(dir.path(), "abc").unwrap();
        assert_eq!(c.pairs[0].source, "a1");
        assert_eq!(c.pairs[1].target, "e2");
    }

    #[test]
    fn mismatched_counts_name_both_files() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("tatoeba.abc-eng.abc"), "a1\na2\n").unwrap();
        std::fs::write(dir.path().join("tatoeba.abc-eng.eng"), "e1\n").unwrap();
        let msg = load_language(dir.path(), "abc").unwrap_err().to_string();
        assert!(
            msg.contains("tatoeba.abc-eng.abc") && msg.contains("tatoeba.abc-eng.eng"),
            "{msg}"
        );
    }

    #[test]
    fn truncated_gz_missing_file_and_bad_line_are_errors_naming_the_file() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("tatoeba.abc-eng.abc"), "a1\n").unwrap();
        let msg = load_language(dir.path(), "abc").unwrap_err().to_string();
        assert!(msg.contains("tatoeba.abc-eng.eng"), "{msg}");

        let g = gz("sentence\n".repeat(300).as_bytes());
        std::fs::write(dir.path().join("tatoeba.abc-eng.eng.gz"), &g[..g.len() / 2]).unwrap();
        let msg = load_language(dir.path(), "abc").unwrap_err().to_string();
        assert!(msg.contains("tatoeba.abc-eng.eng.gz"), "{msg}");

        std::fs::remove_file(dir.path().join("tatoeba.abc-eng.eng.gz")).unwrap();
        std::fs::write(dir.path().join("tatoeba.abc-eng.eng"), b"ok\nbad\xff\n").unwrap();
        let msg = load_language(dir.path(), "abc").unwrap_err().to_string();
        assert!(msg.contains("tatoeba.abc-eng.eng:2"), "{msg}");
    }
}
