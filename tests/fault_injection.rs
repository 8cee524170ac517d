//! Fault injection with the real binary: each scenario's command is SIGKILLed at seeded
//! random points within the time an uninterrupted run takes; after each kill the same
//! command runs to the end, and what it leaves must equal an uninterrupted run's, with no
//! partial file of a dead writer left behind. Scenarios: `harness eval` from a cold home
//! (dataset install, embedding-cache writes, result writes), `datasets fetch` from the
//! mirror folder and over http, `report`, `sweep` (kills between and inside points),
//! `nightly`, and training (checkpoint writes). The default suite tries a few kill points
//! per scenario; `cargo test --test fault_injection -- --ignored` tries 50 each.

mod binary;
mod common;

use binary::{command, text};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

/// splitmix64: the kill points derive from a fixed seed (printed), so a failure repeats.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
}

const BENCHES: &str = "stsb-test,sick-r";

fn eval_args(out: &Path) -> Vec<String> {
    [
        "eval",
        "--encoder",
        "hashed-ngrams",
        "--bench",
        BENCHES,
        "--out",
        out.to_str().unwrap(),
    ]
    .map(String::from)
    .to_vec()
}

fn strs(a: &[String]) -> Vec<&str> {
    a.iter().map(String::as_str).collect()
}

/// Runs to the end; the wall time.
fn complete(home: &Path, args: &[String]) -> Duration {
    let start = Instant::now();
    let o = command(home, &strs(args)).output().unwrap();
    assert!(o.status.success(), "{}", text(&o));
    start.elapsed()
}

/// Starts `cmd` in a process group of its own and SIGKILLs it after `after` unless it ended
/// before: the whole group at once when `whole_group` (a job killed with its children, as a
/// scheduler does), else only the process itself (its children then die with it through
/// `PR_SET_PDEATHSIG`). Returns once every process of the group is gone: `None` when the
/// kill landed before the end, else the run's wall time.
fn kill_after(mut cmd: Command, after: Duration, whole_group: bool) -> Option<Duration> {
    use std::os::unix::process::CommandExt;
    let mut child = cmd
        .process_group(0)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let group = child.id() as i32;
    let started = Instant::now();
    let deadline = started + after;
    let mut ended = None;
    loop {
        if child.try_wait().unwrap().is_some() {
            ended = Some(started.elapsed());
            break;
        }
        if Instant::now() >= deadline {
            // SAFETY: kill only sends a signal to the group or process started above.
            unsafe {
                libc::kill(if whole_group { -group } else { group }, libc::SIGKILL);
            }
            child.wait().unwrap();
            break;
        }
        std::thread::sleep(Duration::from_millis(2));
    }
    // Children left running would race the next run for the same files.
    let gone = Instant::now() + Duration::from_secs(5);
    // SAFETY: signal 0 only asks whether the group still has a process.
    while unsafe { libc::kill(-group, 0) } == 0 {
        assert!(
            Instant::now() < gone,
            "processes of the killed command still run 5 s after it died: its children do not die with it"
        );
        std::thread::sleep(Duration::from_millis(2));
    }
    ended
}

/// Each benchmark's scores (what must not depend on the kills).
fn scores(out: &Path) -> Vec<(String, serde_json::Value)> {
    BENCHES
        .split(',')
        .map(|b| {
            let v: serde_json::Value =
                serde_json::from_slice(&std::fs::read(out.join(format!("{b}.json"))).unwrap())
                    .unwrap();
            assert!(v["error"].is_null(), "{b}: {v}");
            (b.to_string(), v["scores"].clone())
        })
        .collect()
}

/// What a dead writer leaves anywhere under `dir`: temporary files (`.harness-*.tmp`),
/// half-written checkpoint folders (`.tmp-step-*`), unfinished nights (`.*.partial-*`),
/// speed-probe scratch files and interrupted downloads (`*.part`).
fn leftovers(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        let Ok(entries) = std::fs::read_dir(&d) else {
            continue;
        };
        for e in entries.flatten() {
            let p = e.path();
            let name = e.file_name().to_string_lossy().into_owned();
            let partial = (name.starts_with(".harness-") && name.ends_with(".tmp"))
                || name.starts_with(".tmp-step-")
                || (name.starts_with('.') && name.contains(".partial-"))
                || name.starts_with(".speed-probe-")
                || name.ends_with(".part");
            if partial {
                out.push(p);
            } else if e.file_type().is_ok_and(|t| t.is_dir()) {
                stack.push(p);
            }
        }
    }
    out
}

/// A scenario's kill points: `n` of them from `seed`, within `cold` (the uninterrupted cold
/// run's wall time) after a reset, which comes before every `cold_every`-th point.
struct Plan<'a> {
    label: &'a str,
    n: usize,
    seed: u64,
    cold: Duration,
    cold_every: usize,
}

