//! One multi-node training job for Slurm (`harness train RECIPE --emit slurm --nodes N
//! --gpus-per-node G --out DIR`): [`emit`] writes, into one directory,
//!
//! - `train.args`: the arguments after `harness` that every rank runs (`train`, the recipe's
//!   absolute path, its `--profile` and `--set`s, `--out RUN_DIR` absolute, `--device`), one
//!   per line;
//! - `train.sbatch`: the batch script; it asks for `N` nodes with `T` tasks each (one MPI
//!   rank per device: `T = G` with GPUs) and starts the ranks with `srun --mpi=pmix harness
//!   $(cat train.args)` (`HARNESS_SRUN_MPI` picks another of `srun --mpi=list`'s plugins).
//!
//! Submit with `sbatch DIR/train.sbatch`. Every rank reads the same recipe and the same run
//! directory, so the nodes must share the file system that holds them (as any Slurm
//! training does). Under MPI, `--device cuda` without an index gives each rank of a node
//! its own GPU (`harness_train::mpi_world::local_gpu`).
//!
//! As [`crate::slurm`]'s arrays: the directory is a user-named output
//! ([`harness_core::outdir`], kind [`OUTPUT_KIND`]) that is never written over someone
//! else's files or through a link; arguments travel in a file read with `mapfile`, never
//! parsed by a shell; `#SBATCH` values are quoted the way sbatch reads them.
//!
//! References: Slurm's `sbatch` manual (<https://slurm.schedmd.com/sbatch.html>: `--nodes`,
//! `--ntasks-per-node`, `--gpus-per-node`) and MPI guide
//! (<https://slurm.schedmd.com/mpi_guide.html>: `srun --mpi=pmix` starts Open MPI ranks
//! without `mpirun`).

use std::path::{Path, PathBuf};

use crate::slurm::{comment, make_executable, sbatch, sh_quote, ScriptPaths, SlurmError};
use harness_core::outdir::{Foreign, OutDir};

/// The kind of output [`emit`] records in its directory's manifest.
pub const OUTPUT_KIND: &str = "Slurm training job";

/// What the job asks of the cluster.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JobShape {
    /// `--nodes`.
    pub nodes: u32,
    /// `--gpus-per-node` (0: a CPU job).
    pub gpus_per_node: u32,
    /// `--ntasks-per-node`: MPI ranks per node (one per GPU on a GPU job).
    pub tasks_per_node: u32,
    /// `--cpus-per-task`.
    pub cpus_per_task: u32,
    /// `--partition`.
    pub partition: Option<String>,
    /// `--account`.
    pub account: Option<String>,
    /// `--time` (`02:00:00`).
    pub time: Option<String>,
}

impl JobShape {
    /// How many ranks the job starts.
    pub fn ranks(&self) -> u64 {
        u64::from(self.nodes) * u64::from(self.tasks_per_node)
    }
}

/// What to emit.
#[derive(Debug, Clone)]
pub struct TrainJob<'a> {
    /// The recipe's name (the job's name: `harness-train-<name>`).
    pub name: &'a str,
    /// The arguments after `harness` of every rank.
    pub args: &'a [String],
    /// The job's shape.
    pub shape: &'a JobShape,
    /// The harness binary the ranks run (made absolute when it is a path; a bare name is
    /// left to the nodes' `PATH`).
    pub harness: &'a Path,
    /// The directory the job starts in (made absolute).
    pub workdir: &'a Path,
    /// Where to write (made absolute).
    pub out: &'a Path,
    /// Write beside files harness did not write (never over them).
    pub force: bool,
}

/// What [`emit`] wrote.
#[derive(Debug, Clone)]
pub struct EmittedJob {
    /// `train.sbatch`.
    pub script: PathBuf,
    /// Every file written.
    pub files: Vec<PathBuf>,
}

/// Writes `train.args` and `train.sbatch` of `job` into `job.out` (see the module doc),
/// after checking everything (a refusal writes nothing).
pub fn emit(job: &TrainJob) -> Result<EmittedJob, SlurmError> {
    check(job)?;
    let paths = ScriptPaths::new(job.out, job.workdir, job.harness)?;
    if paths.out_s.contains('\\') {
        return Err(SlurmError::Value {
            field: "out",
            value: paths.out_s,
            detail: "Slurm's --output pattern cannot express a backslash".into(),
            fix: "write the Slurm script to a directory without one".into(),
        });
    }
    let script = train_script(job, &paths);
    let mut args = String::new();
    for a in job.args {
        args.push_str(a);
        args.push('\n');
    }
    write_job(job, &paths.out, &script, &args)
}

