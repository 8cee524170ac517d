//! Layer normalisation of the rows of a matrix as one operation on the CPU backend, with its
//! own backward pass:
//!
//! ```text
//! forward:   μ = mean(x),  σ = √(mean((x − μ)²) + ε),  n = (x − μ) / σ,  y = n·γ + β
//! backward:  dγ = Σ_rows dy·n,  dβ = Σ_rows dy,  g = dy·γ,
//!            dx = (g − mean(g) − n·mean(g·n)) / σ
//! ```
//!
//! Why: burn composes `layer_norm` from nine tensor operations (mean, subtraction, square,
//! mean, square root, division, scale, shift), each an autodiff node that allocates; on the
//! muse-xling transformer (five LayerNorms an encoding) they were a tenth of a step.
//!
//! Semantics are `burn::nn::LayerNorm::forward` exactly (biased variance, ε inside the root),
//! up to float rounding: the tests below compare values and the three gradients.
//! [`layer_norm`] serves burn-ndarray (f32) and its autodiff; on any other backend it runs
//! burn's own (as one autodiff node on a GPU: [`crate::fused::device_nodes`]).

use crate::fused::lstm::{host_values, register_grad};
use burn::backend::autodiff::checkpoint::base::Checkpointer;
use burn::backend::autodiff::checkpoint::strategy::NoCheckpointing;
use burn::backend::autodiff::grads::Gradients;
use burn::backend::autodiff::ops::{Backward, Ops, OpsKind};
use burn::backend::{Autodiff, NdArray};
use burn::nn::LayerNorm;
use burn::tensor::backend::Backend;
use burn::tensor::ops::FloatTensorOps;
use burn::tensor::{Tensor, TensorData, TensorPrimitive};
use rayon::prelude::*;
use std::any::Any;
use std::sync::Arc;

type Cpu = NdArray<f32>;
type CpuAd = Autodiff<Cpu>;

/// Rows per rayon task.
const ROWS_PER_TASK: usize = 64;

/// `norm` (whose ε is `epsilon`: burn keeps it private) applied to each row of `x`
/// (`[rows, d]`).
pub fn layer_norm<B: Backend>(norm: &LayerNorm<B>, x: Tensor<B, 2>, epsilon: f64) -> Tensor<B, 2> {
    let any: &dyn Any = norm;
    if let Some(n) = any.downcast_ref::<LayerNorm<CpuAd>>() {
        let x: Box<dyn Any> = Box::new(x);
        let x = *x
            .downcast::<Tensor<CpuAd, 2>>()
            .expect("the layer's backend");
        let out: Box<dyn Any> = Box::new(autodiff_norm(n, x, epsilon as f32));
        return *out.downcast::<Tensor<B, 2>>().expect("the same backend");
    }
    if let Some(n) = any.downcast_ref::<LayerNorm<Cpu>>() {
        let x: Box<dyn Any> = Box::new(x);
        let x = *x.downcast::<Tensor<Cpu, 2>>().expect("the layer's backend");
        let [rows, d] = x.dims();
        let gamma = host_values(&n.gamma.val().into_primitive().tensor());
        let beta = n
            .beta
            .as_ref()
            .map(|b| host_values(&b.val().into_primitive().tensor()));
        let f = forward(
            &host_values(&x.into_primitive().tensor()),
            &gamma,
            beta.as_deref(),
            d,
            epsilon as f32,
        );
        let out: Box<dyn Any> = Box::new(Tensor::<Cpu, 2>::from_data(
            TensorData::new(f.y, [rows, d]),
            &Default::default(),
        ));
        return *out.downcast::<Tensor<B, 2>>().expect("the same backend");
    }
    crate::fused::device_nodes::layer_norm(norm, x, epsilon)
}

struct Forward {
    y: Vec<f32>,
    /// The normalised rows `n`.
    normalized: Vec<f32>,
    /// `σ` of each row.
    sigma: Vec<f32>,
}

