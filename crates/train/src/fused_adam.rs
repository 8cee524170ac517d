//! Adam as one pass over memory on the CPU backend: the same update as burn's
//! [`burn::optim::Adam`] (its arithmetic, in its order, so the weights are bit-identical), with
//! the same state record (checkpoints written by either load in the other).
//!
//! Why: burn's Adam is a chain of tensor operations (`m·β₁`, `g·(1−β₁)`, their sum, `g²`,
//! …, `√v`, the division, `p − lr·u`), each a full pass that allocates its result. On a model
//! whose embedding tables hold millions of rows that chain was an eighth of a training step.
//! Here each element of the parameter, its gradient and both moments is read and written
//! once, in place where the arrays are not shared, split over the rayon pool.
//!
//! On any backend other than burn-ndarray (f32) the step is burn's own, unchanged.

use burn::backend::ndarray::NdArrayTensor;
use burn::backend::NdArray;
use burn::module::AutodiffModule;
use burn::optim::adaptor::OptimizerAdaptor;
use burn::optim::{Adam, AdamConfig, AdamState, AdaptiveMomentumState, SimpleOptimizer};
use burn::tensor::backend::{AutodiffBackend, Backend};
use burn::tensor::{Tensor, TensorPrimitive};
use rayon::prelude::*;
use std::any::Any;

type Cpu = NdArray<f32>;

/// Elements per rayon task: large enough that scheduling costs nothing next to the pass.
const CHUNK: usize = 1 << 15;

/// Adam (`AdamConfig`'s β₁, β₂, ε and L2 weight decay; no AMSGrad) with a fused CPU step.
#[derive(Clone)]
pub struct FusedAdam {
    beta_1: f32,
    beta_2: f32,
    epsilon: f32,
    weight_decay: Option<f32>,
    /// burn's own, for every other backend.
    generic: Adam,
}

impl FusedAdam {
    /// The optimizer for these settings (`weight_decay`: burn's `WeightDecayConfig` penalty,
    /// added to the gradient as `g + penalty·p`).
    pub fn new(beta_1: f32, beta_2: f32, epsilon: f32, weight_decay: Option<f32>) -> Self {
        let generic = AdamConfig::new()
            .with_beta_1(beta_1)
            .with_beta_2(beta_2)
            .with_epsilon(epsilon)
            .with_weight_decay(weight_decay.map(burn::optim::decay::WeightDecayConfig::new))
            .build();
        FusedAdam {
            beta_1,
            beta_2,
            epsilon,
            weight_decay,
            generic,
        }
    }

    /// The optimizer over a module's parameters.
    pub fn init<B: AutodiffBackend, M: AutodiffModule<B>>(self) -> OptimizerAdaptor<Self, M, B> {
        OptimizerAdaptor::from(self)
    }
}

impl<B: Backend> SimpleOptimizer<B> for FusedAdam {
    type State<const D: usize> = AdamState<B, D>;

    fn step<const D: usize>(
        &self,
        lr: f64,
        tensor: Tensor<B, D>,
        grad: Tensor<B, D>,
        state: Option<Self::State<D>>,
    ) -> (Tensor<B, D>, Option<Self::State<D>>) {
        let args: Box<dyn Any> = Box::new((tensor, grad, state));
        match args.downcast::<CpuArgs<D>>() {
            Ok(args) => {
                let (tensor, grad, state) = *args;
                let out: Box<dyn Any> = Box::new(self.cpu_step(lr, tensor, grad, state));
                *out.downcast::<Output<B, D>>()
                    .expect("the same backend type")
            }
            Err(args) => {
                let (tensor, grad, state) = *args
                    .downcast::<(Tensor<B, D>, Tensor<B, D>, Option<AdamState<B, D>>)>()
                    .expect("the arguments' own type");
                SimpleOptimizer::<B>::step(&self.generic, lr, tensor, grad, state)
            }
        }
    }

    fn to_device<const D: usize>(state: Self::State<D>, device: &B::Device) -> Self::State<D> {
        <Adam as SimpleOptimizer<B>>::to_device(state, device)
    }
}

/// One chunk of the parameter, its gradient and both moments.
type Chunk<'a> = (((&'a mut [f32], &'a [f32]), &'a mut [f32]), &'a mut [f32]);

type CpuArgs<const D: usize> = (Tensor<Cpu, D>, Tensor<Cpu, D>, Option<AdamState<Cpu, D>>);
type Output<B, const D: usize> = (Tensor<B, D>, Option<AdamState<B, D>>);

