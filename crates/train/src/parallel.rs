//! Data-parallel training over several devices (`--device cpu,cpu`, `cuda:0,cuda:1`): one
//! thread per device, whose gradients are summed through a host buffer each step
//! (`crate::local_world`; across processes, `crate::mpi_world`).
//!
//! N peers, one thread each, each with its own copy of the model and optimizer state,
//! initialised from the same seed (so equal). Each step, the batch the one-device run would
//! take is split by examples into N contiguous shards ([`shard`]); each peer computes its
//! shard's loss, weighted by the shard's share of what the objective averages over
//! ([`crate::objectives::Loss::averaged_over`]: examples, or target tokens for
//! `seq2seq_ce`), and its gradients; the gradients are summed over the peers, so every peer
//! holds the gradient of the whole batch's mean loss, clips it like the one-device run and
//! takes the same optimizer step: the weights stay equal on every peer and equal, within
//! float rounding, to the one-device run's. The sum is one host buffer per step
//! ([`Peer::reduce_gradients`]: every present gradient copied to the host once, in visiting
//! order), summed in rank order, so every peer holds the same bits.
//!
//! Losses with in-batch negatives (`ranking_softmax`, `translation_ranking`,
//! `response_ranking`, `quick_thought`) rank against the whole batch: each peer gathers
//! every peer's sentence vectors ([`Peer::gather_rows`], one collective per step), puts its
//! own in place with their gradients, and computes the whole batch's loss, unweighted; the
//! gradients summed over the peers are then the whole batch's (`crate::step::Step::gather`,
//! as sentence-transformers' `gather_across_devices`). Not equal: `alignment_l2`'s random
//! negatives come from each peer's shard, and dropout draws other masks (same
//! distribution).
//! Joint tasks and inner loops are refused (their batches are not sharded yet).
//!
//! Only peer 0 logs, evaluates, writes `metrics.jsonl` and checkpoints. A peer that fails
//! stops the run's group, which turns every other peer's pending or next sum into an error,
//! so no peer stays blocked; the run then reports the failing peer's own error.

use crate::local_world::Group;
use crate::TrainError;
use burn::module::{AutodiffModule, ModuleVisitor, Param};
use burn::optim::GradientsParams;
use burn::tensor::backend::{AutodiffBackend, Backend};
use burn::tensor::{Tensor, TensorData};
use std::sync::Arc;

/// One peer of a data-parallel run: its rank among `peers`, and how it reaches the others.
/// Cloning it is cheap (the group is shared).
#[derive(Debug, Clone)]
pub struct Peer {
    /// 0 for the peer that logs, evaluates and checkpoints.
    pub rank: usize,
    /// How many peers train together.
    pub peers: usize,
    /// How the peers sum their gradients.
    pub transport: Transport,
}

/// How the peers of a data-parallel run reach each other.
#[derive(Debug, Clone)]
pub enum Transport {
    /// Threads of one process, one per device: the run's group (`crate::local_world`), one
    /// sum of one host buffer per step.
    Local(Arc<Group>),
    /// Processes of an MPI job, one per device (`crate::mpi_world`): one all-reduce of one
    /// host buffer per step.
    #[cfg(feature = "mpi")]
    Mpi,
}

impl Peer {
    /// Whether this peer writes the run's files (metrics, checkpoints) and evaluates.
    pub fn leads(&self) -> bool {
        self.rank == 0
    }

    /// The element-wise sum over the peers of `values` (every peer passes as many, to the
    /// same operation `what`, which names it in errors).
    pub fn sum(&self, what: &str, values: &[f64]) -> Result<Vec<f64>, TrainError> {
        match &self.transport {
            Transport::Local(group) => group.sum_f64(self.rank, what, values.to_vec()),
            #[cfg(feature = "mpi")]
            Transport::Mpi => crate::mpi_world::sum_f64(what, values),
        }
    }

    /// The element-wise sum over the peers of `buffer` (every peer passes as many, to the
    /// same operation `what`).
    fn sum_f32(&self, what: &str, buffer: Vec<f32>) -> Result<Vec<f32>, TrainError> {
        match &self.transport {
            Transport::Local(group) => group.sum_f32(self.rank, what, buffer),
            #[cfg(feature = "mpi")]
            Transport::Mpi => {
                let mut buffer = buffer;
                crate::mpi_world::sum_f32(what, &mut buffer)?;
                Ok(buffer)
            }
        }
    }

