//! Streaming readers for a corpus of the user's own files (`data.corpora.NAME.files` with a
//! `format`): tab-separated columns, OPUS/Moses aligned files, JSON lines, plain text and
//! Parquet, each optionally compressed (gzip, xz, zstd: `open.rs`).
//!
//! [`resolve_files`] expands the recipe's patterns into files; [`read`] then streams every
//! example of those files, in a fixed order, to a callback, never holding a whole file in
//! memory: a corpus may be far larger than memory, and the consumer batches the records
//! itself. Every error names the file and the line (or Parquet row) and says how to fix it;
//! a malformed line stops the read unless the recipe says `on_bad_line: skip`, when it is
//! counted in the [`ReadReport`] instead.

mod jsonl;
mod moses;
mod open;
#[cfg(feature = "parquet")]
#[doc(hidden)]
pub mod parquet;
mod text;
mod tsv;

use crate::records::NliLabel;
use harness_recipe::schema::{Corpus, CorpusFormat, CorpusKind, OnBadLine};
use std::path::{Path, PathBuf};
use std::sync::atomic::AtomicU64;

/// One example read from a user's file. Strings are owned (the consumer batches them for
/// parallel tokenisation).
#[derive(Debug, Clone, PartialEq)]
pub enum Record {
    /// A translation pair and its languages (source first).
    Pair {
        source: String,
        target: String,
        source_lang: String,
        target_lang: String,
    },
    /// An NLI premise/hypothesis pair with its gold label.
    Nli {
        premise: String,
        hypothesis: String,
        label: NliLabel,
    },
    /// A conversation turn: a message and its response.
    Conversation { message: String, response: String },
    /// Running text: `document` counts documents from 0 over the whole corpus (a blank line
    /// or a new file starts the next one).
    Text {
        sentence: String,
        document: u64,
        lang: Option<String>,
    },
    /// A text with its class.
    Labelled { text: String, label: String },
}

/// Where a record came from (for errors and progress).
#[derive(Debug, Clone)]
pub struct Place {
    /// The file (for a Moses pair, the source-side file).
    pub path: PathBuf,
    /// 1-based line; for Parquet the row, 1-based, over the file.
    pub line: u64,
}

/// What one pass read.
#[derive(Debug, Clone, Default, serde::Serialize)]
pub struct ReadReport {
    /// Records passed to the callback.
    pub records: u64,
    /// Lines (Parquet: rows) read, over all files; a Moses pair counts the lines of both.
    pub lines: u64,
    /// Bad lines skipped under `on_bad_line: skip` (a Moses line pair counts once).
    pub skipped: u64,
    /// `file:line: why` of the first skipped line.
    pub first_skipped: Option<String>,
    /// Each file read, in the order read.
    pub files: Vec<FileReport>,
}

/// One file of a pass.
#[derive(Debug, Clone, serde::Serialize)]
pub struct FileReport {
    pub path: PathBuf,
    /// Size on disk (compressed, where it is).
    pub bytes: u64,
    /// Lines (Parquet: rows) read from it.
    pub lines: u64,
}

/// Anything that goes wrong finding or reading a user's corpus files. Each message names
/// the file, the line where there is one, and the fix.
#[derive(Debug, thiserror::Error)]
pub enum UserCorpusError {
    /// A malformed line (or Parquet row) under `on_bad_line: error`.
    #[error("{}:{line}: {detail}. Fix: {fix}, or set `on_bad_line: skip` on the corpus to skip and count such lines", path.display())]
    BadLine {
        path: PathBuf,
        line: u64,
        detail: String,
        fix: String,
    },

    /// The operating system refused to open or read a file.
    #[error("{}: {source}", path.display())]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },

    /// A `files` pattern that matches no regular file.
    #[error("`files` pattern `{pattern}` matches no file in {}{hint}. Fix: check the pattern and the folder (a relative path is relative to the recipe's folder; `~/` is your home folder)", folder.display())]
    NoMatch {
        pattern: String,
        folder: PathBuf,
        /// Why, where more can be said (`` (the folder does not exist)``), else empty.
        hint: String,
    },

    /// A compressed file that is not what its name says, or is damaged or cut short.
    #[error("{}: {detail}. Fix: {fix}", path.display())]
    Decompress {
        path: PathBuf,
        detail: String,
        fix: String,
    },

