#!/usr/bin/env python3
"""SentEval's own code beside `harness eval` on SentEval's transfer tasks: wall time and accuracy.

Runs, on the same data, machine and thread count, the seven SentEval transfer tasks MR, CR,
SUBJ, MPQA, SST-2, TREC and MRPC (harness benchmarks mr, cr, subj, mpqa, sst2, trec, mrpc)
with all-MiniLM-L6-v2:

1. facebookresearch/SentEval's own code, the model through sentence-transformers as its
   batcher, params {'task_path': ..., 'usepytorch': False, 'kfold': K} (scikit-learn's
   LogisticRegression, lbfgs, with SentEval's C grid), each task timed as the wall of
   `se.eval(task)` (embedding and classifier; the model is loaded before);
2. `harness eval --encoder all-MiniLM-L6-v2 --bench mr,... --set TASK.kfold=K` with a cold
   embedding cache (a fresh HARNESS_HOME; datasets and the model folder are shared, installed
   before the clock starts), each task timed by its result file's `seconds`, accuracy read from
   its result file's `main_score`; then (unless --no-warm) the same command again on the
   now-warm cache, whose `seconds` are the tasks without embedding (data, classifiers).

and prints one table: per task SentEval wall, harness wall, their ratio (SentEval / harness),
both accuracies and |difference|, with totals, and where each side's time goes (embedding vs
the rest). The classifiers differ: SentEval's sklearn path (lbfgs logistic regression, C grid
2^-2..2^3 or 2^-1..2^5) against harness's default, SentEval's PyTorch logistic regression (Adam,
early stopping, weight-decay grid 1e-5..1e-2); accuracies agree within noise, not exactly.
`--classifier pytorch` runs SentEval's PyTorch classifier instead (usepytorch True, its default,
the one harness reimplements), patched from here to run on the CPU: the same classifier on
both sides, and much slower on SentEval's (on MPQA: 414 s against sklearn's 5 s).

Both sides run with T threads (default 2): torch.set_num_threads, OMP/MKL/OPENBLAS_NUM_THREADS
and threadpoolctl for SentEval (numpy/scipy BLAS in the sklearn fits), RAYON_NUM_THREADS for
harness (its global pool). The Python side's idle threads sleep instead of spinning
(OMP_WAIT_POLICY=PASSIVE, OPENBLAS_THREAD_TIMEOUT=4; `--wait library` keeps the libraries'
defaults), which on a shared machine spares SentEval a many-fold slowdown. The table's header
records the load average before and after: compare runs only on a quiet machine.

SentEval is not shipped with harness: get it with

    git clone https://github.com/facebookresearch/SentEval

and pass the checkout as --senteval DIR (or $SENTEVAL_DIR); its files are read, never changed
(what no longer runs on current numpy/scikit-learn/Python is patched from here at run time).
Its data/downstream layout is built in a temporary folder from harness's shared copy
(../shared/datasets/senteval, or $HARNESS_SHARED_DATASETS/senteval, or --data DIR), whose files
over 512 KiB are gzipped: those are decompressed, the rest symlinked.

The venv is scripts/pyenv.py's (torch, sentence-transformers, scikit-learn, scipy at its pins).
The harness binary: --harness BIN, $HARNESS_BIN, else target/release/harness, else `harness`
on PATH. The model folder: --model DIR (default $HARNESS_MODELS_DIR/all-MiniLM-L6-v2, as
scripts/bench_st.py; fetched with `harness models fetch all-MiniLM-L6-v2` when missing).

Usage: python3 scripts/bench_senteval.py [--senteval DIR] [--tasks mr,cr,...] [--threads 2]
       [--kfold 5] [--classifier sklearn|pytorch] [--model DIR] [--harness BIN] [--data DIR]
       [--side both|senteval|harness]
       [--wait passive|library] [--no-warm] [--json FILE] [--keep DIR] [--verbose]
       [--setup-only]
"""

import argparse
import gzip
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
import warnings
from pathlib import Path

