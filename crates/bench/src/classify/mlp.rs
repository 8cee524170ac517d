//! A softmax classifier with any number of hidden layers (none: multinomial logistic
//! regression), trained by minibatch Adam on cross-entropy, as PyTorch would train an
//! `nn.Sequential` of `nn.Linear`, activation and `nn.Dropout` modules.
//!
//! - Initialisation is PyTorch's `nn.Linear` default (Kaiming-uniform with `a = √5`): weights
//!   and biases uniform in `±1/√fan_in`.
//! - Adam follows `torch.optim.Adam` (β = (0.9, 0.999), ε = 1e-8, weight decay added to the
//!   gradient as an L2 penalty on every parameter, biases included, `amsgrad = False`).
//! - Dropout is inverted dropout (kept units scaled by `1/(1−p)`), active only in training.
//! - An epoch is one pass over a fresh random permutation of the training rows, in batches of
//!   `batch_size` (the last one smaller). The learning rate of epoch `e` (from 0) is
//!   `lr · lr_decay^e` (PyTorch's `ExponentialLR` stepped once per epoch).
//! - After every `eval_every` epochs the model is scored on the dev set; [`Selection`] says
//!   which model is kept and when to stop.
//!
//! Random streams (ChaCha8, one seed, one stream each): initialisation, epoch shuffles and
//! dropout masks draw from separate streams, so the initial weights do not depend on the data.
//!
//! Examples of the protocols' settings:
//! - SentEval LogReg / MLP: see [`super::senteval::SentEvalClassifier`].
//! - LASER XNLI: `MlpSpec::laser(&[512, 384], Activation::Tanh, dropout)`, Adam, the epoch of
//!   best dev accuracy: `Selection::BestOnDev { ties: TieBreak::Last, tenacity: None }`.
//! - MLDoc: `MlpSpec::laser(&[10, 8], Activation::Tanh, 0.2)`, same selection.
//! - Sentiment transfer: `MlpSpec::laser(&[512], Activation::Tanh, 0.0)`, `lr 5e-4`,
//!   `lr_decay 0.9`, `batch_size 16`, `epochs 20`.

use super::{argmax, gemm, invalid, ClassifyError};
use harness_embed::matrix::Matrix;
use harness_kernels::{gemm_packed, gemm_packed_rows, PackedB};
use rand::seq::SliceRandom;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use rayon::prelude::*;
use serde::{Deserialize, Serialize};

pub(crate) const STREAM_INIT: u64 = 0;
pub(crate) const STREAM_SHUFFLE: u64 = 1;
pub(crate) const STREAM_DROPOUT: u64 = 2;
pub(crate) const STREAM_SPLIT: u64 = 3;
pub(crate) const STREAM_FOLDS: u64 = 4;

/// The ChaCha8 generator of `stream` under `seed`.
pub(crate) fn seeded_rng(seed: u64, stream: u64) -> ChaCha8Rng {
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    rng.set_stream(stream);
    rng
}

/// Hidden-layer non-linearity.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Activation {
    Tanh,
    Sigmoid,
    Relu,
}

impl Activation {
    /// The scalar reference of [`Activation::apply_slice`].
    #[cfg(test)]
    fn apply(self, v: f32) -> f32 {
        match self {
            Activation::Tanh => v.tanh(),
            Activation::Sigmoid => 1.0 / (1.0 + (-v).exp()),
            Activation::Relu => v.max(0.0),
        }
    }

    /// [`Activation::apply`] over a slice, in place: tanh and sigmoid through the vectorised
    /// kernels (scalar libm calls were a third of an MLP epoch), within 3e-7 of libm.
    fn apply_slice(self, xs: &mut [f32]) {
        match self {
            Activation::Tanh => harness_kernels::tanh(xs),
            Activation::Sigmoid => harness_kernels::sigmoid(xs),
            Activation::Relu => xs.iter_mut().for_each(|v| *v = v.max(0.0)),
        }
    }

    /// The derivative, written in terms of the activation's output `a`.
    fn derivative_from_output(self, a: f32) -> f32 {
        match self {
            Activation::Tanh => 1.0 - a * a,
            Activation::Sigmoid => a * (1.0 - a),
            Activation::Relu => {
                if a > 0.0 {
                    1.0
                } else {
                    0.0
                }
            }
        }
    }
}

/// Where a hidden layer's dropout sits.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum DropoutAt {
    /// `Linear → Dropout → act` (SentEval's MLP).
    BeforeActivation,
    /// `Linear → act → Dropout` (LASER's `Net`).
    AfterActivation,
}

/// The shape of the network: `[input dropout] → (Linear → act, dropout)* → Linear`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct MlpSpec {
    /// Hidden layer sizes; empty for logistic regression.
    pub hidden: Vec<usize>,
    pub activation: Activation,
    /// Dropout probability on every hidden layer.
    pub dropout: f32,
    pub dropout_at: DropoutAt,
    /// Dropout probability on the input features.
    pub input_dropout: f32,
}

impl MlpSpec {
    /// Multinomial logistic regression: one `Linear`.
    pub fn logreg() -> Self {
        MlpSpec {
            hidden: Vec::new(),
            activation: Activation::Sigmoid,
            dropout: 0.0,
            dropout_at: DropoutAt::BeforeActivation,
            input_dropout: 0.0,
        }
    }

    /// SentEval's `MLP`: `nhid = 0` is LogReg, otherwise
    /// `Linear(d, nhid) → Dropout(p) → Sigmoid → Linear(nhid, C)`.
    pub fn senteval(nhid: usize, dropout: f32) -> Self {
        if nhid == 0 {
            return Self::logreg();
        }
        MlpSpec {
            hidden: vec![nhid],
            activation: Activation::Sigmoid,
            dropout,
            dropout_at: DropoutAt::BeforeActivation,
            input_dropout: 0.0,
        }
    }

    /// LASER's `Net(nhid, dropout, activation)`: with a non-empty `nhid`, dropout on the
    /// input, then `Linear → act → Dropout` for each positive size, then the output `Linear`;
    /// with an empty `nhid`, one `Linear` and no dropout.
    pub fn laser(nhid: &[usize], activation: Activation, dropout: f32) -> Self {
        MlpSpec {
            hidden: nhid.iter().copied().filter(|&h| h > 0).collect(),
            activation,
            dropout,
            dropout_at: DropoutAt::AfterActivation,
            input_dropout: if nhid.is_empty() { 0.0 } else { dropout },
        }
    }
}

#[derive(Debug, Clone, PartialEq)]
struct Layer {
    n_in: usize,
    n_out: usize,
    /// Offset of the `n_out × n_in` row-major weight in `Mlp::params`.
    w: usize,
    /// Offset of the `n_out` bias.
    b: usize,
}

/// A trained (or freshly initialised) network. Parameters live in one flat vector: for each
/// layer, its weight (`out × in`, row-major, as PyTorch's `Linear.weight`), then its bias.
#[derive(Debug, Clone, PartialEq)]
pub struct Mlp {
    spec: MlpSpec,
    n_in: usize,
    n_classes: usize,
    layers: Vec<Layer>,
    params: Vec<f32>,
}

/// What a training forward pass keeps for the backward pass.
struct Trace {
    /// The input of each layer (after dropout); the first is empty when `rows` is set.
    inputs: Vec<Matrix>,
    /// The batch's rows of the data, when the first layer read them in place (see
    /// [`Mlp::reads_rows_in_place`]) instead of from a gathered `inputs[0]`.
    rows: Option<Vec<usize>>,
    /// Per hidden layer: the activation output before an after-activation dropout
    /// (`None` when it equals the next layer's input).
    acts: Vec<Option<Matrix>>,
    /// Per hidden layer: dropout scale factors (0 or 1/(1−p)), if any.
    masks: Vec<Option<Vec<f32>>>,
    logits: Matrix,
}

const EVAL_CHUNK: usize = 2048;

/// Layers with at most this many outputs run their products through
/// `harness_kernels::narrow` (dot products read in place) instead of the packing GEMM.
const NARROW_OUT: usize = 16;

