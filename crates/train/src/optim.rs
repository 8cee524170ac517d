//! The recipe's optimizer: Adam, AdamW or SGD with the recipe's β, ε (PyTorch's 1e-8 by
//! default, not burn's 1e-5), weight decay, global-norm gradient clipping and learning-rate
//! schedule; its state saves and loads with the checkpoints.
//!
//! Clipping is by the *global* norm over every parameter (PyTorch's `clip_grad_norm_`,
//! which the seq2seq paper's "max norm 5" means); burn's own `GradientClipping::Norm` clips
//! each parameter tensor separately, which is a different update.

use crate::fused_adam::FusedAdam;
use crate::shape_ordered::ShapeOrdered;
use burn::module::{AutodiffModule, ModuleVisitor, Param, ParamId};
use burn::optim::decay::WeightDecayConfig;
use burn::optim::SimpleOptimizer;
use burn::optim::{AdamW, AdamWConfig, GradientsParams, Optimizer, Sgd, SgdConfig};
use burn::record::{FullPrecisionSettings, NamedMpkFileRecorder, Recorder, RecorderError};
use burn::tensor::backend::{AutodiffBackend, Backend};
use burn::tensor::Tensor;
use harness_recipe::schema::{Optimizer as OptimSpec, OptimizerKind, ScheduleKind};
use std::any::Any;
use std::path::Path;
use std::sync::{Arc, Mutex};

/// One of the supported optimizers, behind one type.
pub struct AnyOptimizer<M: AutodiffModule<B>, B: AutodiffBackend> {
    kind: Kind<M, B>,
    /// The gradient multiplier of the step being taken ([`Scaled`]), shared with the
    /// optimizer inside `kind`.
    factor: GradFactor<B::InnerBackend>,
}

enum Kind<M: AutodiffModule<B>, B: AutodiffBackend> {
    /// Adam with its fused CPU step ([`crate::fused_adam`]; burn's own elsewhere).
    Adam(Adaptor<FusedAdam, M, B>),
    AdamW(Adaptor<AdamW, M, B>),
    Sgd(Adaptor<Sgd<B::InnerBackend>, M, B>),
}

/// Optimizer `O` wrapped in [`Scaled`], stepped per parameter ([`ShapeOrdered`]: burn's
/// adaptor, grouped by shape on a GPU).
type Adaptor<O, M, B> = ShapeOrdered<Scaled<O, <B as AutodiffBackend>::InnerBackend>, M, B>;

/// A one-element tensor every gradient of a step is multiplied by, or none.
type GradFactor<IB> = Arc<Mutex<Option<Factor<IB>>>>;

/// The step's one-element gradient multiplier, shaped once for each rank up to 4 (`[1]`,
/// `[1, 1]`, …). Why: on a GPU a reshape queued between two parameters' updates ends burn's
/// fusion there (a view operation holds the block), and each update was shaped its own.
#[derive(Clone)]
struct Factor<IB: Backend> {
    d1: Tensor<IB, 1>,
    d2: Tensor<IB, 2>,
    d3: Tensor<IB, 3>,
    d4: Tensor<IB, 4>,
}

impl<IB: Backend> Factor<IB> {
    fn new(f: Tensor<IB, 1>) -> Self {
        Factor {
            d2: f.clone().unsqueeze(),
            d3: f.clone().unsqueeze(),
            d4: f.clone().unsqueeze(),
            d1: f,
        }
    }

    /// The multiplier as a rank-`D` tensor (shaped here above rank 4).
    fn of_rank<const D: usize>(&self) -> Tensor<IB, D> {
        let shaped: [&dyn Any; 4] = [&self.d1, &self.d2, &self.d3, &self.d4];
        match D
            .checked_sub(1)
            .and_then(|i| shaped.get(i))
            .and_then(|t| t.downcast_ref::<Tensor<IB, D>>())
        {
            Some(t) => t.clone(),
            None => self.d1.clone().unsqueeze::<D>(),
        }
    }
}