sys.dont_write_bytecode = True  # no __pycache__ in scripts/
sys.path.insert(0, str(Path(__file__).resolve().parent))
import pyenv  # noqa: E402
from bench_st import default_model  # noqa: E402

PACKAGES = ["torch", "sentence-transformers", "transformers", "numpy", "scikit-learn", "scipy"]
REPO = Path(__file__).resolve().parent.parent

# harness benchmark -> (SentEval task name, folder under data/downstream/).
TASKS = {
    "mr": ("MR", "MR"),
    "cr": ("CR", "CR"),
    "subj": ("SUBJ", "SUBJ"),
    "mpqa": ("MPQA", "MPQA"),
    "sst2": ("SST2", "SST/binary"),
    "trec": ("TREC", "TREC"),
    "mrpc": ("MRPC", "MRPC"),
}
# The tasks whose SentEval classifier cross-validates (SST-2 uses its dev split instead).
KFOLD_TASKS = {"mr", "cr", "subj", "mpqa", "trec", "mrpc"}
MODEL = "all-MiniLM-L6-v2"
# Idle worker threads sleep instead of spinning: torch's OpenMP pool (libgomp) and the OpenBLAS
# pool under numpy/scipy (2^4 cycles before sleeping; its default is 2^28). With the libraries'
# defaults a 2-thread run beside any other load spins away its cores: on the 2-core development
# machine beside a build, SentEval's MPQA classifiers took 203 s instead of 5 s (1 thread) or
# 10-12 s (2 threads, passive), and its MPQA embedding 60 instead of ~300 sentences/s. This
# only makes the SentEval side faster; `--wait library` keeps the defaults.
PASSIVE_WAIT = {"OMP_WAIT_POLICY": "PASSIVE", "OPENBLAS_THREAD_TIMEOUT": "4"}


def default_shared() -> Path:
    shared = os.environ.get("HARNESS_SHARED_DATASETS", str(REPO.parent / "shared" / "datasets"))
    return Path(shared) / "senteval"


def default_harness() -> str:
    env = os.environ.get("HARNESS_BIN")
    if env:
        return env
    built = REPO / "target" / "release" / "harness"
    if built.is_file():
        return str(built)
    return shutil.which("harness") or str(built)


def harness_home() -> Path:
    """HARNESS_HOME as harness resolves it (docs/settings.md)."""
    home = os.environ.get("HARNESS_HOME")
    if home:
        return Path(home)
    return Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "harness"


def materialise(shared: Path, dest: Path, benches) -> Path:
    """SentEval's `data/downstream/<TASK>/` layout under `dest` for the tasks asked:
    `name.gz` files decompressed to `name`, the others symlinked. Returns SentEval's
    task_path (`dest`, which holds `downstream/`)."""
    for b in benches:
        sub = TASKS[b][1]
        src, out = shared / sub, dest / "downstream" / sub
        if not src.is_dir():
            raise SystemExit(f"{src}: no such folder (pass --data DIR, SentEval's data/downstream)")
        out.mkdir(parents=True, exist_ok=True)
        for f in sorted(src.iterdir()):
            if not f.is_file():
                continue
            if f.name.endswith(".gz"):
                target = out / f.name[: -len(".gz")]
                with gzip.open(f, "rb") as r, open(target, "wb") as w:
                    shutil.copyfileobj(r, w)
            else:
                target = out / f.name
                if not target.exists():
                    target.symlink_to(f.resolve())
    return dest


