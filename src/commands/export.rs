//! `harness export RUN_DIR --out DIR`: a trained run's encoder as safetensors + config.json +
//! tokenizer.json, never touching files export did not write.

use clap::Args;
use std::path::PathBuf;
use std::process::ExitCode;

#[derive(Debug, Args)]
pub struct ExportArgs {
    /// Run directory (`runs/<recipe>-<fingerprint8>`)
    pub run: PathBuf,
    /// Output directory: new, empty, or an earlier export (its three files are replaced;
    /// nothing else in it is touched)
    #[arg(long)]
    pub out: PathBuf,
    /// Write into a directory that holds other files too (only the exported files are
    /// replaced; the others are left as they are)
    #[arg(long)]
    pub force: bool,
}

/// `harness export`.
pub fn run(args: &ExportArgs) -> anyhow::Result<ExitCode> {
    harness_train::export::export(&args.run, &args.out, args.force)?;
    println!("exported {} to {}", args.run.display(), args.out.display());
    Ok(ExitCode::SUCCESS)
}