    /// The languages of a pair of files cannot be told or disagree with the recipe.
    #[error("{}: {detail}. Fix: {fix}", path.display())]
    Languages {
        path: PathBuf,
        detail: String,
        fix: String,
    },

    /// A Moses file whose name does not say its pair, or whose partner is missing.
    #[error("{}: {detail}. Fix: {fix}", path.display())]
    Moses {
        path: PathBuf,
        detail: String,
        fix: String,
    },

    /// The two files of a Moses pair have different line counts.
    #[error("{} ended after line {lines} but {} goes on: the Moses pair is not line-aligned. Fix: re-download both files, or align them so that line N of one translates line N of the other", shorter.display(), longer.display())]
    Unaligned {
        shorter: PathBuf,
        longer: PathBuf,
        lines: u64,
    },

    /// A whole-file problem of a Parquet file (unreadable footer, a missing column...).
    #[error("{}{}: {detail}. Fix: {fix}", path.display(), at.as_deref().map(|a| format!(" ({a})")).unwrap_or_default())]
    Parquet {
        path: PathBuf,
        /// `row group G, row R` where known.
        at: Option<String>,
        detail: String,
        fix: String,
    },

    /// The corpus's description cannot be read this way (normally caught by the recipe
    /// check: a format that cannot hold the kind, a `fields` value of the wrong shape).
    #[error("corpus: {detail}. Fix: {fix}")]
    Spec { detail: String, fix: String },

    /// The callback asked to stop; its message.
    #[error("{0}")]
    Stopped(String),
}

impl UserCorpusError {
    fn io(path: &Path, source: std::io::Error) -> Self {
        UserCorpusError::Io {
            path: path.to_path_buf(),
            source,
        }
    }
}

/// The kind a corpus's files hold: `corpus.kind`, else `text` for the text format, else
/// `pairs`.
pub fn kind_of(corpus: &Corpus) -> CorpusKind {
    corpus.kind.unwrap_or(match corpus.format {
        Some(CorpusFormat::Text) => CorpusKind::Text,
        _ => CorpusKind::Pairs,
    })
}

/// Expands `corpus.files` (globs with `*`, `?`, `[...]`, `{a,b}` alternatives; a leading
/// `~/` is $HOME; relative paths are relative to `base`) into a sorted, de-duplicated list
/// of regular files. A pattern that matches nothing is an error naming the pattern and the
/// folder searched.
pub fn resolve_files(corpus: &Corpus, base: &Path) -> Result<Vec<PathBuf>, UserCorpusError> {
    let mut out = Vec::new();
    for pattern in &corpus.files {
        let found = resolve_pattern(pattern, base)?;
        out.extend(found);
    }
    out.sort();
    out.dedup();
    Ok(out)
}

/// The regular files one `files` entry matches (an error if none).
fn resolve_pattern(pattern: &str, base: &Path) -> Result<Vec<PathBuf>, UserCorpusError> {
    let spec = |detail: String| UserCorpusError::Spec {
        detail,
        fix: "write the path as a glob: `*`, `?`, `[abc]` and `{a,b}` are special".into(),
    };
    let expanded = if let Some(rest) = pattern.strip_prefix("~/") {
        let home = std::env::var_os("HOME").ok_or_else(|| UserCorpusError::Spec {
            detail: format!("`files` pattern `{pattern}` starts with `~/` but HOME is not set"),
            fix: "write the path in full".into(),
        })?;
        format!("{}/{rest}", PathBuf::from(home).display())
    } else {
        pattern.to_string()
    };
    // The base folder is literal text: its own `[` or `*` must not act as wildcards.
    let base_text = base.to_str().ok_or_else(|| UserCorpusError::Spec {
        detail: format!(
            "the recipe's folder {} is not UTF-8, so `{pattern}` cannot be matched under it",
            base.display()
        ),
        fix: "give `files` as absolute paths".into(),
    })?;
    let options = glob::MatchOptions {
        case_sensitive: true,
        // As a shell does: `*` stays inside one folder and does not pick up hidden files.
        require_literal_separator: true,
        require_literal_leading_dot: true,
    };
    let mut found = Vec::new();
    let mut first_folder = None;
    let mut only_folders = false;
    for alternative in expand_braces(&expanded) {
        let absolute = Path::new(&alternative).is_absolute();
        let full = if absolute {
            alternative.clone()
        } else {
            format!(
                "{}/{alternative}",
                glob::Pattern::escape(base_text).trim_end_matches('/')
            )
        };
        if first_folder.is_none() {
            first_folder = Some(literal_folder(&alternative, base));
        }
        let paths = glob::glob_with(&full, options)
            .map_err(|e| spec(format!("`files` pattern `{pattern}`: {e}")))?;
        for entry in paths {
            let path = entry.map_err(|e| {
                let path = e.path().to_path_buf();
                UserCorpusError::io(&path, e.into())
            })?;
            // `is_file` follows symbolic links: a link to a file is read like the file.
            if path.is_file() {
                found.push(path);
            } else {
                only_folders = true;
            }
        }
    }
    if found.is_empty() {
        let folder = first_folder.unwrap_or_else(|| base.to_path_buf());
        let hint = if !folder.is_dir() {
            " (the folder does not exist)".to_string()
        } else if only_folders {
            " (it matches only folders; name the files inside, e.g. `DIR/*.tsv`)".to_string()
        } else {
            String::new()
        };
        return Err(UserCorpusError::NoMatch {
            pattern: pattern.to_string(),
            folder,
            hint,
        });
    }
    Ok(found)
}

