//! The regression rule for accuracy-style metrics (issue 30, item 3). A change of one
//! series (`entry/benchmark`) between two nights is flagged only when
//! 1. it goes the metric's bad (or good) way — each metric has a direction
//!    ([`harness_bench::metrics::lower_is_better`]);
//! 2. its size is at least the series' minimum effect ([`Rules::min_effect_of`]); and
//! 3. the paired bootstrap over the test items, with the seeds of each side resampled where
//!    several ran ([`paired_bootstrap`]), puts the whole interval on that side of zero (the
//!    interval Δ ± z·SE from the bootstrap's standard error, widened by the series'
//!    night-to-night spread in its history, [`history_spread`]). The stated confidence holds
//!    for the whole night: each of the night's M series is judged at 1 − (1 − confidence)/M
//!    (Bonferroni), so the chance of any false alarm in a night of pure noise is at most
//!    1 − confidence, whatever the number of benchmarks. Without per-item outcomes (an older result file, or a protocol
//!    that has none) the seed spread alone gives a normal interval when both nights ran
//!    two or more seeds; with neither, the change is shown and never flagged.
//!
//! [`change_points`] is the step detector over a series' history (binary segmentation,
//! BIC penalty — asv's approach with a squared loss), which tells a one-night blip from a
//! lasting step and dates where a step began.

use super::config::Rules;
use harness_bench::items::{paired_bootstrap, BootstrapSettings, Items};
use serde::Serialize;

/// One series on one night: its results per seed.
#[derive(Debug, Clone)]
pub struct Sample<'a> {
    /// Headline per seed.
    pub headlines: Vec<f64>,
    /// Per-item outcomes per seed (empty when any seed lacks them).
    pub items: Vec<&'a Items>,
    /// The night-to-night standard deviation of one night's value seen in the series'
    /// history ([`history_spread`]; 0 when unknown): noise the items and seeds of a single
    /// night cannot show, such as a trained model's change with its training seed.
    pub spread: f64,
}

impl Sample<'_> {
    /// Mean headline over the seeds.
    pub fn mean(&self) -> f64 {
        self.headlines.iter().sum::<f64>() / self.headlines.len().max(1) as f64
    }
}

/// How a change was judged.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Verdict {
    Regression,
    Improvement,
    /// Within noise or below the minimum effect.
    Unchanged,
    /// No noise estimate (no per-item outcomes, fewer than two seeds): never flagged.
    Unjudged,
}

/// A judged change from night A to night B.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Judgement {
    /// `b − a` in the metric's points (its own sign: an error rate that rises is positive).
    pub delta: f64,
    /// The interval of `delta` at `confidence`, when there is a noise estimate.
    pub interval: Option<(f64, f64)>,
    pub confidence: f64,
    /// `bootstrap` (per-item, paired), `seeds` (normal over the seed spread) or `none`.
    pub method: &'static str,
    pub min_effect: f64,
    pub lower_is_better: bool,
    pub verdict: Verdict,
}

/// Judges the change of one series from `a` to `b`.
pub fn judge(
    a: &Sample,
    b: &Sample,
    lower_is_better: bool,
    min_effect: f64,
    rules: &Rules,
) -> Judgement {
    let delta = b.mean() - a.mean();
    let settings = BootstrapSettings {
        replicates: rules.replicates,
        confidence: rules.confidence,
        seed: rules.bootstrap_seed,
    };
    let by_items = (!a.items.is_empty() && !b.items.is_empty())
        .then(|| paired_bootstrap(&a.items, &b.items, &settings).ok())
        .flatten();
    let z = normal_quantile(0.5 + rules.confidence / 2.0);
    let extra = a.spread.powi(2) + b.spread.powi(2);
    let (interval, method) = match by_items {
        // The bootstrap's standard error with a normal quantile: stable at the extreme
        // confidences a family-wise correction asks for, where the replicates' own
        // percentiles would rest on a handful of draws.
        // Centred on the headline's Δ, the number the report shows and the minimum effect
        // is held against: the items give its standard error. (Centred on the items' own
        // Δ, a headline edited after the fact would show a large Δ "within noise".)
        Some(p) => {
            let se = (p.se.powi(2) + extra).sqrt();
            (Some((delta - z * se, delta + z * se)), "bootstrap")
        }
        None if a.headlines.len() >= 2 && b.headlines.len() >= 2 => {
            let var = |v: &[f64]| {
                let m = v.iter().sum::<f64>() / v.len() as f64;
                v.iter().map(|x| (x - m).powi(2)).sum::<f64>() / (v.len() - 1) as f64
            };
            let se = (var(&a.headlines) / a.headlines.len() as f64
                + var(&b.headlines) / b.headlines.len() as f64
                + extra)
                .sqrt();
            (Some((delta - z * se, delta + z * se)), "seeds")
        }
        None => (None, "none"),
    };
    let verdict = match interval {
        None => Verdict::Unjudged,
        Some((low, high)) => {
            let beyond_noise = low > 0.0 || high < 0.0;
            if beyond_noise && delta.abs() >= min_effect && delta != 0.0 {
                if (delta < 0.0) == lower_is_better {
                    Verdict::Improvement
                } else {
                    Verdict::Regression
                }
            } else {
                Verdict::Unchanged
            }
        }
    };
    Judgement {
        delta,
        interval,
        confidence: rules.confidence,
        method,
        min_effect,
        lower_is_better,
        verdict,
    }
}

