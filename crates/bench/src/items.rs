//! Per-item outcomes of one benchmark: what a paired comparison of two results needs (issue
//! 30). A protocol returns them with its [`crate::protocols::Outcome`]; the runner writes them
//! beside the result file as `<bench>.items.json.gz` and records the sidecar's sha256 in the
//! result, so a reader ([`read_items`]) uses it only while it is the file the result was
//! written with.
//!
//! The headline is rebuilt from the items ([`Items::headline`]): each group (a language, a
//! direction, a subset) has one metric over its items — accuracy of `correct` flags, Spearman
//! or Pearson of predicted against gold scores, F1 of summed per-item counts — and the
//! headline is their weighted mean on the protocol's scale (×100), or its complement (error
//! rates). Groups of weight 0 are recorded but stay out of the headline (MLDoc's in-language
//! cell). [`paired_bootstrap`] resamples the items of each group (the same draw for both
//! sides: the comparison is paired) and, where several seeds ran, the seeds of each side,
//! and gives the percentile interval of the change in headline — the construction of
//! Koehn (2004) "Statistical significance tests for machine translation evaluation" and of
//! lm-evaluation-harness's `bootstrap_stderr`, here paired and stratified by group.

use crate::error::BenchError;
use flate2::read::GzDecoder;
use flate2::write::GzEncoder;
use rand::Rng;
use serde::{Deserialize, Serialize};
use std::io::{Read, Write};
use std::path::{Path, PathBuf};

/// Format version of the sidecar; a reader refuses any other.
pub const ITEMS_VERSION: u32 = 1;

/// Every per-item outcome of one benchmark run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Items {
    /// Multiplier of a group metric on the result's scale (100: %, ×100 correlations).
    pub scale: f64,
    /// The headline is `scale − weighted mean` (error rates) rather than the mean.
    #[serde(default)]
    pub complement: bool,
    pub groups: Vec<Group>,
}

/// One part of a benchmark whose metric is computed over its own items. (No
/// `deny_unknown_fields`: serde does not support it together with `flatten`; the outcomes
/// themselves deny unknown fields.)
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Group {
    /// `afr/xx_to_eng`, `STS12/MSRpar`, `de`...
    pub name: String,
    /// Weight in the headline's mean (0: recorded, not in the headline).
    pub weight: f64,
    #[serde(flatten)]
    pub outcomes: Outcomes,
}

/// The outcomes of one group's items.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case", deny_unknown_fields)]
pub enum Outcomes {
    /// Right or wrong per test item (classification, retrieval): metric = accuracy. For
    /// search protocols `neighbour` holds each query's retrieved index (`-1`: none).
    Correct {
        #[serde(with = "bits")]
        correct: Vec<bool>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        neighbour: Option<Vec<i64>>,
    },
    /// A predicted and a gold score per item (STS): metric = the correlation.
    Scored {
        correlation: Correlation,
        predicted: Vec<f64>,
        gold: Vec<f64>,
    },
    /// True positives, false positives and false negatives each item contributes (bitext
    /// mining, slot filling): metric = F1 of the sums.
    Counts {
        tp: Vec<u32>,
        fp: Vec<u32>,
        #[serde(rename = "fn")]
        fn_: Vec<u32>,
    },
}

/// The correlation of a [`Outcomes::Scored`] group.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Correlation {
    Spearman,
    Pearson,
}

/// `correct` flags as one string of `0`/`1` (compact, and gzip shrinks it to bits).
mod bits {
    use serde::{Deserialize, Deserializer, Serializer};

    pub fn serialize<S: Serializer>(v: &[bool], s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(
            &v.iter()
                .map(|&b| if b { '1' } else { '0' })
                .collect::<String>(),
        )
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Vec<bool>, D::Error> {
        let s = String::deserialize(d)?;
        s.chars()
            .map(|c| match c {
                '1' => Ok(true),
                '0' => Ok(false),
                other => Err(serde::de::Error::custom(format!(
                    "`correct` holds `{other}`; only 0 and 1 are allowed"
                ))),
            })
            .collect()
    }
}

impl Outcomes {
    /// Right/wrong flags without neighbours.
    pub fn correct(correct: Vec<bool>) -> Self {
        Outcomes::Correct {
            correct,
            neighbour: None,
        }
    }

