//! Field paths into a result file, checked against the protocol's typed scores.
//!
//! Table specs (`benchmarks/tables/*.yaml`) and sweep grids (`grids/*.yaml`) name the number
//! that fills a cell by its path in the result file: `scores.accuracy.fr`,
//! `scores.matrix.accuracy[2][0]`, `main_score`. Each protocol's `scores` is one serde struct
//! ([`super::ScoresDef::schema`] is its JSON Schema, derived by `schemars` from the
//! same struct the protocol writes), so a path can be checked when the spec loads: a field the
//! protocol never writes (a typo, or a field renamed in the struct) is refused with the fields
//! it does write, before any table is filled with `n/a`.
//!
//! The walk is written here because no crate resolves a dotted path against a JSON Schema
//! the way the report's resolver reads a result file: object keys that are free (a map keyed
//! by language, `subsets.track3.es-es`) may themselves contain dots, so every split is tried.

use serde_json::Value;

/// The result file's own numeric fields a path may name outside `scores`.
const TOP_LEVEL_NUMBERS: &[&str] = &["main_score", "seconds", "seed"];

/// One step of a path: an object key or an array index.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Step {
    Key(String),
    Index(usize),
}

/// Splits `a.b[1][2].c` into steps; `None` when the path is malformed.
fn steps(path: &str) -> Option<Vec<Step>> {
    let mut out = Vec::new();
    for part in path.split('.') {
        let (key, mut rest) = match part.find('[') {
            Some(i) => (&part[..i], &part[i..]),
            None => (part, ""),
        };
        if key.is_empty() {
            return None;
        }
        out.push(Step::Key(key.to_string()));
        while let Some(tail) = rest.strip_prefix('[') {
            let close = tail.find(']')?;
            out.push(Step::Index(tail[..close].parse().ok()?));
            rest = &tail[close + 1..];
        }
        if !rest.is_empty() {
            return None;
        }
    }
    Some(out)
}

/// Checks that `path` (already filled: no `{placeholder}` left) names a number a result of
/// the protocol whose scores have `schema` can hold. The error says what the protocol writes
/// at the first step that does not resolve.
pub fn check_path(schema: &Value, protocol: &str, path: &str) -> Result<(), String> {
    let path = path.trim();
    // The report's `mean(p, q, ...)`: each path on its own.
    if let Some(inner) = path.strip_prefix("mean(").and_then(|p| p.strip_suffix(')')) {
        return inner
            .split(',')
            .map(str::trim)
            .filter(|p| !p.is_empty())
            .try_for_each(|p| check_path(schema, protocol, p));
    }
    let Some(steps) = steps(path) else {
        return Err(format!(
            "`{path}` is not a field path (`a.b.c`, `a.b[0][1]`)"
        ));
    };
    match steps.split_first() {
        Some((Step::Key(k), [])) if TOP_LEVEL_NUMBERS.contains(&k.as_str()) => Ok(()),
        Some((Step::Key(k), rest)) if k == "scores" => {
            let mut deepest = Deepest::default();
            if walk(schema, schema, rest, 0, &mut deepest) {
                Ok(())
            } else {
                let at = if deepest.depth == 0 {
                    "scores".to_string()
                } else {
                    format!("scores.{}", render(&rest[..deepest.depth]))
                };
                Err(format!(
                    "`{path}` is not a number that protocol `{protocol}` writes: under `{at}` it writes {}",
                    deepest.offer
                ))
            }
        }
        _ => Err(format!(
            "`{path}` names no field of a result file: a path starts with `scores.` or is one of {}",
            TOP_LEVEL_NUMBERS.join(", ")
        )),
    }
}

/// How far the longest partial match got, and what the schema offered there.
#[derive(Default)]
struct Deepest {
    depth: usize,
    offer: String,
}

fn render(steps: &[Step]) -> String {
    let mut s = String::new();
    for step in steps {
        match step {
            Step::Key(k) => {
                if !s.is_empty() {
                    s.push('.');
                }
                s.push_str(k);
            }
            Step::Index(i) => s.push_str(&format!("[{i}]")),
        }
    }
    s
}

/// The schema `node` after following a local `$ref` (`#/$defs/Name`).
fn deref<'a>(root: &'a Value, node: &'a Value) -> &'a Value {
    match node.get("$ref").and_then(Value::as_str) {
        Some(r) => r
            .strip_prefix("#/")
            .and_then(|p| p.split('/').try_fold(root, |v, k| v.get(k)))
            .map(|v| deref(root, v))
            .unwrap_or(node),
        None => node,
    }
}

/// Whether the schema admits type `t` (`"type": "number"` or `"type": ["number", "null"]`).
fn admits(node: &Value, t: &str) -> bool {
    match node.get("type") {
        Some(Value::String(s)) => s == t,
        Some(Value::Array(a)) => a.iter().any(|v| v.as_str() == Some(t)),
        _ => false,
    }
}

