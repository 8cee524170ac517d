//! Training across processes through MPI (`--features mpi`; `bash
//! scripts/install-test-deps.sh mpi` installs Open MPI and libclang), over loopback on this
//! machine: summing gradients over two ranks in one MPI buffer gives the sum both ranks'
//! gradients give in one process; `mpirun -np 2 harness train` trains the LASER default
//! (small corpora, no dropout) and a translation model to the weights of the one-process
//! run, within float rounding; a run stopped under two ranks resumes in one process to the
//! same weights; a rank killed mid-run ends the job with an error within the timeout.
#![cfg(feature = "mpi")]

mod binary;
#[path = "../crates/sweep/tests/cluster/mod.rs"]
mod cluster;
mod trained;

use burn::backend::{Autodiff, NdArray};
use burn::module::{AutodiffModule, Module, ModuleVisitor, Param};
use burn::nn::{Linear, LinearConfig};
use burn::optim::GradientsParams;
use burn::tensor::Tensor;
use harness_train::parallel::{Peer, Transport};

type B = Autodiff<NdArray>;

const CHILD: &str = "HARNESS_MPI_TEST_CHILD";

/// A small model, the same on every rank (constant weights: no random state to share).
fn model(device: &burn::backend::ndarray::NdArrayDevice) -> Linear<B> {
    LinearConfig::new(6, 3)
        .with_initializer(burn::nn::Initializer::Constant { value: 0.1 })
        .init(device)
}

/// Rank `rank`'s gradients of a loss on its own inputs (a fixed function of the rank).
fn grads_of(model: &Linear<B>, rank: usize) -> GradientsParams {
    let device = Default::default();
    let values: Vec<f32> = (0..30)
        .map(|i| ((i as f32) * 0.7 + rank as f32 * 3.1).sin())
        .collect();
    let x = Tensor::<B, 2>::from_data(burn::tensor::TensorData::new(values, [5, 6]), &device);
    let loss = model.forward(x).powi_scalar(2).mean();
    GradientsParams::from_grads(loss.backward(), model)
}

/// Every float parameter's gradient, flattened, in visiting order.
fn flat(model: &Linear<B>, grads: &GradientsParams) -> Vec<f32> {
    struct Collect<'a> {
        grads: &'a GradientsParams,
        out: Vec<f32>,
    }
    impl ModuleVisitor<B> for Collect<'_> {
        fn visit_float<const D: usize>(&mut self, param: &Param<Tensor<B, D>>) {
            if let Some(g) = self.grads.get::<NdArray, D>(param.id) {
                self.out
                    .extend(g.into_data().convert::<f32>().to_vec::<f32>().unwrap());
            }
        }
    }
    let mut c = Collect {
        grads,
        out: Vec::new(),
    };
    model.visit(&mut c);
    c.out
}

/// One rank (run by `mpirun`, not by `cargo test` directly: then it does nothing).
#[test]
fn mpi_rank() {
    if std::env::var_os(CHILD).is_none() {
        return;
    }
    let world = harness_train::mpi_world::init().unwrap();
    assert_eq!(world.size, 2);
    let device = Default::default();
    let m = model(&device);
    let mut mine = grads_of(&m, world.rank);
    let peer = Peer {
        rank: world.rank,
        peers: world.size,
        transport: Transport::Mpi,
    };
    peer.reduce_gradients::<B, Linear<B>>(&m.clone(), &mut mine, &device)
        .unwrap();
    let got = flat(&m, &mine);
    let mut want = flat(&m, &grads_of(&m, 0));
    for (w, o) in want.iter_mut().zip(flat(&m, &grads_of(&m, 1))) {
        *w += o;
    }
    assert_eq!(got.len(), want.len());
    for (g, w) in got.iter().zip(&want) {
        assert!((g - w).abs() <= 1e-5 * w.abs().max(1.0), "{g} vs {w}");
    }
    let _ = m.valid();
    harness_train::mpi_world::finish();
    println!("rank {} of {}: gradients summed", world.rank, world.size);
}

#[test]
fn two_ranks_sum_their_gradients_in_one_buffer() {
    let exe = std::env::current_exe().unwrap();
    let out = std::process::Command::new("mpirun")
        .args(["--oversubscribe", "-np", "2"])
        .arg(&exe)
        .args(["--exact", "mpi_rank", "--nocapture", "--test-threads", "1"])
        .env(CHILD, "1")
        .env("OMPI_ALLOW_RUN_AS_ROOT", "1")
        .env("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1")
        .env("HARNESS_MPI_TIMEOUT", "60")
        .output()
        .expect("mpirun (scripts/install-mpi.sh installs Open MPI)");
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(out.status.success(), "{text}");
    for rank in 0..2 {
        assert!(
            text.contains(&format!("rank {rank} of 2: gradients summed")),
            "{text}"
        );
    }
}

