//! OPUS's Moses layout (the "Moses" download of opus.nlpl.eu, as written by OpusTools'
//! `opus_read --write_mode moses`): a corpus `NAME` in the pair `L1-L2` is two line-aligned
//! plain-text files `NAME.L1-L2.L1` and `NAME.L1-L2.L2`, line N of one translating line N
//! of the other. Each may also be compressed (`Europarl.de-en.de.gz`).
//!
//! The files are grouped into those pairs by name; each pair is read in lockstep, a line
//! of each at a time, so neither is ever held in memory.

use super::open::{strip_compression, Line, Lines};
use super::{is_lang, make_record, Bad, Pass, Place, UserCorpusError};
use harness_recipe::schema::CorpusKind;
use std::path::{Path, PathBuf};

/// What a Moses file's name says.
#[derive(Debug, PartialEq, Eq)]
struct Name {
    folder: PathBuf,
    stem: String,
    l1: String,
    l2: String,
    /// The language of this file, `l1` or `l2`.
    side: String,
}

/// The fix for a Moses file named otherwise.
const NAME_FIX: &str = "name the two files of a pair `NAME.L1-L2.L1` and `NAME.L1-L2.L2` (OPUS's Moses download: `Europarl.de-en.de` and `Europarl.de-en.en`), or use `format: tsv` for one file of tab-separated columns";

/// Parses `NAME.L1-L2.LX` (after any compression extension); `kind` decides what a language
/// may be: a language code for pairs, any name for conversation turns (`chat.msg-rsp.msg`).
fn parse_name(path: &Path, kind: CorpusKind) -> Result<Name, UserCorpusError> {
    let bad = |detail: String| UserCorpusError::Moses {
        path: path.to_path_buf(),
        detail,
        fix: NAME_FIX.into(),
    };
    let file_name = path
        .file_name()
        .and_then(|n| n.to_str())
        .ok_or_else(|| bad("the file name is not UTF-8".into()))?;
    let name = strip_compression(file_name);
    let shape = || {
        bad(format!(
            "`{name}` is not a Moses file name of the form `NAME.L1-L2.L1` or `NAME.L1-L2.L2`"
        ))
    };
    let (rest, side) = name.rsplit_once('.').ok_or_else(shape)?;
    let (stem, pair) = rest.rsplit_once('.').unwrap_or(("", rest));
    let (l1, l2) = pair.split_once('-').ok_or_else(shape)?;
    let ok = |code: &str| match kind {
        CorpusKind::Pairs => is_lang(code),
        _ => !code.is_empty() && code.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_'),
    };
    if !ok(l1) || !ok(l2) || l1 == l2 {
        return Err(shape());
    }
    if side != l1 && side != l2 {
        return Err(bad(format!(
            "`{name}` ends in `.{side}`, which is neither language of its pair `{pair}`"
        )));
    }
    Ok(Name {
        folder: path.parent().map(Path::to_path_buf).unwrap_or_default(),
        stem: stem.to_string(),
        l1: l1.to_string(),
        l2: l2.to_string(),
        side: side.to_string(),
    })
}

/// The files of one corpus in one pair, as found so far.
struct Group {
    name: Name,
    l1: Option<PathBuf>,
    l2: Option<PathBuf>,
}

impl Group {
    fn same_pair(&self, other: &Name) -> bool {
        self.name.folder == other.folder
            && self.name.stem == other.stem
            && self.name.l1 == other.l1
            && self.name.l2 == other.l2
    }
}

/// Groups `files` into pairs (`NAME`, the `L1` file, the `L2` file), in the order of each
/// pair's first file.
fn group(
    files: &[PathBuf],
    kind: CorpusKind,
) -> Result<Vec<(Name, PathBuf, PathBuf)>, UserCorpusError> {
    let mut groups: Vec<Group> = Vec::new();
    for path in files {
        let name = parse_name(path, kind)?;
        let at = match groups.iter().position(|g| g.same_pair(&name)) {
            Some(at) => at,
            None => {
                groups.push(Group {
                    name: Name {
                        side: String::new(),
                        folder: name.folder.clone(),
                        stem: name.stem.clone(),
                        l1: name.l1.clone(),
                        l2: name.l2.clone(),
                    },
                    l1: None,
                    l2: None,
                });
                groups.len() - 1
            }
        };
        let g = &mut groups[at];
        let slot = if name.side == g.name.l1 {
            &mut g.l1
        } else {
            &mut g.l2
        };
        if let Some(other) = slot {
            return Err(UserCorpusError::Moses {
                path: path.clone(),
                detail: format!(
                    "{} also holds the `{}` side of this pair",
                    other.display(),
                    name.side
                ),
                fix: "keep one copy of each file in `files` (a compressed and an uncompressed copy count as two)".into(),
            });
        }
        *slot = Some(path.clone());
    }
    let mut pairs = Vec::with_capacity(groups.len());
    for g in groups {
        let (only, missing) = match (g.l1, g.l2) {
            (Some(a), Some(b)) => {
                pairs.push((g.name, a, b));
                continue;
            }
            (Some(only), None) => (only, &g.name.l2),
            (None, Some(only)) => (only, &g.name.l1),
            (None, None) => continue,
        };
        let n = &g.name;
        let dot = if n.stem.is_empty() { "" } else { "." };
        let partner = n
            .folder
            .join(format!("{}{dot}{}-{}.{missing}", n.stem, n.l1, n.l2));
        return Err(UserCorpusError::Moses {
            path: only,
            detail: format!(
                "its partner {} (the `{missing}` side, possibly compressed) is not among the files",
                partner.display()
            ),
            fix: "add the partner to `files` (a pattern such as `NAME.L1-L2.*` takes both), or download it".into(),
        });
    }
    Ok(pairs)
}