/// An optimizer that multiplies each parameter's gradient by the step's [`GradFactor`] (when
/// one is set) as the first operation of that parameter's update. Why: on a GPU the clipping
/// factor stays on the device, and a multiplication queued right before the update's own
/// element-wise operations on the same tensor is fused into their kernel by burn's fusion,
/// where a pass over every gradient before the optimizer launched one kernel per parameter.
/// The arithmetic is the same (`g · factor`, then the update), so are the bits. The factor
/// reaches the optimizer through a shared slot because burn's `SimpleOptimizer::step`, which
/// [`ShapeOrdered`] calls once per parameter, takes no argument for it.
#[derive(Clone)]
struct Scaled<O, IB: Backend> {
    inner: O,
    factor: GradFactor<IB>,
}

impl<O, IB: Backend> Scaled<O, IB> {
    fn new(inner: O, factor: &GradFactor<IB>) -> Self {
        Scaled {
            inner,
            factor: factor.clone(),
        }
    }
}

impl<IB: Backend, O: SimpleOptimizer<IB>> SimpleOptimizer<IB> for Scaled<O, IB> {
    type State<const D: usize> = O::State<D>;

    fn step<const D: usize>(
        &self,
        lr: f64,
        tensor: Tensor<IB, D>,
        grad: Tensor<IB, D>,
        state: Option<Self::State<D>>,
    ) -> (Tensor<IB, D>, Option<Self::State<D>>) {
        let factor = self
            .factor
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone();
        let grad = match factor {
            Some(f) => grad * f.of_rank::<D>(),
            None => grad,
        };
        self.inner.step(lr, tensor, grad, state)
    }

    fn to_device<const D: usize>(state: Self::State<D>, device: &IB::Device) -> Self::State<D> {
        O::to_device(state, device)
    }
}

type Rec = NamedMpkFileRecorder<FullPrecisionSettings>;

impl<M: AutodiffModule<B>, B: AutodiffBackend> AnyOptimizer<M, B> {
    /// The optimizer a recipe's `optimizer:` block describes (clipping is applied by
    /// [`clip_global_norm`], not inside the optimizer).
    pub fn from_spec(spec: &OptimSpec) -> Self {
        let decay =
            (spec.weight_decay > 0.0).then(|| WeightDecayConfig::new(spec.weight_decay as f32));
        let factor = GradFactor::default();
        let kind = match spec.kind {
            OptimizerKind::Adam => Kind::Adam(ShapeOrdered::new(Scaled::new(
                FusedAdam::new(
                    spec.betas[0] as f32,
                    spec.betas[1] as f32,
                    spec.eps as f32,
                    (spec.weight_decay > 0.0).then_some(spec.weight_decay as f32),
                ),
                &factor,
            ))),
            OptimizerKind::Adamw => Kind::AdamW(ShapeOrdered::new(Scaled::new(
                AdamWConfig::new()
                    .with_beta_1(spec.betas[0] as f32)
                    .with_beta_2(spec.betas[1] as f32)
                    .with_epsilon(spec.eps as f32)
                    .with_weight_decay(spec.weight_decay as f32)
                    .build(),
                &factor,
            ))),
            OptimizerKind::Sgd => Kind::Sgd(ShapeOrdered::new(Scaled::new(
                SgdConfig::new().with_weight_decay(decay).build(),
                &factor,
            ))),
        };
        AnyOptimizer { kind, factor }
    }

    /// One update; with `factor`, every gradient is first multiplied by it (the clipping
    /// factor [`clip_global_norm_on_device`] returns).
    pub fn step(
        &mut self,
        lr: f64,
        module: M,
        grads: GradientsParams,
        factor: Option<Tensor<B::InnerBackend, 1>>,
    ) -> M {
        *self.factor.lock().unwrap_or_else(|e| e.into_inner()) = factor.map(Factor::new);
        let module = match &mut self.kind {
            Kind::Adam(o) => o.step(lr, module, grads),
            Kind::AdamW(o) => o.step(lr, module, grads),
            Kind::Sgd(o) => o.step(lr, module, grads),
        };
        *self.factor.lock().unwrap_or_else(|e| e.into_inner()) = None;
        module
    }

