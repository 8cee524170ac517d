//! A serde `Deserializer` over a `serde_yaml::Value` that knows where it is: every error
//! carries the key path it happened at (`model.encoder.layers`, `tasks[1].params`). The
//! recipe is merged at the value level (base ⊕ recipe ⊕ profile ⊕ `--set`), so the text's
//! own locations are gone by the time it is typed; the key path is what lets `check` point
//! back into the right file and line (`load::locate`).
//!
//! Also: [`collect`], which keeps deserializing after an error by pruning the offending
//! key, so one run reports every structural problem of a recipe, not just the first.

use serde::de::{self, DeserializeOwned, DeserializeSeed, IntoDeserializer, Visitor};
use serde_yaml::Value;
use std::fmt;

/// One step of a key path.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Seg {
    Key(String),
    Index(usize),
}

/// A key path, root first.
pub type Path = Vec<Seg>;

/// Renders `a.b[2].c`.
pub fn path_string(path: &[Seg]) -> String {
    let mut s = String::new();
    for seg in path {
        match seg {
            Seg::Key(k) => {
                if !s.is_empty() {
                    s.push('.');
                }
                s.push_str(k);
            }
            Seg::Index(i) => s.push_str(&format!("[{i}]")),
        }
    }
    s
}

/// A deserialization error at a key path.
#[derive(Debug, Clone, PartialEq)]
pub struct DeError {
    pub path: Path,
    pub msg: String,
}

// Errors cross `impl Deserialize` boundaries (the hand-written tagged enums) only as text,
// through `de::Error::custom`; the path travels along in this encoding.
const MARK: char = '\u{1}';
const SEP: char = '\u{2}';

impl DeError {
    /// The text form that survives `de::Error::custom`.
    pub fn encode(&self) -> String {
        let segs: Vec<String> = self
            .path
            .iter()
            .map(|s| match s {
                Seg::Key(k) => format!("k{k}"),
                Seg::Index(i) => format!("i{i}"),
            })
            .collect();
        format!("{MARK}{}{MARK}{}", segs.join(&SEP.to_string()), self.msg)
    }

    fn prefixed(mut self, seg: Seg) -> Self {
        self.path.insert(0, seg);
        self
    }

    /// Prepends `prefix` to the path.
    pub fn under(mut self, prefix: &[Seg]) -> Self {
        let mut p = prefix.to_vec();
        p.append(&mut self.path);
        self.path = p;
        self
    }
}

impl fmt::Display for DeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.path.is_empty() {
            write!(f, "{}", self.msg)
        } else {
            write!(f, "{}: {}", path_string(&self.path), self.msg)
        }
    }
}

impl std::error::Error for DeError {}

impl de::Error for DeError {
    fn custom<T: fmt::Display>(msg: T) -> Self {
        let text = msg.to_string();
        if let Some(rest) = text.strip_prefix(MARK) {
            if let Some((segs, msg)) = rest.split_once(MARK) {
                let path = segs
                    .split(SEP)
                    .filter(|s| !s.is_empty())
                    .map(|s| match s.split_at(1) {
                        ("i", n) => n.parse().map(Seg::Index).unwrap_or(Seg::Key(n.into())),
                        (_, k) => Seg::Key(k.to_string()),
                    })
                    .collect();
                return DeError {
                    path,
                    msg: msg.to_string(),
                };
            }
        }
        DeError {
            path: Vec::new(),
            msg: text,
        }
    }
}

/// Deserializes `T` from `value`; the error names the key path.
pub fn from_value<T: DeserializeOwned>(value: &Value) -> Result<T, DeError> {
    T::deserialize(ValueDe(value))
}

/// What [`collect`] found.
#[derive(Debug)]
pub struct Collected<T> {
    /// The value built from what was left after pruning (`None` if even that failed).
    pub value: Option<T>,
    /// Every error, in the order found.
    pub errors: Vec<DeError>,
    /// The keys pruned to get past them.
    pub pruned: Vec<Path>,
}

