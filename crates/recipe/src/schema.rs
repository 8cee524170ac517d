//! The recipe schema: serde types owned by harness (not burn's configs), every struct
//! `deny_unknown_fields`, defaults declared here so the resolved recipe (and its
//! fingerprint) always spells them out. Ranges and cross-references are checked in
//! `check.rs`; this file only says what may be written where.
//!
//! Enums that select a kind (`encoder.kind`, `task.objective`) are deserialized by hand
//! through [`de::tagged`] so that an error inside a variant names its exact key.

use super::de::{self, tagged, DeError};
use serde::{Deserialize, Deserializer, Serialize, Serializer};
use serde_yaml::Value;
use std::collections::BTreeMap;

/// A whole recipe, as resolved (base ⊕ recipe ⊕ profile ⊕ `--set`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Recipe {
    /// Short name; run directories are `runs/<name>-<fingerprint8>`.
    #[serde(default)]
    pub name: String,
    /// The paper this recipe reproduces (file stem in `../shared/papers`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub paper: Option<String>,
    /// Seed of every random choice (initialisation, sampling, shuffling).
    #[serde(default = "default_seed")]
    pub seed: u64,
    /// Tokenizer and named training corpora.
    #[serde(default)]
    pub data: Data,
    /// Encoder, optional decoder, named heads. Required.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model: Option<Model>,
    /// Training tasks; empty for an evaluation-only recipe.
    #[serde(default)]
    pub tasks: Vec<Task>,
    /// Required when there are tasks.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub optimizer: Option<Optimizer>,
    /// Required when there are tasks.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub train: Option<Train>,
    /// Per-stage settings, by stage number (tasks name their stage; stages run in order,
    /// each with its own mixture, length, learning rate and frozen parameter groups).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub stages: BTreeMap<u32, Stage>,
    /// Benchmarks and benchmark groups (`benchmarks/*.yaml`, `benchmarks/groups.yaml`),
    /// each optionally with parameter overrides.
    #[serde(default)]
    pub evaluate: Vec<EvalEntry>,
    /// Report tables (`benchmarks/tables/*.yaml`).
    #[serde(default)]
    pub report: Vec<String>,
    /// Recipe this one inherits from, relative to this file. Applied by the loader.
    #[serde(default, skip_serializing)]
    pub base: Option<String>,
    /// Named sets of `dotted.key: value` overrides. Applied by the loader; not part of
    /// the resolved recipe or its fingerprint.
    #[serde(default, skip_serializing)]
    pub profiles: BTreeMap<String, BTreeMap<String, Value>>,
}

fn default_seed() -> u64 {
    1
}

impl Recipe {
    /// What training computes its matrix products in (`train.precision`; f32 without a
    /// `train:` section).
    pub fn precision(&self) -> Precision {
        self.train.as_ref().map_or(Precision::F32, |t| t.precision)
    }

    /// The keys a recipe may have at its top level (`name`, `model`, ..., `base`,
    /// `profiles`), as the derived deserializer reads them: asked of serde, so the list
    /// cannot drift from the fields above.
    pub fn top_level_keys() -> &'static [&'static str] {
        static KEYS: std::sync::OnceLock<&'static [&'static str]> = std::sync::OnceLock::new();
        KEYS.get_or_init(|| {
            let mut fields = FieldNames(&[]);
            // The derived impl hands its field list to `deserialize_struct`, which stops.
            let _ = Recipe::deserialize(&mut fields);
            fields.0
        })
    }
}

/// A deserializer that only records the field names a derived struct asks for.
struct FieldNames(&'static [&'static str]);

impl<'de> Deserializer<'de> for &mut FieldNames {
    type Error = serde::de::value::Error;

    fn deserialize_any<V: serde::de::Visitor<'de>>(self, _: V) -> Result<V::Value, Self::Error> {
        Err(serde::de::Error::custom(
            "only a struct's field names are read",
        ))
    }

    fn deserialize_struct<V: serde::de::Visitor<'de>>(
        self,
        _name: &'static str,
        fields: &'static [&'static str],
        _visitor: V,
    ) -> Result<V::Value, Self::Error> {
        self.0 = fields;
        Err(serde::de::Error::custom("field names recorded"))
    }

    serde::forward_to_deserialize_any! {
        bool i8 i16 i32 i64 i128 u8 u16 u32 u64 u128 f32 f64 char str string bytes byte_buf
        option unit unit_struct newtype_struct seq tuple tuple_struct map enum identifier
        ignored_any
    }
}