/// The folder a pattern searches: its leading components without wildcards, under `base`
/// when relative.
fn literal_folder(pattern: &str, base: &Path) -> PathBuf {
    let path = Path::new(pattern);
    let mut folder = if path.is_absolute() {
        PathBuf::new()
    } else {
        base.to_path_buf()
    };
    let components: Vec<_> = path.components().collect();
    for (i, c) in components.iter().enumerate() {
        let text = c.as_os_str().to_string_lossy();
        let last = i + 1 == components.len();
        if last || text.contains(['*', '?', '[']) {
            break;
        }
        folder.push(c);
    }
    folder
}

/// Shell-style `{a,b}` alternatives, nested ones too, expanded into plain glob patterns. A
/// brace without a comma inside or without its closing brace is literal text, as in a shell.
fn expand_braces(pattern: &str) -> Vec<String> {
    let bytes = pattern.as_bytes();
    let mut start = 0;
    while let Some(open) = pattern[start..].find('{').map(|i| i + start) {
        // Find the matching close and the top-level commas between.
        let mut depth = 0;
        let mut commas = Vec::new();
        let mut close = None;
        for (i, &b) in bytes.iter().enumerate().skip(open) {
            match b {
                b'{' => depth += 1,
                b'}' => {
                    depth -= 1;
                    if depth == 0 {
                        close = Some(i);
                        break;
                    }
                }
                b',' if depth == 1 => commas.push(i),
                _ => {}
            }
        }
        let Some(close) = close else { break };
        if commas.is_empty() {
            start = open + 1;
            continue;
        }
        let (head, tail) = (&pattern[..open], &pattern[close + 1..]);
        let mut cuts = vec![open];
        cuts.extend(&commas);
        cuts.push(close);
        let mut out = Vec::new();
        for w in cuts.windows(2) {
            let alternative = &pattern[w[0] + 1..w[1]];
            out.extend(expand_braces(&format!("{head}{alternative}{tail}")));
        }
        return out;
    }
    vec![pattern.to_string()]
}

