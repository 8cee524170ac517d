//! Fire drills (`--plant SERIES=POINTS`): tonight's per-item outcomes of one series are
//! perturbed by a known amount, so that the whole chain — result files, sidecars, the rule,
//! the report and the exit status — can be seen to catch a regression (negative points) or
//! report an improvement (positive). The night records the plant and every report of it says
//! so at the top: a planted night is never mistaken for a measured one.
//!
//! Right/wrong outcomes: in every headline group, the smallest number of items whose flip
//! moves the group's accuracy by `points` is flipped (right → wrong for a worse score), the
//! items chosen by a seeded shuffle. Scored outcomes (STS): predictions are pulled towards a
//! random permutation of themselves until the correlation has dropped by `points` (worse
//! only). F1 counts: true positives become false negatives (worse only).

use super::store::Plant;
use harness_bench::items::{read_items, Items, Outcomes};
use harness_bench::runner::{read_result, write_result};
use rand::seq::SliceRandom;
use rand::SeedableRng;
use std::path::Path;

/// Parses `SERIES=POINTS` (`minilm/mr=-5`).
pub fn parse_plant(raw: &str) -> Result<(String, f64), String> {
    let (series, points) = raw.split_once('=').ok_or_else(|| {
        format!("--plant {raw}: expected ENTRY/BENCH=POINTS, e.g. `minilm/mr=-5`")
    })?;
    let points: f64 = points
        .trim()
        .parse()
        .map_err(|_| format!("--plant {raw}: `{points}` is not a number of points"))?;
    let series = series.trim();
    let well_formed = series
        .split_once('/')
        .is_some_and(|(e, b)| !e.is_empty() && !b.is_empty() && !b.contains('/'));
    if !well_formed || !points.is_finite() || points == 0.0 || points.abs() > 100.0 {
        return Err(format!(
            "--plant {raw}: expected ENTRY/BENCH=POINTS with POINTS a number ≠ 0 within ±100, e.g. `minilm/mr=-5`"
        ));
    }
    Ok((series.to_string(), points))
}

/// Perturbs `items` so that its headline's quality moves by about `points` (negative:
/// worse); `lower_is_better` says which way the headline itself moves.
pub fn perturb(items: &mut Items, points: f64, seed: u64) -> Result<(), String> {
    let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(seed);
    // In the group metric's own units (accuracy in [0, 1]); an error-rate headline is the
    // complement of accuracy, so "worse" is always fewer right items.
    let step = points.abs() / items.scale;
    let worse = points < 0.0;
    for g in items.groups.iter_mut().filter(|g| g.weight > 0.0) {
        match &mut g.outcomes {
            Outcomes::Correct { correct, .. } => {
                let n = correct.len();
                let k = (step * n as f64).round() as usize;
                let mut candidates: Vec<usize> = (0..n).filter(|&i| correct[i] == worse).collect();
                candidates.shuffle(&mut rng);
                for &i in candidates.iter().take(k) {
                    correct[i] = !worse;
                }
            }
            Outcomes::Scored {
                predicted,
                gold,
                correlation,
                ..
            } => {
                if !worse {
                    return Err("an improvement can be planted only in right/wrong outcomes".into());
                }
                let target = Outcomes::Scored {
                    correlation: *correlation,
                    predicted: predicted.clone(),
                    gold: gold.clone(),
                }
                .metric(None)
                    - step;
                let mut shuffled = predicted.clone();
                shuffled.shuffle(&mut rng);
                let original = predicted.clone();
                // Bisection on the mixing weight: metric(mix) falls (roughly monotonically)
                // from the original towards the permutation's ~0.
                let (mut lo, mut hi) = (0.0_f64, 1.0_f64);
                for _ in 0..40 {
                    let w = (lo + hi) / 2.0;
                    let mixed: Vec<f64> = original
                        .iter()
                        .zip(&shuffled)
                        .map(|(a, b)| (1.0 - w) * a + w * b)
                        .collect();
                    let m = Outcomes::Scored {
                        correlation: *correlation,
                        predicted: mixed.clone(),
                        gold: gold.clone(),
                    }
                    .metric(None);
                    if m > target {
                        lo = w;
                    } else {
                        hi = w;
                    }
                    *predicted = mixed;
                }
            }
            Outcomes::Counts { tp, fn_, .. } => {
                if !worse {
                    return Err("an improvement can be planted only in right/wrong outcomes".into());
                }
                let total: u32 = tp.iter().sum();
                let k = (step * f64::from(total)).round() as u32;
                let mut idx: Vec<usize> = (0..tp.len()).filter(|&i| tp[i] > 0).collect();
                idx.shuffle(&mut rng);
                let mut left = k;
                for i in idx {
                    if left == 0 {
                        break;
                    }
                    tp[i] -= 1;
                    fn_[i] += 1;
                    left -= 1;
                }
            }
        }
    }
    Ok(())
}