/// One `evaluate:` entry: a benchmark or group name (`xnli`), or the name with overrides
/// of its declaration (`{name: xnli, params: {epochs: 20}, languages: [en, de]}`): `params`
/// merge over the declared protocol parameters, `languages` replaces the declared list.
/// `--set evaluate.xnli.params.epochs=20` writes the same. A bare name serializes as a
/// string, so recipes without overrides keep their fingerprints.
#[derive(Debug, Clone, PartialEq)]
pub struct EvalEntry {
    pub name: String,
    pub params: BTreeMap<String, Value>,
    pub languages: Option<Vec<String>>,
}

impl EvalEntry {
    /// A bare benchmark or group name.
    pub fn named(name: impl Into<String>) -> EvalEntry {
        EvalEntry {
            name: name.into(),
            params: BTreeMap::new(),
            languages: None,
        }
    }

    /// Whether the entry overrides anything.
    pub fn has_overrides(&self) -> bool {
        !self.params.is_empty() || self.languages.is_some()
    }
}

impl PartialEq<&str> for EvalEntry {
    fn eq(&self, other: &&str) -> bool {
        !self.has_overrides() && self.name == *other
    }
}

/// The mapping form of [`EvalEntry`].
#[derive(Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct EvalEntryFull {
    name: String,
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    params: BTreeMap<String, Value>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    languages: Option<Vec<String>>,
}

impl Serialize for EvalEntry {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        if self.has_overrides() {
            EvalEntryFull {
                name: self.name.clone(),
                params: self.params.clone(),
                languages: self.languages.clone(),
            }
            .serialize(s)
        } else {
            s.serialize_str(&self.name)
        }
    }
}

impl<'de> Deserialize<'de> for EvalEntry {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> serde::de::Visitor<'de> for V {
            type Value = EvalEntry;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("a benchmark name, or `{name: BENCH, params: {...}, languages: [...]}`")
            }
            fn visit_str<E: serde::de::Error>(self, v: &str) -> Result<EvalEntry, E> {
                Ok(EvalEntry::named(v))
            }
            fn visit_map<A: serde::de::MapAccess<'de>>(
                self,
                map: A,
            ) -> Result<EvalEntry, A::Error> {
                let full =
                    EvalEntryFull::deserialize(serde::de::value::MapAccessDeserializer::new(map))?;
                Ok(EvalEntry {
                    name: full.name,
                    params: full.params,
                    languages: full.languages,
                })
            }
        }
        d.deserialize_any(V)
    }
}

/// Top-level keys, for suggestions where serde gives none.
pub const TOP_LEVEL_KEYS: &[&str] = &[
    "name",
    "paper",
    "seed",
    "data",
    "model",
    "tasks",
    "optimizer",
    "train",
    "stages",
    "evaluate",
    "report",
    "base",
    "profiles",
];

// ---------------------------------------------------------------------------------------
// data

/// Tokenizer and corpora.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Data {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tokenizer: Option<Tokenizer>,
    /// Named corpora; tasks refer to them by name.
    #[serde(default)]
    pub corpora: BTreeMap<String, Corpus>,
}

/// How text becomes ids.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Tokenizer {
    pub kind: TokenizerKind,
    /// Vocabulary size (BPE merges, sentencepiece pieces, or kept words). Required for
    /// every kind but `pretrained`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub vocab: Option<u32>,
    /// Corpora the vocabulary is learned on (default: every corpus).
    #[serde(default)]
    pub train_on: Vec<String>,
    #[serde(default)]
    pub lowercase: bool,
    /// `words` only: character n-gram orders hashed beside the words (multilingual USE: 3, 4).
    #[serde(default)]
    pub char_ngrams: Vec<u32>,
    /// `words` only: hash buckets for the character n-grams.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hash_buckets: Option<u32>,
    /// `words` only: hash buckets for out-of-vocabulary words.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub oov_buckets: Option<u32>,
    /// At most this many sentences learn the vocabulary: a uniform sample seeded by the
    /// recipe's seed, in corpus order (default [`Tokenizer::DEFAULT_SAMPLE`]; a corpus with
    /// fewer gives all of them).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sample: Option<u64>,
}

