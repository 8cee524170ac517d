//! Slurm job arrays for a sweep: [`emit`] writes, into one directory,
//!
//! - `tasks/<i>.args`: the arguments after `harness` of grid point `i` (0..n), one per line;
//! - `array-<k>.sbatch`: one job array per chunk of at most `max_array_size` points;
//! - `gather.sbatch`: one job that builds the sweep's report once the arrays are done;
//! - `submit.sh`: submits the arrays with `sbatch --parsable`, then the gather job with a
//!   dependency on all of them, and records the job ids in `jobs.txt`.
//!
//! The directory is a user-named output ([`harness_core::outdir`], kind [`OUTPUT_KIND`]):
//! emit writes only into a new or empty directory, or one it emitted into before (its
//! `.harness-files.json` lists what it wrote), and never replaces or deletes a file it did
//! not write — `--force` lets it write beside such files, never over them. A symbolic link
//! where it writes (a script, `tasks/`, `logs/`) is refused, not followed.
//!
//! Why this shape:
//!
//! - **The cluster is the scheduler.** Each grid point is one array task; Slurm queues,
//!   places, limits and restarts them. There is no home-made scheduler polling the queue, so
//!   nothing has to stay logged in while a sweep runs.
//! - **MaxArraySize.** Slurm rejects an array index at or above the cluster's `MaxArraySize`
//!   (default 1001), whatever the array's length, so a sweep of more points is split into
//!   chunks whose indices all run `0..len-1`; each chunk's script adds its chunk's offset
//!   (`i=$((OFFSET + SLURM_ARRAY_TASK_ID))`) to find its global point.
//! - **Throttle.** `--array=0-N%T` lets at most `T` tasks of an array run at once (a fair share
//!   of a partition, or of a licence); it is per array, so with several chunks the bound is
//!   per chunk.
//! - **Gather.** The report job depends on every array with `afterok` (it runs only when every
//!   task succeeded; otherwise Slurm leaves it pending with `DependencyNeverSatisfied`, to be
//!   released after a rerun or cancelled) or `afterany` (it always runs, and the report lists
//!   the failures). A dependency on an array job id covers all of its tasks.
//! - **Argument files, not a generated `case`.** Arguments are data: each task reads its own
//!   file with `mapfile`, so no argument is ever parsed by a shell and a grid value cannot
//!   inject a command. A newline or NUL cannot be carried by a line-per-argument file, so such
//!   an argument is refused.
//!
//! References: Slurm's `sbatch` manual (<https://slurm.schedmd.com/sbatch.html>: `--array`
//! with the `%` throttle, `--dependency=afterok/afterany`, `--parsable`'s `id;cluster`
//! output, `--output` filename patterns `%A`/`%a`/`%j`/`%%`) and job array guide
//! (<https://slurm.schedmd.com/job_array.html>: `MaxArraySize`, dependencies on arrays);
//! submitit's array handling (`submitit/slurm/slurm.py`, `_make_sbatch_string`: one
//! `--array=0-{n-1}%{parallelism}` per batch with `%A_%a` logs — the same layout, plus the
//! `MaxArraySize` split that a batch larger than the cluster's limit needs).

use std::path::{Path, PathBuf};

use harness_core::outdir::{Foreign, OutDir, OutDirError};

/// The kind of output [`emit`] records in its directory's manifest.
pub const OUTPUT_KIND: &str = "Slurm job array";

/// What the array and gather jobs ask of the cluster: the grid's `slurm:` block.
#[derive(Debug, Clone, PartialEq, serde::Deserialize, serde::Serialize)]
#[serde(deny_unknown_fields)]
pub struct SlurmOptions {
    /// `--partition`.
    #[serde(default)]
    pub partition: Option<String>,
    /// `--account`.
    #[serde(default)]
    pub account: Option<String>,
    /// `--cpus-per-task` of each array task (default 1).
    #[serde(default = "one")]
    pub cpus_per_task: u32,
    /// `--gres=gpu:N` of each array task (default 0: none requested).
    #[serde(default)]
    pub gpus: u32,
    /// `--nodes` of each array task (default 1). With more than one node or task, each
    /// point trains as an MPI job: `srun --mpi=pmix harness run …` starts one rank per task
    /// (a harness built with `--features mpi`; rank 0 evaluates and writes the point's run).
    #[serde(default = "one")]
    pub nodes: u32,
    /// `--ntasks-per-node` of each array task: MPI ranks per node (default 1).
    #[serde(default = "one")]
    pub tasks_per_node: u32,
    /// `--mem` of each array task (`8G`).
    #[serde(default)]
    pub mem: Option<String>,
    /// `--time` of each array task (`02:00:00`).
    #[serde(default)]
    pub time: Option<String>,
    /// `%N` throttle: at most N tasks of an array at once.
    #[serde(default)]
    pub throttle: Option<u32>,
    /// The cluster's MaxArraySize: arrays of more tasks are split (default 1001, Slurm's
    /// default; indices run 0..max_array_size-1).
    #[serde(default = "default_max_array_size")]
    pub max_array_size: usize,
    /// When the gather job starts: `ok` (`afterok`, only when every task succeeded) or
    /// `any` (`afterany`: always, and the gathered report lists the failures).
    #[serde(default)]
    pub gather_after: GatherAfter,
}

fn one() -> u32 {
    1
}

fn default_max_array_size() -> usize {
    1001
}

impl SlurmOptions {
    /// MPI ranks of each array task (nodes × tasks per node).
    pub fn ranks(&self) -> u64 {
        u64::from(self.nodes) * u64::from(self.tasks_per_node)
    }
}

impl Default for SlurmOptions {
    fn default() -> Self {
        SlurmOptions {
            partition: None,
            account: None,
            cpus_per_task: 1,
            gpus: 0,
            nodes: 1,
            tasks_per_node: 1,
            mem: None,
            time: None,
            throttle: None,
            max_array_size: default_max_array_size(),
            gather_after: GatherAfter::default(),
        }
    }
}

/// The gather job's dependency type.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Deserialize, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum GatherAfter {
    /// `afterok`: the gather runs only when every task of every array succeeded.
    #[default]
    Ok,
    /// `afterany`: the gather runs once every task has ended, however it ended.
    Any,
}

impl GatherAfter {
    /// The `--dependency` type Slurm spells for it.
    pub fn dependency_type(self) -> &'static str {
        match self {
            GatherAfter::Ok => "afterok",
            GatherAfter::Any => "afterany",
        }
    }
}

