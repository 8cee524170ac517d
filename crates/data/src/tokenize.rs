//! Tokenisation from the recipe: one joint subword vocabulary learned on the recipe's
//! training corpora with the `tokenizers` crate (LASER §3: "a joint byte-pair encoding
//! vocabulary ... shared by all languages"), saved as `tokenizer.json` in the run directory.
//!
//! Layout of the vocabulary, fixed so that models can rely on it:
//! `<pad>` = 0, `<unk>` = 1, `<s>` = 2, `</s>` = 3, then one language-ID token
//! `<lang:xxx>` per training language (sorted), then the learned subwords. Decoders use the
//! language tokens when the recipe asks for a prepended target-language token
//! (`decoder.lang_embed: 0`, seq2seq paper §2) and their index among the languages for the
//! language-ID embedding (LASER §3.1).
//!
//! `bpe` is byte-level BPE (GPT-2's byte alphabet): every string of every script encodes
//! without unknown tokens, and the vocabulary needs no `limit_alphabet` tuning for Chinese
//! or Arabic. `sentencepiece` is a unigram model over Metaspace pieces. Training is
//! deterministic: the same sentences in the same order give the same file, byte for byte
//! (tested), so the tokenizer's digest can be part of an encoder's fingerprint.
//!
//! `words` is multilingual USE's input (Chidambaram et al. 2019, §2.1 and §4): treebank-style
//! words ([`crate::words::tokens`]), the `vocab` most frequent ones of the training corpora
//! kept (ties broken by the word, so training is deterministic), every other word hashed into
//! one of `oov_buckets` ids after the vocabulary (or `<unk>` without buckets), and, with
//! `char_ngrams`, each word's character n-grams ([`crate::words::char_ngrams`]) hashed with
//! FNV-1a into `hash_buckets` ids: [`TextTokenizer::tokens`] gives them beside the word ids
//! ([`Tokens`]). A tokenizer trained by this version splits CJK ideographs into words of
//! one character and Thai into character clusters ([`crate::words::tokens_split`]: neither
//! script has spaces between words). Its settings are kept in `tokenizer.json` as one added
//! token, `<words:oov=…;ngrams=…;buckets=…;cjk=chars;thai=clusters>`, so the file alone
//! says how to tokenize; a file without `cjk=chars` or `thai=clusters` (written before)
//! keeps those unspaced clauses whole, as it was trained.

use crate::pretrained_tokenizer::PretrainedTokenizer;
use crate::words;
use crate::DataError;
use harness_recipe::schema::{Tokenizer as TokenizerSpec, TokenizerKind};
use std::collections::HashSet;
use std::path::Path;
use tokenizers::models::bpe::{BpeTrainerBuilder, BPE};
use tokenizers::models::unigram::{Unigram, UnigramTrainerBuilder};
use tokenizers::models::wordlevel::{WordLevel, WordLevelTrainerBuilder};
use tokenizers::models::{ModelWrapper, TrainerWrapper};
use tokenizers::normalizers::{Lowercase, NormalizerWrapper, Sequence as NormSequence, NFKC};
use tokenizers::pre_tokenizers::byte_level::ByteLevel;
use tokenizers::pre_tokenizers::metaspace::{Metaspace, PrependScheme};
use tokenizers::{
    AddedToken, DecoderWrapper, NormalizedString, Normalizer, PreTokenizerWrapper, Tokenizer,
    Trainer,
};

/// Padding token (id 0): batches are right-padded with it and masks ignore it.
pub const PAD: &str = "<pad>";
/// Unknown token (id 1; byte-level BPE never produces it).
pub const UNK: &str = "<unk>";
/// Beginning of sentence (id 2): the first decoder input when no language token is used.
pub const BOS: &str = "<s>";
/// End of sentence (id 3): appended to every decoder target.
pub const EOS: &str = "</s>";

/// The language-ID token of a language code (`deu` → `<lang:deu>`).
pub fn lang_token(lang: &str) -> String {
    format!("<lang:{lang}>")
}

/// A sentence as an encoder reads it: token ids and, from a tokenizer with character
/// n-grams, the n-gram ids of each token. Dereferences to the ids.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Tokens {
    /// Token ids.
    pub ids: Vec<u32>,
    /// The character n-gram ids of each token (`None` from a tokenizer without n-grams).
    pub ngrams: Option<Ngrams>,
    /// The ids already begin and end with the model's own start and end tokens (a
    /// pretrained tokenizer's row): [`Tokens::with_eos`] adds nothing.
    pub complete: bool,
}