/// Deserializes `T` from `value`, collecting every error: after each one the offending key
/// is pruned and deserialization starts again, so one pass reports every structural
/// problem. A `missing field` error that only follows from pruning is not reported.
pub fn collect<T: DeserializeOwned>(value: &Value) -> Collected<T> {
    let mut v = value.clone();
    let mut errors: Vec<DeError> = Vec::new();
    let mut pruned: Vec<Path> = Vec::new();
    // Every round removes one key, so the number of keys bounds the rounds.
    loop {
        match from_value::<T>(&v) {
            Ok(t) => {
                return Collected {
                    value: Some(t),
                    errors,
                    pruned,
                }
            }
            Err(e) => {
                let consequence = missing_field(&e.msg).is_some_and(|f| {
                    let mut p = e.path.clone();
                    p.push(Seg::Key(f));
                    pruned.contains(&p)
                });
                if !consequence {
                    errors.push(e.clone());
                }
                // Prune the nearest mapping key at or above the error.
                let mut target = e.path.clone();
                while matches!(target.last(), Some(Seg::Index(_))) {
                    target.pop();
                }
                if target.is_empty() || !remove(&mut v, &target) {
                    return Collected {
                        value: None,
                        errors,
                        pruned,
                    };
                }
                pruned.push(target);
            }
        }
    }
}

/// `missing field `x`` → `x`.
pub fn missing_field(msg: &str) -> Option<String> {
    msg.strip_prefix("missing field `")
        .and_then(|r| r.split('`').next())
        .map(str::to_string)
}

/// The names serde lists after "expected" in unknown field/variant messages.
pub fn expected_names(msg: &str) -> Vec<String> {
    let Some((_, tail)) = msg.split_once("expected") else {
        return Vec::new();
    };
    tail.split('`')
        .skip(1)
        .step_by(2)
        .map(str::to_string)
        .collect()
}

/// The value at `path`, if any.
pub fn get<'a>(mut v: &'a Value, path: &[Seg]) -> Option<&'a Value> {
    for seg in path {
        v = match (seg, v) {
            (Seg::Key(k), Value::Mapping(m)) => m.get(k.as_str())?,
            (Seg::Index(i), Value::Sequence(s)) => s.get(*i)?,
            (_, Value::Tagged(t)) => get(&t.value, std::slice::from_ref(seg))?,
            _ => return None,
        };
    }
    Some(v)
}

/// Removes the mapping entry at `path` (which must end in a key); false if absent.
fn remove(v: &mut Value, path: &[Seg]) -> bool {
    let Some((Seg::Key(last), parent)) = path.split_last() else {
        return false;
    };
    let mut cur = v;
    for seg in parent {
        cur = match (seg, cur) {
            (Seg::Key(k), Value::Mapping(m)) => match m.get_mut(k.as_str()) {
                Some(x) => x,
                None => return false,
            },
            (Seg::Index(i), Value::Sequence(s)) => match s.get_mut(*i) {
                Some(x) => x,
                None => return false,
            },
            _ => return false,
        };
    }
    match cur {
        Value::Mapping(m) => m.shift_remove(last.as_str()).is_some(),
        _ => false,
    }
}

/// Deserializes an internally tagged enum (`kind: bilstm` plus that variant's fields) with
/// precise error paths. serde's own `#[serde(tag)]` buffers the map and loses which field
/// failed; this reads the tag, removes it, and deserializes the rest into the variant's
/// struct through [`ValueDe`]. `build(tag, rest)` returns `None` for an unknown tag.
pub fn tagged<'de, D, T>(
    d: D,
    tag: &'static str,
    variants: &'static [&'static str],
    build: impl FnOnce(&str, &Value) -> Option<Result<T, DeError>>,
) -> Result<T, D::Error>
where
    D: de::Deserializer<'de>,
{
    use serde::Deserialize;
    let v = Value::deserialize(d)?;
    let Value::Mapping(mut m) = v else {
        return Err(de::Error::custom(format!(
            "expected a mapping with `{tag}: <{}>`",
            variants.join("|")
        )));
    };
    let Some(kind) = m.shift_remove(tag) else {
        return Err(de::Error::missing_field(tag));
    };
    let Value::String(kind) = kind else {
        let e = DeError {
            path: vec![Seg::Key(tag.to_string())],
            msg: format!("expected a string, one of {}", quoted(variants)),
        };
        return Err(de::Error::custom(e.encode()));
    };
    match build(&kind, &Value::Mapping(m)) {
        Some(r) => r.map_err(|e| de::Error::custom(e.encode())),
        None => {
            let e = DeError {
                path: vec![Seg::Key(tag.to_string())],
                msg: format!(
                    "unknown variant `{kind}`, expected one of {}",
                    quoted(variants)
                ),
            };
            Err(de::Error::custom(e.encode()))
        }
    }
}

