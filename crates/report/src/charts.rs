//! Charts as inline SVG, written by hand: grouped bars (measured next to published per
//! language) and heat maps (language × language matrices). Both are a few rectangles and
//! labels; plotters would add a large dependency tree (font rendering, image backends) for
//! what is, here, string formatting. Every chart is a self-contained `<svg>` element with a
//! `data-chart` attribute, so the browser check can count them.

use std::fmt::Write;

/// One series of a bar chart.
#[derive(Debug, Clone)]
pub struct Series {
    pub label: String,
    pub values: Vec<Option<f64>>,
    /// Published series are drawn hatched-grey so measured colours stand out.
    pub published: bool,
}

/// Colours of measured series (colour-blind-safe Okabe-Ito order).
const PALETTE: &[&str] = &[
    "#0072B2", "#E69F00", "#009E73", "#D55E00", "#CC79A7", "#56B4E9", "#F0E442", "#000000",
];
const PUBLISHED: &str = "#9e9e9e";

fn esc(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

/// Grouped bars: one group per category, one bar per series. Negative values grow down
/// from the zero line.
pub fn bars(id: &str, title: &str, unit: &str, categories: &[String], series: &[Series]) -> String {
    let n_series = series.len().max(1);
    let bar_w = if n_series > 3 { 7.0 } else { 10.0 };
    let group_w = bar_w * n_series as f64 + 8.0;
    let (left, right, top, bottom) = (56.0, 16.0, 44.0, 70.0);
    let plot_h = 220.0;
    let width = (left + right + group_w * categories.len() as f64).max(360.0);
    // Legend: as many entries per line as fit (≈6.5 px per character at 11 px).
    let longest = series
        .iter()
        .map(|s| s.label.chars().count())
        .max()
        .unwrap_or(0);
    let slot = longest as f64 * 6.5 + 30.0;
    let per_line = ((width - left) / slot).floor().max(1.0) as usize;
    let legend_h = 18.0 * series.len().div_ceil(per_line) as f64;
    let height = top + plot_h + bottom + legend_h;
    let (lo, hi) = bar_range(series);
    let y = |v: f64| top + plot_h * (hi - v) / (hi - lo);
    let mut s = String::new();
    let _ = write!(
        s,
        r#"<svg xmlns="http://www.w3.org/2000/svg" data-chart="{id}" role="img" aria-label="{t}" width="{width:.0}" height="{height:.0}" viewBox="0 0 {width:.0} {height:.0}" font-family="sans-serif" font-size="11"><title>{t}</title>"#,
        t = esc(title)
    );
    let _ = write!(
        s,
        r#"<text x="{left}" y="18" font-size="13" font-weight="bold">{}</text>"#,
        esc(title)
    );
    let _ = write!(
        s,
        r#"<text x="4" y="{:.1}" transform="rotate(-90 12 {:.1})">{}</text>"#,
        top + plot_h / 2.0,
        top + plot_h / 2.0,
        esc(unit)
    );
    // Horizontal grid: 5 ticks.
    for i in 0..=4 {
        let v = lo + (hi - lo) * i as f64 / 4.0;
        let yy = y(v);
        let _ = write!(
            s,
            r##"<line x1="{left}" x2="{:.1}" y1="{yy:.1}" y2="{yy:.1}" stroke="#e0e0e0"/><text x="{:.1}" y="{:.1}" text-anchor="end">{}</text>"##,
            width - right,
            left - 4.0,
            yy + 4.0,
            tick(v)
        );
    }
    let zero = y(0.0);
    let _ = write!(
        s,
        r##"<line x1="{left}" x2="{:.1}" y1="{zero:.1}" y2="{zero:.1}" stroke="#555"/>"##,
        width - right
    );
    let colours = bar_colours(series);
    for (ci, cat) in categories.iter().enumerate() {
        let gx = left + group_w * ci as f64 + 4.0;
        for (si, se) in series.iter().enumerate() {
            if let Some(v) = se.values.get(ci).copied().flatten() {
                let x = gx + bar_w * si as f64;
                let (y0, h) = if v >= 0.0 {
                    (y(v), zero - y(v))
                } else {
                    (zero, y(v) - zero)
                };
                let _ = write!(
                    s,
                    r#"<rect x="{x:.1}" y="{y0:.1}" width="{:.1}" height="{:.1}" fill="{}"><title>{} — {}: {}</title></rect>"#,
                    bar_w - 1.0,
                    h.max(0.5),
                    colours[si],
                    esc(&se.label),
                    esc(cat),
                    tick(v)
                );
            }
        }
        let cx = gx + bar_w * n_series as f64 / 2.0;
        let ly = top + plot_h + 12.0;
        let _ = write!(
            s,
            r#"<text x="{cx:.1}" y="{ly:.1}" text-anchor="end" transform="rotate(-45 {cx:.1} {ly:.1})">{}</text>"#,
            esc(cat)
        );
    }
    let labels: Vec<&str> = series.iter().map(|se| se.label.as_str()).collect();
    legend(
        &mut s,
        &labels,
        &colours,
        (left, top + plot_h + bottom),
        slot,
        per_line,
    );
    s.push_str("</svg>");
    s
}
/// The value range of a bar chart: zero always in it, padded by 5 % on the sides with data.
fn bar_range(series: &[Series]) -> (f64, f64) {
    let vals = series
        .iter()
        .flat_map(|s| s.values.iter().flatten().copied());
    let (mut lo, mut hi) = vals.fold((0.0f64, 0.0f64), |(l, h), v| (l.min(v), h.max(v)));
    if hi - lo < 1e-9 {
        hi = lo + 1.0;
    }
    let pad = (hi - lo) * 0.05;
    if hi > 0.0 {
        hi += pad;
    }
    if lo < 0.0 {
        lo -= pad;
    }
    (lo, hi)
}

/// Each series' colour: published ones grey, measured ones the palette in turn.
fn bar_colours(series: &[Series]) -> Vec<&'static str> {
    let mut colour = 0;
    series
        .iter()
        .map(|se| {
            if se.published {
                PUBLISHED
            } else {
                colour += 1;
                PALETTE[(colour - 1) % PALETTE.len()]
            }
        })
        .collect()
}