    /// The parameters the optimizer keeps state for (those that have received a gradient):
    /// a frozen parameter is never among them.
    pub fn state_ids(&self) -> Vec<ParamId> {
        let mut ids: Vec<ParamId> = match &self.kind {
            Kind::Adam(o) => o.to_record().into_keys().collect(),
            Kind::AdamW(o) => o.to_record().into_keys().collect(),
            Kind::Sgd(o) => o.to_record().into_keys().collect(),
        };
        ids.sort_by_key(|id| id.val());
        ids
    }

    /// Saves the optimizer state to `path` (`.mpk` is appended), full precision.
    pub fn save(&self, path: &Path) -> Result<(), RecorderError> {
        let r = Rec::new();
        match &self.kind {
            Kind::Adam(o) => r.record(o.to_record(), path.to_path_buf()),
            Kind::AdamW(o) => r.record(o.to_record(), path.to_path_buf()),
            Kind::Sgd(o) => r.record(o.to_record(), path.to_path_buf()),
        }
    }

    /// Loads the state [`Self::save`] wrote.
    pub fn load(self, path: &Path, device: &B::Device) -> Result<Self, RecorderError> {
        let r = Rec::new();
        let p = path.to_path_buf();
        let kind = match self.kind {
            Kind::Adam(o) => Kind::Adam(o.load_record(r.load(p, device)?)),
            Kind::AdamW(o) => Kind::AdamW(o.load_record(r.load(p, device)?)),
            Kind::Sgd(o) => Kind::Sgd(o.load_record(r.load(p, device)?)),
        };
        Ok(AnyOptimizer {
            kind,
            factor: self.factor,
        })
    }
}

/// Scales the gradients so that their global L2 norm is at most `max_norm`; returns the
/// norm before clipping.
pub fn clip_global_norm<B: AutodiffBackend, M: AutodiffModule<B>>(
    module: &M,
    grads: &mut GradientsParams,
    max_norm: Option<f64>,
) -> f64 {
    let mut sq = SquaredNorm::<B> { grads, total: None };
    module.visit(&mut sq);
    let norm = sq
        .total
        .map_or(0.0, |t| harness_model::gpu::host_scalar(t).sqrt());
    if let Some(max) = max_norm {
        if norm > max && norm.is_finite() {
            let mut scale = Scale::<B> {
                grads,
                factor: max / (norm + 1e-6),
                _b: std::marker::PhantomData,
            };
            module.visit(&mut scale);
        }
    }
    norm
}

/// [`clip_global_norm`] without a read-back, for a GPU step: the norm stays on the device,
/// and so does the factor `min(1, max_norm / (norm + 1e-6))` the gradients are to be
/// multiplied by (the host path skips the multiplication under the bound, where the factor
/// is 1), returned for [`AnyOptimizer::step`] to apply inside each parameter's update. An
/// infinite norm makes the factor 0 where the host path leaves the gradients alone; a NaN
/// norm (and loss) stops the run when the step's values are read back either way. Returns
/// the norm and the factor (none without `max_norm`).
pub fn clip_global_norm_on_device<B: AutodiffBackend, M: AutodiffModule<B>>(
    module: &M,
    grads: &GradientsParams,
    max_norm: Option<f64>,
) -> (
    Tensor<B::InnerBackend, 1>,
    Option<Tensor<B::InnerBackend, 1>>,
) {
    let mut sq = DeviceSquaredGradients::<B> {
        grads,
        groups: Vec::new(),
    };
    module.visit(&mut sq);
    // One sum of squares per shape, the groups' sums added last: a few kernels in all where a
    // square and one or two reductions per parameter were hundreds (a transformer's layers
    // have parameters of a handful of shapes). Every group's sum is queued before the first
    // addition, so that the additions, the root and the factor are one run of element-wise
    // operations on a GPU (one kernel; queued between the reductions, each was its own).
    let totals: Vec<_> = sq
        .groups
        .into_iter()
        .map(|(_, squares)| sum_of_elements(squares))
        .collect();
    let mut totals = totals.into_iter();
    let Some(first) = totals.next() else {
        let device = module.devices().into_iter().next().unwrap_or_default();
        return (Tensor::zeros([1], &device), None);
    };
    let norm = totals.fold(first, |total, s| total + s).sqrt();
    let factor = max_norm.map(|max| (norm.clone() + 1e-6).recip().mul_scalar(max).clamp_max(1.0));
    (norm, factor)
}

