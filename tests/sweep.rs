//! `harness sweep` through the real binary on an evaluation grid (hashed n-grams of three
//! sizes × two seeds on STS-B test: seconds per point): a sweep SIGKILLed after its first
//! point and started again runs only the points not finished (counted from the ledger);
//! `--only failed` reruns exactly the failed points; the ablation table's mean ± std equals
//! the one computed here from the result files; `--dry-run` writes nothing; a generated
//! table from run directories no spec names; the emitted Slurm scripts.

mod binary;

use binary::{command, text};
use std::path::{Path, PathBuf};
use std::process::Output;
use std::time::{Duration, Instant};

struct Env {
    home: tempfile::TempDir,
}

impl Env {
    fn new() -> Env {
        Env {
            home: tempfile::tempdir().unwrap(),
        }
    }
    fn path(&self, rel: &str) -> PathBuf {
        self.home.path().join(rel)
    }
    /// `harness ARGS` with runs and sweeps under the test's home.
    fn cmd(&self, args: &[&str]) -> std::process::Command {
        let mut c = command(self.home.path(), args);
        c.env("HARNESS_RUNS_DIR", self.path("runs"))
            .env("HARNESS_SWEEPS_DIR", self.path("sweeps"));
        c
    }
    fn run(&self, args: &[&str]) -> Output {
        self.cmd(args).output().unwrap()
    }
    /// A grid over the hashed n-gram encoder: `dims` × seeds 1, 2 on STS-B test.
    fn grid(&self, dims: &str) -> String {
        binary::hashed_grid(self.home.path(), dims)
            .display()
            .to_string()
    }
    fn sweep_dir(&self) -> PathBuf {
        let d: Vec<PathBuf> = std::fs::read_dir(self.path("sweeps"))
            .unwrap()
            .map(|e| e.unwrap().path())
            .collect();
        assert_eq!(d.len(), 1, "{d:?}");
        d[0].clone()
    }
}

fn ledger(dir: &Path) -> serde_json::Value {
    serde_json::from_str(&std::fs::read_to_string(dir.join("status.json")).unwrap()).unwrap()
}

fn states(l: &serde_json::Value) -> Vec<(String, String, u64)> {
    l["points"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| {
            (
                p["alias"].as_str().unwrap().to_string(),
                p["state"].as_str().unwrap().to_string(),
                p["attempts"].as_u64().unwrap(),
            )
        })
        .collect()
}

