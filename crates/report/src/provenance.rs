//! What every report states about where its numbers come from: the harness build that
//! rendered it (version, git commit, datasets.lock digest), and per system the inputs,
//! how the system was identified, recipe and encoder fingerprints, the datasets.lock
//! digest each result was measured against, backend and device (from `env.json`), dates
//! and wall times.

use super::runs::{utc, Inputs, SystemRuns};
use crate::ReportError;
use serde::Serialize;
use std::collections::BTreeSet;
use std::time::{Duration, SystemTime};

#[derive(Debug, Clone, Serialize)]
pub struct Provenance {
    pub harness_version: String,
    pub git_commit: String,
    pub rendered_at: String,
    /// sha256 of the datasets.lock compiled into this binary.
    pub datasets_lock: String,
    pub systems: Vec<SystemProvenance>,
}

#[derive(Debug, Clone, Serialize)]
pub struct SystemProvenance {
    pub id: String,
    pub inputs: Vec<String>,
    pub identified_by: Vec<String>,
    pub recipe_fingerprints: Vec<String>,
    /// `name fingerprint (dim d)` of each encoder in the results.
    pub encoders: Vec<String>,
    /// datasets.lock digests of the results, each marked against this build's.
    pub datasets: Vec<String>,
    pub harness_versions: Vec<String>,
    pub backend: String,
    pub device: String,
    /// Other scalar entries of env.json.
    pub env: Vec<(String, String)>,
    pub benchmarks: usize,
    pub failed: Vec<String>,
    /// Sum of the benchmarks' wall times, and env.json's wall time when recorded.
    pub wall_time: String,
    /// Modification time of the newest result file.
    pub measured_at: String,
}

/// The environment variable that fixes a report's render time (the reproducible-builds
/// convention, <https://reproducible-builds.org/specs/source-date-epoch/>).
pub const SOURCE_DATE_EPOCH: &str = "SOURCE_DATE_EPOCH";

/// When the report says it was rendered: `SOURCE_DATE_EPOCH` (whole seconds since 1970)
/// when set, so that two renders of the same results are the same bytes (the render time
/// is the one line of a report that depends on anything but its inputs); otherwise now.
pub fn rendered_at() -> Result<SystemTime, ReportError> {
    match std::env::var(SOURCE_DATE_EPOCH) {
        Err(std::env::VarError::NotPresent) => Ok(SystemTime::now()),
        Ok(v) => v
            .trim()
            .parse::<u64>()
            .map(|secs| SystemTime::UNIX_EPOCH + Duration::from_secs(secs))
            .map_err(|_| bad_epoch(&v)),
        Err(std::env::VarError::NotUnicode(v)) => Err(bad_epoch(&v.to_string_lossy())),
    }
}

fn bad_epoch(value: &str) -> ReportError {
    ReportError::Setup(format!(
        "{SOURCE_DATE_EPOCH}={value:?} is not a whole number of seconds since 1970-01-01. Fix: set it to one (e.g. `{SOURCE_DATE_EPOCH}=$(date +%s)`) or unset it to date the report now"
    ))
}

/// Provenance of a report over `inputs`, rendered at [`rendered_at`].
pub fn collect(inputs: &Inputs) -> Result<Provenance, ReportError> {
    let lock = harness_data::lock::Lock::embedded_digest();
    let systems = inputs
        .systems
        .values()
        .map(|s| system_provenance(s, &lock))
        .collect();
    Ok(Provenance {
        harness_version: harness_core::VERSION.to_string(),
        git_commit: harness_core::git_commit().to_string(),
        rendered_at: utc(rendered_at()?),
        datasets_lock: lock,
        systems,
    })
}

/// One system's provenance: its inputs, encoders, datasets, versions, environment and times.
fn system_provenance(s: &SystemRuns, lock: &str) -> SystemProvenance {
    let results = s.results.values();
    let set = |f: &dyn Fn(&super::runs::ResultFile) -> String| -> Vec<String> {
        s.results
            .values()
            .map(f)
            .collect::<BTreeSet<_>>()
            .into_iter()
            .collect()
    };
    let encoders = set(&|r| {
        format!(
            "{} {} (dim {})",
            r.result.encoder.name, r.result.encoder.fingerprint, r.result.encoder.dim
        )
    });
    let datasets = set(&|r| {
        if r.result.datasets == lock {
            format!("{} (same as this build)", short(&r.result.datasets))
        } else {
            format!(
                "{} (differs from this build's {})",
                short(&r.result.datasets),
                short(lock)
            )
        }
    });
    let harness_versions = set(&|r| r.result.harness_version.clone());
    let seconds: f64 = results.clone().map(|r| r.result.seconds).sum();
    let newest: Option<SystemTime> = results.clone().filter_map(|r| r.modified).max();
    let failed = s
        .results
        .iter()
        .filter(|(_, r)| r.result.error.is_some())
        .map(|(b, _)| b.clone())
        .collect();
    let EnvFacts {
        env,
        backend,
        device,
        wall: env_wall,
    } = env_facts(s);
    let not_recorded = "not recorded (no env.json beside these results)".to_string();
    SystemProvenance {
        id: s.id.clone(),
        inputs: s
            .sources
            .iter()
            .map(|x| x.results_dir.display().to_string())
            .collect(),
        identified_by: s.sources.iter().map(|x| x.identified_by.clone()).collect(),
        recipe_fingerprints: s
            .sources
            .iter()
            .filter_map(|x| x.recipe_fingerprint.clone())
            .collect(),
        encoders,
        datasets,
        harness_versions,
        backend: backend.unwrap_or_else(|| not_recorded.clone()),
        device: device.unwrap_or(not_recorded),
        env,
        benchmarks: s.results.len(),
        failed,
        wall_time: match env_wall {
            Some(w) => format!(
                "{seconds:.1} s over {} benchmarks; run: {w} s (env.json)",
                s.results.len()
            ),
            None => format!("{seconds:.1} s over {} benchmarks", s.results.len()),
        },
        measured_at: newest.map(utc).unwrap_or_else(|| "unknown".into()),
    }
}

/// What the runs' `env.json` files say: the backend, device and wall time apart, the rest
/// as (key, text).
struct EnvFacts {
    env: Vec<(String, String)>,
    backend: Option<String>,
    device: Option<String>,
    wall: Option<String>,
}

/// The facts of every `env.json` beside a system's results (a later file's value wins).
fn env_facts(s: &SystemRuns) -> EnvFacts {
    let mut env = Vec::new();
    let mut backend = None;
    let mut device = None;
    let mut wall = None;
    for src in &s.sources {
        if let Some(serde_json::Value::Object(m)) = &src.env {
            for (k, v) in m {
                let text = match v {
                    serde_json::Value::String(t) => t.clone(),
                    serde_json::Value::Number(n) => n.to_string(),
                    serde_json::Value::Bool(b) => b.to_string(),
                    _ => continue,
                };
                match k.as_str() {
                    "backend" => backend = Some(text),
                    "device" => device = Some(text),
                    "wall_seconds" | "wall_time_s" | "seconds" => wall = Some(text),
                    _ => env.push((k.clone(), text)),
                }
            }
        }
    }
    EnvFacts {
        env,
        backend,
        device,
        wall,
    }
}

fn short(digest: &str) -> String {
    digest.chars().take(16).collect()
}
