//! `seq2seq_ce`: teacher-forced cross-entropy over the target tokens, padding masked out,
//! averaged over real target tokens, with optional label smoothing (Szegedy et al. 2016:
//! the target distribution puts `1 − ε` on the gold token and `ε` spread uniformly over the
//! vocabulary). LASER §3 and seq2seq+similarity §2.1 train their decoders with it.

use crate::batch::DecoderSide;
use crate::data::Directions;
use crate::objectives::check::param;
use crate::objectives::{CheckContext, ExampleKind, Loss, Objective, PairOptions};
use crate::step::{Side, Step};
use crate::TrainError;
use harness_model::fused::device_nodes::log_softmax;
use burn::tensor::backend::{AutodiffBackend, Backend};
use burn::tensor::{Int, Tensor};
use harness_model::decoder::LstmDecoder;
use harness_model::output_ce::{fused_output_ce, OutputCe};
use harness_recipe::check::Finding;
use harness_recipe::de::Seg;
use serde::{Deserialize, Serialize};

/// Translation cross-entropy through the decoder (LASER; seq2seq).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Seq2seqCe {
    /// Train both directions of every pair in each batch (seq2seq §2.1).
    #[serde(default)]
    pub both_directions: bool,
    #[serde(default)]
    pub label_smoothing: f64,
    /// Fraction of the pairs decoded from the target sentence itself (target → target)
    /// instead of from its translation. Not in LASER: with a small budget it gives the
    /// encoder of the target language (English) as much training as the others, so that
    /// a sentence and its translation must feed the shared decoder the same content.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub autoencode: f64,
}

/// Leaves an unset `autoencode` out of the resolved recipe, so that the fingerprints of
/// recipes written before it existed do not change.
fn is_zero(x: &f64) -> bool {
    *x == 0.0
}

impl Objective for Seq2seqCe {
    const NAME: &'static str = "seq2seq_ce";
    const EXAMPLES: ExampleKind = ExampleKind::Pairs;
    const USES_DECODER: bool = true;

    fn check(&self, cx: &CheckContext<'_>) -> Vec<Finding> {
        let mut out = Vec::new();
        if cx
            .recipe
            .model
            .as_ref()
            .is_some_and(|m| m.decoder.is_none())
        {
            out.push(Finding::new(
                vec![Seg::Key("objective".into())],
                "`seq2seq_ce` needs `model.decoder`",
            ));
        }
        if !(0.0..1.0).contains(&self.label_smoothing) {
            out.push(Finding::new(
                param("label_smoothing"),
                format!("must be in [0, 1), found {}", self.label_smoothing),
            ));
        }
        if !(0.0..=1.0).contains(&self.autoencode) {
            out.push(Finding::new(
                param("autoencode"),
                format!("must be in [0, 1], found {}", self.autoencode),
            ));
        }
        if self.autoencode > 0.0 && self.both_directions {
            out.push(Finding::new(
                param("autoencode"),
                "`autoencode` applies to one-direction training: drop it or `both_directions`",
            ));
        }
        out
    }

    fn pair_options(&self) -> PairOptions {
        if self.both_directions {
            PairOptions {
                directions: Directions::Both,
                autoencode: 0.0,
            }
        } else {
            PairOptions {
                directions: Directions::OneInto,
                autoencode: self.autoencode,
            }
        }
    }
}

impl Seq2seqCe {
    /// Teacher-forced cross-entropy of decoding `side` from the sentence vectors `from`;
    /// counts the decoder's input tokens.
    fn decode<B: AutodiffBackend>(
        &self,
        decoder: &LstmDecoder<B>,
        from: Tensor<B, 2>,
        side: &DecoderSide<B>,
        step: &mut Step<'_, B>,
    ) -> Tensor<B, 1> {
        let states = decoder.states(
            from,
            side.language.clone(),
            side.input.ids.clone(),
            side.input.mask.clone(),
            Some(step.noise()),
        );
        step.add_tokens(side.input.tokens);
        decoder_ce(
            decoder,
            states,
            side.output.clone(),
            side.input.mask.clone(),
            self.label_smoothing,
        )
    }
}

impl Loss for Seq2seqCe {
    /// The source decoded into the target (and, with `both_directions`, the target into
    /// the source), teacher-forced.
    fn loss<B: AutodiffBackend>(&self, step: &mut Step<'_, B>) -> Result<Tensor<B, 1>, TrainError> {
        let decoder = step.decoder()?;
        let source = step.encode(Side::First)?;
        let b = step.pair_batch()?.clone();
        let mut loss = self.decode(decoder, source.sentence, &b.to_tgt, step);
        if self.both_directions {
            let target = step.encode(Side::Second)?;
            loss = loss + self.decode(decoder, target.sentence, &b.to_src, step);
        }
        Ok(loss)
    }

