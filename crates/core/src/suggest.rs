//! Did-you-mean: the one rule every "unknown name" message of harness uses.
//! Written by hand on `strsim`'s distances: the rule (and ripgrep's trigram threshold) is
//! ours, the string metrics are the crate's.

use std::collections::BTreeSet;

/// The closest of `candidates` to `word`, if any is close enough: normalised
/// Damerau-Levenshtein similarity ≥ 0.6, or character-trigram Jaccard ≥ 0.4 (ripgrep's
/// threshold), whichever scores higher.
pub fn suggest(word: &str, candidates: &[&str]) -> Option<String> {
    let w = word.to_lowercase();
    candidates
        .iter()
        .filter(|c| **c != word)
        .map(|c| {
            let cl = c.to_lowercase();
            let dl = strsim::normalized_damerau_levenshtein(&w, &cl);
            let jac = trigram_jaccard(&w, &cl);
            let score = if dl >= 0.6 || jac >= 0.4 {
                dl.max(jac)
            } else {
                0.0
            };
            // Ties (`adamm`: `adam` or `adamw`) go to the one sharing more trigrams.
            (score, dl + jac, *c)
        })
        .filter(|(s, _, _)| *s > 0.0)
        .max_by(|a, b| a.0.total_cmp(&b.0).then(a.1.total_cmp(&b.1)))
        .map(|(_, _, c)| c.to_string())
}

fn trigram_jaccard(a: &str, b: &str) -> f64 {
    let grams = |s: &str| -> BTreeSet<String> {
        let chars: Vec<char> = format!("  {s} ").chars().collect();
        chars.windows(3).map(|w| w.iter().collect()).collect()
    };
    let (ga, gb) = (grams(a), grams(b));
    let inter = ga.intersection(&gb).count() as f64;
    let union = ga.union(&gb).count() as f64;
    if union == 0.0 {
        0.0
    } else {
        inter / union
    }
}

/// ` (did you mean `X`?)` for the closest candidate, or an empty string: the suffix every
/// "unknown name" message appends.
pub fn did_you_mean(word: &str, candidates: &[&str]) -> String {
    suggest(word, candidates).map_or(String::new(), |s| format!(" (did you mean `{s}`?)"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn suggestions_find_near_misses_only() {
        assert_eq!(
            suggest("encodr", &["encoder", "decoder", "heads"]).as_deref(),
            Some("encoder")
        );
        assert_eq!(
            suggest("tatoeb", &["tatoeba", "xnli"]).as_deref(),
            Some("tatoeba")
        );
        assert_eq!(
            suggest("optimiser", &["optimizer", "train"]).as_deref(),
            Some("optimizer")
        );
        assert_eq!(suggest("zzz", &["encoder", "decoder"]), None);
        assert_eq!(
            suggest("adamm", &["adam", "adamw", "sgd"]).as_deref(),
            Some("adam")
        );
    }

    #[test]
    fn did_you_mean_formats_the_suffix_or_nothing() {
        assert_eq!(
            did_you_mean("xnl", &["xnli", "bucc"]),
            " (did you mean `xnli`?)"
        );
        assert_eq!(did_you_mean("zzz", &["xnli"]), "");
    }
}