/// The gradients' element-wise squares, those of one shape (as `[rows, width]`, the last
/// axis the width) added up element-wise as the module's parameters are visited: an
/// unbroken run of element-wise operations per shape, which burn's fusion gives one kernel
/// or a few (as many as a kernel's bindings allow).
struct DeviceSquaredGradients<'a, B: AutodiffBackend> {
    grads: &'a GradientsParams,
    /// Per shape, in the order first seen (so the summation order is the module's).
    groups: Vec<([usize; 2], Tensor<B::InnerBackend, 2>)>,
}

impl<B: AutodiffBackend> ModuleVisitor<B> for DeviceSquaredGradients<'_, B> {
    fn visit_float<const D: usize>(&mut self, param: &Param<Tensor<B, D>>) {
        let Some(g) = self.grads.get::<B::InnerBackend, D>(param.id) else {
            return;
        };
        let dims = g.dims();
        let width = dims[D - 1];
        let numel = dims.iter().product::<usize>();
        if numel == 0 {
            return;
        }
        let shape = [numel / width, width];
        let g: Tensor<B::InnerBackend, 2> = g.reshape(shape);
        let square = g.clone() * g;
        match self.groups.iter_mut().find(|(s, _)| *s == shape) {
            Some((_, total)) => *total = total.clone() + square,
            None => self.groups.push((shape, square)),
        }
    }
}

/// The sum of a `[rows, width]` tensor's elements in at most two kernels: along the rows
/// (`sum_dim`), then the rows' sums. Rows keep every GPU thread busy where one reduction over
/// a whole embedding table would run on one group of them (burn-cubecl's whole-tensor `sum`
/// is a zeroed output and atomic additions into it, or a chain of reductions, autotune's pick).
fn sum_of_elements<IB: burn::tensor::backend::Backend>(t: Tensor<IB, 2>) -> Tensor<IB, 1> {
    let [rows, _] = t.dims();
    let per_row = t.sum_dim(1).reshape([rows]);
    if rows == 1 {
        per_row
    } else {
        per_row.sum_dim(0)
    }
}

struct SquaredNorm<'a, B: AutodiffBackend> {
    grads: &'a GradientsParams,
    total: Option<Tensor<B::InnerBackend, 1>>,
}

impl<B: AutodiffBackend> ModuleVisitor<B> for SquaredNorm<'_, B> {
    fn visit_float<const D: usize>(&mut self, param: &Param<Tensor<B, D>>) {
        if let Some(g) = self.grads.get::<B::InnerBackend, D>(param.id) {
            let s = squared_sum_cpu(&g).unwrap_or_else(|| (g.clone() * g).sum());
            self.total = Some(match self.total.take() {
                Some(t) => t + s,
                None => s,
            });
        }
    }
}

