//! `harness datasets list|verify|fetch|lock`: the pinned datasets, their state, their
//! verification and installation from mirrors.

use clap::Subcommand;
use harness_core::settings::Settings;
use harness_core::terminal::terminal_safe;
use harness_data::fetch::{
    fetch_dataset, human_bytes, pinned, progress_bar, quick_state, stamp_path, verify_dataset,
    DatasetState, FetchOptions, Mirror,
};
use harness_data::lock::{DatasetEntry, Lock};
use harness_data::DataError;
use indicatif::{ProgressBar, ProgressStyle};
use std::io::{IsTerminal, Write};
use std::path::{Path, PathBuf};
use std::process::ExitCode;

#[derive(Debug, Subcommand)]
pub enum DatasetsCommand {
    /// Name, licence, size and state (present / missing / corrupt) of every locked dataset
    List,
    /// Recompute the sha256 of every file; name each missing or changed one (exit 1 if any)
    Verify {
        /// Datasets to verify (default: all)
        names: Vec<String>,
    },
    /// Install datasets into the data directory from a mirror, verifying every byte
    Fetch {
        /// Datasets to fetch (default: all)
        names: Vec<String>,
        /// Fetch from this directory or http(s) URL instead of the configured mirrors
        #[arg(long, value_name = "DIR|URL")]
        from: Option<String>,
        /// Re-fetch files even when the installed copy verifies
        #[arg(long)]
        force: bool,
    },
    /// Maintenance: regenerate datasets.lock by hashing every file of every dataset folder
    Lock {
        /// Folder with one sub-folder per dataset (e.g. ../shared/datasets)
        #[arg(long, value_name = "DIR")]
        from: PathBuf,
        /// Lock file to write (atomically)
        #[arg(long, value_name = "FILE", default_value = "datasets.lock")]
        out: PathBuf,
        /// Per-dataset metadata (version, licence, source, format), one table per folder
        #[arg(long, value_name = "FILE", default_value = "datasets.meta.toml")]
        meta: PathBuf,
    },
}

/// The lock entries named on the command line (all when none), in lock order as given.
fn select<'a>(lock: &'a Lock, names: &[String]) -> Result<Vec<&'a DatasetEntry>, DataError> {
    if names.is_empty() {
        return Ok(lock.dataset.iter().collect());
    }
    let mut out: Vec<&DatasetEntry> = Vec::new();
    for n in names {
        let e = lock.get(n)?;
        if !out.iter().any(|o| o.name == e.name) {
            out.push(e);
        }
    }
    Ok(out)
}

/// `harness datasets list|verify|fetch|lock`.
pub fn run(cmd: &DatasetsCommand, settings: &Settings) -> anyhow::Result<ExitCode> {
    if let DatasetsCommand::Lock { from, out, meta } = cmd {
        return lock_command(from, out, meta, &mut std::io::stdout().lock());
    }
    let lock = Lock::embedded()?;
    run_with(cmd, settings, &lock, &mut std::io::stdout().lock())
}

/// [`run`] with an explicit lock and output (for tests and embedding).
/// Results go to `out`; warnings and progress go to stderr.
pub fn run_with(
    cmd: &DatasetsCommand,
    settings: &Settings,
    lock: &Lock,
    out: &mut dyn Write,
) -> anyhow::Result<ExitCode> {
    match cmd {
        DatasetsCommand::List => list_command(lock, &settings.data_dir, out),
        DatasetsCommand::Verify { names } => verify_command(lock, names, &settings.data_dir, out),
        DatasetsCommand::Fetch { names, from, force } => {
            let mirrors = match from {
                Some(m) => vec![Mirror::parse(m)],
                None => Mirror::from_settings(settings),
            };
            fetch_command(lock, names, &settings.data_dir, &mirrors, *force, out)
        }
        DatasetsCommand::Lock { from, out: o, meta } => lock_command(from, o, meta, out),
    }
}

fn list_command(lock: &Lock, data_dir: &Path, out: &mut dyn Write) -> anyhow::Result<ExitCode> {
    let width = lock
        .names()
        .iter()
        .map(|n| n.len())
        .max()
        .unwrap_or(4)
        .max(7);
    writeln!(out, "data directory: {}", data_dir.display())?;
    writeln!(
        out,
        "{:<width$}  {:>6}  {:>9}  {:<10}  LICENCE",
        "DATASET", "FILES", "SIZE", "STATE"
    )?;
    for d in &lock.dataset {
        // Sizes from `stat`; "verified" only while every file keeps the identity it had
        // when it was last hashed (nothing is hashed here).
        let state = match quick_state(d, data_dir) {
            DatasetState::Present
                if harness_core::stamp::all_stamped(
                    &stamp_path(data_dir, &d.name),
                    &pinned(d, data_dir),
                ) =>
            {
                "verified".to_string()
            }
            DatasetState::Present => "unverified".to_string(),
            other => other.to_string(),
        };
        writeln!(
            out,
            "{:<width$}  {:>6}  {:>9}  {:<10}  {}",
            d.name,
            d.file.len(),
            human_bytes(d.total_bytes()),
            state.to_string(),
            d.licence
        )?;
    }
    let (files, bytes) = lock.totals();
    writeln!(
        out,
        "{} datasets, {files} files, {} (unverified: changed on disk since last hashed, or never hashed; `harness datasets verify` re-hashes every file, and every use re-hashes the files that changed)",
        lock.dataset.len(),
        human_bytes(bytes)
    )?;
    Ok(ExitCode::SUCCESS)
}