/// A legend under a chart: a colour swatch and a label per series, `per_line` to a line.
fn legend(
    s: &mut String,
    labels: &[&str],
    colours: &[&str],
    at: (f64, f64),
    slot: f64,
    per_line: usize,
) {
    for (si, label) in labels.iter().enumerate() {
        let lx = at.0 + (si % per_line) as f64 * slot;
        let ly = at.1 + 18.0 * (si / per_line) as f64;
        let _ = write!(
            s,
            r#"<rect x="{lx:.1}" y="{:.1}" width="10" height="10" fill="{}"/><text x="{:.1}" y="{ly:.1}">{}</text>"#,
            ly - 9.0,
            colours[si],
            lx + 14.0,
            esc(label)
        );
    }
}

/// One series of a line chart: points `(x, y, ±error)` in x order.
#[derive(Debug, Clone)]
pub struct LineSeries {
    pub label: String,
    pub points: Vec<(f64, f64, Option<f64>)>,
}

/// Lines over a numeric x axis (an ablation axis, training steps), one per series, with
/// error bars where a point has one (± standard deviation over seeds). Ticks at the x values
/// of the points when there are few of them (the grid's values), else five even ticks.
pub fn lines(id: &str, title: &str, x_label: &str, y_label: &str, series: &[LineSeries]) -> String {
    let (left, right, top, bottom) = (60.0, 16.0, 44.0, 52.0);
    let (plot_w, plot_h) = (440.0, 220.0);
    let longest = series
        .iter()
        .map(|s| s.label.chars().count())
        .max()
        .unwrap_or(0);
    let width = left + plot_w + right;
    let slot = longest as f64 * 6.5 + 30.0;
    let per_line = ((width - left) / slot).floor().max(1.0) as usize;
    let legend_h = 18.0 * series.len().div_ceil(per_line) as f64;
    let height = top + plot_h + bottom + legend_h;
    let frame = LineFrame::of(series, left, top, plot_w, plot_h);
    let mut s = String::new();
    let _ = write!(
        s,
        r#"<svg xmlns="http://www.w3.org/2000/svg" data-chart="{id}" role="img" aria-label="{t}" width="{width:.0}" height="{height:.0}" viewBox="0 0 {width:.0} {height:.0}" font-family="sans-serif" font-size="11"><title>{t}</title><text x="{left}" y="18" font-size="13" font-weight="bold">{t}</text>"#,
        t = esc(title)
    );
    let _ = write!(
        s,
        r#"<text x="4" y="{m:.1}" transform="rotate(-90 12 {m:.1})">{}</text><text x="{:.1}" y="{:.1}" text-anchor="middle">{}</text>"#,
        esc(y_label),
        left + plot_w / 2.0,
        top + plot_h + 36.0,
        esc(x_label),
        m = top + plot_h / 2.0,
    );
    frame.axes(&mut s, series);
    for (si, se) in series.iter().enumerate() {
        frame.series(&mut s, se, PALETTE[si % PALETTE.len()]);
    }
    let labels: Vec<&str> = series.iter().map(|se| se.label.as_str()).collect();
    let colours: Vec<&str> = (0..series.len())
        .map(|i| PALETTE[i % PALETTE.len()])
        .collect();
    legend(
        &mut s,
        &labels,
        &colours,
        (left, top + plot_h + bottom),
        slot,
        per_line,
    );
    s.push_str("</svg>");
    s
}