def patch_senteval(pytorch: bool) -> None:
    """What SentEval (2019) needs from a current Python: `inspect.getargspec` (gone in 3.11;
    used by `utils.get_optimizer`, on SentEval's PyTorch path only). With `pytorch`, its
    PyTorch classifier (`tools/classifier.py`, written for a GPU) made to run on the CPU:
    `.cuda()` a no-op, the data prepared on the CPU, and the loss summed as SentEval asks
    (`loss_fn.size_average = False`, which current torch ignores once the loss is built; the
    published numbers and harness's default `reduction: sum` add it up)."""
    import inspect

    if not hasattr(inspect, "getargspec"):
        inspect.getargspec = inspect.getfullargspec
    if not pytorch:
        return
    import torch
    from torch import nn

    import senteval.tools.classifier as classifier

    nn.Module.cuda = lambda self, *a, **k: self
    torch.Tensor.cuda = lambda self, *a, **k: self
    prepare = classifier.PyTorchClassifier.prepare_split

    def prepare_on_cpu(self, *a, **k):
        # `cudaEfficient` is what makes prepare_split pick the CPU; only for this call.
        saved, self.cudaEfficient = self.cudaEfficient, True
        try:
            return prepare(self, *a, **k)
        finally:
            self.cudaEfficient = saved

    classifier.PyTorchClassifier.prepare_split = prepare_on_cpu
    init = classifier.MLP.__init__

    def init_summed(self, *a, **k):
        init(self, *a, **k)
        self.loss_fn = nn.CrossEntropyLoss(reduction="sum")

    classifier.MLP.__init__ = init_summed


def run_senteval(args, benches, task_path: Path) -> dict:
    """SentEval's engine on each task in turn: {bench: {acc, seconds, encode_seconds, ...}},
    plus `_load_seconds` (the model load)."""
    import logging

    import torch
    from sentence_transformers import SentenceTransformer
    from sklearn.exceptions import ConvergenceWarning
    from threadpoolctl import threadpool_limits

    torch.set_num_threads(args.threads)
    sys.path.insert(0, str(args.senteval))
    patch_senteval(args.classifier == "pytorch")
    import senteval

    logging.basicConfig(format="%(asctime)s : %(message)s",
                        level=logging.INFO if args.verbose else logging.WARNING)
    # SentEval's sklearn fits (lbfgs, max_iter 100) warn about convergence on most tasks.
    warnings.filterwarnings("ignore", category=ConvergenceWarning)
    warnings.filterwarnings("ignore", category=FutureWarning)

    start = time.perf_counter()
    model = SentenceTransformer(str(args.model), device="cpu")
    load = time.perf_counter() - start
    clock = {"encode": 0.0, "sentences": 0}

    def batcher(params, batch):
        # SentEval hands over token lists (str.split() of each line); the joined text is what
        # harness embeds (the line, trimmed), to the same WordPiece tokens.
        sentences = [" ".join(tokens) for tokens in batch]
        t = time.perf_counter()
        emb = model.encode(sentences, batch_size=args.st_batch, convert_to_numpy=True,
                           show_progress_bar=False)
        clock["encode"] += time.perf_counter() - t
        clock["sentences"] += len(sentences)
        return emb

    params = {"task_path": str(task_path), "usepytorch": args.classifier == "pytorch",
              "kfold": args.kfold}
    se = senteval.engine.SE(params, batcher)
    out = {"_load_seconds": load}
    with threadpool_limits(limits=args.threads):
        for b in benches:
            clock.update(encode=0.0, sentences=0)
            print(f"SentEval {TASKS[b][0]} ...", file=sys.stderr, flush=True)
            t = time.perf_counter()
            r = se.eval(TASKS[b][0])
            wall = time.perf_counter() - t
            out[b] = {
                "acc": float(r["acc"]),
                "devacc": float(r["devacc"]),
                "seconds": wall,
                "encode_seconds": clock["encode"],
                "sentences": clock["sentences"],
            }
            print(f"  {wall:.1f} s (embedding {clock['encode']:.1f} s, "
                  f"{clock['sentences']} sentences), acc {r['acc']}", file=sys.stderr, flush=True)
    return out


def harness_env(args, home: Path) -> dict:
    env = os.environ.copy()
    env.pop("HARNESS_CACHE_DIR", None)  # the cache must be the fresh home's
    env.update(
        HARNESS_HOME=str(home),
        HARNESS_DATA_DIR=str(args.data_dir),
        HARNESS_MODELS_DIR=str(args.model.parent),
        RAYON_NUM_THREADS=str(args.threads),
    )
    return env


