//! Generated tables: rows of runs no spec names in advance (a sweep's grid points, or any
//! run directories given to `harness report --metric`), columns of benchmark result fields.
//! A row holds one or more replicates (seeds); a cell is their mean ± sample standard
//! deviation and n, with Δ against the baseline row in its own column. Missing and failed
//! replicates are counted and footnoted, never averaged in.
//!
//! Also: training curves, the loss over steps of `train/metrics.jsonl` of every run,
//! overlaid in one chart.

use super::charts::{self, LineSeries};
use super::runs::resolve;
use super::spec::Better;
use super::table::{
    fmt_delta, fmt_num, Block, Cell, CellRecord, Chart, Footnote, RenderedTable, Row,
};
use std::path::{Path, PathBuf};

/// One column: a benchmark result field.
#[derive(Debug, Clone)]
pub struct Metric {
    pub bench: String,
    /// JSON path in the result file (`scores.summary.average`, `main_score`).
    pub field: String,
    pub label: String,
    pub better: Better,
    /// Shown value = raw × scale.
    pub scale: f64,
    pub decimals: usize,
}

impl Metric {
    /// Whether the metric names one of the benchmarks, given as (name, protocol), and a
    /// number its protocol writes ([`harness_bench::protocols::check_field`]).
    pub fn check(&self, benchmarks: &[(&str, &str)]) -> Result<(), String> {
        match benchmarks.iter().find(|b| b.0 == self.bench) {
            Some((_, protocol)) => harness_bench::protocols::check_field(protocol, &self.field),
            None => {
                let names: Vec<&str> = benchmarks.iter().map(|b| b.0).collect();
                Err(format!(
                    "unknown benchmark `{}`{}",
                    self.bench,
                    harness_core::suggest::did_you_mean(&self.bench, &names)
                ))
            }
        }
    }

    /// Parses `BENCH[:FIELD[:higher|lower]]` (`tatoeba:scores.summary.average:lower`);
    /// the field defaults to the headline score.
    pub fn parse(s: &str) -> Result<Metric, String> {
        let mut parts = s.split(':');
        let bench = parts.next().unwrap_or_default().trim().to_string();
        if bench.is_empty() {
            return Err(format!("`{s}`: expected BENCH[:FIELD[:higher|lower]], e.g. `tatoeba:scores.summary.average:lower`"));
        }
        let field = parts
            .next()
            .filter(|f| !f.is_empty())
            .unwrap_or("main_score")
            .to_string();
        let better = match parts.next() {
            None | Some("higher") => Better::Higher,
            Some("lower") => Better::Lower,
            Some(o) => {
                return Err(format!(
                    "`{s}`: `{o}` is not a direction. Fix: `higher` or `lower`"
                ))
            }
        };
        if parts.next().is_some() {
            return Err(format!(
                "`{s}`: too many `:` parts. Fix: BENCH[:FIELD[:higher|lower]]"
            ));
        }
        let label = if field == "main_score" {
            bench.clone()
        } else {
            format!("{bench} {field}")
        };
        Ok(Metric {
            bench,
            field,
            label,
            better,
            scale: 1.0,
            decimals: 2,
        })
    }
}

/// One replicate of a row: a run's results directory, or why it has none.
#[derive(Debug, Clone)]
pub struct Replicate {
    /// `seed=2`.
    pub label: String,
    /// `<run dir>/results` (absent files are "not run yet").
    pub results_dir: PathBuf,
    /// Set when the run is known to have failed before writing a result (its error).
    pub failed: Option<String>,
}

/// One row.
#[derive(Debug, Clone)]
pub struct AblationRow {
    pub label: String,
    pub is_baseline: bool,
    pub replicates: Vec<Replicate>,
}

/// n, mean and the sample standard deviation (n − 1; none for a single value).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Stats {
    pub n: usize,
    pub mean: f64,
    pub std: Option<f64>,
}