impl Tokenizer {
    /// Sentences a vocabulary is learned on when `sample` is not given: enough for a 50k
    /// BPE (fairseq's LASER preparation learns its BPE on a few million lines) while reading
    /// a bounded amount of text.
    pub const DEFAULT_SAMPLE: u64 = 2_000_000;
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum TokenizerKind {
    /// Joint byte-pair encoding learned on the training corpora (LASER).
    Bpe,
    /// Unigram sentencepiece model.
    Sentencepiece,
    /// Whitespace/treebank words, plus hashed character n-grams (multilingual USE, CBOW).
    Words,
    /// The pretrained encoder's own tokenizer.
    Pretrained,
}

/// A named training corpus: a shipped dataset (`dataset:`) or the user's own files
/// (`files:` + `format:`), a selection of it, and the evaluation sets whose sentences must be
/// filtered out of it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Corpus {
    /// Dataset name (`datasets.lock`); exactly one of `dataset` and `files`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dataset: Option<String>,
    /// The user's own files: paths or globs (`~/opus/*.de-en.*`), relative to the recipe's
    /// folder when not absolute. gzip (`.gz`), xz (`.xz`) and zstd (`.zst`) are read
    /// transparently.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub files: Vec<String>,
    /// How `files` are laid out (required with `files`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub format: Option<CorpusFormat>,
    /// The examples `files` hold (default: `pairs`, or `text` for the `text` format).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kind: Option<CorpusKind>,
    /// `files` only: the field (JSON lines, Parquet) or 0-based column (tab-separated) of
    /// each part of an example: `source`/`target` (pairs), `premise`/`hypothesis`/`label`
    /// (nli), `message`/`response` (conversation), `text`/`label` (labelled), `text` (text),
    /// and `source_lang`/`target_lang` for per-row languages.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub fields: BTreeMap<String, String>,
    /// `files` only: what a malformed line does: stop with an error naming the file and the
    /// line (the default), or be skipped and counted.
    #[serde(default, skip_serializing_if = "OnBadLine::is_error")]
    pub on_bad_line: OnBadLine,
    /// Language pairs, spelled as the dataset's folders (`deu-eng`); for `files`, the one
    /// pair every file holds (`de-en`, source first) when the file names do not say it.
    #[serde(default)]
    pub pairs: Vec<String>,
    /// Languages (monolingual or multilingual datasets: `en`, `de`, ...).
    #[serde(default)]
    pub languages: Vec<String>,
    /// Dataset splits to read (`train`, `validation`, `test`...; default: the dataset's
    /// training split).
    #[serde(default)]
    pub splits: Vec<String>,
    /// Benchmarks (or groups) whose sentences are removed from this corpus.
    #[serde(default)]
    pub exclude: Vec<String>,
    /// Keep at most this many examples (after filtering), for quick runs.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_examples: Option<u64>,
}

impl Corpus {
    /// What the corpus reads, for messages: its dataset's name or `files`.
    pub fn source_name(&self) -> String {
        match &self.dataset {
            Some(d) => d.clone(),
            None => format!("files ({})", self.files.join(", ")),
        }
    }
}

/// The layout of a user corpus's files.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum CorpusFormat {
    /// Tab-separated columns, one example per line.
    Tsv,
    /// OPUS/Moses: `NAME.L1-L2.L1` and `NAME.L1-L2.L2`, line-aligned, one sentence a line.
    Moses,
    /// JSON lines: one object per line, its fields named by `fields`.
    Jsonl,
    /// Parquet (Hugging Face dataset repositories): columns named by `fields`.
    Parquet,
    /// Plain text, one sentence per line; a blank line ends a document.
    Text,
}

impl CorpusFormat {
    /// Its name in a recipe.
    pub fn name(self) -> &'static str {
        match self {
            CorpusFormat::Tsv => "tsv",
            CorpusFormat::Moses => "moses",
            CorpusFormat::Jsonl => "jsonl",
            CorpusFormat::Parquet => "parquet",
            CorpusFormat::Text => "text",
        }
    }
}

/// The examples a user corpus holds (the trainer's example kinds).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum CorpusKind {
    /// Translation pairs (source, target).
    Pairs,
    /// NLI triples (premise, hypothesis, label: entailment / neutral / contradiction or 0-2).
    Nli,
    /// Conversation turns (message, response).
    Conversation,
    /// Running text: sentences in order, documents separated.
    Text,
    /// Sentences with a class.
    Labelled,
}