/// One array task: one grid point, run as `harness run RECIPE [--profile P] [--set K=V]...
/// --out RUN_DIR`.
#[derive(Debug, Clone)]
pub struct ArrayTask {
    /// Readable alias of the point (`layers=3 seed=2`), for comments and logs.
    pub alias: String,
    /// The arguments after `harness` (`run`, the recipe path, `--profile`, `--set`s, `--out`).
    pub args: Vec<String>,
}

/// What to emit.
#[derive(Debug, Clone)]
pub struct EmitRequest<'a> {
    /// The grid's name (job names: `harness-<name>`).
    pub name: &'a str,
    /// The grid points, in order: task `i` reads `tasks/<i>.args`.
    pub tasks: &'a [ArrayTask],
    /// The grid's `slurm:` block.
    pub options: &'a SlurmOptions,
    /// The harness binary the jobs run (an absolute path; a relative one is made absolute
    /// against the current directory, a bare name is left to the node's `PATH`).
    pub harness: &'a Path,
    /// Directory the jobs `cd` into first (where `runs/` and the grid's paths resolve); made
    /// absolute against the current directory.
    pub workdir: &'a Path,
    /// The arguments after `harness` of the gather job (`sweep GRID --report-only`).
    pub gather_args: Vec<String>,
    /// Where to write the scripts (made absolute: the scripts name it from any directory).
    pub out: &'a Path,
    /// Write into a directory that holds files harness did not write, beside them (they
    /// are never replaced); without it such a directory is refused.
    pub force: bool,
}

/// What was written.
#[derive(Debug, Clone)]
pub struct Emitted {
    /// Every file written, scripts first.
    pub files: Vec<PathBuf>,
    /// `submit.sh`: submits the arrays, then the gather job depending on them.
    pub submit: PathBuf,
    /// Number of arrays (the tasks split by `max_array_size`).
    pub arrays: usize,
    /// Files of an earlier, larger emit into the directory that this one removed.
    pub removed: Vec<PathBuf>,
}

/// Why [`emit`] wrote nothing (checks) or stopped (I/O).
#[derive(Debug, thiserror::Error)]
pub enum SlurmError {
    /// A task argument that one line of an args file cannot hold.
    #[error(
        "task {index} ({alias}): argument {arg:?} contains a {what}; each argument is one line \
         of tasks/{index}.args. Fix: remove the {what} from the grid value or recipe path that \
         produced it"
    )]
    Argument {
        index: usize,
        alias: String,
        arg: String,
        what: &'static str,
    },
    /// A value that cannot be written into a job script or an `#SBATCH` line.
    #[error("{field} {value:?}: {detail}. Fix: {fix}")]
    Value {
        field: &'static str,
        value: String,
        detail: String,
        fix: String,
    },
    /// Options that no array can be built from.
    #[error("slurm options: {detail}. Fix: {fix}")]
    Options { detail: String, fix: String },
    /// Writing a file (or reading the current directory) failed.
    #[error("{path}: {source}. Fix: check that the directory exists and is writable")]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    /// The directory is not harness's to write into (someone else's files, a link).
    #[error(transparent)]
    Out(#[from] OutDirError),
}

harness_core::file_errors!(SlurmError);

/// One chunk of the tasks: an array of `len` tasks starting at global index `offset`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Chunk {
    offset: usize,
    len: usize,
}

fn chunks(n: usize, max: usize) -> Vec<Chunk> {
    (0..n)
        .step_by(max)
        .map(|offset| Chunk {
            offset,
            len: max.min(n - offset),
        })
        .collect()
}

/// Writes the args files, array scripts, gather script and `submit.sh` of `req` into
/// `req.out` (see the module documentation). Everything is checked before anything is
/// written, the directory included (a refusal leaves it as it was); each file is written
/// atomically, scripts with mode 0755. Stale `array-<k>.sbatch` and `tasks/<i>.args` files
/// that an earlier, larger emit wrote into the same directory are removed, so the directory
/// always describes one sweep; a file of that name harness did not write is left.
pub fn emit(req: &EmitRequest) -> Result<Emitted, SlurmError> {
    check(req)?;
    let paths = ScriptPaths::resolve(req)?;
    let chunks = chunks(req.tasks.len(), req.options.max_array_size);
    // Relative names (as the manifest lists them) and contents.
    let mut scripts: Vec<(String, String)> = (0..chunks.len())
        .map(|k| {
            let path = format!("array-{k}.sbatch");
            (path, array_script(req, &paths, &chunks, k))
        })
        .collect();
    scripts.push(("gather.sbatch".into(), gather_script(req, &paths)));
    scripts.push((
        "submit.sh".into(),
        submit_script(req, &chunks, &paths.out_s, &paths.workdir_s),
    ));
    let args = args_files(req.tasks);
    write_emitted(req, &paths.out, &scripts, &args, chunks.len())
}

/// The paths the scripts name, made absolute, as the UTF-8 text they are spelled with.
pub(crate) struct ScriptPaths {
    /// The output directory.
    pub(crate) out: PathBuf,
    pub(crate) out_s: String,
    pub(crate) workdir_s: String,
    pub(crate) harness_s: String,
}

impl ScriptPaths {
    /// Makes `out` and `workdir` absolute, and `harness` when it is a path (a bare name is
    /// left to the nodes' `PATH`), refusing a path that is not UTF-8.
    pub(crate) fn new(
        out: &Path,
        workdir: &Path,
        harness: &Path,
    ) -> Result<ScriptPaths, SlurmError> {
        let out = absolute(out)?;
        let workdir = absolute(workdir)?;
        let harness = if harness.components().count() > 1 {
            absolute(harness)?
        } else {
            harness.to_path_buf()
        };
        Ok(ScriptPaths {
            out_s: utf8("out", &out)?.to_string(),
            workdir_s: utf8("workdir", &workdir)?.to_string(),
            harness_s: utf8("harness", &harness)?.to_string(),
            out,
        })
    }

    /// Resolves `req.out`, `req.workdir` and `req.harness`, refusing what a script cannot
    /// spell.
    fn resolve(req: &EmitRequest) -> Result<ScriptPaths, SlurmError> {
        let paths = ScriptPaths::new(req.out, req.workdir, req.harness)?;
        // Slurm reads `--output` as a filename pattern: `%` must be doubled, and a backslash
        // would turn every pattern off (the logs would collide in one `%A_%a.out`).
        if paths.out_s.contains('\\') || paths.out_s.contains('\n') {
            return Err(SlurmError::Value {
                field: "out",
                value: paths.out_s,
                detail: "Slurm's --output pattern cannot express a backslash or newline".into(),
                fix: "write the Slurm scripts to a directory without them".into(),
            });
        }
        Ok(paths)
    }

