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
use std::ops::Range;

/// A seeded source of dropout masks. Forward passes take `Option<&mut Noise>`: `None`
/// means evaluation (no dropout).
#[derive(Debug, Clone)]
pub struct Noise {
    rng: ChaCha8Rng,
    /// While a pass encodes the rows of several separate passes at once ([`Noise::split`]):
    /// each part's rows and width and where its next mask starts in the stream.
    parts: Vec<Part>,
    /// Where the stream stands once every part has drawn what it declared (during a split).
    end: Option<u128>,
    /// Whether a mask was drawn during a split pass other than by [`Noise::dropout_on`], or
    /// over other rows than the split batch's.
    stray: bool,
}

/// One part of a split pass ([`Noise::split`]).
#[derive(Debug, Clone)]
struct Part {
    rows: Range<usize>,
    width: usize,
    /// The next word this part's masks take, and where its own pass would have stopped.
    pos: u128,
    stop: u128,
}

/// What one axis of a tensor that dropout masks holds, for a pass whose batch holds the rows
/// of several separate passes ([`Noise::split`]): the batch's rows, its time steps (padded to
/// the batch's width), or anything else (features, heads).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Axis {
    Rows,
    Time,
    Other,
}

impl Noise {
    /// The stream of `(seed, stream)`; training uses `stream = step`.
    pub fn new(seed: u64, stream: u64) -> Self {
        let mut rng = ChaCha8Rng::seed_from_u64(seed);
        rng.set_stream(stream);
        Noise {
            rng,
            parts: Vec::new(),
            end: None,
            stray: false,
        }
    }

    /// Makes the next pass draw its masks as separate passes over each part of its batch
    /// would, one after the other: `parts` gives, in the order those passes would run, each
    /// one's rows in the batch, its own padded width, and how many words of the stream its
    /// pass draws. Every mask of the pass must then be drawn by [`Noise::dropout_on`]; the
    /// masked positions beyond a part's width (its padding in the joint batch) are 0.
    /// [`Noise::join`] ends the split.
    pub fn split(&mut self, parts: &[(Range<usize>, usize, u64)]) {
        let mut pos = self.rng.get_word_pos();
        self.parts = parts
            .iter()
            .map(|(rows, width, words)| {
                let part = Part {
                    rows: rows.clone(),
                    width: *width,
                    pos,
                    stop: pos + u128::from(*words),
                };
                pos = part.stop;
                part
            })
            .collect();
        self.end = Some(pos);
    }

    /// Whether a split pass is under way ([`Noise::split`]).
    pub fn is_split(&self) -> bool {
        self.end.is_some()
    }

    /// Ends a split pass: the stream stands where the separate passes would have left it.
    /// `false` when a part drew other than the words it declared (a bug in the encoder's
    /// count, which would have given the parts other masks than their own passes').
    pub fn join(&mut self) -> bool {
        let exact = !self.stray && self.parts.iter().all(|p| p.pos == p.stop);
        self.parts.clear();
        self.stray = false;
        if let Some(end) = self.end.take() {
            self.rng.set_word_pos(end);
        }
        exact
    }

    /// [`Noise::dropout`] on `x`, whose axes hold what `axes` says: the same mask outside a
    /// split pass; in one, each part's mask as its own pass would draw it.
    pub fn dropout_on<B: Backend, const D: usize>(
        &mut self,
        x: Tensor<B, D>,
        p: f64,
        axes: [Axis; D],
    ) -> Tensor<B, D> {
        match self.mask_on::<B, D>(x.dims(), p, axes, &x.device()) {
            Some(mask) => x * mask,
            None => x,
        }
    }

