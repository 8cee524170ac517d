//! SemEval-2017 Task 1 (STS 2017) tracks: `sts17/STS2017.eval.v1.1/STS.input.trackN.xx-yy.txt`
//! with gold scores in `sts17/STS2017.gs/STS.gs.trackN.xx-yy.txt`.
//!
//! Reference: none in SentEval (it stops at STS16); read the way SentEval reads STS12–16
//! (`senteval/sts.py`, `STSEval.loadFile`: input split on TAB, gold aligned by line, empty
//! gold skipped) and the way common STS17 loaders paste the gold file onto the input. The
//! quirks of SOURCE.txt: the column order differs between tracks (see [`Track::lang1`] and
//! [`Track::lang2`]; ar-en, tr-en and track 4b es-en are English-first, track 4a es-en is
//! Spanish-first), track 4b's gold scores are integers, and the track 6 tr-en input has 500
//! lines for 250 gold scores, which align with its FIRST 250 lines (the rest are ignored).
//! Every other track must have as many input lines as gold lines.

use crate::records::ScoredPair;
use crate::text::{self, Encoding};
use crate::DataError;
use std::path::Path;

/// One STS 2017 track: its number, its language pair as the file name spells it, and the
/// language of each column as the file really has it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Track {
    /// Track number as in the file name: "1", "2", "3", "4a", "4b", "5", "6".
    pub id: &'static str,
    /// Language pair as in the file name, e.g. "es-en".
    pub pair: &'static str,
    /// Language of column 1 (`sentence1`).
    pub lang1: &'static str,
    /// Language of column 2 (`sentence2`).
    pub lang2: &'static str,
    /// True when the input file may hold more lines than the gold file (track 6 only).
    pub input_longer: bool,
}

impl Track {
    /// The name used in the file names, e.g. `track4a.es-en`.
    pub fn name(&self) -> String {
        format!("track{}.{}", self.id, self.pair)
    }
}

const fn track(id: &'static str, pair: &'static str, l1: &'static str, l2: &'static str) -> Track {
    Track {
        id,
        pair,
        lang1: l1,
        lang2: l2,
        input_longer: false,
    }
}

/// The seven tracks of the official release, with their column order.
pub const TRACKS: [Track; 7] = [
    track("1", "ar-ar", "ar", "ar"),
    track("2", "ar-en", "en", "ar"),
    track("3", "es-es", "es", "es"),
    track("4a", "es-en", "es", "en"),
    track("4b", "es-en", "en", "es"),
    track("5", "en-en", "en", "en"),
    Track {
        id: "6",
        pair: "tr-en",
        lang1: "en",
        lang2: "tr",
        input_longer: true,
    },
];

/// Finds a track by id (`"4a"`), or by name (`"track4a"`, `"track4a.es-en"`).
pub fn find(name: &str) -> Option<&'static Track> {
    let id = name.strip_prefix("track").unwrap_or(name);
    let id = id.split('.').next().unwrap_or(id);
    TRACKS.iter().find(|t| t.id == id)
}

