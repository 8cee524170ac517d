//! One LSTM layer that honours a padding mask, in either direction.
//!
//! burn's `Lstm`/`BiLstm` take no lengths: on a right-padded batch the reverse direction
//! would read the padding first and start each sentence from a state polluted by it. Here
//! every step updates the state only where the mask is 1 (`h ← m·h' + (1−m)·h`), so
//! - the reverse direction keeps its zero initial state over the padding and effectively
//!   starts at each sentence's last real token;
//! - the forward direction's final state is the state at the last real token.
//!
//! Padding therefore changes no output at a real position (tested in `encoder/bilstm.rs`).
//!
//! The four gates are one fused projection (input → 4H and hidden → 4H): two matrix
//! products per step instead of burn's eight. Gate order in the fused weights: input, forget, cell, output
//! (PyTorch's order).

use crate::fused::lstm::{fused_layer, LayerInput};
use burn::config::Config;
use burn::module::Module;
use burn::nn::{Linear, LinearConfig};
use burn::tensor::activation::{sigmoid, tanh};
use burn::tensor::backend::Backend;
use burn::tensor::Tensor;

/// Configuration of a [`MaskedLstm`].
#[derive(Config, Debug)]
pub struct MaskedLstmConfig {
    /// Input features per step.
    pub d_input: usize,
    /// Hidden (and output) features.
    pub d_hidden: usize,
    /// Run from the last step to the first.
    #[config(default = false)]
    pub reverse: bool,
}

/// A single LSTM layer with a padding mask (see the module comment).
#[derive(Module, Debug)]
pub struct MaskedLstm<B: Backend> {
    /// Input → the four gates, with the gates' bias.
    pub input: Linear<B>,
    /// Previous hidden state → the four gates (no bias: `input` carries it).
    pub hidden: Linear<B>,
    /// Hidden size.
    pub d_hidden: usize,
    /// Direction.
    pub reverse: bool,
}

/// The recurrent state `(hidden, cell)`, each `[batch, d_hidden]`.
#[derive(Debug, Clone)]
pub struct State<B: Backend> {
    /// `h`.
    pub hidden: Tensor<B, 2>,
    /// `c`.
    pub cell: Tensor<B, 2>,
}

impl MaskedLstmConfig {
    /// Builds the layer (weights from burn's default initialiser; harness re-initialises
    /// whole models with [`crate::random::init_uniform`]).
    pub fn init<B: Backend>(&self, device: &B::Device) -> MaskedLstm<B> {
        MaskedLstm {
            input: LinearConfig::new(self.d_input, 4 * self.d_hidden).init(device),
            hidden: LinearConfig::new(self.d_hidden, 4 * self.d_hidden)
                .with_bias(false)
                .init(device),
            d_hidden: self.d_hidden,
            reverse: self.reverse,
        }
    }
}

impl<B: Backend> MaskedLstm<B> {
    /// Runs the layer over `x: [batch, time, d_input]` with `mask: [batch, time]` (1 for a
    /// real token, 0 for padding). `context: [batch, 4·d_hidden]` is added to every step's
    /// gate input (the decoder's constant sentence/language input, projected once).
    /// Returns every step's hidden state `[batch, time, d_hidden]` (at padded positions:
    /// the carried state, to be masked by the caller) and the final state.
    pub fn forward(
        &self,
        x: Tensor<B, 3>,
        mask: Tensor<B, 2>,
        context: Option<Tensor<B, 2>>,
        state: Option<State<B>>,
    ) -> (Tensor<B, 3>, State<B>) {
        let [batch, _, _] = x.dims();
        let (outs, state) = self.forward_steps(&split_steps(x), &split_mask(mask), context, state);
        (
            stack_steps(outs, batch, self.d_hidden, &state.hidden.device()),
            state,
        )
    }

