//! Opening a user's file for reading line by line, decompressing gzip (`.gz`), xz (`.xz`)
//! and zstd (`.zst`, `.zstd`) on the fly. The extension says which; the first bytes must
//! agree, so that a mislabelled file is an error naming it rather than a page of bad lines.

use super::UserCorpusError;
use std::cell::Cell;
use std::fs::File;
use std::io::{BufRead, BufReader, Read};
use std::path::{Path, PathBuf};
use std::rc::Rc;
use std::sync::atomic::{AtomicU64, Ordering};

/// Lines are read through a buffer this large: corpus files are read once, front to back,
/// and large reads keep the decompressors and the system calls few.
const BUFFER: usize = 1 << 20;

/// How a file is compressed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Compression {
    None,
    Gzip,
    Xz,
    Zstd,
}

impl Compression {
    /// By the file's extension.
    pub(crate) fn of(path: &Path) -> Compression {
        match path.extension().and_then(|e| e.to_str()) {
            Some("gz") => Compression::Gzip,
            Some("xz") => Compression::Xz,
            Some("zst" | "zstd") => Compression::Zstd,
            _ => Compression::None,
        }
    }

    fn name(self) -> &'static str {
        match self {
            Compression::None => "uncompressed",
            Compression::Gzip => "gzip",
            Compression::Xz => "xz",
            Compression::Zstd => "zstd",
        }
    }

    /// The first bytes of every file of this compression.
    fn magic(self) -> &'static [u8] {
        match self {
            Compression::None => b"",
            Compression::Gzip => &[0x1f, 0x8b],
            Compression::Xz => &[0xfd, b'7', b'z', b'X', b'Z', 0x00],
            Compression::Zstd => &[0x28, 0xb5, 0x2f, 0xfd],
        }
    }

    /// The compression whose magic bytes `head` starts with, if any.
    fn sniff(head: &[u8]) -> Compression {
        [Compression::Gzip, Compression::Xz, Compression::Zstd]
            .into_iter()
            .find(|c| head.starts_with(c.magic()))
            .unwrap_or(Compression::None)
    }
}

/// A file name without its compression extension (`a.de-en.de.gz` → `a.de-en.de`).
pub(crate) fn strip_compression(name: &str) -> &str {
    for ext in [".gz", ".xz", ".zst", ".zstd"] {
        if let Some(stem) = name.strip_suffix(ext) {
            return stem;
        }
    }
    name
}

/// The file as read from disk: counts the bytes consumed into the pass's progress counter,
/// and notes whether the operating system failed a read (so that an error coming out of a
/// decompressor can be told apart from damaged data).
struct Counted<'a> {
    file: File,
    bytes_read: &'a AtomicU64,
    os_failed: Rc<Cell<bool>>,
}

impl Read for Counted<'_> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        match self.file.read(buf) {
            Ok(n) => {
                self.bytes_read.fetch_add(n as u64, Ordering::Relaxed);
                Ok(n)
            }
            Err(e) => {
                if e.kind() != std::io::ErrorKind::Interrupted {
                    self.os_failed.set(true);
                }
                Err(e)
            }
        }
    }
}

/// One line as read: text, or bytes that are not UTF-8 (the offset of the first bad byte).
pub(crate) enum Line<'b> {
    Text(&'b str),
    NotUtf8(usize),
}

/// A file read line by line (decompressed), with the number of the last line read.
pub(crate) struct Lines<'a> {
    path: PathBuf,
    reader: BufReader<Box<dyn Read + 'a>>,
    buf: Vec<u8>,
    line: u64,
    compression: Compression,
    os_failed: Rc<Cell<bool>>,
    disk_bytes: u64,
}

