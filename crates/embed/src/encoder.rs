//! The Encoder trait: anything that turns a batch of sentences into an `n × d` f32 matrix,
//! with a stable fingerprint. Every benchmark protocol, the embedding cache and the trainer's
//! evaluation go through it, so a trained model, a pretrained one, `hashed-ngrams` and
//! precomputed `npy:` embeddings are all measured the same way.

use crate::error::EncodeError;
use crate::matrix::Matrix;
use std::path::Path;
use std::sync::Arc;

/// A sentence encoder as the benchmark runner sees it.
///
/// Contract: `encode` returns exactly one row per input sentence, in input order, each of
/// `dim()` columns; equal sentences give equal rows; the result depends only on the
/// sentence text and on what `fingerprint()` describes (never on batch composition), so
/// rows can be cached under `(fingerprint, sentence)`.
pub trait Encoder: Send + Sync {
    /// Short human-readable name for reports and logs (e.g. `hashed-ngrams`).
    fn name(&self) -> &str;
    /// Stable identity of everything that determines the output (kind, version,
    /// parameters, weights digest). Two encoders with equal fingerprints must produce
    /// bit-identical rows; any change to the output must change it.
    fn fingerprint(&self) -> String;
    /// Embedding dimension `d`.
    fn dim(&self) -> usize;
    /// Encodes a batch: an `n × d` matrix, row `i` for `sentences[i]`.
    fn encode(&self, sentences: &[&str]) -> Result<Matrix, EncodeError>;
    /// The logits of the encoder's own trained pair classifier `head` (the NLI head of a
    /// multi-task run) over the sentence vectors `u` and `v` that [`Self::encode`] gave:
    /// one row per pair, one column per class. `Ok(None)`: the encoder has no such head
    /// (every encoder but a trained run with that head).
    fn pair_logits(
        &self,
        head: &str,
        u: &Matrix,
        v: &Matrix,
    ) -> Result<Option<Matrix>, EncodeError> {
        let _ = (head, u, v);
        Ok(None)
    }
    /// The encoder that reads sentences of `language` (a benchmark's language code), when
    /// this one hands that language to an encoder of its own (`model.languages`: the XNLI
    /// alignment baselines read each target language through the encoder aligned to the
    /// English one). `None`: this encoder reads `language` itself (every encoder but such a
    /// trained run).
    fn for_language(&self, language: &str) -> Option<Arc<dyn Encoder>> {
        let _ = language;
        None
    }
}

/// `Encoder` for a smart pointer to an encoder: every method forwarded.
macro_rules! forward_encoder {
    ($ptr:ident) => {
        impl<T: Encoder + ?Sized> Encoder for $ptr<T> {
            fn name(&self) -> &str {
                (**self).name()
            }
            fn fingerprint(&self) -> String {
                (**self).fingerprint()
            }
            fn dim(&self) -> usize {
                (**self).dim()
            }
            fn encode(&self, sentences: &[&str]) -> Result<Matrix, EncodeError> {
                (**self).encode(sentences)
            }
            fn pair_logits(
                &self,
                head: &str,
                u: &Matrix,
                v: &Matrix,
            ) -> Result<Option<Matrix>, EncodeError> {
                (**self).pair_logits(head, u, v)
            }
            fn for_language(&self, language: &str) -> Option<Arc<dyn Encoder>> {
                (**self).for_language(language)
            }
        }
    };
}

forward_encoder!(Box);
forward_encoder!(Arc);

/// Reads a sentence list: one sentence per line, UTF-8, `\n` or `\r\n` line ends; a final
/// line end does not start another sentence; empty lines are (empty) sentences, so line
/// `i` (0-based) is always sentence `i`.
pub fn read_sentences(path: &Path) -> Result<Vec<String>, EncodeError> {
    let bytes = std::fs::read(path).map_err(|e| EncodeError::io(path, e))?;
    let text = String::from_utf8(bytes).map_err(|e| {
        EncodeError::format(
            path,
            format!("not UTF-8 (at byte {})", e.utf8_error().valid_up_to()),
            "re-save the file as UTF-8",
        )
    })?;
    Ok(split_lines(&text))
}

/// Splits text into lines as [`read_sentences`] does.
pub fn split_lines(text: &str) -> Vec<String> {
    let body = text.strip_suffix('\n').unwrap_or(text);
    if text.is_empty() {
        return Vec::new();
    }
    body.split('\n')
        .map(|l| l.strip_suffix('\r').unwrap_or(l).to_string())
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_split_like_files_are_written() {
        assert_eq!(split_lines(""), Vec::<String>::new());
        assert_eq!(split_lines("a\n"), vec!["a"]);
        assert_eq!(split_lines("a\r\n\nb"), vec!["a", "", "b"]);
        assert_eq!(split_lines("\n"), vec![""]);
    }
}