impl CorpusKind {
    /// Its name in a recipe.
    pub fn name(self) -> &'static str {
        match self {
            CorpusKind::Pairs => "pairs",
            CorpusKind::Nli => "nli",
            CorpusKind::Conversation => "conversation",
            CorpusKind::Text => "text",
            CorpusKind::Labelled => "labelled",
        }
    }

    /// The parts of one example, in order (the `fields` keys besides languages).
    pub fn parts(self) -> &'static [&'static str] {
        match self {
            CorpusKind::Pairs => &["source", "target"],
            CorpusKind::Nli => &["premise", "hypothesis", "label"],
            CorpusKind::Conversation => &["message", "response"],
            CorpusKind::Text => &["text"],
            CorpusKind::Labelled => &["text", "label"],
        }
    }
}

/// What a malformed line of a user corpus does.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum OnBadLine {
    /// Stop with an error naming the file and the line.
    #[default]
    Error,
    /// Skip it, and count it in the corpus's counts.
    Skip,
}

impl OnBadLine {
    fn is_error(&self) -> bool {
        *self == OnBadLine::Error
    }
}

// ---------------------------------------------------------------------------------------
// model

/// Encoder, decoder, heads.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Model {
    /// The sentence encoder (the one evaluation and export use), named `encoder`.
    pub encoder: Encoder,
    /// Further named encoders: a task trains one (`encoder:`) and may read another
    /// (`reads:`), e.g. a target-language encoder aligned to a frozen English one.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub encoders: BTreeMap<String, Encoder>,
    /// Languages that evaluation reads through an encoder of their own (a benchmark's
    /// language code → a key of `model.encoders`), e.g. each XNLI language through the
    /// target encoder aligned to the English one; every other language goes through
    /// `encoder`.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub languages: BTreeMap<String, String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub decoder: Option<Decoder>,
    /// Named heads on top of the sentence embedding; objectives refer to them by name.
    #[serde(default)]
    pub heads: BTreeMap<String, Head>,
}

/// How token pooling turns states into one sentence vector.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Pool {
    Max,
    Mean,
    /// Concatenated final states of both directions.
    Last,
    /// The first token (`[CLS]`).
    Cls,
}

impl Pool {
    /// The recipe's name of it (`max`, `mean`, `last`, `cls`).
    pub fn name(self) -> &'static str {
        match self {
            Pool::Max => "max",
            Pool::Mean => "mean",
            Pool::Last => "last",
            Pool::Cls => "cls",
        }
    }
}

impl std::fmt::Display for Pool {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// The sentence encoder, selected by `kind`.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Encoder {
    Bilstm(BilstmEncoder),
    Lstm(LstmEncoder),
    Transformer(TransformerEncoder),
    Cbow(CbowEncoder),
    Hashed(HashedEncoder),
    Pretrained(PretrainedEncoder),
}

pub const ENCODER_KINDS: &[&str] = &[
    "bilstm",
    "lstm",
    "transformer",
    "cbow",
    "hashed",
    "pretrained",
];

impl Encoder {
    pub fn kind(&self) -> &'static str {
        match self {
            Encoder::Bilstm(_) => "bilstm",
            Encoder::Lstm(_) => "lstm",
            Encoder::Transformer(_) => "transformer",
            Encoder::Cbow(_) => "cbow",
            Encoder::Hashed(_) => "hashed",
            Encoder::Pretrained(_) => "pretrained",
        }
    }
}

impl<'de> Deserialize<'de> for Encoder {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        tagged(d, "kind", ENCODER_KINDS, |kind, rest| {
            Some(match kind {
                "bilstm" => de::from_value(rest).map(Encoder::Bilstm),
                "lstm" => de::from_value(rest).map(Encoder::Lstm),
                "transformer" => de::from_value(rest).map(Encoder::Transformer),
                "cbow" => de::from_value(rest).map(Encoder::Cbow),
                "hashed" => de::from_value(rest).map(Encoder::Hashed),
                "pretrained" => de::from_value(rest).map(Encoder::Pretrained),
                _ => return None,
            })
        })
    }
}

/// Stacked BiLSTM (LASER; X-BiLSTM).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct BilstmEncoder {
    #[serde(default = "one")]
    pub layers: u32,
    /// Hidden size per direction; the sentence vector is `2 × hidden`.
    #[serde(default = "d512")]
    pub hidden: u32,
    /// Token embedding size.
    #[serde(default = "d320")]
    pub embed: u32,
    #[serde(default = "pool_max")]
    pub pool: Pool,
    #[serde(default)]
    pub dropout: f64,
}