def encoder_spec(args) -> str:
    return MODEL if args.model.name == MODEL else str(args.model)


def run_harness(args, benches, env: dict, out: Path, log: Path) -> dict:
    """One `harness eval` into `out`: {bench: {acc, seconds, hits, misses}}, `_wall` (the
    process), read from the result files."""
    cmd = [args.harness, "eval", "--encoder", encoder_spec(args), "--bench", ",".join(benches),
           "--out", str(out)]
    for b in benches:
        if b in KFOLD_TASKS:
            cmd += ["--set", f"{b}.kfold={args.kfold}"]
    print("$ " + " ".join(cmd), file=sys.stderr, flush=True)
    t = time.perf_counter()
    with open(log, "w") as f:
        rc = subprocess.run(cmd, cwd=REPO, env=env, stdout=f, stderr=subprocess.STDOUT).returncode
    wall = time.perf_counter() - t
    res = {"_wall": wall, "_command": cmd, "_rc": rc}
    for b in benches:
        p = out / f"{b}.json"
        if not p.is_file():
            raise SystemExit(f"harness wrote no {p} (exit {rc}); its output: {log}")
        r = json.loads(p.read_text())
        if r.get("error") or r.get("main_score") is None:
            raise SystemExit(f"{b} failed in harness: {r.get('error')} (output: {log})")
        res[b] = {
            "acc": float(r["main_score"]),
            "seconds": float(r["seconds"]),
            "hits": r["cache"]["hits"],
            "misses": r["cache"]["misses"],
        }
    print(f"  harness: {wall:.1f} s wall (exit {rc})", file=sys.stderr, flush=True)
    return res


def fmt(x, spec=".1f"):
    return "-" if x is None else format(x, spec)