/// Asserts that no dead writer's file is left under `dir` (`at`: where in the test).
fn assert_no_leftovers(dir: &Path, at: &str) {
    let left = leftovers(dir);
    assert!(
        left.is_empty(),
        "{at}: a dead writer's files are left: {left:?}"
    );
}

/// The kill loop every scenario shares. Before each kill point, every `cold_every` points,
/// `reset` makes the state cold again (so kills land in first writes too, not only in
/// later runs' reads). The command from `start` is SIGKILLed at a seeded random moment
/// within the time the run takes (`cold` after a reset, else the last completion's); then
/// `finish` runs it to the end (its wall time) and `check` compares what it left with an
/// uninterrupted run's. A run that ends before its kill point narrows the window to its
/// own time (the cold run is timed once, and under load it can take longer than every later
/// run), and while no kill has landed the loop adds points, up to `2n`. Prints and returns
/// how many kills landed before the end.
fn kill_loop(
    plan: Plan,
    mut reset: impl FnMut(),
    start: impl Fn() -> Command,
    mut finish: impl FnMut() -> Duration,
    mut check: impl FnMut(&str),
) -> usize {
    let Plan {
        label,
        n,
        seed,
        cold,
        cold_every,
    } = plan;
    let mut rng = Rng(seed);
    let mut killed = 0;
    let timed_cold = cold;
    let (mut cold, mut last) = (cold, cold);
    let mut i = 0;
    while i < n || (killed == 0 && i < 2 * n) {
        let is_cold = i % cold_every == 0;
        if is_cold {
            reset();
        }
        let window = if is_cold { cold } else { last }.as_micros() as u64 + 1;
        let after = Duration::from_micros(rng.next() % window);
        match kill_after(start(), after, i % 2 == 0) {
            None => killed += 1,
            Some(ran) if is_cold => cold = cold.min(ran),
            Some(_) => {}
        }
        last = finish();
        check(&format!("{label}: kill point {i} ({after:?}, seed {seed})"));
        i += 1;
    }
    println!(
        "{label}: {killed} of {i} kill points landed before the end (seed {seed}, cold run {timed_cold:?})"
    );
    assert!(killed > 0, "{label}: no kill landed: the window is wrong");
    killed
}

fn eval_kill_points(n: usize, seed: u64) {
    let reference_home = tempfile::tempdir().unwrap();
    let reference_out = reference_home.path().join("results");
    let cold = complete(reference_home.path(), &eval_args(&reference_out));
    let expected = scores(&reference_out);

    let home = tempfile::tempdir().unwrap();
    let out = home.path().join("results");
    let args = eval_args(&out);
    kill_loop(
        Plan {
            label: "eval",
            n,
            seed,
            cold,
            cold_every: 5,
        },
        || {
            for d in ["datasets", "cache"] {
                let _ = std::fs::remove_dir_all(home.path().join(d));
            }
            let _ = std::fs::remove_dir_all(&out);
        },
        || command(home.path(), &strs(&args)),
        || complete(home.path(), &args),
        |at| {
            assert_eq!(scores(&out), expected, "{at}");
            assert_no_leftovers(home.path(), at);
        },
    );
}

#[test]
fn eval_killed_at_random_points_ends_with_the_uninterrupted_scores() {
    eval_kill_points(5, 34);
}

/// The full suite's 50 kill points.
#[test]
#[ignore]
fn eval_killed_at_fifty_random_points_ends_with_the_uninterrupted_scores() {
    eval_kill_points(50, 3434);
}

/// Four processes evaluate overlapping benchmarks at once against one cold home (one data
/// directory, one embedding cache): every one ends with the scores of a lone run, the
/// cache reads back as a lone run's, the installed datasets verify, and no temporary file is
/// left.
#[test]
fn four_concurrent_evaluations_share_a_cold_home() {
    let reference_home = tempfile::tempdir().unwrap();
    let reference_out = reference_home.path().join("results");
    complete(reference_home.path(), &eval_args(&reference_out));
    let expected = scores(&reference_out);

    let home = tempfile::tempdir().unwrap();
    let orders = [BENCHES, "sick-r,stsb-test", BENCHES, "sick-r,stsb-test"];
    let children: Vec<_> = orders
        .iter()
        .enumerate()
        .map(|(i, benches)| {
            let out = home.path().join(format!("results-{i}"));
            let mut args = eval_args(&out);
            args[4] = benches.to_string();
            let child = command(home.path(), &strs(&args))
                .stdout(std::process::Stdio::piped())
                .stderr(std::process::Stdio::piped())
                .spawn()
                .unwrap();
            (out, child)
        })
        .collect();
    for (out, child) in children {
        let o = child.wait_with_output().unwrap();
        assert!(o.status.success(), "{}: {}", out.display(), text(&o));
        assert_eq!(scores(&out), expected, "{}", out.display());
    }
    // What they cached together reads back as a lone run's.
    let warm = home.path().join("results-warm");
    complete(home.path(), &eval_args(&warm));
    assert_eq!(scores(&warm), expected);
    let o = command(home.path(), &["datasets", "verify", "stsbenchmark", "sick"])
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", text(&o));
    assert_no_leftovers(home.path(), "after the runs");
}

