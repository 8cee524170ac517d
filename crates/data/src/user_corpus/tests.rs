//! Helpers shared by the format tests, and the tests of file resolution and languages.

use super::*;
use std::io::Write;

/// A corpus of files in `format`, everything else at its default.
pub(super) fn corpus(format: CorpusFormat) -> Corpus {
    Corpus {
        dataset: None,
        files: Vec::new(),
        format: Some(format),
        kind: None,
        fields: Default::default(),
        on_bad_line: OnBadLine::Error,
        pairs: Vec::new(),
        languages: Vec::new(),
        splits: Vec::new(),
        exclude: Vec::new(),
        max_examples: None,
    }
}

/// Writes `bytes` to `dir/name`, compressed as the name's extension says.
pub(super) fn write(dir: &Path, name: &str, text: &[u8]) -> PathBuf {
    let path = dir.join(name);
    let bytes = match open::Compression::of(&path) {
        open::Compression::None => text.to_vec(),
        open::Compression::Gzip => {
            let mut e = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
            e.write_all(text).unwrap();
            e.finish().unwrap()
        }
        open::Compression::Xz => {
            let mut e = liblzma::write::XzEncoder::new(Vec::new(), 6);
            e.write_all(text).unwrap();
            e.finish().unwrap()
        }
        open::Compression::Zstd => {
            ruzstd::encoding::compress_to_vec(text, ruzstd::encoding::CompressionLevel::Fastest)
        }
    };
    std::fs::write(&path, bytes).unwrap();
    path
}

/// Every record of a read with its place, and the report.
pub(super) fn read_all(
    corpus: &Corpus,
    files: &[PathBuf],
) -> Result<(Vec<(Record, Place)>, ReadReport), UserCorpusError> {
    let bytes = AtomicU64::new(0);
    let mut out = Vec::new();
    let report = read(corpus, files, &bytes, &mut |r, p| {
        out.push((r, p.clone()));
        Ok(())
    })?;
    Ok((out, report))
}

/// The records alone; panics (in tests) on an error.
pub(super) fn records(corpus: &Corpus, files: &[PathBuf]) -> Vec<Record> {
    match read_all(corpus, files) {
        Ok((records, _)) => records.into_iter().map(|(r, _)| r).collect(),
        Err(e) => panic!("{e}"),
    }
}

/// The error a read ends with, as displayed.
pub(super) fn error(corpus: &Corpus, files: &[PathBuf]) -> String {
    match read_all(corpus, files) {
        Ok((records, _)) => panic!("expected an error, read {} records", records.len()),
        Err(e) => e.to_string(),
    }
}

pub(super) fn pair(source: &str, target: &str, sl: &str, tl: &str) -> Record {
    Record::Pair {
        source: source.into(),
        target: target.into(),
        source_lang: sl.into(),
        target_lang: tl.into(),
    }
}

fn names(files: &[PathBuf]) -> Vec<String> {
    files
        .iter()
        .map(|f| f.file_name().unwrap().to_string_lossy().into_owned())
        .collect()
}

#[test]
fn globs_match_wildcards_and_alternatives_sorted() {
    let dir = tempfile::tempdir().unwrap();
    for name in [
        "b.de-en.tsv",
        "a.de-en.tsv.gz",
        "c.fr-en.tsv",
        "notes.txt",
        ".hidden.de-en.tsv",
    ] {
        write(dir.path(), name, b"x\ty\n");
    }
    std::fs::create_dir(dir.path().join("sub.de-en.d")).unwrap();
    let mut c = corpus(CorpusFormat::Tsv);
    c.files = vec!["*.de-en.*".into()];
    let files = resolve_files(&c, dir.path()).unwrap();
    // Sorted, hidden files and folders left out.
    assert_eq!(names(&files), ["a.de-en.tsv.gz", "b.de-en.tsv"]);

    c.files = vec![
        "{c,b}.*-en.tsv".into(),
        "b.de-en.tsv".into(),
        "?.fr-en.[st]sv".into(),
    ];
    let files = resolve_files(&c, dir.path()).unwrap();
    assert_eq!(
        names(&files),
        ["b.de-en.tsv", "c.fr-en.tsv"],
        "de-duplicated"
    );

    // Absolute patterns are not put under the base; nested alternatives expand.
    c.files = vec![format!(
        "{}/{{a.{{de,xx}}-en.tsv.gz,notes.txt}}",
        dir.path().display()
    )];
    let files = resolve_files(&c, Path::new("/nowhere")).unwrap();
    assert_eq!(names(&files), ["a.de-en.tsv.gz", "notes.txt"]);
}

#[test]
fn a_pattern_matching_nothing_names_pattern_and_folder() {
    let dir = tempfile::tempdir().unwrap();
    write(dir.path(), "a.de-en.tsv", b"x\ty\n");
    let mut c = corpus(CorpusFormat::Tsv);
    c.files = vec!["a.de-en.tsv".into(), "*.fr-en.*".into()];
    let e = resolve_files(&c, dir.path()).unwrap_err();
    let text = e.to_string();
    assert!(matches!(e, UserCorpusError::NoMatch { .. }), "{e:?}");
    assert!(text.contains("`*.fr-en.*`"), "{text}");
    assert!(text.contains(&dir.path().display().to_string()), "{text}");

    c.files = vec!["data/*.tsv".into()];
    let text = resolve_files(&c, dir.path()).unwrap_err().to_string();
    assert!(
        text.contains(&dir.path().join("data").display().to_string()),
        "{text}"
    );
    assert!(text.contains("does not exist"), "{text}");
}