    /// Every peer's rows of `local: [sizes[rank], d]`, stacked in rank order: `[Σ sizes, d]`
    /// (`sizes[r]`: peer `r`'s row count, which every peer knows). One collective: the sum
    /// of each peer's rows placed in a zero buffer of the whole's size, which is exact
    /// (`x + 0 = x`), so every peer holds the same bits.
    pub fn gather_rows<IB: Backend>(
        &self,
        local: Tensor<IB, 2>,
        sizes: &[usize],
    ) -> Result<Tensor<IB, 2>, TrainError> {
        let [n, d] = local.dims();
        let start: usize = sizes.iter().take(self.rank).sum();
        let total: usize = sizes.iter().sum();
        if sizes.get(self.rank) != Some(&n) {
            return Err(collective(format!(
                "peer {} gathers {n} rows where the plan gives it {:?}",
                self.rank,
                sizes.get(self.rank)
            )));
        }
        let device = local.device();
        let mine = local
            .into_data()
            .convert::<f32>()
            .to_vec::<f32>()
            .map_err(|e| collective(format!("reading rows to gather: {e:?}")))?;
        let mut buffer = vec![0f32; total * d];
        buffer[start * d..(start + n) * d].copy_from_slice(&mine);
        let buffer = self.sum_f32("gather of the batch's sentence vectors", buffer)?;
        Ok(Tensor::from_data(
            TensorData::new(buffer, [total, d]),
            &device,
        ))
    }

    /// Sums `grads` (this peer's gradients of its weighted shard loss) over the peers, in
    /// place: afterwards every peer holds the whole batch's gradients. A parameter has a
    /// gradient afterwards if it had one on any peer (an absent one counts as zeros), as the
    /// one-device run's backward pass would have given it one. Two collectives, whatever the
    /// number of parameters: which parameters have a gradient, then one buffer of them all.
    pub fn reduce_gradients<B: AutodiffBackend, M: AutodiffModule<B>>(
        &self,
        module: &M,
        grads: &mut GradientsParams,
        device: &B::Device,
    ) -> Result<(), TrainError> {
        let mut present = Present::<B> {
            grads,
            found: Vec::new(),
            _b: std::marker::PhantomData,
        };
        module.visit(&mut present);
        let found = self.sum("which parameters have gradients", &present.found)?;
        reduce_in_one_buffer::<B, M>(self, module, grads, found, device)
    }
}

/// Which parameters have a gradient on this peer (1.0) or not (0.0), in visiting order.
struct Present<'a, B: AutodiffBackend> {
    grads: &'a GradientsParams,
    found: Vec<f64>,
    _b: std::marker::PhantomData<B>,
}

impl<B: AutodiffBackend> ModuleVisitor<B> for Present<'_, B> {
    fn visit_float<const D: usize>(&mut self, param: &Param<Tensor<B, D>>) {
        let has = self.grads.get::<B::InnerBackend, D>(param.id).is_some();
        self.found.push(if has { 1.0 } else { 0.0 });
    }
}

/// The body of [`Peer::reduce_gradients`]: every present gradient (zeros where this peer has
/// none) is copied into one host buffer in visiting order (the same on every peer: the same
/// module tree), the buffer is summed over the peers in one collective, and the sums are
/// registered back. One collective per step, whatever the number of parameters; a GPU's
/// gradients cross to the host and back once per step.
fn reduce_in_one_buffer<B: AutodiffBackend, M: AutodiffModule<B>>(
    peer: &Peer,
    module: &M,
    grads: &mut GradientsParams,
    present: Vec<f64>,
    device: &B::Device,
) -> Result<(), TrainError> {
    let mut gather = Flatten::<B> {
        grads,
        present: &present,
        next: 0,
        device,
        buffer: Vec::new(),
        error: None,
    };
    module.visit(&mut gather);
    if let Some(e) = gather.error {
        return Err(e);
    }
    let buffer = peer.sum_f32("all-reduce of the gradients", gather.buffer)?;
    let mut scatter = Unflatten::<B> {
        grads,
        present: &present,
        next: 0,
        device,
        buffer: &buffer,
        offset: 0,
    };
    module.visit(&mut scatter);
    Ok(())
}

