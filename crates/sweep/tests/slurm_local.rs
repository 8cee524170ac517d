//! The emitted Slurm scripts on a real (one-node, local) Slurm cluster: `emit` a 4-task sweep
//! split into two arrays (`max_array_size: 3`) with a `%2` throttle, run `submit.sh`, and
//! check that every task ran with its own arguments and that the gather job ran after them;
//! then that an `afterok` gather never runs when a task fails.
//!
//! The cluster comes from `scripts/slurm-local.sh` (Slurm installed on demand by
//! `scripts/install-test-deps.sh slurm`, which needs root). The one case this test skips is a
//! cluster whose daemons cannot start here (not root, no Slurm packages): it says why on
//! stderr and returns.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use harness_sweep::slurm::{emit, ArrayTask, EmitRequest, GatherAfter, SlurmOptions};

mod cluster;

use cluster::{text, Cluster};

/// A stand-in for the harness binary: writes its arguments, one per line, to the file named
/// by its `--out` argument (and its working directory and RAYON_NUM_THREADS beside it, in
/// `<out>.env`); with `--fail` it exits 3 after writing. The gather writes, as its `--out`
/// file, the task outputs it saw.
const FAKE_HARNESS: &str = r#"#!/usr/bin/env bash
set -euo pipefail
out=""
prev=""
for a in "$@"; do
    if [ "$prev" = "--out" ]; then out=$a; fi
    prev=$a