fn verify_command(
    lock: &Lock,
    names: &[String],
    data_dir: &Path,
    out: &mut dyn Write,
) -> anyhow::Result<ExitCode> {
    let entries = select(lock, names)?;
    let total: u64 = entries.iter().map(|d| d.total_bytes()).sum();
    let files: usize = entries.iter().map(|d| d.file.len()).sum();
    let pb = progress_bar(total, true, "verifying");
    let mut problems = 0;
    let mut bad_datasets = 0;
    for d in &entries {
        pb.set_message(d.name.clone());
        let found = verify_dataset(d, data_dir, &pb);
        if !found.is_empty() {
            bad_datasets += 1;
        }
        for p in &found {
            pb.suspend(|| writeln!(out, "{}: {p}", d.name))?;
        }
        problems += found.len();
    }
    pb.finish_and_clear();
    if problems == 0 {
        writeln!(
            out,
            "ok: {} datasets, {files} files, {} verified in {}",
            entries.len(),
            human_bytes(total),
            data_dir.display()
        )?;
        Ok(ExitCode::SUCCESS)
    } else {
        writeln!(
            out,
            "FAILED: {problems} problem(s) in {bad_datasets} of {} datasets ({files} files, {} checked in {})",
            entries.len(),
            human_bytes(total),
            data_dir.display()
        )?;
        Ok(ExitCode::from(1))
    }
}

fn fetch_command(
    lock: &Lock,
    names: &[String],
    data_dir: &Path,
    mirrors: &[Mirror],
    force: bool,
    out: &mut dyn Write,
) -> anyhow::Result<ExitCode> {
    let entries = select(lock, names)?;
    let mut failed = 0;
    for d in &entries {
        let opts = FetchOptions {
            force,
            progress: true,
        };
        match fetch_dataset(d, data_dir, mirrors, opts) {
            Ok(r) => {
                for w in &r.warnings {
                    eprintln!("warning: {}", terminal_safe(&w.to_string()));
                }
                for p in &r.removed_directories {
                    writeln!(
                        out,
                        "{}: removed the directory {p}, which stood where a file of the dataset belongs",
                        d.name
                    )?;
                }
                for p in &r.replaced_corrupt {
                    writeln!(
                        out,
                        "{}: replaced {p}, which did not match datasets.lock",
                        d.name
                    )?;
                }
                let mut from: Vec<&str> = r.installed.iter().map(|(_, m)| m.as_str()).collect();
                from.dedup();
                let from = if from.is_empty() {
                    String::new()
                } else {
                    format!(" from {}", from.join(", "))
                };
                writeln!(
                    out,
                    "{}: {} file(s) installed ({}){from}, {} already present and verified",
                    d.name,
                    r.installed.len(),
                    human_bytes(r.bytes),
                    r.already_present
                )?;
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
            "FAILED: {failed} of {} datasets could not be fetched completely (see above)",
            entries.len()
        )?;
        return Ok(ExitCode::from(1));
    }
    writeln!(
        out,
        "ok: {} datasets in {}",
        entries.len(),
        data_dir.display()
    )?;
    Ok(ExitCode::SUCCESS)
}

/// `harness datasets lock --from DIR`: hash every file of every dataset folder and write the
/// lock (atomically) with metadata from `datasets.meta.toml`.
fn lock_command(
    from: &Path,
    out_path: &Path,
    meta_path: &Path,
    out: &mut dyn Write,
) -> anyhow::Result<ExitCode> {
    let meta = harness_data::lock::read_meta(meta_path)?;
    let pb = if std::io::stderr().is_terminal() {
        let pb = ProgressBar::new_spinner();
        if let Ok(style) = ProgressStyle::with_template("{spinner} hashing {bytes} {bytes_per_sec}")
        {
            pb.set_style(style);
        }
        pb
    } else {
        ProgressBar::hidden()
    };
    let lock = harness_data::lock::generate(from, &meta, &mut |n| pb.inc(n))?;
    pb.finish_and_clear();
    let text = lock.render();
    // The written text must read back as exactly this lock.
    let back = Lock::parse(&text, out_path.to_path_buf())?;
    anyhow::ensure!(
        back == lock,
        "internal error: rendered lock does not round-trip"
    );
    harness_core::nofollow::write_atomic(out_path, text.as_bytes())
        .map_err(|e| DataError::io(out_path, e))?;
    let (files, bytes) = lock.totals();
    writeln!(
        out,
        "wrote {}: {} datasets, {files} files, {bytes} bytes ({}). Rebuild harness to embed it.",
        out_path.display(),
        lock.dataset.len(),
        human_bytes(bytes)
    )?;
    Ok(ExitCode::SUCCESS)
}