/// The character n-gram ids of a sentence's tokens, concatenated: token `i` has
/// `ids[ends[i-1]..ends[i]]` (`ends[-1]` = 0).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Ngrams {
    pub ids: Vec<u32>,
    pub ends: Vec<u32>,
}

impl Tokens {
    /// Ids without n-grams.
    pub fn from_ids(ids: Vec<u32>) -> Self {
        Tokens {
            ids,
            ngrams: None,
            complete: false,
        }
    }

    /// The n-gram ids of token `i` (empty without n-grams).
    pub fn ngrams_of(&self, i: usize) -> &[u32] {
        match &self.ngrams {
            Some(g) => {
                let start = if i == 0 { 0 } else { g.ends[i - 1] as usize };
                &g.ids[start..g.ends[i] as usize]
            }
            None => &[],
        }
    }

    /// These tokens followed by `</s>` (which has no n-grams): what every encoder reads. A
    /// pretrained tokenizer's row, which holds its end token already, is returned as it is.
    pub fn with_eos(&self) -> Tokens {
        if self.complete {
            return self.clone();
        }
        let mut ids = Vec::with_capacity(self.ids.len() + 1);
        ids.extend_from_slice(&self.ids);
        ids.push(ids::EOS);
        let ngrams = self.ngrams.as_ref().map(|g| {
            let mut ends = g.ends.clone();
            ends.push(g.ids.len() as u32);
            Ngrams {
                ids: g.ids.clone(),
                ends,
            }
        });
        Tokens {
            ids,
            ngrams,
            complete: false,
        }
    }

    /// Keeps the first `n` tokens (of a complete row: the first `n − 1` and its end token).
    pub fn truncate(&mut self, n: usize) {
        if n >= self.ids.len() {
            return;
        }
        if self.complete {
            let last = *self.ids.last().expect("longer than n");
            self.ids.truncate(n.max(2) - 1);
            self.ids.push(last);
            return;
        }
        self.ids.truncate(n);
        if let Some(g) = &mut self.ngrams {
            g.ends.truncate(n);
            g.ids.truncate(g.ends.last().map_or(0, |&e| e as usize));
        }
    }
}

impl std::ops::Deref for Tokens {
    type Target = [u32];
    fn deref(&self) -> &[u32] {
        &self.ids
    }
}

/// How a `words` tokenizer maps words beyond its vocabulary and which n-grams it adds.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WordsSpec {
    /// Hash buckets for out-of-vocabulary words (0: they are `<unk>`).
    pub oov_buckets: u32,
    /// Character n-gram sizes (empty: no n-grams).
    pub char_ngrams: Vec<u32>,
    /// Hash buckets of the n-grams.
    pub hash_buckets: u32,
    /// Every CJK ideograph is a word of its own ([`words::tokens_cjk`]).
    pub cjk_chars: bool,
    /// Every Thai character cluster is a word of its own ([`words::tokens_split`]).
    pub thai_clusters: bool,
}

impl WordsSpec {
    const PREFIX: &'static str = "<words:";

    /// The added token that records these settings in `tokenizer.json`.
    fn token(&self) -> String {
        let sizes: Vec<String> = self.char_ngrams.iter().map(u32::to_string).collect();
        format!(
            "{}oov={};ngrams={};buckets={}{}{}>",
            Self::PREFIX,
            self.oov_buckets,
            sizes.join(","),
            self.hash_buckets,
            if self.cjk_chars { ";cjk=chars" } else { "" },
            if self.thai_clusters {
                ";thai=clusters"
            } else {
                ""
            }
        )
    }

    /// The words of `text` under these settings.
    fn words<'a>(&self, text: &'a str) -> Box<dyn Iterator<Item = &'a str> + 'a> {
        Box::new(words::tokens_split(
            text,
            self.cjk_chars,
            self.thai_clusters,
        ))
    }

    /// Reads [`Self::token`] back.
    fn parse(token: &str) -> Option<Self> {
        let body = token.strip_prefix(Self::PREFIX)?.strip_suffix('>')?;
        let mut spec = WordsSpec {
            oov_buckets: 0,
            char_ngrams: Vec::new(),
            hash_buckets: 0,
            cjk_chars: false,
            thai_clusters: false,
        };
        for part in body.split(';') {
            let (k, v) = part.split_once('=')?;
            match k {
                "oov" => spec.oov_buckets = v.parse().ok()?,
                "buckets" => spec.hash_buckets = v.parse().ok()?,
                "cjk" if v == "chars" => spec.cjk_chars = true,
                "thai" if v == "clusters" => spec.thai_clusters = true,
                "ngrams" if v.is_empty() => {}
                "ngrams" => {
                    spec.char_ngrams = v
                        .split(',')
                        .map(str::parse)
                        .collect::<Result<_, _>>()
                        .ok()?
                }
                _ => return None,
            }
        }
        Some(spec)
    }
}