/// A line chart's plot area and the data ranges it maps: x and y to pixels.
struct LineFrame {
    left: f64,
    top: f64,
    plot_w: f64,
    plot_h: f64,
    x0: f64,
    x1: f64,
    y0: f64,
    y1: f64,
}

impl LineFrame {
    /// The ranges of every point of `series` (error bars included; y padded by 8 %, an
    /// empty or flat range widened to one unit).
    fn of(series: &[LineSeries], left: f64, top: f64, plot_w: f64, plot_h: f64) -> Self {
        let pts = || series.iter().flat_map(|s| s.points.iter());
        let (mut x0, mut x1) = pts().fold((f64::INFINITY, f64::NEG_INFINITY), |(l, h), p| {
            (l.min(p.0), h.max(p.0))
        });
        let (mut y0, mut y1) = pts().fold((f64::INFINITY, f64::NEG_INFINITY), |(l, h), p| {
            let e = p.2.unwrap_or(0.0);
            (l.min(p.1 - e), h.max(p.1 + e))
        });
        if !x0.is_finite() {
            (x0, x1, y0, y1) = (0.0, 1.0, 0.0, 1.0);
        }
        if x1 - x0 < 1e-12 {
            x0 -= 0.5;
            x1 += 0.5;
        }
        if y1 - y0 < 1e-12 {
            y0 -= 0.5;
            y1 += 0.5;
        }
        let pad = (y1 - y0) * 0.08;
        (y0, y1) = (y0 - pad, y1 + pad);
        LineFrame {
            left,
            top,
            plot_w,
            plot_h,
            x0,
            x1,
            y0,
            y1,
        }
    }

    fn x(&self, v: f64) -> f64 {
        self.left + self.plot_w * (v - self.x0) / (self.x1 - self.x0)
    }

    fn y(&self, v: f64) -> f64 {
        self.top + self.plot_h * (self.y1 - v) / (self.y1 - self.y0)
    }

    /// The y grid with its ticks, the x ticks (the points' own x values, or five when there
    /// are more than eight) and the x axis.
    fn axes(&self, s: &mut String, series: &[LineSeries]) {
        let (left, top, plot_w, plot_h) = (self.left, self.top, self.plot_w, self.plot_h);
        let (x0, x1, y0, y1) = (self.x0, self.x1, self.y0, self.y1);
        for i in 0..=4 {
            let v = y0 + (y1 - y0) * i as f64 / 4.0;
            let yy = self.y(v);
            let _ = write!(
                s,
                r##"<line x1="{left}" x2="{:.1}" y1="{yy:.1}" y2="{yy:.1}" stroke="#e0e0e0"/><text x="{:.1}" y="{:.1}" text-anchor="end">{}</text>"##,
                left + plot_w,
                left - 4.0,
                yy + 4.0,
                tick(v)
            );
        }
        let mut xs: Vec<f64> = series
            .iter()
            .flat_map(|s| s.points.iter())
            .map(|p| p.0)
            .collect();
        xs.sort_by(f64::total_cmp);
        xs.dedup();
        if xs.len() > 8 {
            xs = (0..=4).map(|i| x0 + (x1 - x0) * i as f64 / 4.0).collect();
        }
        for v in xs {
            let _ = write!(
                s,
                r##"<line x1="{xx:.1}" x2="{xx:.1}" y1="{:.1}" y2="{:.1}" stroke="#555"/><text x="{xx:.1}" y="{:.1}" text-anchor="middle">{}</text>"##,
                top + plot_h,
                top + plot_h + 4.0,
                top + plot_h + 16.0,
                // An axis of integers (layers, steps) reads as integers.
                if v.fract() == 0.0 && v.abs() < 1e15 {
                    format!("{v:.0}")
                } else {
                    tick(v)
                },
                xx = self.x(v)
            );
        }
        let _ = write!(
            s,
            r##"<line x1="{left}" x2="{:.1}" y1="{b:.1}" y2="{b:.1}" stroke="#555"/>"##,
            left + plot_w,
            b = top + plot_h
        );
    }

