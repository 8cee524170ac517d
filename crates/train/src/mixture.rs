//! The task mixture: which task trains at each step, and which losses are added to it.
//!
//! - Tasks with their own batches are sampled per step with probability proportional to
//!   their `weight` (LASER: the translation tasks over different corpora alternate; within
//!   a task, batches mix language pairs and the two target languages, see `train/data.rs`).
//! - A task with `joint_with: T` (seq2seq+similarity's `l2_similarity`) has no batches of
//!   its own: its loss, times its `weight`, is added to task `T`'s loss on `T`'s batch, in
//!   the same backward pass (`L = L_NMT + α·L_sim`, Yu et al. §2.2).
//!
//! The draw of step `s` comes from a ChaCha stream of `(seed, s)`, so it needs no saved
//! state and a resumed run draws what an uninterrupted one would.

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

/// Sampling over the tasks that own batches.
#[derive(Debug, Clone)]
pub struct Mixture {
    /// Indices of the sampled tasks and their cumulative weights.
    tasks: Vec<(usize, f64)>,
    seed: u64,
}

impl Mixture {
    /// `weights[i]` is `Some(w)` for a task with batches of its own, `None` for a joint
    /// task. Returns `None` when no task can be sampled.
    pub fn new(weights: &[Option<f64>], seed: u64) -> Option<Self> {
        let mut acc = 0.0;
        let mut tasks = Vec::new();
        for (i, w) in weights.iter().enumerate() {
            if let Some(w) = w.filter(|w| *w > 0.0) {
                acc += w;
                tasks.push((i, acc));
            }
        }
        (!tasks.is_empty()).then_some(Mixture { tasks, seed })
    }

    /// The task of step `step`.
    pub fn pick(&self, step: u64) -> usize {
        if self.tasks.len() == 1 {
            return self.tasks[0].0;
        }
        let mut rng = ChaCha8Rng::seed_from_u64(self.seed ^ 0x6d69_7874_7572_6521);
        rng.set_stream(step);
        let total = self.tasks.last().map_or(1.0, |t| t.1);
        let u = rng.random::<f64>() * total;
        self.tasks
            .iter()
            .find(|(_, c)| u < *c)
            .or(self.tasks.last())
            .map_or(0, |t| t.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn picks_follow_the_weights_and_skip_joint_tasks() {
        let m = Mixture::new(&[Some(1.0), None, Some(0.5)], 4).unwrap();
        let picks: Vec<usize> = (0..3000).map(|s| m.pick(s)).collect();
        assert!(picks.iter().all(|&p| p == 0 || p == 2));
        let share = picks.iter().filter(|&&p| p == 0).count() as f64 / 3000.0;
        assert!((share - 2.0 / 3.0).abs() < 0.03, "{share}");
        // Stateless: the same step always draws the same task.
        assert_eq!(m.pick(1234), m.clone().pick(1234));
        assert!(Mixture::new(&[None], 1).is_none());
    }
}
