//! Running a sweep's points: each point is the `harness run` of its resolved recipe, started
//! as a child process of the same binary (the same path as a hand-typed run, and what a
//! Slurm array task runs), `--jobs N` of them at once, each with its share of the machine's
//! threads (`RAYON_NUM_THREADS`). A point whose run directory holds all its results is not
//! started again, so a killed or failed sweep continues with no finished cell repeated.
//! Failures are reported as they happen; by default the sweep keeps going past them.
//!
//! Children die with the sweep (`PR_SET_PDEATHSIG`): a SIGKILLed sweep leaves no orphan
//! writing into a run directory the restarted sweep is about to use; their training resumes
//! from its newest checkpoint. Ctrl-C stops launching, lets the children (which get the
//! terminal's SIGINT and write a checkpoint) end, and records them as interrupted.

use crate::grid::link_name;
use crate::ledger::{Entry, Ledger, LedgerError, Session, State};
use crate::plan::{PlannedPoint, Progress, Sweep};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

/// Which points to run.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum Only {
    /// Every point without all its results.
    #[default]
    NotDone,
    /// Points never attempted or interrupted (not the failed ones).
    Missing,
    /// Exactly the points whose last attempt failed.
    Failed,
}

/// How to run.
#[derive(Debug, Clone)]
pub struct RunOptions {
    /// The harness binary (`std::env::current_exe()`).
    pub exe: PathBuf,
    pub jobs: usize,
    pub only: Only,
    /// Stop launching after this many failures.
    pub max_fails: Option<usize>,
    /// Stop at the first failure, interrupting the points running.
    pub fail_fast: bool,
    /// Threads of the machine to share among the jobs.
    pub threads: usize,
}

/// What happened, for the command layer to print.
#[derive(Debug, Clone)]
pub enum Event {
    /// A point starts (`n` of `total` to run this time).
    Start {
        alias: String,
        n: usize,
        total: usize,
        threads: usize,
    },
    /// A point ended with all its results.
    Done { alias: String, seconds: f64 },
    /// A point failed: the error and its log.
    Failed {
        alias: String,
        error: String,
        log: PathBuf,
    },
    /// A point was stopped.
    Interrupted { alias: String },
    /// Launching stopped early, and why.
    Stopping { why: String },
}

/// What a sweep invocation did.
#[derive(Debug, Clone, Default)]
pub struct RunSummary {
    pub started: usize,
    pub done: usize,
    /// Points whose results were already there.
    pub reused: usize,
    /// (alias, error, log) of every point failed in this invocation.
    pub failed: Vec<(String, String, PathBuf)>,
    pub interrupted: usize,
    /// Points left to run when launching stopped early.
    pub not_started: usize,
    pub stopped: Option<String>,
}

/// Errors of the sweep machinery (a point's failure is not one: it is in the summary).
#[derive(Debug, thiserror::Error)]
pub enum RunError {
    #[error("{path}: {source}")]
    Io {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error(transparent)]
    Ledger(#[from] LedgerError),
    #[error("{0}")]
    Lock(String),
}

fn io(path: &Path) -> impl FnOnce(std::io::Error) -> RunError + '_ {
    move |source| RunError::Io {
        path: path.to_path_buf(),
        source,
    }
}

/// The sweep directory, claimed and locked: `grid.yaml` (the grid as read), `points.json`
/// (every point: alias, sets, fingerprint, run directory, command), `runs/<alias>` links to
/// the run directories, `logs/`, `status.json`.
pub struct SweepDir {
    pub path: PathBuf,
    _lock: harness_core::rundir::RunLock,
}

