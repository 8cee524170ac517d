//! Checking a merged recipe value: the structure (unknown keys, wrong types; every one of
//! them, via `de::collect`), then the meaning (ranges, required sections, references to
//! corpora, tasks, heads, datasets, benchmarks and tables). Each problem names the file,
//! the key path, the line when the text spells the key out, what was expected, and a
//! "did you mean" for misspelt names.

use super::de::{self, path_string, DeError, Path, Seg};
use super::error::Problem;
use super::load::Sources;
use super::schema::*;
use serde_yaml::Value;
use std::collections::BTreeSet;

mod model;

/// The names a recipe may refer to outside itself.
#[derive(Debug, Clone, Default)]
pub struct Known {
    /// Dataset names (`datasets.lock`). Empty: dataset names are not checked.
    pub datasets: Vec<String>,
    /// Benchmark names.
    pub benchmarks: Vec<String>,
    /// Benchmark group names (`all` included).
    pub groups: Vec<String>,
    /// Report table spec names.
    pub tables: Vec<String>,
    /// Checks an `evaluate:` entry's overrides against its benchmark (or every member of
    /// its group): `(key, problem)` pairs, the key a parameter name, `languages`, or empty
    /// for the entry as a whole. `None`: overrides are not checked.
    pub check_bench: Option<CheckBench>,
    /// Names every part of a training recipe that this build cannot train, `(key path,
    /// problem)` (the trainer sits above this crate and hands it in). `None`: not checked.
    pub check_trainable: Option<CheckTrainable>,
    /// The objectives a task may name, each with its own check (the trainer's
    /// `objectives::ALL`, handed in from above). Empty: objectives are not checked and their
    /// parameters stay as written.
    pub objectives: Vec<ObjectiveSchema>,
}

/// One objective as the recipe language sees it: its name and how to check its parameters.
#[derive(Debug, Clone, Copy)]
pub struct ObjectiveSchema {
    /// The name tasks give as `objective:`.
    pub name: &'static str,
    /// Whether it trains through `model.decoder` (a decoder no task uses is reported).
    pub uses_decoder: bool,
    /// Types and checks a task's `params` (see [`ObjectiveCheck`]).
    pub check: CheckObjective,
}

/// See [`ObjectiveSchema::check`]: `(params, recipe, task index)`.
pub type CheckObjective = fn(&Value, &Recipe, usize) -> ObjectiveCheck;

/// What an objective's check found.
#[derive(Debug, Clone, Default)]
pub struct ObjectiveCheck {
    /// The typed parameters written back, every default spelt out (`None` when they do not
    /// type).
    pub params: Option<Value>,
    /// Type errors, at key paths under `params`.
    pub errors: Vec<DeError>,
    /// Other problems (ranges, references to heads and tasks), at key paths under the task.
    pub problems: Vec<Finding>,
}

/// Replaces every task's `params` by its objective's typed parameters (defaults spelt out),
/// so that the resolved recipe and its fingerprint name every value. Problems are reported
/// by [`semantics`].
pub fn normalise_objectives(recipe: &mut Recipe, known: &Known) {
    let read = recipe.clone();
    for (i, t) in recipe.tasks.iter_mut().enumerate() {
        if let Some(o) = known.objectives.iter().find(|o| o.name == t.objective.name) {
            if let Some(params) = (o.check)(&t.objective.params, &read, i).params {
                t.objective.params = params;
            }
        }
    }
}

/// See [`Known::check_trainable`].
pub type CheckTrainable = fn(&Recipe) -> Vec<(Path, String)>;

/// See [`Known::check_bench`].
pub type CheckBench = fn(
    &str,
    &std::collections::BTreeMap<String, Value>,
    Option<&[String]>,
) -> Vec<(String, String)>;

pub use harness_core::suggest::suggest;

/// Problems found at key paths, before they are attributed to files and lines.
#[derive(Debug, Default)]
pub struct Findings {
    pub items: Vec<(Path, String, Option<String>)>,
}

impl Findings {
    fn add(&mut self, path: Path, msg: impl Into<String>) {
        self.items.push((path, msg.into(), None));
    }

    fn add_suggest(&mut self, path: Path, msg: impl Into<String>, suggestion: Option<String>) {
        self.items.push((path, msg.into(), suggestion));
    }

    /// Adds the problem of a reference to an unknown name, if it is one (see [`reference`]).
    fn refer(&mut self, path: Path, what: &str, name: &str, known: &[String], hint: &str) {
        if let Some(f) = reference(path, what, name, known, hint) {
            self.add_suggest(f.path, f.message, f.suggestion);
        }
    }

