//! Reading text files the way every dataset here needs: `name` or `name.gz` (gzip is
//! decompressed transparently and a truncated stream is an error, not a short file), an
//! optional UTF-8 BOM, LF or CRLF line ends, UTF-8 or Latin-1. Errors name the file and
//! the line.

use super::DataError;
use std::io::Read;
use std::path::{Path, PathBuf};

/// How a file's bytes map to characters.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Encoding {
    /// UTF-8; invalid sequences are an error naming the line.
    Utf8,
    /// ISO-8859-1: every byte is the code point of the same value (SentEval reads some
    /// files this way).
    Latin1,
}

/// Finds `dir/name`, or `dir/name.gz` when only the compressed copy exists.
pub fn resolve(dir: &Path, name: &str) -> Result<PathBuf, DataError> {
    let plain = dir.join(name);
    if plain.is_file() {
        return Ok(plain);
    }
    let gz = dir.join(format!("{name}.gz"));
    if gz.is_file() {
        return Ok(gz);
    }
    Err(DataError::Missing {
        path: plain,
        hint: format!(
            "nor {}.gz; run `harness datasets fetch` or check the data directory",
            name
        ),
    })
}

/// Reads a whole file, decompressing it when its name ends in `.gz`.
pub fn read_bytes(path: &Path) -> Result<Vec<u8>, DataError> {
    let raw = std::fs::read(path).map_err(|e| {
        if e.kind() == std::io::ErrorKind::NotFound {
            DataError::Missing {
                path: path.to_path_buf(),
                hint: "run `harness datasets fetch` or check the data directory".into(),
            }
        } else {
            DataError::io(path, e)
        }
    })?;
    let bytes = if path.extension().is_some_and(|e| e == "gz") {
        let mut out = Vec::with_capacity(raw.len().saturating_mul(4));
        flate2::read::MultiGzDecoder::new(&raw[..])
            .read_to_end(&mut out)
            .map_err(|e| {
                DataError::format(
                    path,
                    None,
                    format!("gzip stream is corrupt or truncated ({e})"),
                    "re-fetch the file with `harness datasets fetch --force`",
                )
            })?;
        out
    } else {
        raw
    };
    // No dataset file is empty: a 0-byte file is an interrupted copy, and loading it would
    // give an empty split (or class) that only shows later as a meaningless score.
    if bytes.is_empty() {
        return Err(DataError::format(
            path,
            None,
            "the file is empty (0 bytes)",
            "the copy was interrupted; re-fetch it with `harness datasets fetch --force`",
        ));
    }
    Ok(bytes)
}

/// Decodes bytes to lines: drops a leading UTF-8 BOM, splits on LF, strips one CR before
/// each LF, and drops the empty piece after a final newline. Empty lines inside the file
/// are kept (some formats count them as records). UTF-16 text (a UTF-16 byte-order mark)
/// and NUL bytes are errors in either encoding: no dataset here holds them, and Latin-1
/// would otherwise read any binary file as "text".
pub fn decode_lines(
    path: &Path,
    bytes: &[u8],
    encoding: Encoding,
) -> Result<Vec<String>, DataError> {
    const REFETCH: &str = "re-fetch it with `harness datasets fetch --force`";
    if bytes.starts_with(b"\xFF\xFE") || bytes.starts_with(b"\xFE\xFF") {
        return Err(DataError::format(
            path,
            Some(1),
            "UTF-16 text (the file starts with a UTF-16 byte-order mark), not UTF-8 or Latin-1",
            format!("convert it (`iconv -f UTF-16 -t UTF-8`) or {REFETCH}"),
        ));
    }
    let bytes = bytes.strip_prefix(b"\xEF\xBB\xBF").unwrap_or(bytes);
    if let Some(at) = bytes.iter().position(|&b| b == 0) {
        let line = bytes[..at].iter().filter(|&&b| b == b'\n').count() + 1;
        return Err(DataError::format(
            path,
            Some(line),
            format!("NUL byte at offset {at}: a binary (or UTF-16) file, not text"),
            format!("the file is corrupt or the wrong file; {REFETCH}"),
        ));
    }
    let mut pieces: Vec<&[u8]> = bytes.split(|&b| b == b'\n').collect();
    if pieces.last().is_some_and(|p| p.is_empty()) {
        pieces.pop();
    }
    pieces
        .into_iter()
        .enumerate()
        .map(|(i, piece)| {
            let piece = piece.strip_suffix(b"\r").unwrap_or(piece);
            match encoding {
                Encoding::Latin1 => Ok(piece.iter().map(|&b| b as char).collect()),
                Encoding::Utf8 => String::from_utf8(piece.to_vec()).map_err(|e| {
                    DataError::format(
                        path,
                        Some(i + 1),
                        format!("invalid UTF-8 ({e})"),
                        "the file is corrupt or not UTF-8; re-fetch it with `harness datasets fetch --force`",
                    )
                }),
            }
        })
        .collect()
}