impl<'a> Lines<'a> {
    /// Opens `path`, checking that its first bytes match its compression extension.
    pub(crate) fn open(path: &Path, bytes_read: &'a AtomicU64) -> Result<Self, UserCorpusError> {
        let io = |e| UserCorpusError::io(path, e);
        let mut file = File::open(path).map_err(io)?;
        let disk_bytes = file.metadata().map_err(io)?.len();
        let compression = Compression::of(path);
        let mut head = [0u8; 6];
        let got = read_head(&mut file, &mut head).map_err(io)?;
        let sniffed = Compression::sniff(&head[..got]);
        if sniffed != compression {
            let (detail, fix) = if compression == Compression::None {
                (
                    format!(
                        "the file is {}-compressed but its name does not say so",
                        sniffed.name()
                    ),
                    format!(
                        "rename it with the `.{}` extension",
                        match sniffed {
                            Compression::Gzip => "gz",
                            Compression::Xz => "xz",
                            _ => "zst",
                        }
                    ),
                )
            } else if got == 0 {
                (
                    format!("the file is empty, not {} data", compression.name()),
                    "re-create or re-download the file".to_string(),
                )
            } else {
                (
                    format!(
                        "the name says {} but the file does not start like {} data ({})",
                        compression.name(),
                        compression.name(),
                        if sniffed == Compression::None {
                            "it starts like no compressed format".to_string()
                        } else {
                            format!("it starts like {}", sniffed.name())
                        }
                    ),
                    "rename the file to match its content, or re-download it".to_string(),
                )
            };
            return Err(UserCorpusError::Decompress {
                path: path.to_path_buf(),
                detail,
                fix,
            });
        }
        let os_failed = Rc::new(Cell::new(false));
        // The bytes sniffed are put back in front of the rest of the file.
        bytes_read.fetch_add(got as u64, Ordering::Relaxed);
        let counted = Counted {
            file,
            bytes_read,
            os_failed: os_failed.clone(),
        };
        let raw = std::io::Cursor::new(head[..got].to_vec()).chain(counted);
        let decoded: Box<dyn Read + 'a> = match compression {
            Compression::None => Box::new(raw),
            // Multi-member gzip and multi-stream xz: `cat a.gz b.gz` and `pigz`/`pxz` output
            // decompress to the concatenation, as `zcat` and `xzcat` do.
            Compression::Gzip => Box::new(flate2::read::MultiGzDecoder::new(raw)),
            Compression::Xz => Box::new(liblzma::read::XzDecoder::new_multi_decoder(raw)),
            // Reads every frame of the file, as `zstdcat` does.
            Compression::Zstd => Box::new(zstd::stream::read::Decoder::new(raw).map_err(|e| {
                UserCorpusError::Decompress {
                    path: path.to_path_buf(),
                    detail: format!("cannot start the zstd decoder: {e}"),
                    fix: "check that the file is a zstd file (`zstd -t FILE`)".into(),
                }
            })?),
        };
        Ok(Lines {
            path: path.to_path_buf(),
            reader: BufReader::with_capacity(BUFFER, decoded),
            buf: Vec::new(),
            line: 0,
            compression,
            os_failed,
            disk_bytes,
        })
    }

    /// The 1-based number of the last line returned (0 before the first).
    pub(crate) fn line(&self) -> u64 {
        self.line
    }

    /// The file's size on disk.
    pub(crate) fn disk_bytes(&self) -> u64 {
        self.disk_bytes
    }

    /// The next line without its `\n` or `\r\n`, `None` at the end of the file. A read that
    /// fails inside a decompressor (damaged or cut-short data) is a
    /// [`UserCorpusError::Decompress`] naming the last whole line read.
    pub(crate) fn next_line(&mut self) -> Result<Option<Line<'_>>, UserCorpusError> {
        self.buf.clear();
        match self.reader.read_until(b'\n', &mut self.buf) {
            Ok(0) => return Ok(None),
            Ok(_) => {}
            Err(e) => return Err(self.read_error(e)),
        }
        self.line += 1;
        let mut end = self.buf.len();
        if self.buf[..end].ends_with(b"\n") {
            end -= 1;
            if self.buf[..end].ends_with(b"\r") {
                end -= 1;
            }
        }
        let mut start = 0;
        // A byte-order mark (Windows editors write one) is not part of the first line's text.
        if self.line == 1 && self.buf[..end].starts_with("\u{feff}".as_bytes()) {
            start = 3;
        }
        Ok(Some(match std::str::from_utf8(&self.buf[start..end]) {
            Ok(text) => Line::Text(text),
            Err(e) => Line::NotUtf8(start + e.valid_up_to()),
        }))
    }

    fn read_error(&self, e: std::io::Error) -> UserCorpusError {
        if self.compression == Compression::None || self.os_failed.get() {
            return UserCorpusError::io(&self.path, e);
        }
        UserCorpusError::Decompress {
            path: self.path.clone(),
            detail: format!(
                "the {} data is damaged or cut short after line {} ({e})",
                self.compression.name(),
                self.line
            ),
            fix: format!(
                "re-download or re-compress the file (`{} -t FILE` tests it)",
                match self.compression {
                    Compression::Gzip => "gzip",
                    Compression::Xz => "xz",
                    _ => "zstd",
                }
            ),
        }
    }
}

