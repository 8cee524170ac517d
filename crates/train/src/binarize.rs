//! Binarization of a corpus of the user's own files (`data.corpora.X.files`): one streaming
//! pass reads the files (`harness_data::user_corpus`), drops the pairs that hold an
//! evaluation sentence (the contamination filter, its sentences hashed in memory), tokenises
//! chunks in parallel over the cores and writes the examples, in file order, into shards
//! ([`harness_data::shards`]) under `HARNESS_HOME/cache/shards/`, keyed by the files'
//! fingerprint, the corpus's settings, the tokenizer, the length limit and the example
//! options; a second run (or another recipe with the same corpus and tokenizer) reuses them.
//! Never the whole corpus in memory: a chunk of [`CHUNK`] records at a time.
//!
//! The examples are those [`crate::data::pair_examples`] / [`crate::data::nli_examples`] /
//! [`crate::data::conversation_examples`] make of the same records in memory: the same
//! tokens, the same language indices, the same seeded directions per language pair.

use crate::corpora::CorpusCounts;
use crate::data::{Directions, PairExample};
use crate::streamed::{pair_tags, ShardKind};
use crate::TrainError;
use harness_data::corpus::EvalSentences;
use harness_data::shards::{Layout, Manifest, ShardWriter};
use harness_data::tokenize::{TextTokenizer, Tokens};
use harness_data::user_corpus::{self, Record};
use harness_recipe::schema::{Corpus, CorpusKind};
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

/// Bytes hashed at each end of a file for its fingerprint.
const STAMP_BYTES: u64 = 1 << 20;

/// What identifies a file's content without reading all of it: its size, modification time
/// and the sha256 of its first and last MiB. A file edited in place changes its
/// modification time (or its size, or one of its ends), and so the shards' key.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct FileStamp {
    pub path: PathBuf,
    pub bytes: u64,
    /// Modification time, nanoseconds since the Unix epoch.
    pub modified_ns: u128,
    /// sha256 of the first and last [`STAMP_BYTES`].
    pub ends_sha256: String,
}

impl FileStamp {
    /// Stamps the file at `path`.
    pub fn of(path: &Path) -> Result<FileStamp, TrainError> {
        use sha2::Digest;
        use std::io::{Read, Seek, SeekFrom};
        let io = |e| TrainError::io(path, e);
        let mut f = std::fs::File::open(path).map_err(io)?;
        let meta = f.metadata().map_err(io)?;
        let modified_ns = meta
            .modified()
            .ok()
            .and_then(|m| m.duration_since(std::time::UNIX_EPOCH).ok())
            .map_or(0, |d| d.as_nanos());
        let bytes = meta.len();
        let mut hash = sha2::Sha256::new();
        let mut buf = Vec::new();
        (&mut f)
            .take(STAMP_BYTES)
            .read_to_end(&mut buf)
            .map_err(io)?;
        hash.update(&buf);
        if bytes > STAMP_BYTES {
            buf.clear();
            f.seek(SeekFrom::Start(
                bytes.saturating_sub(STAMP_BYTES).max(STAMP_BYTES),
            ))
            .map_err(io)?;
            f.take(STAMP_BYTES).read_to_end(&mut buf).map_err(io)?;
            hash.update(&buf);
        }
        Ok(FileStamp {
            path: path.to_path_buf(),
            bytes,
            modified_ns,
            ends_sha256: hex::encode(hash.finalize()),
        })
    }
}

/// A corpus of the user's own files: found and stamped, not yet read.
#[derive(Debug, Clone)]
pub struct FilesCorpus {
    /// Its name in the recipe.
    pub name: String,
    pub spec: Corpus,
    pub kind: CorpusKind,
    /// Its files, in reading order, stamped.
    pub files: Vec<FileStamp>,
    /// The evaluation sentences its `exclude:` list removes.
    pub eval: Arc<EvalSentences>,
    /// The evaluation datasets behind `exclude:` (part of the shards' key).
    pub excluded: Vec<String>,
    /// Where its shards are kept (`HARNESS_HOME/cache`).
    pub cache_dir: PathBuf,
}

impl FilesCorpus {
    /// The files' paths.
    pub fn paths(&self) -> Vec<PathBuf> {
        self.files.iter().map(|f| f.path.clone()).collect()
    }

    /// Reads every record (files in order), calling `visit`; stops early when `visit` says
    /// so (returns `false`).
    pub fn read(
        &self,
        bytes_read: &AtomicU64,
        visit: &mut dyn FnMut(Record) -> bool,
    ) -> Result<user_corpus::ReadReport, TrainError> {
        const STOP: &str = "\u{0}stop";
        let mut inner = |r: Record, _: &user_corpus::Place| {
            if visit(r) {
                Ok(())
            } else {
                Err(STOP.to_string())
            }
        };
        match user_corpus::read(&self.spec, &self.paths(), bytes_read, &mut inner) {
            Ok(r) => Ok(r),
            Err(user_corpus::UserCorpusError::Stopped(s)) if s == STOP => {
                Ok(user_corpus::ReadReport::default())
            }
            Err(e) => Err(TrainError::Corpus {
                name: self.name.clone(),
                source: Box::new(TrainError::Data(e.into())),
            }),
        }
    }

