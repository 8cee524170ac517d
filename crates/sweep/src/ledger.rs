//! The sweep directory's status ledger (`status.json`): per point its alias, run directory,
//! state, how many times it was started, when, for how long, its exit code and the error
//! that stopped it. One process writes it at a time (the sweep directory's lock); every
//! write is a whole new file renamed into place, so a killed sweep leaves the last state
//! complete. The ledger records; it never decides what is done — the run directory's
//! result files do (a point finished by hand or by a Slurm task counts as done).

use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// State of one point.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum State {
    /// Not started by this sweep and without results.
    Pending,
    /// Started and not yet ended (after a kill: ended without a record).
    Running,
    /// Every result present; finished by this sweep.
    Done,
    /// Every result was present before this sweep started it (another sweep, a hand-typed
    /// `harness run`, a Slurm task): nothing repeated.
    Reused,
    /// The last attempt ended with an error.
    Failed,
    /// The last attempt was stopped (Ctrl-C, `--fail-fast`).
    Interrupted,
}

impl State {
    pub fn name(self) -> &'static str {
        match self {
            State::Pending => "pending",
            State::Running => "running",
            State::Done => "done",
            State::Reused => "reused",
            State::Failed => "failed",
            State::Interrupted => "interrupted",
        }
    }
}

/// One point's record.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Entry {
    pub alias: String,
    pub config: String,
    pub seed: Option<u64>,
    pub fingerprint: String,
    pub run_dir: PathBuf,
    pub state: State,
    /// How many times this sweep (all its invocations) started the point's process.
    #[serde(default)]
    pub attempts: u32,
    #[serde(default)]
    pub started: Option<String>,
    #[serde(default)]
    pub ended: Option<String>,
    /// Wall seconds of the last attempt.
    #[serde(default)]
    pub seconds: Option<f64>,
    #[serde(default)]
    pub exit_code: Option<i32>,
    #[serde(default)]
    pub error: Option<String>,
    /// The point's log, relative to the sweep directory.
    #[serde(default)]
    pub log: Option<String>,
}

impl Entry {
    /// A point not started yet.
    pub fn pending(
        alias: &str,
        config: &str,
        seed: Option<u64>,
        fingerprint: &str,
        run_dir: PathBuf,
        log: Option<String>,
    ) -> Entry {
        Entry {
            alias: alias.into(),
            config: config.into(),
            seed,
            fingerprint: fingerprint.into(),
            run_dir,
            state: State::Pending,
            attempts: 0,
            started: None,
            ended: None,
            seconds: None,
            exit_code: None,
            error: None,
            log,
        }
    }
}

/// The ledger: entries keyed by alias, in grid order.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct Ledger {
    pub grid: String,
    pub profile: Option<String>,
    pub fingerprint: String,
    pub points: Vec<Entry>,
    /// Invocations of `harness sweep` that ran points (started at, points started).
    #[serde(default)]
    pub sessions: Vec<Session>,
}

/// One invocation of the sweep.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Session {
    pub started: String,
    pub started_points: u32,
    #[serde(default)]
    pub ended: Option<String>,
}

/// Ledger errors name the file and the fix.
#[derive(Debug, thiserror::Error)]
pub enum LedgerError {
    #[error("{path}: {source}")]
    Io {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("{path}: not a sweep ledger ({detail}). Fix: move it away; `harness sweep` rebuilds the ledger from the run directories")]
    Corrupt { path: PathBuf, detail: String },
}

impl Ledger {
    /// `status.json` of a sweep directory.
    pub fn path(dir: &Path) -> PathBuf {
        dir.join("status.json")
    }

    /// Reads the ledger of `dir`, or `None` when there is none yet.
    pub fn read(dir: &Path) -> Result<Option<Ledger>, LedgerError> {
        let path = Ledger::path(dir);
        match std::fs::read_to_string(&path) {
            Ok(text) => serde_json::from_str(&text)
                .map(Some)
                .map_err(|e| LedgerError::Corrupt {
                    path,
                    detail: e.to_string(),
                }),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
            Err(source) => Err(LedgerError::Io { path, source }),
        }
    }

    /// Writes the ledger atomically.
    pub fn write(&self, dir: &Path) -> Result<(), LedgerError> {
        let path = Ledger::path(dir);
        let text = serde_json::to_string_pretty(self).expect("the ledger serialises");
        harness_core::nofollow::write_atomic(&path, text.as_bytes())
            .map_err(|source| LedgerError::Io { path, source })
    }

    /// The entry of `alias`.
    pub fn entry_mut(&mut self, alias: &str) -> Option<&mut Entry> {
        self.points.iter_mut().find(|e| e.alias == alias)
    }

    /// Keeps the history (attempts, states) of points still in the grid, in the grid's
    /// order; new points start pending.
    pub fn merge(
        old: Option<Ledger>,
        fresh: Vec<Entry>,
        grid: &str,
        profile: Option<String>,
        fingerprint: &str,
    ) -> Ledger {
        let mut by_alias: BTreeMap<String, Entry> = BTreeMap::new();
        let mut sessions = Vec::new();
        if let Some(old) = old {
            sessions = old.sessions;
            for e in old.points {
                by_alias.insert(e.alias.clone(), e);
            }
        }
        let points = fresh
            .into_iter()
            .map(|f| match by_alias.remove(&f.alias) {
                Some(old) if old.fingerprint == f.fingerprint => Entry {
                    run_dir: f.run_dir,
                    config: f.config,
                    ..old
                },
                _ => f,
            })
            .collect();
        Ledger {
            grid: grid.to_string(),
            profile,
            fingerprint: fingerprint.to_string(),
            points,
            sessions,
        }
    }

    /// Number of entries in each state.
    pub fn counts(&self) -> BTreeMap<&'static str, usize> {
        let mut m = BTreeMap::new();
        for e in &self.points {
            *m.entry(e.state.name()).or_insert(0) += 1;
        }
        m
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(alias: &str, fp: &str) -> Entry {
        Entry::pending(alias, alias, None, fp, PathBuf::from("runs/x"), None)
    }

    #[test]
    fn merging_keeps_history_of_unchanged_points_only() {
        let mut old = Ledger::merge(None, vec![entry("a", "1"), entry("b", "2")], "g", None, "f");
        old.points[0].attempts = 2;
        old.points[0].state = State::Failed;
        old.points[1].attempts = 1;
        let merged = Ledger::merge(
            Some(old),
            vec![entry("a", "1"), entry("b", "changed"), entry("c", "3")],
            "g",
            None,
            "f",
        );
        assert_eq!(merged.points[0].attempts, 2);
        assert_eq!(merged.points[0].state, State::Failed);
        assert_eq!(
            merged.points[1].attempts, 0,
            "a point whose recipe changed starts over"
        );
        assert_eq!(merged.points[2].alias, "c");
    }

    #[test]
    fn write_then_read_round_trips_and_a_corrupt_file_is_named() {
        let tmp = tempfile::tempdir().unwrap();
        let l = Ledger::merge(None, vec![entry("a", "1")], "g", Some("paper".into()), "f");
        l.write(tmp.path()).unwrap();
        let back = Ledger::read(tmp.path()).unwrap().unwrap();
        assert_eq!(back.points, l.points);
        std::fs::write(Ledger::path(tmp.path()), "{").unwrap();
        let e = Ledger::read(tmp.path()).unwrap_err().to_string();
        assert!(e.contains("status.json") && e.contains("Fix:"), "{e}");
    }
}
