//! Binarization: the one path from a corpus's records to the shards training reads
//! ([`harness_data::shards`], [`crate::streamed`]). One streaming pass reads the records —
//! a corpus of the user's files (`data.corpora.X.files`, `harness_data::user_corpus`) or a
//! shipped dataset already loaded ([`crate::corpora::Loaded`]) —, drops the records that
//! hold an evaluation sentence (the contamination filter, its sentences hashed in memory;
//! a shipped dataset is filtered as it loads), tokenises chunks in parallel over the cores
//! and writes the examples, in record order, into a shard set.
//!
//! A corpus of files is binarized once: its shards go under `HARNESS_HOME/cache/shards/`,
//! keyed by the files' fingerprint, the corpus's settings, the tokenizer, the length limit
//! and the example options, and a second run (or another recipe with the same corpus and
//! tokenizer) reuses them. Never the whole corpus in memory: a chunk of [`CHUNK`] records
//! at a time. A shipped dataset (a few MB, tokenised in seconds) goes into a temporary
//! folder that lives as long as the run.
//!
//! The examples, per kind: a translation pair gets its direction from a seeded stream per
//! language pair (one direction into a decoder language, or `X → eng` when the trainer
//! decodes both), and a fraction `autoencode` of them become `target → target`; a pair, an
//! NLI pair or a conversation turn with a side left empty by tokenising is dropped; a
//! sentence of running text with both neighbours in its document is a (previous,
//! sentence, next) example; a labelled text gets its class's index, classes numbered in
//! order of first appearance (a shipped dataset's in its own order).

use crate::corpora::{CorpusCounts, Loaded};
use crate::data::{Directions, PairExample};
use crate::files_corpus::{FileStamp, FilesCorpus};
use crate::streamed::{pair_tags, ShardKind};
use crate::TrainError;
use harness_data::corpus::EvalSentences;
use harness_data::shards::{Layout, Manifest, ShardWriter};
use harness_data::tokenize::{TextTokenizer, Tokens};
use harness_data::user_corpus::{self, Record};
use harness_recipe::schema::CorpusKind;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use rayon::prelude::*;
use serde::Serialize;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

/// Records tokenised together (in parallel) before they are written in order.
const CHUNK: usize = 1 << 16;

/// How a pair corpus's examples are made (the task's [`crate::objectives::PairOptions`]
/// and the decoder's languages).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct PairSettings {
    pub targets: Vec<String>,
    pub both: bool,
    pub autoencode: f64,
    pub seed: u64,
}

/// A binarized corpus: its shard set's folder, manifest and counts, and whether it was
/// reused.
pub struct Binarized {
    pub dir: PathBuf,
    pub manifest: Manifest,
    pub counts: CorpusCounts,
    /// Translation pairs with no direction into a decoder language (dropped).
    pub untargeted: u64,
    /// A labelled corpus's classes, in the order of their indices.
    pub classes: Vec<String>,
    pub reused: bool,
    /// The temporary folder of a shipped dataset's shards (removed when dropped).
    pub temp: Option<Arc<tempfile::TempDir>>,
}

/// Where a corpus's records come from.
#[derive(Clone, Copy)]
pub enum Source<'a> {
    /// The user's files: read while binarizing, filtered, cached.
    Files(&'a FilesCorpus),
    /// A shipped dataset, loaded (and filtered) already.
    Loaded { name: &'a str, loaded: &'a Loaded },
}