    /// Runs the layer over time-major `x: [time, batch, d_input]` with `mask: [time, batch]`,
    /// `context: [batch, 4·d_hidden]` added to every step's gate input and an initial
    /// `state` (zeros when `None`). Returns every step's hidden state `[time, batch,
    /// d_hidden]` (at padded positions: the carried state, to be masked by the caller); the
    /// final states are its last step (forward) or its first (reverse).
    ///
    /// Every step's input projection is one product over all steps; the recurrence runs as
    /// one fused operation with its own backward pass on the CPU backend
    /// ([`crate::fused::lstm`]), as kernels of our own with their own backward pass on the GPU
    /// backends (`fused/lstm_cube.rs`, features `wgpu`/`cuda`), and step by step through burn's
    /// ops on any other backend.
    pub fn forward_tm(
        &self,
        x: Tensor<B, 3>,
        mask: Tensor<B, 2>,
        context: Option<Tensor<B, 2>>,
        state: Option<State<B>>,
    ) -> Tensor<B, 3> {
        let [time, batch, _] = x.dims();
        let h = self.d_hidden;
        let device = x.device();
        if time == 0 {
            return Tensor::zeros([0, batch, h], &device);
        }
        let State { hidden, cell } = state.unwrap_or_else(|| State {
            hidden: Tensor::zeros([batch, h], &device),
            cell: Tensor::zeros([batch, h], &device),
        });
        let input = LayerInput {
            x,
            w_ih: self.input.weight.val(),
            bias: self.input.bias.as_ref().map(|b| b.val()),
            context,
            w_hh: self.hidden.weight.val(),
            mask,
            h0: hidden,
            c0: cell,
        };
        let input = match fused_layer(input, self.reverse) {
            Ok(hs) => return hs,
            Err(input) => input,
        };
        #[cfg(any(feature = "wgpu", feature = "cuda"))]
        let input = match crate::fused::lstm_cube::cube_layer(input, self.reverse) {
            Ok(hs) => return hs,
            Err(input) => input,
        };
        self.steps_tm(input)
    }

    /// Both directions of a BiLSTM layer (`self` forward, `rev` reverse) over time-major
    /// `x` and `mask`, concatenated (`[time, batch, 2·d_hidden]`), as one operation: on the
    /// CPU backend's autodiff (training, [`crate::fused::bilstm`]) and in one recurrence on a
    /// GPU backend ([`crate::fused::lstm_cube`]); `None` on any other backend, where the
    /// caller runs the directions one after the other.
    pub fn forward_bi_tm(
        &self,
        rev: &MaskedLstm<B>,
        x: Tensor<B, 3>,
        mask: Tensor<B, 2>,
    ) -> Option<Tensor<B, 3>> {
        let [time, batch, _] = x.dims();
        if time == 0 || batch == 0 || self.d_hidden == 0 || self.d_hidden != rev.d_hidden {
            return None;
        }
        let input = crate::fused::lstm::BiInput {
            x,
            w_ih: [self.input.weight.val(), rev.input.weight.val()],
            bias: [
                self.input.bias.as_ref().map(|b| b.val()),
                rev.input.bias.as_ref().map(|b| b.val()),
            ],
            w_hh: [self.hidden.weight.val(), rev.hidden.weight.val()],
            mask,
        };
        let input = match crate::fused::bilstm::bi_layer(input) {
            Ok(out) => return Some(out),
            Err(input) => input,
        };
        #[cfg(any(feature = "wgpu", feature = "cuda"))]
        {
            crate::fused::lstm_cube::bi_layer(input)
        }
        #[cfg(not(any(feature = "wgpu", feature = "cuda")))]
        {
            drop(input);
            None
        }
    }

