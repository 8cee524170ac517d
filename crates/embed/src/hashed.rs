//! `hashed-ngrams`: an encoder that needs no training. Reference: the input representation
//! of the multilingual USE dual encoder (Chidambaram et al. 2019, "Learning Cross-Lingual
//! Sentence Representations via a Multi-task Dual-Encoder Model", §2.1 "Word and Character
//! Embeddings" and §3 hyper-parameters: word unigrams with hash buckets, and "200 thousand
//! hash buckets used for 3 and 4 grams" of characters, the word and character embeddings
//! averaged). Here the learned embedding tables are replaced by a fixed seeded random
//! projection, which gives a deterministic bag-of-features baseline for every benchmark.
//!
//! The exact rule, for a sentence `s` (parameters `dim` = 512, `seed` = 1, `buckets` =
//! 2^20 per feature family by default; all are in the fingerprint with [`VERSION`]):
//! 1. **Lowercase** with Unicode's full, locale-independent `str::to_lowercase`. No other
//!    normalisation (no NFKC, no accent stripping).
//! 2. **Tokens**: split at whitespace and control characters; every punctuation character
//!    (ASCII punctuation plus the common Unicode punctuation of Latin-1, General
//!    Punctuation, CJK, full-width, Arabic, Devanagari, Thai, Armenian, Hebrew, Ethiopic and
//!    Greek; see `is_punct`) is a token of its own, as treebank-style tokenisation does.
//!    Every other character (letters, digits, combining marks, symbols) belongs to the
//!    token around it. So `"Hello, world!"` is `hello` `,` `world` `!`, and a Chinese or Thai
//!    clause with no spaces is one token: its character n-grams carry its content.
//! 3. **Features**: each token is a word unigram; each token wrapped in boundary markers
//!    `<token>` gives its character (Unicode scalar value) 3-grams and 4-grams (a token
//!    shorter than the n-gram gives none of that size; `<a>` is one 3-gram).
//! 4. **Hashing**: a feature's UTF-8 bytes, preceded by a family byte (`w` or `c`), are
//!    hashed with 64-bit FNV-1a whose offset basis is mixed with `seed`, then finalised with
//!    SplitMix64; the top `buckets` bits give the bucket. Word and character buckets are
//!    separate ranges, as in the paper's separate vocabularies.
//! 5. **Weights**: within each family, a bucket hit `c` times weighs `1 + ln c` (sublinear
//!    term frequency).
//! 6. **Projection**: bucket `b` has a fixed random row `r_b ∈ {−1, +1}^dim` (Achlioptas
//!    2003; the usual `1/√dim` scale cancels in step 7). Its signs are the bits of
//!    SplitMix64 outputs seeded with `seed ⊕ splitmix(b)`, so no matrix is stored and any
//!    bucket's row is regenerated in a few nanoseconds.
//! 7. **Pooling**: `v_w = Σ_b w_b r_b` over word buckets and `v_c` likewise over character
//!    buckets, each scaled to unit L2 norm, then averaged (the paper averages its word and
//!    character embeddings), and the result scaled to unit L2 norm. A sentence with no
//!    token (empty or all whitespace) gives the zero vector.
//!
//! All arithmetic is sequential f32 in a fixed order within a sentence, so the output bits
//! are identical across calls, threads, processes and batchings; sentences are encoded in
//! parallel with rayon.

use super::encoder::Encoder;
use super::error::EncodeError;
use super::matrix::Matrix;
// Steps 2-3 (tokens, n-grams) are shared with the `words` tokenizer.
use harness_data::words::{char_ngrams, tokens, FNV_OFFSET, FNV_PRIME};
use rayon::prelude::*;

/// Version of the rule above; bump it whenever the output of any sentence changes.
pub const VERSION: u32 = 1;

/// Parameters of [`HashedNgrams`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HashedParams {
    /// Output dimension.
    pub dim: usize,
    /// Seed of the hash and of the projection.
    pub seed: u64,
    /// log2 of the number of buckets per feature family (words, character n-grams).
    pub log2_buckets: u32,
}

