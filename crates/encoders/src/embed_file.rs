//! Encoding a sentence file (`harness embed`): encode a sentence file with any encoder into an `.npy` matrix, through
//! the embedding cache.

use crate::open_encoder_on;
use harness_core::device::Device;
use harness_core::settings::Settings;
use harness_embed::cache::{CacheStats, CachedEncoder};
use harness_embed::npy::write_npy;
use harness_embed::{read_sentences, EncodeError, Encoder, Matrix};
use std::path::Path;
use std::time::Instant;

/// Sentences handed to the cache at a time: each chunk becomes one cache segment, so a
/// killed `embed` keeps what it finished, and the progress bar moves per chunk.
const CHUNK: usize = 8192;

/// What `embed` did.
#[derive(Debug, Clone, PartialEq)]
pub struct EmbedSummary {
    pub sentences: usize,
    pub dim: usize,
    /// `None` when the cache was bypassed.
    pub cache: Option<CacheStats>,
    pub seconds: f64,
    /// On a GPU device, the autotune keys (kernel shapes) this call tuned; none when every
    /// kernel came from the cache. `None` on the CPU.
    pub kernel_shapes_tuned: Option<u64>,
}

/// How `embed` runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct EmbedOptions {
    /// Read and write the embedding cache.
    pub use_cache: bool,
    /// Sentences handed to the encoder at once.
    pub batch_size: usize,
    /// Replace an existing output file.
    pub force: bool,
    /// Where model-based encoders compute.
    pub device: Device,
}

impl Default for EmbedOptions {
    fn default() -> Self {
        EmbedOptions {
            use_cache: true,
            batch_size: 1024,
            force: false,
            device: Device::Cpu,
        }
    }
}

/// Encodes every line of `input` with the encoder `spec` and writes the matrix to `out`
/// (atomically). The rows of `out` follow the lines of `input`; naming them `X.txt` and
/// `X.npy` makes the result usable as `npy:X.npy`.
pub fn embed(
    spec: &str,
    input: &Path,
    out: &Path,
    settings: &Settings,
    opts: EmbedOptions,
) -> Result<EmbedSummary, EncodeError> {
    let EmbedOptions {
        use_cache,
        batch_size,
        force,
        device,
    } = opts;
    // Read before the clock starts: it waits a moment for cubecl's log to settle.
    let tuned_before = device.is_gpu().then(harness_model::gpu::tuned_keys);
    let start = Instant::now();
    let encoder = open_encoder_on(spec, settings, device)?;
    refuse_existing(out, force)?;
    let sentences = read_sentences(input)?;
    let refs: Vec<&str> = sentences.iter().map(String::as_str).collect();
    let bar = progress_bar(refs.len());
    // A GPU's first batches can stand still for minutes while kernels compile and tune.
    let tuning = bar.ticker(harness_model::gpu::tuning_message);
    let (matrix, cache) = if use_cache {
        let cached = CachedEncoder::new(encoder, &settings.cache_dir).with_batch_size(batch_size);
        let m = encode_chunks(&cached, &refs, &bar)?;
        (m, Some(cached.stats()))
    } else {
        (encode_chunks(&encoder, &refs, &bar)?, None)
    };
    drop(tuning);
    bar.finish_and_clear();
    refuse_existing(out, force)?;
    write_npy(out, &matrix)?;
    let seconds = start.elapsed().as_secs_f64();
    Ok(EmbedSummary {
        sentences: matrix.rows,
        dim: matrix.cols,
        cache,
        seconds,
        kernel_shapes_tuned: tuned_before
            .map(|b| harness_model::gpu::tuned_keys().saturating_sub(b)),
    })
}

/// An existing `out` is replaced only with `--force`; a directory never.
fn refuse_existing(out: &Path, force: bool) -> Result<(), EncodeError> {
    match std::fs::symlink_metadata(out) {
        Ok(m) if m.is_dir() => Err(EncodeError::format(
            out,
            "is a directory",
            "name the .npy file to write, e.g. --out DIR/embeddings.npy",
        )),
        Ok(_) if !force => Err(EncodeError::format(
            out,
            "exists, and harness does not replace a file it cannot tell it wrote",
            "choose another --out, or pass --force to replace it",
        )),
        _ => Ok(()),
    }
}

fn encode_chunks(
    encoder: &dyn Encoder,
    refs: &[&str],
    bar: &indicatif::ProgressBar,
) -> Result<Matrix, EncodeError> {
    let mut data = Vec::with_capacity(refs.len() * encoder.dim());
    for chunk in refs.chunks(CHUNK) {
        let m = encoder.encode(chunk)?;
        if let Some((row, col, v)) = m.first_non_finite() {
            return Err(EncodeError::Encoder {
                name: encoder.name().to_string(),
                detail: harness_embed::cache::non_finite_detail(chunk[row], col, v),
            });
        }
        data.extend_from_slice(&m.data);
        bar.inc(chunk.len() as u64);
    }
    Ok(Matrix::from_vec(refs.len(), encoder.dim(), data))
}

/// A bar on stderr for inputs longer than one chunk (hidden when stderr is no terminal).
fn progress_bar(n: usize) -> harness_core::progress::Bar {
    if n <= CHUNK {
        return harness_core::progress::Bar::hidden();
    }
    harness_core::progress::bar(
        n as u64,
        "{spinner} embedding {pos}/{len} sentences [{bar:40}] {per_sec}, ETA {eta} {msg}",
    )
}