/// `(g * g).sum()` in one read of `g` on burn-ndarray (f32), with the bits burn gives: each
/// product rounded to f32, then summed in memory order by ndarray's `sum`, whose eightfold
/// unrolled fold (`numeric_util::unrolled_fold`, ndarray 0.17) this repeats. burn's path
/// copies `g` (shared, so `mul` cannot work in place), multiplies, then sums: three passes
/// over the embedding tables' gradients every step. `None` on other backends or layouts.
fn squared_sum_cpu<IB: burn::tensor::backend::Backend, const D: usize>(
    g: &Tensor<IB, D>,
) -> Option<Tensor<IB, 1>> {
    use burn::backend::ndarray::{NdArray, NdArrayTensor};
    use burn::tensor::TensorPrimitive;
    type Cpu = NdArray<f32>;
    let any: &dyn std::any::Any = g;
    let g = any.downcast_ref::<Tensor<Cpu, D>>()?;
    let total = match g.clone().into_primitive() {
        TensorPrimitive::Float(NdArrayTensor::F32(storage)) => {
            unrolled_squared_sum(storage.view().as_slice_memory_order()?)
        }
        _ => return None,
    };
    let out: Box<dyn std::any::Any> = Box::new(Tensor::<Cpu, 1>::from_data(
        burn::tensor::TensorData::new(vec![total], [1]),
        &g.device(),
    ));
    out.downcast::<Tensor<IB, 1>>().ok().map(|t| *t)
}

/// ndarray 0.17's `unrolled_fold(xs, zero, add)` over `x * x` for `x` in `xs`.
fn unrolled_squared_sum(xs: &[f32]) -> f32 {
    let mut p = [0.0f32; 8];
    let mut chunks = xs.chunks_exact(8);
    for c in &mut chunks {
        for (acc, x) in p.iter_mut().zip(c) {
            *acc += x * x;
        }
    }
    let mut acc = 0.0f32;
    acc += p[0] + p[4];
    acc += p[1] + p[5];
    acc += p[2] + p[6];
    acc += p[3] + p[7];
    for x in chunks.remainder() {
        acc += x * x;
    }
    acc
}

/// Multiplies the gradients of the parameters `visit` walks by `factor`: multilingual USE's
/// embedding gradient multiplier (§4: "we multiply the gradient updates to the word and
/// character embeddings by a factor of 100"), applied before clipping as a gradient
/// multiplier inside the graph would be.
pub fn scale_gradients<'p, B: AutodiffBackend>(
    grads: &mut GradientsParams,
    factor: f64,
    params: impl IntoIterator<Item = &'p Param<Tensor<B, 2>>>,
) {
    let mut scale = Scale::<B> {
        grads,
        factor,
        _b: std::marker::PhantomData,
    };
    for p in params {
        scale.visit_float(p);
    }
}

struct Scale<'a, B: AutodiffBackend> {
    grads: &'a mut GradientsParams,
    factor: f64,
    _b: std::marker::PhantomData<B>,
}

impl<B: AutodiffBackend> ModuleVisitor<B> for Scale<'_, B> {
    fn visit_float<const D: usize>(&mut self, param: &Param<Tensor<B, D>>) {
        let id: ParamId = param.id;
        if let Some(g) = self.grads.remove::<B::InnerBackend, D>(id) {
            self.grads
                .register::<B::InnerBackend, D>(id, g * self.factor);
        }
    }
}

/// The learning rate at `step` (0-based) of `total` steps: linear warm-up over
/// `schedule.warmup` steps, then constant, linear decay to 0, inverse square root, or
/// exponential decay by `decay` per epoch of `steps_per_epoch` steps.
pub fn learning_rate(spec: &OptimSpec, step: u64, total: u64, steps_per_epoch: u64) -> f64 {
    let s = &spec.schedule;
    let base = spec.lr;
    let warm = s.warmup;
    if warm > 0 && step < warm {
        return base * (step + 1) as f64 / warm as f64;
    }
    match s.kind {
        ScheduleKind::Constant => base,
        ScheduleKind::Linear => {
            let span = total.saturating_sub(warm).max(1) as f64;
            base * (1.0 - (step - warm) as f64 / span).max(0.0)
        }
        ScheduleKind::InverseSqrt => {
            base * ((warm.max(1)) as f64 / (step + 1) as f64).sqrt().min(1.0)
        }
        ScheduleKind::Exponential => {
            let epoch = step / steps_per_epoch.max(1);
            base * s.decay.unwrap_or(1.0).powi(epoch as i32)
        }
    }
}

