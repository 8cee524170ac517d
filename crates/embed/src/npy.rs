//! `.npy` matrices and the `npy:PATH` encoder (precomputed embeddings, so any external model
//! can be benchmarked).
//!
//! The `.npy` reader and writer are hand-written rather than a crate: harness only needs
//! 2-D little-endian f32/f64 C-order arrays (format versions 1–3, whose layout is a fixed
//! magic, a length and a Python-dict header — see numpy's `numpy/lib/format.py`), which
//! takes a hundred lines, keeps the dependency set of the project unchanged, and lets every
//! error name the file and the fix.

use super::encoder::{read_sentences, Encoder};
use super::error::EncodeError;
use super::matrix::Matrix;
use std::collections::HashMap;
use std::path::{Path, PathBuf};

const MAGIC: &[u8] = b"\x93NUMPY";

/// Serialises a matrix as a version-1 `.npy` file (`<f4`, C order, header padded to 64
/// bytes as numpy does).
pub fn npy_bytes(m: &Matrix) -> Vec<u8> {
    let dict = format!(
        "{{'descr': '<f4', 'fortran_order': False, 'shape': ({}, {}), }}",
        m.rows, m.cols
    );
    let unpadded = MAGIC.len() + 2 + 2 + dict.len() + 1;
    let pad = (64 - unpadded % 64) % 64;
    let header_len = dict.len() + pad + 1;
    let mut out = Vec::with_capacity(unpadded + pad + m.data.len() * 4);
    out.extend_from_slice(MAGIC);
    out.extend_from_slice(&[1, 0]);
    out.extend_from_slice(&(header_len as u16).to_le_bytes());
    out.extend_from_slice(dict.as_bytes());
    out.extend(std::iter::repeat_n(b' ', pad));
    out.push(b'\n');
    for x in &m.data {
        out.extend_from_slice(&x.to_le_bytes());
    }
    out
}

/// Writes a matrix to `path` as `.npy`, atomically.
pub fn write_npy(path: &Path, m: &Matrix) -> Result<(), EncodeError> {
    harness_core::nofollow::write_atomic(path, &npy_bytes(m)).map_err(|e| EncodeError::io(path, e))
}

/// Reads a 2-D `.npy` matrix of `<f4` or `<f8` in C order (f64 is rounded to f32).
pub fn read_npy(path: &Path) -> Result<Matrix, EncodeError> {
    let bytes = std::fs::read(path).map_err(|e| EncodeError::io(path, e))?;
    npy_from_bytes(path, &bytes)
}

/// Parses the bytes of a `.npy` file (see [`read_npy`]); `path` only names it in errors.
/// The entry point of the npy fuzz target (`fuzz/`).
pub fn npy_from_bytes(path: &Path, bytes: &[u8]) -> Result<Matrix, EncodeError> {
    parse_npy(bytes).map_err(|(detail, fix)| EncodeError::format(path, detail, fix))
}