    /// Number of items.
    pub fn len(&self) -> usize {
        match self {
            Outcomes::Correct { correct, .. } => correct.len(),
            Outcomes::Scored { predicted, .. } => predicted.len(),
            Outcomes::Counts { tp, .. } => tp.len(),
        }
    }

    /// Whether the group has no item.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The group's metric over the items at `idx` (all items: `None`), in [0, 1] (or
    /// [-1, 1] for correlations); NaN when undefined (no item, a constant side).
    pub fn metric(&self, idx: Option<&[usize]>) -> f64 {
        fn pick<T: Copy>(v: &[T], idx: Option<&[usize]>) -> Vec<T> {
            match idx {
                Some(i) => i.iter().map(|&k| v[k]).collect(),
                None => v.to_vec(),
            }
        }
        match self {
            Outcomes::Correct { correct, .. } => {
                let c = pick(correct, idx);
                if c.is_empty() {
                    f64::NAN
                } else {
                    c.iter().filter(|&&b| b).count() as f64 / c.len() as f64
                }
            }
            Outcomes::Scored {
                correlation,
                predicted,
                gold,
            } => {
                let (p, g) = (pick(predicted, idx), pick(gold, idx));
                match correlation {
                    Correlation::Spearman => crate::metrics::spearman(&p, &g),
                    Correlation::Pearson => crate::metrics::pearson(&p, &g),
                }
            }
            Outcomes::Counts { tp, fp, fn_ } => {
                let sum = |v: &[u32]| pick(v, idx).iter().map(|&x| f64::from(x)).sum::<f64>();
                let (t, p, n) = (sum(tp), sum(fp), sum(fn_));
                if t + p + n == 0.0 {
                    0.0
                } else {
                    2.0 * t / (2.0 * t + p + n)
                }
            }
        }
    }

    fn kind(&self) -> &'static str {
        match self {
            Outcomes::Correct { .. } => "correct",
            Outcomes::Scored { .. } => "scored",
            Outcomes::Counts { .. } => "counts",
        }
    }

    /// Whether two results of the same items compare: same kind, same count, same gold.
    fn same_items(&self, other: &Outcomes) -> bool {
        match (self, other) {
            (Outcomes::Scored { gold: a, .. }, Outcomes::Scored { gold: b, .. }) => a == b,
            _ => self.kind() == other.kind() && self.len() == other.len(),
        }
    }
}

impl Items {
    /// Items on the ×100 scale whose headline is the mean of the group metrics.
    pub fn mean_of(groups: Vec<Group>) -> Self {
        Items {
            scale: 100.0,
            complement: false,
            groups,
        }
    }

    /// Items whose headline is an error rate: 100 − the mean accuracy.
    pub fn error_rate_of(groups: Vec<Group>) -> Self {
        Items {
            scale: 100.0,
            complement: true,
            groups,
        }
    }

    /// Number of items over all groups.
    pub fn count(&self) -> usize {
        self.groups.iter().map(|g| g.outcomes.len()).sum()
    }

    /// The headline the items give (the protocol's `main_score` where the protocol's headline
    /// is a mean of per-group metrics of its items).
    pub fn headline(&self) -> f64 {
        self.headline_with(|_| None)
    }

