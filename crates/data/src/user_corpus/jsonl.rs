//! JSON Lines (jsonlines.org): one JSON value per line, UTF-8, lines ended by `\n` (a `\r`
//! before it is allowed); here each value is an object holding one example.
//!
//! `fields` names the object's field of each part of an example; a dotted name reaches
//! into nested objects (`translation.de`: the Hugging Face translation layout
//! `{"translation": {"de": ..., "en": ...}}`). By default each part is the field of its own
//! name (`source`, `target`, `premise`...). Labels may be strings or integers.

use super::open::{Line, Lines};
use super::{file_languages, make_record, Bad, Pass, Place, Record, UserCorpusError};
use harness_recipe::schema::CorpusKind;
use serde_json::Value;
use std::borrow::Cow;
use std::path::PathBuf;

/// The field of each part, and of the per-row languages.
struct Fields {
    parts: Vec<String>,
    names: Vec<String>,
    source_lang: Option<String>,
    target_lang: Option<String>,
}

impl Fields {
    fn of(pass: &Pass) -> Fields {
        let field = |key: &str| pass.corpus.fields.get(key).cloned();
        let parts: Vec<String> = pass
            .kind
            .parts()
            .iter()
            .map(|p| field(p).unwrap_or_else(|| p.to_string()))
            .collect();
        let names = parts.iter().map(|f| format!("field `{f}`")).collect();
        Fields {
            parts,
            names,
            source_lang: field("source_lang"),
            target_lang: field("target_lang"),
        }
    }
}

/// Reads every line of `files` in order.
pub(super) fn read(pass: &mut Pass, files: &[PathBuf]) -> Result<(), UserCorpusError> {
    let fields = Fields::of(pass);
    let bytes_read = pass.bytes_read;
    for path in files {
        let fixed = file_languages(pass.corpus, pass.kind, path)?;
        let mut lines = Lines::open(path, bytes_read)?;
        let mut place = Place {
            path: path.clone(),
            line: 0,
        };
        loop {
            let record = match lines.next_line()? {
                None => break,
                Some(Line::NotUtf8(at)) => Err(Bad::not_utf8(at)),
                Some(Line::Text(text)) => row(text, &fields, fixed.as_ref(), pass.kind),
            };
            place.line = lines.line();
            pass.emit_or_bad(record, &place)?;
        }
        pass.file_done(path, lines.disk_bytes(), lines.line());
    }
    Ok(())
}

/// The fix for a line that is not a JSON object.
const JSON_FIX: &str = "write one JSON object per line (JSON Lines), e.g. `{\"source\": \"...\", \"target\": \"...\"}`";

/// One line's example.
fn row(
    text: &str,
    fields: &Fields,
    fixed: Option<&(String, String)>,
    kind: CorpusKind,
) -> Result<Record, Bad> {
    if text.trim().is_empty() {
        return Err(Bad::new("an empty line", "remove the empty line"));
    }
    let value: Value =
        serde_json::from_str(text).map_err(|e| Bad::new(format!("invalid JSON: {e}"), JSON_FIX))?;
    if !value.is_object() {
        return Err(Bad::new(
            format!("a JSON {}, not an object", type_name(&value)),
            JSON_FIX,
        ));
    }
    let labelled = matches!(kind, CorpusKind::Nli | CorpusKind::Labelled);
    let mut parts: Vec<Cow<str>> = Vec::with_capacity(fields.parts.len());
    for (i, field) in fields.parts.iter().enumerate() {
        // The label is the last part of the kinds that have one.
        let is_label = labelled && i + 1 == fields.parts.len();
        parts.push(text_field(&value, field, is_label)?);
    }
    let langs = if kind == CorpusKind::Pairs {
        let (source, target) = fixed.map_or(("", ""), |(s, t)| (s.as_str(), t.as_str()));
        Some((
            lang(&value, fields.source_lang.as_deref(), source)?,
            lang(&value, fields.target_lang.as_deref(), target)?,
        ))
    } else {
        None
    };
    let parts: Vec<&str> = parts.iter().map(|p| p.as_ref()).collect();
    make_record(
        kind,
        &parts,
        &fields.names,
        langs.as_ref().map(|(s, t)| (s.as_ref(), t.as_ref())),
    )
}

/// A row's language: its field's code where `fields` names one, else the file's.
fn lang<'a>(value: &'a Value, field: Option<&str>, fallback: &'a str) -> Result<Cow<'a, str>, Bad> {
    match field {
        Some(f) => text_field(value, f, false),
        None => Ok(Cow::Borrowed(fallback)),
    }
}

/// A field's text: a string, or for a label also an integer.
fn text_field<'v>(value: &'v Value, field: &str, is_label: bool) -> Result<Cow<'v, str>, Bad> {
    let fix = || {
        format!("give every line the field `{field}`, or point `fields` at the right one (dotted for nested objects: `translation.de`)")
    };
    match lookup(value, field) {
        None => Err(Bad::new(format!("missing field `{field}`"), fix())),
        Some(Value::String(s)) => Ok(Cow::Borrowed(s)),
        Some(v @ Value::Number(n)) if is_label && (n.is_u64() || n.is_i64()) => {
            Ok(Cow::Owned(v.to_string()))
        }
        Some(other) => Err(Bad::new(
            format!(
                "field `{field}` is a JSON {}, not {}",
                type_name(other),
                if is_label {
                    "a string or an integer"
                } else {
                    "a string"
                }
            ),
            fix(),
        )),
    }
}

/// A field by its (possibly dotted) name: a key spelled with the dots wins, else each dot
/// steps into a nested object (`translation.de`).
fn lookup<'v>(value: &'v Value, field: &str) -> Option<&'v Value> {
    let object = value.as_object()?;
    if let Some(v) = object.get(field) {
        return Some(v);
    }
    field.match_indices('.').find_map(|(i, _)| {
        object
            .get(&field[..i])
            .and_then(|inner| lookup(inner, &field[i + 1..]))
    })
}

fn type_name(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "boolean",
        Value::Number(_) => "number",
        Value::String(_) => "string",
        Value::Array(_) => "array",
        Value::Object(_) => "object",
    }
}
