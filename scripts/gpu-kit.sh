#!/usr/bin/env bash
# scripts/gpu-bench.sh on a GPU machine that has no Rust toolchain and reaches no network:
# pack here what it needs into one folder, carry the folder (with the checkout) there, run.
#
#   bash scripts/gpu-kit.sh pack [KIT]          here (default KIT: .gpu)
#   bash scripts/gpu-kit.sh run KIT ITEMS DEADLINE_S LIMIT_S    there, from the checkout's root
#
# `pack` writes into KIT (about 60 MB):
#   harness.xz       `cargo build --release --locked --features cuda`, stripped, xz
#   data-a.tar       the datasets the LASER, seq2seq-similarity and xnli-align recipes read
#                    and STS-B (as installed: already gzip'd files, verified again there)
#   data-b.tar.xz    those muse-xling and emu read (conversation-pairs,
#                    monolingual-sentences, xsid)
#   tpl.tar.xz       the two encoders' sentence-transformers folders without their weights
#                    (all-MiniLM-L6-v2 as installed; multilingual-e5-small as `harness export`
#                    writes it, its length limit set to 512 for both sides), and every
#                    training item's prepared run (`GPU_BENCH_PREPARE=1`: tokenizers learned
#                    here, so the GPU machine does not spend its time on them)
# `run` unpacks them under /tmp, gives the encoders random weights of their architecture
# (scripts/random_bert_folder.py: the real weights do not fit the carry; throughput is the
# same, the vectors of the two sides must still agree), and runs scripts/gpu-bench.sh with
# GPU_BENCH_NO_EXCLUDE=1 (the benchmarks' datasets stay behind), results appended to
# $OUT/results.jsonl (or KIT/results.jsonl) and the logs packed beside them. DEADLINE_S: no
# item starts after it; LIMIT_S: the whole call's limit (the bench is stopped before it).
# cubecl's kernel cache (compiled kernels, autotune results: HARNESS_HOME/cache/cubecl) comes
# back as cubecl-cache.tar.xz beside the results; put it into KIT and the next `run` on the
# same kind of GPU starts from it, its time going to measurements instead of compilation
# (its log then says so, and the items' `warm_up_seconds` are no first run's; laser-minimal
# always starts from an empty cache).
set -uo pipefail
cd "$(dirname "$0")/.." || exit 1

