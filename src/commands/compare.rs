//! `harness compare A B`: the nightly regression rule between two run or result
//! directories (B against A), per benchmark: Δ, its paired-bootstrap interval over the test
//! items, and the verdict. Exit status 3 when B regresses on any benchmark, else 0.

use clap::Args;
use harness_core::terminal::terminal_safe;
use harness_sweep::nightly::compare::compare;
use harness_sweep::nightly::config::Rules;
use harness_sweep::nightly::rule::Verdict;
use std::path::PathBuf;
use std::process::ExitCode;

#[derive(Debug, Args)]
pub struct CompareArgs {
    /// The reference: a run directory (its results/) or a results folder
    pub a: PathBuf,
    /// The candidate, judged against A
    pub b: PathBuf,
    /// Confidence of the paired bootstrap interval
    #[arg(long, default_value_t = 0.95)]
    pub confidence: f64,
    /// Smallest change (in the metric's points) that counts
    #[arg(long, default_value_t = 1.0)]
    pub min_effect: f64,
    /// Bootstrap replicates
    #[arg(long, default_value_t = 1000)]
    pub replicates: usize,
}

/// `harness compare`.
pub fn run(args: &CompareArgs) -> anyhow::Result<ExitCode> {
    // NaN compares false with everything: taken as it is, it would turn the rule off
    // without a word. Every number is checked before anything is read.
    if !(0.5..1.0).contains(&args.confidence) {
        anyhow::bail!(
            "--confidence {}: expected a value in [0.5, 1), e.g. 0.95",
            args.confidence
        );
    }
    if !(args.min_effect.is_finite() && args.min_effect >= 0.0) {
        anyhow::bail!(
            "--min-effect {}: expected a finite size ≥ 0 in the metric's points, e.g. 1.0",
            args.min_effect
        );
    }
    if args.replicates < 100 {
        anyhow::bail!(
            "--replicates {}: too few for an interval. Fix: 1000 or more",
            args.replicates
        );
    }
    let mut rules = Rules {
        confidence: args.confidence,
        replicates: args.replicates,
        ..Rules::default()
    };
    rules.min_effect.insert("default".into(), args.min_effect);
    let rows = compare(&args.a, &args.b, &rules).map_err(anyhow::Error::msg)?;
    use tabled::builder::Builder;
    use tabled::settings::Style;
    let mut t = Builder::default();
    t.push_record([
        "benchmark",
        "metric",
        "A",
        "B",
        "Δ (B − A)",
        "interval",
        "verdict",
    ]);
    let mut regressions = 0;
    for r in &rows {
        let j = &r.judgement;
        let verdict = match j.verdict {
            Verdict::Regression => {
                regressions += 1;
                "REGRESSION"
            }
            Verdict::Improvement => "improvement",
            Verdict::Unchanged => "within noise",
            Verdict::Unjudged => "no noise estimate",
        };
        t.push_record([
            r.benchmark.clone(),
            format!("{} {}", r.metric, if j.lower_is_better { "↓" } else { "↑" }),
            format!("{:.2}", r.a),
            format!("{:.2}", r.b),
            format!("{:+.2}", j.delta),
            j.interval.map_or("–".into(), |(l, h)| {
                format!(
                    "{:.0} % [{l:+.2}, {h:+.2}] ({})",
                    j.confidence * 100.0,
                    j.method
                )
            }),
            match &r.note {
                Some(n) => format!("{verdict} ({n})"),
                None => verdict.to_string(),
            },
        ]);
    }
    println!(
        "{}",
        terminal_safe(&t.build().with(Style::sharp()).to_string())
    );
    println!(
        "{} benchmarks compared, {regressions} regression(s); rule: |Δ| ≥ {} points and the interval excludes 0",
        rows.len(),
        args.min_effect
    );
    Ok(if regressions > 0 {
        ExitCode::from(3)
    } else {
        ExitCode::SUCCESS
    })
}