/// Reads `path` (plain or `.gz`) into lines; see [`decode_lines`].
pub fn read_lines(path: &Path, encoding: Encoding) -> Result<Vec<String>, DataError> {
    let bytes = read_bytes(path)?;
    decode_lines(path, &bytes, encoding)
}

/// Reads `dir/name` or `dir/name.gz` into lines.
pub fn read_lines_in(dir: &Path, name: &str, encoding: Encoding) -> Result<Vec<String>, DataError> {
    read_lines(&resolve(dir, name)?, encoding)
}

/// Reads `path` (plain or `.gz`) into one string, each line (see [`decode_lines`]: BOM
/// dropped, CRLF made LF) ended by `\n`.
pub fn read_text(path: &Path, encoding: Encoding) -> Result<String, DataError> {
    let lines = read_lines(path, encoding)?;
    let mut text = String::with_capacity(lines.iter().map(|l| l.len() + 1).sum());
    for line in lines {
        text.push_str(&line);
        text.push('\n');
    }
    Ok(text)
}

/// The shape of a CSV file read by [`read_csv`] (RFC 4180 quoting, as Python's `csv`
/// module and pandas write it: a field holding the delimiter, `"` or a line break is
/// wrapped in `"…"` with inner quotes doubled; a `"` inside an unquoted field is literal).
#[derive(Debug, Clone, Copy)]
pub struct CsvFormat {
    /// The field separator, `b','` or `b'\t'`.
    pub delimiter: u8,
    /// The column names: every record has exactly this many fields.
    pub columns: &'static [&'static str],
    /// Whether the first line is a header equal to `columns` (checked, not returned).
    pub header: bool,
    /// Whether a quoted field may hold a line break; if not, every record is one line.
    pub multiline: bool,
}

/// Reads `path` (plain or `.gz`, UTF-8, see [`read_text`]) as CSV: each record with the
/// 1-based line it starts on. Errors name the file and line.
pub fn read_csv(path: &Path, format: &CsvFormat) -> Result<Vec<(usize, Vec<String>)>, DataError> {
    parse_csv(path, &read_text(path, Encoding::Utf8)?, format)
}