impl SweepDir {
    /// Creates (or reopens) the sweep directory and takes its lock.
    pub fn open(sweep: &Sweep) -> Result<SweepDir, RunError> {
        let dir = &sweep.dir;
        // `logs/` and `runs/` are the sweep's own folders: a link there is refused, not
        // written through (the sweep directory itself may be a link the user made).
        for sub in ["logs", "runs"] {
            harness_core::nofollow::Dir::open_below(dir, Path::new(sub), true).map_err(io(dir))?;
        }
        let lock = harness_core::rundir::RunLock::acquire(dir).map_err(|e| match e {
            harness_core::rundir::RunDirError::Busy { pid, .. } => RunError::Lock(format!(
                "{}: another `harness sweep` of this grid is running (pid {}); this one started nothing. Fix: wait for it to finish (a sweep started again afterwards runs only the points it left), or follow it in {}",
                dir.display(),
                pid.map_or("unknown".into(), |p| p.to_string()),
                dir.join("status.json").display()
            )),
            e => RunError::Lock(e.to_string()),
        })?;
        let write = |name: &str, bytes: &[u8]| {
            let p = dir.join(name);
            harness_core::nofollow::write_atomic(&p, bytes).map_err(io(&p))
        };
        write("grid.yaml", sweep.grid.text.as_bytes())?;
        write("points.json", points_json(sweep).as_bytes())?;
        for p in &sweep.points {
            let link = dir.join("runs").join(link_name(&p.point.alias));
            if link.symlink_metadata().is_err() {
                let target = std::path::absolute(&p.run_dir).map_err(io(&p.run_dir))?;
                // A missing link is only a convenience: the ledger names every run directory.
                let _ = std::os::unix::fs::symlink(target, &link);
            }
        }
        Ok(SweepDir {
            path: dir.clone(),
            _lock: lock,
        })
    }
}

fn points_json(sweep: &Sweep) -> String {
    let points: Vec<serde_json::Value> = sweep
        .points
        .iter()
        .map(|p| {
            serde_json::json!({
                "alias": p.point.alias,
                "config": sweep.expansion.configs[p.point.config].alias,
                "seed": p.point.seed,
                "sets": p.point.sets,
                "recipe": p.recipe_name,
                "fingerprint": p.fingerprint,
                "run_dir": p.run_dir,
                "benchmarks": p.benches,
                "command": std::iter::once("harness".to_string()).chain(p.args.iter().cloned()).collect::<Vec<_>>(),
            })
        })
        .collect();
    let mut s = serde_json::to_string_pretty(&serde_json::json!({
        "grid": sweep.grid.name,
        "grid_file": sweep.grid.path,
        "profile": sweep.grid.profile,
        "fingerprint": sweep.fingerprint,
        "points": points,
    }))
    .expect("points serialise");
    s.push('\n');
    s
}

/// The ledger of `sweep` as it stands: the stored history merged with what the run
/// directories hold now (a point with all its results is done or reused, whoever ran it).
pub fn current_ledger(sweep: &Sweep) -> Result<Ledger, RunError> {
    let fresh: Vec<Entry> = sweep
        .points
        .iter()
        .map(|p| {
            Entry::pending(
                &p.point.alias,
                &sweep.expansion.configs[p.point.config].alias,
                p.point.seed,
                &p.fingerprint,
                p.run_dir.clone(),
                Some(format!("logs/{}.log", link_name(&p.point.alias))),
            )
        })
        .collect();
    let old = Ledger::read(&sweep.dir)?;
    let mut ledger = Ledger::merge(
        old,
        fresh,
        &sweep.grid.name,
        sweep.grid.profile.clone(),
        &sweep.fingerprint,
    );
    for (p, e) in sweep.points.iter().zip(ledger.points.iter_mut()) {
        match p.progress() {
            Progress::Done => {
                if e.state != State::Done {
                    e.state = State::Reused;
                }
            }
            Progress::Failed { bench, error } => {
                e.state = State::Failed;
                if e.error.is_none() {
                    e.error = Some(format!("{bench}: {error}"));
                }
            }
            Progress::Missing { .. } | Progress::Unreported => {
                if matches!(e.state, State::Done | State::Reused) {
                    // Its results were removed since: it has to run again.
                    e.state = State::Pending;
                }
            }
        }
    }
    Ok(ledger)
}