/// A trained tokenizer with harness's fixed special tokens and language tokens.
#[derive(Clone)]
pub struct TextTokenizer {
    inner: Tokenizer,
    /// Training languages, sorted; `<lang:…>` tokens exist for exactly these.
    languages: Vec<String>,
    /// `Some` for a `words` tokenizer.
    words: Option<WordsSpec>,
    /// `inner`'s vocabulary size with added tokens, counted once: the library's
    /// `get_vocab_size` copies the whole vocabulary map on every call, which made word
    /// tokenization of each sentence cost a 30,000-entry map copy.
    base_vocab: usize,
    json: String,
    /// A pretrained model's own tokenizer (`data.tokenizer.kind: pretrained`); `inner` is
    /// then an empty vocabulary that nothing reads.
    pretrained: Option<std::sync::Arc<PretrainedTokenizer>>,
    /// sha256 of `json`, computed once: a pretrained model's file is megabytes, and the
    /// digest is asked for at every encoder fingerprint.
    digest: std::sync::OnceLock<String>,
}

impl std::fmt::Debug for TextTokenizer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TextTokenizer")
            .field("vocab_size", &self.vocab_size())
            .field("languages", &self.languages)
            .finish()
    }
}

/// Why a tokenizer could not be trained, saved or loaded.
#[derive(Debug, thiserror::Error)]
pub enum TokenizeError {
    /// The recipe's tokenizer block cannot be trained here.
    #[error("data.tokenizer: {detail}. Fix: {fix}")]
    Spec { detail: String, fix: String },
    /// The `tokenizers` crate failed while training or encoding.
    #[error("tokenizer: {0}")]
    Library(String),
    /// A tokenizer file is missing, unreadable or not one harness wrote.
    #[error(transparent)]
    Data(#[from] DataError),
}

impl TextTokenizer {
    /// Learns a vocabulary from `sentences` as `spec` says; `languages` are the training
    /// languages that get a language-ID token (deduplicated and sorted here).
    pub fn train<'a, I>(
        spec: &TokenizerSpec,
        languages: &[String],
        sentences: I,
    ) -> Result<Self, TokenizeError>
    where
        I: Iterator<Item = &'a str> + Send,
    {
        let mut languages: Vec<String> = languages.to_vec();
        languages.sort();
        languages.dedup();
        let mut specials: Vec<AddedToken> = [PAD, UNK, BOS, EOS]
            .iter()
            .map(|t| AddedToken::from(t.to_string(), true))
            .collect();
        specials.extend(
            languages
                .iter()
                .map(|l| AddedToken::from(lang_token(l), true)),
        );
        let vocab = spec.vocab.ok_or_else(|| TokenizeError::Spec {
            detail: "`vocab` is missing".into(),
            fix: "set `data.tokenizer.vocab`, e.g. 8000".into(),
        })? as usize;
        if spec.kind == TokenizerKind::Words {
            return Self::train_words(spec, languages, specials, vocab, sentences);
        }
        if vocab <= specials.len() + 256 {
            return Err(TokenizeError::Spec {
                detail: format!(
                    "vocab {vocab} leaves no room for subwords beside the {} special tokens and the 256-byte alphabet",
                    specials.len()
                ),
                fix: "raise `data.tokenizer.vocab` (LASER uses 50000; 8000 is a small default)"
                    .into(),
            });
        }
        let normalizer = normalizer(spec.lowercase);
        let lib = |e: tokenizers::Error| TokenizeError::Library(e.to_string());

        let (model, mut trainer, pre, decoder): (
            ModelWrapper,
            TrainerWrapper,
            PreTokenizerWrapper,
            DecoderWrapper,
        ) = match spec.kind {
            TokenizerKind::Bpe => {
                let alphabet: HashSet<char> = ByteLevel::alphabet().into_iter().collect();
                let trainer = BpeTrainerBuilder::new()
                    .vocab_size(vocab)
                    .min_frequency(2)
                    .show_progress(false)
                    .special_tokens(specials.clone())
                    .initial_alphabet(alphabet)
                    .build();
                let bl = ByteLevel::new(true, true, true);
                (
                    BPE::default().into(),
                    trainer.into(),
                    bl.into(),
                    ByteLevel::default().into(),
                )
            }
            TokenizerKind::Sentencepiece => {
                let trainer = UnigramTrainerBuilder::default()
                    .vocab_size(vocab as u32)
                    .show_progress(false)
                    .special_tokens(specials.clone())
                    .unk_token(Some(UNK.to_string()))
                    .build()
                    .map_err(|e| TokenizeError::Library(e.to_string()))?;
                let ms = Metaspace::new('▁', PrependScheme::Always, true);
                (
                    Unigram::default().into(),
                    trainer.into(),
                    ms.clone().into(),
                    ms.into(),
                )
            }
            other => {
                return Err(TokenizeError::Spec {
                    detail: format!("kind `{other:?}` is not a learned subword vocabulary"),
                    fix: "use `kind: bpe`, `kind: sentencepiece` or `kind: words` for recipes that train an encoder from scratch".into(),
                })
            }
        };
        let mut tok = Tokenizer::new(model);
        tok.with_normalizer(Some(normalizer))
            .with_pre_tokenizer(Some(pre))
            .with_decoder(Some(decoder));
        tok.train(&mut trainer, sentences).map_err(lib)?;
        tok.add_special_tokens(&specials);
        Self::from_tokenizer(tok, languages)
    }