    /// A uniform sample of at most `k` of the corpus's sentences (both sides of a pair),
    /// in corpus order, drawn with `seed` (reservoir sampling: one pass, `k` sentences in
    /// memory); and the languages of its pairs, in order of first appearance.
    pub fn sample(&self, k: usize, seed: u64) -> Result<(Vec<String>, Vec<String>), TrainError> {
        let mut rng = ChaCha8Rng::seed_from_u64(seed ^ 0x746f_6b65_6e69_7a65);
        let mut reservoir: Vec<(u64, String)> = Vec::new();
        let mut seen = 0u64;
        let mut languages: Vec<String> = Vec::new();
        let mut offer = |s: String, seen: &mut u64| {
            if reservoir.len() < k {
                reservoir.push((*seen, s));
            } else {
                let j = rng.random_range(0..=*seen);
                if (j as usize) < k {
                    reservoir[j as usize] = (*seen, s);
                }
            }
            *seen += 1;
        };
        let counter = AtomicU64::new(0);
        let total: u64 = self.files.iter().map(|f| f.bytes).sum();
        let bar = harness_core::progress::bar(
            total,
            &format!(
                "sampling {} for the vocabulary: {{bytes}}/{{total_bytes}} ({{bytes_per_sec}}, ETA {{eta}})",
                self.name
            ),
        );
        let mut records = 0u64;
        self.read(&counter, &mut |r| {
            for s in sentences(r, &mut languages) {
                offer(s, &mut seen);
            }
            records += 1;
            if records.is_multiple_of(65536) {
                bar.set_position(counter.load(Ordering::Relaxed));
            }
            true
        })?;
        // Read to the end: the bar ends full (its position is updated every few records).
        bar.set_position(total);
        bar.finish_and_clear();
        reservoir.sort_by_key(|(i, _)| *i);
        Ok((reservoir.into_iter().map(|(_, s)| s).collect(), languages))
    }
}

/// The sentences of a record (what a tokenizer learns from), noting a pair's languages.
fn sentences(r: Record, languages: &mut Vec<String>) -> Vec<String> {
    match r {
        Record::Pair {
            source,
            target,
            source_lang,
            target_lang,
        } => {
            for l in [source_lang, target_lang] {
                if !languages.contains(&l) {
                    languages.push(l);
                }
            }
            vec![source, target]
        }
        Record::Nli {
            premise,
            hypothesis,
            ..
        } => vec![premise, hypothesis],
        Record::Conversation { message, response } => vec![message, response],
        Record::Text { sentence, .. } => vec![sentence],
        Record::Labelled { text, .. } => vec![text],
    }
}

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
    pub reused: bool,
}

/// The shard kind of a corpus kind, or why it cannot be binarized yet.
pub fn shard_kind(fc: &FilesCorpus) -> Result<ShardKind, TrainError> {
    match fc.kind {
        CorpusKind::Pairs => Ok(ShardKind::Pairs),
        CorpusKind::Conversation => Ok(ShardKind::Conversation),
        CorpusKind::Nli => Ok(ShardKind::Nli),
        other => Err(TrainError::recipe(
            format!("data.corpora.{}.kind", fc.name),
            format!(
                "a corpus of files of `{}` examples cannot be trained on in this build",
                other.name()
            ),
            "use `pairs`, `conversation` or `nli` files, or a shipped dataset",
        )),
    }
}