impl Stats {
    /// `n=N std=S` (`-` for no deviation), as a cell record's note.
    fn note(&self) -> String {
        format!(
            "n={} std={}",
            self.n,
            self.std.map_or("-".into(), |v| v.to_string())
        )
    }
}

/// Stats of `values`; `None` when empty.
pub fn stats(values: &[f64]) -> Option<Stats> {
    if values.is_empty() {
        return None;
    }
    let n = values.len();
    let mean = values.iter().sum::<f64>() / n as f64;
    let std = (n > 1)
        .then(|| (values.iter().map(|v| (v - mean).powi(2)).sum::<f64>() / (n - 1) as f64).sqrt());
    Some(Stats { n, mean, std })
}

/// What one replicate gives for one metric.
enum One {
    Value(f64, PathBuf),
    NotRun(String),
    Failed(String),
    Na(String),
}

fn measure(r: &Replicate, m: &Metric) -> One {
    let path = r.results_dir.join(format!("{}.json", m.bench));
    let text = match std::fs::read_to_string(&path) {
        Ok(t) => t,
        Err(_) => {
            return match &r.failed {
                Some(e) => One::Failed(e.clone()),
                None => One::NotRun(format!("no {}", path.display())),
            }
        }
    };
    let json: serde_json::Value = match serde_json::from_str(&text) {
        Ok(j) => j,
        Err(e) => return One::Failed(format!("{} is not a result file: {e}", path.display())),
    };
    if let Some(e) = json.get("error").and_then(|e| e.as_str()) {
        return One::Failed(format!("{}: {e}", m.bench));
    }
    match resolve(&json, &m.field) {
        Some(v) => One::Value(v * m.scale, path),
        None => One::Na(format!("`{}` is not in {}", m.field, path.display())),
    }
}

#[derive(Default)]
struct Notes(Vec<String>);

impl Notes {
    fn mark(&mut self, text: String) -> String {
        let i = self.0.iter().position(|t| *t == text).unwrap_or_else(|| {
            self.0.push(text);
            self.0.len() - 1
        });
        ((b'a' + (i % 26) as u8) as char)
            .to_string()
            .repeat(i / 26 + 1)
    }
}

/// Builds a generated table: per row and metric the mean ± std over its replicates, and a Δ
/// column per metric against the baseline row (the first row marked `is_baseline`).
pub fn build(
    name: &str,
    title: &str,
    notes: Vec<String>,
    rows: &[AblationRow],
    metrics: &[Metric],
) -> RenderedTable {
    let mut marks = Notes::default();
    let mut records = Vec::new();
    let mut tally = Tally::default();
    // Stats per row and metric first: Δ needs the baseline's.
    let cells = replicate_stats(rows, metrics);
    let base = rows.iter().position(|r| r.is_baseline);
    let mut out_rows = Vec::new();
    for (ri, row) in rows.iter().enumerate() {
        let mut out = Vec::new();
        for (mi, m) in metrics.iter().enumerate() {
            let (st, ones) = &cells[ri][mi];
            tally.measured += 1;
            let reference = base.and_then(|b| cells[b][mi].0).map(|s| s.mean);
            let gaps = gaps(row, ones);
            records.extend(replicate_records(name, row, m, ones));
            let (cell, delta_cell, status, value, delta) = summary_cells(
                st.as_ref(),
                ones,
                m,
                &gaps,
                reference.filter(|_| Some(ri) != base),
                Some(ri) == base,
                &mut marks,
                &mut tally,
            );
            records.push(CellRecord {
                table: name.into(),
                kind: "measured",
                row: row.label.clone(),
                row_label: row.label.clone(),
                variant: "mean".into(),
                matrix_row: String::new(),
                column: m.label.clone(),
                value,
                display: cell.text.clone(),
                reference,
                delta,
                status,
                benchmark: m.bench.clone(),
                field: m.field.clone(),
                scale: Some(m.scale),
                offset: None,
                result_file: String::new(),
                baseline_mode: if base.is_some() {
                    "difference".into()
                } else {
                    String::new()
                },
                baseline_file: String::new(),
                note: st.map_or(String::new(), |s| s.note()),
            });
            out.push(cell);
            out.push(delta_cell);
        }
        out_rows.push(Row {
            label: row.label.clone(),
            kind: "measured",
            cells: out,
        });
    }
    let header = header(metrics);
    RenderedTable {
        name: name.into(),
        title: title.into(),
        paper: "measured here".into(),
        table: "generated table".into(),
        source: "result files of the runs listed under Provenance".into(),
        metric: "mean ± sample standard deviation (n replicates); Δ: difference of means to the baseline row".into(),
        better: String::new(),
        notes,
        blocks: vec![Block {
            caption: None,
            message: None,
            corner: "configuration".into(),
            header,
            rows: out_rows,
        }],
        footnotes: footnotes(marks),
        legend: Vec::new(),
        charts: Vec::new(),
        filled: tally.filled,
        measured: tally.measured,
        na: tally.na,
        not_run: tally.not_run,
        failed: tally.failed,
        records,
    }
}

