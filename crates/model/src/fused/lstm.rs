//! One masked LSTM layer over a whole sequence as a single operation on the CPU backend,
//! with its own backward pass: the layout cuDNN and oneDNN use. The generic path
//! ([`crate::lstm::MaskedLstm`]) builds about twenty autodiff nodes per time step, each a
//! small tensor op with its own allocation; on the CPU that overhead, not arithmetic, was
//! most of a training step. Here:
//!
//! - the caller projects every step's input at once (`xw = x·W_ih + b`, one GEMM over
//!   `time × batch` rows), so only the recurrence is left;
//! - each step is one GEMM `h·W_hh` into the gates, then the gates, cell and hidden update
//!   in one pass (vectorised sigmoid/tanh from `harness-kernels`);
//! - the backward pass is back-propagation through time over the saved gates and states:
//!   one GEMM per step for `dh = dG·W_hhᵀ`, and one GEMM over all steps for `dW_hh`;
//! - batch rows are independent in an LSTM, so rows are split into contiguous blocks that
//!   run the whole sequence in parallel (no synchronisation per step).
//!
//! Semantics are [`crate::lstm`]'s exactly: gate order input, forget, cell, output; where the
//! mask is 0 the state is carried unchanged (`h ← m·h' + (1−m)·h`), so padding never
//! reaches a real position. Both are checked against the generic path in the tests below
//! (outputs and every gradient).
//!
//! [`fused_layer`] serves `burn-ndarray` (inference) and `Autodiff<burn-ndarray>` (training,
//! through a custom autodiff node); on any other backend it declines and the generic path
//! runs, so models stay generic over `B: Backend`.

use burn::backend::autodiff::checkpoint::base::Checkpointer;
use burn::backend::autodiff::checkpoint::strategy::NoCheckpointing;
use burn::backend::autodiff::grads::Gradients;
use burn::backend::autodiff::ops::{Backward, Ops, OpsKind};
use burn::backend::{Autodiff, NdArray};
use burn::tensor::backend::Backend;
use burn::tensor::ops::FloatTensorOps;
use burn::tensor::{Tensor, TensorData, TensorPrimitive};
use rayon::prelude::*;
use std::any::Any;
use std::sync::Arc;

type Cpu = NdArray<f32>;
type CpuAd = Autodiff<Cpu>;

/// The inputs of one layer, time-major.
pub struct LayerInput<B: Backend> {
    /// `[time, batch, d_input]`: the layer's input at every step.
    pub x: Tensor<B, 3>,
    /// `[d_input, 4·hidden]` and `[4·hidden]`: the input projection and the gates' bias
    /// (burn's `Linear` layout, `y = x·W + b`), gates in the order input, forget, cell,
    /// output.
    pub w_ih: Tensor<B, 2>,
    pub bias: Option<Tensor<B, 1>>,
    /// `[batch, 4·hidden]`: added to every step's gates (the decoder's constant
    /// sentence/language input, projected once).
    pub context: Option<Tensor<B, 2>>,
    /// `[hidden, 4·hidden]`: the recurrent weights.
    pub w_hh: Tensor<B, 2>,
    /// `[time, batch]`: 1 at real tokens, 0 at padding.
    pub mask: Tensor<B, 2>,
    /// `[batch, hidden]` initial hidden and cell states.
    pub h0: Tensor<B, 2>,
    pub c0: Tensor<B, 2>,
}

/// The inputs of a BiLSTM layer: both directions' weights (forward first), no context,
/// zero initial states. Time-major `x: [time, batch, d_input]`, `mask: [time, batch]`.
pub(crate) struct BiInput<B: Backend> {
    pub x: Tensor<B, 3>,
    pub w_ih: [Tensor<B, 2>; 2],
    pub bias: [Option<Tensor<B, 1>>; 2],
    pub w_hh: [Tensor<B, 2>; 2],
    pub mask: Tensor<B, 2>,
}

impl<B: Backend> LayerInput<B> {
    /// Every step's gate input `x·W_ih + b (+ context)`, `[time, batch, 4·hidden]`: the
    /// generic path's first product.
    pub fn projected(&self) -> Tensor<B, 3> {
        let [time, batch, d_input] = self.x.dims();
        let four_h = self.w_ih.dims()[1];
        let x = self.x.clone().reshape([time * batch, d_input]);
        let mut xw = crate::precision::matmul(x, self.w_ih.clone());
        if let Some(b) = &self.bias {
            xw = xw + b.clone().unsqueeze_dim::<2>(0);
        }
        let mut xw = xw.reshape([time, batch, four_h]);
        if let Some(ctx) = &self.context {
            xw = xw + ctx.clone().unsqueeze_dim::<3>(0);
        }
        xw
    }
}

