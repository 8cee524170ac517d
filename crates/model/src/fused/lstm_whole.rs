//! The masked LSTM recurrence of every time step in one kernel launch forwards and one
//! backwards (a "persistent" recurrence, as cuDNN's `CUDNN_RNN_ALGO_PERSIST_*` and burn's own
//! CTC kernel keep their time loop inside one launch), for [`crate::fused::lstm_cube`].
//!
//! Why: [`lstm_cube`](crate::fused::lstm_cube)'s step-by-step path launches a recurrent
//! product and a gate kernel per time step each way, so an LSTM step's launches grew with the
//! batch's longest sentence (issue 59). The recurrence couples the time steps of one
//! sentence only, never two sentences, so a cube can carry a few rows of the batch (one
//! direction) through every time step alone: its units share the rows' hidden state
//! (forwards) or gate gradients (backwards) in shared memory, compute `h·W_hh` (or
//! `dG·W_hhᵀ`) for the hidden units they own and apply the gates, and meet at a barrier
//! (`sync_cube`) between steps. Nothing crosses cubes, so no grid-wide barrier is needed.
//!
//! The arithmetic of a gate, the cell, the mask blend and their gradients is one function
//! each way that the step kernels call too (`lstm_cell.rs`); only the recurrent product's
//! summation order is its own (over `k` in order, where burn's autotuned matmul may tile
//! it), so the two paths agree to float rounding. What the backward pass reads is saved in the same layouts, and
//! `dW_hh` is still one batched product over every step after the recurrence.
//!
//! A unit owns hidden units `j ≡ unit (mod units)` of every row of its cube, so each value it
//! reads back from global memory within the kernel (the previous step's cell, its own
//! gradients) is one it wrote itself; only shared memory passes values between units.
//!
//! Cost on a GPU: `W_hh` is read once per cube and step (from cache), where a matrix product
//! tiles it over far more rows, so the rows per cube grow with the batch (up to what shared
//! memory holds) to bound that. A small batch (the defaults' 1,000 tokens) leaves a GPU
//! waiting on launches, which this removes; a large one (the `gpu` and `paper` profiles) fills
//! it with the step-by-step path's matrix products, whose traffic this would multiply. So by
//! default ([`Recurrence::Auto`]) a batch takes this path while a cube needs at most
//! [`AUTO_MAX_ROWS`] rows to give every multiprocessor two cubes, and steps otherwise: a rule
//! from that arithmetic, not yet timed on a GPU (issue 59). `HARNESS_LSTM_RECURRENCE=whole`
//! or `steps` ([`Recurrence::from_env`]) forces one path, so that the two can be measured
//! against each other on one GPU (`scripts/gpu-bench.sh` does). On lavapipe (a CPU) this path
//! launches far fewer kernels but is slower: LASER's default took 110–130 s for 20 steps
//! against 83–88 s step by step (2-core AMD EPYC), its scalar loads against the autotuned
//! product's vector ones.

use crate::fused::lstm_cell::{cell_backward, cell_forward, time_of};
use cubecl::prelude::*;

/// Which kernels run an LSTM recurrence on a GPU backend.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Recurrence {
    /// This module's kernels for a batch small enough ([`Tiling::plan`]), the step-by-step
    /// path for a larger one.
    Auto,
    /// Every time step in one launch each way (this module), wherever shared memory holds
    /// enough; the step-by-step path otherwise.
    Whole,
    /// Two launches per time step each way (`lstm_cube.rs`).
    Steps,
}

impl Recurrence {
    /// The recurrence [`crate::gpu::LSTM_RECURRENCE_VAR`] asks for (read once per process);
    /// `Auto` when unset. The command layer refuses any other value before a run starts
    /// ([`crate::gpu::check_variables`]).
    pub(crate) fn from_env() -> Recurrence {
        static CHOSEN: std::sync::OnceLock<Recurrence> = std::sync::OnceLock::new();
        let chosen = *CHOSEN.get_or_init(|| match crate::gpu::requested_lstm_recurrence() {
            Ok(Some("whole")) => Recurrence::Whole,
            Ok(Some("steps")) => Recurrence::Steps,
            _ => Recurrence::Auto,
        });
        #[cfg(test)]
        if let Some(forced) = FORCED.with(|f| f.get()) {
            return forced;
        }
        chosen
    }
}

#[cfg(test)]
thread_local! {
    /// Tests run both paths in one process: the recurrence this thread takes, if forced.
    static FORCED: std::cell::Cell<Option<Recurrence>> = const { std::cell::Cell::new(None) };
}