/// Parses `.npy` bytes; errors are (what is wrong, how to fix it).
fn parse_npy(bytes: &[u8]) -> Result<Matrix, (String, String)> {
    let save_hint = "save it with `np.save(path, np.ascontiguousarray(x, dtype=np.float32))`";
    let err = |d: &str| (d.to_string(), save_hint.to_string());
    if bytes.len() < 10 || &bytes[..6] != MAGIC {
        return Err(err("not a .npy file (no \\x93NUMPY magic)"));
    }
    let (header_len, start) = match bytes[6] {
        1 => (u16::from_le_bytes([bytes[8], bytes[9]]) as usize, 10),
        2 | 3 if bytes.len() >= 12 => (
            u32::from_le_bytes([bytes[8], bytes[9], bytes[10], bytes[11]]) as usize,
            12,
        ),
        v => return Err(err(&format!("unsupported .npy format version {v}"))),
    };
    let data_start = start + header_len;
    let header = bytes
        .get(start..data_start)
        .and_then(|h| std::str::from_utf8(h).ok())
        .ok_or_else(|| err("truncated or non-UTF-8 header"))?;
    let descr = dict_value(header, "descr").ok_or_else(|| err("header has no 'descr'"))?;
    let descr = descr.trim_matches(|c| c == '\'' || c == '"');
    let width = match descr {
        "<f4" => 4,
        "<f8" => 8,
        other => {
            let detail = format!("dtype {other} is not supported (only `<f4` and `<f8`)");
            return Err(err(&detail));
        }
    };
    let fortran =
        dict_value(header, "fortran_order").ok_or_else(|| err("header has no 'fortran_order'"))?;
    if fortran.trim() != "False" {
        return Err(err("array is in Fortran order"));
    }
    let shape = dict_value(header, "shape").ok_or_else(|| err("header has no 'shape'"))?;
    let dims: Vec<usize> = shape
        .trim()
        .trim_start_matches('(')
        .trim_end_matches(')')
        .split(',')
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .map(|s| s.parse::<usize>())
        .collect::<Result<_, _>>()
        .map_err(|_| err(&format!("unreadable shape {shape}")))?;
    let [rows, cols] = dims[..] else {
        return Err(err(&format!(
            "shape {shape} is not 2-D (sentences × dimensions)"
        )));
    };
    let body = &bytes[data_start.min(bytes.len())..];
    let want = rows
        .checked_mul(cols)
        .and_then(|n| n.checked_mul(width))
        .ok_or_else(|| err("shape overflows"))?;
    if body.len() != want {
        return Err(err(&format!(
            "data is {} bytes, the header's shape ({rows}, {cols}) of {descr} needs {want} (truncated or trailing bytes)",
            body.len()
        )));
    }
    let data: Vec<f32> = if width == 4 {
        body.chunks_exact(4)
            .map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]]))
            .collect()
    } else {
        body.chunks_exact(8)
            .map(|c| f64::from_le_bytes(c.try_into().expect("8 bytes")) as f32)
            .collect()
    };
    Ok(Matrix::from_vec(rows, cols, data))
}

/// The text of `'key': VALUE` in a numpy header dict (VALUE up to the next top-level comma).
fn dict_value<'a>(header: &'a str, key: &str) -> Option<&'a str> {
    let at = header
        .find(&format!("'{key}'"))
        .or_else(|| header.find(&format!("\"{key}\"")))?;
    let after = &header[at + key.len() + 2..];
    let after = after.trim_start().strip_prefix(':')?.trim_start();
    let mut depth = 0;
    for (i, c) in after.char_indices() {
        match c {
            '(' => depth += 1,
            ')' => depth -= 1,
            ',' | '}' if depth == 0 => return Some(&after[..i]),
            _ => {}
        }
    }
    None
}

/// The sentence list that belongs to an embeddings file: `PATH` with `.txt` replacing
/// `.npy` (`xnli.npy` → `xnli.txt`), one sentence per line, line `i` for row `i`.
pub fn sentences_path(npy: &Path) -> PathBuf {
    npy.with_extension("txt")
}

/// `npy:PATH`: precomputed embeddings looked up by exact sentence text.
///
/// `PATH` is a 2-D `.npy` (f32 or f64, C order, one row per sentence) and
/// [`sentences_path`]`(PATH)` the sentences it was computed from. A sentence listed twice
/// must have the same row both times; a non-finite value anywhere is refused (file, row). The fingerprint is the sha256 of both files, so replacing either
/// invalidates cached results.
#[derive(Debug)]
pub struct NpyEncoder {
    name: String,
    npy_path: PathBuf,
    txt_path: PathBuf,
    fingerprint: String,
    matrix: Matrix,
    index: HashMap<String, usize>,
}