    /// The mask [`Noise::dropout_on`] multiplies a tensor of shape `dims` by, drawn now and
    /// uploaded to `device` (`None` where `p ≤ 0`: nothing is drawn). What an encoder uses to
    /// upload a mask before the operations it multiplies (a GPU fuses the multiply with them).
    pub fn mask_on<B: Backend, const D: usize>(
        &mut self,
        dims: [usize; D],
        p: f64,
        axes: [Axis; D],
        device: &B::Device,
    ) -> Option<Tensor<B, D>> {
        if self.parts.is_empty() || p <= 0.0 {
            let mask = self.mask(dims.iter().product(), p)?;
            return Some(Tensor::from_data(TensorData::new(mask, dims), device));
        }
        let mut strides = [1usize; D];
        for a in (0..D.saturating_sub(1)).rev() {
            strides[a] = strides[a + 1] * dims[a + 1];
        }
        let mut mask = vec![0.0f32; dims.iter().product()];
        let mut parts = std::mem::take(&mut self.parts);
        for part in &mut parts {
            let own: [usize; D] = std::array::from_fn(|a| match axes[a] {
                Axis::Rows => part.rows.len(),
                Axis::Time => part.width.min(dims[a]),
                Axis::Other => dims[a],
            });
            let n: usize = own.iter().product();
            let fits = (0..D).all(|a| axes[a] != Axis::Rows || part.rows.end <= dims[a]);
            if !fits {
                // Not the split batch's rows: told apart by `join`, not drawn out of bounds.
                self.stray = true;
                continue;
            }
            if n == 0 {
                continue;
            }
            self.rng.set_word_pos(part.pos);
            let values = self.draw(n, p).expect("p > 0");
            part.pos += n as u128;
            // Run by run along the last axis (contiguous in the part's mask and the batch's).
            let at_of = |a: usize, i: usize| {
                let i = if axes[a] == Axis::Rows {
                    i + part.rows.start
                } else {
                    i
                };
                i * strides[a]
            };
            let last = D - 1;
            for (k, run) in values.chunks(own[last]).enumerate() {
                let (mut rest, mut at) = (k, at_of(last, 0));
                for a in (0..last).rev() {
                    at += at_of(a, rest % own[a]);
                    rest /= own[a];
                }
                mask[at..at + run.len()].copy_from_slice(run);
            }
        }
        self.parts = parts;
        Some(Tensor::from_data(TensorData::new(mask, dims), device))
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
        if !self.parts.is_empty() && p > 0.0 {
            self.stray = true;
        }
        self.draw(n, p)
    }