/// Every step's hidden state `[time, batch, hidden]` of the layer, computed by the fused CPU
/// operation when `B` is burn-ndarray (f32) or its autodiff; `Err(input)` (unchanged) on any
/// other backend, for the generic path to take over.
pub fn fused_layer<B: Backend>(
    input: LayerInput<B>,
    reverse: bool,
) -> Result<Tensor<B, 3>, LayerInput<B>> {
    let any: Box<dyn Any> = Box::new(input);
    let any = match any.downcast::<LayerInput<CpuAd>>() {
        Ok(input) => {
            let out: Box<dyn Any> = Box::new(autodiff_layer(*input, reverse));
            return Ok(*out
                .downcast::<Tensor<B, 3>>()
                .expect("the same backend type"));
        }
        Err(other) => other,
    };
    match any.downcast::<LayerInput<Cpu>>() {
        Ok(input) => {
            let out: Box<dyn Any> = Box::new(inference_layer(*input, reverse));
            Ok(*out
                .downcast::<Tensor<B, 3>>()
                .expect("the same backend type"))
        }
        Err(other) => Err(*other
            .downcast::<LayerInput<B>>()
            .expect("the input's own type")),
    }
}

/// Sizes of one layer's sequence.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Dims {
    pub(crate) time: usize,
    pub(crate) batch: usize,
    pub(crate) d_input: usize,
    pub(crate) hidden: usize,
}

impl Dims {
    fn of<B: Backend>(input: &LayerInput<B>) -> Dims {
        let [time, batch, d_input] = input.x.dims();
        Dims {
            time,
            batch,
            d_input,
            hidden: input.w_hh.dims()[0],
        }
    }
}

pub(crate) fn host<const D: usize>(t: Tensor<Cpu, D>) -> Vec<f32> {
    host_values(&t.into_primitive().tensor())
}

/// A copy of an f32 primitive's values in row-major order: one `memcpy` when the array is
/// in standard layout (burn-ndarray's own `into_data` iterates element by element whenever
/// the array is shared, which the autodiff graph always makes it).
pub(crate) fn host_values(p: &burn::tensor::ops::FloatTensor<Cpu>) -> Vec<f32> {
    match p {
        burn::backend::ndarray::NdArrayTensor::F32(storage) => {
            let view = storage.view();
            match view.as_slice() {
                Some(values) => values.to_vec(),
                None => {
                    // A permuted view (`swap_dims`): copy row by row along its strides.
                    let mut out = Vec::with_capacity(view.len());
                    // SAFETY: `view` borrows `storage`, which stays alive and unchanged for
                    // the call; ndarray guarantees that every index within its shape, stepped
                    // by its strides from its pointer, is an element of that buffer.
                    unsafe { strided_copy(view.as_ptr(), view.shape(), view.strides(), &mut out) };
                    out
                }
            }
        }
        other => {
            let t: Tensor<Cpu, 1> = Tensor::from_primitive(TensorPrimitive::Float(other.clone()));
            t.into_data()
                .convert::<f32>()
                .into_vec::<f32>()
                .expect("f32 data")
        }
    }
}

/// A tensor's values, as [`Tensor::into_data`] gives them, in one copy on burn-ndarray (f32)
/// and its autodiff ([`host_values`]; `into_data` walks a shared array, such as a module's
/// parameter, element by element); any other backend's `into_data`.
pub(crate) fn tensor_data<B: Backend, const D: usize>(t: Tensor<B, D>) -> TensorData {
    let any: &dyn Any = &t;
    let primitive = if let Some(t) = any.downcast_ref::<Tensor<CpuAd, D>>() {
        t.clone().inner().into_primitive().tensor()
    } else if let Some(t) = any.downcast_ref::<Tensor<Cpu, D>>() {
        t.clone().into_primitive().tensor()
    } else {
        return t.into_data();
    };
    TensorData::new(host_values(&primitive), t.shape())
}

/// Runs `f` on an f32 primitive's values without copying them when they are contiguous
/// (the fused operations read tables and activations in place), else on a copy.
pub(crate) fn with_values<R>(
    p: &burn::tensor::ops::FloatTensor<Cpu>,
    f: impl FnOnce(&[f32]) -> R,
) -> R {
    if let burn::backend::ndarray::NdArrayTensor::F32(storage) = p {
        if let Some(values) = storage.view().as_slice() {
            return f(values);
        }
    }
    f(&host_values(p))
}

/// Adds host `values` of `shape` to the gradient of node `id` (nothing when `id` is `None`:
/// that input takes no gradient).
pub(crate) fn register_grad(
    grads: &mut Gradients,
    id: Option<burn::backend::autodiff::NodeId>,
    values: Vec<f32>,
    shape: Vec<usize>,
) {
    if let Some(id) = id {
        let p = <Cpu as FloatTensorOps<Cpu>>::float_from_data(
            TensorData::new(values, shape),
            &Default::default(),
        );
        grads.register::<Cpu>(id, p);
    }
}

/// Appends the elements of the array at `ptr` with `shape` and element `strides` to `out`,
/// in row-major order.
///
/// # Safety
/// `strides` has at least `shape.len()` entries, and for every index `i` within `shape`,
/// `ptr` offset by `Σ i[d] · strides[d]` elements is a readable, initialised `f32` of one
/// live allocation (what an ndarray view's pointer, shape and strides guarantee).
unsafe fn strided_copy(ptr: *const f32, shape: &[usize], strides: &[isize], out: &mut Vec<f32>) {
    match shape {
        [] => out.push(*ptr),
        // A contiguous innermost run (a `swap_dims` of outer dimensions) is one copy.
        [n] if strides[0] == 1 => out.extend_from_slice(std::slice::from_raw_parts(ptr, *n)),
        [n] => {
            for i in 0..*n {
                out.push(*ptr.offset(i as isize * strides[0]));
            }
        }
        [n, ..] => {
            for i in 0..*n {
                strided_copy(
                    ptr.offset(i as isize * strides[0]),
                    &shape[1..],
                    &strides[1..],
                    out,
                );
            }
        }
    }
}