fn quoted(names: &[&str]) -> String {
    names
        .iter()
        .map(|n| format!("`{n}`"))
        .collect::<Vec<_>>()
        .join(", ")
}

/// The deserializer itself: a borrowed value.
pub struct ValueDe<'a>(pub &'a Value);

impl<'de> de::Deserializer<'de> for ValueDe<'de> {
    type Error = DeError;

    fn deserialize_any<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, DeError> {
        match self.0 {
            Value::Null => visitor.visit_unit(),
            Value::Bool(b) => visitor.visit_bool(*b),
            Value::Number(n) => {
                if let Some(u) = n.as_u64() {
                    visitor.visit_u64(u)
                } else if let Some(i) = n.as_i64() {
                    visitor.visit_i64(i)
                } else {
                    visitor.visit_f64(n.as_f64().unwrap_or(f64::NAN))
                }
            }
            Value::String(s) => visitor.visit_borrowed_str(s),
            Value::Sequence(s) => {
                let mut access = SeqDe {
                    iter: s.iter(),
                    index: 0,
                };
                let out = visitor.visit_seq(&mut access)?;
                if access.iter.len() > 0 {
                    return Err(de::Error::invalid_length(s.len(), &"fewer elements"));
                }
                Ok(out)
            }
            Value::Mapping(m) => visitor.visit_map(MapDe {
                iter: m.iter(),
                key: None,
                value: None,
            }),
            Value::Tagged(t) => ValueDe(&t.value).deserialize_any(visitor),
        }
    }

    fn deserialize_option<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, DeError> {
        match self.0 {
            Value::Null => visitor.visit_none(),
            _ => visitor.visit_some(self),
        }
    }

    fn deserialize_enum<V: Visitor<'de>>(
        self,
        _name: &'static str,
        variants: &'static [&'static str],
        visitor: V,
    ) -> Result<V::Value, DeError> {
        match self.0 {
            Value::String(s) => visitor.visit_enum(s.as_str().into_deserializer()),
            Value::Tagged(t) => ValueDe(&t.value).deserialize_enum(_name, variants, visitor),
            other => Err(de::Error::custom(format!(
                "invalid type: {}, expected one of {}",
                describe(other),
                quoted(variants)
            ))),
        }
    }

    fn deserialize_newtype_struct<V: Visitor<'de>>(
        self,
        _name: &'static str,
        visitor: V,
    ) -> Result<V::Value, DeError> {
        visitor.visit_newtype_struct(self)
    }

    serde::forward_to_deserialize_any! {
        bool i8 i16 i32 i64 i128 u8 u16 u32 u64 u128 f32 f64 char str string
        bytes byte_buf unit unit_struct seq tuple tuple_struct map struct
        identifier ignored_any
    }
}

/// serde's words for a value, for messages.
pub fn describe(v: &Value) -> String {
    match v {
        Value::Null => "null".into(),
        Value::Bool(b) => format!("boolean `{b}`"),
        Value::Number(n) => format!("number `{n}`"),
        Value::String(s) => format!("string {s:?}"),
        Value::Sequence(_) => "sequence".into(),
        Value::Mapping(_) => "map".into(),
        Value::Tagged(t) => describe(&t.value),
    }
}