    /// The generic recurrence of [`MaskedLstm::forward_tm`], step by step.
    pub(crate) fn steps_tm(&self, input: LayerInput<B>) -> Tensor<B, 3> {
        let xw = input.projected();
        let LayerInput {
            w_hh, mask, h0, c0, ..
        } = input;
        let [time, batch, four_h] = xw.dims();
        let xs: Vec<Tensor<B, 2>> = (0..time)
            .map(|t| {
                xw.clone()
                    .slice([t..t + 1, 0..batch, 0..four_h])
                    .reshape([batch, four_h])
            })
            .collect();
        let masks: Vec<Tensor<B, 2>> = (0..time)
            .map(|t| mask.clone().slice([t..t + 1, 0..batch]).reshape([batch, 1]))
            .collect();
        let (mut hidden, mut cell) = (h0, c0);
        let mut outputs: Vec<Option<Tensor<B, 2>>> = vec![None; time];
        let steps: Vec<usize> = if self.reverse {
            (0..time).rev().collect()
        } else {
            (0..time).collect()
        };
        for t in steps {
            let g = xs[t].clone() + hidden.clone().matmul(w_hh.clone());
            let (h_new, c_new) = gates_step(g, cell.clone());
            let m = masks[t].clone();
            let keep = m.clone().neg().add_scalar(1.0);
            cell = c_new * m.clone() + cell * keep.clone();
            hidden = h_new * m + hidden * keep;
            outputs[t] = Some(hidden.clone());
        }
        Tensor::stack(outputs.into_iter().flatten().collect(), 0)
    }

    /// The same over per-step inputs `xs[t]: [batch, d_input]` and masks `masks[t]:
    /// [batch, 1]`, returning per-step outputs. Stacked layers pass these lists along
    /// instead of 3-D tensors: reading step `t` out of a `[batch, time, ·]` tensor costs, in
    /// burn's autodiff, a full-size gradient per step (O(time²) per layer; measured as most
    /// of a CPU training step when the gates were sliced that way).
    pub fn forward_steps(
        &self,
        xs: &[Tensor<B, 2>],
        masks: &[Tensor<B, 2>],
        context: Option<Tensor<B, 2>>,
        state: Option<State<B>>,
    ) -> (Vec<Tensor<B, 2>>, State<B>) {
        let time = xs.len();
        let (batch, device) = match xs.first() {
            Some(x) => (x.dims()[0], x.device()),
            None => match &state {
                Some(s) => (s.hidden.dims()[0], s.hidden.device()),
                None => (0, Default::default()),
            },
        };
        let State {
            mut hidden,
            mut cell,
        } = state.unwrap_or_else(|| State {
            hidden: Tensor::zeros([batch, self.d_hidden], &device),
            cell: Tensor::zeros([batch, self.d_hidden], &device),
        });
        let mut outputs: Vec<Option<Tensor<B, 2>>> = vec![None; time];
        let steps: Vec<usize> = if self.reverse {
            (0..time).rev().collect()
        } else {
            (0..time).collect()
        };
        for t in steps {
            // The input's product under mixed precision, the recurrent one in f32 (crate::precision).
            let mut g = crate::precision::linear(&self.input, xs[t].clone())
                + self.hidden.forward(hidden.clone());
            if let Some(ctx) = &context {
                g = g + ctx.clone();
            }
            let (hidden_new, cell_new) = gates_step(g, cell.clone());
            // m·new + (1−m)·old is exact for m ∈ {0, 1}: a real position sees exactly the
            // same arithmetic whether or not the batch is padded.
            let m = masks[t].clone();
            let keep = m.clone().neg().add_scalar(1.0);
            cell = cell_new * m.clone() + cell * keep.clone();
            hidden = hidden_new * m + hidden * keep;
            outputs[t] = Some(hidden.clone());
        }
        (
            outputs.into_iter().flatten().collect(),
            State { hidden, cell },
        )
    }
}

