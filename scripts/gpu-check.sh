#!/usr/bin/env bash
# The GPU check in one command: builds harness with `--features cuda`, then on `cuda:0` and on
# the CPU
#   1. trains the LASER default for 200 steps (same seed, same batches): the first step's loss
#      must agree to 1e-4, and each side prints its training tokens/s;
#   2. embeds the STS-B test sentences with all-MiniLM-L6-v2 (no cache): every sentence's two
#      vectors must have cosine >= 0.9999, and each side prints its sentences/s;
#   3. (peers, on by default with a GPU) runs the PyTorch peer of the LASER default
#      (scripts/bench_torch_laser.py, same run directory, batches and steps) and
#      sentence-transformers (scripts/bench_st.py, same sentences, batch 32) on the same
#      device, and prints harness / peer next to the checks. On cuda:0 the peers run on the
#      python3 whose torch sees the GPU; harness's embedding rate there is its second run's
#      (the first compiles and tunes kernels, kept in HARNESS_HOME for later runs).
#
#   4. (GPU only) trains the same 200 steps with `train.precision: bf16` on cuda:0: its
#      first-step loss must be within 1% of f32's there, and it prints bf16's tokens/s over
#      f32's and both last losses.
#
#   bash scripts/gpu-check.sh              both halves (needs an NVIDIA GPU and its driver)
#   bash scripts/gpu-check.sh --cpu-only   the CPU half alone (CI runs this: it checks that
#                                          the commands, files and parsing of the check work)
#
# Environment: HARNESS_HOME as for harness (datasets and models are installed on first use);
# GPU_CHECK_STEPS (200; 20 with --cpu-only); GPU_CHECK_DIR (a scratch directory, default a fresh temporary one,
# removed at the end); GPU_CHECK_PEERS (1 with a GPU, 0 with --cpu-only: the peers' venv
# installs torch on first use). Exit status 0 only when every comparison holds.
set -euo pipefail
cd "$(dirname "$0")/.."

cpu_only=0
case "${1:-}" in
  --cpu-only) cpu_only=1 ;;
  "") ;;
  *) echo "usage: bash scripts/gpu-check.sh [--cpu-only]" >&2; exit 2 ;;
esac
# The CPU half checks the commands, files and parsing: 20 steps do that (200 with a GPU).
steps="${GPU_CHECK_STEPS:-$((cpu_only == 1 ? 20 : 200))}"
if [[ -n "${GPU_CHECK_DIR:-}" ]]; then
  work="$GPU_CHECK_DIR"; mkdir -p "$work"
else
  work="$(mktemp -d)"; trap 'rm -rf "$work"' EXIT
fi

# Where cargo builds (CARGO_TARGET_DIR, a config's build.target-dir, or target/).
target="$(cargo metadata --locked --format-version 1 --no-deps \
    | python3 -c 'import json, sys; print(json.load(sys.stdin)["target_directory"])')"
if [[ $cpu_only == 1 ]]; then
  # The test build's binary: `cargo test --no-run` with the test command's features builds
  # nothing after `cargo test --features parquet,mpi`, whereas a plain `cargo build` resolves
  # features without the dev-dependencies and may compile crates again (it did, 442 s, while
  # burn-flex was a dev-dependency feature).
  cargo test --no-run --locked --quiet --features parquet,mpi
  harness=("$target/debug/harness")
  devices=(cpu)
else
  cargo build --locked --release --features cuda
  harness=("$target/release/harness")
  devices=(cuda:0 cpu)
fi
peers="${GPU_CHECK_PEERS:-$((1 - cpu_only))}"

# STS-B test sentences, both columns (sts-test.csv: tab-separated, sentences in fields 6-7),
# read from the shared datasets beside the clone (`harness datasets verify stsbenchmark`
# checks that file against the lock).
sts="../shared/datasets/stsbenchmark/sts-test.csv"
if [[ ! -f "$sts" ]]; then
  echo "gpu-check: $sts is missing: the check needs ../shared beside the clone" >&2
  exit 1
fi
{ cut -f6 "$sts"; cut -f7 "$sts"; } > "$work/sts.txt"

# Installed before the timings (the first use would otherwise time the download).
"${harness[@]}" models fetch all-MiniLM-L6-v2 >/dev/null

for dev in "${devices[@]}"; do
  tag="${dev/:/}"
  echo "== $dev"
  "${harness[@]}" train recipes/laser.yaml --device "$dev" --out "$work/train-$tag" \
    --set "train.steps=$steps" --set "train.checkpoint_every=$steps" 2>&1 | tee "$work/train-$tag.log" | grep -E "trained|error" || true
  "${harness[@]}" embed --encoder all-MiniLM-L6-v2 --device "$dev" --no-cache \
    --input "$work/sts.txt" --out "$work/sts-$tag.npy" | tee "$work/embed-$tag.log"
  if [[ $peers == 1 ]]; then
    if [[ $dev != cpu ]]; then
      # Again, with the kernels compiled and tuned by the first run: the rate a user sees
      # from the second run on.
      "${harness[@]}" embed --encoder all-MiniLM-L6-v2 --device "$dev" --no-cache \
        --input "$work/sts.txt" --out "$work/sts-$tag.npy" | tee "$work/embed-$tag.log"
    fi
    python3 scripts/bench_torch_laser.py --run "$work/train-$tag" --steps "$steps" \
      --threads "$(nproc)" --device "$dev" | tee "$work/peer-train-$tag.log"
    python3 scripts/bench_st.py --device "$dev" --threads "$(nproc)" --batch 32 --rounds 2 \
      | tee "$work/peer-embed-$tag.log"
  fi
done

