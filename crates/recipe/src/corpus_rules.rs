//! The splits, languages and pairs a shipped training corpus may name, by dataset: one
//! place for the rules that `harness validate` applies and that the corpus loaders
//! (`harness_train::corpora`) refuse with before reading anything, in the same words.

use crate::de::Seg;
use crate::schema::Corpus;

/// Why a corpus cannot be read: where below `data.corpora.NAME`, what is wrong, the fix.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CorpusRefusal {
    /// The path below the corpus (`splits`, `languages`, `pairs[0]`).
    pub at: Vec<Seg>,
    pub detail: String,
    pub fix: &'static str,
}

impl std::fmt::Display for CorpusRefusal {
    /// `DETAIL. Fix: FIX`: the words `train` prints after the key path.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}. Fix: {}", self.detail, self.fix)
    }
}

/// The first rule corpus `c` breaks, in the order its loader reads it: the intent sets
/// (`atis`, `snips`: English only; `xsid`: English training data, every language's `valid`
/// and `test`, or `X-en` translation pairs of `valid` and `test`) and the NLI sets (`snli`,
/// `sick`: `train`, `validation`, `test`). Other datasets have no such rule here.
pub fn corpus_refusal(c: &Corpus) -> Option<CorpusRefusal> {
    let refuse =
        |at: Vec<Seg>, detail: String, fix: &'static str| Some(CorpusRefusal { at, detail, fix });
    let splits = || Seg::Key("splits".into());
    match c.dataset.as_deref()? {
        "xsid" if !c.pairs.is_empty() => {
            for (i, pair) in c.pairs.iter().enumerate() {
                if !matches!(pair.split_once('-'), Some((x, "en")) if x != "en") {
                    return refuse(
                        vec![Seg::Key("pairs".into()), Seg::Index(i)],
                        format!("`{pair}`: xSID's translations are of English"),
                        "spell each pair `X-en` with an xSID language X (`de-en`)",
                    );
                }
            }
            for s in &c.splits {
                if !matches!(s.as_str(), "valid" | "validation" | "dev" | "test") {
                    return refuse(
                        vec![splits()],
                        format!("xSID has translations in `valid` and `test`, not `{s}`"),
                        "read `valid` (or `test`)",
                    );
                }
            }
            None
        }
        d @ ("xsid" | "atis" | "snips") => {
            let slot_gated = d != "xsid";
            if slot_gated && c.languages.iter().any(|l| l != "en") {
                return refuse(
                    vec![Seg::Key("languages".into())],
                    format!("`{d}` is English only"),
                    "drop `languages` (or give `[en]`)",
                );
            }
            let en = ["en".to_string()];
            let languages = if c.languages.is_empty() {
                &en[..]
            } else {
                &c.languages
            };
            let train = ["train".to_string()];
            let chosen = if c.splits.is_empty() {
                &train[..]
            } else {
                &c.splits
            };
            for lang in languages {
                for s in chosen {
                    let known = matches!(
                        s.as_str(),
                        "train" | "valid" | "validation" | "dev" | "test"
                    );
                    if !known {
                        return refuse(
                            vec![splits()],
                            format!("unknown split `{s}`"),
                            "use `train`, `valid` or `test`",
                        );
                    }
                    if !slot_gated && s == "train" && lang != "en" {
                        return refuse(
                            vec![splits()],
                            format!("xSID has training data in English only, not `{lang}`"),
                            "read `valid` or `test` for the other languages",
                        );
                    }
                }
            }
            None
        }
        "snli" | "sick" => c
            .splits
            .iter()
            .find(|s| {
                !matches!(
                    s.as_str(),
                    "train" | "validation" | "valid" | "dev" | "test"
                )
            })
            .and_then(|s| {
                refuse(
                    vec![splits()],
                    format!("unknown split `{s}`"),
                    "use `train`, `validation` or `test`",
                )
            }),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn corpus(yaml: &str) -> Corpus {
        serde_yaml::from_str(yaml).unwrap()
    }

    fn refusal(yaml: &str) -> Option<String> {
        corpus_refusal(&corpus(yaml)).map(|r| format!("{}: {r}", crate::de::path_string(&r.at)))
    }

    #[test]
    fn each_intent_and_nli_rule_refuses_and_the_good_declarations_pass() {
        for (yaml, expected) in [
            (
                "{dataset: atis, languages: [de]}",
                "languages: `atis` is English only",
            ),
            (
                "{dataset: snips, splits: [nope]}",
                "splits: unknown split `nope`",
            ),
            (
                "{dataset: xsid, languages: [de], splits: [train]}",
                "xSID has training data in English only, not `de`",
            ),
            (
                "{dataset: xsid, pairs: [de-fr]}",
                "pairs[0]: `de-fr`: xSID's translations are of English",
            ),
            (
                "{dataset: xsid, pairs: [de-en], splits: [train]}",
                "xSID has translations in `valid` and `test`, not `train`",
            ),
            (
                "{dataset: snli, splits: [nope]}",
                "splits: unknown split `nope`. Fix: use `train`, `validation` or `test`",
            ),
        ] {
            let got = refusal(yaml).unwrap_or_default();
            assert!(got.contains(expected), "{yaml}: {got}");
        }
        for yaml in [
            "{dataset: atis}",
            "{dataset: xsid, languages: [en, de], splits: [valid, test]}",
            "{dataset: xsid, pairs: [de-en], splits: [valid]}",
            "{dataset: sick, splits: [train, validation]}",
            "{dataset: parallel-pairs, splits: [anything]}",
        ] {
            assert_eq!(refusal(yaml), None, "{yaml}");
        }
    }
}