/// Stacked LSTM, optionally bidirectional in its first layer (seq2seq + similarity).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LstmEncoder {
    #[serde(default = "one")]
    pub layers: u32,
    #[serde(default = "d512")]
    pub hidden: u32,
    /// Hidden size of the last layer when it differs from `hidden`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub top_hidden: Option<u32>,
    #[serde(default = "d320")]
    pub embed: u32,
    #[serde(default)]
    pub bidirectional_first: bool,
    #[serde(default = "pool_mean")]
    pub pool: Pool,
    #[serde(default)]
    pub dropout: f64,
}

/// Transformer encoder with pooling (multilingual USE).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TransformerEncoder {
    #[serde(default = "three")]
    pub layers: u32,
    #[serde(default = "d512")]
    pub d_model: u32,
    #[serde(default = "d2048")]
    pub d_ff: u32,
    #[serde(default = "eight")]
    pub heads: u32,
    #[serde(default = "pool_mean")]
    pub pool: Pool,
    #[serde(default = "tenth")]
    pub dropout: f64,
    /// Longest input in tokens; longer inputs are clipped.
    #[serde(default = "d64")]
    pub max_len: u32,
    /// Token embedding size (word and character n-gram embeddings). Unset: `d_model`.
    /// When set and different from `d_model`, a linear projection embed → d_model follows
    /// the input layer (the paper's embeddings are 320 wide, its transformer 512).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub embed: Option<u32>,
}

/// Average of word embeddings (X-CBOW).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CbowEncoder {
    #[serde(default = "d300")]
    pub embed: u32,
    #[serde(default = "pool_mean")]
    pub pool: Pool,
    /// Languages whose embeddings stay fixed while training (X-CBOW keeps English fixed).
    #[serde(default)]
    pub frozen: Vec<String>,
}

/// Hashed word and character n-grams, averaged; needs no training.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct HashedEncoder {
    /// Word n-gram orders: `[1]`, the only ones implemented (the default).
    #[serde(default = "word_ngrams")]
    pub word_ngrams: Vec<u32>,
    /// Character n-gram orders: `[3, 4]`, the only ones implemented (the default).
    #[serde(default = "char_ngrams")]
    pub char_ngrams: Vec<u32>,
    #[serde(default = "buckets")]
    pub buckets: u32,
    #[serde(default = "d512")]
    pub dim: u32,
}

/// A published encoder (`../shared/models`): a known name or a path.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PretrainedEncoder {
    /// `all-MiniLM-L6-v2`, `multilingual-e5-small`, or a path to a model directory.
    pub name: String,
    /// Fine-tune its weights (Emu); otherwise frozen.
    #[serde(default)]
    pub trainable: bool,
    #[serde(default = "pool_mean")]
    pub pool: Pool,
}

/// Pretrained encoder names harness knows without a path.
pub const PRETRAINED_NAMES: &[&str] = &["all-MiniLM-L6-v2", "multilingual-e5-small"];

/// The decoder, selected by `kind` (only `lstm` so far).
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Decoder {
    Lstm(LstmDecoder),
}

impl<'de> Deserialize<'de> for Decoder {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        tagged(d, "kind", &["lstm"], |kind, rest| match kind {
            "lstm" => Some(de::from_value(rest).map(Decoder::Lstm)),
            _ => None,
        })
    }
}

/// LSTM decoder without attention, initialised from the sentence embedding, with a
/// target-language embedding concatenated to its input (LASER §3).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LstmDecoder {
    #[serde(default = "one")]
    pub layers: u32,
    #[serde(default = "d512")]
    pub hidden: u32,
    #[serde(default = "d320")]
    pub embed: u32,
    /// Language-ID embedding size; 0 prepends a target-language token instead.
    #[serde(default = "d32")]
    pub lang_embed: u32,
    /// Target languages the decoder translates into.
    #[serde(default)]
    pub targets: Vec<String>,
}

/// A head on the sentence embedding, selected by `kind`.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Head {
    /// Feed-forward layers, optionally ending in a softmax over `classes`.
    Mlp(MlpHead),
    /// L2-normalise, scale by `alpha`, then a softmax layer (Ranjan et al. 2017; Emu).
    L2Softmax(L2SoftmaxHead),
    /// Class centroids for the center loss (Wen et al. 2016; Emu).
    Centers(CentersHead),
    /// Language discriminator (Emu: WGAN critic).
    Discriminator(DiscriminatorHead),
}

