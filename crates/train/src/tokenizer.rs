//! The run's vocabulary: learned on the recipe's `train_on` corpora (joint BPE, a
//! sentencepiece model, or words with hashed character n-grams; a language token for every
//! language), or reloaded from the run
//! directory's `tokenizer.json` when it exists.

use crate::corpora::Loaded;
use crate::TrainError;
use harness_data::tokenize::TextTokenizer;
use harness_recipe::schema::{Decoder, Recipe};
use std::collections::BTreeMap;
use std::path::Path;

/// Loads `path` if it exists, else learns the recipe's vocabulary on its `train_on`
/// corpora (every language of a parallel corpus, and every decoder target, gets a
/// language token) and saves it there.
pub fn tokenizer_for(
    recipe: &Recipe,
    loaded: &BTreeMap<String, Loaded>,
    tok_path: &Path,
) -> Result<TextTokenizer, TrainError> {
    // Tokenizer: languages of every parallel corpus get a language token.
    let mut languages: Vec<String> = Vec::new();
    for l in loaded.values() {
        if let Loaded::Parallel(c) = l {
            for (s, t, _) in c {
                languages.push(s.clone());
                languages.push(t.clone());
            }
        }
    }
    // A corpus of files is read once here: a bounded sample of its sentences for the
    // vocabulary, and the languages of its pairs.
    let sample = recipe
        .data
        .tokenizer
        .as_ref()
        .and_then(|t| t.sample)
        .unwrap_or(harness_recipe::schema::Tokenizer::DEFAULT_SAMPLE) as usize;
    let learns = !tok_path.is_file();
    let mut samples: BTreeMap<&String, Vec<String>> = BTreeMap::new();
    for (name, l) in loaded {
        if let Loaded::Files(f) = l {
            // A tokenizer already learned has its languages.
            if !learns {
                continue;
            }
            let (sentences, langs) = f.sample(sample, recipe.seed)?;
            harness_core::note!(
                "tokenizer: {} sentences sampled from corpus `{name}` (at most {sample}: `data.tokenizer.sample`)",
                sentences.len()
            );
            languages.extend(langs);
            samples.insert(name, sentences);
        }
    }
    if let Some(Decoder::Lstm(d)) = recipe.model.as_ref().and_then(|m| m.decoder.as_ref()) {
        languages.extend(d.targets.iter().cloned());
    }
    if languages.is_empty() {
        languages.push("eng".into());
    }
    let tokenizer = if tok_path.is_file() {
        TextTokenizer::load(tok_path)?
    } else {
        let spec = recipe.data.tokenizer.clone().ok_or_else(|| {
            TrainError::recipe(
                "data.tokenizer",
                "missing",
                "add `data.tokenizer: {kind: bpe, vocab: 8000}`",
            )
        })?;
        if !crate::capability::TOKENIZERS.contains(&spec.kind) {
            return Err(TrainError::recipe(
                "data.tokenizer.kind",
                "only vocabularies learned on the corpora can be trained here",
                "use `bpe`, `sentencepiece` or `words`",
            ));
        }
        let train_on: Vec<&String> = if spec.train_on.is_empty() {
            loaded.keys().collect()
        } else {
            spec.train_on.iter().collect()
        };
        let mut sentences: Vec<&str> = Vec::new();
        for n in train_on {
            if let Some(l) = loaded.get(n) {
                sentences.extend(l.sentences());
            }
            if let Some(v) = samples.get(n) {
                sentences.extend(v.iter().map(String::as_str));
            }
        }
        let t = TextTokenizer::train(&spec, &languages, sentences.into_iter())?;
        t.save(tok_path)?;
        t
    };

    Ok(tokenizer)
}

/// The run's tokenizer when its encoder is a pretrained model: the model's own
/// (`start.tokenizer`), saved at `tok_path` with the model's architecture; a run that has one
/// already reloads it, refusing one that belongs to another model.
pub fn pretrained_tokenizer(
    start: &harness_model::pretrained::BertStart,
    tok_path: &Path,
) -> Result<TextTokenizer, TrainError> {
    if tok_path.is_file() {
        let t = TextTokenizer::load(tok_path)?;
        let same = t.pretrained().is_some_and(|p| {
            p.model_sha256 == start.tokenizer.model_sha256 && p.model == start.tokenizer.model
        });
        if !same {
            return Err(TrainError::recipe(
                "model.encoder.name",
                format!(
                    "{} belongs to another model than `{}`",
                    tok_path.display(),
                    start.tokenizer.model
                ),
                "train in a new run directory (the run's checkpoints belong to that model too)",
            ));
        }
        return Ok(t);
    }
    let t = TextTokenizer::from_pretrained(start.tokenizer.clone());
    t.save(tok_path)?;
    Ok(t)
}

/// The run's tokenizer when its encoder starts from a trained run: a copy of that run's
/// (its ids are what the encoder's embeddings were trained on); a run that has one already
/// reloads it, refusing one that differs.
pub fn base_run_tokenizer(
    start: &harness_model::pretrained::RunStart,
    tok_path: &Path,
) -> Result<TextTokenizer, TrainError> {
    if tok_path.is_file() {
        let t = TextTokenizer::load(tok_path)?;
        if t.digest() != start.record.tokenizer_sha256 {
            return Err(TrainError::recipe(
                "model.encoder.name",
                format!(
                    "{} is not the tokenizer of `{}`",
                    tok_path.display(),
                    start.record.run
                ),
                "train in a new run directory (the run's checkpoints belong to that tokenizer too)",
            ));
        }
        return Ok(t);
    }
    start.tokenizer.save(tok_path)?;
    Ok(start.tokenizer.clone())
}
