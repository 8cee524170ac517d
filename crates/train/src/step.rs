//! One training step's view of its batch, handed to every loss computed on it: the
//! batch's examples, its tensors (built once), and its sentence encodings (computed once, on
//! first use, in the order the losses ask for them). The task drawn by the mixture computes
//! its loss first, then each task joint with it (`joint_with`) on the same encodings; so a
//! joint loss costs no second forward pass, and the order of random draws (dropout) is the
//! order in which the losses read the encodings. A loss that reads several sides asks for
//! them together ([`Step::encode_sides`]): on a GPU, sides through one encoder are then
//! encoded in one pass, each with the dropout masks of its own.

use crate::batch::{
    context_batch, labelled_batch, nli_batch, pair_batch, ContextBatch, LabelledBatch, NliBatch,
    PairBatch,
};
use crate::data::{ContextExample, Examples, NliExample, PairExample};
use crate::parallel::Peer;
use crate::plan::{Plan, TaskPlan};
use crate::TrainError;
use burn::module::AutodiffModule;
use burn::tensor::backend::AutodiffBackend;
use burn::tensor::Tensor;
use harness_data::tokenize::Tokens;
use harness_model::decoder::LstmDecoder;
use harness_model::encoder::{Encoded, SentenceEncoder};
use harness_model::heads::Mlp;
use harness_model::random::Noise;
use harness_model::system::{Group, System};

/// Which sentence of each example: the source of a pair (or a conversation's message), an
/// NLI premise, a running-text sentence or a labelled sentence (`First`); the target (the
/// response), the hypothesis or the previous sentence (`Second`); the next sentence
/// (`Third`, running text only).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Side {
    First,
    Second,
    Third,
}

/// The batch's tensors, by example kind.
enum Tensors<B: AutodiffBackend> {
    Pairs(PairBatch<B>),
    Nli(NliBatch<B>),
    Context(ContextBatch<B>),
    Labelled(LabelledBatch<B>),
}

/// The sources' and targets' encodings and the hard negatives' `[batch, k, d]`
/// ([`Step::encode_ranked`]).
pub type Ranked<B> = ([Encoded<B>; 2], Option<Tensor<B, 3>>);

/// A training step on one batch (see the module doc).
pub struct Step<'a, B: AutodiffBackend> {
    model: &'a System<B>,
    plan: &'a Plan,
    task: &'a TaskPlan,
    /// The batch's examples (the task's, or those decoded from its shards) and its indices
    /// among them.
    examples: &'a Examples,
    index: &'a [u32],
    frozen: &'a [Group],
    noise: &'a mut Noise,
    device: &'a B::Device,
    tensors: Option<Tensors<B>>,
    encoded: [Option<Encoded<B>>; 3],
    tokens: usize,
    /// The batches of joint tasks that draw their own (`Objective::draws_own_batches`):
    /// task index, its plan, the examples' indices, and their encodings once computed.
    own: Vec<OwnBatch<'a, B>>,
    /// The joint task whose loss is being computed (`None`: the step's own task).
    current: Option<usize>,
    /// Head weights to set after the optimizer step (the centres of a center loss).
    deferred: Vec<(usize, Tensor<B::InnerBackend, 2>)>,
    /// On a data-parallel peer: the peer and the whole batch's indices (`index` is its
    /// shard of them).
    whole: Option<(Peer, &'a [u32])>,
    /// Whether a loss gathered the whole batch ([`Step::gather`]): it then computed the
    /// whole batch's loss, not its shard's.
    gathered: bool,
    /// Whether sides through one encoder may be encoded in one pass ([`Step::encode_sides`]):
    /// on a GPU backend.
    merge_sides: bool,
}

/// A joint task's own batch within a step.
struct OwnBatch<'a, B: AutodiffBackend> {
    task: usize,
    plan: &'a TaskPlan,
    examples: &'a Examples,
    index: &'a [u32],
    /// Its first and second sides, once encoded.
    encoded: [Option<Encoded<B>>; 2],
}

