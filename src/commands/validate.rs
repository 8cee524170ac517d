//! `harness validate RECIPE...`: schema, types, ranges and references of each recipe (and of
//! each of its profiles), every problem with its file, key path and line; with `--device`,
//! also what training on those devices would refuse (`harness_recipe::device`).

use clap::Args;
use harness_core::device::Device;
use harness_core::terminal::terminal_safe;
use harness_recipe::error::Problem;
use harness_recipe::Resolved;
use harness_recipe::{validate, LoadOptions};
use std::path::{Path, PathBuf};
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
    /// Also check what training on these devices would refuse (`cpu`, `cuda:0`, `cpu,cpu`:
    /// the `--device` of `train` and `run`)
    #[arg(long, value_name = "DEVICE[,DEVICE...]")]
    pub device: Option<String>,
}

/// `harness validate`: exit 0 when every recipe is valid, 1 when any is not (every problem
/// of every file printed), 2 on a setup error.
pub fn run(args: &ValidateArgs) -> anyhow::Result<ExitCode> {
    let known = super::known()?;
    let opts = LoadOptions {
        profile: args.profile.clone(),
        sets: args.sets.clone(),
    };
    // A device this build cannot use is refused as `train` refuses it.
    let devices = match &args.device {
        Some(d) => Some(Device::parse_list(d, &super::compiled())?),
        None => None,
    };
    let mut invalid = 0usize;
    let mut stdout = String::new();
    for (i, path) in args.recipes.iter().enumerate() {
        let checked = validate(path, &opts, &known).and_then(|r| match &devices {
            Some(d) => match device_problem(path, &r, d) {
                Some(problem) => Err(vec![problem]),
                None => Ok(r),
            },
            None => Ok(r),
        });
        match checked {
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

/// What training `r` on `devices` would refuse before any work ([`harness_recipe::device`];
/// for a device list, the tasks data-parallel training cannot shard), as a problem of `path`
/// in the words `train` uses.
fn device_problem(path: &Path, r: &Resolved, devices: &[Device]) -> Option<Problem> {
    if let Some(refusal) = harness_recipe::device::device_refusal(&r.recipe, devices) {
        return Some(Problem::new(
            path.to_path_buf(),
            None,
            refusal.key,
            refusal.to_string(),
        ));
    }
    if devices.len() > 1 {
        if let Err(harness_train::TrainError::Recipe { key, detail, fix }) =
            harness_train::parallel::check_recipe(&r.recipe, harness_train::objectives::ALL)
        {
            return Some(Problem::new(
                path.to_path_buf(),
                None,
                key,
                format!("{detail}. Fix: {fix}"),
            ));
        }
    }
    None
}
