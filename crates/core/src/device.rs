//! Where models compute: the `--device` value of `harness train`, `run`, `eval` and `embed`,
//! parsed once by the command layer into a [`Device`] and handed down typed. This crate has
//! no burn features, so the caller says which backends the binary was built with
//! ([`Compiled`]); the crates that own the backends (harness-train, harness-encoders) map a
//! `Device` to a burn backend and its device.
//!
//! It also watches burn's device threads ([`watch_device_threads`]): a GPU backend runs its
//! work on a thread of its own, and a panic there (a driver or validation error) would
//! otherwise leave the caller with zeros and an exit code of 0.

use std::fmt;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Mutex, Once};

/// Which burn backends this binary was built with (`cfg!(feature = ...)` of the binary).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Compiled {
    /// `--features flex`: burn-flex.
    pub flex: bool,
    /// `--features cuda`: burn-cuda.
    pub cuda: bool,
    /// `--features wgpu`: burn-wgpu.
    pub wgpu: bool,
}

/// Where a recipe trains and model-based encoders compute.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Device {
    /// burn-ndarray on the CPU (the default).
    #[default]
    Cpu,
    /// burn-flex on the CPU (a build made with `--features flex`; training only, its
    /// encoders are read back on burn-ndarray).
    Flex,
    /// burn-cuda on GPU N (a build made with `--features cuda`).
    Cuda(usize),
    /// burn-wgpu on the default wgpu adapter: Vulkan, Metal or DirectX 12, including
    /// software Vulkan (lavapipe) (a build made with `--features wgpu`).
    Wgpu,
}

/// A `--device` value this binary cannot use; each message names the value, says what is
/// wrong and how to fix it.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DeviceError {
    /// The backend is not compiled into this binary.
    #[error("--device {device}: this binary was built without {backend}. Fix: build with `cargo build --release --features {feature}`")]
    NotCompiled {
        device: String,
        backend: &'static str,
        feature: &'static str,
    },
    /// `cuda:X` where X is not a number.
    #[error("--device {device}: `{index}` is not a device number. Fix: use `cuda:0`, `cuda:1`, …")]
    BadIndex { device: String, index: String },
    /// No such device.
    #[error("--device {device}: unknown device. Fix: use `cpu`, `flex` (a build made with `--features flex`), `cuda:N` (with `--features cuda`) or `wgpu` (with `--features wgpu`)")]
    Unknown { device: String },
    /// A device list (`cpu,cpu`, `cuda:0,cuda:1`) whose devices are of different backends
    /// or name one GPU twice.
    #[error("--device {devices}: {detail}. Fix: {fix}")]
    BadList {
        devices: String,
        detail: String,
        fix: String,
    },
    /// `flex` for a command that only encodes.
    #[error("--device {device}: burn-flex trains only; encoders run on burn-ndarray, the same CPU. Fix: use `--device cpu`")]
    TrainingOnly { device: String },
    /// The device failed while computing (a panic on burn's device thread or in the backend).
    #[error(
        "--device {device}: the device failed ({detail}); nothing it computed is kept. Fix: {fix}"
    )]
    Failed {
        device: String,
        detail: String,
        fix: String,
    },
    /// The device could not allocate a buffer: the model's or a batch's tensors do not fit
    /// its memory (or, on wgpu, the largest buffer one binding may hold).
    #[error(
        "--device {device}: out of device memory: {what} ({detail}); nothing it computed is kept. Fix: {fix}"
    )]
    OutOfMemory {
        device: String,
        /// What could not be allocated ("a buffer of 256.0 MiB could not be allocated").
        what: String,
        detail: String,
        fix: String,
    },
}

