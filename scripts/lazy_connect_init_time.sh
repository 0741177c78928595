#!/bin/bash
# Init time with TCP connections made at init (OURO_LAZY_CONNECT=0) against lazily (1), and what
# the first calls then pay (docs/ACROSS-HOSTS.md "Lazy TCP connections"). N ranks on loopback, each
# on its own simulated host (OURO_HOSTID), so every pair talks TCP; OURO_ALGO=gather-fold.
#   scripts/lazy_connect_init_time.sh BUILD_DIR N ROUNDS
# Per job: the slowest and fastest rank's ouroCommInitRank seconds (the fastest is the last to
# arrive, so it waits least for the others to start), and the slowest rank's seconds for the first
# calls (all-reduce, reduce-scatter, broadcast, barrier: the lazy connections are made there).
set -euo pipefail
BUILD=${1:?build dir}; N=${2:-16}; ROUNDS=${3:-3}
BIN=$BUILD/tests/transport_tcp/lazy_rank
one() {
  local lazy=$1 d pids=()
  d=$(mktemp -d)
  for r in $(seq 0 $((N - 1))); do
    OURO_HOSTID=h$r OURO_ALGO=gather-fold OURO_LAZY_CONNECT=$lazy OURO_TIMEOUT_S=60 \
      "$BIN" --init "file://$d/rv" "$N" "$r" --phases small >"$d/out$r" 2>"$d/err$r" &
    pids+=($!)
  done
  wait "${pids[@]}"
  cat "$d"/out* | awk -v lazy="$lazy" -v n="$N" '
    $1 == "SECONDS" && $2 == "init" { if ($3 > hi) hi = $3; if (lo == "" || $3 < lo) lo = $3 }
    $1 == "SECONDS" && $2 == "small" { if ($3 > calls) calls = $3 }
    $1 == "OK" { ok++ }
    END { printf "OURO_LAZY_CONNECT=%s n=%d init slowest %.3f s fastest %.3f s; first calls %.3f s; ranks ok %d\n", lazy, n, hi, lo, calls, ok }'
  rm -rf "$d"
}
for _ in $(seq 1 "$ROUNDS"); do one 0; one 1; done