impl Default for HashedParams {
    fn default() -> Self {
        HashedParams {
            dim: 512,
            seed: 1,
            log2_buckets: 20,
        }
    }
}

/// Character n-gram sizes (the paper's 3- and 4-grams).
const NGRAMS: [usize; 2] = [3, 4];

/// The hashed word + character n-gram random-projection encoder (rule in the module doc).
#[derive(Debug, Clone)]
pub struct HashedNgrams {
    params: HashedParams,
}

impl HashedNgrams {
    /// An encoder with these parameters.
    pub fn new(params: HashedParams) -> Self {
        HashedNgrams { params }
    }

    /// Parses the part of a spec after `hashed-ngrams:` (`dim=D,seed=S,buckets=K`, any
    /// subset, any order); `None` gives the defaults.
    pub fn from_spec(spec: &str, rest: Option<&str>) -> Result<Self, EncodeError> {
        let mut p = HashedParams::default();
        for item in rest.unwrap_or("").split(',').filter(|s| !s.is_empty()) {
            let (key, value) = item.split_once('=').ok_or_else(|| {
                EncodeError::bad_spec(
                    spec,
                    format!("`{item}` is not KEY=VALUE (keys: dim, seed, buckets)"),
                )
            })?;
            let bad = |what: &str| EncodeError::bad_spec(spec, format!("`{key}={value}`: {what}"));
            match key.trim() {
                "dim" => {
                    p.dim = value.trim().parse().map_err(|_| bad("not an integer"))?;
                    if p.dim == 0 || p.dim > 65536 {
                        return Err(bad("dim must be between 1 and 65536"));
                    }
                }
                "seed" => p.seed = value.trim().parse().map_err(|_| bad("not an integer"))?,
                "buckets" => {
                    p.log2_buckets = value.trim().parse().map_err(|_| bad("not an integer"))?;
                    if !(1..=31).contains(&p.log2_buckets) {
                        return Err(bad("buckets is log2 of the bucket count, between 1 and 31"));
                    }
                }
                other => {
                    return Err(EncodeError::bad_spec(
                        spec,
                        format!("unknown key `{other}` (keys: dim, seed, buckets)"),
                    ))
                }
            }
        }
        Ok(HashedNgrams::new(p))
    }

    /// The parameters.
    pub fn params(&self) -> &HashedParams {
        &self.params
    }

    /// Encodes one sentence into `out` (length `dim`), per the module doc.
    pub fn encode_one(&self, sentence: &str, out: &mut [f32]) {
        let dim = self.params.dim;
        assert_eq!(out.len(), dim, "HashedNgrams::encode_one: output length");
        out.fill(0.0);
        let lower = sentence.to_lowercase();
        let (words, chars) = self.features(&lower);
        if words.is_empty() {
            return;
        }
        let mut v_char = vec![0.0f32; dim];
        self.project(&words, out);
        self.project(&chars, &mut v_char);
        normalize(out);
        normalize(&mut v_char);
        for (a, b) in out.iter_mut().zip(&v_char) {
            *a = (*a + *b) * 0.5;
        }
        normalize(out);
    }

    /// Sorted bucket ids of the word unigrams and of the character n-grams.
    fn features(&self, text: &str) -> (Vec<u32>, Vec<u32>) {
        let k = self.params.log2_buckets;
        let basis = FNV_OFFSET ^ splitmix64(self.params.seed);
        let bucket = |family: u8, bytes: &[u8]| -> u32 {
            let mut h = (basis ^ family as u64).wrapping_mul(FNV_PRIME);
            for &b in bytes {
                h = (h ^ b as u64).wrapping_mul(FNV_PRIME);
            }
            (splitmix64(h) >> (64 - k)) as u32
        };
        let mut words = Vec::new();
        let mut chars = Vec::new();
        for token in tokens(text) {
            words.push(bucket(b'w', token.as_bytes()));
            char_ngrams(token, &NGRAMS, |gram| chars.push(bucket(b'c', gram)));
        }
        words.sort_unstable();
        chars.sort_unstable();
        (words, chars)
    }

