//! Installing datasets from mirrors (directories or http(s) URLs), verified against the lock.

use crate::cli::DatasetsCommand;
use crate::settings::Settings;
use std::process::ExitCode;

/// `harness datasets list|verify|fetch`.
pub fn datasets_command(_cmd: &DatasetsCommand, _settings: &Settings) -> anyhow::Result<ExitCode> {
    anyhow::bail!("harness datasets is not implemented yet")
}
