//! Typed records every loader produces. Loaders convert each on-disk format into these; the
//! benchmark protocols and the corpus builder only ever see these types.

use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// Two sentences with a gold similarity score (STS, SICK-R): `score` on the dataset's own
/// scale (0–5 for STS, 1–5 for SICK).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ScoredPair {
    pub sentence1: String,
    pub sentence2: String,
    pub score: f64,
}

/// Natural-language-inference label, in the order SentEval and XNLI use.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum NliLabel {
    Entailment,
    Neutral,
    Contradiction,
}

impl NliLabel {
    /// Class index: entailment 0, neutral 1, contradiction 2.
    pub fn index(self) -> usize {
        self as usize
    }
}

/// A premise/hypothesis pair with its gold label (XNLI, SNLI, SICK-E).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct NliPair {
    pub premise: String,
    pub hypothesis: String,
    pub label: NliLabel,
}

/// A text with a class label (SentEval classification, SIB-200, intents, reviews).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LabeledText {
    pub text: String,
    pub label: String,
}

/// Two texts with a binary label (MRPC paraphrase).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LabeledPair {
    pub sentence1: String,
    pub sentence2: String,
    pub label: bool,
}

/// A sentence and its translation.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Bitext {
    pub source: String,
    pub target: String,
}

/// A parallel corpus between two languages (ISO codes as the dataset spells them).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ParallelCorpus {
    pub source_lang: String,
    pub target_lang: String,
    pub pairs: Vec<Bitext>,
}

/// A multi-way parallel set: line `i` of every language is the same sentence.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct MultiWay {
    /// Language code → its sentences, all of the same length.
    pub lines: BTreeMap<String, Vec<String>>,
}

impl MultiWay {
    /// Number of aligned lines.
    pub fn len(&self) -> usize {
        self.lines.values().next().map_or(0, Vec::len)
    }

    /// True when there are no lines.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// A train/dev/test split of some record type; a missing split is empty.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Splits<T> {
    pub train: Vec<T>,
    pub dev: Vec<T>,
    pub test: Vec<T>,
}

impl<T> Default for Splits<T> {
    fn default() -> Self {
        Splits {
            train: Vec::new(),
            dev: Vec::new(),
            test: Vec::new(),
        }
    }
}

impl<T> Splits<T> {
    /// The records of one split.
    pub fn get(&self, split: Split) -> &[T] {
        match split {
            Split::Train => &self.train,
            Split::Dev => &self.dev,
            Split::Test => &self.test,
        }
    }
}

/// Which part of a dataset: training, development (also called validation or trial) or
/// test.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Split {
    Train,
    Dev,
    Test,
}

impl Split {
    /// All three, in the order train, dev, test.
    pub const ALL: [Split; 3] = [Split::Train, Split::Dev, Split::Test];

    /// Lower-case name: `train`, `dev`, `test`.
    pub fn name(self) -> &'static str {
        match self {
            Split::Train => "train",
            Split::Dev => "dev",
            Split::Test => "test",
        }
    }
}

/// A SICK pair with both of its annotations: the relatedness score (1–5, SICK-R) and the
/// entailment label (SICK-E). `id` is the release's `pair_ID`, shared by the SemEval-2014
/// split files and the full release.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SickPair {
    pub id: u32,
    pub sentence_a: String,
    pub sentence_b: String,
    pub relatedness: f64,
    pub entailment: NliLabel,
}

impl SickPair {
    /// The SICK-R view: sentences and relatedness score.
    pub fn scored(&self) -> ScoredPair {
        ScoredPair {
            sentence1: self.sentence_a.clone(),
            sentence2: self.sentence_b.clone(),
            score: self.relatedness,
        }
    }

    /// The SICK-E view: sentence A as premise, B as hypothesis, and the entailment label.
    pub fn nli(&self) -> NliPair {
        NliPair {
            premise: self.sentence_a.clone(),
            hypothesis: self.sentence_b.clone(),
            label: self.entailment,
        }
    }
}

/// A labelled text of one language in a set translated from a pivot language (xSID: from
/// English), with the index of the pivot item it translates.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TranslatedText {
    pub text: String,
    pub label: String,
    /// 0-based index of the pivot-language item this translates; `None` when the dataset
    /// gives no way to align it.
    pub pivot: Option<usize>,
    /// Which of several versions of the same pivot item this is, where a language has more
    /// than one (xSID `no`: dialect writer `1`..`10` or `B`); `None` otherwise.
    pub variant: Option<String>,
}

/// A pivot-aligned multilingual evaluation set: item `i` of every language translates
/// pivot item `i`. A language may miss items (`[]`: partial coverage) or have several
/// versions of one (dialect variants); each version keeps its own gold label.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct PivotAligned {
    /// The pivot language's code (e.g. `en`) and its items.
    pub pivot_lang: String,
    pub pivot: Vec<LabeledText>,
    /// Language → per pivot index, the translations of that item (pivot itself included).
    pub langs: BTreeMap<String, Vec<Vec<LabeledText>>>,
}

impl PivotAligned {
    /// The translations of pivot item `i` in `lang` (empty when none or unknown language).
    pub fn get(&self, lang: &str, i: usize) -> &[LabeledText] {
        self.langs
            .get(lang)
            .and_then(|v| v.get(i))
            .map_or(&[], Vec::as_slice)
    }

    /// The first translation of pivot item `i` in `lang`, if there is one.
    pub fn first(&self, lang: &str, i: usize) -> Option<&LabeledText> {
        self.get(lang, i).first()
    }
}

/// One conversation: its id and its turns (utterance texts) in order; speakers alternate.
/// Adjacent turns give (message, response) pairs.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Conversation {
    pub id: String,
    pub turns: Vec<String>,
}

/// A running-text document (a book) in one language: paragraphs in document order, each with
/// its hard-wrapped lines joined by single spaces. Not sentence-split.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Document {
    /// Language code as the dataset spells it (its folder name).
    pub lang: String,
    /// File name without compression suffix, e.g. `pg84.txt`.
    pub name: String,
    pub paragraphs: Vec<String>,
}

/// A sentence with the identifier its dataset gives it (BUCC `zh-000000001`).
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct IdSentence {
    pub id: String,
    pub text: String,
}

/// A bitext-mining set (BUCC): two monolingual sentence collections with ids and the gold
/// (source id, target id) pairs hidden among them.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct MiningSet {
    pub source_lang: String,
    pub target_lang: String,
    pub source: Vec<IdSentence>,
    pub target: Vec<IdSentence>,
    /// Gold pairs (source id, target id), in file order.
    pub gold: Vec<(String, String)>,
}