    /// Attributes every finding to its file and line.
    pub fn into_problems(self, sources: &Sources) -> Vec<Problem> {
        self.items
            .into_iter()
            .map(|(path, msg, suggestion)| {
                let (file, line, note) = sources.attribute(&path);
                Problem {
                    file,
                    line,
                    key: path_string(&path),
                    message: msg,
                    suggestion,
                    note,
                }
            })
            .collect()
    }
}

/// Types the merged value. Tasks are typed one by one so a broken task does not hide the
/// others. Returns the recipe built from what was well-formed, and the pruned paths.
pub fn structure(value: &Value, out: &mut Findings) -> (Option<Recipe>, Vec<Path>) {
    let mut v = value.clone();
    let mut tasks = Vec::new();
    let mut pruned = Vec::new();
    let mut tasks_ok = true;
    if let Some(Value::Sequence(items)) = v.get("tasks") {
        for (i, item) in items.iter().enumerate() {
            let prefix = [Seg::Key("tasks".into()), Seg::Index(i)];
            let c = de::collect::<Task>(item);
            for e in c.errors {
                structural(e.under(&prefix), out);
            }
            pruned.extend(c.pruned.into_iter().map(|p| [prefix.to_vec(), p].concat()));
            match c.value {
                Some(t) => tasks.push(t),
                None => {
                    tasks_ok = false;
                    pruned.push(prefix.to_vec());
                }
            }
        }
        if let Value::Mapping(m) = &mut v {
            m.insert("tasks".into(), Value::Sequence(Vec::new()));
        }
    }
    let c = de::collect::<Recipe>(&v);
    for e in c.errors {
        structural(e, out);
    }
    pruned.extend(c.pruned);
    let recipe = c.value.map(|mut r| {
        r.tasks = tasks;
        r
    });
    if !tasks_ok {
        pruned.push(vec![Seg::Key("tasks".into())]);
    }
    // `encodr:` makes `encoder` missing; the did-you-mean on the typo says it all.
    let typos: Vec<Path> = out
        .items
        .iter()
        .filter(|(_, msg, _)| msg.starts_with("unknown key"))
        .filter_map(|(path, _, sugg)| {
            let mut p = path[..path.len().saturating_sub(1)].to_vec();
            p.push(Seg::Key(sugg.clone()?));
            Some(p)
        })
        .collect();
    out.items.retain(|(path, msg, _)| {
        !(msg.starts_with("missing required key") && typos.contains(path))
    });
    (recipe, pruned)
}

/// Turns serde's wording into the recipe's: keys, not fields; plain words for types.
fn structural(e: DeError, out: &mut Findings) {
    let msg = e.msg.clone();
    if let Some(rest) = msg.strip_prefix("unknown field `") {
        let key = rest.split('`').next().unwrap_or_default();
        let mut expected = de::expected_names(&msg);
        if e.path.len() == 1 && expected.is_empty() {
            expected = TOP_LEVEL_KEYS.iter().map(|s| s.to_string()).collect();
        }
        let cands: Vec<&str> = expected.iter().map(String::as_str).collect();
        let suggestion = suggest(key, &cands);
        out.add_suggest(
            e.path,
            format!("unknown key `{key}`; expected one of {}", list(&cands)),
            suggestion,
        );
    } else if let Some(rest) = msg.strip_prefix("unknown variant `") {
        let name = rest.split('`').next().unwrap_or_default();
        let expected = de::expected_names(&msg);
        let cands: Vec<&str> = expected.iter().map(String::as_str).collect();
        out.add_suggest(
            e.path,
            format!("unknown value `{name}`; expected one of {}", list(&cands)),
            suggest(name, &cands),
        );
    } else if let Some(f) = de::missing_field(&msg) {
        let mut path = e.path;
        path.push(Seg::Key(f.clone()));
        out.add(path, format!("missing required key `{f}`"));
    } else {
        out.add(e.path, plain_types(&msg));
    }
}

fn plain_types(msg: &str) -> String {
    let m = msg
        .replace("invalid type: ", "wrong type: found ")
        .replace("invalid value: ", "out of range: ")
        .replace("integer `", "`")
        .replace("floating point `", "`");
    [
        ("expected u32", "expected a whole number ≥ 0"),
        ("expected u64", "expected a whole number ≥ 0"),
        ("expected f64", "expected a number"),
        ("expected a string", "expected a string"),
        ("expected a sequence", "expected a list"),
        ("expected a boolean", "expected true or false"),
    ]
    .iter()
    .fold(m, |m, (a, b)| m.replace(a, b))
}

