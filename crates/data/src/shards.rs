//! Binarized, memory-mapped shards of tokenised training examples (the fairseq
//! `fairseq-preprocess` `.bin`/`.idx` idea, MosaicML `streaming`'s shards): a corpus is
//! tokenised once into shard files of at most [`SHARD_EXAMPLES`] examples, each example a
//! fixed number of token rows (a pair's two sides, an NLI pair, a sentence and its
//! neighbours) plus two small integers (languages, a label); training maps the shards it
//! needs and reads batches from them, so memory does not grow with the corpus.
//!
//! A shard file (little-endian u32 arrays, each section 8-byte aligned so that the mapped
//! bytes are read in place):
//! ```text
//! header (64 bytes): magic "HARNSHRD", version, rows per example, has n-grams, 0,
//!                    examples, ids, n-gram ids (u64 each), zero padding
//! ends      examples × rows   cumulative end of each row in `ids`
//! ids       token ids
//! tags      examples × 2      e.g. (source language, target language) or (label, 0)
//! gram_ends ids               (with n-grams) cumulative end of each token's n-grams
//! grams     n-gram ids        (with n-grams)
//! ```
//! A set of shards is complete only when its `manifest.json` exists: each shard is written
//! to a temporary file and renamed, and the manifest, which lists every shard with its
//! size, is written last. A run killed while binarizing leaves no manifest, so no later run
//! takes its shards as complete.
//!
//! Why by hand: no crate of the ecosystem writes fairseq's format from Rust, and Arrow/Parquet
//! would add a large dependency for four flat integer arrays.

use crate::tokenize::{Ngrams, Tokens};
use crate::DataError;
use serde::{Deserialize, Serialize};
use std::io::Write;
use std::path::{Path, PathBuf};

/// Examples per shard: a shard's batches are planned in memory (a few MB of lengths and
/// indices), and a 1 M-pair corpus is four shards (one window of [`WINDOW_SHARDS`]).
pub const SHARD_EXAMPLES: usize = 1 << 18;

/// Shards whose examples are bucketed and shuffled together (one "window"): the unit of
/// the epoch's order, of the memory training holds, and of the length bucketing.
pub const WINDOW_SHARDS: usize = 4;

const MAGIC: &[u8; 8] = b"HARNSHRD";
const VERSION: u32 = 1;
const HEADER: usize = 64;

/// The shape of every example of a shard set.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Layout {
    /// Token rows per example.
    pub rows: u32,
    /// Whether tokens carry character n-gram ids.
    pub ngrams: bool,
    /// Whether rows are complete (a pretrained tokenizer's rows, with its own start and end
    /// tokens: [`Tokens::complete`]).
    pub complete: bool,
}

/// One shard as the manifest lists it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ShardEntry {
    /// File name in the set's folder.
    pub file: String,
    /// Its size in bytes (checked when it is opened).
    pub bytes: u64,
    pub examples: u64,
    /// Token ids over all its rows.
    pub ids: u64,
    /// `costs[c]`: its examples whose longest row plus `</s>` is `c` tokens (what a batch's
    /// padded width is made of), so batches can be counted without reading the shard.
    pub costs: Vec<u64>,
}

/// A complete shard set's `manifest.json`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Manifest {
    pub version: u32,
    pub layout: Layout,
    pub shards: Vec<ShardEntry>,
    /// Examples over all shards.
    pub examples: u64,
    /// What the writer recorded beside the shards (source counts, provenance).
    #[serde(default)]
    pub extra: serde_json::Value,
}

/// The manifest's file name.
pub const MANIFEST: &str = "manifest.json";