pub const HEAD_KINDS: &[&str] = &["mlp", "l2_softmax", "centers", "discriminator"];

impl Head {
    pub fn kind(&self) -> &'static str {
        match self {
            Head::Mlp(_) => "mlp",
            Head::L2Softmax(_) => "l2_softmax",
            Head::Centers(_) => "centers",
            Head::Discriminator(_) => "discriminator",
        }
    }
}

impl<'de> Deserialize<'de> for Head {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        tagged(d, "kind", HEAD_KINDS, |kind, rest| {
            Some(match kind {
                "mlp" => de::from_value(rest).map(Head::Mlp),
                "l2_softmax" => de::from_value(rest).map(Head::L2Softmax),
                "centers" => de::from_value(rest).map(Head::Centers),
                "discriminator" => de::from_value(rest).map(Head::Discriminator),
                _ => return None,
            })
        })
    }
}

/// What an MLP head reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Features {
    /// One sentence vector.
    Single,
    /// `(u, v, |u − v|, u ∗ v)` of two sentence vectors (InferSent; NLI).
    Pair,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Activation {
    Tanh,
    Relu,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct MlpHead {
    /// Hidden layer sizes, bottom first (may be empty).
    #[serde(default)]
    pub hidden: Vec<u32>,
    /// Output classes; absent for a projection head.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub classes: Option<u32>,
    #[serde(default = "features_single")]
    pub features: Features,
    #[serde(default = "tanh")]
    pub activation: Activation,
    #[serde(default)]
    pub dropout: f64,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct L2SoftmaxHead {
    /// Radius of the hypersphere the embeddings are projected on.
    pub alpha: f64,
    /// Output classes (default: the labels of the task's corpus).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub classes: Option<u32>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CentersHead {
    /// Classes (default: the labels of the task's corpus).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub classes: Option<u32>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DiscriminatorHead {
    #[serde(default)]
    pub hidden: Vec<u32>,
    #[serde(default)]
    pub dropout: f64,
    /// WGAN weight clipping to `[-clip, clip]`.
    #[serde(default = "clip001")]
    pub clip: f64,
}

// ---------------------------------------------------------------------------------------
// tasks

/// One training task: an objective over a corpus, with its share of the updates.
#[derive(Debug, Clone, PartialEq)]
pub struct Task {
    pub name: String,
    pub corpus: String,
    /// Relative sampling weight in the task mixture.
    pub weight: f64,
    /// Batch size of this task (default: `train.batch_size`).
    pub batch_size: Option<u32>,
    /// Tasks run in stages, lowest first (XNLI: train the English encoder, then align).
    pub stage: u32,
    /// The encoder this task's loss trains (first side of each example); default `encoder`.
    pub encoder: Option<String>,
    /// The encoder of the second side of each example (default: the same as `encoder`).
    pub reads: Option<String>,
    /// The loss and its parameters (`objective:` and `params:` in YAML).
    pub objective: Objective,
}

/// Every key a task may have.
pub const TASK_KEYS: &[&str] = &[
    "name",
    "objective",
    "corpus",
    "weight",
    "batch_size",
    "stage",
    "encoder",
    "reads",
    "params",
];

fn quote_all(names: &[&str]) -> String {
    names
        .iter()
        .map(|o| format!("`{o}`"))
        .collect::<Vec<_>>()
        .join(", ")
}

/// The task keys other than `objective` and `params`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct TaskCommon {
    name: String,
    corpus: String,
    #[serde(default = "one_f")]
    weight: f64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    batch_size: Option<u32>,
    #[serde(default = "one")]
    stage: u32,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    encoder: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    reads: Option<String>,
}

/// A task's objective: its name and its parameters (`objective:` and `params:` in YAML).
///
/// The recipe language keeps them untyped on purpose: each objective is defined once, in its
/// own file of the trainer (`harness_train::objectives`: name, typed parameters, checks, the
/// examples it reads and its loss), which hands this crate its checks through
/// [`crate::check::Known::objectives`]. Loading a recipe with those checks replaces `params`
/// by the typed parameters written back with every default spelt out, so that the resolved
/// recipe and its fingerprint name every value.
#[derive(Debug, Clone, PartialEq)]
pub struct Objective {
    /// The objective's name (`seq2seq_ce`, ...).
    pub name: String,
    /// Its parameters, a mapping (empty when the task has no `params:`).
    pub params: Value,
}

impl Objective {
    /// The objective's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// A string parameter (`head`, `joint_with`), when present.
    pub fn param_str(&self, key: &str) -> Option<&str> {
        self.params.get(key).and_then(Value::as_str)
    }
}

impl Serialize for Task {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        use serde::ser::{Error, SerializeMap};
        let common = TaskCommon {
            name: self.name.clone(),
            corpus: self.corpus.clone(),
            weight: self.weight,
            batch_size: self.batch_size,
            stage: self.stage,
            encoder: self.encoder.clone(),
            reads: self.reads.clone(),
        };
        let Value::Mapping(mut m) = serde_yaml::to_value(&common).map_err(S::Error::custom)? else {
            return Err(S::Error::custom("task did not serialize to a mapping"));
        };
        m.insert(
            "objective".into(),
            Value::String(self.objective.name.clone()),
        );
        m.insert("params".into(), self.objective.params.clone());
        let mut map = s.serialize_map(Some(m.len()))?;
        for (k, v) in &m {
            map.serialize_entry(k, v)?;
        }
        map.end()
    }
}