fn list(names: &[&str]) -> String {
    names
        .iter()
        .map(|n| format!("`{n}`"))
        .collect::<Vec<_>>()
        .join(", ")
}

/// The checks of a corpus of the user's own files (`files`, `format`, `kind`, `fields`).
fn user_corpus(c: &crate::schema::Corpus, base: &Path, out: &mut Findings) {
    use crate::schema::{CorpusFormat, CorpusKind};
    let Some(format) = c.format else {
        out.add(
            with(base, &[k("format")]),
            "missing: how `files` are laid out: `tsv`, `moses`, `jsonl`, `parquet` or `text`",
        );
        return;
    };
    let kind = c.kind.unwrap_or(match format {
        CorpusFormat::Text => CorpusKind::Text,
        _ => CorpusKind::Pairs,
    });
    let fits = match format {
        CorpusFormat::Text => kind == CorpusKind::Text,
        CorpusFormat::Moses => matches!(kind, CorpusKind::Pairs | CorpusKind::Conversation),
        _ => kind != CorpusKind::Text,
    };
    if !fits {
        out.add(
            with(base, &[k("kind")]),
            format!(
                "the `{}` format cannot hold `{}` examples ({})",
                format.name(),
                kind.name(),
                match format {
                    CorpusFormat::Text => "plain text holds running text: `kind: text`",
                    CorpusFormat::Moses => "Moses files hold `pairs` or `conversation` turns",
                    _ => "running text is read from the `text` format",
                }
            ),
        );
    }
    let mut allowed: Vec<&str> = kind.parts().to_vec();
    if kind == CorpusKind::Pairs {
        allowed.extend(["source_lang", "target_lang"]);
    }
    for (field, column) in &c.fields {
        if matches!(format, CorpusFormat::Moses | CorpusFormat::Text) {
            out.add(
                with(base, &[k("fields"), k(field)]),
                format!(
                    "the `{}` format has no fields to name (one sentence per line); remove `fields`",
                    format.name()
                ),
            );
            continue;
        }
        if !allowed.contains(&field.as_str()) {
            let known: Vec<String> = allowed.iter().map(|s| s.to_string()).collect();
            if let Some(f) = reference(
                with(base, &[k("fields"), k(field)]),
                &format!("part of a `{}` example", kind.name()),
                field,
                &known,
                "",
            ) {
                out.add_suggest(f.path, f.message, f.suggestion);
            }
        } else if format == CorpusFormat::Tsv && column.parse::<usize>().is_err() {
            out.add(
                with(base, &[k("fields"), k(field)]),
                format!("`{column}`: a tab-separated file's fields are 0-based column numbers"),
            );
        }
    }
    if c.pairs.len() > 1 {
        out.add(
            with(base, &[k("pairs")]),
            "a corpus of files holds one language pair (`pairs: [de-en]`), or takes its pairs from the file names; declare one corpus per pair",
        );
    }
    if c.files.iter().any(|f| f.trim().is_empty()) {
        out.add(with(base, &[k("files")]), "an empty path");
    }
}

fn k(s: &str) -> Seg {
    Seg::Key(s.to_string())
}

fn p(segs: &[&str]) -> Path {
    segs.iter().map(|s| k(s)).collect()
}

fn with(base: &Path, more: &[Seg]) -> Path {
    let mut p = base.clone();
    p.extend_from_slice(more);
    p
}

/// A problem at a key path, with a suggestion (a did-you-mean) when there is one.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Finding {
    pub path: Path,
    pub message: String,
    pub suggestion: Option<String>,
}

impl Finding {
    /// A problem without a suggestion.
    pub fn new(path: Path, message: impl Into<String>) -> Self {
        Finding {
            path,
            message: message.into(),
            suggestion: None,
        }
    }
}

/// The problem of a reference `name` to a `what` (corpus, head, task…) that is not among
/// `known`: what is defined, and the nearest name; `None` when `name` is known. `hint` says
/// where such things are defined (` under `model.heads``).
pub fn reference(
    path: Path,
    what: &str,
    name: &str,
    known: &[String],
    hint: &str,
) -> Option<Finding> {
    if known.iter().any(|k| k == name) {
        return None;
    }
    let cands: Vec<&str> = known.iter().map(String::as_str).collect();
    let suggestion = suggest(name, &cands);
    let defined = if cands.is_empty() {
        format!(" (none are defined{hint})")
    } else if cands.len() <= 12 || suggestion.is_none() {
        format!(" (defined: {})", list(&cands))
    } else {
        String::new()
    };
    Some(Finding {
        path,
        message: format!("`{name}` is not a {what}{defined}"),
        suggestion,
    })
}