    /// The `--output` pattern of log `file` in `logs/` (the directory's `%` doubled).
    pub(crate) fn logs_pattern(&self, file: &str) -> String {
        format!("{}/logs/{file}", self.out_s.replace('%', "%%"))
    }
}

/// The script of array `k`: its `#SBATCH` lines, the points it runs as comments, and the
/// commands that run task `OFFSET + SLURM_ARRAY_TASK_ID` from its args file.
fn array_script(req: &EmitRequest, paths: &ScriptPaths, chunks: &[Chunk], k: usize) -> String {
    let opts = req.options;
    let n = req.tasks.len();
    let chunk = chunks[k];
    let mut s = String::from("#!/usr/bin/env bash\n");
    sbatch(&mut s, "job-name", &format!("harness-{}", req.name));
    let mut array = format!("0-{}", chunk.len - 1);
    if let Some(t) = opts.throttle {
        array.push_str(&format!("%{t}"));
    }
    sbatch(&mut s, "array", &array);
    resources(&mut s, opts, true);
    sbatch(&mut s, "output", &paths.logs_pattern("%A_%a.out"));
    s.push_str(&format!(
        "# harness sweep `{}`, array {k} of {}: tasks {}-{} of {n}; task i runs\n\
         # `harness $(cat tasks/i.args)` with i = OFFSET + SLURM_ARRAY_TASK_ID:\n",
        comment(req.name),
        chunks.len(),
        chunk.offset,
        chunk.offset + chunk.len - 1,
    ));
    for (i, task) in req.tasks[chunk.offset..chunk.offset + chunk.len]
        .iter()
        .enumerate()
    {
        s.push_str(&format!(
            "#   {}: {}\n",
            chunk.offset + i,
            comment(&task.alias)
        ));
    }
    s.push_str("set -euo pipefail\n");
    s.push_str(&format!("OFFSET={}\n", chunk.offset));
    // Run by hand (not by sbatch) the task id is unset: say so instead of `unbound variable`.
    s.push_str(
        ": \"${SLURM_ARRAY_TASK_ID:?is not set: submit this script with sbatch (submit.sh)}\"\n",
    );
    s.push_str("i=$((OFFSET + SLURM_ARRAY_TASK_ID))\n");
    s.push_str(&format!("cd {}\n", sh_quote(&paths.workdir_s)));
    s.push_str(&format!(
        "mapfile -t args < {}\"$i\".args\n",
        sh_quote(&format!("{}/tasks/", paths.out_s))
    ));
    // The log is named by the array's own ids; print the point it belongs to.
    s.push_str(&format!(
        "printf 'harness sweep %s: task %s of {n} (array {k}, job %s_%s) on %s\\n' {} \"$i\" \
         \"${{SLURM_ARRAY_JOB_ID:-?}}\" \"$SLURM_ARRAY_TASK_ID\" \"$(hostname)\"\n",
        sh_quote(req.name),
    ));
    // harness's CPU work runs on rayon: use what Slurm granted, not the node's cores.
    s.push_str("export RAYON_NUM_THREADS=\"${SLURM_CPUS_PER_TASK:-1}\"\n");
    // A multi-rank point: srun starts its MPI ranks (`HARNESS_SRUN_MPI`: another plugin).
    let launcher = if opts.ranks() > 1 {
        "srun --mpi=\"${HARNESS_SRUN_MPI:-pmix}\" "
    } else {
        ""
    };
    s.push_str(&format!(
        "exec {launcher}{} \"${{args[@]}}\"\n",
        sh_quote(&paths.harness_s)
    ));
    s
}

/// The gather job's script: `harness` with the gather arguments, once every array ended.
fn gather_script(req: &EmitRequest, paths: &ScriptPaths) -> String {
    let opts = req.options;
    let mut s = String::from("#!/usr/bin/env bash\n");
    sbatch(&mut s, "job-name", &format!("harness-{}-gather", req.name));
    resources(&mut s, opts, false);
    sbatch(&mut s, "output", &paths.logs_pattern("gather-%j.out"));
    s.push_str(&format!(
        "# harness sweep `{}`: gathers the {} tasks' results once every array has ended \
         ({}).\n",
        comment(req.name),
        req.tasks.len(),
        opts.gather_after.dependency_type()
    ));
    s.push_str("set -euo pipefail\n");
    s.push_str(&format!("cd {}\n", sh_quote(&paths.workdir_s)));
    s.push_str("export RAYON_NUM_THREADS=\"${SLURM_CPUS_PER_TASK:-1}\"\n");
    s.push_str(&format!("exec {}", sh_quote(&paths.harness_s)));
    for a in &req.gather_args {
        s.push(' ');
        s.push_str(&sh_quote(a));
    }
    s.push('\n');
    s
}

/// `tasks/<i>.args` of every task (relative name, contents): its arguments, one a line.
fn args_files(tasks: &[ArrayTask]) -> Vec<(String, String)> {
    tasks
        .iter()
        .enumerate()
        .map(|(i, task)| {
            let mut text = String::new();
            for a in &task.args {
                text.push_str(a);
                text.push('\n');
            }
            (format!("tasks/{i}.args"), text)
        })
        .collect()
}

/// Refuses a symbolic link at any path in `will_write` or at `tasks/` and `logs/`, and
/// either of those two when it is no folder.
fn refuse_links(out: &Path, will_write: &[String]) -> Result<(), SlurmError> {
    // No symbolic link where emit writes, not even at a path an earlier emit wrote (a link
    // there now is someone else's), and `tasks/` and `logs/` real folders. Slurm does not
    // create the directory of `--output` (a job whose log cannot be opened fails before
    // its first line), so emit makes `logs/`.
    let folders = ["tasks", "logs"];
    for rel in will_write.iter().map(String::as_str).chain(folders) {
        let path = rel.split('/').fold(out.to_path_buf(), |p, c| p.join(c));
        let Ok(m) = std::fs::symlink_metadata(&path) else {
            continue;
        };
        if m.file_type().is_symlink() {
            return Err(OutDirError::Link {
                path,
                kind: OUTPUT_KIND.into(),
            }
            .into());
        }
        if folders.contains(&rel) && !m.is_dir() {
            return Err(OutDirError::InTheWay {
                path,
                rel: rel.into(),
                kind: OUTPUT_KIND.into(),
            }
            .into());
        }
    }
    Ok(())
}