/// Reads up to `head.len()` bytes (fewer only at the end of the file).
fn read_head(file: &mut File, head: &mut [u8]) -> std::io::Result<usize> {
    let mut got = 0;
    while got < head.len() {
        match file.read(&mut head[got..]) {
            Ok(0) => break,
            Ok(n) => got += n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(got)
}

#[cfg(test)]
mod tests {
    use super::super::tests::{corpus, error, pair, read_all, records, write};
    use super::super::{read, UserCorpusError};
    use harness_recipe::schema::CorpusFormat;
    use std::sync::atomic::{AtomicU64, Ordering};

    /// Enough lines that each compressed file spans many blocks and frames of its format.
    fn many_lines() -> (String, usize) {
        let n = 20_000;
        let text: String = (0..n)
            .map(|i| format!("Satz Nummer {i}\tsentence number {i}\n"))
            .collect();
        (text, n)
    }

    #[test]
    fn gzip_xz_and_zstd_read_like_plain_text() {
        let dir = tempfile::tempdir().unwrap();
        let (text, n) = many_lines();
        let c = corpus(CorpusFormat::Tsv);
        for ext in ["gz", "xz", "zst", "zstd"] {
            let f = write(dir.path(), &format!("c.de-en.tsv.{ext}"), text.as_bytes());
            let bytes = AtomicU64::new(0);
            let mut got = Vec::new();
            let report = read(&c, std::slice::from_ref(&f), &bytes, &mut |r, _| {
                got.push(r);
                Ok(())
            })
            .unwrap();
            assert_eq!(got.len(), n, "{ext}");
            assert_eq!(
                got[n - 1],
                pair(
                    &format!("Satz Nummer {}", n - 1),
                    &format!("sentence number {}", n - 1),
                    "de",
                    "en"
                )
            );
            // Progress counts the compressed bytes, all of them by the end.
            let size = std::fs::metadata(&f).unwrap().len();
            assert_eq!(bytes.load(Ordering::Relaxed), size, "{ext}");
            assert_eq!(report.files[0].bytes, size);
            assert_eq!(report.lines, n as u64);
        }
    }

    #[test]
    fn concatenated_gzip_members_and_a_byte_order_mark() {
        let dir = tempfile::tempdir().unwrap();
        let a = write(dir.path(), "a.gz", "\u{feff}Hallo\tHello\n".as_bytes());
        let b = write(dir.path(), "b.gz", b"Danke\tThanks");
        let mut both = std::fs::read(&a).unwrap();
        both.extend(std::fs::read(&b).unwrap());
        let f = dir.path().join("x.de-en.tsv.gz");
        std::fs::write(&f, both).unwrap();
        assert_eq!(
            records(&corpus(CorpusFormat::Tsv), &[f]),
            [
                pair("Hallo", "Hello", "de", "en"),
                pair("Danke", "Thanks", "de", "en")
            ]
        );
    }

    /// Cuts a compressed file in the middle: the read must end in an error naming the file
    /// and the line reached, not in a short corpus.
    #[test]
    fn a_truncated_file_is_an_error_not_a_short_read() {
        let dir = tempfile::tempdir().unwrap();
        let (text, n) = many_lines();
        let c = corpus(CorpusFormat::Tsv);
        for (ext, name) in [("gz", "gzip"), ("xz", "xz"), ("zst", "zstd")] {
            let f = write(dir.path(), &format!("cut.de-en.tsv.{ext}"), text.as_bytes());
            let bytes = std::fs::read(&f).unwrap();
            std::fs::write(&f, &bytes[..bytes.len() / 2]).unwrap();
            let mut seen = 0u64;
            let e = read(
                &c,
                std::slice::from_ref(&f),
                &AtomicU64::new(0),
                &mut |_, _| {
                    seen += 1;
                    Ok(())
                },
            )
            .unwrap_err();
            assert!(
                matches!(e, UserCorpusError::Decompress { .. }),
                "{ext}: {e:?}"
            );
            let msg = e.to_string();
            assert!(msg.contains(&format!("cut.de-en.tsv.{ext}")), "{msg}");
            assert!(
                msg.contains(&format!(
                    "{name} data is damaged or cut short after line {seen}"
                )),
                "{msg}"
            );
            assert!((seen as usize) < n, "{ext}: {seen}");
        }
    }

    #[test]
    fn a_name_that_lies_about_the_compression_is_an_error() {
        let dir = tempfile::tempdir().unwrap();
        let c = corpus(CorpusFormat::Tsv);
        let f = dir.path().join("plain.de-en.tsv.gz");
        std::fs::write(&f, b"a\tb\n").unwrap();
        let msg = error(&c, &[f]);
        assert!(
            msg.contains("plain.de-en.tsv.gz: the name says gzip"),
            "{msg}"
        );

        let f = write(dir.path(), "real.de-en.tsv.xz", b"a\tb\n");
        let g = dir.path().join("real.de-en.tsv.gz");
        std::fs::rename(&f, &g).unwrap();
        let msg = error(&c, &[g]);
        assert!(msg.contains("it starts like xz"), "{msg}");

        let f = write(dir.path(), "hidden.gz", b"a\tb\n");
        let g = dir.path().join("hidden.de-en.tsv");
        std::fs::rename(&f, &g).unwrap();
        let msg = error(&c, &[g]);
        assert!(
            msg.contains(
                "hidden.de-en.tsv: the file is gzip-compressed but its name does not say so"
            ),
            "{msg}"
        );

        let f = dir.path().join("empty.de-en.tsv.zst");
        std::fs::write(&f, b"").unwrap();
        let msg = error(&c, &[f]);
        assert!(
            msg.contains("empty.de-en.tsv.zst: the file is empty"),
            "{msg}"
        );
    }

    #[test]
    fn a_missing_file_is_an_io_error_naming_it() {
        let dir = tempfile::tempdir().unwrap();
        let f = dir.path().join("gone.de-en.tsv");
        let e = read_all(&corpus(CorpusFormat::Tsv), &[f]).unwrap_err();
        assert!(matches!(e, UserCorpusError::Io { .. }), "{e:?}");
        assert!(e.to_string().contains("gone.de-en.tsv"), "{e}");
    }
}
