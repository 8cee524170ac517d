#!/usr/bin/env bash
# Runs a command as a machine with AVX2 and FMA but no AVX-512 would (AMD EPYC before Zen 4):
# the hand-written kernels narrowed at run time (HARNESS_ISA=avx2) and matrixmultiply's GEMM
# narrowed when it is compiled (MMTEST_FEATURE, read by its build), in a target directory of
# its own (target/avx2) so the normal build is not recompiled back and forth.
#
#   scripts/avx2.sh cargo run --release --locked -- run recipes/laser.yaml
#   scripts/avx2.sh cargo bench --bench classify
#
# The numbers are the same bits as the widest path's (tests/engine_fixture.rs checks the
# kernels' paths); only the speed changes. On a CPU without AVX2 it changes nothing.
set -euo pipefail
if [ "$#" -eq 0 ]; then
    echo "usage: scripts/avx2.sh CMD [ARGS...]   (e.g. cargo bench --bench classify)" >&2
    exit 2
fi
cd "$(dirname "$0")/.."
export HARNESS_ISA=avx2
export MMTEST_FEATURE=avx2,fma,avx,sse2,sse,sse3,ssse3,sse4.1,sse4.2
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR_AVX2:-$PWD/target/avx2}"
exec "$@"