/// Two `harness sweep`s of one grid started at once: every point runs exactly once (one
/// attempt each, all done, one sweep session that started points), and the sweep that did
/// not get the grid's lock says so and starts nothing; a third sweep afterwards starts
/// nothing either.
#[test]
fn two_sweeps_of_one_grid_at_once_run_every_point_exactly_once() {
    let home = tempfile::tempdir().unwrap();
    let grid = hashed_grid(home.path());
    let spawn = || {
        let mut c = sweep_cmd(home.path(), &grid, &[]);
        c.stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap()
    };
    let (a, b) = (spawn(), spawn());
    let outputs = [a.wait_with_output().unwrap(), b.wait_with_output().unwrap()];
    let refused: Vec<&std::process::Output> =
        outputs.iter().filter(|o| !o.status.success()).collect();
    for o in &refused {
        let t = text(o);
        assert!(
            t.contains("another `harness sweep` of this grid is running")
                && t.contains("started nothing"),
            "{t}"
        );
    }
    assert!(refused.len() <= 1, "both refused");
    let dir = sweep_dir(home.path());
    let ledger: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join("status.json")).unwrap()).unwrap();
    for p in ledger["points"].as_array().unwrap() {
        assert_eq!(p["state"], "done", "{p}");
        assert_eq!(p["attempts"], 1, "{p}");
    }
    let starting: Vec<u64> = ledger["sessions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["started_points"].as_u64().unwrap())
        .filter(|&n| n > 0)
        .collect();
    assert_eq!(starting, [4], "{ledger}");
    let third = sweep_cmd(home.path(), &grid, &[]).output().unwrap();
    assert!(third.status.success(), "{}", text(&third));
    assert!(text(&third).contains("0 started"), "{}", text(&third));
    assert_no_leftovers(home.path(), "after the runs");
}

/// A tmpfs mounted for one test, unmounted (and its folder removed) on drop.
struct SmallDisk(PathBuf);

impl SmallDisk {
    /// A `size` tmpfs at a fresh folder, or why none can be mounted here.
    fn mount(size: &str) -> Result<SmallDisk, String> {
        let dir = tempfile::tempdir().unwrap().keep();
        let o = std::process::Command::new("mount")
            .args(["-t", "tmpfs", "-o", &format!("size={size}"), "tmpfs"])
            .arg(&dir)
            .output()
            .map_err(|e| format!("mount: {e}"))?;
        if !o.status.success() {
            let _ = std::fs::remove_dir(&dir);
            return Err(format!(
                "mount -t tmpfs: {}",
                String::from_utf8_lossy(&o.stderr).trim()
            ));
        }
        Ok(SmallDisk(dir))
    }
}

impl Drop for SmallDisk {
    fn drop(&mut self) {
        let _ = std::process::Command::new("umount").arg(&self.0).status();
        let _ = std::fs::remove_dir(&self.0);
    }
}

