//! A recipe's `model:` block compiled into one burn module: the sentence encoders (any kind,
//! [`SentenceEncoder`]), the optional decoder and the named heads. Training and evaluation
//! build it the same way, so a checkpoint always loads into the model that wrote it.

use crate::decoder::{LstmDecoder, LstmDecoderConfig};
use crate::encoder::bilstm::BilstmEncoder;
use crate::encoder::{SentenceEncoder, SentenceEncoderConfig};
use crate::error::ModelError;
use crate::heads::{Mlp, MlpConfig};
use crate::random::init_uniform;
use burn::module::{Module, ModuleMapper, Param};
use burn::tensor::backend::Backend;
use burn::tensor::Tensor;
use harness_data::tokenize::TextTokenizer;
use harness_recipe::schema::{Decoder, Head, Model, Recipe};
use std::collections::BTreeMap;

/// The file of a run directory that records the class count of each head whose `classes`
/// the recipe leaves to its task's corpus (`{"intent": 18}`): `harness train` writes it
/// before training, and whatever rebuilds the model from the run reads it.
pub const HEAD_CLASSES_FILE: &str = "head-classes.json";

pub use crate::base_encoder::{BaseEncoder, BASE_ENCODER_FILE};

/// The name of a recipe's one `model.encoder`.
pub const MAIN_ENCODER: &str = "encoder";

/// Scale of the uniform initialisation (fairseq's LSTM models, which LASER used).
pub const INIT_SCALE: f64 = 0.1;

/// Everything needed to build a [`System`].
#[derive(Debug, Clone)]
pub struct SystemConfig {
    /// The sentence encoders by name; the first is the one evaluation and export use.
    pub encoders: Vec<(String, SentenceEncoderConfig)>,
    /// The decoder, when a task translates.
    pub decoder: Option<LstmDecoderConfig>,
    /// Heads by name (sorted).
    pub heads: Vec<(String, MlpConfig)>,
    /// Languages evaluation reads through an encoder of their own (`model.languages`):
    /// language code → encoder index.
    pub languages: Vec<(String, usize)>,
    /// Heads that hold class centres (`centers`, one column per class): they start at zero
    /// and move by the center loss's own rule, never by the optimizer.
    pub center_heads: Vec<usize>,
}

/// The trainable model.
#[derive(Module, Debug)]
pub struct System<B: Backend> {
    /// The sentence encoders, in the order of [`SystemConfig::encoders`].
    pub encoders: Vec<SentenceEncoder<B>>,
    /// The decoder.
    pub decoder: Option<LstmDecoder<B>>,
    /// Heads, in the order of [`SystemConfig::heads`].
    pub heads: Vec<Mlp<B>>,
}

impl SystemConfig {
    /// Compiles `recipe.model` for the run's tokenizer: its vocabulary, character n-gram
    /// ids and language IDs (or, for a pretrained encoder, the model's architecture saved
    /// with its tokenizer). Dropout: a component's own `dropout` if set, else the
    /// optimizer's. `head_classes`: the class count of each `l2_softmax` / `centers` head
    /// that does not set `classes` (the labels of its task's corpus, see
    /// [`HEAD_CLASSES_FILE`]). `base`: the trained run a `pretrained` encoder starts from,
    /// when it names one ([`BASE_ENCODER_FILE`]).
    pub fn from_recipe(
        recipe: &Recipe,
        tokenizer: &TextTokenizer,
        head_classes: &BTreeMap<String, usize>,
        base: Option<&BaseEncoder>,
    ) -> Result<Self, ModelError> {
        let n_vocab = tokenizer.vocab_size();
        let n_languages = tokenizer.languages().len();
        let model = recipe
            .model
            .as_ref()
            .ok_or_else(|| ModelError::Unsupported {
                key: "model".into(),
                detail: "the recipe has no model".into(),
                fix: "add a `model:` block with an encoder".into(),
            })?;
        let global_dropout = recipe.optimizer.as_ref().map_or(0.0, |o| o.dropout);
        let encoders = encoder_configs(model, tokenizer, global_dropout, base)?;
        let d_sentence = encoders[0].1.d_sentence();
        let decoder = model.decoder.as_ref().map(|Decoder::Lstm(d)| {
            LstmDecoderConfig::new(
                n_vocab,
                d.embed as usize,
                d.hidden as usize,
                d_sentence,
                n_languages,
            )
            .with_n_layers(d.layers as usize)
            .with_d_lang(d.lang_embed as usize)
            .with_dropout(global_dropout)
        });
        let (heads, center_heads) = head_configs(model, d_sentence, head_classes)?;
        let languages = language_encoders(model, &encoders)?;
        Ok(SystemConfig {
            encoders,
            decoder,
            heads,
            languages,
            center_heads,
        })
    }