impl Mlp {
    /// A network initialised as PyTorch's `nn.Linear` does, from `seed`.
    pub fn new(spec: &MlpSpec, n_in: usize, n_classes: usize, seed: u64) -> Self {
        let mut sizes = vec![n_in];
        sizes.extend(&spec.hidden);
        sizes.push(n_classes);
        let mut layers = Vec::new();
        let mut offset = 0;
        for pair in sizes.windows(2) {
            let (n_in, n_out) = (pair[0], pair[1]);
            layers.push(Layer {
                n_in,
                n_out,
                w: offset,
                b: offset + n_in * n_out,
            });
            offset += n_in * n_out + n_out;
        }
        let mut rng = seeded_rng(seed, STREAM_INIT);
        let mut params = vec![0.0f32; offset];
        for layer in &layers {
            let bound = 1.0 / (layer.n_in.max(1) as f32).sqrt();
            for p in &mut params[layer.w..layer.b + layer.n_out] {
                *p = (2.0 * rng.random::<f32>() - 1.0) * bound;
            }
        }
        Mlp {
            spec: spec.clone(),
            n_in,
            n_classes,
            layers,
            params,
        }
    }

    pub fn spec(&self) -> &MlpSpec {
        &self.spec
    }

    pub fn n_in(&self) -> usize {
        self.n_in
    }

    pub fn n_classes(&self) -> usize {
        self.n_classes
    }

    /// All parameters (see the type's documentation for the layout).
    pub fn params(&self) -> &[f32] {
        &self.params
    }

    pub fn params_mut(&mut self) -> &mut [f32] {
        &mut self.params
    }

    /// Weight (`out × in`, row-major) and bias of layer `l` (0 is the first).
    pub fn layer(&self, l: usize) -> (&[f32], &[f32]) {
        let layer = &self.layers[l];
        (
            &self.params[layer.w..layer.b],
            &self.params[layer.b..layer.b + layer.n_out],
        )
    }

    /// `input · Wᵀ + b` for layer `l`.
    fn linear(&self, l: usize, input: &Matrix) -> Matrix {
        let layer = &self.layers[l];
        let bias = &self.params[layer.b..layer.b + layer.n_out];
        let mut out = Matrix::zeros(input.rows, layer.n_out);
        for r in 0..input.rows {
            out.row_mut(r).copy_from_slice(bias);
        }
        if layer.n_out <= NARROW_OUT {
            harness_kernels::narrow::add_a_wt(
                input.rows,
                layer.n_out,
                layer.n_in,
                &input.data,
                &self.params[layer.w..layer.b],
                &mut out.data,
            );
            return out;
        }
        // Only the weights are packed (a tile per thread at a time) and the rows are read in
        // place; the general GEMM packed both operands on every call.
        harness_kernels::gemm_w(
            input.rows,
            layer.n_out,
            layer.n_in,
            &input.data,
            &self.params[layer.w..layer.b],
            true,
            &mut out.data,
        );
        out
    }

    /// `x[rows] · Wᵀ + b` for the first layer, the rows read in place: the transposed
    /// weights packed once for the batch, then a register-blocked product over row pointers
    /// (`harness_kernels::gemm_packed_rows`).
    fn linear_rows(&self, x: &Matrix, rows: &[usize]) -> Matrix {
        let layer = &self.layers[0];
        let bias = &self.params[layer.b..layer.b + layer.n_out];
        let mut out = Matrix::zeros(rows.len(), layer.n_out);
        for r in 0..rows.len() {
            out.row_mut(r).copy_from_slice(bias);
        }
        let w = PackedB::new(
            layer.n_in,
            layer.n_out,
            &self.params[layer.w..layer.b],
            true,
        );
        gemm_packed_rows(&x.data, rows, &w, &mut out.data);
        out
    }

    /// Whether a training step reads the batch's rows of the data in place rather than
    /// gathering them: the first layer is wide (a narrow one reads its gathered input with
    /// dot products) and no input dropout has to make a modified copy. A SentEval MLP's
    /// step gathered 64 rows of 512 floats, then the GEMM packed them again for the forward
    /// product and for the weight gradient (measured: the gather alone was 14 % of its
    /// training time).
    fn reads_rows_in_place(&self, dropout_on: bool) -> bool {
        self.layers[0].n_out > NARROW_OUT && !(dropout_on && self.spec.input_dropout > 0.0)
    }

    /// Class scores (no dropout: evaluation mode), `rows × n_classes`.
    pub fn logits(&self, x: &Matrix) -> Matrix {
        assert_eq!(x.cols, self.n_in, "Mlp::logits: wrong feature dimension");
        let mut out = Matrix::zeros(x.rows, self.n_classes);
        for start in (0..x.rows).step_by(EVAL_CHUNK) {
            let end = (start + EVAL_CHUNK).min(x.rows);
            let mut h = Matrix::from_vec(
                end - start,
                x.cols,
                x.data[start * x.cols..end * x.cols].to_vec(),
            );
            for l in 0..self.layers.len() {
                let mut z = self.linear(l, &h);
                if l + 1 < self.layers.len() {
                    self.spec.activation.apply_slice(&mut z.data);
                }
                h = z;
            }
            out.data[start * self.n_classes..end * self.n_classes].copy_from_slice(&h.data);
        }
        out
    }

    /// The predicted class of each row (the first on ties).
    pub fn predict(&self, x: &Matrix) -> Vec<usize> {
        let logits = self.logits(x);
        (0..logits.rows).map(|r| argmax(logits.row(r))).collect()
    }

    /// Fraction of rows predicted correctly.
    pub fn accuracy(&self, x: &Matrix, y: &[usize]) -> f64 {
        super::accuracy(&self.predict(x), y)
    }

    /// The training-mode forward pass over rows `rows` of `x`, which it gathers (with the
    /// input dropout in the same pass) or, with `in_place` where
    /// [`Mlp::reads_rows_in_place`] allows, multiplies where they are.
    fn forward_train(
        &self,
        x: &Matrix,
        rows: &[usize],
        mut dropout: Option<&mut ChaCha8Rng>,
        in_place: bool,
    ) -> Trace {
        let in_place = in_place && self.reads_rows_in_place(dropout.is_some());
        let mut input = if in_place {
            Matrix::zeros(0, x.cols)
        } else {
            let input_dropout = dropout
                .as_deref_mut()
                .map(|rng| (self.spec.input_dropout, rng));
            gather_rows(x, rows, input_dropout)
        };
        let n_layers = self.layers.len();
        let mut inputs = Vec::with_capacity(n_layers);
        let mut acts = Vec::with_capacity(n_layers - 1);
        let mut masks = Vec::with_capacity(n_layers - 1);
        for l in 0..n_layers {
            let mut z = if l == 0 && in_place {
                self.linear_rows(x, rows)
            } else {
                self.linear(l, &input)
            };
            inputs.push(input);
            if l + 1 == n_layers {
                return Trace {
                    inputs,
                    rows: in_place.then(|| rows.to_vec()),
                    acts,
                    masks,
                    logits: z,
                };
            }
            let act = self.spec.activation;
            let mask = match dropout.as_deref_mut() {
                Some(rng) if self.spec.dropout > 0.0 => {
                    Some(dropout_mask(z.data.len(), self.spec.dropout, rng))
                }
                _ => None,
            };
            match (&mask, self.spec.dropout_at) {
                (Some(mask), DropoutAt::BeforeActivation) => {
                    z.data.iter_mut().zip(mask).for_each(|(v, m)| *v *= m);
                    act.apply_slice(&mut z.data);
                    acts.push(None);
                    input = z;
                }
                (Some(mask), DropoutAt::AfterActivation) => {
                    act.apply_slice(&mut z.data);
                    let mut out = z.clone();
                    out.data.iter_mut().zip(mask).for_each(|(v, m)| *v *= m);
                    acts.push(Some(z));
                    input = out;
                }
                (None, _) => {
                    act.apply_slice(&mut z.data);
                    acts.push(None);
                    input = z;
                }
            }
            masks.push(mask);
        }
        unreachable!("a network has at least one layer")
    }

