//! The morning report (issue 30, item 4): tonight against the previous night and the
//! baseline, failures first, then regressions and improvements (each with Δ, its interval,
//! the commit range and how far from the best night), then every headline metric with a
//! sparkline, speed figures, and trend charts. Built here as data ([`Morning`]); rendered to
//! Markdown and self-contained HTML by `reports/templates/nightly.*.j2` and to terminal text
//! by [`terminal`].

use super::ack::{acknowledged, expired, Ack};
use super::config::{NightlyConfig, Rules};
use super::rule::{judge, read_history, speed_verdict, Judgement, Sample, Verdict};
use super::store::{is_date, Integrity, Night, NightRecord};
use harness_bench::metrics::lower_is_better;
use serde::Serialize;
use std::collections::BTreeSet;

/// Exit status of a night: 0 clean, 3 regressions (not acknowledged), 1 errors.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Status {
    Clean,
    Regressions,
    Errors,
}

impl Status {
    /// The process exit code cron or systemd reads.
    pub fn code(self) -> u8 {
        match self {
            Status::Clean => 0,
            Status::Regressions => 3,
            Status::Errors => 1,
        }
    }
}

/// A flagged change.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Finding {
    /// `entry/benchmark` or `entry/speed:<figure>`.
    pub series: String,
    pub metric: String,
    /// `regression` or `improvement`.
    pub kind: String,
    /// The night compared against (previous night, or the last night before a step).
    pub since_night: String,
    /// `abcdef12..12345678`: the commits between which the change began.
    pub commits: String,
    pub before: f64,
    pub now: f64,
    pub delta: f64,
    pub interval: Option<(f64, f64)>,
    pub confidence: f64,
    pub method: String,
    /// `new tonight` (tomorrow tells a blip from a step) or `step since DATE`.
    pub when: String,
    /// How far tonight is from the best night in the history (in the bad direction), points.
    pub worse_than_best: Option<f64>,
    pub best_night: Option<String>,
    /// The acknowledgement's reason, when acknowledged.
    pub ack: Option<String>,
    /// A one-line summary, for the terminal and the Markdown list.
    pub line: String,
}

/// One row of the metric table.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Row {
    pub series: String,
    pub metric: String,
    /// `↑` (higher is better) or `↓`.
    pub arrow: String,
    pub seeds: usize,
    pub tonight: String,
    pub previous: String,
    pub delta_previous: String,
    pub baseline: String,
    pub delta_baseline: String,
    pub best: String,
    pub verdict: String,
    pub sparkline: String,
    /// Embedding-cache use tonight (`412/1000 sentences from the cache`), when any.
    pub cache: String,
}

/// A speed figure.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct SpeedRow {
    pub series: String,
    pub tonight: String,
    pub previous: String,
    pub ratio: String,
    pub verdict: String,
}

/// A past regression that recovered the next night.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Recovered {
    pub series: String,
    pub night: String,
    pub value: f64,
    pub level: f64,
    pub text: String,
}

/// A trend chart (inline SVG) and its file name.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Chart {
    pub series: String,
    pub file: String,
    pub svg: String,
}

/// The whole morning report.
#[derive(Debug, Clone, Serialize)]
pub struct Morning {
    pub config: String,
    pub night: String,
    pub date: String,
    pub commit: String,
    pub previous: Option<String>,
    pub baseline: Option<String>,
    pub nights_in_history: usize,
    /// Nights of the history left out of every comparison (failed verification, a failed
    /// night, an impossible date).
    pub nights_left_out: usize,
    pub status: Status,
    pub headline: String,
    pub failures: Vec<String>,
    /// What the reader must know of the history and the acknowledgements: nights left out
    /// and why, nights that cannot be verified, acknowledgements that expired.
    pub warnings: Vec<String>,
    pub regressions: Vec<Finding>,
    pub improvements: Vec<Finding>,
    pub acknowledged: Vec<Finding>,
    pub recovered: Vec<Recovered>,
    pub rows: Vec<Row>,
    pub speed: Vec<SpeedRow>,
    pub charts: Vec<Chart>,
    pub plants: Vec<String>,
    pub notes: Vec<String>,
    pub env: Vec<(String, String)>,
}

/// [`sample_alone`] with the series' night-to-night spread.
fn sample<'a>(night: &'a Night, series: &str, spread: f64) -> Option<Sample<'a>> {
    sample_alone(night, series).map(|x| Sample { spread, ..x })
}

fn sample_alone<'a>(night: &'a Night, series: &str) -> Option<Sample<'a>> {
    let r = night.series.get(series)?;
    let headlines: Vec<f64> = r.iter().filter_map(|s| s.result.main_score).collect();
    if headlines.is_empty() {
        return None;
    }
    let items: Vec<_> = r.iter().filter_map(|s| s.items.as_ref()).collect();
    let items = if items.len() == r.len() {
        items
    } else {
        Vec::new()
    };
    Some(Sample {
        headlines,
        items,
        spread: 0.0,
    })
}

fn short(commit: &str) -> String {
    commit.chars().take(8).collect()
}

/// A confidence as a percentage with the digits it needs (95, 99.67, 99.95).
fn percent(c: f64) -> String {
    let p = c * 100.0;
    if (p - p.round()).abs() < 1e-9 {
        format!("{p:.0}")
    } else {
        format!("{p:.2}")
    }
}

/// The mean of `v` (none when empty).
fn mean(v: Vec<f64>) -> Option<f64> {
    (!v.is_empty()).then(|| v.iter().sum::<f64>() / v.len() as f64)
}

/// The CPU share of entry `name` in `night`: its seeds' CPU seconds over their wall seconds
/// (none when a seed has no CPU time recorded).
fn cpu_share(night: &Night, name: &str) -> Option<f64> {
    let e = night.record.entries.iter().find(|x| x.name == name)?;
    let mut cpu = 0.0;
    let mut wall = 0.0;
    for s in &e.seeds {
        cpu += s.cpu_seconds?;
        wall += s.train_seconds.unwrap_or(0.0) + s.eval_seconds;
    }
    (wall > 0.0).then(|| cpu / wall)
}

fn fmt(v: f64) -> String {
    format!("{v:.2}")
}

fn signed(v: f64) -> String {
    format!("{v:+.2}")
}

/// Unicode sparkline of `values` (`None`: a night without the series).
pub fn sparkline(values: &[Option<f64>]) -> String {
    const BARS: [char; 8] = ['▁', '▂', '▃', '▄', '▅', '▆', '▇', '█'];
    let present: Vec<f64> = values.iter().flatten().copied().collect();
    let (lo, hi) = present
        .iter()
        .fold((f64::INFINITY, f64::NEG_INFINITY), |(l, h), &v| {
            (l.min(v), h.max(v))
        });
    values
        .iter()
        .map(|v| match v {
            None => '·',
            Some(v) if hi - lo < 1e-12 => {
                let _ = v;
                BARS[3]
            }
            Some(v) => BARS[(((v - lo) / (hi - lo)) * 7.0).round() as usize],
        })
        .collect()
}

/// How a night of the history may be used by tonight's report.
enum Standing {
    /// Compared against.
    Used,
    /// Compared against, with a warning (a night no checksum can vouch for).
    Warned(String),
    /// Left out of every comparison, with a warning.
    LeftOut(String),
    /// Left out of every comparison, and a failure of tonight's report: the history was
    /// changed after the fact (the problems name the files).
    Broken(Vec<String>),
}