/// Moves each present gradient, in visiting order, into one `f32` buffer.
struct Flatten<'a, B: AutodiffBackend> {
    grads: &'a mut GradientsParams,
    present: &'a [f64],
    next: usize,
    device: &'a B::Device,
    buffer: Vec<f32>,
    error: Option<TrainError>,
}

impl<B: AutodiffBackend> ModuleVisitor<B> for Flatten<'_, B> {
    fn visit_float<const D: usize>(&mut self, param: &Param<Tensor<B, D>>) {
        let i = self.next;
        self.next += 1;
        if self.error.is_some() || self.present.get(i).is_none_or(|&n| n == 0.0) {
            return;
        }
        let g = self
            .grads
            .remove::<B::InnerBackend, D>(param.id)
            .unwrap_or_else(|| Tensor::zeros(param.val().shape(), self.device));
        match g.into_data().convert::<f32>().to_vec::<f32>() {
            Ok(v) => self.buffer.extend_from_slice(&v),
            Err(e) => self.error = Some(collective(format!("reading a gradient: {e:?}"))),
        }
    }
}

/// Registers each present gradient back from the summed buffer, in visiting order.
struct Unflatten<'a, B: AutodiffBackend> {
    grads: &'a mut GradientsParams,
    present: &'a [f64],
    next: usize,
    device: &'a B::Device,
    buffer: &'a [f32],
    offset: usize,
}

impl<B: AutodiffBackend> ModuleVisitor<B> for Unflatten<'_, B> {
    fn visit_float<const D: usize>(&mut self, param: &Param<Tensor<B, D>>) {
        let i = self.next;
        self.next += 1;
        if self.present.get(i).is_none_or(|&n| n == 0.0) {
            return;
        }
        let shape = param.val().shape();
        let n = shape.num_elements();
        let values = self.buffer[self.offset..self.offset + n].to_vec();
        self.offset += n;
        let sum =
            Tensor::<B::InnerBackend, D>::from_data(TensorData::new(values, shape), self.device);
        self.grads.register(param.id, sum);
    }
}

fn collective(detail: String) -> TrainError {
    TrainError::PeerStopped { rank: 0, detail }
}

/// Peer `rank`'s shard of a batch's examples `index`: contiguous, sizes differing by at most
/// one. Every shard of a batch of at least `peers` examples is non-empty.
pub fn shard(index: &[u32], rank: usize, peers: usize) -> &[u32] {
    let n = index.len();
    let (start, end) = (rank * n / peers, (rank + 1) * n / peers);
    &index[start..end]
}

/// The weight of a shard's mean loss: its share of the batch's count (`total`, the sum of
/// every shard's), so that the weighted shard losses sum to the batch's mean loss.
pub fn shard_weight(count: f64, total: f64) -> f64 {
    if total > 0.0 {
        count / total
    } else {
        0.0
    }
}

/// What [`check_plan`] refuses, read from the recipe alone, before any corpus is read (and
/// by `harness validate --device` with a list): the first task that is joint with another,
/// that another joins, or that has an inner loop, in the same words. Tasks whose objective
/// or parameters do not read are left to the recipe's own check.
pub fn check_recipe(
    recipe: &harness_recipe::Recipe,
    defs: &[&crate::objectives::definition::ObjectiveDef],
) -> Result<(), TrainError> {
    let prepared: Vec<Option<Box<dyn crate::objectives::definition::Prepared>>> = recipe
        .tasks
        .iter()
        .map(|t| {
            crate::objectives::definition::find(defs, t.objective.name())
                .and_then(|d| d.prepare(&t.objective.params).ok())
        })
        .collect();
    let partners: Vec<&str> = prepared
        .iter()
        .flatten()
        .filter_map(|p| p.joint_with())
        .collect();
    for (t, p) in recipe.tasks.iter().zip(&prepared) {
        let joined = partners.contains(&t.name.as_str());
        let unshardable = p.as_ref().is_some_and(|p| {
            (p.joint_with().is_some() && !p.draws_own_batches()) || p.inner_loop().is_some()
        });
        if joined || unshardable {
            return Err(unshardable_task(&t.name));
        }
    }
    Ok(())
}

