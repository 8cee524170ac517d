//! Training data of a recipe: each task's examples (its corpus tokenised with the run's
//! tokenizer into shards by [`crate::binarize`]) grouped into length-bucketed batches under a token budget, and a deterministic
//! data position (epoch, cursor) per task that checkpoints save and resume restores.
//!
//! Batches by token budget (LASER, fairseq `--max-tokens`): examples sorted by length (ties
//! broken by a seeded shuffle) are cut greedily so that `examples × longest side` stays
//! within `train.batch_tokens`; each epoch visits every batch once in an order drawn from
//! `(seed, task, epoch)`. So the batch of a task at position (epoch, cursor) depends on
//! nothing else, and a resumed run sees exactly the batches an uninterrupted one would.

use crate::TrainError;
use harness_data::records::Bitext;
use harness_data::tokenize::Tokens;
use rand::seq::SliceRandom;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use serde::{Deserialize, Serialize};

/// One translation example: the tokens of both sides (without special tokens) and the
/// language-ID indices of both sides (positions in the tokenizer's language list).
#[derive(Debug, Clone, PartialEq)]
pub struct PairExample {
    pub src: Tokens,
    pub tgt: Tokens,
    pub src_lang: u32,
    pub tgt_lang: u32,
    /// The pair it comes from: its index over the corpus's language pairs in order.
    pub origin: u32,
    /// Whether `tgt` is the pair's target (else its source).
    pub forward: bool,
}

/// One NLI example.
#[derive(Debug, Clone, PartialEq)]
pub struct NliExample {
    pub premise: Tokens,
    pub hypothesis: Tokens,
    pub label: u32,
}

/// A sentence with its neighbours in running text (quick-thought).
#[derive(Debug, Clone, PartialEq)]
pub struct ContextExample {
    pub sentence: Tokens,
    pub previous: Tokens,
    pub next: Tokens,
}

/// A sentence and its class.
#[derive(Debug, Clone, PartialEq)]
pub struct LabelledExample {
    pub ids: Tokens,
    pub label: u32,
}

/// A task's examples. Conversation turns are [`PairExample`]s (message → response, both
/// language index 0).
#[derive(Debug, Clone)]
pub enum Examples {
    Pairs(Vec<PairExample>),
    Nli(Vec<NliExample>),
    Context(Vec<ContextExample>),
    Labelled(Vec<LabelledExample>),
}

impl Examples {
    /// Number of examples.
    pub fn len(&self) -> usize {
        match self {
            Examples::Pairs(v) => v.len(),
            Examples::Nli(v) => v.len(),
            Examples::Context(v) => v.len(),
            Examples::Labelled(v) => v.len(),
        }
    }

    /// True when there are none.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Length (in tokens, with the `</s>` every encoder input gets) of the longer side of
    /// example `i`: what a batch's padded width is made of.
    pub fn cost(&self, i: usize) -> usize {
        match self {
            Examples::Pairs(v) => v[i].src.len().max(v[i].tgt.len()) + 1,
            Examples::Nli(v) => v[i].premise.len().max(v[i].hypothesis.len()) + 1,
            Examples::Context(v) => {
                let e = &v[i];
                e.sentence.len().max(e.previous.len()).max(e.next.len()) + 1
            }
            Examples::Labelled(v) => v[i].ids.len() + 1,
        }
    }
}

/// Where a task is in its data: epoch and batch index within the epoch's order.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Position {
    pub epoch: u64,
    pub cursor: u64,
}

impl Position {
    /// The position after batch `cursor` of `epoch`, an epoch of `batches` batches.
    pub fn after(epoch: u64, cursor: u64, batches: u64) -> Position {
        if cursor + 1 == batches {
            Position {
                epoch: epoch + 1,
                cursor: 0,
            }
        } else {
            Position {
                epoch,
                cursor: cursor + 1,
            }
        }
    }
}

/// A batch: examples and the indices of the batch's among them — the task's in-memory
/// examples, or the few decoded from its shards for this batch.
pub enum Batch<'a> {
    Borrowed(&'a Examples, &'a [u32]),
    Owned(Examples, Vec<u32>),
}

impl Batch<'_> {
    fn owned(examples: Examples) -> Self {
        let index = (0..examples.len() as u32).collect();
        Batch::Owned(examples, index)
    }

    /// The examples and the batch's indices among them.
    pub fn parts(&self) -> (&Examples, &[u32]) {
        match self {
            Batch::Borrowed(e, i) => (e, i),
            Batch::Owned(e, i) => (e, i),
        }
    }
}