    /// One series in colour `c`: its line, and where it has few points, a marker per
    /// point with its error bar and a tooltip.
    fn series(&self, s: &mut String, se: &LineSeries, c: &str) {
        let path: Vec<String> = se
            .points
            .iter()
            .map(|p| format!("{:.1},{:.1}", self.x(p.0), self.y(p.1)))
            .collect();
        if path.len() > 1 {
            let _ = write!(
                s,
                r#"<polyline fill="none" stroke="{c}" stroke-width="1.5" points="{}"/>"#,
                path.join(" ")
            );
        }
        // Markers only where there are few points (an ablation axis), not on a loss curve.
        if se.points.len() > 32 {
            return;
        }
        for p in &se.points {
            if let Some(e) = p.2.filter(|e| *e > 0.0) {
                let _ = write!(
                    s,
                    r#"<line x1="{xx:.1}" x2="{xx:.1}" y1="{:.1}" y2="{:.1}" stroke="{c}"/>"#,
                    self.y(p.1 - e),
                    self.y(p.1 + e),
                    xx = self.x(p.0)
                );
            }
            let err = p.2.map(|e| format!(" ± {}", tick(e))).unwrap_or_default();
            let _ = write!(
                s,
                r#"<circle cx="{:.1}" cy="{:.1}" r="3" fill="{c}"><title>{} — {}: {}{err}</title></circle>"#,
                self.x(p.0),
                self.y(p.1),
                esc(&se.label),
                tick(p.0),
                tick(p.1)
            );
        }
    }
}

/// A heat map of a matrix; darker is better (`lower_is_better` flips the scale). Empty
/// cells are hatched grey.
#[allow(clippy::too_many_arguments)]
pub fn heatmap(
    id: &str,
    title: &str,
    corner: &str,
    rows: &[String],
    cols: &[String],
    values: &[Vec<Option<f64>>],
    lower_is_better: bool,
    decimals: usize,
) -> String {
    let cell = 46.0;
    let (left, top) = (70.0, 60.0);
    let width = left + cell * cols.len() as f64 + 16.0;
    let height = top + cell * rows.len() as f64 + 16.0;
    let all: Vec<f64> = values.iter().flatten().flatten().copied().collect();
    let lo = all.iter().copied().fold(f64::INFINITY, f64::min);
    let hi = all.iter().copied().fold(f64::NEG_INFINITY, f64::max);
    let span = if hi - lo > 1e-12 { hi - lo } else { 1.0 };
    let mut s = String::new();
    let _ = write!(
        s,
        r##"<svg xmlns="http://www.w3.org/2000/svg" data-chart="{id}" role="img" aria-label="{t}" width="{width:.0}" height="{height:.0}" viewBox="0 0 {width:.0} {height:.0}" font-family="sans-serif" font-size="11"><title>{t}</title><defs><pattern id="{id}-hatch" width="6" height="6" patternUnits="userSpaceOnUse" patternTransform="rotate(45)"><line x1="0" y1="0" x2="0" y2="6" stroke="#bbb" stroke-width="2"/></pattern></defs>"##,
        t = esc(title)
    );
    let _ = write!(
        s,
        r#"<text x="4" y="18" font-size="13" font-weight="bold">{}</text>"#,
        esc(title)
    );
    let _ = write!(
        s,
        r##"<text x="4" y="{:.1}" fill="#555">{}</text>"##,
        top - 26.0,
        esc(corner)
    );
    for (ci, c) in cols.iter().enumerate() {
        let _ = write!(
            s,
            r#"<text x="{:.1}" y="{:.1}" text-anchor="middle">{}</text>"#,
            left + cell * (ci as f64 + 0.5),
            top - 8.0,
            esc(c)
        );
    }
    for (ri, r) in rows.iter().enumerate() {
        let yy = top + cell * ri as f64;
        let _ = write!(
            s,
            r#"<text x="{:.1}" y="{:.1}" text-anchor="end">{}</text>"#,
            left - 6.0,
            yy + cell / 2.0 + 4.0,
            esc(r)
        );
        for (ci, col) in cols.iter().enumerate() {
            let xx = left + cell * ci as f64;
            match values
                .get(ri)
                .and_then(|row| row.get(ci))
                .copied()
                .flatten()
            {
                Some(v) => {
                    let mut t = (v - lo) / span;
                    if lower_is_better {
                        t = 1.0 - t;
                    }
                    let (fill, ink) = shade(t);
                    let _ = write!(
                        s,
                        r#"<rect x="{xx:.1}" y="{yy:.1}" width="{cell}" height="{cell}" fill="{fill}" stroke="white"><title>{} → {}: {}</title></rect><text x="{:.1}" y="{:.1}" text-anchor="middle" fill="{ink}">{:.*}</text>"#,
                        esc(r),
                        esc(col),
                        tick(v),
                        xx + cell / 2.0,
                        yy + cell / 2.0 + 4.0,
                        decimals,
                        v
                    );
                }
                None => {
                    let _ = write!(
                        s,
                        r#"<rect x="{xx:.1}" y="{yy:.1}" width="{cell}" height="{cell}" fill="url(#{id}-hatch)" stroke="white"/>"#
                    );
                }
            }
        }
    }
    s.push_str("</svg>");
    s
}

