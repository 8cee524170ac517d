//! The on-disk embedding cache, keyed by (encoder fingerprint, sentence sha256), shared by
//! every benchmark and every run.
//!
//! Layout: `<cache_dir>/embeddings/<fingerprint dir>/seg-<digest>.hseg`, where the
//! fingerprint dir is the fingerprint made file-name safe plus 16 hex of its sha256. A
//! segment is immutable: it is written whole to a temporary file in that directory, fsynced
//! and renamed to a name derived from its own content digest ([`harness_core::nofollow::write_atomic`]),
//! so two processes never write the same file and a killed process leaves at most a
//! temporary file, which readers ignore (they only open `seg-*.hseg`). Nothing takes a lock.
//!
//! Segment format (all integers little-endian):
//! ```text
//! magic "HEMBSEG1" | u32 version | u32 dim | u64 n | u32 fp_len | fingerprint (fp_len bytes)
//! n × 32-byte sentence sha256 | n × u64 row checksum | 32-byte sha256 of everything before
//! n × dim × f32 rows
//! ```
//! Indexing a segment reads only its head (header, keys and row checksums) and checks the
//! file length, the head's sha256, the fingerprint and the dimension. Rows are read lazily,
//! only the span a lookup needs, and each row is checked against its checksum. A segment or
//! row failing a check is treated as absent (a warning on stderr, never a crash), and its
//! sentences are encoded again.

use super::encoder::Encoder;
use super::error::EncodeError;
use super::hashed::splitmix64;
use super::matrix::Matrix;
use sha2::{Digest, Sha256};
use std::collections::{HashMap, HashSet};
use std::io::{Read, Seek, SeekFrom};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

const MAGIC: &[u8; 8] = b"HEMBSEG1";
const FORMAT_VERSION: u32 = 1;
const FIXED_HEADER: usize = 8 + 4 + 4 + 8 + 4;

/// sha256 of a sentence's UTF-8 bytes: the cache key (no normalisation: exact text).
pub type SentenceKey = [u8; 32];

/// The key of a sentence.
pub fn sentence_key(sentence: &str) -> SentenceKey {
    Sha256::digest(sentence.as_bytes()).into()
}

/// The directory holding the segments of one fingerprint.
pub fn fingerprint_dir(cache_dir: &Path, fingerprint: &str) -> PathBuf {
    let safe: String = fingerprint
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '-' || c == '_' || c == '.' {
                c
            } else {
                '_'
            }
        })
        .take(80)
        .collect();
    let digest = harness_core::fsutil::sha256_hex(fingerprint.as_bytes());
    cache_dir.join("embeddings").join(format!(
        "{}-{}",
        safe.trim_start_matches('.'),
        &digest[..16]
    ))
}

/// Cache hit and miss counts since the cache was opened.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct CacheStats {
    /// Input sentences served from disk.
    pub hits: u64,
    /// Input sentences not found (duplicates within a call each count).
    pub misses: u64,
    /// Distinct sentences actually encoded (misses after deduplication).
    pub encoded: u64,
    /// Nanoseconds in `encode` calls, cache lookups and writes included.
    pub embed_nanos: u64,
    /// Nanoseconds of those in the wrapped encoder (the model's own work).
    pub encoder_nanos: u64,
}

/// Checksum of one row's bytes (64-bit, SplitMix64 over 8-byte words; catches torn or
/// flipped bytes, not adversaries).
fn row_checksum(bytes: &[u8]) -> u64 {
    let mut h = bytes.len() as u64;
    let mut chunks = bytes.chunks_exact(8);
    for c in &mut chunks {
        h = splitmix64(h ^ u64::from_le_bytes(c.try_into().expect("8 bytes")));
    }
    let mut tail = [0u8; 8];
    tail[..chunks.remainder().len()].copy_from_slice(chunks.remainder());
    splitmix64(h ^ u64::from_le_bytes(tail))
}

