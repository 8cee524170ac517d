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
    if path.extension().is_some_and(|e| e == "gz") {
        let mut out = Vec::with_capacity(raw.len() * 4);
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
        Ok(out)
    } else {
        Ok(raw)
    }
}

/// Decodes bytes to lines: drops a leading UTF-8 BOM, splits on LF, strips one CR before
/// each LF, and drops the empty piece after a final newline. Empty lines inside the file
/// are kept (some formats count them as records).
pub fn decode_lines(
    path: &Path,
    bytes: &[u8],
    encoding: Encoding,
) -> Result<Vec<String>, DataError> {
    let bytes = bytes.strip_prefix(b"\xEF\xBB\xBF").unwrap_or(bytes);
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
pub fn parse_f64(path: &Path, line_no: usize, field: &str, what: &str) -> Result<f64, DataError> {
    field.trim().parse::<f64>().map_err(|_| {
        DataError::format(
            path,
            Some(line_no),
            format!("{what} `{field}` is not a number"),
            "the file is corrupt; re-fetch it with `harness datasets fetch --force`",
        )
    })
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
    fn missing_file_names_both_candidates() {
        let dir = tempfile::tempdir().unwrap();
        let msg = resolve(dir.path(), "nope.tsv").unwrap_err().to_string();
        assert!(msg.contains("nope.tsv") && msg.contains(".gz"), "{msg}");
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
