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

use crate::DataError;
use harness_recipe::schema::{Tokenizer as TokenizerSpec, TokenizerKind};
use std::collections::HashSet;
use std::path::Path;
use tokenizers::models::bpe::{BpeTrainerBuilder, BPE};
use tokenizers::models::unigram::{Unigram, UnigramTrainerBuilder};
use tokenizers::models::{ModelWrapper, TrainerWrapper};
use tokenizers::normalizers::{Lowercase, NormalizerWrapper, Sequence as NormSequence, NFKC};
use tokenizers::pre_tokenizers::byte_level::ByteLevel;
use tokenizers::pre_tokenizers::metaspace::{Metaspace, PrependScheme};
use tokenizers::{AddedToken, DecoderWrapper, PreTokenizerWrapper, Tokenizer};

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

/// A trained subword tokenizer with harness's fixed special tokens and language tokens.
#[derive(Clone)]
pub struct TextTokenizer {
    inner: Tokenizer,
    /// Training languages, sorted; `<lang:…>` tokens exist for exactly these.
    languages: Vec<String>,
    json: String,
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
        let mut normalizers: Vec<NormalizerWrapper> = vec![NFKC.into()];
        if spec.lowercase {
            normalizers.push(Lowercase.into());
        }
        let normalizer: NormalizerWrapper = NormSequence::new(normalizers).into();
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
                    fix: "use `kind: bpe` or `kind: sentencepiece` for recipes that train an encoder from scratch".into(),
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

    fn from_tokenizer(inner: Tokenizer, languages: Vec<String>) -> Result<Self, TokenizeError> {
        let json = inner
            .to_string(false)
            .map_err(|e| TokenizeError::Library(e.to_string()))?;
        let t = TextTokenizer {
            inner,
            languages,
            json,
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
        harness_core::fsutil::write_atomic(path, self.json.as_bytes())
            .map_err(|e| DataError::io(path, e))?;
        Ok(())
    }

    /// Reads a `tokenizer.json` that [`TextTokenizer::save`] wrote.
    pub fn load(path: &Path) -> Result<Self, TokenizeError> {
        let text = std::fs::read_to_string(path).map_err(|e| DataError::io(path, e))?;
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
        harness_core::fsutil::sha256_hex(self.json.as_bytes())
    }

    /// Vocabulary size including special and language tokens.
    pub fn vocab_size(&self) -> usize {
        self.inner.get_vocab_size(true)
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

    /// Subword ids of one sentence (no special tokens), clipped to `max_len`.
    pub fn encode(&self, sentence: &str, max_len: usize) -> Result<Vec<u32>, TokenizeError> {
        let enc = self
            .inner
            .encode_fast(sentence, false)
            .map_err(|e| TokenizeError::Library(e.to_string()))?;
        let mut ids = enc.get_ids().to_vec();
        ids.truncate(max_len);
        Ok(ids)
    }

    /// Ids back to text (special tokens skipped).
    pub fn decode(&self, ids: &[u32]) -> Result<String, TokenizeError> {
        self.inner
            .decode(ids, true)
            .map_err(|e| TokenizeError::Library(e.to_string()))
    }
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
            &spec(TokenizerKind::Words, 1000),
            &[],
            text.iter().map(String::as_str),
        )
        .unwrap_err();
        assert!(err.to_string().contains("kind: bpe"), "{err}");
    }
}