impl Source<'_> {
    fn name(&self) -> &str {
        match self {
            Source::Files(fc) => &fc.name,
            Source::Loaded { name, .. } => name,
        }
    }

    /// The corpus kind of its records.
    pub fn kind(&self) -> CorpusKind {
        match self {
            Source::Files(fc) => fc.kind,
            Source::Loaded { loaded, .. } => match loaded {
                Loaded::Parallel(_) => CorpusKind::Pairs,
                Loaded::Nli(_) => CorpusKind::Nli,
                Loaded::Conversation(_) => CorpusKind::Conversation,
                Loaded::Text(_) => CorpusKind::Text,
                Loaded::Labelled { .. } => CorpusKind::Labelled,
                Loaded::Files(fc) => fc.kind,
            },
        }
    }

    /// Bytes of text to read (the progress bar's total).
    fn bytes(&self) -> u64 {
        let len = |s: &String| s.len() as u64;
        match self {
            Source::Files(fc) => fc.files.iter().map(|f| f.bytes).sum(),
            Source::Loaded { loaded, .. } => match loaded {
                Loaded::Parallel(parts) => parts
                    .iter()
                    .flat_map(|(_, _, p)| p)
                    .map(|b| len(&b.source) + len(&b.target))
                    .sum(),
                Loaded::Conversation(p) => p.iter().map(|b| len(&b.source) + len(&b.target)).sum(),
                Loaded::Nli(p) => p.iter().map(|n| len(&n.premise) + len(&n.hypothesis)).sum(),
                Loaded::Text(docs) => docs.iter().flatten().map(len).sum(),
                Loaded::Labelled { items, .. } => items.iter().map(|(t, _)| len(t)).sum(),
                Loaded::Files(fc) => fc.files.iter().map(|f| f.bytes).sum(),
            },
        }
    }

    /// The classes known before reading (a shipped labelled dataset's, in its order).
    fn classes(&self) -> Vec<String> {
        match self {
            Source::Loaded {
                loaded: Loaded::Labelled { classes, .. },
                ..
            } => classes.clone(),
            _ => Vec::new(),
        }
    }

    /// Reads every record in order, calling `visit`; stops early when `visit` says so.
    fn read(
        &self,
        bytes_read: &AtomicU64,
        visit: &mut dyn FnMut(Record) -> bool,
    ) -> Result<user_corpus::ReadReport, TrainError> {
        let loaded = match self {
            Source::Files(fc) => return fc.read(bytes_read, visit),
            Source::Loaded { loaded, .. } => loaded,
        };
        let mut offer = |r: Record, bytes: usize| {
            bytes_read.fetch_add(bytes as u64, Ordering::Relaxed);
            visit(r)
        };
        match loaded {
            Loaded::Parallel(parts) => {
                'all: for (sl, tl, pairs) in parts {
                    for b in pairs {
                        let r = Record::Pair {
                            source: b.source.clone(),
                            target: b.target.clone(),
                            source_lang: sl.clone(),
                            target_lang: tl.clone(),
                        };
                        if !offer(r, b.source.len() + b.target.len()) {
                            break 'all;
                        }
                    }
                }
            }
            Loaded::Conversation(turns) => {
                for b in turns {
                    let r = Record::Conversation {
                        message: b.source.clone(),
                        response: b.target.clone(),
                    };
                    if !offer(r, b.source.len() + b.target.len()) {
                        break;
                    }
                }
            }
            Loaded::Nli(pairs) => {
                for n in pairs {
                    let r = Record::Nli {
                        premise: n.premise.clone(),
                        hypothesis: n.hypothesis.clone(),
                        label: n.label,
                    };
                    if !offer(r, n.premise.len() + n.hypothesis.len()) {
                        break;
                    }
                }
            }
            Loaded::Text(docs) => {
                'docs: for (d, doc) in docs.iter().enumerate() {
                    for sentence in doc {
                        let r = Record::Text {
                            sentence: sentence.clone(),
                            document: d as u64,
                            lang: None,
                        };
                        if !offer(r, sentence.len()) {
                            break 'docs;
                        }
                    }
                }
            }
            Loaded::Labelled { items, classes } => {
                for (text, c) in items {
                    let r = Record::Labelled {
                        text: text.clone(),
                        label: classes[*c as usize].clone(),
                    };
                    if !offer(r, text.len()) {
                        break;
                    }
                }
            }
            Loaded::Files(fc) => return fc.read(bytes_read, visit),
        }
        Ok(user_corpus::ReadReport::default())
    }
}

/// The shard kind of a corpus kind.
pub fn shard_kind(kind: CorpusKind) -> ShardKind {
    match kind {
        CorpusKind::Pairs => ShardKind::Pairs,
        CorpusKind::Conversation => ShardKind::Conversation,
        CorpusKind::Nli => ShardKind::Nli,
        CorpusKind::Text => ShardKind::Context,
        CorpusKind::Labelled => ShardKind::Labelled,
    }
}

