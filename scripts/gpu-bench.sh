#!/usr/bin/env bash
# Speed on a GPU, harness against its peers on the same device, in one command:
#
#   training  each item trains its recipe (and profile) with harness on the device and with
#             the recipe's hand-written PyTorch peer (scripts/bench_torch_*.py, the same ones
#             `cargo bench --bench train` runs) on the same device, from the same prepared
#             corpora and tokenizer, for the same number of steps. harness first trains the
#             same steps in a scratch run (kernels compiled and autotuned into HARNESS_HOME,
#             as any first run does: each new batch shape brings autotune keys of its own, so
#             a shorter warm-up would leave the measured run tuning), then the measured run,
#             so its rate is what a user sees from the second run on; the kernel shapes the
#             measured run still tuned are recorded (`kernel_shapes_tuned`, from harness's
#             closing line: 0 when every kernel came from the cache). A warm-up stopped by
#             GPU_BENCH_CMD_LIMIT keeps what it tuned (cubecl writes each key as it is tuned)
#             and the measured run goes on from there (`warm_up_timed_out`). Both sides'
#             rates are printed over the whole measured run and,
#             when it has at least 50 steps, over steps 26 to the end (both trainers past
#             their warm-up: cuDNN's and cuBLAS's handles and algorithm choice on PyTorch's
#             side; harness reads losses back every 25 steps, so step 25 is the first point
#             where its clock has waited for the device). The warm-up's wall time is
#             recorded too (`warm_up_seconds`: what a first run pays for compiling and
#             tuning kernels, beyond what earlier items left in the cache), and the first
#             `harness embed` run's (`first_run_seconds`).
#   encoding  both columns of the STS-B test split, repeated GPU_BENCH_REPEAT times, encoded by
#             `harness embed` (its second run: the first compiles and tunes kernels; its time
#             includes opening the model and copying it to the device) and by
#             sentence-transformers (scripts/bench_st.py, batches of 32 and of 256, best of
#             3 rounds, model load excluded); the lowest cosine between the two sides' vectors
#             says they computed the same function.
#
#   bash scripts/gpu-bench.sh                     every item on cuda:0
#   GPU_BENCH_ITEMS=laser,minilm bash scripts/gpu-bench.sh
#
# Items: laser, laser-gpu, laser-paper (the 5x512 BiLSTM with LASER's decoder, against
# PyTorch's nn.LSTM on cuDNN), laser-bf16 and laser-gpu-bf16 (harness alone,
# train.precision=bf16 against the f32 item), laser-steps and laser-gpu-whole (harness alone,
# against laser and laser-gpu: the LSTM recurrence forced step by step, and forced into one
# launch each way, HARNESS_LSTM_RECURRENCE; by default a small batch takes the one launch and a
# large one steps, crates/model/src/fused/lstm_whole.rs), seq2seq, seq2seq-gpu, muse, muse-gpu, xnli,
# xnli-gpu, emu, emu-gpu, minilm, e5, laser-minimal (harness alone, from an empty kernel
# cache with CUBECL_AUTOTUNE_LEVEL=minimal: what a first run costs with the least tuning),
# minilm-unrounded (harness alone, from an empty kernel cache with
# HARNESS_DEVICE_WIDTH_MULTIPLE=1: BERT batches not padded to a multiple of 16, against
# minilm's first and second runs: the compilation the rounding saves against the padded work
# it adds).
#
# Environment:
#   HARNESS_BIN          the harness binary (default: `cargo build --release --features cuda`)
#   GPU_BENCH_DEVICE     harness's device (cuda:0); the peers run on `cuda`
#   GPU_BENCH_STEPS      measured steps of the default-sized items (125); laser-paper 10
#   GPU_BENCH_WARM       steps of harness's warm-up run (default: the measured run's)
#   GPU_BENCH_OUT        where logs, runs and results.jsonl go (default: a temporary folder)
#   GPU_BENCH_RESULTS    the JSON-lines file each item's figures are appended to
#                        (GPU_BENCH_OUT/results.jsonl)
#   GPU_BENCH_DEADLINE   seconds after the start past which no further item is begun
#   GPU_BENCH_NO_EXCLUDE 1: train without the corpora's contamination filter (`exclude: []`
#                        on every corpus), so the benchmarks' datasets need not be installed;
#                        throughput only, the kept pairs differ by the few removed
#   GPU_BENCH_MINILM     a sentence-transformers folder for the minilm item (default: the
#                        installed all-MiniLM-L6-v2)
#   GPU_BENCH_E5         a sentence-transformers folder of multilingual-e5-small's
#                        architecture for the e5 item (default: written by `harness export`
#                        from a 0-step fine-tuning run, as `cargo bench --bench embed` does)
#   GPU_BENCH_EMU_MODEL  the pretrained encoder the emu items start from (default: the
#                        recipe's multilingual-e5-small)
#   GPU_BENCH_PREPARE    1: only prepare each training item's run (corpora, tokenizer:
#                        `--stop-after 0`) in GPU_BENCH_OUT/<item>/, on this machine
#   GPU_BENCH_PREPARED   a folder of such prepared runs: each item's tokenizer.json, env.json,
#                        recipe.resolved.yaml and hard-negatives/ are copied from <item>/ there, so the GPU
#                        machine does not learn the tokenizers (LASER's paper vocabulary is
#                        50,000; the same sets must be given both times)
#   GPU_BENCH_REPEAT     copies of the STS-B test sentences to encode (10: 27,580 sentences)
#   GPU_BENCH_CMD_LIMIT  seconds any one command (a harness run, a peer) may take (0: no
#                        limit), so that one slow item leaves time for the next
# Exit status: 0 when every item ran, 1 otherwise (each item's failure is printed and the
# next one runs).
set -uo pipefail
cd "$(dirname "$0")/.." || exit 1
started=$SECONDS