fn forward(x: &[f32], gamma: &[f32], beta: Option<&[f32]>, d: usize, eps: f32) -> Forward {
    let rows = x.len() / d.max(1);
    let mut y = vec![0.0f32; rows * d];
    let mut normalized = vec![0.0f32; rows * d];
    let mut sigma = vec![0.0f32; rows];
    y.par_chunks_mut(ROWS_PER_TASK * d)
        .zip(normalized.par_chunks_mut(ROWS_PER_TASK * d))
        .zip(sigma.par_chunks_mut(ROWS_PER_TASK))
        .zip(x.par_chunks(ROWS_PER_TASK * d))
        .for_each(|(((y, n), s), x)| {
            for (((y, n), s), x) in y
                .chunks_exact_mut(d)
                .zip(n.chunks_exact_mut(d))
                .zip(s.iter_mut())
                .zip(x.chunks_exact(d))
            {
                let mean = x.iter().sum::<f32>() / d as f32;
                let var = x.iter().map(|v| (v - mean) * (v - mean)).sum::<f32>() / d as f32;
                *s = (var + eps).sqrt();
                for j in 0..d {
                    n[j] = (x[j] - mean) / *s;
                    y[j] = n[j] * gamma[j] + beta.map_or(0.0, |b| b[j]);
                }
            }
        });
    Forward {
        y,
        normalized,
        sigma,
    }
}

/// Lanes of [`row_sum`]: independent partial sums the compiler keeps in SIMD registers.
const LANES: usize = 16;

/// `Σ x` in a fixed order (`LANES` partial sums, a pairwise tree, then the remainder): a
/// function of the row alone, so a row normalises to the same bits whatever else is in the
/// batch, and vectorised, where a plain `iter().sum()` is a serial chain of additions.
#[inline(always)]
fn row_sum(x: &[f32], f: impl Fn(f32) -> f32) -> f32 {
    let mut acc = [0.0f32; LANES];
    let chunks = x.chunks_exact(LANES);
    let rest = chunks.remainder();
    for c in chunks {
        for l in 0..LANES {
            acc[l] += f(c[l]);
        }
    }
    let mut width = LANES / 2;
    while width > 0 {
        for l in 0..width {
            acc[l] += acc[l + width];
        }
        width /= 2;
    }
    rest.iter().fold(acc[0], |s, &v| s + f(v))
}

/// Inference form of [`layer_norm`] on host rows, in place: `x ← LayerNorm(x + residual)`
/// for each row of `d` values (`residual` added first when given, as BERT's post-LN blocks
/// do: `LayerNorm(dense(h) + input)`). Same formula as the forward pass above (biased
/// variance, ε inside the root, `(x − μ)/σ·γ + β`), without saving anything for a backward
/// pass and without allocating. Rows in parallel.
pub(crate) fn layer_norm_rows(
    x: &mut [f32],
    residual: Option<&[f32]>,
    gamma: &[f32],
    beta: Option<&[f32]>,
    d: usize,
    eps: f32,
) {
    if d == 0 {
        return;
    }
    let norm_row = |x: &mut [f32]| {
        let mean = row_sum(x, |v| v) / d as f32;
        let var = row_sum(x, |v| (v - mean) * (v - mean)) / d as f32;
        let sigma = (var + eps).sqrt();
        match beta {
            Some(beta) => {
                for ((v, g), b) in x.iter_mut().zip(gamma).zip(beta) {
                    *v = (*v - mean) / sigma * g + b;
                }
            }
            None => {
                for (v, g) in x.iter_mut().zip(gamma) {
                    *v = (*v - mean) / sigma * g;
                }
            }
        }
    };
    let task = ROWS_PER_TASK * d;
    match residual {
        Some(residual) => x
            .par_chunks_mut(task)
            .zip(residual.par_chunks(task))
            .for_each(|(x, r)| {
                for (x, r) in x.chunks_exact_mut(d).zip(r.chunks_exact(d)) {
                    for (v, r) in x.iter_mut().zip(r) {
                        *v += r;
                    }
                    norm_row(x);
                }
            }),
        None => x.par_chunks_mut(task).for_each(|x| {
            for x in x.chunks_exact_mut(d) {
                norm_row(x);
            }
        }),
    }
}

