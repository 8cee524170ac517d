//! Data-parallel training within one process (`--device cpu,cpu`, `cuda:0,cuda:1`: one
//! thread per device, `crate::parallel`): the peers sum host buffers through a [`Group`] of
//! their own, the counterpart of `crate::mpi_world`, which spans processes. Each step's
//! gradients are summed in one buffer (every present gradient copied to the host once, then
//! one sum), not one operation per parameter.
//!
//! One operation: every peer contributes a buffer of the same length; the last to arrive
//! sums them element by element in rank order (rank 0 + rank 1 + rank 2 …, a large buffer's
//! elements split over the rayon pool, each still summed in that order), so every peer gets
//! the same bits, run after run; then every peer takes a copy. A round counter tells a
//! waiting peer that its round completed; a peer cannot contribute to the next round before
//! it has read this one's sum, so no round overwrites a sum not yet read. [`Group::stop`]
//! turns every pending and later operation into an error instead of a wait: a peer that
//! fails (or one whose schedule diverged, or that finished while another still sums) leaves
//! no other blocked.
//!
//! Why not burn-collective (burn's own collective operations, which this replaces): its
//! all-reduce takes one tensor per call, so one rendezvous per parameter each step, and the
//! crate brings a websocket server stack (tokio, axum, hyper, tungstenite: about 48 crates in
//! every build) for its global strategies, which harness never uses: training across
//! processes and machines is `crate::mpi_world`'s. std's `Mutex` and `Condvar` suffice here.

use crate::TrainError;
use rayon::prelude::*;
use std::sync::{Condvar, Mutex, MutexGuard, PoisonError};

/// Elements of a buffer from which the sum is split over the rayon pool.
const PARALLEL_FROM: usize = 1 << 16;
/// Elements per rayon task of a split sum.
const CHUNK: usize = 1 << 14;

/// The peers of one data-parallel run within this process, shared by their threads (an
/// `Arc<Group>`); one group per run.
pub struct Group {
    peers: usize,
    state: Mutex<State>,
    /// Signalled when a round completes or the group stops.
    changed: Condvar,
}

impl std::fmt::Debug for Group {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Group")
            .field("peers", &self.peers)
            .finish_non_exhaustive()
    }
}

struct State {
    /// Rounds completed so far.
    round: u64,
    /// This round's contributions, by rank.
    slots: Vec<Option<Buffer>>,
    /// How many peers contributed to this round.
    arrived: usize,
    /// The first contribution to this round, which every other is checked against.
    first: Option<First>,
    /// The last completed round's sum, until every peer has read it.
    result: Option<Buffer>,
    /// Peers that have not read `result` yet.
    unread: usize,
    /// The peer that stopped the group, and why.
    stopped: Option<(usize, String)>,
}

/// The first contribution to a round: who, to what, and of which length and type.
struct First {
    rank: usize,
    what: String,
    len: usize,
    kind: &'static str,
}

/// A contribution or a sum.
enum Buffer {
    F32(Vec<f32>),
    F64(Vec<f64>),
}

/// The element types a [`Group`] sums.
trait Element: Copy + Send + Sync + std::ops::AddAssign + 'static {
    const KIND: &'static str;
    fn wrap(values: Vec<Self>) -> Buffer;
    fn take(buffer: Buffer) -> Option<Vec<Self>>;
    fn view(buffer: &Buffer) -> Option<&[Self]>;
}

impl Element for f32 {
    const KIND: &'static str = "f32";
    fn wrap(values: Vec<f32>) -> Buffer {
        Buffer::F32(values)
    }
    fn take(buffer: Buffer) -> Option<Vec<f32>> {
        match buffer {
            Buffer::F32(v) => Some(v),
            Buffer::F64(_) => None,
        }
    }
    fn view(buffer: &Buffer) -> Option<&[f32]> {
        match buffer {
            Buffer::F32(v) => Some(v),
            Buffer::F64(_) => None,
        }
    }
}

impl Element for f64 {
    const KIND: &'static str = "f64";
    fn wrap(values: Vec<f64>) -> Buffer {
        Buffer::F64(values)
    }
    fn take(buffer: Buffer) -> Option<Vec<f64>> {
        match buffer {
            Buffer::F64(v) => Some(v),
            Buffer::F32(_) => None,
        }
    }
    fn view(buffer: &Buffer) -> Option<&[f64]> {
        match buffer {
            Buffer::F64(v) => Some(v),
            Buffer::F32(_) => None,
        }
    }
}

impl Group {
    /// A group of `peers` peers (ranks `0..peers`), none arrived, not stopped.
    pub fn new(peers: usize) -> Group {
        Group {
            peers,
            state: Mutex::new(State {
                round: 0,
                slots: (0..peers).map(|_| None).collect(),
                arrived: 0,
                first: None,
                result: None,
                unread: 0,
                stopped: None,
            }),
            changed: Condvar::new(),
        }
    }

