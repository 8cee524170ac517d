//! Resolving a recipe at the YAML-value level: `base:` files (relative to the file that
//! names them), then the recipe, then one profile's `dotted.key: value` overrides, then
//! `--set key=value` overrides. Mappings merge key by key; anything else (lists included)
//! replaces. Only the merged value is typed (`check.rs`), so every layer can override any
//! key, and an error can still be traced back to the file and line that set it
//! ([`Sources::attribute`]).

use super::de::{path_string, Path, Seg};
use super::error::Problem;
use serde::de::{self, DeserializeSeed, IgnoredAny, MapAccess, SeqAccess, Visitor};
use serde_yaml::{Mapping, Value};
use std::fmt;
use std::path::{Path as FsPath, PathBuf};

/// The largest recipe file read (bytes).
pub const MAX_RECIPE_BYTES: u64 = 1 << 20;

/// One YAML file of the chain, recipe first, then its base, its base's base...
#[derive(Debug, Clone)]
pub struct Layer {
    pub path: PathBuf,
    pub text: String,
}

/// One `--set key=value` (or profile entry), with where it landed.
#[derive(Debug, Clone)]
pub struct Override {
    /// As written: `train.steps=100`, or the profile key.
    pub raw: String,
    /// The dotted key as written.
    pub key: String,
    pub value: Value,
    /// The concrete path it was applied at (sequence items by index), once applied.
    pub applied: Option<Path>,
}

/// Everything a resolved value came from.
#[derive(Debug, Clone, Default)]
pub struct Sources {
    pub layers: Vec<Layer>,
    /// The selected profile and its overrides.
    pub profile: Option<(String, Vec<Override>)>,
    pub sets: Vec<Override>,
}

/// The file that names a recipe file, and with which key: `base:` in a recipe, `recipe:`
/// in a grid. A file named this way may be anything the naming file's author chose
/// (`base: /etc/shadow`), so until it reads as a recipe its text is never shown: its
/// problems give the key, the path, the line and column, never a line of the file.
#[derive(Debug, Clone, PartialEq)]
pub struct NamedBy {
    /// The file that names it.
    pub file: PathBuf,
    /// The line of the key there, when known.
    pub line: Option<usize>,
    /// The key (`base`, `recipe`).
    pub key: String,
}

impl NamedBy {
    fn at(&self) -> String {
        match self.line {
            Some(l) => format!("{}:{l}", self.file.display()),
            None => self.file.display().to_string(),
        }
    }
}

/// Reads `path` and its `base:` chain and merges them (base first). Problems name the file.
pub fn read_chain(path: &FsPath) -> Result<(Value, Vec<Layer>), Vec<Problem>> {
    read_chain_from(path, None, None)
}

/// [`read_chain`] with the text of `path` itself given rather than read (a recipe held in
/// memory: the fuzz targets, an editor); the files its `base:` names are read from disk,
/// relative to `path`'s folder as always.
pub fn read_chain_text(path: &FsPath, text: &str) -> Result<(Value, Vec<Layer>), Vec<Problem>> {
    read_chain_from(path, Some(text), None)
}

/// [`read_chain`] of a recipe that another file names (a grid's `recipe:`): read as
/// carefully as a `base:` (see [`NamedBy`]).
pub fn read_chain_named(
    path: &FsPath,
    named_by: &NamedBy,
) -> Result<(Value, Vec<Layer>), Vec<Problem>> {
    read_chain_from(path, None, Some(named_by.clone()))
}

fn read_chain_from(
    path: &FsPath,
    mut first: Option<&str>,
    named: Option<NamedBy>,
) -> Result<(Value, Vec<Layer>), Vec<Problem>> {
    let mut layers = Vec::new();
    let mut seen: Vec<PathBuf> = Vec::new();
    let mut values = Vec::new();
    let mut next = Some(ChainFile {
        path: path.to_path_buf(),
        named_by: named,
    });
    while let Some(file) = next.take() {
        let canon = std::fs::canonicalize(&file.path).unwrap_or_else(|_| file.path.clone());
        if seen.contains(&canon) {
            return Err(file.loops_back());
        }
        seen.push(canon);
        let text = file.read_text(first.take())?;
        let mut map = file.parse(&text)?;
        next = file.base(&text, &mut map)?;
        layers.push(Layer {
            path: file.path,
            text,
        });
        values.push(Value::Mapping(map));
    }
    let mut merged = Value::Mapping(Mapping::new());
    for v in values.into_iter().rev() {
        merge(&mut merged, v);
    }
    Ok((merged, layers))
}