#[cfg(test)]
mod tests {
    /// The one-pass squared sum equals burn's `(g * g).sum()` bit for bit, at lengths
    /// around the unrolled fold's 8 and with values of very different sizes.
    #[test]
    fn squared_sum_equals_burns_bit_for_bit() {
        use burn::backend::NdArray;
        use burn::tensor::TensorData;
        type Cpu = NdArray<f32>;
        for n in [0usize, 1, 7, 8, 9, 15, 16, 17, 1001] {
            let v: Vec<f32> = (0..n)
                .map(|i| (i as f32 * 0.731).sin() * 10f32.powi(i as i32 % 7 - 3))
                .collect();
            let g = Tensor::<Cpu, 2>::from_data(TensorData::new(v, [1, n]), &Default::default());
            let burns = (g.clone() * g.clone()).sum().into_data();
            let ours = super::squared_sum_cpu(&g).unwrap().into_data();
            assert_eq!(
                ours.to_vec::<f32>().unwrap(),
                burns.to_vec::<f32>().unwrap(),
                "n = {n}"
            );
        }
        // A transposed view is not in memory order's standard layout, but its memory is
        // contiguous: the same sum either way.
        let g = Tensor::<Cpu, 2>::from_data(
            TensorData::new(
                (0..12).map(|i| i as f32 * 0.3 - 1.0).collect::<Vec<_>>(),
                [3, 4],
            ),
            &Default::default(),
        )
        .transpose();
        let burns = (g.clone() * g.clone()).sum().into_data();
        let ours = super::squared_sum_cpu(&g).unwrap().into_data();
        assert_eq!(
            ours.to_vec::<f32>().unwrap(),
            burns.to_vec::<f32>().unwrap()
        );
    }

    use super::*;
    use burn::backend::{Autodiff, NdArray};
    use burn::module::Module;
    use burn::nn::{Linear, LinearConfig};
    use burn::tensor::TensorData;
    use harness_recipe::schema::Schedule;

    type B = Autodiff<NdArray<f32>>;

    fn spec(kind: ScheduleKind, warmup: u64) -> OptimSpec {
        OptimSpec {
            kind: OptimizerKind::Adam,
            lr: 1.0,
            betas: [0.9, 0.999],
            eps: 1e-8,
            weight_decay: 0.0,
            grad_clip: None,
            dropout: 0.0,
            schedule: Schedule {
                kind,
                warmup,
                decay: Some(0.5),
            },
            embedding_grad_scale: 1.0,
        }
    }

    #[test]
    fn schedules() {
        assert_eq!(
            learning_rate(&spec(ScheduleKind::Constant, 0), 7, 10, 5),
            1.0
        );
        assert_eq!(
            learning_rate(&spec(ScheduleKind::Constant, 4), 1, 10, 5),
            0.5
        );
        assert_eq!(learning_rate(&spec(ScheduleKind::Linear, 0), 5, 10, 5), 0.5);
        assert_eq!(
            learning_rate(&spec(ScheduleKind::Exponential, 0), 10, 100, 5),
            0.25
        );
        assert!(
            (learning_rate(&spec(ScheduleKind::InverseSqrt, 4), 15, 100, 5) - 0.5).abs() < 1e-12
        );
    }