pub(crate) fn to_cpu<const D: usize>(v: Vec<f32>, shape: [usize; D]) -> Tensor<Cpu, D> {
    Tensor::from_data(TensorData::new(v, shape), &Default::default())
}

fn inference_layer(input: LayerInput<Cpu>, reverse: bool) -> Tensor<Cpu, 3> {
    let d = Dims::of(&input);
    let x = host(input.x);
    let w_ih = host(input.w_ih);
    let xw = project(
        &x,
        &w_ih,
        input.bias.map(host).as_deref(),
        input.context.map(host).as_deref(),
        d,
    );
    let hs = hidden_states(
        &xw,
        &host(input.w_hh),
        &host(input.mask),
        &host(input.h0),
        &host(input.c0),
        d,
        reverse,
    );
    to_cpu(hs, [d.time, d.batch, d.hidden])
}

/// `x·W_ih + b + context` on the host, `[time, batch, 4H]`, one parallel product.
pub(crate) fn project(
    x: &[f32],
    w_ih: &[f32],
    bias: Option<&[f32]>,
    ctx: Option<&[f32]>,
    d: Dims,
) -> Vec<f32> {
    let four_h = 4 * d.hidden;
    let rows = d.time * d.batch;
    // Every row starts as the bias (written once, not zeroed first: the array is larger than
    // the cache on long batches).
    let mut xw = match bias {
        Some(b) => {
            let mut xw = Vec::with_capacity(rows * four_h);
            for _ in 0..rows {
                xw.extend_from_slice(b);
            }
            xw
        }
        None => vec![0.0f32; rows * four_h],
    };
    if let Some(c) = ctx {
        for step in xw.chunks_exact_mut(d.batch * four_h) {
            for (a, b) in step.iter_mut().zip(c) {
                *a += b;
            }
        }
    }
    harness_kernels::gemm_w(rows, four_h, d.d_input, x, w_ih, false, &mut xw);
    xw
}

/// What the backward pass needs of the forward pass.
#[derive(Debug, Clone)]
struct Saved {
    dims: Dims,
    reverse: bool,
    /// The forward pass's rows in blocks (`blocks`), each block's activated gates and its
    /// hidden and cell states after each step, block-local (`[time, rows, ·]`).
    parts: Arc<Vec<Forward>>,
    blocks: Arc<Vec<(usize, usize)>>,
    mask: Arc<Vec<f32>>,
    h0: Arc<Vec<f32>>,
    c0: Arc<Vec<f32>>,
    w: Arc<Vec<f32>>,
    /// `[time, batch, d_input]` input and `[d_input, 4H]` projection.
    x: Arc<Vec<f32>>,
    w_ih: Arc<Vec<f32>>,
}

#[derive(Debug)]
struct LstmBackward;

impl Backward<Cpu, 7> for LstmBackward {
    type State = Saved;

    fn backward(self, ops: Ops<Saved, 7>, grads: &mut Gradients, _: &mut Checkpointer) {
        let s = ops.state;
        let d = s.dims;
        let (h, four_h) = (d.hidden, 4 * d.hidden);
        let dhs = host_values(&grads.consume::<Cpu>(&ops.node));
        let g = backward(&s, &dhs);
        let [p_x, p_w_ih, p_bias, p_ctx, p_w_hh, p_h0, p_c0] = ops.parents;
        let mut put = |id, v, shape| register_grad(grads, id, v, shape);
        let [p_x, p_w_ih, p_bias, p_ctx, p_w_hh, p_h0, p_c0] =
            [p_x, p_w_ih, p_bias, p_ctx, p_w_hh, p_h0, p_c0].map(|p| p.map(|n| n.id));
        let wanted = [p_x.is_some(), p_w_ih.is_some(), p_bias.is_some()];
        let [dx, dw_ih, dbias] = input_grads(&g.dxw, &s.x, &s.w_ih, d, wanted);
        for (id, v, shape) in [
            (p_x, dx, vec![d.time, d.batch, d.d_input]),
            (p_w_ih, dw_ih, vec![d.d_input, four_h]),
            (p_bias, dbias, vec![four_h]),
        ] {
            if let Some(v) = v {
                put(id, v, shape);
            }
        }
        if p_ctx.is_some() {
            let mut dctx = vec![0.0f32; d.batch * four_h];
            for step in g.dxw.chunks_exact(d.batch * four_h) {
                for (a, b) in dctx.iter_mut().zip(step) {
                    *a += b;
                }
            }
            put(p_ctx, dctx, vec![d.batch, four_h]);
        }
        put(p_w_hh, g.dw, vec![h, four_h]);
        put(p_h0, g.dh0, vec![d.batch, h]);
        put(p_c0, g.dc0, vec![d.batch, h]);
    }
}