/// The encoders tasks may name: `encoder` and the keys of `model.encoders`.
pub fn encoder_names(recipe: &Recipe) -> Vec<String> {
    let mut names = vec!["encoder".to_string()];
    if let Some(m) = &recipe.model {
        names.extend(m.encoders.keys().cloned());
    }
    names
}

/// The parameter groups a stage may freeze: each encoder and its embeddings, the decoder,
/// each head (`heads.<name>`).
pub fn parameter_groups(recipe: &Recipe) -> Vec<String> {
    let mut groups = Vec::new();
    for e in encoder_names(recipe) {
        groups.push(format!("{e}.embeddings"));
        groups.push(e);
    }
    if let Some(m) = &recipe.model {
        if m.decoder.is_some() {
            groups.push("decoder".into());
        }
        groups.extend(m.heads.keys().map(|h| format!("heads.{h}")));
    }
    groups
}

/// Checks of meaning on a typed recipe. `raw` is the merged value (names defined there
/// count as defined even when their definition was broken, to avoid knock-on errors);
/// `pruned` lists keys removed after structural errors (their absence is not reported).
pub fn semantics(recipe: &Recipe, raw: &Value, pruned: &[Path], known: &Known, out: &mut Findings) {
    let mut bench_names: Vec<String> = known.benchmarks.clone();
    bench_names.extend(known.groups.iter().cloned());
    let cx = Context {
        recipe,
        pruned,
        known,
        corpora: defined_names(raw, &["data", "corpora"]),
        bench_names,
    };
    run_name(&cx, out);
    if let Some(tok) = &recipe.data.tokenizer {
        tokenizer(tok, &cx, out);
    }
    for (name, c) in &recipe.data.corpora {
        corpus(name, c, &cx, out);
    }
    match &recipe.model {
        None if !cx.was_pruned(&p(&["model"])) => out.add(
            p(&["model"]),
            "missing required key `model` (with at least `encoder: {kind: ...}`)",
        ),
        None => {}
        Some(m) => model::check(m, recipe, known, out),
    }
    tasks(&cx, out);
    stages(&cx, out);
    objectives(&cx, out);
    untrainable(&cx, out);
    training_sections(&cx, out);
    evaluate(&cx, out);
    report(&cx, out);
}

/// What the checks of [`semantics`] read besides the part they check.
struct Context<'a> {
    recipe: &'a Recipe,
    /// Keys removed after structural errors.
    pruned: &'a [Path],
    known: &'a Known,
    /// The corpora defined under `data.corpora` in the merged value.
    corpora: Vec<String>,
    /// Benchmark and group names.
    bench_names: Vec<String>,
}

impl Context<'_> {
    /// Whether `path` was removed after a structural error, or holds or lies in such a key
    /// (its absence or state is then not reported again).
    fn was_pruned(&self, path: &Path) -> bool {
        self.pruned
            .iter()
            .any(|q| q.starts_with(path) || path.starts_with(q))
    }
}

/// The keys of the mapping at `section` in `raw` (empty when there is none).
fn defined_names(raw: &Value, section: &[&str]) -> Vec<String> {
    let mut v = raw;
    for s in section {
        match v.get(*s) {
            Some(x) => v = x,
            None => return Vec::new(),
        }
    }
    match v {
        Value::Mapping(m) => m
            .keys()
            .filter_map(|k| k.as_str().map(String::from))
            .collect(),
        _ => Vec::new(),
    }
}

/// `name`: present, and fit to name the run directory.
fn run_name(cx: &Context, out: &mut Findings) {
    let name = &cx.recipe.name;
    let name_ok = !name.is_empty()
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_' || c == '.');
    if name.is_empty() && !cx.was_pruned(&p(&["name"])) {
        out.add(
            p(&["name"]),
            "missing required key `name` (it names the run directory)",
        );
    } else if !name_ok && !name.is_empty() {
        out.add(
            p(&["name"]),
            format!(
                "`{}`: use letters, digits, `-`, `_`, `.` only (it names the run directory)",
                name
            ),
        );
    }
}