/// `mpirun --oversubscribe -np N harness ARGS` in the clean environment of
/// [`binary::command`] (root allowed: CI runs as root).
fn mpirun(home: &std::path::Path, n: usize, args: &[&str]) -> std::process::Output {
    let harness = binary::command(home, args);
    let mut c = std::process::Command::new("mpirun");
    c.args(["--oversubscribe", "-np", &n.to_string()])
        .arg(harness.get_program())
        .args(harness.get_args())
        .current_dir(binary::repo())
        .env("OMPI_ALLOW_RUN_AS_ROOT", "1")
        .env("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1")
        .env("HARNESS_MPI_TIMEOUT", "120");
    for (k, v) in harness.get_envs() {
        match v {
            Some(v) => c.env(k, v),
            None => c.env_remove(k),
        };
    }
    c.output()
        .expect("mpirun (bash scripts/install-test-deps.sh mpi)")
}

/// `(loss, tokens)` of each step of run `dir`.
fn steps(dir: &std::path::Path) -> Vec<(f64, u64)> {
    std::fs::read_to_string(dir.join("train/metrics.jsonl"))
        .unwrap()
        .lines()
        .map(|l| {
            let v: serde_json::Value = serde_json::from_str(l).unwrap();
            (v["loss"].as_f64().unwrap(), v["tokens"].as_u64().unwrap())
        })
        .collect()
}

/// The same steps (tokens, loss within rounding) and the same weights within `tolerance`
/// of the largest weight.
fn assert_same_training(one: &std::path::Path, two: &std::path::Path, n: usize, tolerance: f32) {
    let (a, b) = (steps(one), steps(two));
    assert_eq!(a.len(), n, "{a:?}");
    assert_eq!(a.len(), b.len());
    for (i, (x, y)) in a.iter().zip(&b).enumerate() {
        assert_eq!(x.1, y.1, "step {}: tokens", i + 1);
        assert!(
            (x.0 - y.0).abs() <= 1e-5 * x.0.abs().max(1.0),
            "step {}: {x:?} vs {y:?}",
            i + 1
        );
    }
    let (diff, scale) = trained::max_difference(one, two);
    assert!(
        diff <= tolerance * scale,
        "max weight difference {diff} (scale {scale})"
    );
}

/// `train RECIPE [--set ...] --out RUN` arguments.
fn train_args(recipe: &std::path::Path, sets: &[&str], run: &std::path::Path) -> Vec<String> {
    let mut a: Vec<String> = vec!["train".into(), recipe.display().to_string()];
    a.extend(sets.iter().map(|s| s.to_string()));
    a.push("--out".into());
    a.push(run.display().to_string());
    a
}

fn strs(v: &[String]) -> Vec<&str> {
    v.iter().map(String::as_str).collect()
}

/// The LASER default (a ranking loss with in-batch negatives): two MPI ranks train the
/// weights of one process. Each rank encodes its half of each batch, gathers the other's
/// sentence vectors and ranks against the whole batch (`Step::gather`), so the summed
/// gradients are the one-process batch's.
#[test]
fn two_mpi_ranks_train_the_laser_default_to_the_one_process_weights() {
    let home = tempfile::tempdir().unwrap();
    let out = tempfile::tempdir().unwrap();
    let recipe = binary::repo().join("recipes/laser.yaml");
    let mut sets: Vec<&str> = binary::SMALL_LASER.to_vec();
    sets.extend([
        "--set",
        "train={steps: 4, batch_tokens: 300, max_len: 20, checkpoint_every: 4}",
        "--set",
        "optimizer.dropout=0.0",
    ]);
    let (one, ranks) = (out.path().join("one"), out.path().join("ranks"));
    let o = binary::harness(home.path(), &strs(&train_args(&recipe, &sets, &one)));
    assert!(o.status.success(), "{}", binary::text(&o));
    let o = mpirun(home.path(), 2, &strs(&train_args(&recipe, &sets, &ranks)));
    let log = binary::text(&o);
    assert!(o.status.success(), "{log}");
    assert!(log.contains("MPI: 2 ranks"), "{log}");
    assert!(log.contains("collectives"), "{log}");
    // Rank 0 alone reports and writes the run directory.
    assert_eq!(log.matches("trained 4/4 steps").count(), 1, "{log}");
    // Each rank pads its half of a batch to its own longest sentence and its thread pool
    // splits the products otherwise, so the sums round differently; Adam divides gradients
    // of ~1e-2 by their own scale, which lifts those last-bit differences to ~1e-5 of a
    // weight after four steps.
    assert_same_training(&one, &ranks, 4, 1e-4);
}