    #[test]
    fn global_norm_clipping_scales_all_gradients_together() {
        let dev = Default::default();
        let lin: Linear<B> = LinearConfig::new(2, 1).init(&dev);
        let lin = lin.load_record(burn::nn::LinearRecord {
            weight: Param::from_tensor(Tensor::from_data(
                TensorData::new(vec![0f32, 0.], [2, 1]),
                &dev,
            )),
            bias: Some(Param::from_tensor(Tensor::from_data(
                TensorData::new(vec![0f32], [1]),
                &dev,
            ))),
        });
        // loss = 3·w0 + 4·w1 + 0·b (x = (3, 4)): gradient (3, 4, 1) with the bias' 1.
        let x = Tensor::<B, 2>::from_data(TensorData::new(vec![3f32, 4.], [1, 2]), &dev);
        let loss = lin.forward(x).sum();
        let mut grads = GradientsParams::from_grads(loss.backward(), &lin);
        let norm = clip_global_norm(&lin, &mut grads, Some(1.0));
        assert!((norm - 26f64.sqrt()).abs() < 1e-5, "{norm}");
        let after = clip_global_norm(&lin, &mut grads, None);
        assert!((after - 1.0).abs() < 1e-4, "{after}");
        let w = grads
            .get::<NdArray<f32>, 2>(lin.weight.id)
            .unwrap()
            .into_data()
            .to_vec::<f32>()
            .unwrap();
        // Direction kept: 3:4.
        assert!((w[0] / w[1] - 0.75).abs() < 1e-5);
        let _ = lin.devices();
    }

    /// A 3→2 linear layer (a rank-2 and a rank-1 parameter).
    fn model() -> Linear<B> {
        LinearConfig::new(3, 2).init(&Default::default())
    }

    /// Gradients of `lin` from a loss that gives every element a different value.
    fn grads_of(lin: &Linear<B>) -> GradientsParams {
        let dev = Default::default();
        let x = Tensor::<B, 2>::from_data(
            TensorData::new(vec![3f32, -4., 0.5, 1., 2., -7.], [2, 3]),
            &dev,
        );
        let w = Tensor::<B, 2>::from_data(TensorData::new(vec![1f32, -2., 3., 5.], [2, 2]), &dev);
        let loss = (lin.forward(x) * w).sum() * 10.0;
        GradientsParams::from_grads(loss.backward(), lin)
    }

    /// Every weight of `lin`, the matrix's then the bias'.
    fn values(lin: &Linear<B>) -> Vec<f32> {
        let bias = lin.bias.as_ref().map(|b| b.val()).into_iter();
        std::iter::once(lin.weight.val().flatten::<1>(0, 1))
            .chain(bias)
            .flat_map(|t| t.into_data().to_vec::<f32>().unwrap())
            .collect()
    }

    /// The GPU norm adds up the squares of same-shaped parameters before it sums them (three
    /// linear layers, two of one shape): the host path's norm still, to rounding.
    #[test]
    fn the_device_norm_of_same_shaped_parameters_is_the_host_norm() {
        let dev = Default::default();
        let layers: Vec<Linear<B>> = vec![
            LinearConfig::new(3, 2).init(&dev),
            LinearConfig::new(2, 2).init(&dev),
            LinearConfig::new(3, 2).init(&dev),
        ];
        // Every weight gets a gradient: the product of two paths through the layers.
        let grads_of = |layers: &Vec<Linear<B>>| {
            let x = Tensor::<B, 2>::from_data(
                TensorData::new(vec![3f32, -4., 0.5, 1., 2., -7.], [2, 3]),
                &dev,
            );
            let hidden = layers[1].forward(layers[0].forward(x.clone()));
            let loss = (hidden * layers[2].forward(x)).sum() * 10.0;
            GradientsParams::from_grads(loss.backward(), layers)
        };
        let grads = grads_of(&layers);
        let mut host_grads = grads_of(&layers);
        let host = clip_global_norm(&layers, &mut host_grads, None);
        let (device, _) = clip_global_norm_on_device(&layers, &grads, None);
        let device = f64::from(device.into_scalar());
        assert!(host > 1.0, "{host}");
        assert!((device - host).abs() <= 1e-6 * host, "{device} vs {host}");
        // Each parameter counts once: one layer's gradients alone give a smaller norm.
        let (first, _) = clip_global_norm_on_device(&layers[0], &grads, None);
        assert!(f64::from(first.into_scalar()) < device - 1e-3);
    }

