//! `monolingual-sentences`: Project Gutenberg books, one folder per language
//! (`en/pg84.txt`, `fr/pg14155.txt.gz`, ...), hard-wrapped running text, paragraphs separated
//! by blank lines, not sentence-split. Used for quick-thought (previous/next sentence).
//!
//! Loading, as SOURCE.txt prescribes:
//! 1. bytes → lines: BOM dropped, CRLF/LF normalised, no final newline tolerated
//!    ([`crate::text`]);
//! 2. boilerplate cut ([`strip_gutenberg`]): the body starts after the first line that
//!    begins (after leading whitespace) with `*** START` and ends before the first later
//!    line that begins (after leading whitespace) with `*** END`; either marker may be absent
//!    (the header was stripped upstream in some files). A `*** START` without a matching
//!    `*** END` is an error at file:line (a truncated file);
//! 3. paragraphs ([`paragraphs`]): maximal runs of non-blank lines, each line trimmed and the
//!    lines joined by one space, in document order. Text is otherwise verbatim (`_italics_`
//!    underscores, quotes, old orthography kept);
//! 4. sentences ([`split_sentences`]): the deterministic rule documented there.

use super::multiway::list_dir;
use crate::records::Document;
use crate::text::{self, Encoding};
use crate::DataError;
use std::path::Path;

/// `(language, file name without .gz)` for every `.txt` / `.txt.gz` file under the language
/// folders of `dir`, sorted by language then name.
pub fn books(dir: &Path) -> Result<Vec<(String, String)>, DataError> {
    let mut out = Vec::new();
    for lang in list_dir(dir)? {
        let sub = dir.join(&lang);
        if !sub.is_dir() {
            continue;
        }
        for name in list_dir(&sub)? {
            let name = name.strip_suffix(".gz").unwrap_or(&name).to_string();
            if name.ends_with(".txt") && !out.contains(&(lang.clone(), name.clone())) {
                out.push((lang.clone(), name));
            }
        }
    }
    out.sort();
    Ok(out)
}

/// Loads `dir/lang/name` (or `name.gz`) as a [`Document`] of paragraphs, boilerplate cut.
pub fn load_book(dir: &Path, lang: &str, name: &str) -> Result<Document, DataError> {
    let path = text::resolve(&dir.join(lang), name)?;
    let lines = text::read_lines(&path, Encoding::Utf8)?;
    let body = strip_gutenberg(&path, &lines)?;
    Ok(Document {
        lang: lang.to_string(),
        name: name.to_string(),
        paragraphs: paragraphs(body),
    })
}

/// Loads every book of [`books`].
pub fn load_all(dir: &Path) -> Result<Vec<Document>, DataError> {
    books(dir)?
        .iter()
        .map(|(l, n)| load_book(dir, l, n))
        .collect()
}

/// The body lines between the Gutenberg `*** START` and `*** END` markers (see the module
/// comment); `path` only names the file in errors.
pub fn strip_gutenberg<'a>(path: &Path, lines: &'a [String]) -> Result<&'a [String], DataError> {
    let is = |l: &String, marker: &str| l.trim_start().starts_with(marker);
    let start_line = lines.iter().position(|l| is(l, "*** START"));
    let from = start_line.map_or(0, |i| i + 1);
    match lines[from..].iter().position(|l| is(l, "*** END")) {
        Some(j) => Ok(&lines[from..from + j]),
        None => match start_line {
            Some(i) => Err(DataError::format(
                path,
                Some(i + 1),
                "Project Gutenberg `*** START` marker without a later `*** END` marker",
                "the file looks truncated; re-fetch it with `harness datasets fetch --force`",
            )),
            None => Ok(lines),
        },
    }
}

/// Groups lines into paragraphs: runs of non-blank lines, each trimmed, joined by a space.
pub fn paragraphs(lines: &[String]) -> Vec<String> {
    let mut out = Vec::new();
    let mut cur: Vec<&str> = Vec::new();
    for line in lines {
        let t = line.trim();
        if t.is_empty() {
            if !cur.is_empty() {
                out.push(cur.join(" "));
                cur.clear();
            }
        } else {
            cur.push(t);
        }
    }
    if !cur.is_empty() {
        out.push(cur.join(" "));
    }
    out
}