/// One file of a `base:` chain as it is read: its path, and the file and key that named
/// it (none for the recipe the chain starts from).
struct ChainFile {
    path: PathBuf,
    named_by: Option<NamedBy>,
}

impl ChainFile {
    /// The problem of a chain that comes back to this file, blamed on the key that named it.
    fn loops_back(&self) -> Vec<Problem> {
        let (file, line) = self
            .named_by
            .as_ref()
            .map_or((self.path.clone(), None), |n| (n.file.clone(), n.line));
        vec![Problem::new(
            file,
            line,
            "base",
            format!("`base:` chain loops back to {}", self.path.display()),
        )]
    }

    /// A problem reading the file, blamed on the key that named it, if any.
    fn unreadable(&self, message: String) -> Vec<Problem> {
        let (file, line, key) = match &self.named_by {
            Some(n) => (n.file.clone(), n.line, n.key.as_str()),
            None => (self.path.clone(), None, ""),
        };
        vec![Problem::new(file, line, key, message)]
    }

    /// The file's text: `given` when the caller holds it, else read from disk. A recipe is
    /// a page of YAML; a huge file is a mistake (or an attack on the parser's memory: a
    /// 50 MB recipe took 1.4 GB), refused before it is read.
    fn read_text(&self, given: Option<&str>) -> Result<String, Vec<Problem>> {
        let p = &self.path;
        let text = match given {
            Some(t) if t.len() as u64 > MAX_RECIPE_BYTES => Err(
                harness_core::fsutil::CappedReadError::TooLarge(MAX_RECIPE_BYTES),
            ),
            Some(t) => Ok(t.to_string()),
            None => {
                // A named file must be a plain file: a FIFO would block the read forever, a
                // device yields whatever it yields. (The recipe a user names on the command
                // line may be a pipe: `harness validate <(...)`.)
                if let Some(n) = &self.named_by {
                    match std::fs::metadata(p) {
                        Ok(m) if !m.is_file() => {
                            return Err(self.unreadable(format!(
                                "{} is not a regular file (a folder, FIFO or device) and was not read. Fix: make `{}:` name a recipe file",
                                p.display(),
                                n.key
                            )))
                        }
                        _ => {}
                    }
                }
                harness_core::fsutil::read_text_capped(p, MAX_RECIPE_BYTES)
            }
        };
        match text {
            Ok(t) => Ok(t),
            Err(harness_core::fsutil::CappedReadError::TooLarge(_)) => Err(self.unreadable(format!(
                "{} holds more than {MAX_RECIPE_BYTES} bytes, the most a recipe may have (1 MiB): is it the right file?",
                p.display()
            ))),
            Err(e) => {
                let fix = match &self.named_by {
                    Some(n) => format!("make `{}:` name a recipe file (UTF-8 YAML)", n.key),
                    None => "give the path of a recipe file (UTF-8 YAML)".to_string(),
                };
                Err(self.unreadable(format!(
                    "cannot read {}: {e}. Fix: {fix}",
                    p.display()
                )))
            }
        }
    }