fn standing(n: &Night) -> Standing {
    let mut broken = match &n.integrity {
        Integrity::Failed(p) => p.clone(),
        _ => Vec::new(),
    };
    broken.extend(n.problems.iter().cloned());
    if !broken.is_empty() {
        return Standing::Broken(broken);
    }
    if !is_date(&n.record.date) {
        return Standing::LeftOut(format!(
            "its date {} is not a day of the calendar",
            n.record.date
        ));
    }
    if let Some(why) = n.record.failure() {
        return Standing::LeftOut(format!("a failed night ({why})"));
    }
    match n.integrity {
        Integrity::Unverified => Standing::Warned(format!(
            "night {}: unverified (written before harness sealed nights with {}): compared as it is",
            n.record.name,
            super::store::CHECKSUMS
        )),
        _ => Standing::Used,
    }
}

/// At most this many problems of one night are listed (then a count).
const MAX_LISTED: usize = 5;

/// The failures, warnings and notes of a report, each in the order it was found.
#[derive(Default)]
struct Notices {
    failures: Vec<String>,
    warnings: Vec<String>,
    notes: Vec<String>,
}

/// The nights of the history a report compares against, and those it leaves out.
struct History<'a> {
    /// The nights compared against, oldest first, tonight last.
    nights: Vec<&'a Night>,
    /// Name → why, of the nights left out.
    left_out: Vec<(&'a str, String)>,
}

/// The changes a night flags, filed as the report lists them.
#[derive(Default)]
struct Flagged {
    regressions: Vec<Finding>,
    improvements: Vec<Finding>,
    acknowledged: Vec<Finding>,
}

impl Flagged {
    /// Files regression `f`: with its reason among the acknowledged when an acknowledgement
    /// of its series holds on `date`, else among the regressions (which alert).
    fn regression(&mut self, f: Finding, acks: &[Ack], date: &str) {
        match acknowledged(acks, &f.series, date) {
            Some(reason) => self.acknowledged.push(Finding {
                ack: Some(reason.to_string()),
                ..f
            }),
            None => self.regressions.push(f),
        }
    }
}

/// What every series and speed figure of tonight is judged against.
struct Context<'a> {
    tonight: &'a Night,
    /// The nights compared against, oldest first, tonight last.
    nights: &'a [&'a Night],
    /// The baseline night, when one is named or the history has one.
    base: Option<&'a Night>,
    /// The rules at the per-series confidence ([`per_series_rules`]).
    rules: &'a Rules,
    /// Index in `nights` of the first night of the sparklines and trend charts.
    window_start: usize,
    acks: &'a [Ack],
}

impl<'a> Context<'a> {
    /// The last night compared against before tonight.
    fn previous_night(&self) -> Option<&'a Night> {
        self.nights.len().checked_sub(2).map(|i| self.nights[i])
    }
}

/// Builds the morning report of the last night of `nights` (oldest first). Nights of the
/// history that failed verification, failed, or carry an impossible date are left out of
/// every comparison (the previous night, the baseline, the best night, the series' spread
/// and steps) and named in the report.
pub fn build(
    config: &NightlyConfig,
    all_nights: &[Night],
    baseline: Option<&str>,
    acks: &[Ack],
) -> Morning {
    let tonight = all_nights.last().expect("at least tonight");
    let rec = &tonight.record;
    let mut notices = Notices::default();
    let history = sort_history(all_nights, tonight, &mut notices);
    check_tonight(tonight, acks, &mut notices);
    let rules = per_series_rules(config, tonight);
    let nights = &history.nights;
    let base = find_baseline(nights, tonight, baseline);
    if let Some(b) = baseline {
        if base.is_none() {
            name_missing_baseline(b, &history.left_out, &mut notices);
        }
    }
    let cx = Context {
        tonight,
        nights,
        base,
        rules: &rules,
        window_start: nights.len().saturating_sub(config.history.max(2)),
        acks,
    };
    let mut flagged = Flagged::default();
    let metrics = judge_metrics(&cx, &mut flagged);
    let speed = judge_speed(&cx, &mut flagged);
    let plants = plant_lines(rec);
    notices
        .notes
        .push(rule_note(config, &rules, family_size(tonight)));
    if rec.seed_offset != 0 {
        notices.notes.push(format!(
            "Noise-only night: every seed shifted by {} (`--seed-offset`).",
            rec.seed_offset
        ));
    }
    let mut m = Morning {
        config: config.name.clone(),
        night: rec.name.clone(),
        date: rec.date.clone(),
        commit: rec.commit.clone(),
        previous: cx.previous_night().map(|n| n.record.name.clone()),
        baseline: base.map(|n| n.record.name.clone()),
        nights_in_history: all_nights.len(),
        nights_left_out: history.left_out.len(),
        status: Status::Clean,
        headline: String::new(),
        failures: notices.failures,
        warnings: notices.warnings,
        regressions: flagged.regressions,
        improvements: flagged.improvements,
        acknowledged: flagged.acknowledged,
        recovered: metrics.recovered,
        rows: metrics.rows,
        speed,
        charts: metrics.charts,
        plants,
        notes: notices.notes,
        env: env_rows(rec),
    };
    m.status = status_of(&m);
    m.headline = headline_of(&m);
    m
}

/// What the metric series add to the report besides their findings.
struct MetricTables {
    recovered: Vec<Recovered>,
    rows: Vec<Row>,
    charts: Vec<Chart>,
}

/// Judges every metric series of tonight (in name order): its recovered blips, table row
/// and trend chart, with the change it shows filed into `flagged`.
fn judge_metrics(cx: &Context, flagged: &mut Flagged) -> MetricTables {
    let mut tables = MetricTables {
        recovered: Vec::new(),
        rows: Vec::new(),
        charts: Vec::new(),
    };
    let all_series: BTreeSet<&String> = cx.tonight.series.keys().collect();
    for series in all_series {
        let Some(view) = read_series(cx, series) else {
            continue;
        };
        tables.recovered.extend(recovered_blips(cx, &view));
        if let Some(change) = flagged_change(cx, &view) {
            let f = finding(cx, &view, change);
            if f.kind == "regression" {
                flagged.regression(f, cx.acks, &cx.tonight.record.date);
            } else {
                flagged.improvements.push(f);
            }
        }
        tables.rows.push(metric_row(cx, &view));
        tables.charts.push(trend_chart(cx, &view));
    }
    tables
}

/// Sorts the nights before `tonight` by their [`standing`] into those compared against
/// (`tonight` appended last) and those left out, with why; what the reader must know of
/// them goes to `notices`.
fn sort_history<'a>(
    all_nights: &'a [Night],
    tonight: &'a Night,
    notices: &mut Notices,
) -> History<'a> {
    let mut history = History {
        nights: Vec::new(),
        left_out: Vec::new(),
    };
    for n in &all_nights[..all_nights.len() - 1] {
        let name = n.record.name.as_str();
        match standing(n) {
            Standing::Used => history.nights.push(n),
            Standing::Warned(w) => {
                notices.warnings.push(w);
                history.nights.push(n);
            }
            Standing::LeftOut(why) => {
                notices
                    .warnings
                    .push(format!("night {name}: left out of every comparison: {why}"));
                history.left_out.push((name, why));
            }
            Standing::Broken(problems) => {
                name_broken_night(name, &problems, &mut notices.failures);
                history
                    .left_out
                    .push((name, "it failed verification".into()));
            }
        }
    }
    history.nights.push(tonight);
    history
}