/// What each replicate without a value says: not run yet, failed, or not applicable.
fn gaps(row: &AblationRow, ones: &[One]) -> Vec<String> {
    ones.iter()
        .zip(&row.replicates)
        .filter_map(|(o, r)| match o {
            One::Value(..) => None,
            One::NotRun(why) => Some(format!("{} not run yet ({why})", r.label)),
            One::Failed(e) => Some(format!("{} failed: {e}", r.label)),
            One::Na(e) => Some(format!("{}: {e}", r.label)),
        })
        .collect()
}

/// The table's footnotes, marked a, b, …, z, aa, bb, ….
fn footnotes(marks: Notes) -> Vec<Footnote> {
    marks
        .0
        .into_iter()
        .enumerate()
        .map(|(i, text)| Footnote {
            mark: ((b'a' + (i % 26) as u8) as char)
                .to_string()
                .repeat(i / 26 + 1),
            text,
        })
        .collect()
}

/// How many measured cells a table has, and how each ended.
#[derive(Default)]
struct Tally {
    filled: usize,
    measured: usize,
    na: usize,
    not_run: usize,
    failed: usize,
}

/// Per row and metric: the statistics over the replicates' values (Δ needs the baseline's
/// first) and each replicate's outcome.
fn replicate_stats(
    rows: &[AblationRow],
    metrics: &[Metric],
) -> Vec<Vec<(Option<Stats>, Vec<One>)>> {
    let mut cells: Vec<Vec<(Option<Stats>, Vec<One>)>> = Vec::new();
    for row in rows {
        let mut per = Vec::new();
        for m in metrics {
            let ones: Vec<One> = row.replicates.iter().map(|r| measure(r, m)).collect();
            let vals: Vec<f64> = ones
                .iter()
                .filter_map(|o| match o {
                    One::Value(v, _) => Some(*v),
                    _ => None,
                })
                .collect();
            per.push((stats(&vals), ones));
        }
        cells.push(per);
    }
    cells
}

/// One record per replicate that has a value (the CSV lists them beside the mean).
fn replicate_records(name: &str, row: &AblationRow, m: &Metric, ones: &[One]) -> Vec<CellRecord> {
    let mut records = Vec::new();
    for (o, r) in ones.iter().zip(&row.replicates) {
        if let One::Value(v, path) = o {
            records.push(CellRecord {
                table: name.into(),
                kind: "measured",
                row: row.label.clone(),
                row_label: row.label.clone(),
                variant: r.label.clone(),
                matrix_row: String::new(),
                column: m.label.clone(),
                value: Some(*v),
                display: fmt_num(*v, m.decimals),
                reference: None,
                delta: None,
                status: "ok".into(),
                benchmark: m.bench.clone(),
                field: m.field.clone(),
                scale: Some(m.scale),
                offset: None,
                result_file: path.display().to_string(),
                baseline_mode: String::new(),
                baseline_file: String::new(),
                note: "one replicate".into(),
            });
        }
    }
    records
}

