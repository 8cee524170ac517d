//! burn's GPU backends (cubecl: `--device cuda:N`, `--device wgpu`) set up for this process
//! before a device opens, and the counters of what a training step asks of a device.
//!
//! cubecl reads its settings once per process (a `cubecl.toml` found from the current
//! directory up, then its `CUBECL_*` variables). [`configure`] keeps those and changes three
//! things:
//!
//! - autotune results (the fastest matmul, reduce and fused-kernel variant per shape) and,
//!   on CUDA, the compiled PTX go under the cache folder harness gives it (`<HARNESS_HOME>/
//!   cache/cubecl`), where cubecl's default is a `target/` folder beside the nearest
//!   `Cargo.toml`: a second run neither times nor compiles them again, wherever it starts;
//! - with `HARNESS_GPU_TRACE=1`, cubecl's execution log (one message per kernel launched),
//!   its compilation log (one per kernel compiled) and its autotune log (one per shape key
//!   tuned) go to the `log` crate, where [`launches`], [`compiled`] and [`tuned`] count them:
//!   the per-step counts of `metrics.jsonl` and of the README's table, and what a first run
//!   spends its time on (each compilation and each tuned key costs time a later run, reading
//!   the cache, does not pay);
//! - always, the autotune log (unless a `cubecl.toml` sends it to `log` already) goes to the
//!   same counter, so that a progress bar standing still through a first run's tuning says
//!   so ([`tuning_message`]).
//!
//! [`host_read`] is the one way the training step reads a tensor back to the host; it counts
//! the reads, so that a read-back added to the step shows in the same table.

use burn::tensor::backend::Backend;
use burn::tensor::{Tensor, TensorData};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::OnceLock;

/// Kernels launched since the process started (counted only while tracing).
static LAUNCHES: AtomicU64 = AtomicU64::new(0);
/// Kernels compiled since the process started (counted only while tracing).
static COMPILED: AtomicU64 = AtomicU64::new(0);
/// Autotune keys tuned since the process started (counted only while tracing).
static TUNED: AtomicU64 = AtomicU64::new(0);
/// Tensors read back to the host through [`host_read`].
static READS: AtomicU64 = AtomicU64::new(0);
/// Whether `HARNESS_GPU_TRACE` turned the launch count on.
static TRACING: AtomicBool = AtomicBool::new(false);
/// What [`configure`] did, for [`first_use_note`].
static SETUP: OnceLock<Setup> = OnceLock::new();
/// Why the file [`TRACE_LOG_VAR`] names could not be opened, for [`first_use_note`].
static TRACE_LOG_FAILED: OnceLock<String> = OnceLock::new();

/// Where cubecl keeps its caches in this process, and whether they held anything yet.
#[derive(Debug, Clone)]
pub struct Setup {
    /// The folder of the autotune results and compiled kernels.
    pub cache: PathBuf,
    /// Whether an earlier run left results there.
    pub warm: bool,
    /// Why harness could not apply its settings (cubecl had read its own already).
    pub skipped: Option<String>,
}

/// The environment variable that turns the launch count on (`1`).
pub const TRACE_VAR: &str = "HARNESS_GPU_TRACE";

/// With [`TRACE_VAR`], a file that each kernel launched, each kernel compiled and each
/// autotune key tuned is appended to, one line each.
pub const TRACE_LOG_VAR: &str = "HARNESS_GPU_TRACE_LOG";

/// The environment variable that picks the kernels of an LSTM recurrence on a GPU backend:
/// `auto` (the default), `whole` (every time step in one launch each way) or `steps` (two
/// launches a time step each way); `fused/lstm_whole.rs` says when each is used.
pub const LSTM_RECURRENCE_VAR: &str = "HARNESS_LSTM_RECURRENCE";

/// The values [`LSTM_RECURRENCE_VAR`] takes.
pub const LSTM_RECURRENCES: [&str; 3] = ["auto", "whole", "steps"];