    /// The file's text as a YAML mapping (an empty file is an empty one). A file named by
    /// another must also read as a recipe ([`not_recipe_keys`]).
    fn parse(&self, text: &str) -> Result<Mapping, Vec<Problem>> {
        let p = &self.path;
        let value: Value = match serde_yaml::from_str(text) {
            Ok(v) => v,
            Err(e) => {
                let line = e.location().map(|l| l.line());
                let message = match &self.named_by {
                    None => format!("not valid YAML: {e}"),
                    Some(n) => format!(
                        "not valid YAML ({}), so not a recipe; this file is named by `{}:` in {}, so none of its text is shown. Fix: make `{}:` name a recipe file, or correct its YAML",
                        parser_message(&e),
                        n.key,
                        n.at(),
                        n.key
                    ),
                };
                return Err(vec![Problem::new(p.clone(), line, "", message)]);
            }
        };
        let map = match value {
            Value::Null => Mapping::new(),
            Value::Mapping(map) => map,
            _ => {
                return Err(vec![Problem::new(
                    p.clone(),
                    Some(1),
                    "",
                    "a recipe must be a YAML mapping (`name: ...`, `model: ...`)",
                )])
            }
        };
        if let Some(n) = &self.named_by {
            let problems = not_recipe_keys(p, text, &map, n);
            if !problems.is_empty() {
                return Err(problems);
            }
        }
        Ok(map)
    }

    /// Takes `base:` out of the file's mapping: the file it names (relative to this one's
    /// folder), to be read next; `None` when there is none.
    fn base(&self, text: &str, map: &mut Mapping) -> Result<Option<ChainFile>, Vec<Problem>> {
        let p = &self.path;
        match map.shift_remove("base") {
            None | Some(Value::Null) => Ok(None),
            Some(Value::String(b)) => {
                let line = locate(text, &[Seg::Key("base".into())]);
                let dir = harness_core::fsutil::parent_dir(p);
                Ok(Some(ChainFile {
                    path: dir.join(b),
                    named_by: Some(NamedBy {
                        file: p.clone(),
                        line,
                        key: "base".into(),
                    }),
                }))
            }
            Some(_) => Err(vec![Problem::new(
                p.clone(),
                locate(text, &[Seg::Key("base".into())]),
                "base",
                "expected a path (string) to the recipe this one inherits from",
            )]),
        }
    }
}

/// The YAML parser's complaint about a file whose text must not be shown: its own words
/// when they are fixed text (libyaml's `did not find expected key at line 3 column 1`),
/// else only where. A message that could quote the file (`duplicate entry with key
/// "..."`, prefixed by the path of keys) is left out.
fn parser_message(e: &serde_yaml::Error) -> String {
    let text = e.to_string();
    let quotes = text.contains(['"', '`']) || text.contains(": ");
    if !quotes && text.is_ascii() {
        return text;
    }
    let what = if text.contains("duplicate entry") {
        "a key is repeated in one mapping"
    } else {
        "the parser's message is not shown, as it may quote the file"
    };
    match e.location() {
        Some(l) => format!("{what}, at line {} column {}", l.line(), l.column()),
        None => what.to_string(),
    }
}

/// A file named by another must read as a recipe before any of its text is shown: every
/// top-level key one a recipe has. Problems give the line and at most a suggested recipe
/// key, never the key itself.
fn not_recipe_keys(p: &FsPath, text: &str, map: &Mapping, n: &NamedBy) -> Vec<Problem> {
    let keys = super::schema::Recipe::top_level_keys();
    let unknown: Vec<&Value> = map
        .keys()
        .filter(|k| !k.as_str().is_some_and(|k| keys.contains(&k)))
        .collect();
    if unknown.is_empty() {
        return Vec::new();
    }
    let expected = keys
        .iter()
        .map(|k| format!("`{k}`"))
        .collect::<Vec<_>>()
        .join(", ");
    if unknown.len() == map.len() {
        return vec![Problem::new(
            p.to_path_buf(),
            None,
            "",
            format!(
                "not a recipe: none of its {} top-level key(s) is a recipe key ({expected}); this file is named by `{}:` in {}, so none of its text is shown. Fix: make `{}:` name a recipe file",
                map.len(),
                n.key,
                n.at(),
                n.key
            ),
        )];
    }
    unknown
        .into_iter()
        .map(|k| {
            let name = k.as_str();
            Problem {
                suggestion: name.and_then(|k| harness_core::suggest::suggest(k, keys)),
                ..Problem::new(
                    p.to_path_buf(),
                    name.and_then(|k| locate(text, &[Seg::Key(k.to_string())])),
                    "",
                    format!(
                        "a top-level key that is not a recipe key (expected one of {expected}); this file is named by `{}:` in {}, so the key is not shown",
                        n.key,
                        n.at()
                    ),
                )
            }
        })
        .collect()
}