pack() {
  local kit="${1:-.gpu}" shared="${HARNESS_SHARED_DATASETS:-../shared/datasets}"
  mkdir -p "$kit" || exit 1
  cargo build --locked --release --features cuda || exit 1
  local harness
  harness="$(cargo metadata --locked --format-version 1 --no-deps \
    | python3 -c 'import json, sys; print(json.load(sys.stdin)["target_directory"])')/release/harness"
  strip -o "$kit/harness" "$harness" && xz -9 -T0 -f "$kit/harness" || exit 1
  (cd "$shared" && tar -cf - parallel-pairs wmt-news-parallel snli stsbenchmark) > "$kit/data-a.tar" || exit 1
  (cd "$shared" && tar -cf - conversation-pairs monolingual-sentences xsid) | xz -6 -T0 > "$kit/data-b.tar.xz" || exit 1
  local tmp; tmp="$(mktemp -d)"
  local home="${HARNESS_HOME:-${XDG_CACHE_HOME:-$HOME/.cache}/harness}"
  "$harness" models fetch all-MiniLM-L6-v2 > /dev/null || exit 1
  mkdir -p "$tmp/tpl/minilm" "$tmp/tpl/e5" "$tmp/tpl/prepared"
  (cd "$home/models/all-MiniLM-L6-v2" && tar -cf - --exclude=model.safetensors --exclude=README.md .) \
    | tar -xf - -C "$tmp/tpl/minilm" || exit 1
  if ! { "$harness" train recipes/emu.yaml --set train.steps=0 --out "$tmp/e5-run" \
         && "$harness" export "$tmp/e5-run" --out "$tmp/e5-folder"; } > "$tmp/e5.log" 2>&1; then
    echo "gpu-kit: the multilingual-e5-small export failed: $(tail -3 "$tmp/e5.log")" >&2
    exit 1
  fi
  (cd "$tmp/e5-folder" && tar -cf - --exclude=model.safetensors --exclude=.harness-files.json .) \
    | tar -xf - -C "$tmp/tpl/e5" || exit 1
  sed -i 's/"max_seq_length": [0-9]*/"max_seq_length": 512/' "$tmp/tpl/e5/sentence_bert_config.json"
  sed -i 's/"model_max_length": [0-9]*/"model_max_length": 512/' "$tmp/tpl/e5/tokenizer_config.json"
  # The prepared runs: the same items, sets and step counts as `run` gives the bench.
  GPU_BENCH_PREPARE=1 GPU_BENCH_NO_EXCLUDE=1 GPU_BENCH_OUT="$tmp/prepare" HARNESS_BIN="$harness" \
    GPU_BENCH_ITEMS=laser,laser-gpu,laser-paper,laser-bf16,laser-gpu-bf16,seq2seq,seq2seq-gpu,muse,muse-gpu,xnli,xnli-gpu \
    bash scripts/gpu-bench.sh > "$tmp/prepare.log" 2>&1
  for d in "$tmp"/prepare/*/; do
    local n; n="$(basename "$d")"
    [[ -f $d/tokenizer.json ]] || continue
    mkdir -p "$tmp/tpl/prepared/$n"
    cp "$d"/{tokenizer.json,env.json,recipe.resolved.yaml} "$tmp/tpl/prepared/$n/"
    [[ -d $d/hard-negatives ]] && cp -r "$d/hard-negatives" "$tmp/tpl/prepared/$n/"
  done
  (cd "$tmp/tpl" && tar -cf - .) | xz -9 -T0 > "$kit/tpl.tar.xz" || exit 1
  rm -rf "$tmp"
  du -ch "$kit"/* | tail -1
}

run() {
  local kit="$1" items="$2" deadline="$3" limit="$4" t0=$SECONDS
  local g=/tmp/gpu-kit out="${OUT:-$1}"
  mkdir -p "$g/mirror" "$g/home" "$g/bench" "$out"
  nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.sm --format=csv,noheader
  [[ -x $g/harness ]] || { xz -dc "$kit/harness.xz" > "$g/harness" && chmod +x "$g/harness"; } \
    || { echo "gpu-kit: no harness binary in $kit"; return 3; }
  [[ -d $g/mirror/parallel-pairs || ! -f $kit/data-a.tar ]] || tar -xf "$kit/data-a.tar" -C "$g/mirror"
  [[ -d $g/mirror/xsid || ! -f $kit/data-b.tar.xz ]] || tar -xJf "$kit/data-b.tar.xz" -C "$g/mirror"
  [[ -d $g/tpl ]] || { mkdir -p "$g/tpl" && tar -xJf "$kit/tpl.tar.xz" -C "$g/tpl"; }
  export HARNESS_HOME="$g/home" HARNESS_MIRRORS="[$g/mirror]" HARNESS_SHARED_DATASETS="$g/mirror" PYTHONUNBUFFERED=1
  if [[ -f $kit/cubecl-cache.tar.xz && ! -d $g/home/cache/cubecl ]]; then
    mkdir -p "$g/home/cache" && tar -xJf "$kit/cubecl-cache.tar.xz" -C "$g/home/cache" \
      && echo "cubecl cache: carried in $kit/cubecl-cache.tar.xz ($(du -sh "$g/home/cache/cubecl" | cut -f1)); warm-up times are not a first run's"
  fi
  for m in minilm e5; do
    [[ -f $g/$m/model.safetensors ]] || python3 scripts/random_bert_folder.py "$g/tpl/$m" "$g/$m"
  done
  echo "setup $((SECONDS - t0)) s; torch, sentence-transformers: $(python3 -c 'import torch, sentence_transformers as s; print(torch.__version__, s.__version__)')"
  GPU_BENCH_ITEMS="$items" GPU_BENCH_DEADLINE="$deadline" GPU_BENCH_OUT="$g/bench" \
    GPU_BENCH_RESULTS="$out/results.jsonl" HARNESS_BIN="$g/harness" GPU_BENCH_NO_EXCLUDE=1 \
    GPU_BENCH_PREPARED="$g/tpl/prepared" GPU_BENCH_MINILM="$g/minilm" GPU_BENCH_E5="$g/e5" \
    GPU_BENCH_EMU_MODEL="$g/e5" timeout "$((limit - SECONDS + t0 - 25))" bash scripts/gpu-bench.sh
  echo "gpu-bench exit $?"
  (cd "$g/bench" && tar -cJf "$out/logs.tar.xz" --exclude='*.npy' ./*.log ./*.peer ./*/train/metrics.jsonl 2>/dev/null)
  [[ -d $g/home/cache/cubecl ]] && (cd "$g/home/cache" && tar -cJf "$out/cubecl-cache.tar.xz" cubecl) \
    && echo "cubecl cache: $(du -h "$out/cubecl-cache.tar.xz" | cut -f1) in $out/cubecl-cache.tar.xz"
  echo "total $((SECONDS - t0)) s"
}

case "${1:-}" in
  pack) shift; pack "$@" ;;
  run) shift; [[ $# == 4 ]] || { echo "usage: bash scripts/gpu-kit.sh run KIT ITEMS DEADLINE_S LIMIT_S" >&2; exit 2; }; run "$@" ;;
  *) echo "usage: bash scripts/gpu-kit.sh pack [KIT] | run KIT ITEMS DEADLINE_S LIMIT_S" >&2; exit 2 ;;
esac
