//! Parquet files as Hugging Face datasets writes them (`Dataset.to_parquet`, and the
//! `refs/convert/parquet` copies of every dataset repository): one row per example, string
//! columns as UTF-8 byte arrays, class labels as integers, the translation layout as a struct
//! column (`translation: {de: ..., en: ...}`). Format: Apache Parquet's file format
//! (parquet.apache.org/docs/file-format), read with the `parquet` crate's row reader, without
//! arrow; pages compressed with snappy, zstd or gzip.
//!
//! `fields` names each part's column; a dotted name reaches into a struct column
//! (`translation.de`). By default each part is the column of its own name. Only the top-level
//! columns that hold a part are decoded.
//!
//! The `parquet` crate is a long build: on a 2-core machine the crate alone compiles in 89 s,
//! and `cargo build -p harness-data --features parquet` after a default build took 2 min 52 s
//! (its new dependencies, and tokenizers rebuilt for the features they unify). So this
//! reader is behind harness-data's `parquet` feature, off by default.

use super::{file_languages, make_record, Bad, Pass, Place, Record, UserCorpusError};
use ::parquet::file::reader::{FileReader, SerializedFileReader};
use ::parquet::record::{Field, Row};
use ::parquet::schema::types::Type;
use harness_recipe::schema::CorpusKind;
use std::borrow::Cow;
use std::path::{Path, PathBuf};
use std::sync::atomic::Ordering;
use std::sync::Arc;

/// The column of each part, and of the per-row languages, with the recipe key naming it.
struct Columns {
    parts: Vec<String>,
    names: Vec<String>,
    source_lang: Option<String>,
    target_lang: Option<String>,
    /// `(fields key, column)` of every column read, for the schema check.
    all: Vec<(String, String)>,
}

impl Columns {
    fn of(pass: &Pass) -> Columns {
        let field = |key: &str| pass.corpus.fields.get(key).cloned();
        let mut all = Vec::new();
        let parts: Vec<String> = pass
            .kind
            .parts()
            .iter()
            .map(|p| {
                let column = field(p).unwrap_or_else(|| p.to_string());
                all.push((p.to_string(), column.clone()));
                column
            })
            .collect();
        let names = parts.iter().map(|c| format!("column `{c}`")).collect();
        let mut lang = |key: &str| {
            let column = field(key)?;
            all.push((key.to_string(), column.clone()));
            Some(column)
        };
        let (source_lang, target_lang) = if pass.kind == CorpusKind::Pairs {
            (lang("source_lang"), lang("target_lang"))
        } else {
            (None, None)
        };
        Columns {
            parts,
            names,
            source_lang,
            target_lang,
            all,
        }
    }
}

/// Reads every row of `files` in order.
pub(super) fn read(pass: &mut Pass, files: &[PathBuf]) -> Result<(), UserCorpusError> {
    let columns = Columns::of(pass);
    for path in files {
        let fixed = file_languages(pass.corpus, pass.kind, path)?;
        read_file(pass, path, &columns, fixed.as_ref())?;
    }
    Ok(())
}