/// One step's update from the gate pre-activations `g: [batch, 4H]` (input, forget, cell,
/// output) and the previous cell state: the new `(hidden, cell)`.
fn gates_step<B: Backend>(g: Tensor<B, 2>, cell: Tensor<B, 2>) -> (Tensor<B, 2>, Tensor<B, 2>) {
    let mut parts = g.chunk(4, 1).into_iter();
    let (Some(i), Some(f), Some(c), Some(o)) =
        (parts.next(), parts.next(), parts.next(), parts.next())
    else {
        unreachable!("chunk(4) of a 4·d_hidden tensor gives four parts")
    };
    let cell_new = sigmoid(f) * cell + sigmoid(i) * tanh(c);
    let hidden_new = sigmoid(o) * tanh(cell_new.clone());
    (hidden_new, cell_new)
}

/// `[batch, time, d]` → `time` tensors `[batch, d]`.
pub fn split_steps<B: Backend>(x: Tensor<B, 3>) -> Vec<Tensor<B, 2>> {
    let [batch, time, d] = x.dims();
    (0..time)
        .map(|t| {
            x.clone()
                .slice([0..batch, t..t + 1, 0..d])
                .reshape([batch, d])
        })
        .collect()
}

/// `[batch, time]` → `time` masks `[batch, 1]`.
pub fn split_mask<B: Backend>(mask: Tensor<B, 2>) -> Vec<Tensor<B, 2>> {
    let [batch, time] = mask.dims();
    (0..time)
        .map(|t| mask.clone().slice([0..batch, t..t + 1]))
        .collect()
}

