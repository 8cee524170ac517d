//! `wmt-news-parallel`: WMT news test sets 2008–2021 (without newstest2012, an evaluation
//! set) and Multi30K test sets, X↔English, one folder per pair (`deu-eng/`), one
//! line-aligned file per set and language (`<set>.<lang>.gz`, e.g. `newstest2019.deu.gz`).
//!
//! News files are in document order and lines are kept exactly (some have surrounding
//! spaces): a set's pairs are in line order, and [`load_language`] concatenates the sets in
//! sorted set-name order (the Multi30K sets, then news-test2008, newssyscomb2009,
//! newstest2009…2021), so neighbouring pairs stay neighbours within a set. The news sets of
//! 2008–2011 and 2013 are multi-way across cs/de/en/es/fr, so one English sentence can occur
//! in several language pairs; nothing is deduplicated here.

use super::multiway::{list_dir, read_parallel};
use crate::records::ParallelCorpus;
use crate::text;
use crate::DataError;
use std::path::Path;

/// Languages X with a folder `X-eng`, sorted.
pub fn languages(dir: &Path) -> Result<Vec<String>, DataError> {
    Ok(list_dir(dir)?
        .into_iter()
        .filter_map(|n| n.strip_suffix("-eng").map(str::to_string))
        .filter(|l| dir.join(format!("{l}-eng")).is_dir())
        .collect())
}

/// The set names of pair `X-eng` (files `<set>.X[.gz]`), sorted.
pub fn sets(dir: &Path, lang: &str) -> Result<Vec<String>, DataError> {
    let suffix = format!(".{lang}");
    let mut sets: Vec<String> = list_dir(&dir.join(format!("{lang}-eng")))?
        .into_iter()
        .filter_map(|n| {
            let n = n.strip_suffix(".gz").unwrap_or(&n);
            n.strip_suffix(&suffix).map(str::to_string)
        })
        .collect();
    sets.sort();
    sets.dedup();
    Ok(sets)
}

/// Loads one set: `source_lang` = X, `target_lang` = `eng`, pairs in line (document) order.
/// The two files must have the same number of lines; otherwise the error names both.
pub fn load_set(dir: &Path, lang: &str, set: &str) -> Result<ParallelCorpus, DataError> {
    let pair_dir = dir.join(format!("{lang}-eng"));
    let xxx = text::resolve(&pair_dir, &format!("{set}.{lang}"))?;
    let eng = text::resolve(&pair_dir, &format!("{set}.eng"))?;
    read_parallel(lang, xxx, eng)
}