/// The refusal of a task data-parallel training cannot shard.
fn unshardable_task(name: &str) -> TrainError {
    TrainError::recipe(
        format!("tasks.{name}"),
        "data-parallel training (a `--device` list) does not shard joint tasks or inner loops yet",
        "train this recipe on one device (`--device cpu` or `cuda:0`)",
    )
}

/// What data-parallel training cannot do yet, checked before any peer starts: joint tasks
/// (their own batches and the center loss's deferred centres are not sharded) and inner
/// loops.
pub fn check_plan(plan: &crate::plan::Plan) -> Result<(), TrainError> {
    for t in &plan.tasks {
        if !t.joint.is_empty() || t.inner.is_some() || t.data.is_none() {
            return Err(unshardable_task(&t.name));
        }
    }
    Ok(())
}

/// Trains `plan` data-parallel on `devices` (one peer each; at least two): `lead` is peer
/// 0's training (its evaluation, progress bar and run directory), `follow` each other
/// peer's. Both are the trainer's one-peer loop (`trainer::train_peer`), handed in by the
/// caller: the training step uses this module, so it names no trainer.
pub fn train<B: AutodiffBackend, T: Send>(
    plan: &crate::plan::Plan,
    devices: &[B::Device],
    lead: impl FnOnce(Peer) -> Result<T, TrainError>,
    follow: impl Fn(Peer) -> Result<T, TrainError> + Sync,
) -> Result<T, TrainError> {
    check_plan(plan)?;
    let peers = devices.len();
    harness_core::note!(
        "data-parallel on {peers} devices: each step's batch is split by examples; \
         ranking losses rank against the whole batch's vectors, gathered from every device"
    );
    together(peers, lead, follow)
}

/// Runs `peers` peers sharing one new [`Group`]: `lead` as peer 0 on this thread (its
/// closure need not be `Send`: the evaluation's), `follow` as each other peer on a thread of
/// its own. One that fails or panics stops the group, which turns the other peers' pending
/// and next sums into errors instead of waits. The result is peer 0's, or the first error
/// that is not another peer's having stopped (the cause).
fn together<T: Send>(
    peers: usize,
    lead: impl FnOnce(Peer) -> Result<T, TrainError>,
    follow: impl Fn(Peer) -> Result<T, TrainError> + Sync,
) -> Result<T, TrainError> {
    let group = Arc::new(Group::new(peers));
    let results = std::thread::scope(|s| {
        let handles: Vec<_> = (1..peers)
            .map(|rank| {
                let (group, follow) = (&group, &follow);
                std::thread::Builder::new()
                    .name(format!("peer-{rank}"))
                    .spawn_scoped(s, move || run_peer(group, rank, follow))
            })
            .collect();
        for (rank, h) in (1..).zip(&handles) {
            if let Err(e) = h {
                // The others must not wait for a peer that never started.
                group.stop(rank, format!("could not start: {e}"));
            }
        }
        let mut all = vec![run_peer(&group, 0, lead)];
        for (rank, h) in (1..).zip(handles) {
            all.push(match h {
                Ok(h) => h.join().unwrap_or_else(|p| {
                    Err(TrainError::PeerStopped {
                        rank,
                        detail: harness_core::device::panic_message(&*p),
                    })
                }),
                Err(e) => Err(collective(format!("starting a peer thread: {e}"))),
            });
        }
        all
    });
    // The first error that is not another peer's having stopped is the cause.
    let mut outcome = None;
    let mut stopped = None;
    for r in results {
        match r {
            Ok(o) => outcome = outcome.or(Some(o)),
            Err(e @ TrainError::PeerStopped { .. }) => stopped = stopped.or(Some(e)),
            Err(e) => return Err(e),
        }
    }
    match stopped {
        Some(e) => Err(e),
        None => outcome.ok_or_else(|| collective("no peer finished".into())),
    }
}

