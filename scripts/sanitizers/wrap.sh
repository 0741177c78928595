#!/usr/bin/env bash
# meson test --wrapper for the sanitizer runs (scripts/run-tests.sh --sanitize): runs one test with
# every sanitizer report written to files in a directory of its own, from the test program and
# from every process it starts (ranks, launchers, their children inherit the options). A report
# fails the test even where a child's stderr is only captured, or its non-zero exit is what the
# test expects (a rank made to fail on purpose). The reports are printed to stderr, so meson's
# --print-errorlogs shows them under the test's name.
set -u
dir=$(mktemp -d /tmp/ouro-sanitizer-XXXXXX) || exit 1
# log_path makes each process write <prefix>.<pid> when it has something to report (and only then).
export ASAN_OPTIONS="${ASAN_OPTIONS:-}:log_path=$dir/asan"
export UBSAN_OPTIONS="${UBSAN_OPTIONS:-}:log_path=$dir/ubsan"
export TSAN_OPTIONS="${TSAN_OPTIONS:-} log_path=$dir/tsan"
export LSAN_OPTIONS="${LSAN_OPTIONS:-}:log_path=$dir/lsan"
"$@"
status=$?
shopt -s nullglob
reports=("$dir"/*)
if ((${#reports[@]})); then
  for f in "${reports[@]}"; do
    echo "==== sanitizer report ${f##*/} (pid ${f##*.}) while running: $*" >&2
    cat "$f" >&2
  done
  echo "sanitizer: ${#reports[@]} process(es) reported problems (above); the test fails" >&2
  # 77 would make meson count a skip, 0 a pass: any report is a failure.
  ((status == 0 || status == 77)) && status=1
fi
rm -rf "$dir"
exit "$status"