/// Reads every pair of files in lockstep.
pub(super) fn read(pass: &mut Pass, files: &[PathBuf]) -> Result<(), UserCorpusError> {
    let bytes_read = pass.bytes_read;
    for (name, l1_path, l2_path) in group(files, pass.kind)? {
        // `pairs: [X-Y]` makes X the source, whichever way round the download names them.
        let swap = match pass.corpus.pairs.first() {
            None => false,
            Some(p) if *p == format!("{}-{}", name.l1, name.l2) => false,
            Some(p) if *p == format!("{}-{}", name.l2, name.l1) => true,
            Some(p) => {
                return Err(UserCorpusError::Languages {
                    path: l1_path,
                    detail: format!(
                        "the recipe's pair `{p}` is not this file's pair `{}-{}`",
                        name.l1, name.l2
                    ),
                    fix: format!(
                        "set `pairs: [{}-{}]` (or `[{}-{}]` for the other direction), or read these files in a corpus of their own",
                        name.l1, name.l2, name.l2, name.l1
                    ),
                })
            }
        };
        let (source, target, source_lang, target_lang) = if swap {
            (l2_path, l1_path, name.l2, name.l1)
        } else {
            (l1_path, l2_path, name.l1, name.l2)
        };
        let names = [
            format!("sentence in the `{source_lang}` file"),
            format!("sentence in the `{target_lang}` file"),
        ];
        let mut src = Lines::open(&source, bytes_read)?;
        let mut tgt = Lines::open(&target, bytes_read)?;
        let mut place = Place {
            path: source.clone(),
            line: 0,
        };
        // Lines of each side read so far (the same on both sides while they are aligned).
        let mut line = 0u64;
        loop {
            // Each side's line is turned into owned text (or its fault) before the next read.
            let (a, b) = match (src.next_line()?, tgt.next_line()?) {
                (None, None) => break,
                (Some(_), None) => {
                    return Err(UserCorpusError::Unaligned {
                        shorter: target,
                        longer: source,
                        lines: line,
                    })
                }
                (None, Some(_)) => {
                    return Err(UserCorpusError::Unaligned {
                        shorter: source,
                        longer: target,
                        lines: line,
                    })
                }
                (Some(a), Some(b)) => (side(a), side(b)),
            };
            line += 1;
            place.line = line;
            let record = match (a, b) {
                (Err(bad), _) => Err((&source, bad)),
                (_, Err(bad)) => Err((&target, bad)),
                (Ok(a), Ok(b)) => make_record(
                    pass.kind,
                    &[a, b],
                    &names,
                    Some((&source_lang, &target_lang)),
                )
                .map_err(|bad| (&source, bad)),
            };
            match record {
                Ok(r) => pass.emit(r, &place)?,
                Err((path, bad)) => pass.bad(path, line, bad)?,
            }
        }
        pass.file_done(&source, src.disk_bytes(), src.line());
        pass.file_done(&target, tgt.disk_bytes(), tgt.line());
    }
    Ok(())
}

/// One side's line as text, or why it is bad.
fn side(line: Line<'_>) -> Result<&str, Bad> {
    match line {
        Line::Text(t) => Ok(t),
        Line::NotUtf8(at) => Err(Bad::not_utf8(at)),
    }
}

#[cfg(test)]
mod tests {
    use super::super::tests::{corpus, error, pair, read_all, records, write};
    use super::super::{Record, UserCorpusError};
    use harness_recipe::schema::{CorpusFormat, CorpusKind, OnBadLine};

    #[test]
    fn a_pair_of_files_reads_in_lockstep() {
        let dir = tempfile::tempdir().unwrap();
        // Given in any order, the pairs come in the order of their first file; sides may be
        // compressed differently.
        let files = [
            write(dir.path(), "News.fr-en.en", b"Hello\n"),
            write(dir.path(), "Europarl.de-en.en.gz", b"Hello world\nThanks\n"),
            write(dir.path(), "Europarl.de-en.de", b"Hallo Welt\r\nDanke\n"),
            write(dir.path(), "News.fr-en.fr.xz", b"Bonjour\n"),
        ];
        let c = corpus(CorpusFormat::Moses);
        let (got, report) = read_all(&c, &files).unwrap();
        let recs: Vec<Record> = got.iter().map(|(r, _)| r.clone()).collect();
        assert_eq!(
            recs,
            [
                pair("Bonjour", "Hello", "fr", "en"),
                pair("Hallo Welt", "Hello world", "de", "en"),
                pair("Danke", "Thanks", "de", "en"),
            ]
        );
        assert_eq!(got[2].1.path, files[2], "the place is the source file");
        assert_eq!(got[2].1.line, 2);
        assert_eq!((report.records, report.lines), (3, 6));
        assert_eq!(report.files.len(), 4);
    }

