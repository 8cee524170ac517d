//! A one-node Slurm cluster for tests (`scripts/slurm-local.sh`), shared by the crate's
//! emission test and the binary's sweep test (`tests/sweep_slurm.rs` includes this file).
#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::{Duration, Instant};

/// The repository root: the first folder above this package holding `scripts/slurm-local.sh`.
pub fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .ancestors()
        .find(|d| d.join("scripts/slurm-local.sh").is_file())
        .expect("scripts/slurm-local.sh above the package")
        .to_path_buf()
}

/// The local cluster; stopped when dropped, whether the test passed or panicked.
pub struct Cluster {
    pub dir: tempfile::TempDir,
    pub conf: PathBuf,
}

impl Cluster {
    /// Starts it, or says why it cannot (the reason printed by the scripts).
    pub fn start() -> Result<Cluster, String> {
        let have_slurm = ["slurmctld", "slurmd", "sbatch"].iter().all(|t| {
            Command::new("sh")
                .arg("-c")
                .arg(format!("command -v {t}"))
                .output()
                .is_ok_and(|o| o.status.success())
        });
        if !have_slurm {
            let out = Command::new("bash")
                .arg(repo_root().join("scripts/install-test-deps.sh"))
                .arg("slurm")
                .output()
                .map_err(|e| format!("cannot run scripts/install-test-deps.sh: {e}"))?;
            if !out.status.success() {
                return Err(format!(
                    "scripts/install-test-deps.sh slurm failed:\n{}",
                    text(&out)
                ));
            }
        }
        let dir = tempfile::Builder::new()
            .prefix("slurm-local-")
            .tempdir()
            .map_err(|e| e.to_string())?;
        let out = Command::new("bash")
            .arg(repo_root().join("scripts/slurm-local.sh"))
            .arg("start")
            .arg(dir.path())
            .output()
            .map_err(|e| format!("cannot run scripts/slurm-local.sh: {e}"))?;
        let conf = dir.path().join("slurm.conf");
        // Built before the status check: its Drop stops whatever did start.
        let cluster = Cluster { dir, conf };
        if !out.status.success() {
            return Err(format!(
                "scripts/slurm-local.sh start failed:\n{}",
                text(&out)
            ));
        }
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert!(
            stdout.contains(&format!("export SLURM_CONF={}", cluster.conf.display())),
            "slurm-local.sh start printed: {stdout}"
        );
        Ok(cluster)
    }

    /// A Slurm client command against this cluster.
    pub fn cmd(&self, program: &str) -> Command {
        let mut c = Command::new(program);
        c.env("SLURM_CONF", &self.conf);
        c
    }

    /// Job ids of the cluster's jobs still pending or running.
    pub fn active_jobs(&self) -> Vec<String> {
        let out = self
            .cmd("squeue")
            .args([
                "-h",
                "-t",
                "PENDING,RUNNING,CONFIGURING,COMPLETING,SUSPENDED",
            ])
            .args(["-o", "%i %T %r"])
            .output()
            .expect("run squeue");
        assert!(out.status.success(), "squeue: {}", text(&out));
        String::from_utf8_lossy(&out.stdout)
            .lines()
            .map(str::to_string)
            .collect()
    }

    /// Polls until `done(active jobs)` holds; panics after `timeout` with the queue and logs.
    pub fn wait_until(&self, what: &str, timeout: Duration, done: impl Fn(&[String]) -> bool) {
        let start = Instant::now();
        loop {
            let jobs = self.active_jobs();
            if done(&jobs) {
                return;
            }
            if start.elapsed() > timeout {
                let log = std::fs::read_to_string(self.dir.path().join("log/slurmctld.log"))
                    .unwrap_or_default();
                let tail: Vec<&str> = log.lines().rev().take(30).collect();
                panic!(
                    "timed out after {timeout:?} waiting for {what}; queue: {jobs:?}\n\
                     slurmctld.log (last lines, newest first):\n{}",
                    tail.join("\n")
                );
            }
            std::thread::sleep(Duration::from_millis(500));
        }
    }
}

impl Drop for Cluster {
    fn drop(&mut self) {
        let out = Command::new("bash")
            .arg(repo_root().join("scripts/slurm-local.sh"))
            .arg("stop")
            .arg(self.dir.path())
            .output();
        match out {
            Ok(o) if o.status.success() => {}
            Ok(o) => eprintln!("slurm-local.sh stop failed: {}", text(&o)),
            Err(e) => eprintln!("cannot run slurm-local.sh stop: {e}"),
        }
    }
}

pub fn text(o: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}