impl Device {
    /// Parses `--device` against this build: `cpu`, `flex`, `cuda` / `cuda:N` or `wgpu`.
    /// Every device problem is refused here, before any corpus, model or tokenizer work.
    pub fn parse(device: &str, compiled: &Compiled) -> Result<Device, DeviceError> {
        let not_compiled = |d: Device| d.not_compiled_as(device);
        match device {
            "cpu" => Ok(Device::Cpu),
            "flex" if compiled.flex => Ok(Device::Flex),
            "flex" => Err(not_compiled(Device::Flex)),
            "wgpu" if compiled.wgpu => Ok(Device::Wgpu),
            "wgpu" => Err(not_compiled(Device::Wgpu)),
            d if d == "cuda" || d.starts_with("cuda:") => {
                if !compiled.cuda {
                    return Err(not_compiled(Device::Cuda(0)));
                }
                let index = d.strip_prefix("cuda:").unwrap_or("0");
                index
                    .parse()
                    .map(Device::Cuda)
                    .map_err(|_| DeviceError::BadIndex {
                        device: d.to_string(),
                        index: index.to_string(),
                    })
            }
            other => Err(DeviceError::Unknown {
                device: other.to_string(),
            }),
        }
    }

    /// Parses a `--device` list for training: one device (`cpu`, `cuda:0`), or several
    /// separated by commas (`cpu,cpu`, `cuda:0,cuda:1`), which train data-parallel, one copy
    /// of the model per device. Every device of a list is of one backend (the peers run
    /// one training loop, of one burn backend type) and no GPU is named twice; the CPU may
    /// be (each peer is a thread).
    pub fn parse_list(devices: &str, compiled: &Compiled) -> Result<Vec<Device>, DeviceError> {
        let list = devices
            .split(',')
            .map(|d| Device::parse(d.trim(), compiled))
            .collect::<Result<Vec<_>, _>>()?;
        let bad = |detail: String, fix: &str| DeviceError::BadList {
            devices: devices.to_string(),
            detail,
            fix: fix.to_string(),
        };
        if let Some(other) = list.iter().find(|d| d.backend() != list[0].backend()) {
            return Err(bad(
                format!(
                    "`{}` and `{other}` are different backends; data-parallel peers share one",
                    list[0]
                ),
                "list devices of one kind (`cpu,cpu` or `cuda:0,cuda:1`)",
            ));
        }
        if list.len() > 1 && matches!(list[0], Device::Wgpu) {
            return Err(bad(
                "`wgpu` names the default adapter only, so it cannot be listed twice".into(),
                "use `cuda:0,cuda:1` (a build made with `--features cuda`) or one `wgpu`",
            ));
        }
        for (i, d) in list.iter().enumerate() {
            if d.is_gpu() && list[..i].contains(d) {
                return Err(bad(
                    format!("`{d}` is listed twice"),
                    "name each GPU once (`cuda:0,cuda:1`)",
                ));
            }
        }
        Ok(list)
    }

    /// [`Device::parse`] for the commands that only encode (`eval`, `embed`): `flex`, which
    /// trains only, is refused.
    pub fn parse_for_encoding(device: &str, compiled: &Compiled) -> Result<Device, DeviceError> {
        match Device::parse(device, compiled)? {
            Device::Flex => Err(DeviceError::TrainingOnly {
                device: device.to_string(),
            }),
            d => Ok(d),
        }
    }

    /// The error for a build without this device's backend (what [`Device::parse`] says).
    pub fn not_compiled(self) -> DeviceError {
        self.not_compiled_as(&self.to_string())
    }

    /// [`Device::not_compiled`] for the `--device` value `flag`.
    fn not_compiled_as(self, flag: &str) -> DeviceError {
        let (backend, feature) = match self {
            Device::Cpu => ("burn-ndarray", "ndarray"),
            Device::Flex => ("burn-flex", "flex"),
            Device::Cuda(_) => ("CUDA", "cuda"),
            Device::Wgpu => ("burn-wgpu", "wgpu"),
        };
        DeviceError::NotCompiled {
            device: flag.to_string(),
            backend,
            feature,
        }
    }