/// Training whose run directory's disk fills up fails naming the disk, keeps what it
/// wrote before, leaves no partial checkpoint, and resumes once there is room. Needs a
/// tmpfs (root); skipped with the reason where none can be mounted.
#[test]
fn a_full_disk_stops_training_cleanly_and_the_run_resumes_with_room() {
    let disk = match SmallDisk::mount("8m") {
        Ok(d) => d,
        Err(why) => {
            eprintln!("skipped: no small disk to fill ({why})");
            return;
        }
    };
    let home = tempfile::tempdir().unwrap();
    let run = disk.0.join("run");
    let recipe = binary::repo().join("recipes/laser.yaml");
    let mut args: Vec<&str> = vec!["train", recipe.to_str().unwrap()];
    args.extend_from_slice(binary::SMALL_LASER);
    args.extend_from_slice(&[
        "--set",
        "train={steps: 4, batch_tokens: 300, max_len: 20, checkpoint_every: 2}",
        "--out",
        run.to_str().unwrap(),
    ]);
    // Prepared (corpora, tokenizer) but not trained: then the disk fills up.
    let o = command(home.path(), &[&args[..], &["--stop-after", "0"]].concat())
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", text(&o));
    // Not one step: no checkpoint, no metrics line.
    assert!(
        std::fs::read_dir(run.join("checkpoints")).map_or(true, |mut d| d.next().is_none()),
        "--stop-after 0 trained: {}",
        text(&o)
    );
    let metrics = std::fs::read_to_string(run.join("train/metrics.jsonl")).unwrap_or_default();
    assert_eq!(metrics.lines().count(), 0, "{metrics}");
    assert!(text(&o).contains("trained 0/4 steps"), "{}", text(&o));
    let tokenizer = std::fs::read(run.join("tokenizer.json")).unwrap();
    let filler = disk.0.join("filler");
    {
        use std::io::Write;
        let mut f = std::fs::File::create(&filler).unwrap();
        let block = vec![0u8; 64 << 10];
        while f.write_all(&block).is_ok() {}
        let _ = f.sync_all();
        // Room for the run's small files (lock, env.json, metrics), not for a checkpoint.
        let len = f.metadata().unwrap().len();
        f.set_len(len.saturating_sub(24 << 10)).unwrap();
    }
    let o = command(home.path(), &args).output().unwrap();
    assert!(!o.status.success(), "{}", text(&o));
    assert!(text(&o).contains("the disk is full"), "{}", text(&o));
    assert!(
        text(&o).contains(&run.display().to_string()),
        "{}",
        text(&o)
    );
    assert_eq!(
        std::fs::read(run.join("tokenizer.json")).unwrap(),
        tokenizer
    );
    let partial: Vec<_> = std::fs::read_dir(run.join("checkpoints"))
        .map(|d| d.flatten().map(|e| e.file_name()).collect())
        .unwrap_or_default();
    assert!(partial.is_empty(), "{partial:?}");
    // Room again: the same command trains to the end.
    std::fs::remove_file(&filler).unwrap();
    let o = command(home.path(), &args).output().unwrap();
    assert!(o.status.success(), "{}", text(&o));
    assert!(text(&o).contains("trained 4/4 steps"), "{}", text(&o));
}

/// Every file under `dir` (recursively) whose relative path `keep` accepts: path → sha256.
fn digests(dir: &Path, keep: &dyn Fn(&str) -> bool) -> BTreeMap<String, String> {
    let mut out = BTreeMap::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        let Ok(entries) = std::fs::read_dir(&d) else {
            continue;
        };
        for e in entries.flatten() {
            let p = e.path();
            if e.file_type().unwrap().is_dir() {
                stack.push(p);
                continue;
            }
            let rel = p.strip_prefix(dir).unwrap().to_string_lossy().into_owned();
            if keep(&rel) {
                let bytes = std::fs::read(&p).unwrap();
                out.insert(rel, harness_core::fsutil::sha256_hex(&bytes));
            }
        }
    }
    out
}

/// Runs `cmd` to the end, which must succeed; its wall time.
fn complete_cmd(mut cmd: Command) -> Duration {
    let start = Instant::now();
    let o = cmd.output().unwrap();
    assert!(o.status.success(), "{}", text(&o));
    start.elapsed()
}

/// `datasets fetch` (all 21 datasets, ~100 MB) from the mirror folder, or over http from a
/// server the test starts on the same folder: killed, then fetched to the end, the data
/// directory holds exactly the reference's bytes, verifies, and keeps no partial download.
fn fetch_kill_points(n: usize, seed: u64, http: bool) {
    let shared = harness_core::shared_datasets_dir();
    let server = http.then(|| common::Server::start(&shared, common::Behaviour::default()));
    let fetch = |home: &Path| {
        let mut c = command(home, &["datasets", "fetch"]);
        if let Some(s) = &server {
            c.env("HARNESS_MIRRORS", format!("[\"{}\"]", s.url));
        }
        c
    };
    let not_stamps = |rel: &str| !rel.starts_with(".stamps");
    let reference = tempfile::tempdir().unwrap();
    let cold = complete_cmd(fetch(reference.path()));
    let expected = digests(&reference.path().join("datasets"), &not_stamps);
    assert!(expected.len() > 500, "{} files", expected.len());
    let home = tempfile::tempdir().unwrap();
    let label = if http {
        "datasets fetch over http"
    } else {
        "datasets fetch from the mirror folder"
    };
    kill_loop(
        Plan {
            label,
            n,
            seed,
            cold,
            // Cold before every point: each kill lands in a real install, not a run that finds
            // everything in place.
            cold_every: 1,
        },
        || {
            let _ = std::fs::remove_dir_all(home.path().join("datasets"));
        },
        || fetch(home.path()),
        || complete_cmd(fetch(home.path())),
        |at| {
            let got = digests(&home.path().join("datasets"), &not_stamps);
            assert!(
                got == expected,
                "{at}: the data directory differs from the reference"
            );
            let o = command(home.path(), &["datasets", "verify"])
                .output()
                .unwrap();
            assert!(o.status.success(), "{at}: {}", text(&o));
            assert_no_leftovers(home.path(), at);
        },
    );
}

#[test]
fn datasets_fetch_killed_at_random_points_installs_the_reference_bytes() {
    fetch_kill_points(3, 35, false);
    fetch_kill_points(3, 36, true);
}