    /// Gradient of `scale · Σ CE` given the trace of rows of `x`; `grad` is overwritten.
    fn backward(&self, trace: Trace, x: &Matrix, y: &[usize], scale: f32, grad: &mut [f32]) -> f64 {
        let Trace {
            inputs,
            rows,
            acts,
            masks,
            logits,
        } = trace;
        let (loss_sum, mut delta) = softmax_cross_entropy(logits, y, scale);
        let batch = delta.rows;
        for l in (0..self.layers.len()).rev() {
            let layer = &self.layers[l];
            let input = &inputs[l];
            let narrow = layer.n_out <= NARROW_OUT;
            if let (0, Some(rows)) = (l, &rows) {
                // `Dᵀ · x[rows]`: the rows packed straight from the data as the right operand.
                let mut dt = vec![0.0f32; layer.n_out * batch];
                for (r, d) in delta.data.chunks_exact(layer.n_out).enumerate() {
                    for (o, &v) in d.iter().enumerate() {
                        dt[o * batch + r] = v;
                    }
                }
                let g = &mut grad[layer.w..layer.b];
                g.fill(0.0);
                gemm_packed(
                    layer.n_out,
                    &dt,
                    &PackedB::from_rows(&x.data, layer.n_in, rows),
                    g,
                );
            } else if narrow {
                harness_kernels::narrow::dt_a(
                    batch,
                    layer.n_out,
                    layer.n_in,
                    &delta.data,
                    &input.data,
                    &mut grad[layer.w..layer.b],
                );
            } else {
                gemm(
                    layer.n_out,
                    layer.n_in,
                    batch,
                    1.0,
                    &delta.data,
                    true,
                    &input.data,
                    false,
                    0.0,
                    &mut grad[layer.w..layer.b],
                );
            }
            let db = &mut grad[layer.b..layer.b + layer.n_out];
            db.iter_mut().for_each(|v| *v = 0.0);
            for r in 0..batch {
                db.iter_mut().zip(delta.row(r)).for_each(|(g, d)| *g += d);
            }
            if l == 0 {
                break;
            }
            // Gradient w.r.t. this layer's input, the output of hidden layer l-1.
            let mut dinput = Matrix::zeros(batch, layer.n_in);
            if narrow {
                harness_kernels::narrow::d_w(
                    batch,
                    layer.n_out,
                    layer.n_in,
                    &delta.data,
                    &self.params[layer.w..layer.b],
                    &mut dinput.data,
                );
            } else {
                // `D · W`, W (`n_out × n_in`) read as stored.
                harness_kernels::gemm_w(
                    batch,
                    layer.n_in,
                    layer.n_out,
                    &delta.data,
                    &self.params[layer.w..layer.b],
                    false,
                    &mut dinput.data,
                );
            }
            let a = acts[l - 1].as_ref().unwrap_or(input);
            let act = self.spec.activation;
            dinput
                .data
                .iter_mut()
                .zip(&a.data)
                .for_each(|(d, &a)| *d *= act.derivative_from_output(a));
            if let Some(mask) = &masks[l - 1] {
                dinput.data.iter_mut().zip(mask).for_each(|(d, m)| *d *= m);
            }
            delta = dinput;
        }
        loss_sum
    }

    /// Cross-entropy loss (summed or averaged over rows, no penalty) and its gradient with
    /// respect to [`Mlp::params`]. With `dropout` the pass is in training mode, masks drawn
    /// from that generator; without, dropout is off.
    pub fn loss_and_gradient(
        &self,
        x: &Matrix,
        y: &[usize],
        reduction: Reduction,
        dropout: Option<&mut ChaCha8Rng>,
    ) -> (f64, Vec<f32>) {
        let mut grad = vec![0.0f32; self.params.len()];
        let scale = reduction.scale(y.len());
        let rows: Vec<usize> = (0..x.rows).collect();
        let trace = self.forward_train(x, &rows, dropout, true);
        let loss_sum = self.backward(trace, x, y, scale, &mut grad);
        let loss = match reduction {
            Reduction::Sum => loss_sum,
            Reduction::Mean => loss_sum / y.len().max(1) as f64,
        };
        (loss, grad)
    }
}

/// Rows `rows` of `x` gathered into a new matrix. With `dropout = (p, rng)` and `p > 0`,
/// inverted dropout is applied in the same pass: the draws and values of multiplying the
/// gathered matrix by [`dropout_mask`], without the mask's allocation and second pass.
fn gather_rows(x: &Matrix, rows: &[usize], dropout: Option<(f32, &mut ChaCha8Rng)>) -> Matrix {
    let Some((p, rng)) = dropout.filter(|(p, _)| *p > 0.0) else {
        return x.select_rows(rows);
    };
    let (keep, threshold) = dropout_threshold(p);
    let mut words = vec![0u16; rows.len() * x.cols];
    rng.fill(&mut words[..]);
    let mut data = Vec::with_capacity(rows.len() * x.cols);
    for (&i, words) in rows.iter().zip(words.chunks_exact(x.cols.max(1))) {
        data.extend(
            x.row(i)
                .iter()
                .zip(words)
                .map(|(&v, &u)| v * if u < threshold { 0.0 } else { keep }),
        );
    }
    Matrix::from_vec(rows.len(), x.cols, data)
}

/// Inverted dropout's kept-unit scale `1/(1−p)` and the 16-bit threshold of [`dropout_mask`].
fn dropout_threshold(p: f32) -> (f32, u16) {
    let keep = 1.0 / (1.0 - p);
    // p < 1, so ⌈p·2¹⁶⌉ ≤ 2¹⁶ − 1 for every f32 below 1 except those within 2⁻¹⁶ of it,
    // which saturate (the unit is then always dropped but for one word in 65,536).
    let threshold = (p as f64 * 65536.0).ceil().min(u16::MAX as f64) as u16;
    (keep, threshold)
}

/// Inverted-dropout scale factors: 0 with probability `p`, else `1/(1−p)`.
///
/// One 16-bit word per element from one bulk fill, dropped when `u < ⌈p·2¹⁶⌉`: a drop rate
/// within 2⁻¹⁶ above `p` (PyTorch's CPU dropout compares a 24-bit uniform float; the
/// difference, at most 1.5e-5, is far below any effect dropout's rate has). Half the
/// generator's work of a 32-bit word per element: the random stream was a fifth of SIB-200's
/// classifier time.
fn dropout_mask(len: usize, p: f32, rng: &mut ChaCha8Rng) -> Vec<f32> {
    let (keep, threshold) = dropout_threshold(p);
    let mut words = vec![0u16; len];
    rng.fill(&mut words[..]);
    words
        .iter()
        .map(|&u| if u < threshold { 0.0 } else { keep })
        .collect()
}

/// Summed cross-entropy of the rows (f64) and `scale · (softmax − onehot)`.
fn softmax_cross_entropy(mut logits: Matrix, y: &[usize], scale: f32) -> (f64, Matrix) {
    let cols = logits.cols;
    let loss = softmax_cross_entropy_rows(&mut logits.data, cols, y.iter().copied(), scale);
    (loss, logits)
}

/// [`softmax_cross_entropy`] in place on row-major `cols`-wide rows, one label per row.
fn softmax_cross_entropy_rows(
    logits: &mut [f32],
    cols: usize,
    labels: impl Iterator<Item = usize>,
    scale: f32,
) -> f64 {
    let mut loss = 0.0f64;
    for (row, label) in logits.chunks_exact_mut(cols).zip(labels) {
        let max = row.iter().copied().fold(f32::NEG_INFINITY, f32::max);
        let mut sum = 0.0f64;
        for v in row.iter_mut() {
            let e = ((*v - max) as f64).exp();
            sum += e;
            *v = e as f32;
        }
        loss += sum.ln() - ((row[label] as f64).ln());
        let inv = (1.0 / sum) as f32;
        for v in row.iter_mut() {
            *v *= inv * scale;
        }
        row[label] -= scale;
    }
    loss
}

/// Which implementation of the gradient [`train`] uses.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kernel {
    /// The logistic-regression kernel where it applies, else the generic one.
    Auto,
    /// Gather the batch, then forward and backward through [`gemm`] (any network): the
    /// reference for the logistic-regression kernel and for reading rows in place.
    #[cfg_attr(not(test), allow(dead_code))] // the reference the tests compare against
    Generic,
}

/// Whether the logistic-regression kernel computes this network: one `Linear`, no dropout.
fn logreg_kernel_applies(spec: &MlpSpec) -> bool {
    spec.hidden.is_empty() && spec.input_dropout == 0.0
}

