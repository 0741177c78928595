#!/usr/bin/env bash
# order_consistency.sh: issue #37's "the same bits under every OURO_ALGO" on namespace hosts
# (tests/netns/hosts.sh) with tbf-shaped host links. For each hosts x ranks-a-host and each
# algorithm, one job of the collective suite's rank program in its canonical mode (coll_rank
# --mode canonical: float32/64, fp16, bf16 and both fp8 x sum/prod/max/min/avg, inputs whose sums
# round, 1, 37 and 4001 elements a rank; all-reduce in and out of place, reduce-scatter, the
# all-gather of it, reduce to two roots), every output compared bit for bit on its rank with the
# order computed locally (tests/collectives/reference.hpp reduceCanonical: the canonical tree, or
# the left fold under OURO_ORDER=rank). Every algorithm passing is every algorithm giving the
# same bits. Prints one line per job: the checks and failures summed over the ranks.
#
#   bench/multihost/order_consistency.sh [--build DIR] [--hosts "2 4 8"] [--per-host "1 2"]
#       [--rate 1gbit] [--order tree|rank] [--out DIR]
#       [--algos "auto pairwise doubling halving-doubling gather-fold one-shot hierarchical"]
#
# A named algorithm that does not apply to a call runs what the planner runs instead (it says so
# under OURO_DEBUG=info, kept in the logs). Needs root and a build of coll_rank and ouro-run.
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
HOSTS=$ROOT/tests/netns/hosts.sh
BUILD=$ROOT/build
OUT=""
HOST_LIST="2 4 8"
PER_HOST_LIST="1 2"
RATE=1gbit
ORDER=tree
ALGOS="auto pairwise doubling halving-doubling gather-fold one-shot hierarchical"
RUN_TIMEOUT=300
while (($#)); do
  case "$1" in
    --build) BUILD=$(realpath "$2"); shift ;;
    --out) OUT=$2; shift ;;
    --hosts) HOST_LIST=$2; shift ;;
    --per-host) PER_HOST_LIST=$2; shift ;;
    --rate) RATE=$2; shift ;;
    --order) ORDER=$2; shift ;;
    --algos) ALGOS=$2; shift ;;
    -h | --help) sed -n '2,/^set -euo/p' "$0" | sed '$d' | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "order_consistency.sh: unknown argument '$1' (--help lists them)" >&2; exit 2 ;;
  esac
  shift
done
RUN=$BUILD/tools/ouro-run/ouro-run
COLL_RANK=$BUILD/tests/collectives/coll_rank
[[ $(id -u) == 0 ]] || { echo "order_consistency.sh: needs root (network namespaces)" >&2; exit 1; }
for f in "$RUN" "$COLL_RANK"; do
  [[ -x "$f" ]] || { echo "order_consistency.sh: $f is not built (ninja -C $BUILD tools/ouro-run/ouro-run tests/collectives/coll_rank)" >&2; exit 1; }
done
max_hosts=0
for h in $HOST_LIST; do ((h > max_hosts)) && max_hosts=$h; done
((max_hosts >= 2)) || { echo "order_consistency.sh: --hosts needs at least one count >= 2" >&2; exit 2; }

[[ -n "$OUT" ]] || OUT=$(mktemp -d /tmp/ouro-order-consistency.XXXXXX)
mkdir -p "$OUT"
OUT=$(realpath "$OUT")
PREFIX=occ-$$
cleanup() { "$HOSTS" down "$PREFIX" >/dev/null 2>&1 || true; }
trap cleanup EXIT
trap 'exit 1' INT TERM HUP
PORT=22000
START=$SECONDS

# run_job ALGO H L: one ouro-run per host, every rank's report in $OUT/ALGO-HxL/rank-R.out.
run_job() {
  local algo=$1 h=$2 l=$3 i ok=1 pids=() dir=$OUT/$1-$2x$3
  mkdir -p "$dir"
  PORT=$((PORT + 1))
  local master
  master=$("$HOSTS" addr "$PREFIX" 1):$PORT
  for ((i = 1; i <= h; i++)); do
    OURO_ALGO=$algo OURO_ORDER=$ORDER OURO_TOKEN=occ-$$-$PORT OURO_TIMEOUT_S=120 OURO_DEBUG=info NETNS_OUT=$dir \
      timeout -k 5 "$RUN_TIMEOUT" "$HOSTS" exec "$PREFIX" "$i" "$RUN" --nnodes "$h" --node-rank $((i - 1)) \
      --nproc-per-node "$l" --bind-to none --master "$master" "$ROOT/tests/netns/rank.sh" "$COLL_RANK" \
      --mode canonical >"$dir/host-$i.log" 2>&1 &
    pids+=($!)
  done
  for i in "${pids[@]}"; do wait "$i" || ok=0; done
  ((ok)) || "$HOSTS" stop "$PREFIX"
  local checks=0 failures=0 reports=0 r line
  for ((r = 0; r < h * l; r++)); do
    line=$(grep '^SUMMARY ' "$dir/rank-$r.out" 2>/dev/null || true)
    [[ "$line" =~ ^SUMMARY\ checks=([0-9]+)\ failures=([0-9]+)$ ]] || continue
    reports=$((reports + 1))
    checks=$((checks + BASH_REMATCH[1]))
    failures=$((failures + BASH_REMATCH[2]))
  done
  local verdict=PASS
  ((ok && reports == h * l && failures == 0 && checks > 0)) || verdict=FAIL
  printf '%s %dx%d OURO_ORDER=%s OURO_ALGO=%-16s ranks reporting %d/%d, checks %d, failures %d (%d s; %s)\n' \
    "$verdict" "$h" "$l" "$ORDER" "$algo" "$reports" $((h * l)) "$checks" "$failures" $((SECONDS - job_start)) "$dir" |
    tee -a "$OUT/summary.txt"
  [[ $verdict == PASS ]] || grep -h -m3 -e '^FAIL' -e '^ERROR' "$dir"/rank-*.out 2>/dev/null | sed 's/^/    /' | tee -a "$OUT/summary.txt"
}

echo "hosts {$HOST_LIST} x per-host {$PER_HOST_LIST}, tbf $RATE, OURO_ORDER=$ORDER, algorithms {$ALGOS}; build $BUILD; load $(cut -d' ' -f1-3 /proc/loadavg); out $OUT" |
  tee "$OUT/summary.txt"
"$HOSTS" up "$PREFIX" "$max_hosts" >"$OUT/up.log" 2>&1 || { cat "$OUT/up.log" >&2; exit 1; }
"$HOSTS" shape "$PREFIX" "$RATE" >/dev/null
for h in $HOST_LIST; do
  for l in $PER_HOST_LIST; do
    for algo in $ALGOS; do
      job_start=$SECONDS
      run_job "$algo" "$h" "$l"
    done
  done
done
echo "done in $((SECONDS - START)) s; load $(cut -d' ' -f1-3 /proc/loadavg)" | tee -a "$OUT/summary.txt"
! grep -q '^FAIL' "$OUT/summary.txt"
