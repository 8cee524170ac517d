//! harness's own randomness for models: parameter initialisation and dropout masks drawn
//! from a seeded ChaCha stream on the host.
//!
//! Why not burn's: the backend RNG (`B::seed`) is one process-wide stream whose state
//! cannot be saved, and any other test or thread that draws from it shifts it. Exact resume
//! (a run killed after a checkpoint and resumed ends with the same weights) needs every
//! random draw of step `s` to depend on `(seed, s)` only; the same holds for tests that
//! compare two runs. Masks cost one host draw per element, a few milliseconds per step at
//! the sizes trained here.

use burn::module::{Module, ModuleMapper, Param};
use burn::tensor::backend::Backend;
use burn::tensor::{Tensor, TensorData};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

/// A seeded source of dropout masks. Forward passes take `Option<&mut Noise>`: `None`
/// means evaluation (no dropout).
#[derive(Debug, Clone)]
pub struct Noise {
    rng: ChaCha8Rng,
}

impl Noise {
    /// The stream of `(seed, stream)`; training uses `stream = step`.
    pub fn new(seed: u64, stream: u64) -> Self {
        let mut rng = ChaCha8Rng::seed_from_u64(seed);
        rng.set_stream(stream);
        Noise { rng }
    }

    /// Inverted dropout: zero each element with probability `p`, scale the rest by
    /// `1 / (1 - p)`.
    pub fn dropout<B: Backend, const D: usize>(&mut self, x: Tensor<B, D>, p: f64) -> Tensor<B, D> {
        let shape = x.shape();
        match self.mask(shape.num_elements(), p) {
            Some(mask) => {
                let mask = Tensor::<B, D>::from_data(TensorData::new(mask, shape), &x.device());
                x * mask
            }
            None => x,
        }
    }

    /// A uniform draw from `0..n` (`n` ≥ 1), from the same stream (random negatives).
    pub fn below(&mut self, n: usize) -> usize {
        self.rng.random_range(0..n.max(1))
    }

    /// The next `n` values of an inverted-dropout mask (`1 / (1 − p)` kept, 0 dropped), row
    /// major, as [`Noise::dropout`] draws them; `None` (nothing drawn) when `p ≤ 0`.
    pub fn mask(&mut self, n: usize, p: f64) -> Option<Vec<f32>> {
        if p <= 0.0 {
            return None;
        }
        let keep = (1.0 - p) as f32;
        let scale = 1.0 / keep;
        // The words `rng.random::<f32>()` would take one at a time, drawn in one block (the
        // same stream: ChaCha's `fill` hands out the same 32-bit words in the same order),
        // each turned into a float as rand does: the top 24 bits times 2⁻²⁴.
        let mut words = vec![0u32; n];
        self.rng.fill(&mut words[..]);
        Some(
            words
                .into_iter()
                .map(|w| {
                    if ((w >> 8) as f32) * (1.0 / (1u32 << 24) as f32) < keep {
                        scale
                    } else {
                        0.0
                    }
                })
                .collect(),
        )
    }
}

/// Applies dropout when `noise` is given (training), the identity otherwise.
pub fn dropout<B: Backend, const D: usize>(
    noise: &mut Option<&mut Noise>,
    x: Tensor<B, D>,
    p: f64,
) -> Tensor<B, D> {
    match noise {
        Some(n) => n.dropout(x, p),
        None => x,
    }
}

/// Re-initialises every float parameter of `module` from U(−scale, scale), drawn in the
/// module's visiting order from one ChaCha stream of `seed`: the same seed gives the same
/// weights on every backend and in every process. fairseq's LSTM models (which LASER was
/// trained with) initialise embeddings, LSTM and linear weights this way with scale 0.1.
pub fn init_uniform<B: Backend, M: Module<B>>(module: M, seed: u64, scale: f64) -> M {
    let mut mapper = Uniform {
        rng: ChaCha8Rng::seed_from_u64(seed),
        scale: scale as f32,
    };
    module.map(&mut mapper)
}

