//! Opening a user's file for reading line by line, decompressing gzip (`.gz`, flate2), xz
//! (`.xz`, liblzma) and zstd (`.zst`, `.zstd`, the pure-Rust ruzstd through `ZstdFrames`)
//! on the fly. The extension says which; the first bytes must agree, so that a mislabelled
//! file is an error naming it rather than a page of bad lines. Every member, stream or frame
//! of a file is read (`cat a.gz b.gz`, `pigz`, `pxz`, `pzstd` output), as `zcat`, `xzcat`
//! and `zstdcat` do; damaged or cut-short data is an error, never a short read.

use super::UserCorpusError;
use ruzstd::decoding::errors::{FrameDecoderError, ReadFrameHeaderError};
use ruzstd::decoding::{BlockDecodingStrategy, FrameDecoder};
use std::cell::Cell;
use std::fs::File;
use std::io::{self, BufRead, BufReader, Read};
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

    /// The compression whose magic bytes `head` starts with, if any. A zstd file may also
    /// start with a skippable frame (`pzstd` output does).
    fn sniff(head: &[u8]) -> Compression {
        if is_zstd_skippable_frame(head) {
            return Compression::Zstd;
        }
        [Compression::Gzip, Compression::Xz, Compression::Zstd]
            .into_iter()
            .find(|c| head.starts_with(c.magic()))
            .unwrap_or(Compression::None)
    }
}

/// Whether `head` starts with the magic number of a zstd skippable frame, 0x184D2A50 to
/// 0x184D2A5F little-endian.
fn is_zstd_skippable_frame(head: &[u8]) -> bool {
    matches!(head, [low, 0x2a, 0x4d, 0x18, ..] if low & 0xf0 == 0x50)
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
            // Every frame of the file, as `zstdcat` reads it. The first frame's header is read
            // here, so that data that only starts like zstd fails now, saying so.
            Compression::Zstd => match ZstdFrames::new(BufReader::with_capacity(BUFFER, raw)) {
                Ok(frames) => Box::new(frames),
                Err(e) if os_failed.get() => return Err(io(e)),
                Err(e) => {
                    return Err(UserCorpusError::Decompress {
                        path: path.to_path_buf(),
                        detail: format!("cannot start the zstd decoder: {e}"),
                        fix: "check that the file is a zstd file (`zstd -t FILE`)".into(),
                    })
                }
            },
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

/// Every frame of a zstd stream, one after the other, as one `Read`: what `zstdcat` reads.
/// Written here because ruzstd has no such reader (its `StreamingDecoder` stops after the
/// first frame). Skippable frames are skipped; each frame's content checksum, when the frame
/// has one, is compared with the content decoded (ruzstd computes it but does not compare);
/// the data may end only where a frame ends. Every failure is an error (`UnexpectedEof`
/// where the data ends early, `InvalidData` for damage, or the source's own), so that a
/// damaged or cut-short file never reads as a short one.
struct ZstdFrames<R: BufRead> {
    source: R,
    decoder: FrameDecoder,
    /// Whether a frame has been started and not yet read to its end.
    in_frame: bool,
}

impl<R: BufRead> ZstdFrames<R> {
    /// Starts the first frame (after any skippable ones).
    fn new(source: R) -> io::Result<Self> {
        let mut frames = ZstdFrames {
            source,
            decoder: FrameDecoder::new(),
            in_frame: false,
        };
        frames.next_frame()?;
        Ok(frames)
    }

    /// Starts the next frame, skipping skippable frames; false at the end of the data.
    fn next_frame(&mut self) -> io::Result<bool> {
        loop {
            if self.source.fill_buf()?.is_empty() {
                return Ok(false);
            }
            // A fresh decoder for each frame: ruzstd checks a window size against its 100 MiB
            // limit only when a decoder is reused, and `zstd --long` writes 128 MiB windows
            // (the C decoder's default limit), which a first frame gets through; every frame
            // is read alike this way. The decoder's buffers grow with the data, not the header.
            self.decoder = FrameDecoder::new();
            match self.decoder.init(&mut self.source) {
                Ok(()) => {
                    self.in_frame = true;
                    return Ok(true);
                }
                Err(FrameDecoderError::ReadFrameHeaderError(ReadFrameHeaderError::SkipFrame {
                    length,
                    ..
                })) => {
                    let length = u64::from(length);
                    let skipped = io::copy(&mut (&mut self.source).take(length), &mut io::sink())?;
                    if skipped < length {
                        return Err(io::Error::new(
                            io::ErrorKind::UnexpectedEof,
                            "the data ends inside a skippable zstd frame",
                        ));
                    }
                }
                Err(e) => return Err(invalid_zstd(e)),
            }
        }
    }

    /// At the end of a frame's content: its checksum, if it has one, must match.
    fn check_frame(&self) -> io::Result<()> {
        let Some(stored) = self.decoder.get_checksum_from_data() else {
            return Ok(());
        };
        match self.decoder.get_calculated_checksum() {
            Some(computed) if computed == stored => Ok(()),
            computed => Err(io::Error::new(
                io::ErrorKind::InvalidData,
                format!(
                    "a frame's content checksum does not match: {stored:08x} stored, {} computed",
                    computed.map_or("none".to_string(), |c| format!("{c:08x}"))
                ),
            )),
        }
    }
}

impl<R: BufRead> Read for ZstdFrames<R> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        if buf.is_empty() {
            return Ok(0);
        }
        loop {
            if !self.in_frame && !self.next_frame()? {
                return Ok(0);
            }
            // Decodes blocks until `buf` can be filled or the frame ends (the decoder keeps a
            // window of the output back until then), as ruzstd's `StreamingDecoder` does.
            let decoder = &mut self.decoder;
            while decoder.can_collect() < buf.len() && !decoder.is_finished() {
                let wanted = buf.len() - decoder.can_collect();
                decoder
                    .decode_blocks(&mut self.source, BlockDecodingStrategy::UptoBytes(wanted))
                    .map_err(invalid_zstd)?;
            }
            let n = decoder.read(buf)?;
            if n > 0 {
                return Ok(n);
            }
            // Nothing left to collect: the frame is decoded (checksum included) and drained.
            debug_assert!(decoder.is_finished());
            self.check_frame()?;
            self.in_frame = false;
        }
    }
}