/// Serialises one segment; returns its bytes and the hex digest of its head.
pub fn segment_bytes(fingerprint: &str, keys: &[SentenceKey], rows: &Matrix) -> (Vec<u8>, String) {
    assert_eq!(keys.len(), rows.rows, "segment_bytes: one key per row");
    let n = keys.len();
    let dim = rows.cols;
    let fp = fingerprint.as_bytes();
    let mut out = Vec::with_capacity(FIXED_HEADER + fp.len() + n * (40 + dim * 4) + 32);
    out.extend_from_slice(MAGIC);
    out.extend_from_slice(&FORMAT_VERSION.to_le_bytes());
    out.extend_from_slice(&(dim as u32).to_le_bytes());
    out.extend_from_slice(&(n as u64).to_le_bytes());
    out.extend_from_slice(&(fp.len() as u32).to_le_bytes());
    out.extend_from_slice(fp);
    for k in keys {
        out.extend_from_slice(k);
    }
    let mut row_bytes = Vec::with_capacity(n * dim * 4);
    let mut buf = Vec::with_capacity(dim * 4);
    for i in 0..n {
        buf.clear();
        for x in rows.row(i) {
            buf.extend_from_slice(&x.to_le_bytes());
        }
        out.extend_from_slice(&row_checksum(&buf).to_le_bytes());
        row_bytes.extend_from_slice(&buf);
    }
    let digest: [u8; 32] = Sha256::digest(&out).into();
    out.extend_from_slice(&digest);
    out.extend_from_slice(&row_bytes);
    (out, hex::encode(digest))
}

/// What indexing a segment keeps: where its rows are and their checksums.
#[derive(Debug)]
struct Segment {
    path: PathBuf,
    n: usize,
    rows_offset: u64,
    checksums: Vec<u64>,
}

/// Reads and checks a segment's head; `Err` says why it is unusable.
fn index_segment(
    path: &Path,
    fingerprint: &str,
    dim: usize,
) -> Result<(Segment, Vec<SentenceKey>), String> {
    let mut f = std::fs::File::open(path).map_err(|e| e.to_string())?;
    let file_len = f.metadata().map_err(|e| e.to_string())?.len();
    let mut fixed = [0u8; FIXED_HEADER];
    f.read_exact(&mut fixed)
        .map_err(|_| "shorter than a segment header".to_string())?;
    if &fixed[..8] != MAGIC {
        return Err("not a segment (bad magic)".into());
    }
    let u32_at = |o: usize| u32::from_le_bytes(fixed[o..o + 4].try_into().expect("4"));
    let version = u32_at(8);
    if version != FORMAT_VERSION {
        return Err(format!(
            "segment format version {version}, expected {FORMAT_VERSION}"
        ));
    }
    let seg_dim = u32_at(12) as usize;
    let n = u64::from_le_bytes(fixed[16..24].try_into().expect("8")) as usize;
    let fp_len = u32_at(24) as usize;
    if fp_len != fingerprint.len() {
        return Err("written for another fingerprint".into());
    }
    if seg_dim != dim {
        return Err(format!("rows of {seg_dim} dims, the encoder gives {dim}"));
    }
    let head_len = (FIXED_HEADER + fp_len) as u64 + 40 * n as u64;
    let expected = head_len + 32 + (n as u64) * (dim as u64) * 4;
    if file_len != expected {
        return Err(format!(
            "{file_len} bytes, its header promises {expected} (truncated or corrupt)"
        ));
    }
    let mut head = vec![0u8; head_len as usize + 32 - FIXED_HEADER];
    f.read_exact(&mut head).map_err(|e| e.to_string())?;
    let (body, digest) = head.split_at(head.len() - 32);
    let mut hasher = Sha256::new();
    hasher.update(fixed);
    hasher.update(body);
    if hasher.finalize().as_slice() != digest {
        return Err("header checksum mismatch (corrupt)".into());
    }
    if &body[..fp_len] != fingerprint.as_bytes() {
        return Err("written for another fingerprint".into());
    }
    let keys_end = fp_len + 32 * n;
    let keys = body[fp_len..keys_end]
        .chunks_exact(32)
        .map(|c| c.try_into().expect("32"))
        .collect();
    let checksums = body[keys_end..]
        .chunks_exact(8)
        .map(|c| u64::from_le_bytes(c.try_into().expect("8")))
        .collect();
    Ok((
        Segment {
            path: path.to_path_buf(),
            n,
            rows_offset: head_len + 32,
            checksums,
        },
        keys,
    ))
}