/// `over` on top of `base`: mappings merge key by key, everything else replaces. A
/// mapping whose `kind` differs from the one it lands on replaces it whole: a `cbow`
/// encoder keeps nothing of the `bilstm` it overrides.
pub fn merge(base: &mut Value, over: Value) {
    match (base, over) {
        (Value::Mapping(b), Value::Mapping(o)) if !matches!((b.get("kind"), o.get("kind")), (Some(x), Some(y)) if x != y) => {
            for (k, v) in o {
                match b.get_mut(&k) {
                    Some(slot) => merge(slot, v),
                    None => {
                        b.insert(k, v);
                    }
                }
            }
        }
        (slot, v) => *slot = v,
    }
}

/// Parses `key.path=value`; the value is read as YAML (`3`, `1e-4`, `[a, b]`, `true`),
/// and kept as a string when it is not valid YAML.
pub fn parse_set(raw: &str) -> Result<Override, String> {
    let Some((key, val)) = raw.split_once('=') else {
        return Err(format!(
            "`--set {raw}`: expected KEY=VALUE, for example `--set train.steps=100`"
        ));
    };
    let key = key.trim();
    if key.is_empty() {
        return Err(format!("`--set {raw}`: the key is empty"));
    }
    let value = serde_yaml::from_str::<Value>(val).unwrap_or_else(|_| Value::String(val.into()));
    Ok(Override {
        raw: raw.to_string(),
        key: key.to_string(),
        value,
        applied: None,
    })
}

/// Splits `tasks[0].weight` / `tasks.0.weight` / `tasks.translate.weight` into segments.
fn split_key(key: &str) -> Vec<String> {
    let mut out = Vec::new();
    for part in key.split('.') {
        let mut rest = part;
        while let Some(open) = rest.find('[') {
            if open > 0 {
                out.push(rest[..open].to_string());
            }
            let close = rest[open..].find(']').map_or(rest.len(), |c| open + c);
            out.push(rest[open + 1..close].to_string());
            rest = rest.get(close + 1..).unwrap_or("");
        }
        if !rest.is_empty() {
            out.push(rest.to_string());
        }
    }
    out
}

