#!/usr/bin/env bash
# usage: run_hostile.sh PATH/TO/coll_rank PATH/TO/ouro-run
#
# The collective suite across 3 namespace hosts on a hostile network: tbf at 1 Gbit/s on both ends
# of every host link, and nftables dropping $LOSS_PCT% of the packets entering each host (both
# directions of every link). Under ouro-run --nnodes 3 (as run_ouro_run.sh), coll_rank runs every
# collective on the world and on split communicators, then the determinism cases (rounding sums of
# up to 65537 elements, and one of 1 Mi elements that runs the all-reduce between hosts in levels (halving-doubling under the tree), which must
# give the same bits on every rank); every result must be exact
# and nothing may hang (ouro's own timeout is 30 s a call, the job's 60 s). The test also checks
# that packets really were dropped. Bounded sizes keep it short: a lost packet costs TCP a
# retransmission timeout (>= 200 ms) whenever no later packet reveals the loss.
# Exit: 0 pass, 1 fail, 77 not root / namespaces, tc or nft unavailable.
set -euo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
TEST_NAME="netns hostile network"
# shellcheck source-path=SCRIPTDIR source=lib.sh
source "$HERE/lib.sh"

readonly RATE=${NETNS_RATE:-1gbit}
readonly LOSS_PCT=${NETNS_LOSS_PCT:-2}

# The determinism cases have no SHARED line; their HASH lines of all-reduce outputs must agree.
check_hashes_agree() {
  local r first="" mine
  for ((r = 0; r < NRANKS_NS; r++)); do
    mine=$(grep '^HASH allreduce' "$WORK/out/rank-$r.out" || true)
    [[ -n "$mine" ]] || ranks_fail "rank $r printed no all-reduce HASH lines"
    [[ -z "$first" ]] && first=$mine
    [[ "$mine" == "$first" ]] || ranks_fail "rank $r's all-reduce outputs differ from rank 0's (HASH lines)"
  done
}

main() {
  require_netns tc nft
  require_coll_rank "${1:-}"
  local ouro_run=${2:-}
  [[ -x "$ouro_run" ]] || fail "usage: $0 coll_rank ouro-run (ouro-run not found: '$ouro_run')"
  ouro_run=$(realpath "$ouro_run")
  make_workdir ouro-netns-hostile
  trap netns_cleanup EXIT
  trap 'exit 1' INT TERM HUP PIPE
  rank_env
  # The planner's rules (the 1 Mi-element all-reduce is past OURO_HIER_MIN_BYTES): the cost model
  # (OURO_MODEL=auto) could weigh it otherwise, and this run is about the two levels under loss.
  export OURO_MODEL=off
  hosts_up bad
  "$HOSTS" shape "$PREFIX" "$RATE" || fail "hosts.sh shape $PREFIX $RATE failed"
  "$HOSTS" loss "$PREFIX" "$LOSS_PCT" || fail "hosts.sh loss $PREFIX $LOSS_PCT failed"

  local start=$SECONDS
  run_job_on_hosts split "$ouro_run" --mode split --dir "$WORK/out"
  check_results split
  check_placement
  local t_split=$((SECONDS - start))
  mkdir -p "$WORK/out-split" && mv "$WORK"/out/rank-* "$WORK/out-split/"

  start=$SECONDS
  # --big adds a 1 Mi-element all-reduce: large enough for the algorithm between hosts in levels,
  # which under the canonical tree (OURO_ORDER's default) is halving-doubling (the hierarchical
  # chain is the rank order's; tests/netns/run_srun.sh covers it).
  run_job_on_hosts determinism "$ouro_run" --mode determinism --big --dir "$WORK/out"
  check_results determinism
  check_hashes_agree
  local r
  for ((r = 0; r < NRANKS_NS; r++)); do
    grep -q "allreduce #[0-9]* uses the halving-doubling" "$WORK/out/rank-$r.err" ||
      ranks_fail "rank $r: the 1 Mi-element all-reduce did not use the halving-doubling algorithm (OURO_DEBUG=info lines in rank-$r.err)"
  done
  local t_det=$((SECONDS - start))

  local drops total=0 n
  drops=$("$HOSTS" drops "$PREFIX")
  while read -r _ n; do total=$((total + n)); done <<<"$drops"
  echo "packets dropped by the loss rule: $(echo "$drops" | paste -sd' ' -) (total $total)"
  ((total > 0)) || fail "the loss rule dropped no packet: the network was not hostile, so this proves nothing"
  echo "PASS ($TEST_NAME): tbf $RATE + $LOSS_PCT% loss on every link: every collective exact on 6 ranks/3 hosts (split ${t_split} s, determinism ${t_det} s), $total packets dropped, no hang"
}

main "$@"