/// Peer `rank` of `group`: runs `body`, then stops the group, so that no other peer waits
/// for it: after an error or a panic (the others' pending and next sums fail with its
/// reason), and after it finished (a peer whose schedule went on would wait forever; in a
/// run whose peers agree, all have passed their last sum by then).
fn run_peer<T>(
    group: &Arc<Group>,
    rank: usize,
    body: impl FnOnce(Peer) -> Result<T, TrainError>,
) -> Result<T, TrainError> {
    let peer = Peer {
        rank,
        peers: group.peers(),
        transport: Transport::Local(Arc::clone(group)),
    };
    let result = match std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| body(peer))) {
        Ok(r) => r,
        Err(p) => Err(TrainError::DeviceFailed {
            step: 0,
            detail: format!(
                "peer {rank} panicked: {}",
                harness_core::device::panic_message(&*p)
            ),
        }),
    };
    match &result {
        Ok(_) => group.stop(rank, "finished its training"),
        Err(e) => group.stop(rank, format!("failed: {e}")),
    }
    result
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shards_cover_the_batch_in_order() {
        let index: Vec<u32> = (10..17).collect();
        let shards: Vec<&[u32]> = (0..3).map(|r| shard(&index, r, 3)).collect();
        assert_eq!(shards, [&[10, 11][..], &[12, 13], &[14, 15, 16]]);
        assert_eq!(shards.concat(), index);
        assert_eq!(shard(&index, 0, 1), &index[..]);
        // Fewer examples than peers: some shards are empty.
        assert!(shard(&index[..1], 0, 2).is_empty());
    }

    #[test]
    fn weighted_shard_means_sum_to_the_batch_mean() {
        // Per-item losses of a batch, split 2 + 3: each shard's mean weighted by its share.
        let items = [0.5, 1.5, 2.0, 4.0, 0.25];
        let mean = items.iter().sum::<f64>() / 5.0;
        let (a, b) = items.split_at(2);
        let m = |s: &[f64]| s.iter().sum::<f64>() / s.len() as f64;
        let got = shard_weight(2.0, 5.0) * m(a) + shard_weight(3.0, 5.0) * m(b);
        assert!((got - mean).abs() < 1e-12, "{got} vs {mean}");
        assert_eq!(shard_weight(0.0, 0.0), 0.0);
    }

    /// Gathering rows over 3 peers of unequal shards stacks them in rank order, exactly,
    /// on every peer.
    #[test]
    fn gathered_rows_stack_every_peers_shard_in_rank_order() {
        type Cpu = burn::backend::NdArray<f32>;
        let sizes = [1usize, 2, 2];
        let rows = |rank: usize| -> Vec<f32> {
            let start: usize = sizes[..rank].iter().sum();
            (start..start + sizes[rank])
                .flat_map(|i| [i as f32 + 0.1, -(i as f32) / 3.0])
                .collect()
        };
        let want: Vec<f32> = (0..3).flat_map(rows).collect();
        let gather = |peer: Peer| -> Result<Vec<f32>, TrainError> {
            let t = Tensor::<Cpu, 2>::from_data(
                TensorData::new(rows(peer.rank), [sizes[peer.rank], 2]),
                &Default::default(),
            );
            let all = peer.gather_rows(t, &sizes)?;
            assert_eq!(all.dims(), [5, 2]);
            Ok(all.into_data().to_vec::<f32>().unwrap())
        };
        let got = together::<Vec<f32>>(3, gather, |peer| {
            let mine = gather(peer)?;
            assert_eq!(mine, (0..3).flat_map(rows).collect::<Vec<f32>>());
            Ok(mine)
        })
        .unwrap();
        assert_eq!(got, want);
    }

    /// Gradients summed over 3 peers in one buffer are the rank-order sum of theirs, the
    /// same bits on every peer; a parameter without a gradient on one peer (rank 2's bias)
    /// counts as zeros there and has one afterwards on every peer.
    #[test]
    fn gradients_sum_over_the_peers_in_one_buffer() {
        use burn::backend::{Autodiff, NdArray};
        use burn::nn::{Initializer, Linear, LinearConfig};
        type Inner = NdArray<f32>;
        type B = Autodiff<Inner>;
        // The same model on every peer: constant weights, no random state to share.
        let model = || {
            LinearConfig::new(4, 3)
                .with_initializer(Initializer::Constant { value: 0.1 })
                .init::<B>(&Default::default())
        };
        let grads_of = |m: &Linear<B>, rank: usize| {
            let x: Vec<f32> = (0..20)
                .map(|i| ((i as f32) * 0.7 + rank as f32 * 3.1).sin() * 1e3)
                .collect();
            let x = Tensor::<B, 2>::from_data(TensorData::new(x, [5, 4]), &Default::default());
            let mut g =
                GradientsParams::from_grads(m.forward(x).powi_scalar(2).mean().backward(), m);
            if rank == 2 {
                g.remove::<Inner, 1>(m.bias.as_ref().unwrap().id);
            }
            g
        };
        let read = |m: &Linear<B>, g: &GradientsParams| -> [Vec<f32>; 2] {
            let w = g.get::<Inner, 2>(m.weight.id).unwrap();
            let b = g.get::<Inner, 1>(m.bias.as_ref().unwrap().id).unwrap();
            [
                w.into_data().to_vec().unwrap(),
                b.into_data().to_vec().unwrap(),
            ]
        };
        let m = model();
        let each: Vec<[Vec<f32>; 2]> = (0..3)
            .map(|rank| {
                let g = grads_of(&m, rank);
                let w = g
                    .get::<Inner, 2>(m.weight.id)
                    .unwrap()
                    .into_data()
                    .to_vec()
                    .unwrap();
                let b = g
                    .get::<Inner, 1>(m.bias.as_ref().unwrap().id)
                    .map_or(vec![0.0; 3], |b| b.into_data().to_vec().unwrap());
                [w, b]
            })
            .collect();
        let want: [Vec<u32>; 2] = [0, 1].map(|k| {
            (0..each[0][k].len())
                .map(|i| ((each[0][k][i] + each[1][k][i]) + each[2][k][i]).to_bits())
                .collect()
        });
        let body = |peer: Peer| -> Result<usize, TrainError> {
            let m = model();
            let mut g = grads_of(&m, peer.rank);
            peer.reduce_gradients::<B, Linear<B>>(&m, &mut g, &Default::default())?;
            let got = read(&m, &g).map(|v| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>());
            assert!(got == want, "peer {}: not the rank-order sum", peer.rank);
            Ok(peer.rank)
        };
        assert_eq!(together(3, body, body).unwrap(), 0);
    }

    /// A peer that fails stops the others (their sums error instead of waiting for it), and
    /// the run reports the failing peer's own error.
    #[test]
    fn a_failing_peer_stops_the_others_with_its_own_error() {
        let (done, wait) = std::sync::mpsc::channel();
        // On a thread, so that a hang fails the test instead of blocking it.
        std::thread::spawn(move || {
            let result = together::<usize>(
                3,
                |peer| {
                    // Peer 0 keeps summing, as a training loop would, until a sum fails.
                    for round in 0..1000 {
                        peer.sum("test sum", &[1.0])?;
                        std::thread::sleep(std::time::Duration::from_millis(1 + round % 2));
                    }
                    Ok(1000)
                },
                |peer| {
                    if peer.rank == 2 {
                        // Peer 2 joins a few sums, then diverges.
                        for _ in 0..3 {
                            peer.sum("test sum", &[1.0])?;
                        }
                        return Err(TrainError::Diverged {
                            step: 4,
                            task: "t".into(),
                            value: f64::NAN,
                        });
                    }
                    let mut sums = 0;
                    loop {
                        peer.sum("test sum", &[1.0])?;
                        sums += 1;
                        if sums > 1000 {
                            return Ok(sums);
                        }
                    }
                },
            );
            let _ = done.send(result.map_err(|e| e.to_string()));
        });
        let result = wait
            .recv_timeout(std::time::Duration::from_secs(120))
            .expect("the peers hung after one of them failed");
        let e = result.unwrap_err();
        assert!(e.contains("step 4: the loss is NaN"), "{e}");
    }
}