    /// `out += Σ_b (1 + ln count_b) r_b` over the runs of equal ids in sorted `buckets`.
    fn project(&self, buckets: &[u32], out: &mut [f32]) {
        let mut i = 0;
        while i < buckets.len() {
            let b = buckets[i];
            let mut j = i + 1;
            while j < buckets.len() && buckets[j] == b {
                j += 1;
            }
            let w = 1.0 + ((j - i) as f32).ln();
            let mut state = self.params.seed ^ splitmix64(b as u64 + 1);
            for chunk in out.chunks_mut(64) {
                let bits = splitmix_next(&mut state);
                // Bit t of `bits` set → +w at position t, clear → −w; 8 positions at a time
                // through a ±1 table (exact: w·(±1) = ±w), which the compiler vectorises.
                for (byte, xs) in chunk.chunks_mut(8).enumerate() {
                    let signs = &SIGNS[((bits >> (8 * byte)) & 0xff) as usize];
                    for (x, s) in xs.iter_mut().zip(signs) {
                        *x += w * s;
                    }
                }
            }
            i = j;
        }
    }
}

impl Encoder for HashedNgrams {
    fn name(&self) -> &str {
        "hashed-ngrams"
    }

    fn fingerprint(&self) -> String {
        let p = &self.params;
        format!(
            "hashed-ngrams-v{VERSION}-dim{}-seed{}-buckets2e{}-w1-c3c4-lower-log1tf-pm1",
            p.dim, p.seed, p.log2_buckets
        )
    }

    fn dim(&self) -> usize {
        self.params.dim
    }

    fn encode(&self, sentences: &[&str]) -> Result<Matrix, EncodeError> {
        let dim = self.params.dim;
        let mut m = Matrix::zeros(sentences.len(), dim);
        if dim > 0 {
            m.data
                .par_chunks_mut(dim)
                .zip(sentences.par_iter())
                .for_each(|(row, s)| self.encode_one(s, row));
        }
        Ok(m)
    }
}

/// `SIGNS[b][t]` is +1 when bit `t` of `b` is set, else −1.
static SIGNS: [[f32; 8]; 256] = {
    let mut table = [[0.0f32; 8]; 256];
    let mut b = 0;
    while b < 256 {
        let mut t = 0;
        while t < 8 {
            table[b][t] = if (b >> t) & 1 == 1 { 1.0 } else { -1.0 };
            t += 1;
        }
        b += 1;
    }
    table
};