/// A frozen encoder's encodings (no dropout, no gradient). A BERT encodes on the inner
/// backend, as at inference, and its outputs enter the graph as constants: on the CPU that
/// is the fused inference path (`harness_model::fused::bert`), which an Emu critic's inner
/// updates run four times per step on a frozen encoder. Other encoders run as they are
/// (the same values; their training paths are what their tests pin).
fn frozen_forward<B: AutodiffBackend>(
    encoder: &SentenceEncoder<B>,
    input: &crate::batch::Padded<B>,
) -> Encoded<B> {
    if !matches!(encoder, SentenceEncoder::Bert(_)) {
        return encoder.forward(input, None);
    }
    let inner = crate::batch::Padded {
        ids: input.ids.clone().inner(),
        mask: input.mask.clone().inner(),
        tokens: input.tokens,
        ngrams: None,
    };
    let e = encoder.valid().forward(&inner, None);
    Encoded {
        sentence: Tensor::from_inner(e.sentence),
        states: Tensor::from_inner(e.states),
        mask: Tensor::from_inner(e.mask),
    }
}

impl<'a, B: AutodiffBackend> Step<'a, B> {
    /// A step of `task` (the one the mixture drew) on the examples `index` of its data,
    /// with the parameter groups `frozen` out of training.
    pub fn new(
        model: &'a System<B>,
        plan: &'a Plan,
        task: &'a TaskPlan,
        batch: (&'a Examples, &'a [u32]),
        frozen: &'a [Group],
        noise: &'a mut Noise,
        device: &'a B::Device,
    ) -> Self {
        Step {
            model,
            plan,
            task,
            examples: batch.0,
            index: batch.1,
            frozen,
            noise,
            device,
            tensors: None,
            encoded: [None, None, None],
            tokens: 0,
            own: Vec::new(),
            current: None,
            deferred: Vec::new(),
            whole: None,
            gathered: false,
            merge_sides: harness_model::gpu::on_device::<B>(),
        }
    }

    /// The step with [`Step::encode_sides`]'s one pass on (`true`) or off whatever the
    /// backend: for the tests that compare the two on the CPU.
    #[cfg(test)]
    pub(crate) fn merging_sides(mut self, on: bool) -> Self {
        self.merge_sides = on;
        self
    }

    /// The step as data-parallel peer `peer`, whose examples are its shard of the whole
    /// batch `whole` (the indices every peer's shard comes from).
    pub fn with_peer(mut self, peer: Peer, whole: &'a [u32]) -> Self {
        self.whole = Some((peer, whole));
        self
    }

