//! `harness run RECIPE`: load and check the recipe once, train it if it has tasks (else open
//! its pretrained or fixed encoder), evaluate every benchmark of its `evaluate:` list into the
//! run directory, and render its `report:` tables (DESIGN.md, "The run directory"). Running
//! the same resolved recipe again resumes training and keeps results already there for the
//! same encoder, seed, datasets and declaration (`--force` recomputes them).

use anyhow::{bail, Context};
use clap::Args;
use harness_bench::registry::Registry;
use harness_bench::runner::summary_table;
use harness_core::device::Device;
use harness_core::settings::Settings;
use harness_core::terminal::terminal_safe;
use harness_embed::CachedEncoder;
use harness_encoders::open_encoder_on;
use harness_recipe::schema::Encoder as EncoderSpec;
use harness_recipe::Resolved;
use std::path::Path;
use std::process::ExitCode;

#[derive(Debug, Args)]
pub struct RunCliArgs {
    #[command(flatten)]
    pub train: super::train::TrainArgs,
    /// Re-run benchmarks whose result file is already present
    #[arg(long)]
    pub force: bool,
}

/// `harness run`.
pub fn run(args: &RunCliArgs, settings: &Settings) -> anyhow::Result<ExitCode> {
    let train = &args.train;
    // Every device problem is refused before any work; the recipe is loaded and checked once.
    // The evaluation encodes where training ran (burn-flex trains only: its encoder is read
    // back on ndarray, the same CPU).
    // A device list (`cpu,cpu`) trains data-parallel; the evaluation encodes on the first.
    let devices = Device::parse_list(&train.device, &super::compiled())?;
    let device = devices[0];
    let resolved = super::load_recipe(&train.recipe, train.profile.clone(), &train.sets)?;
    harness_train::session::check_devices(&resolved, &devices)?;
    if let Some(problem) = nothing_to_report(&resolved) {
        bail!("{problem}");
    }
    super::train::refuse_ranks_without_mpi()?;
    // One rank of an MPI job (`mpirun -np N harness run …`): every rank trains, rank 0 alone
    // then evaluates and reports (the others have ended).
    #[cfg(feature = "mpi")]
    if harness_train::mpi_world::launched() && !resolved.recipe.tasks.is_empty() {
        let Some((dir, trained, device)) =
            super::train::train_as_rank(&resolved, &devices, train, settings)?
        else {
            return Ok(ExitCode::SUCCESS);
        };
        if trained.outcome.interrupted {
            return Ok(super::train::exit_code(&trained));
        }
        return super::on_device(device, None, || {
            let spec = dir.path().display().to_string();
            evaluate_and_report(&resolved, &spec, dir.path(), settings, args.force, device)
        });
    }
    super::on_device(device, super::batch_tokens(&resolved), || {
        if !resolved.recipe.tasks.is_empty() {
            // A training recipe: train (or resume) into its run directory, then evaluate its
            // best checkpoint. The run directory stays locked until the report is written.
            let (dir, trained) = super::train::train(&resolved, &devices, train, settings)?;
            if trained.outcome.interrupted {
                return Ok(super::train::exit_code(&trained));
            }
            let spec = dir.path().display().to_string();
            return evaluate_and_report(&resolved, &spec, dir.path(), settings, args.force, device);
        }
        let spec = encoder_spec(&resolved)?;
        let dir =
            super::open_run_dir(train.out.as_deref(), settings, &resolved, &train.sets, None)?;
        evaluate_and_report(&resolved, &spec, dir.path(), settings, args.force, device)
    })
}

/// Why `harness run` would fail at its end: report tables with no benchmark to render them
/// from (`evaluate: []`). Refused before any training; `harness train` takes such a recipe.
pub fn nothing_to_report(resolved: &Resolved) -> Option<String> {
    (resolved.recipe.evaluate.is_empty() && !resolved.recipe.report.is_empty()).then(|| {
        format!(
            "{}: evaluate: lists no benchmark, but `report:` names tables, which are rendered from the results; `harness run` would train and then fail at the report. Fix: list benchmarks under `evaluate` (e.g. `[stsb-test]`), remove `report`, or train only (`harness train`)",
            resolved.path.display()
        )
    })
}

/// The encoder spec (`--encoder` syntax) an evaluation recipe's `model.encoder` stands for.
///
/// Errors for encoders that have to be trained first, and for hashed-encoder settings the
/// `hashed-ngrams` implementation does not have.
pub fn encoder_spec(resolved: &Resolved) -> anyhow::Result<String> {
    let file = resolved.path.display();
    let Some(model) = &resolved.recipe.model else {
        bail!("{file}: the recipe has no `model:` section. Fix: add `model: {{encoder: ...}}`");
    };
    match &model.encoder {
        // `harness validate` holds the hashed encoder to what it implements (recipe/check.rs).
        EncoderSpec::Hashed(h) => Ok(format!(
            "hashed-ngrams:dim={},seed={},buckets={}",
            h.dim,
            resolved.recipe.seed,
            h.buckets.trailing_zeros()
        )),
        EncoderSpec::Pretrained(p) if !p.trainable => Ok(p.name.clone()),
        other => bail!(
            "{file}: model.encoder (kind `{}`) has to be trained first, and the recipe has no \
             `tasks:`. Fix: add training tasks, or evaluate a trained run with \
             `harness eval --encoder runs/<dir>`",
            other.kind()
        ),
    }
}