/// Reads rows `wanted` (sorted, deduplicated, all `< seg.n`) of a segment, checking each.
fn read_rows(seg: &Segment, dim: usize, wanted: &[usize]) -> Result<Vec<Vec<f32>>, String> {
    let (Some(&lo), Some(&hi)) = (wanted.first(), wanted.last()) else {
        return Ok(Vec::new());
    };
    debug_assert!(hi < seg.n);
    let row_len = dim * 4;
    let mut f = std::fs::File::open(&seg.path).map_err(|e| e.to_string())?;
    f.seek(SeekFrom::Start(seg.rows_offset + (lo * row_len) as u64))
        .map_err(|e| e.to_string())?;
    let mut span = vec![0u8; (hi - lo + 1) * row_len];
    f.read_exact(&mut span)
        .map_err(|e| format!("reading rows: {e}"))?;
    wanted
        .iter()
        .map(|&r| {
            let bytes = &span[(r - lo) * row_len..(r - lo + 1) * row_len];
            if row_checksum(bytes) != seg.checksums[r] {
                return Err(format!("row {r} fails its checksum (corrupt)"));
            }
            Ok(bytes
                .chunks_exact(4)
                .map(|c| f32::from_le_bytes(c.try_into().expect("4")))
                .collect())
        })
        .collect()
}

/// The in-memory index of one fingerprint directory.
#[derive(Debug, Default)]
struct Index {
    /// Files already looked at (indexed, or found unusable).
    seen: HashSet<PathBuf>,
    /// Files found unusable: never indexed again by this process.
    bad: HashSet<PathBuf>,
    segments: Vec<Segment>,
    /// sentence key → (segment, row); the first segment (by file name) wins.
    entries: HashMap<SentenceKey, (usize, usize)>,
}

fn warn(path: &Path, why: &str) {
    harness_core::note!(
        "warning: embedding cache segment {}: {why}; ignoring it (its sentences will be encoded again; delete the file to silence this)",
        path.display()
    );
}

impl Index {
    /// Indexes the segment files that appeared since the last refresh (sorted by name, so
    /// every process resolves duplicates the same way).
    fn refresh(&mut self, dir: &Path, fingerprint: &str, dim: usize) {
        let Ok(read) = std::fs::read_dir(dir) else {
            return; // no directory yet: nothing cached
        };
        let mut new: Vec<PathBuf> = read
            .filter_map(|e| e.ok())
            .map(|e| e.path())
            .filter(|p| {
                p.file_name()
                    .and_then(|n| n.to_str())
                    .is_some_and(|n| n.starts_with("seg-") && n.ends_with(".hseg"))
            })
            .filter(|p| !self.seen.contains(p))
            .collect();
        new.sort();
        for path in new {
            self.seen.insert(path.clone());
            match index_segment(&path, fingerprint, dim) {
                Ok((seg, keys)) => {
                    let s = self.segments.len();
                    for (row, key) in keys.into_iter().enumerate() {
                        self.entries.entry(key).or_insert((s, row));
                    }
                    self.segments.push(seg);
                }
                Err(why) => {
                    warn(&path, &why);
                    self.bad.insert(path);
                }
            }
        }
    }

    /// Forgets everything but the unusable files and indexes the rest again, so that
    /// sentences of a segment found corrupt are looked up in the other segments.
    fn rebuild(&mut self, dir: &Path, fingerprint: &str, dim: usize) {
        self.seen = self.bad.clone();
        self.segments.clear();
        self.entries.clear();
        self.refresh(dir, fingerprint, dim);
    }
}

/// Wraps any [`Encoder`] with the on-disk cache: looks every sentence up, encodes only the
/// misses (deduplicated, in batches), stores them as one new segment, and returns rows in
/// input order. It is itself an `Encoder` with the inner one's name, fingerprint and dim.
///
/// A failure to write the cache (read-only or full disk) is a warning, not an error: the
/// rows are returned all the same.
pub struct CachedEncoder<E> {
    inner: E,
    fingerprint: String,
    /// The cache root (`cache_dir`), for the encoders of single languages.
    root: PathBuf,
    /// The cached encoders of single languages handed out so far ([`Encoder::for_language`]).
    languages: Mutex<HashMap<String, Option<Arc<dyn Encoder>>>>,
    dir: PathBuf,
    batch_size: usize,
    index: Mutex<Index>,
    hits: AtomicU64,
    misses: AtomicU64,
    encoded: AtomicU64,
    embed_nanos: AtomicU64,
    encoder_nanos: AtomicU64,
}

