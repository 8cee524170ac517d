//! The masked LSTM recurrence on burn's GPU backends (`wgpu`, `cuda`: burn's `Fusion` over
//! `CubeBackend`), with kernels of our own, for training and inference.
//!
//! Why: the generic path ([`crate::lstm::MaskedLstm::steps_tm`]) runs each time step as a
//! dozen small burn ops (slice, matmul, chunk, three sigmoids, two tanhs, the mask blend)
//! and as many again backwards; on a GPU each is a kernel launch, and launches, not
//! arithmetic, were the cost of an LSTM training step (issue 59). Here, per time step:
//!
//! - forward: one matrix product `h·W_hh` (burn's own, autotuned) and one kernel of ours
//!   that adds the step's input projection, applies the gates (input, forget, cell, output:
//!   PyTorch's order), updates the cell and hidden states and blends them with the mask
//!   (`h ← m·h' + (1−m)·h`, the generic path's arithmetic), saving what the backward pass
//!   needs;
//! - backward: one kernel for the gate gradients (and the gradient carried through a padded
//!   step) and one product `dG·W_hhᵀ`; `dW_hh` is one product over every step at the end.
//!
//! The input projection of every step is one product before the recurrence
//! ([`LayerInput::projected`], burn's ops, so its gradient is autodiff's). Both directions
//! of a BiLSTM layer run in the same launches ([`bi_layer`]): the projection is one product
//! with both directions' weights side by side, the recurrent product is batched over a
//! direction dimension and each step's kernel covers both directions (the reverse one
//! walking time backwards), writing the concatenated `[time, batch, 2·hidden]` output
//! directly.
//!
//! A batch small enough runs the whole recurrence in one launch each way instead
//! ([`crate::fused::lstm_whole`]: a cube carries a few rows through every time step), with
//! the same saved tensors and the same `dW_hh` product; `HARNESS_LSTM_RECURRENCE` forces
//! either path.
//!
//! Under burn's `Fusion` a whole recurrence (forward or backward) is one custom operation
//! registered with the fusion client (as burn-vision registers its own kernels): fusion
//! hands it the inner `CubeBackend` tensors and takes its outputs back. Training goes
//! through a custom autodiff node whose backward pass is the other custom operation.
//!
//! Semantics are the generic path's exactly; the tests (`lstm.rs`, beside the generic path)
//! compare outputs and every gradient.
//! On any other backend the functions here decline and the caller takes another path.

use crate::fused::device_nodes::cast;
use crate::fused::lstm::{BiInput, LayerInput};
use crate::fused::lstm_cell::{cell_backward, cell_forward, time_of};
use crate::fused::lstm_whole::{lstm_whole_backward, lstm_whole_forward, Recurrence, Tiling};
use burn::backend::autodiff::checkpoint::base::Checkpointer;
use burn::backend::autodiff::checkpoint::strategy::NoCheckpointing;
use burn::backend::autodiff::grads::Gradients;
use burn::backend::autodiff::ops::{Backward, Ops, OpsKind};
use burn::backend::Autodiff;
use burn::tensor::backend::Backend;
use burn::tensor::ops::FloatTensorOps;
use burn::tensor::{DType, Shape, Tensor, TensorPrimitive};
use burn_cubecl::fusion::FusionCubeRuntime;
use burn_cubecl::kernel::into_contiguous;
use burn_cubecl::ops::numeric::empty_device_dtype;
use burn_cubecl::tensor::CubeTensor;
use burn_cubecl::{BoolElement, CubeBackend, CubeRuntime};
use burn_fusion::stream::{Operation, OperationStreams};
use burn_fusion::{Fusion, FusionTensor};
use burn_ir::{CustomOpIr, HandleContainer, OperationIr, TensorIr};
use cubecl::prelude::*;
use cubecl::{calculate_cube_count_elemwise, CubeDim};
use std::marker::PhantomData;