if [[ $cpu_only == 0 ]]; then
  echo "== cuda:0, train.precision: bf16"
  "${harness[@]}" train recipes/laser.yaml --device cuda:0 --out "$work/train-cuda0-bf16" \
    --set "train.steps=$steps" --set "train.checkpoint_every=$steps" --set train.precision=bf16 \
    2>&1 | tee "$work/train-cuda0-bf16.log" | grep -E "trained|error" || true
fi

python3 - "$work" "$cpu_only" <<'EOF'
"""Reads what the runs wrote and checks the comparisons (standard library only)."""
import json, math, re, struct, sys
from pathlib import Path

work, cpu_only = Path(sys.argv[1]), sys.argv[2] == "1"
tags = ["cpu"] if cpu_only else ["cuda0", "cpu"]
failed = False


def first_loss(tag):
    with open(work / f"train-{tag}" / "train" / "metrics.jsonl") as f:
        for line in f:
            row = json.loads(line)
            if "loss" in row:
                return float(row["loss"])
    raise SystemExit(f"gpu-check: no training step in {work}/train-{tag}/train/metrics.jsonl")


def last_loss(tag):
    m = re.findall(r"last loss ([0-9.]+)", (work / f"train-{tag}.log").read_text())
    return float(m[-1]) if m else float("nan")


def tokens_per_s(tag):
    m = re.search(r"\(([0-9.]+) tokens/s\)", (work / f"train-{tag}.log").read_text())
    return float(m.group(1)) if m else float("nan")


def sentences_per_s(tag):
    m = re.search(r"\((\d+) × \d+\) in ([0-9.]+)s", (work / f"embed-{tag}.log").read_text())
    return int(m.group(1)) / float(m.group(2)) if m else float("nan")


def npy(tag):
    raw = (work / f"sts-{tag}.npy").read_bytes()
    if raw[:6] != b"\x93NUMPY":
        raise SystemExit(f"gpu-check: sts-{tag}.npy is not an .npy file")
    header_len = struct.unpack("<H", raw[8:10])[0]
    header = raw[10:10 + header_len].decode("latin1")
    rows, cols = map(int, re.search(r"\((\d+), (\d+)\)", header).groups())
    data = struct.unpack(f"<{rows * cols}f", raw[10 + header_len:10 + header_len + 4 * rows * cols])
    return [data[r * cols:(r + 1) * cols] for r in range(rows)]


def peer_rate(kind, tag):
    """The peer's rate from its log (`pytorch: ... training: R tokens/s`, `sentence-transformers,
    ...: R sentences/s`), None when the peer did not run."""
    path = work / f"peer-{kind}-{tag}.log"
    if not path.is_file():
        return None
    pattern = r"training: ([0-9.]+) tokens/s" if kind == "train" else r"([0-9.]+) sentences/s \(best"
    m = re.search(pattern, path.read_text())
    if not m:
        raise SystemExit(f"gpu-check: no rate in {path}")
    return float(m.group(1))


for tag in tags:
    loss = first_loss(tag)
    ok = math.isfinite(loss)
    failed |= not ok
    print(f"{tag}: first-step loss {loss:.6f}, training {tokens_per_s(tag):.0f} tokens/s, "
          f"all-MiniLM-L6-v2 {sentences_per_s(tag):.1f} sentences/s"
          + ("" if ok else "  FAILED: not finite"))
    train_peer, embed_peer = peer_rate("train", tag), peer_rate("embed", tag)
    if train_peer is not None and embed_peer is not None:
        print(f"{tag}: LASER default harness / PyTorch {tokens_per_s(tag) / train_peer:.2f} "
              f"({train_peer:.0f} tokens/s); all-MiniLM-L6-v2 harness / sentence-transformers "
              f"{sentences_per_s(tag) / embed_peer:.2f} ({embed_peer:.1f} sentences/s)")
if not cpu_only:
    a, b = first_loss("cuda0"), first_loss("cpu")
    ok = abs(a - b) <= 1e-4
    failed |= not ok
    print(f"first-step loss cuda:0 {a:.6f} vs cpu {b:.6f}: |diff| {abs(a - b):.2e} "
          + ("<= 1e-4 ok" if ok else "> 1e-4 FAILED"))
    f, h = first_loss("cuda0"), first_loss("cuda0-bf16")
    ok = abs(h - f) <= 1e-2 * abs(f)
    failed |= not ok
    print(f"train.precision bf16 on cuda:0: first-step loss {h:.6f} vs f32 {f:.6f} "
          + ("(within 1%) ok" if ok else "(beyond 1%) FAILED")
          + f"; tokens/s bf16 / f32 {tokens_per_s('cuda0-bf16') / tokens_per_s('cuda0'):.2f}; "
          f"last loss bf16 {last_loss('cuda0-bf16'):.4f}, f32 {last_loss('cuda0'):.4f}")
    g, c = npy("cuda0"), npy("cpu")
    if len(g) != len(c):
        raise SystemExit(f"gpu-check: {len(g)} GPU rows but {len(c)} CPU rows")
    def cos(u, v):
        return sum(x * y for x, y in zip(u, v)) / max(1e-12, math.sqrt(sum(x * x for x in u) * sum(y * y for y in v)))
    worst = min(cos(u, v) for u, v in zip(g, c))
    ok = worst >= 0.9999
    failed |= not ok
    print(f"STS-B test embeddings cuda:0 vs cpu: {len(g)} sentences, lowest cosine {worst:.6f} "
          + (">= 0.9999 ok" if ok else "< 0.9999 FAILED"))
else:
    rows = npy("cpu")
    print(f"cpu half ok: {len(rows)} STS-B test sentences embedded (the GPU half needs `--features cuda` and a GPU)")
sys.exit(1 if failed else 0)
EOF