/// Blue sequential scale from light (t=0) to dark (t=1), with the text colour that reads
/// on it.
fn shade(t: f64) -> (String, &'static str) {
    let t = t.clamp(0.0, 1.0);
    let (a, b) = ((0xf7, 0xfb, 0xff), (0x08, 0x30, 0x6b));
    let mix = |x: i32, y: i32| (x as f64 + (y - x) as f64 * t).round() as i32;
    (
        format!(
            "#{:02x}{:02x}{:02x}",
            mix(a.0, b.0),
            mix(a.1, b.1),
            mix(a.2, b.2)
        ),
        if t > 0.55 { "white" } else { "black" },
    )
}

/// Short tick label.
fn tick(v: f64) -> String {
    let a = v.abs();
    if a >= 100.0 || a == 0.0 {
        format!("{v:.0}")
    } else if a >= 10.0 {
        format!("{v:.1}")
    } else if a >= 1.0 {
        format!("{v:.2}")
    } else {
        format!("{v:.3}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_draw_a_polyline_per_series_with_error_bars() {
        let svg = lines(
            "l-0",
            "depth <ablation>",
            "layers",
            "error",
            &[LineSeries {
                label: "tatoeba".into(),
                points: vec![
                    (1.0, 50.0, Some(2.0)),
                    (3.0, 45.0, None),
                    (5.0, 47.0, Some(0.0)),
                ],
            }],
        );
        assert!(svg.contains(r#"data-chart="l-0""#));
        assert_eq!(svg.matches("<polyline").count(), 1);
        assert_eq!(svg.matches("<circle").count(), 3);
        // One error bar: the point with a positive deviation.
        assert_eq!(svg.matches(r##"stroke="#0072B2"/>"##).count(), 1);
        assert!(svg.contains("depth &lt;ablation&gt;") && !svg.contains("<ablation>"));
    }

    #[test]
    fn bars_draw_one_rect_per_value_and_escape_labels() {
        let svg = bars(
            "t-0",
            "A <b> & c",
            "%",
            &["en".into(), "fr".into()],
            &[
                Series {
                    label: "paper".into(),
                    values: vec![Some(70.0), None],
                    published: true,
                },
                Series {
                    label: "ours".into(),
                    values: vec![Some(-5.0), Some(60.0)],
                    published: false,
                },
            ],
        );
        assert!(svg.starts_with("<svg") && svg.ends_with("</svg>"));
        assert_eq!(
            svg.matches("<rect").count() - 2,
            3,
            "3 bars + 2 legend boxes"
        );
        assert!(svg.contains("A &lt;b&gt; &amp; c"));
        assert!(svg.contains(r#"data-chart="t-0""#));
    }

    #[test]
    fn heatmap_hatches_missing_cells_and_darkens_better_ones() {
        let vals = vec![vec![Some(1.0), None], vec![Some(3.0), Some(2.0)]];
        let svg = heatmap(
            "h",
            "m",
            "r \\ c",
            &["a".into(), "b".into()],
            &["x".into(), "y".into()],
            &vals,
            false,
            1,
        );
        assert_eq!(svg.matches("url(#h-hatch)").count(), 1);
        // Highest value (3.0) gets the darkest fill when higher is better.
        assert!(svg.contains(r##"fill="#08306b""##));
        let low = heatmap(
            "h",
            "m",
            "r \\ c",
            &["a".into(), "b".into()],
            &["x".into(), "y".into()],
            &vals,
            true,
            1,
        );
        assert!(
            low.contains(r##"fill="#08306b" stroke="white"><title>a → x"##),
            "1.0 is best when lower is better"
        );
    }
}