/// The gradients that flow through the input projection `x·W_ih + b` from the gates'
/// (`dxw`, `[time, batch, 4H]`): of `x` (`dG·W_ihᵀ`), of `W_ih` (`xᵀ·dG`) and of the bias
/// (`dG`'s column sums), each computed only where `wanted` says so (in that order).
pub(crate) fn input_grads(
    dxw: &[f32],
    x: &[f32],
    w_ih: &[f32],
    d: Dims,
    wanted: [bool; 3],
) -> [Option<Vec<f32>>; 3] {
    let (rows, four_h) = (d.time * d.batch, 4 * d.hidden);
    let [want_x, want_w, want_bias] = wanted;
    let dx = want_x.then(|| {
        let mut dx = vec![0.0f32; rows * d.d_input];
        harness_kernels::gemm_w(rows, d.d_input, four_h, dxw, w_ih, true, &mut dx);
        dx
    });
    let dw = want_w.then(|| {
        let mut dw = vec![0.0f32; d.d_input * four_h];
        harness_kernels::gemm(
            d.d_input, four_h, rows, 1.0, x, true, dxw, false, 0.0, &mut dw,
        );
        dw
    });
    let dbias = want_bias.then(|| column_sums(dxw, rows, four_h));
    [dx, dw, dbias]
}

/// Sums of the columns of a row-major `rows × cols` array.
fn column_sums(a: &[f32], rows: usize, cols: usize) -> Vec<f32> {
    let mut out = vec![0.0f32; cols];
    for r in a.chunks_exact(cols).take(rows) {
        for (o, v) in out.iter_mut().zip(r) {
            *o += v;
        }
    }
    out
}

fn autodiff_layer(input: LayerInput<CpuAd>, reverse: bool) -> Tensor<CpuAd, 3> {
    let d = Dims::of(&input);
    let device = input.x.device();
    // Absent inputs take part as untracked placeholders: they get no gradient.
    let (has_bias, has_ctx) = (input.bias.is_some(), input.context.is_some());
    let bias = input
        .bias
        .unwrap_or_else(|| Tensor::zeros([0], &device))
        .into_primitive()
        .tensor();
    let ctx = input
        .context
        .unwrap_or_else(|| Tensor::zeros([0, 0], &device))
        .into_primitive()
        .tensor();
    let x = input.x.into_primitive().tensor();
    let w_ih = input.w_ih.into_primitive().tensor();
    let w = input.w_hh.into_primitive().tensor();
    let h0 = input.h0.into_primitive().tensor();
    let c0 = input.c0.into_primitive().tensor();
    // The mask is a constant: no gradient flows to it.
    let mask = host_values(&input.mask.into_primitive().tensor().primitive);
    let x_host = host_values(&x.primitive);
    let w_ih_host = host_values(&w_ih.primitive);
    let w_host = host_values(&w.primitive);
    let h0_host = host_values(&h0.primitive);
    let c0_host = host_values(&c0.primitive);
    let xw = project(
        &x_host,
        &w_ih_host,
        has_bias.then(|| host_values(&bias.primitive)).as_deref(),
        has_ctx.then(|| host_values(&ctx.primitive)).as_deref(),
        d,
    );
    let blocks = row_blocks(d.batch);
    let parts = forward_parts(
        &xw, &w_host, &mask, &h0_host, &c0_host, d, reverse, false, &blocks,
    );
    let out = to_cpu(
        merged_states(&parts, &blocks, d),
        [d.time, d.batch, d.hidden],
    )
    .into_primitive()
    .tensor();
    let prep = LstmBackward
        .prepare::<NoCheckpointing>([
            x.node.clone(),
            w_ih.node.clone(),
            bias.node.clone(),
            ctx.node.clone(),
            w.node.clone(),
            h0.node.clone(),
            c0.node.clone(),
        ])
        .compute_bound()
        .stateful();
    let result = match prep {
        OpsKind::Tracked(prep) => prep.finish(
            Saved {
                dims: d,
                reverse,
                parts: Arc::new(parts),
                blocks: Arc::new(blocks),
                mask: Arc::new(mask),
                h0: Arc::new(h0_host),
                c0: Arc::new(c0_host),
                w: Arc::new(w_host),
                x: Arc::new(x_host),
                w_ih: Arc::new(w_ih_host),
            },
            out,
        ),
        OpsKind::UnTracked(prep) => prep.finish(out),
    };
    Tensor::from_primitive(TensorPrimitive::Float(result))
}

/// Host results of the forward pass, `[time, batch, ·]` (or a block's, `[time, rows, ·]`).
#[derive(Debug)]
pub(crate) struct Forward {
    pub(crate) hs: Vec<f32>,
    pub(crate) cs: Vec<f32>,
    pub(crate) gates: Vec<f32>,
}

