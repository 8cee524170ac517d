//! Heads on the sentence embedding: the MLP classifier that LASER's NLI ablation (§5.2),
//! XNLI-style training and multilingual USE's NLI task put on pair features
//! `(u, v, |u − v|, u ∗ v)` (InferSent, Conneau et al. 2017), and, without `classes`, the
//! projection heads of multilingual USE's ranking tasks (§3.2: "fully-connected feedforward
//! layers of size 320 and 512 and using tanh activation", the activation after every layer).

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
    /// A projection (no `classes`): the layers are the hidden sizes only, each followed by
    /// the activation, and the output is the last hidden layer (`d_output` is its size).
    #[config(default = false)]
    pub projection: bool,
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
    /// A projection head: the activation follows the last layer too.
    pub projection: bool,
}

impl MlpConfig {
    /// The configuration a recipe's `mlp` head describes: a classifier over `classes`, or
    /// without them a projection through its hidden layers (`None`: neither).
    pub fn from_recipe(d_sentence: usize, h: &MlpHead) -> Option<Self> {
        let hidden: Vec<usize> = h.hidden.iter().map(|&x| x as usize).collect();
        let (d_output, projection) = match h.classes {
            Some(c) => (c as usize, false),
            None => (*hidden.last()?, true),
        };
        Some(
            MlpConfig::new(d_sentence, hidden, d_output)
                .with_projection(projection)
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
        // A projection's last hidden layer is its output.
        let output = (!self.projection).then_some(&self.d_output);
        for &h in self.hidden.iter().chain(output) {
            layers.push(LinearConfig::new(d_in, h).init(device));
            d_in = h;
        }
        Mlp {
            layers,
            pair: self.pair,
            activation: self.activation.clone(),
            dropout: self.dropout,
            projection: self.projection,
        }
    }
}

impl<B: Backend> Mlp<B> {
    /// Size of the output (classes, or a projection's last hidden size).
    pub fn d_output(&self) -> usize {
        self.layers.last().map_or(0, |l| l.weight.dims()[1])
    }

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
            x = crate::fused::linear::linear(layer, dropout(&mut noise, x, self.dropout));
            if i + 1 < n || self.projection {
                x = if self.activation == "relu" {
                    relu(x)
                } else {
                    // burn's tanh, not `fused::tanh`: with the fused one the tiny
                    // response-ranking test of the trainer no longer converges (a sensitivity
                    // not yet understood; the heads are small next to the n-gram layer).
                    tanh(x)
                };
            }
        }
        x
    }
}