#[test]
#[ignore]
fn datasets_fetch_killed_at_fifty_random_points_installs_the_reference_bytes() {
    fetch_kill_points(50, 3535, false);
    fetch_kill_points(50, 3636, true);
}

/// `harness report RESULTS --out OUT` killed, then rendered to the end into the same folder:
/// every file equals an uninterrupted render's, and no temporary file is left.
fn report_kill_points(n: usize, seed: u64) {
    let home = tempfile::tempdir().unwrap();
    let results = home.path().join("results");
    complete(home.path(), &eval_args(&results));
    // A fixed render time: otherwise a reference rendered at 12:00:59 and a resumed render
    // at 12:01:00 differ in their "rendered" line (it failed so once).
    let report = |out: &Path| {
        let mut c = command(
            home.path(),
            &[
                "report",
                results.to_str().unwrap(),
                "--out",
                out.to_str().unwrap(),
            ],
        );
        c.env("SOURCE_DATE_EPOCH", "1764547200");
        c
    };
    let reference = home.path().join("report-reference");
    let cold = complete_cmd(report(&reference));
    let expected = digests(&reference, &|_| true);
    let out = home.path().join("report");
    kill_loop(
        Plan {
            label: "report",
            n,
            seed,
            cold,
            cold_every: 5,
        },
        || {
            let _ = std::fs::remove_dir_all(&out);
        },
        || report(&out),
        || complete_cmd(report(&out)),
        |at| {
            assert_eq!(digests(&out, &|_| true), expected, "{at}");
            assert_no_leftovers(home.path(), at);
        },
    );
}

#[test]
fn report_killed_at_random_points_renders_the_uninterrupted_report() {
    report_kill_points(5, 37);
}

#[test]
#[ignore]
fn report_killed_at_fifty_random_points_renders_the_uninterrupted_report() {
    report_kill_points(50, 3737);
}

/// The grid of the sweep scenarios: two sizes × seeds 1, 2 on STS-B test.
fn hashed_grid(home: &Path) -> PathBuf {
    binary::hashed_grid(home, "[16, 32]")
}

/// `harness sweep GRID` with its runs and sweeps under `home`.
fn sweep_cmd(home: &Path, grid: &Path, extra: &[&str]) -> Command {
    let mut args = vec!["sweep", grid.to_str().unwrap()];
    args.extend_from_slice(extra);
    let mut c = command(home, &args);
    c.env("HARNESS_RUNS_DIR", home.join("runs"))
        .env("HARNESS_SWEEPS_DIR", home.join("sweeps"));
    c
}

/// The one sweep folder under `home`.
fn sweep_dir(home: &Path) -> PathBuf {
    let d: Vec<PathBuf> = std::fs::read_dir(home.join("sweeps"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    assert_eq!(d.len(), 1, "{d:?}");
    d[0].clone()
}

/// What a finished sweep leaves that must not depend on kills or `--jobs`: each point's
/// state and result scores (by alias), and the ablation table's cells.
fn sweep_outcome(home: &Path) -> (BTreeMap<String, (String, serde_json::Value)>, String) {
    let dir = sweep_dir(home);
    let ledger: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join("status.json")).unwrap()).unwrap();
    let points = ledger["points"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| {
            let run = PathBuf::from(p["run_dir"].as_str().unwrap());
            let result: serde_json::Value = serde_json::from_str(
                &std::fs::read_to_string(run.join("results/stsb-test.json")).unwrap(),
            )
            .unwrap();
            let state = match p["state"].as_str().unwrap() {
                // Whoever ran it: a finished point is finished.
                "reused" => "done".to_string(),
                s => s.to_string(),
            };
            (
                p["alias"].as_str().unwrap().to_string(),
                (state, result["scores"].clone()),
            )
        })
        .collect();
    // Result paths name the home: compare what is below it.
    let cells = std::fs::read_to_string(dir.join("report/cells.csv"))
        .unwrap()
        .replace(&home.display().to_string(), "HOME");
    (points, cells)
}

/// `harness sweep` killed between and inside points, then run to the end: every point is
/// done with the reference's scores, the ablation table equals the reference's, and no
/// temporary file is left.
fn sweep_kill_points(n: usize, seed: u64) {
    let reference = tempfile::tempdir().unwrap();
    let grid = hashed_grid(reference.path());
    let cold = complete_cmd(sweep_cmd(reference.path(), &grid, &[]));
    let expected = sweep_outcome(reference.path());
    assert_eq!(expected.0.len(), 4);
    assert!(
        expected.0.values().all(|(s, _)| s == "done"),
        "{expected:?}"
    );

    let home = tempfile::tempdir().unwrap();
    let grid = hashed_grid(home.path());
    kill_loop(
        Plan {
            label: "sweep",
            n,
            seed,
            cold,
            cold_every: 5,
        },
        || {
            for d in ["runs", "sweeps"] {
                let _ = std::fs::remove_dir_all(home.path().join(d));
            }
        },
        || sweep_cmd(home.path(), &grid, &[]),
        || complete_cmd(sweep_cmd(home.path(), &grid, &[])),
        |at| {
            assert_eq!(sweep_outcome(home.path()), expected, "{at}");
            assert_no_leftovers(home.path(), at);
        },
    );
}