/// Length-bucketed batches of examples of the given costs (padded width of each): sorted by
/// cost, ties broken by a shuffle drawn from `seed`, cut greedily so that `examples × widest`
/// stays within `batch_tokens` (or exactly `batch_size` examples; else 32).
pub fn bucket(
    costs: &[usize],
    batch_tokens: Option<usize>,
    batch_size: Option<usize>,
    seed: u64,
) -> Vec<Vec<u32>> {
    let n = costs.len();
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let tie: Vec<u32> = (0..n).map(|_| rng.random()).collect();
    let mut order: Vec<u32> = (0..n as u32).collect();
    order.sort_by_key(|&i| (costs[i as usize], tie[i as usize]));
    let mut batches = Vec::new();
    let mut current: Vec<u32> = Vec::new();
    let mut widest = 0;
    for i in order {
        let c = costs[i as usize];
        if batch_full(current.len(), widest, c, batch_tokens, batch_size) {
            batches.push(std::mem::take(&mut current));
            widest = 0;
        }
        widest = widest.max(c);
        current.push(i);
    }
    if !current.is_empty() {
        batches.push(current);
    }
    batches
}

/// Whether a batch of `len` examples as wide as `widest` is closed before an example of
/// cost `c` ([`bucket`]'s rule; a batch always takes its first example).
pub fn batch_full(
    len: usize,
    widest: usize,
    c: usize,
    batch_tokens: Option<usize>,
    batch_size: Option<usize>,
) -> bool {
    len > 0
        && match (batch_size, batch_tokens) {
            (Some(bs), _) => len >= bs,
            (None, Some(bt)) => (len + 1) * widest.max(c) > bt,
            (None, None) => len >= 32,
        }
}

/// A task's tokenised examples and their batches.
#[derive(Debug, Clone)]
pub struct TaskData {
    pub examples: Examples,
    /// Hard negatives of each example (indices of the examples whose targets are its
    /// negatives), when the task's objective asks for them (`hard_negatives.rs`).
    pub negatives: Option<Vec<Vec<u32>>>,
    /// Each batch is a list of example indices.
    pub batches: Vec<Vec<u32>>,
    /// Seed of this task's epoch orders.
    pub seed: u64,
    /// The binarized shards the task reads its batches from (every task but one whose hard
    /// negatives are mined, which holds its examples decoded in memory); then `examples` and
    /// `batches` are empty.
    pub shards: Option<crate::streamed::ShardedExamples>,
}

impl TaskData {
    /// Buckets `examples` into batches of at most `batch_tokens` padded tokens (or exactly
    /// `batch_size` examples when given), deterministically from `seed`.
    pub fn new(
        examples: Examples,
        batch_tokens: Option<usize>,
        batch_size: Option<usize>,
        seed: u64,
    ) -> Self {
        let costs: Vec<usize> = (0..examples.len()).map(|i| examples.cost(i)).collect();
        let batches = bucket(&costs, batch_tokens, batch_size, seed);
        TaskData {
            examples,
            negatives: None,
            batches,
            seed,
            shards: None,
        }
    }

    /// Its examples (in memory or in its shards).
    pub fn len(&self) -> u64 {
        match &self.shards {
            Some(s) => s.len(),
            None => self.examples.len() as u64,
        }
    }

    /// True when it has none.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Batches of one epoch.
    pub fn batches_per_epoch(&self) -> u64 {
        match &self.shards {
            Some(s) => s.batches_per_epoch(),
            None => self.batches.len() as u64,
        }
    }

    /// The batch at `pos`, and the position after it.
    pub fn batch_at(&self, pos: Position) -> Result<(Batch<'_>, Position), TrainError> {
        if let Some(s) = &self.shards {
            let (examples, next) = s.batch_at(pos)?;
            return Ok((Batch::owned(examples), next));
        }
        let n = self.batches.len().max(1) as u64;
        let (epoch, cursor) = (pos.epoch + pos.cursor / n, pos.cursor % n);
        let order = self.epoch_order(epoch);
        let b = &self.batches[order[cursor as usize] as usize];
        Ok((
            Batch::Borrowed(&self.examples, b),
            Position::after(epoch, cursor, n),
        ))
    }

    /// A batch drawn at random for inner update `i` of global step `step` (an inner loop
    /// samples its own batches, Emu Algorithm 1); a function of `(seed, step, i)` only, so a
    /// resumed run draws the same ones.
    pub fn inner_batch(&self, step: u64, i: u32) -> Result<Batch<'_>, TrainError> {
        let mut rng = ChaCha8Rng::seed_from_u64(self.seed ^ 0x1a2b_3c4d_5e6f_7081);
        rng.set_stream(step.wrapping_mul(1 << 16).wrapping_add(i as u64));
        if let Some(s) = &self.shards {
            // Drawn as a usize, as below: the same draw gives the same batch.
            let n = s.batches_per_epoch().max(1) as usize;
            return Ok(Batch::owned(s.nth_batch(rng.random_range(0..n) as u64)?));
        }
        let n = self.batches.len().max(1);
        Ok(Batch::Borrowed(
            &self.examples,
            &self.batches[rng.random_range(0..n)],
        ))
    }

    fn epoch_order(&self, epoch: u64) -> Vec<u32> {
        let mut rng = ChaCha8Rng::seed_from_u64(self.seed);
        rng.set_stream(epoch + 1);
        let mut order: Vec<u32> = (0..self.batches.len() as u32).collect();
        order.shuffle(&mut rng);
        order
    }
}