    fn headline_with<'a>(&self, idx: impl Fn(usize) -> Option<&'a [usize]>) -> f64 {
        let (mut sum, mut weights) = (0.0, 0.0);
        for (k, g) in self.groups.iter().enumerate() {
            if g.weight > 0.0 {
                let m = g.outcomes.metric(idx(k));
                // An undefined group (a resample that drew one constant pair) counts as 0,
                // as the protocols count a NaN correlation.
                sum += g.weight * if m.is_nan() { 0.0 } else { m };
                weights += g.weight;
            }
        }
        let mean = if weights > 0.0 {
            sum / weights
        } else {
            f64::NAN
        };
        if self.complement {
            self.scale * (1.0 - mean)
        } else {
            self.scale * mean
        }
    }

    /// Why `other` does not hold the same items as `self` (group names, kinds, sizes, gold
    /// scores), or `None` when a paired comparison is possible.
    pub fn mismatch(&self, other: &Items) -> Option<String> {
        if self.groups.len() != other.groups.len() {
            return Some(format!(
                "{} groups against {}",
                self.groups.len(),
                other.groups.len()
            ));
        }
        if self.scale != other.scale || self.complement != other.complement {
            return Some("different headline scales".into());
        }
        for (a, b) in self.groups.iter().zip(&other.groups) {
            if a.name != b.name {
                return Some(format!("group `{}` against `{}`", a.name, b.name));
            }
            if a.weight != b.weight || !a.outcomes.same_items(&b.outcomes) {
                return Some(format!(
                    "group `{}`: {} {} items against {} {} (or other gold scores)",
                    a.name,
                    a.outcomes.len(),
                    a.outcomes.kind(),
                    b.outcomes.len(),
                    b.outcomes.kind()
                ));
            }
        }
        None
    }

    /// Compressed bytes of the sidecar (gzip with a zero timestamp: the same items give the
    /// same bytes, so the same sha256).
    pub fn to_gzip(&self, benchmark: &str) -> Vec<u8> {
        let file = ItemsFile {
            version: ITEMS_VERSION,
            benchmark: benchmark.to_string(),
            items: self.clone(),
        };
        let json = serde_json::to_vec(&file).expect("items serialise");
        let mut gz = GzEncoder::new(Vec::new(), flate2::Compression::default());
        gz.write_all(&json).expect("writing to memory");
        gz.finish().expect("writing to memory")
    }
}

/// The sidecar's content.
#[derive(Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct ItemsFile {
    version: u32,
    benchmark: String,
    items: Items,
}

/// What a result file says of its sidecar.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ItemsRef {
    /// File name, beside the result (`<bench>.items.json.gz`).
    pub file: String,
    /// sha256 of the file's bytes.
    pub sha256: String,
    /// Number of items over all groups.
    pub items: usize,
    /// The headline rebuilt from the items (equal to `main_score` where the protocol's
    /// headline is a mean of per-group item metrics; see the protocol's notes otherwise).
    pub headline: f64,
}

/// The sidecar's name for `benchmark`.
pub fn items_file_name(benchmark: &str) -> String {
    format!("{benchmark}.items.json.gz")
}

/// Writes the sidecar of `benchmark` into `dir` atomically and returns its reference.
pub fn write_items(dir: &Path, benchmark: &str, items: &Items) -> Result<ItemsRef, BenchError> {
    let file = items_file_name(benchmark);
    let path = dir.join(&file);
    let bytes = items.to_gzip(benchmark);
    crate::results_folder::write_below_parent(dir, &path, &bytes)
        .map_err(|e| BenchError::io(&path, e))?;
    Ok(ItemsRef {
        file,
        sha256: harness_core::fsutil::sha256_hex(&bytes),
        items: items.count(),
        headline: items.headline(),
    })
}

/// Reads the sidecar `reference` names in `dir`, refusing a file whose sha256 is not the
/// one recorded in the result (changed or replaced since it was written).
pub fn read_items(dir: &Path, reference: &ItemsRef) -> Result<Items, BenchError> {
    let path: PathBuf = dir.join(&reference.file);
    let bytes = std::fs::read(&path).map_err(|e| BenchError::io(&path, e))?;
    let sha = harness_core::fsutil::sha256_hex(&bytes);
    if sha != reference.sha256 {
        return Err(BenchError::format(
            path,
            format!(
                "sha256 {sha} is not the {} recorded in the result file: the per-item outcomes \
                 changed after the result was written",
                reference.sha256
            ),
            "re-run the benchmark to write a matching pair (result and items)",
        ));
    }
    let mut json = Vec::new();
    GzDecoder::new(&bytes[..])
        .read_to_end(&mut json)
        .map_err(|e| {
            BenchError::format(&path, format!("not gzip ({e})"), "re-run the benchmark")
        })?;
    let file: ItemsFile = serde_json::from_slice(&json).map_err(|e| {
        BenchError::format(
            &path,
            format!("not a per-item outcome file ({e})"),
            "re-run the benchmark",
        )
    })?;
    if file.version != ITEMS_VERSION {
        return Err(BenchError::format(
            &path,
            format!(
                "format version {} (this harness reads {ITEMS_VERSION})",
                file.version
            ),
            "re-run the benchmark with this harness",
        ));
    }
    Ok(file.items)
}