#[test]
fn a_killed_sweep_resumes_without_repeating_a_finished_point() {
    let env = Env::new();
    let grid = env.grid("[16, 32]");
    // Dry run: the plan, nothing written.
    let dry = env.run(&["sweep", &grid, "--dry-run"]);
    assert!(dry.status.success(), "{}", text(&dry));
    let out = text(&dry);
    assert!(
        out.contains("2 configurations × 2 seed(s) = 4 points; 0 done, 4 to run"),
        "{out}"
    );
    assert!(
        out.contains("dim=32 seed=2") && out.contains("harness run "),
        "{out}"
    );
    assert!(!env.path("sweeps").exists(), "--dry-run writes nothing");

    let mut child = env.cmd(&["sweep", &grid]).spawn().unwrap();
    let t0 = Instant::now();
    let dir = loop {
        assert!(
            t0.elapsed() < Duration::from_secs(300),
            "no point finished in 300 s"
        );
        if let Ok(d) = std::fs::read_dir(env.path("sweeps")) {
            if let Some(d) = d.filter_map(|e| e.ok()).map(|e| e.path()).next() {
                if d.join("status.json").is_file()
                    && states(&ledger(&d)).iter().any(|s| s.1 == "done")
                {
                    break d;
                }
            }
        }
        std::thread::sleep(Duration::from_millis(10));
    };
    child.kill().unwrap();
    child.wait().unwrap();
    let at_kill = states(&ledger(&dir));
    let done_at_kill: Vec<String> = at_kill
        .iter()
        .filter(|s| s.1 == "done")
        .map(|s| s.0.clone())
        .collect();
    assert!(
        !done_at_kill.is_empty() && done_at_kill.len() < 4,
        "{at_kill:?}"
    );

    let again = env.run(&["sweep", &grid]);
    assert!(again.status.success(), "{}", text(&again));
    let l = ledger(&dir);
    let after = states(&l);
    assert!(
        after.iter().all(|s| s.1 == "done" || s.1 == "reused"),
        "{after:?}"
    );
    for (alias, _, attempts) in &after {
        if done_at_kill.contains(alias) {
            assert_eq!(
                *attempts, 1,
                "{alias} was finished before the kill: {after:?}"
            );
        }
    }
    // The second invocation started only the points not finished at the kill.
    let sessions = l["sessions"].as_array().unwrap();
    assert_eq!(sessions.len(), 2);
    let unfinished = at_kill.iter().filter(|s| s.1 != "done").count() as u64;
    assert!(
        sessions[1]["started_points"].as_u64().unwrap() <= unfinished,
        "{sessions:?}"
    );

    // A third run starts nothing.
    let third = env.run(&["sweep", &grid]);
    assert!(third.status.success(), "{}", text(&third));
    assert!(text(&third).contains("0 started"), "{}", text(&third));
    let l = ledger(&dir);
    assert_eq!(l["sessions"].as_array().unwrap()[2]["started_points"], 0);

    // The table's mean ± std is the one computed here from the result files.
    let runs: Vec<(String, PathBuf)> = l["points"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| {
            (
                p["config"].as_str().unwrap().to_string(),
                PathBuf::from(p["run_dir"].as_str().unwrap()),
            )
        })
        .collect();
    let cells = std::fs::read_to_string(dir.join("report/cells.csv")).unwrap();
    let mut rdr = csv::Reader::from_reader(cells.as_bytes());
    let headers = rdr.headers().unwrap().clone();
    let col = |name: &str| headers.iter().position(|h| h == name).unwrap();
    let records: Vec<csv::StringRecord> = rdr.records().map(|r| r.unwrap()).collect();
    for config in ["dim=16", "dim=32"] {
        let scores: Vec<f64> = runs
            .iter()
            .filter(|(c, _)| c == config)
            .map(|(_, d)| {
                let j: serde_json::Value = serde_json::from_str(
                    &std::fs::read_to_string(d.join("results/stsb-test.json")).unwrap(),
                )
                .unwrap();
                j["main_score"].as_f64().unwrap()
            })
            .collect();
        assert_eq!(scores.len(), 2);
        let mean = (scores[0] + scores[1]) / 2.0;
        let std = (scores[0] - scores[1]).abs() / 2f64.sqrt();
        let row = records
            .iter()
            .find(|r| &r[col("row")] == config && &r[col("variant")] == "mean")
            .unwrap_or_else(|| panic!("no mean row for {config} in {cells}"));
        let value: f64 = row[col("value")].parse().unwrap();
        assert!((value - mean).abs() < 1e-9, "{config}: {value} vs {mean}");
        assert!(
            row[col("display")].starts_with(&format!("{mean:.2} ± {std:.2} (n=2)")),
            "{config}: {} vs {mean:.2} ± {std:.2}",
            &row[col("display")]
        );
    }
    let html = std::fs::read_to_string(dir.join("report/report.html")).unwrap();
    assert!(
        html.contains("data-chart=\"sweep-hashed-dims-dim-0\""),
        "a line chart over dim"
    );
    // Links to the run directories.
    assert!(dir
        .join("runs/dim_16_seed_1/results/stsb-test.json")
        .is_file());

    // The same runs as a generated table of `harness report`, no spec naming them.
    let run_args: Vec<String> = runs.iter().map(|(_, d)| d.display().to_string()).collect();
    let out = env.path("generated");
    let mut args = vec!["report".to_string()];
    args.extend(run_args);
    args.extend([
        "--metric".into(),
        "stsb-test".into(),
        "--out".into(),
        out.display().to_string(),
    ]);
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let rep = env.run(&args);
    assert!(rep.status.success(), "{}", text(&rep));
    let gen = std::fs::read_to_string(out.join("tables/generated.csv")).unwrap();
    // Each run is its own system (its --set overrides), never merged: four rows.
    assert_eq!(gen.lines().count(), 5, "{gen}");
    assert_eq!(gen.matches("--set model.encoder.dim=").count(), 4, "{gen}");
    assert_eq!(gen.matches("(n=1)").count(), 4, "{gen}");
}

