//! The masked LSTM cell's arithmetic on the GPU backends, in one place for the step kernels
//! (`lstm_cube.rs`) and the whole-recurrence kernels (`lstm_whole.rs`), so that the two paths
//! compute the same function by construction; they differ only in where the recurrent
//! product `h·W_hh` (`dG·W_hhᵀ`) comes from and in how units are laid out.
//!
//! Layouts (every kernel's): the input projection `xw` and its gradient `dxw` are `[time,
//! batch, dirs·4H]` (gates input, forget, cell, output: PyTorch's order), the outputs `hs`
//! `[time, batch, dirs·H]`; what a step saves for the backward pass (`gates` `[dirs, steps,
//! batch, 4H]`, `cs`, `hps`, `cps` `[dirs, steps, batch, H]`) is indexed by `s = (d · steps +
//! step) · batch + b`, step-major within a direction, steps in the order they ran.

use cubecl::prelude::*;

#[cube]
fn sigmoid_of<F: Float>(x: F) -> F {
    F::new(1.0) / (F::new(1.0) + F::exp(-x))
}

/// The time index of `step` for a direction (`rev` 1: reversed).
#[cube]
pub(crate) fn time_of(step: usize, steps: usize, rev: usize) -> usize {
    rev * (steps - 1 - step) + (1 - rev) * step
}

/// One cell forwards: the gates from the input projection at `x0` (gate `i`'s index) plus the
/// recurrent product's parts `zi … zo`, the new cell and hidden state blended with the mask `m` (`h ←
/// m·h' + (1−m)·h`, the generic path's arithmetic), written to `hs[h_at]` and, with what the
/// backward pass needs, to the saved tensors at `s`, hidden unit `j`.
#[cube]
#[allow(clippy::too_many_arguments)]
pub(crate) fn cell_forward<F: Float>(
    xw: &Array<F>,
    x0: usize,
    zi: F,
    zf: F,
    zg: F,
    zo: F,
    hp: F,
    cp: F,
    m: F,
    hs: &mut Array<F>,
    h_at: usize,
    gates: &mut Array<F>,
    cs: &mut Array<F>,
    hps: &mut Array<F>,
    cps: &mut Array<F>,
    s: usize,
    j: usize,
    hidden: usize,
) {
    let four = 4 * hidden;
    let i = sigmoid_of::<F>(xw[x0] + zi);
    let f = sigmoid_of::<F>(xw[x0 + hidden] + zf);
    let g = F::tanh(xw[x0 + 2 * hidden] + zg);
    let o = sigmoid_of::<F>(xw[x0 + 3 * hidden] + zo);
    let cn = f * cp + i * g;
    let hn = o * F::tanh(cn);
    let keep = F::new(1.0) - m;
    hs[h_at] = hn * m + hp * keep;
    gates[s * four + j] = i;
    gates[s * four + hidden + j] = f;
    gates[s * four + 2 * hidden + j] = g;
    gates[s * four + 3 * hidden + j] = o;
    cs[s * hidden + j] = cn * m + cp * keep;
    hps[s * hidden + j] = hp;
    cps[s * hidden + j] = cp;
}

/// One cell backwards from the hidden gradient `dh` (the output's, the recurrent product's
/// and what padding carried) and the cell's `dc_in`: the gate gradients to `dgates` (at `s`)
/// and `dxw` (at `x0`), the hidden gradient a padded step passes straight through to
/// `carry_out[pos]` and the cell's to `dc_out[pos]`.
#[cube]
#[allow(clippy::too_many_arguments)]
pub(crate) fn cell_backward<F: Float>(
    dh: F,
    dc_in: F,
    m: F,
    gates: &Array<F>,
    cs: &Array<F>,
    cps: &Array<F>,
    s: usize,
    j: usize,
    hidden: usize,
    dgates: &mut Array<F>,
    dxw: &mut Array<F>,
    x0: usize,
    carry_out: &mut Array<F>,
    dc_out: &mut Array<F>,
    pos: usize,
) {
    let four = 4 * hidden;
    let keep = F::new(1.0) - m;
    let i = gates[s * four + j];
    let f = gates[s * four + hidden + j];
    let g = gates[s * four + 2 * hidden + j];
    let o = gates[s * four + 3 * hidden + j];
    let tc = F::tanh(cs[s * hidden + j]);
    let cp = cps[s * hidden + j];
    // h_out = m·h' + (1−m)·h_prev, c_out likewise: the new state's share is m.
    let dhn = dh * m;
    let dcn = dc_in * m + dhn * o * (F::new(1.0) - tc * tc);
    let di = dcn * g * i * (F::new(1.0) - i);
    let df = dcn * cp * f * (F::new(1.0) - f);
    let dgg = dcn * i * (F::new(1.0) - g * g);
    let d_o = dhn * tc * o * (F::new(1.0) - o);
    carry_out[pos] = dh * keep;
    dc_out[pos] = dcn * f + dc_in * keep;
    let s0 = s * four + j;
    dgates[s0] = di;
    dgates[s0 + hidden] = df;
    dgates[s0 + 2 * hidden] = dgg;
    dgates[s0 + 3 * hidden] = d_o;
    dxw[x0] = di;
    dxw[x0 + hidden] = df;
    dxw[x0 + 2 * hidden] = dgg;
    dxw[x0 + 3 * hidden] = d_o;
}