    /// How many peers the group has.
    pub fn peers(&self) -> usize {
        self.peers
    }

    /// The element-wise sum over the peers of `values` (peer `rank`'s; every peer passes as
    /// many, to the same operation `what`, which names it in errors), in rank order: every
    /// peer gets the same bits. Waits for every peer; an error instead once the group is
    /// stopped.
    pub fn sum_f32(
        &self,
        rank: usize,
        what: &str,
        values: Vec<f32>,
    ) -> Result<Vec<f32>, TrainError> {
        self.sum(rank, what, values)
    }

    /// [`Self::sum_f32`] of `f64` values.
    pub fn sum_f64(
        &self,
        rank: usize,
        what: &str,
        values: Vec<f64>,
    ) -> Result<Vec<f64>, TrainError> {
        self.sum(rank, what, values)
    }

    /// Stops the group: peer `rank` failed or left, `why` (which every other peer's error
    /// repeats). Wakes every waiting peer; every pending and later operation on any peer
    /// then returns [`TrainError::PeerStopped`]. The first stop's reason stays.
    pub fn stop(&self, rank: usize, why: impl Into<String>) {
        let mut state = self.lock();
        if state.stopped.is_none() {
            state.stopped = Some((rank, why.into()));
        }
        self.changed.notify_all();
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        // A peer that panicked holding the lock left no half-done round behind that matters:
        // it stops the group next (`crate::parallel`), and every operation then errors.
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The error of operation `what` on peer `rank` once the group is stopped.
    fn stopped(state: &State, rank: usize, what: &str) -> Option<TrainError> {
        state
            .stopped
            .as_ref()
            .map(|(by, why)| TrainError::PeerStopped {
                rank,
                detail: format!("{what}: peer {by} {why}"),
            })
    }

    fn sum<T: Element>(
        &self,
        rank: usize,
        what: &str,
        values: Vec<T>,
    ) -> Result<Vec<T>, TrainError> {
        let mut state = self.lock();
        if let Some(e) = Self::stopped(&state, rank, what) {
            return Err(e);
        }
        let mismatch = match &state.first {
            _ if rank >= self.peers => Some(format!(
                "{what}: peer {rank} is not one of the group's {} peers",
                self.peers
            )),
            _ if state.slots[rank].is_some() => Some(format!(
                "{what}: peer {rank} contributes twice to one round"
            )),
            None => None,
            Some(f) if f.len != values.len() || f.kind != T::KIND => Some(format!(
                "{what}: peer {rank} contributes {} {} values where peer {} contributes {} {} values{}",
                values.len(),
                T::KIND,
                f.rank,
                f.len,
                f.kind,
                if f.what == what {
                    String::new()
                } else {
                    format!(" (to the {})", f.what)
                }
            )),
            Some(_) => None,
        };
        if let Some(detail) = mismatch {
            // The peers' schedules diverged: none may wait for this round.
            if state.stopped.is_none() {
                state.stopped = Some((rank, format!("diverged: {detail}")));
            }
            self.changed.notify_all();
            return Err(TrainError::PeerStopped { rank, detail });
        }
        if state.first.is_none() {
            state.first = Some(First {
                rank,
                what: what.to_string(),
                len: values.len(),
                kind: T::KIND,
            });
        }
        state.slots[rank] = Some(T::wrap(values));
        state.arrived += 1;
        let round = state.round;
        if state.arrived == self.peers {
            // The last to arrive sums. Every peer has read the previous round's sum: each
            // read it before contributing to this round.
            let mut slots: Vec<Buffer> = state.slots.iter_mut().filter_map(Option::take).collect();
            let mut sum = T::take(slots.remove(0)).expect("every slot holds the first's type");
            let rest: Vec<&[T]> = slots
                .iter()
                .map(|b| T::view(b).expect("every slot holds the first's type"))
                .collect();
            add_in_rank_order(&mut sum, &rest);
            drop(rest);
            state.result = Some(T::wrap(sum));
            state.unread = self.peers;
            state.arrived = 0;
            state.first = None;
            state.round += 1;
            self.changed.notify_all();
        } else {
            while state.round == round && state.stopped.is_none() {
                state = self
                    .changed
                    .wait(state)
                    .unwrap_or_else(PoisonError::into_inner);
            }
            if state.round == round {
                return Err(Self::stopped(&state, rank, what).expect("stopped"));
            }
        }
        // This peer's copy of the sum; the last reader takes the buffer itself.
        state.unread -= 1;
        let out = if state.unread == 0 {
            state.result.take().and_then(T::take)
        } else {
            state.result.as_ref().and_then(T::view).map(<[T]>::to_vec)
        };
        Ok(out.expect("a completed round holds its sum"))
    }
}

/// `sum += rest[0] + rest[1] + …`, element by element in that order (`sum` holds rank 0's
/// values): `((x₀ + x₁) + x₂) + …` for every element, split over the rayon pool when large.
fn add_in_rank_order<T: Element>(sum: &mut [T], rest: &[&[T]]) {
    let add = |out: &mut [T], start: usize| {
        for other in rest {
            let end = start + out.len();
            for (o, &x) in out.iter_mut().zip(&other[start..end]) {
                *o += x;
            }
        }
    };
    if sum.len() < PARALLEL_FROM {
        add(sum, 0);
    } else {
        sum.par_chunks_mut(CHUNK)
            .enumerate()
            .for_each(|(c, out)| add(out, c * CHUNK));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;
    use std::time::Duration;

    /// Runs `body(rank, group)` on one thread per peer and returns their results by rank.
    fn peers<T: Send + 'static>(
        n: usize,
        body: impl Fn(usize, &Group) -> T + Send + Sync + 'static,
    ) -> Vec<T> {
        let group = Arc::new(Group::new(n));
        let body = Arc::new(body);
        let handles: Vec<_> = (0..n)
            .map(|rank| {
                let (group, body) = (Arc::clone(&group), Arc::clone(&body));
                std::thread::spawn(move || body(rank, &group))
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    }

    /// Three peers that arrive at different moments (each busy for a different time before
    /// each round) all get every round's sum.
    #[test]
    fn three_peers_get_every_rounds_sum() {
        let got = peers(3, |rank, group| {
            (0..50)
                .map(|round| {
                    std::thread::sleep(Duration::from_micros(
                        ((rank * 7 + round) % 5) as u64 * 100,
                    ));
                    let mine = vec![(rank + 1) as f64 * 10.0 + round as f64, rank as f64];
                    group.sum_f64(rank, "test sum", mine).unwrap()
                })
                .collect::<Vec<_>>()
        });
        for sums in &got {
            for (round, s) in sums.iter().enumerate() {
                assert_eq!(s, &[60.0 + 3.0 * round as f64, 3.0]);
            }
        }
    }

    /// The sum is rank 0's values plus rank 1's plus rank 2's, in that order, element by
    /// element, on both sides of the rayon split: the same bits on every peer. In f32,
    /// `(1e8 + 3) + 3` is `1e8` while `1e8 + (3 + 3)` is `1.00000008e8`.
    #[test]
    fn the_sum_adds_the_ranks_in_order() {
        let n = PARALLEL_FROM + 3 * CHUNK + 5;
        let first = |i: usize| 1.0e8f32 + 16.0 * (i % 5) as f32;
        let values = move |rank: usize| -> Vec<f32> {
            (0..n)
                .map(|i| if rank == 0 { first(i) } else { 3.0 })
                .collect()
        };
        assert_ne!(first(0) + (3.0 + 3.0), first(0));
        let want: Vec<u32> = (0..n).map(|i| first(i).to_bits()).collect();
        let got = peers(3, move |rank, group| {
            group.sum_f32(rank, "test sum", values(rank)).unwrap()
        });
        for sum in got {
            let bits: Vec<u32> = sum.iter().map(|v| v.to_bits()).collect();
            assert!(bits == want, "not the rank-order sum");
        }
        // Below the split too.
        let got = peers(3, |rank, group| {
            group
                .sum_f32(rank, "small", vec![[1.0e8f32, 3.0, 3.0][rank]; 7])
                .unwrap()
        });
        assert!(got.iter().all(|s| s == &[1.0e8f32; 7]));
    }

    /// Peers that pass buffers of different lengths get an error naming both lengths and the
    /// operation, and none waits.
    #[test]
    fn a_length_mismatch_is_an_error_naming_both() {
        let got = peers(2, |rank, group| {
            group
                .sum_f32(rank, "all-reduce of the gradients", vec![1.0; 4 + rank])
                .map_err(|e| e.to_string())
        });
        let errors: Vec<&String> = got.iter().map(|r| r.as_ref().unwrap_err()).collect();
        for e in &errors {
            assert!(
                e.contains("all-reduce of the gradients")
                    && e.contains("4 f32 values")
                    && e.contains("5 f32 values"),
                "{e}"
            );
        }
    }

    /// Stopping the group wakes a peer that waits for the others, and every later operation
    /// fails at once.
    #[test]
    fn a_stopped_group_wakes_a_waiter() {
        let group = Arc::new(Group::new(2));
        let waiter = {
            let group = Arc::clone(&group);
            std::thread::spawn(move || group.sum_f64(0, "test sum", vec![1.0]))
        };
        std::thread::sleep(Duration::from_millis(50));
        group.stop(1, "failed: step 4: the loss is NaN");
        let e = waiter.join().unwrap().unwrap_err().to_string();
        assert!(
            e.contains("peer 0 stopped") && e.contains("test sum: peer 1 failed: step 4"),
            "{e}"
        );
        let later = group.sum_f64(1, "next", vec![1.0]).unwrap_err().to_string();
        assert!(later.contains("next: peer 1 failed"), "{later}");
    }
}