/// Parses CSV `text` (LF line ends, as [`read_text`] gives) with the csv crate; see
/// [`read_csv`]. `path` is only for error messages.
pub fn parse_csv(
    path: &Path,
    text: &str,
    format: &CsvFormat,
) -> Result<Vec<(usize, Vec<String>)>, DataError> {
    const FIX: &str =
        "the file is truncated or corrupt; re-fetch it with `harness datasets fetch --force`";
    let bad = |line: Option<usize>, detail: String| DataError::format(path, line, detail, FIX);
    if let Some((line, detail)) = strict_check(text, format) {
        return Err(bad(Some(line), detail));
    }
    let csv_error = |e: csv::Error| {
        let line = e.position().map(|p| p.line() as usize);
        bad(line, format!("unreadable CSV ({e})"))
    };
    let mut reader = csv::ReaderBuilder::new()
        .has_headers(format.header)
        .delimiter(format.delimiter)
        .quoting(true)
        .flexible(true)
        .terminator(csv::Terminator::Any(b'\n'))
        .from_reader(text.as_bytes());
    let tab = format.delimiter == b'\t';
    if format.header {
        let found = reader.headers().map_err(csv_error)?;
        if !found.iter().eq(format.columns.iter().copied()) {
            let sep = if tab { "<TAB>" } else { "," };
            let found = match found.is_empty() {
                true => "an empty file".to_string(),
                false => format!("`{}`", found.iter().collect::<Vec<_>>().join(sep)),
            };
            let expected = format.columns.join(sep);
            return Err(bad(
                Some(1),
                format!("expected the header `{expected}`, found {found}"),
            ));
        }
    }
    let mut records = Vec::new();
    for record in reader.records() {
        let record = record.map_err(csv_error)?;
        let line = record.position().map_or(1, |p| p.line() as usize);
        if record.len() != format.columns.len() {
            return Err(bad(
                Some(line),
                format!(
                    "expected {} {}-separated fields ({}), found {}",
                    format.columns.len(),
                    if tab { "tab" } else { "comma" },
                    format.columns.join(", "),
                    record.len()
                ),
            ));
        }
        records.push((line, record.iter().map(str::to_owned).collect()));
    }
    Ok(records)
}

/// What the csv crate accepts quietly but a file written by Python's `csv` module or
/// pandas never holds, so it means corruption; returns the line and the problem:
/// - text between a closing quote and the next delimiter (the csv crate, like Python's
///   default reader, reads `"a"x` as `ax`; Python's `strict=True` rejects it);
/// - a quoted field still open at the end of the file (the csv crate and Python's default
///   reader let it swallow the rest of the file; `strict=True` rejects it), or, without
///   `format.multiline`, at the end of its line;
/// - an empty line (the csv crate skips it, and then gives the next record the empty
///   line's number; Python reads it as a record with no fields, which these formats
///   never have).
fn strict_check(text: &str, format: &CsvFormat) -> Option<(usize, String)> {
    enum State {
        LineStart,
        FieldStart,
        Unquoted,
        Quoted,
        AfterQuote,
    }
    use State::*;
    let delimiter = char::from(format.delimiter);
    let (mut state, mut line, mut opened) = (LineStart, 1, 1);
    for c in text.chars() {
        state = match (state, c) {
            (LineStart, '\n') => return Some((line, "empty line where a record should be".into())),
            (LineStart | FieldStart, '"') => {
                opened = line;
                Quoted
            }
            (Quoted, '"') => AfterQuote,
            (Quoted, '\n') if !format.multiline => {
                return Some((
                    line,
                    "a quoted field is not closed before the end of the line".into(),
                ))
            }
            (Quoted, _) | (AfterQuote, '"') => Quoted,
            (_, '\n') => LineStart,
            (_, c) if c == delimiter => FieldStart,
            (AfterQuote, c) => {
                return Some((
                    line,
                    format!(
                        "unexpected `{}` after the closing quote of a field",
                        c.escape_debug()
                    ),
                ))
            }
            _ => Unquoted,
        };
        if c == '\n' {
            line += 1;
        }
    }
    matches!(state, Quoted).then(|| (opened, "a quoted field is never closed".into()))
}

/// Splits a tab-separated line without any quote handling (several datasets contain
/// unescaped `"` inside fields, which a CSV parser would merge across rows) and checks the
/// field count lies in `min..=max`.
pub fn tab_fields<'a>(
    path: &Path,
    line_no: usize,
    line: &'a str,
    min: usize,
    max: usize,
) -> Result<Vec<&'a str>, DataError> {
    let fields: Vec<&str> = line.split('\t').collect();
    if fields.len() < min || fields.len() > max {
        let expected = if min == max {
            format!("{min}")
        } else {
            format!("{min} to {max}")
        };
        return Err(DataError::format(
            path,
            Some(line_no),
            format!(
                "expected {expected} tab-separated fields, found {}",
                fields.len()
            ),
            "the file is truncated or corrupt; re-fetch it with `harness datasets fetch --force`",
        ));
    }
    Ok(fields)
}

