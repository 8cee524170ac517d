//! `conversation-pairs`: Topical-Chat TCS-1.1 validation and test splits
//! (`{valid,test}_{freq,rare}.json.gz`), one JSON object mapping conversation id →
//! `{"content": [{"message": ..., "agent": ...}, ...], ...}`.
//!
//! Conversations are returned in file order (the object's key order, kept by a streaming
//! map visitor; serde_json's default map would sort the keys). The (message, response) pairs
//! are adjacent turns within one conversation, utterance `i` → `i + 1` (SOURCE.txt: 44,747 in
//! all), as [`Bitext`] with `source` = message and `target` = response. Messages are kept
//! verbatim (crowd-worker text). Stands in for multilingual USE's Reddit response ranking.

use crate::records::{Bitext, Conversation};
use crate::text;
use crate::DataError;
use serde::de::{Deserializer, MapAccess, Visitor};
use serde::Deserialize;
use std::fmt;
use std::path::Path;

/// The four splits, in the order SOURCE.txt lists them.
pub const SPLITS: [&str; 4] = ["valid_freq", "valid_rare", "test_freq", "test_rare"];

#[derive(Deserialize)]
struct RawConversation {
    content: Vec<RawTurn>,
}

#[derive(Deserialize)]
struct RawTurn {
    message: String,
}

/// The top-level object, keys kept in file order.
struct Ordered(Vec<Conversation>);

impl<'de> Deserialize<'de> for Ordered {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = Ordered;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("an object mapping conversation ids to conversations")
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Ordered, A::Error> {
                let mut out = Vec::new();
                while let Some((id, conv)) = map.next_entry::<String, RawConversation>()? {
                    out.push(Conversation {
                        id,
                        turns: conv.content.into_iter().map(|t| t.message).collect(),
                    });
                }
                Ok(Ordered(out))
            }
        }
        d.deserialize_map(V)
    }
}

/// Loads one split (`valid_freq`, ...; see [`SPLITS`]) from `dir`, conversations in file
/// order. Malformed JSON is an error naming the file and line.
pub fn load_split(dir: &Path, split: &str) -> Result<Vec<Conversation>, DataError> {
    let path = text::resolve(dir, &format!("{split}.json"))?;
    let bytes = text::read_bytes(&path)?;
    let bytes = bytes.strip_prefix(b"\xEF\xBB\xBF").unwrap_or(&bytes);
    serde_json::from_slice::<Ordered>(bytes)
        .map(|o| o.0)
        .map_err(|e| {
            DataError::format(
                &path,
                Some(e.line()),
                format!("invalid Topical-Chat JSON ({e})"),
                "the file is truncated or corrupt; re-fetch it with `harness datasets fetch --force`",
            )
        })
}

/// Adjacent-turn (message, response) pairs of `conversations`, in order.
pub fn response_pairs(conversations: &[Conversation]) -> Vec<Bitext> {
    conversations
        .iter()
        .flat_map(|c| {
            c.turns.windows(2).map(|w| Bitext {
                source: w[0].clone(),
                target: w[1].clone(),
            })
        })
        .collect()
}

/// Loads the (message, response) pairs of `splits`, concatenated in the given order.
pub fn load_pairs(dir: &Path, splits: &[&str]) -> Result<Vec<Bitext>, DataError> {
    let mut out = Vec::new();
    for s in splits {
        out.extend(response_pairs(&load_split(dir, s)?));
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use harness_core::shared_datasets_dir;
    use std::io::Write;

    #[test]
    fn real_counts_for_every_split_and_known_records() {
        let dir = shared_datasets_dir().join("conversation-pairs");
        let expected = [
            ("valid_freq", 539, 11_681, 11_142),
            ("valid_rare", 539, 11_692, 11_153),
            ("test_freq", 539, 11_760, 11_221),
            ("test_rare", 539, 11_770, 11_231),
        ];
        for (split, convs, utts, pairs) in expected {
            let c = load_split(&dir, split).unwrap();
            assert_eq!(c.len(), convs, "{split}");
            assert_eq!(
                c.iter().map(|c| c.turns.len()).sum::<usize>(),
                utts,
                "{split}"
            );
            assert_eq!(response_pairs(&c).len(), pairs, "{split}");
        }
        let all = load_pairs(&dir, &SPLITS).unwrap();
        assert_eq!(all.len(), 44_747);

        let first = &load_split(&dir, "valid_freq").unwrap()[0];
        assert_eq!(first.id, "t_a2b769a0-c082-4c26-8d8d-e2c5b8a79d93");
        assert_eq!(
            all[0],
            Bitext {
                source: "Are you a football fan?".into(),
                target: "yes, I'm. a football fan.".into()
            }
        );
    }

    #[test]
    fn order_is_kept_and_bad_json_names_file_and_line() {
        let dir = tempfile::tempdir().unwrap();
        let json = r#"{"z": {"content": [{"message": "a", "agent": "agent_1"}, {"message": "b \"q\"", "agent": "agent_2"}, {"message": "c"}]},
 "a": {"content": [{"message": "x"}]}}"#;
        std::fs::write(dir.path().join("valid_freq.json"), json).unwrap();
        let c = load_split(dir.path(), "valid_freq").unwrap();
        assert_eq!(c[0].id, "z");
        assert_eq!(c[1].id, "a");
        let p = response_pairs(&c);
        assert_eq!(p.len(), 2);
        assert_eq!(p[1].source, "b \"q\"");

        std::fs::write(
            dir.path().join("valid_freq.json"),
            "{\n\"z\": {\"content\": 3}}",
        )
        .unwrap();
        let msg = load_split(dir.path(), "valid_freq")
            .unwrap_err()
            .to_string();
        assert!(msg.contains("valid_freq.json:2"), "{msg}");
    }

    #[test]
    fn gz_truncation_and_missing_file() {
        let dir = tempfile::tempdir().unwrap();
        let mut enc = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
        let body: String = (0..200)
            .map(|i| format!("\"c{i}\": {{\"content\": [{{\"message\": \"m\"}}]}}"))
            .collect::<Vec<_>>()
            .join(",\n");
        enc.write_all(format!("{{{body}}}").as_bytes()).unwrap();
        let g = enc.finish().unwrap();
        std::fs::write(dir.path().join("test_rare.json.gz"), &g).unwrap();
        assert_eq!(load_split(dir.path(), "test_rare").unwrap().len(), 200);
        std::fs::write(dir.path().join("test_rare.json.gz"), &g[..g.len() / 2]).unwrap();
        let msg = load_split(dir.path(), "test_rare").unwrap_err().to_string();
        assert!(msg.contains("test_rare.json.gz"), "{msg}");
        let msg = load_split(dir.path(), "test_freq").unwrap_err().to_string();
        assert!(msg.contains("test_freq.json"), "{msg}");
    }
}