/// Applies one override to `root`; returns the concrete path. In a list, a segment is an
/// index or the `name` of an item (`tasks.translate.weight`).
pub fn apply(root: &mut Value, key: &str, value: Value) -> Result<Path, String> {
    let segs = split_key(key);
    if segs.is_empty() {
        return Err("empty key".into());
    }
    let mut path = Vec::new();
    let mut cur = root;
    for (i, seg) in segs.iter().enumerate() {
        let last = i + 1 == segs.len();
        if cur.is_null() {
            *cur = Value::Mapping(Mapping::new());
        }
        cur = match cur {
            Value::Mapping(m) => {
                // A number names a numeric key: stages are numbered (`stages.2.steps`).
                let stages = path == [Seg::Key("stages".into())];
                path.push(Seg::Key(seg.clone()));
                let numeric = seg
                    .parse::<u64>()
                    .ok()
                    .map(|n| Value::Number(n.into()))
                    .filter(|n| m.contains_key(n) || (stages && !m.contains_key(seg.as_str())));
                match numeric {
                    Some(n) => {
                        if !m.contains_key(&n) {
                            m.insert(n.clone(), Value::Null);
                        }
                        m.get_mut(&n).expect("inserted above")
                    }
                    None => {
                        if !m.contains_key(seg.as_str()) {
                            m.insert(Value::String(seg.clone()), Value::Null);
                        }
                        m.get_mut(seg.as_str()).expect("inserted above")
                    }
                }
            }
            Value::Sequence(s) => {
                let named = |item: &Value| {
                    item.get("name")
                        .and_then(Value::as_str)
                        .or_else(|| item.as_str())
                        .map(str::to_string)
                };
                let idx = match seg.parse::<usize>() {
                    Ok(n) => n,
                    Err(_) => s
                        .iter()
                        .position(|item| named(item).as_deref() == Some(seg))
                        .ok_or_else(|| {
                            let names: Vec<String> = s.iter().filter_map(named).collect();
                            let names: Vec<&str> = names.iter().map(String::as_str).collect();
                            format!(
                                "`{}` is a list with no item named `{seg}`{}",
                                path_string(&path),
                                harness_core::suggest::did_you_mean(seg, &names)
                            )
                        })?,
                };
                let len = s.len();
                // A bare name (`evaluate: [xnli]`) becomes `{name: xnli}` when a key is set
                // under it (`evaluate.xnli.params.epochs`).
                if !last {
                    if let Some(Value::String(name)) = s.get(idx) {
                        let mut m = Mapping::new();
                        m.insert(Value::String("name".into()), Value::String(name.clone()));
                        s[idx] = Value::Mapping(m);
                    }
                }
                path.push(Seg::Index(idx));
                s.get_mut(idx).ok_or_else(|| {
                    format!(
                        "`{}` is out of range: the list has {len} items",
                        path_string(&path)
                    )
                })?
            }
            other => {
                return Err(format!(
                    "cannot set `{key}`: `{}` is {}, not a mapping",
                    path_string(&path),
                    super::de::describe(other)
                ))
            }
        };
        if last {
            merge(cur, value);
            return Ok(path);
        }
    }
    unreachable!("the loop returns on its last segment")
}

impl Sources {
    /// The file and line an error at `path` (in the resolved value) comes from, and a note
    /// when an override set it.
    pub fn attribute(&self, path: &[Seg]) -> (PathBuf, Option<usize>, Option<String>) {
        let recipe = self
            .layers
            .first()
            .map_or_else(PathBuf::new, |l| l.path.clone());
        let touches = |applied: &Option<Path>| {
            applied
                .as_ref()
                .is_some_and(|a| path.starts_with(a) || a.starts_with(path) && !path.is_empty())
        };
        for s in self.sets.iter().rev() {
            if touches(&s.applied) {
                return (recipe, None, Some(format!("set by `--set {}`", s.raw)));
            }
        }
        if let Some((name, overrides)) = &self.profile {
            for o in overrides.iter().rev() {
                if let Some(a) = o.applied.as_ref().filter(|_| touches(&o.applied)) {
                    let mut p = vec![
                        Seg::Key("profiles".into()),
                        Seg::Key(name.clone()),
                        Seg::Key(o.key.clone()),
                    ];
                    p.extend(path.iter().skip(a.len()).cloned());
                    for layer in &self.layers {
                        // The deepest part of the path the file spells out.
                        for n in (3..=p.len()).rev() {
                            if let Some(line) = locate(&layer.text, &p[..n]) {
                                return (
                                    layer.path.clone(),
                                    Some(line),
                                    Some(format!("set by profile `{name}`")),
                                );
                            }
                        }
                    }
                    return (recipe, None, Some(format!("set by profile `{name}`")));
                }
            }
        }
        for layer in &self.layers {
            if let Some(line) = locate(&layer.text, path) {
                return (layer.path.clone(), Some(line), None);
            }
        }
        // Not spelled out anywhere (a default, or a missing key): point at its parent.
        for n in (1..path.len()).rev() {
            for layer in &self.layers {
                if let Some(line) = locate(&layer.text, &path[..n]) {
                    return (layer.path.clone(), Some(line), None);
                }
            }
        }
        (recipe, None, None)
    }
}