impl Manifest {
    /// The complete shard set in `dir`, or `None` when there is none (no manifest: never
    /// written, or its writer was killed).
    pub fn read(dir: &Path) -> Result<Option<Manifest>, DataError> {
        let path = dir.join(MANIFEST);
        let text = match std::fs::read_to_string(&path) {
            Ok(t) => t,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(DataError::Io { path, source: e }),
        };
        let m: Manifest = serde_json::from_str(&text).map_err(|e| {
            DataError::format(
                &path,
                Some(e.line()),
                format!("not a shard manifest ({e})"),
                "delete the folder: the next run binarizes the corpus again",
            )
        })?;
        if m.version != VERSION {
            return Ok(None);
        }
        Ok(Some(m))
    }

    /// The cost of example rows, as [`ShardEntry::costs`] counts it.
    pub fn cost(rows: &[&Tokens]) -> usize {
        rows.iter().map(|r| r.len()).max().unwrap_or(0) + 1
    }
}

/// Writes a shard set: examples pushed in order, shards cut every [`SHARD_EXAMPLES`], the
/// manifest last ([`ShardWriter::finish`]).
pub struct ShardWriter {
    dir: PathBuf,
    layout: Layout,
    shard_examples: usize,
    current: ShardBuffer,
    entries: Vec<ShardEntry>,
}

#[derive(Default)]
struct ShardBuffer {
    ends: Vec<u32>,
    ids: Vec<u32>,
    tags: Vec<u32>,
    gram_ends: Vec<u32>,
    grams: Vec<u32>,
    costs: Vec<u64>,
}

impl ShardBuffer {
    fn examples(&self, rows: u32) -> usize {
        self.ends.len() / rows as usize
    }
}

impl ShardWriter {
    /// A writer into `dir` (created). Shards already there are replaced as they are
    /// written; a manifest already there is removed first, so the set is incomplete until
    /// [`ShardWriter::finish`].
    pub fn create(dir: &Path, layout: Layout) -> Result<Self, DataError> {
        Self::with_shard_size(dir, layout, SHARD_EXAMPLES)
    }

    /// [`ShardWriter::create`] with another shard size (tests).
    pub fn with_shard_size(
        dir: &Path,
        layout: Layout,
        shard_examples: usize,
    ) -> Result<Self, DataError> {
        std::fs::create_dir_all(dir).map_err(|e| DataError::Io {
            path: dir.to_path_buf(),
            source: e,
        })?;
        let manifest = dir.join(MANIFEST);
        match std::fs::remove_file(&manifest) {
            Ok(()) => {}
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => {
                return Err(DataError::Io {
                    path: manifest,
                    source: e,
                })
            }
        }
        Ok(ShardWriter {
            dir: dir.to_path_buf(),
            layout,
            shard_examples: shard_examples.max(1),
            current: ShardBuffer::default(),
            entries: Vec::new(),
        })
    }

    /// Appends one example: `rows` (as many as the layout says) and its two tags.
    pub fn push(&mut self, rows: &[&Tokens], tags: [u32; 2]) -> Result<(), DataError> {
        debug_assert_eq!(rows.len(), self.layout.rows as usize);
        let ids_here: usize = rows.iter().map(|r| r.len()).sum();
        // u32 offsets: close the shard before they would overflow.
        if self.current.ids.len() + ids_here > (u32::MAX as usize) / 2 {
            self.flush()?;
        }
        let b = &mut self.current;
        for r in rows {
            b.ids.extend_from_slice(&r.ids);
            b.ends.push(b.ids.len() as u32);
            if self.layout.ngrams {
                for i in 0..r.len() {
                    b.grams.extend_from_slice(r.ngrams_of(i));
                    b.gram_ends.push(b.grams.len() as u32);
                }
            }
        }
        b.tags.extend_from_slice(&tags);
        let cost = Manifest::cost(rows);
        if b.costs.len() <= cost {
            b.costs.resize(cost + 1, 0);
        }
        b.costs[cost] += 1;
        if b.examples(self.layout.rows) >= self.shard_examples {
            self.flush()?;
        }
        Ok(())
    }

