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