/// Runs `work` with this thread's LSTM recurrences forced to `kind` (tests only).
#[cfg(test)]
pub(crate) fn forcing<T>(kind: Recurrence, work: impl FnOnce() -> T) -> T {
    FORCED.with(|f| f.set(Some(kind)));
    let out = work();
    FORCED.with(|f| f.set(None));
    out
}

/// How one whole-recurrence launch is laid out: `rows` batch rows per cube, `units` units
/// per cube (each owning the hidden units congruent to it).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Tiling {
    pub rows: usize,
    pub units: usize,
}

/// Most rows a cube carries: its accumulators (four per row forwards) live in registers.
const MAX_ROWS: usize = 16;
/// Most rows a cube carries under [`Recurrence::Auto`]: a batch that needs more to give every
/// multiprocessor two cubes is large enough for the step-by-step path's matrix products.
pub(crate) const AUTO_MAX_ROWS: usize = 4;
/// Most units per cube (every backend allows 256).
const MAX_UNITS: usize = 256;

impl Tiling {
    /// The tiling for `dirs · batch` rows of `hidden` units where a cube's shared memory holds
    /// `shared_bytes` and `parallel` cubes run at once (streaming multiprocessors, cores);
    /// `None` when not even one row's `width · hidden` floats fit, or (unless `forced`) when
    /// the batch wants more than [`AUTO_MAX_ROWS`] rows a cube: the caller steps instead.
    /// Rows per cube: a power of two, so that a batch of any size compiles one of five
    /// kernels, about `dirs · batch / (2 · parallel)` so that every multiprocessor has two
    /// cubes while `W_hh` is read by as few as the batch allows.
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn plan(
        dirs: usize,
        batch: usize,
        hidden: usize,
        width: usize,
        shared_bytes: usize,
        parallel: usize,
        max_units: usize,
        forced: bool,
    ) -> Option<Tiling> {
        let fit = shared_bytes / (width * hidden * std::mem::size_of::<f32>());
        if fit == 0 || hidden == 0 || batch == 0 {
            return None;
        }
        let want = (dirs * batch).div_ceil(2 * parallel.max(1));
        if !forced && want > AUTO_MAX_ROWS {
            return None;
        }
        let mut rows = 1;
        while rows < want && rows * 2 <= fit.min(MAX_ROWS) {
            rows *= 2;
        }
        let units = hidden.min(MAX_UNITS).min(max_units.max(1));
        Some(Tiling { rows, units })
    }
}