/// Binarizes a corpus for a task — or reuses the shards of a corpus of files binarized
/// before with the same key: `pairs` for translation pairs.
pub fn binarize(
    source: Source,
    tokenizer: &TextTokenizer,
    max_len: usize,
    pairs: Option<&PairSettings>,
) -> Result<Binarized, TrainError> {
    let kind = shard_kind(source.kind());
    let (dir, temp) = match source {
        Source::Files(fc) => {
            let dir = cached_dir(fc, tokenizer, max_len, pairs);
            if let Some(manifest) = Manifest::read(&dir)? {
                return reused(dir, manifest);
            }
            (dir, None)
        }
        Source::Loaded { .. } => {
            let temp = tempfile::Builder::new()
                .prefix("harness-shards-")
                .tempdir()
                .map_err(|e| TrainError::io(std::env::temp_dir(), e))?;
            (temp.path().to_path_buf(), Some(Arc::new(temp)))
        }
    };
    let layout = Layout {
        rows: kind.rows(),
        ngrams: tokenizer.char_ngram_buckets().is_some(),
        complete: tokenizer.pretrained().is_some(),
    };
    let mut writer = ShardWriter::create(&dir, layout)?;
    let (dataset, eval, cap) = match source {
        Source::Files(fc) => (
            fc.spec.source_name(),
            Some(&*fc.eval),
            fc.spec.max_examples.unwrap_or(u64::MAX),
        ),
        Source::Loaded { .. } => (String::new(), None, u64::MAX),
    };
    let mut state = WriterState::new(&source, dataset);
    let pass = Pass {
        source,
        tokenizer,
        max_len,
        pairs,
        eval,
        cap,
    };
    let (report, records, started) = pass.run(&mut state, &mut writer)?;
    if report.skipped > 0 {
        harness_core::note!(
            "corpus `{}`: {} bad lines skipped (`on_bad_line: skip`); the first: {}",
            source.name(),
            report.skipped,
            report.first_skipped.as_deref().unwrap_or("?")
        );
    }
    state.counts.used = writer.examples() as usize;
    let extra = state.manifest_extra(&source, &report, records, started);
    let manifest = writer.finish(extra)?;
    if let Source::Files(fc) = source {
        prune_stale(&fc.name, &dir);
    }
    Ok(Binarized {
        dir,
        manifest,
        counts: state.counts,
        untargeted: state.untargeted,
        classes: state.classes,
        reused: false,
        temp,
    })
}

/// The cache folder of a corpus of files' shards: under its key, a hash of everything the
/// shards depend on.
fn cached_dir(
    fc: &FilesCorpus,
    tokenizer: &TextTokenizer,
    max_len: usize,
    pairs: Option<&PairSettings>,
) -> PathBuf {
    use sha2::Digest;
    // Seeds matter only when they draw something.
    let pairs_key = pairs.map(|p| {
        let draws = !p.both || p.autoencode > 0.0;
        serde_json::json!({"targets": p.targets, "both": p.both, "autoencode": p.autoencode,
            "seed": draws.then_some(p.seed)})
    });
    let key_json = serde_json::json!({
        "version": 2,
        "files": fc.files,
        "spec": fc.spec,
        "excluded": fc.excluded,
        "tokenizer": tokenizer.digest(),
        "max_len": max_len,
        "pairs": pairs_key,
    });
    let key = hex::encode(sha2::Sha256::digest(key_json.to_string().as_bytes()));
    fc.cache_dir
        .join("shards")
        .join(format!("{}-{}", sanitize(&fc.name), &key[..16]))
}

/// One streaming pass over a corpus's records: what it reads, how it tokenises, what it
/// filters out and how many examples it writes at most.
struct Pass<'a> {
    source: Source<'a>,
    tokenizer: &'a TextTokenizer,
    max_len: usize,
    pairs: Option<&'a PairSettings>,
    /// The contamination filter's sentences (a corpus of files'; a shipped dataset was
    /// filtered as it loaded).
    eval: Option<&'a EvalSentences>,
    /// Examples to write at most.
    cap: u64,
}