/// The failures of a night of the history that failed verification: its first
/// [`MAX_LISTED`] problems, then a count of the rest.
fn name_broken_night(name: &str, problems: &[String], failures: &mut Vec<String>) {
    for p in problems.iter().take(MAX_LISTED) {
        failures.push(format!(
            "night {name} failed verification and is left out of every comparison: {p}"
        ));
    }
    if problems.len() > MAX_LISTED {
        failures.push(format!(
            "night {name}: {} more problems",
            problems.len() - MAX_LISTED
        ));
    }
}

/// Tonight's own failures and warnings: its verification, the acknowledgements that
/// expired before it, its seeds' errors and the problems of its files.
fn check_tonight(tonight: &Night, acks: &[Ack], notices: &mut Notices) {
    let rec = &tonight.record;
    match &tonight.integrity {
        Integrity::Failed(problems) => {
            for p in problems {
                notices
                    .failures
                    .push(format!("night {} failed verification: {p}", rec.name));
            }
        }
        Integrity::Unverified => notices.warnings.push(format!(
            "night {}: unverified (written before harness sealed nights with {})",
            rec.name,
            super::store::CHECKSUMS
        )),
        _ => {}
    }
    for a in expired(acks, &rec.date) {
        notices.warnings.push(format!(
            "the acknowledgement of `{}` expired on {} ({}): it alerts again. Fix: extend `expires:` or remove it from the --ack file",
            a.series,
            a.expires.as_deref().unwrap_or(""),
            a.reason
        ));
    }
    for e in &rec.entries {
        for s in &e.seeds {
            for err in &s.errors {
                notices.failures.push(format!(
                    "{} seed {}: {err} (log: {})",
                    e.name, s.seed, s.log
                ));
            }
        }
    }
    notices.failures.extend(tonight.problems.iter().cloned());
}

/// The number of series tonight judges at once (at least 1): the family of the
/// family-wise confidence.
fn family_size(tonight: &Night) -> f64 {
    tonight.series.len().max(1) as f64
}

/// The rules each series is judged by. Family-wise over the night: each of the M series at
/// 1 − (1 − c)/M (Bonferroni).
fn per_series_rules(config: &NightlyConfig, tonight: &Night) -> Rules {
    Rules {
        confidence: 1.0 - (1.0 - config.rules.confidence) / family_size(tonight),
        ..config.rules.clone()
    }
}

/// The baseline night among `nights` (tonight last): the one `baseline` names (by name or
/// date) before tonight, else the oldest night when it is not tonight.
fn find_baseline<'a>(
    nights: &[&'a Night],
    tonight: &Night,
    baseline: Option<&str>,
) -> Option<&'a Night> {
    match baseline {
        Some(b) => nights[..nights.len() - 1]
            .iter()
            .find(|n| n.record.name == b || n.record.date == b)
            .copied(),
        None => nights
            .first()
            .filter(|n| n.record.name != tonight.record.name)
            .copied(),
    }
}

/// Says why baseline `b` gives no baseline column: a warning when it names a night left
/// out, a note when no night of the history has that name.
fn name_missing_baseline(b: &str, left_out: &[(&str, String)], notices: &mut Notices) {
    match left_out
        .iter()
        .find(|(name, _)| *name == b || name.starts_with(&format!("{b}-")))
    {
        Some((name, why)) => notices.warnings.push(format!(
            "baseline `{b}` is night {name}, left out ({why}): no baseline column"
        )),
        None => notices.notes.push(format!(
            "baseline `{b}` is not a night of this history; no baseline column"
        )),
    }
}

/// One metric series as tonight's report reads it: tonight's sample, the series over the
/// history, and tonight judged against the previous night and the baseline.
struct SeriesView<'a> {
    name: &'a String,
    metric: String,
    lower: bool,
    min_effect: f64,
    /// Tonight's sample, with the series' spread before tonight.
    now: Sample<'a>,
    spread: f64,
    /// The series over the whole history: (night index, value).
    hist: Vec<(usize, f64)>,
    /// The last night before tonight with the series.
    prev: Option<&'a Night>,
    vs_prev: Option<Judgement>,
    vs_base: Option<Judgement>,
    /// The best night of the history: (night index, value).
    best: Option<(usize, f64)>,
    /// How far tonight is from the best night, in the bad direction.
    worse_than_best: Option<f64>,
    /// The series' steps and one-night blips.
    story: super::rule::History,
}

/// Reads series `series` over the history (none when tonight has no headline of it).
fn read_series<'a>(cx: &Context<'a>, series: &'a String) -> Option<SeriesView<'a>> {
    let (tonight, nights, rules) = (cx.tonight, cx.nights, cx.rules);
    let mut now = sample_alone(tonight, series)?;
    let first = &tonight.series[series][0].result;
    let metric = first.main_metric.clone().unwrap_or_default();
    let lower = lower_is_better(&metric);
    let min_effect = rules.min_effect_of(series);
    // The series over the whole history: (night index, value).
    let hist: Vec<(usize, f64)> = nights
        .iter()
        .enumerate()
        .filter_map(|(i, n)| n.headline(series).map(|v| (i, v)))
        .collect();
    let values: Vec<f64> = hist.iter().map(|(_, v)| *v).collect();
    // The spread the series has shown before tonight (tonight's own change left out).
    let spread = super::rule::history_spread(&values[..values.len().saturating_sub(1)]);
    now.spread = spread;
    let prev = nights[..nights.len() - 1]
        .iter()
        .rev()
        .find(|n| n.series.contains_key(series))
        .copied();
    let vs_prev = prev
        .and_then(|p| sample(p, series, spread))
        .map(|a| judge(&a, &now, lower, min_effect, rules));
    let vs_base = cx
        .base
        .and_then(|b| sample(b, series, spread))
        .map(|a| judge(&a, &now, lower, min_effect, rules));
    let best = hist.iter().map(|&(i, v)| (i, v)).reduce(|a, b| {
        let better = if lower { b.1 < a.1 } else { b.1 > a.1 };
        if better {
            b
        } else {
            a
        }
    });
    let worse_than_best = best.map(|(_, v)| {
        if lower {
            now.mean() - v
        } else {
            v - now.mean()
        }
    });
    let sigma = super::rule::noise_sigma(&values, min_effect / 2.0);
    let story = read_history(&values, sigma, rules.step_penalty, min_effect);
    Some(SeriesView {
        name: series,
        metric,
        lower,
        min_effect,
        now,
        spread,
        hist,
        prev,
        vs_prev,
        vs_base,
        best,
        worse_than_best,
        story,
    })
}

/// The one-night blips of series `v` in the window that were worse than the level either
/// side of them (they recovered the next night).
fn recovered_blips(cx: &Context, v: &SeriesView) -> Vec<Recovered> {
    let (series, hist) = (v.name, &v.hist);
    let mut recovered = Vec::new();
    for &b in &v.story.blips {
        let (i, value) = hist[b];
        if i >= cx.window_start {
            let level = (hist[b - 1].1 + hist[b + 1].1) / 2.0;
            let worse = if v.lower {
                value > level
            } else {
                value < level
            };
            if worse {
                recovered.push(Recovered {
                    series: series.clone(),
                    night: cx.nights[i].record.name.clone(),
                    value,
                    level,
                    text: format!(
                        "{series} on {}: {value:.2} against a level of {level:.2} either side (recovered the next night)",
                        cx.nights[i].record.name
                    ),
                });
            }
        }
    }
    recovered
}

