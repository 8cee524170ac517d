//! The recipe language: serde schema, loading (base inheritance, profiles, `--set`),
//! validation with did-you-mean, and the fingerprint of a resolved recipe.

use crate::cli::ValidateArgs;
use crate::settings::Settings;
use std::process::ExitCode;

/// `harness validate`.
pub fn validate_command(_args: &ValidateArgs, _settings: &Settings) -> anyhow::Result<ExitCode> {
    anyhow::bail!("harness validate is not implemented yet")
}