    /// The indices of the whole batch: every peer's shard (this step's own when alone).
    fn whole_index(&self) -> &'a [u32] {
        self.whole.as_ref().map_or(self.index, |(_, w)| *w)
    }

    /// Whether a loss of this step ranked against the whole batch ([`Self::gather`]).
    pub fn gathered(&self) -> bool {
        self.gathered
    }

    /// The whole batch's translation examples, across the data-parallel peers (this step's
    /// own when alone): what a loss with in-batch negatives ranks against, its vectors
    /// from [`Self::gather`].
    pub fn whole_pairs(&self) -> Result<Vec<&'a PairExample>, TrainError> {
        match self.examples()? {
            Examples::Pairs(ex) => Ok(self
                .whole_index()
                .iter()
                .map(|&i| &ex[i as usize])
                .collect()),
            _ => Err(self.wrong_kind("translation pairs")),
        }
    }

    /// [`Self::whole_pairs`] of running text.
    pub fn whole_context(&self) -> Result<Vec<&'a ContextExample>, TrainError> {
        match self.examples()? {
            Examples::Context(ex) => Ok(self
                .whole_index()
                .iter()
                .map(|&i| &ex[i as usize])
                .collect()),
            _ => Err(self.wrong_kind("running text (previous, sentence, next)")),
        }
    }

    /// The whole batch's rows of each of `parts` (this step's rows `[shard, d_i]`, in
    /// example order), across the data-parallel peers, in one collective: the other peers'
    /// rows enter as constants and this peer's own rows keep their gradients. A loss on the
    /// gathered rows is the whole batch's loss, so each peer's gradient is that loss's
    /// gradient through its own rows, and their sum over the peers is the one-device run's
    /// (the trainer then leaves the loss unweighted). Alone, `parts` come back as they are.
    pub fn gather<const N: usize>(
        &mut self,
        parts: [Tensor<B, 2>; N],
    ) -> Result<[Tensor<B, 2>; N], TrainError> {
        let Some((peer, whole)) = self.whole.clone() else {
            return Ok(parts);
        };
        let sizes: Vec<usize> = (0..peer.peers)
            .map(|r| crate::parallel::shard(whole, r, peer.peers).len())
            .collect();
        let packed = Tensor::cat(parts.iter().map(|p| p.clone().inner()).collect(), 1);
        let all = peer.gather_rows(packed, &sizes)?;
        let start: usize = sizes[..peer.rank].iter().sum();
        let (end, total) = (start + sizes[peer.rank], whole.len());
        self.gathered = true;
        let mut column = 0;
        Ok(parts.map(|own| {
            let w = own.dims()[1];
            let theirs = |rows: std::ops::Range<usize>| {
                Tensor::<B, 2>::from_inner(all.clone().slice([rows, column..column + w]))
            };
            let mut pieces = Vec::with_capacity(3);
            if start > 0 {
                pieces.push(theirs(0..start));
            }
            pieces.push(own);
            if end < total {
                pieces.push(theirs(end..total));
            }
            column += w;
            Tensor::cat(pieces, 0)
        }))
    }

    /// The step with joint task `task`'s own batch (examples `index` of its data).
    pub fn with_own(
        mut self,
        task: usize,
        plan: &'a TaskPlan,
        batch: (&'a Examples, &'a [u32]),
    ) -> Self {
        self.own.push(OwnBatch {
            task,
            plan,
            examples: batch.0,
            index: batch.1,
            encoded: [None, None],
        });
        self
    }

    /// Which task's loss is computed next: a joint task's index, or `None` for the step's
    /// own task.
    pub fn set_current(&mut self, task: Option<usize>) {
        self.current = task;
    }

    /// The encodings of the first side of the batch the current (joint) task draws from its
    /// own corpus, through its encoder; computed on first use.
    pub fn own_encode(&mut self) -> Result<Encoded<B>, TrainError> {
        self.own_encode_side(Side::First)
    }

    /// [`Self::own_encode`] of side `side` (`Second`: the targets of translation pairs).
    pub fn own_encode_side(&mut self, side: Side) -> Result<Encoded<B>, TrainError> {
        let current = self.current;
        let name = self.task.name.clone();
        let own = self
            .own
            .iter_mut()
            .find(|o| Some(o.task) == current)
            .ok_or_else(|| {
                TrainError::recipe(
                    format!("tasks.{name}"),
                    "a loss reads a batch of its own corpus, but its task draws none",
                    "report this as a bug in the objective's definition (draws_own_batches)",
                )
            })?;
        let k = side as usize;
        if let Some(e) = own.encoded.get(k).and_then(Option::as_ref) {
            return Ok(e.clone());
        }
        let examples = own.examples;
        let input =
            match (examples, side) {
                (Examples::Labelled(ex), Side::First) => crate::batch::encoder_input::<B>(
                    own.index.iter().map(|&i| &ex[i as usize].ids),
                    self.device,
                ),
                (Examples::Pairs(ex), Side::First) => crate::batch::encoder_input::<B>(
                    own.index.iter().map(|&i| &ex[i as usize].src),
                    self.device,
                ),
                (Examples::Pairs(ex), Side::Second) => crate::batch::encoder_input::<B>(
                    own.index.iter().map(|&i| &ex[i as usize].tgt),
                    self.device,
                ),
                _ => return Err(TrainError::recipe(
                    format!("tasks.{}.corpus", own.plan.name),
                    "its own batches are read as sentences: give it labelled sentences or pairs",
                    "use an intent or parallel corpus",
                )),
            };
        self.tokens += input.tokens;
        let i = own.plan.encoders[0];
        let frozen = self
            .frozen
            .iter()
            .any(|g| matches!(g, Group::Encoder(j) if *j == i));
        let encoder = &self.model.encoders[i];
        let e = if frozen {
            frozen_forward(encoder, &input)
        } else {
            encoder.forward(&input, Some(self.noise))
        };
        own.encoded[k] = Some(e.clone());
        Ok(e)
    }

    /// Sets head `head`'s output-layer weight to `weight` after this step's optimizer
    /// update (a rule outside the optimizer: the center loss's centres).
    pub fn defer_head_weight(&mut self, head: usize, weight: Tensor<B::InnerBackend, 2>) {
        self.deferred.push((head, weight));
    }

    /// The deferred head weights ([`Self::defer_head_weight`]).
    pub fn take_deferred(&mut self) -> Vec<(usize, Tensor<B::InnerBackend, 2>)> {
        std::mem::take(&mut self.deferred)
    }

    /// The examples in the step's batch (of its drawn task).
    pub fn batch_examples(&self) -> usize {
        self.index.len()
    }

    /// Real tokens read so far (encoder inputs once each, plus what losses add).
    pub fn tokens(&self) -> usize {
        self.tokens
    }

    /// Counts tokens a loss reads besides the encoder inputs (decoder inputs).
    pub fn add_tokens(&mut self, n: usize) {
        self.tokens += n;
    }

    /// The model.
    pub fn model(&self) -> &'a System<B> {
        self.model
    }

    /// The training plan.
    pub fn plan(&self) -> &'a Plan {
        self.plan
    }

    /// The device of the batch's tensors.
    pub fn device(&self) -> &'a B::Device {
        self.device
    }

    /// This step's random draws (dropout).
    pub fn noise(&mut self) -> &mut Noise {
        self.noise
    }

    fn examples(&self) -> Result<&'a Examples, TrainError> {
        let examples = self.examples;
        self.task.data.as_ref().map(|_| examples).ok_or_else(|| {
            TrainError::recipe(
                format!("tasks.{}", self.task.name),
                "a joint task has no batches of its own",
                "remove `joint_with` or give the task its own corpus",
            )
        })
    }

    fn wrong_kind(&self, want: &str) -> TrainError {
        TrainError::recipe(
            format!("tasks.{}.corpus", self.task.name),
            format!("a loss on this task's batches reads {want}, which its corpus does not give"),
            "give the task (or the task it is joint with) a corpus of that kind",
        )
    }

    /// The batch's translation examples.
    pub fn pairs(&self) -> Result<Vec<&'a PairExample>, TrainError> {
        match self.examples()? {
            Examples::Pairs(ex) => Ok(self.index.iter().map(|&i| &ex[i as usize]).collect()),
            _ => Err(self.wrong_kind("translation pairs")),
        }
    }

    /// The batch's NLI examples.
    pub fn nli(&self) -> Result<Vec<&'a NliExample>, TrainError> {
        match self.examples()? {
            Examples::Nli(ex) => Ok(self.index.iter().map(|&i| &ex[i as usize]).collect()),
            _ => Err(self.wrong_kind("NLI triples")),
        }
    }

    /// The batch's running-text examples.
    pub fn context(&self) -> Result<Vec<&'a ContextExample>, TrainError> {
        match self.examples()? {
            Examples::Context(ex) => Ok(self.index.iter().map(|&i| &ex[i as usize]).collect()),
            _ => Err(self.wrong_kind("running text (previous, sentence, next)")),
        }
    }

    fn tensors(&mut self) -> Result<&Tensors<B>, TrainError> {
        if self.tensors.is_none() {
            let t = match self.examples()? {
                Examples::Pairs(ex) => Tensors::Pairs(pair_batch::<B>(
                    ex,
                    self.index,
                    &self.plan.first_token,
                    self.device,
                )),
                Examples::Nli(ex) => Tensors::Nli(nli_batch::<B>(ex, self.index, self.device)),
                Examples::Context(ex) => {
                    Tensors::Context(context_batch::<B>(ex, self.index, self.device))
                }
                Examples::Labelled(ex) => {
                    Tensors::Labelled(labelled_batch::<B>(ex, self.index, self.device))
                }
            };
            self.tensors = Some(t);
        }
        Ok(self.tensors.as_ref().expect("set above"))
    }

    /// The tensors of a batch of translation pairs.
    pub fn pair_batch(&mut self) -> Result<&PairBatch<B>, TrainError> {
        let err = self.wrong_kind("translation pairs");
        match self.tensors()? {
            Tensors::Pairs(b) => Ok(b),
            _ => Err(err),
        }
    }

    /// The tensors of a batch of NLI examples.
    pub fn nli_batch(&mut self) -> Result<&NliBatch<B>, TrainError> {
        let err = self.wrong_kind("NLI triples");
        match self.tensors()? {
            Tensors::Nli(b) => Ok(b),
            _ => Err(err),
        }
    }

    /// The classes of a batch of labelled sentences `[batch]`.
    pub fn labels(&mut self) -> Result<burn::tensor::Tensor<B, 1, burn::tensor::Int>, TrainError> {
        let err = self.wrong_kind("labelled sentences");
        match self.tensors()? {
            Tensors::Labelled(b) => Ok(b.labels.clone()),
            Tensors::Nli(b) => Ok(b.labels.clone()),
            _ => Err(err),
        }
    }

    /// The encodings of each example's hard negatives `[batch, k, d]` (targets of other
    /// examples, through the second side's encoder), when the task has them; `k` is the
    /// fewest any example of the batch has.
    pub fn hard_negatives(&mut self) -> Result<Option<burn::tensor::Tensor<B, 3>>, TrainError> {
        match self.negative_rows()? {
            Some((rows, k)) => Ok(Some(self.encode_negatives(rows, k))),
            None => Ok(None),
        }
    }

    /// The hard negatives' encodings `[batch, k, d]` from their rows, in a pass of their own.
    fn encode_negatives(&mut self, rows: Vec<&'a Tokens>, k: usize) -> Tensor<B, 3> {
        let input = crate::batch::encoder_input::<B>(rows, self.device);
        self.tokens += input.tokens;
        let i = self.task.encoders[1];
        let frozen = self.is_frozen(i);
        let encoder = &self.model.encoders[i];
        let noise = if frozen { None } else { Some(&mut *self.noise) };
        let e = encoder.forward(&input, noise).sentence;
        let [_, d] = e.dims();
        e.reshape([self.index.len(), k, d])
    }

    /// The sources' and targets' encodings and the hard negatives' ([`Self::encode_sides`]
    /// and [`Self::hard_negatives`], in that order): on a GPU, when all three go through one
    /// trained encoder, in one pass.
    pub fn encode_ranked(&mut self) -> Result<Ranked<B>, TrainError> {
        let i = self.encoder_of(Side::First);
        let fresh = self.encoded[0].is_none() && self.encoded[1].is_none();
        let Some((rows, k)) = self.negative_rows()? else {
            return Ok((self.encode_sides([Side::First, Side::Second])?, None));
        };
        if !(fresh && self.encoder_of(Side::Second) == i && self.merges(i)) {
            let sides = self.encode_sides([Side::First, Side::Second])?;
            return Ok((sides, Some(self.encode_negatives(rows, k))));
        }
        let groups = vec![
            self.side_rows(Side::First)?,
            self.side_rows(Side::Second)?,
            rows,
        ];
        let mut parts = self.encode_merged(groups, i)?.into_iter();
        let mut next = || parts.next().expect("one encoding per group");
        let (first, second, negatives) = (next(), next(), next().sentence);
        self.encoded[0] = Some(first.clone());
        self.encoded[1] = Some(second.clone());
        let [_, d] = negatives.dims();
        Ok((
            [first, second],
            Some(negatives.reshape([self.index.len(), k, d])),
        ))
    }

    /// The target rows of each example's hard negatives (`k` each, the fewest any example of
    /// the whole batch has), when the task has them.
    fn negative_rows(&self) -> Result<Option<(Vec<&'a Tokens>, usize)>, TrainError> {
        let Some(negatives) = self.task.data.as_ref().and_then(|d| d.negatives.as_ref()) else {
            return Ok(None);
        };
        let ex = match self.examples()? {
            Examples::Pairs(ex) => ex,
            _ => return Err(self.wrong_kind("translation pairs")),
        };
        // The fewest of the whole batch's, so that every data-parallel peer takes as many.
        let k = self
            .whole_index()
            .iter()
            .map(|&i| negatives[i as usize].len())
            .min()
            .unwrap_or(0);
        if k == 0 {
            return Ok(None);
        }
        let rows = self
            .index
            .iter()
            .flat_map(|&i| negatives[i as usize][..k].iter())
            .map(|&j| &ex[j as usize].tgt)
            .collect();
        Ok(Some((rows, k)))
    }

    /// The encodings of one side of the batch, computed on first use.
    pub fn encode(&mut self, side: Side) -> Result<Encoded<B>, TrainError> {
        let k = side as usize;
        if let Some(e) = &self.encoded[k] {
            return Ok(e.clone());
        }
        let input = match (self.tensors()?, side) {
            (Tensors::Pairs(b), Side::First) => b.src.clone(),
            (Tensors::Pairs(b), Side::Second) => b.tgt.clone(),
            (Tensors::Nli(b), Side::First) => b.premise.clone(),
            (Tensors::Nli(b), Side::Second) => b.hypothesis.clone(),
            (Tensors::Context(b), Side::First) => b.sentence.clone(),
            (Tensors::Context(b), Side::Second) => b.previous.clone(),
            (Tensors::Context(b), Side::Third) => b.next.clone(),
            (Tensors::Labelled(b), Side::First) => b.sentence.clone(),
            _ => return Err(self.missing_side(side)),
        };
        self.tokens += input.tokens;
        let i = self.encoder_of(side);
        let encoder = &self.model.encoders[i];
        // A frozen encoder encodes as at inference (no dropout): it is a fixed target.
        let frozen = self.is_frozen(i);
        let e = if frozen {
            frozen_forward(encoder, &input)
        } else {
            encoder.forward(&input, Some(self.noise))
        };
        self.encoded[k] = Some(e.clone());
        Ok(e)
    }

    /// The encodings of `sides`, as [`Self::encode`] gives each, in that order. On a GPU
    /// backend, the sides not yet encoded that go through the same trained encoder are
    /// encoded in one pass: their rows padded together into one batch, each side's rows and
    /// width cut out after, and each side's dropout masks drawn as its own pass would draw
    /// them ([`Noise::split`]). Padded positions are masked out of every encoder's output, so
    /// each side's encodings are its own pass's up to rounding; a step then runs one
    /// recurrence, or one stack of layers, where it ran one per side: a GPU step waits on
    /// launches, not on arithmetic (issue 59). The CPU, where a step waits on arithmetic,
    /// encodes each side at its own width.
    pub fn encode_sides<const N: usize>(
        &mut self,
        sides: [Side; N],
    ) -> Result<[Encoded<B>; N], TrainError> {
        for (k, &side) in sides.iter().enumerate() {
            if self.encoded[side as usize].is_some() {
                continue;
            }
            let i = self.encoder_of(side);
            let mut group: Vec<Side> = vec![side];
            for &other in &sides[k + 1..] {
                if self.encoded[other as usize].is_none()
                    && self.encoder_of(other) == i
                    && !group.contains(&other)
                {
                    group.push(other);
                }
            }
            if group.len() > 1 && self.merges(i) {
                self.encode_sides_merged(&group, i)?;
            } else {
                self.encode(side)?;
            }
        }
        let encodings = sides.map(|s| self.encoded[s as usize].clone());
        Ok(encodings.map(|e| e.expect("every side encoded above")))
    }

    /// Whether sides through encoder `i` are encoded in one pass ([`Self::encode_sides`]).
    fn merges(&self, i: usize) -> bool {
        self.merge_sides && !self.is_frozen(i)
    }

    /// Encodes `sides` through encoder `i` in one pass ([`Self::encode_sides`]).
    fn encode_sides_merged(&mut self, sides: &[Side], i: usize) -> Result<(), TrainError> {
        let rows = sides
            .iter()
            .map(|&s| self.side_rows(s))
            .collect::<Result<Vec<_>, _>>()?;
        for (&side, e) in sides.iter().zip(self.encode_merged(rows, i)?) {
            self.encoded[side as usize] = Some(e);
        }
        Ok(())
    }

    /// The encodings of each group of rows, as a pass of its own through encoder `i` gives
    /// them, from one pass over all of them ([`Self::encode_sides`]).
    fn encode_merged(
        &mut self,
        groups: Vec<Vec<&'a Tokens>>,
        i: usize,
    ) -> Result<Vec<Encoded<B>>, TrainError> {
        let (input, parts) = crate::batch::merged_encoder_input::<B>(&groups, self.device);
        self.tokens += input.tokens;
        let encoder = &self.model.encoders[i];
        // Each group's dropout masks are those of its own pass, and the stream goes on where
        // the separate passes would have left it.
        let split: Vec<_> = parts
            .iter()
            .map(|(rows, width)| {
                let words = encoder.noise_words(rows.len(), *width);
                (rows.clone(), *width, words)
            })
            .collect();
        self.noise.split(&split);
        let e = encoder.forward(&input, Some(self.noise));
        if !self.noise.join() {
            return Err(TrainError::recipe(
                format!("tasks.{}", self.task.name),
                "the encoder drew other dropout masks than it declared (`noise_words`), so the sides encoded in one pass would not have had their own masks",
                "report this as a bug in the encoder's `noise_words`",
            ));
        }
        // An encoder that clips its input (the transformer's `max_len`) clips each group's.
        let [_, time] = e.mask.dims();
        Ok(parts
            .into_iter()
            .map(|(rows, width)| {
                let width = width.min(time);
                Encoded {
                    sentence: e.sentence.clone().slice([rows.clone()]),
                    states: e.states.clone().slice([rows.clone(), 0..width]),
                    mask: e.mask.clone().slice([rows, 0..width]),
                }
            })
            .collect())
    }

    /// The token rows of one side of the batch's examples.
    fn side_rows(&self, side: Side) -> Result<Vec<&'a Tokens>, TrainError> {
        let index = self.index;
        fn pick<'e, E>(ex: &'e [E], index: &[u32], f: fn(&E) -> &Tokens) -> Vec<&'e Tokens> {
            index.iter().map(|&i| f(&ex[i as usize])).collect()
        }
        Ok(match (self.examples()?, side) {
            (Examples::Pairs(ex), Side::First) => pick(ex, index, |e| &e.src),
            (Examples::Pairs(ex), Side::Second) => pick(ex, index, |e| &e.tgt),
            (Examples::Nli(ex), Side::First) => pick(ex, index, |e| &e.premise),
            (Examples::Nli(ex), Side::Second) => pick(ex, index, |e| &e.hypothesis),
            (Examples::Context(ex), Side::First) => pick(ex, index, |e| &e.sentence),
            (Examples::Context(ex), Side::Second) => pick(ex, index, |e| &e.previous),
            (Examples::Context(ex), Side::Third) => pick(ex, index, |e| &e.next),
            (Examples::Labelled(ex), Side::First) => pick(ex, index, |e| &e.ids),
            _ => return Err(self.missing_side(side)),
        })
    }

    /// The encoder `side` goes through: the first side through the task's own encoder, the
    /// others through the one it reads.
    fn encoder_of(&self, side: Side) -> usize {
        self.task.encoders[(side as usize).min(1)]
    }

    /// Whether encoder `i` is out of training in this step.
    fn is_frozen(&self, i: usize) -> bool {
        self.frozen
            .iter()
            .any(|g| matches!(g, Group::Encoder(j) if *j == i))
    }

    fn missing_side(&self, side: Side) -> TrainError {
        TrainError::recipe(
            format!("tasks.{}", self.task.name),
            format!("a loss reads side {side:?} of examples that do not have it"),
            "report this as a bug in the objective's definition",
        )
    }

    /// The decoder, or an error naming the task that needs one.
    pub fn decoder(&self) -> Result<&'a LstmDecoder<B>, TrainError> {
        self.model.decoder.as_ref().ok_or_else(|| {
            TrainError::recipe(
                "model.decoder",
                format!(
                    "task `{}` decodes but the model has no decoder",
                    self.task.name
                ),
                "add `model.decoder: {kind: lstm, ...}`",
            )
        })
    }

    /// The head named `name` in `model.heads`.
    pub fn head(&self, name: &str) -> Result<&'a Mlp<B>, TrainError> {
        Ok(&self.model.heads[self.head_index(name)?])
    }

    /// The index of the head named `name` in `model.heads`.
    pub fn head_index(&self, name: &str) -> Result<usize, TrainError> {
        self.plan.system.head_index(name).ok_or_else(|| {
            TrainError::recipe(
                format!("tasks.{}.params.head", self.task.name),
                format!("no head named `{name}`"),
                "declare it under `model.heads`",
            )
        })
    }
}
