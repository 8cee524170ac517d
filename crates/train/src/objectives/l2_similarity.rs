//! `l2_similarity`: α times the squared L2 distance between the sentence encodings of
//! aligned sentences, averaged over the batch (Yu et al. 2018, §2.2: the similarity loss
//! added to the translation losses, `L = L_NMT + α·Σ‖h(s) − h(t)‖²`).

use burn::tensor::backend::Backend;
use burn::tensor::Tensor;

/// `α · mean_i ‖a_i − b_i‖²` for `a, b: [batch, dim]`.
pub fn l2_similarity<B: Backend>(a: Tensor<B, 2>, b: Tensor<B, 2>, alpha: f64) -> Tensor<B, 1> {
    let [batch, _] = a.dims();
    let d = a - b;
    (d.clone() * d).sum() * (alpha / batch.max(1) as f64)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::objectives::gradcheck::{check_gradient, F64};
    use burn::backend::NdArray;
    use burn::tensor::TensorData;

    type B = NdArray<f32>;

    #[test]
    fn hand_checked_value() {
        let dev = Default::default();
        let a = Tensor::<B, 2>::from_data(TensorData::new(vec![1f32, 2., 0., 0.], [2, 2]), &dev);
        let b = Tensor::<B, 2>::from_data(TensorData::new(vec![1f32, 0., 3., 4.], [2, 2]), &dev);
        // ‖(0, 2)‖² = 4, ‖(−3, −4)‖² = 25: mean 14.5, times α = 0.5.
        let v = l2_similarity(a, b, 0.5).into_scalar();
        assert!((v - 7.25).abs() < 1e-6, "{v}");
    }

    #[test]
    fn gradient_matches_finite_differences() {
        let dev = Default::default();
        let b = Tensor::<F64, 2>::from_data(
            TensorData::new(vec![0.3f32, -0.2, 0.5, 0.1, 0.0, -0.7], [2, 3]),
            &dev,
        );
        check_gradient::<2>([2, 3], 9, |x| l2_similarity(x, b.clone(), 0.7));
    }
}