/// The cube backend the recurrence runs on, inside fusion.
type Inner<R, BT> = CubeBackend<R, f32, i32, BT>;
type Fused<R, BT> = Fusion<Inner<R, BT>>;
type Ad<R, BT> = Autodiff<Fused<R, BT>>;
type Handles<R> =
    HandleContainer<<FusionCubeRuntime<R> as burn_fusion::FusionRuntime>::FusionHandle>;

/// Sizes of one recurrence: `dirs` directions (1, or 2 for a BiLSTM layer) over `steps`
/// time steps; `rev[d]` is 1 where direction `d` runs from the last step to the first.
#[derive(Debug, Clone, Copy)]
struct Dims {
    steps: usize,
    batch: usize,
    dirs: usize,
    hidden: usize,
    rev: [usize; 2],
    /// The recurrence this layer asked for ([`Recurrence::from_env`], read on the caller's
    /// thread).
    kind: Recurrence,
}

impl Dims {
    /// `[dirs, batch, hidden]`: one step's states of every direction.
    fn state(&self) -> Shape {
        Shape::new([self.dirs, self.batch, self.hidden])
    }
    /// `[dirs, steps, batch, width]`: what a step saves for the backward pass, step-major
    /// within a direction (steps in the order they ran).
    fn saved(&self, width: usize) -> Shape {
        Shape::new([self.dirs, self.steps, self.batch, width])
    }
    /// `[time, batch, dirs·width]`: the layout of the input projection (`width` 4·hidden)
    /// and of the output (`width` hidden), directions side by side.
    fn timed(&self, width: usize) -> Shape {
        Shape::new([self.steps, self.batch, self.dirs * width])
    }
}

/// One forward step of every direction: a unit per `(direction, row, hidden unit)`.
/// `hw` is `h·W_hh` `[dirs, batch, 4H]`, `xw` the input projection `[time, batch, dirs·4H]`.
#[cube(launch)]
#[allow(clippy::too_many_arguments)]
fn lstm_step_forward<F: Float>(
    xw: &Array<F>,
    hw: &Array<F>,
    mask: &Array<F>,
    h_prev: &Array<F>,
    c_prev: &Array<F>,
    h_next: &mut Array<F>,
    c_next: &mut Array<F>,
    hs: &mut Array<F>,
    gates: &mut Array<F>,
    cs: &mut Array<F>,
    hps: &mut Array<F>,
    cps: &mut Array<F>,
    step: usize,
    steps: usize,
    batch: usize,
    dirs: usize,
    hidden: usize,
    rev0: usize,
    rev1: usize,
) {
    let pos = ABSOLUTE_POS;
    if pos >= dirs * batch * hidden {
        terminate!();
    }
    let j = pos % hidden;
    let db = pos / hidden;
    let b = db % batch;
    let d = db / batch;
    let rev = rev0 * (1 - d) + rev1 * d;
    let t = time_of(step, steps, rev);
    let four = 4 * hidden;
    let g0 = db * four + j;
    let h_at = (t * batch + b) * dirs * hidden + d * hidden + j;
    let s = (d * steps + step) * batch + b;
    cell_forward::<F>(
        xw,
        (t * batch + b) * dirs * four + d * four + j,
        hw[g0],
        hw[g0 + hidden],
        hw[g0 + 2 * hidden],
        hw[g0 + 3 * hidden],
        h_prev[pos],
        c_prev[pos],
        mask[t * batch + b],
        hs,
        h_at,
        gates,
        cs,
        hps,
        cps,
        s,
        j,
        hidden,
    );
    // The next step's states: this unit's own writes, read back.
    h_next[pos] = hs[h_at];
    c_next[pos] = cs[s * hidden + j];
}