/// The pretrained encoder a training recipe fine-tunes (`model.encoder: {kind: pretrained,
/// trainable: true}`), as an `--encoder` spec.
fn fine_tuned_from(resolved: &Resolved) -> Option<String> {
    if resolved.recipe.tasks.is_empty() {
        return None;
    }
    match &resolved.recipe.model.as_ref()?.encoder {
        EncoderSpec::Pretrained(p) if p.trainable => Some(p.name.clone()),
        _ => None,
    }
}

/// The part of `harness run` after the encoder exists: every benchmark of the recipe into
/// `<dir>/results/`, the summary table, then the recipe's `report:` tables into
/// `<dir>/report/`. Exit code 1 when a benchmark failed.
fn evaluate_and_report(
    resolved: &Resolved,
    spec: &str,
    dir: &Path,
    settings: &Settings,
    force: bool,
    device: Device,
) -> anyhow::Result<ExitCode> {
    let registry = Registry::load()?;
    let plan =
        harness_bench::runner::plan(&registry, &harness_bench::runner::entries(&resolved.recipe))?;
    let inner = open_encoder_on(spec, settings, device)?;
    let encoder = CachedEncoder::new(inner, &settings.cache_dir);
    let results_dir = dir.join("results");
    let results = harness_bench::runner::evaluate(
        &plan,
        &registry,
        &encoder,
        settings,
        resolved.recipe.seed,
        &results_dir,
        !force,
    )?;
    print!("{}", terminal_safe(&summary_table(&results)));
    let mut report_inputs = vec![dir.to_path_buf()];
    if let Some(base) = fine_tuned_from(resolved) {
        // A fine-tuning run reports against the encoder it started from (Emu's tables are
        // relative to it): the same benchmarks, through the same cache, into `base/`.
        println!("base encoder `{base}`: evaluating the same benchmarks for comparison");
        let inner = open_encoder_on(&base, settings, device)?;
        let encoder = CachedEncoder::new(inner, &settings.cache_dir);
        let base_dir = dir.join("base");
        let base_results = harness_bench::runner::evaluate(
            &plan,
            &registry,
            &encoder,
            settings,
            resolved.recipe.seed,
            &base_dir.join("results"),
            !force,
        )?;
        print!("{}", terminal_safe(&summary_table(&base_results)));
        report_inputs.push(base_dir);
    }
    if resolved.recipe.report.is_empty() {
        println!("no report: the recipe lists no `report:` tables (see `harness report --list`)");
    } else {
        let report_dir = dir.join("report");
        let summary =
            harness_report::render_report(&report_inputs, &resolved.recipe.report, &report_dir, &super::known()?)
                .with_context(|| {
                    format!(
                        "rendering the report of {} (the results are kept; retry with `harness report {} --out {}`)",
                        dir.display(),
                        dir.display(),
                        report_dir.display()
                    )
                })?;
        for w in &summary.warnings {
            harness_core::note!("warning: {w}");
        }
        println!(
            "report: {} tables, {} measured cells filled ({} n/a, {} not run yet) in {}",
            summary.tables,
            summary.filled,
            summary.na,
            summary.not_run,
            report_dir.join("report.html").display()
        );
    }
    let (files, rehashed, bytes, spent) = harness_core::stamp::totals();
    harness_core::note!(
        "datasets and models checked before use: {files} file checks, {rehashed} re-hashed ({}), {:.1} ms",
        harness_data::fetch::human_bytes(bytes),
        spent.as_secs_f64() * 1e3
    );
    println!("run directory: {}", dir.display());
    Ok(if results.iter().any(|r| r.error.is_some()) {
        ExitCode::from(1)
    } else {
        ExitCode::SUCCESS
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn recipes_map_to_encoder_specs() {
        let root = harness_core::repo_root().join("recipes");
        let load = |f: &str| crate::commands::load_recipe(&root.join(f), None, &[]).unwrap();
        assert_eq!(
            encoder_spec(&load("hashed-ngrams.yaml")).unwrap(),
            "hashed-ngrams:dim=512,seed=1,buckets=20"
        );
        assert_eq!(
            encoder_spec(&load("multilingual-e5-small.yaml")).unwrap(),
            "multilingual-e5-small"
        );
        let err = encoder_spec(&load("laser.yaml")).unwrap_err().to_string();
        assert!(
            err.contains("laser.yaml") && err.contains("bilstm"),
            "{err}"
        );
    }
}
