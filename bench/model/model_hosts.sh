#!/usr/bin/env bash
# model_hosts.sh: the cost model beside measurement across namespace hosts (issue #24). Runs
# ouro-bench --model on H namespace hosts x L ranks with tbf-shaped host links, first with the
# model planning (OURO_MODEL=auto: rank 0 probes the links into a fresh cache), then with the
# fixed rules (OURO_MODEL=off), in one sitting over the same hosts; prints rank 0's tables (each
# row: measured time and busbw, the model's time and busbw, the algorithm the planner chose).
#
#   bench/model/model_hosts.sh [--build DIR] [--hosts H] [--per-host L] [--rate RATE]
#                              [-b MIN] [-e MAX] [-f FACTOR] [--budget S]
#
#   Defaults: build/, 3 hosts x 2 ranks, tbf 1gbit, 8 B to 64 MiB by 8, 0.3 s a size.
# Needs root (network namespaces) and tc; only addresses inside the namespaces it creates are
# used, and the hosts are removed on exit.
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
HOSTS=$ROOT/tests/netns/hosts.sh
BUILD=$ROOT/build
NHOSTS=3
PER_HOST=2
RATE=1gbit
MIN=8
MAX=64M
FACTOR=8
BUDGET=0.3
while (($#)); do
  case "$1" in
    --build) BUILD=$(realpath "$2"); shift ;;
    --hosts) NHOSTS=$2; shift ;;
    --per-host) PER_HOST=$2; shift ;;
    --rate) RATE=$2; shift ;;
    -b) MIN=$2; shift ;;
    -e) MAX=$2; shift ;;
    -f) FACTOR=$2; shift ;;
    --budget) BUDGET=$2; shift ;;
    -h | --help) sed -n '2,/^set -euo/p' "$0" | sed '$d' | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "model_hosts.sh: unknown argument '$1' (--help lists them)" >&2; exit 2 ;;
  esac
  shift
done
BENCH=$BUILD/bench/ouro-bench
RUN=$BUILD/tools/ouro-run/ouro-run
[[ $(id -u) == 0 ]] || { echo "model_hosts.sh: needs root (network namespaces)" >&2; exit 1; }
for f in "$BENCH" "$RUN"; do [[ -x "$f" ]] || { echo "model_hosts.sh: $f is not built (ninja -C $BUILD)" >&2; exit 1; }; done

PREFIX=mh-$$
WORK=$(mktemp -d /tmp/ouro-model-hosts.XXXXXX)
cleanup() { "$HOSTS" down "$PREFIX" >/dev/null 2>&1 || true; rm -rf "$WORK"; }
trap cleanup EXIT
trap 'exit 1' INT TERM HUP
"$HOSTS" up "$PREFIX" "$NHOSTS" >"$WORK/up.log" 2>&1 || { cat "$WORK/up.log" >&2; exit 1; }
"$HOSTS" shape "$PREFIX" "$RATE" >/dev/null
MASTER=$("$HOSTS" addr "$PREFIX" 1)

# One ouro-run per host, as on a cluster; each host's cache under WORK (fresh: the first run probes).
run() {  # run MODEL
  local model=$1 i port=$((29500 + RANDOM % 1000)) pids=() ok=1
  for ((i = 1; i <= NHOSTS; i++)); do
    XDG_CACHE_HOME=$WORK/cache-h$i OURO_MODEL=$model OURO_DEBUG=info OURO_TOKEN=model-hosts \
      "$HOSTS" exec "$PREFIX" "$i" "$RUN" --nnodes "$NHOSTS" --node-rank $((i - 1)) --nproc-per-node "$PER_HOST" \
      --master "$MASTER:$port" "$BENCH" all_reduce -b "$MIN" -e "$MAX" -f "$FACTOR" --budget "$BUDGET" --placement out \
      --no-progress -c 1 --model >"$WORK/$model-$i.out" 2>"$WORK/$model-$i.err" &
    pids+=($!)
  done
  for i in "${pids[@]}"; do wait "$i" || ok=0; done
  ((ok)) || { echo "model_hosts.sh: OURO_MODEL=$model failed:" >&2; cat "$WORK/$model"-*.err >&2; exit 1; }
  echo "# OURO_MODEL=$model, $NHOSTS namespace hosts x $PER_HOST ranks, host links tbf $RATE"
  grep -h "cost model: probed" "$WORK/$model-1.err" | sed 's/^.*INFO: /# /' || true
  grep -v '^# \(ouro \|rank 0 on\)' "$WORK/$model-1.out"
}
run auto
run off