impl<E: Encoder> CachedEncoder<E> {
    /// Caches `inner` under `<cache_dir>/embeddings/` (`cache_dir` is usually
    /// `Settings::cache_dir`). Batches of misses are 1024 sentences by default.
    pub fn new(inner: E, cache_dir: &Path) -> Self {
        let fingerprint = inner.fingerprint();
        let dir = fingerprint_dir(cache_dir, &fingerprint);
        CachedEncoder {
            inner,
            fingerprint,
            root: cache_dir.to_path_buf(),
            languages: Mutex::new(HashMap::new()),
            dir,
            batch_size: 1024,
            index: Mutex::new(Index::default()),
            hits: AtomicU64::new(0),
            misses: AtomicU64::new(0),
            encoded: AtomicU64::new(0),
            embed_nanos: AtomicU64::new(0),
            encoder_nanos: AtomicU64::new(0),
        }
    }

    /// Sets how many missing sentences are handed to the inner encoder at once.
    pub fn with_batch_size(mut self, batch_size: usize) -> Self {
        self.batch_size = batch_size.max(1);
        self
    }

    /// Hits and misses so far.
    pub fn stats(&self) -> CacheStats {
        CacheStats {
            hits: self.hits.load(Ordering::Relaxed),
            misses: self.misses.load(Ordering::Relaxed),
            encoded: self.encoded.load(Ordering::Relaxed),
            embed_nanos: self.embed_nanos.load(Ordering::Relaxed),
            encoder_nanos: self.encoder_nanos.load(Ordering::Relaxed),
        }
    }

    /// The directory of this fingerprint's segments.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// The wrapped encoder.
    pub fn inner(&self) -> &E {
        &self.inner
    }

    /// Stores `rows` under `keys` as a new segment (atomically); a failure only warns, since
    /// the vectors in hand are still correct.
    /// After the first failure (a full disk, most often) this process writes no more
    /// segments: one warning instead of one per batch, and no more attempts to fill a full
    /// disk.
    fn write_segment(&self, keys: &[SentenceKey], rows: &Matrix) {
        static WRITES_FAILED: AtomicBool = AtomicBool::new(false);
        if WRITES_FAILED.load(Ordering::Relaxed) {
            return;
        }
        let (bytes, digest) = segment_bytes(&self.fingerprint, keys, rows);
        let path = self.dir.join(format!("seg-{}.hseg", &digest[..32]));
        // Below the cache root no folder may be a link ([`harness_core::nofollow`]).
        let written = harness_core::nofollow::write_atomic_below(&self.root, &path, &bytes)
            .map_err(|e| harness_core::fsutil::disk_full(e, &self.dir));
        if let Err(e) = written {
            if !WRITES_FAILED.swap(true, Ordering::Relaxed) {
                harness_core::note!(
                    "warning: could not write embedding cache segment {}: {e}. Results are unaffected; this run writes no more to the cache. Fix: free space there, or point the cache_dir setting elsewhere",
                    path.display()
                );
            }
        }
    }

    /// Looks keys up; returns the rows found (by input position) and the positions missed.
    fn lookup(&self, keys: &[SentenceKey]) -> (Vec<Option<Vec<f32>>>, Vec<usize>) {
        let dim = self.inner.dim();
        let mut index = self.index.lock().unwrap_or_else(|p| p.into_inner());
        index.refresh(&self.dir, &self.fingerprint, dim);
        let mut found: Vec<Option<Vec<f32>>> = vec![None; keys.len()];
        // Each pass either fills every hit or finds one more corrupt segment, so this ends.
        loop {
            // Hits grouped by segment: segment → (row → input positions).
            let mut by_segment: HashMap<usize, HashMap<usize, Vec<usize>>> = HashMap::new();
            for (pos, key) in keys.iter().enumerate() {
                if found[pos].is_none() {
                    if let Some(&(s, r)) = index.entries.get(key) {
                        by_segment
                            .entry(s)
                            .or_default()
                            .entry(r)
                            .or_default()
                            .push(pos);
                    }
                }
            }
            let mut corrupt = false;
            for (s, rows) in by_segment {
                let mut wanted: Vec<usize> = rows.keys().copied().collect();
                wanted.sort_unstable();
                match read_rows(&index.segments[s], dim, &wanted) {
                    Ok(values) => {
                        for (r, v) in wanted.iter().zip(values) {
                            for &pos in &rows[r] {
                                found[pos] = Some(v.clone());
                            }
                        }
                    }
                    Err(why) => {
                        let path = index.segments[s].path.clone();
                        warn(&path, &why);
                        index.bad.insert(path);
                        corrupt = true;
                    }
                }
            }
            if !corrupt {
                break;
            }
            index.rebuild(&self.dir, &self.fingerprint, dim);
        }
        let missed = (0..keys.len()).filter(|&i| found[i].is_none()).collect();
        (found, missed)
    }
}