    /// Builds the model with harness's seeded uniform initialisation (then each encoder's
    /// fixed starts, [`SentenceEncoder::after_init`]: a transformer's LayerNorms at 1 and 0).
    ///
    /// A pretrained (BERT) encoder is left out of the draw: its weights come next, from the
    /// model store ([`crate::pretrained`]) or a checkpoint, and burn's lazy initialisation
    /// then never materialises a random 250k-row table. Centre heads start at zero (Wen et
    /// al.'s centres, before the first update).
    pub fn init<B: Backend>(&self, seed: u64, device: &B::Device) -> System<B> {
        let system = System {
            encoders: self.encoders.iter().map(|(_, e)| e.init(device)).collect(),
            decoder: self.decoder.as_ref().map(|d| d.init(device)),
            heads: self.heads.iter().map(|(_, h)| h.init(device)).collect(),
        };
        // Set the BERT encoders aside (placeholders of no parameters hold their places).
        let mut set_aside = Vec::new();
        let mut system = system;
        for (i, e) in system.encoders.iter_mut().enumerate() {
            if matches!(e, SentenceEncoder::Bert(_)) {
                let placeholder = crate::encoder::cbow::CbowEncoderConfig {
                    n_vocab: 1,
                    d_embed: 1,
                    pool: harness_recipe::schema::Pool::Mean,
                    ngram_buckets: None,
                }
                .init(device);
                set_aside.push((i, std::mem::replace(e, SentenceEncoder::Cbow(placeholder))));
            }
        }
        let mut system = init_uniform(system, seed, INIT_SCALE);
        for (i, e) in set_aside {
            system.encoders[i] = e;
        }
        system.encoders = system
            .encoders
            .into_iter()
            .map(SentenceEncoder::after_init)
            .collect();
        for &i in &self.center_heads {
            let h = system.heads.remove(i);
            system.heads.insert(i, h.map(&mut Zero));
        }
        system
    }

    /// The configuration of the encoder evaluation and export use.
    pub fn encoder(&self) -> &SentenceEncoderConfig {
        &self.encoders[0].1
    }

    /// Index of an encoder by name (`encoder`, or a key of `model.encoders`).
    pub fn encoder_index(&self, name: &str) -> Option<usize> {
        self.encoders.iter().position(|(n, _)| n == name)
    }

    /// The parameter group a stage's `frozen:` entry names (see
    /// `harness_recipe::check::parameter_groups`).
    pub fn group(&self, name: &str) -> Option<Group> {
        if name == "decoder" {
            return self.decoder.as_ref().map(|_| Group::Decoder);
        }
        if let Some(head) = name.strip_prefix("heads.") {
            return self.head_index(head).map(Group::Head);
        }
        if let Some(enc) = name.strip_suffix(".embeddings") {
            return self.encoder_index(enc).map(Group::Embeddings);
        }
        self.encoder_index(name).map(Group::Encoder)
    }

    /// Every group of the model: each encoder, the decoder, each head.
    pub fn all_groups(&self) -> Vec<Group> {
        let mut g: Vec<Group> = (0..self.encoders.len()).map(Group::Encoder).collect();
        if self.decoder.is_some() {
            g.push(Group::Decoder);
        }
        g.extend((0..self.heads.len()).map(Group::Head));
        g
    }

