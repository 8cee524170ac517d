//! The trained weights of a run directory, for the tests that compare two trainings
//! (tests/data_parallel.rs, tests/mpi.rs).
#![allow(dead_code)]

use burn::module::{Module, ModuleVisitor, Param};
use burn::tensor::backend::Backend;
use burn::tensor::Tensor;
use std::path::Path;

/// Every float parameter of a module, in visiting order.
struct Collect(Vec<f32>);

impl<B: Backend> ModuleVisitor<B> for Collect {
    fn visit_float<const D: usize>(&mut self, p: &Param<Tensor<B, D>>) {
        self.0.extend(
            p.val()
                .into_data()
                .convert::<f32>()
                .to_vec::<f32>()
                .unwrap(),
        );
    }
}

/// The trained weights of run `dir` (encoder, decoder, heads), in visiting order.
pub fn weights(dir: &Path) -> Vec<f32> {
    let files = harness_model::trained::run_files(dir).unwrap();
    let dev = Default::default();
    let (system, _, _) =
        harness_model::trained::load_system::<burn::backend::NdArray<f32>>(&files, &dev).unwrap();
    let mut c = Collect(Vec::new());
    system.visit(&mut c);
    c.0
}

/// `(max |a − b|, max(max |a|, 1))` over two runs' weights, printed; the runs must hold
/// as many weights.
pub fn max_difference(a: &Path, b: &Path) -> (f32, f32) {
    let (wa, wb) = (weights(a), weights(b));
    assert_eq!(wa.len(), wb.len());
    let scale = wa.iter().fold(0f32, |m, w| m.max(w.abs())).max(1.0);
    let diff = wa
        .iter()
        .zip(&wb)
        .fold(0f32, |m, (x, y)| m.max((x - y).abs()));
    eprintln!(
        "{} weights: max |w_a − w_b| = {diff:.3e} (max |w| {scale:.3})",
        wa.len()
    );
    (diff, scale)
}