/// Closing quotes and brackets that may follow sentence-final punctuation.
const CLOSERS: &[char] = &['"', '\'', '”', '’', '»', '«', ')', ']', '_', '“'];
/// Opening quotes, brackets and dashes that may precede a sentence's first letter.
const OPENERS: &[char] = &[
    '"', '\'', '“', '‘', '„', '«', '»', '(', '[', '¿', '¡', '—', '–', '-', '_',
];
/// Tokens ending in `.` that do not end a sentence (compared without the dot,
/// case-sensitively), for the four languages of the folder.
const ABBREVIATIONS: &[&str] = &[
    "Mr", "Mrs", "Ms", "Dr", "St", "Jr", "Sr", "Prof", "Mme", "Mlle", "MM", "Mgr", "Hr", "Fr",
    "Frl", "Nr", "Sra", "Srta", "Dña", "Vd", "Vds", "Ud", "Uds", "vs", "etc", "z.B", "d.h",
    "u.s.w", "usw", "bzw", "vgl", "S", "p", "pp", "No", "Co",
];

/// Splits one paragraph into sentences with a simple deterministic rule.
///
/// The paragraph is cut into whitespace-separated tokens. A sentence ends after token `t`
/// when (a) `t`, with trailing closing quotes/brackets (`" ' ” ’ » « ) ] _`) removed, ends
/// in `.`, `!`, `?` or `…`; (b) the next token, with leading opening quotes, brackets,
/// inverted marks and dashes removed, is non-empty and does not start with a lowercase
/// letter; and (c) for a final `.`, `t` (without leading openers and without the dot) is
/// neither a single letter (initials: `J. Austen`) nor a listed abbreviation (`Mr.`, `Mme.`,
/// `Sra.`, `z.B.`...). The end of the paragraph always ends a sentence. Sentences are the
/// tokens re-joined by one space. The rule errs towards fewer, longer sentences (dialogue
/// such as `"Yes!" said he.` stays one sentence), which is harmless for next-sentence
/// objectives; it is not a linguistic segmenter.
pub fn split_sentences(paragraph: &str) -> Vec<String> {
    let tokens: Vec<&str> = paragraph.split_whitespace().collect();
    let mut out = Vec::new();
    let mut start = 0;
    for i in 0..tokens.len() {
        let last = i + 1 == tokens.len();
        if last || ends_sentence(tokens[i], tokens[i + 1]) {
            out.push(tokens[start..=i].join(" "));
            start = i + 1;
        }
    }
    out
}

fn ends_sentence(token: &str, next: &str) -> bool {
    let core = token.trim_end_matches(CLOSERS);
    let Some(end) = core.chars().last() else {
        return false;
    };
    if !matches!(end, '.' | '!' | '?' | '…') {
        return false;
    }
    let next = next.trim_start_matches(OPENERS);
    match next.chars().next() {
        None => return false,
        Some(c) if c.is_lowercase() => return false,
        Some(_) => {}
    }
    if end == '.' && !core.ends_with("..") {
        let word = core.trim_start_matches(OPENERS).trim_end_matches('.');
        if word.chars().count() == 1 || ABBREVIATIONS.contains(&word) {
            return false;
        }
    }
    true
}