/// One backward step of every direction. `dh_mm` (`dG·W_hhᵀ` of the step after, in run
/// order), `carry` (the hidden gradient a padded step passed straight through) and `dc` are
/// read only when `first` is 0; the gate gradients go to `dg` (this step, for the next
/// product), `dgates` (every step, for `dW_hh`) and `dxw` (the input projection's layout).
#[cube(launch)]
#[allow(clippy::too_many_arguments)]
fn lstm_step_backward<F: Float>(
    dhs: &Array<F>,
    dh_mm: &Array<F>,
    carry: &Array<F>,
    dc: &Array<F>,
    gates: &Array<F>,
    cs: &Array<F>,
    cps: &Array<F>,
    mask: &Array<F>,
    dg: &mut Array<F>,
    dgates: &mut Array<F>,
    dxw: &mut Array<F>,
    carry_out: &mut Array<F>,
    dc_out: &mut Array<F>,
    step: usize,
    steps: usize,
    batch: usize,
    dirs: usize,
    hidden: usize,
    rev0: usize,
    rev1: usize,
    first: usize,
) {
    let pos = ABSOLUTE_POS;
    if pos >= dirs * batch * hidden {
        terminate!();
    }
    let j = pos % hidden;
    let db = pos / hidden;
    let b = db % batch;
    let d = db / batch;
    let rev = rev0 * (1 - d) + rev1 * d;
    let t = time_of(step, steps, rev);
    let four = 4 * hidden;
    let mut dh = dhs[(t * batch + b) * dirs * hidden + d * hidden + j];
    let mut dc_in = F::new(0.0);
    if first == 0 {
        dh += dh_mm[pos] + carry[pos];
        dc_in = dc[pos];
    }
    let s = (d * steps + step) * batch + b;
    cell_backward::<F>(
        dh,
        dc_in,
        mask[t * batch + b],
        gates,
        cs,
        cps,
        s,
        j,
        hidden,
        dgates,
        dxw,
        (t * batch + b) * dirs * four + d * four + j,
        carry_out,
        dc_out,
        pos,
    );
    // This step's gate gradients for the next product: this unit's own writes, read back.
    let g0 = db * four + j;
    let s0 = s * four + j;
    dg[g0] = dgates[s0];
    dg[g0 + hidden] = dgates[s0 + hidden];
    dg[g0 + 2 * hidden] = dgates[s0 + 2 * hidden];
    dg[g0 + 3 * hidden] = dgates[s0 + 3 * hidden];
}

fn empty<R: CubeRuntime>(like: &CubeTensor<R>, shape: Shape) -> CubeTensor<R> {
    empty_device_dtype(like.client.clone(), like.device.clone(), shape, DType::F32)
}

fn arg<R: CubeRuntime>(t: &CubeTensor<R>) -> ArrayArg<R> {
    t.clone().into_array_arg()
}

/// Grid of one unit per `(direction, row, hidden unit)`.
fn grid<R: CubeRuntime>(like: &CubeTensor<R>, d: Dims) -> (CubeCount, CubeDim) {
    let units = d.dirs * d.batch * d.hidden;
    let cube_dim = CubeDim::new(&like.client, units);
    (
        calculate_cube_count_elemwise(&like.client, units, cube_dim),
        cube_dim,
    )
}

/// The forward recurrence on the cube backend: `[hs, gates, cs, hps, cps]`.
fn forward_cube<R: CubeRuntime, BT: BoolElement>(
    [xw, w, mask, h0, c0]: [CubeTensor<R>; 5],
    d: Dims,
) -> [CubeTensor<R>; 5] {
    let [xw, w, mask, h0, c0] = [xw, w, mask, h0, c0].map(into_contiguous);
    let hs = empty(&xw, d.timed(d.hidden));
    let gates = empty(&xw, d.saved(4 * d.hidden));
    let [cs, hps, cps] = [(); 3].map(|_| empty(&xw, d.saved(d.hidden)));
    if let Some(tiling) = whole_tiling(&xw, d, 1) {
        let (count, dim) = whole_grid(d, tiling);
        lstm_whole_forward::launch::<f32, R>(
            &xw.client,
            count,
            dim,
            arg(&xw),
            arg(&w),
            arg(&mask),
            arg(&h0),
            arg(&c0),
            arg(&hs),
            arg(&gates),
            arg(&cs),
            arg(&hps),
            arg(&cps),
            d.steps,
            d.batch,
            d.dirs,
            d.rev[0],
            d.rev[1],
            d.hidden,
            tiling.rows,
        );
        return [hs, gates, cs, hps, cps];
    }
    let (count, dim) = grid(&xw, d);
    let (mut h, mut c) = (h0, c0);
    for step in 0..d.steps {
        let hw = Inner::<R, BT>::float_matmul(h.clone(), w.clone());
        let hw = into_contiguous(hw);
        let h_next = empty(&xw, d.state());
        let c_next = empty(&xw, d.state());
        lstm_step_forward::launch::<f32, R>(
            &xw.client,
            count.clone(),
            dim,
            arg(&xw),
            arg(&hw),
            arg(&mask),
            arg(&h),
            arg(&c),
            arg(&h_next),
            arg(&c_next),
            arg(&hs),
            arg(&gates),
            arg(&cs),
            arg(&hps),
            arg(&cps),
            step,
            d.steps,
            d.batch,
            d.dirs,
            d.hidden,
            d.rev[0],
            d.rev[1],
        );
        h = h_next;
        c = c_next;
    }
    [hs, gates, cs, hps, cps]
}

