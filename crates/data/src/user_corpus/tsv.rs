//! Tab-separated files: one example per line, columns split on `\t`, no quoting (the layout
//! of OPUS's and Tatoeba's TSV downloads and of `paste a.txt b.txt`; IANA's
//! text/tab-separated-values, which forbids tabs and line breaks inside a field).
//!
//! Columns are the example's parts in order (pairs: source 0, target 1; nli: premise 0,
//! hypothesis 1, label 2; conversation: message 0, response 1; labelled: text 0, label 1),
//! unless `fields` gives 0-based column numbers; `source_lang`/`target_lang` columns give
//! per-row languages.

use super::{column_of, make_record, read_rows, Bad, Pass, Record, UserCorpusError};
use harness_recipe::schema::CorpusKind;
use std::path::PathBuf;

/// The columns of one corpus's examples.
struct Columns {
    parts: Vec<usize>,
    names: Vec<String>,
    source_lang: Option<usize>,
    target_lang: Option<usize>,
    /// Columns a line needs at least.
    needed: usize,
}

impl Columns {
    fn of(pass: &Pass) -> Result<Columns, UserCorpusError> {
        let part_names = pass.kind.parts();
        let mut parts = Vec::with_capacity(part_names.len());
        let mut names = Vec::with_capacity(part_names.len());
        for (i, part) in part_names.iter().enumerate() {
            let column = column_of(pass.corpus, part)?.unwrap_or(i);
            parts.push(column);
            names.push(format!("`{part}` (column {column})"));
        }
        let source_lang = column_of(pass.corpus, "source_lang")?;
        let target_lang = column_of(pass.corpus, "target_lang")?;
        let needed = parts
            .iter()
            .chain(source_lang.iter())
            .chain(target_lang.iter())
            .max()
            .map_or(0, |m| m + 1);
        Ok(Columns {
            parts,
            names,
            source_lang,
            target_lang,
            needed,
        })
    }
}

/// Reads every line of `files` in order.
pub(super) fn read(pass: &mut Pass, files: &[PathBuf]) -> Result<(), UserCorpusError> {
    let columns = Columns::of(pass)?;
    let kind = pass.kind;
    read_rows(pass, files, &|text, fixed| row(text, &columns, fixed, kind))
}

/// One line's example.
fn row(
    text: &str,
    columns: &Columns,
    fixed: Option<&(String, String)>,
    kind: CorpusKind,
) -> Result<Record, Bad> {
    if text.trim().is_empty() {
        return Err(Bad::new("an empty line", "remove the empty line"));
    }
    let cells: Vec<&str> = text.split('\t').collect();
    if cells.len() < columns.needed {
        let found = cells.len();
        return Err(Bad::new(
            format!(
                "missing tab: {found} column{}, needs {}",
                if found == 1 { "" } else { "s" },
                columns.needed
            ),
            "separate the columns with tab characters (not spaces)",
        ));
    }
    let parts: Vec<&str> = columns.parts.iter().map(|&c| cells[c]).collect();
    let langs = if kind == CorpusKind::Pairs {
        let (source, target) = fixed.map_or(("", ""), |(s, t)| (s.as_str(), t.as_str()));
        Some((
            lang(&cells, columns.source_lang, source, "source_lang")?,
            lang(&cells, columns.target_lang, target, "target_lang")?,
        ))
    } else {
        None
    };
    make_record(kind, &parts, &columns.names, langs)
}

/// A row's language: its column's code where `fields` names one, else the file's.
fn lang<'a>(
    cells: &[&'a str],
    column: Option<usize>,
    fallback: &'a str,
    name: &str,
) -> Result<&'a str, Bad> {
    let Some(c) = column else {
        return Ok(fallback);
    };
    let code = cells[c].trim();
    if code.is_empty() {
        return Err(Bad::new(
            format!("empty `{name}` (column {c})"),
            "give every row its language code",
        ));
    }
    Ok(code)
}

#[cfg(test)]
mod tests {
    use super::super::tests::{corpus, error, pair, read_all, records, write};
    use super::super::Record;
    use crate::records::NliLabel;
    use harness_recipe::schema::{CorpusFormat, CorpusKind, OnBadLine};

    #[test]
    fn pairs_in_default_columns() {
        let dir = tempfile::tempdir().unwrap();
        let f = write(
            dir.path(),
            "opus.de-en.tsv",
            "Hallo Welt\tHello world\r\nDanke\tThanks\textra column\n".as_bytes(),
        );
        let c = corpus(CorpusFormat::Tsv);
        let (got, report) = read_all(&c, std::slice::from_ref(&f)).unwrap();
        let recs: Vec<_> = got.iter().map(|(r, _)| r.clone()).collect();
        assert_eq!(
            recs,
            [
                pair("Hallo Welt", "Hello world", "de", "en"),
                pair("Danke", "Thanks", "de", "en")
            ]
        );
        assert_eq!(got[1].1.line, 2);
        assert_eq!(got[1].1.path, f);
        assert_eq!((report.records, report.lines, report.skipped), (2, 2, 0));
        assert_eq!(report.files.len(), 1);
        assert_eq!(report.files[0].bytes, std::fs::metadata(&f).unwrap().len());
    }