struct Uniform {
    rng: ChaCha8Rng,
    scale: f32,
}

impl<B: Backend> ModuleMapper<B> for Uniform {
    fn map_float<const D: usize>(&mut self, param: Param<Tensor<B, D>>) -> Param<Tensor<B, D>> {
        replace_value(param, |t| {
            let shape = t.shape();
            let values: Vec<f32> = (0..shape.num_elements())
                .map(|_| self.rng.random_range(-self.scale..self.scale))
                .collect();
            Tensor::from_data(TensorData::new(values, shape), &t.device())
        })
    }
}

/// `param` with the value `fresh(old)`, keeping its id and whether it takes gradients.
pub fn replace_value<B: Backend, const D: usize>(
    param: Param<Tensor<B, D>>,
    fresh: impl FnOnce(&Tensor<B, D>) -> Tensor<B, D>,
) -> Param<Tensor<B, D>> {
    let (id, tensor, mapper) = param.consume();
    let mut value = fresh(&tensor);
    if tensor.is_require_grad() {
        value = value.require_grad();
    }
    Param::from_mapped_value(id, value, mapper)
}

#[cfg(test)]
mod tests {
    use super::*;
    use burn::backend::NdArray;

    type B = NdArray<f32>;

    #[test]
    fn masks_drawn_in_blocks_equal_masks_drawn_one_at_a_time() {
        for (n, p) in [(1, 0.1), (7, 0.5), (1000, 0.1), (4099, 0.3)] {
            let mut a = Noise::new(3, 9);
            let mut b = Noise::new(3, 9);
            let keep = (1.0 - p) as f32;
            // Two masks in a row: the stream position after the first matches too.
            for _ in 0..2 {
                let one_by_one: Vec<f32> = (0..n)
                    .map(|_| {
                        if b.rng.random::<f32>() < keep {
                            1.0 / keep
                        } else {
                            0.0
                        }
                    })
                    .collect();
                assert_eq!(a.mask(n, p).unwrap(), one_by_one, "n {n}, p {p}");
            }
        }
    }

    #[test]
    fn dropout_streams_are_reproducible_and_scaled() {
        let dev = Default::default();
        let x = Tensor::<B, 2>::ones([50, 40], &dev);
        let a = Noise::new(7, 3).dropout(x.clone(), 0.25);
        let b = Noise::new(7, 3).dropout(x.clone(), 0.25);
        let c = Noise::new(7, 4).dropout(x.clone(), 0.25);
        let (a, b, c) = (
            a.into_data().to_vec::<f32>().unwrap(),
            b.into_data().to_vec::<f32>().unwrap(),
            c.into_data().to_vec::<f32>().unwrap(),
        );
        assert_eq!(a, b);
        assert_ne!(a, c);
        let kept = a.iter().filter(|&&v| v > 0.0).count() as f64 / a.len() as f64;
        assert!((kept - 0.75).abs() < 0.05, "{kept}");
        assert!(a.iter().all(|&v| v == 0.0 || (v - 1.0 / 0.75).abs() < 1e-6));
        let mut none: Option<&mut Noise> = None;
        let y = dropout(&mut none, x.clone(), 0.5);
        assert_eq!(y.into_data(), x.into_data());
    }

    #[test]
    fn uniform_init_is_seeded() {
        let dev = Default::default();
        let lin = || burn::nn::LinearConfig::new(4, 3).init::<B>(&dev);
        let a = init_uniform(lin(), 5, 0.1);
        let b = init_uniform(lin(), 5, 0.1);
        let wa = a.weight.val().into_data().to_vec::<f32>().unwrap();
        assert_eq!(wa, b.weight.val().into_data().to_vec::<f32>().unwrap());
        assert!(wa.iter().all(|v| v.abs() < 0.1));
        assert!(wa.iter().any(|v| v.abs() > 0.01));
    }
}