impl Forward {
    /// Zeroed arrays for `rows` rows over `time` steps. Inference (`states_only`) keeps only
    /// the hidden states: the cell states and gates a backward pass reads stay empty.
    fn zeros(time: usize, rows: usize, hidden: usize, states_only: bool) -> Self {
        let saved = |len: usize| {
            if states_only {
                Vec::new()
            } else {
                vec![0.0; len]
            }
        };
        Self {
            hs: vec![0.0; time * rows * hidden],
            cs: saved(time * rows * hidden),
            gates: saved(time * rows * 4 * hidden),
        }
    }
}

/// Host gradients of one layer (or of one block of its rows, `[time, rows, ·]`).
pub(crate) struct Grads {
    /// Of the gates' input `x·W_ih + b`, `[time, batch, 4H]`.
    pub(crate) dxw: Vec<f32>,
    /// Of `W_hh`.
    pub(crate) dw: Vec<f32>,
    dh0: Vec<f32>,
    dc0: Vec<f32>,
}

/// Rows per parallel block: rows are split into at most this many blocks per thread so the
/// blocks stay large enough for the GEMM to run at speed.
pub(crate) fn row_blocks(batch: usize) -> Vec<(usize, usize)> {
    let threads = rayon::current_num_threads().max(1);
    let per = batch.div_ceil(threads).max(1);
    (0..batch)
        .step_by(per)
        .map(|r0| (r0, (r0 + per).min(batch)))
        .collect()
}

/// The step indices in processing order.
fn order(time: usize, reverse: bool) -> Vec<usize> {
    if reverse {
        (0..time).rev().collect()
    } else {
        (0..time).collect()
    }
}

/// A layer's host arrays for the forward recurrence.
pub(crate) struct Recurrence<'a> {
    pub(crate) xw: &'a [f32],
    pub(crate) w: &'a harness_kernels::PackedB,
    pub(crate) mask: &'a [f32],
    pub(crate) h0: &'a [f32],
    pub(crate) c0: &'a [f32],
    pub(crate) d: Dims,
    pub(crate) reverse: bool,
    /// Inference: keep only the hidden states (no gates or cell states for a backward pass).
    pub(crate) states_only: bool,
}

/// One block of rows `[r0, r1)` through the whole sequence, its arrays block-local
/// (`[time, r1 − r0, ·]`).
pub(crate) fn forward_block(l: &Recurrence, (r0, r1): (usize, usize)) -> Forward {
    let Recurrence {
        xw,
        w,
        mask,
        h0,
        c0,
        d,
        reverse,
        ..
    } = *l;
    let (n, h) = (d.batch, d.hidden);
    let rows = r1 - r0;
    let mut hcur = h0[r0 * h..r1 * h].to_vec();
    let mut ccur = c0[r0 * h..r1 * h].to_vec();
    // Inference keeps only the hidden states: one step's gates in a scratch buffer, no cell
    // states: nothing for a backward pass is written.
    let mut out = Forward::zeros(d.time, rows, h, l.states_only);
    let mut scratch = if l.states_only {
        vec![0.0f32; rows * 4 * h]
    } else {
        Vec::new()
    };
    let mut cnew = vec![0.0f32; h];
    for t in order(d.time, reverse) {
        let g = if l.states_only {
            &mut scratch[..]
        } else {
            &mut out.gates[t * rows * 4 * h..(t + 1) * rows * 4 * h]
        };
        g.copy_from_slice(&xw[(t * n + r0) * 4 * h..(t * n + r1) * 4 * h]);
        harness_kernels::gemm_packed(rows, &hcur, w, g);
        for j in 0..rows {
            let gj = &mut g[j * 4 * h..(j + 1) * 4 * h];
            harness_kernels::sigmoid(&mut gj[..2 * h]);
            harness_kernels::tanh(&mut gj[2 * h..3 * h]);
            harness_kernels::sigmoid(&mut gj[3 * h..]);
            if mask[t * n + r0 + j] != 0.0 {
                let (i, rest) = gj.split_at(h);
                let (f, rest) = rest.split_at(h);
                let (gg, o) = rest.split_at(h);
                let c = &mut ccur[j * h..(j + 1) * h];
                for k in 0..h {
                    cnew[k] = f[k] * c[k] + i[k] * gg[k];
                }
                c.copy_from_slice(&cnew);
                harness_kernels::tanh(&mut cnew);
                let hh = &mut hcur[j * h..(j + 1) * h];
                for k in 0..h {
                    hh[k] = o[k] * cnew[k];
                }
            }
        }
        out.hs[t * rows * h..(t + 1) * rows * h].copy_from_slice(&hcur);
        if !l.states_only {
            out.cs[t * rows * h..(t + 1) * rows * h].copy_from_slice(&ccur);
        }
    }
    out
}

/// Copies a block's rows (`[time, r1 − r0, width]`) to their place in `[time, batch, width]`.
pub(crate) fn scatter(
    dst: &mut [f32],
    src: &[f32],
    d: Dims,
    width: usize,
    (r0, r1): (usize, usize),
) {
    let rows = r1 - r0;
    for t in 0..d.time {
        dst[(t * d.batch + r0) * width..(t * d.batch + r1) * width]
            .copy_from_slice(&src[t * rows * width..(t + 1) * rows * width]);
    }
}

