//! Both directions of a BiLSTM layer as one operation on the CPU backend's autodiff, with its
//! own backward pass: cuDNN's bidirectional mode, for training.
//!
//! Why: run as two [`crate::fused::lstm`] operations, a BiLSTM layer copied its input out of
//! its tensor once per direction, ran the directions one after the other, joined their
//! outputs with burn's `cat` (whose backward pass slices the gradient apart again) and summed
//! the two input gradients as a third operation, all on the calling thread while the
//! other core waited. A `perf` profile of the LASER default's training (2 cores) found the
//! main thread working alone for 38 % of a step, a quarter of it in those copies. Here the
//! input is copied once, both directions' row blocks run in one parallel loop, their hidden
//! states are written side by side (`[time, batch, 2H]`) in parallel, and the backward pass
//! reads the output's gradient in place and does each direction's products at the same time.
//!
//! The arithmetic is `fused::lstm`'s, call for call: the same projections, the same row
//! blocks through the same recurrence, `dW_hh` summed over the blocks in the same order, and
//! the input's gradient the sum of the two directions' (as burn's gradient accumulation adds
//! them). So training takes the same steps to the bit (tested below).

use crate::fused::lstm::{
    backward_block, forward_block, host_values, input_grads, merge_grads, project, register_grad,
    row_blocks, to_cpu, with_values, BiInput, BlockTrace, Dims, Forward, Grads, Recurrence,
};
use burn::backend::autodiff::checkpoint::base::Checkpointer;
use burn::backend::autodiff::checkpoint::strategy::NoCheckpointing;
use burn::backend::autodiff::grads::Gradients;
use burn::backend::autodiff::ops::{Backward, Ops, OpsKind};
use burn::backend::{Autodiff, NdArray};
use burn::tensor::backend::Backend;
use burn::tensor::{Tensor, TensorPrimitive};
use harness_kernels::PackedB;
use rayon::prelude::*;
use std::any::Any;
use std::sync::Arc;

type Cpu = NdArray<f32>;
type CpuAd = Autodiff<Cpu>;

/// Both directions' hidden states side by side (`[time, batch, 2H]`, the forward
/// direction's first) when `B` is burn-ndarray's autodiff (f32); `Err(input)` unchanged on
/// any other backend. The caller ([`crate::lstm::MaskedLstm::forward_bi_tm`]) checks that
/// the input is not empty and that both directions are as wide.
pub(crate) fn bi_layer<B: Backend>(input: BiInput<B>) -> Result<Tensor<B, 3>, BiInput<B>> {
    let any: Box<dyn Any> = Box::new(input);
    match any.downcast::<BiInput<CpuAd>>() {
        Ok(input) => {
            let out: Box<dyn Any> = Box::new(autodiff_bi(*input));
            Ok(*out
                .downcast::<Tensor<B, 3>>()
                .expect("the same backend type"))
        }
        Err(other) => Err(*other
            .downcast::<BiInput<B>>()
            .expect("the input's own type")),
    }
}

/// What the backward pass needs of the forward pass: per direction (forward first) its
/// weights and its row blocks' arrays (block-local, as [`forward_block`] leaves them).
#[derive(Debug, Clone)]
struct Saved {
    dims: Dims,
    blocks: Arc<Vec<(usize, usize)>>,
    parts: Arc<[Vec<Forward>; 2]>,
    /// `[time, batch, d_input]`, `[time, batch]`.
    x: Arc<Vec<f32>>,
    mask: Arc<Vec<f32>>,
    w_ih: Arc<[Vec<f32>; 2]>,
    w_hh: Arc<[Vec<f32>; 2]>,
}

/// The (direction, block) pairs of a layer, forward direction first.
fn tasks(blocks: &[(usize, usize)]) -> Vec<(usize, usize)> {
    (0..2)
        .flat_map(|dir| (0..blocks.len()).map(move |b| (dir, b)))
        .collect()
}