    /// Examples pushed so far.
    pub fn examples(&self) -> u64 {
        self.entries.iter().map(|e| e.examples).sum::<u64>()
            + self.current.examples(self.layout.rows) as u64
    }

    fn flush(&mut self) -> Result<(), DataError> {
        let b = std::mem::take(&mut self.current);
        let examples = b.examples(self.layout.rows);
        if examples == 0 {
            return Ok(());
        }
        let file = format!("{:05}.shard", self.entries.len());
        let path = self.dir.join(&file);
        let io = |e: std::io::Error| DataError::Io {
            path: path.clone(),
            source: e,
        };
        let mut header = Vec::with_capacity(HEADER);
        header.extend_from_slice(MAGIC);
        for v in [VERSION, self.layout.rows, self.layout.ngrams as u32, 0] {
            header.extend_from_slice(&v.to_le_bytes());
        }
        for v in [examples as u64, b.ids.len() as u64, b.grams.len() as u64] {
            header.extend_from_slice(&v.to_le_bytes());
        }
        header.resize(HEADER, 0);
        let mut tmp = harness_core::fsutil::temp_file_in(&self.dir).map_err(io)?;
        {
            let mut w = std::io::BufWriter::with_capacity(1 << 20, tmp.as_file_mut());
            w.write_all(&header).map_err(io)?;
            let mut sections = vec![&b.ends, &b.ids, &b.tags];
            if self.layout.ngrams {
                sections.extend([&b.gram_ends, &b.grams]);
            }
            for s in sections {
                write_u32s(&mut w, s).map_err(io)?;
            }
            w.flush().map_err(io)?;
        }
        tmp.as_file().sync_data().map_err(io)?;
        let bytes = tmp.as_file().metadata().map_err(io)?.len();
        tmp.persist(&path).map_err(|e| io(e.error))?;
        self.entries.push(ShardEntry {
            file,
            bytes,
            examples: examples as u64,
            ids: b.ids.len() as u64,
            costs: b.costs,
        });
        Ok(())
    }

    /// Writes the last shard and then the manifest (with `extra`), which makes the set
    /// complete.
    pub fn finish(mut self, extra: serde_json::Value) -> Result<Manifest, DataError> {
        self.flush()?;
        let manifest = Manifest {
            version: VERSION,
            layout: self.layout,
            examples: self.entries.iter().map(|e| e.examples).sum(),
            shards: self.entries,
            extra,
        };
        let path = self.dir.join(MANIFEST);
        let text = serde_json::to_string_pretty(&manifest).expect("a manifest serialises");
        harness_core::nofollow::write_atomic(&path, text.as_bytes())
            .map_err(|e| DataError::Io { path, source: e })?;
        Ok(manifest)
    }
}

/// Removes the complete shard set in `dir`: its manifest first (so that nothing takes the
/// set as complete any more), then the shard files it names, then the folder if nothing else
/// is left in it (a file harness did not write stays, and so does the folder). Returns the
/// bytes removed; `Ok(0)` when `dir` holds no complete set.
pub fn remove_set(dir: &Path) -> Result<u64, DataError> {
    let Some(manifest) = Manifest::read(dir)? else {
        return Ok(0);
    };
    let io = |path: PathBuf, e| DataError::Io { path, source: e };
    let path = dir.join(MANIFEST);
    let mut bytes = std::fs::metadata(&path).map(|m| m.len()).unwrap_or(0);
    std::fs::remove_file(&path).map_err(|e| io(path, e))?;
    for entry in &manifest.shards {
        // A manifest names its files by bare names; anything else is not one of ours.
        if entry.file.contains(['/', '\\']) || entry.file.starts_with('.') {
            continue;
        }
        let path = dir.join(&entry.file);
        match std::fs::remove_file(&path) {
            Ok(()) => bytes += entry.bytes,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => return Err(io(path, e)),
        }
    }
    let _ = std::fs::remove_dir(dir);
    Ok(bytes)
}