fn read_file(
    pass: &mut Pass,
    path: &Path,
    columns: &Columns,
    fixed: Option<&(String, String)>,
) -> Result<(), UserCorpusError> {
    let error = |at: Option<String>, detail: String, fix: &str| UserCorpusError::Parquet {
        path: path.to_path_buf(),
        at,
        detail,
        fix: fix.to_string(),
    };
    let file = std::fs::File::open(path).map_err(|e| UserCorpusError::io(path, e))?;
    let disk_bytes = file
        .metadata()
        .map_err(|e| UserCorpusError::io(path, e))?
        .len();
    let reader = SerializedFileReader::new(file).map_err(|e| {
        error(
            None,
            format!("not a readable Parquet file ({e})"),
            "check that it is a whole Parquet file (one ends with the bytes `PAR1`), or re-download it",
        )
    })?;
    let projection = projection(reader.metadata().file_metadata().schema(), columns, path)?;

    let mut place = Place {
        path: path.to_path_buf(),
        line: 0,
    };
    let mut counted = 0u64;
    for g in 0..reader.num_row_groups() {
        let group = reader.get_row_group(g).map_err(|e| {
            error(
                Some(format!("row group {g}")),
                format!("cannot read the row group ({e})"),
                "re-download the file, or re-write it",
            )
        })?;
        let rows = group.get_row_iter(Some(projection.clone())).map_err(|e| {
            error(
                Some(format!("row group {g}")),
                format!("cannot read the rows ({e})"),
                "re-download the file, or re-write it",
            )
        })?;
        for (i, row) in rows.enumerate() {
            let row = row.map_err(|e| {
                error(
                    Some(format!("row group {g}, row {}", place.line + 1)),
                    format!("cannot decode the row ({e})"),
                    "re-download the file, or re-write it",
                )
            })?;
            place.line += 1;
            let record = example(&row, columns, fixed, pass.kind).map_err(|mut bad| {
                bad.detail = format!("{} (row {i} of row group {g})", bad.detail);
                bad
            });
            pass.emit_or_bad(record, &place)?;
        }
        // Progress by row group: the pages are read through the crate, not a counted stream.
        let bytes = u64::try_from(group.metadata().compressed_size()).unwrap_or(0);
        pass.bytes_read.fetch_add(bytes, Ordering::Relaxed);
        counted += bytes;
    }
    // The rest of the file (footer, headers) so that a finished file counts all its bytes.
    pass.bytes_read
        .fetch_add(disk_bytes.saturating_sub(counted), Ordering::Relaxed);
    pass.file_done(path, disk_bytes, place.line);
    Ok(())
}

/// The projection of the file's schema on the top-level columns that hold a part of the
/// examples; an error naming the file's columns when one named in `fields` is missing.
fn projection(schema: &Type, columns: &Columns, path: &Path) -> Result<Type, UserCorpusError> {
    let error = |at: Option<String>, detail: String, fix: &str| UserCorpusError::Parquet {
        path: path.to_path_buf(),
        at,
        detail,
        fix: fix.to_string(),
    };
    for (key, column) in &columns.all {
        if !has_column(schema, column) {
            let mut known = Vec::new();
            column_paths(schema, "", &mut known);
            return Err(error(
                None,
                format!(
                    "no column `{column}` (for `{key}`); the file's columns are {}",
                    known
                        .iter()
                        .map(|c| format!("`{c}`"))
                        .collect::<Vec<_>>()
                        .join(", ")
                ),
                &format!(
                    "point `fields.{key}` at one of those (a dotted name for a struct's field: `translation.de`)"
                ),
            ));
        }
    }
    // Only the top-level columns that hold a part are decoded: a dataset may carry wide
    // columns (ids, metadata, embeddings) that the examples do not need.
    let wanted: Vec<Arc<Type>> = schema
        .get_fields()
        .iter()
        .filter(|f| {
            columns
                .all
                .iter()
                .any(|(_, c)| top_level(c, f.name()).is_some())
        })
        .cloned()
        .collect();
    Type::group_type_builder(schema.name())
        .with_fields(wanted)
        .build()
        .map_err(|e| {
            error(
                None,
                format!("cannot select the columns ({e})"),
                "report this",
            )
        })
}

/// The rest of a dotted column name below the top-level column `name` (`""` for the column
/// itself), if the name starts with it.
fn top_level<'c>(column: &'c str, name: &str) -> Option<&'c str> {
    if column == name {
        return Some("");
    }
    column.strip_prefix(name)?.strip_prefix('.')
}

/// Whether the schema has the (dotted) column: a column spelled with the dots wins, else each
/// dot steps into a struct.
fn has_column(group: &Type, column: &str) -> bool {
    group
        .get_fields()
        .iter()
        .any(|f| match top_level(column, f.name()) {
            Some("") => true,
            Some(rest) => f.is_group() && has_column(f, rest),
            None => false,
        })
}

/// Every column's dotted name, for messages.
fn column_paths(group: &Type, prefix: &str, out: &mut Vec<String>) {
    for f in group.get_fields() {
        let name = format!("{prefix}{}", f.name());
        if f.is_group() && !f.get_fields().is_empty() {
            column_paths(f, &format!("{name}."), out);
        } else {
            out.push(name);
        }
    }
}

/// A (dotted) column's value in a row.
fn lookup<'r>(row: &'r Row, column: &str) -> Option<&'r Field> {
    row.get_column_iter()
        .find_map(|(name, field)| match top_level(column, name) {
            Some("") => Some(field),
            Some(rest) => match field {
                Field::Group(inner) => lookup(inner, rest),
                // A null struct: its fields are null too.
                Field::Null => Some(field),
                _ => None,
            },
            None => None,
        })
}