/// The array behind a CPU tensor, owned (copied only when shared) and in standard layout.
fn owned<const D: usize>(t: Tensor<Cpu, D>) -> burn::backend::ndarray::SharedArray<f32> {
    let array = match t.into_primitive().tensor() {
        NdArrayTensor::F32(storage) => storage.into_owned(),
        other => {
            // Not f32 storage: through burn's own conversion.
            let t: Tensor<Cpu, D> = Tensor::from_primitive(TensorPrimitive::Float(other));
            let data = t.into_data().convert::<f32>();
            return owned(Tensor::<Cpu, D>::from_data(data, &Default::default()));
        }
    };
    if array.is_standard_layout() {
        array
    } else {
        array.as_standard_layout().into_owned().into_shared()
    }
}

fn tensor<const D: usize>(array: burn::backend::ndarray::SharedArray<f32>) -> Tensor<Cpu, D> {
    Tensor::from_primitive(TensorPrimitive::Float(NdArrayTensor::from(array)))
}

impl FusedAdam {
    fn cpu_step<const D: usize>(
        &self,
        lr: f64,
        tensor_in: Tensor<Cpu, D>,
        grad: Tensor<Cpu, D>,
        state: Option<AdamState<Cpu, D>>,
    ) -> Output<Cpu, D> {
        // A first step starts from zero moments: `0·β + x` is `x` exactly, burn's first step.
        let (time, m, v) = match state {
            Some(s) => (
                s.momentum.time,
                Some(owned(s.momentum.moment_1)),
                Some(owned(s.momentum.moment_2)),
            ),
            None => (0, None, None),
        };
        let mut p = owned(tensor_in);
        let g = owned(grad);
        let n = p.len();
        let zeros = || burn::backend::ndarray::SharedArray::<f32>::zeros(p.raw_dim());
        let mut m = m.unwrap_or_else(zeros);
        let mut v = v.unwrap_or_else(zeros);
        let time = time + 1;
        let (b1, b2, eps) = (self.beta_1, self.beta_2, self.epsilon);
        // burn's scalars, computed as it does (f32).
        let (f1, f2) = (1.0 - b1, 1.0 - b2);
        let bias_correction2_sqrt = (1.0 - b2.powi(time as i32)).sqrt();
        let combined = bias_correction2_sqrt / (1.0 - b1.powi(time as i32));
        let denominator_eps = eps * bias_correction2_sqrt;
        let lr = lr as f32;
        let decay = self.weight_decay;
        {
            let ps = p.as_slice_mut().expect("standard layout");
            let gs = g.as_slice().expect("standard layout");
            let ms = m.as_slice_mut().expect("standard layout");
            let vs = v.as_slice_mut().expect("standard layout");
            let update = |(((p, g), m), v): Chunk<'_>| {
                for i in 0..p.len() {
                    let mut gi = g[i];
                    if let Some(penalty) = decay {
                        // burn's `p·penalty + g` (addition commutes exactly).
                        gi += p[i] * penalty;
                    }
                    let mi = m[i] * b1 + gi * f1;
                    let vi = v[i] * b2 + (gi * gi) * f2;
                    m[i] = mi;
                    v[i] = vi;
                    let u = (mi * combined) / (vi.sqrt() + denominator_eps);
                    p[i] -= u * lr;
                }
            };
            if n > CHUNK {
                ps.par_chunks_mut(CHUNK)
                    .zip(gs.par_chunks(CHUNK))
                    .zip(ms.par_chunks_mut(CHUNK))
                    .zip(vs.par_chunks_mut(CHUNK))
                    .for_each(update);
            } else {
                update((((ps, gs), ms), vs));
            }
        }
        let state = AdamState::new(AdaptiveMomentumState::new(time, tensor(m), tensor(v)));
        (tensor(p), Some(state))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use burn::backend::Autodiff;
    use burn::module::Module;
    use burn::nn::{Linear, LinearConfig};
    use burn::optim::{GradientsParams, Optimizer};
    use burn::tensor::TensorData;

    type Ad = Autodiff<Cpu>;

    #[derive(Module, Debug)]
    struct Net<B: Backend> {
        a: Linear<B>,
        b: Linear<B>,
    }

    /// Deterministic weights (the backend's RNG is shared by tests running in parallel).
    fn linear(d_in: usize, d_out: usize, salt: u32) -> Linear<Ad> {
        let dev = Default::default();
        let value = |i: usize| {
            ((i as u32).wrapping_mul(2_654_435_761).wrapping_add(salt) % 1000) as f32 / 1000.0 - 0.5
        };
        let mut l = LinearConfig::new(d_in, d_out).init::<Ad>(&dev);
        let w: Vec<f32> = (0..d_in * d_out).map(|i| value(i) * 0.1).collect();
        let b: Vec<f32> = (0..d_out).map(|i| value(i + 7) * 0.1).collect();
        l.weight = burn::module::Param::from_tensor(Tensor::from_data(
            TensorData::new(w, [d_in, d_out]),
            &dev,
        ));
        l.bias = Some(burn::module::Param::from_tensor(Tensor::from_data(
            TensorData::new(b, [d_out]),
            &dev,
        )));
        l
    }