/// The 1-based line of the key at `path` in YAML `text` (of the item, for an index), if
/// the text spells it out. serde_yaml attaches the position of the event being read to an
/// error raised while reading it; this raises one at exactly that key and reads it back.
pub fn locate(text: &str, path: &[Seg]) -> Option<usize> {
    if path.is_empty() {
        return None;
    }
    let de = serde_yaml::Deserializer::from_str(text);
    match Find(path).deserialize(de) {
        Ok(()) => None,
        Err(e) if e.to_string().contains(FOUND) => e.location().map(|l| l.line()),
        Err(_) => None,
    }
}

const FOUND: &str = "\u{0}harness-located\u{0}";

struct Find<'a>(&'a [Seg]);

impl<'de> DeserializeSeed<'de> for Find<'_> {
    type Value = ();
    fn deserialize<D: de::Deserializer<'de>>(self, d: D) -> Result<(), D::Error> {
        d.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for Find<'_> {
    type Value = ();

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("anything")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<(), A::Error> {
        let want = match self.0.first() {
            Some(Seg::Key(k)) => Some(k.as_str()),
            Some(Seg::Index(_)) => None,
            None => return Err(de::Error::custom(FOUND)),
        };
        let last = self.0.len() == 1;
        while let Some(hit) = map.next_key_seed(KeySeed { want, last })? {
            if hit {
                map.next_value_seed(Find(&self.0[1..]))?;
            } else {
                map.next_value::<IgnoredAny>()?;
            }
        }
        Ok(())
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<(), A::Error> {
        let want = match self.0.first() {
            Some(Seg::Index(i)) => Some(*i),
            Some(Seg::Key(_)) => None,
            None => return Err(de::Error::custom(FOUND)),
        };
        let mut i = 0;
        loop {
            let found = if Some(i) == want {
                seq.next_element_seed(Find(&self.0[1..]))?
            } else {
                seq.next_element::<IgnoredAny>()?.map(|_| ())
            };
            if found.is_none() {
                return Ok(());
            }
            i += 1;
        }
    }

    fn visit_bool<E: de::Error>(self, _: bool) -> Result<(), E> {
        self.scalar()
    }
    fn visit_i64<E: de::Error>(self, _: i64) -> Result<(), E> {
        self.scalar()
    }
    fn visit_u64<E: de::Error>(self, _: u64) -> Result<(), E> {
        self.scalar()
    }
    fn visit_f64<E: de::Error>(self, _: f64) -> Result<(), E> {
        self.scalar()
    }
    fn visit_str<E: de::Error>(self, _: &str) -> Result<(), E> {
        self.scalar()
    }
    fn visit_unit<E: de::Error>(self) -> Result<(), E> {
        self.scalar()
    }
    fn visit_none<E: de::Error>(self) -> Result<(), E> {
        self.scalar()
    }
}

impl Find<'_> {
    /// A scalar: found if the path ends here (a list item), otherwise not in this text.
    fn scalar<E: de::Error>(&self) -> Result<(), E> {
        if self.0.is_empty() {
            Err(E::custom(FOUND))
        } else {
            Ok(())
        }
    }
}

/// Reads a mapping key; raises FOUND on the wanted key when it ends the path (so the
/// position is the key's), else says whether it is the wanted one.
struct KeySeed<'a> {
    want: Option<&'a str>,
    last: bool,
}

