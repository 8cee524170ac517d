//! A task's data as the trainer reads it: its examples in memory, bucketed into batches
//! ([`crate::data::bucket`]), or its binarized shards ([`crate::streamed`]), behind one
//! type; the batch at each data position, and the random batches of an inner loop.

use crate::data::{bucket, Batch, Examples, Position};
use crate::streamed::ShardedExamples;
use crate::TrainError;
use rand::seq::SliceRandom;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

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
    pub shards: Option<ShardedExamples>,
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::data::PairExample;
    use harness_data::tokenize::Tokens;

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
    fn one_window_gives_the_batches_of_the_same_examples_in_memory() {
        let dir = tempfile::tempdir().unwrap();
        let (examples, s) = crate::streamed::tests::sharded(300, 100, dir.path());
        let memory = TaskData::new(Examples::Pairs(examples.clone()), Some(60), None, 11);
        assert_eq!(s.batches_per_epoch(), memory.batches.len() as u64);
        let mut pos = Position::default();
        for _ in 0..(2 * memory.batches.len() + 3) {
            let (a, next_a) = memory.batch_at(pos).unwrap();
            let (b, next_b) = s.batch_at(pos).unwrap();
            let (ea, ia) = a.parts();
            let Examples::Pairs(ea) = ea else { panic!() };
            let Examples::Pairs(eb) = &b else { panic!() };
            let want: Vec<&PairExample> = ia.iter().map(|&i| &ea[i as usize]).collect();
            let got: Vec<&PairExample> = eb.iter().collect();
            assert_eq!(want, got);
            assert_eq!(next_a, next_b);
            pos = next_a;
        }
    }
}
