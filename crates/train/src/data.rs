//! Training data of a recipe: each task's examples (its corpus tokenised with the run's
//! tokenizer into shards by [`crate::binarize`]) grouped into length-bucketed batches under a token budget, and a deterministic
//! data position (epoch, cursor) per task that checkpoints save and resume restores.
//!
//! Batches by token budget (LASER, fairseq `--max-tokens`): examples sorted by length (ties
//! broken by a seeded shuffle) are cut greedily so that `examples × longest side` stays
//! within `train.batch_tokens`; each epoch visits every batch once in an order drawn from
//! `(seed, task, epoch)`. So the batch of a task at position (epoch, cursor) depends on
//! nothing else, and a resumed run sees exactly the batches an uninterrupted one would.
//! The type that holds a task's batches, in memory or in shards ([`crate::streamed`]), is
//! [`crate::task_data::TaskData`].

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

/// The training examples an objective reads (its task's corpus must give them).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ExampleKind {
    /// Translation pairs (a parallel corpus).
    Pairs,
    /// Premise, hypothesis and label (an NLI corpus).
    Nli,
    /// An input and its response (a conversation corpus).
    Conversation,
    /// A sentence with its neighbours in running text (previous, sentence, next).
    RunningText,
    /// A sentence and its class (intent classes, languages).
    Labelled,
}

impl ExampleKind {
    /// How messages name it.
    pub fn describe(self) -> &'static str {
        match self {
            ExampleKind::Pairs => "translation pairs (a parallel corpus)",
            ExampleKind::Nli => "NLI triples (an NLI corpus)",
            ExampleKind::Conversation => "conversation turns (input, response)",
            ExampleKind::RunningText => "running text (previous, sentence, next)",
            ExampleKind::Labelled => "labelled sentences",
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
    /// A batch of all of `examples` (those decoded from shards for it).
    pub(crate) fn owned(examples: Examples) -> Self {
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