/// A rank killed mid-run (SIGKILL, so no error of its own and no `MPI_Finalize`) ends the
/// job with an error within the collective timeout, not a hang. The killed rank's wrapper
/// stays alive, so the launcher sees no exit: only the survivor's watchdog (or MPI's own
/// detection of the lost peer) can end the job.
#[test]
fn a_killed_rank_ends_the_job_with_an_error_within_the_timeout() {
    let home = tempfile::tempdir().unwrap();
    let out = tempfile::tempdir().unwrap();
    let recipe = out.path().join("tiny.yaml");
    std::fs::write(&recipe, binary::TINY_TRANSLATION).unwrap();
    let run = out.path().join("run");
    // Each batch the whole corpus: no end-of-epoch batch of fewer examples than ranks (a
    // refusal) can end the run before the kill does, however long the kill takes.
    let args = train_args(
        &recipe,
        &[
            "--set",
            "train.steps=100000",
            "--set",
            "train.batch_tokens=100000",
        ],
        &run,
    );
    // Rank 1 runs harness in the background, kills it once rank 0 has logged two steps,
    // then waits (as a hung rank would) until the launcher ends it.
    let wrapper = format!(
        r#"if [ "$OMPI_COMM_WORLD_RANK" = 1 ]; then
  "$@" & pid=$!
  until [ "$(wc -l 2>/dev/null < {metrics:?} || echo 0)" -ge 2 ]; do
    kill -0 "$pid" 2>/dev/null || exit 3
    sleep 0.1
  done
  kill -9 "$pid"
  echo "rank 1 killed" >&2
  exec sleep 600
else
  exec "$@"
fi"#,
        metrics = run.join("train/metrics.jsonl").display().to_string()
    );
    let harness = binary::command(home.path(), &strs(&args));
    let mut c = std::process::Command::new("mpirun");
    c.args([
        "--oversubscribe",
        "-np",
        "2",
        "bash",
        "-c",
        &wrapper,
        "rank",
    ])
    .arg(harness.get_program())
    .args(harness.get_args())
    .current_dir(binary::repo())
    .env("OMPI_ALLOW_RUN_AS_ROOT", "1")
    .env("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1")
    .env("HARNESS_MPI_TIMEOUT", "20");
    for (k, v) in harness.get_envs() {
        match v {
            Some(v) => c.env(k, v),
            None => c.env_remove(k),
        };
    }
    let started = std::time::Instant::now();
    let o = c.output().expect("mpirun");
    let took = started.elapsed();
    let log = binary::text(&o);
    eprintln!("{log}\nthe job ended after {:.1} s", took.as_secs_f64());
    assert!(log.contains("rank 1 killed"), "{log}");
    assert!(!o.status.success(), "{log}");
    // The survivor's watchdog names the collective it waited in (which one depends on
    // where in its step the peer died).
    assert!(
        log.contains("error: rank 0: the ") && log.contains("did not complete within 20 s"),
        "{log}"
    );
    // 20 s of timeout, plus the launcher's teardown.
    assert!(took.as_secs() < 90, "took {took:?}: {log}");
}

/// A translation model (no in-batch negatives): two MPI ranks train the weights of one
/// process, within float rounding.
#[test]
fn two_mpi_ranks_train_the_one_process_weights() {
    let home = tempfile::tempdir().unwrap();
    let out = tempfile::tempdir().unwrap();
    let recipe = out.path().join("tiny.yaml");
    std::fs::write(&recipe, binary::TINY_TRANSLATION).unwrap();
    let (one, ranks) = (out.path().join("one"), out.path().join("ranks"));
    let o = binary::harness(home.path(), &strs(&train_args(&recipe, &[], &one)));
    assert!(o.status.success(), "{}", binary::text(&o));
    let o = mpirun(home.path(), 2, &strs(&train_args(&recipe, &[], &ranks)));
    assert!(o.status.success(), "{}", binary::text(&o));
    assert_same_training(&one, &ranks, 5, 1e-5);
}

/// A run stopped under two ranks resumes in one process (and the reverse would do alike:
/// a checkpoint holds no rank count): the weights are the uninterrupted one-process run's.
#[test]
fn a_run_of_two_ranks_resumes_in_one_process() {
    let home = tempfile::tempdir().unwrap();
    let out = tempfile::tempdir().unwrap();
    let recipe = out.path().join("tiny.yaml");
    std::fs::write(&recipe, binary::TINY_TRANSLATION).unwrap();
    let every = ["--set", "train.checkpoint_every=2"];
    let (one, mixed) = (out.path().join("one"), out.path().join("mixed"));
    let o = binary::harness(home.path(), &strs(&train_args(&recipe, &every, &one)));
    assert!(o.status.success(), "{}", binary::text(&o));
    let mut first = train_args(&recipe, &every, &mixed);
    first.extend(["--stop-after".to_string(), "2".to_string()]);
    let o = mpirun(home.path(), 2, &strs(&first));
    assert!(o.status.success(), "{}", binary::text(&o));
    assert!(
        binary::text(&o).contains("trained 2/5 steps"),
        "{}",
        binary::text(&o)
    );
    let o = binary::harness(home.path(), &strs(&train_args(&recipe, &every, &mixed)));
    assert!(o.status.success(), "{}", binary::text(&o));
    assert!(
        binary::text(&o).contains("trained 5/5 steps"),
        "{}",
        binary::text(&o)
    );
    assert_same_training(&one, &mixed, 5, 1e-5);
}