#[test]
fn sweep_killed_at_random_points_ends_with_the_uninterrupted_results() {
    sweep_kill_points(3, 38);
}

#[test]
#[ignore]
fn sweep_killed_at_fifty_random_points_ends_with_the_uninterrupted_results() {
    sweep_kill_points(50, 3838);
}

/// A nightly configuration in `home`: the hashed encoder on STS-B test, and the LASER recipe
/// shrunk to seconds of training evaluated on two Tatoeba languages; its path.
fn small_nightly(home: &Path) -> PathBuf {
    let recipe = binary::repo().join("recipes/laser.yaml");
    let mut set: Vec<String> = binary::SMALL_LASER
        .chunks(2)
        .map(|kv| format!("{:?}", kv[1]))
        .collect();
    set.push(format!(
        "{:?}",
        "train={steps: 8, batch_tokens: 300, max_len: 20, checkpoint_every: 4, eval_every: 1000}"
    ));
    let path = home.join("small.yaml");
    std::fs::write(
        &path,
        format!(
            "name: small\nseeds: [1]\nspeed_probe_sentences: 50\nentries:\n  \
             - name: laser\n    recipe: {}\n    set: [{}]\n    benchmarks: [tatoeba]\n    \
             bench_set: [\"tatoeba.languages=[deu, spa]\"]\n  \
             - name: hashed\n    encoder: \"hashed-ngrams:dim=64\"\n    \
             benchmarks: [stsb-test]\n",
            recipe.display(),
            set.join(", ")
        ),
    )
    .unwrap();
    path
}

fn nightly_cmd(home: &Path, config: &Path) -> Command {
    let mut c = command(
        home,
        &["nightly", config.to_str().unwrap(), "--date", "2026-11-01"],
    );
    c.env("HARNESS_NIGHTLY_DIR", home.join("store"))
        .env("HARNESS_RUNS_DIR", home.join("runs"));
    c
}

/// The finished night in `home`'s store, if there is one.
fn night(home: &Path) -> Option<PathBuf> {
    let history = home.join("store/small");
    let found: Vec<PathBuf> = std::fs::read_dir(history)
        .ok()?
        .flatten()
        .map(|e| e.path())
        .filter(|p| {
            p.file_name()
                .unwrap()
                .to_string_lossy()
                .starts_with("2026-11-01")
        })
        .collect();
    assert!(found.len() <= 1, "{found:?}");
    found.into_iter().next()
}

/// A finished night's scores (entry/seed/benchmark → scores) and report files.
fn night_outcome(dir: &Path) -> (BTreeMap<String, serde_json::Value>, Vec<String>) {
    let record: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join("night.json")).unwrap()).unwrap();
    let mut scores = BTreeMap::new();
    for e in record["entries"].as_array().unwrap() {
        for s in e["seeds"].as_array().unwrap() {
            assert!(s["errors"].as_array().is_none_or(Vec::is_empty), "{s}");
            let results = dir.join(s["dir"].as_str().unwrap()).join("results");
            for f in std::fs::read_dir(&results).unwrap().flatten() {
                let name = f.file_name().to_string_lossy().into_owned();
                if name.ends_with(".json") && !name.ends_with(".items.json") {
                    let v: serde_json::Value =
                        serde_json::from_str(&std::fs::read_to_string(f.path()).unwrap()).unwrap();
                    scores.insert(
                        format!("{}/{}", s["dir"].as_str().unwrap(), name),
                        v["scores"].clone(),
                    );
                }
            }
        }
    }
    let mut report: Vec<String> = std::fs::read_dir(dir.join("report"))
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    report.sort();
    (scores, report)
}

/// `harness nightly` killed at any point, then run again: the night in the history is
/// complete (record, results, report) with the reference's scores; a night killed before
/// its end never appears in the history, and its partial folder is removed by the next run.
fn nightly_kill_points(n: usize, seed: u64) {
    let reference = tempfile::tempdir().unwrap();
    let config = small_nightly(reference.path());
    let cold = complete_cmd(nightly_cmd(reference.path(), &config));
    let expected = night_outcome(&night(reference.path()).unwrap());
    assert_eq!(expected.0.len(), 2, "{expected:?}");

    let home = tempfile::tempdir().unwrap();
    let config = small_nightly(home.path());
    kill_loop(
        Plan {
            label: "nightly",
            n,
            seed,
            cold,
            cold_every: n + 1,
        },
        || {},
        || nightly_cmd(home.path(), &config),
        || match night(home.path()) {
            // The kill came after the night was complete: nothing to run again.
            Some(_) => Duration::ZERO,
            None => complete_cmd(nightly_cmd(home.path(), &config)),
        },
        |at| {
            let dir = night(home.path()).unwrap_or_else(|| panic!("{at}: no night"));
            assert_eq!(night_outcome(&dir), expected, "{at}");
            assert_no_leftovers(&home.path().join("store"), at);
            // The next kill point runs the same night again.
            std::fs::remove_dir_all(&dir).unwrap();
        },
    );
}