/// ruzstd's error as an `io::Error`: the data ending early says so in words (ruzstd's own
/// message for it is a debug dump of a nested `UnexpectedEof`).
fn invalid_zstd(e: FrameDecoderError) -> io::Error {
    let mut cause: Option<&(dyn std::error::Error + 'static)> = Some(&e);
    while let Some(c) = cause {
        if c.downcast_ref::<io::Error>()
            .is_some_and(|c| c.kind() == io::ErrorKind::UnexpectedEof)
        {
            return io::Error::new(
                io::ErrorKind::UnexpectedEof,
                "the data ends inside a zstd frame",
            );
        }
        cause = c.source();
    }
    io::Error::new(io::ErrorKind::InvalidData, e)
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

    #[test]
    fn concatenated_zstd_frames_read_as_one_corpus() {
        let dir = tempfile::tempdir().unwrap();
        let a = write(dir.path(), "a.zst", "\u{feff}Hallo\tHello\n".as_bytes());
        let b = write(dir.path(), "b.zst", b"Danke\tThanks");
        let mut both = std::fs::read(&a).unwrap();
        both.extend(std::fs::read(&b).unwrap());
        let f = dir.path().join("x.de-en.tsv.zst");
        std::fs::write(&f, both).unwrap();
        assert_eq!(
            records(&corpus(CorpusFormat::Tsv), &[f]),
            [
                pair("Hallo", "Hello", "de", "en"),
                pair("Danke", "Thanks", "de", "en")
            ]
        );
    }

    /// A zstd skippable frame: a magic number from 0x184D2A50 to 0x184D2A5F, the length of
    /// its content (little-endian), the content.
    fn skippable_frame(magic: u32, content: &[u8]) -> Vec<u8> {
        let mut frame = magic.to_le_bytes().to_vec();
        frame.extend((content.len() as u32).to_le_bytes());
        frame.extend(content);
        frame
    }

    /// `pzstd` writes a skippable frame before each frame; the file may start with one.
    #[test]
    fn skippable_zstd_frames_before_and_between_frames_are_skipped() {
        let dir = tempfile::tempdir().unwrap();
        let a = write(dir.path(), "a.zst", b"Hallo\tHello\n");
        let b = write(dir.path(), "b.zst", b"Danke\tThanks\n");
        let mut file = skippable_frame(0x184D_2A50, &[0x28, 0xb5, 0x2f, 0xfd, 1, 2, 3]);
        file.extend(std::fs::read(&a).unwrap());
        file.extend(skippable_frame(0x184D_2A5F, b""));
        file.extend(skippable_frame(0x184D_2A57, &[0xff; 300]));
        file.extend(std::fs::read(&b).unwrap());
        file.extend(skippable_frame(0x184D_2A5A, b"trailing"));
        let f = dir.path().join("x.de-en.tsv.zst");
        std::fs::write(&f, &file).unwrap();
        let c = corpus(CorpusFormat::Tsv);
        assert_eq!(
            records(&c, std::slice::from_ref(&f)),
            [
                pair("Hallo", "Hello", "de", "en"),
                pair("Danke", "Thanks", "de", "en")
            ]
        );

        // A skippable frame cut short is damage, not the end of the file.
        std::fs::write(&f, &file[..file.len() - 3]).unwrap();
        let msg = error(&c, &[f]);
        assert!(
            msg.contains("zstd data is damaged or cut short after line 2"),
            "{msg}"
        );
        assert!(msg.contains("ends inside a skippable zstd frame"), "{msg}");
    }

    /// Raw (stored) blocks decode whatever bytes they hold: a changed byte in one is found
    /// only by the frame's content checksum, which must fail the read.
    #[test]
    fn a_changed_byte_in_a_checksummed_zstd_frame_is_an_error() {
        let dir = tempfile::tempdir().unwrap();
        let (text, _) = many_lines();
        let mut bytes = ruzstd::encoding::compress_to_vec(
            text.as_bytes(),
            ruzstd::encoding::CompressionLevel::Uncompressed,
        );
        // The frame header's descriptor says the frame ends in a content checksum.
        assert_ne!(bytes[4] & 0x04, 0, "no checksum");
        let middle = bytes.len() / 2;
        assert!(bytes[middle].is_ascii_alphanumeric());
        bytes[middle] ^= 0x01;
        let f = dir.path().join("flipped.de-en.tsv.zst");
        std::fs::write(&f, &bytes).unwrap();
        let msg = error(&corpus(CorpusFormat::Tsv), &[f]);
        assert!(
            msg.contains("flipped.de-en.tsv.zst: the zstd data is damaged or cut short"),
            "{msg}"
        );
        assert!(msg.contains("checksum does not match"), "{msg}");

        // The same bytes compressed: the change is an error, whichever check finds it.
        let mut bytes = ruzstd::encoding::compress_to_vec(
            text.as_bytes(),
            ruzstd::encoding::CompressionLevel::Fastest,
        );
        let middle = bytes.len() / 2;
        bytes[middle] ^= 0x10;
        let f = dir.path().join("flipped2.de-en.tsv.zst");
        std::fs::write(&f, &bytes).unwrap();
        let msg = error(&corpus(CorpusFormat::Tsv), &[f]);
        assert!(msg.contains("zstd data is damaged or cut short"), "{msg}");
    }

    #[test]
    fn a_file_that_only_starts_like_zstd_cannot_start_the_decoder() {
        let dir = tempfile::tempdir().unwrap();
        let f = dir.path().join("magic.de-en.tsv.zst");
        std::fs::write(&f, [0x28, 0xb5, 0x2f, 0xfd]).unwrap();
        let msg = error(&corpus(CorpusFormat::Tsv), &[f]);
        assert!(
            msg.contains("magic.de-en.tsv.zst: cannot start the zstd decoder"),
            "{msg}"
        );
        assert!(msg.contains("the data ends inside a zstd frame"), "{msg}");
        assert!(msg.contains("zstd -t FILE"), "{msg}");
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