/// Writes `v` little-endian, padded to 8 bytes.
fn write_u32s(w: &mut impl Write, v: &[u32]) -> std::io::Result<()> {
    if cfg!(target_endian = "little") {
        w.write_all(bytemuck::cast_slice(v))?;
    } else {
        for x in v {
            w.write_all(&x.to_le_bytes())?;
        }
    }
    if v.len() % 2 == 1 {
        w.write_all(&[0; 4])?;
    }
    Ok(())
}

/// One shard, mapped into memory (read-only; the kernel pages it in as batches touch it and
/// the mapping is released when the shard is dropped).
pub struct Shard {
    map: memmap2::Mmap,
    layout: Layout,
    examples: usize,
    /// Offsets (in u32s from the start of the file) of the sections.
    ends: usize,
    ids: usize,
    tags: usize,
    gram_ends: usize,
    grams: usize,
    n_ids: usize,
    n_grams: usize,
}

impl Shard {
    /// Maps the shard `entry` of the set in `dir`, checking its size and header against the
    /// manifest.
    pub fn open(dir: &Path, entry: &ShardEntry, layout: Layout) -> Result<Shard, DataError> {
        #[cfg(not(target_endian = "little"))]
        compile_error!("shards are read in place as little-endian u32s");
        let path = dir.join(&entry.file);
        let bad = |detail: String| {
            DataError::format(
                &path,
                None,
                detail,
                "delete the shard set's folder: the next run binarizes the corpus again",
            )
        };
        let file = std::fs::File::open(&path).map_err(|e| DataError::Io {
            path: path.clone(),
            source: e,
        })?;
        let len = file
            .metadata()
            .map_err(|e| DataError::Io {
                path: path.clone(),
                source: e,
            })?
            .len();
        if len != entry.bytes {
            return Err(bad(format!(
                "{len} bytes, the manifest says {} (changed since it was written)",
                entry.bytes
            )));
        }
        // SAFETY: the file is opened read-only and harness never writes a shard in place
        // (shards are renamed into place whole); a process that truncated it behind our back
        // could make reads fault, which the size check above makes unlikely but cannot rule
        // out — the same contract as every mmap-based reader (fairseq, Arrow).
        let map = unsafe { memmap2::Mmap::map(&file) }.map_err(|e| DataError::Io {
            path: path.clone(),
            source: e,
        })?;
        if map.len() < HEADER || &map[..8] != MAGIC {
            return Err(bad("not a harness shard (bad magic)".into()));
        }
        let u32_at = |o: usize| u32::from_le_bytes(map[o..o + 4].try_into().expect("4 bytes"));
        let u64_at = |o: usize| u64::from_le_bytes(map[o..o + 8].try_into().expect("8 bytes"));
        let (version, rows, ngrams) = (u32_at(8), u32_at(12), u32_at(16) != 0);
        if version != VERSION || rows != layout.rows || ngrams != layout.ngrams {
            return Err(bad(format!(
                "version {version}, {rows} rows, n-grams {ngrams}: not the manifest's layout"
            )));
        }
        let (examples, n_ids, n_grams) = (
            u64_at(24) as usize,
            u64_at(32) as usize,
            u64_at(40) as usize,
        );
        if examples as u64 != entry.examples || n_ids as u64 != entry.ids {
            return Err(bad("its header disagrees with the manifest".into()));
        }
        let padded = |n: usize| n + n % 2;
        let ends = HEADER / 4;
        let ids = ends + padded(examples * rows as usize);
        let tags = ids + padded(n_ids);
        let gram_ends = tags + padded(examples * 2);
        let (grams, end) = if ngrams {
            let g = gram_ends + padded(n_ids);
            (g, g + padded(n_grams))
        } else {
            (gram_ends, gram_ends)
        };
        if end * 4 != map.len() {
            return Err(bad(format!(
                "{} bytes, its header needs {}",
                map.len(),
                end * 4
            )));
        }
        let shard = Shard {
            map,
            layout,
            examples,
            ends,
            ids,
            tags,
            gram_ends,
            grams,
            n_ids,
            n_grams,
        };
        // The row ends must rise within the ids (a flipped byte must not index past them).
        let e = shard.section(shard.ends, examples * rows as usize);
        if e.windows(2).any(|w| w[0] > w[1]) || e.last().is_some_and(|&l| l as usize != n_ids) {
            return Err(bad("its row offsets are not increasing".into()));
        }
        Ok(shard)
    }