    #[test]
    fn columns_from_fields_and_per_row_languages() {
        let dir = tempfile::tempdir().unwrap();
        let f = write(
            dir.path(),
            "mixed.tsv",
            b"7\ten\tHello\tde\tHallo\n8\tfr\tMerci\ten\tThanks\n",
        );
        let mut c = corpus(CorpusFormat::Tsv);
        for (k, v) in [
            ("source", "4"),
            ("target", "2"),
            ("source_lang", "3"),
            ("target_lang", "1"),
        ] {
            c.fields.insert(k.into(), v.into());
        }
        assert_eq!(
            records(&c, &[f]),
            [
                pair("Hallo", "Hello", "de", "en"),
                pair("Thanks", "Merci", "en", "fr")
            ]
        );
    }

    #[test]
    fn nli_conversation_and_labelled() {
        let dir = tempfile::tempdir().unwrap();
        let f = write(
            dir.path(),
            "nli.tsv",
            b"A man sleeps.\tA person rests.\tENTAILMENT\nA dog.\tA cat.\t2\n",
        );
        let mut c = corpus(CorpusFormat::Tsv);
        c.kind = Some(CorpusKind::Nli);
        assert_eq!(
            records(&c, &[f]),
            [
                Record::Nli {
                    premise: "A man sleeps.".into(),
                    hypothesis: "A person rests.".into(),
                    label: NliLabel::Entailment
                },
                Record::Nli {
                    premise: "A dog.".into(),
                    hypothesis: "A cat.".into(),
                    label: NliLabel::Contradiction
                }
            ]
        );
        let f = write(dir.path(), "chat.tsv", b"hi\thello there\n");
        c.kind = Some(CorpusKind::Conversation);
        assert_eq!(
            records(&c, &[f]),
            [Record::Conversation {
                message: "hi".into(),
                response: "hello there".into()
            }]
        );
        let f = write(dir.path(), "intents.tsv", b"sports\twhat a goal\n");
        c.kind = Some(CorpusKind::Labelled);
        c.fields.insert("text".into(), "1".into());
        c.fields.insert("label".into(), "0".into());
        assert_eq!(
            records(&c, &[f]),
            [Record::Labelled {
                text: "what a goal".into(),
                label: "sports".into()
            }]
        );
    }

    #[test]
    fn missing_tab_names_file_and_line() {
        let dir = tempfile::tempdir().unwrap();
        let f = write(dir.path(), "x.de-en.tsv", b"a\tb\nno tab here\nc\td\n");
        let text = error(&corpus(CorpusFormat::Tsv), &[f]);
        assert!(text.contains("x.de-en.tsv:2:"), "{text}");
        assert!(text.contains("missing tab: 1 column, needs 2"), "{text}");
        assert!(text.contains("on_bad_line: skip"), "{text}");
    }

    #[test]
    fn bad_nli_label_and_empty_line() {
        let dir = tempfile::tempdir().unwrap();
        let f = write(dir.path(), "nli.tsv", b"p\th\tmaybe\n");
        let mut c = corpus(CorpusFormat::Tsv);
        c.kind = Some(CorpusKind::Nli);
        let text = error(&c, &[f]);
        assert!(text.contains("nli.tsv:1:"), "{text}");
        assert!(text.contains("`label` (column 2) is `maybe`"), "{text}");
        let f = write(dir.path(), "x.de-en.tsv", b"a\tb\n\n");
        let text = error(&corpus(CorpusFormat::Tsv), &[f]);
        assert!(text.contains("x.de-en.tsv:2: an empty line"), "{text}");
    }

    #[test]
    fn skip_counts_bad_lines_and_goes_on() {
        let dir = tempfile::tempdir().unwrap();
        let f = write(
            dir.path(),
            "x.de-en.tsv",
            b"a\tb\nno tab\n\xff\xfe\tbad utf8\n\t\nc\td\n",
        );
        let mut c = corpus(CorpusFormat::Tsv);
        c.on_bad_line = OnBadLine::Skip;
        let (got, report) = read_all(&c, std::slice::from_ref(&f)).unwrap();
        assert_eq!(got.len(), 2);
        assert_eq!(got[1].1.line, 5);
        assert_eq!((report.records, report.lines, report.skipped), (2, 5, 3));
        let first = report.first_skipped.unwrap();
        assert!(first.contains("x.de-en.tsv:2: missing tab"), "{first}");
    }

    #[test]
    fn invalid_utf8_names_file_and_line() {
        let dir = tempfile::tempdir().unwrap();
        let f = write(dir.path(), "x.de-en.tsv", b"a\tb\nc\td\xe9j\xe0\n");
        let text = error(&corpus(CorpusFormat::Tsv), &[f]);
        assert!(
            text.contains("x.de-en.tsv:2: not UTF-8 (at byte 3 of the line)"),
            "{text}"
        );
        assert!(text.contains("iconv"), "{text}");
    }

    #[test]
    fn a_column_that_is_not_a_number_is_an_error() {
        let dir = tempfile::tempdir().unwrap();
        let f = write(dir.path(), "x.de-en.tsv", b"a\tb\n");
        let mut c = corpus(CorpusFormat::Tsv);
        c.fields.insert("source".into(), "src".into());
        let text = error(&c, &[f]);
        assert!(text.contains("`fields.source: src`"), "{text}");
    }
}