/// Whether `path` is a per-item outcome file harness wrote (of any format version): such a
/// file may be replaced, any other file may not.
pub fn is_items_file(path: &Path) -> bool {
    #[derive(Deserialize)]
    struct Head {
        #[allow(dead_code)]
        version: u32,
        #[allow(dead_code)]
        benchmark: String,
    }
    let Ok(bytes) = std::fs::read(path) else {
        return false;
    };
    let mut json = Vec::new();
    GzDecoder::new(&bytes[..]).read_to_end(&mut json).is_ok()
        && serde_json::from_slice::<Head>(&json).is_ok()
}

/// A paired comparison of two sides' headlines.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Paired {
    /// Headline of side A (mean over its seeds).
    pub a: f64,
    /// Headline of side B.
    pub b: f64,
    /// `b − a`.
    pub delta: f64,
    /// Percentile interval of `b − a` at `confidence`.
    pub low: f64,
    pub high: f64,
    /// Standard deviation of the replicates' `b − a` (the bootstrap standard error), for
    /// normal intervals at confidences too extreme for the replicates' percentiles.
    pub se: f64,
    pub confidence: f64,
    pub replicates: usize,
}

impl Paired {
    /// Whether the interval lies wholly on one side of zero.
    pub fn excludes_zero(&self) -> bool {
        self.low > 0.0 || self.high < 0.0
    }
}

/// Bootstrap settings: replicates, confidence and the recorded seed of the draws.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct BootstrapSettings {
    pub replicates: usize,
    pub confidence: f64,
    pub seed: u64,
}

impl Default for BootstrapSettings {
    fn default() -> Self {
        BootstrapSettings {
            replicates: 1000,
            confidence: 0.95,
            seed: 1,
        }
    }
}

/// Paired bootstrap of `b − a` where each side is one result per seed, all over the same
/// items. Each replicate draws every group's items with replacement (one draw for every
/// result: paired), and each side's seeds with replacement (the sides' seeds are not paired:
/// a change of code moves results the way a change of seed does); a side's headline is the
/// mean over its drawn seeds. The interval is the replicates' percentile interval.
pub fn paired_bootstrap(
    a: &[&Items],
    b: &[&Items],
    settings: &BootstrapSettings,
) -> Result<Paired, String> {
    let first = a.first().or(b.first()).ok_or("no result on either side")?;
    if a.is_empty() || b.is_empty() {
        return Err("one side has no result".into());
    }
    for other in a.iter().chain(b) {
        if let Some(why) = first.mismatch(other) {
            return Err(format!("the results hold different items: {why}"));
        }
    }
    let mean_headline =
        |side: &[&Items]| side.iter().map(|i| i.headline()).sum::<f64>() / side.len() as f64;
    let (ha, hb) = (mean_headline(a), mean_headline(b));
    let mut rng = crate::classify::mlp::seeded_rng(settings.seed, 0x1735);
    let sizes: Vec<usize> = first.groups.iter().map(|g| g.outcomes.len()).collect();
    let mut deltas = Vec::with_capacity(settings.replicates);
    let mut draw: Vec<Vec<usize>> = sizes.iter().map(|&n| vec![0; n]).collect();
    for _ in 0..settings.replicates {
        for (d, &n) in draw.iter_mut().zip(&sizes) {
            for slot in d.iter_mut() {
                *slot = rng.random_range(0..n);
            }
        }
        let side_mean = |side: &[&Items], rng: &mut rand_chacha::ChaCha8Rng| {
            let k = side.len();
            let mut s = 0.0;
            for _ in 0..k {
                let pick = if k == 1 { 0 } else { rng.random_range(0..k) };
                s += side[pick].headline_with(|g| Some(&draw[g][..]));
            }
            s / k as f64
        };
        let ra = side_mean(a, &mut rng);
        let rb = side_mean(b, &mut rng);
        deltas.push(rb - ra);
    }
    let mean = deltas.iter().sum::<f64>() / deltas.len().max(1) as f64;
    let se = (deltas.iter().map(|d| (d - mean).powi(2)).sum::<f64>()
        / (deltas.len().max(2) - 1) as f64)
        .sqrt();
    deltas.sort_by(f64::total_cmp);
    let tail = (1.0 - settings.confidence) / 2.0;
    Ok(Paired {
        a: ha,
        b: hb,
        delta: hb - ha,
        low: percentile(&deltas, tail),
        high: percentile(&deltas, 1.0 - tail),
        se,
        confidence: settings.confidence,
        replicates: settings.replicates,
    })
}