impl<'de> Deserialize<'de> for Task {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        use serde::de::Error;
        let v = Value::deserialize(d)?;
        let Value::Mapping(mut m) = v else {
            return Err(D::Error::custom(
                "expected a task mapping: {name, objective, corpus, weight, params}",
            ));
        };
        let objective = m.shift_remove("objective");
        let params = m
            .shift_remove("params")
            .unwrap_or(Value::Mapping(Default::default()));
        let params = if params.is_null() {
            Value::Mapping(Default::default())
        } else {
            params
        };
        let common: TaskCommon = de::from_value(&Value::Mapping(m)).map_err(|mut e| {
            // serde lists only TaskCommon's keys; name all of a task's.
            if e.msg.starts_with("unknown field") {
                let key = e.msg.split('`').nth(1).unwrap_or_default().to_string();
                e.msg = format!(
                    "unknown field `{key}`, expected one of {}",
                    quote_all(TASK_KEYS)
                );
            }
            D::Error::custom(e.encode())
        })?;
        let Some(objective) = objective else {
            return Err(D::Error::missing_field("objective"));
        };
        let at = |key: &str, msg: String| {
            D::Error::custom(
                DeError {
                    path: vec![de::Seg::Key(key.into())],
                    msg,
                }
                .encode(),
            )
        };
        let Value::String(name) = objective else {
            return Err(at(
                "objective",
                "expected the objective's name, a string".to_string(),
            ));
        };
        if !matches!(params, Value::Mapping(_)) {
            return Err(at(
                "params",
                "expected a mapping of the objective's parameters".to_string(),
            ));
        }
        let objective = Objective { name, params };
        Ok(Task {
            name: common.name,
            corpus: common.corpus,
            weight: common.weight,
            batch_size: common.batch_size,
            stage: common.stage,
            encoder: common.encoder,
            reads: common.reads,
            objective,
        })
    }
}

/// One stage's settings (`stages: {2: {...}}`); what it leaves out comes from `train` and
/// `optimizer`.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Stage {
    /// Updates in this stage (default: `train.steps`, or `epochs`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub steps: Option<u64>,
    /// Epochs over this stage's tasks, when `steps` is not given.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub epochs: Option<u32>,
    /// Learning rate of this stage (default: `optimizer.lr`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lr: Option<f64>,
    /// Parameter groups kept out of the optimizer and the backward pass: an encoder by name
    /// (`encoder`, a key of `model.encoders`), its embeddings (`<encoder>.embeddings`), the
    /// `decoder`, a head (`heads.<name>`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub frozen: Vec<String>,
    /// Encoders that start this stage as a copy of another one's weights (`target: source`,
    /// both `encoder` or keys of `model.encoders`, of the same architecture); e.g. each
    /// XNLI target encoder starting from the English encoder trained in stage 1.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub init: BTreeMap<String, String>,
}