    /// The `words` kind (module doc): the `vocab` most frequent words of `sentences`.
    fn train_words<'a, I>(
        spec: &TokenizerSpec,
        languages: Vec<String>,
        mut specials: Vec<AddedToken>,
        vocab: usize,
        sentences: I,
    ) -> Result<Self, TokenizeError>
    where
        I: Iterator<Item = &'a str> + Send,
    {
        let hash_buckets = match (spec.char_ngrams.is_empty(), spec.hash_buckets) {
            (true, _) => 0,
            (false, Some(b)) => b,
            (false, None) => {
                return Err(TokenizeError::Spec {
                    detail: "`char_ngrams` without `hash_buckets`".into(),
                    fix: "set `data.tokenizer.hash_buckets` (multilingual USE: 200000)".into(),
                })
            }
        };
        let settings = WordsSpec {
            oov_buckets: spec.oov_buckets.unwrap_or(0),
            char_ngrams: spec.char_ngrams.clone(),
            hash_buckets,
            cjk_chars: true,
            thai_clusters: true,
        };
        specials.push(AddedToken::from(settings.token(), true));
        let normalizer = normalizer(spec.lowercase);
        let lib = |e: tokenizers::Error| TokenizeError::Library(e.to_string());
        let mut trainer = WordLevelTrainerBuilder::default()
            .vocab_size(specials.len() + vocab)
            .show_progress(false)
            .special_tokens(specials.clone())
            .build()
            .map_err(|e| TokenizeError::Library(e.to_string()))?;
        trainer
            .feed(sentences, |s| {
                let n = normalized(&normalizer, s)?;
                Ok(settings.words(&n).map(String::from).collect())
            })
            .map_err(lib)?;
        let mut model = WordLevel::builder()
            .unk_token(UNK.to_string())
            .build()
            .map_err(lib)?;
        trainer.train(&mut model).map_err(lib)?;
        let mut tok = Tokenizer::new(ModelWrapper::from(model));
        tok.with_normalizer(Some(normalizer));
        tok.add_special_tokens(&specials);
        Self::from_tokenizer(tok, languages)
    }

    fn from_tokenizer(inner: Tokenizer, languages: Vec<String>) -> Result<Self, TokenizeError> {
        let json = inner
            .to_string(false)
            .map_err(|e| TokenizeError::Library(e.to_string()))?;
        let words = inner
            .get_added_tokens_decoder()
            .values()
            .find(|t| t.content.starts_with(WordsSpec::PREFIX))
            .map(|t| {
                WordsSpec::parse(&t.content).ok_or_else(|| {
                    TokenizeError::Library(format!(
                        "unreadable word-tokenizer settings `{}`; this file was not written by harness",
                        t.content
                    ))
                })
            })
            .transpose()?;
        let t = TextTokenizer {
            base_vocab: inner.get_vocab_size(true),
            inner,
            languages,
            words,
            json,
            pretrained: None,
            digest: Default::default(),
        };
        // The fixed layout is what models rely on: check it rather than assume it.
        for (i, s) in [PAD, UNK, BOS, EOS].iter().enumerate() {
            if t.inner.token_to_id(s) != Some(i as u32) {
                return Err(TokenizeError::Library(format!(
                    "special token {s} is not id {i}; this file was not written by harness"
                )));
            }
        }
        for l in &t.languages {
            if t.inner.token_to_id(&lang_token(l)).is_none() {
                return Err(TokenizeError::Library(format!(
                    "language token {} is missing",
                    lang_token(l)
                )));
            }
        }
        Ok(t)
    }

    /// Writes `tokenizer.json` (atomically). The training languages are recovered from its
    /// `<lang:…>` tokens on load.
    pub fn save(&self, path: &Path) -> Result<(), TokenizeError> {
        harness_core::nofollow::write_atomic(path, self.json.as_bytes())
            .map_err(|e| DataError::io(path, e))?;
        Ok(())
    }

    /// A pretrained model's own tokenizer ([`PretrainedTokenizer`]): its rows carry the
    /// model's start and end tokens, and it has no language tokens.
    pub fn from_pretrained(pretrained: PretrainedTokenizer) -> Self {
        TextTokenizer {
            inner: Tokenizer::new(WordLevel::default()),
            languages: Vec::new(),
            words: None,
            base_vocab: pretrained.vocab_size(),
            json: pretrained.to_json(),
            pretrained: Some(std::sync::Arc::new(pretrained)),
            digest: Default::default(),
        }
    }

    /// The pretrained model's tokenizer, when this is one.
    pub fn pretrained(&self) -> Option<&PretrainedTokenizer> {
        self.pretrained.as_deref()
    }

    /// Reads a `tokenizer.json` that [`TextTokenizer::save`] wrote.
    pub fn load(path: &Path) -> Result<Self, TokenizeError> {
        let text = std::fs::read_to_string(path).map_err(|e| DataError::io(path, e))?;
        if text.contains(crate::pretrained_tokenizer::FORMAT) {
            if let Ok(value) = serde_json::from_str::<serde_json::Value>(&text) {
                if PretrainedTokenizer::is_saved_form(&value) {
                    let p = PretrainedTokenizer::from_json(value).map_err(|e| {
                        DataError::format(
                            path,
                            None,
                            format!("not a pretrained model's tokenizer as harness saves it ({e})"),
                            "delete it; `harness train` writes it again from the recipe's model",
                        )
                    })?;
                    return Ok(Self::from_pretrained(p));
                }
            }
        }
        let inner: Tokenizer = text.parse().map_err(|e: tokenizers::Error| {
            DataError::format(
                path,
                None,
                format!("not a tokenizer file ({e})"),
                "delete it; `harness train` learns it again from the recipe",
            )
        })?;
        let mut languages: Vec<String> = inner
            .get_added_tokens_decoder()
            .values()
            .filter_map(|t| {
                t.content
                    .strip_prefix("<lang:")
                    .and_then(|r| r.strip_suffix('>'))
                    .map(String::from)
            })
            .collect();
        languages.sort();
        Self::from_tokenizer(inner, languages)
    }

    /// sha256 of the serialized tokenizer: part of a trained encoder's fingerprint.
    pub fn digest(&self) -> String {
        self.digest
            .get_or_init(|| harness_core::fsutil::sha256_hex(self.json.as_bytes()))
            .clone()
    }

    /// Vocabulary size including special and language tokens (and a `words` tokenizer's
    /// out-of-vocabulary buckets).
    pub fn vocab_size(&self) -> usize {
        self.base_vocab + self.words.as_ref().map_or(0, |w| w.oov_buckets as usize)
    }

    /// Number of character n-gram ids [`Self::tokens`] can give, when it gives any.
    pub fn char_ngram_buckets(&self) -> Option<usize> {
        self.words
            .as_ref()
            .filter(|w| !w.char_ngrams.is_empty())
            .map(|w| w.hash_buckets as usize)
    }

    /// Training languages (sorted); index `i` is language ID `i` of the decoders.
    pub fn languages(&self) -> &[String] {
        &self.languages
    }

    /// Index of `lang` among [`Self::languages`].
    pub fn language_index(&self, lang: &str) -> Option<usize> {
        self.languages.iter().position(|l| l == lang)
    }

    /// Token id of `<lang:xxx>`.
    pub fn lang_token_id(&self, lang: &str) -> Option<u32> {
        self.inner.token_to_id(&lang_token(lang))
    }

    /// Token ids of one sentence (no special tokens), clipped to `max_len`.
    pub fn encode(&self, sentence: &str, max_len: usize) -> Result<Vec<u32>, TokenizeError> {
        if let Some(p) = &self.pretrained {
            return p.encode(sentence, max_len).map_err(TokenizeError::Library);
        }
        if let Some(spec) = &self.words {
            return Ok(self.words(spec, sentence, max_len, false)?.ids);
        }
        let enc = self
            .inner
            .encode_fast(sentence, false)
            .map_err(|e| TokenizeError::Library(e.to_string()))?;
        let mut ids = enc.get_ids().to_vec();
        ids.truncate(max_len);
        Ok(ids)
    }

    /// One sentence as the encoder reads it: [`Self::encode`]'s ids and, from a tokenizer
    /// with character n-grams, each token's n-gram ids.
    pub fn tokens(&self, sentence: &str, max_len: usize) -> Result<Tokens, TokenizeError> {
        if self.pretrained.is_some() {
            return Ok(Tokens {
                complete: true,
                ..Tokens::from_ids(self.encode(sentence, max_len)?)
            });
        }
        match &self.words {
            Some(spec) => self.words(spec, sentence, max_len, true),
            None => Ok(Tokens::from_ids(self.encode(sentence, max_len)?)),
        }
    }

    /// A `words` tokenizer's tokens (module doc), n-grams included when `ngrams` and the
    /// tokenizer has them.
    fn words(
        &self,
        spec: &WordsSpec,
        sentence: &str,
        max_len: usize,
        ngrams: bool,
    ) -> Result<Tokens, TokenizeError> {
        let text = self
            .inner
            .get_normalizer()
            .map(|n| normalized(n, sentence))
            .transpose()
            .map_err(|e| TokenizeError::Library(e.to_string()))?;
        let text = text.as_deref().unwrap_or(sentence);
        let base = self.base_vocab as u64;
        let sizes: Vec<usize> = spec.char_ngrams.iter().map(|&n| n as usize).collect();
        let mut out = Tokens {
            ids: Vec::new(),
            ngrams: (ngrams && !sizes.is_empty()).then(Ngrams::default),
            complete: false,
        };
        for word in spec.words(text).take(max_len) {
            let id = match self.inner.token_to_id(word) {
                Some(id) => id,
                None if spec.oov_buckets > 0 => {
                    (base + words::fnv1a64(word.as_bytes()) % spec.oov_buckets as u64) as u32
                }
                None => ids::UNK,
            };
            out.ids.push(id);
            if let Some(g) = &mut out.ngrams {
                let buckets = spec.hash_buckets as u64;
                words::char_ngrams(word, &sizes, |gram| {
                    g.ids.push((words::fnv1a64(gram) % buckets) as u32)
                });
                g.ends.push(g.ids.len() as u32);
            }
        }
        Ok(out)
    }

    /// Ids back to text (special tokens skipped).
    pub fn decode(&self, ids: &[u32]) -> Result<String, TokenizeError> {
        if let Some(p) = &self.pretrained {
            return p.decode(ids).map_err(TokenizeError::Library);
        }
        self.inner
            .decode(ids, true)
            .map_err(|e| TokenizeError::Library(e.to_string()))
    }
}