#[test]
fn only_failed_reruns_exactly_the_failed_points() {
    let env = Env::new();
    let grid = env.grid("[8, 16]");
    let dry = env.run(&["sweep", &grid, "--dry-run"]);
    let out = text(&dry);
    // Make `dim=16 seed=1` fail: its run directory holds a file harness did not write.
    let line = out
        .lines()
        .find(|l| l.contains("dim=16 seed=1"))
        .unwrap_or_else(|| panic!("{out}"));
    let run_dir = PathBuf::from(line.split_whitespace().last().unwrap());
    std::fs::create_dir_all(&run_dir).unwrap();
    std::fs::write(run_dir.join("notes.txt"), "mine").unwrap();

    let first = env.run(&["sweep", &grid, "--jobs", "2"]);
    assert_eq!(first.status.code(), Some(1), "{}", text(&first));
    let out = text(&first);
    assert!(
        out.contains("FAILED dim=16 seed=1") && out.contains("notes.txt"),
        "{out}"
    );
    assert!(
        out.contains("failed [a]") || out.contains("(n=1 of 2)"),
        "{out}"
    );
    let dir = env.sweep_dir();
    let s = states(&ledger(&dir));
    assert_eq!(
        s.iter().map(|x| x.1.as_str()).collect::<Vec<_>>(),
        ["done", "done", "failed", "done"],
        "{s:?}"
    );
    // `--only missing` does not touch the failed point.
    let missing = env.run(&["sweep", &grid, "--only", "missing"]);
    assert!(text(&missing).contains("0 started"), "{}", text(&missing));

    std::fs::remove_file(run_dir.join("notes.txt")).unwrap();
    let retry = env.run(&["sweep", &grid, "--only", "failed"]);
    assert!(retry.status.success(), "{}", text(&retry));
    let l = ledger(&dir);
    let s = states(&l);
    assert_eq!(
        s.iter().map(|x| (x.1.as_str(), x.2)).collect::<Vec<_>>(),
        [("done", 1), ("done", 1), ("done", 2), ("done", 1)],
        "{s:?}"
    );
    let sessions = l["sessions"].as_array().unwrap();
    assert_eq!(sessions.last().unwrap()["started_points"], 1);
}

#[test]
fn grid_errors_name_the_file_line_and_key_and_nothing_runs() {
    let env = Env::new();
    let recipe = binary::repo().join("recipes/hashed-ngrams.yaml");
    let path = env.path("bad.yaml");
    std::fs::write(
        &path,
        format!(
            "recipe: {}\naxes:\n  model.encoder.dim: [16, -3]\n  model.encoder.dimm: [1]\nseeds: [1]\n",
            recipe.display()
        ),
    )
    .unwrap();
    let p = path.display().to_string();
    let o = env.run(&["sweep", &p]);
    assert_eq!(o.status.code(), Some(1), "{}", text(&o));
    let out = text(&o);
    assert!(
        out.contains(&format!("{p}:3: model.encoder.dim: point `dim=-3")),
        "{out}"
    );
    assert!(
        out.contains(&format!("{p}:4:")) && out.contains("dimm"),
        "{out}"
    );
    assert!(out.contains("nothing was run"), "{out}");
    assert!(!env.path("runs").exists() && !env.path("sweeps").exists());
}

#[test]
fn slurm_scripts_are_emitted_for_the_points_not_done() {
    let env = Env::new();
    let grid = env.grid("[8, 16, 32]");
    let out = env.path("slurm");
    let o = env.run(&[
        "sweep",
        &grid,
        "--emit",
        "slurm",
        "--out",
        &out.display().to_string(),
    ]);
    assert!(o.status.success(), "{}", text(&o));
    assert!(
        text(&o).contains("6 array task(s) in 1 array(s)"),
        "{}",
        text(&o)
    );
    let array = std::fs::read_to_string(out.join("array-0.sbatch")).unwrap();
    assert!(array.contains("--array=0-5"), "{array}");
    let args = std::fs::read_to_string(out.join("tasks/5.args")).unwrap();
    assert!(
        args.starts_with("run\n")
            && args.contains("model.encoder.dim=32\n")
            && args.contains("seed=2\n"),
        "{args}"
    );
    let gather = std::fs::read_to_string(out.join("gather.sbatch")).unwrap();
    assert!(gather.contains("--report-only"), "{gather}");
    for f in ["array-0.sbatch", "gather.sbatch", "submit.sh"] {
        let ok = std::process::Command::new("bash")
            .arg("-n")
            .arg(out.join(f))
            .status()
            .unwrap();
        assert!(ok.success(), "bash -n {f}");
    }
}