impl<'de> DeserializeSeed<'de> for KeySeed<'_> {
    type Value = bool;
    fn deserialize<D: de::Deserializer<'de>>(self, d: D) -> Result<bool, D::Error> {
        d.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for KeySeed<'_> {
    type Value = bool;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a key")
    }

    fn visit_str<E: de::Error>(self, v: &str) -> Result<bool, E> {
        let hit = self.want == Some(v);
        if hit && self.last {
            return Err(E::custom(FOUND));
        }
        Ok(hit)
    }
    fn visit_u64<E: de::Error>(self, v: u64) -> Result<bool, E> {
        self.visit_str(&v.to_string())
    }
    fn visit_i64<E: de::Error>(self, v: i64) -> Result<bool, E> {
        self.visit_str(&v.to_string())
    }
    fn visit_bool<E: de::Error>(self, v: bool) -> Result<bool, E> {
        self.visit_str(&v.to_string())
    }
    fn visit_f64<E: de::Error>(self, _: f64) -> Result<bool, E> {
        Ok(false)
    }
    fn visit_unit<E: de::Error>(self) -> Result<bool, E> {
        Ok(false)
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<bool, A::Error> {
        while map.next_entry::<IgnoredAny, IgnoredAny>()?.is_some() {}
        Ok(false)
    }
    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<bool, A::Error> {
        while seq.next_element::<IgnoredAny>()?.is_some() {}
        Ok(false)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const TEXT: &str = "name: x\nmodel:\n  encoder: {kind: bilstm,\n    layers: 0}\n  heads:\n    nli:\n      kind: mlp\ntasks:\n  - name: a\n  - {name: b, corpus: c}\nprofiles:\n  paper: {model.encoder.layers: 5}\n";

    fn k(s: &str) -> Seg {
        Seg::Key(s.into())
    }

    /// The keys a named file must stick to are exactly those serde accepts at the top.
    #[test]
    fn recipe_top_level_keys_are_the_fields_serde_expects() {
        let keys = crate::schema::Recipe::top_level_keys();
        let err = serde_yaml::from_str::<crate::schema::Recipe>("zzz: 1")
            .unwrap_err()
            .to_string();
        assert_eq!(keys, crate::de::expected_names(&err), "{err}");
        assert!(
            keys.contains(&"base") && keys.contains(&"model"),
            "{keys:?}"
        );
    }

    #[test]
    fn text_in_memory_reads_its_base_from_disk() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("base.yaml"), "name: base\nseed: 3\n").unwrap();
        let path = dir.path().join("in-memory.yaml");
        let (merged, layers) = read_chain_text(&path, "base: base.yaml\nname: mine\n").unwrap();
        assert_eq!(merged.get("seed"), Some(&Value::from(3)));
        assert_eq!(merged.get("name"), Some(&Value::from("mine")));
        assert_eq!(layers[0].path, path);
        let big = "#".repeat(MAX_RECIPE_BYTES as usize + 1);
        let problems = read_chain_text(&path, &big).unwrap_err();
        assert!(
            problems[0].message.contains("more than 1048576"),
            "{problems:?}"
        );
    }

    #[test]
    fn a_recipe_over_the_size_cap_is_refused_before_it_is_read() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("big.yaml");
        let mut text = String::from("name: big\n");
        while text.len() as u64 <= MAX_RECIPE_BYTES {
            text.push_str("# padding padding padding padding padding padding padding\n");
        }
        std::fs::write(&path, &text).unwrap();
        let problems = read_chain(&path).unwrap_err();
        assert!(
            problems[0].message.contains("more than 1048576"),
            "{:?}",
            problems[0]
        );
        std::fs::write(&path, "name: small\n").unwrap();
        assert!(read_chain(&path).is_ok());
        // A device has no size to read beforehand: it is cut off at the cap.
        #[cfg(unix)]
        {
            let problems = read_chain(FsPath::new("/dev/zero")).unwrap_err();
            assert!(
                problems[0].message.contains("more than 1048576"),
                "{:?}",
                problems[0]
            );
        }
    }

    /// Stages are numbered: `stages.2.steps` sets the stage the file keys as the number 2,
    /// and a stage the file lacks is created under a number too.
    #[test]
    fn a_stage_is_set_by_its_number() {
        let mut root: Value = serde_yaml::from_str("stages: {2: {steps: 5}}").unwrap();
        apply(&mut root, "stages.2.steps", Value::from(7)).unwrap();
        apply(&mut root, "stages.3.lr", Value::from(0.5)).unwrap();
        let stages = root.get("stages").unwrap().as_mapping().unwrap();
        assert_eq!(stages.len(), 2, "{stages:?}");
        assert_eq!(stages[&Value::from(2)]["steps"], Value::from(7));
        assert_eq!(stages[&Value::from(3)]["lr"], Value::from(0.5));
        let mut fresh: Value = serde_yaml::from_str("name: x").unwrap();
        apply(&mut fresh, "stages.1.steps", Value::from(3)).unwrap();
        assert_eq!(fresh["stages"][&Value::from(1)]["steps"], Value::from(3));
        // Elsewhere a number stays a string key.
        apply(&mut fresh, "data.corpora.7.dataset", Value::from("snli")).unwrap();
        assert!(fresh["data"]["corpora"].get("7").is_some());
    }

    #[test]
    fn locate_finds_keys_in_block_and_flow_style() {
        assert_eq!(locate(TEXT, &[k("name")]), Some(1));
        assert_eq!(locate(TEXT, &[k("model"), k("encoder")]), Some(3));
        assert_eq!(
            locate(TEXT, &[k("model"), k("encoder"), k("layers")]),
            Some(4)
        );
        assert_eq!(
            locate(TEXT, &[k("model"), k("heads"), k("nli"), k("kind")]),
            Some(7)
        );
        assert_eq!(
            locate(TEXT, &[k("tasks"), Seg::Index(1), k("corpus")]),
            Some(10)
        );
        assert_eq!(locate(TEXT, &[k("tasks"), Seg::Index(0)]), Some(9));
        assert_eq!(
            locate(
                TEXT,
                &[k("profiles"), k("paper"), k("model.encoder.layers")]
            ),
            Some(12)
        );
        assert_eq!(locate(TEXT, &[k("model"), k("decoder")]), None);
        assert_eq!(locate(TEXT, &[k("tasks"), Seg::Index(5)]), None);
    }

    #[test]
    fn set_parses_yaml_values_and_addresses_list_items_by_name() {
        let mut v: Value = serde_yaml::from_str(TEXT).unwrap();
        let o = parse_set("tasks.b.weight=0.5").unwrap();
        let p = apply(&mut v, &o.key, o.value).unwrap();
        assert_eq!(path_string(&p), "tasks[1].weight");
        assert_eq!(v["tasks"][1]["weight"], Value::from(0.5));
        let mut root: Value = serde_yaml::from_str("evaluate: [tatoeba, xnli]").unwrap();
        apply(&mut root, "evaluate.xnli.params.epochs", Value::from(5)).unwrap();
        assert_eq!(root["evaluate"][0], Value::from("tatoeba"));
        assert_eq!(root["evaluate"][1]["name"], Value::from("xnli"));
        assert_eq!(root["evaluate"][1]["params"]["epochs"], Value::from(5));
        let o = parse_set("evaluate=[xnli, bucc]").unwrap();
        apply(&mut v, &o.key, o.value).unwrap();
        assert_eq!(v["evaluate"][1], Value::from("bucc"));
        let o = parse_set("tasks[0].corpus=c").unwrap();
        apply(&mut v, &o.key, o.value).unwrap();
        assert_eq!(v["tasks"][0]["corpus"], Value::from("c"));
        assert!(apply(&mut v, "name.x", Value::from(1)).is_err());
        let err = apply(&mut v, "tasks.c.weight", Value::from(1)).unwrap_err();
        assert!(err.contains("no item named `c`"), "{err}");
        assert!(parse_set("novalue").is_err());
    }

    #[test]
    fn merge_is_deep_for_mappings_and_replaces_lists() {
        let mut a: Value = serde_yaml::from_str("a: {b: 1, c: 2}\nl: [1, 2]").unwrap();
        merge(
            &mut a,
            serde_yaml::from_str("a: {c: 3, d: 4}\nl: [9]").unwrap(),
        );
        let want: Value = serde_yaml::from_str("a: {b: 1, c: 3, d: 4}\nl: [9]").unwrap();
        assert_eq!(a, want);
        let mut e: Value = serde_yaml::from_str("{kind: bilstm, layers: 2}").unwrap();
        merge(
            &mut e,
            serde_yaml::from_str("{kind: cbow, embed: 3}").unwrap(),
        );
        assert_eq!(
            e,
            serde_yaml::from_str::<Value>("{kind: cbow, embed: 3}").unwrap()
        );
    }
}