struct SeqDe<'a> {
    iter: std::slice::Iter<'a, Value>,
    index: usize,
}

impl<'de> de::SeqAccess<'de> for SeqDe<'de> {
    type Error = DeError;

    fn next_element_seed<T: DeserializeSeed<'de>>(
        &mut self,
        seed: T,
    ) -> Result<Option<T::Value>, DeError> {
        match self.iter.next() {
            None => Ok(None),
            Some(v) => {
                let i = self.index;
                self.index += 1;
                seed.deserialize(ValueDe(v))
                    .map(Some)
                    .map_err(|e| e.prefixed(Seg::Index(i)))
            }
        }
    }

    fn size_hint(&self) -> Option<usize> {
        Some(self.iter.len())
    }
}

struct MapDe<'a> {
    iter: serde_yaml::mapping::Iter<'a>,
    key: Option<String>,
    value: Option<&'a Value>,
}

impl<'de> de::MapAccess<'de> for MapDe<'de> {
    type Error = DeError;

    fn next_key_seed<K: DeserializeSeed<'de>>(
        &mut self,
        seed: K,
    ) -> Result<Option<K::Value>, DeError> {
        match self.iter.next() {
            None => Ok(None),
            Some((k, v)) => {
                let name = match k {
                    Value::String(s) => s.clone(),
                    other => serde_yaml::to_string(other)
                        .unwrap_or_default()
                        .trim()
                        .to_string(),
                };
                self.key = Some(name.clone());
                self.value = Some(v);
                seed.deserialize(ValueDe(k))
                    .map(Some)
                    .map_err(|e| e.prefixed(Seg::Key(name)))
            }
        }
    }

    fn next_value_seed<V: DeserializeSeed<'de>>(&mut self, seed: V) -> Result<V::Value, DeError> {
        let v = self
            .value
            .take()
            .ok_or_else(|| <DeError as de::Error>::custom("value without key"))?;
        let key = self.key.take().unwrap_or_default();
        seed.deserialize(ValueDe(v))
            .map_err(|e| e.prefixed(Seg::Key(key)))
    }

    fn size_hint(&self) -> Option<usize> {
        Some(self.iter.len())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde::Deserialize;

    #[derive(Debug, Deserialize, PartialEq)]
    #[serde(deny_unknown_fields)]
    struct Outer {
        inner: Inner,
        #[serde(default)]
        list: Vec<Inner>,
    }

    #[derive(Debug, Deserialize, PartialEq)]
    #[serde(deny_unknown_fields)]
    struct Inner {
        #[serde(default)]
        n: u32,
        #[serde(default)]
        s: String,
    }

    fn yaml(s: &str) -> Value {
        serde_yaml::from_str(s).unwrap()
    }

    #[test]
    fn errors_carry_the_key_path() {
        let e = from_value::<Outer>(&yaml("inner: {n: -1}")).unwrap_err();
        assert_eq!(path_string(&e.path), "inner.n");
        let e = from_value::<Outer>(&yaml("inner: {}\nlist: [{}, {m: 1}]")).unwrap_err();
        assert_eq!(path_string(&e.path), "list[1].m");
        assert!(e.msg.contains("unknown field `m`"), "{}", e.msg);
        assert_eq!(expected_names(&e.msg), ["n", "s"]);
    }

    #[test]
    fn collect_reports_every_problem() {
        let c = collect::<Outer>(&yaml("inner: {n: x, s: 3, q: 1}\nzz: 1"));
        assert!(c.value.is_some());
        let paths: Vec<_> = c.errors.iter().map(|e| path_string(&e.path)).collect();
        assert_eq!(paths, ["inner.n", "inner.s", "inner.q", "zz"]);
    }

    #[test]
    fn encoded_errors_round_trip_through_custom() {
        let e = DeError {
            path: vec![Seg::Key("a".into()), Seg::Index(3)],
            msg: "bad".into(),
        };
        let back = <DeError as de::Error>::custom(e.encode());
        assert_eq!(back, e);
    }
}