/// The forward recurrence with rows in `blocks`, run in parallel: each block's arrays
/// block-local (for a backward pass to read in place, or [`hidden_states`] to merge).
#[allow(clippy::too_many_arguments)] // the recurrence's arrays, each named at the call
fn forward_parts(
    xw: &[f32],
    w: &[f32],
    mask: &[f32],
    h0: &[f32],
    c0: &[f32],
    d: Dims,
    reverse: bool,
    states_only: bool,
    blocks: &[(usize, usize)],
) -> Vec<Forward> {
    // The recurrent weights are packed once for every step of every block.
    let w = harness_kernels::PackedB::new(d.hidden, 4 * d.hidden, w, false);
    let layer = Recurrence {
        xw,
        w: &w,
        mask,
        h0,
        c0,
        d,
        reverse,
        states_only,
    };
    blocks
        .par_iter()
        .map(|&b| forward_block(&layer, b))
        .collect()
}

/// The forward recurrence for inference: the hidden states alone, `[time, batch, H]` (no
/// gates or cell states: nothing runs backward through it). Training keeps each block's
/// arrays in place with [`forward_parts`] instead.
#[allow(clippy::too_many_arguments)] // the recurrence's arrays, each named at the call
pub(crate) fn hidden_states(
    xw: &[f32],
    w: &[f32],
    mask: &[f32],
    h0: &[f32],
    c0: &[f32],
    d: Dims,
    reverse: bool,
) -> Vec<f32> {
    let blocks = row_blocks(d.batch);
    let mut parts = forward_parts(xw, w, mask, h0, c0, d, reverse, true, &blocks);
    if parts.len() == 1 {
        // One block is the whole batch, already in its layout.
        return parts.pop().expect("one block").hs;
    }
    let mut hs = vec![0.0f32; d.time * d.batch * d.hidden];
    for (part, &b) in parts.iter().zip(&blocks) {
        scatter(&mut hs, &part.hs, d, d.hidden, b);
    }
    hs
}

/// Back-propagation through time for rows `[r0, r1)`: the gate gradients `[time, rows, 4H]`,
/// `dh0`, `dc0` and this block's share of `dW_hh`.
///
/// It reads the block's own forward arrays (block-local, as [`forward_block`] leaves them).
pub(crate) fn backward_block(s: &BlockTrace, w_t: &harness_kernels::PackedB) -> Grads {
    let d = s.d;
    let (n, h) = (d.batch, d.hidden);
    let (r0, r1) = s.block;
    let rows = r1 - r0;
    let part = s.part;
    let mut dh = vec![0.0f32; rows * h];
    let mut dc = vec![0.0f32; rows * h];
    let mut dgates = vec![0.0f32; d.time * rows * 4 * h];
    // Every step's previous hidden state, `[time, rows, H]`, for dW_hh at the end.
    let mut hprev = vec![0.0f32; d.time * rows * h];
    let steps = order(d.time, s.reverse);
    let mut tc = vec![0.0f32; h];
    let mut dh_direct = vec![0.0f32; rows * h];
    for (pos, &t) in steps.iter().enumerate().rev() {
        let prev = pos.checked_sub(1).map(|p| steps[p]);
        // The states before step `t`: the block's own at the previous step, or the initial
        // ones (rows of the whole batch).
        let (h_src, c_src, base) = match prev {
            Some(p) => (&part.hs[..], &part.cs[..], p * rows),
            None => (s.h0, s.c0, r0),
        };
        dh_direct.fill(0.0);
        let dg = &mut dgates[t * rows * 4 * h..(t + 1) * rows * 4 * h];
        for j in 0..rows {
            let row = r0 + j;
            let dhj = &mut dh[j * h..(j + 1) * h];
            let up = (t * n + row) * s.width + s.offset;
            let upstream = &s.dhs[up..up + h];
            for k in 0..h {
                dhj[k] += upstream[k];
            }
            let hp = &h_src[(base + j) * h..(base + j + 1) * h];
            hprev[(t * rows + j) * h..(t * rows + j + 1) * h].copy_from_slice(hp);
            if s.mask[t * n + row] == 0.0 {
                // Carried state: the gradient passes to the previous step unchanged.
                dh_direct[j * h..(j + 1) * h].copy_from_slice(dhj);
                continue;
            }
            let local = t * rows + j;
            let gates = &part.gates[local * 4 * h..(local + 1) * 4 * h];
            let (i, rest) = gates.split_at(h);
            let (f, rest) = rest.split_at(h);
            let (gg, o) = rest.split_at(h);
            tc.copy_from_slice(&part.cs[local * h..(local + 1) * h]);
            harness_kernels::tanh(&mut tc);
            let cp = &c_src[(base + j) * h..(base + j + 1) * h];
            let dcj = &mut dc[j * h..(j + 1) * h];
            let dgj = &mut dg[j * 4 * h..(j + 1) * 4 * h];
            for k in 0..h {
                let dout = dhj[k];
                let dcn = dcj[k] + dout * o[k] * (1.0 - tc[k] * tc[k]);
                dgj[k] = dcn * gg[k] * i[k] * (1.0 - i[k]);
                dgj[h + k] = dcn * cp[k] * f[k] * (1.0 - f[k]);
                dgj[2 * h + k] = dcn * i[k] * (1.0 - gg[k] * gg[k]);
                dgj[3 * h + k] = dout * tc[k] * o[k] * (1.0 - o[k]);
                dcj[k] = dcn * f[k];
            }
        }
        // dh_prev = dG · W_hhᵀ (+ the carried gradient of masked rows).
        harness_kernels::gemm_packed(rows, dg, w_t, &mut dh_direct);
        std::mem::swap(&mut dh, &mut dh_direct);
    }
    // dW_hh = Σ_t h_prevᵀ · dG_t: one product over every step.
    let mut dw = vec![0.0f32; h * 4 * h];
    // SAFETY: hprev (time·rows·H floats, allocated above) is read transposed as
    // H × (time·rows); dgates (time·rows·4H) is read as (time·rows) × 4H; dw (H·4H) is
    // written as H × 4H. Every stride stays inside its own buffer, and dw is borrowed by
    // nothing else.
    unsafe {
        let m = d.time * rows;
        if m > 0 {
            matrixmultiply::sgemm(
                h,
                m,
                4 * h,
                1.0,
                hprev.as_ptr(),
                1,
                h as isize,
                dgates.as_ptr(),
                4 * h as isize,
                1,
                0.0,
                dw.as_mut_ptr(),
                4 * h as isize,
                1,
            );
        }
    }
    Grads {
        dxw: dgates,
        dw,
        dh0: dh,
        dc0: dc,
    }
}