/// What [`LSTM_RECURRENCE_VAR`] asks for: `None` when unset or empty, an error naming the
/// fix for any other value than [`LSTM_RECURRENCES`].
pub fn requested_lstm_recurrence() -> Result<Option<&'static str>, String> {
    one_of(LSTM_RECURRENCE_VAR, &LSTM_RECURRENCES)
}

/// The command layer's check, before any work, of the variables this module's settings come
/// from: a typo (`HARNESS_GPU_TRACE=true`, `HARNESS_LSTM_RECURRENCE=step`) would otherwise
/// silently mean the default.
pub fn check_variables() -> Result<(), String> {
    one_of(TRACE_VAR, &["0", "1"])?;
    requested_lstm_recurrence()?;
    Ok(())
}

/// The value of `var`, which must be one of `allowed` (surrounding blanks ignored); `None`
/// when unset or empty.
fn one_of(var: &str, allowed: &[&'static str]) -> Result<Option<&'static str>, String> {
    pick(var, std::env::var(var), allowed)
}

fn pick(
    var: &str,
    value: Result<String, std::env::VarError>,
    allowed: &[&'static str],
) -> Result<Option<&'static str>, String> {
    let choices = allowed
        .iter()
        .map(|a| format!("`{a}`"))
        .collect::<Vec<_>>()
        .join(", ");
    match value {
        Ok(v) if v.trim().is_empty() => Ok(None),
        Ok(v) => allowed
            .iter()
            .find(|a| **a == v.trim())
            .map(|a| Some(*a))
            .ok_or_else(|| format!("{var}={v:?} is not one of {choices}: use one, or unset it")),
        Err(std::env::VarError::NotPresent) => Ok(None),
        Err(std::env::VarError::NotUnicode(_)) => Err(format!(
            "{var} is not UTF-8: use one of {choices}, or unset it"
        )),
    }
}

/// Applies harness's cubecl settings (cache under `cache`, launch tracing) once per
/// process; later calls return the first call's result. A build without a GPU backend only
/// records the folder.
pub fn configure(cache: &Path) -> &'static Setup {
    SETUP.get_or_init(|| {
        let warm = std::fs::read_dir(cache).is_ok_and(|mut d| d.next().is_some());
        let tracing = std::env::var(TRACE_VAR).is_ok_and(|v| v == "1");
        let skipped = apply(cache, tracing).err();
        if tracing && skipped.is_none() {
            TRACING.store(true, Ordering::Relaxed);
        }
        Setup {
            cache: cache.to_path_buf(),
            warm,
            skipped,
        }
    })
}

/// What a run about to use a GPU should tell its user before the first step: kernels are
/// compiled (and matmuls tuned) on first use, which takes a while and is kept for later runs.
pub fn first_use_note(device: &str) -> Option<String> {
    let note = setup_note(device)?;
    Some(match TRACE_LOG_FAILED.get() {
        Some(why) => format!("{note}\n{device}: {why}"),
        None => note,
    })
}

fn setup_note(device: &str) -> Option<String> {
    let setup = SETUP.get()?;
    if let Some(why) = &setup.skipped {
        return Some(format!(
            "{device}: cubecl's settings were read before harness's ({why}); its caches stay where cubecl.toml says"
        ));
    }
    Some(if setup.warm {
        format!(
            "{device}: kernels and autotune results from earlier runs are in {}",
            setup.cache.display()
        )
    } else {
        format!(
            "{device}: compiling and tuning kernels on first use (the first steps take longer; kept in {} for later runs)",
            setup.cache.display()
        )
    })
}

#[cfg(any(feature = "wgpu", feature = "cuda"))]
fn apply(cache: &Path, tracing: bool) -> Result<(), String> {
    use burn::cubecl::config::{CubeClRuntimeConfig, RuntimeConfig};
    if CubeClRuntimeConfig::storage().lock().is_some() {
        return Err("a device was opened before".into());
    }
    // The user's cubecl.toml and CUBECL_* variables first, then harness's two changes. The
    // config is patched as a serde value: its logger types are not exported by cubecl.
    let base = CubeClRuntimeConfig::from_current_dir().override_from_env();
    let mut value = serde_json::to_value(&base).map_err(|e| e.to_string())?;
    let folder = serde_json::json!({ "file": cache });
    value["autotune"]["cache"] = folder.clone();
    value["compilation"]["cache"] = folder;
    // Autotune's log (one message per key tuned, and nothing else changes with it) always
    // reaches the counter, so that a first run can say it is tuning ([`tuning_message`]);
    // a `log` sink the user's cubecl.toml sets is kept.
    if value["autotune"]["logger"]["log"].is_null() {
        value["autotune"]["logger"]["log"] = "info".into();
    }
    install_counter(tracing);
    if tracing {
        value["profiling"]["logger"]["level"] = "minimal".into();
        value["profiling"]["logger"]["log"] = "info".into();
        value["compilation"]["logger"]["level"] = "basic".into();
        value["compilation"]["logger"]["log"] = "info".into();
        value["autotune"]["logger"]["level"] = "minimal".into();
        value["autotune"]["logger"]["log"] = "info".into();
    }
    let config: CubeClRuntimeConfig = serde_json::from_value(value).map_err(|e| e.to_string())?;
    let mut slot = CubeClRuntimeConfig::storage().lock();
    if slot.is_some() {
        return Err("a device was opened before".into());
    }
    *slot = Some(std::sync::Arc::new(config));
    Ok(())
}

#[cfg(not(any(feature = "wgpu", feature = "cuda")))]
fn apply(_cache: &Path, _tracing: bool) -> Result<(), String> {
    Ok(())
}

/// Counts cubecl's "Executing <kernel>" messages (one per launch), its "[Compiling kernel]"
/// ones (one per kernel compiled: `CompiledKernel`'s basic format in cubecl-runtime 0.10) and
/// its "Fastest result" ones (one per autotune key tuned: `tune/tuner.rs`); with
/// [`TRACE_LOG_VAR`] set, also appends the first line of each of the three to that file
/// (which kernel ran, which was compiled, which key tuned: where a step's launches go and
/// what a first run spends its time on). Everything else the `log` crate carries is
/// dropped, as it is when no logger is installed.
#[cfg(any(feature = "wgpu", feature = "cuda"))]
fn install_counter(tracing: bool) {
    use std::io::Write;
    struct Counter {
        file: Option<std::sync::Mutex<std::fs::File>>,
    }
    impl Counter {
        fn keep(&self, text: &str) {
            if let Some(file) = &self.file {
                let line = text.lines().next().unwrap_or_default();
                if let Ok(mut f) = file.lock() {
                    // A diagnostic log: a failed write loses a line of it, nothing else.
                    let _ = writeln!(f, "{line}");
                }
            }
        }
    }
    impl log::Log for Counter {
        fn enabled(&self, m: &log::Metadata<'_>) -> bool {
            // cubecl's loggers only (`cubecl_common::config::logger`): installed for every
            // GPU run, this must not format other crates' messages.
            m.level() <= log::Level::Info && m.target().starts_with("cubecl")
        }
        fn log(&self, record: &log::Record<'_>) {
            if !self.enabled(record.metadata()) {
                return;
            }
            let text = record.args().to_string();
            if text.starts_with("Executing ") {
                LAUNCHES.fetch_add(1, Ordering::Relaxed);
                self.keep(&text);
            } else if text.starts_with("[Compiling kernel]") {
                COMPILED.fetch_add(1, Ordering::Relaxed);
                self.keep(&text);
            } else if text.starts_with("Fastest result ") {
                note_tuned();
                self.keep(&text);
            }
        }
        fn flush(&self) {}
    }
    static COUNTER: OnceLock<Counter> = OnceLock::new();
    let counter = COUNTER.get_or_init(|| Counter {
        file: std::env::var_os(TRACE_LOG_VAR)
            .filter(|_| tracing)
            .and_then(|path| {
            match std::fs::OpenOptions::new()
                .create(true)
                .append(true)
                .open(&path)
            {
                Ok(f) => Some(std::sync::Mutex::new(f)),
                Err(e) => {
                    let _ = TRACE_LOG_FAILED.set(format!(
                        "{TRACE_LOG_VAR}: cannot open {}: {e}; nothing is written down (the counts still are). Fix: name a file in a folder you can write",
                        std::path::Path::new(&path).display()
                    ));
                    None
                }
            }
        }),
    });
    if log::set_logger(counter).is_ok() {
        log::set_max_level(log::LevelFilter::Info);
    }
}

/// Whether `B` is one of burn's GPU (cubecl) backends this build has, `wgpu` or `cuda`, or
/// their autodiff: where the model takes the paths written for a device (burn's attention
/// kernel, device-sized encoding batches) instead of the CPU's.
pub fn on_device<B: Backend>() -> bool {
    #[allow(unused_variables)]
    let id = std::any::TypeId::of::<B>();
    #[cfg(feature = "wgpu")]
    {
        use burn::backend::{Autodiff, Wgpu};
        if id == std::any::TypeId::of::<Wgpu>() || id == std::any::TypeId::of::<Autodiff<Wgpu>>() {
            return true;
        }
    }
    #[cfg(feature = "cuda")]
    {
        use burn::backend::{Autodiff, Cuda};
        if id == std::any::TypeId::of::<Cuda>() || id == std::any::TypeId::of::<Autodiff<Cuda>>() {
            return true;
        }
    }
    false
}

/// Whether launches are being counted (`HARNESS_GPU_TRACE=1` on a GPU build).
pub fn tracing() -> bool {
    TRACING.load(Ordering::Relaxed)
}

/// Kernels launched so far, once cubecl's logging thread has caught up (it receives each
/// launch through a channel: the count is read when it has stopped moving). `None` unless
/// [`tracing`]. Call it after a device sync.
pub fn launches() -> Option<u64> {
    if !tracing() {
        return None;
    }
    let mut last = LAUNCHES.load(Ordering::Relaxed);
    loop {
        std::thread::sleep(std::time::Duration::from_millis(20));
        let now = LAUNCHES.load(Ordering::Relaxed);
        if now == last {
            return Some(now);
        }
        last = now;
    }
}

/// When an autotune key was last tuned, in milliseconds since [`since_start`]'s origin (0:
/// none yet).
static LAST_TUNED_MS: AtomicU64 = AtomicU64::new(0);

/// How recently a key must have been tuned for [`tuning_message`] to say tuning goes on.
const TUNING_RECENT: std::time::Duration = std::time::Duration::from_secs(5);

/// Milliseconds since this process first asked (at least 1).
fn since_start() -> u64 {
    static START: OnceLock<std::time::Instant> = OnceLock::new();
    (START
        .get_or_init(std::time::Instant::now)
        .elapsed()
        .as_millis() as u64)
        .max(1)
}

/// Records one autotune key tuned.
#[cfg_attr(not(any(feature = "wgpu", feature = "cuda")), allow(dead_code))]
fn note_tuned() {
    TUNED.fetch_add(1, Ordering::Relaxed);
    LAST_TUNED_MS.store(since_start(), Ordering::Relaxed);
}

/// What a progress bar standing still should say while cubecl tunes kernels for new shapes
/// (a key tuned in the last few seconds: a first run on a device, or a new shape), else
/// `None`. Counted from cubecl's autotune log, which [`configure`] sends to the counter.
pub fn tuning_message() -> Option<String> {
    let last = LAST_TUNED_MS.load(Ordering::Relaxed);
    if last == 0 || since_start().saturating_sub(last) > TUNING_RECENT.as_millis() as u64 {
        return None;
    }
    Some(format!(
        "compiling and tuning kernels for new shapes: {} tuned so far, kept for later runs",
        TUNED.load(Ordering::Relaxed)
    ))
}

/// Kernels compiled so far (read after [`launches`], which waits for cubecl's logging thread
/// to catch up). `None` unless [`tracing`].
pub fn compiled() -> Option<u64> {
    tracing().then(|| COMPILED.load(Ordering::Relaxed))
}

/// Autotune keys tuned so far (read after [`launches`]). `None` unless [`tracing`].
pub fn tuned() -> Option<u64> {
    tracing().then(|| TUNED.load(Ordering::Relaxed))
}

/// Autotune keys tuned since the process started, counted whether or not [`tracing`]
/// (cubecl's autotune log always reaches the counter on a GPU build; 0 on a build without
/// one), once the count has stopped moving (cubecl's logging thread passes the messages on
/// through a channel; at most half a second's wait). What a run's closing line says: a run
/// whose kernels all came from the cache tuned none, and its rate is what later runs get.
pub fn tuned_keys() -> u64 {
    let mut last = TUNED.load(Ordering::Relaxed);
    for _ in 0..25 {
        std::thread::sleep(std::time::Duration::from_millis(20));
        let now = TUNED.load(Ordering::Relaxed);
        if now == last {
            return now;
        }
        last = now;
    }
    last
}

/// Tensors read back through [`host_read`] so far.
pub fn host_reads() -> u64 {
    READS.load(Ordering::Relaxed)
}

/// Reads `tensor` back to the host, counted: the training step's only way to do so, so that
/// the per-step count shows every wait on the device.
pub fn host_read<B: Backend, const D: usize>(tensor: Tensor<B, D>) -> TensorData {
    READS.fetch_add(1, Ordering::Relaxed);
    tensor.into_data()
}

/// A one-element tensor (a loss, a norm) read back as `f64`, counted as [`host_read`]; NaN
/// when it holds nothing.
pub fn host_scalar<B: Backend>(tensor: Tensor<B, 1>) -> f64 {
    host_read(tensor)
        .convert::<f64>()
        .to_vec::<f64>()
        .ok()
        .and_then(|v| v.first().copied())
        .unwrap_or(f64::NAN)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tuning_is_said_while_keys_are_being_tuned() {
        // Nothing tunes on the CPU backends the other tests use.
        assert_eq!(tuning_message(), None);
        note_tuned();
        let said = tuning_message().expect("a key was just tuned");
        assert!(said.contains("tuned so far"), "{said}");
    }

    #[test]
    fn host_reads_are_counted() {
        let before = host_reads();
        let t =
            Tensor::<burn::backend::NdArray<f32>, 1>::from_floats([1.0, 2.0], &Default::default());
        let data = host_read(t);
        assert_eq!(data.to_vec::<f32>().unwrap(), vec![1.0, 2.0]);
        assert!(host_reads() > before);
    }

    #[test]
    fn the_cpu_backends_are_not_devices() {
        assert!(!on_device::<burn::backend::NdArray<f32>>());
        assert!(!on_device::<
            burn::backend::Autodiff<burn::backend::NdArray<f32>>,
        >());
        #[cfg(feature = "wgpu")]
        assert!(on_device::<
            burn::backend::Autodiff<burn::backend::Wgpu<f32, i32>>,
        >());
    }

    #[test]
    fn a_variable_takes_one_of_its_values_or_says_which() {
        let var = LSTM_RECURRENCE_VAR;
        let set = |v: &str| Ok(v.to_string());
        assert_eq!(
            pick(var, set(" whole "), &LSTM_RECURRENCES),
            Ok(Some("whole"))
        );
        assert_eq!(pick(var, set(""), &LSTM_RECURRENCES), Ok(None));
        let unset = Err(std::env::VarError::NotPresent);
        assert_eq!(pick(var, unset, &LSTM_RECURRENCES), Ok(None));
        let said = pick(var, set("Whole"), &LSTM_RECURRENCES).unwrap_err();
        assert!(
            said.contains("HARNESS_LSTM_RECURRENCE=\"Whole\"")
                && said.contains("`auto`, `whole`, `steps`")
                && said.contains("unset it"),
            "{said}"
        );
    }

    #[test]
    fn without_a_setup_there_is_no_note() {
        // The unit tests never call `configure`: no note, nothing counted.
        if SETUP.get().is_none() {
            assert_eq!(first_use_note("wgpu"), None);
        }
        assert_eq!(launches(), None);
    }
}