/// Claims `out` and writes the scripts (executable) and args files into it, makes `logs/`,
/// and removes the stale files of an earlier, larger emit.
fn write_emitted(
    req: &EmitRequest,
    out: &Path,
    scripts: &[(String, String)],
    args: &[(String, String)],
    arrays: usize,
) -> Result<Emitted, SlurmError> {
    let n = req.tasks.len();
    let will_write: Vec<String> = scripts
        .iter()
        .chain(args)
        .map(|(rel, _)| rel.clone())
        .collect();
    refuse_links(out, &will_write)?;
    let mut dir = OutDir::claim(
        out,
        OUTPUT_KIND,
        &will_write,
        Foreign::RefuseDirectory,
        req.force,
    )?;
    let mut files = Vec::with_capacity(will_write.len());
    for (rel, text) in scripts {
        let path = dir.write(rel, text.as_bytes())?;
        make_executable(&path)?;
        files.push(path);
    }
    for (rel, text) in args {
        files.push(dir.write(rel, text.as_bytes())?);
    }
    let logs = out.join("logs");
    std::fs::create_dir_all(&logs).map_err(|e| SlurmError::io(&logs, e))?;
    dir.finish()?;
    let removed = harness_core::outdir::remove_stale(out, OUTPUT_KIND, |rel| {
        stale_index(rel, "array-", ".sbatch").is_some_and(|k| k >= arrays)
            || stale_index(rel, "tasks/", ".args").is_some_and(|i| i >= n)
    })?;

    Ok(Emitted {
        files,
        submit: out.join("submit.sh"),
        arrays,
        removed,
    })
}

/// Refuses, before anything is written, what the scripts or args files cannot carry.
fn check(req: &EmitRequest) -> Result<(), SlurmError> {
    let opts = req.options;
    if req.tasks.is_empty() {
        return Err(SlurmError::Options {
            detail: "the sweep has no tasks to submit".into(),
            fix: "check the grid: every point may already be done, or the axes are empty".into(),
        });
    }
    if opts.max_array_size == 0 {
        return Err(SlurmError::Options {
            detail: "max_array_size is 0".into(),
            fix: "set it to the cluster's MaxArraySize (`scontrol show config | grep \
                  MaxArraySize`), 1001 by default"
                .into(),
        });
    }
    if opts.throttle == Some(0) {
        return Err(SlurmError::Options {
            detail: "throttle is 0 (no task could ever run)".into(),
            fix: "set throttle to at least 1, or remove it".into(),
        });
    }
    if opts.nodes == 0 || opts.tasks_per_node == 0 {
        return Err(SlurmError::Options {
            detail: "nodes or tasks_per_node is 0".into(),
            fix: "set both to at least 1 (the default)".into(),
        });
    }
    if opts.cpus_per_task == 0 {
        return Err(SlurmError::Options {
            detail: "cpus_per_task is 0".into(),
            fix: "set cpus_per_task to at least 1".into(),
        });
    }
    for (index, task) in req.tasks.iter().enumerate() {
        for arg in &task.args {
            let what = if arg.contains('\n') {
                "newline"
            } else if arg.contains('\0') {
                "NUL byte"
            } else {
                continue;
            };
            return Err(SlurmError::Argument {
                index,
                alias: task.alias.clone(),
                arg: arg.clone(),
                what,
            });
        }
    }
    // `#SBATCH` values end at the line's end; a script cannot hold a NUL at all.
    let line_values = [
        ("name", Some(req.name)),
        ("partition", opts.partition.as_deref()),
        ("account", opts.account.as_deref()),
        ("mem", opts.mem.as_deref()),
        ("time", opts.time.as_deref()),
    ];
    for (field, value) in line_values {
        let Some(v) = value else { continue };
        if v.contains(['\n', '\0', '\r']) {
            return Err(SlurmError::Value {
                field,
                value: v.to_string(),
                detail: "an #SBATCH line cannot hold a newline, carriage return or NUL".into(),
                fix: "remove it from the grid's slurm: block (or the grid's name)".into(),
            });
        }
    }
    for a in &req.gather_args {
        if a.contains('\0') {
            return Err(SlurmError::Value {
                field: "gather argument",
                value: a.clone(),
                detail: "a shell script cannot hold a NUL byte".into(),
                fix: "remove the NUL from the grid path".into(),
            });
        }
    }
    Ok(())
}

/// The `#SBATCH` lines every job shares (`task`: an array task, which alone asks for GPUs
/// and several nodes or tasks).
fn resources(s: &mut String, opts: &SlurmOptions, task: bool) {
    if task && opts.nodes > 1 {
        sbatch(s, "nodes", &opts.nodes.to_string());
    }
    if task && opts.tasks_per_node > 1 {
        sbatch(s, "ntasks-per-node", &opts.tasks_per_node.to_string());
    }
    sbatch(s, "cpus-per-task", &opts.cpus_per_task.to_string());
    if task && opts.gpus > 0 {
        sbatch(s, "gres", &format!("gpu:{}", opts.gpus));
    }
    if let Some(mem) = &opts.mem {
        sbatch(s, "mem", mem);
    }
    if let Some(time) = &opts.time {
        sbatch(s, "time", time);
    }
    if let Some(p) = &opts.partition {
        sbatch(s, "partition", p);
    }
    if let Some(a) = &opts.account {
        sbatch(s, "account", a);
    }
}

/// Appends `#SBATCH --key=value`, quoting the value the way sbatch's script parser reads it.
pub(crate) fn sbatch(s: &mut String, key: &str, value: &str) {
    s.push_str(&format!("#SBATCH --{key}={}\n", sbatch_quote(value)));
}

/// Quotes an `#SBATCH` value: sbatch splits those lines at blanks, reads `#` as a comment
/// outside quotes, and inside double quotes takes a backslash as an escape. A plain value is
/// left bare so the scripts read as people write them.
pub(crate) fn sbatch_quote(v: &str) -> String {
    if !v.is_empty() && v.chars().all(is_plain) {
        return v.to_string();
    }
    let mut q = String::with_capacity(v.len() + 2);
    q.push('"');
    for c in v.chars() {
        if c == '"' || c == '\\' {
            q.push('\\');
        }
        q.push(c);
    }
    q.push('"');
    q
}

/// Characters that need no quoting, in a shell word or an `#SBATCH` value.
fn is_plain(c: char) -> bool {
    c.is_ascii_alphanumeric() || "_@%+=:,./-".contains(c)
}

/// Quotes `s` as one shell word: bare when it is plain, else in single quotes (within which
/// nothing is special), each `'` written as `'\''` (close, escaped quote, reopen). `$` and
/// `` ` `` are written the same way (`'\$'`): literal either way, but shellcheck takes a `$`
/// inside single quotes for a forgotten expansion (SC2016) and the scripts must pass it.
pub fn sh_quote(s: &str) -> String {
    if !s.is_empty() && s.chars().all(is_plain) {
        return s.to_string();
    }
    let mut q = String::with_capacity(s.len() + 2);
    q.push('\'');
    for c in s.chars() {
        match c {
            '\'' | '$' | '`' => {
                q.push_str("'\\");
                q.push(c);
                q.push('\'');
            }
            _ => q.push(c),
        }
    }
    q.push('\'');
    q
}