/// NFKC, then lowercasing where the recipe asks for it.
fn normalizer(lowercase: bool) -> NormalizerWrapper {
    let mut normalizers: Vec<NormalizerWrapper> = vec![NFKC.into()];
    if lowercase {
        normalizers.push(Lowercase.into());
    }
    NormSequence::new(normalizers).into()
}

/// `s` through `normalizer`.
fn normalized(normalizer: &impl Normalizer, s: &str) -> tokenizers::Result<String> {
    let mut n = NormalizedString::from(s);
    normalizer.normalize(&mut n)?;
    Ok(n.get().to_string())
}

/// Special token ids, fixed by the layout above.
pub mod ids {
    /// `<pad>`.
    pub const PAD: u32 = 0;
    /// `<unk>`.
    pub const UNK: u32 = 1;
    /// `<s>`.
    pub const BOS: u32 = 2;
    /// `</s>`.
    pub const EOS: u32 = 3;
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(kind: TokenizerKind, vocab: u32) -> TokenizerSpec {
        TokenizerSpec {
            kind,
            vocab: Some(vocab),
            train_on: vec![],
            lowercase: false,
            char_ngrams: vec![],
            hash_buckets: None,
            oov_buckets: None,
            sample: None,
        }
    }

    fn corpus() -> Vec<String> {
        let base = [
            "The cat sat on the mat.",
            "Die Katze saß auf der Matte.",
            "Le chat était assis sur le tapis.",
            "猫坐在垫子上。",
            "El gato se sentó en la alfombra.",
            "القطة جلست على الحصيرة.",
        ];
        (0..50)
            .flat_map(|i| base.iter().map(move |s| format!("{s} {i}")))
            .collect()
    }