impl Pass<'_> {
    /// Reads, tokenises and writes the records, with a progress bar; returns the read's
    /// report, the records read and when the pass started.
    fn run(
        &self,
        state: &mut WriterState,
        writer: &mut ShardWriter,
    ) -> Result<(user_corpus::ReadReport, u64, std::time::Instant), TrainError> {
        let Pass {
            source,
            tokenizer,
            max_len,
            pairs,
            eval,
            cap,
        } = *self;
        let total_bytes = source.bytes();
        let bar = harness_core::progress::bar(
            total_bytes,
            &format!(
                "binarizing {}: {{bytes}}/{{total_bytes}} ({{bytes_per_sec}}, {{msg}}, ETA {{eta}})",
                source.name()
            ),
        );
        let bytes_read = AtomicU64::new(0);
        // Examples written so far (the writer thread's count, for the cap).
        let written = AtomicU64::new(0);
        let started = std::time::Instant::now();
        let mut records = 0u64;
        let mut failure: Option<TrainError> = None;
        let report = std::thread::scope(|scope| -> Result<user_corpus::ReadReport, TrainError> {
            let (send, receive) = std::sync::mpsc::sync_channel::<Vec<Record>>(2);
            let reader = scope.spawn(|| read_chunks(&source, &bytes_read, send));
            // Tokenising (here, over the pool) overlaps writing (its own thread: the directions'
            // random streams, the counts and the shards are sequential) and reading.
            let (to_writer, from_tokeniser) = std::sync::mpsc::sync_channel::<Vec<_>>(1);
            let writing = scope.spawn(|| -> Result<(), TrainError> {
                for done in from_tokeniser {
                    state.write(done, tokenizer, pairs, writer, cap)?;
                    written.store(writer.examples(), Ordering::Relaxed);
                }
                Ok(())
            });
            for chunk in receive.iter() {
                if written.load(Ordering::Relaxed) >= cap {
                    break;
                }
                records += chunk.len() as u64;
                let done = tokenise_chunk(eval, chunk, tokenizer, max_len);
                if to_writer.send(done).is_err() {
                    // The writer stopped on an error, returned below.
                    break;
                }
                bar.set_position(bytes_read.load(Ordering::Relaxed));
                let secs = started.elapsed().as_secs_f64().max(1e-9);
                bar.set_message(format!("{records} records, {:.0}/s", records as f64 / secs));
            }
            drop(to_writer);
            if let Err(e) = writing.join().expect("the writer thread does not panic") {
                failure = Some(e);
            }
            drop(receive);
            reader.join().expect("the reader thread does not panic")
        });
        if failure.is_none() && report.is_ok() {
            bar.set_position(bytes_read.load(Ordering::Relaxed).max(total_bytes));
        }
        bar.finish_and_clear();
        if let Some(e) = failure {
            return Err(e);
        }
        Ok((report?, records, started))
    }
}

/// Reads a corpus's records in chunks of [`CHUNK`] (the last one shorter), sending each
/// down `send`; stops when nothing receives them any more.
fn read_chunks(
    source: &Source,
    bytes_read: &AtomicU64,
    send: std::sync::mpsc::SyncSender<Vec<Record>>,
) -> Result<user_corpus::ReadReport, TrainError> {
    let mut chunk = Vec::with_capacity(CHUNK);
    let r = source.read(bytes_read, &mut |rec| {
        chunk.push(rec);
        if chunk.len() == CHUNK {
            let full = std::mem::replace(&mut chunk, Vec::with_capacity(CHUNK));
            return send.send(full).is_ok();
        }
        true
    });
    if !chunk.is_empty() {
        let _ = send.send(chunk);
    }
    r
}

/// A complete shard set found in the cache.
fn reused(dir: PathBuf, manifest: Manifest) -> Result<Binarized, TrainError> {
    let bad = |what: &str, e: serde_json::Error| TrainError::Export {
        path: dir.join(harness_data::shards::MANIFEST),
        detail: format!("its {what} do not read back ({e})"),
    };
    let extra = &manifest.extra;
    let counts: CorpusCounts =
        serde_json::from_value(extra["counts"].clone()).map_err(|e| bad("counts", e))?;
    let classes: Vec<String> = match extra.get("classes") {
        None | Some(serde_json::Value::Null) => Vec::new(),
        Some(c) => serde_json::from_value(c.clone()).map_err(|e| bad("classes", e))?,
    };
    let untargeted = extra["untargeted"].as_u64().unwrap_or(0);
    Ok(Binarized {
        dir,
        manifest,
        counts,
        untargeted,
        classes,
        reused: true,
        temp: None,
    })
}