#[test]
fn a_table_spec_named_with_spec_is_read_at_run_time() {
    let env = Env::new();
    let spec = env.path("my-table.yaml");
    std::fs::write(
        &spec,
        "title: My table\npaper: mine\ntable: T1\nsource: this test\nmetric: Spearman\nbench: stsb-test\ncolumns:\n  - {key: sts, label: STS-B, field: main_score}\nsystems: [mine]\n",
    )
    .unwrap();
    let spec_s = spec.display().to_string();
    let list = env.run(&["report", "--list", "--spec", &spec_s]);
    assert!(list.status.success(), "{}", text(&list));
    assert!(
        text(&list).contains("my-table") && text(&list).contains("My table"),
        "{}",
        text(&list)
    );

    let results = env.path("results");
    let r = results.display().to_string();
    let o = env.run(&[
        "eval",
        "--encoder",
        "hashed-ngrams:dim=16",
        "--bench",
        "stsb-test",
        "--out",
        &r,
    ]);
    assert!(o.status.success(), "{}", text(&o));
    let score = serde_json::from_str::<serde_json::Value>(
        &std::fs::read_to_string(results.join("stsb-test.json")).unwrap(),
    )
    .unwrap()["main_score"]
        .as_f64()
        .unwrap();
    let out = env.path("report");
    let o = env.run(&[
        "report",
        &format!("mine={r}"),
        "--spec",
        &spec_s,
        "--table",
        "my-table",
        "--out",
        &out.display().to_string(),
    ]);
    assert!(o.status.success(), "{}", text(&o));
    let md = std::fs::read_to_string(out.join("report.md")).unwrap();
    assert!(
        md.contains("My table") && md.contains(&format!("{score:.1}")),
        "{md}"
    );

    // A file that is neither kind is refused, naming it.
    let bad = env.path("bad.yaml");
    std::fs::write(&bad, "name: x\n").unwrap();
    let o = env.run(&["report", "--list", "--spec", &bad.display().to_string()]);
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
    assert!(
        text(&o).contains("bad.yaml") && text(&o).contains("Fix:"),
        "{}",
        text(&o)
    );
}

#[test]
fn the_sweep_report_is_laid_out_in_headless_chromium() {
    if !binary::browser_check_wanted() {
        return;
    }
    let env = Env::new();
    let grid = env.grid("[16, 32]");
    let o = env.run(&["sweep", &grid, "--jobs", "2"]);
    assert!(o.status.success(), "{}", text(&o));
    let report = env.sweep_dir().join("report");
    let run = binary::check_report_html(
        &report.join("report.html"),
        &report.join("shot.png"),
        "3000",
    );
    let out = text(&run);
    assert!(run.status.success(), "{out}");
    // The ablation table and its charts: a line over `dim` (one metric) and no training curve
    // (the hashed encoder does not train).
    assert!(out.contains("laid out:   tables 1/1 charts 1/1"), "{out}");
}

#[test]
fn the_shipped_grids_resolve_in_every_profile() {
    let env = Env::new();
    for grid in [
        "grids/laser-depth.yaml",
        "grids/seq2seq-alpha.yaml",
        "grids/xnli-lambda.yaml",
    ] {
        for profile in [None, Some("paper")] {
            let mut args = vec!["sweep", grid, "--dry-run"];
            if let Some(p) = profile {
                args.extend(["--profile", p]);
            }
            let o = env.run(&args);
            assert!(o.status.success(), "{grid} {profile:?}: {}", text(&o));
            assert!(text(&o).contains("to run"), "{}", text(&o));
        }
    }
}

/// Every file under `dir` with its content (links shown as `->target`, not followed).
fn tree(dir: &Path) -> Vec<(String, String)> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).unwrap() {
            let p = e.unwrap().path();
            let rel = p.strip_prefix(dir).unwrap().display().to_string();
            let m = std::fs::symlink_metadata(&p).unwrap();
            if m.file_type().is_symlink() {
                let to = std::fs::read_link(&p).unwrap();
                out.push((rel, format!("->{}", to.display())));
            } else if m.is_dir() {
                out.push((rel, "/".into()));
                stack.push(p);
            } else {
                out.push((rel, std::fs::read_to_string(&p).unwrap()));
            }
        }
    }
    out.sort();
    out
}

/// Issue 58: `--emit slurm --out DIR` into someone's folder replaced their `submit.sh`,
/// `array-0.sbatch` and `gather.sbatch` and deleted their `array-3.sbatch` and
/// `tasks/9.args`, with exit 0. Now it is refused (with `--force` too, their files being
/// where it writes), naming the folder and the fix, and the folder is as it was; a linked
/// `tasks/` folder is refused, not written through.
#[test]
fn emitting_into_a_foreign_folder_is_refused_and_its_files_are_kept() {
    let env = Env::new();
    let grid = env.grid("[8, 16]");
    let out = env.path("theirs");
    std::fs::create_dir_all(out.join("tasks")).unwrap();
    for f in [
        "submit.sh",
        "array-0.sbatch",
        "gather.sbatch",
        "array-3.sbatch",
        "tasks/9.args",
    ] {
        std::fs::write(out.join(f), format!("their {f}\n")).unwrap();
    }
    let before = tree(&out);
    let o_s = out.display().to_string();
    let emit = ["sweep", &grid, "--emit", "slurm", "--out", &o_s];
    let o = env.run(&emit);
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.contains(&o_s) && err.contains("did not write") && err.contains("Fix:"),
        "{err}"
    );
    assert_eq!(tree(&out), before);
    let o = env.run(&[&emit[..], &["--force"]].concat());
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
    assert!(
        String::from_utf8_lossy(&o.stderr).contains("array-0.sbatch"),
        "{}",
        text(&o)
    );
    assert_eq!(tree(&out), before, "--force never replaces their files");

    // A new folder whose `tasks/` is a link to someone's folder.
    let fresh = env.path("fresh");
    std::fs::create_dir(&fresh).unwrap();
    std::os::unix::fs::symlink(out.join("tasks"), fresh.join("tasks")).unwrap();
    let f_s = fresh.display().to_string();
    let o = env.run(&["sweep", &grid, "--emit", "slurm", "--out", &f_s, "--force"]);
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
    assert!(text(&o).contains("symbolic link"), "{}", text(&o));
    assert_eq!(tree(&out), before, "nothing written through the link");
    assert_eq!(tree(&fresh).len(), 1, "{:?}", tree(&fresh));
}