/// Back-propagation through time on the cube backend: `[dxw, dw_hh, dh0, dc0]`.
fn backward_cube<R: CubeRuntime, BT: BoolElement>(
    [dhs, gates, cs, hps, cps, mask, w]: [CubeTensor<R>; 7],
    d: Dims,
) -> [CubeTensor<R>; 4] {
    let [dhs, gates, cs, hps, cps, mask, w] =
        [dhs, gates, cs, hps, cps, mask, w].map(into_contiguous);
    let four = 4 * d.hidden;
    // W_hhᵀ once, contiguous, for every step's product.
    let w_t = into_contiguous(Inner::<R, BT>::float_swap_dims(w, 1, 2));
    let dgates = empty(&dhs, d.saved(four));
    let dxw = empty(&dhs, d.timed(four));
    if let Some(tiling) = whole_tiling(&dhs, d, 4) {
        let (dh0, dc0) = (empty(&dhs, d.state()), empty(&dhs, d.state()));
        let (count, dim) = whole_grid(d, tiling);
        lstm_whole_backward::launch::<f32, R>(
            &dhs.client,
            count,
            dim,
            arg(&dhs),
            arg(&gates),
            arg(&cs),
            arg(&cps),
            arg(&mask),
            arg(&w_t),
            arg(&dgates),
            arg(&dxw),
            arg(&dh0),
            arg(&dc0),
            d.steps,
            d.batch,
            d.dirs,
            d.rev[0],
            d.rev[1],
            d.hidden,
            tiling.rows,
        );
        let dw = dw_hh::<R, BT>(hps, dgates, d);
        return [dxw, dw, dh0, dc0];
    }
    let (count, dim) = grid(&dhs, d);
    // The first backward step reads no recurrent gradient: any tensor stands in.
    let (mut dh_mm, mut carry, mut dc) = (hps.clone(), hps.clone(), hps.clone());
    for (k, step) in (0..d.steps).rev().enumerate() {
        let dg = empty(&dhs, Shape::new([d.dirs, d.batch, four]));
        let carry_out = empty(&dhs, d.state());
        let dc_out = empty(&dhs, d.state());
        lstm_step_backward::launch::<f32, R>(
            &dhs.client,
            count.clone(),
            dim,
            arg(&dhs),
            arg(&dh_mm),
            arg(&carry),
            arg(&dc),
            arg(&gates),
            arg(&cs),
            arg(&cps),
            arg(&mask),
            arg(&dg),
            arg(&dgates),
            arg(&dxw),
            arg(&carry_out),
            arg(&dc_out),
            step,
            d.steps,
            d.batch,
            d.dirs,
            d.hidden,
            d.rev[0],
            d.rev[1],
            usize::from(k == 0),
        );
        dh_mm = into_contiguous(Inner::<R, BT>::float_matmul(dg, w_t.clone()));
        carry = carry_out;
        dc = dc_out;
    }
    let dh0 = Inner::<R, BT>::float_add(dh_mm, carry);
    let dw = dw_hh::<R, BT>(hps, dgates, d);
    [dxw, dw, dh0, dc]
}