// ---------------------------------------------------------------------------------------
// optimizer, train

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Optimizer {
    pub kind: OptimizerKind,
    /// Learning rate (> 0).
    pub lr: f64,
    #[serde(default = "betas")]
    pub betas: [f64; 2],
    /// Adam ε. Defaults to PyTorch's 1e-8 (burn's own default is 1e-5).
    #[serde(default = "eps")]
    pub eps: f64,
    #[serde(default)]
    pub weight_decay: f64,
    /// Clip the gradient's global norm to this.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub grad_clip: Option<f64>,
    /// Dropout applied throughout the model.
    #[serde(default)]
    pub dropout: f64,
    #[serde(default)]
    pub schedule: Schedule,
    /// Multiplier on the token-embedding gradients (multilingual USE uses 100).
    #[serde(default = "one_f")]
    pub embedding_grad_scale: f64,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum OptimizerKind {
    Adam,
    Adamw,
    Sgd,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Schedule {
    #[serde(default = "constant")]
    pub kind: ScheduleKind,
    /// Linear warm-up steps.
    #[serde(default)]
    pub warmup: u64,
    /// `exponential`: factor per epoch.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub decay: Option<f64>,
}

impl Default for Schedule {
    fn default() -> Self {
        Schedule {
            kind: ScheduleKind::Constant,
            warmup: 0,
            decay: None,
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ScheduleKind {
    Constant,
    Linear,
    InverseSqrt,
    Exponential,
}

/// Length of training and its cadence.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Train {
    /// Optimizer updates (exactly one of `steps`, `epochs`); 0 evaluates the initialised
    /// model, the untrained baseline of the same architecture.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub steps: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub epochs: Option<u32>,
    /// Batch by tokens (LASER) ...
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub batch_tokens: Option<u32>,
    /// ... or by examples.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub batch_size: Option<u32>,
    /// Longest training sentence in tokens; longer ones are clipped.
    #[serde(default = "d64")]
    pub max_len: u32,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub eval_every: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub checkpoint_every: Option<u64>,
    /// `<benchmark>` or `<benchmark>.<metric>` used to keep the best checkpoint.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub best_metric: Option<String>,
    /// Model selection per language (XNLI §5.1): `<benchmark>.<path>` to a map of language
    /// → score (e.g. `xnli-dev.accuracy`). Each `model.languages` encoder keeps its own
    /// weights from the evaluation where its language scored best, among those made while
    /// a stage trains it; evaluation reads it with them.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub best_per_language: Option<String>,
    /// The matrix products' precision while training (`f32`, the default, or `bf16`:
    /// products in bfloat16 with f32 weights, optimizer and loss). Left out when `f32`, so
    /// recipes written before it keep their hash.
    #[serde(default, skip_serializing_if = "Precision::is_f32")]
    pub precision: Precision,
}

/// What training computes its matrix products in (`train.precision`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Precision {
    /// Everything in f32.
    #[default]
    F32,
    /// Mixed precision: the operands of every matrix product outside the LSTM recurrence
    /// rounded to bfloat16, products accumulated in f32 and rounded to bfloat16, everything
    /// else (weights, element-wise work, losses, the optimizer) in f32.
    Bf16,
}

impl Precision {
    /// Whether this is the default, f32 throughout.
    pub fn is_f32(&self) -> bool {
        *self == Precision::F32
    }

    /// Whether matrix products run in bfloat16.
    pub fn is_bf16(&self) -> bool {
        *self == Precision::Bf16
    }
}

// ---------------------------------------------------------------------------------------
// defaults (serde needs functions)

fn one() -> u32 {
    1
}
fn three() -> u32 {
    3
}
fn eight() -> u32 {
    8
}
fn d32() -> u32 {
    32
}
fn d64() -> u32 {
    64
}
fn d300() -> u32 {
    300
}
fn d320() -> u32 {
    320
}
fn d512() -> u32 {
    512
}
fn d2048() -> u32 {
    2048
}
fn buckets() -> u32 {
    1 << 18
}
fn word_ngrams() -> Vec<u32> {
    vec![1]
}
fn char_ngrams() -> Vec<u32> {
    vec![3, 4]
}
fn one_f() -> f64 {
    1.0
}
fn tenth() -> f64 {
    0.1
}
fn clip001() -> f64 {
    0.01
}
fn eps() -> f64 {
    1e-8
}
fn betas() -> [f64; 2] {
    [0.9, 0.999]
}
fn pool_max() -> Pool {
    Pool::Max
}
fn pool_mean() -> Pool {
    Pool::Mean
}
fn features_single() -> Features {
    Features::Single
}
fn tanh() -> Activation {
    Activation::Tanh
}
fn constant() -> ScheduleKind {
    ScheduleKind::Constant
}