    /// Index of a head by name.
    pub fn head_index(&self, name: &str) -> Option<usize> {
        self.heads.iter().position(|(n, _)| n == name)
    }
}

/// The configurations of `model.encoder` (first, as [`MAIN_ENCODER`]) and of each of
/// `model.encoders`, for the run's tokenizer.
fn encoder_configs(
    model: &Model,
    tokenizer: &TextTokenizer,
    global_dropout: f64,
    base: Option<&BaseEncoder>,
) -> Result<Vec<(String, SentenceEncoderConfig)>, ModelError> {
    let n_vocab = tokenizer.vocab_size();
    let ngram_buckets = tokenizer.char_ngram_buckets();
    let pretrained = tokenizer.pretrained();
    let encoder = SentenceEncoderConfig::from_recipe(
        &model.encoder,
        n_vocab,
        ngram_buckets,
        global_dropout,
        pretrained,
        base,
    )?;
    let mut encoders = vec![(MAIN_ENCODER.to_string(), encoder)];
    for (name, e) in &model.encoders {
        let c = SentenceEncoderConfig::from_recipe(
            e,
            n_vocab,
            ngram_buckets,
            global_dropout,
            pretrained,
            base,
        )
        .map_err(|err| match err {
            ModelError::Unsupported { detail, fix, .. } => ModelError::Unsupported {
                key: format!("model.encoders.{name}.kind"),
                detail,
                fix,
            },
            other => other,
        })?;
        encoders.push((name.clone(), c));
    }
    Ok(encoders)
}

/// The heads' configurations by name, and the indices of the centre heads among them.
type HeadConfigs = (Vec<(String, MlpConfig)>, Vec<usize>);

/// The configurations of `model.heads` (in name order) on sentences of `d_sentence`, and
/// the indices of the centre heads among them.
fn head_configs(
    model: &Model,
    d_sentence: usize,
    head_classes: &BTreeMap<String, usize>,
) -> Result<HeadConfigs, ModelError> {
    let mut heads = Vec::new();
    let mut center_heads = Vec::new();
    for (name, head) in &model.heads {
        // A head no task reads (a profile that drops its task: Emu without the center
        // loss) has no corpus to count classes on; it is built with one class, never
        // trained and never read.
        let classes = |own: Option<u32>| -> Result<usize, ModelError> {
            Ok(own
                .map(|c| c as usize)
                .or_else(|| head_classes.get(name).copied())
                .unwrap_or(1))
        };
        // Every head is an `Mlp` (one checkpoint layout): an L2-softmax head is its
        // output layer (the objective normalises and scales its input), a centres head
        // is a layer whose weight columns are the centres, a discriminator an MLP with
        // one output (the critic's score).
        let c = match head {
            Head::Mlp(h) => MlpConfig::from_recipe(d_sentence, h).ok_or_else(|| {
                ModelError::Unsupported {
                    key: format!("model.heads.{name}"),
                    detail: "an MLP head without `classes` and without `hidden` layers has no output".into(),
                    fix: "set `classes` (3 for NLI) for a classifier, or `hidden` sizes for a projection".into(),
                }
            })?,
            Head::L2Softmax(h) => MlpConfig::new(d_sentence, Vec::new(), classes(h.classes)?),
            Head::Centers(h) => {
                center_heads.push(heads.len());
                MlpConfig::new(d_sentence, Vec::new(), classes(h.classes)?)
            }
            Head::Discriminator(h) => MlpConfig::new(
                d_sentence,
                h.hidden.iter().map(|&x| x as usize).collect(),
                1,
            )
            .with_activation("relu".into())
            .with_dropout(h.dropout),
            #[allow(unreachable_patterns)]
            other => {
                return Err(ModelError::Unsupported {
                    key: format!("model.heads.{name}.kind"),
                    detail: format!(
                        "head kind `{}` cannot be trained by this build",
                        other.kind()
                    ),
                    fix: "use an `mlp`, `l2_softmax`, `centers` or `discriminator` head"
                        .into(),
                })
            }
        };
        heads.push((name.clone(), c));
    }
    Ok((heads, center_heads))
}