impl NpyEncoder {
    /// Loads the matrix and its sentence list.
    pub fn open(npy_path: &Path) -> Result<Self, EncodeError> {
        let txt_path = sentences_path(npy_path);
        let npy_bytes = std::fs::read(npy_path).map_err(|e| EncodeError::io(npy_path, e))?;
        let txt_bytes = std::fs::read(&txt_path).map_err(|e| match e.kind() {
            std::io::ErrorKind::NotFound => EncodeError::format(
                &txt_path,
                format!("missing: the sentence list of {}", npy_path.display()),
                "write the sentences the rows were computed from there, one per line, in row order",
            ),
            _ => EncodeError::io(&txt_path, e),
        })?;
        let matrix = parse_npy(&npy_bytes)
            .map_err(|(detail, fix)| EncodeError::format(npy_path, detail, fix))?;
        let sentences = read_sentences(&txt_path)?;
        if sentences.len() != matrix.rows {
            return Err(EncodeError::format(
                &txt_path,
                format!(
                    "{} sentences, but {} has {} rows",
                    sentences.len(),
                    npy_path.display(),
                    matrix.rows
                ),
                "keep exactly one line per matrix row, in the same order",
            ));
        }
        if let Some((row, col, v)) = matrix.first_non_finite() {
            return Err(EncodeError::format(
                npy_path,
                format!(
                    "row {} (line {} of {}: {:?}) has a non-finite value ({v}) in column {col}",
                    row,
                    row + 1,
                    txt_path.display(),
                    sentences[row].chars().take(80).collect::<String>()
                ),
                "recompute the embeddings; a NaN or infinite value cannot be scored",
            ));
        }
        let mut index: HashMap<String, usize> = HashMap::with_capacity(sentences.len());
        for (i, s) in sentences.into_iter().enumerate() {
            match index.get(&s) {
                None => {
                    index.insert(s, i);
                }
                Some(&first) if matrix.row(first) != matrix.row(i) => {
                    return Err(EncodeError::format(
                        &txt_path,
                        format!(
                            "line {} repeats the sentence of line {} ({:?}), but rows {first} and {i} of {} differ",
                            i + 1,
                            first + 1,
                            s.chars().take(80).collect::<String>(),
                            npy_path.display()
                        ),
                        "a sentence must have one vector: remove the repeated line and its row, or recompute them",
                    ));
                }
                Some(_) => {}
            }
        }
        let fingerprint = format!(
            "npy-v1-{}-{}",
            harness_core::fsutil::sha256_hex(&npy_bytes),
            harness_core::fsutil::sha256_hex(&txt_bytes)
        );
        Ok(NpyEncoder {
            name: format!("npy:{}", npy_path.display()),
            npy_path: npy_path.to_path_buf(),
            txt_path,
            fingerprint,
            matrix,
            index,
        })
    }

    /// The `.npy` file.
    pub fn npy_path(&self) -> &Path {
        &self.npy_path
    }

    /// Number of distinct sentences it can encode.
    pub fn len(&self) -> usize {
        self.index.len()
    }

    /// Whether the list is empty.
    pub fn is_empty(&self) -> bool {
        self.index.is_empty()
    }
}

impl Encoder for NpyEncoder {
    fn name(&self) -> &str {
        &self.name
    }

    fn fingerprint(&self) -> String {
        self.fingerprint.clone()
    }

    fn dim(&self) -> usize {
        self.matrix.cols
    }