/// SplitMix64's finaliser (Steele, Lea & Flood 2014): a bijective 64-bit mix.
pub fn splitmix64(x: u64) -> u64 {
    let mut z = x.wrapping_add(0x9e37_79b9_7f4a_7c15);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

/// The next output of a SplitMix64 generator.
fn splitmix_next(state: &mut u64) -> u64 {
    *state = state.wrapping_add(0x9e37_79b9_7f4a_7c15);
    let mut z = *state;
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

/// Scales to unit L2 norm (a zero vector stays zero); the norm is summed in f64.
fn normalize(v: &mut [f32]) {
    let norm = v.iter().map(|&x| x as f64 * x as f64).sum::<f64>().sqrt();
    if norm > 0.0 {
        let inv = (1.0 / norm) as f32;
        v.iter_mut().for_each(|x| *x *= inv);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn enc() -> HashedNgrams {
        HashedNgrams::new(HashedParams::default())
    }

    fn cos(a: &[f32], b: &[f32]) -> f32 {
        a.iter().zip(b).map(|(x, y)| x * y).sum()
    }

    #[test]
    fn rows_are_unit_norm_deterministic_and_batch_independent() {
        let e = enc();
        let s = [
            "A man is playing a guitar.",
            "Ein Mann spielt Gitarre.",
            "一个男人在弹吉他。",
            "ผู้ชายกำลังเล่นกีตาร์",
            "x",
        ];
        let a = e.encode(&s).unwrap();
        let b = e.encode(&s).unwrap();
        assert_eq!(a.rows, 5);
        assert_eq!(a.cols, 512);
        assert!(a
            .data
            .iter()
            .zip(&b.data)
            .all(|(x, y)| x.to_bits() == y.to_bits()));
        for i in 0..a.rows {
            let n: f32 = a.row(i).iter().map(|x| x * x).sum();
            assert!((n - 1.0).abs() < 1e-5, "row {i} has squared norm {n}");
            let single = e.encode(&s[i..i + 1]).unwrap();
            assert_eq!(single.row(0), a.row(i), "batching changed row {i}");
        }
        let empty = e.encode(&["", "  "]).unwrap();
        assert!(empty.data.iter().all(|&x| x == 0.0));
    }

    #[test]
    fn similar_sentences_are_closer_than_unrelated_ones() {
        let e = enc();
        let m = e
            .encode(&[
                "A man is playing a guitar.",
                "A man plays the guitar.",
                "The stock market fell sharply on Monday.",
                "一个男人在弹吉他",
                "一个男人在弹钢琴",
                "股市周一大幅下跌",
            ])
            .unwrap();
        assert!(cos(m.row(0), m.row(1)) > cos(m.row(0), m.row(2)) + 0.2);
        assert!(cos(m.row(3), m.row(4)) > cos(m.row(3), m.row(5)) + 0.2);
    }

    #[test]
    fn seeds_dims_and_buckets_change_output_and_fingerprint() {
        let base = enc();
        let other = HashedNgrams::from_spec("hashed-ngrams:seed=2", Some("seed=2")).unwrap();
        let s = ["A man is playing a guitar."];
        let (a, b) = (base.encode(&s).unwrap(), other.encode(&s).unwrap());
        assert_ne!(a.data, b.data);
        assert!(cos(a.row(0), b.row(0)).abs() < 0.3);
        assert_ne!(base.fingerprint(), other.fingerprint());
        let small = HashedNgrams::from_spec("x", Some("dim=100,buckets=16")).unwrap();
        assert_eq!(small.encode(&s).unwrap().cols, 100);
        assert_ne!(small.fingerprint(), base.fingerprint());
        assert!(HashedNgrams::from_spec("x", Some("dims=3")).is_err());
        assert!(HashedNgrams::from_spec("x", Some("dim=0")).is_err());
    }

    /// A fixed input's first values, pinned: any change to the rule must bump `VERSION`
    /// (and then update these numbers).
    #[test]
    fn output_is_pinned_for_this_version() {
        let m = enc().encode(&["A man is playing a guitar."]).unwrap();
        let head: Vec<u32> = m.row(0)[..4].iter().map(|x| x.to_bits()).collect();
        assert_eq!(head, PINNED_HEAD, "values: {:?}", &m.row(0)[..4]);
        assert_eq!(VERSION, 1);
    }
    const PINNED_HEAD: [u32; 4] = [1024788042, 999421583, 1025406180, 3166487787];

    /// Same bits in a separate process (the test binary re-run as a child).
    #[test]
    fn same_bits_in_another_process() {
        const VAR: &str = "HARNESS_TEST_HASHED_CHILD_OUT";
        let sentences = ["A man is playing a guitar.", "一个男人在弹吉他", "ภาษาไทย"];
        let bits =
            |m: &Matrix| -> Vec<u8> { m.data.iter().flat_map(|x| x.to_le_bytes()).collect() };
        let m = enc().encode(&sentences).unwrap();
        if let Some(out) = std::env::var_os(VAR) {
            std::fs::write(out, bits(&m)).unwrap();
            return;
        }
        let dir = tempfile::tempdir().unwrap();
        let out = dir.path().join("bits");
        let status = std::process::Command::new(std::env::current_exe().unwrap())
            .args([
                "--exact",
                "hashed::tests::same_bits_in_another_process",
                "--quiet",
            ])
            .env(VAR, &out)
            .env("RAYON_NUM_THREADS", "3")
            .stdout(std::process::Stdio::null())
            .status()
            .unwrap();
        assert!(status.success());
        assert_eq!(std::fs::read(&out).unwrap(), bits(&m));
    }
}
