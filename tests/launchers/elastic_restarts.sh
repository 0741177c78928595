#!/usr/bin/env bash
# ouro-run --max-restarts N (docs/ELASTIC.md) on one host:
#   1. -n 3 --max-restarts 2, rank 1 SIGKILLs itself in round 0: the job runs again in round 1,
#      where all 3 ranks make a real ouro communicator (init_probe) through the round's fresh
#      rendezvous store, and ouro-run exits 0. The ranks saw OURO_RESTART_COUNT and
#      TORCHELASTIC_RESTART_COUNT 0, then 1 (TORCHELASTIC_MAX_RESTARTS 2); the last line says
#      1 restart and why (rank 1 killed by SIGKILL).
#   2. the same with --max-restarts 0: it fails as without the flag (exit 137, rank 1 named).
#   3. rank 1 dies in every round, --max-restarts 1: fails after 1 restart, saying none are left.
#   4. 3 nodes on loopback (--nnodes 3): node 2's rank fails, and node 1's rank fails a moment
#      later because of it. All three ouro-runs name one cause, the first posted: a later failure
#      must not overwrite it, and no node may report its own consequence instead.
#   5. the same, elastic (--max-restarts 1, in both rounds): every node's summary gives the same
#      cause for each round.
# No rank is left behind (by PID). usage: elastic_restarts.sh OURO_RUN INIT_PROBE
set -uo pipefail
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
TEST_NAME="launcher ouro-run --max-restarts"
# shellcheck source-path=SCRIPTDIR source=lib.sh
source "$HERE/lib.sh"
ouro_run=${1:-} probe=${2:-}
[[ -x "$ouro_run" ]] || fail "usage: elastic_restarts.sh OURO_RUN INIT_PROBE"
require_probe "$probe"
scrub_launcher_env
make_workdir ouro-elastic
trap 'rc=$?; remove_workdir; exit $rc' EXIT
RANK_SH=$HERE/elastic_rank.sh

no_rank_left() {
  local pid
  for pid in $(cat "$1/pids" 2>/dev/null); do
    pid_alive "$pid" && fail "$2: rank PID $pid is still running after ouro-run ended"
  done
  return 0
}

# 1. one restart, then success
d=$WORK/one && mkdir -p "$d"
out=$(timeout 50 "$ouro_run" -n 3 --max-restarts 2 "$RANK_SH" "$d" kill1 "$probe" 2>&1)
rc=$?
echo "$out"
((rc == 0)) || fail "case 1: ouro-run exited $rc, expected 0"
for r in 0 1 2; do
  for c in 0 1; do
    grep -q "^rank $r/3 round $c te=$c max=2 group=0/1 " "$d/starts" ||
      fail "case 1: rank $r did not start in round $c with TORCHELASTIC_RESTART_COUNT=$c (starts: $(cat "$d/starts"))"
  done
  grep -q "^world rank=$r size=3 " <<<"$out" || fail "case 1: round 1's rank $r did not make its communicator"
done
(($(wc -l <"$d/starts") == 6)) || fail "case 1: expected 6 rank starts (3 per round), got $(wc -l <"$d/starts")"
last=$(tail -n 1 <<<"$out")
[[ "$last" == "ouro-run: job finished in round 1; 1 restart: round 0 failed: rank 1 (pid "*") was killed by signal 9 (SIGKILL"* ]] ||
  fail "case 1: the last line does not give 1 restart and why: '$last'"
no_rank_left "$d" "case 1"

# 2. --max-restarts 0: as today
d=$WORK/zero && mkdir -p "$d"
out=$(timeout 50 "$ouro_run" -n 3 --max-restarts 0 "$RANK_SH" "$d" kill1 "$probe" 2>&1)
rc=$?
echo "$out"
((rc == 137)) || fail "case 2: ouro-run exited $rc, expected 137 (rank 1 killed by SIGKILL, as without the flag)"
grep -q "rank 1 (pid [0-9]*) was killed by signal 9" <<<"$out" || fail "case 2: rank 1's failure is not named"
(($(wc -l <"$d/starts") == 3)) || fail "case 2: ranks started again without restarts allowed"
no_rank_left "$d" "case 2"

# 3. restarts used up
d=$WORK/used && mkdir -p "$d"
out=$(timeout 50 "$ouro_run" -n 3 --max-restarts 1 "$RANK_SH" "$d" killalways 2>&1)
rc=$?
echo "$out"
((rc == 137)) || fail "case 3: ouro-run exited $rc, expected 137 (the last round's failure)"
grep -q "ouro-run: job failed: round 1 failed: rank 1 (pid [0-9]*) was killed by signal 9 .*(no restarts left: --max-restarts 1)" <<<"$out" ||
  fail "case 3: no clear message that the restarts are used up"
grep -q "^ouro-run: job failed in round 1; 1 restart: round 0 failed: rank 1" <<<"$(tail -n 1 <<<"$out")" ||
  fail "case 3: the last line does not count the restart"
(($(wc -l <"$d/starts") == 6)) || fail "case 3: expected 2 rounds of 3 ranks"
no_rank_left "$d" "case 3"
echo "ok: --max-restarts restarts, counts and stops as it should"

# 4 and 5. one cause, the first failure, on every node
cascade() {  # cascade CASE FLAGS...: 3 ouro-runs on loopback, node 2's rank fails first
  local c=$1 n port
  shift
  d=$WORK/cause$c && mkdir -p "$d"
  port=$(free_port)
  PIDS=()
  for n in 0 1 2; do
    timeout 50 "$ouro_run" --node-rank $n --master 127.0.0.1:$port -n 1 --node-timeout 5 --kill-timeout 1 "$@" \
      "$RANK_SH" "$d" cascade >"$d/node$n.out" 2>"$d/node$n.err" </dev/null &
    PIDS+=($!)
  done
  for n in 0 1 2; do wait "${PIDS[$n]}" && fail "case $c: node $n's ouro-run exited 0 after node 2's rank failed"; done
  no_rank_left "$d" "case $c"
}
same_on_every_node() {  # same_on_every_node CASE PATTERN: the nodes' last lines matching it agree
  local got
  got=$(for n in 0 1 2; do grep -o "$2" "$d/node$n.err" | tail -n 1; done | sort -u)
  [[ $(wc -l <<<"$got") == 1 && -n "$got" ]] ||
    { tail -n 3 "$d"/node*.err >&2; fail "case $1: the nodes name different causes: $got"; }
  echo "$got"
}
cascade 4 --nnodes 3
cause=$(same_on_every_node 4 "job failed: .*") || exit 1
[[ "$cause" == "job failed: node "[12]": rank "* ]] || fail "case 4: the cause does not name the node and rank: $cause"
echo "ok: 3 nodes name one cause: ${cause#job failed: }"
cascade 5 --nnodes 3:3 --max-restarts 1 --rdzv-last-call 1
cause=$(same_on_every_node 5 "job failed in round 1; 1 restart: .*") || exit 1
echo "ok: 3 elastic nodes give one cause per round: $cause"