/// Two points whose aliases make one file name (`a/b`, `a_b`) would share one log and one
/// `runs/` link: the grid is refused before anything runs, `--dry-run` included.
#[test]
fn points_whose_names_clash_are_refused_even_in_a_dry_run() {
    let env = Env::new();
    let path = env.path("clash.yaml");
    std::fs::write(
        &path,
        format!(
            "recipe: {}\naxes:\n  paper: [a/b, a_b]\n",
            binary::repo().join("recipes/hashed-ngrams.yaml").display()
        ),
    )
    .unwrap();
    let p = path.display().to_string();
    for args in [vec!["sweep", &p, "--dry-run"], vec!["sweep", &p]] {
        let o = env.run(&args);
        assert_eq!(o.status.code(), Some(1), "{}", text(&o));
        let out = text(&o);
        assert!(
            out.contains(&format!(
                "{p}:3: axes.paper: points `paper=a/b` and `paper=a_b`"
            )) && out.contains("Fix:")
                && out.contains("nothing was run"),
            "{out}"
        );
        assert!(!env.path("runs").exists() && !env.path("sweeps").exists());
    }
}

/// A grid's `recipe:` may name any file: until it reads as a recipe, the problem gives the
/// key and the path, never the file's text (a shadow file, which parses as a YAML mapping;
/// YAML whose parser message would quote a key).
#[test]
fn a_grid_recipe_that_is_not_a_recipe_is_refused_without_showing_its_text() {
    const SECRET: &str = "S3cr3tH4sh";
    let env = Env::new();
    for (name, content) in [
        (
            "shadow",
            format!("root:$6${SECRET}:19000:0:99999:7:::\nbin:*:19000:0:99999:7:::\n"),
        ),
        ("repeated.yaml", format!("{SECRET}: 1\n{SECRET}: 2\n")),
    ] {
        let target = env.path(name);
        std::fs::write(&target, content).unwrap();
        let grid = env.path("g.yaml");
        std::fs::write(&grid, format!("recipe: {}\nseeds: [1]\n", target.display())).unwrap();
        let o = env.run(&["sweep", &grid.display().to_string(), "--dry-run"]);
        assert_eq!(o.status.code(), Some(1), "{}", text(&o));
        let out = text(&o);
        assert!(!out.contains(SECRET), "{name}: its text is shown: {out}");
        assert!(
            out.contains(&target.display().to_string())
                && out.contains("`recipe:`")
                && out.contains("Fix:"),
            "{name}: {out}"
        );
    }
}

/// `harness sweep --dry-run GRID | head -1` panicked (`failed printing to stdout`, exit
/// 101). The plan of 600 points (about 160 kB, more than a pipe holds) into a pipe closed
/// after its first line: a quiet exit 0, no panic.
#[test]
fn a_dry_run_into_a_pipe_closed_early_exits_quietly() {
    use std::io::BufRead;
    let env = Env::new();
    let dims: Vec<String> = (1..=300).map(|d| d.to_string()).collect();
    let grid = binary::hashed_grid(env.home.path(), &format!("[{}]", dims.join(", ")));
    let mut child = env
        .cmd(&["sweep", &grid.display().to_string(), "--dry-run"])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut first = String::new();
    std::io::BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut first)
        .unwrap();
    assert!(first.contains("= 600 points"), "{first}");
    // The reader is dropped here: the rest of the plan meets a closed pipe.
    let o = child.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(0), "{stderr}");
    assert!(!stderr.contains("panicked"), "{stderr}");
    assert!(stderr.trim().is_empty(), "a quiet exit: {stderr}");
}