/// A change a series shows tonight: its judgement, the night it is measured against, and
/// when it began.
struct Change<'a> {
    judgement: Judgement,
    since: &'a Night,
    when: String,
}

/// The change series `v` shows tonight: a change against the previous night; else a
/// lasting step whose level tonight still holds, against the last night before it.
fn flagged_change<'a>(cx: &Context<'a>, v: &SeriesView<'a>) -> Option<Change<'a>> {
    let flags = |j: &Judgement| matches!(j.verdict, Verdict::Regression | Verdict::Improvement);
    if let (Some(j), Some(p)) = (&v.vs_prev, v.prev) {
        if flags(j) {
            return Some(Change {
                judgement: j.clone(),
                since: p,
                when: "new tonight: tomorrow tells a one-night blip from a lasting step".into(),
            });
        }
    }
    // The step's segment must reach tonight (no later change point).
    let &s = v.story.steps.last()?;
    let before = cx.nights[v.hist[s - 1].0];
    let began = cx.nights[v.hist[s].0];
    let a = sample(before, v.name, v.spread)?;
    let j = judge(&a, &v.now, v.lower, v.min_effect, cx.rules);
    flags(&j).then(|| Change {
        judgement: j,
        since: before,
        when: format!(
            "lasting step since {} ({} nights at the new level)",
            began.record.date,
            v.hist.len() - s
        ),
    })
}

/// The finding of `change` in series `v`: the numbers, the commit range, how far from the
/// best night, and its one-line summary.
fn finding(cx: &Context, v: &SeriesView, change: Change) -> Finding {
    let Change {
        judgement: j,
        since: before,
        when,
    } = change;
    let (series, metric, now) = (v.name, &v.metric, &v.now);
    let rec = &cx.tonight.record;
    let kind = if j.verdict == Verdict::Regression {
        "regression"
    } else {
        "improvement"
    };
    let commits = format!("{}..{}", short(&before.record.commit), short(&rec.commit));
    let interval = j.interval.map_or("no interval".to_string(), |(l, h)| {
        format!("{} % CI [{l:+.2}, {h:+.2}]", percent(j.confidence))
    });
    let wtb = v.worse_than_best.filter(|w| *w > 0.0);
    let line = format!(
        "{series} {metric} {} → {} (Δ {}, {interval}, {}; {when}; commits {commits}{})",
        fmt(j.delta.mul_add(-1.0, now.mean())),
        fmt(now.mean()),
        signed(j.delta),
        j.method,
        wtb.map_or(String::new(), |w| format!(
            "; worse than the best night by {w:.2}"
        ))
    );
    Finding {
        series: series.clone(),
        metric: metric.clone(),
        kind: kind.into(),
        since_night: before.record.name.clone(),
        commits,
        before: now.mean() - j.delta,
        now: now.mean(),
        delta: j.delta,
        interval: j.interval,
        confidence: j.confidence,
        method: j.method.into(),
        when,
        worse_than_best: wtb,
        best_night: v.best.map(|(i, _)| cx.nights[i].record.name.clone()),
        ack: None,
        line,
    }
}

/// The row of series `v` in the metric table: tonight, the previous night, the baseline
/// and the best night, the verdict, the sparkline over the window, and cache use.
fn metric_row(cx: &Context, v: &SeriesView) -> Row {
    let (series, now) = (v.name, &v.now);
    let window: Vec<Option<f64>> = cx.nights[cx.window_start..]
        .iter()
        .map(|n| n.headline(series))
        .collect();
    let hits: u64 = cx.tonight.series[series]
        .iter()
        .map(|s| s.result.cache.hits)
        .sum();
    let misses: u64 = cx.tonight.series[series]
        .iter()
        .map(|s| s.result.cache.misses)
        .sum();
    let verdict = |j: &Option<Judgement>| match j.as_ref().map(|j| j.verdict) {
        Some(Verdict::Regression) => "regression",
        Some(Verdict::Improvement) => "improvement",
        Some(Verdict::Unchanged) => "within noise",
        Some(Verdict::Unjudged) => "no noise estimate",
        None => "first night",
    };
    Row {
        series: series.clone(),
        metric: v.metric.clone(),
        arrow: if v.lower { "↓" } else { "↑" }.into(),
        seeds: now.headlines.len(),
        tonight: fmt(now.mean()),
        previous: v
            .vs_prev
            .as_ref()
            .map_or("–".into(), |j| fmt(now.mean() - j.delta)),
        delta_previous: v.vs_prev.as_ref().map_or("–".into(), |j| match j.interval {
            Some((l, h)) => format!("{} [{l:+.2}, {h:+.2}]", signed(j.delta)),
            None => signed(j.delta),
        }),
        baseline: v
            .vs_base
            .as_ref()
            .map_or("–".into(), |j| fmt(now.mean() - j.delta)),
        delta_baseline: v.vs_base.as_ref().map_or("–".into(), |j| signed(j.delta)),
        best: v.best.map_or("–".into(), |(_, b)| fmt(b)),
        verdict: verdict(&v.vs_prev).into(),
        sparkline: sparkline(&window),
        cache: if hits > 0 {
            format!(
                "{hits}/{} sentences from the embedding cache",
                hits + misses
            )
        } else {
            String::new()
        },
    }
}

/// The trend chart of series `v` over the window.
fn trend_chart(cx: &Context, v: &SeriesView) -> Chart {
    let (series, metric) = (v.name, &v.metric);
    let points: Vec<(f64, f64, Option<f64>)> = v
        .hist
        .iter()
        .filter(|(i, _)| *i >= cx.window_start)
        .map(|&(i, value)| (i as f64, value, None))
        .collect();
    let file = format!("trend-{}.svg", series.replace(['/', ':'], "_"));
    Chart {
        series: series.clone(),
        file,
        svg: harness_report::charts::lines(
            &format!("trend-{}", series.replace(['/', ':'], "_")),
            &format!("{series} — {metric} per night"),
            "night (index in the history)",
            metric,
            &[harness_report::charts::LineSeries {
                label: series.clone(),
                points,
            }],
        ),
    }
}

/// One speed figure of an entry on one night.
struct SpeedFigure {
    name: &'static str,
    value: Option<f64>,
    higher_is_better: bool,
    /// Seconds the measurement took.
    took: f64,
}

/// The speed figures of entry `entry` on night `n` (none when the entry did not run):
/// training throughput, the probe's encoding throughput, and wall time.
fn speed_figures(n: &Night, entry: &str) -> Vec<SpeedFigure> {
    let Some(pe) = n.record.entries.iter().find(|x| x.name == entry) else {
        return Vec::new();
    };
    let wall = mean(
        pe.seeds
            .iter()
            .map(|s| s.train_seconds.unwrap_or(0.0) + s.eval_seconds)
            .collect(),
    );
    let figure = |name, value, higher_is_better, took| SpeedFigure {
        name,
        value,
        higher_is_better,
        took,
    };
    vec![
        figure(
            "tokens_per_s",
            mean(pe.seeds.iter().filter_map(|s| s.tokens_per_s).collect()),
            true,
            mean(pe.seeds.iter().filter_map(|s| s.train_seconds).collect()).unwrap_or(0.0),
        ),
        figure(
            "sentences_per_s",
            pe.sentences_per_s,
            true,
            pe.probe_seconds.unwrap_or(0.0),
        ),
        figure("wall_s", wall, false, wall.unwrap_or(0.0)),
    ]
}

