//! Renderers over the assembled report: Markdown and one self-contained HTML file through
//! minijinja templates (`reports/templates/`, compiled into the binary), the terminal
//! through tabled, and CSV (one long file of every cell with its source, and one wide file
//! per table as displayed). Charts are written as SVG files for the Markdown and inlined in
//! the HTML.

use super::error::ReportError;
use super::provenance::Provenance;
use super::table::{Block, CellRecord, RenderedTable};
use harness_core::outdir::{Foreign, OutDir};
use include_dir::{include_dir, Dir};
use serde::Serialize;
use std::path::{Path, PathBuf};

static TEMPLATES: Dir<'_> = include_dir!("$CARGO_MANIFEST_DIR/../../reports/templates");

/// Everything a template sees.
#[derive(Debug, Clone, Serialize)]
pub struct Report {
    pub provenance: Provenance,
    pub tables: Vec<RenderedTable>,
    pub warnings: Vec<String>,
}

/// The auto-escape mode of the Markdown template.
const MARKDOWN: minijinja::AutoEscape = minijinja::AutoEscape::Custom("markdown");

/// A string from data (a system name, a path, a note) made inert in Markdown: HTML's
/// special characters become entities (so `<script>` is text in every renderer that allows
/// raw HTML), the characters that start links and images, end table cells or escape are
/// backslash-escaped, and line breaks become spaces (no injected headings or rows). Code
/// spans and emphasis are left as written: they format, they cannot inject.
pub fn escape_markdown(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\\' | '[' | ']' | '|' | '!' => {
                out.push('\\');
                out.push(c);
            }
            '\n' | '\r' => out.push(' '),
            c if c.is_control() => out.push(' '),
            c => out.push(c),
        }
    }
    out
}

fn environment() -> Result<minijinja::Environment<'static>, ReportError> {
    let mut env = minijinja::Environment::new();
    env.set_trim_blocks(true);
    env.set_lstrip_blocks(true);
    // Every value the Markdown template prints is escaped (HTML's template escapes as HTML).
    env.set_auto_escape_callback(|name| {
        if name.ends_with(".md.j2") {
            MARKDOWN
        } else {
            minijinja::default_auto_escape_callback(name)
        }
    });
    env.set_formatter(|out, state, value| {
        if state.auto_escape() == MARKDOWN {
            if value.is_safe() {
                return out
                    .write_str(value.as_str().unwrap_or_default())
                    .map_err(Into::into);
            }
            let text = match value.as_str() {
                Some(s) => escape_markdown(s),
                None if value.is_none() || value.is_undefined() => String::new(),
                None => escape_markdown(&value.to_string()),
            };
            return out.write_str(&text).map_err(Into::into);
        }
        minijinja::escape_formatter(out, state, value)
    });
    // Kept for the templates' table cells; the escaping itself is the formatter's.
    env.add_filter("md", |s: String| {
        minijinja::Value::from_safe_string(escape_markdown(&s))
    });
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

/// Renders template `name` of `reports/templates/` with `value` as its context (the paper
/// report, the nightly morning report).
pub fn render_template<T: serde::Serialize>(name: &str, value: &T) -> Result<String, ReportError> {
    let env = environment()?;
    let t = env.get_template(name).map_err(|e| ReportError::Template {
        template: name.into(),
        detail: e.to_string(),
    })?;
    t.render(minijinja::Value::from_serialize(value))
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

/// Writes every output file into `out` (atomically, each); returns their paths. Only files
/// harness wrote there before are replaced: a file of someone else's in the way of one of
/// them is refused before anything is written, and other files are left alone.
///
/// `owned`: `out` is harness's own folder (a run directory's `report/`), so every file in it
/// may be replaced.
pub fn write_all(report: &Report, out: &Path, owned: bool) -> Result<Vec<PathBuf>, ReportError> {
    let mut outputs: Vec<(String, Vec<u8>)> = vec![
        ("report.md".into(), markdown(report)?.into_bytes()),
        ("report.html".into(), html(report)?.into_bytes()),
        ("cells.csv".into(), cells_csv(report)?.into_bytes()),
    ];
    for t in &report.tables {
        outputs.push((format!("tables/{}.csv", t.name), table_csv(t)?.into_bytes()));
        for c in &t.charts {
            outputs.push((format!("charts/{}.svg", c.id), c.svg.clone().into_bytes()));
        }
    }
    let names: Vec<String> = outputs.iter().map(|(n, _)| n.clone()).collect();
    let foreign = if owned {
        Foreign::Ours
    } else {
        Foreign::LeaveAlone
    };
    let mut dir = OutDir::claim(out, "report", &names, foreign, false)
        .map_err(|e| ReportError::Setup(e.to_string()))?;
    let mut files = Vec::with_capacity(outputs.len());
    for (rel, bytes) in outputs {
        files.push(
            dir.write(&rel, &bytes)
                .map_err(|e| ReportError::Setup(e.to_string()))?,
        );
    }
    dir.finish()
        .map_err(|e| ReportError::Setup(e.to_string()))?;
    Ok(files)
}

/// The records of every table (for callers checking numbers).
pub fn records(report: &Report) -> impl Iterator<Item = &CellRecord> {
    report.tables.iter().flat_map(|t| t.records.iter())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The shipped tables with nothing measured yet (every cell "not run yet").
    fn empty_report() -> Report {
        let inputs = crate::runs::Inputs::default();
        let specs = crate::spec::load().unwrap();
        Report {
            provenance: crate::provenance::collect(&inputs).unwrap(),
            tables: crate::table::build(&specs, &inputs),
            warnings: vec!["a warning".into()],
        }
    }

    /// `trim_blocks` eats the newline after a block tag: a line that ends in `{% endif %}`
    /// ran into the next one (the table of contents was one paragraph).
    #[test]
    fn markdown_contents_is_a_list_and_paragraphs_stay_apart() {
        let report = empty_report();
        assert!(report.tables.len() > 2);
        let md = markdown(&report).unwrap();
        let toc: Vec<&str> = md
            .split_once("\n## Tables\n\n")
            .expect("a Tables section")
            .1
            .lines()
            .take_while(|l| !l.is_empty())
            .collect();
        assert_eq!(toc.len(), report.tables.len(), "{toc:#?}");
        for (line, t) in toc.iter().zip(&report.tables) {
            assert!(
                line.starts_with(&format!(
                    "- [{}](#{}) — ",
                    escape_markdown(&t.title),
                    t.name
                )),
                "{line}"
            );
            assert_eq!(line.matches("- [").count(), 1, "{line}");
            assert!(line.ends_with("not run yet"), "{line}");
        }
        // Each table's meta line is a paragraph of its own, apart from "Published values".
        let lines: Vec<&str> = md.lines().collect();
        for t in &report.tables {
            let meta = format!("`{}` · ", t.name);
            let i = lines
                .iter()
                .position(|l| l.starts_with(&meta))
                .unwrap_or_else(|| panic!("no meta line for {}", t.name));
            assert_eq!(lines[i + 1], "", "{}", lines[i]);
            assert!(
                lines[i + 2].starts_with("Published values: "),
                "{}",
                lines[i + 2]
            );
        }
        assert!(md.contains("\n- a warning\n"));
    }
}