/// Loads every set of pair `X-eng`, concatenated in [`sets`] order.
pub fn load_language(dir: &Path, lang: &str) -> Result<ParallelCorpus, DataError> {
    let mut out = ParallelCorpus {
        source_lang: lang.to_string(),
        target_lang: "eng".to_string(),
        pairs: Vec::new(),
    };
    let names = sets(dir, lang)?;
    if names.is_empty() {
        return Err(DataError::Missing {
            path: dir.join(format!("{lang}-eng")),
            hint: format!(
                "no <set>.{lang}(.gz) file; run `harness datasets fetch wmt-news-parallel`"
            ),
        });
    }
    for set in names {
        out.pairs.extend(load_set(dir, lang, &set)?.pairs);
    }
    Ok(out)
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
    use crate::records::Bitext;
    use harness_core::shared_datasets_dir;
    use std::io::Write;

    /// SOURCE.txt's count table: `pair set pairs`.
    const TABLE: &str = "\
deu multi30k_task2_test_2016 5000
deu multi30k_test_2016_flickr 1000
deu multi30k_test_2017_flickr 1000
deu multi30k_test_2017_mscoco 461
deu multi30k_test_2018_flickr 1071
deu news-test2008 2051
deu newssyscomb2009 502
deu newstest2009 2525
deu newstest2010 2489
deu newstest2011 3003
deu newstest2013 3000
deu newstest2014 3003
deu newstest2015 2169
deu newstest2016 2999
deu newstest2017 3004
deu newstest2018 2998
deu newstest2019 2000
deu newstest2020 785
fra multi30k_test_2016_flickr 1000
fra multi30k_test_2017_flickr 1000
fra multi30k_test_2017_mscoco 461
fra multi30k_test_2018_flickr 1071
fra news-test2008 2051
fra newssyscomb2009 502
fra newstest2009 2525
fra newstest2010 2489
fra newstest2011 3003
fra newstest2013 3000
fra newstest2014 3003
spa news-test2008 2051
spa newssyscomb2009 502
spa newstest2009 2525
spa newstest2010 2489
spa newstest2011 3003
spa newstest2013 3000
rus newstest2013 3000
rus newstest2014 3003
rus newstest2015 2818
rus newstest2016 2998
rus newstest2017 3001
rus newstest2018 3000
rus newstest2019 2000
rus newstest2020 991
zho newstest2017 2001
zho newstest2018 3981
zho newstest2019 2000
zho newstest2020 2000
zho newstest2021 2791
ces multi30k_test_2016_flickr 1000
ces multi30k_test_2018_flickr 1071
ces news-test2008 2051
ces newssyscomb2009 502
ces newstest2009 2525
ces newstest2010 2489
ces newstest2011 3003
ces newstest2013 3000
ces newstest2014 3003
ces newstest2015 2656
ces newstest2016 2999
ces newstest2017 3005
ces newstest2018 2983
tur newstest2016 3000
tur newstest2017 3007
tur newstest2018 3000
jpn newstest2020 993
jpn newstest2021 1005
ita newssyscomb2009 502
ita newstest2009 2525
fin newstest2015 1370
fin newstest2016 3000
fin newstest2017 3002
fin newstest2018 3000
fin newstest2019 1996
est newstest2018 2000
lav newstest2017 2001
lit newstest2019 1000
ron newstest2016 1999
hin newstest2014 2507
kaz newstest2019 1000
guj newstest2019 1016";

    const TOTALS: &str = "ces 30287 deu 39060 est 2000 fin 12368 fra 20105 guj 1016 hin 2507 \
        ita 3027 jpn 1998 kaz 1000 lav 2001 lit 1000 ron 1999 rus 20811 spa 13570 tur 9007 zho 12773";

    #[test]
    fn real_counts_for_every_set_and_pair_and_known_records() {
        let dir = shared_datasets_dir().join("wmt-news-parallel");
        let mut expected_sets: Vec<(String, String, usize)> = TABLE
            .lines()
            .map(|l| {
                let f: Vec<&str> = l.split_whitespace().collect();
                (f[0].to_string(), f[1].to_string(), f[2].parse().unwrap())
            })
            .collect();
        expected_sets.sort();
        let mut got_sets = Vec::new();
        for lang in languages(&dir).unwrap() {
            for set in sets(&dir, &lang).unwrap() {
                let n = load_set(&dir, &lang, &set).unwrap().pairs.len();
                got_sets.push((lang.clone(), set, n));
            }
        }
        assert_eq!(got_sets, expected_sets);

        let totals: Vec<(String, usize)> = TOTALS
            .split_whitespace()
            .collect::<Vec<_>>()
            .chunks(2)
            .map(|c| (c[0].to_string(), c[1].parse().unwrap()))
            .collect();
        let all = load_all(&dir).unwrap();
        let got: Vec<(String, usize)> = all
            .iter()
            .map(|c| (c.source_lang.clone(), c.pairs.len()))
            .collect();
        assert_eq!(got, totals);

        let deu = load_set(&dir, "deu", "newstest2019").unwrap();
        assert_eq!(
            deu.pairs[0],
            Bitext {
                source: "Schöne Münchnerin 2018: Schöne Münchnerin 2018 in Hvar: Neun Dates".into(),
                target: "The Beauty of Munich 2018: the Beauty of Munich 2018 in Hvar: Nine dates"
                    .into(),
            }
        );
        let deu_all = &all.iter().find(|c| c.source_lang == "deu").unwrap().pairs;
        // Last set in order is newstest2020: its last line ends the concatenation.
        assert!(deu_all[39_059]
            .target
            .starts_with("At the start of that week, the WADA had already raised"));
        assert!(deu_all[39_059]
            .source
            .starts_with("Zu Beginn dieser Woche hatte bereits die Wada"));
    }

    fn gz(bytes: &[u8]) -> Vec<u8> {
        let mut enc = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
        enc.write_all(bytes).unwrap();
        enc.finish().unwrap()
    }

    #[test]
    fn plain_gz_mismatch_truncation_and_missing() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("abc-eng");
        std::fs::create_dir(&p).unwrap();
        std::fs::write(p.join("s1.abc.gz"), gz(b" x1 \nx2\n")).unwrap();
        std::fs::write(p.join("s1.eng"), "e1\r\ne2\r\n").unwrap();
        std::fs::write(p.join("s0.abc"), "y1\n").unwrap();
        std::fs::write(p.join("s0.eng"), "f1\n").unwrap();
        let c = load_language(dir.path(), "abc").unwrap();
        let src: Vec<&str> = c.pairs.iter().map(|b| b.source.as_str()).collect();
        assert_eq!(src, vec!["y1", " x1 ", "x2"]);

        std::fs::write(p.join("s0.eng"), "f1\nf2\n").unwrap();
        let msg = load_language(dir.path(), "abc").unwrap_err().to_string();
        assert!(msg.contains("s0.abc") && msg.contains("s0.eng"), "{msg}");

        std::fs::remove_file(p.join("s0.eng")).unwrap();
        let msg = load_language(dir.path(), "abc").unwrap_err().to_string();
        assert!(msg.contains("s0.eng"), "{msg}");

        std::fs::remove_file(p.join("s0.abc")).unwrap();
        let g = gz("word\n".repeat(400).as_bytes());
        std::fs::write(p.join("s1.abc.gz"), &g[..g.len() / 2]).unwrap();
        let msg = load_language(dir.path(), "abc").unwrap_err().to_string();
        assert!(
            msg.contains("s1.abc.gz") && msg.contains("truncated"),
            "{msg}"
        );
    }
}
