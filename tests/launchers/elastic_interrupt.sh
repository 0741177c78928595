#!/usr/bin/env bash
# Ctrl-C (SIGINT to ouro-run) in an elastic job (--max-restarts) stops everything at every stage:
#   a. during a round: the ranks are stopped, no restart, exit 130;
#   b. between rounds: round 0 failed and its ranks (which ignore SIGTERM) are being stopped when
#      SIGINT comes: they are killed at once, round 1 never starts, exit 130;
#   c. at a round's rendezvous (--nnodes 2, node 0 alone on loopback): exit 130 at once.
# Every rank's PID is gone afterwards. usage: elastic_interrupt.sh OURO_RUN
set -uo pipefail
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
TEST_NAME="launcher ouro-run --max-restarts Ctrl-C"
# shellcheck source-path=SCRIPTDIR source=lib.sh
source "$HERE/lib.sh"
ouro_run=${1:-}
[[ -x "$ouro_run" ]] || fail "usage: elastic_interrupt.sh OURO_RUN"
scrub_launcher_env
make_workdir ouro-elastic-int
LAUNCHER=""
trap 'rc=$?; stop_pid "$LAUNCHER"; remove_workdir; exit $rc' EXIT
RANK_SH=$HERE/elastic_rank.sh

wait_for() {  # wait_for WHAT CMD...: up to 20 s
  local what=$1 i
  shift
  for ((i = 0; i < 200; i++)); do
    "$@" && return 0
    sleep 0.1
  done
  fail "timed out waiting for $what"
}
finish() {  # finish CASE: ouro-run must exit 130 within 10 s, no rank left
  local i rc pid
  for ((i = 0; i < 100; i++)); do pid_alive "$LAUNCHER" || break; sleep 0.1; done
  pid_alive "$LAUNCHER" && fail "$1: ouro-run still runs 10 s after SIGINT"
  wait "$LAUNCHER"
  rc=$?
  LAUNCHER=""
  cat "$d/err"
  ((rc == 130)) || fail "$1: ouro-run exited $rc, expected 130"
  for pid in $(cat "$d/pids" 2>/dev/null); do
    pid_alive "$pid" && fail "$1: rank PID $pid is still running"
  done
  return 0
}

# a. during a round
d=$WORK/a && mkdir -p "$d"
"$ouro_run" -n 2 --max-restarts 3 "$RANK_SH" "$d" wait 2>"$d/err" &
LAUNCHER=$!
wait_for "the ranks of round 0" test -e "$d/ready.1.0" -a -e "$d/ready.0.0"
kill -INT "$LAUNCHER"
finish "a (during a round)"
grep -q "interrupted (SIGINT) while running 2 local ranks" "$d/err" || fail "a: the stage is not named"
(($(wc -l <"$d/starts") == 2)) || fail "a: the job was restarted after SIGINT"

# b. between rounds, while round 0's ranks are being stopped
d=$WORK/b && mkdir -p "$d"
"$ouro_run" -n 3 --max-restarts 3 --kill-timeout 20 "$RANK_SH" "$d" slowstop 2>"$d/err" &
LAUNCHER=$!
wait_for "round 0 to fail" grep -q "stopping the other 2 local ranks" "$d/err"
kill -INT "$LAUNCHER"
finish "b (between rounds)"
grep -q "interrupted (SIGINT) between rounds (round 0 failed: rank 1 .*); not restarting" "$d/err" ||
  fail "b: no line saying the restart was called off"
(($(wc -l <"$d/starts") == 3)) || fail "b: round 1 started after SIGINT"

# c. at the rendezvous of an elastic multi-node job
d=$WORK/c && mkdir -p "$d"
port=$(free_port)
OURO_TOKEN=t "$ouro_run" --nnodes 2 --node-rank 0 --master "127.0.0.1:$port" --max-restarts 1 \
  "$RANK_SH" "$d" wait 2>"$d/err" &
LAUNCHER=$!
sleep 1
kill -INT "$LAUNCHER"
finish "c (rendezvous)"
grep -q "interrupted (SIGINT) while waiting for rendezvous round 0 at 127.0.0.1:$port (node rank 0 of 2; 1 nodes joined" "$d/err" ||
  fail "c: the stage is not named"
[[ ! -e "$d/starts" ]] || fail "c: ranks started without the other node"
echo "ok: SIGINT stops an elastic job during a round, between rounds and at the rendezvous"