/// Every forward step of `rows` batch rows of one direction (`CUBE_POS_Y`): the tensors and
/// their layouts are `lstm_step_forward`'s (`lstm_cube.rs`), `w` is `W_hh` `[dirs, H, 4H]`.
#[cube(launch)]
#[allow(clippy::too_many_arguments)]
pub(crate) fn lstm_whole_forward<F: Float>(
    xw: &Array<F>,
    w: &Array<F>,
    mask: &Array<F>,
    h0: &Array<F>,
    c0: &Array<F>,
    hs: &mut Array<F>,
    gates: &mut Array<F>,
    cs: &mut Array<F>,
    hps: &mut Array<F>,
    cps: &mut Array<F>,
    steps: usize,
    batch: usize,
    dirs: usize,
    rev0: usize,
    rev1: usize,
    #[comptime] hidden: usize,
    #[comptime] rows: usize,
) {
    let d = CUBE_POS_Y as usize;
    let r0 = CUBE_POS_X as usize * rows;
    let unit = UNIT_POS_X as usize;
    let units = CUBE_DIM_X as usize;
    let rev = if d == 0 { rev0 } else { rev1 };
    let four = 4 * hidden;
    // The rows' hidden states of the step before, `[rows, hidden]`.
    let mut h_prev = SharedMemory::<F>::new(rows * hidden);
    let mut j = unit;
    while j < hidden {
        #[unroll]
        for r in 0..rows {
            let b = r0 + r;
            let mut v = F::new(0.0);
            if b < batch {
                v = h0[(d * batch + b) * hidden + j];
            }
            h_prev[r * hidden + j] = v;
        }
        j += units;
    }
    sync_cube();
    for step in 0..steps {
        let t = time_of(step, steps, rev);
        let mut j = unit;
        while j < hidden {
            // h·W_hh for this unit's column of each gate, every row at once: each weight
            // read serves every row.
            let mut acc = Array::<F>::new(4 * rows);
            #[unroll]
            for a in 0..4 * rows {
                acc[a] = F::new(0.0);
            }
            for k in 0..hidden {
                let w0 = (d * hidden + k) * four + j;
                let wi = w[w0];
                let wf = w[w0 + hidden];
                let wg = w[w0 + 2 * hidden];
                let wo = w[w0 + 3 * hidden];
                #[unroll]
                for r in 0..rows {
                    let hv = h_prev[r * hidden + k];
                    acc[4 * r] += hv * wi;
                    acc[4 * r + 1] += hv * wf;
                    acc[4 * r + 2] += hv * wg;
                    acc[4 * r + 3] += hv * wo;
                }
            }
            #[unroll]
            for r in 0..rows {
                let b = r0 + r;
                if b < batch {
                    let s = (d * steps + step) * batch + b;
                    // The previous cell: this unit's own write of the step before.
                    let cp = if step == 0 {
                        c0[(d * batch + b) * hidden + j]
                    } else {
                        cs[(s - batch) * hidden + j]
                    };
                    cell_forward::<F>(
                        xw,
                        (t * batch + b) * dirs * four + d * four + j,
                        acc[4 * r],
                        acc[4 * r + 1],
                        acc[4 * r + 2],
                        acc[4 * r + 3],
                        h_prev[r * hidden + j],
                        cp,
                        mask[t * batch + b],
                        hs,
                        (t * batch + b) * dirs * hidden + d * hidden + j,
                        gates,
                        cs,
                        hps,
                        cps,
                        s,
                        j,
                        hidden,
                    );
                }
            }
            j += units;
        }
        // Every unit has read this step's states: the next ones may replace them.
        sync_cube();
        let mut j = unit;
        while j < hidden {
            #[unroll]
            for r in 0..rows {
                let b = r0 + r;
                if b < batch {
                    h_prev[r * hidden + j] = hs[(t * batch + b) * dirs * hidden + d * hidden + j];
                }
            }
            j += units;
        }
        sync_cube();
    }
}

/// `dG·W_hhᵀ` for hidden unit `j` of every row of a cube: the gate gradients `dg`
/// (`[rows, 4H]`) against column `j` of direction `d`'s `W_hhᵀ`, every row at once (each
/// weight read serves every row).
#[cube]
fn recurrent_gradient<F: Float>(
    dg: &SharedMemory<F>,
    w_t: &Array<F>,
    d: usize,
    j: usize,
    #[comptime] hidden: usize,
    #[comptime] rows: usize,
) -> Array<F> {
    let four = 4 * hidden;
    let mut acc = Array::<F>::new(rows);
    #[unroll]
    for r in 0..rows {
        acc[r] = F::new(0.0);
    }
    for n in 0..four {
        let wv = w_t[(d * four + n) * hidden + j];
        #[unroll]
        for r in 0..rows {
            acc[r] += dg[r * four + n] * wv;
        }
    }
    acc
}

