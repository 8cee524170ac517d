//! Finite-difference gradient check for the custom losses (tests only): the autodiff
//! gradient of a scalar loss at a random point equals the central difference
//! `(L(x + h·e_i) − L(x − h·e_i)) / 2h` in every coordinate.
//!
//! In f32, with h = 1e-2 and a tolerance of 2e-3: the rounding error of the difference is
//! about ε·|L|/h ≈ 1e-5 and the truncation error h²·|L'''| ≈ 1e-4. (An f64 backend would
//! allow tighter bounds, but burn 0.21's NdArray device keeps one float type per process,
//! set by whichever test touches it first, so f64 is not guaranteed in a parallel run.)

use burn::backend::{Autodiff, NdArray};
use burn::tensor::{Tensor, TensorData};
use rand::{Rng, SeedableRng};

/// The autodiff backend the checks run on.
pub type F64 = Autodiff<NdArray<f32>>;

/// A `[rows, cols]` tensor of `values` (row-major) on backend `Bk`'s default device.
pub fn matrix<Bk: burn::tensor::backend::Backend>(
    values: &[f32],
    shape: [usize; 2],
) -> Tensor<Bk, 2> {
    Tensor::from_data(TensorData::new(values.to_vec(), shape), &Default::default())
}

/// Checks `loss` at a seeded random point of `shape`.
pub fn check_gradient<const D: usize>(
    shape: [usize; D],
    seed: u64,
    loss: impl Fn(Tensor<F64, D>) -> Tensor<F64, 1>,
) {
    let dev = Default::default();
    let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(seed);
    let n: usize = shape.iter().product();
    let point: Vec<f32> = (0..n).map(|_| rng.random_range(-1.0..1.0)).collect();
    let x = Tensor::<F64, D>::from_data(TensorData::new(point.clone(), shape), &dev).require_grad();
    let grads = loss(x.clone()).backward();
    let analytic = x
        .grad(&grads)
        .expect("the loss depends on its input")
        .into_data()
        .convert::<f64>()
        .to_vec::<f64>()
        .expect("f64 gradient");
    let at = |p: Vec<f32>| -> f64 {
        loss(Tensor::from_data(TensorData::new(p, shape), &dev))
            .into_data()
            .convert::<f64>()
            .to_vec::<f64>()
            .expect("f64 loss")[0]
    };
    let h = 1e-2f32;
    for i in 0..n {
        let mut up = point.clone();
        up[i] += h;
        let mut down = point.clone();
        down[i] -= h;
        let numeric = (at(up) - at(down)) / (2.0 * h as f64);
        assert!(
            (numeric - analytic[i]).abs() < 2e-3 * (1.0 + numeric.abs()),
            "coordinate {i}: autodiff {} vs finite difference {numeric}",
            analytic[i]
        );
    }
}