/// The mean ± std cell of one row × metric and its Δ cell (or why there is no value), with
/// the record's status, value and delta; counted in `tally`.
#[allow(clippy::too_many_arguments)]
fn summary_cells(
    st: Option<&Stats>,
    ones: &[One],
    m: &Metric,
    gaps: &[String],
    reference: Option<f64>,
    is_base: bool,
    marks: &mut Notes,
    tally: &mut Tally,
) -> (Cell, Cell, String, Option<f64>, Option<f64>) {
    let total = ones.len();
    match st {
        Some(s) => {
            tally.filled += 1;
            let mut text = fmt_num(s.mean, m.decimals);
            if let Some(sd) = s.std {
                text.push_str(&format!(" ± {}", fmt_num(sd, m.decimals)));
            }
            if s.n < total {
                text.push_str(&format!(
                    " (n={} of {total}) [{}]",
                    s.n,
                    marks.mark(gaps.join("; "))
                ));
            } else {
                text.push_str(&format!(" (n={})", s.n));
            }
            let delta = reference.map(|r| s.mean - r);
            let trend = match (delta, m.better) {
                (Some(d), Better::Higher) if d > 0.0 => "good",
                (Some(d), Better::Higher) if d < 0.0 => "bad",
                (Some(d), Better::Lower) if d < 0.0 => "good",
                (Some(d), Better::Lower) if d > 0.0 => "bad",
                _ => "",
            };
            let dcell = Cell {
                text: match (delta, is_base) {
                    (_, true) => "baseline".into(),
                    (Some(d), _) => fmt_delta(d, m.decimals),
                    (None, _) => "—".into(),
                },
                class: "measured",
                trend,
                title: "difference of the means to the baseline row".into(),
            };
            (
                Cell {
                    text,
                    class: "measured",
                    trend: "",
                    title: format!(
                        "mean ± sample standard deviation of {} over {} replicate(s)",
                        m.field, s.n
                    ),
                },
                dcell,
                "ok".to_string(),
                Some(s.mean),
                delta,
            )
        }
        None => {
            let (word, class) = if ones.iter().any(|o| matches!(o, One::Failed(_))) {
                tally.failed += 1;
                ("failed", "failed")
            } else if ones.iter().any(|o| matches!(o, One::NotRun(_))) {
                tally.not_run += 1;
                ("not run yet", "notrun")
            } else {
                tally.na += 1;
                ("n/a", "na")
            };
            let reason = gaps.join("; ");
            let mark = marks.mark(reason.clone());
            (
                Cell {
                    text: format!("{word} [{mark}]"),
                    class,
                    trend: "",
                    title: reason,
                },
                Cell {
                    text: "—".into(),
                    class: "empty",
                    trend: "",
                    title: String::new(),
                },
                word.to_string(),
                None,
                None,
            )
        }
    }
}

/// Two columns per metric: its mean (with the better direction) and its Δ.
fn header(metrics: &[Metric]) -> Vec<String> {
    let mut header = Vec::new();
    for m in metrics {
        let arrow = match m.better {
            Better::Higher => " ↑",
            Better::Lower => " ↓",
            Better::None => "",
        };
        header.push(format!("{}{arrow}", m.label));
        header.push(format!("Δ {}", m.label));
    }
    header
}

/// The means of a table's metric column per row (`None` where a row has no value), for
/// charts: `(row label, mean, std)`.
pub fn column_stats(rows: &[AblationRow], metric: &Metric) -> Vec<(String, Option<Stats>)> {
    rows.iter()
        .map(|r| {
            let vals: Vec<f64> = r
                .replicates
                .iter()
                .filter_map(|rep| match measure(rep, metric) {
                    One::Value(v, _) => Some(v),
                    _ => None,
                })
                .collect();
            (r.label.clone(), stats(&vals))
        })
        .collect()
}