/// Tonight's and the previous night's CPU share of entry `entry` when the machine was busy:
/// the entry's children had a clearly smaller share of the CPU than the night before
/// (`rules.busy_share`).
fn busy_machine(cx: &Context, entry: &str) -> Option<(f64, f64)> {
    match (
        cpu_share(cx.tonight, entry),
        cx.previous_night().and_then(|n| cpu_share(n, entry)),
    ) {
        (Some(now), Some(before)) if now < cx.rules.busy_share * before => Some((now, before)),
        _ => None,
    }
}

/// Speed: per entry, throughputs and wall time against the previous night; the rows of
/// the speed table, with slower figures filed into `flagged`.
fn judge_speed(cx: &Context, flagged: &mut Flagged) -> Vec<SpeedRow> {
    let rules = cx.rules;
    let mut speed = Vec::new();
    for e in &cx.tonight.record.entries {
        let now_f = speed_figures(cx.tonight, &e.name);
        let prev_f = cx
            .previous_night()
            .map(|n| speed_figures(n, &e.name))
            .unwrap_or_default();
        let busy = busy_machine(cx, &e.name);
        for figure in now_f {
            let Some(v) = figure.value else { continue };
            let previous = prev_f.iter().find(|p| p.name == figure.name);
            let before = previous.and_then(|p| p.value);
            let long_enough = figure.took >= rules.speed_min_seconds
                && previous.is_some_and(|p| p.took >= rules.speed_min_seconds);
            let series = format!("{}/speed:{}", e.name, figure.name);
            // The probe's timing is its own child's, outside the seeds' CPU accounting.
            let starved = busy.filter(|_| figure.name != "sentences_per_s");
            let verdict = match before {
                Some(b) if long_enough && starved.is_none() => {
                    speed_verdict(b, v, figure.higher_is_better, rules.speed_ratio)
                }
                _ => Verdict::Unjudged,
            };
            if verdict == Verdict::Regression {
                let b = before.unwrap_or(f64::NAN);
                let f = speed_regression(cx, &series, &figure, b, v);
                flagged.regression(f, cx.acks, &cx.tonight.record.date);
            }
            speed.push(SpeedRow {
                series,
                tonight: fmt(v),
                previous: before.map_or("–".into(), fmt),
                ratio: before.map_or("–".into(), |b| format!("×{:.2}", v / b)),
                verdict: speed_word(verdict, starved, before.is_some()),
            });
        }
    }
    speed
}

/// The verdict column of a speed figure; `starved` is the CPU share tonight and the night
/// before when the machine was busy.
fn speed_word(verdict: Verdict, starved: Option<(f64, f64)>, has_before: bool) -> String {
    match (verdict, starved) {
        (Verdict::Regression, _) => "slower".to_string(),
        (Verdict::Improvement, _) => "faster".to_string(),
        (Verdict::Unchanged, _) => "within threshold".to_string(),
        (Verdict::Unjudged, Some((share, was))) => format!(
            "machine busy: CPU share {:.0} % vs {:.0} %, not judged",
            share * 100.0,
            was * 100.0
        ),
        (Verdict::Unjudged, _) if has_before => "too short to compare".to_string(),
        (Verdict::Unjudged, _) => "first night".to_string(),
    }
}

/// The finding of speed figure `figure` of `series` that fell from `b` to `v` beyond the
/// threshold since the previous night.
fn speed_regression(cx: &Context, series: &str, figure: &SpeedFigure, b: f64, v: f64) -> Finding {
    let rules = cx.rules;
    let prev_night = cx.previous_night();
    Finding {
        series: series.to_string(),
        metric: figure.name.into(),
        kind: "regression".into(),
        since_night: prev_night
            .map(|n| n.record.name.clone())
            .unwrap_or_default(),
        commits: prev_night.map_or(String::new(), |n| {
            format!(
                "{}..{}",
                short(&n.record.commit),
                short(&cx.tonight.record.commit)
            )
        }),
        before: b,
        now: v,
        delta: v - b,
        interval: None,
        confidence: 0.0,
        method: format!("ratio {:.2} beyond {:.2}", v / b, rules.speed_ratio),
        when: "new tonight".into(),
        worse_than_best: None,
        best_night: None,
        ack: None,
        line: format!(
            "{series} {} → {} (×{:.2}; threshold ×{:.2})",
            fmt(b),
            fmt(v),
            v / b,
            if figure.higher_is_better {
                rules.speed_ratio
            } else {
                1.0 / rules.speed_ratio
            }
        ),
    }
}

/// The exit status of report `m`: errors before regressions before clean.
fn status_of(m: &Morning) -> Status {
    if !m.failures.is_empty() {
        Status::Errors
    } else if !m.regressions.is_empty() {
        Status::Regressions
    } else {
        Status::Clean
    }
}

/// The one-line summary of report `m`: its counts of findings, failures, metrics and
/// nights.
fn headline_of(m: &Morning) -> String {
    let plural = |n: usize| if n == 1 { "" } else { "s" };
    format!(
        "{} {}: {} regression{}, {} improvement{}, {} acknowledged, {} failure{} ({} metrics, {} night{} in the history{})",
        m.config,
        m.night,
        m.regressions.len(),
        plural(m.regressions.len()),
        m.improvements.len(),
        plural(m.improvements.len()),
        m.acknowledged.len(),
        m.failures.len(),
        plural(m.failures.len()),
        m.rows.len(),
        m.nights_in_history,
        plural(m.nights_in_history),
        if m.nights_left_out == 0 {
            String::new()
        } else {
            format!(", {} left out", m.nights_left_out)
        }
    )
}

/// One line per change planted tonight (`--plant`), so that nobody mistakes a fire drill
/// for a regression.
fn plant_lines(rec: &NightRecord) -> Vec<String> {
    rec.plants
        .iter()
        .map(|p| {
            format!(
                "FIRE DRILL: {} was perturbed by {:+.2} points of quality (`--plant`; per seed before → after: {})",
                p.series,
                p.points,
                p.headlines
                    .iter()
                    .map(|(a, b)| format!("{a:.2} → {b:.2}"))
                    .collect::<Vec<_>>()
                    .join(", ")
            )
        })
        .collect()
}

/// The note that states the rule tonight was judged by (`rules` at the per-series
/// confidence, `family` series in the night).
fn rule_note(config: &NightlyConfig, rules: &Rules, family: f64) -> String {
    format!(
        "Rule: a change is flagged when |Δ| ≥ the series' minimum effect (default {:.2} points) and its paired bootstrap interval (Δ ± z·SE, {} replicates over the test items, seeds resampled where several ran; seed {}) excludes 0 at {:.2} % per series: {:.0} % for the whole night over its {} series (Bonferroni). Speed figures alert beyond ×{:.2} when both timings lasted {:.0} s or more and the entry kept at least {:.0} % of its previous CPU share (else the machine was busy: not judged).",
        rules.min_effect_of(""),
        rules.replicates,
        rules.bootstrap_seed,
        rules.confidence * 100.0,
        config.rules.confidence * 100.0,
        family,
        rules.speed_ratio,
        rules.speed_min_seconds,
        rules.busy_share * 100.0
    )
}