/// The gradient of `scale · Σ CE` of multinomial logistic regression over rows `batch` of
/// `x` (into `grad`, overwritten), and the summed loss: the generic forward and backward
/// passes computed row by row straight from `x`, without gathering the batch, packing
/// operands or allocating. A SentEval fit is thousands of 64-row steps of a `C × d` linear
/// layer, where GEMM's packing dominated. Equal to the generic path up to the order of the
/// additions in the dot products (the same sums, differently associated).
///
/// On x86-64 with AVX2 the same code is compiled for 256-bit vectors (chosen at run time);
/// its results are bit-identical to the baseline build's (see [`dot`]).
fn logreg_gradient(
    model: &Mlp,
    x: &Matrix,
    y: &[usize],
    batch: &[usize],
    scale: f32,
    grad: &mut [f32],
    logits: &mut Vec<f32>,
) -> f64 {
    #[cfg(target_arch = "x86_64")]
    if harness_kernels::isa::isa() >= harness_kernels::isa::Isa::Avx2 {
        // SAFETY: the CPU supports AVX2 (`isa` checks it).
        return unsafe { logreg_gradient_avx2(model, x, y, batch, scale, grad, logits) };
    }
    logreg_gradient_body(
        model,
        x,
        y,
        batch,
        scale,
        grad,
        logits,
        harness_kernels::dot,
    )
}

/// [`logreg_gradient_body`] compiled for AVX2, with [`harness_kernels::dot_avx2`] as its dot
/// product (the same bits as the portable build).
///
/// # Safety
/// The CPU must support AVX2 (`dot_avx2`'s own contract; the rest is safe code).
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
unsafe fn logreg_gradient_avx2(
    model: &Mlp,
    x: &Matrix,
    y: &[usize],
    batch: &[usize],
    scale: f32,
    grad: &mut [f32],
    logits: &mut Vec<f32>,
) -> f64 {
    // SAFETY: dot_avx2 needs AVX2 only, which this function's contract guarantees (the
    // closure is called only from within it).
    let dot = |a: &[f32], b: &[f32]| unsafe { harness_kernels::dot_avx2(a, b) };
    logreg_gradient_body(model, x, y, batch, scale, grad, logits, dot)
}

#[inline(always)]
#[allow(clippy::too_many_arguments)]
fn logreg_gradient_body(
    model: &Mlp,
    x: &Matrix,
    y: &[usize],
    batch: &[usize],
    scale: f32,
    grad: &mut [f32],
    logits: &mut Vec<f32>,
    dot: impl Fn(&[f32], &[f32]) -> f32,
) -> f64 {
    let (k, d) = (model.n_classes, model.n_in);
    let (w, b) = model.params.split_at(k * d);
    logits.clear();
    for &i in batch {
        let xi = x.row(i);
        for c in 0..k {
            logits.push(b[c] + dot(&w[c * d..(c + 1) * d], xi));
        }
    }
    let loss = softmax_cross_entropy_rows(logits, k, batch.iter().map(|&i| y[i]), scale);
    let (gw, gb) = grad.split_at_mut(k * d);
    gw.fill(0.0);
    gb.fill(0.0);
    for (&i, delta) in batch.iter().zip(logits.chunks_exact(k)) {
        let xi = x.row(i);
        for c in 0..k {
            harness_kernels::axpy(delta[c], xi, &mut gw[c * d..(c + 1) * d]);
            gb[c] += delta[c];
        }
    }
    loss
}

/// How the per-row losses of a batch are combined.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Reduction {
    /// PyTorch's default `reduction='mean'` (LASER).
    Mean,
    /// `reduction='sum'` (SentEval's `size_average = False`, with the PyTorch of its time).
    Sum,
}

impl Reduction {
    fn scale(self, batch: usize) -> f32 {
        match self {
            Reduction::Mean => 1.0 / batch.max(1) as f32,
            Reduction::Sum => 1.0,
        }
    }
}

/// Which of two equally good dev scores wins.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum TieBreak {
    /// Keep the earlier model: a new model must be strictly better (SentEval: `>`).
    First,
    /// Take the later model (LASER: `>=`).
    Last,
}

/// Which model training returns.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Selection {
    /// The model after the last epoch.
    Last,
    /// The model of best dev accuracy among the evaluations. With `tenacity: Some(t)`,
    /// SentEval's early stop: a counter, never reset, counts evaluations that do not improve;
    /// training stops at a non-improving evaluation when the counter already reached `t`
    /// (so at the `t+1`-th non-improving evaluation).
    BestOnDev {
        ties: TieBreak,
        tenacity: Option<usize>,
    },
}

/// Optimisation settings.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TrainConfig {
    pub lr: f32,
    pub betas: (f32, f32),
    pub eps: f32,
    /// PyTorch Adam's `weight_decay`: `wd · θ` added to every parameter's gradient.
    pub weight_decay: f32,
    /// Learning-rate factor per epoch (1 = constant).
    pub lr_decay: f32,
    pub batch_size: usize,
    /// Maximum number of passes over the training data.
    pub epochs: usize,
    /// Evaluate on dev (and apply [`Selection`]) after every this many epochs, and after the
    /// last one.
    pub eval_every: usize,
    pub reduction: Reduction,
    pub selection: Selection,
    pub seed: u64,
}

impl Default for TrainConfig {
    fn default() -> Self {
        TrainConfig {
            lr: 1e-3,
            betas: (0.9, 0.999),
            eps: 1e-8,
            weight_decay: 0.0,
            lr_decay: 1.0,
            batch_size: 64,
            epochs: 10,
            eval_every: 1,
            reduction: Reduction::Mean,
            selection: Selection::Last,
            seed: 0,
        }
    }
}

/// What happened during training.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TrainReport {
    /// Passes over the training data done.
    pub epochs_run: usize,
    /// Mean per-row training loss (no penalty, dropout on) of each epoch.
    pub train_loss: Vec<f64>,
    /// `(epochs done, dev accuracy)` at each evaluation.
    pub dev_accuracy: Vec<(usize, f64)>,
    /// Epochs done when the returned model was taken.
    pub best_epoch: usize,
    /// Dev accuracy of the returned model, if there was a dev set and an evaluation.
    pub best_dev_accuracy: Option<f64>,
    pub stopped_early: bool,
}

/// PyTorch's Adam, elementwise over the flat parameter vector.
struct Adam {
    m: Vec<f32>,
    v: Vec<f32>,
    t: i32,
    betas: (f32, f32),
    eps: f32,
    weight_decay: f32,
}

const ADAM_CHUNK: usize = 1 << 15;

/// Rows × epochs from which a training shows a progress bar.
const PROGRESS_ROW_EPOCHS: usize = 500_000;

impl Adam {
    fn new(n: usize, cfg: &TrainConfig) -> Self {
        Adam {
            m: vec![0.0; n],
            v: vec![0.0; n],
            t: 0,
            betas: cfg.betas,
            eps: cfg.eps,
            weight_decay: cfg.weight_decay,
        }
    }

    fn step(&mut self, params: &mut [f32], grad: &[f32], lr: f32) {
        self.t += 1;
        let (b1, b2) = self.betas;
        let bias1 = 1.0 - (b1 as f64).powi(self.t);
        let bias2 = 1.0 - (b2 as f64).powi(self.t);
        let step = (lr as f64 / bias1) as f32;
        let bias2_sqrt = bias2.sqrt() as f32;
        let s = harness_kernels::AdamStep {
            beta1: b1,
            beta2: b2,
            eps: self.eps,
            weight_decay: self.weight_decay,
            step_size: step,
            bias2_sqrt,
        };
        // The same arithmetic, in the same order, as PyTorch's Adam (`harness_kernels::adam`).
        let update = |p: &mut [f32], m: &mut [f32], v: &mut [f32], g: &[f32]| {
            harness_kernels::adam(p, m, v, g, s)
        };
        if params.len() <= ADAM_CHUNK {
            update(params, &mut self.m, &mut self.v, grad);
        } else {
            params
                .par_chunks_mut(ADAM_CHUNK)
                .zip(self.m.par_chunks_mut(ADAM_CHUNK))
                .zip(self.v.par_chunks_mut(ADAM_CHUNK))
                .zip(grad.par_chunks(ADAM_CHUNK))
                .for_each(|(((p, m), v), g)| update(p, m, v, g));
        }
    }
}

