//! Words and their character n-grams: the input representation of multilingual USE
//! (Chidambaram et al. 2019, §2.1 "Word and Character Embeddings"; §4: "treebank style
//! tokenized", "hash buckets used for 3 and 4 grams"). Shared by the `hashed-ngrams`
//! encoder (harness-embed) and the `words` tokenizer ([`crate::tokenize`]), so both split a
//! sentence and enumerate its n-grams the same way.
//!
//! - **Tokens**: split at whitespace and control characters; every punctuation character
//!   (ASCII punctuation plus the common Unicode punctuation of Latin-1, General
//!   Punctuation, CJK, full-width, Arabic, Devanagari, Thai, Armenian, Hebrew, Ethiopic and
//!   Greek; see `is_punct`) is a token of its own, as treebank-style tokenisation does.
//!   Every other character belongs to the token around it: `"Hello, world!"` is `Hello`
//!   `,` `world` `!`, and a Chinese clause with no spaces is one token.
//! - **CJK characters** ([`tokens_cjk`], what the `words` tokenizer uses since its settings
//!   say `cjk=chars`): as [`tokens`], and every CJK ideograph is also a token of its own,
//!   the rule of BERT's `BasicTokenizer._tokenize_chinese_chars` (google-research/bert,
//!   `tokenization.py`, same code-point ranges; kana and Hangul are not split). Chinese has
//!   no spaces, so without it a whole clause is one out-of-vocabulary word.
//! - **Thai clusters** ([`tokens_split`] with `thai`, what the `words` tokenizer uses since
//!   its settings say `thai=clusters`): Thai is written without spaces between words, and
//!   no word segmenter (the XNLI paper uses pythainlp's dictionary matcher) is at hand
//!   offline, so each Thai character with the combining vowel and tone marks that follow
//!   it (U+0E31, U+0E34–U+0E3A, U+0E47–U+0E4E) is a token of its own: an unspaced clause
//!   becomes a sequence a model can read instead of one out-of-vocabulary word.
//! - **Character n-grams**: the token wrapped in boundary markers, `<token>`, gives its
//!   character (Unicode scalar value) n-grams of each asked size in order of size, then of
//!   start; a token shorter than n gives none of that size (`<a>` is one 3-gram).
//! - **Hashing** ([`fnv1a64`]): 64-bit FNV-1a over the n-gram's UTF-8 bytes. Hand-written:
//!   eight lines, and the rule must never change with a dependency's version.

/// The tokens of `text` (see the module doc).
pub fn tokens(text: &str) -> impl Iterator<Item = &str> {
    split(text, false, false)
}

/// The tokens of `text` with every CJK ideograph a token of its own (see the module doc).
pub fn tokens_cjk(text: &str) -> impl Iterator<Item = &str> {
    split(text, true, false)
}

/// The tokens of `text`, with every CJK ideograph (`cjk`) and every Thai character cluster
/// (`thai`) a token of its own (see the module doc).
pub fn tokens_split(text: &str, cjk: bool, thai: bool) -> impl Iterator<Item = &str> {
    split(text, cjk, thai)
}

fn split(text: &str, cjk: bool, thai: bool) -> impl Iterator<Item = &str> {
    let thai_cluster = move |c: char| thai && is_thai(c) && !is_punct(c);
    let alone = move |c: char| is_punct(c) || (cjk && is_cjk_ideograph(c)) || thai_cluster(c);
    let mut rest = text;
    std::iter::from_fn(move || {
        rest = rest.trim_start_matches(|c: char| c.is_whitespace() || c.is_control());
        let first = rest.chars().next()?;
        let len = if thai_cluster(first) {
            let marks = rest[first.len_utf8()..]
                .find(|c: char| !is_thai_mark(c))
                .unwrap_or(rest.len() - first.len_utf8());
            first.len_utf8() + marks
        } else if alone(first) {
            first.len_utf8()
        } else {
            rest.find(|c: char| c.is_whitespace() || c.is_control() || alone(c))
                .unwrap_or(rest.len())
        };
        let (tok, tail) = rest.split_at(len);
        rest = tail;
        Some(tok)
    })
}