/// Splits per-task results (in [`tasks`]' order) into the two directions'.
fn per_direction<T>(mut all: Vec<T>, blocks: usize) -> [Vec<T>; 2] {
    let reverse = all.split_off(blocks);
    [all, reverse]
}

fn autodiff_bi(input: BiInput<CpuAd>) -> Tensor<CpuAd, 3> {
    let BiInput {
        x,
        w_ih,
        bias,
        w_hh,
        mask,
    } = input;
    let [time, batch, d_input] = x.dims();
    let hidden = w_hh[0].dims()[0];
    let d = Dims {
        time,
        batch,
        d_input,
        hidden,
    };
    let device = x.device();
    let has_bias = [bias[0].is_some(), bias[1].is_some()];
    // An absent bias takes part as an untracked placeholder: it gets no gradient.
    let bias = bias.map(|b| {
        b.unwrap_or_else(|| Tensor::zeros([0], &device))
            .into_primitive()
            .tensor()
    });
    let x = x.into_primitive().tensor();
    let w_ih = w_ih.map(|w| w.into_primitive().tensor());
    let w_hh = w_hh.map(|w| w.into_primitive().tensor());
    // The mask is a constant: no gradient flows to it.
    let mask = host_values(&mask.into_primitive().tensor().primitive);
    let x_host = host_values(&x.primitive);
    let w_ih_host = [0, 1].map(|i| host_values(&w_ih[i].primitive));
    let w_hh_host = [0, 1].map(|i| host_values(&w_hh[i].primitive));
    let bias_host = [0, 1].map(|i| has_bias[i].then(|| host_values(&bias[i].primitive)));
    let xw = {
        let one = |i: usize| project(&x_host, &w_ih_host[i], bias_host[i].as_deref(), None, d);
        let (f, r) = rayon::join(|| one(0), || one(1));
        [f, r]
    };
    let (packed_f, packed_r) = rayon::join(
        || PackedB::new(hidden, 4 * hidden, &w_hh_host[0], false),
        || PackedB::new(hidden, 4 * hidden, &w_hh_host[1], false),
    );
    let packed = [packed_f, packed_r];
    let zeros = vec![0.0f32; batch * hidden];
    let blocks = row_blocks(batch);
    let parts: Vec<Forward> = tasks(&blocks)
        .par_iter()
        .map(|&(dir, b)| {
            let layer = Recurrence {
                xw: &xw[dir],
                w: &packed[dir],
                mask: &mask,
                h0: &zeros,
                c0: &zeros,
                d,
                reverse: dir == 1,
                states_only: false,
            };
            forward_block(&layer, blocks[b])
        })
        .collect();
    let parts = per_direction(parts, blocks.len());
    let out = to_cpu(side_by_side(&parts, &blocks, d), [time, batch, 2 * hidden])
        .into_primitive()
        .tensor();
    let prep = BiBackward
        .prepare::<NoCheckpointing>([
            x.node.clone(),
            w_ih[0].node.clone(),
            w_ih[1].node.clone(),
            bias[0].node.clone(),
            bias[1].node.clone(),
            w_hh[0].node.clone(),
            w_hh[1].node.clone(),
        ])
        .compute_bound()
        .stateful();
    let result = match prep {
        OpsKind::Tracked(prep) => prep.finish(
            Saved {
                dims: d,
                blocks: Arc::new(blocks),
                parts: Arc::new(parts),
                x: Arc::new(x_host),
                mask: Arc::new(mask),
                w_ih: Arc::new(w_ih_host),
                w_hh: Arc::new(w_hh_host),
            },
            out,
        ),
        OpsKind::UnTracked(prep) => prep.finish(out),
    };
    Tensor::from_primitive(TensorPrimitive::Float(result))
}