/// `dW_hh = Σ_steps h_prevᵀ·dG` per direction: one batched product over every step.
fn dw_hh<R: CubeRuntime, BT: BoolElement>(
    hps: CubeTensor<R>,
    dgates: CubeTensor<R>,
    d: Dims,
) -> CubeTensor<R> {
    let rows = d.steps * d.batch;
    let hps = Inner::<R, BT>::float_reshape(hps, Shape::new([d.dirs, rows, d.hidden]));
    let hps_t = Inner::<R, BT>::float_swap_dims(hps, 1, 2);
    let dgates = Inner::<R, BT>::float_reshape(dgates, Shape::new([d.dirs, rows, 4 * d.hidden]));
    Inner::<R, BT>::float_matmul(hps_t, dgates)
}

/// The tiling of a whole-recurrence launch whose cubes keep `width · hidden` floats a row in
/// shared memory (1 forwards, 4 backwards), when the layer's [`Recurrence`] and batch call
/// for one and it fits this device; `None` sends the caller step by step.
fn whole_tiling<R: CubeRuntime>(like: &CubeTensor<R>, d: Dims, width: usize) -> Option<Tiling> {
    if d.kind == Recurrence::Steps || d.steps == 0 {
        return None;
    }
    let hw = &like.client.properties().hardware;
    let parallel = hw
        .num_streaming_multiprocessors
        .or(hw.num_cpu_cores)
        .unwrap_or(64) as usize;
    Tiling::plan(
        d.dirs,
        d.batch,
        d.hidden,
        width,
        hw.max_shared_memory_size,
        parallel,
        hw.max_units_per_cube as usize,
        d.kind == Recurrence::Whole,
    )
}

/// A cube per `rows` batch rows (x) and direction (y).
fn whole_grid(d: Dims, tiling: Tiling) -> (CubeCount, CubeDim) {
    let tiles = d.batch.div_ceil(tiling.rows);
    (
        CubeCount::Static(tiles as u32, d.dirs as u32, 1),
        CubeDim::new_1d(tiling.units as u32),
    )
}

#[derive(Debug)]
struct ForwardOp<R, BT> {
    desc: CustomOpIr,
    dims: Dims,
    _b: PhantomData<fn() -> (R, BT)>,
}

impl<R: CubeRuntime, BT: BoolElement> Operation<FusionCubeRuntime<R>> for ForwardOp<R, BT> {
    fn execute(&self, handles: &mut Handles<R>) {
        let (inputs, outputs): (&[TensorIr; 5], &[TensorIr; 5]) = self.desc.as_fixed();
        let inputs = inputs
            .each_ref()
            .map(|t| handles.get_float_tensor::<Inner<R, BT>>(t));
        let results = forward_cube::<R, BT>(inputs, self.dims);
        for (out, t) in outputs.iter().zip(results) {
            handles.register_float_tensor::<Inner<R, BT>>(&out.id, t);
        }
    }
}

#[derive(Debug)]
struct BackwardOp<R, BT> {
    desc: CustomOpIr,
    dims: Dims,
    _b: PhantomData<fn() -> (R, BT)>,
}

impl<R: CubeRuntime, BT: BoolElement> Operation<FusionCubeRuntime<R>> for BackwardOp<R, BT> {
    fn execute(&self, handles: &mut Handles<R>) {
        let (inputs, outputs): (&[TensorIr; 7], &[TensorIr; 4]) = self.desc.as_fixed();
        let inputs = inputs
            .each_ref()
            .map(|t| handles.get_float_tensor::<Inner<R, BT>>(t));
        let results = backward_cube::<R, BT>(inputs, self.dims);
        for (out, t) in outputs.iter().zip(results) {
            handles.register_float_tensor::<Inner<R, BT>>(&out.id, t);
        }
    }
}

type FT<R> = FusionTensor<FusionCubeRuntime<R>>;