    /// A parameter with no elements has a gradient of none: the GPU norm skips it (its
    /// `[rows, width]` view would divide by the width) and is the norm of the others.
    #[test]
    fn the_device_norm_skips_a_gradient_without_elements() {
        let dev = Default::default();
        let param = |values: Vec<f32>| {
            let n = values.len();
            Param::from_tensor(Tensor::<B, 1>::from_data(
                TensorData::new(values, [n]),
                &dev,
            ))
        };
        let params = vec![param(vec![3., -4., 12.]), param(Vec::new())];
        let loss = (params[0].val() * params[0].val()).sum() + params[1].val().sum();
        let grads = GradientsParams::from_grads(loss.backward(), &params);
        assert_eq!(
            grads.get::<NdArray, 1>(params[1].id).map(|g| g.dims()),
            Some([0]),
            "the empty parameter has a gradient, of no elements"
        );
        let (all, _) = clip_global_norm_on_device(&params, &grads, None);
        let (all, want) = (all.into_scalar(), 2.0 * 13.0);
        assert!((all - want).abs() < 1e-5, "{all} vs {want}");
    }

    /// The GPU step's clipping: the norm is the host path's (summed in another order), the
    /// factor is `max / (norm + 1e-6)` above the bound and 1 under it, none without a bound;
    /// and each optimizer, given the factor, updates exactly as it does from gradients
    /// multiplied by it beforehand (the multiplication moved into the update, bit for bit).
    #[test]
    fn clipping_inside_the_update_equals_clipping_the_gradients_first() {
        let lin = model();
        let grads = grads_of(&lin);
        let host = clip_global_norm(&lin, &mut grads_of(&lin), None);
        let (norm, factor) = clip_global_norm_on_device(&lin, &grads, Some(1.0));
        let norm = f64::from(norm.into_scalar());
        assert!(host > 10.0, "{host}");
        assert!((norm - host).abs() <= 1e-6 * host, "{norm} vs {host}");
        let factor = factor.expect("a bound gives a factor");
        let f = f64::from(factor.clone().into_scalar());
        assert!((f - 1.0 / (norm + 1e-6)).abs() < 1e-9, "{f}");
        let (_, under) = clip_global_norm_on_device(&lin, &grads, Some(1e9));
        assert_eq!(under.unwrap().into_scalar(), 1.0);
        assert!(clip_global_norm_on_device(&lin, &grads, None).1.is_none());

        for kind in [
            OptimizerKind::Adam,
            OptimizerKind::Adamw,
            OptimizerKind::Sgd,
        ] {
            let spec = OptimSpec {
                kind,
                ..spec(ScheduleKind::Constant, 0)
            };
            // Two steps, so that Adam's second starts from the moments of the first.
            let (mut inside, mut before) = (lin.clone(), lin.clone());
            let mut a = AnyOptimizer::<Linear<B>, B>::from_spec(&spec);
            let mut b = AnyOptimizer::<Linear<B>, B>::from_spec(&spec);
            for _ in 0..2 {
                let g = grads_of(&inside);
                inside = a.step(0.01, inside, g, Some(factor.clone()));
                let mut scaled = grads_of(&before);
                let id = lin.weight.id;
                let t = scaled.remove::<NdArray<f32>, 2>(id).unwrap();
                scaled.register(id, t * factor.clone().unsqueeze::<2>());
                let id = lin.bias.as_ref().unwrap().id;
                let t = scaled.remove::<NdArray<f32>, 1>(id).unwrap();
                scaled.register(id, t * factor.clone());
                before = b.step(0.01, before, scaled, None);
            }
            assert_eq!(values(&inside), values(&before), "{kind:?}");
            assert_ne!(values(&inside), values(&lin), "{kind:?}: no update");
        }
    }
}