    fn encode(&self, sentences: &[&str]) -> Result<Matrix, EncodeError> {
        let mut rows = Vec::with_capacity(sentences.len());
        let mut first_missing = None;
        let mut missing = 0;
        for s in sentences {
            match self.index.get(*s) {
                Some(&i) => rows.push(i),
                None => {
                    missing += 1;
                    first_missing.get_or_insert(*s);
                }
            }
        }
        if let Some(sentence) = first_missing {
            return Err(EncodeError::MissingSentence {
                path: self.txt_path.clone(),
                sentence: sentence.to_string(),
                missing,
                asked: sentences.len(),
            });
        }
        Ok(self.matrix.select_rows(&rows))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn npy_round_trips_and_matches_numpys_header_layout() {
        let m = Matrix::from_rows(&[vec![1.0, -2.5, 3.0], vec![0.0, 1e-30, f32::MAX]], 3);
        let bytes = npy_bytes(&m);
        // numpy pads magic + lengths + header to a multiple of 64 bytes.
        let header_len = u16::from_le_bytes([bytes[8], bytes[9]]) as usize;
        assert_eq!((10 + header_len) % 64, 0);
        assert_eq!(bytes[10 + header_len - 1], b'\n');
        assert_eq!(parse_npy(&bytes).unwrap(), m);
        let empty = Matrix::zeros(0, 4);
        assert_eq!(parse_npy(&npy_bytes(&empty)).unwrap(), empty);
    }

    #[test]
    fn npy_reads_f64_and_rejects_what_it_cannot_read() {
        let dict = "{'descr': '<f8', 'fortran_order': False, 'shape': (1, 2), }";
        let mut b = b"\x93NUMPY\x01\x00".to_vec();
        b.extend_from_slice(&((dict.len() + 1) as u16).to_le_bytes());
        b.extend_from_slice(dict.as_bytes());
        b.push(b'\n');
        b.extend_from_slice(&0.5f64.to_le_bytes());
        b.extend_from_slice(&(-2.0f64).to_le_bytes());
        assert_eq!(parse_npy(&b).unwrap().data, vec![0.5, -2.0]);
        let truncated = &b[..b.len() - 1];
        assert!(parse_npy(truncated).unwrap_err().0.contains("truncated"));
        let fortran = String::from_utf8_lossy(&b).replace("False", "True ");
        assert!(parse_npy(fortran.as_bytes()).is_err());
        assert!(parse_npy(b"hello world").is_err());
    }

    #[test]
    fn npy_encoder_round_trip_and_missing_sentence_error() {
        let dir = tempfile::tempdir().unwrap();
        let npy = dir.path().join("emb.npy");
        let m = Matrix::from_rows(&[vec![1.0, 0.0], vec![0.0, 1.0], vec![0.5, 0.5]], 2);
        write_npy(&npy, &m).unwrap();
        std::fs::write(dir.path().join("emb.txt"), "un\ndeux\r\ntrois\n").unwrap();
        let enc = NpyEncoder::open(&npy).unwrap();
        assert_eq!(enc.dim(), 2);
        let got = enc.encode(&["trois", "un", "trois"]).unwrap();
        assert_eq!(got, m.select_rows(&[2, 0, 2]));
        let err = enc
            .encode(&["un", "quatre", "cinq"])
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("\"quatre\"") && err.contains("emb.txt") && err.contains("2 of the 3"),
            "{err}"
        );
        // The fingerprint follows both files.
        let fp = enc.fingerprint();
        std::fs::write(dir.path().join("emb.txt"), "un\ndeux\ntrois\n").unwrap();
        assert_ne!(NpyEncoder::open(&npy).unwrap().fingerprint(), fp);
        // A list of the wrong length is refused, naming the file.
        std::fs::write(dir.path().join("emb.txt"), "un\ndeux\n").unwrap();
        let err = NpyEncoder::open(&npy).unwrap_err().to_string();
        assert!(err.contains("emb.txt") && err.contains("3 rows"), "{err}");
        std::fs::remove_file(dir.path().join("emb.txt")).unwrap();
        let err = NpyEncoder::open(&npy).unwrap_err().to_string();
        assert!(err.contains("emb.txt: missing"), "{err}");
    }

    #[test]
    fn non_finite_rows_and_conflicting_repeats_are_refused_naming_file_and_row() {
        let dir = tempfile::tempdir().unwrap();
        let npy = dir.path().join("emb.npy");
        std::fs::write(dir.path().join("emb.txt"), "un\ndeux\ntrois\n").unwrap();
        let m = Matrix::from_rows(&[vec![1.0, 0.0], vec![0.0, f32::NAN], vec![0.5, 0.5]], 2);
        write_npy(&npy, &m).unwrap();
        let err = NpyEncoder::open(&npy).unwrap_err().to_string();
        assert!(
            err.contains("emb.npy") && err.contains("row 1 (line 2") && err.contains("\"deux\""),
            "{err}"
        );
        // The same sentence twice with two different vectors.
        std::fs::write(dir.path().join("emb.txt"), "un\ndeux\nun\n").unwrap();
        let m = Matrix::from_rows(&[vec![1.0, 0.0], vec![0.0, 1.0], vec![0.5, 0.5]], 2);
        write_npy(&npy, &m).unwrap();
        let err = NpyEncoder::open(&npy).unwrap_err().to_string();
        assert!(
            err.contains("line 3 repeats the sentence of line 1"),
            "{err}"
        );
        // Twice with the same vector is fine.
        let m = Matrix::from_rows(&[vec![1.0, 0.0], vec![0.0, 1.0], vec![1.0, 0.0]], 2);
        write_npy(&npy, &m).unwrap();
        assert_eq!(NpyEncoder::open(&npy).unwrap().len(), 2);
    }
}