fn check_data(x: &Matrix, y: &[usize], n_classes: usize, what: &str) -> Result<(), ClassifyError> {
    if x.rows != y.len() {
        return invalid(format!("{what}: {} rows but {} labels", x.rows, y.len()));
    }
    if let Some(&bad) = y.iter().find(|&&c| c >= n_classes) {
        return invalid(format!("{what}: label {bad} with {n_classes} classes"));
    }
    Ok(())
}

/// Trains a network of shape `spec` on `(x, y)` (labels `0..n_classes`), evaluating on `dev`
/// as [`TrainConfig::eval_every`] says; returns the model chosen by [`TrainConfig::selection`].
///
/// Logistic regression without input dropout trains through a dedicated kernel (see
/// `logreg_gradient`): the same algorithm and random streams as the generic path, results
/// equal up to float rounding.
pub fn train(
    spec: &MlpSpec,
    cfg: &TrainConfig,
    x: &Matrix,
    y: &[usize],
    n_classes: usize,
    dev: Option<(&Matrix, &[usize])>,
) -> Result<(Mlp, TrainReport), ClassifyError> {
    train_with(spec, cfg, x, y, n_classes, dev, Kernel::Auto)
}

fn train_with(
    spec: &MlpSpec,
    cfg: &TrainConfig,
    x: &Matrix,
    y: &[usize],
    n_classes: usize,
    dev: Option<(&Matrix, &[usize])>,
    kernel: Kernel,
) -> Result<(Mlp, TrainReport), ClassifyError> {
    check_training(spec, cfg, x, y, n_classes, dev)?;

    let mut model = Mlp::new(spec, x.cols, n_classes, cfg.seed);
    let mut adam = Adam::new(model.params.len(), cfg);
    let mut grad = vec![0.0f32; model.params.len()];
    // The logistic-regression kernel draws no dropout masks, as the generic path draws none
    // for this network: both consume the same random streams.
    let fast = kernel == Kernel::Auto && logreg_kernel_applies(spec);
    let mut buf = Vec::with_capacity(cfg.batch_size * n_classes);
    let mut shuffle_rng = seeded_rng(cfg.seed, STREAM_SHUFFLE);
    let mut dropout_rng = seeded_rng(cfg.seed, STREAM_DROPOUT);
    let mut report = TrainReport {
        epochs_run: 0,
        train_loss: Vec::new(),
        dev_accuracy: Vec::new(),
        best_epoch: 0,
        best_dev_accuracy: None,
        stopped_early: false,
    };
    let mut selected = DevSelection {
        best: -1.0,
        best_params: None,
        non_improving: 0,
    };

    // Long trainings (XNLI's 200 epochs over ~24k pairs) show their epochs; the many small
    // ones (SentEval's folds, SIB-200) would only flood the terminal.
    let progress = if x.rows * cfg.epochs >= PROGRESS_ROW_EPOCHS {
        harness_core::progress::bar(
            cfg.epochs as u64,
            "classifier [{bar:30}] epoch {pos}/{len} {msg} ETA {eta}",
        )
    } else {
        harness_core::progress::Bar::hidden()
    };
    let mut epoch = 0;
    while epoch < cfg.epochs {
        let block = cfg.eval_every.min(cfg.epochs - epoch);
        for _ in 0..block {
            let lr = cfg.lr * cfg.lr_decay.powi(epoch as i32);
            let mut order: Vec<usize> = (0..x.rows).collect();
            order.shuffle(&mut shuffle_rng);
            let mut loss_sum = 0.0;
            for batch in order.chunks(cfg.batch_size) {
                let scale = cfg.reduction.scale(batch.len());
                if fast {
                    loss_sum += logreg_gradient(&model, x, y, batch, scale, &mut grad, &mut buf);
                } else {
                    let yb: Vec<usize> = batch.iter().map(|&i| y[i]).collect();
                    let in_place = kernel == Kernel::Auto;
                    let trace = model.forward_train(x, batch, Some(&mut dropout_rng), in_place);
                    loss_sum += model.backward(trace, x, &yb, scale, &mut grad);
                }
                adam.step(&mut model.params, &grad, lr);
            }
            epoch += 1;
            report.train_loss.push(loss_sum / x.rows as f64);
            progress.inc(1);
        }
        report.epochs_run = epoch;
        let Some((dx, dy)) = dev else { continue };
        let acc = model.accuracy(dx, dy);
        progress.set_message(format!("dev {:.2}", 100.0 * acc));
        report.dev_accuracy.push((epoch, acc));
        if selected.observe(cfg.selection, epoch, acc, &model.params, &mut report) {
            break;
        }
    }
    progress.finish_and_clear();
    match cfg.selection {
        Selection::Last => report.best_epoch = report.epochs_run,
        Selection::BestOnDev { .. } => {
            if let Some(p) = selected.best_params {
                model.params = p;
            }
        }
    }
    Ok((model, report))
}

/// Refuses training data, dev data or settings the trainer cannot use.
fn check_training(
    spec: &MlpSpec,
    cfg: &TrainConfig,
    x: &Matrix,
    y: &[usize],
    n_classes: usize,
    dev: Option<(&Matrix, &[usize])>,
) -> Result<(), ClassifyError> {
    check_data(x, y, n_classes, "training data")?;
    if x.rows == 0 {
        return invalid("no training rows");
    }
    if n_classes < 2 {
        return invalid("a classifier needs at least two classes");
    }
    if cfg.batch_size == 0 || cfg.eval_every == 0 {
        return invalid("batch_size and eval_every must be positive");
    }
    for p in [spec.dropout, spec.input_dropout] {
        if !(0.0..1.0).contains(&p) {
            return invalid(format!("dropout {p} is outside [0, 1)"));
        }
    }
    if let Some((dx, dy)) = dev {
        check_data(dx, dy, n_classes, "dev data")?;
        if dx.cols != x.cols {
            return invalid("dev and training features differ in dimension");
        }
    } else if matches!(cfg.selection, Selection::BestOnDev { .. }) {
        return invalid("selection on dev needs dev data");
    }
    Ok(())
}

/// The choice of epoch on dev accuracy: the best so far, its parameters, and how many
/// evaluations since it did not improve.
struct DevSelection {
    best: f64,
    best_params: Option<Vec<f32>>,
    non_improving: usize,
}

impl DevSelection {
    /// Records the dev accuracy `acc` after `epoch` under `selection`; `true` when
    /// training stops early (tenacity spent).
    fn observe(
        &mut self,
        selection: Selection,
        epoch: usize,
        acc: f64,
        params: &[f32],
        report: &mut TrainReport,
    ) -> bool {
        match selection {
            Selection::Last => {
                report.best_epoch = epoch;
                report.best_dev_accuracy = Some(acc);
            }
            Selection::BestOnDev { ties, tenacity } => {
                let improved = match ties {
                    TieBreak::First => acc > self.best,
                    TieBreak::Last => acc >= self.best,
                };
                if improved {
                    self.best = acc;
                    self.best_params = Some(params.to_vec());
                    report.best_epoch = epoch;
                    report.best_dev_accuracy = Some(acc);
                } else if let Some(t) = tenacity {
                    if self.non_improving >= t {
                        report.stopped_early = true;
                        return true;
                    }
                    self.non_improving += 1;
                }
            }
        }
        false
    }
}

#[cfg(test)]
#[allow(clippy::needless_range_loop)] // index-heavy reference computations
mod tests {
    use super::*;

    /// Two Gaussian-ish blobs per class on a circle, deterministic.
    pub(crate) fn blobs(
        n_per_class: usize,
        n_classes: usize,
        spread: f32,
        seed: u64,
    ) -> (Matrix, Vec<usize>) {
        let mut rng = seeded_rng(seed, 99);
        let mut rows = Vec::new();
        let mut y = Vec::new();
        for i in 0..n_per_class * n_classes {
            let c = i % n_classes;
            let angle = c as f32 * std::f32::consts::TAU / n_classes as f32;
            let noise = |rng: &mut ChaCha8Rng| (rng.random::<f32>() - 0.5) * 2.0 * spread;
            rows.push(vec![
                3.0 * angle.cos() + noise(&mut rng),
                3.0 * angle.sin() + noise(&mut rng),
            ]);
            y.push(c);
        }
        (Matrix::from_rows(&rows, 2), y)
    }

