#!/usr/bin/env python3
"""sentence-transformers' CPU throughput on the sentences `cargo bench --bench embed` uses.

Encodes both columns of the STS Benchmark test split (2 x 1379 sentences) with the model
folder given (default: $HARNESS_MODELS_DIR/all-MiniLM-L6-v2), batch 32, 2 threads, and
prints one line:

    sentence-transformers, NAME: N sentences, batch B, T threads: X sentences/s (best of R: S s; ...)

which `cargo bench --bench embed` reads (with EMBED_BENCH_COMPARE=1) to print the ratio.
NAME is `--name` (default: the folder's name). The folder's default prompt, if it has one
(`config_sentence_transformers.json`; e5's `query: `), is prepended by `encode` itself.
`--max-seq-length N` overrides the folder's clip (the bench gives multilingual-e5-small 512,
harness's window). `--vectors OUT.npy` saves the last round's vectors (float32, one row per
sentence, in input order), which the bench compares with harness's (cosine per row).

The bench runs it on all-MiniLM-L6-v2's installed folder and on a sentence-transformers
folder of multilingual-e5-small that `harness export` wrote from a 0-step fine-tuning run,
i.e. the dequantised weights harness itself encodes with (see benches/embed.rs).

The first run makes a virtual environment under ~/.cache/harness-bench (or
$HARNESS_BENCH_VENV) with the versions that produced the parity fixtures
(../shared/models/README.md section 3): CPU-only torch from the PyTorch index where it
answers, else the PyPI wheel (run on the CPU either way), then sentence-transformers
(scripts/pyenv.py, shared with the other scripts). Later runs reuse it.

Usage: python3 scripts/bench_st.py [--model DIR] [--sts FILE] [--batch 32] [--threads 2]
       [--rounds 2] [--name NAME] [--max-seq-length N] [--vectors OUT.npy] [--setup-only]
"""

import argparse
import os
import sys
import time
from pathlib import Path

sys.dont_write_bytecode = True  # no __pycache__ in scripts/
sys.path.insert(0, str(Path(__file__).resolve().parent))
import pyenv  # noqa: E402

PACKAGES = ["torch", "sentence-transformers", "transformers", "numpy"]
REPO = Path(__file__).resolve().parent.parent


def default_model() -> Path:
    models = os.environ.get("HARNESS_MODELS_DIR")
    if models is None:
        home = os.environ.get("HARNESS_HOME") or str(
            Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "harness"
        )
        models = str(Path(home) / "models")
    return Path(models) / "all-MiniLM-L6-v2"


def default_sts() -> Path:
    shared = os.environ.get("HARNESS_SHARED_DATASETS", str(REPO.parent / "shared" / "datasets"))
    return Path(shared) / "stsbenchmark" / "sts-test.csv"


def sts_sentences(path: Path) -> list:
    """Both sentence columns, as src/data/loaders/stsbenchmark.rs reads them: TAB-separated,
    no quoting, sentences in fields 6 and 7, kept exactly (no stripping)."""
    first, second = [], []
    with open(path, encoding="utf-8", newline="\n") as f:
        for line in f.read().split("\n"):
            if line == "":
                continue
            fields = line.rstrip("\r").split("\t")
            first.append(fields[5])
            second.append(fields[6])
    return first + second


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--model", type=Path, default=default_model())
    ap.add_argument("--sts", type=Path, default=default_sts())
    ap.add_argument("--batch", type=int, default=32)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--name", help="the model's name in the printed line (default: the folder's)")
    ap.add_argument("--max-seq-length", type=int, help="default: the folder's max_seq_length")
    ap.add_argument("--vectors", type=Path, help="save the last round's vectors here (.npy)")
    ap.add_argument("--setup-only", action="store_true")
    ap.add_argument("--device", default="cpu",
                    help="cpu, or cuda[:N] (the interpreter's own CUDA torch, scripts/pyenv.py)")
    args = ap.parse_args()

    pyenv.activate(PACKAGES, setup_only=args.setup_only)

    # Thread counts must be fixed before torch starts its pools.
    for var in ("OMP_NUM_THREADS", "MKL_NUM_THREADS"):
        os.environ[var] = str(args.threads)
    os.environ["TOKENIZERS_PARALLELISM"] = "false"
    import torch
    from sentence_transformers import SentenceTransformer

    torch.set_num_threads(args.threads)
    if not args.model.is_dir():
        print(f"{args.model}: no model folder (set HARNESS_MODELS_DIR or pass --model)", file=sys.stderr)
        return 2
    sentences = sts_sentences(args.sts)
    model = SentenceTransformer(str(args.model), device=args.device)
    if args.max_seq_length is not None:
        model.max_seq_length = args.max_seq_length
    model.encode(sentences[:64], batch_size=args.batch)  # warm-up
    best, best_cpu = float("inf"), float("inf")
    vectors = None
    for _ in range(args.rounds):
        start, cpu = time.perf_counter(), time.process_time()
        with torch.inference_mode():
            vectors = model.encode(sentences, batch_size=args.batch, convert_to_numpy=True)
        best = min(best, time.perf_counter() - start)
        best_cpu = min(best_cpu, (time.process_time() - cpu) / args.threads)
    n = len(sentences)
    if args.vectors is not None:
        import numpy as np

        np.save(args.vectors, np.asarray(vectors, dtype=np.float32))
    name = args.name or args.model.name
    # CPU time per thread says what the run would take with the cores to itself; OpenMP
    # threads that spin while waiting count as busy, so with several threads it is a bound.
    print(
        f"sentence-transformers, {name}: {n} sentences, batch {args.batch}, {args.threads} threads: "
        f"{n / best:.1f} sentences/s (best of {args.rounds}: {best:.2f} s; "
        f"{n / best_cpu:.1f} sentences/s by CPU time per thread; max_seq_length "
        f"{model.max_seq_length}; torch {torch.__version__})"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