/// Loads one track's scored pairs, columns in the file's order ([`Track::lang1`] first).
pub fn load(dir: &Path, track: &Track) -> Result<Vec<ScoredPair>, DataError> {
    let name = track.name();
    let input = text::resolve(
        &dir.join("STS2017.eval.v1.1"),
        &format!("STS.input.{name}.txt"),
    )?;
    let gold = text::resolve(&dir.join("STS2017.gs"), &format!("STS.gs.{name}.txt"))?;
    let in_lines = text::read_lines(&input, Encoding::Utf8)?;
    let gs_lines = text::read_lines(&gold, Encoding::Utf8)?;
    if track.input_longer && in_lines.len() > gs_lines.len() {
        // Track 6: gold covers the first lines only.
    } else {
        super::sts12_16::check_aligned(&input, in_lines.len(), &gold, gs_lines.len())?;
    }
    let mut pairs = Vec::with_capacity(gs_lines.len());
    for (i, (line, gs)) in in_lines.iter().zip(&gs_lines).enumerate() {
        let f = text::tab_fields(&input, i + 1, line, 2, 2)?;
        if gs.trim().is_empty() {
            continue;
        }
        let score = text::parse_f64(&gold, i + 1, gs, "gold score")?;
        pairs.push(ScoredPair {
            sentence1: f[0].to_string(),
            sentence2: f[1].to_string(),
            score,
        });
    }
    Ok(pairs)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::loaders::test_support::*;

    fn has_arabic(s: &str) -> bool {
        s.chars().any(|c| ('\u{0600}'..='\u{06FF}').contains(&c))
    }

    #[test]
    fn real_counts_column_order_and_known_records() {
        let dir = real("sts17");
        let mut all = Vec::new();
        for t in &TRACKS {
            let pairs = load(&dir, t).unwrap();
            assert_eq!(pairs.len(), 250, "{}", t.name());
            assert!(pairs.iter().all(|p| (0.0..=5.0).contains(&p.score)));
            all.push(pairs);
        }
        // Column order: Arabic only in column 2 of ar-en.
        assert!(all[1]
            .iter()
            .all(|p| !has_arabic(&p.sentence1) && has_arabic(&p.sentence2)));
        assert!(all[0]
            .iter()
            .all(|p| has_arabic(&p.sentence1) && has_arabic(&p.sentence2)));
        // Track 4b gold scores are integers 2..5 (MT quality estimation).
        assert!(all[4]
            .iter()
            .all(|p| p.score.fract() == 0.0 && (2.0..=5.0).contains(&p.score)));
        let es_en = &all[3][0];
        assert_eq!(
            es_en.sentence1,
            "La gente muestra su afecto el uno por el otro."
        );
        assert_eq!(es_en.sentence2, "A women giving something to other lady.");
        assert_eq!(es_en.score, 1.4);
        let en_es = &all[4][0];
        assert!(en_es
            .sentence1
            .starts_with("Counterfeiters from China and Indonesia"));
        assert!(en_es
            .sentence2
            .starts_with("Los falsificadores de China e Indonesia"));
        assert_eq!(en_es.score, 5.0);
        assert_eq!(
            all[2][249].sentence1,
            "La gente está caminando en una acera de la ciudad."
        );
        assert_eq!(all[2][249].score, 4.6);
        assert_eq!(
            all[5][0].sentence2,
            "A person is playing basketball on a team."
        );
        assert_eq!(all[5][0].score, 2.4);
        // Track 6: gold aligns with the first 250 of 500 input lines (SOURCE.txt's examples).
        let tr = &all[6];
        assert_eq!(tr[2].sentence1, "People are having a meeting.");
        assert_eq!(tr[2].score, 5.0);
        assert_eq!(tr[5].sentence1, "The child is playing in the ocean.");
        assert_eq!(tr[5].score, 5.0);
        assert_eq!(tr[249].sentence1, "A girl is inspecting a machine.");
        assert_eq!(tr[249].sentence2, "Bir kadın bir makineyle çalışıyor.");
        assert_eq!(tr[249].score, 3.4);
    }

    #[test]
    fn find_accepts_id_and_names() {
        assert_eq!(find("4a").unwrap().lang1, "es");
        assert_eq!(find("track4b").unwrap().lang1, "en");
        assert_eq!(find("track6.tr-en").unwrap().pair, "tr-en");
        assert!(find("7").is_none());
    }

    fn fixture(tmp: &Path, name: &str, input: &str, gold: &str) {
        write(
            tmp,
            &format!("STS2017.eval.v1.1/STS.input.{name}.txt"),
            input,
        );
        write(tmp, &format!("STS2017.gs/STS.gs.{name}.txt"), gold);
    }

    #[test]
    fn longer_input_only_for_track6_and_gz() {
        let tmp = tempfile::tempdir().unwrap();
        fixture(
            tmp.path(),
            "track6.tr-en",
            "a\tb\nc\td\ne\tf\n",
            "1.000000\n2.000000\n",
        );
        let p = load(tmp.path(), find("6").unwrap()).unwrap();
        assert_eq!(p.len(), 2);
        assert_eq!((p[1].sentence1.as_str(), p[1].score), ("c", 2.0));
        fixture(tmp.path(), "track5.en-en", "a\tb\nc\td\ne\tf\n", "1\n2\n");
        assert_mentions(
            load(tmp.path(), find("5").unwrap()),
            &["STS.gs.track5.en-en.txt:3"],
        );
        // A gold file shorter than track 6's input is fine, a longer one is not.
        fixture(tmp.path(), "track6.tr-en", "a\tb\n", "1\n2\n");
        assert_mentions(
            load(tmp.path(), find("6").unwrap()),
            &["STS.input.track6.tr-en.txt:2"],
        );
        std::fs::remove_file(tmp.path().join("STS2017.gs/STS.gs.track5.en-en.txt")).unwrap();
        write_gz(
            tmp.path(),
            "STS2017.gs/STS.gs.track5.en-en.txt",
            "1\n2\n3\n",
        );
        assert_eq!(load(tmp.path(), find("5").unwrap()).unwrap().len(), 3);
    }

    #[test]
    fn errors_name_file_and_line() {
        let tmp = tempfile::tempdir().unwrap();
        assert_mentions(
            load(tmp.path(), &TRACKS[0]),
            &["STS.input.track1.ar-ar.txt", "not found"],
        );
        write_truncated_gz(
            tmp.path(),
            "STS2017.eval.v1.1/STS.input.track1.ar-ar.txt",
            &"a\tb\n".repeat(300),
        );
        write(
            tmp.path(),
            "STS2017.gs/STS.gs.track1.ar-ar.txt",
            &"1\n".repeat(300),
        );
        assert_mentions(
            load(tmp.path(), &TRACKS[0]),
            &["STS.input.track1.ar-ar.txt.gz", "truncated"],
        );
        fixture(tmp.path(), "track3.es-es", "a\tb\nc\n", "1\n2\n");
        assert_mentions(
            load(tmp.path(), &TRACKS[2]),
            &["STS.input.track3.es-es.txt:2", "fields"],
        );
        fixture(tmp.path(), "track3.es-es", "a\tb\nc\td\n", "1\nfive\n");
        assert_mentions(
            load(tmp.path(), &TRACKS[2]),
            &["STS.gs.track3.es-es.txt:2", "five"],
        );
    }
}
