#!/usr/bin/env bash
# Installs the Debian 12 packages ouro needs that are missing, then configures and builds it in
# ./build. Safe to run again: it only installs what is missing and only rebuilds what changed.
#   scripts/setup.sh            build and runtime packages
#   scripts/setup.sh --tests    also what the test suite drives (MPI, Slurm, munge, torch, ...)
#   --no-build (after the above) installs packages only (run-tests.sh --sanitize builds its own trees)
set -euo pipefail
cd "$(dirname "$0")/.."

packages=(meson ninja-build g++ pkg-config catch2 libhwloc-dev hwloc-nox libibverbs-dev iproute2
          libopenblas-dev zlib1g-dev dataset-fashion-mnist gnuplot-nox python3-numpy pybind11-dev)
no_build=0
[[ " $* " == *" --no-build "* ]] && no_build=1
if [[ "${1:-}" == "--tests" ]]; then
  # Peers and engines the tests and benchmarks run beside ouro.
  packages+=(openmpi-bin libopenmpi-dev mpich libmpich-dev libgloo-dev slurm-wlm munge
             python3-torch libtorch-dev gnuplot-nox procps psmisc nftables clang libclang-rt-14-dev)
fi

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
  if [[ $(id -u) != 0 ]]; then
    echo "setup.sh: missing Debian packages: ${missing[*]}; run this script as root to install them" >&2
    exit 1
  fi
  echo "setup.sh: installing ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -q
  apt-get install -y -q --no-install-recommends "${missing[@]}"
fi

((no_build)) && exit 0

# CUDA 13 lives outside Debian's paths; meson 1.0.1 finds nvcc only on PATH.
# With nvcc there, the CUDA kernels are required (a broken CUDA setup fails here, not silently).
setup_args=()
if [[ -x /usr/local/cuda/bin/nvcc ]]; then
  export PATH=/usr/local/cuda/bin:$PATH
  setup_args+=(-Dcuda=enabled)
fi
if [[ ! -f build/build.ninja ]]; then
  meson setup build "${setup_args[@]}"
fi
ninja -C build