/// The forward recurrence under fusion: `[hs, gates, cs, hps, cps]`.
fn forward_fused<R: CubeRuntime, BT: BoolElement>(inputs: [&FT<R>; 5], d: Dims) -> [FT<R>; 5] {
    let client = inputs[0].client.clone();
    let streams = OperationStreams::with_inputs(inputs);
    let shapes = [
        d.timed(d.hidden),
        d.saved(4 * d.hidden),
        d.saved(d.hidden),
        d.saved(d.hidden),
        d.saved(d.hidden),
    ];
    let outs = shapes.map(|s| TensorIr::uninit(client.create_empty_handle(), s, DType::F32));
    let ins = inputs.map(|t| t.clone().into_ir());
    let desc = CustomOpIr::new("harness_lstm_forward", &ins, &outs);
    let op = ForwardOp::<R, BT> {
        desc: desc.clone(),
        dims: d,
        _b: PhantomData,
    };
    let outs = client.register(streams, OperationIr::Custom(desc), op);
    outs.try_into()
        .unwrap_or_else(|_| unreachable!("the operation declares five outputs"))
}

/// The backward recurrence under fusion: `[dxw, dw_hh, dh0, dc0]`.
fn backward_fused<R: CubeRuntime, BT: BoolElement>(inputs: [&FT<R>; 7], d: Dims) -> [FT<R>; 4] {
    let client = inputs[0].client.clone();
    let streams = OperationStreams::with_inputs(inputs);
    let shapes = [
        d.timed(4 * d.hidden),
        Shape::new([d.dirs, d.hidden, 4 * d.hidden]),
        d.state(),
        d.state(),
    ];
    let outs = shapes.map(|s| TensorIr::uninit(client.create_empty_handle(), s, DType::F32));
    let ins = inputs.map(|t| t.clone().into_ir());
    let desc = CustomOpIr::new("harness_lstm_backward", &ins, &outs);
    let op = BackwardOp::<R, BT> {
        desc: desc.clone(),
        dims: d,
        _b: PhantomData,
    };
    let outs = client.register(streams, OperationIr::Custom(desc), op);
    outs.try_into()
        .unwrap_or_else(|_| unreachable!("the operation declares four outputs"))
}

/// What the backward pass keeps of the forward pass (device tensors).
#[derive(Debug, Clone)]
struct Saved<R: CubeRuntime> {
    dims: Dims,
    gates: FT<R>,
    cs: FT<R>,
    hps: FT<R>,
    cps: FT<R>,
    mask: FT<R>,
    w: FT<R>,
}

#[derive(Debug)]
struct RecurrenceBackward<R, BT>(PhantomData<fn() -> (R, BT)>);

impl<R: CubeRuntime, BT: BoolElement> Backward<Fused<R, BT>, 4> for RecurrenceBackward<R, BT> {
    type State = Saved<R>;

    fn backward(self, ops: Ops<Saved<R>, 4>, grads: &mut Gradients, _: &mut Checkpointer) {
        let s = ops.state;
        let dhs = grads.consume::<Fused<R, BT>>(&ops.node);
        let [dxw, dw, dh0, dc0] = backward_fused::<R, BT>(
            [&dhs, &s.gates, &s.cs, &s.hps, &s.cps, &s.mask, &s.w],
            s.dims,
        );
        let [p_xw, p_w, p_h0, p_c0] = ops.parents.map(|p| p.map(|n| n.id));
        for (id, g) in [(p_xw, dxw), (p_w, dw), (p_h0, dh0), (p_c0, dc0)] {
            if let Some(id) = id {
                grads.register::<Fused<R, BT>>(id, g);
            }
        }
    }
}