    #[test]
    fn init_matches_pytorch_linear_bounds() {
        let m = Mlp::new(&MlpSpec::senteval(7, 0.0), 16, 3, 5);
        let (w0, b0) = m.layer(0);
        assert_eq!((w0.len(), b0.len()), (7 * 16, 7));
        assert!(w0.iter().chain(b0).all(|v| v.abs() <= 0.25));
        let (w1, _) = m.layer(1);
        let bound = 1.0 / 7f32.sqrt();
        assert!(w1.iter().all(|v| v.abs() <= bound));
        // Uses the range: not all tiny.
        assert!(w0.iter().any(|v| v.abs() > 0.2));
    }

    #[test]
    fn separable_blobs_are_learnt_perfectly_by_logreg_and_mlp() {
        let (x, y) = blobs(40, 3, 0.8, 1);
        let (tx, ty) = blobs(40, 3, 0.8, 2);
        for spec in [
            MlpSpec::logreg(),
            MlpSpec::senteval(16, 0.1),
            MlpSpec::laser(&[12, 8], Activation::Tanh, 0.1),
            MlpSpec::laser(&[12], Activation::Relu, 0.0),
        ] {
            let cfg = TrainConfig {
                lr: 0.02,
                epochs: 60,
                batch_size: 16,
                seed: 3,
                ..TrainConfig::default()
            };
            let (model, report) = train(&spec, &cfg, &x, &y, 3, Some((&tx, &ty))).unwrap();
            assert_eq!(model.accuracy(&x, &y), 1.0, "{spec:?}");
            assert_eq!(model.accuracy(&tx, &ty), 1.0, "{spec:?}");
            assert!(report.train_loss.last().unwrap() < &report.train_loss[0]);
        }
    }

    /// Central finite differences in f64 of the f32 loss, checked against the backward pass.
    fn gradient_check(spec: MlpSpec, reduction: Reduction, dropout_seed: Option<u64>) {
        let (x, y) = blobs(4, 3, 1.5, 7);
        let x = Matrix::from_vec(x.rows, 2, x.data.iter().map(|v| v / 3.0).collect());
        let model = Mlp::new(&spec, 2, 3, 11);
        let rng = dropout_seed.map(|s| seeded_rng(s, STREAM_DROPOUT));
        let eval = |m: &Mlp| m.loss_and_gradient(&x, &y, reduction, rng.clone().as_mut());
        let (_, grad) = eval(&model);
        let h = 1e-2f32;
        let mut worst = 0.0f64;
        for i in 0..model.params.len() {
            let mut plus = model.clone();
            plus.params[i] += h;
            let mut minus = model.clone();
            minus.params[i] -= h;
            let numeric = (eval(&plus).0 - eval(&minus).0) / (2.0 * h as f64);
            let err = (numeric - grad[i] as f64).abs() / (1e-2 + numeric.abs());
            worst = worst.max(err);
        }
        assert!(worst < 2e-3, "{spec:?}: worst relative error {worst}");
    }

    #[test]
    fn the_dropout_mask_drops_at_its_rate_from_16_bit_words() {
        for p in [0.1f32, 0.2, 0.3, 0.5] {
            let mut rng = seeded_rng(7, STREAM_DROPOUT);
            let keep = 1.0 / (1.0 - p);
            let n = 200_000;
            let mask = dropout_mask(n, p, &mut rng);
            // The drop rate must be within 5 standard deviations of p.
            let dropped = mask.iter().filter(|&&m| m == 0.0).count() as f64 / n as f64;
            let sd = (p as f64 * (1.0 - p as f64) / n as f64).sqrt();
            assert!(
                (dropped - p as f64).abs() < 5.0 * sd,
                "p = {p}: rate {dropped}"
            );
            assert!(mask.iter().all(|&m| m == 0.0 || m == keep));
        }
        // The same seed gives the same mask; a saturated threshold stays below 2¹⁶.
        let mut a = seeded_rng(7, STREAM_DROPOUT);
        let mut b = seeded_rng(7, STREAM_DROPOUT);
        assert_eq!(
            dropout_mask(999, 0.3, &mut a),
            dropout_mask(999, 0.3, &mut b)
        );
        assert_eq!(dropout_threshold(0.999_999_9).1, u16::MAX);
    }

    #[test]
    fn the_fused_gather_applies_the_bulk_mask() {
        let (x, _) = wide_blobs(20, 3, 37, 5);
        let rows = [7, 0, 59, 7, 31];
        for p in [0.0, 0.2, 0.5] {
            let mut a = seeded_rng(3, STREAM_DROPOUT);
            let mut b = seeded_rng(3, STREAM_DROPOUT);
            let got = gather_rows(&x, &rows, Some((p, &mut a)));
            let mut want = x.select_rows(&rows);
            if p > 0.0 {
                let mask = dropout_mask(want.data.len(), p, &mut b);
                want.data.iter_mut().zip(&mask).for_each(|(v, m)| *v *= m);
            }
            let bits = |m: &Matrix| m.data.iter().map(|v| v.to_bits()).collect::<Vec<_>>();
            assert_eq!(bits(&got), bits(&want), "p = {p}");
            // Both consumed the same words: the next draw agrees.
            assert_eq!(a.random::<u32>(), b.random::<u32>(), "p = {p}");
        }
    }

    #[test]
    fn vectorised_activations_match_the_scalar_ones() {
        let xs: Vec<f32> = (-2000..2000).map(|i| i as f32 * 0.01).collect();
        for act in [Activation::Tanh, Activation::Sigmoid, Activation::Relu] {
            let mut got = xs.clone();
            act.apply_slice(&mut got);
            for (x, g) in xs.iter().zip(&got) {
                assert!((act.apply(*x) - g).abs() < 3e-7, "{act:?}({x})");
            }
        }
    }

    #[test]
    fn backward_pass_matches_finite_differences() {
        gradient_check(MlpSpec::logreg(), Reduction::Mean, None);
        gradient_check(MlpSpec::senteval(5, 0.0), Reduction::Sum, None);
        gradient_check(MlpSpec::senteval(5, 0.3), Reduction::Mean, Some(4));
        gradient_check(
            MlpSpec::laser(&[6, 4], Activation::Tanh, 0.25),
            Reduction::Mean,
            Some(9),
        );
        gradient_check(
            MlpSpec::laser(&[6, 4], Activation::Sigmoid, 0.0),
            Reduction::Sum,
            None,
        );
    }