/// The environment table: what tonight ran with and how long it took.
fn env_rows(rec: &NightRecord) -> Vec<(String, String)> {
    let env = &rec.env;
    vec![
        (
            "harness".to_string(),
            format!("{} ({})", env.harness_version, env.git_commit),
        ),
        (
            "datasets.lock".to_string(),
            env.datasets_lock.chars().take(16).collect(),
        ),
        (
            "backend / device".to_string(),
            format!("{} / {}", env.backend, env.device),
        ),
        ("threads".to_string(), env.threads.to_string()),
        ("CPU".to_string(), env.cpu_model.clone()),
        ("OS".to_string(), env.os.clone()),
        (
            "night wall time".to_string(),
            format!("{:.1} s", rec.wall_seconds),
        ),
    ]
}

/// The report as terminal text (also the log of a cron run).
pub fn terminal(m: &Morning) -> String {
    let mut out = format!("{}\n", m.headline);
    for p in &m.plants {
        out.push_str(&format!("  {p}\n"));
    }
    let list = |out: &mut String, title: &str, items: &[String]| {
        if !items.is_empty() {
            out.push_str(&format!("{title}:\n"));
            for i in items {
                out.push_str(&format!("  - {i}\n"));
            }
        }
    };
    list(&mut out, "FAILURES", &m.failures);
    list(&mut out, "WARNINGS", &m.warnings);
    list(
        &mut out,
        "REGRESSIONS",
        &m.regressions
            .iter()
            .map(|f| f.line.clone())
            .collect::<Vec<_>>(),
    );
    list(
        &mut out,
        "improvements",
        &m.improvements
            .iter()
            .map(|f| f.line.clone())
            .collect::<Vec<_>>(),
    );
    list(
        &mut out,
        "acknowledged (not alerting)",
        &m.acknowledged
            .iter()
            .map(|f| format!("{} — {}", f.line, f.ack.as_deref().unwrap_or("")))
            .collect::<Vec<_>>(),
    );
    list(
        &mut out,
        "recovered (one-night blips)",
        &m.recovered
            .iter()
            .map(|r| r.text.clone())
            .collect::<Vec<_>>(),
    );
    use tabled::builder::Builder;
    use tabled::settings::Style;
    let mut b = Builder::default();
    b.push_record([
        "series",
        "metric",
        "tonight",
        "previous",
        "Δ previous [CI]",
        "baseline",
        "Δ baseline",
        "best",
        "trend",
        "verdict",
    ]);
    for r in &m.rows {
        b.push_record([
            r.series.clone(),
            format!("{} {}", r.metric, r.arrow),
            r.tonight.clone(),
            r.previous.clone(),
            r.delta_previous.clone(),
            r.baseline.clone(),
            r.delta_baseline.clone(),
            r.best.clone(),
            r.sparkline.clone(),
            r.verdict.clone(),
        ]);
    }
    out.push_str(&b.build().with(Style::sharp()).to_string());
    out.push('\n');
    if !m.speed.is_empty() {
        let mut b = Builder::default();
        b.push_record(["speed", "tonight", "previous", "ratio", "verdict"]);
        for s in &m.speed {
            b.push_record([
                s.series.clone(),
                s.tonight.clone(),
                s.previous.clone(),
                s.ratio.clone(),
                s.verdict.clone(),
            ]);
        }
        out.push_str(&b.build().with(Style::sharp()).to_string());
        out.push('\n');
    }
    out
}

/// Writes the report of `m` into `dir` (`report.md`, `report.html`, `report.txt` and one SVG
/// per trend chart), each atomically; returns the HTML's path. Strings from result files
/// (benchmark, metric and encoder names, error messages) may hold control characters: every
/// file is written with them made visible (`\u{1b}`), never raw, so that `cat report.txt`
/// cannot drive a terminal.
///
/// `dir` is claimed as an output folder ([`harness_core::outdir`]): a night's own `report/`
/// is harness's ([`Foreign::Ours`]); an `--out` folder a user names may hold other files,
/// which are never replaced ([`Foreign::LeaveAlone`]).
pub fn write(
    m: &Morning,
    dir: &std::path::Path,
    foreign: harness_core::outdir::Foreign,
) -> Result<std::path::PathBuf, String> {
    let md =
        harness_report::render::render_template("nightly.md.j2", m).map_err(|e| e.to_string())?;
    let html =
        harness_report::render::render_template("nightly.html.j2", m).map_err(|e| e.to_string())?;
    let mut files: Vec<(String, String)> = vec![
        ("report.md".into(), md),
        ("report.html".into(), html),
        ("report.txt".into(), terminal(m)),
    ];
    files.extend(m.charts.iter().map(|c| (c.file.clone(), c.svg.clone())));
    let names: Vec<String> = files.iter().map(|(n, _)| n.clone()).collect();
    let mut out =
        harness_core::outdir::OutDir::claim(dir, "nightly report", &names, foreign, false)
            .map_err(|e| e.to_string())?;
    for (name, text) in &files {
        let text = harness_core::terminal::terminal_safe(text);
        out.write(name, text.as_bytes())
            .map_err(|e| e.to_string())?;
    }
    out.finish().map_err(|e| e.to_string())?;
    Ok(dir.join("report.html"))
}

#[cfg(test)]
mod tests {
    use super::*;

    use super::super::config::{Entry, NightlyConfig};
    use super::super::store::{EnvFingerprint, Integrity, NightRecord, SeedResult};
    use harness_bench::items::{Group, Items, Outcomes};
    use harness_bench::runner::BenchResult;
    use rand::{Rng, SeedableRng};

    fn config() -> NightlyConfig {
        NightlyConfig {
            name: "t".into(),
            description: String::new(),
            baseline: None,
            seeds: vec![1, 2],
            history: 14,
            entries: vec![Entry {
                name: "e".into(),
                recipe: None,
                profile: None,
                set: vec![],
                run: None,
                encoder: Some("x".into()),
                benchmarks: vec!["acc".into()],
                bench_set: vec![],
                seeds: None,
            }],
            rules: Rules::default(),
            speed_probe_sentences: 0,
        }
    }

    /// A night whose series `e/acc` has one result per seed (accuracy items) and `e/err`
    /// (an error rate over the same kind of items).
    fn night(k: usize, per_seed: &[(Items, Items)]) -> Night {
        let result = |bench: &str, metric: &str, items: &Items, seed: u64| {
            SeedResult {
            seed,
            result: serde_json::from_value::<BenchResult>(serde_json::json!({
                "benchmark": bench, "protocol": "p", "dataset": "d", "main_metric": metric,
                "main_score": items.headline(), "scores": null, "protocol_params": null,
                "notes": [], "datasets": "x", "encoder": {"name": "x", "fingerprint": "f", "dim": 1},
                "seed": seed, "seconds": 1.0, "cache": {"hits": 0, "misses": 0},
                "harness_version": "0"
            }))
            .unwrap(),
            items: Some(items.clone()),
            path: "r.json".into(),
        }
        };
        let mut series = std::collections::BTreeMap::new();
        series.insert(
            "e/acc".to_string(),
            per_seed
                .iter()
                .enumerate()
                .map(|(s, (a, _))| result("acc", "accuracy", a, s as u64 + 1))
                .collect(),
        );
        series.insert(
            "e/err".to_string(),
            per_seed
                .iter()
                .enumerate()
                .map(|(s, (_, e))| result("err", "error_rate", e, s as u64 + 1))
                .collect(),
        );
        let date = format!("2026-10-{:02}", k + 1);
        Night {
            dir: "n".into(),
            record: NightRecord {
                config: "t".into(),
                date: date.clone(),
                commit: format!("{k:08x}"),
                name: format!("{date}-{k:08x}"),
                started: String::new(),
                finished: String::new(),
                wall_seconds: 1.0,
                env: EnvFingerprint {
                    harness_version: "0".into(),
                    git_commit: "c".into(),
                    crate_versions: Default::default(),
                    datasets_lock: "x".into(),
                    backend: "ndarray".into(),
                    device: "cpu".into(),
                    threads: 1,
                    cpu_model: "cpu".into(),
                    os: "linux".into(),
                },
                entries: vec![],
                plants: vec![],
                seed_offset: 0,
                failed: false,
                sealed: true,
            },
            series,
            problems: vec![],
            integrity: Integrity::Verified,
        }
    }

