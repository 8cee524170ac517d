//! Heads on the sentence embedding. So far the MLP classifier that LASER's NLI ablation
//! (§5.2) and XNLI-style training put on pair features `(u, v, |u − v|, u ∗ v)`
//! (InferSent, Conneau et al. 2017).

use crate::random::{dropout, Noise};
use burn::config::Config;
use burn::module::Module;
use burn::nn::{Linear, LinearConfig};
use burn::tensor::activation::{relu, tanh};
use burn::tensor::backend::Backend;
use burn::tensor::Tensor;
use harness_recipe::schema::{Activation, Features, MlpHead};

/// Configuration of an [`Mlp`] head.
#[derive(Config, Debug)]
pub struct MlpConfig {
    /// Sentence embedding size.
    pub d_sentence: usize,
    /// Hidden layer sizes, bottom first.
    pub hidden: Vec<usize>,
    /// Output size (classes).
    pub d_output: usize,
    /// Read a pair of sentences as `(u, v, |u − v|, u ∗ v)`.
    #[config(default = false)]
    pub pair: bool,
    /// `tanh` (default) or `relu`.
    #[config(default = "String::from(\"tanh\")")]
    pub activation: String,
    /// Dropout before every layer (training only).
    #[config(default = 0.0)]
    pub dropout: f64,
}

/// Feed-forward head.
#[derive(Module, Debug)]
pub struct Mlp<B: Backend> {
    /// Layers, bottom first; the last one gives the logits.
    pub layers: Vec<Linear<B>>,
    /// Pair features.
    pub pair: bool,
    /// Activation name.
    pub activation: String,
    /// Dropout probability.
    pub dropout: f64,
}

impl MlpConfig {
    /// The configuration a recipe's `mlp` head describes (`classes` required).
    pub fn from_recipe(d_sentence: usize, h: &MlpHead) -> Option<Self> {
        Some(
            MlpConfig::new(
                d_sentence,
                h.hidden.iter().map(|&x| x as usize).collect(),
                h.classes? as usize,
            )
            .with_pair(h.features == Features::Pair)
            .with_activation(match h.activation {
                Activation::Tanh => "tanh".into(),
                Activation::Relu => "relu".into(),
            })
            .with_dropout(h.dropout),
        )
    }

    /// Builds the head.
    pub fn init<B: Backend>(&self, device: &B::Device) -> Mlp<B> {
        let mut d_in = if self.pair {
            4 * self.d_sentence
        } else {
            self.d_sentence
        };
        let mut layers = Vec::new();
        for &h in self.hidden.iter().chain(std::iter::once(&self.d_output)) {
            layers.push(LinearConfig::new(d_in, h).init(device));
            d_in = h;
        }
        Mlp {
            layers,
            pair: self.pair,
            activation: self.activation.clone(),
            dropout: self.dropout,
        }
    }
}

impl<B: Backend> Mlp<B> {
    /// Logits for one sentence batch `u` (or the pair `(u, v)` when the head reads pairs).
    pub fn forward(
        &self,
        u: Tensor<B, 2>,
        v: Option<Tensor<B, 2>>,
        mut noise: Option<&mut Noise>,
    ) -> Tensor<B, 2> {
        let mut x = match (self.pair, v) {
            (true, Some(v)) => Tensor::cat(
                vec![u.clone(), v.clone(), (u.clone() - v.clone()).abs(), u * v],
                1,
            ),
            _ => u,
        };
        let n = self.layers.len();
        for (i, layer) in self.layers.iter().enumerate() {
            x = layer.forward(dropout(&mut noise, x, self.dropout));
            if i + 1 < n {
                x = if self.activation == "relu" {
                    relu(x)
                } else {
                    tanh(x)
                };
            }
        }
        x
    }
}