/// The encoder index of each language that `model.languages` gives an encoder of its own.
fn language_encoders(
    model: &Model,
    encoders: &[(String, SentenceEncoderConfig)],
) -> Result<Vec<(String, usize)>, ModelError> {
    let mut languages = Vec::new();
    for (language, name) in &model.languages {
        let i = encoders
            .iter()
            .position(|(n, _)| n == name)
            .ok_or_else(|| ModelError::Unsupported {
                key: format!("model.languages.{language}"),
                detail: format!("no encoder `{name}`"),
                fix: "name a key of `model.encoders`".into(),
            })?;
        languages.push((language.clone(), i));
    }
    Ok(languages)
}

/// A part of the model a training stage can freeze.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Group {
    /// A whole encoder (by index).
    Encoder(usize),
    /// An encoder's token embeddings.
    Embeddings(usize),
    /// The decoder.
    Decoder,
    /// A head (by index).
    Head(usize),
}

/// Sets whether every parameter of `module` takes part in the backward pass.
pub fn set_trainable<B: Backend, M: Module<B>>(module: M, on: bool) -> M {
    module.map(&mut Trainable(on))
}

/// Maps every parameter in (`true`) or out of the backward pass.
struct Trainable(bool);

impl<B: Backend> ModuleMapper<B> for Trainable {
    fn map_float<const D: usize>(&mut self, param: Param<Tensor<B, D>>) -> Param<Tensor<B, D>> {
        let (id, tensor, mapper) = param.consume();
        Param::from_mapped_value(id, tensor.set_require_grad(self.0), mapper)
    }
}

/// Sets every parameter to zero, keeping its id.
struct Zero;

impl<B: Backend> ModuleMapper<B> for Zero {
    fn map_float<const D: usize>(&mut self, param: Param<Tensor<B, D>>) -> Param<Tensor<B, D>> {
        crate::random::replace_value(param, |t| t.zeros_like())
    }
}

/// Every float parameter's values, in visiting order (one copy each on the CPU backend:
/// burn-ndarray's `into_data` walks a shared parameter element by element, which made
/// XNLI's twelve encoder copies 1.8 s of the first stage-2 step).
struct Values(Vec<burn::tensor::TensorData>);

impl<B: Backend> burn::module::ModuleVisitor<B> for Values {
    fn visit_float<const D: usize>(&mut self, param: &Param<Tensor<B, D>>) {
        self.0.push(crate::fused::lstm::tensor_data(param.val()));
    }
}

/// Sets every float parameter, in visiting order, to the next of the values (a module of
/// the same architecture as the one they were read from).
struct Fill(std::vec::IntoIter<burn::tensor::TensorData>);

impl<B: Backend> ModuleMapper<B> for Fill {
    fn map_float<const D: usize>(&mut self, param: Param<Tensor<B, D>>) -> Param<Tensor<B, D>> {
        let data = self
            .0
            .next()
            .expect("encoders of one architecture have the same parameters");
        crate::random::replace_value(param, |t| {
            assert_eq!(
                data.num_elements(),
                t.shape().num_elements(),
                "encoders of one architecture have parameters of the same sizes"
            );
            Tensor::from_data(data, &t.device())
        })
    }
}

/// `target` with every float parameter's value replaced by `source`'s (a module of the
/// same architecture), keeping `target`'s parameter ids and whether each takes gradients.
pub fn copy_values<B: Backend, M: Module<B>>(target: M, source: &M) -> M {
    let mut values = Values(Vec::new());
    source.visit(&mut values);
    target.map(&mut Fill(values.0.into_iter()))
}

/// Clips every weight to `[−c, c]`, keeping whether it takes gradients.
struct Clamp(f64);

