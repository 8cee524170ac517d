//! A task's examples read from binarized shards ([`harness_data::shards`]) in constant
//! memory: the batches of an epoch come window by window (a window is
//! [`WINDOW_SHARDS`] shards whose examples are length-bucketed and shuffled together, the
//! MosaicML `streaming` "shuffle block"), and only the current window's shards are mapped.
//!
//! The order is a function of `(seed, epoch)` and the shard set alone (never of the number
//! of devices or ranks: each takes its part of every global batch), so a run resumed from a
//! checkpoint's `(epoch, cursor)` sees the batches an uninterrupted one would, on any number
//! of devices:
//! - epoch `e` permutes the shards (seeded by `(seed, e)`) and cuts the permutation into
//!   windows; a set of at most [`WINDOW_SHARDS`] shards is one window in every epoch;
//! - a window's batches are [`crate::data::bucket`]'s over its examples, in an order drawn
//!   per epoch — for a one-window set exactly what [`crate::task_data::TaskData::new`]
//!   gives the same examples in memory, so a small corpus trains the same from shards as
//!   from memory;
//! - the number of batches of every window is computed from the manifest's cost histograms
//!   without reading a shard, so a position maps to its window at once.
//!
//! While a step trains on batch `p`, a thread of its own decodes batch `p + 1` (and maps its
//! window when it starts a new one): [`ShardedExamples::batch_at`] hands over that batch
//! when asked for its position, and computes any other position itself, so what a step
//! sees never depends on the thread (a function of the position alone, as above).

use crate::data::{
    batch_full, bucket, ContextExample, Examples, LabelledExample, NliExample, PairExample,
    Position,
};
use crate::TrainError;
use harness_data::shards::{Manifest, Shard, WINDOW_SHARDS};
use rand::seq::SliceRandom;
use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;

/// What the shards' examples are, and how their rows and tags decode.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ShardKind {
    /// Rows (src, tgt); tags (src_lang | tgt_lang << 16, origin | forward << 31).
    Pairs,
    /// Rows (message, response); tags unused.
    Conversation,
    /// Rows (premise, hypothesis); tag 0 the label.
    Nli,
    /// Rows (sentence, previous, next): a sentence of running text and its neighbours.
    Context,
    /// Row (text); tag 0 the class's index.
    Labelled,
}

impl ShardKind {
    /// Token rows per example.
    pub fn rows(self) -> u32 {
        match self {
            ShardKind::Pairs | ShardKind::Conversation | ShardKind::Nli => 2,
            ShardKind::Context => 3,
            ShardKind::Labelled => 1,
        }
    }

    /// No examples of this kind (what a task reading its batches from shards holds in
    /// memory).
    pub fn no_examples(self) -> Examples {
        match self {
            ShardKind::Pairs | ShardKind::Conversation => Examples::Pairs(Vec::new()),
            ShardKind::Nli => Examples::Nli(Vec::new()),
            ShardKind::Context => Examples::Context(Vec::new()),
            ShardKind::Labelled => Examples::Labelled(Vec::new()),
        }
    }
}

/// Packs a translation example's languages and origin into a shard's two tags.
pub fn pair_tags(e: &PairExample) -> [u32; 2] {
    debug_assert!(e.src_lang < 1 << 16 && e.tgt_lang < 1 << 16 && e.origin < 1 << 31);
    [
        e.src_lang | e.tgt_lang << 16,
        e.origin | (e.forward as u32) << 31,
    ]
}

/// A task's examples in a complete shard set, and the seed and budget of its batches.
#[derive(Debug, Clone)]
pub struct ShardedExamples {
    dir: PathBuf,
    manifest: Arc<Manifest>,
    kind: ShardKind,
    seed: u64,
    batch_tokens: Option<usize>,
    batch_size: Option<usize>,
    cache: Arc<Mutex<Cache>>,
    /// The next batch, being decoded on its own thread (each clone has its own).
    ahead: Ahead,
    /// The temporary folder of a set that lives only as long as the run (a shipped
    /// dataset's), removed when the last clone is dropped.
    _owned: Option<Arc<tempfile::TempDir>>,
}

/// The batch read ahead: its position and the thread decoding it.
#[derive(Default)]
struct Ahead(Mutex<Option<(Position, JoinHandle<Decoded>)>>);

type Decoded = Result<(Examples, Position), TrainError>;