    fn words(&self) -> &[u32] {
        // The map is page-aligned and its length a multiple of 8 (checked in `open`).
        bytemuck::cast_slice(&self.map[..])
    }

    fn section(&self, start: usize, len: usize) -> &[u32] {
        &self.words()[start..start + len]
    }

    /// Its examples.
    pub fn len(&self) -> usize {
        self.examples
    }

    /// True when it has none.
    pub fn is_empty(&self) -> bool {
        self.examples == 0
    }

    fn row_span(&self, example: usize, row: usize) -> (usize, usize) {
        let ends = self.section(self.ends, self.examples * self.layout.rows as usize);
        let r = example * self.layout.rows as usize + row;
        let start = if r == 0 { 0 } else { ends[r - 1] as usize };
        (start, ends[r] as usize)
    }

    /// The length of row `row` of example `example`.
    pub fn row_len(&self, example: usize, row: usize) -> usize {
        let (s, e) = self.row_span(example, row);
        e - s
    }

    /// The cost of an example ([`Manifest::cost`]).
    pub fn cost(&self, example: usize) -> usize {
        (0..self.layout.rows as usize)
            .map(|r| self.row_len(example, r))
            .max()
            .unwrap_or(0)
            + 1
    }

    /// Row `row` of example `example`, as the encoder reads it.
    pub fn row(&self, example: usize, row: usize) -> Tokens {
        let (s, e) = self.row_span(example, row);
        let ids = self.section(self.ids, self.n_ids)[s..e].to_vec();
        let ngrams = self.layout.ngrams.then(|| {
            let ge = self.section(self.gram_ends, self.n_ids);
            let first = if s == 0 { 0 } else { ge[s - 1] };
            let last = if e == 0 { 0 } else { ge[e - 1] };
            Ngrams {
                ids: self.section(self.grams, self.n_grams)[first as usize..last as usize].to_vec(),
                ends: ge[s..e].iter().map(|&x| x - first).collect(),
            }
        });
        Tokens {
            ids,
            ngrams,
            complete: self.layout.complete,
        }
    }

