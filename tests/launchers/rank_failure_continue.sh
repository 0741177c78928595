#!/usr/bin/env bash
# ouro-run --rank-failure continue (docs/ELASTIC.md): rank 1 of 3 exits 3 at once, ranks 0 and 2
# exit 0 two seconds later. With continue, ouro-run reports rank 1's failure, lets the others
# finish, and exits 0. With the default (stop), rank 1's failure stops the others as before and
# ouro-run exits 3. usage: rank_failure_continue.sh OURO_RUN
set -uo pipefail
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
TEST_NAME="launcher ouro-run --rank-failure continue"
# shellcheck source-path=SCRIPTDIR source=lib.sh
source "$HERE/lib.sh"
ouro_run=${1:-}
[[ -x "$ouro_run" ]] || fail "usage: rank_failure_continue.sh OURO_RUN"
scrub_launcher_env
make_workdir ouro-continue
trap 'rc=$?; remove_workdir; exit $rc' EXIT
RANK_SH=$HERE/elastic_rank.sh

d=$WORK/continue && mkdir -p "$d"
out=$(timeout 50 "$ouro_run" -n 3 --rank-failure continue "$RANK_SH" "$d" exit3 2>&1)
rc=$?
echo "$out"
((rc == 0)) || fail "continue: ouro-run exited $rc, expected 0 (the other ranks ended with 0)"
grep -q "ouro-run: rank 1 (pid [0-9]*) exited with status 3; the other 2 local ranks keep running (--rank-failure continue)" <<<"$out" ||
  fail "continue: rank 1's failure is not reported"
(($(wc -l <"$d/finished" 2>/dev/null || echo 0) == 2)) || fail "continue: ranks 0 and 2 did not both finish"

d=$WORK/stop && mkdir -p "$d"
out=$(timeout 50 "$ouro_run" -n 3 "$RANK_SH" "$d" exit3 2>&1)
rc=$?
echo "$out"
((rc == 3)) || fail "default: ouro-run exited $rc, expected 3 (rank 1's status)"
grep -q "rank 1 (pid [0-9]*) exited with status 3; stopping the other 2 local ranks" <<<"$out" ||
  fail "default: rank 1's failure did not stop the others"
[[ ! -e "$d/finished" ]] || fail "default: a rank ran on to the end after rank 1 failed"
echo "ok: --rank-failure continue reports and runs on; stop stops"
