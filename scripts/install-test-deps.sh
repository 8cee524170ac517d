#!/usr/bin/env bash
# Installs the system tools some tests need, from Debian packages, when they are missing:
#
#   bash scripts/install-test-deps.sh shellcheck   shellcheck (lints the emitted Slurm scripts)
#   bash scripts/install-test-deps.sh slurm        slurm-wlm and munge (the local Slurm cluster
#                                                  of crates/sweep/tests/slurm_local.rs)
#   bash scripts/install-test-deps.sh vulkan       libvulkan1 (the Vulkan loader) and, when no
#                                                  Vulkan driver is installed, mesa-vulkan-drivers
#                                                  (lavapipe, a software Vulkan device: tests/wgpu.rs)
#   bash scripts/install-test-deps.sh mpi          Open MPI (mpirun, library, headers) and libclang:
#                                                  what `--features mpi` needs to build (the mpi
#                                                  crate generates its bindings) and tests/mpi.rs
#                                                  to run
#   bash scripts/install-test-deps.sh clippy       the Rust toolchain's clippy and rustfmt
#   bash scripts/install-test-deps.sh rustfmt      components (`cargo clippy`, `cargo fmt`),
#                                                  through rustup rather than apt
#
# Several names may be given. A tool already there is left alone (a component that answers
# `--version` is not asked of rustup, so that works offline). Installing a Debian package
# needs root and apt-get; without them the script says what to install by hand and exits 1
# (the tests then fail rather than skip a check silently).
set -euo pipefail

usage() {
    echo "usage: $0 shellcheck|slurm|vulkan|mpi|clippy|rustfmt..." >&2
    exit 2
}

[ "$#" -ge 1 ] || usage

packages=()
components=()
for what in "$@"; do
    case "$what" in
        shellcheck)
            command -v shellcheck >/dev/null 2>&1 || packages+=(shellcheck)
            ;;
        slurm)
            # slurmctld/slurmd/sbatch come with slurm-wlm; munge is its default authentication.
            if ! command -v slurmctld >/dev/null 2>&1 || ! command -v slurmd >/dev/null 2>&1 \
                || ! command -v sbatch >/dev/null 2>&1; then
                packages+=(slurm-wlm)
            fi
            command -v munged >/dev/null 2>&1 || packages+=(munge)
            ;;
        vulkan)
            # The loader wgpu opens at run time, and a driver (an ICD manifest) it can find.
            if ! { ldconfig -p 2>/dev/null || true; } | grep -q 'libvulkan\.so\.1 '; then
                packages+=(libvulkan1)
            fi
            driver=0
            for icd in /usr/share/vulkan/icd.d/*.json /etc/vulkan/icd.d/*.json; do
                [ -f "$icd" ] && driver=1
            done
            [ "$driver" -eq 1 ] || packages+=(mesa-vulkan-drivers)
            ;;
        mpi)
            command -v mpirun >/dev/null 2>&1 || packages+=(openmpi-bin)
            [ -e /usr/lib/x86_64-linux-gnu/openmpi/include/mpi.h ] \
                || [ -e /usr/include/x86_64-linux-gnu/openmpi/mpi.h ] \
                || command -v mpicc >/dev/null 2>&1 || packages+=(libopenmpi-dev)
            # bindgen loads libclang at build time (libclang.so or libclang-N.so; not
            # libclang-cpp, which some Debian images carry without it).
            compgen -G '/usr/lib/llvm-*/lib/libclang.so*' >/dev/null \
                || compgen -G '/usr/lib/*/libclang-[0-9]*.so*' >/dev/null || packages+=(libclang-dev)
            ;;
        clippy)
            cargo clippy --version >/dev/null 2>&1 || components+=(clippy)
            ;;
        rustfmt)
            cargo fmt --version >/dev/null 2>&1 || components+=(rustfmt)
            ;;
        *)
            echo "$0: unknown tool '$what' (known: shellcheck, slurm, vulkan, mpi, clippy, rustfmt)" >&2
            usage
            ;;
    esac
done

if [ "${#components[@]}" -gt 0 ]; then
    if ! command -v rustup >/dev/null 2>&1; then
        echo "install-test-deps: missing the Rust components ${components[*]}; no rustup here to add them." >&2
        echo "  fix: install ${components[*]} with the toolchain's installer" >&2
        exit 1
    fi
    echo "install-test-deps: rustup component add ${components[*]}"
    rustup component add "${components[@]}"
fi

if [ "${#packages[@]}" -eq 0 ]; then
    if [ "${#components[@]}" -eq 0 ]; then
        echo "install-test-deps: already installed: $*"
    else
        echo "install-test-deps: installed: $*"
    fi
    exit 0
fi

if [ "$(id -u)" -ne 0 ]; then
    echo "install-test-deps: missing ${packages[*]}; not root, so not installing them." >&2
    echo "  fix: sudo apt-get install -y ${packages[*]}" >&2
    exit 1
fi
if ! command -v apt-get >/dev/null 2>&1; then
    echo "install-test-deps: missing ${packages[*]}; no apt-get here to install them." >&2
    echo "  fix: install ${packages[*]} with this system's package manager" >&2
    exit 1
fi

echo "install-test-deps: installing ${packages[*]}"
export DEBIAN_FRONTEND=noninteractive
# A fresh container has no package lists; an install from stale lists can 404, so refresh once.
if ! apt-get install -y --no-install-recommends "${packages[@]}"; then
    apt-get update
    apt-get install -y --no-install-recommends "${packages[@]}"
fi
