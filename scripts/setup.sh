#!/usr/bin/env bash
# Installs the Debian 12 packages ouro needs that are missing, then configures and builds it in
# ./build. Safe to run again: it only installs what is missing, configures again only when what
# meson can find has changed since the last configure, and only rebuilds what changed.
#   scripts/setup.sh                  build and runtime packages
#   scripts/setup.sh --tests          also what the test suite drives (MPI, Slurm, munge, torch, ...)
# Options, after the above:
#   --no-build         install packages only (run-tests.sh --sanitize builds its own trees)
#   --configure-only   install and configure, do not compile
#   --no-install       never call apt-get (fail if a package is missing)
#   --builddir DIR     configure and build DIR instead of ./build
set -euo pipefail
cd "$(dirname "$0")/.."

packages=(meson ninja-build g++ pkg-config catch2 libhwloc-dev hwloc-nox libibverbs-dev iproute2
          libopenblas-dev zlib1g-dev dataset-fashion-mnist fortunes gnuplot-nox python3-numpy pybind11-dev
          nlohmann-json3-dev)
test_packages=(openmpi-bin libopenmpi-dev mpich libmpich-dev libgloo-dev slurm-wlm munge
               python3-torch libtorch-dev gnuplot-nox procps psmisc nftables clang libclang-rt-14-dev)
no_build=0 configure_only=0 no_install=0 builddir=build tests=0
while (($#)); do
  case $1 in
    --tests) packages+=("${test_packages[@]}"); tests=1 ;;
    --no-build) no_build=1 ;;
    --configure-only) configure_only=1 ;;
    --no-install) no_install=1 ;;
    --builddir) builddir=${2:?setup.sh: --builddir needs a directory}; shift ;;
    *) echo "setup.sh: unknown argument '$1' (see the comment at the top of scripts/setup.sh)" >&2; exit 2 ;;
  esac
  shift
done

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
  if ((no_install)) || [[ $(id -u) != 0 ]]; then
    echo "setup.sh: missing Debian packages: ${missing[*]}; run this script as root to install them" >&2
    exit 1
  fi
  echo "setup.sh: installing ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -q
  apt-get install -y -q --no-install-recommends "${missing[@]}"
fi

((no_build)) && exit 0

# Every feature whose packages this script installs is enabled, so a package that is missing or
# broken stops the configure with its name instead of a feature (and its tests) vanishing from the
# build. The test-only features (torch, the peer benchmarks) are enabled when --tests installs them.
# hwloc and ibverbs are compiled in (rdma-core is a package); an RDMA device is hardware, which only
# the tests that need one check for.
setup_args=(-Dhwloc=enabled -Dibverbs=enabled -Dpython=enabled -Dtrainer=enabled)
if ((tests)); then
  setup_args+=(-Dtorch=enabled -Dpeers=enabled)
else
  setup_args+=(-Dtorch=auto -Dpeers=auto)
fi
# CUDA 13 lives outside Debian's paths; meson 1.0.1 finds nvcc only on PATH.
# With nvcc there, the CUDA kernels are required (a broken CUDA setup fails here, not silently).
setup_args+=(-Dcuda=auto)
if [[ -x /usr/local/cuda/bin/nvcc ]]; then
  export PATH=/usr/local/cuda/bin:$PATH
  setup_args[-1]=-Dcuda=enabled
fi

# What meson can find. Every optional feature (python and ouro.torch, CUDA, ibverbs, hwloc, the
# peer benchmarks) is decided at configure time, so a package installed after build/ was
# configured (run-main.sh, then run-tests.sh with torch) is only seen by configuring again. The
# package list covers everything apt brings; the files below are what meson's own checks open
# and can appear without apt (CUDA) or be hidden from it (tests/install/test_setup_reconfigure.sh).
probe_files=(/usr/local/cuda/bin/nvcc
             /usr/include/torch/csrc/distributed/c10d/ProcessGroup.hpp
             /usr/lib/x86_64-linux-gnu/libtorch_python.so)
system_fingerprint() {
  {
    dpkg-query -W -f='${Package} ${Version} ${db:Status-Abbrev}\n'
    for f in "${probe_files[@]}"; do
      if [[ -e $f ]]; then echo "present $f"; else echo "absent $f"; fi
    done
    echo "setup ${setup_args[*]}"
  } | sha256sum | cut -d' ' -f1
}
stamp=$builddir/.setup-fingerprint  # written after each configure that setup.sh runs
fingerprint=$(system_fingerprint)

if [[ ! -f $builddir/build.ninja ]]; then
  rm -f "$stamp"
  meson setup "$builddir" "${setup_args[@]}"
  echo "$fingerprint" >"$stamp"
elif [[ ! -f $stamp || $(<"$stamp") != "$fingerprint" ]]; then
  echo "setup.sh: packages or CUDA changed since $builddir was configured; configuring it again"
  # meson keeps the results of compiler checks (has_header, ...) across --reconfigure, so a check
  # that failed before torch was installed would still fail. Forget them first, so that every
  # optional feature ends up as a fresh configure would decide it; the objects stay, so ninja only
  # builds what the new configuration adds. Debian 12's meson 1.0.1 keeps the cache in coredata;
  # if its layout ever differs, --wipe (a full rebuild) gives the same configuration.
  if /usr/bin/python3 - "$builddir" <<'EOF'
import sys
from mesonbuild import coredata
data = coredata.load(sys.argv[1])
data.compiler_check_cache.clear()
data.clear_deps_cache()
coredata.save(data, sys.argv[1])
EOF
  then
    meson setup --reconfigure "$builddir" "${setup_args[@]}"
  else
    echo "setup.sh: could not clear meson's check cache in $builddir; configuring it from scratch (--wipe)"
    meson setup --wipe "$builddir" "${setup_args[@]}"
  fi
  echo "$fingerprint" >"$stamp"
fi

((configure_only)) && exit 0
ninja -C "$builddir"