/// `time` tensors `[batch, d]` → `[batch, time, d]`.
pub fn stack_steps<B: Backend>(
    steps: Vec<Tensor<B, 2>>,
    batch: usize,
    d: usize,
    device: &B::Device,
) -> Tensor<B, 3> {
    if steps.is_empty() {
        Tensor::zeros([batch, 0, d], device)
    } else {
        Tensor::stack(steps, 1)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use burn::backend::NdArray;
    use burn::tensor::TensorData;

    type B = NdArray<f32>;

    /// A plain LSTM step by hand, to check the fused gates against the textbook equations.
    #[test]
    fn one_step_matches_the_lstm_equations() {
        let dev = Default::default();
        let layer =
            crate::random::init_uniform(MaskedLstmConfig::new(2, 1).init::<B>(&dev), 3, 0.5);
        let x = [0.3f32, -0.7];
        let w = layer
            .input
            .weight
            .val()
            .into_data()
            .to_vec::<f32>()
            .unwrap(); // [2, 4]
        let b = layer
            .input
            .bias
            .as_ref()
            .unwrap()
            .val()
            .into_data()
            .to_vec::<f32>()
            .unwrap();
        let pre: Vec<f32> = (0..4)
            .map(|k| x[0] * w[k] + x[1] * w[4 + k] + b[k])
            .collect();
        let s = |v: f32| 1.0 / (1.0 + (-v).exp());
        let c = s(pre[0]) * pre[2].tanh();
        let h = s(pre[3]) * c.tanh();
        let xt = Tensor::<B, 3>::from_data(TensorData::new(x.to_vec(), [1, 1, 2]), &dev);
        let (out, st) = layer.forward(xt, Tensor::ones([1, 1], &dev), None, None);
        let got = out.into_data().to_vec::<f32>().unwrap()[0];
        assert!((got - h).abs() < 1e-6, "{got} vs {h}");
        let gc = st.cell.into_data().to_vec::<f32>().unwrap()[0];
        assert!((gc - c).abs() < 1e-6);
    }

    #[test]
    fn masked_steps_keep_the_state() {
        let dev = Default::default();
        let layer = crate::random::init_uniform(
            MaskedLstmConfig::new(3, 4)
                .with_reverse(true)
                .init::<B>(&dev),
            1,
            0.3,
        );
        let x = crate::random::uniform_tensor::<B, 3>([1, 5, 3], 1.0, 101, &dev);
        let short = x.clone().slice([0..1, 0..3, 0..3]);
        let mask =
            Tensor::<B, 2>::from_data(TensorData::new(vec![1f32, 1., 1., 0., 0.], [1, 5]), &dev);
        let (padded, sp) = layer.forward(x, mask, None, None);
        let (plain, s) = layer.forward(short, Tensor::ones([1, 3], &dev), None, None);
        let a = padded
            .slice([0..1, 0..3, 0..4])
            .into_data()
            .to_vec::<f32>()
            .unwrap();
        assert_eq!(a, plain.into_data().to_vec::<f32>().unwrap());
        assert_eq!(
            sp.hidden.into_data().to_vec::<f32>().unwrap(),
            s.hidden.into_data().to_vec::<f32>().unwrap()
        );
    }
}

/// The GPU kernels (`fused/lstm_cube.rs`) against the generic step-by-step recurrence here.
#[cfg(all(test, feature = "wgpu"))]
mod cube_tests {
    use super::*;
    use crate::fused::lstm_cube::cube_layer;
    use crate::fused::lstm_whole::{forcing, Recurrence};
    use burn::backend::Autodiff;
    use burn::tensor::TensorData;

    type G = Autodiff<burn::backend::Wgpu<f32, i32>>;

    /// cubecl's caches in a temporary folder, not a `target/` beside this crate (its
    /// default).
    fn setup() {
        crate::gpu::configure(&std::env::temp_dir().join("harness-lstm-cube-cubecl"));
    }

    fn mask_of(lens: &[usize], time: usize) -> Tensor<G, 2> {
        let v: Vec<f32> = (0..time)
            .flat_map(|t| lens.iter().map(move |&l| if t < l { 1.0 } else { 0.0 }))
            .collect();
        Tensor::from_data(TensorData::new(v, [time, lens.len()]), &Default::default())
    }

    fn host<const D: usize>(t: Tensor<burn::backend::Wgpu<f32, i32>, D>) -> Vec<f32> {
        t.into_data().to_vec::<f32>().expect("f32 data")
    }

    /// The largest difference, checked against `tol` (absolute, scaled by the magnitude).
    fn close(a: Vec<f32>, b: Vec<f32>, tol: f32, what: &str) -> f32 {
        assert_eq!(a.len(), b.len(), "{what}");
        let mut worst = 0.0f32;
        for (i, (x, y)) in a.iter().zip(&b).enumerate() {
            let diff = (x - y).abs();
            assert!(diff <= tol * (1.0 + y.abs()), "{what}[{i}]: {x} vs {y}");
            worst = worst.max(diff);
        }
        println!("{what}: largest difference {worst:e}");
        worst
    }

    fn uniform<const D: usize>(shape: [usize; D], r: f64, seed: u64) -> Tensor<G, D> {
        crate::random::uniform_tensor(shape, r, seed, &Default::default())
    }

    fn layer(d_in: usize, h: usize, reverse: bool, seed: u64) -> MaskedLstm<G> {
        crate::random::init_uniform(
            MaskedLstmConfig::new(d_in, h)
                .with_reverse(reverse)
                .init::<G>(&Default::default()),
            seed,
            0.5,
        )
    }

    /// One direction through the cube kernels against the generic step-by-step layer
    /// on the same weights: outputs, and the gradients of a loss that reads every output,
    /// for both directions, padding of varying lengths, a context and initial states that
    /// take their own gradients.
    #[test]
    fn cube_layer_equals_the_generic_layer_with_gradients() {
        setup();
        let (time, batch, d_in, h) = (6, 5, 3, 4);
        let lens = [6, 2, 4, 1, 5];
        for (reverse, kind) in [false, true]
            .into_iter()
            .flat_map(|r| [(r, Recurrence::Whole), (r, Recurrence::Steps)])
        {
            let layer = layer(d_in, h, reverse, 7);
            let x = uniform([time, batch, d_in], 1.0, 11).require_grad();
            let ctx = uniform([batch, 4 * h], 0.5, 12).require_grad();
            let h0 = uniform([batch, h], 0.5, 13).require_grad();
            let c0 = uniform([batch, h], 0.5, 14).require_grad();
            let weights = uniform([time, batch, h], 1.0, 15);
            let mask = mask_of(&lens, time);
            let run = |cube: bool| {
                let input = LayerInput {
                    x: x.clone(),
                    w_ih: layer.input.weight.val(),
                    bias: layer.input.bias.as_ref().map(|b| b.val()),
                    context: Some(ctx.clone()),
                    w_hh: layer.hidden.weight.val(),
                    mask: mask.clone(),
                    h0: h0.clone(),
                    c0: c0.clone(),
                };
                let hs = if cube {
                    forcing(kind, || cube_layer(input, reverse).ok())
                        .expect("wgpu takes the cube path")
                } else {
                    layer.steps_tm(input)
                };
                let loss = (hs.clone() * weights.clone()).sum();
                let grads = loss.backward();
                let g = |t: &Tensor<G, 2>| host(t.grad(&grads).expect("a gradient"));
                let bias = layer.input.bias.as_ref().expect("a bias").val();
                vec![
                    host(hs.inner()),
                    host(x.grad(&grads).expect("dx")),
                    g(&ctx),
                    g(&h0),
                    g(&c0),
                    g(&layer.hidden.weight.val()),
                    g(&layer.input.weight.val()),
                    host(bias.grad(&grads).expect("dbias")),
                ]
            };
            let a = run(true);
            let b = run(false);
            let names = [
                "outputs", "dx", "dcontext", "dh0", "dc0", "dW_hh", "dW_ih", "dbias",
            ];
            for ((a, b), name) in a.into_iter().zip(b).zip(names) {
                close(a, b, 1e-5, &format!("{name} (reverse {reverse}, {kind:?})"));
            }
        }
    }

    /// What the BiLSTM tests compare, in this order.
    const BI_NAMES: [&str; 8] = [
        "outputs",
        "dx",
        "dW_hh fwd",
        "dW_ih fwd",
        "dbias fwd",
        "dW_hh rev",
        "dW_ih rev",
        "dbias rev",
    ];

    /// A BiLSTM layer's outputs `out` and the gradients of `Σ out · weights` ([`BI_NAMES`]).
    fn bi_results(
        fwd: &MaskedLstm<G>,
        rev: &MaskedLstm<G>,
        x: &Tensor<G, 3>,
        out: Tensor<G, 3>,
        weights: &Tensor<G, 3>,
    ) -> Vec<Vec<f32>> {
        let loss = (out.clone() * weights.clone()).sum();
        let grads = loss.backward();
        let mut got = vec![host(out.inner()), host(x.grad(&grads).expect("dx"))];
        for l in [fwd, rev] {
            got.push(host(l.hidden.weight.val().grad(&grads).expect("dW_hh")));
            got.push(host(l.input.weight.val().grad(&grads).expect("dW_ih")));
            let bias = l.input.bias.as_ref().expect("a bias").val();
            got.push(host(bias.grad(&grads).expect("dbias")));
        }
        got
    }

    /// Both directions of a BiLSTM layer in one recurrence against the two generic layers
    /// run one after the other and concatenated: outputs and every weight's gradient.
    #[test]
    fn bi_layer_equals_two_generic_layers_with_gradients() {
        setup();
        let (time, batch, d_in, h) = (7, 4, 3, 5);
        let lens = [7, 3, 1, 5];
        let fwd = layer(d_in, h, false, 11);
        let rev = layer(d_in, h, true, 12);
        let x = uniform([time, batch, d_in], 1.0, 16).require_grad();
        let weights = uniform([time, batch, 2 * h], 1.0, 17);
        let mask = mask_of(&lens, time);
        let run = |cube: Option<Recurrence>| {
            let out = if let Some(kind) = cube {
                forcing(kind, || fwd.forward_bi_tm(&rev, x.clone(), mask.clone()))
                    .expect("wgpu takes the cube path")
            } else {
                let input = |l: &MaskedLstm<G>| LayerInput {
                    x: x.clone(),
                    w_ih: l.input.weight.val(),
                    bias: l.input.bias.as_ref().map(|b| b.val()),
                    context: None,
                    w_hh: l.hidden.weight.val(),
                    mask: mask.clone(),
                    h0: Tensor::zeros([batch, h], &Default::default()),
                    c0: Tensor::zeros([batch, h], &Default::default()),
                };
                Tensor::cat(
                    vec![fwd.steps_tm(input(&fwd)), rev.steps_tm(input(&rev))],
                    2,
                )
            };
            bi_results(&fwd, &rev, &x, out, &weights)
        };
        let b = run(None);
        for kind in [Recurrence::Whole, Recurrence::Steps] {
            let a = run(Some(kind));
            for ((a, b), name) in a.into_iter().zip(b.clone()).zip(BI_NAMES) {
                close(a, b, 1e-5, &format!("{name} ({kind:?})"));
            }
        }
    }

    /// The whole recurrence in one launch against the step-by-step kernels at sizes where a
    /// cube carries several rows (150 rows of two directions: four a cube, where a device
    /// that does not say how many cubes run at once is taken to run 64), the last cube's
    /// rows run past the batch and a unit owns more than one hidden unit (300 > 256 units a
    /// cube): outputs and every gradient of a BiLSTM layer.
    #[test]
    fn whole_recurrence_equals_the_step_kernels_across_tiles() {
        setup();
        let (time, batch, d_in, h) = (5, 150, 6, 300);
        let lens: Vec<usize> = (0..batch).map(|b| 1 + (b * 7) % time).collect();
        let fwd = layer(d_in, h, false, 21);
        let rev = layer(d_in, h, true, 22);
        let x = uniform([time, batch, d_in], 1.0, 18).require_grad();
        let weights = uniform([time, batch, 2 * h], 1.0, 19);
        let mask = mask_of(&lens, time);
        let run = |kind: Recurrence| {
            let out = forcing(kind, || fwd.forward_bi_tm(&rev, x.clone(), mask.clone()))
                .expect("wgpu takes the cube path");
            bi_results(&fwd, &rev, &x, out, &weights)
        };
        let a = run(Recurrence::Whole);
        let b = run(Recurrence::Steps);
        for ((a, b), name) in a.into_iter().zip(b).zip(BI_NAMES) {
            close(a, b, 1e-4, name);
        }
    }

    /// Inference (no autodiff) takes the kernels too, with the generic layer's outputs.
    #[test]
    fn inference_equals_the_generic_layer() {
        type P = burn::backend::Wgpu<f32, i32>;
        setup();
        let dev = Default::default();
        let layer = crate::random::init_uniform(
            MaskedLstmConfig::new(3, 4)
                .with_reverse(true)
                .init::<P>(&dev),
            3,
            0.5,
        );
        let x = crate::random::uniform_tensor::<P, 3>([7, 3, 3], 1.0, 102, &dev);
        let v: Vec<f32> = (0..7)
            .flat_map(|t| [7, 3, 5].map(|l| if t < l { 1.0 } else { 0.0 }))
            .collect();
        let mask = Tensor::<P, 2>::from_data(TensorData::new(v, [7, 3]), &dev);
        let input = || LayerInput {
            x: x.clone(),
            w_ih: layer.input.weight.val(),
            bias: layer.input.bias.as_ref().map(|b| b.val()),
            context: None,
            w_hh: layer.hidden.weight.val(),
            mask: mask.clone(),
            h0: Tensor::zeros([3, 4], &dev),
            c0: Tensor::zeros([3, 4], &dev),
        };
        let cube = cube_layer(input(), true)
            .ok()
            .expect("wgpu takes the cube path");
        close(host(cube), host(layer.steps_tm(input())), 1e-5, "outputs");
    }
}