fn backward(s: &Saved, dhs: &[f32]) -> Grads {
    let d = s.dims;
    let h = d.hidden;
    // W_hhᵀ, packed once for every step of every block.
    let w_t = harness_kernels::PackedB::new(4 * h, h, &s.w, true);
    let parts: Vec<Grads> = s
        .parts
        .par_iter()
        .zip(&s.blocks[..])
        .map(|(part, &block)| {
            let trace = BlockTrace {
                d,
                reverse: s.reverse,
                part,
                block,
                mask: &s.mask,
                h0: &s.h0,
                c0: &s.c0,
                dhs,
                width: h,
                offset: 0,
            };
            backward_block(&trace, &w_t)
        })
        .collect();
    merge_grads(parts, &s.blocks, d)
}

/// What one block's backward pass reads: its forward arrays (block-local, `[time, r1 − r0,
/// ·]`, as [`forward_block`] leaves them), the layer's mask `[time, batch]` and initial
/// states `[batch, H]`, and the gradient of the layer's output, whose row `(t, row)` is
/// `dhs[(t·batch + row)·width + offset..][..H]` (`width` is `H` for one direction, `2H` for
/// a BiLSTM layer's two side by side).
pub(crate) struct BlockTrace<'a> {
    pub(crate) d: Dims,
    pub(crate) reverse: bool,
    pub(crate) part: &'a Forward,
    pub(crate) block: (usize, usize),
    pub(crate) mask: &'a [f32],
    pub(crate) h0: &'a [f32],
    pub(crate) c0: &'a [f32],
    pub(crate) dhs: &'a [f32],
    pub(crate) width: usize,
    pub(crate) offset: usize,
}

/// The hidden states `[time, batch, H]` of a layer run in `blocks` (`parts`, block-local).
pub(crate) fn merged_states(parts: &[Forward], blocks: &[(usize, usize)], d: Dims) -> Vec<f32> {
    if let [one] = parts {
        return one.hs.clone();
    }
    let mut hs = vec![0.0f32; d.time * d.batch * d.hidden];
    for (part, &b) in parts.iter().zip(blocks) {
        scatter(&mut hs, &part.hs, d, d.hidden, b);
    }
    hs
}