    /// Seed noise on fixed test items: each run re-decides 5 % of 2,000 items (a classifier
    /// seed moves items near the boundary), the rest stay as the truth has them (80 % right).
    fn noisy_nights(n: usize, seed: u64) -> Vec<Vec<(Items, Items)>> {
        let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(seed);
        let truth: Vec<bool> = (0..2000).map(|_| rng.random_bool(0.8)).collect();
        let run = |rng: &mut rand_chacha::ChaCha8Rng| -> Vec<bool> {
            truth
                .iter()
                .map(|&t| {
                    if rng.random_bool(0.05) {
                        rng.random_bool(0.8)
                    } else {
                        t
                    }
                })
                .collect()
        };
        (0..n)
            .map(|_| {
                (0..2)
                    .map(|_| {
                        let g = |c: Vec<bool>| {
                            vec![Group {
                                name: "g".into(),
                                weight: 1.0,
                                outcomes: Outcomes::correct(c),
                            }]
                        };
                        (
                            Items::mean_of(g(run(&mut rng))),
                            Items::error_rate_of(g(run(&mut rng))),
                        )
                    })
                    .collect()
            })
            .collect()
    }

    #[test]
    fn twenty_nights_of_seed_noise_raise_no_alarm_and_planted_changes_are_caught() {
        let c = config();
        let data = noisy_nights(21, 11);
        let nights: Vec<Night> = data.iter().enumerate().map(|(k, d)| night(k, d)).collect();
        let mut alarms = 0;
        for k in 1..nights.len() {
            let m = build(&c, &nights[..=k], None, &[]);
            alarms += m.regressions.len() + m.improvements.len();
            assert_eq!(m.rows.len(), 2);
        }
        assert_eq!(alarms, 0, "false alarms over 20 noise-only nights");
        // Tonight 5 points worse on `e/acc` (right → wrong on 5 % of the items of each seed):
        // flagged with the right sign, an interval below 0, exit 3.
        let mut bad = data[20].clone();
        for (a, _) in bad.iter_mut() {
            super::super::plant::perturb(a, -5.0, 3).unwrap();
        }
        let mut with_bad: Vec<Night> = nights[..20].to_vec();
        with_bad.push(night(20, &bad));
        let m = build(&c, &with_bad, None, &[]);
        assert_eq!(m.status, Status::Regressions, "{}", terminal(&m));
        let f = &m.regressions[0];
        assert_eq!(
            (f.series.as_str(), f.kind.as_str()),
            ("e/acc", "regression")
        );
        let (low, high) = f.interval.unwrap();
        assert!(f.delta < -3.0 && high < 0.0 && low < f.delta, "{f:?}");
        assert!(f.worse_than_best.unwrap() > 4.0, "{f:?}");
        assert!(f.commits.ends_with(&format!("{:08x}", 20)), "{}", f.commits);
        // Acknowledged: listed with its reason, no alert.
        let acks = vec![Ack {
            series: "e/*".into(),
            reason: "known".into(),
            expires: None,
        }];
        let m = build(&c, &with_bad, None, &acks);
        assert_eq!(m.status, Status::Clean);
        assert_eq!(m.acknowledged[0].ack.as_deref(), Some("known"));
        // An error rate that falls by 5 points is an improvement: reported, exit 0.
        let mut good = data[20].clone();
        for (_, e) in good.iter_mut() {
            super::super::plant::perturb(e, 5.0, 3).unwrap();
        }
        let mut with_good: Vec<Night> = nights[..20].to_vec();
        with_good.push(night(20, &good));
        let m = build(&c, &with_good, None, &[]);
        assert_eq!(m.status, Status::Clean, "{}", terminal(&m));
        assert_eq!(m.improvements[0].series, "e/err");
        assert!(m.improvements[0].delta < -3.0);
        // A lasting step: nights 15.. all 5 points worse. Tonight (20) is no change against
        // night 19, yet the step is still open: reported against night 14, dated night 15.
        let stepped: Vec<Night> = data
            .iter()
            .enumerate()
            .map(|(k, d)| {
                let mut d = d.clone();
                if k >= 15 {
                    for (a, _) in d.iter_mut() {
                        super::super::plant::perturb(a, -5.0, k as u64).unwrap();
                    }
                }
                night(k, &d)
            })
            .collect();
        let m = build(&c, &stepped, None, &[]);
        assert_eq!(m.status, Status::Regressions, "{}", terminal(&m));
        let f = &m.regressions[0];
        assert!(
            f.when.starts_with("lasting step since 2026-10-16"),
            "{}",
            f.when
        );
        assert_eq!(f.commits, format!("{:08x}..{:08x}", 14, 20));
        // A one-night dip that recovered: listed as recovered, no alarm tonight.
        let mut dipped: Vec<Night> = nights.clone();
        let mut d = data[10].clone();
        for (a, _) in d.iter_mut() {
            super::super::plant::perturb(a, -6.0, 9).unwrap();
        }
        dipped[10] = night(10, &d);
        let m = build(&c, &dipped, None, &[]);
        assert_eq!(m.status, Status::Clean, "{}", terminal(&m));
        assert_eq!(m.recovered.len(), 1, "{}", terminal(&m));
        assert_eq!(m.recovered[0].night, dipped[10].record.name);
    }

    /// Entry `e` with one seed of `wall` seconds of evaluation and `cpu` CPU seconds.
    fn timed(mut n: Night, wall: f64, cpu: f64) -> Night {
        n.record.entries = vec![super::super::store::EntryRecord {
            name: "e".into(),
            kind: "encoder".into(),
            source: "x".into(),
            seeds: vec![super::super::store::SeedRecord {
                seed: 1,
                dir: "e/seed-1".into(),
                train_seconds: None,
                tokens_per_s: None,
                eval_seconds: wall,
                cpu_seconds: Some(cpu),
                errors: vec![],
                log: "e/seed-1.log".into(),
            }],
            sentences_per_s: None,
            probe_seconds: None,
        }];
        n
    }