/// Whether `only` selects a point in state `s` (not done).
fn selected(only: Only, s: State) -> bool {
    match only {
        Only::NotDone => !matches!(s, State::Done | State::Reused),
        Only::Missing => matches!(s, State::Pending | State::Running | State::Interrupted),
        Only::Failed => s == State::Failed,
    }
}

/// The points `only` would run, in grid order.
pub fn to_run(ledger: &Ledger, only: Only) -> Vec<usize> {
    ledger
        .points
        .iter()
        .enumerate()
        .filter(|(_, e)| selected(only, e.state))
        .map(|(i, _)| i)
        .collect()
}

struct Running {
    index: usize,
    child: Child,
    started: Instant,
}

/// Runs the selected points of `sweep` in `dir`, updating the ledger after every change.
pub fn run(
    sweep: &Sweep,
    dir: &SweepDir,
    opts: &RunOptions,
    on_event: &mut dyn FnMut(Event),
) -> Result<(RunSummary, Ledger), RunError> {
    let mut s = Scheduler::start(sweep, dir, opts, on_event)?;
    harness_core::signal::reset();
    // SIGTERM (a scheduler's cancel or time limit, `kill`) is handled as Ctrl-C: the points
    // running are told to stop at a checkpoint, and are recorded as interrupted. The
    // handlers found here are put back when `interrupts` is dropped.
    let interrupts = harness_core::signal::Interrupts::catch();
    loop {
        if s.stopping.is_none() && harness_core::signal::interrupted() {
            let why =
                "interrupted (Ctrl-C or SIGTERM): the points running stop at their next checkpoint"
                    .to_string();
            s.stop(why, true);
        }
        s.launch()?;
        if s.running.is_empty() {
            break;
        }
        std::thread::sleep(Duration::from_millis(100));
        s.reap()?;
    }
    drop(interrupts);
    s.finish()
}

/// One invocation of [`run`] under way: the ledger and summary it keeps, the points it has
/// yet to start and the children running.
struct Scheduler<'a> {
    sweep: &'a Sweep,
    dir: &'a SweepDir,
    opts: &'a RunOptions,
    on_event: &'a mut dyn FnMut(Event),
    ledger: Ledger,
    summary: RunSummary,
    /// The points to run, in order; `queue[next..]` are not started yet.
    queue: Vec<usize>,
    next: usize,
    running: Vec<Running>,
    /// Why launching stopped, once it has.
    stopping: Option<String>,
    /// Points run at once, and the threads each gets.
    jobs: usize,
    threads: usize,
}