/// Both directions' hidden states, `[time, batch, 2H]`: row `(t, b)` is the forward
/// direction's state then the reverse one's. Steps are written in parallel.
fn side_by_side(parts: &[Vec<Forward>; 2], blocks: &[(usize, usize)], d: Dims) -> Vec<f32> {
    let h = d.hidden;
    let mut out = vec![0.0f32; d.time * d.batch * 2 * h];
    if out.is_empty() {
        return out;
    }
    out.par_chunks_mut(d.batch * 2 * h)
        .enumerate()
        .for_each(|(t, step)| {
            for (dir, dir_parts) in parts.iter().enumerate() {
                for (part, &(r0, r1)) in dir_parts.iter().zip(blocks) {
                    let rows = r1 - r0;
                    let src = &part.hs[t * rows * h..(t + 1) * rows * h];
                    for (j, state) in src.chunks_exact(h).enumerate() {
                        let at = (r0 + j) * 2 * h + dir * h;
                        step[at..at + h].copy_from_slice(state);
                    }
                }
            }
        });
    out
}

#[derive(Debug)]
struct BiBackward;

impl Backward<Cpu, 7> for BiBackward {
    type State = Saved;

    fn backward(self, ops: Ops<Saved, 7>, grads: &mut Gradients, _: &mut Checkpointer) {
        let s = ops.state;
        let d = s.dims;
        let (h, four_h) = (d.hidden, 4 * d.hidden);
        // Read in place: the gradient of the output arrives in its own layout.
        let dout = grads.consume::<Cpu>(&ops.node);
        let [p_x, p_w_ih_f, p_w_ih_r, p_bias_f, p_bias_r, p_w_hh_f, p_w_hh_r] =
            ops.parents.map(|p| p.map(|n| n.id));
        let (packed_f, packed_r) = rayon::join(
            || PackedB::new(four_h, h, &s.w_hh[0], true),
            || PackedB::new(four_h, h, &s.w_hh[1], true),
        );
        let packed = [packed_f, packed_r];
        let zeros = vec![0.0f32; d.batch * h];
        let parts: Vec<Grads> = with_values(&dout, |dhs| {
            tasks(&s.blocks)
                .par_iter()
                .map(|&(dir, b)| {
                    let trace = BlockTrace {
                        d,
                        reverse: dir == 1,
                        part: &s.parts[dir][b],
                        block: s.blocks[b],
                        mask: &s.mask,
                        h0: &zeros,
                        c0: &zeros,
                        dhs,
                        width: 2 * h,
                        offset: dir * h,
                    };
                    backward_block(&trace, &packed[dir])
                })
                .collect()
        });
        let [forward, reverse] = per_direction(parts, s.blocks.len());
        let wanted = [
            [p_x.is_some(), p_w_ih_f.is_some(), p_bias_f.is_some()],
            [p_x.is_some(), p_w_ih_r.is_some(), p_bias_r.is_some()],
        ];
        // Each direction's gradients: its blocks' merged, then its input projection's.
        let direction = |dir: usize, parts: Vec<Grads>| {
            let g = merge_grads(parts, &s.blocks, d);
            let [dx, dw_ih, dbias] = input_grads(&g.dxw, &s.x, &s.w_ih[dir], d, wanted[dir]);
            (dx, dw_ih, dbias, g.dw)
        };
        let (f, r) = rayon::join(|| direction(0, forward), || direction(1, reverse));
        // The input feeds both directions: its gradient is their sum.
        let dx = match (f.0, r.0) {
            (Some(mut a), Some(b)) => {
                a.par_iter_mut().zip(&b).for_each(|(a, b)| *a += b);
                Some(a)
            }
            _ => None,
        };
        let input_shape = vec![d.time, d.batch, d.d_input];
        for (id, v, shape) in [
            (p_x, dx, input_shape),
            (p_w_ih_f, f.1, vec![d.d_input, four_h]),
            (p_w_ih_r, r.1, vec![d.d_input, four_h]),
            (p_bias_f, f.2, vec![four_h]),
            (p_bias_r, r.2, vec![four_h]),
            (p_w_hh_f, Some(f.3), vec![h, four_h]),
            (p_w_hh_r, Some(r.3), vec![h, four_h]),
        ] {
            if let Some(v) = v {
                register_grad(grads, id, v, shape);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use crate::lstm::{MaskedLstm, MaskedLstmConfig};
    use burn::backend::{Autodiff, NdArray};
    use burn::tensor::{Tensor, TensorData};

    type CpuAd = Autodiff<NdArray<f32>>;

    fn bits(t: Tensor<NdArray<f32>, 3>) -> Vec<u32> {
        t.into_data()
            .to_vec::<f32>()
            .unwrap()
            .iter()
            .map(|v| v.to_bits())
            .collect()
    }

    fn grad_bits<const D: usize>(t: Option<Tensor<NdArray<f32>, D>>) -> Vec<u32> {
        t.expect("a gradient")
            .into_data()
            .to_vec::<f32>()
            .unwrap()
            .iter()
            .map(|v| v.to_bits())
            .collect()
    }

    /// The bidirectional operation gives the bits of the two directions run one after the
    /// other and concatenated: outputs and every gradient (input, both directions' weights
    /// and biases), over a batch of several row blocks with padding.
    #[test]
    fn both_directions_at_once_equal_one_after_the_other_to_the_bit() {
        let dev = Default::default();
        let (time, batch, d_in, h) = (7, 9, 5, 6);
        let lens = [7usize, 2, 5, 1, 7, 3, 6, 4, 7];
        let make = |reverse: bool, seed: u64| -> MaskedLstm<CpuAd> {
            crate::random::init_uniform(
                MaskedLstmConfig::new(d_in, h)
                    .with_reverse(reverse)
                    .init::<CpuAd>(&dev),
                seed,
                0.5,
            )
        };
        let (fwd, rev) = (make(false, 3), make(true, 4));
        let x0 =
            crate::random::uniform_tensor::<NdArray<f32>, 3>([time, batch, d_in], 1.0, 100, &dev);
        let mask: Vec<f32> = (0..time)
            .flat_map(|t| lens.iter().map(move |&l| if t < l { 1.0 } else { 0.0 }))
            .collect();
        let mask = Tensor::<CpuAd, 2>::from_data(TensorData::new(mask, [time, batch]), &dev);
        let weights =
            crate::random::uniform_tensor::<CpuAd, 3>([time, batch, 2 * h], 1.0, 101, &dev);
        let run = |together: bool| {
            let x = Tensor::<CpuAd, 3>::from_inner(x0.clone()).require_grad();
            let out = if together {
                fwd.forward_bi_tm(&rev, x.clone(), mask.clone())
                    .expect("the CPU's bidirectional operation")
            } else {
                let f = fwd.forward_tm(x.clone(), mask.clone(), None, None);
                let r = rev.forward_tm(x.clone(), mask.clone(), None, None);
                Tensor::cat(vec![f, r], 2)
            };
            let grads = (out.clone() * weights.clone()).sum().backward();
            let mut all = vec![bits(out.inner()), grad_bits(x.grad(&grads))];
            for l in [&fwd, &rev] {
                all.push(grad_bits(l.input.weight.val().grad(&grads)));
                all.push(grad_bits(
                    l.input.bias.as_ref().map(|b| b.val()).unwrap().grad(&grads),
                ));
                all.push(grad_bits(l.hidden.weight.val().grad(&grads)));
            }
            all
        };
        let (together, apart) = (run(true), run(false));
        let names = [
            "output", "dx", "dW_ih f", "db f", "dW_hh f", "dW_ih r", "db r", "dW_hh r",
        ];
        for ((a, b), name) in together.iter().zip(&apart).zip(names) {
            assert_eq!(a, b, "{name}");
        }
    }
}