/// Which way each translation pair is trained.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Directions {
    /// One direction per pair, into a language of `targets` (both allowed: drawn at
    /// random per pair; LASER's alternation between target languages).
    OneInto,
    /// Every pair as `X → eng`; the trainer also decodes the reverse (seq2seq §2.1).
    Both,
}

/// Keeps at most `max` pairs over several language pairs: each pair list shuffled (seeded),
/// then taken round-robin so every language pair keeps an equal share (or all it has).
/// Why not the first `max`: the manythings files are sorted by length.
pub fn cap_pairs(corpora: &mut [(String, String, Vec<Bitext>)], max: usize, seed: u64) {
    for (i, (_, _, pairs)) in corpora.iter_mut().enumerate() {
        let mut rng = ChaCha8Rng::seed_from_u64(seed.wrapping_add(i as u64));
        pairs.shuffle(&mut rng);
    }
    let total: usize = corpora.iter().map(|c| c.2.len()).sum();
    if total <= max {
        return;
    }
    let mut keep = vec![0usize; corpora.len()];
    let mut left = max;
    while left > 0 {
        let mut progressed = false;
        for (k, c) in keep.iter_mut().zip(corpora.iter()) {
            if left > 0 && *k < c.2.len() {
                *k += 1;
                left -= 1;
                progressed = true;
            }
        }
        if !progressed {
            break;
        }
    }
    for (c, k) in corpora.iter_mut().zip(keep) {
        c.2.truncate(k);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pairs(lens: &[(usize, usize)]) -> Examples {
        Examples::Pairs(
            lens.iter()
                .map(|&(a, b)| PairExample {
                    src: Tokens::from_ids(vec![7; a]),
                    tgt: Tokens::from_ids(vec![8; b]),
                    src_lang: 0,
                    tgt_lang: 1,
                    origin: 0,
                    forward: true,
                })
                .collect(),
        )
    }

    #[test]
    fn batches_respect_the_token_budget_and_cover_every_example() {
        let lens: Vec<(usize, usize)> = (0..200).map(|i| (1 + i % 17, 1 + (i * 7) % 23)).collect();
        let data = TaskData::new(pairs(&lens), Some(60), None, 3);
        let mut seen: Vec<u32> = data.batches.iter().flatten().copied().collect();
        seen.sort();
        assert_eq!(seen, (0..200).collect::<Vec<_>>());
        for b in &data.batches {
            let widest = b
                .iter()
                .map(|&i| data.examples.cost(i as usize))
                .max()
                .unwrap();
            assert!(
                b.len() == 1 || b.len() * widest <= 60,
                "{} × {widest}",
                b.len()
            );
        }
        // Bucketing: batches are much more uniform than the data.
        let spread: usize = data
            .batches
            .iter()
            .map(|b| {
                let c: Vec<usize> = b.iter().map(|&i| data.examples.cost(i as usize)).collect();
                c.iter().max().unwrap() - c.iter().min().unwrap()
            })
            .max()
            .unwrap();
        // (the data's own spread is 22)
        assert!(spread <= 5, "{spread}");
    }

    #[test]
    fn positions_walk_epochs_deterministically() {
        let lens: Vec<(usize, usize)> = (0..50).map(|i| (1 + i % 5, 2)).collect();
        let data = TaskData::new(pairs(&lens), None, Some(10), 9);
        assert_eq!(data.batches.len(), 5);
        let mut pos = Position::default();
        let mut first_epoch = Vec::new();
        for _ in 0..5 {
            let (b, next) = data.batch_at(pos).unwrap();
            first_epoch.push(b.parts().1.to_vec());
            pos = next;
        }
        assert_eq!(
            pos,
            Position {
                epoch: 1,
                cursor: 0
            }
        );
        let mut all: Vec<u32> = first_epoch.iter().flatten().copied().collect();
        all.sort();
        assert_eq!(all.len(), 50);
        all.dedup();
        assert_eq!(all.len(), 50, "an epoch visits every batch once");
        // The same position gives the same batch; another epoch another order.
        let again = data
            .batch_at(Position {
                epoch: 0,
                cursor: 3,
            })
            .unwrap()
            .0
            .parts()
            .1
            .to_vec();
        assert_eq!(again, first_epoch[3]);
        let orders: Vec<Vec<u32>> = (0..4).map(|e| data.epoch_order(e)).collect();
        assert!(orders.windows(2).any(|w| w[0] != w[1]));
    }

    #[test]
    fn capping_is_balanced_across_language_pairs() {
        let mk = |n: usize| -> Vec<Bitext> {
            (0..n)
                .map(|i| Bitext {
                    source: format!("s{i}"),
                    target: format!("t{i}"),
                })
                .collect()
        };
        let mut c = vec![
            ("deu".to_string(), "eng".to_string(), mk(100)),
            ("fra".into(), "eng".into(), mk(3)),
            ("spa".into(), "eng".into(), mk(100)),
        ];
        cap_pairs(&mut c, 53, 1);
        let lens: Vec<usize> = c.iter().map(|x| x.2.len()).collect();
        assert_eq!(lens, vec![25, 3, 25]);
        // Shuffled, not the file's first lines.
        assert_ne!(c[0].2[..5].to_vec(), mk(5));
    }
}