    #[test]
    fn bpe_layout_roundtrip_and_determinism() {
        let langs = vec!["eng".to_string(), "deu".into(), "cmn".into(), "eng".into()];
        let text = corpus();
        let a = TextTokenizer::train(
            &spec(TokenizerKind::Bpe, 400),
            &langs,
            text.iter().map(String::as_str),
        )
        .unwrap();
        let b = TextTokenizer::train(
            &spec(TokenizerKind::Bpe, 400),
            &langs,
            text.iter().map(String::as_str),
        )
        .unwrap();
        assert_eq!(a.digest(), b.digest(), "training is not deterministic");
        assert_eq!(a.languages(), ["cmn", "deu", "eng"]);
        assert_eq!(a.lang_token_id("cmn"), Some(4));
        assert_eq!(a.lang_token_id("eng"), Some(6));
        assert!(
            a.vocab_size() <= 400 && a.vocab_size() > 300,
            "{}",
            a.vocab_size()
        );
        // Byte-level: any script encodes without <unk>, and decodes back.
        let ids = a.encode("猫 Katze ñandú 🐈", 100).unwrap();
        assert!(!ids.contains(&ids::UNK));
        assert!(
            ids.iter().all(|&i| i > 6),
            "subwords start after the specials"
        );
        assert_eq!(a.decode(&ids).unwrap().trim(), "猫 Katze ñandú 🐈");
        assert_eq!(a.encode("The cat sat on the mat.", 2).unwrap().len(), 2);
        // A frequent word became one token.
        assert!(a.encode(" cat", 10).unwrap().len() == 1);

        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("tokenizer.json");
        a.save(&path).unwrap();
        let c = TextTokenizer::load(&path).unwrap();
        assert_eq!(c.digest(), a.digest());
        assert_eq!(c.languages(), a.languages());
        assert_eq!(
            c.encode("Die Katze", 10).unwrap(),
            a.encode("Die Katze", 10).unwrap()
        );
    }

