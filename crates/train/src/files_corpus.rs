//! A corpus of the user's own files (`data.corpora.X.files`, `harness_data::user_corpus`):
//! found and stamped when the corpora load ([`crate::corpora`]), read record by record when
//! they are binarized ([`crate::binarize`]) or sampled for a vocabulary, never whole into
//! memory.

use crate::TrainError;
use harness_data::corpus::EvalSentences;
use harness_data::user_corpus::{self, Record};
use harness_recipe::schema::{Corpus, CorpusKind};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use serde::Serialize;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

/// Bytes hashed at each end of a file for its fingerprint.
const STAMP_BYTES: u64 = 1 << 20;

/// What identifies a file's content without reading all of it: its size, modification time
/// and the sha256 of its first and last MiB. A file edited in place changes its
/// modification time (or its size, or one of its ends), and so the shards' key.
#[derive(Debug, Clone, PartialEq, Serialize, serde::Deserialize)]
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
