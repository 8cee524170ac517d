//! Plain text: one sentence per line, a blank line between documents, as in the
//! sentence-split corpora of BERT's pretraining data (`create_pretraining_data.py`: "one
//! sentence per line ... blank lines between documents"). Each file starts a new document.

use super::open::{Line, Lines};
use super::{Bad, Pass, Place, Record, UserCorpusError};
use std::path::PathBuf;

/// Reads every sentence of `files` in order, numbering documents over the whole corpus.
pub(super) fn read(pass: &mut Pass, files: &[PathBuf]) -> Result<(), UserCorpusError> {
    let lang = pass.corpus.languages.first().cloned();
    let bytes_read = pass.bytes_read;
    // Documents are numbered only when they hold a sentence, so runs of blank lines, blank
    // lines at a file's edges and empty files leave no gaps in the numbering.
    let mut document = 0u64;
    let mut used = false;
    for path in files {
        if used {
            document += 1;
            used = false;
        }
        let mut lines = Lines::open(path, bytes_read)?;
        let mut place = Place {
            path: path.clone(),
            line: 0,
        };
        loop {
            let record = match lines.next_line()? {
                None => break,
                Some(Line::NotUtf8(at)) => Err(Bad::not_utf8(at)),
                Some(Line::Text(text)) if text.trim().is_empty() => {
                    if used {
                        document += 1;
                        used = false;
                    }
                    continue;
                }
                Some(Line::Text(text)) => {
                    used = true;
                    Ok(Record::Text {
                        sentence: text.to_string(),
                        document,
                        lang: lang.clone(),
                    })
                }
            };
            place.line = lines.line();
            pass.emit_or_bad(record, &place)?;
        }
        pass.file_done(path, lines.disk_bytes(), lines.line());
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::super::tests::{corpus, error, read_all, write};
    use super::super::Record;
    use harness_recipe::schema::{CorpusFormat, OnBadLine};

    fn text(sentence: &str, document: u64, lang: Option<&str>) -> Record {
        Record::Text {
            sentence: sentence.into(),
            document,
            lang: lang.map(str::to_string),
        }
    }

    #[test]
    fn documents_count_over_the_corpus() {
        let dir = tempfile::tempdir().unwrap();
        let files = [
            write(dir.path(), "a.txt", b"\nOne.\nTwo.\n\n\n  \nThree.\n\n"),
            write(dir.path(), "b.txt.gz", b"Four.\n"),
            write(dir.path(), "empty.txt", b""),
            write(dir.path(), "c.txt", b"Five."),
        ];
        let mut c = corpus(CorpusFormat::Text);
        c.languages = vec!["de".into()];
        let (got, report) = read_all(&c, &files).unwrap();
        let de = Some("de");
        assert_eq!(
            got.iter().map(|(r, _)| r.clone()).collect::<Vec<_>>(),
            [
                text("One.", 0, de),
                text("Two.", 0, de),
                text("Three.", 1, de),
                text("Four.", 2, de),
                text("Five.", 3, de)
            ]
        );
        assert_eq!(got[2].1.line, 7);
        assert_eq!((report.records, report.lines), (5, 10));
    }

    #[test]
    fn invalid_utf8_is_a_bad_line() {
        let dir = tempfile::tempdir().unwrap();
        let f = write(dir.path(), "a.txt", b"ok\n\xff\nfine\n");
        let mut c = corpus(CorpusFormat::Text);
        let msg = error(&c, std::slice::from_ref(&f));
        assert!(
            msg.contains("a.txt:2: not UTF-8 (at byte 0 of the line)"),
            "{msg}"
        );
        c.on_bad_line = OnBadLine::Skip;
        let (got, report) = read_all(&c, &[f]).unwrap();
        assert_eq!(got.len(), 2);
        assert_eq!(report.skipped, 1);
        assert_eq!(got[1].0, text("fine", 0, None));
    }
}