/// `data.tokenizer`: its vocabulary, the corpora it trains on, and the settings only a
/// `words` tokenizer has.
fn tokenizer(tok: &Tokenizer, cx: &Context, out: &mut Findings) {
    let base = p(&["data", "tokenizer"]);
    match (tok.kind, tok.vocab) {
        (TokenizerKind::Pretrained, Some(_)) => out.add(
            with(&base, &[k("vocab")]),
            "a `pretrained` tokenizer has its own vocabulary; remove `vocab`",
        ),
        (TokenizerKind::Pretrained, None) => {}
        (_, None) => out.add(
            with(&base, &[k("vocab")]),
            "missing required key `vocab` (vocabulary size, ≥ 1)",
        ),
        (_, Some(0)) => out.add(with(&base, &[k("vocab")]), "must be ≥ 1, found 0"),
        _ => {}
    }
    for (i, c) in tok.train_on.iter().enumerate() {
        out.refer(
            with(&base, &[k("train_on"), Seg::Index(i)]),
            "corpus",
            c,
            &cx.corpora,
            " under `data.corpora`",
        );
    }
    for (i, n) in tok.char_ngrams.iter().enumerate() {
        if *n == 0 {
            out.add(
                with(&base, &[k("char_ngrams"), Seg::Index(i)]),
                "n-gram order must be ≥ 1",
            );
        }
    }
    for (key, v) in [
        ("hash_buckets", tok.hash_buckets),
        ("oov_buckets", tok.oov_buckets),
    ] {
        if v == Some(0) {
            out.add(with(&base, &[k(key)]), "must be ≥ 1, found 0");
        }
    }
    if tok.kind != TokenizerKind::Words {
        for (key, set) in [
            ("char_ngrams", !tok.char_ngrams.is_empty()),
            ("hash_buckets", tok.hash_buckets.is_some()),
            ("oov_buckets", tok.oov_buckets.is_some()),
        ] {
            if set {
                out.add(
                    with(&base, &[k(key)]),
                    format!("only a `words` tokenizer has `{key}`; remove it or use `kind: words`"),
                );
            }
        }
    } else if !tok.char_ngrams.is_empty() && tok.hash_buckets.is_none() {
        out.add(
            with(&base, &[k("hash_buckets")]),
            "missing: `char_ngrams` are hashed into `hash_buckets` ids; set it (multilingual USE: 200000)",
        );
    }
}

/// One corpus under `data.corpora`: a shipped `dataset` or the user's own `files`, its
/// language pairs, what it excludes, its size cap.
fn corpus(name: &str, c: &Corpus, cx: &Context, out: &mut Findings) {
    let base = p(&["data", "corpora", name]);
    match (&c.dataset, c.files.is_empty()) {
        (Some(d), true) => shipped_corpus(d, c, &base, cx, out),
        (Some(_), false) => out.add(
            base.clone(),
            "give either `dataset` (a shipped dataset) or `files` (your own), not both",
        ),
        (None, true) => out.add(
            base.clone(),
            "missing: `dataset` (a name in datasets.lock) or `files` (your own files, with `format`)",
        ),
        (None, false) => user_corpus(c, &base, out),
    }
    for (i, pair) in c.pairs.iter().enumerate() {
        let ok = pair
            .split_once('-')
            .is_some_and(|(a, b)| !a.is_empty() && !b.is_empty());
        if !ok {
            out.add(
                with(&base, &[k("pairs"), Seg::Index(i)]),
                format!("`{pair}`: expected a language pair spelled like the dataset's folders (`deu-eng`)"),
            );
        }
    }
    for (i, x) in c.exclude.iter().enumerate() {
        let mut cands = cx.bench_names.clone();
        cands.extend(cx.known.datasets.iter().cloned());
        out.refer(
            with(&base, &[k("exclude"), Seg::Index(i)]),
            "benchmark, group or dataset",
            x,
            &cands,
            "",
        );
    }
    if c.max_examples == Some(0) {
        out.add(with(&base, &[k("max_examples")]), "must be ≥ 1, found 0");
    }
}

/// The checks of a corpus that names a shipped `dataset`: a known name, the splits,
/// languages and pairs its loader reads, and none of the keys that describe a corpus's own
/// files.
fn shipped_corpus(dataset: &str, c: &Corpus, base: &Path, cx: &Context, out: &mut Findings) {
    // The splits, languages and pairs its loader reads (the loader refuses the same).
    if let Some(r) = crate::corpus_rules::corpus_refusal(c) {
        out.add(with(base, &r.at), r.to_string());
    }
    if !cx.known.datasets.is_empty() {
        out.refer(
            with(base, &[k("dataset")]),
            "known dataset",
            dataset,
            &cx.known.datasets,
            "",
        );
    }
    for key in ["format", "kind", "fields", "on_bad_line"] {
        let given = match key {
            "format" => c.format.is_some(),
            "kind" => c.kind.is_some(),
            "fields" => !c.fields.is_empty(),
            _ => c.on_bad_line != crate::schema::OnBadLine::Error,
        };
        if given {
            out.add(
                with(base, &[k(key)]),
                format!("`{key}` describes a corpus's own `files`; a shipped `dataset` has its own layout (remove it)"),
            );
        }
    }
}