/// The `q` quantile of sorted values, linear between closest ranks (numpy's default).
pub fn percentile(sorted: &[f64], q: f64) -> f64 {
    if sorted.is_empty() {
        return f64::NAN;
    }
    let pos = q.clamp(0.0, 1.0) * (sorted.len() - 1) as f64;
    let (lo, hi) = (pos.floor() as usize, pos.ceil() as usize);
    sorted[lo] + (sorted[hi] - sorted[lo]) * (pos - lo as f64)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn correct(name: &str, flags: &[u8]) -> Group {
        Group {
            name: name.into(),
            weight: 1.0,
            outcomes: Outcomes::correct(flags.iter().map(|&f| f == 1).collect()),
        }
    }

    #[test]
    fn headline_is_the_weighted_mean_or_its_complement() {
        let items = Items::mean_of(vec![
            correct("a", &[1, 1, 0, 0]),
            correct("b", &[1, 1, 1, 1]),
            Group {
                weight: 0.0,
                ..correct("c", &[0, 0])
            },
        ]);
        assert_eq!(items.headline(), 75.0);
        let err = Items::error_rate_of(items.groups.clone());
        assert_eq!(err.headline(), 25.0);
        let f1 = Items::mean_of(vec![Group {
            name: "x".into(),
            weight: 1.0,
            outcomes: Outcomes::Counts {
                tp: vec![1, 1, 0],
                fp: vec![0, 1, 0],
                fn_: vec![0, 0, 1],
            },
        }]);
        // F1 = 2·2 / (2·2 + 1 + 1) = 2/3.
        assert!((f1.headline() - 200.0 / 3.0).abs() < 1e-12);
    }

    #[test]
    fn sidecar_round_trips_and_a_changed_file_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let items = Items::error_rate_of(vec![
            correct("afr/xx_to_eng", &[1, 0, 1]),
            Group {
                name: "sts".into(),
                weight: 2.0,
                outcomes: Outcomes::Scored {
                    correlation: Correlation::Spearman,
                    predicted: vec![0.1, 0.5, 0.2],
                    gold: vec![1.0, 3.0, 2.0],
                },
            },
        ]);
        let r = write_items(dir.path(), "t", &items).unwrap();
        assert_eq!(r.file, "t.items.json.gz");
        assert_eq!(r.items, 6);
        // Same items, same bytes (gzip timestamp 0).
        assert_eq!(items.to_gzip("t"), items.to_gzip("t"));
        assert_eq!(read_items(dir.path(), &r).unwrap(), items);
        let other = Items::mean_of(vec![correct("z", &[1])]);
        std::fs::write(dir.path().join(&r.file), other.to_gzip("t")).unwrap();
        let e = read_items(dir.path(), &r).unwrap_err().to_string();
        assert!(
            e.contains("t.items.json.gz") && e.contains("changed"),
            "{e}"
        );
    }

    #[test]
    fn paired_bootstrap_matches_the_hand_computed_distribution() {
        // Two items; A gets [1, 0], B [1, 1]: the per-item differences are d = [0, 1]. A
        // paired resample of two items draws (0,0), (0,1), (1,0), (1,1) with probability 1/4
        // each, so Δ = mean(d*) is 0, ½, ½, 1: P(0) = P(1) = ¼, P(½) = ½. The 95 % percentile
        // interval of that distribution is [0, 1] on the ×100 scale: [0, 100]; Δ = 50.
        let a = Items::mean_of(vec![correct("g", &[1, 0])]);
        let b = Items::mean_of(vec![correct("g", &[1, 1])]);
        let s = BootstrapSettings {
            replicates: 20_000,
            confidence: 0.95,
            seed: 7,
        };
        let p = paired_bootstrap(&[&a], &[&b], &s).unwrap();
        assert_eq!((p.a, p.b, p.delta), (50.0, 100.0, 50.0));
        assert_eq!((p.low, p.high), (0.0, 100.0));
        assert!(!p.excludes_zero());
        // Its standard error: sd(d)/√n = ½/√2 = 0.35355 (×100).
        assert!((p.se - 35.355).abs() < 0.5, "{p:?}");
        // An unpaired bootstrap would put mass on Δ < 0; the paired one never can here.
        // Three items, d = [1, 1, 0]: Δ* = k/3 with k ~ Binomial(3, 2/3): P(0) = 1/27 ≈ 3.7 %,
        // P(1/3) = 6/27, P(2/3) = 12/27, P(1) = 8/27. At 95 % the 2.5 % quantile is still 0
        // (the interval touches 0: not beyond noise); at 90 % the 5 % quantile is 1/3, so
        // the interval is [100/3, 100] and excludes 0. Δ = 200/3.
        let a = Items::mean_of(vec![correct("g", &[0, 0, 1])]);
        let b = Items::mean_of(vec![correct("g", &[1, 1, 1])]);
        let p = paired_bootstrap(&[&a], &[&b], &s).unwrap();
        assert_eq!((p.low, p.high), (0.0, 100.0));
        assert!(!p.excludes_zero());
        let s90 = BootstrapSettings {
            confidence: 0.90,
            ..s
        };
        let p = paired_bootstrap(&[&a], &[&b], &s90).unwrap();
        assert!((p.delta - 200.0 / 3.0).abs() < 1e-9);
        assert!((p.low - 100.0 / 3.0).abs() < 1e-9, "{p:?}");
        assert_eq!(p.high, 100.0);
        assert!(p.excludes_zero());
        // The same items on both sides: a zero-width interval at 0.
        let p = paired_bootstrap(&[&a], &[&a], &s).unwrap();
        assert_eq!((p.delta, p.low, p.high), (0.0, 0.0, 0.0));
    }

    #[test]
    fn seed_spread_widens_the_interval() {
        // Side A: two seeds whose headlines differ by 20 points; side B: one seed in between.
        let items = |flags: &[u8]| Items::mean_of(vec![correct("g", flags)]);
        let a1 = items(&[1; 10]);
        let a2 = items(&[1, 1, 1, 1, 1, 1, 1, 1, 0, 0]);
        let b = items(&[1, 1, 1, 1, 1, 1, 1, 1, 1, 0]);
        let s = BootstrapSettings::default();
        let one = paired_bootstrap(&[&a2], &[&b], &s).unwrap();
        let two = paired_bootstrap(&[&a1, &a2], &[&b], &s).unwrap();
        assert!((two.delta - 0.0).abs() < 1e-12, "{two:?}");
        assert!(two.high - two.low >= one.high - one.low, "{one:?} {two:?}");
    }

    #[test]
    fn different_items_do_not_compare() {
        let a = Items::mean_of(vec![correct("g", &[1, 0])]);
        let b = Items::mean_of(vec![correct("g", &[1, 0, 1])]);
        let e = paired_bootstrap(&[&a], &[&b], &BootstrapSettings::default()).unwrap_err();
        assert!(e.contains("different items"), "{e}");
        let c = Items::mean_of(vec![correct("h", &[1, 0])]);
        assert!(a.mismatch(&c).unwrap().contains("`g`"));
    }

    #[test]
    fn percentile_is_numpys_linear() {
        let v = [1.0, 2.0, 3.0, 4.0];
        assert_eq!(percentile(&v, 0.0), 1.0);
        assert_eq!(percentile(&v, 0.5), 2.5);
        assert_eq!(percentile(&v, 1.0), 4.0);
        assert!((percentile(&v, 0.25) - 1.75).abs() < 1e-12);
    }
}
