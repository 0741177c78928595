#!/usr/bin/env bash
# Builds one libFuzzer target in a clang build of its own and runs it for a bounded time.
#   fuzz/run.sh BUILD_DIR TARGET [SECONDS]
# BUILD_DIR is configured on first use (CC=clang CXX=clang++, -Dfuzz=enabled) and only the
# target's few sources are compiled. The run first replays every saved crash input under
# fuzz/regressions/TARGET/, then fuzzes from fuzz/corpus/TARGET/ for SECONDS (default
# $FUZZ_SECONDS, else 12). A crash leaves its input in BUILD_DIR/artifacts/TARGET/: fix the
# parser, then keep the input under fuzz/regressions/TARGET/ so this test replays it.
# Exits 77 (meson: skipped) when clang or its libFuzzer runtime is not installed.
set -euo pipefail
src=$(cd "$(dirname "$0")/.." && pwd)
build=${1:?usage: fuzz/run.sh BUILD_DIR TARGET [SECONDS]}
target=${2:?usage: fuzz/run.sh BUILD_DIR TARGET [SECONDS]}
seconds=${3:-${FUZZ_SECONDS:-12}}

if ! command -v clang++ >/dev/null; then
  echo "fuzz/run.sh: clang++ is not installed (apt-get install clang libclang-rt-14-dev); skipping"
  exit 77
fi
probe=$(mktemp -d)
trap 'rm -rf "$probe"' EXIT
echo 'extern "C" int LLVMFuzzerTestOneInput(const unsigned char*, unsigned long) { return 0; }' >"$probe/p.cpp"
if ! clang++ -fsanitize=fuzzer,address,undefined "$probe/p.cpp" -o "$probe/p" 2>"$probe/err"; then
  echo "fuzz/run.sh: clang++ cannot link libFuzzer ($(head -c 300 "$probe/err")); install libclang-rt-14-dev; skipping"
  exit 77
fi

mkdir -p "$build"
# One configure/build at a time (meson may run the fuzz tests back to back or in parallel).
exec 9>"$build/.fuzz-run.lock"
flock 9
if [[ ! -f $build/build.ninja ]]; then
  CC=clang CXX=clang++ meson setup "$build" "$src" -Dfuzz=enabled -Dwerror=false -Dbuildtype=debug \
    -Dcuda=disabled -Dpeers=disabled -Dpython=disabled -Dhwloc=disabled -Dibverbs=disabled \
    -Dnative_arch=false >"$build/.fuzz-setup.log" 2>&1 || { cat "$build/.fuzz-setup.log"; exit 1; }
fi
ninja -C "$build" "fuzz/fuzz_$target"
flock -u 9

binary=$build/fuzz/fuzz_$target
regressions=$src/fuzz/regressions/$target
if compgen -G "$regressions/*" >/dev/null; then
  echo "fuzz/run.sh: replaying $(ls "$regressions" | wc -l) saved input(s) from fuzz/regressions/$target"
  "$binary" -rss_limit_mb=1024 -timeout=10 "$regressions"/*
fi

# New inputs go to a scratch corpus in the build tree; the committed seeds stay as they are.
work=$build/corpus/$target
artifacts=$build/artifacts/$target/
mkdir -p "$work" "$artifacts"
echo "fuzz/run.sh: fuzzing $target for ${seconds}s"
if ! "$binary" -max_total_time="$seconds" -rss_limit_mb=1024 -malloc_limit_mb=1024 -timeout=10 \
    -print_final_stats=1 -artifact_prefix="$artifacts" "$work" "$src/fuzz/corpus/$target"; then
  echo "fuzz/run.sh: $target FAILED; the input is in $artifacts; fix the parser and keep the input in" \
       "fuzz/regressions/$target/" >&2
  exit 1
fi