/// The `#SBATCH` lines of `job`: its name, shape, and log file in `logs/`.
fn sbatch_lines(s: &mut String, job: &TrainJob, paths: &ScriptPaths) {
    let shape = job.shape;
    sbatch(s, "job-name", &format!("harness-train-{}", job.name));
    sbatch(s, "nodes", &shape.nodes.to_string());
    sbatch(s, "ntasks-per-node", &shape.tasks_per_node.to_string());
    if shape.gpus_per_node > 0 {
        sbatch(s, "gpus-per-node", &shape.gpus_per_node.to_string());
    }
    sbatch(s, "cpus-per-task", &shape.cpus_per_task.to_string());
    for (key, value) in [
        ("partition", &shape.partition),
        ("account", &shape.account),
        ("time", &shape.time),
    ] {
        if let Some(v) = value {
            sbatch(s, key, v);
        }
    }
    sbatch(s, "output", &paths.logs_pattern("train-%j.out"));
}

/// `train.sbatch`: its `#SBATCH` lines, what it runs as comments, and the commands that
/// start every rank on `train.args` under srun's MPI.
fn train_script(job: &TrainJob, paths: &ScriptPaths) -> String {
    let shape = job.shape;
    let out_s = &paths.out_s;
    let mut s = String::from("#!/usr/bin/env bash\n");
    sbatch_lines(&mut s, job, paths);
    s.push_str(&format!(
        "# harness train `{}`: {} node(s) × {} rank(s), one process per {}; rank 0 writes\n\
         # the run directory. Every rank runs `harness $(cat train.args)` under srun's MPI.\n\
         # Submit with: sbatch {}\n",
        comment(job.name),
        shape.nodes,
        shape.tasks_per_node,
        if shape.gpus_per_node > 0 {
            "GPU"
        } else {
            "CPU share"
        },
        comment(&format!("{out_s}/train.sbatch")),
    ));
    s.push_str("set -euo pipefail\n");
    s.push_str(&format!("cd {}\n", sh_quote(&paths.workdir_s)));
    s.push_str(&format!(
        "mapfile -t args < {}\n",
        sh_quote(&format!("{out_s}/train.args"))
    ));
    s.push_str(&format!(
        "printf 'harness train %s: %s rank(s) on %s\\n' {} \"${{SLURM_NTASKS:-?}}\" \
         \"${{SLURM_JOB_NODELIST:-$(hostname)}}\"\n",
        sh_quote(job.name)
    ));
    // harness's CPU work runs on rayon: use what Slurm granted each rank, not the node's cores.
    s.push_str("export RAYON_NUM_THREADS=\"${SLURM_CPUS_PER_TASK:-1}\"\n");
    s.push_str(&format!(
        "exec srun --mpi=\"${{HARNESS_SRUN_MPI:-pmix}}\" {} \"${{args[@]}}\"\n",
        sh_quote(&paths.harness_s)
    ));
    s
}

/// Refuses a `logs` in `out` that is a link or no folder, then claims `out` and writes
/// the script (executable) and the args file into it, and makes `logs/`.
fn write_job(
    job: &TrainJob,
    out: &Path,
    script: &str,
    args: &str,
) -> Result<EmittedJob, SlurmError> {
    let will_write = vec!["train.sbatch".to_string(), "train.args".to_string()];
    let logs = out.join("logs");
    if let Ok(m) = std::fs::symlink_metadata(&logs) {
        if m.file_type().is_symlink() || !m.is_dir() {
            return Err(harness_core::outdir::OutDirError::InTheWay {
                path: logs,
                rel: "logs".into(),
                kind: OUTPUT_KIND.into(),
            }
            .into());
        }
    }
    let mut dir = OutDir::claim(
        out,
        OUTPUT_KIND,
        &will_write,
        Foreign::RefuseDirectory,
        job.force,
    )?;
    let script = dir.write("train.sbatch", script.as_bytes())?;
    make_executable(&script)?;
    let args_file = dir.write("train.args", args.as_bytes())?;
    // Slurm does not create the folder of `--output`: a job whose log cannot be opened
    // fails before its first line.
    std::fs::create_dir_all(&logs).map_err(|e| SlurmError::io(&logs, e))?;
    dir.finish()?;
    Ok(EmittedJob {
        files: vec![script.clone(), args_file],
        script,
    })
}