/// Text safe inside a `#` comment line: control characters (a newline would end the comment
/// and make the rest a command) become `?`.
pub(crate) fn comment(s: &str) -> String {
    s.chars()
        .map(|c| if c.is_control() { '?' } else { c })
        .collect()
}

fn submit_script(req: &EmitRequest, chunks: &[Chunk], out_s: &str, workdir_s: &str) -> String {
    let q = |p: &str| sh_quote(&format!("{out_s}/{p}"));
    let dep = req.options.gather_after.dependency_type();
    let mut s = String::from("#!/usr/bin/env bash\n");
    s.push_str(&format!(
        "# Submits harness sweep `{}`: {} task(s) in {} array(s), then the gather job ({dep} on\n\
         # every array). Prints the job ids and writes them to jobs.txt (`<script> <job id>`).\n\
         # Paths are absolute: run it from any directory, on a host that can submit jobs.\n",
        comment(req.name),
        req.tasks.len(),
        chunks.len(),
    ));
    s.push_str("set -euo pipefail\n");
    s.push_str("shopt -s inherit_errexit\n");
    // Jobs start in the submitting directory; starting them in the workdir (which the
    // scripts `cd` into anyway) keeps them off a directory the nodes may not see.
    s.push_str(&format!("cd {}\n", sh_quote(workdir_s)));
    s.push_str(&format!("mkdir -p {}\n", q("logs")));
    s.push_str("ids=()\n");
    s.push_str("jobs=\"\"\n");
    // A failed sbatch after earlier ones leaves arrays queued without their gather: say which.
    s.push_str(
        "trap 'echo \"submit.sh: stopped; already submitted: ${ids[*]:-none} (cancel them with: scancel ${ids[*]:-})\" >&2' ERR\n",
    );
    // `--parsable` prints `id` or `id;cluster` on a multi-cluster setup.
    // `id=$(submit ...)` runs in a subshell, where bash drops `set -e` unless told otherwise;
    // and a failed sbatch must never yield an empty id (an `afterok:` on nothing).
    s.push_str("submit() {\n");
    s.push_str("    local out\n");
    s.push_str("    out=$(sbatch --parsable \"$@\") || return\n");
    s.push_str("    out=${out%%;*}\n");
    s.push_str("    if [[ ! \"$out\" =~ ^[0-9]+$ ]]; then\n");
    s.push_str("        echo \"submit.sh: sbatch $* printed '$out', not a job id\" >&2\n");
    s.push_str("        return 1\n");
    s.push_str("    fi\n");
    s.push_str("    echo \"$out\"\n");
    s.push_str("}\n");
    for (k, chunk) in chunks.iter().enumerate() {
        let script = format!("array-{k}.sbatch");
        s.push_str(&format!("id=$(submit {})\n", q(&script)));
        s.push_str("ids+=(\"$id\")\n");
        s.push_str(&format!(
            "echo \"array {k} (tasks {}-{}): job $id\"\n",
            chunk.offset,
            chunk.offset + chunk.len - 1
        ));
        s.push_str(&format!("jobs+=\"{script} $id\"$'\\n'\n"));
    }
    s.push_str(&format!(
        "dependency={dep}:$(IFS=:; echo \"${{ids[*]}}\")\n"
    ));
    s.push_str(&format!(
        "gather=$(submit --dependency=\"$dependency\" {})\n",
        q("gather.sbatch")
    ));
    s.push_str("ids+=(\"$gather\")\n");
    s.push_str("echo \"gather: job $gather (--dependency=$dependency)\"\n");
    s.push_str("jobs+=\"gather.sbatch $gather\"$'\\n'\n");
    s.push_str(&format!(
        "printf '%s' \"$jobs\" > {tmp}\nmv -f {tmp} {jobs}\n",
        tmp = q("jobs.txt.tmp"),
        jobs = q("jobs.txt")
    ));
    s.push_str(&format!("echo \"job ids written to \"{}\n", q("jobs.txt")));
    s
}

fn absolute(p: &Path) -> Result<PathBuf, SlurmError> {
    std::path::absolute(p).map_err(|e| SlurmError::io(p, e))
}

pub(crate) fn utf8<'p>(field: &'static str, p: &'p Path) -> Result<&'p str, SlurmError> {
    p.to_str().ok_or_else(|| SlurmError::Value {
        field,
        value: p.to_string_lossy().into_owned(),
        detail: "the path is not valid UTF-8, which the scripts cannot spell".into(),
        fix: "use a UTF-8 path".into(),
    })
}

pub(crate) fn make_executable(path: &Path) -> Result<(), SlurmError> {
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o755))
            .map_err(|e| SlurmError::io(path, e))?;
    }
    #[cfg(not(unix))]
    let _ = path;
    Ok(())
}