impl Clone for Ahead {
    /// A clone reads ahead for itself: two readers of one set (data-parallel peers) ask
    /// for the same positions, and one taking the other's batch would only make it wait.
    fn clone(&self) -> Self {
        Ahead::default()
    }
}

impl std::fmt::Debug for Ahead {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Ahead")
    }
}

#[derive(Default)]
struct Cache {
    /// Batches per window of one epoch, by epoch (the last one asked).
    counts: Option<(u64, Vec<u64>)>,
    /// The mapped window in use.
    window: Option<Window>,
}

impl std::fmt::Debug for Cache {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Cache")
    }
}

struct Window {
    /// (epoch, window), or (0, 0) for a one-window set in every epoch.
    key: (u64, usize),
    shards: Vec<Shard>,
    /// The first window-local index of each shard.
    starts: Vec<usize>,
    batches: Vec<Vec<u32>>,
    /// `(epoch, order)`: the batches' order in that epoch.
    order: Option<(u64, Vec<u32>)>,
}

impl ShardedExamples {
    /// The examples of the complete shard set in `dir`.
    pub fn new(
        dir: &Path,
        manifest: Manifest,
        kind: ShardKind,
        batch_tokens: Option<usize>,
        batch_size: Option<usize>,
        seed: u64,
    ) -> Self {
        ShardedExamples {
            dir: dir.to_path_buf(),
            manifest: Arc::new(manifest),
            kind,
            seed,
            batch_tokens,
            batch_size,
            cache: Arc::default(),
            ahead: Ahead::default(),
            _owned: None,
        }
    }

    /// The set, which also keeps `dir` (its temporary folder) alive.
    pub fn owning(mut self, dir: Arc<tempfile::TempDir>) -> Self {
        self._owned = Some(dir);
        self
    }

    /// The set's manifest.
    pub fn manifest(&self) -> &Manifest {
        &self.manifest
    }

    /// Its examples.
    pub fn len(&self) -> u64 {
        self.manifest.examples
    }

    /// True when it has none.
    pub fn is_empty(&self) -> bool {
        self.manifest.examples == 0
    }

    fn single(&self) -> bool {
        self.manifest.shards.len() <= WINDOW_SHARDS
    }

    /// The shards of window `w` of `epoch`, in order.
    fn window_shards(&self, epoch: u64, w: usize) -> Vec<usize> {
        let n = self.manifest.shards.len();
        let mut order: Vec<usize> = (0..n).collect();
        if !self.single() {
            let mut rng = ChaCha8Rng::seed_from_u64(self.seed ^ 0x5348_4152_4453_0001);
            rng.set_stream(epoch + 1);
            order.shuffle(&mut rng);
        }
        order
            .chunks(WINDOW_SHARDS)
            .nth(w)
            .map(<[usize]>::to_vec)
            .unwrap_or_default()
    }

    fn windows(&self) -> usize {
        self.manifest.shards.len().div_ceil(WINDOW_SHARDS).max(1)
    }

    /// The seed of window `w`'s bucketing and orders: the task's own for a one-window set
    /// (as in memory), else one per (epoch, window).
    fn window_seed(&self, epoch: u64, w: usize) -> u64 {
        if self.single() {
            self.seed
        } else {
            self.seed
                ^ (epoch.wrapping_add(1)).wrapping_mul(0x9E37_79B9_7F4A_7C15)
                ^ (w as u64 + 1).wrapping_mul(0xC2B2_AE3D_27D4_EB4F)
        }
    }

    /// Batches of window `w` of `epoch`, counted from the cost histograms: the greedy cut
    /// of [`bucket`] depends only on the sorted costs.
    fn count_window(&self, epoch: u64, w: usize) -> u64 {
        let shards = self.window_shards(epoch, w);
        let longest = shards
            .iter()
            .map(|&s| self.manifest.shards[s].costs.len())
            .max()
            .unwrap_or(0);
        let mut hist = vec![0u64; longest];
        for &s in &shards {
            for (c, n) in self.manifest.shards[s].costs.iter().enumerate() {
                hist[c] += n;
            }
        }
        let (mut batches, mut len, mut widest) = (0u64, 0usize, 0usize);
        for (c, &n) in hist.iter().enumerate() {
            for _ in 0..n {
                if batch_full(len, widest, c, self.batch_tokens, self.batch_size) {
                    batches += 1;
                    len = 0;
                    widest = 0;
                }
                widest = widest.max(c);
                len += 1;
            }
        }
        batches + (len > 0) as u64
    }