#[test]
fn nightly_killed_at_random_points_ends_with_a_complete_night() {
    nightly_kill_points(2, 39);
}

#[test]
#[ignore]
fn nightly_killed_at_fifty_random_points_ends_with_a_complete_night() {
    nightly_kill_points(50, 3939);
}

/// Small LASER training (60 steps, a checkpoint every 3) killed at any point — corpus and
/// tokenizer preparation, a step, a checkpoint write — then run again: it resumes and ends
/// with the reference's training log (every step's task, tokens, loss, gradient norm and
/// learning rate, none lost or repeated) and embeds sentences to the reference's bytes.
/// (Checkpoint files themselves differ between any two runs: burn stores each parameter's
/// random per-process id with it.)
fn train_kill_points(n: usize, seed: u64) {
    let args = |home: &Path| -> Vec<String> {
        let recipe = binary::repo().join("recipes/laser.yaml");
        let mut a: Vec<String> = vec!["train".into(), recipe.display().to_string()];
        a.extend(binary::SMALL_LASER.iter().map(|s| s.to_string()));
        a.extend([
            "--set".into(),
            "train={steps: 60, batch_tokens: 300, max_len: 20, checkpoint_every: 3}".into(),
            "--out".into(),
            home.join("run").display().to_string(),
        ]);
        a
    };
    let sentences = tempfile::tempdir().unwrap();
    let input = sentences.path().join("sentences.txt");
    std::fs::write(
        &input,
        "Das ist ein Test.\nThis is a test.\nEsto es una prueba.\nC'est un essai.\n",
    )
    .unwrap();
    let outcome = |home: &Path| {
        let log = std::fs::read_to_string(home.join("run/train/metrics.jsonl")).unwrap();
        let steps: Vec<String> = log
            .lines()
            .map(|l| {
                let v: serde_json::Value = serde_json::from_str(l).unwrap();
                ["step", "task", "tokens", "loss", "grad_norm", "lr"]
                    .map(|k| v[k].to_string())
                    .join(" ")
            })
            .collect();
        let npy = home.join("embedded.npy");
        let _ = std::fs::remove_file(&npy);
        let vectors = binary::embed_npy(home, &home.join("run"), &input, &npy);
        (steps, harness_core::fsutil::sha256_hex(&vectors))
    };
    let reference = tempfile::tempdir().unwrap();
    let cold = complete(reference.path(), &args(reference.path()));
    let expected = outcome(reference.path());
    assert_eq!(expected.0.len(), 60, "{:?}", expected.0);

    let home = tempfile::tempdir().unwrap();
    let a = args(home.path());
    kill_loop(
        Plan {
            label: "train",
            n,
            seed,
            cold,
            cold_every: 3,
        },
        || {
            let _ = std::fs::remove_dir_all(home.path().join("run"));
        },
        || command(home.path(), &strs(&a)),
        || complete(home.path(), &a),
        |at| {
            assert_eq!(outcome(home.path()), expected, "{at}");
            assert_no_leftovers(home.path(), at);
        },
    );
}

#[test]
fn training_killed_at_random_points_resumes_to_the_uninterrupted_weights() {
    train_kill_points(3, 40);
}

#[test]
#[ignore]
fn training_killed_at_fifty_random_points_resumes_to_the_uninterrupted_weights() {
    train_kill_points(50, 4040);
}

/// Fills `disk` up to `leave` bytes of free space with one file; that file.
fn fill(disk: &Path, leave: u64) -> PathBuf {
    use std::io::Write;
    let filler = disk.join("filler");
    let mut f = std::fs::File::create(&filler).unwrap();
    let block = vec![0u8; 16 << 10];
    while f.write_all(&block).is_ok() {}
    let _ = f.sync_all();
    let len = f.metadata().unwrap().len();
    f.set_len(len.saturating_sub(leave)).unwrap();
    filler
}