/// Refuses what the job cannot be or the files cannot carry.
fn check(job: &TrainJob) -> Result<(), SlurmError> {
    let shape = job.shape;
    for (what, n) in [
        ("--nodes", shape.nodes),
        ("--tasks-per-node", shape.tasks_per_node),
        ("--cpus-per-task", shape.cpus_per_task),
    ] {
        if n == 0 {
            return Err(SlurmError::Options {
                detail: format!("{what} is 0"),
                fix: format!("give {what} at least 1"),
            });
        }
    }
    if shape.gpus_per_node > 0 && shape.tasks_per_node != shape.gpus_per_node {
        return Err(SlurmError::Options {
            detail: format!(
                "{} tasks per node for {} GPUs per node: training under MPI runs one rank per GPU",
                shape.tasks_per_node, shape.gpus_per_node
            ),
            fix: "leave --tasks-per-node out on a GPU job (it is --gpus-per-node)".into(),
        });
    }
    for a in job.args {
        if a.contains(['\n', '\0']) {
            return Err(SlurmError::Argument {
                index: 0,
                alias: "train".into(),
                arg: a.clone(),
                what: if a.contains('\n') {
                    "newline"
                } else {
                    "NUL byte"
                },
            });
        }
    }
    for (field, value) in [
        ("name", Some(job.name)),
        ("partition", shape.partition.as_deref()),
        ("account", shape.account.as_deref()),
        ("time", shape.time.as_deref()),
    ] {
        let Some(v) = value else { continue };
        if v.contains(['\n', '\0', '\r']) {
            return Err(SlurmError::Value {
                field,
                value: v.to_string(),
                detail: "an #SBATCH line cannot hold a newline, carriage return or NUL".into(),
                fix: "remove it".into(),
            });
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::process::Command;

    fn shape(nodes: u32, gpus: u32) -> JobShape {
        JobShape {
            nodes,
            gpus_per_node: gpus,
            tasks_per_node: gpus.max(1),
            cpus_per_task: 4,
            partition: Some("gpu queue".into()),
            account: None,
            time: Some("02:00:00".into()),
        }
    }

    fn args() -> Vec<String> {
        [
            "train",
            "/r/laser's recipe.yaml",
            "--set",
            "train.steps=$(rm -rf /)",
            "--out",
            "/runs/x",
        ]
        .map(String::from)
        .to_vec()
    }

    #[test]
    fn the_script_asks_for_the_nodes_and_starts_one_rank_per_gpu() {
        let dir = tempfile::tempdir().unwrap();
        let out = dir.path().join("job");
        let a = args();
        let s = shape(4, 8);
        let e = emit(&TrainJob {
            name: "laser",
            args: &a,
            shape: &s,
            harness: Path::new("/opt/harness/bin/harness"),
            workdir: dir.path(),
            out: &out,
            force: false,
        })
        .unwrap();
        let text = std::fs::read_to_string(&e.script).unwrap();
        for want in [
            "#SBATCH --nodes=4\n",
            "#SBATCH --ntasks-per-node=8\n",
            "#SBATCH --gpus-per-node=8\n",
            "#SBATCH --partition=\"gpu queue\"\n",
            "exec srun --mpi=\"${HARNESS_SRUN_MPI:-pmix}\" /opt/harness/bin/harness \"${args[@]}\"\n",
        ] {
            assert!(text.contains(want), "{want:?} not in\n{text}");
        }
        // Arguments are data: one per line, never in the script.
        let listed = std::fs::read_to_string(out.join("train.args")).unwrap();
        assert_eq!(listed.lines().collect::<Vec<_>>(), a);
        assert!(!text.contains("rm -rf"), "{text}");
        assert!(out.join("logs").is_dir());
        let o = Command::new("bash")
            .arg("-n")
            .arg(&e.script)
            .output()
            .unwrap();
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    }

    #[test]
    fn impossible_shapes_and_foreign_folders_are_refused() {
        let dir = tempfile::tempdir().unwrap();
        let a = args();
        let mut s = shape(2, 4);
        s.tasks_per_node = 2;
        fn job<'a>(s: &'a JobShape, out: &'a Path, a: &'a [String], w: &'a Path) -> TrainJob<'a> {
            TrainJob {
                name: "laser",
                args: a,
                shape: s,
                harness: Path::new("harness"),
                workdir: w,
                out,
                force: false,
            }
        }
        let out = dir.path().join("job");
        let e = emit(&job(&s, &out, &a, dir.path()))
            .unwrap_err()
            .to_string();
        assert!(e.contains("one rank per GPU"), "{e}");
        assert!(!out.exists(), "a refusal wrote something");
        let mut zero = shape(0, 0);
        zero.nodes = 0;
        let e = emit(&job(&zero, &out, &a, dir.path()))
            .unwrap_err()
            .to_string();
        assert!(e.contains("--nodes is 0"), "{e}");
        // Someone else's folder is left as it is.
        std::fs::create_dir_all(&out).unwrap();
        std::fs::write(out.join("train.sbatch"), "mine").unwrap();
        assert!(emit(&job(&shape(1, 0), &out, &a, dir.path())).is_err());
        assert_eq!(
            std::fs::read_to_string(out.join("train.sbatch")).unwrap(),
            "mine"
        );
    }
}