/// A speed figure's change: flagged when `now / before` falls below `ratio` (throughput) or
/// rises above `1 / ratio` (wall time).
pub fn speed_verdict(before: f64, now: f64, higher_is_better: bool, ratio: f64) -> Verdict {
    if !(before > 0.0 && now > 0.0) {
        return Verdict::Unjudged;
    }
    let r = now / before;
    let (worse, better) = if higher_is_better {
        (r < ratio, r > 1.0 / ratio)
    } else {
        (r > 1.0 / ratio, r < ratio)
    };
    if worse {
        Verdict::Regression
    } else if better {
        Verdict::Improvement
    } else {
        Verdict::Unchanged
    }
}

/// The standard normal quantile (Acklam's rational approximation, relative error below
/// 1.2e-9; hand-written: one function does not justify a statistics crate).
pub fn normal_quantile(p: f64) -> f64 {
    const A: [f64; 6] = [
        -3.969683028665376e1,
        2.209460984245205e2,
        -2.759285104469687e2,
        1.383_577_518_672_69e2,
        -3.066479806614716e1,
        2.506628277459239,
    ];
    const B: [f64; 5] = [
        -5.447609879822406e1,
        1.615858368580409e2,
        -1.556989798598866e2,
        6.680131188771972e1,
        -1.328068155288572e1,
    ];
    const C: [f64; 6] = [
        -7.784894002430293e-3,
        -3.223964580411365e-1,
        -2.400758277161838,
        -2.549732539343734,
        4.374664141464968,
        2.938163982698783,
    ];
    const D: [f64; 4] = [
        7.784695709041462e-3,
        3.224671290700398e-1,
        2.445134137142996,
        3.754408661907416,
    ];
    let p = p.clamp(1e-300, 1.0 - 1e-16);
    let tail = |q: f64| {
        (((((C[0] * q + C[1]) * q + C[2]) * q + C[3]) * q + C[4]) * q + C[5])
            / ((((D[0] * q + D[1]) * q + D[2]) * q + D[3]) * q + 1.0)
    };
    if p < 0.02425 {
        tail((-2.0 * p.ln()).sqrt())
    } else if p > 1.0 - 0.02425 {
        -tail((-2.0 * (1.0 - p).ln()).sqrt())
    } else {
        let q = p - 0.5;
        let r = q * q;
        (((((A[0] * r + A[1]) * r + A[2]) * r + A[3]) * r + A[4]) * r + A[5]) * q
            / (((((B[0] * r + B[1]) * r + B[2]) * r + B[3]) * r + B[4]) * r + 1.0)
    }
}

/// Where new levels begin in `x` (indices of the first value of each segment after the
/// first), by binary segmentation: the split that lowers the residual sum of squares most is
/// kept when it lowers it by more than `penalty · 2σ² · ln n` (the BIC cost of one change
/// point and one level, σ the noise of one value), and each side is split again the same
/// way. `sigma` should not be below the smallest change that matters (a series that does not
/// move at all otherwise turns any change into a step).
pub fn change_points(x: &[f64], sigma: f64, penalty: f64) -> Vec<usize> {
    let n = x.len();
    if n < 2 {
        return Vec::new();
    }
    let threshold = penalty * 2.0 * sigma * sigma * (n as f64).ln().max(1.0);
    let mut points = Vec::new();
    split(x, 0, threshold, &mut points);
    points.sort_unstable();
    points
}

fn sse(x: &[f64]) -> f64 {
    let m = x.iter().sum::<f64>() / x.len().max(1) as f64;
    x.iter().map(|v| (v - m).powi(2)).sum()
}

fn split(x: &[f64], offset: usize, threshold: f64, out: &mut Vec<usize>) {
    if x.len() < 2 {
        return;
    }
    let total = sse(x);
    let best = (1..x.len())
        .map(|k| (k, total - sse(&x[..k]) - sse(&x[k..])))
        .max_by(|a, b| a.1.total_cmp(&b.1));
    if let Some((k, gain)) = best {
        if gain > threshold {
            out.push(offset + k);
            split(&x[..k], offset, threshold, out);
            split(&x[k..], offset + k, threshold, out);
        }
    }
}