    #[test]
    fn unigram_trains_and_bad_specs_are_refused() {
        let text = corpus();
        let t = TextTokenizer::train(
            &spec(TokenizerKind::Sentencepiece, 300),
            &["eng".to_string()],
            text.iter().map(String::as_str),
        )
        .unwrap();
        assert!(!t.encode("The cat", 10).unwrap().is_empty());
        let err = TextTokenizer::train(
            &spec(TokenizerKind::Bpe, 100),
            &[],
            text.iter().map(String::as_str),
        )
        .unwrap_err();
        assert!(
            err.to_string().contains("raise `data.tokenizer.vocab`"),
            "{err}"
        );
        let err = TextTokenizer::train(
            &spec(TokenizerKind::Pretrained, 1000),
            &[],
            text.iter().map(String::as_str),
        )
        .unwrap_err();
        assert!(err.to_string().contains("kind: bpe"), "{err}");
    }

    /// By hand (FNV-1a values computed independently): kept words are the two most frequent,
    /// ties broken by the word (`.` and `cat`; `the` ties with them and sorts after), after
    /// the four specials, `<lang:eng>` and the settings token (ids 0-5); `the` and `sat` fall
    /// into OOV buckets 8 + fnv("the") % 3 = 8 and 8 + fnv("sat") % 3 = 9; each word's
    /// 3-grams of `<word>` are fnv % 1000.
    #[test]
    fn words_with_oov_buckets_and_char_ngrams_by_hand() {
        let mut sp = spec(TokenizerKind::Words, 2);
        sp.oov_buckets = Some(3);
        sp.char_ngrams = vec![3];
        sp.hash_buckets = Some(1000);
        let text: Vec<&str> = ["the cat sat .", "the cat ."].repeat(5);
        let t = TextTokenizer::train(&sp, &["eng".to_string()], text.into_iter()).unwrap();
        assert_eq!(t.vocab_size(), 11);
        assert_eq!(t.char_ngram_buckets(), Some(1000));
        let want = Tokens {
            ids: vec![8, 7, 9, 6],
            ngrams: Some(Ngrams {
                ids: vec![975, 924, 576, 483, 631, 50, 971, 223, 50, 739],
                ends: vec![3, 6, 9, 10],
            }),
            complete: false,
        };
        let got = t.tokens("the cat sat.", 64).unwrap();
        assert_eq!(got, want);
        assert_eq!(t.encode("the cat sat.", 64).unwrap(), want.ids);
        assert_eq!(got.ngrams_of(2), &[971, 223, 50]);
        // Clipping keeps whole tokens; `</s>` comes with no n-grams.
        let mut two = got.clone();
        two.truncate(2);
        assert_eq!(two.ids, vec![8, 7]);
        assert_eq!(two.ngrams.as_ref().unwrap().ends, vec![3, 6]);
        let eos = two.with_eos();
        assert_eq!(eos.ids, vec![8, 7, ids::EOS]);
        assert_eq!(eos.ngrams_of(2), &[] as &[u32]);
        assert_eq!(eos.ngrams_of(1), &[483, 631, 50]);
        // The settings travel in the file.
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("tokenizer.json");
        t.save(&path).unwrap();
        let back = TextTokenizer::load(&path).unwrap();
        assert_eq!(back.tokens("the cat sat.", 64).unwrap(), want);
        assert_eq!(back.digest(), t.digest());
        assert_eq!(back.languages(), ["eng"]);
        // Without buckets an unknown word is `<unk>`; without n-grams there are none.
        let mut plain = spec(TokenizerKind::Words, 2);
        plain.lowercase = true;
        let p = TextTokenizer::train(&plain, &[], ["The cat .", "the CAT ."].into_iter()).unwrap();
        let got = p.tokens("THE dog", 64).unwrap();
        assert_eq!(got.ngrams, None);
        assert_eq!(got.ids[1], ids::UNK);
        let cat = p.encode("CAT", 64).unwrap();
        assert_eq!(cat, p.encode("cat", 64).unwrap());
        assert_ne!(cat, vec![ids::UNK]);
        // n-grams need buckets.
        let mut bad = spec(TokenizerKind::Words, 2);
        bad.char_ngrams = vec![3, 4];
        let err = TextTokenizer::train(&bad, &[], ["a b"].into_iter()).unwrap_err();
        assert!(err.to_string().contains("hash_buckets"), "{err}");
    }