/// The recurrence over `xw: [time, batch, dirs·4H]` with `w: [dirs, H, 4H]`, `mask: [time,
/// batch]` and initial states `[dirs, batch, H]`, tracked by autodiff: `[time, batch,
/// dirs·H]`.
fn recurrence_ad<R: CubeRuntime, BT: BoolElement>(
    xw: Tensor<Ad<R, BT>, 3>,
    w: Tensor<Ad<R, BT>, 3>,
    mask: Tensor<Ad<R, BT>, 2>,
    h0: Tensor<Ad<R, BT>, 3>,
    c0: Tensor<Ad<R, BT>, 3>,
    d: Dims,
) -> Tensor<Ad<R, BT>, 3> {
    let [xw, w, h0, c0] = [xw, w, h0, c0].map(|t| t.into_primitive().tensor());
    // The mask is a constant: no gradient flows to it.
    let mask = mask.into_primitive().tensor().primitive;
    let [hs, gates, cs, hps, cps] = forward_fused::<R, BT>(
        [
            &xw.primitive,
            &w.primitive,
            &mask,
            &h0.primitive,
            &c0.primitive,
        ],
        d,
    );
    let prep = RecurrenceBackward::<R, BT>(PhantomData)
        .prepare::<NoCheckpointing>([
            xw.node.clone(),
            w.node.clone(),
            h0.node.clone(),
            c0.node.clone(),
        ])
        .compute_bound()
        .stateful();
    let out = match prep {
        OpsKind::Tracked(prep) => prep.finish(
            Saved {
                dims: d,
                gates,
                cs,
                hps,
                cps,
                mask,
                w: w.primitive.clone(),
            },
            hs,
        ),
        OpsKind::UnTracked(prep) => prep.finish(hs),
    };
    Tensor::from_primitive(TensorPrimitive::Float(out))
}

/// The same without autodiff (inference).
fn recurrence_plain<R: CubeRuntime, BT: BoolElement>(
    xw: Tensor<Fused<R, BT>, 3>,
    w: Tensor<Fused<R, BT>, 3>,
    mask: Tensor<Fused<R, BT>, 2>,
    h0: Tensor<Fused<R, BT>, 3>,
    c0: Tensor<Fused<R, BT>, 3>,
    d: Dims,
) -> Tensor<Fused<R, BT>, 3> {
    let xw = xw.into_primitive().tensor();
    let w = w.into_primitive().tensor();
    let mask = mask.into_primitive().tensor();
    let h0 = h0.into_primitive().tensor();
    let c0 = c0.into_primitive().tensor();
    let [hs, ..] = forward_fused::<R, BT>([&xw, &w, &mask, &h0, &c0], d);
    Tensor::from_primitive(TensorPrimitive::Float(hs))
}

/// Either backend the recurrence serves, for one runtime.
trait CubeLstm: Backend {
    fn recurrence(
        xw: Tensor<Self, 3>,
        w: Tensor<Self, 3>,
        mask: Tensor<Self, 2>,
        h0: Tensor<Self, 3>,
        c0: Tensor<Self, 3>,
        d: Dims,
    ) -> Tensor<Self, 3>;
}

impl<R: CubeRuntime, BT: BoolElement> CubeLstm for Ad<R, BT> {
    fn recurrence(
        xw: Tensor<Self, 3>,
        w: Tensor<Self, 3>,
        mask: Tensor<Self, 2>,
        h0: Tensor<Self, 3>,
        c0: Tensor<Self, 3>,
        d: Dims,
    ) -> Tensor<Self, 3> {
        recurrence_ad::<R, BT>(xw, w, mask, h0, c0, d)
    }
}

impl<R: CubeRuntime, BT: BoolElement> CubeLstm for Fused<R, BT> {
    fn recurrence(
        xw: Tensor<Self, 3>,
        w: Tensor<Self, 3>,
        mask: Tensor<Self, 2>,
        h0: Tensor<Self, 3>,
        c0: Tensor<Self, 3>,
        d: Dims,
    ) -> Tensor<Self, 3> {
        recurrence_plain::<R, BT>(xw, w, mask, h0, c0, d)
    }
}

/// One direction of one layer on a cube backend.
fn single<C: CubeLstm>(input: LayerInput<C>, reverse: bool) -> Tensor<C, 3> {
    let xw = input.projected();
    let [time, batch, _] = xw.dims();
    let hidden = input.w_hh.dims()[0];
    let d = Dims {
        steps: time,
        batch,
        dirs: 1,
        hidden,
        rev: [usize::from(reverse), 0],
        kind: Recurrence::from_env(),
    };
    C::recurrence(
        xw,
        input.w_hh.unsqueeze_dim(0),
        input.mask,
        input.h0.unsqueeze_dim(0),
        input.c0.unsqueeze_dim(0),
        d,
    )
}