/// Removes the shard sets of corpus `name` beside `kept` that no run can use again: complete
/// sets (a manifest harness wrote) one of whose recorded files is gone or has another stamp
/// now. Sets of unchanged files stay (another recipe or tokenizer may take them), and so do
/// incomplete ones (another process may be writing them). Never fails a run: what cannot be
/// removed is said and left.
fn prune_stale(name: &str, kept: &Path) {
    let Some(root) = kept.parent() else { return };
    let Ok(entries) = std::fs::read_dir(root) else {
        return;
    };
    let prefix = format!("{}-", sanitize(name));
    let (mut sets, mut bytes) = (0usize, 0u64);
    for entry in entries.flatten() {
        let dir = entry.path();
        // Only folders of this corpus's name, never through a link.
        let ours = entry.file_name().to_string_lossy().starts_with(&prefix)
            && entry.file_type().is_ok_and(|t| t.is_dir())
            && dir != kept;
        if !ours {
            continue;
        }
        let Ok(Some(manifest)) = Manifest::read(&dir) else {
            continue;
        };
        let Ok(files) = serde_json::from_value::<Vec<FileStamp>>(manifest.extra["files"].clone())
        else {
            continue;
        };
        let stale = files
            .iter()
            .any(|f| FileStamp::of(&f.path).map_or(true, |now| now != *f));
        if !stale {
            continue;
        }
        match harness_data::shards::remove_set(&dir) {
            Ok(b) => {
                sets += 1;
                bytes += b;
            }
            Err(e) => harness_core::note!("could not remove stale shards {}: {e}", dir.display()),
        }
    }
    if sets > 0 {
        harness_core::note!(
            "corpus `{name}`: removed {sets} stale shard set(s), {:.1} MB, whose files have changed or gone since",
            bytes as f64 / 1e6
        );
    }
}

/// A name safe as a folder name.
fn sanitize(name: &str) -> String {
    name.chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '-' || c == '_' {
                c
            } else {
                '_'
            }
        })
        .collect()
}

/// One record tokenised: its rows, whether the filter removes it, where it counts.
struct Tokenised {
    rows: Vec<Tokens>,
    removed: bool,
    /// The counts' part: `src-tgt` for a translation pair, else `all`.
    part: String,
    what: Extra,
}

/// What a record carries beside its text.
enum Extra {
    None,
    Languages(String, String),
    Nli(u32),
    Document(u64),
    Label(String),
}

/// Tokenises a chunk of records over the pool, and runs the contamination filter on them.
fn tokenise_chunk(
    eval: Option<&EvalSentences>,
    chunk: Vec<Record>,
    tokenizer: &TextTokenizer,
    max_len: usize,
) -> Vec<Result<Tokenised, TrainError>> {
    chunk
        .into_par_iter()
        .map_init(String::new, |buf, r| {
            let all = || "all".to_string();
            let (texts, part, what) = match r {
                Record::Pair {
                    source,
                    target,
                    source_lang,
                    target_lang,
                } => (
                    vec![source, target],
                    format!("{source_lang}-{target_lang}"),
                    Extra::Languages(source_lang, target_lang),
                ),
                Record::Conversation { message, response } => {
                    (vec![message, response], all(), Extra::None)
                }
                Record::Nli {
                    premise,
                    hypothesis,
                    label,
                } => (
                    vec![premise, hypothesis],
                    all(),
                    Extra::Nli(label.index() as u32),
                ),
                Record::Text {
                    sentence, document, ..
                } => (vec![sentence], all(), Extra::Document(document)),
                Record::Labelled { text, label } => (vec![text], all(), Extra::Label(label)),
            };
            let removed = eval.is_some_and(|e| texts.iter().any(|t| e.contains_with(t, buf)));
            let rows = if removed {
                vec![Tokens::default(); texts.len()]
            } else {
                texts
                    .iter()
                    .map(|t| tokenizer.tokens(t, max_len))
                    .collect::<Result<_, _>>()?
            };
            Ok(Tokenised {
                rows,
                removed,
                part,
                what,
            })
        })
        .collect()
}

/// What the writer carries from record to record: the per-language-pair random streams of
/// the directions (one per language pair, in order of first appearance), the running
/// origin, the current document's last two sentences, the classes, the counts.
struct WriterState {
    name: String,
    streams: Vec<((String, String), ChaCha8Rng)>,
    origin: u32,
    /// The document of the last sentence of running text, and its last two sentences.
    document: Option<u64>,
    previous: Vec<Tokens>,
    classes: Vec<String>,
    counts: CorpusCounts,
    /// Examples dropped because tokenising left a side empty.
    empty: u64,
    /// Translation pairs with no direction into a decoder language.
    untargeted: u64,
}