/// Whether `steps` lead from `node` to a number. `done` counts the steps consumed before
/// `node`, for the error's position.
fn walk(root: &Value, node: &Value, steps: &[Step], done: usize, deepest: &mut Deepest) -> bool {
    let node = deref(root, node);
    // The schema `true`, or one with no constraint (only `title`, `$schema`...), admits
    // anything: a value whose shape is not declared (`serde_json::Value`).
    const CONSTRAINTS: &[&str] = &[
        "type",
        "properties",
        "additionalProperties",
        "items",
        "prefixItems",
        "anyOf",
        "oneOf",
        "allOf",
        "$ref",
        "enum",
        "const",
    ];
    if node == &Value::Bool(true)
        || node
            .as_object()
            .is_some_and(|o| !CONSTRAINTS.iter().any(|k| o.contains_key(*k)))
    {
        return true;
    }
    for key in ["anyOf", "oneOf", "allOf"] {
        if let Some(branches) = node.get(key).and_then(Value::as_array) {
            if branches.iter().any(|b| walk(root, b, steps, done, deepest)) {
                return true;
            }
        }
    }
    let Some((first, rest)) = steps.split_first() else {
        return admits(node, "number") || admits(node, "integer");
    };
    // The first reading that got this far wins: with a free key tried one step long first,
    // that is the reading where the key has no dot.
    let offer = |deepest: &mut Deepest, what: String| {
        if done > deepest.depth || deepest.offer.is_empty() {
            deepest.depth = done;
            deepest.offer = what;
        }
    };
    match first {
        Step::Key(k) => {
            if let Some(props) = node.get("properties").and_then(Value::as_object) {
                if let Some(child) = props.get(k) {
                    if walk(root, child, rest, done + 1, deepest) {
                        return true;
                    }
                }
            }
            if let Some(free) = node.get("additionalProperties").filter(|v| v.is_object()) {
                // A free key may contain dots: it spans one or more key steps.
                let spans = steps
                    .iter()
                    .take_while(|s| matches!(s, Step::Key(_)))
                    .count();
                for n in 1..=spans {
                    if walk(root, free, &steps[n..], done + n, deepest) {
                        return true;
                    }
                }
            }
            let names: Vec<&str> = node
                .get("properties")
                .and_then(Value::as_object)
                .map(|p| p.keys().map(String::as_str).collect())
                .unwrap_or_default();
            let what = if !names.is_empty() {
                format!("the fields {}", names.join(", "))
            } else if node
                .get("additionalProperties")
                .is_some_and(Value::is_object)
            {
                "an object keyed by name".to_string()
            } else if admits(node, "array") {
                "a list (index it: `[0]`)".to_string()
            } else {
                "a value with no fields".to_string()
            };
            offer(deepest, what);
            false
        }
        Step::Index(i) => {
            if let Some(items) = node.get("prefixItems").and_then(Value::as_array) {
                if let Some(child) = items.get(*i) {
                    return walk(root, child, rest, done + 1, deepest);
                }
            }
            if let Some(items) = node.get("items").filter(|v| v.is_object()) {
                return walk(root, items, rest, done + 1, deepest);
            }
            offer(deepest, "no list".to_string());
            false
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use schemars::JsonSchema;
    use std::collections::BTreeMap;

    #[allow(dead_code)]
    #[derive(JsonSchema)]
    struct Inner {
        pearson: f64,
        n: usize,
    }

    #[allow(dead_code)]
    #[derive(JsonSchema)]
    struct Example {
        average: Option<f64>,
        subsets: BTreeMap<String, Inner>,
        matrix: Vec<Vec<f64>>,
        names: Vec<String>,
        pair: (String, f64),
    }

    fn check(path: &str) -> Result<(), String> {
        let schema = serde_json::to_value(schemars::schema_for!(Example)).unwrap();
        check_path(&schema, "example", path)
    }

    #[test]
    fn a_path_the_struct_writes_resolves_and_any_other_is_refused_naming_what_is_there() {
        for ok in [
            "scores.average",
            "scores.subsets.fr.pearson",
            "scores.subsets.track3.es-es.n",
            "scores.matrix[2][0]",
            "scores.pair[1]",
            "main_score",
            "mean(scores.subsets.fr.n, scores.average)",
        ] {
            assert_eq!(check(ok), Ok(()), "{ok}");
        }
        let e = check("scores.averag").unwrap_err();
        assert!(e.contains("under `scores` it writes the fields"), "{e}");
        assert!(e.contains("average"), "{e}");
        let e = check("scores.subsets.fr.spearman").unwrap_err();
        assert!(
            e.contains("under `scores.subsets.fr` it writes the fields"),
            "{e}"
        );
        assert!(e.contains("pearson"), "{e}");
        for bad in [
            "scores.subsets.fr", // an object, not a number
            "scores.names[0]",   // a string
            "scores.pair[0]",    // a string
            "scores.matrix[0]",  // a list
            "scores.average.x",  // below a number
            "score.average",     // not `scores`
            "scores..average",   // malformed
            "scores.matrix[x]",  // malformed
            "mean(scores.average, scores.x)",
        ] {
            assert!(check(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn steps_split_keys_and_indices() {
        assert_eq!(
            steps("a.b[1][20].c"),
            Some(vec![
                Step::Key("a".into()),
                Step::Key("b".into()),
                Step::Index(1),
                Step::Index(20),
                Step::Key("c".into()),
            ])
        );
        assert_eq!(steps("a[1]x"), None);
        assert_eq!(steps("[1]"), None);
    }

    #[test]
    fn an_undeclared_shape_admits_any_path() {
        let schema = schemars::schema_for!(serde_json::Value).to_value();
        assert_eq!(check_path(&schema, "p", "scores.a.b[0]"), Ok(()));
    }
}