    #[test]
    fn the_recipe_pair_picks_the_source() {
        let dir = tempfile::tempdir().unwrap();
        let files = [
            write(dir.path(), "de-en.de", b"Hallo\n"),
            write(dir.path(), "de-en.en", b"Hello\n"),
        ];
        let mut c = corpus(CorpusFormat::Moses);
        c.pairs = vec!["en-de".into()];
        assert_eq!(records(&c, &files), [pair("Hello", "Hallo", "en", "de")]);
        c.pairs = vec!["fr-en".into()];
        let msg = error(&c, &files);
        assert!(
            msg.contains("de-en.de: the recipe's pair `fr-en` is not this file's pair `de-en`"),
            "{msg}"
        );
    }

    #[test]
    fn conversation_turns() {
        let dir = tempfile::tempdir().unwrap();
        let files = [
            write(dir.path(), "chat.message-response.message", b"hi\n"),
            write(dir.path(), "chat.message-response.response", b"hello\n"),
        ];
        let mut c = corpus(CorpusFormat::Moses);
        c.kind = Some(CorpusKind::Conversation);
        assert_eq!(
            records(&c, &files),
            [Record::Conversation {
                message: "hi".into(),
                response: "hello".into()
            }]
        );
    }

    #[test]
    fn unequal_line_counts_name_both_files_and_the_line() {
        let dir = tempfile::tempdir().unwrap();
        let files = [
            write(dir.path(), "E.de-en.de", b"a\nb\nc\n"),
            write(dir.path(), "E.de-en.en", b"A\nB\n"),
        ];
        let e = read_all(&corpus(CorpusFormat::Moses), &files).unwrap_err();
        assert!(
            matches!(e, UserCorpusError::Unaligned { lines: 2, .. }),
            "{e:?}"
        );
        let msg = e.to_string();
        assert!(
            msg.contains(&format!(
                "{} ended after line 2 but {} goes on",
                files[1].display(),
                files[0].display()
            )),
            "{msg}"
        );
        assert!(msg.contains("re-download"), "{msg}");
    }

    #[test]
    fn a_missing_partner_or_a_bad_name_is_an_error() {
        let dir = tempfile::tempdir().unwrap();
        let c = corpus(CorpusFormat::Moses);
        let de = write(dir.path(), "E.de-en.de.gz", b"a\n");
        let msg = error(&c, std::slice::from_ref(&de));
        assert!(msg.contains("E.de-en.de.gz: its partner"), "{msg}");
        assert!(
            msg.contains(&dir.path().join("E.de-en.en").display().to_string()),
            "{msg}"
        );

        let odd = write(dir.path(), "E.de.txt", b"a\n");
        let msg = error(&c, &[odd]);
        assert!(
            msg.contains("E.de.txt: `E.de.txt` is not a Moses file name"),
            "{msg}"
        );
        let odd = write(dir.path(), "E.de-en.fr", b"a\n");
        let msg = error(&c, &[odd]);
        assert!(
            msg.contains("neither language of its pair `de-en`"),
            "{msg}"
        );

        let plain = write(dir.path(), "E.de-en.de", b"a\n");
        let en = write(dir.path(), "E.de-en.en", b"a\n");
        let msg = error(&c, &[de, plain, en]);
        assert!(msg.contains("also holds the `de` side"), "{msg}");
    }

    #[test]
    fn bad_lines_on_either_side() {
        let dir = tempfile::tempdir().unwrap();
        let files = [
            write(dir.path(), "E.de-en.de", b"a\nb\n\nd\n"),
            write(dir.path(), "E.de-en.en", b"A\n\xc3(\nC\nD\n"),
        ];
        let mut c = corpus(CorpusFormat::Moses);
        let msg = error(&c, &files);
        assert!(
            msg.contains(&format!("{}:2: not UTF-8", files[1].display())),
            "{msg}"
        );
        c.on_bad_line = OnBadLine::Skip;
        let (got, report) = read_all(&c, &files).unwrap();
        assert_eq!(
            got.iter()
                .map(|(r, p)| (r.clone(), p.line))
                .collect::<Vec<_>>(),
            [
                (pair("a", "A", "de", "en"), 1),
                (pair("d", "D", "de", "en"), 4)
            ]
        );
        assert_eq!(report.skipped, 2);
        let first = report.first_skipped.unwrap();
        assert!(first.contains("E.de-en.en:2: not UTF-8"), "{first}");
    }
}