/// Every sentence of `doc`, in document order ([`split_sentences`] per paragraph).
pub fn sentences(doc: &Document) -> Vec<String> {
    doc.paragraphs
        .iter()
        .flat_map(|p| split_sentences(p))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use harness_core::shared_datasets_dir;
    use std::io::Write;

    #[test]
    fn real_books_paragraph_and_word_counts() {
        let dir = shared_datasets_dir().join("monolingual-sentences");
        // (lang, file, paragraphs, words). SOURCE.txt gives 848 / 77,950 for en/pg84 and
        // 3,096 / 115,511 for fr/pg14155: those two files' `*** END` marker line is indented,
        // and SOURCE's count (checked by re-computation) missed it and included the licence
        // footer. Counting up to the marker, as SOURCE.txt's own rule says, gives the
        // numbers below; the other five files match SOURCE.txt exactly.
        let expected = [
            ("de", "19163-0.txt", 1_152, 54_884),
            ("de", "pg19778.txt", 834, 25_336),
            ("de", "pg22367.txt", 103, 19_248),
            ("en", "pg1342.txt", 2_122, 121_557),
            ("en", "pg84.txt", 797, 75_042),
            ("es", "pg2000.txt", 5_334, 386_614),
            ("fr", "pg14155.txt", 3_045, 112_606),
        ];
        let docs = load_all(&dir).unwrap();
        let got: Vec<(&str, &str, usize, usize)> = docs
            .iter()
            .map(|d| {
                let words = d
                    .paragraphs
                    .iter()
                    .map(|p| p.split_whitespace().count())
                    .sum();
                (d.lang.as_str(), d.name.as_str(), d.paragraphs.len(), words)
            })
            .collect();
        assert_eq!(got, expected);

        let find = |n: &str| docs.iter().find(|d| d.name == n).unwrap();
        let pp = find("pg1342.txt");
        assert_eq!(
            sentences(pp)[0],
            "It is a truth universally acknowledged, that a single man in possession of a good fortune, must be in want of a wife."
        );
        let frank = find("pg84.txt");
        assert_eq!(frank.paragraphs[0], "Frankenstein;");
        assert!(frank
            .paragraphs
            .last()
            .unwrap()
            .ends_with("lost in darkness and distance."));
        assert!(docs.iter().all(
            |d| d.paragraphs.iter().all(|p| !p.contains("PROJECT GUTENBERG")
                && !p.contains('\u{feff}')
                && !p.contains('\r'))
        ));
        let kafka = find("pg22367.txt");
        assert!(kafka.paragraphs[0].starts_with("DIE VERWANDLUNG"));
        assert!(kafka
            .paragraphs
            .last()
            .unwrap()
            .ends_with("ihren jungen Körper dehnte."));
        assert_eq!(find("pg19778.txt").paragraphs[0], "Erstes Kapitel");

        // Sentence totals under the documented rule (measured; pins the rule's behaviour).
        let counts: Vec<usize> = docs.iter().map(|d| sentences(d).len()).collect();
        assert_eq!(counts, SENTENCE_COUNTS);
    }

    const SENTENCE_COUNTS: [usize; 7] = [3120, 1421, 702, 5946, 3362, 10574, 6408];

    #[test]
    fn splitter_rule() {
        let s = split_sentences(
            "Mr. Darcy met J. Austen. \"Really?\" she asked. »Ja!« Er ging. Wait... no! ¿Qué? Sí. end",
        );
        assert_eq!(
            s,
            vec![
                "Mr. Darcy met J. Austen.",
                "\"Really?\" she asked.",
                "»Ja!«",
                "Er ging.",
                "Wait... no!",
                "¿Qué?",
                "Sí. end",
            ]
        );
        assert_eq!(split_sentences("  "), Vec::<String>::new());
        assert_eq!(split_sentences("No end"), vec!["No end"]);
        assert_eq!(
            split_sentences("« Bonjour ! » dit-il. Oui."),
            vec!["« Bonjour ! » dit-il.", "Oui."]
        );
    }

    #[test]
    fn boilerplate_bom_crlf_gz_and_errors() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir(dir.path().join("xx")).unwrap();
        let text = "\u{feff}Header\r\n*** START OF X ***\r\n\r\nOne line\r\nwrapped.\r\n\r\n\r\nTwo.\r\n  *** END OF X ***\r\nLicence";
        let mut enc = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
        enc.write_all(text.as_bytes()).unwrap();
        let g = enc.finish().unwrap();
        std::fs::write(dir.path().join("xx/b.txt.gz"), &g).unwrap();
        std::fs::write(dir.path().join("xx/a.txt"), "Plain\nbody.").unwrap();
        assert_eq!(
            books(dir.path()).unwrap(),
            vec![("xx".into(), "a.txt".into()), ("xx".into(), "b.txt".into())]
        );
        let b = load_book(dir.path(), "xx", "b.txt").unwrap();
        assert_eq!(b.paragraphs, vec!["One line wrapped.", "Two."]);
        assert_eq!(
            load_book(dir.path(), "xx", "a.txt").unwrap().paragraphs,
            vec!["Plain body."]
        );

        // START without END: truncated, error at the START line.
        std::fs::write(dir.path().join("xx/a.txt"), "h\n*** START OF X ***\nbody\n").unwrap();
        let msg = load_book(dir.path(), "xx", "a.txt")
            .unwrap_err()
            .to_string();
        assert!(msg.contains("a.txt:2"), "{msg}");

        std::fs::write(dir.path().join("xx/b.txt.gz"), &g[..g.len() / 2]).unwrap();
        let msg = load_book(dir.path(), "xx", "b.txt")
            .unwrap_err()
            .to_string();
        assert!(msg.contains("b.txt.gz"), "{msg}");
        let msg = load_book(dir.path(), "xx", "c.txt")
            .unwrap_err()
            .to_string();
        assert!(msg.contains("c.txt"), "{msg}");
    }
}