/// `tasks`: unique names, their corpus and encoders defined, weight, batch and stage in
/// range.
fn tasks(cx: &Context, out: &mut Findings) {
    let recipe = cx.recipe;
    let mut seen = BTreeSet::new();
    for (i, t) in recipe.tasks.iter().enumerate() {
        let base = vec![k("tasks"), Seg::Index(i)];
        if t.name.is_empty() {
            out.add(with(&base, &[k("name")]), "must not be empty");
        } else if !seen.insert(t.name.clone()) {
            out.add(
                with(&base, &[k("name")]),
                format!("task `{}` is defined twice", t.name),
            );
        }
        out.refer(
            with(&base, &[k("corpus")]),
            "corpus",
            &t.corpus,
            &cx.corpora,
            " under `data.corpora`",
        );
        if !(t.weight > 0.0 && t.weight.is_finite()) {
            out.add(
                with(&base, &[k("weight")]),
                format!("must be > 0, found {}", t.weight),
            );
        }
        if t.batch_size == Some(0) {
            out.add(with(&base, &[k("batch_size")]), "must be ≥ 1, found 0");
        }
        if t.stage == 0 {
            out.add(with(&base, &[k("stage")]), "stages count from 1");
        }
        let encoders = encoder_names(recipe);
        for (key, name) in [("encoder", &t.encoder), ("reads", &t.reads)] {
            if let Some(name) = name {
                out.refer(
                    with(&base, &[k(key)]),
                    "encoder",
                    name,
                    &encoders,
                    " (`encoder` and the keys of `model.encoders`)",
                );
            }
        }
    }
}

/// `stages`: each one some task trains in, its settings in range, its frozen groups real.
fn stages(cx: &Context, out: &mut Findings) {
    let recipe = cx.recipe;
    let used: BTreeSet<u32> = recipe.tasks.iter().map(|t| t.stage).collect();
    for (n, stage) in &recipe.stages {
        let base = vec![k("stages"), k(&n.to_string())];
        if !used.contains(n) && !recipe.tasks.is_empty() {
            out.add(base.clone(), format!("no task trains in stage {n}"));
        }
        if stage.steps == Some(0) && stage.epochs.is_none() {
            out.add(with(&base, &[k("steps")]), "must be ≥ 1, found 0");
        }
        if stage.epochs == Some(0) {
            out.add(with(&base, &[k("epochs")]), "must be ≥ 1, found 0");
        }
        if let Some(lr) = stage.lr {
            if !(lr > 0.0 && lr.is_finite()) {
                out.add(with(&base, &[k("lr")]), format!("must be > 0, found {lr}"));
            }
        }
        let encoders = encoder_names(recipe);
        for (target, source) in &stage.init {
            for (name, what) in [
                (target, "encoder to initialise"),
                (source, "encoder to copy"),
            ] {
                out.refer(
                    with(&base, &[k("init"), k(target)]),
                    what,
                    name,
                    &encoders,
                    " (`encoder` and the keys of `model.encoders`)",
                );
            }
            if target == source {
                out.add(
                    with(&base, &[k("init"), k(target)]),
                    "an encoder cannot start as a copy of itself",
                );
            }
        }
        let groups = parameter_groups(recipe);
        for (i, g) in stage.frozen.iter().enumerate() {
            out.refer(
                with(&base, &[k("frozen"), Seg::Index(i)]),
                "parameter group",
                g,
                &groups,
                "",
            );
        }
    }
}

/// Each task's objective: a known one, its parameters checked by its own definition
/// ([`Known::objectives`]; nothing is checked when there are none).
fn objectives(cx: &Context, out: &mut Findings) {
    let known = cx.known;
    if known.objectives.is_empty() {
        return;
    }
    let names: Vec<&str> = known.objectives.iter().map(|o| o.name).collect();
    for (i, t) in cx.recipe.tasks.iter().enumerate() {
        let at = vec![k("tasks"), Seg::Index(i)];
        match known.objectives.iter().find(|o| o.name == t.objective.name) {
            None => out.add_suggest(
                with(&at, &[k("objective")]),
                format!(
                    "unknown objective `{}`; expected one of {}",
                    t.objective.name,
                    list(&names)
                ),
                suggest(&t.objective.name, &names),
            ),
            Some(o) => {
                let checked = (o.check)(&t.objective.params, cx.recipe, i);
                for e in checked.errors {
                    structural(e.under(&with(&at, &[k("params")])), out);
                }
                for f in checked.problems {
                    out.add_suggest(with(&at, &f.path), f.message, f.suggestion);
                }
            }
        }
    }
}