    /// Batches per window of `epoch`.
    fn counts(&self, cache: &mut Cache, epoch: u64) -> Vec<u64> {
        let epoch = if self.single() { 0 } else { epoch };
        if let Some((e, c)) = &cache.counts {
            if *e == epoch {
                return c.clone();
            }
        }
        let c: Vec<u64> = (0..self.windows())
            .map(|w| self.count_window(epoch, w))
            .collect();
        cache.counts = Some((epoch, c.clone()));
        c
    }

    /// Batches of the first epoch (epochs differ by a few where windows do).
    pub fn batches_per_epoch(&self) -> u64 {
        let mut cache = self.cache.lock().unwrap_or_else(|p| p.into_inner());
        self.counts(&mut cache, 0).iter().sum()
    }

    /// The batch at `pos` (its examples decoded from the shards), and the position after it;
    /// the batch after it starts decoding on a thread of its own (see the module comment).
    pub fn batch_at(&self, pos: Position) -> Result<(Examples, Position), TrainError> {
        let mut ahead = self.ahead.0.lock().unwrap_or_else(|p| p.into_inner());
        let ready = match ahead.take() {
            Some((at, thread)) if at == pos => thread.join().ok(),
            // Another position (a resumed run, an inner loop's draw): that thread's work
            // is dropped when it ends.
            _ => None,
        };
        let decoded = match ready {
            Some(decoded) => decoded?,
            // A thread that panicked is retried here, where its panic is the caller's.
            None => self.decode_at(pos)?,
        };
        let next = decoded.1;
        let reader = self.clone();
        // A thread that cannot start is only a batch not read ahead.
        *ahead = std::thread::Builder::new()
            .name("harness-read-ahead".into())
            .spawn(move || reader.decode_at(next))
            .ok()
            .map(|thread| (next, thread));
        Ok(decoded)
    }

    /// [`ShardedExamples::batch_at`] on this thread.
    fn decode_at(&self, pos: Position) -> Decoded {
        let mut cache = self.cache.lock().unwrap_or_else(|p| p.into_inner());
        let mut epoch = pos.epoch;
        let mut cursor = pos.cursor;
        // A cursor past the epoch's end (an epoch of another length) rolls over.
        let counts = loop {
            let counts = self.counts(&mut cache, epoch);
            let total: u64 = counts.iter().sum();
            if total == 0 {
                return Err(self.no_example());
            }
            if cursor < total {
                break counts;
            }
            cursor -= total;
            epoch += 1;
        };
        let total: u64 = counts.iter().sum();
        let (w, local) = split(&counts, cursor);
        let seed = self.window_seed(epoch, w);
        let window = self.window(&mut cache, epoch, w)?;
        if window.order.as_ref().map(|o| o.0) != Some(epoch) {
            let mut rng = ChaCha8Rng::seed_from_u64(seed);
            rng.set_stream(epoch + 1);
            let mut order: Vec<u32> = (0..window.batches.len() as u32).collect();
            order.shuffle(&mut rng);
            window.order = Some((epoch, order));
        }
        let order = &window.order.as_ref().expect("set above").1;
        let batch = &window.batches[order[local as usize] as usize];
        let examples = self.decode(window, batch);
        Ok((examples, Position::after(epoch, cursor, total)))
    }

    /// Batch `b` of the first epoch's buckets in bucket order (not the epoch's shuffled
    /// order): what an inner loop draws at random, as `TaskData::batches[b]` in memory.
    pub fn nth_batch(&self, b: u64) -> Result<Examples, TrainError> {
        let mut cache = self.cache.lock().unwrap_or_else(|p| p.into_inner());
        let counts = self.counts(&mut cache, 0);
        let total: u64 = counts.iter().sum();
        if total == 0 {
            return Err(self.no_example());
        }
        let (w, local) = split(&counts, b % total);
        let window = self.window(&mut cache, 0, w)?;
        let batch = &window.batches[local as usize];
        Ok(self.decode(window, batch))
    }