impl<'a> Scheduler<'a> {
    /// Takes the ledger as it stands, selects the points to run and records a new session.
    fn start(
        sweep: &'a Sweep,
        dir: &'a SweepDir,
        opts: &'a RunOptions,
        on_event: &'a mut dyn FnMut(Event),
    ) -> Result<Scheduler<'a>, RunError> {
        let mut ledger = current_ledger(sweep)?;
        let summary = RunSummary {
            reused: ledger
                .points
                .iter()
                .filter(|e| matches!(e.state, State::Reused | State::Done))
                .count(),
            ..RunSummary::default()
        };
        let queue = to_run(&ledger, opts.only);
        ledger.sessions.push(Session {
            started: harness_core::rundir::utc_now(),
            started_points: 0,
            ended: None,
        });
        ledger.write(&dir.path)?;
        let jobs = opts.jobs.max(1);
        let threads = (opts.threads / jobs).max(1);
        Ok(Scheduler {
            sweep,
            dir,
            opts,
            on_event,
            ledger,
            summary,
            queue,
            next: 0,
            running: Vec::new(),
            stopping: None,
            jobs,
            threads,
        })
    }

    /// Stops launching, for `why`; with `interrupt`, the points running are sent SIGINT
    /// (they stop at their next checkpoint).
    fn stop(&mut self, why: String, interrupt: bool) {
        if interrupt {
            for r in &self.running {
                // SAFETY: kill(2) touches no memory of ours; the pid is a child in `running`,
                // not yet waited for, so it cannot have been reused by another process.
                unsafe { libc::kill(r.child.id() as libc::pid_t, libc::SIGINT) };
            }
        }
        (self.on_event)(Event::Stopping { why: why.clone() });
        self.stopping = Some(why);
    }

    /// Starts queued points until `jobs` run (none once launching has stopped).
    fn launch(&mut self) -> Result<(), RunError> {
        let sweep = self.sweep;
        let total = self.queue.len();
        while self.stopping.is_none() && self.running.len() < self.jobs && self.next < total {
            let index = self.queue[self.next];
            self.next += 1;
            let p = &sweep.points[index];
            let e = &mut self.ledger.points[index];
            let log = self.dir.path.join(e.log.clone().unwrap_or_default());
            let child = spawn(p, &self.opts.exe, self.threads, &log)?;
            e.state = State::Running;
            e.attempts += 1;
            e.started = Some(harness_core::rundir::utc_now());
            e.ended = None;
            e.exit_code = None;
            e.error = None;
            if let Some(s) = self.ledger.sessions.last_mut() {
                s.started_points += 1;
            }
            self.ledger.write(&self.dir.path)?;
            self.summary.started += 1;
            (self.on_event)(Event::Start {
                alias: p.point.alias.clone(),
                n: self.next,
                total,
                threads: self.threads,
            });
            self.running.push(Running {
                index,
                child,
                started: Instant::now(),
            });
        }
        Ok(())
    }

    /// Records every running point that has ended, writing the ledger after each.
    fn reap(&mut self) -> Result<(), RunError> {
        let mut i = 0;
        while i < self.running.len() {
            let status = self.running[i]
                .child
                .try_wait()
                .map_err(io(&self.opts.exe))?;
            let Some(status) = status else {
                i += 1;
                continue;
            };
            let r = self.running.swap_remove(i);
            self.record_end(r, status);
            self.ledger.write(&self.dir.path)?;
        }
        Ok(())
    }

    /// Records how the point of `r` ended: done, interrupted, or failed (which may stop
    /// launching).
    fn record_end(&mut self, r: Running, status: ExitStatus) {
        let sweep = self.sweep;
        let p = &sweep.points[r.index];
        let e = &mut self.ledger.points[r.index];
        let seconds = r.started.elapsed().as_secs_f64();
        e.ended = Some(harness_core::rundir::utc_now());
        e.seconds = Some(seconds);
        e.exit_code = status.code();
        let log = self.dir.path.join(e.log.clone().unwrap_or_default());
        let interrupted = status.code() == Some(130) || status.code().is_none();
        match p.progress() {
            Progress::Done => {
                e.state = State::Done;
                self.summary.done += 1;
                (self.on_event)(Event::Done {
                    alias: p.point.alias.clone(),
                    seconds,
                });
            }
            _ if interrupted && self.stopping.is_some() => {
                e.state = State::Interrupted;
                self.summary.interrupted += 1;
                (self.on_event)(Event::Interrupted {
                    alias: p.point.alias.clone(),
                });
            }
            progress => {
                let error = failure(progress, status, &log);
                e.state = State::Failed;
                e.error = Some(error.clone());
                self.summary
                    .failed
                    .push((p.point.alias.clone(), error.clone(), log.clone()));
                (self.on_event)(Event::Failed {
                    alias: p.point.alias.clone(),
                    error,
                    log,
                });
                if self.stopping.is_none() {
                    self.stop_after_failure();
                }
            }
        }
    }

    /// After a failure, stops launching if `--fail-fast` (which also interrupts the points
    /// running) or `--max-fails` says so.
    fn stop_after_failure(&mut self) {
        let opts = self.opts;
        let why = if opts.fail_fast {
            Some("--fail-fast: stopping at the first failure".to_string())
        } else {
            opts.max_fails
                .filter(|m| self.summary.failed.len() >= *m)
                .map(|m| format!("--max-fails {m} reached"))
        };
        if let Some(why) = why {
            self.stop(why, opts.fail_fast);
        }
    }

    /// Ends the session (what was not started, why launching stopped) and writes the ledger.
    fn finish(mut self) -> Result<(RunSummary, Ledger), RunError> {
        self.summary.not_started = self.queue.len() - self.next;
        self.summary.stopped = self.stopping;
        if let Some(s) = self.ledger.sessions.last_mut() {
            s.ended = Some(harness_core::rundir::utc_now());
        }
        self.ledger.write(&self.dir.path)?;
        Ok((self.summary, self.ledger))
    }
}

