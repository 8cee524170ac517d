//! `harness sweep --emit slurm` on a real one-node Slurm cluster (`scripts/slurm-local.sh`):
//! a 4-point grid (hashed n-grams, 2 sizes × 2 seeds, STS-B test) split into two arrays
//! (`max_array_size: 3`, `%2` throttle) runs as array tasks of the real binary, and the
//! gather job (`harness sweep GRID --report-only`, `afterok`) renders the ablation table
//! from their run directories. Skipped, saying why, only when the daemons cannot start.

mod binary;
#[path = "../crates/sweep/tests/cluster/mod.rs"]
mod cluster;

use binary::{command, text};
use std::time::Duration;

#[test]
fn a_grid_runs_as_a_slurm_array_and_the_gather_job_renders_its_table() {
    let cluster = match cluster::Cluster::start() {
        Ok(c) => c,
        Err(reason) => {
            eprintln!("SKIPPED: the local Slurm cluster cannot start here: {reason}");
            return;
        }
    };
    let home = tempfile::tempdir().unwrap();
    let p = |rel: &str| home.path().join(rel);
    let harness = |args: &[&str]| {
        let mut c = command(home.path(), args);
        c.env("HARNESS_RUNS_DIR", p("runs"))
            .env("HARNESS_SWEEPS_DIR", p("sweeps"))
            .env("SLURM_CONF", &cluster.conf);
        c
    };
    // Installed once before the tasks run side by side.
    let o = harness(&["datasets", "fetch", "stsbenchmark"])
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", text(&o));
    let grid = p("grid.yaml");
    std::fs::write(
        &grid,
        format!(
            "name: slurm-dims\nrecipe: {}\nset: {{evaluate: [stsb-test]}}\naxes: {{model.encoder.dim: [16, 32]}}\nseeds: [1, 2]\nslurm: {{max_array_size: 3, throttle: 2, cpus_per_task: 1}}\n",
            binary::repo().join("recipes/hashed-ngrams.yaml").display()
        ),
    )
    .unwrap();
    let g = grid.display().to_string();
    let out = p("slurm");
    let o = harness(&[
        "sweep",
        &g,
        "--emit",
        "slurm",
        "--out",
        &out.display().to_string(),
    ])
    .output()
    .unwrap();
    assert!(o.status.success(), "{}", text(&o));
    assert!(
        text(&o).contains("4 array task(s) in 2 array(s)"),
        "{}",
        text(&o)
    );

    let o = cluster
        .cmd("bash")
        .arg(out.join("submit.sh"))
        .env("HARNESS_HOME", home.path())
        .env("HARNESS_RUNS_DIR", p("runs"))
        .env("HARNESS_SWEEPS_DIR", p("sweeps"))
        .env_remove("HARNESS_DATA_DIR")
        .env_remove("HARNESS_MIRRORS")
        .env_remove("HARNESS_CONFIG")
        .output()
        .unwrap();
    assert!(o.status.success(), "submit.sh: {}", text(&o));
    cluster.wait_until("the sweep to finish", Duration::from_secs(600), |jobs| {
        jobs.is_empty()
    });
    let logs: Vec<String> = std::fs::read_dir(out.join("logs"))
        .unwrap()
        .map(|e| {
            let e = e.unwrap();
            format!(
                "== {}\n{}",
                e.path().display(),
                std::fs::read_to_string(e.path()).unwrap_or_default()
            )
        })
        .collect();
    let sweeps: Vec<_> = std::fs::read_dir(p("sweeps"))
        .unwrap_or_else(|e| panic!("no sweep directory ({e}); logs:\n{}", logs.join("\n")))
        .map(|e| e.unwrap().path())
        .collect();
    assert_eq!(sweeps.len(), 1, "{sweeps:?}");
    let ledger: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(sweeps[0].join("status.json")).unwrap())
            .unwrap();
    let states: Vec<&str> = ledger["points"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["state"].as_str().unwrap())
        .collect();
    assert_eq!(states, ["reused"; 4], "logs:\n{}", logs.join("\n"));
    let table = std::fs::read_to_string(sweeps[0].join("report/tables/sweep-slurm-dims.csv"))
        .unwrap_or_else(|e| panic!("no table ({e}); logs:\n{}", logs.join("\n")));
    assert_eq!(table.matches("(n=2)").count(), 2, "{table}");
    // The array tasks ran the points, not the gather: every point's log is a Slurm log.
    assert_eq!(
        logs.iter()
            .filter(|l| !l.contains("/gather-") && l.contains("stsb-test"))
            .count(),
        4,
        "{}",
        logs.join("\n")
    );
}