/// What this build cannot train ([`Known::check_trainable`]): each part, not the first.
fn untrainable(cx: &Context, out: &mut Findings) {
    if let Some(check) = cx.known.check_trainable {
        for (path, message) in check(cx.recipe) {
            if !cx.was_pruned(&path) {
                out.add(path, message);
            }
        }
    }
}

/// An evaluation recipe, or a training one: a trained encoder needs `tasks`, and a recipe
/// with tasks needs `optimizer` and `train` (then checked).
fn training_sections(cx: &Context, out: &mut Findings) {
    let recipe = cx.recipe;
    let trainable_without_tasks = recipe
        .model
        .as_ref()
        .is_some_and(|m| !matches!(m.encoder, Encoder::Pretrained(_) | Encoder::Hashed(_)));
    if recipe.tasks.is_empty() && trainable_without_tasks && !cx.was_pruned(&p(&["tasks"])) {
        let kind = recipe.model.as_ref().map_or("", |m| m.encoder.kind());
        out.add(
            p(&["tasks"]),
            format!("no tasks: a `{kind}` encoder must be trained; add `tasks`, or use a `pretrained` or `hashed` encoder for an evaluation-only recipe"),
        );
    }
    if !recipe.tasks.is_empty() || cx.was_pruned(&p(&["tasks"])) {
        if recipe.optimizer.is_none() && !cx.was_pruned(&p(&["optimizer"])) {
            out.add(
                p(&["optimizer"]),
                "missing required key `optimizer` (a recipe with tasks trains)",
            );
        }
        if recipe.train.is_none() && !cx.was_pruned(&p(&["train"])) {
            out.add(
                p(&["train"]),
                "missing required key `train` (a recipe with tasks trains)",
            );
        }
    }
    if let Some(o) = &recipe.optimizer {
        optimizer(o, out);
    }
    if let Some(t) = &recipe.train {
        train(t, recipe, &cx.bench_names, out);
    }
}

/// `evaluate`: each entry a known benchmark or group, its overrides checked by
/// [`Known::check_bench`].
fn evaluate(cx: &Context, out: &mut Findings) {
    for (i, b) in cx.recipe.evaluate.iter().enumerate() {
        let at = vec![k("evaluate"), Seg::Index(i)];
        let known_name = cx.bench_names.contains(&b.name);
        let name_at = if b.has_overrides() {
            with(&at, &[k("name")])
        } else {
            at.clone()
        };
        out.refer(name_at, "benchmark or group", &b.name, &cx.bench_names, "");
        if known_name && b.has_overrides() {
            if let Some(check) = cx.known.check_bench {
                for (key, msg) in check(&b.name, &b.params, b.languages.as_deref()) {
                    let path = match key.as_str() {
                        "" => at.clone(),
                        "languages" => with(&at, &[k("languages")]),
                        param => with(&at, &[k("params"), k(param)]),
                    };
                    out.add(path, msg);
                }
            }
        }
    }
}

/// `report`: each a known report table.
fn report(cx: &Context, out: &mut Findings) {
    for (i, t) in cx.recipe.report.iter().enumerate() {
        out.refer(
            vec![k("report"), Seg::Index(i)],
            "report table",
            t,
            &cx.known.tables,
            " in `benchmarks/tables/`",
        );
    }
}

/// > 0 and finite (false for NaN).
fn positive(v: f64) -> bool {
    v > 0.0 && v.is_finite()
}

/// ≥ 0 and finite (false for NaN).
fn non_negative(v: f64) -> bool {
    v >= 0.0 && v.is_finite()
}

fn optimizer(o: &Optimizer, out: &mut Findings) {
    let f = |key: &str| p(&["optimizer", key]);
    if !(o.lr > 0.0 && o.lr.is_finite()) {
        out.add(
            f("lr"),
            format!("learning rate must be > 0, found {}", o.lr),
        );
    }
    for (i, b) in o.betas.iter().enumerate() {
        if !(0.0..1.0).contains(b) {
            out.add(
                with(&f("betas"), &[Seg::Index(i)]),
                format!("must be in [0, 1), found {b}"),
            );
        }
    }
    if !positive(o.eps) {
        out.add(f("eps"), format!("must be > 0, found {}", o.eps));
    }
    if !non_negative(o.weight_decay) {
        out.add(
            f("weight_decay"),
            format!("must be ≥ 0, found {}", o.weight_decay),
        );
    }
    if let Some(c) = o.grad_clip {
        if !positive(c) {
            out.add(f("grad_clip"), format!("must be > 0, found {c}"));
        }
    }
    if !(0.0..1.0).contains(&o.dropout) {
        out.add(
            f("dropout"),
            format!("dropout must be in [0, 1), found {}", o.dropout),
        );
    }
    if !positive(o.embedding_grad_scale) {
        out.add(
            f("embedding_grad_scale"),
            format!("must be > 0, found {}", o.embedding_grad_scale),
        );
    }
    match (o.schedule.kind, o.schedule.decay) {
        (ScheduleKind::Exponential, None) => out.add(
            p(&["optimizer", "schedule", "decay"]),
            "an `exponential` schedule needs `decay` (factor per epoch, in (0, 1])",
        ),
        (_, Some(d)) if !(d > 0.0 && d <= 1.0) => out.add(
            p(&["optimizer", "schedule", "decay"]),
            format!("must be in (0, 1], found {d}"),
        ),
        _ => {}
    }
}