/// The error of a point that ended without all its results (`progress` is not done).
fn failure(progress: Progress, status: ExitStatus, log: &Path) -> String {
    let exit = || {
        status
            .code()
            .map_or("by a signal".into(), |c| c.to_string())
    };
    match progress {
        Progress::Failed { bench, error } => format!("{bench}: {error}"),
        Progress::Missing { have, of } => format!(
            "exit {}: {} ({have} of {of} results written)",
            exit(),
            last_error(log)
        ),
        Progress::Unreported => format!(
            "exit {}: {} (every result written, the report not finished)",
            exit(),
            last_error(log)
        ),
        Progress::Done => unreachable!(),
    }
}

/// Starts `harness run ...` of one point, its output appended to `log`.
fn spawn(p: &PlannedPoint, exe: &Path, threads: usize, log: &Path) -> Result<Child, RunError> {
    let mut f = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(log)
        .map_err(io(log))?;
    let _ = writeln!(
        f,
        "=== {} {} (RAYON_NUM_THREADS={threads}): harness {}",
        harness_core::rundir::utc_now(),
        p.point.alias,
        p.args.join(" ")
    );
    let err = f.try_clone().map_err(io(log))?;
    let mut cmd = Command::new(exe);
    cmd.args(&p.args)
        .env("RAYON_NUM_THREADS", threads.to_string())
        .stdin(Stdio::null())
        .stdout(f)
        .stderr(err);
    die_with_parent(&mut cmd);
    cmd.spawn().map_err(io(exe))
}

/// Makes the child of `cmd` die with this process (`PR_SET_PDEATHSIG`, Linux): a SIGKILLed
/// sweep or night leaves no orphan writing into folders its next run reuses or removes.
pub(crate) fn die_with_parent(cmd: &mut Command) {
    #[cfg(target_os = "linux")]
    {
        use std::os::unix::process::CommandExt;
        // SAFETY: prctl is async-signal-safe; it runs in the child between fork and exec.
        unsafe {
            cmd.pre_exec(|| {
                libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL);
                Ok(())
            });
        }
    }
    #[cfg(not(target_os = "linux"))]
    let _ = cmd;
}

/// The last `error:` line of a point's log, else its last line.
fn last_error(log: &Path) -> String {
    let text = std::fs::read_to_string(log).unwrap_or_default();
    let lines: Vec<&str> = text.lines().filter(|l| !l.trim().is_empty()).collect();
    lines
        .iter()
        .rev()
        .find(|l| l.starts_with("error"))
        .or(lines.last())
        .map(|l| l.chars().take(600).collect())
        .unwrap_or_else(|| "no output".into())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_selects_by_state() {
        use State::*;
        let states = [Pending, Running, Done, Reused, Failed, Interrupted];
        let pick = |o| {
            states
                .iter()
                .filter(|s| selected(o, **s))
                .map(|s| s.name())
                .collect::<Vec<_>>()
        };
        assert_eq!(
            pick(Only::NotDone),
            ["pending", "running", "failed", "interrupted"]
        );
        assert_eq!(pick(Only::Missing), ["pending", "running", "interrupted"]);
        assert_eq!(pick(Only::Failed), ["failed"]);
    }
}