dev="${GPU_BENCH_DEVICE:-cuda:0}"
peer_dev="${dev%%:*}"
[[ $dev == cuda:* ]] && peer_dev="$dev"
steps="${GPU_BENCH_STEPS:-125}"
warm="${GPU_BENCH_WARM:-}"
deadline="${GPU_BENCH_DEADLINE:-0}"
repeat="${GPU_BENCH_REPEAT:-10}"
cmd_limit="${GPU_BENCH_CMD_LIMIT:-0}"
items="${GPU_BENCH_ITEMS:-laser,laser-gpu,laser-paper,laser-bf16,laser-gpu-bf16,minilm,e5,seq2seq,seq2seq-gpu,muse,muse-gpu,xnli,xnli-gpu,emu,emu-gpu}"
threads="$(nproc)"
if [[ -n "${GPU_BENCH_OUT:-}" ]]; then
  work="$GPU_BENCH_OUT"; mkdir -p "$work"
else
  work="$(mktemp -d)"
fi
results="${GPU_BENCH_RESULTS:-$work/results.jsonl}"
if [[ -n "${HARNESS_BIN:-}" ]]; then
  harness="$HARNESS_BIN"
else
  cargo build --locked --release --features cuda || exit 1
  harness="$(cargo metadata --locked --format-version 1 --no-deps \
    | python3 -c 'import json, sys; print(json.load(sys.stdin)["target_directory"])')/release/harness"
fi
failed=0

say() { echo "[gpu-bench $((SECONDS - started)) s] $*"; }

# Runs a command under GPU_BENCH_CMD_LIMIT (exit 124 when it runs out).
limited() {
  if (( cmd_limit > 0 )); then timeout "$cmd_limit" "$@"; else "$@"; fi
}

