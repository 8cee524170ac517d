//! `harness validate RECIPE...`: schema, types, ranges and references of each recipe (and of
//! each of its profiles), every problem with its file, key path and line.

use clap::Args;
use harness_core::terminal::terminal_safe;
use harness_recipe::{validate, LoadOptions};
use std::path::PathBuf;
use std::process::ExitCode;

/// Arguments of `harness validate`.
#[derive(Debug, Args)]
pub struct ValidateArgs {
    /// Recipe files (YAML)
    #[arg(required = true)]
    pub recipes: Vec<PathBuf>,
    /// Print each resolved recipe (base ⊕ profile ⊕ --set) and its fingerprint
    #[arg(long)]
    pub resolved: bool,
    /// Apply the named profile of each recipe
    #[arg(long)]
    pub profile: Option<String>,
    /// Override one key: `--set train.steps=100` (repeatable; value parsed as YAML)
    #[arg(long = "set", value_name = "KEY=VALUE")]
    pub sets: Vec<String>,
}

/// `harness validate`: exit 0 when every recipe is valid, 1 when any is not (every problem
/// of every file printed), 2 on a setup error.
pub fn run(args: &ValidateArgs) -> anyhow::Result<ExitCode> {
    let known = super::known()?;
    let opts = LoadOptions {
        profile: args.profile.clone(),
        sets: args.sets.clone(),
    };
    let mut invalid = 0usize;
    let mut stdout = String::new();
    for (i, path) in args.recipes.iter().enumerate() {
        match validate(path, &opts, &known) {
            Ok(r) => {
                if let Some(problem) = super::run::nothing_to_report(&r) {
                    eprintln!("warning: {}", terminal_safe(&problem));
                }
                if args.resolved {
                    if i > 0 {
                        stdout.push_str("---\n");
                    }
                    let profile = r
                        .profile
                        .as_deref()
                        .map_or(String::new(), |p| format!(", profile {p}"));
                    stdout.push_str(&format!("# {}{profile}\n", path.display()));
                    stdout.push_str(&r.to_yaml()?);
                    stdout.push_str(&format!("fingerprint: {}\n", r.fingerprint.short()));
                } else {
                    stdout.push_str(&format!(
                        "ok {} ({})\n",
                        path.display(),
                        r.fingerprint.short()
                    ));
                }
            }
            Err(problems) => {
                invalid += 1;
                for p in &problems {
                    eprintln!("error: {}", terminal_safe(&p.to_string()));
                }
                eprintln!(
                    "{}: {} problem{}",
                    path.display(),
                    problems.len(),
                    if problems.len() == 1 { "" } else { "s" }
                );
            }
        }
    }
    // A closed pipe (`| head`) is not an error.
    use std::io::Write;
    if let Err(e) = std::io::stdout().lock().write_all(stdout.as_bytes()) {
        if e.kind() != std::io::ErrorKind::BrokenPipe {
            return Err(e.into());
        }
    }
    Ok(if invalid == 0 {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    })
}
