#!/usr/bin/env bash
# Sets up (with the test-only packages), builds and runs the whole test suite, then prints one
# summary line "N passed, N failed, N skipped (REASON: N, ...)". A test may skip only for missing
# hardware (no GPU, no RDMA device): any other skip counts as a failure, named above the line
# (scripts/skip_reasons.py). Exit status 0 only when nothing failed.
#   scripts/run-tests.sh [meson test args]           the suite in ./build
#   scripts/run-tests.sh --after-main [args]         the README's flow, what .ci/run runs: first
#       scripts/run-main.sh (the README's first command) on this clone, then the suite; a failed
#       main job counts as one failure in the summary, a working one adds nothing to it
#   scripts/run-tests.sh --sanitize[=MODE] [args]    the suite under sanitizers, MODE address
#       (ASan + UBSan, in ./build-asan), thread (TSan, in ./build-tsan) or both (the default);
#       see docs/TESTING.md for what it covers and what it leaves out.
set -uo pipefail
cd "$(dirname "$0")/.."

modes=()
args=()
after_main=0
for a in "$@"; do
  case $a in
    --after-main) after_main=1 ;;
    --sanitize) modes+=(address thread) ;;
    --sanitize=address | --sanitize=asan) modes+=(address) ;;
    --sanitize=thread | --sanitize=tsan) modes+=(thread) ;;
    --sanitize=*)
      echo "run-tests.sh: unknown sanitizer '${a#--sanitize=}'; use --sanitize=address, --sanitize=thread or --sanitize" >&2
      exit 2 ;;
    *) args+=("$a") ;;
  esac
done

# Sorts the skips of the run whose testlog.json is $1 by reason (scripts/skip_reasons.py): only a
# missing GPU or RDMA device may skip on a machine setup.sh prepared. Sets the globals skipped (those
# skips), unexpected_skips (every other skip, which the callers count as failures, each named on
# stderr) and skip_reasons ("no GPU: 5, no RDMA device: 1").
sort_skips() {
  local out
  out=$(/usr/bin/python3 scripts/skip_reasons.py "$1")
  skipped=$(awk '$1 == "allowed" {print $2}' <<<"$out")
  unexpected_skips=$(awk '$1 == "unexpected" {print $2}' <<<"$out")
  skip_reasons=$(sed -n 's/^reasons //p' <<<"$out")
  skipped=${skipped:-0} unexpected_skips=${unexpected_skips:-0}
}

# "N passed, N failed, N skipped", with the skips' reasons when there are any.
summary_line() {  # passed failed skipped reasons
  local line="$1 passed, $2 failed, $3 skipped"
  [[ -n $4 ]] && line+=" ($4)"
  echo "$line"
}

# Reads meson test's closing counts from $1 into the globals passed and failed and skipped.
count_results() {
  local log=$1
  count() { awk -v k="$1" '$0 ~ "^"k":" {print $NF; found=1} END {if (!found) print 0}' "$log" | tail -1; }
  local ok expected_fail fail unexpected_pass timeout
  ok=$(count "Ok"); expected_fail=$(count "Expected Fail"); fail=$(count "Fail")
  unexpected_pass=$(count "Unexpected Pass"); skipped=$(count "Skipped"); timeout=$(count "Timeout")
  passed=$((ok + expected_fail))
  failed=$((fail + unexpected_pass + timeout))
  if ((passed + failed + skipped == 0)); then failed=1; fi  # meson never got to run anything
}