    /// Minimises `mean CE + (λ/2)‖θ‖²` of multinomial logistic regression by Newton's method
    /// in f64; returns the parameters in `Mlp`'s layout (weight `K × D`, then bias).
    fn newton_logreg(x: &Matrix, y: &[usize], k: usize, lambda: f64) -> (Vec<f64>, f64) {
        let (n, d) = (x.rows, x.cols);
        let dp = d + 1; // features with a constant 1 for the bias
        let np = k * dp;
        let feat = |i: usize, j: usize| if j < d { x.row(i)[j] as f64 } else { 1.0 };
        let mut theta = vec![0.0f64; np]; // theta[c * dp + j]
        let objective = |theta: &[f64]| {
            let mut loss = 0.0;
            for i in 0..n {
                let s: Vec<f64> = (0..k)
                    .map(|c| (0..dp).map(|j| theta[c * dp + j] * feat(i, j)).sum())
                    .collect();
                let max = s.iter().cloned().fold(f64::MIN, f64::max);
                let lse = max + s.iter().map(|v| (v - max).exp()).sum::<f64>().ln();
                loss += lse - s[y[i]];
            }
            loss / n as f64 + 0.5 * lambda * theta.iter().map(|t| t * t).sum::<f64>()
        };
        for _ in 0..50 {
            let mut g = vec![0.0; np];
            let mut hess = vec![0.0; np * np];
            for i in 0..n {
                let s: Vec<f64> = (0..k)
                    .map(|c| (0..dp).map(|j| theta[c * dp + j] * feat(i, j)).sum())
                    .collect();
                let max = s.iter().cloned().fold(f64::MIN, f64::max);
                let e: Vec<f64> = s.iter().map(|v| (v - max).exp()).collect();
                let z: f64 = e.iter().sum();
                let p: Vec<f64> = e.iter().map(|v| v / z).collect();
                for c in 0..k {
                    let r = p[c] - if y[i] == c { 1.0 } else { 0.0 };
                    for j in 0..dp {
                        g[c * dp + j] += r * feat(i, j) / n as f64;
                        for c2 in 0..k {
                            let w = p[c] * (if c == c2 { 1.0 } else { 0.0 } - p[c2]);
                            for j2 in 0..dp {
                                hess[(c * dp + j) * np + c2 * dp + j2] +=
                                    w * feat(i, j) * feat(i, j2) / n as f64;
                            }
                        }
                    }
                }
            }
            for a in 0..np {
                g[a] += lambda * theta[a];
                hess[a * np + a] += lambda;
            }
            // Solve hess · step = g by Gaussian elimination with partial pivoting.
            let mut aug: Vec<Vec<f64>> = (0..np)
                .map(|r| {
                    let mut row = hess[r * np..(r + 1) * np].to_vec();
                    row.push(g[r]);
                    row
                })
                .collect();
            for col in 0..np {
                let piv = (col..np)
                    .max_by(|&a, &b| aug[a][col].abs().total_cmp(&aug[b][col].abs()))
                    .unwrap();
                aug.swap(col, piv);
                for r in 0..np {
                    if r != col {
                        let f = aug[r][col] / aug[col][col];
                        for c in col..=np {
                            aug[r][c] -= f * aug[col][c];
                        }
                    }
                }
            }
            for a in 0..np {
                theta[a] -= aug[a][np] / aug[a][a];
            }
        }
        // Reorder to Mlp's layout: weight rows (class c: d entries), then the k biases.
        let mut out = vec![0.0; np];
        for c in 0..k {
            for j in 0..d {
                out[c * d + j] = theta[c * dp + j];
            }
            out[k * d + c] = theta[c * dp + d];
        }
        (out, objective(&theta))
    }

    #[test]
    fn logreg_reaches_the_newton_optimum_of_the_l2_penalised_loss() {
        // Overlapping classes, so the optimum is finite and away from zero.
        let (x, y) = blobs(20, 3, 3.5, 21);
        let lambda = 0.05f32;
        let (want, want_obj) = newton_logreg(&x, &y, 3, lambda as f64);
        let cfg = TrainConfig {
            lr: 0.05,
            lr_decay: 0.997,
            weight_decay: lambda,
            batch_size: x.rows, // full batch: deterministic gradient
            epochs: 3000,
            reduction: Reduction::Mean,
            seed: 1,
            ..TrainConfig::default()
        };
        let (model, _) = train(&MlpSpec::logreg(), &cfg, &x, &y, 3, None).unwrap();
        let (loss, _) = model.loss_and_gradient(&x, &y, Reduction::Mean, None);
        let penalty: f64 = model
            .params()
            .iter()
            .map(|&p| 0.5 * lambda as f64 * (p as f64).powi(2))
            .sum();
        let got_obj = loss + penalty;
        assert!(
            (got_obj - want_obj).abs() < 1e-5,
            "objective {got_obj} vs Newton {want_obj}"
        );
        for (g, w) in model.params().iter().zip(&want) {
            assert!(
                (*g as f64 - w).abs() < 2e-3,
                "params {:?} vs Newton {want:?}",
                model.params()
            );
        }
        assert!(want.iter().any(|w| w.abs() > 0.1));
    }

    #[test]
    fn the_same_seed_gives_bit_identical_models_and_another_seed_does_not() {
        let (x, y) = blobs(30, 2, 2.5, 5);
        let (dx, dy) = blobs(10, 2, 2.5, 6);
        let spec = MlpSpec::senteval(8, 0.2);
        let cfg = |seed| TrainConfig {
            epochs: 12,
            eval_every: 3,
            batch_size: 7,
            seed,
            selection: Selection::BestOnDev {
                ties: TieBreak::First,
                tenacity: Some(2),
            },
            ..TrainConfig::default()
        };
        let a = train(&spec, &cfg(4), &x, &y, 2, Some((&dx, &dy))).unwrap();
        let b = train(&spec, &cfg(4), &x, &y, 2, Some((&dx, &dy))).unwrap();
        let c = train(&spec, &cfg(5), &x, &y, 2, Some((&dx, &dy))).unwrap();
        let bits = |m: &Mlp| m.params().iter().map(|v| v.to_bits()).collect::<Vec<_>>();
        assert_eq!(bits(&a.0), bits(&b.0));
        assert_eq!(a.1, b.1);
        assert_ne!(bits(&a.0), bits(&c.0));
    }

    #[test]
    fn a_large_product_gives_the_same_bits_on_one_thread_and_on_many() {
        let (x, y) = blobs(150, 2, 2.5, 8);
        // Widen to 300 features so the parallel GEMM and Adam paths are used.
        let wide: Vec<f32> = (0..x.rows)
            .flat_map(|r| {
                let (a, b) = (x.row(r)[0], x.row(r)[1]);
                (0..300).map(move |j| if j % 2 == 0 { a } else { b } * (1.0 + j as f32 / 300.0))
            })
            .collect();
        let x = Matrix::from_vec(x.rows, 300, wide);
        let spec = MlpSpec::laser(&[200], Activation::Tanh, 0.1);
        let cfg = TrainConfig {
            epochs: 2,
            batch_size: 300,
            seed: 2,
            ..TrainConfig::default()
        };
        let run = |threads: usize| {
            let pool = rayon::ThreadPoolBuilder::new()
                .num_threads(threads)
                .build()
                .unwrap();
            pool.install(|| train(&spec, &cfg, &x, &y, 2, None).unwrap().0)
        };
        assert_eq!(run(1).params(), run(3).params());
    }

    /// `blobs` spread over `d` features (not a multiple of the dot product's lanes).
    fn wide_blobs(
        n_per_class: usize,
        n_classes: usize,
        d: usize,
        seed: u64,
    ) -> (Matrix, Vec<usize>) {
        let (x, y) = blobs(n_per_class, n_classes, 2.5, seed);
        let mut rng = seeded_rng(seed, 98);
        let data = (0..x.rows)
            .flat_map(|r| {
                let (a, b) = (x.row(r)[0], x.row(r)[1]);
                (0..d)
                    .map(|j| if j % 2 == 0 { a } else { b } * 0.2 + rng.random::<f32>() - 0.5)
                    .collect::<Vec<_>>()
            })
            .collect();
        (Matrix::from_vec(x.rows, d, data), y)
    }

    #[test]
    fn the_logreg_kernel_gradient_equals_the_generic_backward_pass() {
        let (x, y) = wide_blobs(9, 3, 37, 4);
        let model = Mlp::new(&MlpSpec::logreg(), 37, 3, 8);
        let batch: Vec<usize> = vec![5, 0, 26, 13, 13, 2, 19];
        let xb = x.select_rows(&batch);
        let yb: Vec<usize> = batch.iter().map(|&i| y[i]).collect();
        for reduction in [Reduction::Sum, Reduction::Mean] {
            let (want_loss, want) = model.loss_and_gradient(&xb, &yb, reduction, None);
            let mut got = vec![f32::NAN; want.len()];
            let scale = reduction.scale(batch.len());
            let loss_sum =
                logreg_gradient(&model, &x, &y, &batch, scale, &mut got, &mut Vec::new());
            let loss = match reduction {
                Reduction::Sum => loss_sum,
                Reduction::Mean => loss_sum / batch.len() as f64,
            };
            assert!((loss - want_loss).abs() < 1e-6 * (1.0 + want_loss.abs()));
            for (g, w) in got.iter().zip(&want) {
                assert!((g - w).abs() < 1e-5 * (1.0 + w.abs()), "{g} vs {w}");
            }
        }
    }