impl WriterState {
    /// The state before the first record of `source` (`dataset`: the name its counts give).
    fn new(source: &Source, dataset: String) -> Self {
        WriterState {
            name: source.name().to_string(),
            counts: CorpusCounts {
                corpus: source.name().to_string(),
                dataset,
                parts: BTreeMap::new(),
                used: 0,
            },
            classes: source.classes(),
            streams: Vec::new(),
            origin: 0,
            document: None,
            previous: Vec::new(),
            empty: 0,
            untargeted: 0,
        }
    }

    /// What the shard set's manifest records of the pass beside its shards: the counts,
    /// the records read and dropped, the classes, the bad lines, the files and the time.
    fn manifest_extra(
        &self,
        source: &Source,
        report: &user_corpus::ReadReport,
        records: u64,
        started: std::time::Instant,
    ) -> serde_json::Value {
        let files = match source {
            Source::Files(fc) => serde_json::to_value(&fc.files).unwrap_or_default(),
            Source::Loaded { .. } => serde_json::Value::Null,
        };
        serde_json::json!({
            "counts": self.counts,
            "records": records,
            "empty_after_tokenizing": self.empty,
            "untargeted": self.untargeted,
            "classes": self.classes,
            "bad_lines_skipped": report.skipped,
            "first_skipped": report.first_skipped,
            "files": files,
            "lines": report.files,
            "seconds": started.elapsed().as_secs_f64(),
        })
    }

    /// Writes a tokenised chunk in order: counts, directions, the cap, the shards.
    fn write(
        &mut self,
        done: Vec<Result<Tokenised, TrainError>>,
        tokenizer: &TextTokenizer,
        pairs: Option<&PairSettings>,
        writer: &mut ShardWriter,
        cap: u64,
    ) -> Result<(), TrainError> {
        for t in done {
            if writer.examples() >= cap {
                break;
            }
            let t = t?;
            let entry = self.counts.parts.entry(t.part).or_insert((0, 0));
            if t.removed {
                entry.1 += 1;
            } else {
                entry.0 += 1;
            }
            let empty = t.removed || t.rows.iter().any(|r| r.is_empty());
            let mut rows = t.rows;
            match t.what {
                Extra::Languages(sl, tl) => {
                    let Some(this) = self.origin(t.removed, empty) else {
                        continue;
                    };
                    let Some(p) = pairs else {
                        return Err(TrainError::recipe(
                            format!("data.corpora.{}", self.name),
                            "translation pairs binarized without their example settings",
                            "report this as a bug",
                        ));
                    };
                    let b = rows.pop().expect("two rows");
                    let a = rows.pop().expect("two rows");
                    let Some(e) = self.pair_example(tokenizer, p, &sl, &tl, a, b, this)? else {
                        self.untargeted += 1;
                        continue;
                    };
                    writer.push(&[&e.src, &e.tgt], pair_tags(&e))?;
                }
                Extra::None => {
                    let Some(this) = self.origin(t.removed, empty) else {
                        continue;
                    };
                    let e = PairExample {
                        src: Tokens::default(),
                        tgt: Tokens::default(),
                        src_lang: 0,
                        tgt_lang: 0,
                        origin: this,
                        forward: true,
                    };
                    writer.push(&[&rows[0], &rows[1]], pair_tags(&e))?;
                }
                Extra::Nli(label) => {
                    if empty {
                        self.empty += !t.removed as u64;
                        continue;
                    }
                    writer.push(&[&rows[0], &rows[1]], [label, 0])?;
                }
                Extra::Document(d) => {
                    // A removed sentence breaks its document's chain as an empty one does.
                    if self.document != Some(d) {
                        self.document = Some(d);
                        self.previous.clear();
                    }
                    let sentence = rows.pop().expect("one row");
                    if self.previous.len() == 2 {
                        let next = &sentence;
                        let [prev, mid] = [&self.previous[0], &self.previous[1]];
                        if !prev.is_empty() && !mid.is_empty() && !next.is_empty() {
                            writer.push(&[mid, prev, next], [0, 0])?;
                        }
                        self.previous.remove(0);
                    }
                    self.previous.push(sentence);
                }
                Extra::Label(label) => {
                    if empty {
                        self.empty += !t.removed as u64;
                        continue;
                    }
                    let c = match self.classes.iter().position(|c| *c == label) {
                        Some(c) => c,
                        None => {
                            self.classes.push(label);
                            self.classes.len() - 1
                        }
                    };
                    writer.push(&[&rows[0]], [c as u32, 0])?;
                }
            }
        }
        Ok(())
    }