/// Reads every record of `files` in a fixed order (files in the given order; for Moses, the
/// pairs of files in the order of their first file), calling `visit` for each. `bytes_read`
/// is increased as compressed bytes are consumed (for a progress bar's bytes/s and ETA). A
/// bad line is an error ([`UserCorpusError::BadLine`]) unless `corpus.on_bad_line` is
/// `skip`, then it is counted in the report. `visit` returning Err stops the read and that
/// error is returned (wrapped in [`UserCorpusError::Stopped`]).
pub fn read(
    corpus: &Corpus,
    files: &[PathBuf],
    bytes_read: &AtomicU64,
    visit: &mut dyn FnMut(Record, &Place) -> Result<(), String>,
) -> Result<ReadReport, UserCorpusError> {
    let format = corpus.format.ok_or_else(|| UserCorpusError::Spec {
        detail: "`files` are given without a `format`".into(),
        fix: "add `format: tsv` (or `moses`, `jsonl`, `parquet`, `text`)".into(),
    })?;
    let kind = kind_of(corpus);
    check_kind(format, kind)?;
    let mut pass = Pass {
        corpus,
        kind,
        report: ReadReport::default(),
        bytes_read,
        visit,
    };
    match format {
        CorpusFormat::Tsv => tsv::read(&mut pass, files)?,
        CorpusFormat::Moses => moses::read(&mut pass, files)?,
        CorpusFormat::Jsonl => jsonl::read(&mut pass, files)?,
        CorpusFormat::Text => text::read(&mut pass, files)?,
        #[cfg(feature = "parquet")]
        CorpusFormat::Parquet => parquet::read(&mut pass, files)?,
        // The parquet crate is a long build, so it is an opt-in feature of harness-data.
        #[cfg(not(feature = "parquet"))]
        CorpusFormat::Parquet => {
            return Err(UserCorpusError::Spec {
                detail: "this build of harness reads no Parquet files (harness-data's `parquet` feature is off)".into(),
                fix: "build with the feature (`cargo build --features harness-data/parquet`), or convert the files to JSON lines (`format: jsonl`)".into(),
            })
        }
    }
    Ok(pass.report)
}

/// The same rule as the recipe check: which formats can hold which kinds.
fn check_kind(format: CorpusFormat, kind: CorpusKind) -> Result<(), UserCorpusError> {
    let fits = match format {
        CorpusFormat::Text => kind == CorpusKind::Text,
        CorpusFormat::Moses => matches!(kind, CorpusKind::Pairs | CorpusKind::Conversation),
        _ => kind != CorpusKind::Text,
    };
    if fits {
        Ok(())
    } else {
        Err(UserCorpusError::Spec {
            detail: format!(
                "the `{}` format cannot hold `{}` examples",
                format.name(),
                kind.name()
            ),
            fix: "running text is read from `format: text`; Moses files hold `pairs` or `conversation`".into(),
        })
    }
}

/// A malformed line: what is wrong and how to fix it (the reader adds file and line).
pub(crate) struct Bad {
    detail: String,
    fix: String,
}

impl Bad {
    pub(crate) fn new(detail: impl Into<String>, fix: impl Into<String>) -> Self {
        Bad {
            detail: detail.into(),
            fix: fix.into(),
        }
    }

    /// A line that is not UTF-8 at byte `offset`.
    pub(crate) fn not_utf8(offset: usize) -> Self {
        Bad::new(
            format!("not UTF-8 (at byte {offset} of the line)"),
            "convert the file with `iconv -f ENCODING -t UTF-8`",
        )
    }
}

/// The state of one pass that every format shares: the corpus, the report, the callback.
pub(crate) struct Pass<'a> {
    corpus: &'a Corpus,
    kind: CorpusKind,
    report: ReadReport,
    bytes_read: &'a AtomicU64,
    visit: &'a mut dyn FnMut(Record, &Place) -> Result<(), String>,
}

impl Pass<'_> {
    /// A bad line: an error, or under `on_bad_line: skip` counted and passed over.
    fn bad(&mut self, path: &Path, line: u64, bad: Bad) -> Result<(), UserCorpusError> {
        match self.corpus.on_bad_line {
            OnBadLine::Error => Err(UserCorpusError::BadLine {
                path: path.to_path_buf(),
                line,
                detail: bad.detail,
                fix: bad.fix,
            }),
            OnBadLine::Skip => {
                self.report.skipped += 1;
                if self.report.first_skipped.is_none() {
                    self.report.first_skipped =
                        Some(format!("{}:{line}: {}", path.display(), bad.detail));
                }
                Ok(())
            }
        }
    }

    /// Hands one record to the callback.
    fn emit(&mut self, record: Record, place: &Place) -> Result<(), UserCorpusError> {
        self.report.records += 1;
        (self.visit)(record, place).map_err(UserCorpusError::Stopped)
    }

    /// A record, or the bad line it turned out to be.
    fn emit_or_bad(
        &mut self,
        record: Result<Record, Bad>,
        place: &Place,
    ) -> Result<(), UserCorpusError> {
        match record {
            Ok(r) => self.emit(r, place),
            Err(b) => self.bad(&place.path, place.line, b),
        }
    }

    /// Records a file read to its end.
    fn file_done(&mut self, path: &Path, bytes: u64, lines: u64) {
        self.report.lines += lines;
        self.report.files.push(FileReport {
            path: path.to_path_buf(),
            bytes,
            lines,
        });
    }
}