/// The message for an encoder that returned a non-finite value.
pub fn non_finite_detail(sentence: &str, col: usize, value: f32) -> String {
    let shown: String = sentence.chars().take(80).collect();
    format!(
        "returned a non-finite value ({value}) in dimension {col} of the vector of the sentence {shown:?}; no score is computed from it. Fix: check the encoder (its weights or its input file) for NaN or infinite values"
    )
}

impl<E: Encoder> Encoder for CachedEncoder<E> {
    fn name(&self) -> &str {
        self.inner.name()
    }

    fn pair_logits(
        &self,
        head: &str,
        u: &Matrix,
        v: &Matrix,
    ) -> Result<Option<Matrix>, EncodeError> {
        self.inner.pair_logits(head, u, v)
    }

    /// The inner encoder's encoder of `language`, cached the same way (under its own
    /// fingerprint).
    fn for_language(&self, language: &str) -> Option<Arc<dyn Encoder>> {
        let mut known = self.languages.lock().unwrap_or_else(|p| p.into_inner());
        known
            .entry(language.to_string())
            .or_insert_with(|| {
                self.inner.for_language(language).map(|e| {
                    Arc::new(CachedEncoder::new(e, &self.root).with_batch_size(self.batch_size))
                        as Arc<dyn Encoder>
                })
            })
            .clone()
    }

    fn fingerprint(&self) -> String {
        self.fingerprint.clone()
    }

    fn dim(&self) -> usize {
        self.inner.dim()
    }

    fn encode(&self, sentences: &[&str]) -> Result<Matrix, EncodeError> {
        use rayon::prelude::*;
        let called = std::time::Instant::now();
        let dim = self.inner.dim();
        let keys: Vec<SentenceKey> = sentences.par_iter().map(|s| sentence_key(s)).collect();
        let (mut found, missed) = self.lookup(&keys);

        // Distinct missing sentences, in first-occurrence order.
        let mut first: HashMap<SentenceKey, usize> = HashMap::new();
        let mut unique: Vec<usize> = Vec::new();
        for &pos in &missed {
            first.entry(keys[pos]).or_insert_with(|| {
                unique.push(pos);
                unique.len() - 1
            });
        }
        let mut new_rows = Matrix::zeros(unique.len(), dim);
        for (b, chunk) in unique.chunks(self.batch_size).enumerate() {
            let batch: Vec<&str> = chunk.iter().map(|&p| sentences[p]).collect();
            let encoding = std::time::Instant::now();
            let m = self.inner.encode(&batch)?;
            self.encoder_nanos
                .fetch_add(nanos(encoding), Ordering::Relaxed);
            if m.rows != batch.len() || m.cols != dim {
                return Err(EncodeError::Encoder {
                    name: self.inner.name().to_string(),
                    detail: format!(
                        "returned a {}×{} matrix for {} sentences of dim {dim}",
                        m.rows,
                        m.cols,
                        batch.len()
                    ),
                });
            }
            // A NaN would otherwise turn into a silent NaN score (and be cached).
            if let Some((row, col, v)) = m.first_non_finite() {
                return Err(EncodeError::Encoder {
                    name: self.inner.name().to_string(),
                    detail: non_finite_detail(batch[row], col, v),
                });
            }
            let start = b * self.batch_size * dim;
            new_rows.data[start..start + m.data.len()].copy_from_slice(&m.data);
            // One segment per batch, written as soon as it is encoded: a run killed halfway
            // through a large benchmark keeps every batch it finished.
            let chunk_keys: Vec<SentenceKey> = chunk.iter().map(|&p| keys[p]).collect();
            self.write_segment(&chunk_keys, &m);
        }

        let mut out = Matrix::zeros(sentences.len(), dim);
        for (pos, row) in found.iter_mut().enumerate() {
            match row.take() {
                Some(v) => out.row_mut(pos).copy_from_slice(&v),
                None => {
                    let u = first[&keys[pos]];
                    out.row_mut(pos).copy_from_slice(new_rows.row(u));
                }
            }
        }
        let n_missed = missed.len() as u64;
        self.hits
            .fetch_add(sentences.len() as u64 - n_missed, Ordering::Relaxed);
        self.misses.fetch_add(n_missed, Ordering::Relaxed);
        self.encoded
            .fetch_add(unique.len() as u64, Ordering::Relaxed);
        self.embed_nanos.fetch_add(nanos(called), Ordering::Relaxed);
        Ok(out)
    }
}