/// `k` of a name `<prefix><k><suffix>` (`array-3.sbatch`, `tasks/9.args`).
fn stale_index(rel: &str, prefix: &str, suffix: &str) -> Option<usize> {
    rel.strip_prefix(prefix)
        .and_then(|r| r.strip_suffix(suffix))
        .filter(|d| !d.is_empty() && d.bytes().all(|b| b.is_ascii_digit()))
        .and_then(|d| d.parse().ok())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::process::Command;

    fn tasks(n: usize) -> Vec<ArrayTask> {
        (0..n)
            .map(|i| ArrayTask {
                alias: format!("layers={} seed={}", i % 3, i),
                args: vec![
                    "run".into(),
                    "recipes/laser.yaml".into(),
                    "--set".into(),
                    format!("encoder.layers={}", i % 3),
                    "--out".into(),
                    format!("runs/sweep it's/p{i}"),
                ],
            })
            .collect()
    }

    fn emit_into(dir: &Path, tasks: &[ArrayTask], opts: &SlurmOptions) -> Emitted {
        let out = dir.join("slurm out");
        emit(&EmitRequest {
            name: "abl",
            tasks,
            options: opts,
            harness: Path::new("/opt/harness dir/harness"),
            workdir: dir,
            gather_args: vec![
                "sweep".into(),
                "grids/abl.yaml".into(),
                "--report-only".into(),
            ],
            out: &out,
            force: false,
        })
        .unwrap()
    }

    fn read(p: &Path) -> String {
        std::fs::read_to_string(p).unwrap()
    }

    #[test]
    fn splits_by_max_array_size_with_offsets() {
        let dir = tempfile::tempdir().unwrap();
        let opts = SlurmOptions {
            max_array_size: 2,
            ..SlurmOptions::default()
        };
        let e = emit_into(dir.path(), &tasks(5), &opts);
        assert_eq!(e.arrays, 3);
        let out = dir.path().join("slurm out");
        for (k, (range, offset)) in [("0-1", 0), ("0-1", 2), ("0-0", 4)].iter().enumerate() {
            let s = read(&out.join(format!("array-{k}.sbatch")));
            assert!(s.contains(&format!("#SBATCH --array={range}\n")), "{s}");
            assert!(s.contains(&format!("\nOFFSET={offset}\n")), "{s}");
            assert!(s.contains("i=$((OFFSET + SLURM_ARRAY_TASK_ID))"));
        }
        assert!(!out.join("array-3.sbatch").exists());
        for i in 0..5 {
            let args = read(&out.join(format!("tasks/{i}.args")));
            assert_eq!(args.lines().count(), 6);
            assert!(args.ends_with(&format!("--out\nruns/sweep it's/p{i}\n")));
        }
        // Scripts first, then the 5 args files.
        assert_eq!(e.files.len(), 3 + 2 + 5);
        assert_eq!(e.submit, out.join("submit.sh"));
        assert!(out.join("logs").is_dir());
        let submit = read(&e.submit);
        assert!(submit.contains("--dependency=\"$dependency\""), "{submit}");
        assert!(submit.contains("dependency=afterok:"));
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(&e.submit).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o755);

        // A smaller sweep into the same directory leaves no stale array or args file.
        let e = emit_into(dir.path(), &tasks(1), &opts);
        assert_eq!(e.arrays, 1);
        assert!(!out.join("array-1.sbatch").exists());
        assert!(!out.join("tasks/1.args").exists());
        assert!(out.join("tasks/0.args").exists());
    }

    fn emit_to(out: &Path, n: usize, force: bool) -> Result<Emitted, SlurmError> {
        emit(&EmitRequest {
            name: "abl",
            tasks: &tasks(n),
            options: &SlurmOptions {
                max_array_size: 2,
                ..SlurmOptions::default()
            },
            harness: Path::new("/bin/harness"),
            workdir: Path::new("/work"),
            gather_args: vec![],
            out,
            force,
        })
    }

    /// Every file under `dir` (links not followed) with its content, `->target` for a link.
    fn tree(dir: &Path) -> Vec<(String, String)> {
        let mut out = Vec::new();
        let mut stack = vec![dir.to_path_buf()];
        while let Some(d) = stack.pop() {
            for e in std::fs::read_dir(&d).unwrap() {
                let p = e.unwrap().path();
                let rel = p.strip_prefix(dir).unwrap().display().to_string();
                let m = std::fs::symlink_metadata(&p).unwrap();
                if m.file_type().is_symlink() {
                    out.push((
                        rel,
                        format!("->{}", std::fs::read_link(&p).unwrap().display()),
                    ));
                } else if m.is_dir() {
                    out.push((rel, "/".into()));
                    stack.push(p);
                } else {
                    out.push((rel, read(&p)));
                }
            }
        }
        out.sort();
        out
    }

    /// The folder of issue 58: someone's `submit.sh`, `array-0.sbatch`, `gather.sbatch`,
    /// `array-3.sbatch` and `tasks/9.args`. Refused (with and without --force, since their
    /// files are where emit writes), every file as it was; and beside foreign files of other
    /// names (--force) they survive later emits, while the stale files harness wrote go.
    #[test]
    fn a_foreign_folder_is_refused_and_no_file_of_it_is_replaced_or_deleted() {
        let tmp = tempfile::tempdir().unwrap();
        let out = tmp.path().join("theirs");
        std::fs::create_dir_all(out.join("tasks")).unwrap();
        for f in [
            "submit.sh",
            "array-0.sbatch",
            "gather.sbatch",
            "array-3.sbatch",
            "tasks/9.args",
        ] {
            std::fs::write(out.join(f), format!("their {f}")).unwrap();
        }
        let before = tree(&out);
        let err = emit_to(&out, 3, false).unwrap_err().to_string();
        assert!(
            err.contains(&out.display().to_string())
                && err.contains("did not write")
                && err.contains("Fix:")
                && err.contains("--force"),
            "{err}"
        );
        assert_eq!(tree(&out), before, "nothing written, replaced or deleted");
        let err = emit_to(&out, 3, true).unwrap_err().to_string();
        assert!(
            err.contains("array-0.sbatch") && err.contains("Fix:"),
            "{err}"
        );
        assert_eq!(tree(&out), before, "--force never replaces their files");

        // Their files of other names: --force writes beside them.
        for f in ["submit.sh", "array-0.sbatch", "gather.sbatch"] {
            std::fs::rename(out.join(f), out.join(format!("{f}.keep"))).unwrap();
        }
        let theirs = tree(&out);
        let e = emit_to(&out, 3, true).unwrap();
        assert_eq!(e.arrays, 2);
        assert!(e.removed.is_empty(), "{:?}", e.removed);
        let after = tree(&out);
        for f in &theirs {
            assert!(after.contains(f), "{f:?} changed: {after:?}");
        }
        assert!(read(&out.join("submit.sh")).contains("array-1.sbatch"));
        // A smaller emit: harness's own array-1 and tasks/2 go; their array-3 and tasks/9
        // (names a larger emit would have written) stay. No --force needed now.
        let e = emit_to(&out, 1, false).unwrap();
        assert_eq!(
            e.removed,
            [
                out.join("array-1.sbatch"),
                out.join("tasks/1.args"),
                out.join("tasks/2.args")
            ]
        );
        assert!(!out.join("array-1.sbatch").exists() && !out.join("tasks/2.args").exists());
        let after = tree(&out);
        for f in &theirs {
            assert!(after.contains(f), "{f:?} changed: {after:?}");
        }
    }

    /// A link where emit writes is refused, not followed: the `tasks/` or `logs/` folder, a
    /// script (even one an earlier emit wrote, since replaced by a link).
    #[test]
    fn links_in_the_scripts_folder_are_refused() {
        let tmp = tempfile::tempdir().unwrap();
        let elsewhere = tmp.path().join("elsewhere");
        std::fs::create_dir_all(&elsewhere).unwrap();
        std::fs::write(elsewhere.join("0.args"), "someone's").unwrap();
        let kept = tree(&elsewhere);
        let out = tmp.path().join("out");
        emit_to(&out, 1, false).unwrap();
        for rel in ["tasks", "logs", "submit.sh"] {
            let path = out.join(rel);
            let moved = tmp.path().join("moved");
            std::fs::rename(&path, &moved).unwrap();
            let target = if rel == "submit.sh" {
                elsewhere.join("0.args")
            } else {
                elsewhere.clone()
            };
            std::os::unix::fs::symlink(&target, &path).unwrap();
            let err = emit_to(&out, 1, true).unwrap_err().to_string();
            assert!(
                err.contains("symbolic link") && err.contains(&path.display().to_string()),
                "{rel}: {err}"
            );
            assert_eq!(tree(&elsewhere), kept, "{rel}: written through the link");
            std::fs::remove_file(&path).unwrap();
            std::fs::rename(&moved, &path).unwrap();
        }
        emit_to(&out, 1, false).unwrap();
    }

    #[test]
    fn throttle_gres_and_gather_after() {
        let dir = tempfile::tempdir().unwrap();
        let out = dir.path().join("slurm out");
        let opts = SlurmOptions {
            throttle: Some(3),
            gpus: 2,
            mem: Some("8G".into()),
            time: Some("02:00:00".into()),
            partition: Some("gpu".into()),
            account: Some("my account".into()),
            gather_after: GatherAfter::Any,
            ..SlurmOptions::default()
        };
        emit_into(dir.path(), &tasks(4), &opts);
        let a = read(&out.join("array-0.sbatch"));
        assert!(a.contains("#SBATCH --array=0-3%3\n"), "{a}");
        assert!(a.contains("#SBATCH --gres=gpu:2\n"));
        assert!(a.contains("#SBATCH --mem=8G\n#SBATCH --time=02:00:00\n"));
        assert!(a.contains("#SBATCH --partition=gpu\n#SBATCH --account=\"my account\"\n"));
        let g = read(&out.join("gather.sbatch"));
        assert!(!g.contains("--gres"), "the gather job needs no GPU: {g}");
        assert!(g.contains("#SBATCH --mem=8G\n"));
        assert!(g.contains("exec '/opt/harness dir/harness' sweep grids/abl.yaml --report-only\n"));
        assert!(read(&out.join("submit.sh")).contains("dependency=afterany:"));

        let plain = SlurmOptions::default();
        emit_into(dir.path(), &tasks(4), &plain);
        let a = read(&out.join("array-0.sbatch"));
        assert!(!a.contains("--gres"), "{a}");
        assert!(a.contains("#SBATCH --array=0-3\n"));
        assert!(!a.contains("--partition") && !a.contains("--account"));
    }

    #[test]
    fn refuses_newline_argument_naming_task() {
        let dir = tempfile::tempdir().unwrap();
        let mut t = tasks(3);
        t[1].args.push("a\nb".into());
        let err = emit(&EmitRequest {
            name: "abl",
            tasks: &t,
            options: &SlurmOptions::default(),
            harness: Path::new("/bin/harness"),
            workdir: dir.path(),
            gather_args: vec![],
            out: &dir.path().join("out"),
            force: false,
        })
        .unwrap_err();
        let msg = err.to_string();
        assert!(msg.contains("task 1 (layers=1 seed=1)"), "{msg}");
        assert!(
            msg.contains("\"a\\nb\"") && msg.contains("newline"),
            "{msg}"
        );
        assert!(!dir.path().join("out").exists(), "nothing written on error");

        t[1].args.pop();
        t[2].args.push("x\0".into());
        let err = emit(&EmitRequest {
            name: "abl",
            tasks: &t,
            options: &SlurmOptions::default(),
            harness: Path::new("/bin/harness"),
            workdir: dir.path(),
            gather_args: vec![],
            out: &dir.path().join("out"),
            force: false,
        })
        .unwrap_err();
        assert!(err.to_string().contains("NUL"), "{err}");
    }

    #[test]
    fn quoting() {
        assert_eq!(sh_quote("plain/path-1.txt"), "plain/path-1.txt");
        assert_eq!(sh_quote("a b"), "'a b'");
        assert_eq!(sh_quote("it's"), r"'it'\''s'");
        assert_eq!(sh_quote(""), "''");
        assert_eq!(sh_quote("$HOME x"), r"''\$'HOME x'");
        assert_eq!(sbatch_quote("a \"b\\"), r#""a \"b\\""#);
        assert_eq!(sbatch_quote("x#y"), "\"x#y\"");
        // The shell reads each quoted word back as the original string.
        for s in [
            "a b",
            "it's",
            "",
            "$(rm -rf /)",
            "tab\there",
            "new\nline",
            "'\"\\",
        ] {
            let out = Command::new("bash")
                .arg("-c")
                .arg(format!("printf '%s' {}", sh_quote(s)))
                .output()
                .unwrap();
            assert_eq!(String::from_utf8(out.stdout).unwrap(), s);
        }
    }

    /// `submit.sh` against a stand-in `sbatch` (records its arguments, prints `id;cluster`):
    /// ids captured and stripped, the gather's dependency on every array, jobs.txt; and a
    /// failing sbatch stops it with the ids already submitted.
    #[test]
    fn submit_script_with_fake_sbatch() {
        let dir = tempfile::tempdir().unwrap();
        let bin = dir.path().join("bin");
        std::fs::create_dir_all(&bin).unwrap();
        let calls = dir.path().join("calls");
        let fake = format!(
            "#!/usr/bin/env bash\n\
             n=$(( $(wc -l < {calls} 2>/dev/null || echo 0) + 1 ))\n\
             printf '%s|' \"$PWD\" \"$@\" >> {calls}; echo >> {calls}\n\
             if [ \"$n\" = \"${{FAIL_AT:-0}}\" ]; then echo 'sbatch: error: bad' >&2; exit 1; fi\n\
             echo \"$((40 + n));cluster\"\n",
            calls = sh_quote(calls.to_str().unwrap())
        );
        std::fs::write(bin.join("sbatch"), fake).unwrap();
        make_executable(&bin.join("sbatch")).unwrap();
        let opts = SlurmOptions {
            max_array_size: 2,
            ..SlurmOptions::default()
        };
        let e = emit_into(dir.path(), &tasks(3), &opts);
        let path = format!("{}:{}", bin.display(), std::env::var("PATH").unwrap());
        let run = |fail_at: &str| {
            let _ = std::fs::remove_file(&calls);
            Command::new("bash")
                .arg(&e.submit)
                .current_dir("/")
                .env("PATH", &path)
                .env("FAIL_AT", fail_at)
                .output()
                .unwrap()
        };
        let out = run("0");
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert!(
            out.status.success(),
            "{stdout}{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let slurm = dir.path().join("slurm out");
        assert_eq!(
            read(&slurm.join("jobs.txt")),
            "array-0.sbatch 41\narray-1.sbatch 42\ngather.sbatch 43\n"
        );
        assert!(stdout.contains("array 1 (tasks 2-2): job 42"), "{stdout}");
        let calls_text = read(&calls);
        let lines: Vec<&str> = calls_text.lines().collect();
        let workdir = dir.path().display().to_string();
        let a0 = slurm.join("array-0.sbatch").display().to_string();
        let g = slurm.join("gather.sbatch").display().to_string();
        assert_eq!(lines[0], format!("{workdir}|--parsable|{a0}|"));
        assert_eq!(
            lines[2],
            format!("{workdir}|--parsable|--dependency=afterok:41:42|{g}|")
        );

        // The second sbatch fails: no gather, no jobs.txt rewrite, the first id reported.
        std::fs::remove_file(slurm.join("jobs.txt")).unwrap();
        let out = run("2");
        assert!(!out.status.success());
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(stderr.contains("already submitted: 41"), "{stderr}");
        assert_eq!(read(&calls).lines().count(), 2, "no gather after a failure");
        assert!(!slurm.join("jobs.txt").exists());
    }

    /// Every emitted script (with awkward names, paths and options) for every check.
    fn awkward_scripts(dir: &Path) -> Vec<PathBuf> {
        let opts = SlurmOptions {
            throttle: Some(3),
            gpus: 1,
            mem: Some("8G".into()),
            time: Some("1-00:00:00".into()),
            partition: Some("gpu,debug".into()),
            account: Some("proj #1 \"x\"".into()),
            max_array_size: 2,
            gather_after: GatherAfter::Ok,
            nodes: 2,
            tasks_per_node: 4,
            ..SlurmOptions::default()
        };
        let root = dir.join("it's a \"dir\" $HOME 100%");
        let e = emit(&EmitRequest {
            name: "abl 'x' $y",
            tasks: &tasks(5),
            options: &opts,
            harness: &root.join("bin/har ness"),
            workdir: &root,
            gather_args: vec!["sweep".into(), "grids/it's.yaml".into(), "$(x)".into()],
            out: &root.join("slurm"),
            force: false,
        })
        .unwrap();
        let scripts: Vec<PathBuf> = e
            .files
            .into_iter()
            .filter(|p| p.extension().is_some_and(|x| x == "sbatch" || x == "sh"))
            .collect();
        assert_eq!(scripts.len(), 3 + 1 + 1);
        scripts
    }

    /// A point of several nodes or tasks runs as one MPI job under srun; a point of one
    /// rank runs harness itself.
    #[test]
    fn multi_node_points_start_their_ranks_with_srun() {
        let dir = tempfile::tempdir().unwrap();
        let emit_with = |opts: &SlurmOptions, out: &str| {
            let e = emit(&EmitRequest {
                name: "abl",
                tasks: &tasks(2),
                options: opts,
                harness: Path::new("/bin/harness"),
                workdir: dir.path(),
                gather_args: vec!["sweep".into()],
                out: &dir.path().join(out),
                force: false,
            })
            .unwrap();
            read(&e.files[0])
        };
        let multi = emit_with(
            &SlurmOptions {
                nodes: 4,
                tasks_per_node: 2,
                ..SlurmOptions::default()
            },
            "multi",
        );
        assert!(multi.contains("#SBATCH --nodes=4\n"), "{multi}");
        assert!(multi.contains("#SBATCH --ntasks-per-node=2\n"), "{multi}");
        assert!(
            multi.contains(
                "exec srun --mpi=\"${HARNESS_SRUN_MPI:-pmix}\" /bin/harness \"${args[@]}\""
            ),
            "{multi}"
        );
        let single = emit_with(&SlurmOptions::default(), "single");
        assert!(
            !single.contains("srun") && !single.contains("--nodes"),
            "{single}"
        );
        assert!(
            single.contains("exec /bin/harness \"${args[@]}\""),
            "{single}"
        );
    }

    #[test]
    fn scripts_pass_bash_n() {
        let dir = tempfile::tempdir().unwrap();
        for script in awkward_scripts(dir.path()) {
            let out = Command::new("bash")
                .arg("-n")
                .arg(&script)
                .output()
                .unwrap();
            assert!(
                out.status.success(),
                "bash -n {}: {}",
                script.display(),
                String::from_utf8_lossy(&out.stderr)
            );
        }
    }

    #[test]
    fn scripts_pass_shellcheck() {
        ensure_shellcheck();
        let dir = tempfile::tempdir().unwrap();
        for script in awkward_scripts(dir.path()) {
            let out = Command::new("shellcheck")
                .args(["-s", "bash"])
                .arg(&script)
                .output()
                .unwrap();
            assert!(
                out.status.success(),
                "shellcheck -s bash {}:\n{}\n--- script:\n{}",
                script.display(),
                String::from_utf8_lossy(&out.stdout),
                read(&script)
            );
        }
    }

    /// The repository's shell scripts this module relies on are shellcheck-clean too.
    #[test]
    fn helper_scripts_pass_shellcheck() {
        ensure_shellcheck();
        let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
        for script in ["scripts/install-test-deps.sh", "scripts/slurm-local.sh"] {
            let out = Command::new("shellcheck")
                .args(["-s", "bash"])
                .arg(root.join(script))
                .output()
                .unwrap();
            assert!(
                out.status.success(),
                "shellcheck {script}:\n{}",
                String::from_utf8_lossy(&out.stdout)
            );
        }
    }

    /// Installs shellcheck through `scripts/install-test-deps.sh` when it is missing; panics
    /// (never skips) when it is still missing afterwards.
    fn ensure_shellcheck() {
        // Tests run in parallel threads: one apt-get at a time (dpkg takes a lock).
        static INSTALL: std::sync::Mutex<()> = std::sync::Mutex::new(());
        let _once = INSTALL.lock().unwrap_or_else(|e| e.into_inner());
        let have = || {
            Command::new("shellcheck")
                .arg("--version")
                .output()
                .is_ok_and(|o| o.status.success())
        };
        if have() {
            return;
        }
        let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
        let out = Command::new("bash")
            .arg(root.join("scripts/install-test-deps.sh"))
            .arg("shellcheck")
            .output()
            .expect("run scripts/install-test-deps.sh");
        assert!(
            out.status.success() && have(),
            "shellcheck is missing and `bash scripts/install-test-deps.sh shellcheck` could not \
             install it ({}):\n{}{}\nfix: apt-get install -y shellcheck",
            out.status,
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
    }
}