/// A column's text: a string, or for a label also an integer.
fn text<'r>(row: &'r Row, column: &str, is_label: bool) -> Result<Cow<'r, str>, Bad> {
    let fix =
        || format!("fill column `{column}` in every row, or point `fields` at the right column");
    let Some(field) = lookup(row, column) else {
        return Err(Bad::new(format!("no column `{column}`"), fix()));
    };
    match field {
        Field::Str(s) => Ok(Cow::Borrowed(s)),
        Field::Bytes(b) => match std::str::from_utf8(b.data()) {
            Ok(s) => Ok(Cow::Borrowed(s)),
            Err(e) => Err(Bad::new(
                format!(
                    "column `{column}` is not UTF-8 (at byte {})",
                    e.valid_up_to()
                ),
                "write the column as UTF-8 strings",
            )),
        },
        Field::Null => Err(Bad::new(format!("column `{column}` is null"), fix())),
        Field::Byte(_)
        | Field::Short(_)
        | Field::Int(_)
        | Field::Long(_)
        | Field::UByte(_)
        | Field::UShort(_)
        | Field::UInt(_)
        | Field::ULong(_)
            if is_label =>
        {
            Ok(Cow::Owned(field.to_string()))
        }
        other => Err(Bad::new(
            format!(
                "column `{column}` holds {other}, not {}",
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

/// A row's language: its column's code where `fields` names one, else the file's.
fn lang<'a>(row: &'a Row, column: Option<&str>, fallback: &'a str) -> Result<Cow<'a, str>, Bad> {
    match column {
        Some(c) => text(row, c, false),
        None => Ok(Cow::Borrowed(fallback)),
    }
}

/// One row's example.
fn example(
    row: &Row,
    columns: &Columns,
    fixed: Option<&(String, String)>,
    kind: CorpusKind,
) -> Result<Record, Bad> {
    let labelled = matches!(kind, CorpusKind::Nli | CorpusKind::Labelled);
    let mut parts: Vec<Cow<str>> = Vec::with_capacity(columns.parts.len());
    for (i, column) in columns.parts.iter().enumerate() {
        // The label is the last part of the kinds that have one.
        parts.push(text(row, column, labelled && i + 1 == columns.parts.len())?);
    }
    let langs = if kind == CorpusKind::Pairs {
        let (source, target) = fixed.map_or(("", ""), |(s, t)| (s.as_str(), t.as_str()));
        Some((
            lang(row, columns.source_lang.as_deref(), source)?,
            lang(row, columns.target_lang.as_deref(), target)?,
        ))
    } else {
        None
    };
    let parts: Vec<&str> = parts.iter().map(|p| p.as_ref()).collect();
    make_record(
        kind,
        &parts,
        &columns.names,
        langs.as_ref().map(|(s, t)| (s.as_ref(), t.as_ref())),
    )
}

/// Writes `rows` as a Parquet file of required UTF-8 columns named `names`, in one row group:
/// the layout of a Hugging Face dataset of text columns. For the tests of the crates above
/// (harness itself only reads Parquet); the file is written in place, not atomically.
#[doc(hidden)]
pub fn write_text_columns(
    path: &Path,
    names: &[&str],
    rows: &[Vec<String>],
) -> Result<(), ::parquet::errors::ParquetError> {
    use ::parquet::data_type::{ByteArray, ByteArrayType};
    use ::parquet::file::properties::WriterProperties;
    use ::parquet::file::writer::SerializedFileWriter;
    let fields: Vec<String> = names
        .iter()
        .map(|n| format!("required binary {n} (UTF8);"))
        .collect();
    let schema = ::parquet::schema::parser::parse_message_type(&format!(
        "message corpus {{ {} }}",
        fields.join(" ")
    ))?;
    let file = std::fs::File::create(path)?;
    let props = Arc::new(WriterProperties::builder().build());
    let mut writer = SerializedFileWriter::new(file, Arc::new(schema), props)?;
    let mut group = writer.next_row_group()?;
    for c in 0..names.len() {
        let values: Vec<ByteArray> = rows
            .iter()
            .map(|r| ByteArray::from(r[c].as_str()))
            .collect();
        let mut column = group.next_column()?.expect("one column per name");
        column
            .typed::<ByteArrayType>()
            .write_batch(&values, None, None)?;
        column.close()?;
    }
    group.close()?;
    writer.close()?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::super::tests::{corpus, error, pair, read_all, records};
    use super::super::{Record, UserCorpusError};
    use crate::records::NliLabel;
    use ::parquet::basic::{Compression, GzipLevel, ZstdLevel};
    use ::parquet::data_type::{ByteArray, ByteArrayType, Int64Type};
    use ::parquet::file::properties::WriterProperties;
    use ::parquet::file::writer::SerializedFileWriter;
    use ::parquet::schema::parser::parse_message_type;
    use harness_recipe::schema::{CorpusFormat, CorpusKind, OnBadLine};
    use std::path::{Path, PathBuf};
    use std::sync::atomic::{AtomicU64, Ordering};
    use std::sync::Arc;

    /// One leaf column's values in a row group: strings with their definition levels where
    /// the column is optional (a null is a level below the maximum and no value), or integers.
    enum Col<'a> {
        Str(&'a [&'a str], Option<&'a [i16]>),
        Long(&'a [i64]),
    }

    /// Writes a Parquet file of `schema` with the parquet crate's own writer, one row group
    /// per entry of `groups`.
    fn write_parquet(path: &Path, schema: &str, compression: Compression, groups: &[Vec<Col>]) {
        let schema = Arc::new(parse_message_type(schema).unwrap());
        let props = Arc::new(
            WriterProperties::builder()
                .set_compression(compression)
                .build(),
        );
        let file = std::fs::File::create(path).unwrap();
        let mut writer = SerializedFileWriter::new(file, schema, props).unwrap();
        for group in groups {
            let mut rg = writer.next_row_group().unwrap();
            for col in group {
                let mut cw = rg.next_column().unwrap().unwrap();
                match col {
                    Col::Str(values, defs) => {
                        let values: Vec<ByteArray> =
                            values.iter().map(|s| ByteArray::from(*s)).collect();
                        cw.typed::<ByteArrayType>()
                            .write_batch(&values, *defs, None)
                            .unwrap();
                    }
                    Col::Long(values) => {
                        cw.typed::<Int64Type>()
                            .write_batch(values, None, None)
                            .unwrap();
                    }
                }
                cw.close().unwrap();
            }
            rg.close().unwrap();
        }
        writer.close().unwrap();
    }

    const TRANSLATION: &str = "message schema {
        REQUIRED INT64 id;
        REQUIRED GROUP translation {
            REQUIRED BYTE_ARRAY de (UTF8);
            REQUIRED BYTE_ARRAY en (UTF8);
        }
    }";

    fn translation_file(dir: &Path, name: &str, compression: Compression) -> PathBuf {
        let path = dir.join(name);
        write_parquet(
            &path,
            TRANSLATION,
            compression,
            &[
                vec![
                    Col::Long(&[1, 2]),
                    Col::Str(&["Hallo", "Danke"], None),
                    Col::Str(&["Hello", "Thanks"], None),
                ],
                vec![
                    Col::Long(&[3]),
                    Col::Str(&["Tschüss"], None),
                    Col::Str(&["Bye"], None),
                ],
            ],
        );
        path
    }

    fn translation_corpus() -> harness_recipe::schema::Corpus {
        let mut c = corpus(CorpusFormat::Parquet);
        c.fields.insert("source".into(), "translation.de".into());
        c.fields.insert("target".into(), "translation.en".into());
        c
    }

    #[test]
    fn nested_struct_columns_in_every_page_compression() {
        let dir = tempfile::tempdir().unwrap();
        let c = translation_corpus();
        for (i, compression) in [
            Compression::UNCOMPRESSED,
            Compression::SNAPPY,
            Compression::ZSTD(ZstdLevel::default()),
            Compression::GZIP(GzipLevel::default()),
        ]
        .into_iter()
        .enumerate()
        {
            let f = translation_file(dir.path(), &format!("wmt{i}.de-en.parquet"), compression);
            let bytes = AtomicU64::new(0);
            let mut got = Vec::new();
            let report = super::super::read(&c, std::slice::from_ref(&f), &bytes, &mut |r, p| {
                got.push((r, p.line));
                Ok(())
            })
            .unwrap();
            assert_eq!(
                got,
                [
                    (pair("Hallo", "Hello", "de", "en"), 1),
                    (pair("Danke", "Thanks", "de", "en"), 2),
                    (pair("Tschüss", "Bye", "de", "en"), 3)
                ],
                "{compression:?}"
            );
            let size = std::fs::metadata(&f).unwrap().len();
            assert_eq!(bytes.load(Ordering::Relaxed), size);
            assert_eq!((report.lines, report.files[0].bytes), (3, size));
        }
    }

    #[test]
    fn nli_with_integer_labels() {
        let dir = tempfile::tempdir().unwrap();
        let f = dir.path().join("xnli.parquet");
        write_parquet(
            &f,
            "message schema {
                REQUIRED BYTE_ARRAY premise (UTF8);
                REQUIRED BYTE_ARRAY hypothesis (UTF8);
                REQUIRED INT64 label;
            }",
            Compression::SNAPPY,
            &[vec![
                Col::Str(&["p1", "p2"], None),
                Col::Str(&["h1", "h2"], None),
                Col::Long(&[2, 0]),
            ]],
        );
        let mut c = corpus(CorpusFormat::Parquet);
        c.kind = Some(CorpusKind::Nli);
        assert_eq!(
            records(&c, &[f]),
            [
                Record::Nli {
                    premise: "p1".into(),
                    hypothesis: "h1".into(),
                    label: NliLabel::Contradiction
                },
                Record::Nli {
                    premise: "p2".into(),
                    hypothesis: "h2".into(),
                    label: NliLabel::Entailment
                }
            ]
        );
    }

    #[test]
    fn a_missing_column_names_file_and_columns() {
        let dir = tempfile::tempdir().unwrap();
        let f = translation_file(dir.path(), "wmt.de-en.parquet", Compression::SNAPPY);
        let mut c = translation_corpus();
        c.fields.insert("target".into(), "translation.fr".into());
        let e = read_all(&c, std::slice::from_ref(&f)).unwrap_err();
        assert!(matches!(e, UserCorpusError::Parquet { .. }), "{e:?}");
        let msg = e.to_string();
        assert!(
            msg.contains("wmt.de-en.parquet: no column `translation.fr` (for `target`)"),
            "{msg}"
        );
        assert!(
            msg.contains("`id`, `translation.de`, `translation.en`"),
            "{msg}"
        );
        assert!(msg.contains("fields.target"), "{msg}");
    }

    #[test]
    fn a_null_is_a_bad_row_naming_the_row() {
        let dir = tempfile::tempdir().unwrap();
        let f = dir.path().join("pairs.de-en.parquet");
        write_parquet(
            &f,
            "message schema {
                OPTIONAL BYTE_ARRAY source (UTF8);
                OPTIONAL BYTE_ARRAY target (UTF8);
            }",
            Compression::SNAPPY,
            &[
                vec![Col::Str(&["a"], Some(&[1])), Col::Str(&["A"], Some(&[1]))],
                vec![
                    Col::Str(&["b", "c"], Some(&[1, 1])),
                    Col::Str(&["C"], Some(&[0, 1])),
                ],
            ],
        );
        let mut c = corpus(CorpusFormat::Parquet);
        let msg = error(&c, std::slice::from_ref(&f));
        assert!(
            msg.contains("pairs.de-en.parquet:2: column `target` is null (row 0 of row group 1)"),
            "{msg}"
        );
        c.on_bad_line = OnBadLine::Skip;
        let (got, report) = read_all(&c, &[f]).unwrap();
        assert_eq!(
            got.iter()
                .map(|(r, p)| (r.clone(), p.line))
                .collect::<Vec<_>>(),
            [
                (pair("a", "A", "de", "en"), 1),
                (pair("c", "C", "de", "en"), 3)
            ]
        );
        assert_eq!((report.skipped, report.lines), (1, 3));
    }

    #[test]
    fn a_file_that_is_not_parquet_is_an_error() {
        let dir = tempfile::tempdir().unwrap();
        let f = dir.path().join("x.de-en.parquet");
        std::fs::write(&f, b"source,target\na,b\n").unwrap();
        let msg = error(&corpus(CorpusFormat::Parquet), &[f]);
        assert!(
            msg.contains("x.de-en.parquet: not a readable Parquet file"),
            "{msg}"
        );
    }
}