/// The noise of one night's value of a series, for [`change_points`]: the median absolute
/// successive difference (a robust σ·√2), scaled to σ, never below `floor`.
pub fn noise_sigma(x: &[f64], floor: f64) -> f64 {
    let mut d: Vec<f64> = x.windows(2).map(|w| (w[1] - w[0]).abs()).collect();
    if d.is_empty() {
        return floor;
    }
    d.sort_by(f64::total_cmp);
    let mad = d[d.len() / 2];
    (mad / (0.6745 * std::f64::consts::SQRT_2)).max(floor)
}

/// The night-to-night standard deviation of a series' values (oldest first): the median
/// absolute successive difference scaled to σ (robust to the odd step); 0 with fewer than
/// two values. A series that repeats itself exactly (a fixed encoder, a deterministic
/// training at fixed seeds) gets 0 and is judged on its items alone; one that moves from
/// night to night without any change that matters (a trained model whose random streams
/// shift with the code) gets the spread it has shown.
pub fn history_spread(x: &[f64]) -> f64 {
    noise_sigma(x, 0.0)
}

/// What the history of one series shows.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct History {
    /// Night indices where a lasting new level began (two nights or more at it).
    pub steps: Vec<usize>,
    /// Nights that stood alone at another level, the nights either side agreeing again.
    pub blips: Vec<usize>,
    /// The last night differs from the level before it and is alone at its level so far:
    /// tomorrow tells a blip from a step.
    pub new_level_tonight: bool,
}

