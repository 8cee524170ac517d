//! Renderers over the assembled report: Markdown and one self-contained HTML file through
//! minijinja templates (`reports/templates/`, compiled into the binary), the terminal
//! through tabled, and CSV (one long file of every cell with its source, and one wide file
//! per table as displayed). Charts are written as SVG files for the Markdown and inlined in
//! the HTML.

use super::error::ReportError;
use super::provenance::Provenance;
use super::table::{Block, CellRecord, RenderedTable};
use crate::fsutil::write_atomic;
use include_dir::{include_dir, Dir};
use serde::Serialize;
use std::path::{Path, PathBuf};

static TEMPLATES: Dir<'_> = include_dir!("$CARGO_MANIFEST_DIR/reports/templates");

/// Everything a template sees.
#[derive(Debug, Clone, Serialize)]
pub struct Report {
    pub provenance: Provenance,
    pub tables: Vec<RenderedTable>,
    pub warnings: Vec<String>,
}

fn environment() -> Result<minijinja::Environment<'static>, ReportError> {
    let mut env = minijinja::Environment::new();
    env.set_trim_blocks(true);
    env.set_lstrip_blocks(true);
    // Markdown table cells: a `|` would end the cell.
    env.add_filter("md", |s: String| s.replace('|', "\\|").replace('\n', " "));
    for f in TEMPLATES.files() {
        let name = f.path().to_string_lossy().into_owned();
        let text = f.contents_utf8().ok_or_else(|| ReportError::Template {
            template: name.clone(),
            detail: "not UTF-8".into(),
        })?;
        env.add_template_owned(name.clone(), text.to_string())
            .map_err(|e| ReportError::Template {
                template: name,
                detail: e.to_string(),
            })?;
    }
    Ok(env)
}

fn render_template(name: &str, report: &Report) -> Result<String, ReportError> {
    let env = environment()?;
    let t = env.get_template(name).map_err(|e| ReportError::Template {
        template: name.into(),
        detail: e.to_string(),
    })?;
    t.render(minijinja::Value::from_serialize(report))
        .map_err(|e| ReportError::Template {
            template: name.into(),
            detail: format!("{e:#}"),
        })
}

/// `report.md`.
pub fn markdown(report: &Report) -> Result<String, ReportError> {
    render_template("report.md.j2", report)
}

/// `report.html`: self-contained (inline CSS, inline SVG, no scripts or external files).
pub fn html(report: &Report) -> Result<String, ReportError> {
    render_template("report.html.j2", report)
}

/// Every table as terminal text (tabled), with its notes and footnotes.
pub fn terminal(report: &Report) -> String {
    use tabled::builder::Builder;
    use tabled::settings::Style;
    let mut out = String::new();
    for t in &report.tables {
        out.push_str(&format!(
            "\n{} — {} ({}, {})\n",
            t.name, t.title, t.paper, t.table
        ));
        out.push_str(&format!(
            "{}{}\n",
            t.metric,
            if t.better.is_empty() {
                String::new()
            } else {
                format!(", {}", t.better)
            }
        ));
        for b in &t.blocks {
            if let Some(c) = &b.caption {
                out.push_str(&format!("{c}\n"));
            }
            if let Some(m) = &b.message {
                out.push_str(&format!("  {m}\n"));
                continue;
            }
            let mut builder = Builder::default();
            builder.push_record(std::iter::once(b.corner.clone()).chain(b.header.iter().cloned()));
            for r in &b.rows {
                builder.push_record(
                    std::iter::once(r.label.clone()).chain(r.cells.iter().map(|c| c.text.clone())),
                );
            }
            let mut table = builder.build();
            table.with(Style::sharp());
            out.push_str(&table.to_string());
            out.push('\n');
        }
        for l in &t.legend {
            out.push_str(&format!("  {l}\n"));
        }
        for f in &t.footnotes {
            out.push_str(&format!("  [{}] {}\n", f.mark, f.text));
        }
    }
    out
}

/// Every cell in long form: the file the consistency test reads.
pub fn cells_csv(report: &Report) -> Result<String, ReportError> {
    let mut w = csv::Writer::from_writer(Vec::new());
    for t in &report.tables {
        for r in &t.records {
            w.serialize(r)
                .map_err(|e| ReportError::Setup(format!("cells.csv: {e}")))?;
        }
    }
    let bytes = w
        .into_inner()
        .map_err(|e| ReportError::Setup(format!("cells.csv: {e}")))?;
    String::from_utf8(bytes).map_err(|e| ReportError::Setup(format!("cells.csv: {e}")))
}

/// One table as displayed, one CSV row per displayed row; matrix blocks are separated by
/// their caption.
pub fn table_csv(t: &RenderedTable) -> Result<String, ReportError> {
    let mut w = csv::WriterBuilder::new()
        .flexible(true)
        .from_writer(Vec::new());
    let mut put = |rec: Vec<String>| {
        w.write_record(rec)
            .map_err(|e| ReportError::Setup(format!("{}.csv: {e}", t.name)))
    };
    for b in &t.blocks {
        write_block(b, &mut put)?;
    }
    let bytes = w
        .into_inner()
        .map_err(|e| ReportError::Setup(format!("{}.csv: {e}", t.name)))?;
    String::from_utf8(bytes).map_err(|e| ReportError::Setup(format!("{}.csv: {e}", t.name)))
}

fn write_block(
    b: &Block,
    put: &mut impl FnMut(Vec<String>) -> Result<(), ReportError>,
) -> Result<(), ReportError> {
    if let Some(c) = &b.caption {
        put(vec![c.clone()])?;
    }
    if let Some(m) = &b.message {
        put(vec![m.clone()])?;
        return Ok(());
    }
    put(std::iter::once(b.corner.clone())
        .chain(b.header.iter().cloned())
        .collect())?;
    for r in &b.rows {
        put(std::iter::once(r.label.clone())
            .chain(r.cells.iter().map(|c| c.text.clone()))
            .collect())?;
    }
    Ok(())
}

/// Writes every output file into `out` (atomically, each); returns their paths.
pub fn write_all(report: &Report, out: &Path) -> Result<Vec<PathBuf>, ReportError> {
    let mut files = Vec::new();
    let mut put = |rel: String, bytes: &[u8]| -> Result<(), ReportError> {
        let path = out.join(rel);
        write_atomic(&path, bytes).map_err(|e| ReportError::io(&path, e))?;
        files.push(path);
        Ok(())
    };
    put("report.md".into(), markdown(report)?.as_bytes())?;
    put("report.html".into(), html(report)?.as_bytes())?;
    put("cells.csv".into(), cells_csv(report)?.as_bytes())?;
    for t in &report.tables {
        put(format!("tables/{}.csv", t.name), table_csv(t)?.as_bytes())?;
        for c in &t.charts {
            put(format!("charts/{}.svg", c.id), c.svg.as_bytes())?;
        }
    }
    Ok(files)
}

/// The records of every table (for callers checking numbers).
pub fn records(report: &Report) -> impl Iterator<Item = &CellRecord> {
    report.tables.iter().flat_map(|t| t.records.iter())
}