fn both<C: CubeLstm>(input: BiInput<C>) -> Option<Tensor<C, 3>> {
    let BiInput {
        x,
        w_ih,
        bias,
        w_hh,
        mask,
    } = input;
    let [time, batch, d_input] = x.dims();
    let hidden = w_hh[0].dims()[0];
    let device = x.device();
    // x·[W_ih,fwd | W_ih,rev]: the projection of both directions in one product, already in
    // the `[time, batch, 2·4H]` layout the kernel reads.
    let w_ih = Tensor::cat(w_ih.to_vec(), 1);
    let mut xw = crate::precision::matmul(x.reshape([time * batch, d_input]), w_ih);
    match bias {
        [Some(a), Some(b)] => xw = xw + Tensor::cat(vec![a, b], 0).unsqueeze_dim::<2>(0),
        [None, None] => {}
        _ => return None,
    }
    let xw = xw.reshape([time, batch, 8 * hidden]);
    let d = Dims {
        steps: time,
        batch,
        dirs: 2,
        hidden,
        rev: [0, 1],
        kind: Recurrence::from_env(),
    };
    let zeros = Tensor::zeros([2, batch, hidden], &device);
    Some(C::recurrence(
        xw,
        Tensor::stack(w_hh.to_vec(), 0),
        mask,
        zeros.clone(),
        zeros,
        d,
    ))
}

/// Every step's hidden state `[time, batch, hidden]` of one masked LSTM layer computed by
/// this module's kernels when `B` is a cube backend of this build (with or without
/// autodiff); `Err(input)` unchanged otherwise.
pub(crate) fn cube_layer<B: Backend>(
    input: LayerInput<B>,
    reverse: bool,
) -> Result<Tensor<B, 3>, LayerInput<B>> {
    let [_, batch, _] = input.x.dims();
    if batch == 0 || input.w_hh.dims()[0] == 0 {
        return Err(input);
    }
    macro_rules! attempt {
        ($input:ident, $C:ty) => {
            let $input = match cast::<LayerInput<B>, LayerInput<Autodiff<$C>>>($input) {
                Ok(i) => return Ok(back(single(i, reverse))),
                Err(i) => i,
            };
            let $input = match cast::<LayerInput<B>, LayerInput<$C>>($input) {
                Ok(i) => return Ok(back(single(i, reverse))),
                Err(i) => i,
            };
        };
    }
    #[cfg(feature = "wgpu")]
    attempt!(input, burn::backend::Wgpu<f32, i32>);
    #[cfg(feature = "cuda")]
    attempt!(input, burn::backend::Cuda<f32, i32>);
    Err(input)
}

/// A BiLSTM layer's outputs, both directions concatenated (`[time, batch, 2·hidden]`), in
/// one recurrence when `B` is a cube backend of this build; `None` otherwise. The caller
/// ([`crate::lstm::MaskedLstm::forward_bi_tm`]) checks that the input is not empty and that
/// both directions are as wide.
pub(crate) fn bi_layer<B: Backend>(input: BiInput<B>) -> Option<Tensor<B, 3>> {
    macro_rules! attempt {
        ($input:ident, $C:ty) => {
            let $input = match cast::<BiInput<B>, BiInput<Autodiff<$C>>>($input) {
                Ok(i) => return both(i).map(back),
                Err(i) => i,
            };
            let $input = match cast::<BiInput<B>, BiInput<$C>>($input) {
                Ok(i) => return both(i).map(back),
                Err(i) => i,
            };
        };
    }
    #[cfg(feature = "wgpu")]
    attempt!(input, burn::backend::Wgpu<f32, i32>);
    #[cfg(feature = "cuda")]
    attempt!(input, burn::backend::Cuda<f32, i32>);
    drop(input);
    None
}

/// A tensor of the concrete backend back as the caller's `B` (the same type).
fn back<C: Backend, B: Backend>(t: Tensor<C, 3>) -> Tensor<B, 3> {
    cast::<Tensor<C, 3>, Tensor<B, 3>>(t).unwrap_or_else(|_| unreachable!("the same backend type"))
}