    /// The real target tokens of the decoded side (both sides with `both_directions`: then
    /// the loss is a sum of two means, and a shard's weight is exact only when its share of
    /// each side's tokens is the same).
    fn averaged_over<B: AutodiffBackend>(&self, step: &mut Step<'_, B>) -> Result<f64, TrainError> {
        let b = step.pair_batch()?;
        let mut n = b.to_tgt.input.tokens;
        if self.both_directions {
            n += b.to_src.input.tokens;
        }
        Ok(n as f64)
    }
}

/// Mean token cross-entropy of `logits: [batch, time, vocab]` against `targets:
/// [batch, time]` where `mask: [batch, time]` is 1; `smoothing` is ε.
pub fn seq2seq_ce<B: Backend>(
    logits: Tensor<B, 3>,
    targets: Tensor<B, 2, Int>,
    mask: Tensor<B, 2>,
    smoothing: f64,
) -> Tensor<B, 1> {
    let [batch, time, vocab] = logits.dims();
    let n = batch * time;
    let logp = log_softmax(logits.reshape([n, vocab]));
    let gold = logp
        .clone()
        .gather(1, targets.reshape([n, 1]))
        .reshape([n])
        .neg();
    let per_token = if smoothing > 0.0 {
        let uniform = logp.mean_dim(1).reshape([n]).neg();
        gold * (1.0 - smoothing) + uniform * smoothing
    } else {
        gold
    };
    let mask = mask.reshape([n]);
    let count = mask.clone().sum().clamp_min(1.0);
    (per_token * mask).sum() / count
}

/// [`seq2seq_ce`] of the decoder's logits for its top `states: [batch, time, hidden]`: the
/// projection and the loss as one fused operation on the CPU backend (padding skipped),
/// burn's ops elsewhere. The same value either way (tested in `harness_model::output_ce`).
pub fn decoder_ce<B: Backend>(
    decoder: &LstmDecoder<B>,
    states: Tensor<B, 3>,
    targets: Tensor<B, 2, Int>,
    mask: Tensor<B, 2>,
    smoothing: f64,
) -> Tensor<B, 1> {
    let input = OutputCe {
        hidden: states,
        weight: decoder.output.weight.val(),
        bias: decoder.output.bias.as_ref().map(|b| b.val()),
        targets,
        mask,
        smoothing,
    };
    match fused_output_ce(input) {
        Ok(loss) => loss,
        Err(i) => seq2seq_ce(decoder.project(i.hidden), i.targets, i.mask, i.smoothing),
    }
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
        // Two positions over a 2-token vocabulary; the second is padding.
        // Position 1: logits (0, ln 3) → p = (1/4, 3/4); gold token 1 → −ln(3/4).
        let logits = Tensor::<B, 3>::from_data(
            TensorData::new(vec![0.0f32, 3f32.ln(), 5.0, -5.0], [1, 2, 2]),
            &dev,
        );
        let targets = Tensor::<B, 2, Int>::from_data(TensorData::new(vec![1i64, 1], [1, 2]), &dev);
        let mask = Tensor::<B, 2>::from_data(TensorData::new(vec![1f32, 0.0], [1, 2]), &dev);
        let v = seq2seq_ce(logits.clone(), targets.clone(), mask.clone(), 0.0).into_scalar();
        assert!((v - (4.0f32 / 3.0).ln()).abs() < 1e-6, "{v}");
        // ε = 0.2: 0.8·(−ln 3/4) + 0.2·mean(−ln 1/4, −ln 3/4).
        let want = 0.8 * (4.0f32 / 3.0).ln() + 0.2 * 0.5 * (4f32.ln() + (4.0f32 / 3.0).ln());
        let v = seq2seq_ce(logits, targets, mask, 0.2).into_scalar();
        assert!((v - want).abs() < 1e-6, "{v} vs {want}");
    }

    #[test]
    fn gradient_matches_finite_differences() {
        let dev = Default::default();
        let targets =
            Tensor::<F64, 2, Int>::from_data(TensorData::new(vec![2i64, 0, 1, 1], [2, 2]), &dev);
        let mask =
            Tensor::<F64, 2>::from_data(TensorData::new(vec![1.0f32, 1.0, 1.0, 0.0], [2, 2]), &dev);
        for eps in [0.0, 0.1] {
            check_gradient::<3>([2, 2, 3], 5, |x| {
                seq2seq_ce(x, targets.clone(), mask.clone(), eps)
            });
        }
    }
}