/// Loss over steps of `train/metrics.jsonl` (all tasks' lines, averaged in at most 200
/// buckets of steps so a long run stays a readable line).
pub fn loss_curve(run_dir: &Path) -> Option<Vec<(f64, f64)>> {
    let text = std::fs::read_to_string(run_dir.join("train").join("metrics.jsonl")).ok()?;
    let mut pts: Vec<(f64, f64)> = text
        .lines()
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .filter_map(|j| Some((j.get("step")?.as_f64()?, j.get("loss")?.as_f64()?)))
        .filter(|(_, l)| l.is_finite())
        .collect();
    if pts.is_empty() {
        return None;
    }
    pts.sort_by(|a, b| a.0.total_cmp(&b.0));
    let last = pts.last().map_or(1.0, |p| p.0).max(1.0);
    let width = (last / 200.0).ceil().max(1.0);
    let mut out: Vec<(f64, f64)> = Vec::new();
    let mut bucket = (f64::NAN, 0.0, 0usize, 0.0);
    for (s, l) in pts {
        let b = (s / width).floor();
        if b != bucket.0 && bucket.2 > 0 {
            out.push((bucket.3 / bucket.2 as f64, bucket.1 / bucket.2 as f64));
            bucket = (b, 0.0, 0, 0.0);
        }
        bucket.0 = b;
        bucket.1 += l;
        bucket.2 += 1;
        bucket.3 += s;
    }
    if bucket.2 > 0 {
        out.push((bucket.3 / bucket.2 as f64, bucket.1 / bucket.2 as f64));
    }
    Some(out)
}