def print_table(args, benches, se, hc, hw, loads, versions):
    print(f"SentEval transfer tasks, {MODEL}, {args.threads} threads, kfold {args.kfold} "
          f"(same data and machine)")
    for line in versions:
        print(f"  {line}")
    if args.classifier == "sklearn":
        print("  classifiers differ: SentEval = sklearn LogisticRegression (lbfgs, max_iter 100) "
              "with its C grid (usepytorch False); harness = its default, SentEval's PyTorch "
              "logistic regression (Adam, early stopping, weight-decay grid 1e-5..1e-2)")
    else:
        print("  same classifier: SentEval's PyTorch logistic regression (usepytorch True, on the "
              "CPU, summed loss) and harness's reimplementation of it (its default)")
    print(f"  Python side's idle threads: {args.wait}"
          + (f" ({', '.join(f'{k}={v}' for k, v in PASSIVE_WAIT.items())})"
             if args.wait == "passive" else " (libraries' spinning defaults)"))
    print(f"  load average before: {loads[0]}  after: {loads[1]}")
    print()
    head = ["task", "SentEval s", "(embed)", "harness s", "(no embed)", "ratio",
            "SentEval acc", "harness acc", "|Δ|"]
    rows = []
    tot = {"se": 0.0, "se_enc": 0.0, "h": 0.0, "hw": 0.0}
    for b in benches:
        s, h, w = se.get(b), hc.get(b), hw.get(b)
        ratio = s["seconds"] / h["seconds"] if s and h else None
        delta = abs(s["acc"] - h["acc"]) if s and h else None
        if s:
            tot["se"] += s["seconds"]
            tot["se_enc"] += s["encode_seconds"]
        if h:
            tot["h"] += h["seconds"]
        if w:
            tot["hw"] += w["seconds"]
        rows.append([TASKS[b][0], fmt(s and s["seconds"]), fmt(s and s["encode_seconds"]),
                     fmt(h and h["seconds"]), fmt(w and w["seconds"]), fmt(ratio, ".2f"),
                     fmt(s and s["acc"], ".2f"), fmt(h and h["acc"], ".2f"), fmt(delta, ".2f")])
    ratio = tot["se"] / tot["h"] if se and hc else None
    rows.append(["total", fmt(tot["se"] if se else None), fmt(tot["se_enc"] if se else None),
                 fmt(tot["h"] if hc else None), fmt(tot["hw"] if hw else None), fmt(ratio, ".2f"),
                 "", "", ""])
    widths = [max(len(str(r[i])) for r in rows + [head]) for i in range(len(head))]
    for r in [head] + rows:
        print("  ".join(str(c).rjust(wd) if i else str(c).ljust(wd)
                        for i, (c, wd) in enumerate(zip(r, widths))))
    print()
    print("ratio = SentEval wall / harness wall (target ≥ 5); |Δ| in accuracy points (target ≤ 1.5).")
    print("(embed): SentEval's time inside sentence-transformers' encode; (no embed): harness's "
          "second run on the warm embedding cache (data loading and classifiers only).")
    if se:
        print(f"SentEval end to end: model load {se['_load_seconds']:.1f} s + tasks {tot['se']:.1f} s "
              f"= {se['_load_seconds'] + tot['se']:.1f} s; classifiers and the rest "
              f"{tot['se'] - tot['se_enc']:.1f} s")
    if hc:
        print(f"harness end to end (cold cache): process wall {hc['_wall']:.1f} s "
              f"(tasks {tot['h']:.1f} s)" + (f"; warm-cache rerun {hw['_wall']:.1f} s "
                                             f"(tasks {tot['hw']:.1f} s): embedding ≈ "
                                             f"{tot['h'] - tot['hw']:.1f} s" if hw else ""))
    if se and hc:
        e2e = (se["_load_seconds"] + tot["se"]) / hc["_wall"]
        print(f"end-to-end ratio (SentEval incl. model load / harness process wall): {e2e:.2f}")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--senteval", type=Path, default=os.environ.get("SENTEVAL_DIR"),
                    help="a checkout of facebookresearch/SentEval (or $SENTEVAL_DIR)")
    ap.add_argument("--tasks", default=",".join(TASKS),
                    help="comma-separated harness benchmark names (default: all seven)")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--kfold", type=int, default=5)
    ap.add_argument("--st-batch", type=int, default=32,
                    help="sentence-transformers' encode batch (its default, 32)")
    ap.add_argument("--model", type=Path, default=None)
    ap.add_argument("--harness", default=default_harness())
    ap.add_argument("--data", type=Path, default=default_shared(),
                    help="SentEval's data/downstream folder (plain or name.gz files)")
    ap.add_argument("--side", choices=["both", "senteval", "harness"], default="both")
    ap.add_argument("--classifier", choices=["sklearn", "pytorch"], default="sklearn",
                    help="SentEval's classifier: scikit-learn's (usepytorch False, default) or "
                         "its PyTorch one (usepytorch True, run on the CPU), which harness "
                         "reimplements")
    ap.add_argument("--wait", choices=["passive", "library"], default="passive",
                    help="the Python side's idle threads: sleep (default) or the libraries' "
                         "spinning defaults")
    ap.add_argument("--no-warm", action="store_true",
                    help="skip harness's second (warm-cache) run")
    ap.add_argument("--json", type=Path, help="also write every number to this file")
    ap.add_argument("--keep", type=Path, help="work folder to keep (default: a temporary one)")
    ap.add_argument("--verbose", action="store_true", help="SentEval's INFO log")
    ap.add_argument("--setup-only", action="store_true")
    args = ap.parse_args()

    benches = [b.strip() for b in args.tasks.split(",") if b.strip()]
    unknown = [b for b in benches if b not in TASKS]
    if unknown or not benches:
        ap.error(f"unknown task(s) {unknown}; choose from {','.join(TASKS)}")
    # Resolved before anything changes HARNESS_HOME.
    if args.model is None:
        args.model = default_model()
    args.model = args.model.resolve()
    args.data_dir = Path(os.environ.get("HARNESS_DATA_DIR", harness_home() / "datasets"))

    # Outside the venv this re-runs the script with the venv's python (same arguments); the
    # setup below (model, dataset, task folders) is part of --setup-only too.
    pyenv.activate(PACKAGES)
    if args.side != "harness":
        if args.senteval is None or not (Path(args.senteval) / "senteval" / "engine.py").is_file():
            ap.error("--senteval DIR (or $SENTEVAL_DIR) must name a checkout of "
                     "https://github.com/facebookresearch/SentEval")
        args.senteval = Path(args.senteval).resolve()
    if args.side != "senteval" and shutil.which(args.harness) is None:
        ap.error(f"no harness binary at {args.harness} (build it, or pass --harness BIN)")

    # Thread counts and wait policies must be fixed before torch and the BLAS libraries load.
    for var in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS"):
        os.environ[var] = str(args.threads)
    if args.wait == "passive":
        os.environ.update(PASSIVE_WAIT)
    os.environ["TOKENIZERS_PARALLELISM"] = "false"

    # Untimed setup: the model folder and harness's installed copy of the dataset.
    home_env = os.environ.copy()
    home_env.update(HARNESS_DATA_DIR=str(args.data_dir), HARNESS_MODELS_DIR=str(args.model.parent))
    if not args.model.is_dir():
        if args.model.name != MODEL or shutil.which(args.harness) is None:
            print(f"{args.model}: no model folder (set HARNESS_MODELS_DIR or pass --model)",
                  file=sys.stderr)
            return 2
        subprocess.run([args.harness, "models", "fetch", MODEL], cwd=REPO, env=home_env, check=True)
    if args.side != "senteval":
        subprocess.run([args.harness, "datasets", "fetch", "senteval"], cwd=REPO, env=home_env,
                       check=True)

    work = args.keep or Path(tempfile.mkdtemp(prefix="bench-senteval-"))
    work.mkdir(parents=True, exist_ok=True)
    try:
        task_path = None
        if args.side != "harness":
            task_path = materialise(args.data, work / "data", benches)
        if args.setup_only:
            print(f"set up: venv {pyenv.venv_dir()}, model {args.model}, data {args.data_dir}"
                  + (f", SentEval tasks {task_path}" if task_path else ""), file=sys.stderr)
            return 0

        import sentence_transformers
        import sklearn
        import torch

        versions = [f"torch {torch.__version__}, sentence-transformers "
                    f"{sentence_transformers.__version__}, scikit-learn {sklearn.__version__}"]
        if args.side != "senteval":
            v = subprocess.run([args.harness, "--version"], capture_output=True, text=True)
            versions.append(f"{v.stdout.strip()} ({args.harness})")
        loads = [" ".join(f"{x:.2f}" for x in os.getloadavg())]
        se, hc, hw = {}, {}, {}
        if args.side != "harness":
            se = run_senteval(args, benches, task_path)
        if args.side != "senteval":
            home = work / "harness-home"
            if home.exists():
                shutil.rmtree(home)
            home.mkdir()
            env = harness_env(args, home)
            hc = run_harness(args, benches, env, work / "results-cold", work / "harness-cold.log")
            if not args.no_warm:
                hw = run_harness(args, benches, env, work / "results-warm",
                                 work / "harness-warm.log")
        loads.append(" ".join(f"{x:.2f}" for x in os.getloadavg()))
        print_table(args, benches, se, hc, hw, loads, versions)
        if args.json:
            args.json.write_text(json.dumps({
                "tasks": benches, "threads": args.threads, "kfold": args.kfold,
                "classifier": args.classifier, "wait": args.wait,
                "versions": versions, "load_before": loads[0], "load_after": loads[1],
                "senteval": se, "harness_cold": hc, "harness_warm": hw,
            }, indent=2, default=str))
    finally:
        if args.keep is None:
            shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