    /// The origin of a translation pair or a conversation turn (its index among the records
    /// the filter kept), or `None` when it is not written: removed by the filter (it takes no
    /// index), or left with an empty side by tokenising (counted).
    fn origin(&mut self, removed: bool, empty: bool) -> Option<u32> {
        if removed {
            return None;
        }
        let this = self.origin;
        self.origin += 1;
        if empty {
            self.empty += 1;
            return None;
        }
        Some(this)
    }

    /// The translation example of a pair, or `None` when no direction goes into a decoder
    /// language.
    #[allow(clippy::too_many_arguments)]
    fn pair_example(
        &mut self,
        tokenizer: &TextTokenizer,
        p: &PairSettings,
        src_lang: &str,
        tgt_lang: &str,
        s: Tokens,
        t: Tokens,
        origin: u32,
    ) -> Result<Option<PairExample>, TrainError> {
        let language = |l: &str| match tokenizer.pretrained() {
            // A pretrained model's tokenizer has no language tokens; language ids only
            // serve a decoder, which such a model does not have.
            Some(_) => Some(0),
            None => tokenizer.language_index(l),
        };
        let (Some(si), Some(ti)) = (language(src_lang), language(tgt_lang)) else {
            return Err(TrainError::recipe(
                format!("data.corpora.{}", self.name),
                format!("the tokenizer has no language token for `{src_lang}` or `{tgt_lang}`"),
                "delete the run's tokenizer.json so that it is learned again with every corpus language",
            ));
        };
        let key = (src_lang.to_string(), tgt_lang.to_string());
        let k = match self.streams.iter().position(|(k, _)| *k == key) {
            Some(k) => k,
            None => {
                let ci = self.streams.len() as u64;
                let rng = ChaCha8Rng::seed_from_u64(p.seed ^ ci.wrapping_mul(0x9E37_79B9));
                self.streams.push((key, rng));
                self.streams.len() - 1
            }
        };
        let rng = &mut self.streams[k].1;
        let into_tgt = p.targets.iter().any(|x| x == tgt_lang);
        let into_src = p.targets.iter().any(|x| x == src_lang);
        let forward = if p.both {
            true
        } else {
            match (into_tgt, into_src) {
                (true, true) => rng.random::<bool>(),
                (true, false) => true,
                (false, true) => false,
                (false, false) => return Ok(None),
            }
        };
        let mut e = if forward {
            PairExample {
                src: s,
                tgt: t,
                src_lang: si as u32,
                tgt_lang: ti as u32,
                origin,
                forward: true,
            }
        } else {
            PairExample {
                src: t,
                tgt: s,
                src_lang: ti as u32,
                tgt_lang: si as u32,
                origin,
                forward: false,
            }
        };
        // Drawn only when asked for, so that recipes without it keep their data.
        if p.autoencode > 0.0 && rng.random::<f64>() < p.autoencode {
            e.src = e.tgt.clone();
            e.src_lang = e.tgt_lang;
        }
        Ok(Some(e))
    }
}