    /// Every example, in shard order: for a task that needs them all at hand (hard
    /// negatives are mined over the whole corpus). Only a set of one window: its examples
    /// bucketed by [`crate::task_data::TaskData::new`] give the batches this set gives.
    pub fn all(&self) -> Result<Examples, TrainError> {
        if !self.single() {
            return Err(TrainError::recipe(
                "data.corpora",
                format!(
                    "the shard set {} holds {} examples, more than one window of {} shards can take into memory",
                    self.dir.display(),
                    self.manifest.examples,
                    WINDOW_SHARDS
                ),
                "cap the corpus with `max_examples`, or drop what needs every example at once (`hard_negatives`)",
            ));
        }
        let mut cache = self.cache.lock().unwrap_or_else(|p| p.into_inner());
        let window = self.window(&mut cache, 0, 0)?;
        let every: Vec<u32> = (0..self.manifest.examples as u32).collect();
        Ok(self.decode(window, &every))
    }

    fn no_example(&self) -> TrainError {
        TrainError::recipe(
            "data.corpora",
            format!("the shard set {} holds no example", self.dir.display()),
            "check the corpus's counts",
        )
    }

    /// Window `w` of `epoch`, mapped (the previous one unmapped first).
    fn window<'c>(
        &self,
        cache: &'c mut Cache,
        epoch: u64,
        w: usize,
    ) -> Result<&'c mut Window, TrainError> {
        let key = if self.single() { (0, 0) } else { (epoch, w) };
        if cache.window.as_ref().map(|x| x.key) != Some(key) {
            cache.window = None;
            cache.window = Some(self.open_window(epoch, w, key)?);
        }
        Ok(cache.window.as_mut().expect("opened above"))
    }

    fn open_window(&self, epoch: u64, w: usize, key: (u64, usize)) -> Result<Window, TrainError> {
        let mut shards = Vec::new();
        let mut starts = Vec::new();
        let mut costs = Vec::new();
        for s in self.window_shards(epoch, w) {
            let shard = Shard::open(&self.dir, &self.manifest.shards[s], self.manifest.layout)?;
            starts.push(costs.len());
            costs.extend((0..shard.len()).map(|i| shard.cost(i)));
            shards.push(shard);
        }
        let batches = bucket(
            &costs,
            self.batch_tokens,
            self.batch_size,
            self.window_seed(epoch, w),
        );
        Ok(Window {
            key,
            shards,
            starts,
            batches,
            order: None,
        })
    }

    fn decode(&self, window: &Window, batch: &[u32]) -> Examples {
        let locate = |i: u32| {
            let s = window.starts.partition_point(|&x| x <= i as usize) - 1;
            (&window.shards[s], i as usize - window.starts[s])
        };
        match self.kind {
            ShardKind::Pairs | ShardKind::Conversation => Examples::Pairs(
                batch
                    .iter()
                    .map(|&i| {
                        let (shard, k) = locate(i);
                        let [langs, origin] = shard.tags(k);
                        PairExample {
                            src: shard.row(k, 0),
                            tgt: shard.row(k, 1),
                            src_lang: langs & 0xffff,
                            tgt_lang: langs >> 16,
                            origin: origin & 0x7fff_ffff,
                            forward: origin >> 31 == 1,
                        }
                    })
                    .collect(),
            ),
            ShardKind::Nli => Examples::Nli(
                batch
                    .iter()
                    .map(|&i| {
                        let (shard, k) = locate(i);
                        NliExample {
                            premise: shard.row(k, 0),
                            hypothesis: shard.row(k, 1),
                            label: shard.tags(k)[0],
                        }
                    })
                    .collect(),
            ),
            ShardKind::Context => Examples::Context(
                batch
                    .iter()
                    .map(|&i| {
                        let (shard, k) = locate(i);
                        ContextExample {
                            sentence: shard.row(k, 0),
                            previous: shard.row(k, 1),
                            next: shard.row(k, 2),
                        }
                    })
                    .collect(),
            ),
            ShardKind::Labelled => Examples::Labelled(
                batch
                    .iter()
                    .map(|&i| {
                        let (shard, k) = locate(i);
                        LabelledExample {
                            ids: shard.row(k, 0),
                            label: shard.tags(k)[0],
                        }
                    })
                    .collect(),
            ),
        }
    }
}