/// `harness train --emit slurm` writes one job's batch script, which passes `bash -n` and
/// shellcheck, and which the local one-node Slurm cluster (`scripts/slurm-local.sh`) runs
/// as two tasks started by `srun --mpi=pmix`: they train the one-process weights into the
/// recipe's default run directory. Skipped, saying why, only when the daemons cannot start.
#[test]
fn an_emitted_slurm_job_trains_on_two_tasks_of_the_local_cluster() {
    let home = tempfile::tempdir().unwrap();
    let out = tempfile::tempdir().unwrap();
    let recipe = out.path().join("tiny.yaml");
    std::fs::write(&recipe, binary::TINY_TRANSLATION).unwrap();
    let runs = home.path().join("runs");
    let job = out.path().join("job");
    let o = binary::command(
        home.path(),
        &[
            "train",
            &recipe.display().to_string(),
            "--emit",
            "slurm",
            "--nodes",
            "1",
            "--tasks-per-node",
            "2",
            "--out",
            &job.display().to_string(),
        ],
    )
    .env("HARNESS_RUNS_DIR", &runs)
    .output()
    .unwrap();
    let log = binary::text(&o);
    assert!(o.status.success(), "{log}");
    assert!(log.contains("1 node(s) × 2 rank(s)"), "{log}");
    let script = job.join("train.sbatch");
    let o = std::process::Command::new("bash")
        .arg("-n")
        .arg(&script)
        .output()
        .unwrap();
    assert!(o.status.success(), "bash -n: {}", binary::text(&o));
    let o = std::process::Command::new("bash")
        .arg(binary::repo().join("scripts/install-test-deps.sh"))
        .arg("shellcheck")
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", binary::text(&o));
    let o = std::process::Command::new("shellcheck")
        .args(["-s", "bash"])
        .arg(&script)
        .output()
        .unwrap();
    assert!(o.status.success(), "shellcheck: {}", binary::text(&o));

    let cluster = match cluster::Cluster::start() {
        Ok(c) => c,
        Err(reason) => {
            eprintln!(
                "SKIPPED (the job's run): the local Slurm cluster cannot start here: {reason}"
            );
            return;
        }
    };
    let o = cluster
        .cmd("sbatch")
        .arg("--parsable")
        .arg(&script)
        .env("HARNESS_HOME", home.path())
        .env("HARNESS_RUNS_DIR", &runs)
        .env("OMPI_ALLOW_RUN_AS_ROOT", "1")
        .env("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1")
        .env("HARNESS_MPI_TIMEOUT", "120")
        .env_remove("HARNESS_DATA_DIR")
        .env_remove("HARNESS_MIRRORS")
        .env_remove("HARNESS_CONFIG")
        .output()
        .unwrap();
    assert!(o.status.success(), "sbatch: {}", binary::text(&o));
    cluster.wait_until(
        "the training job to end",
        std::time::Duration::from_secs(600),
        |jobs| jobs.is_empty(),
    );
    let logs: Vec<String> = std::fs::read_dir(job.join("logs"))
        .unwrap()
        .map(|e| std::fs::read_to_string(e.unwrap().path()).unwrap())
        .collect();
    let log = logs.join("\n");
    assert!(log.contains("2 rank(s)"), "{log}");
    assert!(log.contains("MPI: 2 ranks"), "{log}");
    assert_eq!(log.matches("trained 5/5 steps").count(), 1, "{log}");
    // The run directory is the recipe's default one under HARNESS_RUNS_DIR.
    let run = std::fs::read_dir(&runs)
        .unwrap()
        .map(|e| e.unwrap().path())
        .find(|p| {
            p.file_name()
                .is_some_and(|n| n.to_string_lossy().starts_with("tiny-translation-"))
        })
        .unwrap_or_else(|| panic!("no run directory under {}: {log}", runs.display()));
    let one = out.path().join("one");
    let o = binary::harness(home.path(), &strs(&train_args(&recipe, &[], &one)));
    assert!(o.status.success(), "{}", binary::text(&o));
    assert_same_training(&one, &run, 5, 1e-5);
}