/// A record of a `kind` other than text from its parts (in [`CorpusKind::parts`] order),
/// `names` saying where each part was read from (for messages), and the pair's languages.
pub(crate) fn make_record(
    kind: CorpusKind,
    parts: &[&str],
    names: &[String],
    langs: Option<(&str, &str)>,
) -> Result<Record, Bad> {
    for (part, name) in parts.iter().zip(names) {
        if part.trim().is_empty() {
            return Err(Bad::new(format!("empty {name}"), "remove or fill the line"));
        }
    }
    if let Some((source, target)) = langs {
        if source.trim().is_empty() || target.trim().is_empty() {
            return Err(Bad::new(
                "an empty language code",
                "give every row its source and target language",
            ));
        }
    }
    let owned = |i: usize| parts[i].to_string();
    Ok(match kind {
        CorpusKind::Pairs => {
            let (source_lang, target_lang) = langs.unwrap_or(("", ""));
            Record::Pair {
                source: owned(0),
                target: owned(1),
                source_lang: source_lang.to_string(),
                target_lang: target_lang.to_string(),
            }
        }
        CorpusKind::Nli => Record::Nli {
            premise: owned(0),
            hypothesis: owned(1),
            label: nli_label(parts[2]).ok_or_else(|| {
                Bad::new(
                    format!(
                        "{} is `{}`, not entailment, neutral, contradiction, 0, 1 or 2",
                        names[2], parts[2]
                    ),
                    "write the label as one of those",
                )
            })?,
        },
        CorpusKind::Conversation => Record::Conversation {
            message: owned(0),
            response: owned(1),
        },
        CorpusKind::Labelled => Record::Labelled {
            text: owned(0),
            label: owned(1),
        },
        // Running text never comes through here: `check_kind` keeps it to the text format.
        CorpusKind::Text => Record::Text {
            sentence: owned(0),
            document: 0,
            lang: None,
        },
    })
}

/// An NLI label: a name in any case, or its index (entailment 0, neutral 1, contradiction 2,
/// the order of XNLI and MultiNLI's Hugging Face copies).
pub(crate) fn nli_label(text: &str) -> Option<NliLabel> {
    match text.trim().to_ascii_lowercase().as_str() {
        "entailment" | "0" => Some(NliLabel::Entailment),
        "neutral" | "1" => Some(NliLabel::Neutral),
        "contradiction" | "2" => Some(NliLabel::Contradiction),
        _ => None,
    }
}

/// The fix for a pairs file whose languages cannot be told.
const LANGUAGES_FIX: &str = "give the pair in the recipe (`pairs: [de-en]`, source first), name the file after it (`NAME.de-en.tsv`), or name per-row language fields (`fields: {source_lang: ..., target_lang: ...}`)";

/// How a format cuts one line into an example, given the languages of its file.
pub(crate) type RowFn<'a> = dyn Fn(&str, Option<&(String, String)>) -> Result<Record, Bad> + 'a;

/// Reads every line of `files` in order, one example a line, cut by `row` (given the
/// line and the languages of its file): the loop of the tab-separated and JSON-lines
/// formats, which differ only in how a line is cut.
pub(crate) fn read_rows(
    pass: &mut Pass,
    files: &[PathBuf],
    row: &RowFn,
) -> Result<(), UserCorpusError> {
    let bytes_read = pass.bytes_read;
    for path in files {
        let fixed = file_languages(pass.corpus, pass.kind, path)?;
        let mut lines = open::Lines::open(path, bytes_read)?;
        let mut place = Place {
            path: path.clone(),
            line: 0,
        };
        loop {
            let record = match lines.next_line()? {
                None => break,
                Some(open::Line::NotUtf8(at)) => Err(Bad::not_utf8(at)),
                Some(open::Line::Text(text)) => row(text, fixed.as_ref()),
            };
            place.line = lines.line();
            pass.emit_or_bad(record, &place)?;
        }
        pass.file_done(path, lines.disk_bytes(), lines.line());
    }
    Ok(())
}