/// Back-propagation through every step of `rows` batch rows of one direction: the tensors
/// and layouts are `lstm_step_backward`'s, `w_t` is `W_hhᵀ` `[dirs, 4H, H]`. `dh0` carries
/// the hidden gradient a padded step passes straight through and `dc0` the cell's, each
/// unit its own, until the last step makes them the initial states' gradients.
#[cube(launch)]
#[allow(clippy::too_many_arguments)]
pub(crate) fn lstm_whole_backward<F: Float>(
    dhs: &Array<F>,
    gates: &Array<F>,
    cs: &Array<F>,
    cps: &Array<F>,
    mask: &Array<F>,
    w_t: &Array<F>,
    dgates: &mut Array<F>,
    dxw: &mut Array<F>,
    dh0: &mut Array<F>,
    dc0: &mut Array<F>,
    steps: usize,
    batch: usize,
    dirs: usize,
    rev0: usize,
    rev1: usize,
    #[comptime] hidden: usize,
    #[comptime] rows: usize,
) {
    let d = CUBE_POS_Y as usize;
    let r0 = CUBE_POS_X as usize * rows;
    let unit = UNIT_POS_X as usize;
    let units = CUBE_DIM_X as usize;
    let rev = if d == 0 { rev0 } else { rev1 };
    let four = 4 * hidden;
    // The gate gradients of the step processed before (the next in time), `[rows, 4H]`.
    let mut dg_next = SharedMemory::<F>::new(rows * four);
    let mut a = unit;
    while a < rows * four {
        dg_next[a] = F::new(0.0);
        a += units;
    }
    sync_cube();
    for k in 0..steps {
        let step = steps - 1 - k;
        let t = time_of(step, steps, rev);
        let mut j = unit;
        while j < hidden {
            // The step after's dG·W_hhᵀ (zeros before the first step: added only from k 1).
            let acc = recurrent_gradient::<F>(&dg_next, w_t, d, j, hidden, rows);
            #[unroll]
            for r in 0..rows {
                let b = r0 + r;
                if b < batch {
                    let pos = (d * batch + b) * hidden + j;
                    let mut dh = dhs[(t * batch + b) * dirs * hidden + d * hidden + j];
                    let mut dc_in = F::new(0.0);
                    if k > 0 {
                        dh += acc[r] + dh0[pos];
                        dc_in = dc0[pos];
                    }
                    cell_backward::<F>(
                        dh,
                        dc_in,
                        mask[t * batch + b],
                        gates,
                        cs,
                        cps,
                        (d * steps + step) * batch + b,
                        j,
                        hidden,
                        dgates,
                        dxw,
                        (t * batch + b) * dirs * four + d * four + j,
                        dh0,
                        dc0,
                        pos,
                    );
                }
            }
            j += units;
        }
        // Every unit has read the step after's gradients: this step's may replace them.
        sync_cube();
        let mut j = unit;
        while j < hidden {
            #[unroll]
            for r in 0..rows {
                let b = r0 + r;
                if b < batch {
                    let s0 = ((d * steps + step) * batch + b) * four + j;
                    dg_next[r * four + j] = dgates[s0];
                    dg_next[r * four + hidden + j] = dgates[s0 + hidden];
                    dg_next[r * four + 2 * hidden + j] = dgates[s0 + 2 * hidden];
                    dg_next[r * four + 3 * hidden + j] = dgates[s0 + 3 * hidden];
                }
            }
            j += units;
        }
        sync_cube();
    }
    // The initial hidden state's gradient: the first step's dG·W_hhᵀ plus what padding carried.
    let mut j = unit;
    while j < hidden {
        let acc = recurrent_gradient::<F>(&dg_next, w_t, d, j, hidden, rows);
        #[unroll]
        for r in 0..rows {
            let b = r0 + r;
            if b < batch {
                let pos = (d * batch + b) * hidden + j;
                dh0[pos] = acc[r] + dh0[pos];
            }
        }
        j += units;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rows_grow_with_the_batch_in_powers_of_two_up_to_what_shared_memory_holds() {
        let plan = |dirs, batch, hidden, width, parallel, max_units, forced| {
            Tiling::plan(
                dirs,
                batch,
                hidden,
                width,
                48 * 1024,
                parallel,
                max_units,
                forced,
            )
        };
        // A 1×256 BiLSTM's batch of 100 sentences on 132 multiprocessors: a row per cube.
        let t = plan(2, 100, 256, 4, 132, 1024, false).expect("fits");
        assert_eq!(
            t,
            Tiling {
                rows: 1,
                units: 256
            }
        );
        // 500 sentences want 4 rows a cube (1,000 rows over 264 cubes): still this path.
        assert_eq!(
            plan(2, 500, 256, 1, 132, 1024, false).map(|t| t.rows),
            Some(4)
        );
        // Sixteen times the default batch: 3,200 rows want 16 a cube, the step-by-step
        // path's matrix products by default; forced, the backward pass's 4H floats a row
        // fit 12 times in 48 KiB: 8.
        assert_eq!(plan(2, 1600, 256, 4, 132, 1024, false), None);
        assert_eq!(
            plan(2, 1600, 256, 4, 132, 1024, true).map(|t| t.rows),
            Some(8)
        );
        assert_eq!(
            plan(2, 1600, 256, 1, 132, 1024, true).map(|t| t.rows),
            Some(16)
        );
        // A unit per hidden unit up to the device's limit.
        assert_eq!(plan(1, 3, 5, 4, 2, 1024, false).map(|t| t.units), Some(5));
        assert_eq!(
            plan(1, 3, 300, 4, 2, 128, false).map(|t| t.units),
            Some(128)
        );
        // A hidden size whose one row does not fit (48 KiB holds 3,072 floats of four
        // gates): no tiling, forced or not (the caller steps); nor for an empty batch.
        assert_eq!(plan(2, 8, 4096, 4, 2, 1024, true), None);
        assert_eq!(plan(2, 0, 16, 4, 2, 1024, true), None);
    }
}