/// `Directions` as [`PairSettings::both`].
pub fn both(d: Directions) -> bool {
    d == Directions::Both
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::data::Examples;
    use crate::streamed::ShardedExamples;
    use harness_data::records::Bitext;
    use harness_recipe::schema::{Tokenizer as TokenizerSpec, TokenizerKind};

    /// A BPE learned on `text`, with languages deu and eng.
    fn tokenizer<'a>(text: impl Iterator<Item = &'a str> + Send) -> TextTokenizer {
        let spec = TokenizerSpec {
            kind: TokenizerKind::Bpe,
            vocab: Some(300),
            train_on: vec![],
            lowercase: false,
            char_ngrams: vec![],
            hash_buckets: None,
            oov_buckets: None,
            sample: None,
        };
        TextTokenizer::train(&spec, &["deu".into(), "eng".into()], text).unwrap()
    }

    /// Every example of `loaded` binarized (shipped-dataset path), in shard order.
    fn examples(tok: &TextTokenizer, loaded: &Loaded, pairs: Option<&PairSettings>) -> Examples {
        let b = binarize(Source::Loaded { name: "c", loaded }, tok, 50, pairs).unwrap();
        let kind = shard_kind(Source::Loaded { name: "c", loaded }.kind());
        ShardedExamples::new(&b.dir, b.manifest, kind, Some(1000), None, 1)
            .owning(b.temp.unwrap())
            .all()
            .unwrap()
    }

    #[test]
    fn autoencode_turns_that_fraction_of_pairs_into_target_to_target() {
        let pairs: Vec<Bitext> = (0..200)
            .map(|i| Bitext {
                source: format!("das haus {i}"),
                target: format!("the house {i}"),
            })
            .collect();
        let tok = tokenizer(
            pairs
                .iter()
                .flat_map(|p| [p.source.as_str(), p.target.as_str()]),
        );
        let loaded = Loaded::Parallel(vec![("deu".into(), "eng".into(), pairs)]);
        let eng = tok.language_index("eng").unwrap() as u32;
        let deu = tok.language_index("deu").unwrap() as u32;
        let with = |autoencode| {
            let settings = PairSettings {
                targets: vec!["eng".into()],
                both: false,
                autoencode,
                seed: 3,
            };
            match examples(&tok, &loaded, Some(&settings)) {
                Examples::Pairs(v) => v,
                _ => unreachable!(),
            }
        };
        let plain = with(0.0);
        assert_eq!(plain.len(), 200);
        assert!(plain.iter().all(|e| e.src_lang == deu && e.tgt_lang == eng));
        let mixed = with(0.5);
        assert_eq!(mixed.len(), plain.len());
        let copies = mixed.iter().filter(|e| e.src_lang == eng).count();
        assert!((60..=140).contains(&copies), "{copies} of 200 autoencoded");
        for (m, p) in mixed.iter().zip(&plain) {
            // The target is untouched; the source is the pair's own or the target itself.
            assert_eq!(m.tgt, p.tgt);
            assert_eq!(m.tgt_lang, eng);
            if m.src_lang == eng {
                assert_eq!(m.src, m.tgt);
            } else {
                assert_eq!(m.src, p.src);
            }
        }
        assert!(with(1.0)
            .iter()
            .all(|e| e.src == e.tgt && e.src_lang == eng));
    }

    #[test]
    fn running_text_gives_each_sentence_with_both_neighbours_in_its_document() {
        let docs: Vec<Vec<String>> = vec![
            ["one a", "two b", "three c", "four d"]
                .map(String::from)
                .to_vec(),
            ["five e", "six f"].map(String::from).to_vec(),
            // An empty sentence breaks the chain around it.
            ["seven g", "", "eight h", "nine i", "ten j"]
                .map(String::from)
                .to_vec(),
        ];
        let tok = tokenizer(docs.iter().flatten().map(String::as_str));
        let Examples::Context(got) = examples(&tok, &Loaded::Text(docs.clone()), None) else {
            panic!("context examples");
        };
        let t = |s: &str| tok.tokens(s, 50).unwrap();
        let want: Vec<[&str; 3]> = vec![
            ["one a", "two b", "three c"],
            ["two b", "three c", "four d"],
            ["eight h", "nine i", "ten j"],
        ];
        assert_eq!(got.len(), want.len());
        for (g, [p, s, n]) in got.iter().zip(want) {
            assert_eq!((&g.previous, &g.sentence, &g.next), (&t(p), &t(s), &t(n)));
        }
    }

    #[test]
    fn labelled_texts_keep_a_shipped_datasets_class_indices() {
        let items: Vec<(String, u32)> = vec![
            ("good film".into(), 1),
            ("bad film".into(), 0),
            ("".into(), 0),
            ("fine film".into(), 1),
        ];
        let classes = vec!["neg".to_string(), "pos".to_string()];
        let tok = tokenizer(items.iter().map(|(t, _)| t.as_str()));
        let loaded = Loaded::Labelled {
            items: items.clone(),
            classes: classes.clone(),
        };
        let b = binarize(
            Source::Loaded {
                name: "c",
                loaded: &loaded,
            },
            &tok,
            50,
            None,
        )
        .unwrap();
        assert_eq!(b.classes, classes);
        let Examples::Labelled(got) = examples(&tok, &loaded, None) else {
            panic!("labelled examples");
        };
        // The empty text is dropped.
        let labels: Vec<u32> = got.iter().map(|e| e.label).collect();
        assert_eq!(labels, vec![1, 0, 1]);
        assert_eq!(got[0].ids, tok.tokens("good film", 50).unwrap());
    }
}