#[test]
fn home_and_relative_paths() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir(dir.path().join("opus")).unwrap();
    write(&dir.path().join("opus"), "x.de-en.tsv", b"a\tb\n");
    let mut c = corpus(CorpusFormat::Tsv);
    c.files = vec!["opus/../opus/x.*".into()];
    assert_eq!(
        names(&resolve_files(&c, dir.path()).unwrap()),
        ["x.de-en.tsv"]
    );
    // `~/` only where HOME is this process's to read; the test does not change it.
    if let Some(home) = std::env::var_os("HOME") {
        let home = PathBuf::from(home);
        if let Ok(rel) = dir.path().strip_prefix(&home) {
            c.files = vec![format!("~/{}/opus/*.tsv", rel.display())];
            assert_eq!(
                names(&resolve_files(&c, Path::new("/")).unwrap()),
                ["x.de-en.tsv"]
            );
        }
    }
}

#[test]
fn brace_expansion() {
    assert_eq!(expand_braces("a{b,c}d"), ["abd", "acd"]);
    assert_eq!(expand_braces("{a,b{1,2}}"), ["a", "b1", "b2"]);
    assert_eq!(expand_braces("x{y}z{"), ["x{y}z{"]);
    assert_eq!(expand_braces("{,x}.tsv"), [".tsv", "x.tsv"]);
}

#[test]
fn languages_from_file_names() {
    let p = |s: &str| pair_from_path(Path::new(s)).map(|(a, b)| format!("{a}>{b}"));
    assert_eq!(p("/d/opus.de-en.tsv.gz").as_deref(), Some("de>en"));
    assert_eq!(p("de-en.jsonl").as_deref(), Some("de>en"));
    assert_eq!(p("/d/train_de-en.tsv").as_deref(), Some("de>en"));
    assert_eq!(p("/d/wmt-zh_Hans-en.tsv").as_deref(), Some("zh_Hans>en"));
    assert_eq!(p("/d/opus_fra-eng/train.tsv").as_deref(), Some("fra>eng"));
    assert_eq!(p("/d/news-commentary.tsv"), None);
    assert_eq!(p("/d/DE-EN.tsv"), None);
    assert_eq!(
        p("/d/deen-en/x/train.tsv"),
        None,
        "only the file's own folder"
    );
}

#[test]
fn languages_from_recipe_name_or_error() {
    let dir = tempfile::tempdir().unwrap();
    let named = write(dir.path(), "opus.fr-en.tsv", b"Bonjour\tHello\n");
    let plain = write(dir.path(), "train.tsv", b"Hallo\tHello\n");
    let mut c = corpus(CorpusFormat::Tsv);
    assert_eq!(
        records(&c, std::slice::from_ref(&named)),
        [pair("Bonjour", "Hello", "fr", "en")]
    );
    let text = error(&c, std::slice::from_ref(&plain));
    assert!(text.contains("train.tsv"), "{text}");
    assert!(text.contains("pairs: [de-en]"), "{text}");
    c.pairs = vec!["de-en".into()];
    assert_eq!(records(&c, &[plain]), [pair("Hallo", "Hello", "de", "en")]);
}

#[test]
fn kind_defaults() {
    let mut c = corpus(CorpusFormat::Text);
    assert_eq!(kind_of(&c), CorpusKind::Text);
    c.format = Some(CorpusFormat::Jsonl);
    assert_eq!(kind_of(&c), CorpusKind::Pairs);
    c.kind = Some(CorpusKind::Nli);
    assert_eq!(kind_of(&c), CorpusKind::Nli);
}

#[test]
fn a_format_that_cannot_hold_the_kind_is_an_error() {
    let dir = tempfile::tempdir().unwrap();
    let f = write(dir.path(), "x.txt", b"a\n");
    let mut c = corpus(CorpusFormat::Tsv);
    c.kind = Some(CorpusKind::Text);
    let text = error(&c, &[f]);
    assert!(text.contains("`tsv` format cannot hold `text`"), "{text}");
}

#[test]
fn the_callback_stops_the_read() {
    let dir = tempfile::tempdir().unwrap();
    let f = write(dir.path(), "x.de-en.tsv", b"a\tb\nc\td\ne\tf\n");
    let c = corpus(CorpusFormat::Tsv);
    let mut seen = 0;
    let e = read(&c, &[f], &AtomicU64::new(0), &mut |_, p| {
        seen += 1;
        if p.line == 2 {
            Err("enough".into())
        } else {
            Ok(())
        }
    })
    .unwrap_err();
    assert_eq!(seen, 2);
    assert!(
        matches!(&e, UserCorpusError::Stopped(m) if m == "enough"),
        "{e:?}"
    );
}

#[test]
fn nli_labels() {
    assert_eq!(nli_label("Entailment"), Some(NliLabel::Entailment));
    assert_eq!(nli_label("NEUTRAL"), Some(NliLabel::Neutral));
    assert_eq!(nli_label("2"), Some(NliLabel::Contradiction));
    assert_eq!(nli_label("3"), None);
}

#[test]
fn converts_into_data_error() {
    let e: crate::DataError = UserCorpusError::Stopped("x".into()).into();
    assert_eq!(e.to_string(), "x");
}

#[cfg(not(feature = "parquet"))]
#[test]
fn parquet_without_the_feature_says_how_to_get_it() {
    let dir = tempfile::tempdir().unwrap();
    let f = write(dir.path(), "x.de-en.parquet", b"PAR1");
    let text = error(&corpus(CorpusFormat::Parquet), &[f]);
    assert!(text.contains("--features harness-data/parquet"), "{text}");
}