    /// The two tags of example `example`.
    pub fn tags(&self, example: usize) -> [u32; 2] {
        let t = self.section(self.tags, self.examples * 2);
        [t[example * 2], t[example * 2 + 1]]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tokens(ids: &[u32]) -> Tokens {
        Tokens::from_ids(ids.to_vec())
    }

    #[test]
    fn examples_come_back_as_they_were_written_across_shards() {
        let dir = tempfile::tempdir().unwrap();
        let layout = Layout {
            rows: 2,
            ngrams: false,
            complete: false,
        };
        let mut w = ShardWriter::with_shard_size(dir.path(), layout, 3).unwrap();
        let examples: Vec<(Vec<u32>, Vec<u32>)> = (0..7u32)
            .map(|i| ((0..i % 4 + 1).collect(), vec![100 + i; (i % 3) as usize]))
            .collect();
        for (i, (a, b)) in examples.iter().enumerate() {
            w.push(&[&tokens(a), &tokens(b)], [i as u32, 9]).unwrap();
        }
        assert!(
            Manifest::read(dir.path()).unwrap().is_none(),
            "not complete yet"
        );
        let m = w.finish(serde_json::json!({"k": 1})).unwrap();
        assert_eq!(Manifest::read(dir.path()).unwrap().unwrap(), m);
        assert_eq!(
            m.shards.iter().map(|s| s.examples).collect::<Vec<_>>(),
            [3, 3, 1]
        );
        let mut k = 0;
        for e in &m.shards {
            let s = Shard::open(dir.path(), e, layout).unwrap();
            for i in 0..s.len() {
                let (a, b) = &examples[k];
                assert_eq!(s.row(i, 0).ids, *a);
                assert_eq!(s.row(i, 1).ids, *b);
                assert_eq!(s.tags(i), [k as u32, 9]);
                assert_eq!(s.cost(i), a.len().max(b.len()) + 1);
                k += 1;
            }
            let counted: u64 = e.costs.iter().sum();
            assert_eq!(counted, e.examples);
        }
        assert_eq!(k, 7);
    }

    #[test]
    fn ngrams_round_trip() {
        let dir = tempfile::tempdir().unwrap();
        let layout = Layout {
            rows: 1,
            ngrams: true,
            complete: false,
        };
        let mut w = ShardWriter::create(dir.path(), layout).unwrap();
        let rows = [
            Tokens {
                ids: vec![5, 6],
                ngrams: Some(Ngrams {
                    ids: vec![1, 2, 3],
                    ends: vec![2, 3],
                }),
                complete: false,
            },
            Tokens {
                ids: vec![7],
                ngrams: Some(Ngrams {
                    ids: vec![4],
                    ends: vec![1],
                }),
                complete: false,
            },
        ];
        for r in &rows {
            w.push(&[r], [0, 0]).unwrap();
        }
        let m = w.finish(serde_json::Value::Null).unwrap();
        let s = Shard::open(dir.path(), &m.shards[0], layout).unwrap();
        assert_eq!(s.row(0, 0), rows[0]);
        assert_eq!(s.row(1, 0), rows[1]);
    }

    #[test]
    fn removing_a_set_removes_its_files_and_leaves_a_foreign_one() {
        let root = tempfile::tempdir().unwrap();
        let layout = Layout {
            rows: 1,
            ngrams: false,
            complete: false,
        };
        let write = |name: &str| {
            let dir = root.path().join(name);
            let mut w = ShardWriter::with_shard_size(&dir, layout, 2).unwrap();
            for i in 0..5 {
                w.push(&[&tokens(&[i, i + 1])], [0, 0]).unwrap();
            }
            w.finish(serde_json::Value::Null).unwrap();
            dir
        };
        let a = write("a");
        let b = write("b");
        std::fs::write(b.join("notes.txt"), "mine").unwrap();
        assert!(remove_set(&a).unwrap() > 0);
        assert!(!a.exists());
        assert!(remove_set(&b).unwrap() > 0);
        let left: Vec<_> = std::fs::read_dir(&b)
            .unwrap()
            .flatten()
            .map(|e| e.file_name())
            .collect();
        assert_eq!(left, vec![std::ffi::OsString::from("notes.txt")]);
        // Nothing complete left: nothing to remove.
        assert_eq!(remove_set(&b).unwrap(), 0);
    }

    #[test]
    fn a_changed_or_truncated_shard_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let layout = Layout {
            rows: 1,
            ngrams: false,
            complete: false,
        };
        let mut w = ShardWriter::create(dir.path(), layout).unwrap();
        w.push(&[&tokens(&[1, 2, 3])], [0, 0]).unwrap();
        let m = w.finish(serde_json::Value::Null).unwrap();
        let path = dir.path().join(&m.shards[0].file);
        let bytes = std::fs::read(&path).unwrap();
        std::fs::write(&path, &bytes[..bytes.len() - 8]).unwrap();
        let e = Shard::open(dir.path(), &m.shards[0], layout)
            .err()
            .unwrap()
            .to_string();
        assert!(e.contains("00000.shard") && e.contains("manifest"), "{e}");
    }
}