/// Parses a number field, naming the file and line when it is not one.
/// NaN and infinities are refused too: Rust parses `nan` and `inf`, but no score of a
/// dataset is one, and a NaN would poison every correlation computed from it.
pub fn parse_f64(path: &Path, line_no: usize, field: &str, what: &str) -> Result<f64, DataError> {
    match field.trim().parse::<f64>() {
        Ok(v) if v.is_finite() => Ok(v),
        _ => Err(DataError::format(
            path,
            Some(line_no),
            format!("{what} `{field}` is not a finite number"),
            "the file is corrupt; re-fetch it with `harness datasets fetch --force`",
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    #[test]
    fn bom_crlf_and_final_newline_are_handled_and_empty_lines_kept() {
        let lines =
            decode_lines(Path::new("x"), b"\xEF\xBB\xBFa\r\n\r\nb\n", Encoding::Utf8).unwrap();
        assert_eq!(lines, vec!["a", "", "b"]);
    }

    #[test]
    fn latin1_maps_bytes_to_code_points() {
        let lines = decode_lines(Path::new("x"), b"caf\xe9\n", Encoding::Latin1).unwrap();
        assert_eq!(lines, vec!["café"]);
    }

    #[test]
    fn invalid_utf8_names_file_and_line() {
        let err = decode_lines(Path::new("f.txt"), b"ok\nbad\xff\n", Encoding::Utf8).unwrap_err();
        let msg = err.to_string();
        assert!(msg.contains("f.txt:2"), "{msg}");
    }

    #[test]
    fn gz_is_read_transparently_and_truncation_is_an_error() {
        let dir = tempfile::tempdir().unwrap();
        let mut enc = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
        enc.write_all(b"one\ntwo\n").unwrap();
        let gz = enc.finish().unwrap();
        std::fs::write(dir.path().join("t.txt.gz"), &gz).unwrap();
        let path = resolve(dir.path(), "t.txt").unwrap();
        assert_eq!(
            read_lines(&path, Encoding::Utf8).unwrap(),
            vec!["one", "two"]
        );
        std::fs::write(dir.path().join("t.txt.gz"), &gz[..gz.len() / 2]).unwrap();
        let msg = read_lines(&path, Encoding::Utf8).unwrap_err().to_string();
        assert!(msg.contains("truncated"), "{msg}");
    }

    #[test]
    fn utf16_nul_empty_and_non_finite_are_errors_naming_file_and_line() {
        let utf16 = decode_lines(Path::new("u.txt"), b"\xFF\xFEa\x00\n\x00", Encoding::Latin1);
        let msg = utf16.unwrap_err().to_string();
        assert!(msg.contains("u.txt:1") && msg.contains("UTF-16"), "{msg}");
        let nul = decode_lines(Path::new("b.bin"), b"ok\nbin\x00ary\n", Encoding::Latin1);
        let msg = nul.unwrap_err().to_string();
        assert!(msg.contains("b.bin:2") && msg.contains("NUL"), "{msg}");
        let dir = tempfile::tempdir().unwrap();
        // A 0-byte file, and a whole gzip stream of 0 bytes.
        let empty_gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default())
            .finish()
            .unwrap();
        for (name, bytes) in [("e.txt", Vec::new()), ("e.txt.gz", empty_gz)] {
            std::fs::write(dir.path().join(name), bytes).unwrap();
            let msg = read_lines(&dir.path().join(name), Encoding::Utf8)
                .unwrap_err()
                .to_string();
            assert!(msg.contains(name) && msg.contains("empty"), "{msg}");
        }
        for bad in ["nan", "inf", "-Infinity", "x"] {
            let msg = parse_f64(Path::new("s.txt"), 3, bad, "score")
                .unwrap_err()
                .to_string();
            assert!(msg.contains("s.txt:3"), "{msg}");
        }
        assert_eq!(
            parse_f64(Path::new("s.txt"), 1, " 4.5 ", "score").unwrap(),
            4.5
        );
    }

    #[test]
    fn missing_file_names_both_candidates() {
        let dir = tempfile::tempdir().unwrap();
        let msg = resolve(dir.path(), "nope.tsv").unwrap_err().to_string();
        assert!(msg.contains("nope.tsv") && msg.contains(".gz"), "{msg}");
    }

    const THREE: CsvFormat = CsvFormat {
        delimiter: b',',
        columns: &["a", "b", "c"],
        header: false,
        multiline: false,
    };

    fn csv_line(line: &str, delimiter: u8) -> Result<Vec<String>, DataError> {
        let format = CsvFormat { delimiter, ..THREE };
        let text = format!("{line}\n");
        Ok(parse_csv(Path::new("f.csv"), &text, &format)?.remove(0).1)
    }

    #[test]
    fn csv_plain_quoted_and_doubled_quotes() {
        assert_eq!(csv_line("1,a b,5", b',').unwrap(), vec!["1", "a b", "5"]);
        assert_eq!(
            csv_line("1,\"x, \"\"y\"\"\",5", b',').unwrap(),
            vec!["1", "x, \"y\"", "5"]
        );
        assert_eq!(
            csv_line("997\thealth\t\"\"\"We\"\" he\"", b'\t').unwrap(),
            vec!["997", "health", "\"We\" he"]
        );
        assert_eq!(csv_line("a,,", b',').unwrap(), vec!["a", "", ""]);
        // A quote inside an unquoted field is literal.
        assert_eq!(csv_line("a,b\"c,d", b',').unwrap(), vec!["a", "b\"c", "d"]);
    }

    #[test]
    fn csv_malformed_lines_name_file_and_line() {
        for line in ["1,\"open,5", "1,\"x\"y,5", "1,2", "1,2,3,4", ""] {
            let text = format!("1,2,3\n4,5,6\n{line}\n7,8,9\n");
            let err = parse_csv(Path::new("f.csv"), &text, &THREE).unwrap_err();
            let msg = err.to_string();
            assert!(msg.contains("f.csv:3"), "{msg}");
        }
    }

    #[test]
    fn csv_multiline_header_and_record_lines() {
        let format = CsvFormat {
            header: true,
            multiline: true,
            ..THREE
        };
        let text = "a,b,c\n1,\"x\ny\",2\n3,4,5\n";
        let records = parse_csv(Path::new("f.csv"), text, &format).unwrap();
        assert_eq!(records[0], (2, vec!["1".into(), "x\ny".into(), "2".into()]));
        assert_eq!(records[1].0, 4);
        for (text, needle) in [
            ("a,b,x\n", "f.csv:1: expected the header `a,b,c`"),
            ("", "found an empty file"),
            (
                "a,b,c\n1,2,3\n\"open,5\n6,7,8\n",
                "f.csv:3: a quoted field is never closed",
            ),
        ] {
            let msg = parse_csv(Path::new("f.csv"), text, &format)
                .unwrap_err()
                .to_string();
            assert!(msg.contains(needle), "{msg}");
        }
    }

    #[test]
    fn tab_fields_checks_count_and_ignores_quotes() {
        let f = tab_fields(Path::new("x"), 1, "a\t\"b\tc", 3, 3).unwrap();
        assert_eq!(f, vec!["a", "\"b", "c"]);
        assert!(tab_fields(Path::new("x"), 7, "a\tb", 3, 3)
            .unwrap_err()
            .to_string()
            .contains("x:7"));
    }
}
