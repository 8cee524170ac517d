//! JSON Lines (jsonlines.org): one JSON value per line, UTF-8, lines ended by `\n` (a `\r`
//! before it is allowed); here each value is an object holding one example.
//!
//! `fields` names the object's field of each part of an example; a dotted name reaches
//! into nested objects (`translation.de`: the Hugging Face translation layout
//! `{"translation": {"de": ..., "en": ...}}`). By default each part is the field of its own
//! name (`source`, `target`, `premise`...). Labels may be strings or integers.

use super::{make_record, read_rows, Bad, Pass, Record, UserCorpusError};
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
    let kind = pass.kind;
    read_rows(pass, files, &|text, fixed| row(text, &fields, fixed, kind))
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

#[cfg(test)]
mod tests {
    use super::super::tests::{corpus, error, pair, read_all, records, write};
    use super::super::Record;
    use crate::records::NliLabel;
    use harness_recipe::schema::{CorpusFormat, CorpusKind, OnBadLine};

    #[test]
    fn nested_translation_fields() {
        let dir = tempfile::tempdir().unwrap();
        let f = write(
            dir.path(),
            "wmt.jsonl.zst",
            br#"{"id": 1, "translation": {"de": "Hallo", "en": "Hello"}}
{"translation": {"en": "Thanks", "de": "Danke"}}
"#,
        );
        let mut c = corpus(CorpusFormat::Jsonl);
        c.fields.insert("source".into(), "translation.de".into());
        c.fields.insert("target".into(), "translation.en".into());
        c.pairs = vec!["de-en".into()];
        assert_eq!(
            records(&c, &[f]),
            [
                pair("Hallo", "Hello", "de", "en"),
                pair("Danke", "Thanks", "de", "en")
            ]
        );
    }

    #[test]
    fn default_fields_per_row_languages_and_dotted_keys() {
        let dir = tempfile::tempdir().unwrap();
        let f = write(
            dir.path(),
            "mixed.jsonl",
            br#"{"source": "Hallo", "target": "Hello", "meta": {"sl": "de"}, "t.l": "en"}"#,
        );
        let mut c = corpus(CorpusFormat::Jsonl);
        c.fields.insert("source_lang".into(), "meta.sl".into());
        c.fields.insert("target_lang".into(), "t.l".into());
        assert_eq!(records(&c, &[f]), [pair("Hallo", "Hello", "de", "en")]);
    }

    #[test]
    fn labels_as_strings_or_integers() {
        let dir = tempfile::tempdir().unwrap();
        let f = write(
            dir.path(),
            "nli.jsonl",
            br#"{"premise": "p", "hypothesis": "h", "label": 1}
{"premise": "p2", "hypothesis": "h2", "label": "Contradiction"}
"#,
        );
        let mut c = corpus(CorpusFormat::Jsonl);
        c.kind = Some(CorpusKind::Nli);
        assert_eq!(
            records(&c, &[f]),
            [
                Record::Nli {
                    premise: "p".into(),
                    hypothesis: "h".into(),
                    label: NliLabel::Neutral
                },
                Record::Nli {
                    premise: "p2".into(),
                    hypothesis: "h2".into(),
                    label: NliLabel::Contradiction
                }
            ]
        );
        let f = write(dir.path(), "sib.jsonl", br#"{"text": "t", "category": 7}"#);
        c.kind = Some(CorpusKind::Labelled);
        c.fields.insert("label".into(), "category".into());
        assert_eq!(
            records(&c, &[f]),
            [Record::Labelled {
                text: "t".into(),
                label: "7".into()
            }]
        );
    }

    #[test]
    fn invalid_json_names_file_and_line() {
        let dir = tempfile::tempdir().unwrap();
        let f = write(
            dir.path(),
            "x.de-en.jsonl",
            b"{\"source\": \"a\", \"target\": \"b\"}\n{\"source\": \"a\", \n",
        );
        let msg = error(&corpus(CorpusFormat::Jsonl), &[f]);
        assert!(msg.contains("x.de-en.jsonl:2: invalid JSON"), "{msg}");
        let f = write(dir.path(), "y.de-en.jsonl", b"[\"a\", \"b\"]\n");
        let msg = error(&corpus(CorpusFormat::Jsonl), &[f]);
        assert!(
            msg.contains("y.de-en.jsonl:1: a JSON array, not an object"),
            "{msg}"
        );
    }

    #[test]
    fn a_missing_or_non_string_field_names_the_field() {
        let dir = tempfile::tempdir().unwrap();
        let f = write(
            dir.path(),
            "x.de-en.jsonl",
            br#"{"translation": {"de": "a", "en": "b"}}
{"translation": {"de": "a"}}
{"translation": {"de": "a", "en": 3}}
"#,
        );
        let mut c = corpus(CorpusFormat::Jsonl);
        c.fields.insert("source".into(), "translation.de".into());
        c.fields.insert("target".into(), "translation.en".into());
        let msg = error(&c, std::slice::from_ref(&f));
        assert!(
            msg.contains("x.de-en.jsonl:2: missing field `translation.en`"),
            "{msg}"
        );
        c.on_bad_line = OnBadLine::Skip;
        let (got, report) = read_all(&c, &[f]).unwrap();
        assert_eq!(got.len(), 1);
        assert_eq!(report.skipped, 2);
        let mut c = corpus(CorpusFormat::Jsonl);
        c.fields.insert("source".into(), "translation.de".into());
        c.fields.insert("target".into(), "translation.en".into());
        let f = write(
            dir.path(),
            "z.de-en.jsonl",
            br#"{"translation": {"de": "a", "en": 3}}"#,
        );
        let msg = error(&c, &[f]);
        assert!(
            msg.contains("z.de-en.jsonl:1: field `translation.en` is a JSON number, not a string"),
            "{msg}"
        );
    }
}