    /// The backend's name, as `env.json` records it.
    pub fn backend(self) -> &'static str {
        match self {
            Device::Cpu => "ndarray",
            Device::Flex => "flex",
            Device::Cuda(_) => "cuda",
            Device::Wgpu => "wgpu",
        }
    }

    /// The device's name, as `env.json` records it.
    pub fn name(self) -> String {
        match self {
            Device::Cpu | Device::Flex => "cpu".into(),
            Device::Cuda(i) => format!("cuda:{i}"),
            Device::Wgpu => "wgpu".into(),
        }
    }

    /// Whether the work runs on a device thread of its own (a GPU backend) rather than on
    /// the caller's threads.
    pub fn is_gpu(self) -> bool {
        matches!(self, Device::Cuda(_) | Device::Wgpu)
    }

    /// A [`DeviceError::Failed`] for this device, with the fix for its kind; a
    /// [`DeviceError::OutOfMemory`] where `detail` says an allocation failed
    /// ([`out_of_memory`]).
    pub fn failed(self, detail: impl Into<String>) -> DeviceError {
        self.failed_batching(detail, None)
    }

    /// [`Self::failed`] for a run whose recipe batches `batch_tokens` tokens: out of memory,
    /// the fix names half of them.
    pub fn failed_batching(
        self,
        detail: impl Into<String>,
        batch_tokens: Option<u32>,
    ) -> DeviceError {
        let detail = without_backtrace(&detail.into()).to_string();
        if let Some(bytes) = out_of_memory(&detail) {
            let what = match bytes {
                Some(b) => format!(
                    "a buffer of {:.1} MiB could not be allocated",
                    b as f64 / (1024.0 * 1024.0)
                ),
                None => "an allocation failed".to_string(),
            };
            return DeviceError::OutOfMemory {
                device: self.to_string(),
                what,
                detail,
                fix: memory_fix(self == Device::Wgpu, batch_tokens),
            };
        }
        let fix = match self {
            Device::Wgpu => "check that a Vulkan (or Metal, DirectX 12) driver works (`vulkaninfo --summary`; on Debian `bash scripts/install-test-deps.sh vulkan` installs the software driver lavapipe), or run on `--device cpu`",
            Device::Cuda(_) => match missing_cuda_library(&detail) {
                Some("nvrtc") => "install NVRTC, CUDA's runtime compiler, with which burn-cuda compiles its kernels (the driver alone lacks it): the CUDA toolkit, or `pip install nvidia-cuda-nvrtc-cu12` with its `nvidia/cuda_nvrtc/lib` folder in `LD_LIBRARY_PATH`; or run on `--device cpu`",
                Some("cuda") => "install the NVIDIA driver, whose `libcuda.so` burn-cuda loads (`nvidia-smi` lists the GPUs once it works), or run on `--device cpu`",
                _ => "check the GPU and its driver (`nvidia-smi`), or run on `--device cpu`",
            },
            Device::Cpu | Device::Flex => "run again; if it fails the same way, report it with the message above",
        };
        DeviceError::Failed {
            device: self.to_string(),
            detail,
            fix: fix.into(),
        }
    }
}

/// What to do when a device ran out of memory: smaller batches (half of `batch_tokens`
/// where the recipe's are known), a smaller model or a larger device; on `wgpu`, also the
/// largest buffer one binding may hold.
fn memory_fix(wgpu: bool, batch_tokens: Option<u32>) -> String {
    let batches = match batch_tokens {
        Some(n) => format!(
            "`--set train.batch_tokens={}` (the recipe's is {n})",
            (n / 2).max(1)
        ),
        None => "training: `--set train.batch_tokens=N`, half the recipe's".to_string(),
    };
    let mut fix = format!(
        "make the batches smaller ({batches}; the `gpu` profiles take 16× the default's) or the model, or use a device with more memory or `--device cpu`"
    );
    if wgpu {
        fix.push_str("; on wgpu one tensor must also fit the largest buffer a shader may bind (`maxStorageBufferRange` in `vulkaninfo`: 128 MiB on lavapipe)");
    }
    fix
}