#[derive(Debug, Clone)]
struct Saved {
    normalized: Arc<Vec<f32>>,
    sigma: Arc<Vec<f32>>,
    gamma: Arc<Vec<f32>>,
    d: usize,
}

#[derive(Debug)]
struct LayerNormBackward;

impl Backward<Cpu, 3> for LayerNormBackward {
    type State = Saved;

    fn backward(self, ops: Ops<Saved, 3>, grads: &mut Gradients, _: &mut Checkpointer) {
        let s = ops.state;
        let d = s.d;
        let dy = host_values(&grads.consume::<Cpu>(&ops.node));
        let rows = s.sigma.len();
        let [p_x, p_gamma, p_beta] = ops.parents.map(|p| p.map(|n| n.id));
        let mut put = |id, v, shape| register_grad(grads, id, v, shape);
        if p_x.is_some() {
            let mut dx = vec![0.0f32; rows * d];
            dx.par_chunks_mut(ROWS_PER_TASK * d)
                .zip(dy.par_chunks(ROWS_PER_TASK * d))
                .zip(s.normalized.par_chunks(ROWS_PER_TASK * d))
                .zip(s.sigma.par_chunks(ROWS_PER_TASK))
                .for_each(|(((dx, dy), n), sigma)| {
                    for (((dx, dy), n), sigma) in dx
                        .chunks_exact_mut(d)
                        .zip(dy.chunks_exact(d))
                        .zip(n.chunks_exact(d))
                        .zip(sigma)
                    {
                        let (mut mean_g, mut mean_gn) = (0.0f32, 0.0f32);
                        for j in 0..d {
                            let g = dy[j] * s.gamma[j];
                            mean_g += g;
                            mean_gn += g * n[j];
                        }
                        mean_g /= d as f32;
                        mean_gn /= d as f32;
                        for j in 0..d {
                            let g = dy[j] * s.gamma[j];
                            dx[j] = (g - mean_g - n[j] * mean_gn) / sigma;
                        }
                    }
                });
            put(p_x, dx, vec![rows, d]);
        }
        if p_gamma.is_some() {
            let mut dgamma = vec![0.0f32; d];
            for (dy, n) in dy.chunks_exact(d).zip(s.normalized.chunks_exact(d)) {
                for j in 0..d {
                    dgamma[j] += dy[j] * n[j];
                }
            }
            put(p_gamma, dgamma, vec![d]);
        }
        if p_beta.is_some() {
            let mut dbeta = vec![0.0f32; d];
            for dy in dy.chunks_exact(d) {
                for (b, v) in dbeta.iter_mut().zip(dy) {
                    *b += v;
                }
            }
            put(p_beta, dbeta, vec![d]);
        }
    }
}