/// Calls `f` with the UTF-8 bytes of every character n-gram of `<token>`, for each size in
/// `sizes` in that order, then by start position.
pub fn char_ngrams(token: &str, sizes: &[usize], mut f: impl FnMut(&[u8])) {
    let mut padded = String::with_capacity(token.len() + 2);
    padded.push('<');
    padded.push_str(token);
    padded.push('>');
    let mut bounds: Vec<usize> = padded.char_indices().map(|(i, _)| i).collect();
    bounds.push(padded.len());
    let n_chars = bounds.len() - 1;
    for &n in sizes {
        for start in 0..(n_chars + 1).saturating_sub(n) {
            f(&padded.as_bytes()[bounds[start]..bounds[start + n]]);
        }
    }
}

/// FNV-1a offset basis (64-bit).
pub const FNV_OFFSET: u64 = 0xcbf2_9ce4_8422_2325;
/// FNV-1a prime (64-bit).
pub const FNV_PRIME: u64 = 0x0000_0100_0000_01b3;

/// 64-bit FNV-1a of `bytes`.
pub fn fnv1a64(bytes: &[u8]) -> u64 {
    let mut h = FNV_OFFSET;
    for &b in bytes {
        h = (h ^ b as u64).wrapping_mul(FNV_PRIME);
    }
    h
}

/// CJK Unified Ideographs and their extensions and compatibility blocks: the ranges of
/// BERT's `_is_chinese_char` (google-research/bert, `tokenization.py`).
fn is_cjk_ideograph(c: char) -> bool {
    matches!(c as u32,
        0x4E00..=0x9FFF | 0x3400..=0x4DBF | 0x20000..=0x2A6DF | 0x2A700..=0x2B73F
        | 0x2B740..=0x2B81F | 0x2B820..=0x2CEAF | 0xF900..=0xFAFF | 0x2F800..=0x2FA1F)
}

/// The Thai block's letters, vowels, marks and digits.
fn is_thai(c: char) -> bool {
    matches!(c as u32, 0x0E01..=0x0E5B)
}

/// Thai combining vowel and tone marks: they belong to the character before them.
fn is_thai_mark(c: char) -> bool {
    matches!(c as u32, 0x0E31 | 0x0E34..=0x0E3A | 0x0E47..=0x0E4E)
}