/// The CUDA library that could not be loaded, where a failure's message says so (cudarc's
/// "Unable to dynamically load the \"nvrtc\" shared library", `cudarc` 0.19 `lib.rs`):
/// `nvrtc` when the toolkit's compiler is missing, `cuda` when the driver is.
fn missing_cuda_library(detail: &str) -> Option<&str> {
    const UNABLE: &str = "Unable to dynamically load the \"";
    let rest = &detail[detail.find(UNABLE)? + UNABLE.len()..];
    Some(&rest[..rest.find('"')?])
}

/// Whether a device failure's message says that an allocation failed, and of how many bytes
/// where it says: cubecl's `IoError::BufferTooBig` ("can't allocate buffer of size: N",
/// `cubecl-runtime` 0.10 `server/base.rs`: CUDA out of memory, or a tensor larger than a
/// wgpu device lets one binding hold) and `LaunchError::OutOfMemory` ("An out-of-memory
/// error happened"). Matched on the text because the panic that carries it has only that.
pub fn out_of_memory(detail: &str) -> Option<Option<u64>> {
    const TOO_BIG: &str = "can't allocate buffer of size: ";
    if let Some(at) = detail.find(TOO_BIG) {
        let digits: String = detail[at + TOO_BIG.len()..]
            .chars()
            .take_while(char::is_ascii_digit)
            .collect();
        return Some(digits.parse().ok());
    }
    let lower = detail.to_ascii_lowercase();
    [
        "out-of-memory",
        "out of memory",
        "out_of_memory",
        "outofmemory",
    ]
    .iter()
    .any(|m| lower.contains(m))
    .then_some(None)
}

/// The `--device` spelling (`cpu`, `flex`, `cuda:N`, `wgpu`).
impl fmt::Display for Device {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Device::Cpu => f.write_str("cpu"),
            Device::Flex => f.write_str("flex"),
            Device::Cuda(i) => write!(f, "cuda:{i}"),
            Device::Wgpu => f.write_str("wgpu"),
        }
    }
}

static WATCH: Once = Once::new();
static WATCHER: Mutex<Option<std::thread::ThreadId>> = Mutex::new(None);
static DEVICE_PANIC: Mutex<Option<String>> = Mutex::new(None);
static LATER_PANICS: AtomicUsize = AtomicUsize::new(0);

/// Records from now on the first panic of any thread other than the calling one (burn's
/// device threads; the hook before it still prints that panic). [`device_failure`] reads
/// it. Later panics on cubecl's device threads ([`is_device_service`]) are counted, not
/// printed: once one has failed, later work submitted to them panics too (burn-fusion's
/// "Ordering is bigger than operations", cubecl's `CallError`: 330 panics with their
/// backtraces after one allocation failed on lavapipe), and the first says why. Any other
/// thread's panic prints as before. Idempotent; the first caller's thread is the watcher.
pub fn watch_device_threads() {
    WATCH.call_once(|| {
        *WATCHER.lock().unwrap_or_else(|e| e.into_inner()) = Some(std::thread::current().id());
        let previous = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            let here = std::thread::current();
            let watcher = *WATCHER.lock().unwrap_or_else(|e| e.into_inner());
            if watcher != Some(here.id()) {
                let mut slot = DEVICE_PANIC.lock().unwrap_or_else(|e| e.into_inner());
                if slot.is_some() && here.name().is_some_and(is_device_service) {
                    LATER_PANICS.fetch_add(1, Ordering::Relaxed);
                    return;
                }
                let message = info
                    .payload()
                    .downcast_ref::<&str>()
                    .map(|s| s.to_string())
                    .or_else(|| info.payload().downcast_ref::<String>().cloned())
                    .unwrap_or_else(|| "a panic without a message".into());
                let at = info
                    .location()
                    .map(|l| format!(" at {}:{}", crate_relative(l.file()), l.line()))
                    .unwrap_or_default();
                if slot.is_none() {
                    *slot = Some(format!(
                        "thread `{}` panicked{at}: {}",
                        here.name().unwrap_or("unnamed"),
                        without_backtrace(&message)
                    ));
                }
            }
            previous(info);
        }));
    });
}