impl<B: Backend> ModuleMapper<B> for Clamp {
    fn map_float<const D: usize>(&mut self, param: Param<Tensor<B, D>>) -> Param<Tensor<B, D>> {
        let (id, tensor, mapper) = param.consume();
        let grad = tensor.is_require_grad();
        let clipped = tensor
            .clamp(-self.0, self.0)
            .detach()
            .set_require_grad(grad);
        Param::from_mapped_value(id, clipped, mapper)
    }
}

impl<B: Backend> System<B> {
    /// The model with every parameter trainable except those of the `frozen` groups, which
    /// stay out of the backward pass (so they get no gradient and no update).
    pub fn with_frozen(self, frozen: &[Group]) -> Self {
        let mut m = set_trainable(self, true);
        for g in frozen {
            match *g {
                Group::Encoder(i) => {
                    let e = m.encoders.remove(i);
                    m.encoders.insert(i, set_trainable(e, false));
                }
                Group::Embeddings(i) => {
                    let e = m.encoders.remove(i);
                    m.encoders
                        .insert(i, e.map_embeddings(&mut Trainable(false)));
                }
                Group::Decoder => m.decoder = m.decoder.map(|d| set_trainable(d, false)),
                Group::Head(i) => {
                    let h = m.heads.remove(i);
                    m.heads.insert(i, set_trainable(h, false));
                }
            }
        }
        m
    }

    /// The model with the weights of `groups` clipped to `[−c, c]`.
    pub fn clamp_groups(mut self, groups: &[Group], c: f64) -> Self {
        for g in groups {
            match *g {
                Group::Encoder(i) => {
                    let e = self.encoders.remove(i);
                    self.encoders.insert(i, Module::map(e, &mut Clamp(c)));
                }
                Group::Embeddings(i) => {
                    let e = self.encoders.remove(i);
                    self.encoders.insert(i, e.map_embeddings(&mut Clamp(c)));
                }
                Group::Decoder => {
                    self.decoder = self.decoder.map(|d| Module::map(d, &mut Clamp(c)))
                }
                Group::Head(i) => {
                    let h = self.heads.remove(i);
                    self.heads.insert(i, Module::map(h, &mut Clamp(c)));
                }
            }
        }
        self
    }

    /// The model with encoder `target`'s weights set to a copy of encoder `source`'s (the
    /// same architecture: [`SystemConfig`] checks it). The target keeps its own parameter
    /// ids and whether each takes gradients, and gets its own copy of the values, so
    /// training it never moves the source.
    pub fn copy_encoder(mut self, target: usize, source: usize) -> Self {
        let mut values = Values(Vec::new());
        self.encoders[source].visit(&mut values);
        let encoder = self.encoders.remove(target);
        let copied = encoder.map(&mut Fill(values.0.into_iter()));
        self.encoders.insert(target, copied);
        self
    }

    /// The model with head `head`'s output-layer weight set to `weight` (a value computed
    /// outside the optimizer: the center loss's centres), keeping its id and whether it
    /// takes gradients.
    pub fn with_head_weight(mut self, head: usize, weight: Tensor<B::InnerBackend, 2>) -> Self
    where
        B: burn::tensor::backend::AutodiffBackend,
    {
        let mut h = self.heads.remove(head);
        if let Some(mut layer) = h.layers.pop() {
            // The caller computed `weight` from this layer: a shape change is a bug there.
            assert_eq!(
                layer.weight.val().dims(),
                weight.dims(),
                "with_head_weight: a weight of another shape for head {head}"
            );
            layer.weight =
                crate::random::replace_value(layer.weight, |_| Tensor::from_inner(weight).detach());
            h.layers.push(layer);
        }
        self.heads.insert(head, h);
        self
    }

    /// The encoder evaluation and export use (the first).
    pub fn encoder(&self) -> &SentenceEncoder<B> {
        &self.encoders[0]
    }

    /// Takes the model apart into that encoder.
    pub fn into_encoder(self) -> SentenceEncoder<B> {
        self.encoders
            .into_iter()
            .next()
            .expect("a system has an encoder")
    }
}