    /// [`Noise::mask`]'s draw.
    fn draw(&mut self, n: usize, p: f64) -> Option<Vec<f32>> {
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

/// [`Noise::dropout_on`] when `noise` is given (training), the identity otherwise.
pub fn dropout_on<B: Backend, const D: usize>(
    noise: &mut Option<&mut Noise>,
    x: Tensor<B, D>,
    p: f64,
    axes: [Axis; D],
) -> Tensor<B, D> {
    match noise {
        Some(n) => n.dropout_on(x, p, axes),
        None => x,
    }
}

/// [`dropout_on`] with its mask perhaps drawn ahead ([`mask_on`]): `Some(Some(mask))`
/// multiplies by it, `Some(None)` (drawn ahead, nothing drawn: no noise or `p ≤ 0`) leaves
/// `x` as it is, `None` draws here. What an encoder that uploads its masks before its
/// arithmetic on a GPU calls at each mask's site.
pub fn dropout_drawn<B: Backend, const D: usize>(
    noise: &mut Option<&mut Noise>,
    x: Tensor<B, D>,
    p: f64,
    axes: [Axis; D],
    drawn: Option<Option<Tensor<B, D>>>,
) -> Tensor<B, D> {
    match drawn {
        Some(Some(mask)) => x * mask,
        Some(None) => x,
        None => dropout_on(noise, x, p, axes),
    }
}

/// [`Noise::mask_on`] when `noise` is given (training), `None` otherwise.
pub fn mask_on<B: Backend, const D: usize>(
    noise: &mut Option<&mut Noise>,
    dims: [usize; D],
    p: f64,
    axes: [Axis; D],
    device: &B::Device,
) -> Option<Tensor<B, D>> {
    noise.as_mut()?.mask_on(dims, p, axes, device)
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

/// A tensor of `shape` drawn from U(−scale, scale) by one ChaCha stream of `seed`: the same
/// values on every backend and in every process (tests' and benchmarks' inputs, so that a
/// failure reproduces).
pub fn uniform_tensor<B: Backend, const D: usize>(
    shape: [usize; D],
    scale: f64,
    seed: u64,
    device: &B::Device,
) -> Tensor<B, D> {
    let mut draw = Uniform {
        rng: ChaCha8Rng::seed_from_u64(seed),
        scale: scale as f32,
    };
    draw.tensor(shape.into(), device)
}

struct Uniform {
    rng: ChaCha8Rng,
    scale: f32,
}

impl Uniform {
    fn tensor<B: Backend, const D: usize>(
        &mut self,
        shape: burn::tensor::Shape,
        device: &B::Device,
    ) -> Tensor<B, D> {
        let values: Vec<f32> = (0..shape.num_elements())
            .map(|_| self.rng.random_range(-self.scale..self.scale))
            .collect();
        Tensor::from_data(TensorData::new(values, shape), device)
    }
}

impl<B: Backend> ModuleMapper<B> for Uniform {
    fn map_float<const D: usize>(&mut self, param: Param<Tensor<B, D>>) -> Param<Tensor<B, D>> {
        replace_value(param, |t| self.tensor(t.shape(), &t.device()))
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
    fn a_split_pass_draws_each_parts_masks_as_its_own_pass() {
        let dev = Default::default();
        let ones = |dims: [usize; 3]| Tensor::<B, 3>::ones(dims, &dev);
        let values = |t: Tensor<B, 3>| t.into_data().to_vec::<f32>().unwrap();
        use Axis::{Other, Rows, Time};
        // Two passes of their own: 2 rows 3 wide, then 3 rows 5 wide; each masks a
        // batch-major [rows, time, 4] and a time-major [time, rows, 5].
        let mut own = Noise::new(4, 2);
        let passes: Vec<[Vec<f32>; 2]> = [(2, 3), (3, 5)]
            .map(|(rows, width)| {
                [
                    values(own.dropout(ones([rows, width, 4]), 0.3)),
                    values(own.dropout(ones([width, rows, 5]), 0.3)),
                ]
            })
            .into();
        let after = own.mask(7, 0.3);
        // One pass over the 5 rows, 5 wide.
        let mut joint = Noise::new(4, 2);
        joint.split(&[
            (0..2, 3, 2 * 3 * 4 + 3 * 2 * 5),
            (2..5, 5, 3 * 5 * 4 + 5 * 3 * 5),
        ]);
        let batch_major = values(joint.dropout_on(ones([5, 5, 4]), 0.3, [Rows, Time, Other]));
        let time_major = values(joint.dropout_on(ones([5, 5, 5]), 0.3, [Time, Rows, Other]));
        assert!(joint.join(), "each part drew what it declared");
        for (k, (rows, width)) in [(0..2usize, 3usize), (2..5, 5)].into_iter().enumerate() {
            let n = rows.len();
            for (r, row) in rows.clone().enumerate() {
                for t in 0..5 {
                    for f in 0..4 {
                        let want = if t < width {
                            passes[k][0][(r * width + t) * 4 + f]
                        } else {
                            0.0
                        };
                        assert_eq!(batch_major[(row * 5 + t) * 4 + f], want);
                    }
                    for f in 0..5 {
                        let want = if t < width {
                            passes[k][1][(t * n + r) * 5 + f]
                        } else {
                            0.0
                        };
                        assert_eq!(time_major[(t * 5 + row) * 5 + f], want);
                    }
                }
            }
        }
        assert_eq!(
            joint.mask(7, 0.3),
            after,
            "the stream goes on where the passes left it"
        );
        // A part that draws other than it declared, or a mask drawn past `dropout_on`, is
        // told apart.
        let mut wrong = Noise::new(4, 2);
        wrong.split(&[(0..2, 3, 24), (2..5, 5, 60)]);
        wrong.dropout_on(ones([5, 5, 4]), 0.3, [Rows, Time, Other]);
        wrong.dropout_on(ones([5, 5, 5]), 0.3, [Time, Rows, Other]);
        assert!(!wrong.join());
        let mut stray = Noise::new(4, 2);
        stray.split(&[(0..2, 3, 24), (2..5, 5, 60)]);
        stray.dropout_on(ones([5, 5, 4]), 0.3, [Rows, Time, Other]);
        stray.dropout(ones([2, 2, 2]), 0.3);
        assert!(!stray.join());
        let mut short = Noise::new(4, 2);
        short.split(&[(0..2, 3, 24), (2..5, 5, 60)]);
        short.dropout_on(ones([4, 5, 4]), 0.3, [Rows, Time, Other]);
        assert!(
            !short.join(),
            "a tensor of 4 rows is not the split batch of 5"
        );
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
