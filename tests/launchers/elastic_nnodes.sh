#!/usr/bin/env bash
# ouro-run --nnodes 2:3 across 3 network-namespace hosts (tests/netns/hosts.sh; docs/ELASTIC.md):
#   1. 3 hosts join round 0 (2 ranks each, world 6). Host 3's link is cut mid-job: node 0 finds
#      its ouro-run silent (--node-timeout 3), fails the round, and the job restarts on the 2
#      hosts left; round 1's 4 ranks make a real ouro communicator across the two hosts
#      (init_probe, TCP between namespaces) and both ouro-runs exit 0 saying 1 restart and why.
#      The cut host's ouro-run loses node 0 and fails by itself.
#   2. node 0's ouro-run is killed mid-job: the other hosts fail with a message that says node 0
#      was lost and that the job cannot go on without it.
# Exit 77 (one line) without root or network namespaces. usage: elastic_nnodes.sh OURO_RUN INIT_PROBE
set -uo pipefail
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
TEST_NAME="launcher ouro-run --nnodes 2:3"
# shellcheck source-path=SCRIPTDIR source=lib.sh
source "$HERE/lib.sh"
HOSTS=$HERE/../netns/hosts.sh
ouro_run=${1:-} probe=${2:-}
[[ -x "$ouro_run" ]] || fail "usage: elastic_nnodes.sh OURO_RUN INIT_PROBE"
require_probe "$probe"
ouro_run=$(realpath "$ouro_run") probe=$(realpath "$probe")
[[ $(id -u) == 0 ]] || skip "needs root to create network namespaces"
for cmd in ip nsenter unshare; do command -v $cmd >/dev/null 2>&1 || skip "$cmd is not installed"; done
ip netns list >/dev/null 2>&1 || skip "'ip netns' does not work here"
namespace_hosts_test ouro-elastic-ns
RANK_SH=$HERE/elastic_rank.sh

wait_for() {  # wait_for SECONDS WHAT CMD...
  local n=$(($1 * 10)) what=$2 i
  shift 2
  for ((i = 0; i < n; i++)); do
    "$@" && return 0
    sleep 0.1
  done
  show
  fail "timed out waiting for $what"
}
show() {
  local f
  for f in "$d"/node*.err; do echo "---- $(basename "$f")" >&2; tail -n 20 "$f" >&2; done
}
all_ready() {  # all_ready N: ranks 0..N-1 of round 0 are up
  local r
  for ((r = 0; r < $1; r++)); do [[ -e "$d/ready.$r.0" ]] || return 1; done
}
start_nodes() {  # start_nodes PREFIX: one ouro-run per host
  local i
  PIDS=()
  for i in 1 2 3; do
    "$HOSTS" exec "$1" "$i" "$ouro_run" --nnodes 2:3 --node-rank $((i - 1)) --master "$("$HOSTS" addr "$1" 1):29500" \
      -n 2 --max-restarts 2 --rdzv-timeout 20 --rdzv-last-call 2 --node-timeout 3 --kill-timeout 1 \
      "$RANK_SH" "$d" wait "$probe" >"$d/node$((i - 1)).out" 2>"$d/node$((i - 1)).err" </dev/null &
    PIDS+=($!)
  done
}
RC=0
exit_of() {  # exit_of I: wait for node I's ouro-run (30 s at most); its status goes to RC
  local i
  for ((i = 0; i < 300; i++)); do pid_alive "${PIDS[$1]}" || break; sleep 0.1; done
  pid_alive "${PIDS[$1]}" && { show; fail "node $1's ouro-run still runs"; }
  wait "${PIDS[$1]}"
  RC=$?
}

# 1. a host lost mid-job: the job goes on with the other two
PREFIX="elc-$$"
"$HOSTS" up "$PREFIX" 3 >"$WORK/up.log" 2>&1 || { cat "$WORK/up.log" >&2; fail "hosts.sh up failed"; }
d=$WORK/cut && mkdir -p "$d"
start_nodes "$PREFIX"
wait_for 30 "6 ranks in round 0" all_ready 6
"$HOSTS" cut "$PREFIX" 3
for n in 0 1; do
  exit_of $n
  rc=$RC
  ((rc == 0)) || { show; fail "node $n's ouro-run exited $rc after the restart, expected 0"; }
done
for r in 0 1 2 3; do
  grep -q "^world rank=$r size=4 " "$d"/node*.out || { show; fail "round 1's rank $r did not make its communicator of 4"; }
done
grep -q "^rank [0-3]/4 round 1 te=1 max=2 group=[01]/2 " "$d/starts" || fail "round 1's ranks did not get world 4 on 2 hosts"
for n in 0 1; do
  last=$(tail -n 1 "$d/node$n.err")
  [[ "$last" == "ouro-run: job finished in round 1; 1 restart: round 0 failed: node 2 was lost: its ouro-run was silent for "* ]] ||
    { show; fail "node $n's last line does not say 1 restart because node 2 was lost: '$last'"; }
done
exit_of 2
rc=$RC
((rc != 0)) || fail "the cut host's ouro-run exited 0"
grep -q "node 0 was lost" "$d/node2.err" || { show; fail "the cut host does not say it lost node 0"; }
for pid in $(cat "$d/pids"); do pid_alive "$pid" && fail "rank PID $pid is still running"; done
"$HOSTS" down "$PREFIX" >/dev/null 2>&1
echo "ok: host 3 cut, the job restarted on 2 hosts and finished"

# 2. node 0 lost
PREFIX="el0-$$"
"$HOSTS" up "$PREFIX" 3 >"$WORK/up.log" 2>&1 || { cat "$WORK/up.log" >&2; fail "hosts.sh up failed"; }
d=$WORK/node0 && mkdir -p "$d"
start_nodes "$PREFIX"
wait_for 30 "6 ranks in round 0" all_ready 6
kill -KILL "${PIDS[0]}"
for n in 1 2; do
  exit_of $n
  rc=$RC
  ((rc != 0)) || fail "node $n's ouro-run exited 0 without node 0"
  grep -q "node 0 was lost.*node 0's ouro-run holds the rendezvous store, so the job cannot go on without it" "$d/node$n.err" ||
    { show; fail "node $n does not say that node 0 was lost and the job cannot go on"; }
done
for pid in $(cat "$d/pids"); do pid_alive "$pid" && fail "rank PID $pid is still running"; done
"$HOSTS" down "$PREFIX" >/dev/null 2>&1
PREFIX=""
echo "ok: node 0 lost, the others fail saying so"