/// The model as checkpoints written before encoders became an enum hold it (one BiLSTM
/// named `encoder`): [`crate::trained::load_system`] reads such a checkpoint into it and
/// moves its parts into a [`System`], so runs trained then still load.
#[derive(Module, Debug)]
pub struct LegacySystem<B: Backend> {
    pub encoder: BilstmEncoder<B>,
    pub decoder: Option<LstmDecoder<B>>,
    pub heads: Vec<Mlp<B>>,
}

impl<B: Backend> LegacySystem<B> {
    /// The legacy layout of `system` (a system of one BiLSTM encoder), for loading into.
    pub fn from_system(system: System<B>) -> Option<Self> {
        let mut encoders = system.encoders.into_iter();
        match (encoders.next(), encoders.next()) {
            (Some(SentenceEncoder::Bilstm(encoder)), None) => Some(LegacySystem {
                encoder,
                decoder: system.decoder,
                heads: system.heads,
            }),
            _ => None,
        }
    }

    /// The system these weights make.
    pub fn into_system(self) -> System<B> {
        System {
            encoders: vec![SentenceEncoder::Bilstm(self.encoder)],
            decoder: self.decoder,
            heads: self.heads,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::encoder::bilstm::{BilstmEncoderConfig, LayerSpec};
    use crate::encoder::SentenceEncoderConfig;
    use burn::backend::{Autodiff, NdArray};
    use burn::module::ParamId;

    type B = Autodiff<NdArray<f32>>;

    struct Ids(Vec<ParamId>, Vec<f32>);
    impl<Bk: Backend> burn::module::ModuleVisitor<Bk> for Ids {
        fn visit_float<const D: usize>(&mut self, p: &Param<Tensor<Bk, D>>) {
            self.0.push(p.id);
            self.1.extend(
                p.val()
                    .into_data()
                    .convert::<f32>()
                    .to_vec::<f32>()
                    .unwrap(),
            );
        }
    }

    fn read(e: &SentenceEncoder<B>) -> Ids {
        let mut ids = Ids(Vec::new(), Vec::new());
        e.visit(&mut ids);
        ids
    }

    /// The copy has the source's values and keeps its own parameter ids (so the optimizer
    /// and the gradients never mix the two), and frozen-ness.
    #[test]
    fn a_copied_encoder_has_the_values_and_keeps_its_ids() {
        let bilstm = || {
            SentenceEncoderConfig::Bilstm(BilstmEncoderConfig::new(
                12,
                4,
                vec![LayerSpec::new(6, true)],
                harness_recipe::schema::Pool::Max,
            ))
        };
        let cfg = SystemConfig {
            encoders: vec![("encoder".into(), bilstm()), ("xx".into(), bilstm())],
            decoder: None,
            heads: Vec::new(),
            languages: Vec::new(),
            center_heads: Vec::new(),
        };
        let m = cfg
            .init::<B>(4, &Default::default())
            .with_frozen(&[Group::Encoder(0)]);
        let (source, target) = (read(&m.encoders[0]), read(&m.encoders[1]));
        assert_ne!(source.1, target.1);
        let m = m.copy_encoder(1, 0);
        let copied = read(&m.encoders[1]);
        assert_eq!(copied.1, source.1);
        assert_eq!(copied.0, target.0);
        assert!(copied.0.iter().all(|id| !source.0.contains(id)));
        assert_eq!(read(&m.encoders[0]).1, source.1);
        // The source stays frozen, the copy trainable.
        struct Grad(Vec<bool>);
        impl burn::module::ModuleVisitor<B> for Grad {
            fn visit_float<const D: usize>(&mut self, p: &Param<Tensor<B, D>>) {
                self.0.push(p.val().is_require_grad());
            }
        }
        let mut g = Grad(Vec::new());
        m.encoders[0].visit(&mut g);
        assert!(g.0.iter().all(|r| !r));
        let mut g = Grad(Vec::new());
        m.encoders[1].visit(&mut g);
        assert!(g.0.iter().all(|r| *r));
    }
}