/// Reads steps and blips from the change points of `x`; `min_effect` separates a blip
/// (the levels either side within it) from two steps.
pub fn read_history(x: &[f64], sigma: f64, penalty: f64, min_effect: f64) -> History {
    let cps = change_points(x, sigma, penalty);
    let mut bounds = vec![0];
    bounds.extend(&cps);
    bounds.push(x.len());
    let segs: Vec<(usize, usize)> = bounds.windows(2).map(|w| (w[0], w[1])).collect();
    let level = |(s, e): (usize, usize)| x[s..e].iter().sum::<f64>() / (e - s) as f64;
    let mut h = History {
        steps: Vec::new(),
        blips: Vec::new(),
        new_level_tonight: false,
    };
    let mut after_blip = false;
    for (i, &(s, e)) in segs.iter().enumerate().skip(1) {
        let last = i == segs.len() - 1;
        if after_blip {
            // The segment after a blip is the old level back, not a new one.
            after_blip = false;
            continue;
        }
        if e - s == 1 && last {
            h.new_level_tonight = true;
        } else if e - s == 1
            && i + 1 < segs.len()
            && (level(segs[i - 1]) - level(segs[i + 1])).abs() < min_effect
        {
            h.blips.push(s);
            after_blip = true;
        } else {
            h.steps.push(s);
        }
    }
    h
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample(h: &[f64]) -> Sample<'static> {
        Sample {
            headlines: h.to_vec(),
            items: Vec::new(),
            spread: 0.0,
        }
    }

    /// The interval is centred on the headline's Δ, the number shown: a headline edited
    /// 37.88 points away from what its unchanged items say is never "within noise".
    #[test]
    fn a_headline_that_disagrees_with_its_items_is_not_within_noise() {
        use harness_bench::items::{Group, Outcomes};
        let items = Items::mean_of(vec![Group {
            name: "g".into(),
            weight: 1.0,
            outcomes: Outcomes::correct((0..1000).map(|i| i % 5 != 0).collect()),
        }]);
        let h = items.headline();
        let with = |headline: f64| Sample {
            headlines: vec![headline],
            items: vec![&items],
            spread: 0.0,
        };
        let rules = Rules::default();
        let same = judge(&with(h), &with(h), false, 1.0, &rules);
        assert_eq!(
            (same.verdict, same.method),
            (Verdict::Unchanged, "bootstrap")
        );
        let j = judge(&with(h + 37.88), &with(h), false, 1.0, &rules);
        assert_eq!(j.verdict, Verdict::Regression, "{j:?}");
        let (low, high) = j.interval.unwrap();
        assert!(low <= j.delta && j.delta <= high && high < 0.0, "{j:?}");
    }

    #[test]
    fn normal_quantiles() {
        assert!((normal_quantile(0.975) - 1.959963984540054).abs() < 1e-8);
        assert!((normal_quantile(0.5)).abs() < 1e-12);
        assert!((normal_quantile(0.005) + 2.5758293035489).abs() < 1e-8);
    }

    #[test]
    fn direction_effect_and_noise_all_matter() {
        let rules = Rules::default();
        // Seeds only: a 5-point drop with a tight spread is a regression of an accuracy...
        let j = judge(
            &sample(&[80.0, 80.2]),
            &sample(&[75.0, 75.1]),
            false,
            1.0,
            &rules,
        );
        assert_eq!((j.verdict, j.method), (Verdict::Regression, "seeds"));
        // ...and an improvement of an error rate.
        let j = judge(
            &sample(&[80.0, 80.2]),
            &sample(&[75.0, 75.1]),
            true,
            1.0,
            &rules,
        );
        assert_eq!(j.verdict, Verdict::Improvement);
        // Below the minimum effect: unchanged however certain.
        let j = judge(
            &sample(&[80.0, 80.0]),
            &sample(&[79.5, 79.5]),
            false,
            1.0,
            &rules,
        );
        assert_eq!(j.verdict, Verdict::Unchanged);
        // Beyond the minimum effect but within the seed spread: unchanged.
        let j = judge(
            &sample(&[70.0, 90.0]),
            &sample(&[75.0, 80.0]),
            false,
            1.0,
            &rules,
        );
        assert_eq!(j.verdict, Verdict::Unchanged);
        // A series that moves by ±5 from night to night: the same tight 5-point drop is
        // within its noise.
        let wide = |h: &[f64]| Sample {
            spread: 3.0,
            ..sample(h)
        };
        let j = judge(
            &wide(&[80.0, 80.2]),
            &wide(&[75.0, 75.1]),
            false,
            1.0,
            &rules,
        );
        assert_eq!(j.verdict, Verdict::Unchanged, "{j:?}");
        // Successive differences 6, 4, 1: median 4.
        let s = history_spread(&[60.0, 66.0, 62.0, 61.0]);
        assert!((s - 4.0 / (0.6745 * 2f64.sqrt())).abs() < 1e-9, "{s}");
        assert_eq!(history_spread(&[60.0, 60.0, 60.0]), 0.0);
        // One seed and no items: shown, never flagged.
        let j = judge(&sample(&[80.0]), &sample(&[60.0]), false, 1.0, &rules);
        assert_eq!((j.verdict, j.interval), (Verdict::Unjudged, None));
    }

    #[test]
    fn speed_ratios() {
        assert_eq!(speed_verdict(100.0, 70.0, true, 0.8), Verdict::Regression);
        assert_eq!(speed_verdict(100.0, 90.0, true, 0.8), Verdict::Unchanged);
        assert_eq!(speed_verdict(100.0, 130.0, true, 0.8), Verdict::Improvement);
        assert_eq!(speed_verdict(10.0, 13.0, false, 0.8), Verdict::Regression);
        assert_eq!(speed_verdict(0.0, 13.0, false, 0.8), Verdict::Unjudged);
    }

    #[test]
    fn step_detection_finds_a_planted_step_and_tells_a_blip() {
        // Noise ±0.3 around 80, a step down to 75 at night 12.
        let noise = [
            0.1, -0.2, 0.3, 0.0, -0.1, 0.2, -0.3, 0.1, 0.0, -0.2, 0.2, -0.1,
        ];
        let mut x: Vec<f64> = noise.iter().map(|n| 80.0 + n).collect();
        x.extend(noise[..6].iter().map(|n| 75.0 + n));
        let s = noise_sigma(&x, 0.25);
        let h = read_history(&x, s, 1.0, 1.0);
        assert_eq!(h.steps, vec![12], "{h:?}");
        assert!(h.blips.is_empty() && !h.new_level_tonight, "{h:?}");
        // A one-night dip that recovers is a blip, not a step.
        let mut y: Vec<f64> = noise.iter().map(|n| 80.0 + n).collect();
        y[7] = 74.0;
        let h = read_history(&y, noise_sigma(&y, 0.25), 1.0, 1.0);
        assert_eq!(
            (h.steps.clone(), h.blips.clone()),
            (vec![], vec![7]),
            "{h:?}"
        );
        // The same dip on the last night: not yet known.
        // Three nights, the middle one off: a blip, and tonight is the old level again.
        let h = read_history(&[10.0, 15.0, 10.0], 0.5, 1.0, 1.0);
        assert_eq!(
            (h.blips.clone(), h.steps.clone(), h.new_level_tonight),
            (vec![1], vec![], false)
        );
        let mut z: Vec<f64> = noise.iter().map(|n| 80.0 + n).collect();
        z.push(74.0);
        let h = read_history(&z, noise_sigma(&z, 0.25), 1.0, 1.0);
        assert!(h.new_level_tonight && h.steps.is_empty(), "{h:?}");
        // Pure noise: no change point at all.
        let flat: Vec<f64> = noise.iter().chain(&noise).map(|n| 80.0 + n).collect();
        assert!(change_points(&flat, noise_sigma(&flat, 0.25), 1.0).is_empty());
    }
}