done
[ -n "$out" ] || { echo "fake harness: no --out argument" >&2; exit 2; }
mkdir -p "$(dirname "$out")"
if [ "$1" = "gather" ]; then
    # What the gather job saw when it started: every task output present by then.
    (cd "$(dirname "$out")" && ls -1 ./*.out) >"$out"
    exit 0
fi
printf '%s\n' "$@" >"$out.tmp"
printf 'pwd=%s\nrayon=%s\n' "$PWD" "${RAYON_NUM_THREADS:-}" >"$out.env"
mv "$out.tmp" "$out"
for a in "$@"; do
    if [ "$a" = "--fail" ]; then exit 3; fi
done
"#;

struct Sweep {
    tasks: Vec<ArrayTask>,
    submit: PathBuf,
    arrays: usize,
}

fn emit_sweep(
    root: &Path,
    name: &str,
    n: usize,
    failing: Option<usize>,
    options: &SlurmOptions,
) -> Sweep {
    let work = root.join(format!("work dir {name}"));
    let results = work.join("results");
    std::fs::create_dir_all(&results).unwrap();
    let harness = root.join("bin dir/harness");
    std::fs::create_dir_all(harness.parent().unwrap()).unwrap();
    std::fs::write(&harness, FAKE_HARNESS).unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&harness, std::fs::Permissions::from_mode(0o755)).unwrap();

    let tasks: Vec<ArrayTask> = (0..n)
        .map(|i| {
            let mut args = vec![
                "run".to_string(),
                "recipes/laser.yaml".to_string(),
                "--set".to_string(),
                format!("encoder.layers={i}"),
                "--set".to_string(),
                // Survives as one argument: spaces, quotes, a `$` and an empty argument.
                format!("note=it's \"point\" {i} $HOME"),
                String::new(),
            ];
            if failing == Some(i) {
                args.push("--fail".to_string());
            }
            args.push("--out".to_string());
            args.push(results.join(format!("task{i}.out")).display().to_string());
            ArrayTask {
                alias: format!("layers={i}"),
                args,
            }
        })
        .collect();
    let emitted = emit(&EmitRequest {
        name,
        tasks: &tasks,
        options,
        harness: &harness,
        workdir: &work,
        gather_args: vec![
            "gather".into(),
            "--out".into(),
            results.join("gathered").display().to_string(),
        ],
        out: &root.join(format!("slurm out {name}")),
        force: false,
    })
    .expect("emit");
    Sweep {
        tasks,
        submit: emitted.submit,
        arrays: emitted.arrays,
    }
}

/// Runs `submit.sh` from `/` (it must not depend on the current directory); returns the job
/// ids it wrote to jobs.txt (arrays first, the gather last).
fn submit(cluster: &Cluster, sweep: &Sweep) -> Vec<String> {
    let out = cluster
        .cmd("bash")
        .arg(&sweep.submit)
        .current_dir("/")
        .output()
        .expect("run submit.sh");
    assert!(out.status.success(), "submit.sh failed:\n{}", text(&out));
    let jobs = std::fs::read_to_string(sweep.submit.parent().unwrap().join("jobs.txt"))
        .expect("submit.sh writes jobs.txt");
    let ids: Vec<String> = jobs
        .lines()
        .map(|l| l.rsplit(' ').next().unwrap().to_string())
        .collect();
    assert_eq!(ids.len(), sweep.arrays + 1, "jobs.txt: {jobs}");
    assert!(ids
        .iter()
        .all(|id| !id.is_empty() && id.bytes().all(|b| b.is_ascii_digit())));
    let printed = String::from_utf8_lossy(&out.stdout);
    for id in &ids {
        assert!(printed.contains(id.as_str()), "submit.sh output: {printed}");
    }
    ids
}

#[test]
fn sweep_runs_on_a_local_slurm_cluster() {
    let t0 = Instant::now();
    let cluster = match Cluster::start() {
        Ok(c) => c,
        Err(reason) => {
            eprintln!("SKIPPED: the local Slurm cluster cannot start here: {reason}");
            return;
        }
    };
    eprintln!("cluster up in {:.1?}", t0.elapsed());
    let root = cluster.dir.path().join("sweeps");

    // 4 tasks in arrays of at most 3: two arrays, 0-2%2 and 0-0%2 (offset 3).
    let options = SlurmOptions {
        max_array_size: 3,
        throttle: Some(2),
        ..SlurmOptions::default()
    };
    let sweep = emit_sweep(&root, "ok", 4, None, &options);
    assert_eq!(sweep.arrays, 2);
    let t1 = Instant::now();
    let ids = submit(&cluster, &sweep);
    cluster.wait_until("the sweep to finish", Duration::from_secs(120), |jobs| {
        jobs.is_empty()
    });
    eprintln!("sweep of 4 tasks + gather ran in {:.1?}", t1.elapsed());

    let results = root.join("work dir ok/results");
    let logs = root.join("slurm out ok/logs");
    for (i, task) in sweep.tasks.iter().enumerate() {
        let out = results.join(format!("task{i}.out"));
        let got = std::fs::read_to_string(&out).unwrap_or_else(|e| {
            panic!(
                "task {i} wrote no {}: {e}; logs: {:?}",
                out.display(),
                std::fs::read_dir(&logs).map(|d| d.count())
            )
        });
        let want: String = task.args.iter().map(|a| format!("{a}\n")).collect();
        assert_eq!(got, want, "task {i}'s arguments");
        let env = std::fs::read_to_string(results.join(format!("task{i}.out.env"))).unwrap();
        assert!(
            env.contains(&format!("pwd={}\n", root.join("work dir ok").display())),
            "{env}"
        );
        assert!(env.contains("rayon=1\n"), "{env}");
    }
    // The gather ran, and only after every task had written its output.
    let gathered = std::fs::read_to_string(results.join("gathered")).expect("gather marker");
    let seen: Vec<&str> = gathered.lines().collect();
    assert_eq!(
        seen,
        ["./task0.out", "./task1.out", "./task2.out", "./task3.out"],
        "task outputs the gather saw"
    );
    // Logs: one per array task (named by each array's job id), one for the gather.
    for name in [
        format!("{}_0.out", ids[0]),
        format!("{}_2.out", ids[0]),
        format!("{}_0.out", ids[1]),
        format!("gather-{}.out", ids[2]),
    ] {
        assert!(logs.join(&name).is_file(), "missing log {name}");
    }
    let log = std::fs::read_to_string(logs.join(format!("{}_0.out", ids[1]))).unwrap();
    assert!(
        log.contains("task 3 of 4 (array 1"),
        "the second array's task 0 is global task 3: {log}"
    );
    // The throttle reached Slurm.
    let show = cluster
        .cmd("scontrol")
        .args(["show", "job", &ids[0]])
        .output()
        .unwrap();
    assert!(
        String::from_utf8_lossy(&show.stdout).contains("ArrayTaskThrottle=2"),
        "{}",
        text(&show)
    );

    // afterok: a failed task leaves the gather pending for ever; it must never run.
    let options = SlurmOptions {
        gather_after: GatherAfter::Ok,
        ..SlurmOptions::default()
    };
    let sweep = emit_sweep(&root, "fail", 2, Some(1), &options);
    let ids = submit(&cluster, &sweep);
    let gather = ids.last().unwrap().clone();
    cluster.wait_until(
        "the gather to become DependencyNeverSatisfied",
        Duration::from_secs(120),
        |jobs| {
            jobs.len() == 1
                && jobs[0].starts_with(&format!("{gather} PENDING"))
                && jobs[0].contains("DependencyNeverSatisfied")
        },
    );
    let results = root.join("work dir fail/results");
    assert!(results.join("task0.out").is_file());
    assert!(results.join("task1.out").is_file(), "the failing task ran");
    assert!(
        !results.join("gathered").exists(),
        "the gather must not run"
    );
    let out = cluster.cmd("scancel").arg(&gather).output().unwrap();
    assert!(out.status.success(), "scancel: {}", text(&out));
    cluster.wait_until(
        "the gather to be cancelled",
        Duration::from_secs(30),
        |jobs| jobs.is_empty(),
    );
    assert!(!results.join("gathered").exists());
    eprintln!("whole test: {:.1?}", t0.elapsed());
}