/// The languages of a pairs file that its rows do not give: `None` unless the kind is pairs
/// and not both `source_lang` and `target_lang` are fields.
pub(crate) fn file_languages(
    corpus: &Corpus,
    kind: CorpusKind,
    path: &Path,
) -> Result<Option<(String, String)>, UserCorpusError> {
    if kind != CorpusKind::Pairs
        || (corpus.fields.contains_key("source_lang") && corpus.fields.contains_key("target_lang"))
    {
        return Ok(None);
    }
    if let Some(pair) = corpus.pairs.first() {
        return match pair.split_once('-') {
            Some((s, t)) if !s.is_empty() && !t.is_empty() => {
                Ok(Some((s.to_string(), t.to_string())))
            }
            _ => Err(UserCorpusError::Languages {
                path: path.to_path_buf(),
                detail: format!("the recipe's pair `{pair}` is not of the form `de-en`"),
                fix: "write it source first, joined by `-` (`pairs: [de-en]`)".into(),
            }),
        };
    }
    match pair_from_path(path) {
        Some(pair) => Ok(Some(pair)),
        None => Err(UserCorpusError::Languages {
            path: path.to_path_buf(),
            detail: "the languages of this file are not known: neither the recipe nor the file's name gives them".into(),
            fix: LANGUAGES_FIX.into(),
        }),
    }
}

/// A language code in a file name: 2–3 lowercase ASCII letters, optionally `_Script`
/// (`zh_Hans`).
pub(crate) fn is_lang(s: &str) -> bool {
    let (code, script) = match s.split_once('_') {
        Some((c, s)) => (c, Some(s)),
        None => (s, None),
    };
    (2..=3).contains(&code.len())
        && code.bytes().all(|b| b.is_ascii_lowercase())
        && script.is_none_or(|s| !s.is_empty() && s.bytes().all(|b| b.is_ascii_alphabetic()))
}

/// The language pair a name piece ends with (`de-en`, `opus_de-en`, `wmt-zh_Hans-en`).
fn pair_at_end(piece: &str) -> Option<(String, String)> {
    let (before, target) = piece.rsplit_once('-')?;
    if !is_lang(target) {
        return None;
    }
    // The shortest tail of `before` that starts the piece or follows a separator and is a
    // language code: `opus_de` gives `de`, `zh_Hans` stays whole (`Hans` is not a code).
    let starts = before
        .char_indices()
        .filter(|&(_, c)| !c.is_ascii_alphanumeric())
        .map(|(i, c)| i + c.len_utf8())
        .collect::<Vec<_>>();
    starts
        .iter()
        .rev()
        .copied()
        .chain(std::iter::once(0))
        .map(|i| &before[i..])
        .find(|s| is_lang(s))
        .map(|source| (source.to_string(), target.to_string()))
}

/// The language pair a file's path names: a dot-separated piece of its name, else of its
/// folder, that is or ends with `L1-L2` (`opus.de-en.tsv.gz`, `de-en.jsonl`,
/// `wmt_de-en/train.tsv`). Folders further up are not asked: a home folder such as
/// `/home/ab-cd` would pass for a pair.
pub(crate) fn pair_from_path(path: &Path) -> Option<(String, String)> {
    let in_name = |p: &Path| {
        let name = p.file_name()?.to_string_lossy().into_owned();
        name.split('.').find_map(pair_at_end)
    };
    in_name(path).or_else(|| in_name(path.parent()?))
}

/// A `fields` entry's value as a tab-separated column number.
fn column_of(corpus: &Corpus, key: &str) -> Result<Option<usize>, UserCorpusError> {
    match corpus.fields.get(key) {
        None => Ok(None),
        Some(v) => v
            .trim()
            .parse::<usize>()
            .map(Some)
            .map_err(|_| UserCorpusError::Spec {
                detail: format!(
                    "`fields.{key}: {v}`: a tab-separated file's fields are 0-based column numbers"
                ),
                fix: format!("write the column's number (`{key}: \"0\"` for the first)"),
            }),
    }
}

#[cfg(test)]
mod tests;