/// The training curves of `runs` (label, run directory) overlaid; `None` when none trained.
pub fn curves_chart(id: &str, title: &str, runs: &[(String, PathBuf)]) -> Option<Chart> {
    let series: Vec<LineSeries> = runs
        .iter()
        .filter_map(|(label, dir)| {
            loss_curve(dir).map(|pts| LineSeries {
                label: label.clone(),
                points: pts.into_iter().map(|(x, y)| (x, y, None)).collect(),
            })
        })
        .collect();
    if series.is_empty() {
        return None;
    }
    Some(Chart {
        id: id.into(),
        title: title.into(),
        svg: charts::lines(id, title, "step", "training loss", &series),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stats_match_hand_computed_values() {
        // mean 2, sample variance ((1-2)² + 0 + (3-2)²) / 2 = 1.
        let s = stats(&[1.0, 2.0, 3.0]).unwrap();
        assert_eq!((s.n, s.mean, s.std), (3, 2.0, Some(1.0)));
        // 10.5 and 12.0: mean 11.25, std |12-10.5| / sqrt(2) = 1.0606601717798212.
        let s = stats(&[10.5, 12.0]).unwrap();
        assert_eq!(s.mean, 11.25);
        assert!((s.std.unwrap() - 1.060_660_171_779_821_2).abs() < 1e-12);
        let s = stats(&[7.0]).unwrap();
        assert_eq!((s.n, s.std), (1, None));
        assert!(stats(&[]).is_none());
    }

    fn result(dir: &Path, bench: &str, json: &str) {
        std::fs::create_dir_all(dir).unwrap();
        std::fs::write(dir.join(format!("{bench}.json")), json).unwrap();
    }

    #[test]
    fn table_aggregates_seeds_marks_gaps_and_takes_deltas() {
        let tmp = tempfile::tempdir().unwrap();
        let r = |name: &str| tmp.path().join(name);
        result(&r("a1"), "b", r#"{"scores": {"x": 10.0}}"#);
        result(&r("a2"), "b", r#"{"scores": {"x": 12.0}}"#);
        result(&r("c1"), "b", r#"{"scores": {"x": 7.0}}"#);
        result(&r("c2"), "b", r#"{"error": "boom", "scores": null}"#);
        let rep = |l: &str, d: &str| Replicate {
            label: l.into(),
            results_dir: r(d),
            failed: None,
        };
        let rows = vec![
            AblationRow {
                label: "base".into(),
                is_baseline: true,
                replicates: vec![rep("seed=1", "a1"), rep("seed=2", "a2")],
            },
            AblationRow {
                label: "c".into(),
                is_baseline: false,
                replicates: vec![rep("seed=1", "c1"), rep("seed=2", "c2")],
            },
            AblationRow {
                label: "d".into(),
                is_baseline: false,
                replicates: vec![rep("seed=1", "missing")],
            },
        ];
        let m = Metric {
            bench: "b".into(),
            field: "scores.x".into(),
            label: "x".into(),
            better: Better::Lower,
            scale: 1.0,
            decimals: 2,
        };
        let t = build("t", "T", vec![], &rows, &[m]);
        let cells: Vec<Vec<&str>> = t.blocks[0]
            .rows
            .iter()
            .map(|r| r.cells.iter().map(|c| c.text.as_str()).collect())
            .collect();
        assert_eq!(cells[0], ["11.00 ± 1.41 (n=2)", "baseline"]);
        assert_eq!(cells[1], ["7.00 (n=1 of 2) [a]", "-4.00"]);
        assert_eq!(cells[2], ["not run yet [b]", "—"]);
        assert_eq!(
            t.blocks[0].rows[1].cells[1].trend, "good",
            "lower is better"
        );
        assert!(
            t.footnotes[0].text.contains("seed=2 failed: b: boom"),
            "{:?}",
            t.footnotes
        );
        assert_eq!((t.filled, t.measured, t.not_run, t.failed), (2, 3, 1, 0));
        let mean = t
            .records
            .iter()
            .find(|r| r.row == "base" && r.variant == "mean")
            .unwrap();
        assert_eq!(mean.value, Some(11.0));
        assert_eq!(t.blocks[0].header, ["x ↓", "Δ x"]);
    }

    #[test]
    fn metric_specs_parse_with_defaults_and_errors() {
        let m = Metric::parse("tatoeba:scores.summary.average:lower").unwrap();
        assert_eq!(
            (m.bench.as_str(), m.field.as_str(), m.better),
            ("tatoeba", "scores.summary.average", Better::Lower)
        );
        let m = Metric::parse("stsb-test").unwrap();
        assert_eq!((m.field.as_str(), m.better), ("main_score", Better::Higher));
        assert!(Metric::parse("x:y:up").unwrap_err().contains("higher"));
        let known = [("tatoeba", "tatoeba-search")];
        let ok = Metric::parse("tatoeba:scores.summary.average:lower").unwrap();
        assert_eq!(ok.check(&known), Ok(()));
        let typo = Metric::parse("tatoeba:scores.summary.averag").unwrap();
        let e = typo.check(&known).unwrap_err();
        assert!(
            e.contains("`scores.summary.averag`") && e.contains("average"),
            "{e}"
        );
        let e = Metric::parse("tatoeb").unwrap().check(&known).unwrap_err();
        assert!(e.contains("unknown benchmark `tatoeb`"), "{e}");
    }

    #[test]
    fn loss_curves_average_buckets_of_steps() {
        let tmp = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(tmp.path().join("train")).unwrap();
        let lines: String = (1..=400)
            .map(|s| {
                format!(
                    "{{\"step\":{s},\"task\":\"a\",\"loss\":{}}}\n",
                    1000.0 / s as f64
                )
            })
            .collect();
        std::fs::write(tmp.path().join("train/metrics.jsonl"), lines).unwrap();
        let c = loss_curve(tmp.path()).unwrap();
        assert_eq!(c.len(), 201, "400 steps in buckets of 2 steps");
        assert!(c.windows(2).all(|w| w[1].1 < w[0].1), "the loss falls");
        let chart = curves_chart("c", "curves", &[("p".into(), tmp.path().to_path_buf())]).unwrap();
        assert!(chart.svg.contains("<polyline"));
    }
}