/// Binarizes `fc` for a task (or reuses its shards): `pairs` for translation pairs.
pub fn binarize(
    fc: &FilesCorpus,
    tokenizer: &TextTokenizer,
    max_len: usize,
    pairs: Option<&PairSettings>,
) -> Result<Binarized, TrainError> {
    use sha2::Digest;
    let kind = shard_kind(fc)?;
    // Seeds matter only when they draw something.
    let pairs_key = pairs.map(|p| {
        let draws = !p.both || p.autoencode > 0.0;
        serde_json::json!({"targets": p.targets, "both": p.both, "autoencode": p.autoencode,
            "seed": draws.then_some(p.seed)})
    });
    let key_json = serde_json::json!({
        "version": 1,
        "files": fc.files,
        "spec": fc.spec,
        "excluded": fc.excluded,
        "tokenizer": tokenizer.digest(),
        "max_len": max_len,
        "pairs": pairs_key,
    });
    let key = hex::encode(sha2::Sha256::digest(key_json.to_string().as_bytes()));
    let dir = fc
        .cache_dir
        .join("shards")
        .join(format!("{}-{}", sanitize(&fc.name), &key[..16]));
    if let Some(manifest) = Manifest::read(&dir)? {
        let counts: CorpusCounts = serde_json::from_value(manifest.extra["counts"].clone())
            .map_err(|e| TrainError::Export {
                path: dir.join(harness_data::shards::MANIFEST),
                detail: format!("its counts do not read back ({e})"),
            })?;
        return Ok(Binarized {
            dir,
            manifest,
            counts,
            reused: true,
        });
    }
    let layout = Layout {
        rows: kind.rows(),
        ngrams: tokenizer.char_ngram_buckets().is_some(),
        complete: tokenizer.pretrained().is_some(),
    };
    let mut writer = ShardWriter::create(&dir, layout)?;
    let mut counts = CorpusCounts {
        corpus: fc.name.clone(),
        dataset: fc.spec.source_name(),
        parts: BTreeMap::new(),
        used: 0,
    };
    let cap = fc.spec.max_examples.unwrap_or(u64::MAX);
    let total_bytes: u64 = fc.files.iter().map(|f| f.bytes).sum();
    let bar = harness_core::progress::bar(
        total_bytes,
        &format!(
            "binarizing {}: {{bytes}}/{{total_bytes}} ({{bytes_per_sec}}, {{msg}}, ETA {{eta}})",
            fc.name
        ),
    );
    let bytes_read = AtomicU64::new(0);
    // Examples written so far (the writer thread's count, for the cap).
    let written = AtomicU64::new(0);
    let started = std::time::Instant::now();
    let mut state = PairState::default();
    let mut records = 0u64;
    let mut empty = 0u64;
    let mut failure: Option<TrainError> = None;
    let report = std::thread::scope(|scope| -> Result<user_corpus::ReadReport, TrainError> {
        let (send, receive) = std::sync::mpsc::sync_channel::<Vec<Record>>(2);
        let reader = scope.spawn(|| {
            let mut chunk = Vec::with_capacity(CHUNK);
            let send = send;
            let r = fc.read(&bytes_read, &mut |rec| {
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
        });
        // Tokenising (here, over the pool) overlaps writing (its own thread: the directions'
        // random streams, the counts and the shards are sequential) and reading.
        let (to_writer, from_tokeniser) = std::sync::mpsc::sync_channel::<Vec<_>>(1);
        let writing = scope.spawn(|| -> Result<(), TrainError> {
            for done in from_tokeniser {
                write_tokenised(
                    fc,
                    done,
                    tokenizer,
                    pairs,
                    &mut state,
                    &mut writer,
                    &mut counts,
                    &mut empty,
                    cap,
                )?;
                written.store(writer.examples(), Ordering::Relaxed);
            }
            Ok(())
        });
        for chunk in receive.iter() {
            if written.load(Ordering::Relaxed) >= cap {
                break;
            }
            records += chunk.len() as u64;
            let done = tokenise_chunk(fc, chunk, tokenizer, max_len);
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
    let report = report?;
    if report.skipped > 0 {
        harness_core::note!(
            "corpus `{}`: {} bad lines skipped (`on_bad_line: skip`); the first: {}",
            fc.name,
            report.skipped,
            report.first_skipped.as_deref().unwrap_or("?")
        );
    }
    counts.used = writer.examples() as usize;
    let extra = serde_json::json!({
        "counts": counts,
        "records": records,
        "empty_after_tokenizing": empty,
        "bad_lines_skipped": report.skipped,
        "first_skipped": report.first_skipped,
        "files": fc.files,
        "lines": report.files,
        "seconds": started.elapsed().as_secs_f64(),
    });
    let manifest = writer.finish(extra)?;
    Ok(Binarized {
        dir,
        manifest,
        counts,
        reused: false,
    })
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

/// The per-language-pair random streams of the directions (as `pair_examples` draws them:
/// one per language pair, in order of first appearance) and the pairs' running origin.
#[derive(Default)]
struct PairState {
    streams: Vec<((String, String), ChaCha8Rng)>,
    origin: u32,
}

/// One record tokenised: its rows, whether the filter removes it, its tags.
struct Tokenised {
    rows: [Tokens; 2],
    removed: bool,
    part: String,
    tag: u32,
    langs: Option<(String, String)>,
}

/// Tokenises a chunk of records over the pool, and runs the contamination filter on them.
fn tokenise_chunk(
    fc: &FilesCorpus,
    chunk: Vec<Record>,
    tokenizer: &TextTokenizer,
    max_len: usize,
) -> Vec<Result<Tokenised, TrainError>> {
    let eval = &fc.eval;
    chunk
        .into_par_iter()
        .map_init(String::new, |buf, r| {
            let (a, b, part, tag, langs) = match r {
                Record::Pair {
                    source,
                    target,
                    source_lang,
                    target_lang,
                } => {
                    let part = format!("{source_lang}-{target_lang}");
                    (source, target, part, 0, Some((source_lang, target_lang)))
                }
                Record::Conversation { message, response } => {
                    (message, response, "all".into(), 0, None)
                }
                Record::Nli {
                    premise,
                    hypothesis,
                    label,
                } => (
                    premise,
                    hypothesis,
                    "all".into(),
                    label.index() as u32,
                    None,
                ),
                _ => unreachable!("shard_kind refused the other kinds"),
            };
            let removed = eval.contains_with(&a, buf) || eval.contains_with(&b, buf);
            let rows = if removed {
                [Tokens::default(), Tokens::default()]
            } else {
                [
                    tokenizer.tokens(&a, max_len)?,
                    tokenizer.tokens(&b, max_len)?,
                ]
            };
            Ok(Tokenised {
                rows,
                removed,
                part,
                tag,
                langs,
            })
        })
        .collect()
}

/// Writes a tokenised chunk in order: counts, directions, the cap, the shards.
#[allow(clippy::too_many_arguments)]
fn write_tokenised(
    fc: &FilesCorpus,
    done: Vec<Result<Tokenised, TrainError>>,
    tokenizer: &TextTokenizer,
    pairs: Option<&PairSettings>,
    state: &mut PairState,
    writer: &mut ShardWriter,
    counts: &mut CorpusCounts,
    empty: &mut u64,
    cap: u64,
) -> Result<(), TrainError> {
    for t in done {
        if writer.examples() >= cap {
            break;
        }
        let t = t?;
        let entry = counts.parts.entry(t.part).or_insert((0, 0));
        if t.removed {
            entry.1 += 1;
            continue;
        }
        entry.0 += 1;
        let [a, b] = t.rows;
        match (&t.langs, pairs) {
            (Some((sl, tl)), Some(p)) => {
                let this = state.origin;
                state.origin += 1;
                if a.is_empty() || b.is_empty() {
                    *empty += 1;
                    continue;
                }
                let Some(e) = pair_example(fc, tokenizer, p, state, sl, tl, a, b, this)? else {
                    continue;
                };
                writer.push(&[&e.src, &e.tgt], pair_tags(&e))?;
            }
            _ => {
                if a.is_empty() || b.is_empty() {
                    *empty += 1;
                    continue;
                }
                let tags = match fc.kind {
                    CorpusKind::Nli => [t.tag, 0],
                    _ => {
                        let e = PairExample {
                            src: Tokens::default(),
                            tgt: Tokens::default(),
                            src_lang: 0,
                            tgt_lang: 0,
                            origin: state.origin,
                            forward: true,
                        };
                        state.origin += 1;
                        pair_tags(&e)
                    }
                };
                writer.push(&[&a, &b], tags)?;
            }
        }
    }
    Ok(())
}

/// The translation example of a pair (`pair_examples`' rules), or `None` when no direction
/// goes into a decoder language.
#[allow(clippy::too_many_arguments)]
fn pair_example(
    fc: &FilesCorpus,
    tokenizer: &TextTokenizer,
    p: &PairSettings,
    state: &mut PairState,
    src_lang: &str,
    tgt_lang: &str,
    s: Tokens,
    t: Tokens,
    origin: u32,
) -> Result<Option<PairExample>, TrainError> {
    let language = |l: &str| match tokenizer.pretrained() {
        Some(_) => Some(0),
        None => tokenizer.language_index(l),
    };
    let (Some(si), Some(ti)) = (language(src_lang), language(tgt_lang)) else {
        return Err(TrainError::recipe(
            format!("data.corpora.{}", fc.name),
            format!("the tokenizer has no language token for `{src_lang}` or `{tgt_lang}`"),
            "delete the run's tokenizer.json so that it is learned again with every corpus language",
        ));
    };
    let key = (src_lang.to_string(), tgt_lang.to_string());
    let k = match state.streams.iter().position(|(k, _)| *k == key) {
        Some(k) => k,
        None => {
            let ci = state.streams.len() as u64;
            let rng = ChaCha8Rng::seed_from_u64(p.seed ^ ci.wrapping_mul(0x9E37_79B9));
            state.streams.push((key, rng));
            state.streams.len() - 1
        }
    };
    let rng = &mut state.streams[k].1;
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
    if p.autoencode > 0.0 && rng.random::<f64>() < p.autoencode {
        e.src = e.tgt.clone();
        e.src_lang = e.tgt_lang;
    }
    Ok(Some(e))
}

/// `Directions` as [`PairSettings::both`].
pub fn both(d: Directions) -> bool {
    d == Directions::Both
}