    /// A new `words` tokenizer reads Chinese one ideograph at a time and says so in its
    /// file; a file written before `cjk=chars` keeps reading an unspaced clause whole.
    #[test]
    fn words_split_cjk_ideographs_and_old_files_do_not() {
        let sp = spec(TokenizerKind::Words, 10);
        let text = ["我爱北京", "北京 好", "我 好"].repeat(3);
        let t = TextTokenizer::train(&sp, &[], text.into_iter()).unwrap();
        let ids = t.encode("我爱北京", 64).unwrap();
        assert_eq!(ids.len(), 4);
        assert!(!ids.contains(&ids::UNK), "{ids:?}");
        assert_eq!(ids[2], t.encode("北", 64).unwrap()[0]);
        // The same file with the settings of a tokenizer trained before the split.
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("tokenizer.json");
        t.save(&path).unwrap();
        let json = std::fs::read_to_string(&path).unwrap();
        assert!(json.contains(";cjk=chars;thai=clusters>"));
        std::fs::write(&path, json.replace(";cjk=chars;thai=clusters>", ">")).unwrap();
        let old = TextTokenizer::load(&path).unwrap();
        assert_eq!(old.encode("我爱北京", 64).unwrap(), vec![ids::UNK]);
        assert_eq!(old.encode("我 北", 64).unwrap(), vec![ids[0], ids[2]]);
    }

    /// A new `words` tokenizer reads Thai one character cluster at a time and says so in its
    /// file; a file written before `thai=clusters` keeps reading an unspaced clause whole.
    #[test]
    fn words_split_thai_clusters_and_old_files_do_not() {
        let sp = spec(TokenizerKind::Words, 10);
        let text = ["ภาษาไทย", "ไทย ดี"].repeat(3);
        let t = TextTokenizer::train(&sp, &[], text.into_iter()).unwrap();
        let ids = t.encode("ภาษาไทย", 64).unwrap();
        assert_eq!(ids.len(), 7);
        assert!(!ids.contains(&ids::UNK), "{ids:?}");
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("tokenizer.json");
        t.save(&path).unwrap();
        let json = std::fs::read_to_string(&path).unwrap();
        assert!(json.contains(";cjk=chars;thai=clusters>"), "{json}");
        std::fs::write(&path, json.replace(";thai=clusters>", ">")).unwrap();
        let old = TextTokenizer::load(&path).unwrap();
        assert_eq!(old.encode("ภาษาไทย", 64).unwrap(), vec![ids::UNK]);
    }
}