# `--set data.corpora.NAME.exclude=[]` for every corpus of the resolved recipe (read from
# `harness validate --resolved`, whose YAML lists corpora two levels under `data:`).
no_exclude_sets() {
  local recipe="$1"; shift
  "$harness" validate "$recipe" "$@" --resolved 2>/dev/null | awk '
    /^data:/ { in_data = 1; next }
    /^[^ ]/ { in_data = 0; in_corpora = 0 }
    in_data && /^  corpora:/ { in_corpora = 1; next }
    in_data && /^  [^ ]/ { in_corpora = 0 }
    in_corpora && /^    [^ -][^:]*:/ { sub(/^    /, ""); sub(/:.*/, ""); print "--set"; print "data.corpora." $0 ".exclude=[]" }'
}

# harness's measured run and the peer over the same prepared run directory.
#   train_item ITEM RECIPE PROFILE PEER STEPS WARM [--set K=V ...]
train_item() {
  local item="$1" recipe="$2" profile="$3" peer="$4" n="$5" w="${6:-}"; shift 6
  [[ -n $w ]] || w="$n"
  local -a prof=() sets=("$@")
  [[ $profile != - ]] && prof=(--profile "$profile")
  if [[ ${GPU_BENCH_NO_EXCLUDE:-0} == 1 ]]; then
    mapfile -t extra < <(no_exclude_sets "$recipe" "${prof[@]}" "${sets[@]}")
    # A profile that leaves the length unset (`epochs: null`) validates only with it; without a
    # profile it must stay out (validate checks every profile with the sets applied).
    (( ${#extra[@]} )) || mapfile -t extra < <(no_exclude_sets "$recipe" "${prof[@]}" --set "train.steps=$n" "${sets[@]}")
    (( ${#extra[@]} )) || { say "$item: no corpora found in \`harness validate $recipe --resolved\`"; return 1; }
    sets+=("${extra[@]}")
  fi
  local dir="$work/$item"
  local -a run=("$harness" train "$recipe" "${prof[@]}" --device "$dev" --out "$dir"
    --set "train.steps=$n" --set "train.checkpoint_every=$((n + 1))" --set train.eval_every=null
    "${sets[@]}")
  rm -rf "$dir"
  if [[ ${GPU_BENCH_PREPARE:-0} == 1 ]]; then
    say "$item: corpora and tokenizer only (GPU_BENCH_PREPARE=1)"
    # On a machine without the device the run stops when it opens it, after the tokenizer.
    "${run[@]}" --stop-after 0 > "$work/$item-prepare.log" 2>&1
    [[ -f $dir/tokenizer.json ]] || { say "$item: failed: $(tail -3 "$work/$item-prepare.log")"; return 1; }
    return 0
  fi
  # A run prepared beforehand (GPU_BENCH_PREPARED/<item>/: its tokenizer, env.json and
  # resolved recipe), so that the device does not learn the tokenizer.
  local prepared="${GPU_BENCH_PREPARED:-/nonexistent}/${PREPARED_AS:-$item}"
  if [[ -f $prepared/tokenizer.json ]]; then
    mkdir -p "$dir" && cp "$prepared/tokenizer.json" "$prepared/env.json" "$prepared/recipe.resolved.yaml" "$dir/"
    [[ -d $prepared/hard-negatives ]] && cp -r "$prepared/hard-negatives" "$dir/"
  fi
  # The warm-up: the same run (kernels compiled and autotuned into HARNESS_HOME), its
  # metrics removed; the measured run then starts from step 0 in the same directory, reusing
  # the tokenizer it learned. One stopped by the command limit (exit 124) still leaves what it
  # tuned in the cache.
  say "$item: harness warm-up, $w steps"
  local warm_started=$SECONDS rc=0
  limited "${run[@]}" --stop-after "$w" > "$work/$item-warm.log" 2>&1 || rc=$?
  # What a first run pays on this device (kernels compiled and tuned, beyond what earlier
  # items left in the cache), whole seconds.
  export GPU_BENCH_WARM_SECONDS=$((SECONDS - warm_started)) GPU_BENCH_WARM_TIMED_OUT=0
  if (( rc == 124 )); then
    GPU_BENCH_WARM_TIMED_OUT=1
    say "$item: warm-up stopped by GPU_BENCH_CMD_LIMIT after $GPU_BENCH_WARM_SECONDS s (what it tuned is kept; the measured run tunes the rest)"
  elif (( rc != 0 )); then
    say "$item: warm-up failed after $GPU_BENCH_WARM_SECONDS s: $(tail -3 "$work/$item-warm.log")"
    return 1
  fi
  rm -rf "$dir/checkpoints" "$dir/train"
  say "$item: harness, $n steps"
  rc=0
  limited "${run[@]}" > "$work/$item.log" 2>&1 || rc=$?
  export GPU_BENCH_TIMED_OUT=0
  if (( rc == 124 )) && grep -q '"loss"' "$dir/train/metrics.jsonl" 2>/dev/null; then
    # The steps read back before the limit are still a measurement, marked as cut short.
    GPU_BENCH_TIMED_OUT=1
    say "$item: harness stopped by GPU_BENCH_CMD_LIMIT; recording the steps it finished"
  elif (( rc != 0 )); then
    say "$item: harness failed: $(tail -3 "$work/$item.log")"
    return 1
  fi
  rm -rf "$dir/checkpoints"
  if [[ $peer == - ]]; then
    record_train "$item" "$dir" - "$work/$item.log"
    return 0
  fi
  if [[ $peer == scripts/bench_torch_emu.py ]]; then
    # The peer fine-tunes the starting encoder from a sentence-transformers folder.
    if ! { "$harness" train "$recipe" "${prof[@]}" --out "$dir/initial" --set train.steps=0 \
             "${sets[@]}" && "$harness" export "$dir/initial" --out "$dir/peer-model"; } \
           > "$work/$item-initial.log" 2>&1; then
      say "$item: the peer's starting encoder could not be exported: $(tail -3 "$work/$item-initial.log")"
      return 1
    fi
  fi
  say "$item: PyTorch peer ($peer), $n steps"
  limited python3 "$peer" --run "$dir" --steps "$n" --threads "$threads" --device "$peer_dev" --log \
    > "$work/$item.peer" 2> "$work/$item.peer.log" || { say "$item: peer failed: $(tail -3 "$work/$item.peer.log")"; record_train "$item" "$dir" - "$work/$item.log"; return 1; }
  record_train "$item" "$dir" "$work/$item.peer.log" "$work/$item.log"
}

# Appends the item's rates to results.jsonl and prints them.
#   record_train ITEM RUN_DIR PEER_LOG|- HARNESS_LOG
record_train() {
  python3 - "$1" "$2" "$3" "$results" "$4" <<'EOF'
import json, os, re, sys
item, run, peer_log, results, harness_log = sys.argv[1:6]
rows = [json.loads(l) for l in open(f"{run}/train/metrics.jsonl") if '"loss"' in l]
def rates(steps):
    """(whole-run rate, rate over steps 26..end or None, steps, first loss, last loss) of
    [(step, tokens, cumulative seconds or None, step seconds or None, loss)]."""
    tokens = sum(s[1] for s in steps)
    secs = steps[-1][2] if steps[-1][2] is not None else sum(s[3] for s in steps)
    window = None
    if len(steps) >= 50:
        later = [s for s in steps if s[0] > 25]
        t = sum(s[1] for s in later)
        if steps[-1][2] is not None:
            w = steps[-1][2] - next(s[2] for s in steps if s[0] == 25)
        else:
            w = sum(s[3] for s in later)
        window = t / w
    return {"steps": len(steps), "tokens": tokens, "seconds": round(secs, 3),
            "rate": tokens / secs, "rate_after_25": window,
            "first_loss": steps[0][4], "last_loss": steps[-1][4]}
ours = rates([(r["step"], r["tokens"], r["seconds"], None, r["loss"]) for r in rows])
ours["warm_up_seconds"] = int(os.environ.get("GPU_BENCH_WARM_SECONDS", "0"))
ours["warm_up_timed_out"] = os.environ.get("GPU_BENCH_WARM_TIMED_OUT") == "1"
ours["timed_out"] = os.environ.get("GPU_BENCH_TIMED_OUT") == "1"
# harness's closing line says what the measured run still tuned (absent when it was cut short).
closing = open(harness_log, errors="replace").read() if os.path.exists(harness_log) else ""
tuned = re.search(r"(\d+) kernel shapes? tuned in this run", closing)
ours["kernel_shapes_tuned"] = (int(tuned[1]) if tuned else
                               0 if "every kernel shape from the cache" in closing else None)
out = {"item": item, "harness": ours}
line = f"{item}: harness {ours['rate']:.0f} tokens/s over {ours['steps']} steps"
if ours["rate_after_25"]:
    line += f" ({ours['rate_after_25']:.0f} after step 25)"
if ours["kernel_shapes_tuned"]:
    line += f" [still tuning: {ours['kernel_shapes_tuned']} kernel shapes in the measured run]"
if ours["timed_out"]:
    line += " [cut short by GPU_BENCH_CMD_LIMIT]"
if peer_log != "-":
    pat = re.compile(r"^step (\d+) \S+: loss (\S+), (\d+) tokens, ([0-9.]+) s$")
    steps = [(int(m[1]), int(m[3]), None, float(m[4]), float(m[2]))
             for m in (pat.match(l.strip()) for l in open(peer_log)) if m]
    if steps:
        theirs = rates(steps)
        out["pytorch"] = theirs
        out["ratio"] = ours["rate"] / theirs["rate"]
        line += f"; PyTorch {theirs['rate']:.0f}"
        if ours["rate_after_25"] and theirs["rate_after_25"]:
            out["ratio_after_25"] = ours["rate_after_25"] / theirs["rate_after_25"]
            line += f" ({theirs['rate_after_25']:.0f})"
        line += f"; harness / PyTorch {out['ratio']:.2f}"
        if "ratio_after_25" in out:
            line += f" ({out['ratio_after_25']:.2f} after step 25)"
        line += (f"; first loss {ours['first_loss']:.4f} / {theirs['first_loss']:.4f}, "
                 f"last {ours['last_loss']:.4f} / {theirs['last_loss']:.4f}")
with open(results, "a") as f:
    f.write(json.dumps(out) + "\n")
print(line)
EOF
}

# STS-B test, both columns, `repeat` times, as bench_st.py reads it (a CSV) and as harness
# embed reads it (one sentence per line, first column then second, as bench_st.py orders them).
sts_inputs() {
  [[ -f "$work/sts.csv" ]] && return 0
  local sts="${HARNESS_SHARED_DATASETS:-../shared/datasets}/stsbenchmark/sts-test.csv"
  [[ -f $sts ]] || { say "$sts: missing (the encoding items read the STS-B test split there; set HARNESS_SHARED_DATASETS)"; return 1; }
  : > "$work/sts.csv"
  for _ in $(seq "$repeat"); do cat "$sts" >> "$work/sts.csv"; done
  { cut -f6 "$work/sts.csv"; cut -f7 "$work/sts.csv"; } > "$work/sts.txt"
}

#   encode_item ITEM HARNESS_SPEC ST_FOLDER|- [MAX_SEQ]   (- : harness alone, no peer)
encode_item() {
  local item="$1" spec="$2" folder="$3" maxseq="${4:-}"
  sts_inputs || return 1
  local -a clip=()
  [[ -n $maxseq ]] && clip=(--max-seq-length "$maxseq")
  for round in 1 2; do
    say "$item: harness embed, run $round"
    limited "$harness" embed --encoder "$spec" --device "$dev" --no-cache --force --input "$work/sts.txt" \
      --out "$work/$item.npy" > "$work/$item-embed-$round.log" 2>&1 \
      || { say "$item: harness embed failed: $(tail -3 "$work/$item-embed-$round.log")"; return 1; }
  done
  # 256 first: the batch most likely to be the faster, should the time run out.
  local batches=(256 32)
  [[ $folder == - ]] && batches=()
  for batch in "${batches[@]}"; do
    say "$item: sentence-transformers, batch $batch"
    limited python3 scripts/bench_st.py --model "$folder" --sts "$work/sts.csv" --device "$peer_dev" \
      --threads "$threads" --batch "$batch" --rounds 3 "${clip[@]}" --vectors "$work/$item-st$batch.npy" \
      > "$work/$item-st$batch.log" 2>&1 || { say "$item: sentence-transformers failed: $(tail -3 "$work/$item-st$batch.log")"; rm -f "$work/$item-st$batch.npy"; }
  done
  python3 - "$item" "$work" "$results" "$folder" <<'EOF'
import json, math, os, re, struct, sys
item, work, results, folder = sys.argv[1:5]
def npy(path):
    raw = open(path, "rb").read()
    n = struct.unpack("<H", raw[8:10])[0]
    rows, cols = map(int, re.search(r"\((\d+), (\d+)\)", raw[10:10 + n].decode("latin1")).groups())
    import array
    a = array.array("f"); a.frombytes(raw[10 + n:10 + n + 4 * rows * cols])
    return [a[r * cols:(r + 1) * cols] for r in range(rows)]
wrote = re.compile(r"\((\d+) × \d+\) in ([0-9.]+)s")
m = wrote.search(open(f"{work}/{item}-embed-2.log").read())
first = wrote.search(open(f"{work}/{item}-embed-1.log").read())
ours = int(m[1]) / float(m[2])
out = {"item": item, "harness": {"sentences": int(m[1]), "seconds": float(m[2]), "rate": ours,
                                 "first_run_seconds": float(first[2])}}
line = (f"{item}: harness {ours:.0f} sentences/s ({m[1]} sentences in {float(m[2]):.2f} s, model "
        f"load included; the first run {float(first[2]):.1f} s)")
h = npy(f"{work}/{item}.npy")
failed = False
for batch in (32, 256) if folder != "-" else ():
    if not os.path.exists(f"{work}/{item}-st{batch}.npy"):
        line += f"; sentence-transformers batch {batch}: failed"
        failed = True
        continue
    t = open(f"{work}/{item}-st{batch}.log").read()
    r = re.search(r": ([0-9.]+) sentences/s \(best", t)
    s = npy(f"{work}/{item}-st{batch}.npy")
    worst = min(sum(x * y for x, y in zip(u, v)) / max(1e-12, math.sqrt(sum(x * x for x in u) * sum(y * y for y in v)))
                for u, v in zip(h, s))
    out[f"st_batch{batch}"] = {"rate": float(r[1]), "lowest_cosine": worst}
    line += f"; sentence-transformers batch {batch}: {float(r[1]):.0f} (harness / ST {ours / float(r[1]):.2f}, lowest cosine {worst:.6f})"
with open(results, "a") as f:
    f.write(json.dumps(out) + "\n")
print(line)
sys.exit(1 if failed else 0)
EOF
}

e5_folder() {
  if [[ -n ${GPU_BENCH_E5:-} ]]; then echo "$GPU_BENCH_E5"; return 0; fi
  local initial="$work/e5-initial"
  "$harness" train recipes/emu.yaml --set train.steps=0 --out "$initial" > "$work/e5-export.log" 2>&1 \
    && "$harness" export "$initial" --out "$work/e5-folder" >> "$work/e5-export.log" 2>&1 \
    && echo "$work/e5-folder"
}

minilm_folder() {
  if [[ -n ${GPU_BENCH_MINILM:-} ]]; then echo "$GPU_BENCH_MINILM"; return 0; fi
  local home="${HARNESS_HOME:-${XDG_CACHE_HOME:-$HOME/.cache}/harness}"
  "$harness" models fetch all-MiniLM-L6-v2 > /dev/null 2>&1 \
    && echo "${HARNESS_MODELS_DIR:-$home/models}/all-MiniLM-L6-v2"
}

run_item() {
  local item="$1"
  local emu=()
  [[ -n ${GPU_BENCH_EMU_MODEL:-} ]] && emu=(--set "model.encoder.name=$GPU_BENCH_EMU_MODEL")
  case "$item" in
    laser) train_item "$item" recipes/laser.yaml - scripts/bench_torch_laser.py "$steps" "$warm" ;;
    laser-gpu) train_item "$item" recipes/laser.yaml gpu scripts/bench_torch_laser.py "$steps" "$warm" ;;
    laser-paper) train_item "$item" recipes/laser.yaml paper scripts/bench_torch_laser.py 10 "$warm" --set train.epochs=null ;;
    laser-minimal)
      # The first run's cost with cubecl's least autotuning, from an empty kernel cache.
      HARNESS_HOME="$work/home-minimal" CUBECL_AUTOTUNE_LEVEL=minimal PREPARED_AS=laser \
        train_item "$item" recipes/laser.yaml - - "$steps" "$warm" ;;
    laser-bf16) train_item "$item" recipes/laser.yaml - - "$steps" "$warm" --set train.precision=bf16 ;;
    laser-steps)
      HARNESS_LSTM_RECURRENCE=steps PREPARED_AS=laser train_item "$item" recipes/laser.yaml - - "$steps" "$warm" ;;
    laser-gpu-whole)
      HARNESS_LSTM_RECURRENCE=whole PREPARED_AS=laser-gpu train_item "$item" recipes/laser.yaml gpu - "$steps" "$warm" ;;
    laser-gpu-bf16) train_item "$item" recipes/laser.yaml gpu - "$steps" "$warm" --set train.precision=bf16 ;;
    seq2seq) train_item "$item" recipes/seq2seq-similarity.yaml - scripts/bench_torch_laser.py "$steps" "$warm" ;;
    seq2seq-gpu) train_item "$item" recipes/seq2seq-similarity.yaml gpu scripts/bench_torch_laser.py "$steps" "$warm" ;;
    muse) train_item "$item" recipes/muse-xling.yaml - scripts/bench_torch_muse.py "$steps" "$warm" ;;
    muse-gpu) train_item "$item" recipes/muse-xling.yaml gpu scripts/bench_torch_muse.py "$steps" "$warm" ;;
    xnli) train_item "$item" recipes/xnli-align.yaml - scripts/bench_torch_xnli.py "$steps" "$warm" ;;
    xnli-gpu) train_item "$item" recipes/xnli-align.yaml gpu scripts/bench_torch_xnli.py "$steps" "$warm" ;;
    emu) train_item "$item" recipes/emu.yaml - scripts/bench_torch_emu.py "$steps" "$warm" "${emu[@]}" ;;
    emu-gpu) train_item "$item" recipes/emu.yaml gpu scripts/bench_torch_emu.py "$steps" "$warm" "${emu[@]}" ;;
    minilm) local f; f="$(minilm_folder)" || return 1; encode_item minilm "$f" "$f" ;;
    minilm-unrounded)
      local f; f="$(minilm_folder)" || return 1
      HARNESS_HOME="$work/home-unrounded" HARNESS_DEVICE_WIDTH_MULTIPLE=1 encode_item "$item" "$f" - ;;
    e5)
      local f; f="$(e5_folder)" || { say "e5: no folder: $(tail -3 "$work/e5-export.log")"; return 1; }
      encode_item e5 "$f" "$f" 512 ;;
    *) say "unknown item $item"; return 1 ;;
  esac
}

say "device $dev, harness $("$harness" --version 2>/dev/null), $threads CPU threads, out $work"
command -v nvidia-smi > /dev/null && nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader
IFS=, read -ra list <<< "$items"
for item in "${list[@]}"; do
  if (( deadline > 0 && SECONDS - started > deadline )); then
    say "$item: not started (past GPU_BENCH_DEADLINE=$deadline s)"
    failed=1
    continue
  fi
  run_item "$item" || failed=1
done
say "done; results in $results"
exit "$failed"