/// The first panic [`watch_device_threads`] recorded on another thread, if any, with how
/// many panicked after it.
pub fn device_failure() -> Option<String> {
    let first = DEVICE_PANIC
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .clone()?;
    Some(match LATER_PANICS.load(Ordering::Relaxed) {
        0 => first,
        1 => format!("{first}; 1 later panic on device threads not shown"),
        n => format!("{first}; {n} later panics on device threads not shown"),
    })
}

/// Whether a thread is one of cubecl's device services, which run a GPU backend's work
/// (`DSU-…` upstream, `DSD-…` downstream: `cubecl-common` 0.10
/// `device/handle/channel.rs`).
fn is_device_service(name: &str) -> bool {
    name.starts_with("DSU-") || name.starts_with("DSD-")
}

/// `message` without the backtrace cubecl's errors append to their text ("No backtrace
/// available" when none was captured).
fn without_backtrace(message: &str) -> &str {
    [
        "\nNo backtrace available",
        "\nBacktrace\n",
        "\nstack backtrace:",
    ]
    .iter()
    .filter_map(|m| message.find(m))
    .min()
    .map_or(message, |end| &message[..end])
    .trim_end()
}

/// A source path of a dependency from its crate's folder on (`cubecl-wgpu-0.10.0/src/…`
/// rather than the registry's absolute path); any other path as it is.
fn crate_relative(file: &str) -> &str {
    const REGISTRY: &str = "/registry/src/";
    match file.find(REGISTRY) {
        Some(at) => {
            let rest = &file[at + REGISTRY.len()..];
            rest.find('/').map_or(rest, |slash| &rest[slash + 1..])
        }
        None => file,
    }
}

/// The message of a panic payload caught with `catch_unwind`.
pub fn panic_message(payload: &(dyn std::any::Any + Send)) -> String {
    payload
        .downcast_ref::<&str>()
        .map(|s| s.to_string())
        .or_else(|| payload.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "a panic without a message".into())
}

#[cfg(test)]
mod tests {
    use super::*;

    const ALL: Compiled = Compiled {
        flex: true,
        cuda: true,
        wgpu: true,
    };