fn train(t: &Train, recipe: &Recipe, bench_names: &[String], out: &mut Findings) {
    let f = |key: &str| p(&["train", key]);
    match (t.steps, t.epochs) {
        // Each layer (recipe, profile, `--set`) may set one: name how to drop the other.
        (Some(_), Some(_)) => out.add(
            f("epochs"),
            "give `steps` or `epochs`, not both: set the other to null \
             (`--set train.epochs=null` or `--set train.steps=null`)",
        ),
        (None, None) => out.add(
            p(&["train"]),
            "give the training length: `steps` or `epochs`",
        ),
        // `steps: 0` is allowed: the initialised model is checkpointed and evaluated as it
        // is (the untrained baseline of the same architecture).
        (_, Some(0)) => out.add(f("epochs"), "must be ≥ 1, found 0"),
        _ => {}
    }
    if t.batch_tokens.is_some() && t.batch_size.is_some() {
        out.add(
            f("batch_size"),
            "give `batch_tokens` or `batch_size`, not both: set the other to null \
             (`--set train.batch_size=null` or `--set train.batch_tokens=null`)",
        );
    }
    let every_task_sized =
        !recipe.tasks.is_empty() && recipe.tasks.iter().all(|t| t.batch_size.is_some());
    if t.batch_tokens.is_none() && t.batch_size.is_none() && !every_task_sized {
        out.add(
            p(&["train"]),
            "give the batch: `batch_tokens` or `batch_size` (or `batch_size` on every task)",
        );
    }
    for (key, v) in [
        ("batch_tokens", t.batch_tokens.map(u64::from)),
        ("batch_size", t.batch_size.map(u64::from)),
        ("eval_every", t.eval_every),
        ("checkpoint_every", t.checkpoint_every),
        ("max_len", Some(u64::from(t.max_len))),
    ] {
        if v == Some(0) {
            out.add(f(key), "must be ≥ 1, found 0");
        }
    }
    if let Some(m) = &t.best_metric {
        let bench = m.split('.').next().unwrap_or_default();
        if !bench_names.iter().any(|b| b == bench) {
            let cands: Vec<&str> = bench_names.iter().map(String::as_str).collect();
            out.add_suggest(
                f("best_metric"),
                format!("`{m}`: expected `<benchmark>` or `<benchmark>.<metric>`, and `{bench}` is not a benchmark"),
                suggest(bench, &cands),
            );
        }
    }
    if let Some(m) = &t.best_per_language {
        let (bench, path) = m.split_once('.').unwrap_or((m.as_str(), ""));
        if path.is_empty() || !bench_names.iter().any(|b| b == bench) {
            let cands: Vec<&str> = bench_names.iter().map(String::as_str).collect();
            out.add_suggest(
                f("best_per_language"),
                format!("`{m}`: expected `<benchmark>.<scores path>` to a score per language (e.g. `xnli-dev.accuracy`)"),
                suggest(bench, &cands),
            );
        }
        let languages = recipe.model.as_ref().map(|m| &m.languages);
        if languages.is_none_or(|l| l.is_empty()) {
            out.add(
                f("best_per_language"),
                "selects an encoder per language, and `model.languages` gives none: add `model.languages: {fr: fr, ...}` or drop `best_per_language`",
            );
        }
        // An encoder read by several languages has no one language to be selected on.
        let mut seen = std::collections::BTreeMap::new();
        for (language, encoder) in languages.into_iter().flatten() {
            if let Some(first) = seen.insert(encoder, language) {
                out.add(
                    f("best_per_language"),
                    format!("encoder `{encoder}` reads both `{first}` and `{language}`, so it has no one language to be selected on: give each language its own encoder, or drop `best_per_language`"),
                );
            }
        }
    }
}
