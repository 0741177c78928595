#!/usr/bin/env bash
# Sets up (with the test-only packages), builds and runs the whole test suite, then prints one
# summary line "N passed, N failed, N skipped". Exit status 0 only when nothing failed.
set -uo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh --tests || exit 1
log=$(mktemp)
# Two processes at a time: CI has 2 cores and the multi-rank tests start real processes.
meson test -C build --num-processes 2 --print-errorlogs "$@" 2>&1 | tee "$log"
status=${PIPESTATUS[0]}
count() { awk -v k="$1" '$0 ~ "^"k":" {print $NF; found=1} END {if (!found) print 0}' "$log" | tail -1; }
ok=$(count "Ok"); expected_fail=$(count "Expected Fail"); fail=$(count "Fail")
unexpected_pass=$(count "Unexpected Pass"); skipped=$(count "Skipped"); timeout=$(count "Timeout")
rm -f "$log"
passed=$((ok + expected_fail))
failed=$((fail + unexpected_pass + timeout))
if ((passed + failed + skipped == 0)); then failed=1; fi  # meson never got to run anything
echo "$passed passed, $failed failed, $skipped skipped"
((failed == 0 && status == 0))