    #[test]
    fn parses_every_device_of_a_full_build() {
        assert_eq!(Device::parse("cpu", &ALL), Ok(Device::Cpu));
        assert_eq!(Device::parse("flex", &ALL), Ok(Device::Flex));
        assert_eq!(Device::parse("cuda", &ALL), Ok(Device::Cuda(0)));
        assert_eq!(Device::parse("cuda:3", &ALL), Ok(Device::Cuda(3)));
        assert_eq!(Device::parse("wgpu", &ALL), Ok(Device::Wgpu));
        let e = Device::parse("cuda:first", &ALL).unwrap_err().to_string();
        assert!(
            e.contains("--device cuda:first") && e.contains("`first` is not a device number"),
            "{e}"
        );
        let e = Device::parse("tpu:0", &ALL).unwrap_err().to_string();
        assert!(
            e.contains("--device tpu:0: unknown device") && e.contains("`wgpu`"),
            "{e}"
        );
        let e = Device::parse_for_encoding("flex", &ALL)
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("--device flex") && e.contains("--device cpu"),
            "{e}"
        );
        assert_eq!(Device::parse_for_encoding("wgpu", &ALL), Ok(Device::Wgpu));
    }

    #[test]
    fn device_lists_are_of_one_backend() {
        assert_eq!(Device::parse_list("cpu", &ALL), Ok(vec![Device::Cpu]));
        assert_eq!(
            Device::parse_list("cpu,cpu", &ALL),
            Ok(vec![Device::Cpu, Device::Cpu])
        );
        assert_eq!(
            Device::parse_list("cuda:0, cuda:1", &ALL),
            Ok(vec![Device::Cuda(0), Device::Cuda(1)])
        );
        let e = Device::parse_list("cpu,cuda:0", &ALL)
            .unwrap_err()
            .to_string();
        assert!(e.contains("different backends"), "{e}");
        let e = Device::parse_list("cuda:1,cuda:1", &ALL)
            .unwrap_err()
            .to_string();
        assert!(e.contains("`cuda:1` is listed twice"), "{e}");
        // A backend this build lacks is refused by name, as for one device.
        let e = Device::parse_list("cpu,cuda:1", &Compiled::default())
            .unwrap_err()
            .to_string();
        assert!(
            e.starts_with("--device cuda:1: this binary was built without CUDA"),
            "{e}"
        );
    }

    #[test]
    fn a_backend_not_compiled_in_names_its_feature() {
        let none = Compiled::default();
        assert_eq!(Device::parse("cpu", &none), Ok(Device::Cpu));
        for (flag, feature) in [("wgpu", "wgpu"), ("cuda:1", "cuda"), ("flex", "flex")] {
            let e = Device::parse(flag, &none).unwrap_err().to_string();
            assert!(
                e.starts_with(&format!("--device {flag}: this binary was built without"))
                    && e.contains(&format!(
                        "Fix: build with `cargo build --release --features {feature}`"
                    )),
                "{e}"
            );
        }
    }

    #[test]
    fn env_json_names_stay_as_they_were() {
        let names: Vec<(&str, String)> = [Device::Cpu, Device::Flex, Device::Cuda(1), Device::Wgpu]
            .into_iter()
            .map(|d| (d.backend(), d.name()))
            .collect();
        assert_eq!(
            names,
            [
                ("ndarray", "cpu".to_string()),
                ("flex", "cpu".to_string()),
                ("cuda", "cuda:1".to_string()),
                ("wgpu", "wgpu".to_string())
            ]
        );
        assert_eq!(Device::Cuda(2).to_string(), "cuda:2");
        let e = Device::Wgpu.failed("boom").to_string();
        assert!(
            e.starts_with("--device wgpu: the device failed (boom)"),
            "{e}"
        );
    }

    #[test]
    fn a_panic_on_another_thread_is_recorded() {
        watch_device_threads();
        assert_eq!(device_failure(), None);
        let t = std::thread::Builder::new()
            .name("DSU-test".into())
            .spawn(|| panic!("validation error"))
            .unwrap();
        assert!(t.join().is_err());
        let failure = device_failure().unwrap();
        assert!(
            failure.contains("DSU-test") && failure.contains("validation error"),
            "{failure}"
        );
        // What fails after it on cubecl's device threads is counted, not recorded over it.
        for _ in 0..2 {
            let t = std::thread::Builder::new()
                .name("DSD-test".into())
                .spawn(|| panic!("CallError"))
                .unwrap();
            assert!(t.join().is_err());
        }
        // Another thread's panic prints as before and does not replace the first either.
        assert!(std::thread::spawn(|| panic!("other")).join().is_err());
        let failure = device_failure().unwrap();
        assert!(
            failure.contains("validation error")
                && !failure.contains("CallError")
                && !failure.contains("other")
                && failure.ends_with("; 2 later panics on device threads not shown"),
            "{failure}"
        );
    }

    /// cubecl's `IoError::BufferTooBig` as a wgpu device thread's panic carries it (seen on
    /// lavapipe with a 4,096-unit LSTM, whose recurrent weights are 256 MiB).
    const TOO_BIG: &str = "thread `DSD-4-0` panicked at cubecl-wgpu-0.10.0/src/compute/server.rs:270: called `Result::unwrap()` on an `Err` value: can't allocate buffer of size: 268435456";

    #[test]
    fn an_allocation_that_failed_is_out_of_memory_with_its_size() {
        assert_eq!(out_of_memory(TOO_BIG), Some(Some(268_435_456)));
        assert_eq!(
            out_of_memory("An out-of-memory error happened during launch"),
            Some(None)
        );
        assert_eq!(out_of_memory("CUDA_ERROR_OUT_OF_MEMORY"), Some(None));
        assert_eq!(out_of_memory("validation error: binding 3"), None);
        let e = Device::Cuda(0).failed(TOO_BIG).to_string();
        assert!(
            e.starts_with("--device cuda:0: out of device memory: a buffer of 256.0 MiB could not be allocated (thread `DSD-4-0`")
                && e.contains("--set train.batch_tokens=N")
                && !e.contains("nvidia-smi"),
            "{e}"
        );
        let e = Device::Wgpu.failed(TOO_BIG).to_string();
        assert!(e.contains("128 MiB on lavapipe"), "{e}");
        // With the recipe's batches known, the fix names half of them.
        let e = Device::Wgpu
            .failed_batching(TOO_BIG, Some(3000))
            .to_string();
        assert!(
            e.contains("`--set train.batch_tokens=1500` (the recipe's is 3000)")
                && e.contains("128 MiB on lavapipe"),
            "{e}"
        );
        let other = Device::Wgpu.failed_batching("lost", Some(3000));
        assert_eq!(other, Device::Wgpu.failed("lost"));
        // Any other failure keeps its kind's fix.
        let e = Device::Cuda(0).failed("validation error").to_string();
        assert!(
            e.starts_with("--device cuda:0: the device failed (validation error)")
                && e.contains("nvidia-smi"),
            "{e}"
        );
    }

    #[test]
    fn a_missing_cuda_library_is_named_with_where_to_get_it() {
        let nvrtc = r#"thread `DSD-2-0` panicked at cudarc-0.19.10/src/lib.rs:200: Unable to dynamically load the "nvrtc" shared library - searched for library names: ["nvrtc", "libnvrtc.so"]. Ensure that `LD_LIBRARY_PATH` has the correct path to the installed library."#;
        assert_eq!(missing_cuda_library(nvrtc), Some("nvrtc"));
        let e = Device::Cuda(0).failed(nvrtc).to_string();
        assert!(
            e.contains("install NVRTC") && e.contains("nvidia-cuda-nvrtc-cu12"),
            "{e}"
        );
        let driver = nvrtc.replace("\"nvrtc\"", "\"cuda\"");
        let e = Device::Cuda(1).failed(driver).to_string();
        assert!(
            e.starts_with("--device cuda:1: the device failed")
                && e.contains("install the NVIDIA driver"),
            "{e}"
        );
        assert_eq!(missing_cuda_library("invalid device ordinal"), None);
        // Only CUDA's fix says so.
        assert!(!Device::Wgpu.failed(nvrtc).to_string().contains("NVRTC"));
    }

    #[test]
    fn a_recorded_panic_drops_cubecls_backtrace_and_the_registry_path() {
        assert_eq!(
            without_backtrace("can't allocate buffer of size: 8\nNo backtrace available"),
            "can't allocate buffer of size: 8"
        );
        assert_eq!(
            without_backtrace(
                "An out-of-memory error happened during launch\nCaused by:\n  x\nBacktrace\n  0: f"
            ),
            "An out-of-memory error happened during launch\nCaused by:\n  x"
        );
        assert_eq!(without_backtrace("lost the device"), "lost the device");
        assert_eq!(
            crate_relative("/root/.cargo/registry/src/index.crates.io-1949cf8c6b5b557f/cubecl-wgpu-0.10.0/src/compute/server.rs"),
            "cubecl-wgpu-0.10.0/src/compute/server.rs"
        );
        assert_eq!(crate_relative("src/main.rs"), "src/main.rs");
    }
}