fn autodiff_norm(norm: &LayerNorm<CpuAd>, x: Tensor<CpuAd, 2>, eps: f32) -> Tensor<CpuAd, 2> {
    let [rows, d] = x.dims();
    let device = x.device();
    let x = x.into_primitive().tensor();
    let gamma = norm.gamma.val().into_primitive().tensor();
    let has_beta = norm.beta.is_some();
    // An absent shift takes part as an untracked placeholder: it gets no gradient.
    let beta = norm
        .beta
        .as_ref()
        .map(|b| b.val())
        .unwrap_or_else(|| Tensor::zeros([0], &device))
        .into_primitive()
        .tensor();
    let gamma_host = host_values(&gamma.primitive);
    let beta_host = has_beta.then(|| host_values(&beta.primitive));
    let f = forward(
        &host_values(&x.primitive),
        &gamma_host,
        beta_host.as_deref(),
        d,
        eps,
    );
    let out = <Cpu as FloatTensorOps<Cpu>>::float_from_data(
        TensorData::new(f.y, [rows, d]),
        &Default::default(),
    );
    let result = match LayerNormBackward
        .prepare::<NoCheckpointing>([x.node.clone(), gamma.node.clone(), beta.node.clone()])
        .compute_bound()
        .stateful()
    {
        OpsKind::Tracked(prep) => prep.finish(
            Saved {
                normalized: Arc::new(f.normalized),
                sigma: Arc::new(f.sigma),
                gamma: Arc::new(gamma_host),
                d,
            },
            out,
        ),
        OpsKind::UnTracked(prep) => prep.finish(out),
    };
    Tensor::from_primitive(TensorPrimitive::Float(result))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_support::fused::{self, close, values};
    use burn::module::{AutodiffModule, Param};
    use burn::nn::LayerNormConfig;

    fn tensor<const D: usize>(n: usize, shape: [usize; D], salt: f32) -> Tensor<CpuAd, D> {
        fused::tensor(n, shape, 0.83, salt, 2.0)
    }

    #[test]
    fn fused_layer_norm_equals_burns_with_every_gradient() {
        let dev = Default::default();
        // More rows than one task holds: the parallel split is exercised.
        let (rows, d) = (150, 6);
        let mut norm = LayerNormConfig::new(d).init::<CpuAd>(&dev);
        norm.gamma = Param::from_tensor(tensor(d, [d], 0.4).require_grad());
        norm.beta = Some(Param::from_tensor(tensor(d, [d], 1.9).require_grad()));
        let w = tensor(rows * d, [rows, d], 3.0);
        let x1 = tensor(rows * d, [rows, d], 0.1).require_grad();
        let x2 = tensor(rows * d, [rows, d], 0.1).require_grad();
        let fused = layer_norm(&norm, x1.clone(), 1e-5);
        let generic = norm.forward(x2.clone());
        close(&values(fused.clone()), &values(generic.clone()));
        let g1 = (fused * w.clone()).sum().backward();
        let g2 = (generic * w).sum().backward();
        close(
            &values(x1.grad(&g1).unwrap()),
            &values(x2.grad(&g2).unwrap()),
        );
        let gv = norm.gamma.val();
        close(
            &values(gv.grad(&g1).unwrap()),
            &values(gv.grad(&g2).unwrap()),
        );
        let bv = norm.beta.as_ref().unwrap().val();
        close(
            &values(bv.grad(&g1).unwrap()),
            &values(bv.grad(&g2).unwrap()),
        );
        let inner = norm.valid();
        let xi = tensor(rows * d, [rows, d], 0.1).inner();
        close(
            &values(layer_norm(&inner, xi.clone(), 1e-5)),
            &values(inner.forward(xi)),
        );
    }

    #[test]
    fn in_place_rows_with_a_residual_equal_burns_layer_norm_of_the_sum() {
        let dev = Default::default();
        // Rows of 37 (two lane chunks and a remainder), more rows than one task holds.
        let (rows, d) = (150, 37);
        let mut norm = LayerNormConfig::new(d)
            .with_epsilon(1e-12)
            .init::<Cpu>(&dev);
        norm.gamma = Param::from_tensor(tensor(d, [d], 0.4).inner());
        norm.beta = Some(Param::from_tensor(tensor(d, [d], 1.9).inner()));
        let x = tensor(rows * d, [rows, d], 0.1).inner();
        let r = tensor(rows * d, [rows, d], 2.7).inner();
        let want = values(norm.forward(x.clone() + r.clone()));
        let mut got = values(x.clone());
        let gamma = values(norm.gamma.val());
        let beta = values(norm.beta.as_ref().unwrap().val());
        layer_norm_rows(&mut got, Some(&values(r)), &gamma, Some(&beta), d, 1e-12);
        let worst = got
            .iter()
            .zip(&want)
            .map(|(a, b)| (a - b).abs())
            .fold(0.0f32, f32::max);
        assert!(worst <= 1e-5, "max |diff| {worst:e}");
        // Without the residual it is the plain norm, and the rows really were changed.
        let mut plain = values(x.clone());
        layer_norm_rows(&mut plain, None, &gamma, Some(&beta), d, 1e-12);
        close(&plain, &values(norm.forward(x.clone())));
        assert!(plain.iter().zip(&got).any(|(a, b)| (a - b).abs() > 1e-2));
    }
}