    fn net() -> Net<Ad> {
        // Large enough for the parallel path (> CHUNK elements), and a small one.
        Net {
            a: linear(300, 200, 1),
            b: linear(200, 3, 2),
        }
    }

    fn loss(n: &Net<Ad>, x: &Tensor<Ad, 2>) -> Tensor<Ad, 1> {
        n.b.forward(n.a.forward(x.clone()).tanh())
            .powi_scalar(2)
            .sum()
    }

    fn weights(n: &Net<Ad>) -> Vec<f32> {
        let mut v = n.a.weight.val().into_data().to_vec::<f32>().unwrap();
        v.extend(
            n.b.bias
                .as_ref()
                .unwrap()
                .val()
                .into_data()
                .to_vec::<f32>()
                .unwrap(),
        );
        v
    }

    #[test]
    fn fused_adam_equals_burns_adam_bit_for_bit() {
        for decay in [None, Some(0.01f32)] {
            let x: Vec<f32> = (0..8 * 300)
                .map(|i| ((i * 37 % 101) as f32 - 50.0) / 50.0)
                .collect();
            let x = Tensor::<Ad, 2>::from_data(TensorData::new(x, [8, 300]), &Default::default());
            let (mut ours, mut theirs) = (net(), net());
            let mut fused = FusedAdam::new(0.9, 0.98, 1e-8, decay).init::<Ad, Net<Ad>>();
            let mut burns = AdamConfig::new()
                .with_beta_1(0.9)
                .with_beta_2(0.98)
                .with_epsilon(1e-8)
                .with_weight_decay(decay.map(burn::optim::decay::WeightDecayConfig::new))
                .init::<Ad, Net<Ad>>();
            for step in 0..4 {
                let lr = 1e-3 * (step + 1) as f64;
                let g = GradientsParams::from_grads(loss(&ours, &x).backward(), &ours);
                ours = fused.step(lr, ours, g);
                let g = GradientsParams::from_grads(loss(&theirs, &x).backward(), &theirs);
                theirs = burns.step(lr, theirs, g);
                let (a, b) = (weights(&ours), weights(&theirs));
                let differ = a.iter().zip(&b).filter(|(x, y)| x != y).count();
                let worst = a
                    .iter()
                    .zip(&b)
                    .map(|(x, y)| (x - y).abs())
                    .fold(0.0, f32::max);
                assert_eq!(
                    differ, 0,
                    "step {step}, decay {decay:?}: {differ} differ, by up to {worst}"
                );
            }
            assert_ne!(weights(&ours), weights(&net()), "the weights moved");
        }
    }

    #[test]
    fn checkpoints_of_either_load_in_the_other() {
        use burn::record::{FullPrecisionSettings, NamedMpkFileRecorder, Recorder};
        let rec = NamedMpkFileRecorder::<FullPrecisionSettings>::new();
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("optim");
        let x = Tensor::<Ad, 2>::from_data(
            TensorData::new(vec![0.5f32; 300], [1, 300]),
            &Default::default(),
        );
        // The same parameter ids (records are keyed by them).
        let n = net();
        let m = n.clone();
        let mut fused = FusedAdam::new(0.9, 0.999, 1e-8, None).init::<Ad, Net<Ad>>();
        let g = GradientsParams::from_grads(loss(&n, &x).backward(), &n);
        let n = fused.step(1e-3, n, g);
        rec.record(fused.to_record(), path.clone()).unwrap();
        let mut burns = AdamConfig::new().with_epsilon(1e-8).init::<Ad, Net<Ad>>();
        let g = GradientsParams::from_grads(loss(&m, &x).backward(), &m);
        let m = burns.step(1e-3, m, g);
        burns = burns.load_record(rec.load(path.clone(), &Default::default()).unwrap());
        // One more step of each from the same state: the same weights.
        let g = GradientsParams::from_grads(loss(&n, &x).backward(), &n);
        let n = fused.step(1e-3, n, g);
        let g = GradientsParams::from_grads(loss(&m, &x).backward(), &m);
        let m = burns.step(1e-3, m, g);
        assert!(weights(&n) == weights(&m), "different weights");
    }
}