if ((${#modes[@]} == 0)); then
  main_failed=0
  if ((after_main)); then
    # A new user runs the README's two commands in order on one clone, and the first one leaves
    # build/ configured without the test packages; the suite must then give what it gives alone.
    echo "run-tests.sh: the README's first command first: scripts/run-main.sh"
    main_log=$(mktemp)
    if scripts/run-main.sh >"$main_log" 2>&1; then
      grep -E "^# (ouro all_reduce|Out of bounds|Avg bus)" "$main_log" || true
    else
      main_failed=1
      cat "$main_log"
      echo "FAIL: scripts/run-main.sh (the README's first command) exited non-zero; its output is above"
    fi
    rm -f "$main_log"
  fi
  scripts/setup.sh --tests || exit 1
  log=$(mktemp)
  # The library caches its probed link costs (OURO_MODEL=auto) under $XDG_CACHE_HOME for a week;
  # the suite's ranks probe a machine busy with the suite itself, so they keep their cache in a
  # folder of their own, fresh each run, instead of leaving it for the user's jobs.
  XDG_CACHE_HOME=$(mktemp -d)
  export XDG_CACHE_HOME
  # Two processes at a time: CI has 2 cores and the multi-rank tests start real processes.
  meson test -C build --num-processes 2 --print-errorlogs "${args[@]}" 2>&1 | tee "$log"
  status=${PIPESTATUS[0]}
  count_results "$log"
  rm -f "$log"
  rm -rf "$XDG_CACHE_HOME"
  sort_skips build/meson-logs/testlog.json
  failed=$((failed + main_failed + unexpected_skips))
  summary_line "$passed" "$failed" "$skipped" "$skip_reasons"
  ((failed == 0 && status == 0))
  exit
fi

# ---- Sanitizer runs -------------------------------------------------------------------------
# Packages only: the sanitized trees are configured and built below, ./build is left alone.
scripts/setup.sh --tests --no-build || exit 1
supp=$PWD/scripts/sanitizers
# Suites left out under sanitizers, each with its reason (docs/TESTING.md says the same).
excluded_suites=(python torch_suite cuda)
declare -A exclusion_reason=(
  [python]="the Python package is not built: /usr/bin/python3 and torch are not instrumented, and a sanitized extension needs the runtime preloaded into them"
  [torch_suite]="runs PyTorch's suite through the Python package, which is not built here (same reason)"
  [cuda]="configured with -Dcuda=disabled: the CUDA runtime and kernels are not run under host sanitizers"
)
# ASan aborts at the first error (a core-less SIGABRT the test sees), LeakSanitizer runs at exit,
# UBSan stops at its first report instead of printing and going on; TSan likewise. The wrapper
# sends every process's report to a file, so children's reports fail the test too.
export ASAN_OPTIONS="detect_leaks=1:abort_on_error=1"
export LSAN_OPTIONS="suppressions=$supp/lsan.supp:print_suppressions=0"
export UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1:suppressions=$supp/ubsan.supp"
export TSAN_OPTIONS="halt_on_error=1:second_deadlock_stack=1:suppressions=$supp/tsan.supp"
# hwloc's PCI plugin keeps libpciaccess's state in that library's globals and dlcloses it when
# the last topology goes; LeakSanitizer, at exit, then finds the state unreachable in a module no
# longer loaded (1016 bytes, "<unknown module>"; with the library kept loaded, no report). The
# plugin only adds PCI devices (GPU and NIC locality), which the CUDA-less sanitized builds do
# not use; hwloc's own XML and CPU discovery stay on.
export HWLOC_PLUGINS_BLACKLIST=hwloc_pci

total_passed=0 total_failed=0 total_skipped=0 status_all=0
for mode in "${modes[@]}"; do
  case $mode in
    address) dir=build-asan; sanitize=address,undefined; multiplier=3 ;;
    thread) dir=build-tsan; sanitize=thread; multiplier=6 ;;
  esac
  echo "run-tests.sh: -Db_sanitize=$sanitize in $dir"
  for s in "${excluded_suites[@]}"; do echo "run-tests.sh: suite '$s' left out: ${exclusion_reason[$s]}"; done
  if [[ ! -f $dir/build.ninja ]]; then
    # b_lundef=false: the sanitizer runtimes resolve libouro.so's __asan_/__tsan_ symbols at load
    # time. peers=disabled: the peer benchmarks (Open MPI, MPICH, Gloo beside ouro) time other
    # libraries, which are not instrumented; the suite's tests of ouro do not need them.
    meson setup "$dir" -Db_sanitize=$sanitize -Db_lundef=false -Dcuda=disabled -Dpython=disabled \
      -Dpeers=disabled || exit 1
  fi
  ninja -C "$dir" || exit 1
  no_suites=()
  for s in "${excluded_suites[@]}"; do no_suites+=(--no-suite "$s"); done
  log=$(mktemp)
  # Sanitized programs run 2-3x (ASan) to 5-15x (TSan) slower: the per-test timeouts grow with it,
  # and so do the deadlines the tests give the processes they start (tests/support/process.cpp).
  TEST_TIMEOUT_MULTIPLIER=$multiplier meson test -C "$dir" --num-processes 2 --print-errorlogs --timeout-multiplier "$multiplier" \
    --wrapper "$supp/wrap.sh" "${no_suites[@]}" "${args[@]}" 2>&1 | tee "$log"
  status=${PIPESTATUS[0]}
  count_results "$log"
  rm -f "$log"
  sort_skips "$dir/meson-logs/testlog.json"
  failed=$((failed + unexpected_skips))
  echo "run-tests.sh: $mode: $(summary_line "$passed" "$failed" "$skipped" "$skip_reasons")"
  total_passed=$((total_passed + passed)); total_failed=$((total_failed + failed))
  total_skipped=$((total_skipped + skipped))
  ((status != 0)) && status_all=$status
done
echo "$total_passed passed, $total_failed failed, $total_skipped skipped"
((total_failed == 0 && status_all == 0))