/// A full disk under the embedding cache costs nothing but the cache: the evaluation ends
/// with a lone run's scores and one warning. A full disk under the results folder stops the
/// evaluation naming the disk and the file, keeps the results written before, and the same
/// command with room again ends with a lone run's scores. Needs a tmpfs (root); skipped with
/// the reason where none can be mounted.
#[test]
fn a_full_disk_under_the_cache_or_the_results_loses_no_result() {
    let disk = match SmallDisk::mount("2m") {
        Ok(d) => d,
        Err(why) => {
            eprintln!("skipped: no small disk to fill ({why})");
            return;
        }
    };
    let reference = tempfile::tempdir().unwrap();
    let reference_out = reference.path().join("results");
    complete(reference.path(), &eval_args(&reference_out));
    let expected = scores(&reference_out);

    let home = tempfile::tempdir().unwrap();
    // Datasets installed while there is room (they are not on the small disk).
    let o = command(home.path(), &["datasets", "fetch", "stsbenchmark", "sick"])
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", text(&o));

    // The cache's disk is full.
    let filler = fill(&disk.0, 64 << 10);
    let out = home.path().join("results");
    let o = command(home.path(), &strs(&eval_args(&out)))
        .env("HARNESS_CACHE_DIR", disk.0.join("cache"))
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", text(&o));
    assert_eq!(scores(&out), expected);
    let warnings = text(&o)
        .lines()
        .filter(|l| l.contains("could not write embedding cache segment"))
        .count();
    assert_eq!(warnings, 1, "{}", text(&o));
    assert!(text(&o).contains("the disk is full"), "{}", text(&o));
    assert_no_leftovers(&disk.0, "the small disk");
    std::fs::remove_file(&filler).unwrap();
    let _ = std::fs::remove_dir_all(disk.0.join("cache"));

    // The results' disk fills up after the first benchmark.
    let results = disk.0.join("results");
    let args = |bench: &str| {
        vec![
            "eval".to_string(),
            "--encoder".into(),
            "hashed-ngrams".into(),
            "--bench".into(),
            bench.into(),
            "--out".into(),
            results.display().to_string(),
        ]
    };
    complete(home.path(), &args("stsb-test"));
    let first = std::fs::read(results.join("stsb-test.json")).unwrap();
    let filler = fill(&disk.0, 0);
    let o = command(home.path(), &strs(&args("sick-r")))
        .output()
        .unwrap();
    assert!(!o.status.success(), "{}", text(&o));
    assert!(
        text(&o).contains("the disk is full") && text(&o).contains(&results.display().to_string()),
        "{}",
        text(&o)
    );
    assert_eq!(
        std::fs::read(results.join("stsb-test.json")).unwrap(),
        first
    );
    assert!(!results.join("sick-r.json").exists());
    assert_no_leftovers(&disk.0, "the small disk");
    // Room again: the same command ends with a lone run's scores.
    std::fs::remove_file(&filler).unwrap();
    complete(home.path(), &args("sick-r"));
    assert_eq!(scores(&results), expected);
}

/// A sweep sent SIGTERM (a scheduler's cancel or time limit) stops as on Ctrl-C: the points
/// running are told to stop, none is left marked running, and the sweep started again
/// finishes the rest without repeating a finished point.
#[test]
fn a_sweep_sent_sigterm_stops_cleanly_and_resumes() {
    let home = tempfile::tempdir().unwrap();
    let grid = hashed_grid(home.path());
    let mut child = sweep_cmd(home.path(), &grid, &[])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let ledger = |home: &Path| -> Option<serde_json::Value> {
        let dir = std::fs::read_dir(home.join("sweeps"))
            .ok()?
            .next()?
            .ok()?
            .path();
        serde_json::from_str(&std::fs::read_to_string(dir.join("status.json")).ok()?).ok()
    };
    let t0 = Instant::now();
    while !ledger(home.path()).is_some_and(|l| {
        l["points"]
            .as_array()
            .unwrap()
            .iter()
            .any(|p| p["state"] == "running")
    }) {
        assert!(t0.elapsed() < Duration::from_secs(60), "no point started");
        std::thread::sleep(Duration::from_millis(5));
    }
    // SAFETY: a signal to the child started above.
    unsafe { libc::kill(child.id() as i32, libc::SIGTERM) };
    let status = child.wait().unwrap();
    assert!(
        status.code().is_some(),
        "killed by the signal, not stopped: {status:?}"
    );
    let l = ledger(home.path()).unwrap();
    let points = l["points"].as_array().unwrap();
    assert!(points.iter().all(|p| p["state"] != "running"), "{l}");
    let done: Vec<String> = points
        .iter()
        .filter(|p| p["state"] == "done")
        .map(|p| p["alias"].to_string())
        .collect();
    complete_cmd(sweep_cmd(home.path(), &grid, &[]));
    let l = ledger(home.path()).unwrap();
    for p in l["points"].as_array().unwrap() {
        assert!(p["state"] == "done" || p["state"] == "reused", "{p}");
        if done.contains(&p["alias"].to_string()) {
            assert_eq!(p["attempts"], 1, "{p}");
        }
    }
}