/// The blocks' gradients as the whole layer's: `dxw` and the initial states' rows in their
/// place, `dW_hh` summed over the blocks in order.
pub(crate) fn merge_grads(parts: Vec<Grads>, blocks: &[(usize, usize)], d: Dims) -> Grads {
    let h = d.hidden;
    let mut out = Grads {
        dxw: vec![0.0; d.time * d.batch * 4 * h],
        dw: vec![0.0; h * 4 * h],
        dh0: vec![0.0; d.batch * h],
        dc0: vec![0.0; d.batch * h],
    };
    // Blocks are summed in a fixed order: the result does not depend on scheduling.
    for (part, &(r0, r1)) in parts.iter().zip(blocks) {
        scatter(&mut out.dxw, &part.dxw, d, 4 * h, (r0, r1));
        out.dh0[r0 * h..r1 * h].copy_from_slice(&part.dh0);
        out.dc0[r0 * h..r1 * h].copy_from_slice(&part.dc0);
        for (a, b) in out.dw.iter_mut().zip(&part.dw) {
            *a += b;
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::lstm::MaskedLstmConfig;

    fn mask_of<B: Backend>(lens: &[usize], time: usize) -> Tensor<B, 2> {
        let v: Vec<f32> = (0..time)
            .flat_map(|t| lens.iter().map(move |&l| if t < l { 1.0 } else { 0.0 }))
            .collect();
        Tensor::from_data(TensorData::new(v, [time, lens.len()]), &Default::default())
    }

    /// `tensor_data` gives `into_data`'s values and shape, on a shared autodiff tensor, a
    /// permuted plain one and another backend.
    #[test]
    fn tensor_data_is_into_data() {
        let dev = Default::default();
        let plain = crate::random::uniform_tensor::<Cpu, 3>([3, 4, 5], 1.0, 100, &dev);
        let shared = Tensor::<CpuAd, 3>::from_inner(plain.clone()).require_grad();
        let _keep = shared.clone();
        assert_eq!(tensor_data(shared.clone()), shared.into_data());
        let permuted = plain.swap_dims(0, 2);
        assert_eq!(tensor_data(permuted.clone()), permuted.into_data());
        let other = Tensor::<NdArray<f64>, 2>::from_data([[1.0, 2.0], [3.0, 4.0]], &dev);
        assert_eq!(tensor_data(other.clone()), other.into_data());
    }

    fn close(a: Vec<f32>, b: Vec<f32>, tol: f32, what: &str) {
        assert_eq!(a.len(), b.len(), "{what}");
        for (i, (x, y)) in a.iter().zip(&b).enumerate() {
            assert!(
                (x - y).abs() <= tol * (1.0 + y.abs()),
                "{what}[{i}]: {x} vs {y}"
            );
        }
    }

    /// The fused layer against the step-by-step one on the same weights: outputs, and the
    /// gradients of a loss that reads every output, for both directions, padding, a context
    /// and initial states that need their own gradients.
    #[test]
    fn fused_layer_equals_the_generic_layer_with_gradients() {
        let dev = Default::default();
        let (time, batch, d_in, h) = (6, 5, 3, 4);
        let lens = [6, 2, 4, 1, 5];
        for reverse in [false, true] {
            let layer = crate::random::init_uniform(
                MaskedLstmConfig::new(d_in, h)
                    .with_reverse(reverse)
                    .init::<CpuAd>(&dev),
                7,
                0.5,
            );
            let x = crate::random::uniform_tensor::<CpuAd, 3>([time, batch, d_in], 1.0, 101, &dev)
                .require_grad();
            let ctx = crate::random::uniform_tensor::<CpuAd, 2>([batch, 4 * h], 0.5, 102, &dev)
                .require_grad();
            let h0 = crate::random::uniform_tensor::<CpuAd, 2>([batch, h], 0.5, 103, &dev)
                .require_grad();
            let c0 = crate::random::uniform_tensor::<CpuAd, 2>([batch, h], 0.5, 104, &dev)
                .require_grad();
            let weights =
                crate::random::uniform_tensor::<CpuAd, 3>([time, batch, h], 1.0, 105, &dev);
            let mask = mask_of::<CpuAd>(&lens, time);
            let run = |fused: bool| {
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
                let hs = if fused {
                    fused_layer(input, reverse)
                        .ok()
                        .expect("the CPU backend is fused")
                } else {
                    layer.steps_tm(input)
                };
                let loss = (hs.clone() * weights.clone()).sum();
                let grads = loss.backward();
                let g = |t: &Tensor<CpuAd, 2>| host(t.grad(&grads).expect("a gradient"));
                (
                    host(hs.inner()),
                    host(x.grad(&grads).unwrap()),
                    g(&ctx),
                    g(&h0),
                    g(&c0),
                    host(layer.hidden.weight.val().grad(&grads).unwrap()),
                    host(layer.input.weight.val().grad(&grads).unwrap()),
                    host(
                        layer
                            .input
                            .bias
                            .as_ref()
                            .unwrap()
                            .val()
                            .grad(&grads)
                            .unwrap(),
                    ),
                )
            };
            let a = run(true);
            let b = run(false);
            close(a.0, b.0, 1e-5, "outputs");
            close(a.1, b.1, 1e-4, "dx");
            close(a.2, b.2, 1e-4, "dcontext");
            close(a.3, b.3, 1e-4, "dh0");
            close(a.4, b.4, 1e-4, "dc0");
            close(a.5, b.5, 1e-4, "dW_hh");
            close(a.6, b.6, 1e-4, "dW_ih");
            close(a.7, b.7, 1e-4, "dbias");
        }
    }

    /// Inference on plain burn-ndarray takes the fused path too, with the same outputs.
    #[test]
    fn inference_layer_equals_the_generic_layer() {
        let dev = Default::default();
        let layer =
            crate::random::init_uniform(MaskedLstmConfig::new(3, 4).init::<Cpu>(&dev), 3, 0.5);
        let x = crate::random::uniform_tensor::<Cpu, 3>([7, 3, 3], 1.0, 106, &dev);
        let mask = mask_of::<Cpu>(&[7, 3, 5], 7);
        let fused = layer.forward_tm(x.clone(), mask.clone(), None, None);
        let generic = layer.steps_tm(LayerInput {
            x,
            w_ih: layer.input.weight.val(),
            bias: layer.input.bias.as_ref().map(|b| b.val()),
            context: None,
            w_hh: layer.hidden.weight.val(),
            mask,
            h0: Tensor::zeros([3, 4], &dev),
            c0: Tensor::zeros([3, 4], &dev),
        });
        close(host(fused), host(generic), 1e-5, "outputs");
    }
}
