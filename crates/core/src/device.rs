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

    /// A [`DeviceError::Failed`] for this device, with the fix for its kind.
    pub fn failed(self, detail: impl Into<String>) -> DeviceError {
        let fix = match self {
            Device::Wgpu => "check that a Vulkan (or Metal, DirectX 12) driver works (`vulkaninfo --summary`; on Debian `bash scripts/install-test-deps.sh vulkan` installs the software driver lavapipe), or run on `--device cpu`",
            Device::Cuda(_) => "check the GPU and its driver (`nvidia-smi`), or run on `--device cpu`",
            Device::Cpu | Device::Flex => "run again; if it fails the same way, report it with the message above",
        };
        DeviceError::Failed {
            device: self.to_string(),
            detail: detail.into(),
            fix: fix.into(),
        }
    }
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

/// Records from now on the first panic of any thread other than the calling one (burn's
/// device threads; the hook before it still prints the panic). [`device_failure`] reads
/// it. Idempotent; the first caller's thread is the watcher.
pub fn watch_device_threads() {
    WATCH.call_once(|| {
        *WATCHER.lock().unwrap_or_else(|e| e.into_inner()) = Some(std::thread::current().id());
        let previous = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            let here = std::thread::current();
            let watcher = *WATCHER.lock().unwrap_or_else(|e| e.into_inner());
            if watcher != Some(here.id()) {
                let message = info
                    .payload()
                    .downcast_ref::<&str>()
                    .map(|s| s.to_string())
                    .or_else(|| info.payload().downcast_ref::<String>().cloned())
                    .unwrap_or_else(|| "a panic without a message".into());
                let at = info
                    .location()
                    .map(|l| format!(" at {}:{}", l.file(), l.line()))
                    .unwrap_or_default();
                let mut slot = DEVICE_PANIC.lock().unwrap_or_else(|e| e.into_inner());
                if slot.is_none() {
                    *slot = Some(format!(
                        "thread `{}` panicked{at}: {message}",
                        here.name().unwrap_or("unnamed")
                    ));
                }
            }
            previous(info);
        }));
    });
}

/// The first panic [`watch_device_threads`] recorded on another thread, if any.
pub fn device_failure() -> Option<String> {
    DEVICE_PANIC
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .clone()
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
    }
}