/// Nanoseconds since `start` (saturating: 584 years fit).
fn nanos(start: std::time::Instant) -> u64 {
    u64::try_from(start.elapsed().as_nanos()).unwrap_or(u64::MAX)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::hashed::{HashedNgrams, HashedParams};
    use std::sync::atomic::AtomicUsize;
    use std::sync::Arc;

    /// Counts how many sentences it is asked to encode.
    struct Counting {
        inner: HashedNgrams,
        calls: Arc<AtomicUsize>,
    }

    impl Encoder for Counting {
        fn name(&self) -> &str {
            "counting"
        }
        fn fingerprint(&self) -> String {
            self.inner.fingerprint()
        }
        fn dim(&self) -> usize {
            self.inner.dim()
        }
        fn encode(&self, s: &[&str]) -> Result<Matrix, EncodeError> {
            if s.contains(&"boom") {
                return Err(EncodeError::Encoder {
                    name: "counting".into(),
                    detail: "the sentence `boom` kills this encoder".into(),
                });
            }
            self.calls.fetch_add(s.len(), Ordering::SeqCst);
            self.inner.encode(s)
        }
    }

    fn counting() -> (Counting, Arc<AtomicUsize>) {
        let calls = Arc::new(AtomicUsize::new(0));
        let inner = HashedNgrams::new(HashedParams {
            dim: 64,
            ..HashedParams::default()
        });
        (
            Counting {
                inner,
                calls: calls.clone(),
            },
            calls,
        )
    }

    fn sentences(prefix: &str, n: usize) -> Vec<String> {
        (0..n)
            .map(|i| format!("{prefix} sentence number {i}"))
            .collect()
    }

    fn segments(dir: &Path) -> Vec<PathBuf> {
        let mut v: Vec<_> = std::fs::read_dir(dir)
            .unwrap()
            .map(|e| e.unwrap().path())
            .filter(|p| p.extension().is_some_and(|e| e == "hseg"))
            .collect();
        v.sort();
        v
    }

    #[test]
    fn second_call_hits_encodes_only_distinct_misses_and_keeps_order() {
        let tmp = tempfile::tempdir().unwrap();
        let (enc, calls) = counting();
        let plain = enc.inner.clone();
        let cached = CachedEncoder::new(enc, tmp.path()).with_batch_size(3);
        let s = ["b", "a", "b", "c", "d", "a", "e", "f"];
        let first = cached.encode(&s).unwrap();
        assert_eq!(first, plain.encode(&s).unwrap());
        assert_eq!(calls.load(Ordering::SeqCst), 6, "duplicates encoded once");
        let stats = cached.stats();
        assert_eq!(
            (stats.hits, stats.misses, stats.encoded),
            (0, 8, 6),
            "{stats:?}"
        );
        assert!(stats.encoder_nanos > 0 && stats.embed_nanos >= stats.encoder_nanos);
        let again = cached.encode(&["f", "a", "zz", "a"]).unwrap();
        assert_eq!(again, plain.encode(&["f", "a", "zz", "a"]).unwrap());
        assert_eq!(calls.load(Ordering::SeqCst), 7);
        assert_eq!(cached.stats().hits, 3);
        // A fresh instance (another run) reads both segments from disk.
        let (enc2, calls2) = counting();
        let fresh = CachedEncoder::new(enc2, tmp.path());
        let s2 = ["zz", "e", "b"];
        assert_eq!(fresh.encode(&s2).unwrap(), plain.encode(&s2).unwrap());
        assert_eq!(calls2.load(Ordering::SeqCst), 0);
        assert_eq!(fresh.stats().hits, 3);
        assert_eq!(
            segments(fresh.dir()).len(),
            3,
            "one segment per batch of misses"
        );
        assert_eq!(fresh.encode(&[]).unwrap().rows, 0);
    }

    #[test]
    fn batches_encoded_before_a_failure_are_kept() {
        let tmp = tempfile::tempdir().unwrap();
        let (enc, _) = counting();
        let cached = CachedEncoder::new(enc, tmp.path()).with_batch_size(2);
        assert!(cached.encode(&["a", "b", "c", "boom"]).is_err());
        let (enc2, calls2) = counting();
        let fresh = CachedEncoder::new(enc2, tmp.path());
        fresh.encode(&["a", "b", "c"]).unwrap();
        assert_eq!(
            calls2.load(Ordering::SeqCst),
            1,
            "only `c` is encoded again"
        );
        assert_eq!(fresh.stats().hits, 2);
    }

    #[test]
    fn temp_files_truncated_and_corrupt_segments_are_ignored() {
        let tmp = tempfile::tempdir().unwrap();
        let (enc, _) = counting();
        let plain = enc.inner.clone();
        let cached = CachedEncoder::new(enc, tmp.path());
        let s = sentences("x", 20);
        let refs: Vec<&str> = s.iter().map(String::as_str).collect();
        cached.encode(&refs).unwrap();
        let dir = cached.dir().to_path_buf();
        let seg = segments(&dir).pop().unwrap();
        let bytes = std::fs::read(&seg).unwrap();
        // A killed writer's leftover temporary file, a truncated segment and one with a
        // flipped row byte, all for the same sentences.
        std::fs::write(dir.join(".harness-abc.tmp"), &bytes[..bytes.len() / 2]).unwrap();
        std::fs::write(dir.join("seg-0-truncated.hseg"), &bytes[..bytes.len() - 7]).unwrap();
        let mut flipped = bytes.clone();
        *flipped.last_mut().unwrap() ^= 0x40;
        std::fs::write(dir.join("seg-1-flipped.hseg"), &flipped).unwrap();
        std::fs::remove_file(&seg).unwrap();
        let (enc2, calls2) = counting();
        let fresh = CachedEncoder::new(enc2, tmp.path());
        assert_eq!(fresh.encode(&refs).unwrap(), plain.encode(&refs).unwrap());
        // The flipped segment is dropped as a whole once its last row fails its checksum,
        // so all 20 sentences are encoded again: correct rows, a warning, no crash.
        assert_eq!(calls2.load(Ordering::SeqCst), 20);
        assert_eq!(fresh.stats().misses, 20);
        // The re-encoded rows went into a good segment: a third instance hits everything,
        // whichever of the good and the corrupt segment it indexes first.
        let (enc3, calls3) = counting();
        let third = CachedEncoder::new(enc3, tmp.path());
        assert_eq!(third.encode(&refs).unwrap(), plain.encode(&refs).unwrap());
        assert_eq!(calls3.load(Ordering::SeqCst), 0);
    }

    #[test]
    fn concurrent_writers_of_one_fingerprint_agree() {
        let tmp = tempfile::tempdir().unwrap();
        let all = sentences("shared", 400);
        let plain = counting().0.inner;
        let expected = plain
            .encode(&all.iter().map(String::as_str).collect::<Vec<_>>())
            .unwrap();
        std::thread::scope(|scope| {
            for t in 0..4 {
                let (all, tmp, expected) = (&all, tmp.path(), &expected);
                scope.spawn(move || {
                    // Each thread has its own cache instance (as separate processes would)
                    // and overlapping, differently ordered slices, several calls each.
                    let cached = CachedEncoder::new(counting().0, tmp).with_batch_size(7);
                    for round in 0..5 {
                        let idx: Vec<usize> = (0..all.len())
                            .filter(|i| (i + t + round) % 3 != 0)
                            .rev()
                            .collect();
                        let s: Vec<&str> = idx.iter().map(|&i| all[i].as_str()).collect();
                        let got = cached.encode(&s).unwrap();
                        assert_eq!(got, expected.select_rows(&idx));
                    }
                });
            }
        });
        let (enc, calls) = counting();
        let cached = CachedEncoder::new(enc, tmp.path());
        let refs: Vec<&str> = all.iter().map(String::as_str).collect();
        assert_eq!(cached.encode(&refs).unwrap(), expected);
        assert_eq!(calls.load(Ordering::SeqCst), 0);
        let leftovers: Vec<_> = std::fs::read_dir(cached.dir())
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .filter(|n| !n.to_string_lossy().ends_with(".hseg"))
            .collect();
        assert!(leftovers.is_empty(), "{leftovers:?}");
    }

    /// Two processes (this test binary re-run as children) write one fingerprint at once.
    #[test]
    fn concurrent_processes_share_the_cache() {
        const VAR: &str = "HARNESS_TEST_CACHE_CHILD_DIR";
        let all = sentences("proc", 300);
        let refs: Vec<&str> = all.iter().map(String::as_str).collect();
        let plain = counting().0.inner;
        if let Some(dir) = std::env::var_os(VAR) {
            let cached = CachedEncoder::new(counting().0, Path::new(&dir)).with_batch_size(16);
            for chunk in refs.chunks(50) {
                assert_eq!(cached.encode(chunk).unwrap(), plain.encode(chunk).unwrap());
            }
            return;
        }
        let tmp = tempfile::tempdir().unwrap();
        let children: Vec<_> = (0..2)
            .map(|_| {
                std::process::Command::new(std::env::current_exe().unwrap())
                    .args([
                        "--exact",
                        "cache::tests::concurrent_processes_share_the_cache",
                        "--quiet",
                    ])
                    .env(VAR, tmp.path())
                    .stdout(std::process::Stdio::null())
                    .spawn()
                    .unwrap()
            })
            .collect();
        for mut c in children {
            assert!(c.wait().unwrap().success(), "a child process failed");
        }
        let (enc, calls) = counting();
        let cached = CachedEncoder::new(enc, tmp.path());
        assert_eq!(cached.encode(&refs).unwrap(), plain.encode(&refs).unwrap());
        assert_eq!(calls.load(Ordering::SeqCst), 0);
        assert_eq!(cached.stats().hits, 300);
    }

    #[test]
    fn fingerprint_dirs_are_safe_and_distinct() {
        let root = Path::new("/c");
        let a = fingerprint_dir(root, "npy-v1-ab/../x");
        let b = fingerprint_dir(root, "npy-v1-ab_.._x");
        assert_ne!(a, b);
        assert_eq!(a.parent().unwrap(), Path::new("/c/embeddings"));
        assert!(!a.file_name().unwrap().to_string_lossy().contains('/'));
    }

    struct Nan;
    impl Encoder for Nan {
        fn name(&self) -> &str {
            "nan"
        }
        fn fingerprint(&self) -> String {
            "nan".into()
        }
        fn dim(&self) -> usize {
            2
        }
        fn encode(&self, s: &[&str]) -> Result<Matrix, EncodeError> {
            let mut m = Matrix::zeros(s.len(), 2);
            if let Some(i) = s.iter().position(|x| *x == "bad") {
                m.row_mut(i)[1] = f32::NAN;
            }
            Ok(m)
        }
    }

    #[test]
    fn a_non_finite_vector_is_an_error_naming_the_sentence_and_is_not_cached() {
        let dir = tempfile::tempdir().unwrap();
        let enc = CachedEncoder::new(Nan, dir.path());
        let err = enc.encode(&["good", "bad"]).unwrap_err().to_string();
        assert!(
            err.contains("nan") && err.contains("\"bad\"") && err.contains("dimension 1"),
            "{err}"
        );
        assert!(enc.encode(&["good"]).is_ok());
        assert_eq!(
            enc.stats().hits,
            0,
            "nothing of the failed batch was cached"
        );
    }
}
