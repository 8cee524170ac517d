//! Padding-aware pooling of per-token states into one sentence vector, shared by the
//! encoders: `max` (padded positions are −∞), `mean` (divided by the real length), `last`
//! (the final states a recurrent encoder hands in, else the sum), `cls` (the first position).

use burn::tensor::backend::Backend;
use burn::tensor::Tensor;
use harness_recipe::schema::Pool;

/// Pools `states: [batch, time, d]` (zero at padding) under `mask: [batch, time]`; `finals`
/// are the final states of each direction (`last`), `[batch, d_i]` each.
pub fn pool<B: Backend>(
    kind: Pool,
    states: Tensor<B, 3>,
    mask: Tensor<B, 2>,
    finals: Vec<Tensor<B, 2>>,
) -> Tensor<B, 2> {
    let [batch, _, d] = states.dims();
    match kind {
        Pool::Mean => {
            let len = mask.sum_dim(1); // [batch, 1]
            states.sum_dim(1).reshape([batch, d]) / len
        }
        Pool::Last => {
            if finals.is_empty() {
                states.sum_dim(1).reshape([batch, d])
            } else {
                Tensor::cat(finals, 1)
            }
        }
        Pool::Cls => states.slice([0..batch, 0..1, 0..d]).reshape([batch, d]),
        // One fused pass on the CPU backend (`fused::maxpool`), burn's ops elsewhere.
        Pool::Max => crate::fused::maxpool::max_pool(states, mask),
    }
}
