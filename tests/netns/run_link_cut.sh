#!/usr/bin/env bash
# usage: run_link_cut.sh PATH/TO/coll_rank
#
# A host's network dies mid-collective: 6 ranks on 3 namespace hosts run a loop of collectives
# (coll_rank matrix mode) with OURO_TIMEOUT_S=$CUT_TIMEOUT_S; once every rank is in the loop, the
# test runs `ip link set down` on host $CUT_HOST's link (both ends). Then every rank, on every
# host, must fail on its own (no launcher stops anyone: each rank is started directly in its host
# with OURO_RANK/OURO_WORLD_SIZE/OURO_LOCAL_RANK/OURO_INIT) within the timeout plus slack, and:
#   - ranks on the healthy hosts name the cut host and at least one of its ranks ("rank R on
#     HOST") in their error, as the cause or as what they waited for;
#   - ranks on the cut host name the other hosts' ranks they lost;
#   - every error is ouroRemoteError: the ranks found the host unreachable (keepalive probes or
#     retransmissions unanswered for OURO_TIMEOUT_S / 2) instead of timing out waiting for it
#     or for a healthy rank stuck behind it (which named the wrong host; see docs/MULTIHOST.md).
# The store is served by rank 0 on host 1, so host 1 is not the one cut: init is not what is tested.
# Exit: 0 pass, 1 fail, 77 not root / namespaces unavailable.
set -euo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
TEST_NAME="netns link cut"
# shellcheck source-path=SCRIPTDIR source=lib.sh
source "$HERE/lib.sh"

readonly CUT_TIMEOUT_S=${NETNS_CUT_TIMEOUT_S:-10}
readonly CUT_HOST=2
# A rank may first wait out its own timeout for a healthy peer that is itself stuck; the failure
# then reaches it within about one more timeout. Past this bound, a rank counts as hung.
FAIL_BOUND_S=$((2 * CUT_TIMEOUT_S + 10))  # + 10 s more per TIME_SCALE step (require_coll_rank)

main() {
  require_netns
  require_coll_rank "${1:-}"
  FAIL_BOUND_S=$((FAIL_BOUND_S + 10 * (TIME_SCALE - 1)))
  make_workdir ouro-netns-cut
  trap netns_cleanup EXIT
  trap 'exit 1' INT TERM HUP PIPE
  rank_env
  export OURO_TIMEOUT_S=$CUT_TIMEOUT_S
  hosts_up cut

  # Long enough to still be running when the link goes down (it is cut within a second of start).
  local -a args=(--mode matrix --colls "allreduce,reducescatter,allgather,broadcast,reduce,alltoall" --dir "$WORK/out")
  local -a pids=()
  local r host
  for ((r = 0; r < NRANKS_NS; r++)); do
    host=$((r / PER_HOST + 1))
    OURO_RANK=$r OURO_WORLD_SIZE=$NRANKS_NS OURO_LOCAL_RANK=$((r % PER_HOST)) OURO_LOCAL_WORLD_SIZE=$PER_HOST \
      OURO_INIT="tcp://$(addr 1):$STORE_PORT" \
      "$HOSTS" exec "$PREFIX" "$host" "$RANK_WRAPPER" "$COLL_RANK" "${args[@]}" </dev/null &
    pids+=($!)
  done

  # Every rank in the loop: all ready lines are out; half a second later collectives are running
  # (a TIME line would come too late: the first collective's cases may all be done by then).
  local i ready
  for ((i = 0; i < 300 * TIME_SCALE; i++)); do
    ready=$(cat "$WORK"/out/rank-*.err 2>/dev/null | grep -c " of $NRANKS_NS ready " || true)
    ((ready == NRANKS_NS)) && break
    sleep 0.1
  done
  ((ready == NRANKS_NS)) || ranks_fail "only $ready of $NRANKS_NS ranks initialised within $((30 * TIME_SCALE)) s"
  sleep 0.5
  for r in "${!pids[@]}"; do
    pid_alive "${pids[r]}" || ranks_fail "rank $r ended before the link was cut (the loop is too short?)"
  done
  "$HOSTS" cut "$PREFIX" "$CUT_HOST"
  local cut_at=$SECONDS
  echo "cut: host $CUT_HOST ($(host_name "$CUT_HOST")) link down at ${cut_at} s"

  # Every rank must end by itself within the bound.
  local -a ended=()
  local left
  for ((i = 0; i < FAIL_BOUND_S * 10; i++)); do
    left=0
    for r in "${!pids[@]}"; do
      if [[ -z "${ended[r]:-}" ]]; then
        if pid_alive "${pids[r]}"; then left=$((left + 1)); else ended[r]=$((SECONDS - cut_at)); fi
      fi
    done
    ((left == 0)) && break
    sleep 0.1
  done
  local rc
  for r in "${!pids[@]}"; do
    [[ -n "${ended[r]:-}" ]] || ranks_fail "rank $r still running $FAIL_BOUND_S s after host $CUT_HOST's link was cut (hang)"
    rc=0
    wait "${pids[r]}" || rc=$?
    ((rc != 0)) || ranks_fail "rank $r exited 0 although host $CUT_HOST's link was cut mid-loop"
  done

  # What each rank said (coll_rank prints "ERROR <call>: <result>: <ouro's message>").
  local err cut_name
  cut_name=$(host_name "$CUT_HOST")
  for ((r = 0; r < NRANKS_NS; r++)); do
    err=$(grep -m1 '^ERROR ' "$WORK/out/rank-$r.out" || true)
    [[ -n "$err" ]] || ranks_fail "rank $r failed without an ERROR line"
    echo "rank $r (host $((r / PER_HOST + 1)), ended ${ended[r]} s after the cut): $err"
    [[ "$err" == *": ouroRemoteError: "* ]] ||
      ranks_fail "rank $r did not find host $CUT_HOST unreachable before its timeout (expected ouroRemoteError): $err"
    if ((r / PER_HOST + 1 == CUT_HOST)); then
      [[ "$err" =~ rank\ [0-9]+\ on\ $PREFIX-h[0-9] ]] ||
        ranks_fail "rank $r (on the cut host) does not name the ranks and hosts it lost: $err"
    else
      [[ "$err" =~ rank\ ($((CUT_HOST * PER_HOST - 2))|$((CUT_HOST * PER_HOST - 1)))\ on\ $cut_name ]] ||
        ranks_fail "rank $r does not name the unreachable host $cut_name and its ranks: $err"
    fi
  done
  echo "PASS ($TEST_NAME): host $CUT_HOST's link cut mid-loop; all 6 ranks failed by themselves within $FAIL_BOUND_S s, naming the unreachable host and ranks"
}

main "$@"