    #[test]
    #[cfg(target_arch = "x86_64")]
    fn the_avx2_build_of_the_logreg_kernel_gives_the_baseline_bits() {
        if !std::arch::is_x86_feature_detected!("avx2") {
            return;
        }
        let (x, y) = wide_blobs(20, 4, 75, 9);
        let model = Mlp::new(&MlpSpec::logreg(), 75, 4, 2);
        let batch: Vec<usize> = (0..x.rows).rev().step_by(3).collect();
        let mut base = vec![0.0f32; model.params().len()];
        let mut wide = base.clone();
        let a = logreg_gradient_body(
            &model,
            &x,
            &y,
            &batch,
            1.0,
            &mut base,
            &mut Vec::new(),
            harness_kernels::dot,
        );
        // SAFETY: AVX2 was detected above.
        let b = unsafe {
            logreg_gradient_avx2(&model, &x, &y, &batch, 1.0, &mut wide, &mut Vec::new())
        };
        assert_eq!(a.to_bits(), b.to_bits());
        let bits = |v: &[f32]| v.iter().map(|f| f.to_bits()).collect::<Vec<_>>();
        assert_eq!(bits(&base), bits(&wide));
    }

    #[test]
    fn training_through_the_logreg_kernel_matches_the_generic_path() {
        let (x, y) = wide_blobs(40, 3, 53, 6);
        let (dx, dy) = wide_blobs(15, 3, 53, 7);
        for (reduction, weight_decay) in [(Reduction::Sum, 1e-3), (Reduction::Mean, 1e-5)] {
            let cfg = TrainConfig {
                epochs: 8,
                eval_every: 2,
                batch_size: 11,
                weight_decay,
                reduction,
                seed: 3,
                selection: Selection::Last,
                ..TrainConfig::default()
            };
            let spec = MlpSpec::logreg();
            let dev = Some((&dx, dy.as_slice()));
            let (fast, fr) = train_with(&spec, &cfg, &x, &y, 3, dev, Kernel::Auto).unwrap();
            let (slow, sr) = train_with(&spec, &cfg, &x, &y, 3, dev, Kernel::Generic).unwrap();
            for (a, b) in fast.params().iter().zip(slow.params()) {
                assert!((a - b).abs() < 1e-4 * (1.0 + b.abs()), "{a} vs {b}");
            }
            assert_ne!(fast.params(), Mlp::new(&spec, 53, 3, 3).params());
            assert_eq!(fr.dev_accuracy, sr.dev_accuracy);
            for (a, b) in fr.train_loss.iter().zip(&sr.train_loss) {
                assert!((a - b).abs() < 1e-4 * (1.0 + b.abs()));
            }
        }
    }

    /// A wide first layer reads the batch in place (packed products over row pointers): the
    /// same training as gathering the batch first, up to float rounding. With input dropout
    /// the batch is gathered either way, and the two paths give the same bits.
    #[test]
    fn reading_rows_in_place_matches_the_gathering_path() {
        let (x, y) = wide_blobs(40, 3, 53, 6);
        let (dx, dy) = wide_blobs(15, 3, 53, 7);
        let cfg = TrainConfig {
            epochs: 6,
            eval_every: 2,
            batch_size: 13,
            reduction: Reduction::Sum,
            seed: 4,
            selection: Selection::Last,
            ..TrainConfig::default()
        };
        let dev = Some((&dx, dy.as_slice()));
        for spec in [
            MlpSpec::senteval(20, 0.1),
            MlpSpec::laser(&[24, 8], Activation::Tanh, 0.2),
        ] {
            let model = Mlp::new(&spec, 53, 3, 1);
            assert_eq!(
                model.reads_rows_in_place(true),
                spec.input_dropout == 0.0,
                "{spec:?}"
            );
            let (fast, fr) = train_with(&spec, &cfg, &x, &y, 3, dev, Kernel::Auto).unwrap();
            let (slow, sr) = train_with(&spec, &cfg, &x, &y, 3, dev, Kernel::Generic).unwrap();
            if spec.input_dropout > 0.0 {
                assert_eq!(fast.params(), slow.params());
            }
            for (a, b) in fast.params().iter().zip(slow.params()) {
                assert!((a - b).abs() < 1e-4 * (1.0 + b.abs()), "{a} vs {b}");
            }
            assert_ne!(fast.params(), Mlp::new(&spec, 53, 3, 4).params());
            assert_eq!(fr.dev_accuracy, sr.dev_accuracy);
            for (a, b) in fr.train_loss.iter().zip(&sr.train_loss) {
                assert!((a - b).abs() < 1e-4 * (1.0 + b.abs()));
            }
        }
    }

    #[test]
    fn tenacity_stops_at_the_senteval_count_and_keeps_the_first_best() {
        // Training with lr 0 leaves the model unchanged: dev accuracy is flat after the first
        // evaluation, so SentEval's rule stops at evaluation tenacity + 2.
        let (x, y) = blobs(10, 2, 1.0, 3);
        for tenacity in [0, 1, 5] {
            let cfg = TrainConfig {
                lr: 0.0,
                epochs: 200,
                eval_every: 4,
                seed: 1,
                selection: Selection::BestOnDev {
                    ties: TieBreak::First,
                    tenacity: Some(tenacity),
                },
                ..TrainConfig::default()
            };
            let (_, report) = train(&MlpSpec::logreg(), &cfg, &x, &y, 2, Some((&x, &y))).unwrap();
            assert_eq!(report.dev_accuracy.len(), tenacity + 2);
            assert_eq!(report.best_epoch, 4);
            assert!(report.stopped_early);
        }
        let cfg = TrainConfig {
            lr: 0.0,
            epochs: 10,
            selection: Selection::BestOnDev {
                ties: TieBreak::Last,
                tenacity: None,
            },
            ..TrainConfig::default()
        };
        let (_, report) = train(&MlpSpec::logreg(), &cfg, &x, &y, 2, Some((&x, &y))).unwrap();
        assert_eq!((report.dev_accuracy.len(), report.best_epoch), (10, 10));
    }

    #[test]
    fn lr_decay_and_bad_inputs() {
        let (x, y) = blobs(5, 2, 1.0, 3);
        let cfg = TrainConfig::default();
        assert!(train(&MlpSpec::logreg(), &cfg, &x, &y[1..], 2, None).is_err());
        assert!(train(&MlpSpec::logreg(), &cfg, &x, &y, 1, None).is_err());
        let bad = TrainConfig {
            selection: Selection::BestOnDev {
                ties: TieBreak::First,
                tenacity: None,
            },
            ..cfg.clone()
        };
        assert!(train(&MlpSpec::logreg(), &bad, &x, &y, 2, None).is_err());
        assert!(train(&MlpSpec::senteval(3, 1.0), &cfg, &x, &y, 2, None).is_err());
        // With decay 0 only the first epoch moves the weights.
        let one = TrainConfig {
            epochs: 1,
            lr_decay: 0.0,
            ..cfg.clone()
        };
        let many = TrainConfig {
            epochs: 5,
            lr_decay: 0.0,
            ..cfg
        };
        let a = train(&MlpSpec::logreg(), &one, &x, &y, 2, None).unwrap().0;
        let b = train(&MlpSpec::logreg(), &many, &x, &y, 2, None).unwrap().0;
        assert_eq!(a.params(), b.params());
    }
}

#[cfg(test)]
mod timing {
    use super::*;
    use std::time::Instant;

    /// `cargo test --release --lib epoch_time -- --ignored --nocapture`: one epoch at
    /// SentEval scale (25k rows × 4096 dims), LogReg and a 512-unit MLP.
    #[test]
    #[ignore]
    fn epoch_time_at_senteval_scale() {
        let (n, d) = (25_000, 4096);
        let mut rng = seeded_rng(1, 50);
        let x = Matrix::from_vec(
            n,
            d,
            (0..n * d).map(|_| rng.random::<f32>() - 0.5).collect(),
        );
        let y: Vec<usize> = (0..n).map(|i| i % 2).collect();
        for (name, spec, bs) in [
            ("logreg bs64", MlpSpec::logreg(), 64),
            (
                "mlp 512 sigmoid dropout bs64",
                MlpSpec::senteval(512, 0.1),
                64,
            ),
            (
                "laser 512-384 tanh bs128",
                MlpSpec::laser(&[512, 384], Activation::Tanh, 0.1),
                128,
            ),
        ] {
            let cfg = TrainConfig {
                epochs: 1,
                batch_size: bs,
                ..TrainConfig::default()
            };
            let start = Instant::now();
            train(&spec, &cfg, &x, &y, 2, None).unwrap();
            eprintln!(
                "{name}: one epoch over {n} x {d} in {:.2} s on {} threads",
                start.elapsed().as_secs_f64(),
                rayon::current_num_threads()
            );
        }
    }
}
