//! Model selection per language (XNLI 2018 §5.1: each target language's model is selected
//! on its own validation set). Each encoder of `model.languages` keeps the weights it had at
//! the in-training evaluation where its language scored best, in
//! `checkpoints/best-encoders/<encoder>-<step>.mpk`, listed with the step, the score and the
//! file's sha256 in `checkpoints/best-encoders.json`. The trainer writes a new weights file
//! first and the list after it (both atomically), then removes the file the list no longer
//! names, so a killed run leaves a list whose files are all whole. Loading a run reads these
//! weights over its checkpoint's encoders, checking each file against the list's sha256.

use crate::encoder::SentenceEncoder;
use crate::system::{System, SystemConfig};
use burn::module::Module;
use burn::record::{FullPrecisionSettings, NamedMpkBytesRecorder, Recorder};
use burn::tensor::backend::Backend;
use harness_embed::EncodeError;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// The list's file name, in the run's `checkpoints/`.
pub const LIST: &str = "best-encoders.json";
/// The weights' folder, in the run's `checkpoints/`.
pub const DIR: &str = "best-encoders";

type Rec = NamedMpkBytesRecorder<FullPrecisionSettings>;

/// Every selected encoder of a run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct BestEncoders {
    /// The per-language metric (`train.best_per_language`, e.g. `xnli-dev.accuracy`).
    pub metric: String,
    pub lower_is_better: bool,
    /// By encoder name.
    pub encoders: BTreeMap<String, BestEncoder>,
}

/// One encoder's best evaluation and its weights then.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct BestEncoder {
    /// The language it was selected on.
    pub language: String,
    /// The step of that evaluation.
    pub step: u64,
    /// The language's score then.
    pub value: f64,
    /// The weights' file name in `best-encoders/`.
    pub file: String,
    /// sha256 of that file.
    pub sha256: String,
}

fn format_error(path: &Path, detail: impl std::fmt::Display, fix: &str) -> EncodeError {
    EncodeError::format(path.to_path_buf(), detail.to_string(), fix.to_string())
}

impl BestEncoders {
    /// An empty list for `metric`.
    pub fn new(metric: &str, lower_is_better: bool) -> Self {
        BestEncoders {
            metric: metric.to_string(),
            lower_is_better,
            encoders: BTreeMap::new(),
        }
    }

    /// Reads `checkpoints/best-encoders.json`, if the run has one.
    pub fn read(checkpoints: &Path) -> Result<Option<Self>, EncodeError> {
        let path = checkpoints.join(LIST);
        let text = match std::fs::read_to_string(&path) {
            Ok(t) => t,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(format_error(&path, e, "check the file's permissions")),
        };
        serde_json::from_str(&text).map(Some).map_err(|e| {
            format_error(
                &path,
                format!("not a list of selected encoders ({e})"),
                "delete it (and `best-encoders/`) to evaluate the run's checkpoint encoders as they are",
            )
        })
    }

    /// Whether `value` beats the encoder's recorded best (any value beats none).
    pub fn improves(&self, encoder: &str, value: f64) -> bool {
        self.encoders.get(encoder).is_none_or(|b| {
            if self.lower_is_better {
                value < b.value
            } else {
                value > b.value
            }
        })
    }

    /// Records `weights` as encoder `name`'s best (language `language`, `value` at `step`):
    /// writes its weights file, then the list, then removes the file it replaces.
    pub fn record<B: Backend>(
        &mut self,
        checkpoints: &Path,
        name: &str,
        language: &str,
        step: u64,
        value: f64,
        weights: &SentenceEncoder<B>,
    ) -> Result<(), EncodeError> {
        let fix = "check the disk space and permissions of the run directory";
        // Encoder names are recipe keys; one that is not a plain file name is refused
        // rather than written outside the folder.
        let plain = !name.is_empty()
            && name
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || "-_".contains(c));
        if !plain {
            return Err(format_error(
                &checkpoints.join(DIR),
                format!("encoder name `{name}` is not a plain file name"),
                "name the encoders of `model.languages` with letters, digits, `-` and `_`",
            ));
        }
        let file = format!("{name}-{step:08}.mpk");
        let path = checkpoints.join(DIR).join(&file);
        let bytes = Rec::new()
            .record(weights.clone().into_record(), ())
            .map_err(|e| format_error(&path, e, fix))?;
        harness_core::nofollow::write_atomic(&path, &bytes)
            .map_err(|e| format_error(&path, e, fix))?;
        let replaced = self.encoders.insert(
            name.to_string(),
            BestEncoder {
                language: language.to_string(),
                step,
                value,
                file: file.clone(),
                sha256: harness_core::fsutil::sha256_hex(&bytes),
            },
        );
        let list = checkpoints.join(LIST);
        let json = serde_json::to_string_pretty(self).map_err(|e| format_error(&list, e, fix))?;
        harness_core::nofollow::write_atomic(&list, json.as_bytes())
            .map_err(|e| format_error(&list, e, fix))?;
        if let Some(old) = replaced.filter(|o| o.file != file) {
            let old = checkpoints.join(DIR).join(old.file);
            // Only a file this list named (harness wrote it); gone already is fine.
            match std::fs::remove_file(&old) {
                Err(e) if e.kind() != std::io::ErrorKind::NotFound => {
                    return Err(format_error(&old, e, fix))
                }
                _ => {}
            }
        }
        Ok(())
    }

    /// The weights file of an entry.
    pub fn path(checkpoints: &Path, entry: &BestEncoder) -> PathBuf {
        checkpoints.join(DIR).join(&entry.file)
    }
}

/// `model` with each encoder the run selected per language (`checkpoints/best-encoders.json`)
/// set to its selected weights; the list, when there is one.
pub fn apply<B: Backend>(
    mut model: System<B>,
    config: &SystemConfig,
    checkpoints: &Path,
    device: &B::Device,
) -> Result<(System<B>, Option<BestEncoders>), EncodeError> {
    let Some(list) = BestEncoders::read(checkpoints)? else {
        return Ok((model, None));
    };
    let fix = "delete `best-encoders.json` and `best-encoders/` in the run's checkpoints to evaluate its checkpoint encoders as they are, or train the run again";
    for (name, entry) in &list.encoders {
        let path = BestEncoders::path(checkpoints, entry);
        let Some(i) = config.encoder_index(name) else {
            return Err(format_error(
                &checkpoints.join(LIST),
                format!("names encoder `{name}`, which the run's recipe does not have"),
                fix,
            ));
        };
        let bytes = std::fs::read(&path).map_err(|e| format_error(&path, e, fix))?;
        let sha = harness_core::fsutil::sha256_hex(&bytes);
        if sha != entry.sha256 {
            return Err(format_error(
                &path,
                format!(
                    "its sha256 is {sha}, and `{LIST}` recorded {}: the file changed since training wrote it",
                    entry.sha256
                ),
                fix,
            ));
        }
        let record = Rec::new()
            .load(bytes, device)
            .map_err(|e| format_error(&path, format!("cannot load the weights ({e})"), fix))?;
        let encoder = model.encoders.remove(i).load_record(record);
        model.encoders.insert(i, encoder);
    }
    Ok((model, Some(list)))
}
