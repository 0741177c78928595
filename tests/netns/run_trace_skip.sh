#!/usr/bin/env bash
# usage: run_trace_skip.sh PATH/TO/trace_rank PATH/TO/ouro-run
#
# The flight recorder across 3 namespace hosts (issue #34): 2 ranks each under one ouro-run per
# host (--nnodes 3), a loop of all-reduces in which rank 5 (on host 3) leaves out the 7th and then
# waits. After OURO_TIMEOUT_S the others fail; each node's ouro-run collects its ranks' records
# (rank 5 asked with SIGUSR1) and sends them to node 0 through the store, whose analysis must name
# rank 5 and the call the others wait in, within the job's bound. `ouro-run --status` from host 2
# first shows the same while the job waits. Exit: 0 pass, 1 fail, 77 not root / no namespaces.
set -euo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
TEST_NAME="netns flight recorder"
# shellcheck source-path=SCRIPTDIR source=lib.sh
source "$HERE/lib.sh"
readonly LIMIT_S=90

main() {
  require_netns
  local trace_rank=${1:-} ouro_run=${2:-}
  [[ -x "$trace_rank" && -x "$ouro_run" ]] || fail "usage: $0 trace_rank ouro-run"
  trace_rank=$(realpath "$trace_rank")
  ouro_run=$(realpath "$ouro_run")
  make_workdir ouro-netns-trace
  trap netns_cleanup EXIT
  trap 'exit 1' INT TERM HUP PIPE
  rank_env
  export OURO_TIMEOUT_S=8 TMPDIR=$WORK
  unset OURO_DEBUG
  hosts_up trace

  local -a pids=()
  local i master
  master="$(addr 1):$STORE_PORT"
  local start=$SECONDS
  for ((i = 1; i <= NHOSTS; i++)); do
    "$HOSTS" exec "$PREFIX" "$i" "$ouro_run" --nnodes "$NHOSTS" --node-rank $((i - 1)) --nproc-per-node "$PER_HOST" \
      --master "$master" "$trace_rank" --calls 30 --skip 5:7 --then hang --hang-s 60 \
      >"$WORK/ouro-run-h$i.log" 2>&1 </dev/null &
    pids+=($!)
  done
  # While the others wait for rank 5: the live view, asked from another host's namespace.
  sleep 4
  "$HOSTS" exec "$PREFIX" 2 "$ouro_run" --status "$master" >"$WORK/status.log" 2>&1 || true
  for ((i = 1; i <= NHOSTS; i++)); do
    local deadline=$((start + LIMIT_S)) rc=0
    while pid_alive "${pids[i - 1]}" && ((SECONDS < deadline)); do sleep 0.1; done
    pid_alive "${pids[i - 1]}" && { stop_pid "${pids[i - 1]}"; fail "ouro-run on host $i still running after $LIMIT_S s"; }
    wait "${pids[i - 1]}" || rc=$?
    ((rc != 0)) || fail "ouro-run on host $i exited 0; the job should have failed"
  done
  local log=$WORK/ouro-run-h1.log
  grep -q "ranks 0-4 are in allreduce #30 (count=2, float32, sum)" "$log" &&
    grep -q "rank 5 never entered it: not in any call, the last was allreduce #29" "$log" || {
    cat "$log" "$WORK/ouro-run-h3.log" >&2
    fail "node 0's analysis does not name rank 5 and allreduce #30"
  }
  grep -q "this node's flight records went to node 0" "$WORK/ouro-run-h3.log" || {
    cat "$WORK/ouro-run-h3.log" >&2
    fail "host 3's ouro-run did not send its records to node 0"
  }
  grep -q "ranks 0-4 are in allreduce #30" "$WORK/status.log" &&
    grep -q "rank 5 never entered it" "$WORK/status.log" && grep -q "6 ranks on 3 nodes" "$WORK/status.log" || {
    cat "$WORK/status.log" >&2
    fail "ouro-run --status from host 2 did not show rank 5 holding the others up"
  }
  echo "PASS ($TEST_NAME): node 0 named rank 5 and allreduce #30 across 3 namespace hosts in $((SECONDS - start)) s; --status from host 2 showed it live"
}

main "$@"