/// Punctuation characters that form tokens of their own.
fn is_punct(c: char) -> bool {
    if c.is_ascii() {
        return c.is_ascii_punctuation();
    }
    matches!(c as u32,
        0x00A1 | 0x00A7 | 0x00AB | 0x00B6 | 0x00B7 | 0x00BB | 0x00BF // ¡ § « ¶ · » ¿
        | 0x037E | 0x0387 // Greek question mark, ano teleia
        | 0x055A..=0x055F | 0x0589 // Armenian
        | 0x05BE | 0x05C0 | 0x05C3 | 0x05F3 | 0x05F4 // Hebrew
        | 0x060C | 0x061B | 0x061F | 0x066A..=0x066D | 0x06D4 // Arabic
        | 0x0964 | 0x0965 | 0x0970 // Devanagari danda, double danda, abbreviation
        | 0x0E4F | 0x0E5A | 0x0E5B // Thai
        | 0x1361..=0x1368 // Ethiopic
        | 0x2010..=0x2027 | 0x2030..=0x205E // General Punctuation
        | 0x3001..=0x3003 | 0x3008..=0x3011 | 0x3014..=0x301F | 0x30FB // CJK
        | 0xFF01..=0xFF0F | 0xFF1A..=0xFF20 | 0xFF3B..=0xFF40 | 0xFF5B..=0xFF65 // full-width
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tokens_split_punctuation_and_keep_unspaced_scripts_whole() {
        let t: Vec<_> = tokens("hello, world!  it's").collect();
        assert_eq!(t, vec!["hello", ",", "world", "!", "it", "'", "s"]);
        let t: Vec<_> = tokens("我爱北京。ภาษาไทย").collect();
        assert_eq!(t, vec!["我爱北京", "。", "ภาษาไทย"]);
        let t: Vec<_> = tokens("नमस्ते दुनिया।").collect();
        assert_eq!(t, vec!["नमस्ते", "दुनिया", "।"]);
        assert_eq!(tokens(" \t\n").count(), 0);
    }

    /// Ideographs split, kana, Hangul, Latin and punctuation as in [`tokens`].
    #[test]
    fn tokens_cjk_split_ideographs_only() {
        let t: Vec<_> = tokens_cjk("我爱北京。ok abc汉字 ひらがな한국어").collect();
        assert_eq!(
            t,
            vec![
                "我",
                "爱",
                "北",
                "京",
                "。",
                "ok",
                "abc",
                "汉",
                "字",
                "ひらがな한국어"
            ]
        );
        // Extension B (outside the Basic Multilingual Plane) and a compatibility ideograph.
        let t: Vec<_> = tokens_cjk("𠀀x豈").collect();
        assert_eq!(t, vec!["𠀀", "x", "豈"]);
        let t: Vec<_> = tokens_cjk("hello, world!").collect();
        assert_eq!(t, tokens("hello, world!").collect::<Vec<_>>());
    }

    /// Thai splits into characters with their combining marks; other scripts as before.
    #[test]
    fn thai_splits_into_clusters_with_their_marks() {
        // เป็น ("to be"): เ, ป + ็ (a combining mark), น; ภาษาไทย: ภ, า, ษ, า, ไ, ท, ย.
        let t: Vec<_> = tokens_split("เป็น ภาษาไทย, ok!", true, true).collect();
        assert_eq!(
            t,
            vec![
                "เ", "ป็", "น", "ภ", "า", "ษ", "า", "ไ", "ท", "ย", ",", "ok", "!"
            ]
        );
        // A tone mark over a vowel mark: น + ี + ้ is one cluster; Thai punctuation ๏
        // stays alone; CJK as `cjk` says.
        let t: Vec<_> = tokens_split("นี้๏汉字", false, true).collect();
        assert_eq!(t, vec!["นี้", "๏", "汉字"]);
        assert_eq!(
            tokens_split("ภาษาไทย 汉字", true, false).collect::<Vec<_>>(),
            vec!["ภาษาไทย", "汉", "字"]
        );
    }

    /// By hand: `<cat>` has the 3-grams `<ca`, `cat`, `at>` and the 4-grams `<cat`, `cat>`;
    /// `<a>` has one 3-gram and no 4-gram; n-grams count characters, not bytes.
    #[test]
    fn char_ngrams_by_hand() {
        let grams = |t: &str, sizes: &[usize]| {
            let mut out = Vec::new();
            char_ngrams(t, sizes, |g| {
                out.push(String::from_utf8(g.to_vec()).unwrap())
            });
            out
        };
        assert_eq!(
            grams("cat", &[3, 4]),
            vec!["<ca", "cat", "at>", "<cat", "cat>"]
        );
        assert_eq!(grams("a", &[3, 4]), vec!["<a>"]);
        assert_eq!(grams("猫咪", &[3]), vec!["<猫咪", "猫咪>"]);
        assert_eq!(grams("ab", &[4, 3]), vec!["<ab>", "<ab", "ab>"]);
    }

    /// The reference vectors of the FNV specification (draft-eastlake-fnv, test suite).
    #[test]
    fn fnv1a64_reference_vectors() {
        assert_eq!(fnv1a64(b""), 0xcbf2_9ce4_8422_2325);
        assert_eq!(fnv1a64(b"a"), 0xaf63_dc4c_8601_ec8c);
        assert_eq!(fnv1a64(b"foobar"), 0x8594_4171_f739_67e8);
    }
}