/// The window of batch `cursor` of an epoch whose windows hold `counts` batches, and the
/// batch's index within it.
fn split(counts: &[u64], cursor: u64) -> (usize, u64) {
    let (mut w, mut local) = (0, cursor);
    while local >= counts[w] {
        local -= counts[w];
        w += 1;
    }
    (w, local)
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use harness_data::shards::{Layout, ShardWriter};
    use harness_data::tokenize::Tokens;

    /// `n` pair examples of varied lengths, written into shards of `per_shard`.
    pub(crate) fn sharded(
        n: u32,
        per_shard: usize,
        dir: &Path,
    ) -> (Vec<PairExample>, ShardedExamples) {
        let layout = Layout {
            rows: 2,
            ngrams: false,
            complete: false,
        };
        let mut w = ShardWriter::with_shard_size(dir, layout, per_shard).unwrap();
        let examples: Vec<PairExample> = (0..n)
            .map(|i| PairExample {
                src: Tokens::from_ids(vec![i; 1 + (i as usize * 7) % 13]),
                tgt: Tokens::from_ids(vec![i + 1; 1 + (i as usize * 5) % 11]),
                src_lang: i % 3,
                tgt_lang: 1,
                origin: i,
                forward: i % 2 == 0,
            })
            .collect();
        for e in &examples {
            w.push(&[&e.src, &e.tgt], pair_tags(e)).unwrap();
        }
        let m = w.finish(serde_json::Value::Null).unwrap();
        let s = ShardedExamples::new(dir, m, ShardKind::Pairs, Some(60), None, 11);
        (examples, s)
    }

    fn origins(e: &Examples) -> Vec<u32> {
        match e {
            Examples::Pairs(v) => v.iter().map(|x| x.origin).collect(),
            _ => unreachable!(),
        }
    }

    #[test]
    fn the_batch_read_ahead_is_the_one_asked_next_and_any_other_is_decoded_at_once() {
        let dir = tempfile::tempdir().unwrap();
        let (_, s) = sharded(430, 40, dir.path());
        let fresh = || {
            ShardedExamples::new(
                &s.dir,
                s.manifest().clone(),
                ShardKind::Pairs,
                Some(60),
                None,
                11,
            )
        };
        let (_, next) = s.batch_at(Position::default()).unwrap();
        let ahead = |s: &ShardedExamples| s.ahead.0.lock().unwrap().as_ref().map(|a| a.0);
        assert_eq!(
            ahead(&s),
            Some(next),
            "the next position is being read ahead"
        );
        // In order (read ahead), then a jump back and one forward (not read ahead): each is
        // what a reader with nothing read ahead decodes.
        let jumps = [
            next,
            next,
            Position {
                epoch: 0,
                cursor: 0,
            },
            Position {
                epoch: 1,
                cursor: 5,
            },
        ];
        for pos in jumps {
            let (got, after) = s.batch_at(pos).unwrap();
            let (want, want_after) = fresh().decode_at(pos).unwrap();
            assert_eq!(origins(&got), origins(&want), "{pos:?}");
            assert_eq!(after, want_after);
            assert_eq!(ahead(&s), Some(after));
        }
    }

    #[test]
    fn windows_cover_every_example_once_per_epoch_and_resume_anywhere() {
        let dir = tempfile::tempdir().unwrap();
        // 11 shards of 40: three windows, the last of three shards.
        let (_, s) = sharded(430, 40, dir.path());
        assert_eq!(s.manifest().shards.len(), 11);
        for epoch in 0..2u64 {
            let mut pos = Position { epoch, cursor: 0 };
            let mut seen = Vec::new();
            let mut batches = 0;
            while pos.epoch == epoch {
                let (b, next) = s.batch_at(pos).unwrap();
                seen.extend(origins(&b));
                // A fresh reader (a resumed run) at the same position sees the same batch.
                if batches % 7 == 3 {
                    let fresh = ShardedExamples::new(
                        &s.dir,
                        s.manifest().clone(),
                        ShardKind::Pairs,
                        Some(60),
                        None,
                        11,
                    );
                    assert_eq!(origins(&fresh.batch_at(pos).unwrap().0), origins(&b));
                }
                batches += 1;
                pos = next;
            }
            seen.sort();
            assert_eq!(seen, (0..430).collect::<Vec<_>>(), "epoch {epoch}");
            if epoch == 0 {
                assert_eq!(batches, s.batches_per_epoch());
            }
        }
        // Epochs differ in order.
        let first = |e| {
            origins(
                &s.batch_at(Position {
                    epoch: e,
                    cursor: 0,
                })
                .unwrap()
                .0,
            )
        };
        assert_ne!(first(0), first(1));
    }
}
