//! The record of a trained run that another run's `pretrained` encoder starts from
//! (`base-encoder.json`).

use crate::error::ModelError;
use harness_recipe::schema::Encoder;

/// The run file naming the trained run a `pretrained` encoder started from
/// ([`BaseEncoder`]); absent when it started from a published model.
pub const BASE_ENCODER_FILE: &str = "base-encoder.json";

/// A trained harness run as the start of another run (`model.encoder: {kind: pretrained,
/// name: runs/…}`): its encoder's architecture, so that the new run's model can be built
/// without the base run, and digests of what was taken from it.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct BaseEncoder {
    /// The base run's directory as the recipe names it.
    pub run: String,
    /// The base run's `model.encoder`, as its resolved recipe has it.
    pub encoder: Encoder,
    /// sha256 of the base encoder's weight values ([`crate::trained::weights_digest`]).
    pub weights_sha256: String,
    /// sha256 of the base run's tokenizer file, which the new run copies.
    pub tokenizer_sha256: String,
}

impl BaseEncoder {
    /// Reads `path`; `None` when it does not exist.
    pub fn read(path: &std::path::Path) -> Result<Option<Self>, ModelError> {
        if !path.is_file() {
            return Ok(None);
        }
        let text = std::fs::read_to_string(path).map_err(|e| ModelError::io(path, e))?;
        serde_json::from_str(&text).map(Some).map_err(|e| {
            ModelError::format(
                path,
                format!("not a base-encoder record ({e})"),
                "delete the run directory's checkpoints and this file; `harness train` writes it again",
            )
        })
    }
}
