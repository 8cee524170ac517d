//! The fingerprint of a resolved recipe: sha256 of its canonical form, which is the typed
//! recipe with every default filled in, `base` and `profiles` left out (they have already
//! been applied), serialized as JSON with keys sorted at every level and no whitespace.
//! Key order, comments, spacing and which file set a value make no difference; any change
//! of a value does, except in `report` (which tables are rendered changes no number, so
//! adding a table to a recipe does not orphan its run directories).

use super::schema::Recipe;
use serde_json::Value as Json;
use std::fmt;

/// Hex sha256 of a recipe's canonical form.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Fingerprint(pub String);

impl Fingerprint {
    /// The first 16 hex digits, as printed by `harness validate --resolved`.
    pub fn short(&self) -> &str {
        &self.0[..16]
    }
}

impl fmt::Display for Fingerprint {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// The canonical text that is hashed.
pub fn canonical(recipe: &Recipe) -> String {
    // Serializing the typed recipe cannot fail: it has no maps with non-string keys.
    let mut json = serde_json::to_value(recipe).unwrap_or(Json::Null);
    if let Json::Object(map) = &mut json {
        map.remove("report");
    }
    let mut out = String::new();
    write_sorted(&json, &mut out);
    out
}

/// The fingerprint of a resolved recipe.
pub fn fingerprint(recipe: &Recipe) -> Fingerprint {
    Fingerprint(harness_core::fsutil::sha256_hex(
        canonical(recipe).as_bytes(),
    ))
}

fn write_sorted(v: &Json, out: &mut String) {
    match v {
        Json::Object(m) => {
            let mut keys: Vec<&String> = m.keys().collect();
            keys.sort();
            out.push('{');
            for (i, k) in keys.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                out.push_str(&Json::String((*k).clone()).to_string());
                out.push(':');
                write_sorted(&m[*k], out);
            }
            out.push('}');
        }
        Json::Array(a) => {
            out.push('[');
            for (i, x) in a.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                write_sorted(x, out);
            }
            out.push(']');
        }
        other => out.push_str(&other.to_string()),
    }
}