/// Applies a plant to the result files of one series in tonight's seed folders
/// (`<results>` of each seed): the sidecar and the result's headline are rewritten from the
/// perturbed items, and the result gains a note naming the drill.
pub fn apply(results_dirs: &[&Path], series: &str, points: f64) -> Result<Plant, String> {
    let bench = series.split_once('/').map(|(_, b)| b).unwrap_or(series);
    let mut headlines = Vec::new();
    for (k, dir) in results_dirs.iter().enumerate() {
        let path = dir.join(format!("{bench}.json"));
        let mut result = read_result(&path).map_err(|e| e.to_string())?;
        let reference = result.items.clone().ok_or_else(|| {
            format!(
                "--plant {series}: {} has no per-item outcomes to perturb",
                path.display()
            )
        })?;
        let mut items = read_items(dir, &reference).map_err(|e| e.to_string())?;
        let before = result.main_score.unwrap_or(f64::NAN);
        let from_items = items.headline();
        perturb(&mut items, points, 0x5eed + k as u64)?;
        // The protocol's headline moves by what the items' headline moved.
        let after = before + (items.headline() - from_items);
        result.main_score = Some(after);
        result.notes.push(format!(
            "FIRE DRILL: per-item outcomes perturbed by {points:+} points of quality (`harness nightly --plant`); headline {before:.4} → {after:.4}"
        ));
        result.outcomes = Some(items);
        write_result(dir, &result).map_err(|e| e.to_string())?;
        headlines.push((before, after));
    }
    Ok(Plant {
        series: series.to_string(),
        points,
        headlines,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use harness_bench::items::{Correlation, Group};

    #[test]
    fn planted_changes_move_the_headline_by_the_asked_points() {
        let correct =
            |n: usize, right: usize| Outcomes::correct((0..n).map(|i| i < right).collect());
        let mut items = Items::mean_of(vec![
            Group {
                name: "a".into(),
                weight: 1.0,
                outcomes: correct(200, 160),
            },
            Group {
                name: "b".into(),
                weight: 1.0,
                outcomes: correct(100, 50),
            },
        ]);
        let h = items.headline();
        perturb(&mut items, -5.0, 1).unwrap();
        assert!(
            (items.headline() - (h - 5.0)).abs() < 1e-9,
            "{}",
            items.headline()
        );
        perturb(&mut items, 2.0, 1).unwrap();
        assert!((items.headline() - (h - 3.0)).abs() < 1e-9);
        // An error rate gets worse upwards.
        let mut err = Items::error_rate_of(vec![Group {
            name: "a".into(),
            weight: 1.0,
            outcomes: correct(100, 90),
        }]);
        perturb(&mut err, -4.0, 1).unwrap();
        assert!((err.headline() - 14.0).abs() < 1e-9);
        // Correlations: within a tenth of a point of the target.
        let gold: Vec<f64> = (0..300).map(|i| (i % 50) as f64 / 10.0).collect();
        let pred: Vec<f64> = gold
            .iter()
            .enumerate()
            .map(|(i, g)| g + ((i * 7919) % 13) as f64 / 10.0)
            .collect();
        let mut sts = Items::mean_of(vec![Group {
            name: "s".into(),
            weight: 1.0,
            outcomes: Outcomes::Scored {
                correlation: Correlation::Spearman,
                predicted: pred,
                gold,
            },
        }]);
        let h = sts.headline();
        perturb(&mut sts, -3.0, 2).unwrap();
        assert!(
            (sts.headline() - (h - 3.0)).abs() < 0.1,
            "{h} {}",
            sts.headline()
        );
        assert_eq!(
            parse_plant("minilm/mr=-5").unwrap(),
            ("minilm/mr".into(), -5.0)
        );
        for bad in [
            "mr=-5",
            "minilm/mr=NaN",
            "minilm/mr=inf",
            "minilm/mr=0",
            "minilm/mr=-500",
            "/mr=-5",
            "minilm/=-5",
            "minilm/mr",
        ] {
            assert!(parse_plant(bad).is_err(), "{bad}");
        }
    }
}
