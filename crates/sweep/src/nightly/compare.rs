//! `harness compare A B`: the nightly rule between any two run or result directories (a
//! user's A/B check outside nightly). Every benchmark with a result in both is judged as
//! B against A: paired bootstrap over its per-item outcomes, the metric's direction and the
//! minimum effect.

use super::config::Rules;
use super::rule::{judge, Judgement, Sample};
use harness_bench::items::{read_items, Items};
use harness_bench::metrics::lower_is_better;
use harness_bench::runner::{read_result, BenchResult};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// One benchmark of a comparison.
#[derive(Debug, Clone)]
pub struct Compared {
    pub benchmark: String,
    pub metric: String,
    pub a: f64,
    pub b: f64,
    pub judgement: Judgement,
    /// Why the per-item comparison was not possible, when it was not.
    pub note: Option<String>,
}

/// The results folder of a run directory (`<dir>/results`) or the folder itself.
pub fn results_dir(dir: &Path) -> PathBuf {
    let inner = dir.join("results");
    if inner.is_dir() {
        inner
    } else {
        dir.to_path_buf()
    }
}

/// Benchmark → (result, its per-item outcomes, why they are missing).
type Loaded = BTreeMap<String, (BenchResult, Option<Items>, Option<String>)>;

fn load(dir: &Path) -> Result<Loaded, String> {
    let results = results_dir(dir);
    let listing = std::fs::read_dir(&results).map_err(|e| {
        format!(
            "{}: cannot list results ({e}). Fix: give a run directory or its results/ folder",
            results.display()
        )
    })?;
    let mut out = BTreeMap::new();
    for e in listing.flatten() {
        let p = e.path();
        if p.extension().is_none_or(|x| x != "json") {
            continue;
        }
        let r = read_result(&p).map_err(|e| e.to_string())?;
        if r.error.is_some() || r.main_score.is_none() {
            continue;
        }
        let (items, note) = match &r.items {
            Some(reference) => match read_items(&results, reference) {
                Ok(i) => (Some(i), None),
                Err(e) => (None, Some(e.to_string())),
            },
            None => (None, Some(format!("{}: no per-item outcomes", p.display()))),
        };
        out.insert(r.benchmark.clone(), (r, items, note));
    }
    Ok(out)
}

/// Judges every benchmark both directories hold, B against A.
pub fn compare(a: &Path, b: &Path, rules: &Rules) -> Result<Vec<Compared>, String> {
    let (ra, rb) = (load(a)?, load(b)?);
    let mut out = Vec::new();
    for (bench, (x, xi, xn)) in &ra {
        let Some((y, yi, yn)) = rb.get(bench) else {
            continue;
        };
        let metric = y.main_metric.clone().unwrap_or_default();
        let sample = |r: &BenchResult, i: &Option<Items>| -> (Vec<f64>, Option<Items>) {
            (vec![r.main_score.unwrap_or(f64::NAN)], i.clone())
        };
        let (ha, ia) = sample(x, xi);
        let (hb, ib) = sample(y, yi);
        let sa = Sample {
            headlines: ha,
            items: ia.iter().collect(),
            spread: 0.0,
        };
        let sb = Sample {
            headlines: hb,
            items: ib.iter().collect(),
            spread: 0.0,
        };
        let mut note = xn.clone().or_else(|| yn.clone());
        if let (Some(p), Some(q)) = (&ia, &ib) {
            if let Some(why) = p.mismatch(q) {
                note = Some(format!("not the same test items ({why})"));
            }
        }
        let judgement = judge(
            &sa,
            &sb,
            lower_is_better(&metric),
            rules.min_effect_of(bench),
            rules,
        );
        out.push(Compared {
            benchmark: bench.clone(),
            metric,
            a: sa.mean(),
            b: sb.mean(),
            judgement,
            note,
        });
    }
    if out.is_empty() {
        return Err(format!(
            "{} and {} have no benchmark result in common",
            a.display(),
            b.display()
        ));
    }
    Ok(out)
}