    /// Twice the wall time with the same CPU share is slower code: an alert. Twice the wall
    /// time with half the CPU share is a busy machine: shown, not judged.
    #[test]
    fn a_busy_machine_is_told_apart_from_slower_code() {
        let c = config();
        let data = noisy_nights(2, 5);
        let base = timed(night(0, &data[0]), 10.0, 18.0);
        let slower = timed(night(1, &data[1]), 20.0, 36.0);
        let m = build(&c, &[base.clone(), slower], None, &[]);
        assert_eq!(m.status, Status::Regressions, "{}", terminal(&m));
        assert_eq!(m.regressions[0].series, "e/speed:wall_s");
        let busy = timed(night(1, &data[1]), 20.0, 18.0);
        let m = build(&c, &[base, busy], None, &[]);
        assert_eq!(m.status, Status::Clean, "{}", terminal(&m));
        let row = m
            .speed
            .iter()
            .find(|r| r.series == "e/speed:wall_s")
            .unwrap();
        assert_eq!(
            row.verdict,
            "machine busy: CPU share 90 % vs 180 %, not judged"
        );
    }

    /// Nights the history cannot vouch for are left out of every comparison and named: a
    /// tampered night (its files changed after it was sealed) fails the report, a failed
    /// night and a night of an impossible date are warned about; the previous night, the
    /// best night and the baseline all come from the nights that remain, so a planted
    /// regression is still caught.
    #[test]
    fn tampered_and_failed_nights_are_named_and_left_out() {
        let c = config();
        let data = noisy_nights(6, 21);
        let mut nights: Vec<Night> = data.iter().enumerate().map(|(k, d)| night(k, d)).collect();
        let mut bad = data[5].clone();
        for (a, _) in bad.iter_mut() {
            super::super::plant::perturb(a, -5.0, 3).unwrap();
        }
        nights[5] = night(5, &bad);
        // Night 4 was tampered with: its headline raised by 37.88 points (it would be the
        // best night, and tonight's change against it far beyond noise, or "within noise"
        // against its unchanged items) — its checksums say so.
        for r in nights[4].series.get_mut("e/acc").unwrap() {
            r.result.main_score = r.result.main_score.map(|v| v + 37.88);
        }
        nights[4].integrity = Integrity::Failed(vec![
            "n/e/seed-1/results/acc.json: sha256 x is not the y of SHA256SUMS".into(),
        ]);
        // Night 3 failed (a seed's training crashed); night 2 carries an impossible date.
        nights[3].record.failed = true;
        nights[2].record.date = "2026-02-30".into();
        let m = build(&c, &nights, None, &[]);
        let t = terminal(&m);
        assert_eq!(m.status, Status::Errors, "{t}");
        assert!(
            m.failures.iter().any(|f| f.contains(&nights[4].record.name)
                && f.contains("acc.json")
                && f.contains("left out")),
            "{t}"
        );
        assert!(
            m.warnings
                .iter()
                .any(|w| w.contains(&nights[3].record.name) && w.contains("failed night")),
            "{t}"
        );
        assert!(
            m.warnings
                .iter()
                .any(|w| w.contains(&nights[2].record.name) && w.contains("not a day")),
            "{t}"
        );
        assert_eq!(m.nights_left_out, 3);
        assert!(t.contains("3 left out") && t.contains("WARNINGS"), "{t}");
        // The planted regression is caught against night 1, the last night left in.
        assert_eq!(m.previous.as_deref(), Some(nights[1].record.name.as_str()));
        let f = m.regressions.iter().find(|f| f.series == "e/acc").unwrap();
        assert_eq!(f.since_night, nights[1].record.name);
        assert!(f.delta < -3.0, "{f:?}");
        assert_ne!(
            f.best_night.as_deref(),
            Some(nights[4].record.name.as_str())
        );
        // Without the tampered night, the same history is a regression (exit 3), not an
        // error.
        nights.remove(4);
        let m = build(&c, &nights, None, &[]);
        assert_eq!(m.status, Status::Regressions, "{}", terminal(&m));
        // A baseline that names a night left out says so.
        let b = nights[3].record.name.clone();
        let m = build(&c, &nights, Some(&b), &[]);
        assert!(m.baseline.is_none());
        assert!(
            m.warnings
                .iter()
                .any(|w| w.contains(&format!("baseline `{b}`")) && w.contains("left out")),
            "{}",
            terminal(&m)
        );
        // A night of an older harness (no checksums) is compared, and named as unverified.
        nights[1].integrity = Integrity::Unverified;
        let m = build(&c, &nights, None, &[]);
        assert!(
            m.warnings
                .iter()
                .any(|w| w.contains(&nights[1].record.name) && w.contains("unverified")),
            "{}",
            terminal(&m)
        );
        assert_eq!(m.status, Status::Regressions);
        // An acknowledgement that expired before tonight is named; it silences nothing.
        let acks = vec![Ack {
            series: "e/*".into(),
            reason: "known".into(),
            expires: Some("2026-10-01".into()),
        }];
        let m = build(&c, &nights, None, &acks);
        assert_eq!(m.status, Status::Regressions);
        assert!(
            m.warnings
                .iter()
                .any(|w| w.contains("`e/*` expired on 2026-10-01")),
            "{}",
            terminal(&m)
        );
    }

    /// Control characters from result files reach no report file raw.
    #[test]
    fn reports_carry_no_raw_control_characters() {
        let c = config();
        let data = noisy_nights(2, 5);
        let mut nights: Vec<Night> = data.iter().enumerate().map(|(k, d)| night(k, d)).collect();
        for r in nights[1].series.get_mut("e/acc").unwrap() {
            r.result.main_metric = Some("accuracy\u{1b}]0;owned\u{7}".into());
        }
        nights[1].problems.push("x.json: bad \u{1b}[2J".into());
        let m = build(&c, &nights, None, &[]);
        let dir = tempfile::tempdir().unwrap();
        write(&m, dir.path(), harness_core::outdir::Foreign::LeaveAlone).unwrap();
        for f in ["report.txt", "report.md", "report.html"] {
            let text = std::fs::read_to_string(dir.path().join(f)).unwrap();
            assert!(!text.contains(['\u{1b}', '\u{7}']), "{f}");
        }
        let text = std::fs::read_to_string(dir.path().join("report.txt")).unwrap();
        assert!(
            text.contains("accuracy\\u{1b}]0;owned\\u{7}") && text.contains("bad \\u{1b}[2J"),
            "the characters are shown, escaped: {text}"
        );
    }

    /// `--report-only --out DIR` never replaces a file of someone else's in DIR; a report
    /// it wrote there before it replaces.
    #[test]
    fn a_report_folder_keeps_files_harness_did_not_write() {
        let c = config();
        let data = noisy_nights(2, 5);
        let nights: Vec<Night> = data.iter().enumerate().map(|(k, d)| night(k, d)).collect();
        let m = build(&c, &nights, None, &[]);
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("report.md"), "my notes").unwrap();
        let err = write(&m, dir.path(), harness_core::outdir::Foreign::LeaveAlone).unwrap_err();
        assert!(
            err.contains("report.md") && err.contains("did not write"),
            "{err}"
        );
        assert_eq!(
            std::fs::read_to_string(dir.path().join("report.md")).unwrap(),
            "my notes"
        );
        assert!(!dir.path().join("report.html").exists(), "nothing written");
        std::fs::remove_file(dir.path().join("report.md")).unwrap();
        write(&m, dir.path(), harness_core::outdir::Foreign::LeaveAlone).unwrap();
        write(&m, dir.path(), harness_core::outdir::Foreign::LeaveAlone).unwrap();
    }

    #[test]
    fn sparklines_scale_to_the_window() {
        assert_eq!(sparkline(&[Some(1.0), Some(2.0), None, Some(3.0)]), "▁▅·█");
        assert_eq!(sparkline(&[Some(5.0), Some(5.0)]), "▄▄");
    }
}
