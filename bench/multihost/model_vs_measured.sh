#!/usr/bin/env bash
# model_vs_measured.sh: issue #24's "model against measurement" sweep. On namespace hosts
# (tests/netns/hosts.sh) with tbf-shaped host links, float32 all_reduce from 8 B to 256 MiB under
# `ouro-bench --model` (auto, i.e. the planner's choice, and each OURO_ALGO that runs there),
# and the peers at the same points in the same sitting: Open MPI and MPICH started by mpirun in
# host 1 through an ssh agent (tests/netns/rsh_agent.sh), Gloo over TCP (ouro-bench-gloo, one
# process per rank, each bound to its host's address). Then model_report.py writes the CSV, the
# markdown tables and the plot.
#
#   bench/multihost/model_vs_measured.sh [--build DIR] [--out DIR] [--hosts "2 4 8"]
#       [--per-host "1 2"] [--rates "1gbit 10gbit"] [--budget S] [--deadline MIN]
#       [--no-big "HxL ..."] [--sizes "8 64K 16M"]
#       [--systems "auto pairwise hierarchical one-shot gather-fold doubling halving-doubling openmpi mpich gloo"]
#       [--wake-at "HxL ..." | --wake-at off] [--repeat N] [--burst 256kb] [--gso-max 65536]
#
# --burst and --gso-max pass to `hosts.sh shape`: tbf's bucket and the links' GSO segments. The
# default bucket (256 KiB, 2 ms at 1 Gbit/s) hands a call's idle link time back as a burst at the
# veth's speed, so calls that leave the link idle part of the time (64 KiB at 2 ranks a host)
# measure faster than a wire allows. "--burst 32kb --gso-max 16384" refunds little: 64 KiB then met
# the model where the default bucket did not, but the small segments cost this 2-CPU machine a
# third of 16 MiB's speed at 8 hosts (docs/ACROSS-HOSTS.md).
#
# Sizes: 8 B .. 8 MiB every 4x, each point timed for --budget seconds (default 0.15, at least 5
# calls after 1 warm-up); then 32 MiB and 256 MiB with one warm-up and one timed call, unchecked
# (a 256 MiB call takes 2-8 s at 1 Gbit/s). one-shot and gather-fold run to 32 KiB only (they
# apply to calls inside one link slot; past it the planner runs something else, and the report
# drops rows whose algorithm is not the one named). --no-big "8x2" skips 32/256 MiB there.
# --sizes "8 64K 16M" measures those sizes alone instead (each by --budget, checked), for a short
# sweep (issue #37's points); one-shot and gather-fold then skip the sizes past 32 KiB.
#
# The model's parameters, per configuration: the latency between hosts is the time of a plain TCP
# exchange between hosts 1 and 2 (the mean of 5,000), both sending 8 bytes at once as a
# collective's steps do (tcp_pingpong.py exchange, per rate: what the namespaces give; the
# ping-pong's round trip is logged beside it); the rest is the library's own probe (OURO_MODEL=auto
# with a fresh cache: the local links, the fold rate, the host link's rate), except that the host
# link's rate is the tbf
# rate whenever the probe saw more (at the default --burst its 256 KiB transfers fit the bucket
# and measure the veth, not the shaper). The probe's own alpha is kept in the run logs (runs/probe-*).
# The wait behind the other ranks of a core (wake, where ranks outnumber the CPUs): measured once
# per rate on configurations outside the sweep (--wake-at, default "5x1 7x1 6x2": 5, 7 and 12 ranks
# on this 2-CPU machine, 1.5, 2.5 and 5 ranks ahead of a woken one, spanning the sweep's 0 to 7).
# At each, the wake at which the model's 8-byte gather-fold takes the measured time (bisection:
# the model is not linear in wake, model_report.py wake); the median of those. The sweep's
# configurations are then predictions, none of them fitted. --wake-at off keeps the library's
# default (7 us, fitted in an earlier session on the old, half-round-trip alpha). --repeat N runs every point (and the
# wake's) N times, interleaved, and counts each by its median (default 1).
# Every ouro run of that configuration then runs with OURO_MODEL set to that spec, so the
# planner and the printed predictions use the same numbers. Where the machine's CPUs, not the
# links, hold TCP between the hosts (every host streaming to the next at once, tcp_stream.py, moves
# less than 90% of what the links allow: 10 Gbit/s on this 2-CPU VM), the spec also prices them:
# tcpcpu=that rate / CPUs (Params::tcp_cpu).
#
# Every run has a timeout; a failed or timed-out run is logged and the sweep goes on; leftover
# processes are stopped by PID (hosts.sh stop); the hosts are removed on exit. --deadline MIN
# (default 40): configurations not started by then are skipped and listed. Ranks are not pinned
# (ouro-run --bind-to none): each host's ouro-run sees both CPUs and would pin its rank 0 to CPU 0,
# every host's rank 0 on one core.
# Needs root, tc, a build with the peers (-Dpeers=enabled), gnuplot for the plot.
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
HERE=$ROOT/bench/multihost
HOSTS=$ROOT/tests/netns/hosts.sh
BUILD=$ROOT/build
OUT=""
HOST_LIST="2 4 8"
PER_HOST_LIST="1 2"
RATES="1gbit 10gbit"
BUDGET=0.15
DEADLINE_MIN=40
NO_BIG=""
SIZES=""
SYSTEMS="auto pairwise hierarchical one-shot gather-fold doubling halving-doubling openmpi mpich gloo"
WAKE_AT="5x1 7x1 6x2"
REPEAT=1
BURST=256kb
GSO_MAX=65536
RUN_TIMEOUT=300
while (($#)); do
  case "$1" in
    --build) BUILD=$(realpath "$2"); shift ;;
    --out) OUT=$2; shift ;;
    --hosts) HOST_LIST=$2; shift ;;
    --per-host) PER_HOST_LIST=$2; shift ;;
    --rates) RATES=$2; shift ;;
    --budget) BUDGET=$2; shift ;;
    --deadline) DEADLINE_MIN=$2; shift ;;
    --no-big) NO_BIG=$2; shift ;;
    --sizes) SIZES=$2; shift ;;
    --systems) SYSTEMS=$2; shift ;;
    --wake-at) WAKE_AT=$2; shift ;;
    --repeat) REPEAT=$2; shift ;;
    --burst) BURST=$2; shift ;;
    --gso-max) GSO_MAX=$2; shift ;;
    -h | --help) sed -n '2,/^set -euo/p' "$0" | sed '$d' | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "model_vs_measured.sh: unknown argument '$1' (--help lists them)" >&2; exit 2 ;;
  esac
  shift
done
BENCH=$BUILD/bench/ouro-bench
RUN=$BUILD/tools/ouro-run/ouro-run
PEERS=$BUILD/bench/peers
[[ $(id -u) == 0 ]] || { echo "model_vs_measured.sh: needs root (network namespaces)" >&2; exit 1; }
for f in "$BENCH" "$RUN" "$BUILD/bench/ouro-model"; do
  [[ -x "$f" ]] || { echo "model_vs_measured.sh: $f is not built (ninja -C $BUILD bench/ouro-bench tools/ouro-run/ouro-run bench/ouro-model)" >&2; exit 1; }
done
for s in $SYSTEMS; do
  case "$s" in
    openmpi | mpich | gloo)
      [[ -x "$PEERS/ouro-bench-$s" ]] || { echo "model_vs_measured.sh: $PEERS/ouro-bench-$s is not built (configure $BUILD with -Dpeers=enabled), or leave $s out of --systems" >&2; exit 1; } ;;
    auto | pairwise | hierarchical | one-shot | gather-fold | doubling | halving-doubling) ;;
    *) echo "model_vs_measured.sh: unknown system '$s'" >&2; exit 2 ;;
  esac
done
max_hosts=0
for h in $HOST_LIST; do ((h > max_hosts)) && max_hosts=$h; done
((max_hosts >= 2)) || { echo "model_vs_measured.sh: --hosts needs at least one count >= 2" >&2; exit 2; }
up_hosts=$max_hosts
if [[ $WAKE_AT != off ]]; then
  for cfg in $WAKE_AT; do
    [[ $cfg =~ ^([0-9]+)x([0-9]+)$ ]] && ((BASH_REMATCH[1] >= 2)) ||
      { echo "model_vs_measured.sh: --wake-at wants configurations HxL with H >= 2 (\"5x1 7x1 6x2\"), or off" >&2; exit 2; }
    ((BASH_REMATCH[1] > up_hosts)) && up_hosts=${BASH_REMATCH[1]}
  done
fi

[[ -n "$OUT" ]] || OUT=$(mktemp -d /tmp/ouro-model-vs-measured.XXXXXX)
mkdir -p "$OUT/runs"
OUT=$(realpath "$OUT")
PREFIX=mvm-$$
cleanup() { "$HOSTS" down "$PREFIX" >/dev/null 2>&1 || true; }
trap cleanup EXIT
trap 'exit 1' INT TERM HUP
START=$SECONDS
PORT=21000
log() { echo "[$(date +%T) +$((SECONDS - START))s load $(cut -d' ' -f1-3 /proc/loadavg)] $*" | tee -a "$OUT/sweep.log" >&2; }

# run_ouro TAG ALGO H L MODEL ARGS...: one ouro-run per host; host 1's rank 0 writes TAG.json.
run_ouro() {
  local tag=$1 algo=$2 h=$3 l=$4 model=$5 i ok=1 pids=()
  shift 5
  PORT=$((PORT + 1))
  local master token
  master=$("$HOSTS" addr "$PREFIX" 1):$PORT
  token=mvm-$$-$PORT
  for ((i = 1; i <= h; i++)); do
    OURO_ALGO=$algo OURO_MODEL=$model OURO_TOKEN=$token XDG_CACHE_HOME=$OUT/cache/$tag OURO_TIMEOUT_S=120 \
      timeout -k 5 "$RUN_TIMEOUT" "$HOSTS" exec "$PREFIX" "$i" "$RUN" --nnodes "$h" --node-rank $((i - 1)) \
      --nproc-per-node "$l" --bind-to none --master "$master" "$BENCH" all_reduce "$@" --placement out \
      --no-progress --model -J "$OUT/runs/$tag.json" >"$OUT/runs/$tag-h$i.log" 2>&1 &
    pids+=($!)
  done
  for i in "${pids[@]}"; do wait "$i" || ok=0; done
  ((ok)) || { log "FAILED: ouro $tag (OURO_ALGO=$algo); logs $OUT/runs/$tag-h*.log"; "$HOSTS" stop "$PREFIX"; rm -f "$OUT/runs/$tag.json"; }
}

# run_mpi TAG openmpi|mpich H L ARGS...: mpirun in host 1, ranks started through the ssh agent.
run_mpi() {
  local tag=$1 mpi=$2 h=$3 l=$4 i
  shift 4
  local -a launch
  for ((i = 1; i <= h; i++)); do
    if [[ $mpi == openmpi ]]; then echo "$("$HOSTS" name "$PREFIX" "$i") slots=$l"; else echo "$("$HOSTS" name "$PREFIX" "$i"):$l"; fi
  done >"$OUT/hostfile-$mpi-$h-$l"
  if [[ $mpi == openmpi ]]; then
    launch=(mpirun.openmpi --allow-run-as-root --oversubscribe --hostfile "$OUT/hostfile-$mpi-$h-$l"
      --mca plm_rsh_agent "$ROOT/tests/netns/rsh_agent.sh" --mca oob_tcp_if_include eth0
      --mca btl_tcp_if_include eth0 -x NETNS_PREFIX)
  else
    # Debian's MPICH is ch4:ucx, and UCX counts the namespace hosts as one machine (one boot id)
    # and moves every byte through shared memory (one /dev/shm), never crossing the shaped links:
    # 2 x 1 at 1 Gbit/s ran 256 MiB in 0.36 s, 6x what the link allows. UCX_TLS=tcp,self keeps it
    # on sockets (MPIR_CVAR_NOLOCAL=1: MPICH's own shared memory off too); ranks of one host then
    # talk TCP inside it as well.
    launch=(mpirun.mpich -f "$OUT/hostfile-$mpi-$h-$l" -launcher ssh -launcher-exec "$ROOT/tests/netns/rsh_agent.sh" -iface eth0
      -genv UCX_TLS tcp,self -genv MPIR_CVAR_NOLOCAL 1)
  fi
  if [[ $mpi == openmpi ]]; then
    NETNS_PREFIX=$PREFIX timeout -k 5 "$RUN_TIMEOUT" "$HOSTS" exec "$PREFIX" 1 "${launch[@]}" -n $((h * l)) \
      "$PEERS/ouro-bench-$mpi" all_reduce "$@" --placement out --no-progress -J "$OUT/runs/$tag.json" \
      >"$OUT/runs/$tag.log" 2>&1 </dev/null ||
      { log "FAILED: $mpi $tag; log $OUT/runs/$tag.log"; "$HOSTS" stop "$PREFIX"; rm -f "$OUT/runs/$tag.json"; }
    return 0
  fi
  # MPICH over UCX's tcp transport hangs in MPI_Finalize when a host has two ranks (after every
  # call has run and been checked): once rank 0 has written a complete JSON, the job gets 10 s to
  # end and is then stopped, and the measurement kept.
  rm -f "$OUT/runs/$tag.json"
  NETNS_PREFIX=$PREFIX timeout -k 5 "$RUN_TIMEOUT" "$HOSTS" exec "$PREFIX" 1 "${launch[@]}" -n $((h * l)) \
    "$PEERS/ouro-bench-$mpi" all_reduce "$@" --placement out --no-progress -J "$OUT/runs/$tag.json" \
    >"$OUT/runs/$tag.log" 2>&1 </dev/null &
  local job=$! k
  for ((k = 0; k < RUN_TIMEOUT * 2; k++)); do
    kill -0 "$job" 2>/dev/null || break
    /usr/bin/python3 -c 'import json,sys; json.load(open(sys.argv[1]))' "$OUT/runs/$tag.json" 2>/dev/null && break
    sleep 0.5
  done
  for ((k = 0; k < 20; k++)); do kill -0 "$job" 2>/dev/null || break; sleep 0.5; done
  if kill -0 "$job" 2>/dev/null; then
    log "$mpi $tag: still running 10 s after its results were written (MPI_Finalize); stopped, results kept"
    kill -TERM "$job" 2>/dev/null || true
    wait "$job" 2>/dev/null || true
    "$HOSTS" stop "$PREFIX"
  elif ! wait "$job"; then
    log "$mpi $tag exited non-zero; log $OUT/runs/$tag.log"
  fi
  /usr/bin/python3 -c 'import json,sys; assert json.load(open(sys.argv[1]))["ok"]' "$OUT/runs/$tag.json" 2>/dev/null ||
    { log "FAILED: $mpi $tag (no complete, checked results); log $OUT/runs/$tag.log"; rm -f "$OUT/runs/$tag.json"; }
}

# run_gloo TAG H L ARGS...: one process per rank, inside its host, bound to the host's address.
run_gloo() {
  local tag=$1 h=$2 l=$3 i k r ok=1 pids=()
  shift 3
  rm -rf "$OUT/gloo-store-$tag"
  for ((i = 1; i <= h; i++)); do
    for ((k = 0; k < l; k++)); do
      r=$(((i - 1) * l + k))
      RANK=$r WORLD_SIZE=$((h * l)) OURO_BENCH_GLOO_STORE=$OUT/gloo-store-$tag OURO_TIMEOUT_S=120 \
        OURO_BENCH_GLOO_HOSTNAME=$("$HOSTS" addr "$PREFIX" "$i") \
        timeout -k 5 "$RUN_TIMEOUT" "$HOSTS" exec "$PREFIX" "$i" "$PEERS/ouro-bench-gloo" all_reduce "$@" \
        --placement out --no-progress -J "$OUT/runs/$tag.json" >"$OUT/runs/$tag-r$r.log" 2>&1 &
      pids+=($!)
    done
  done
  for i in "${pids[@]}"; do wait "$i" || ok=0; done
  rm -rf "$OUT/gloo-store-$tag"
  ((ok)) || { log "FAILED: gloo $tag; logs $OUT/runs/$tag-r*.log"; "$HOSTS" stop "$PREFIX"; rm -f "$OUT/runs/$tag.json"; }
}

# The probe's parameters under this configuration, the tcp rate capped at the tbf rate: a spec.
# Not called in $(...): run_ouro's next port must outlive it. Writes $OUT/spec-RATE-HxL.
calibrate() {  # calibrate H L RATE_GBPS
  local h=$1 l=$2 gbps=$3 tag=probe-$RATE-$1x$2 line
  rm -rf "$OUT/cache/$tag" "$OUT/spec-$RATE-${h}x$l"
  run_ouro "$tag" auto "$h" "$l" auto -b 8 -e 8 -n 1 -w 0 -c 0
  line=$(grep -h '^# model:' "$OUT/runs/$tag-h1.log" 2>/dev/null | head -1)
  [[ -n "$line" ]] || { log "no probe line in $OUT/runs/$tag-h1.log"; return 1; }
  echo "$RATE ${h}x$l ${line#\# model: }" >>"$OUT/probes.txt"
  /usr/bin/python3 "$HERE/model_report.py" spec --line "$line" --rate-gbps "$gbps" --alpha-us "$ALPHA_US" \
    --tcp-cpu-gbps "$TCPCPU" --wake-us "${WAKE_US:-}" >"$OUT/spec-$RATE-${h}x$l"
}

# wake_at: WAKE_US, the median of the wakes measured at each of --wake-at's configurations (see
# the header); "" if none could be measured.
wake_at() {
  local cfg h l tag spec rep jsons wakes=()
  WAKE_US=""
  : >"$OUT/wake-$RATE.txt"
  for cfg in $WAKE_AT; do
    h=${cfg%x*} l=${cfg#*x} tag=wake-$RATE-$cfg jsons=()
    calibrate "$h" "$l" "$gbps" || continue
    spec="$(cat "$OUT/spec-$RATE-${h}x$l");wake=0"
    rm -f "$OUT/spec-$RATE-${h}x$l"
    for ((rep = 1; rep <= REPEAT; rep++)); do
      run_ouro "$tag-r$rep" gather-fold "$h" "$l" "$spec" -b 8 -e 8 --budget "$BUDGET" -w 1 -c 1
      [[ -f "$OUT/runs/$tag-r$rep.json" ]] && jsons+=("$OUT/runs/$tag-r$rep.json")
    done
    ((${#jsons[@]})) || continue
    /usr/bin/python3 "$HERE/model_report.py" wake --json "${jsons[@]}" --model-bin "$BUILD/bench/ouro-model" \
      --hosts "$h" --per-host "$l" --cpus "$(nproc)" --spec "$spec" >>"$OUT/wake-$RATE.txt" || continue
    wakes+=("$(tail -1 "$OUT/wake-$RATE.txt" | sed -n 's/.*: wake=\([0-9.]*\)$/\1/p')")
  done
  ((${#wakes[@]})) || return 1
  WAKE_US=$(/usr/bin/python3 -c 'import statistics, sys; print("%.2f" % statistics.median(map(float, sys.argv[1:])))' "${wakes[@]}")
}

# socket_probe SERVER CLIENT PORT COUNT FILE: tcp_pingpong.py's SERVER on host 2, its CLIENT on
# host 1 (COUNT rounds); the client's line in FILE.
socket_probe() {
  local srv
  HOSTS_UTS=0 timeout 30 "$HOSTS" exec "$PREFIX" 2 /usr/bin/python3 "$HERE/tcp_pingpong.py" "$1" "$a2" "$3" \
    $([[ $1 == exchange-serve ]] && echo "$4") &
  srv=$!
  sleep 0.5
  HOSTS_UTS=0 timeout 30 "$HOSTS" exec "$PREFIX" 1 /usr/bin/python3 "$HERE/tcp_pingpong.py" "$2" "$a2" "$3" "$4" \
    >"$5" 2>&1 || log "$2 failed: $(cat "$5")"
  wait "$srv" 2>/dev/null || true
}

# One system at one configuration: the small sizes by budget, then the two large ones.
measure() {  # measure SYSTEM H L SPEC
  local s=$1 h=$2 l=$3 spec=$4 base=$RATE-$2x$3-$1-r${rep:-1}
  local -a small=(-b 8 -e 8M -f 4 --budget "$BUDGET" -w 1 -c 1) big=(-b 32M -e 256M -f 8 -n 1 -w 1 -c 0)
  case "$s" in one-shot | gather-fold) small=(-b 8 -e 32K -f 4 --budget "$BUDGET" -w 1 -c 1) big=() ;; esac
  [[ " $NO_BIG " == *" ${h}x${l} "* ]] && big=()
  local -a parts=(small big)
  local part args size
  if [[ -n "$SIZES" ]]; then
    parts=()
    for size in $SIZES; do
      # one-shot and gather-fold apply inside one link slot only (see above)
      [[ $s == one-shot || $s == gather-fold ]] && (($(numfmt --from=iec "$size") > 32768)) && continue
      parts+=("$size")
    done
  fi
  for part in "${parts[@]}"; do
    case "$part" in
      small) args=("${small[@]}") ;;
      big) args=("${big[@]}") ;;
      *) args=(-b "$part" -e "$part" --budget "$BUDGET" -w 1 -c 1) ;;
    esac
    ((${#args[@]})) || continue
    case "$s" in
      openmpi | mpich) run_mpi "$base-$part" "$s" "$h" "$l" "${args[@]}" ;;
      gloo) run_gloo "$base-$part" "$h" "$l" "${args[@]}" ;;
      auto) run_ouro "$base-$part" auto "$h" "$l" "$spec" "${args[@]}" ;;
      *) run_ouro "$base-$part" "$s" "$h" "$l" "$spec" "${args[@]}" ;;
    esac
    [[ -f "$OUT/runs/$base-$part.json" ]] &&
      /usr/bin/python3 "$HERE/model_report.py" collect --json "$OUT/runs/$base-$part.json" --csv "$OUT/measured.csv" \
        --rate "$RATE" --hosts "$h" --per-host "$l" --system "$s" --spec "$spec" --load "$(cut -d' ' -f1 /proc/loadavg)"
  done
  return 0
}

log "sweep: hosts {$HOST_LIST} x per-host {$PER_HOST_LIST}, rates {$RATES} (tbf burst $BURST, gso $GSO_MAX), systems {$SYSTEMS}, sizes {${SIZES:-8 B .. 256 MiB}}; build $BUILD; out $OUT"
echo "$(nproc) CPUs; $(uname -r); scripts at commit $(git -C "$ROOT" rev-parse --short HEAD 2>/dev/null || echo unknown); build $BUILD" >"$OUT/machine.txt"
"$HOSTS" up "$PREFIX" "$up_hosts" >"$OUT/up.log" 2>&1 || { cat "$OUT/up.log" >&2; exit 1; }
rm -f "$OUT/measured.csv"
: >"$OUT/skipped.txt"
for RATE in $RATES; do
  "$HOSTS" shape "$PREFIX" "$RATE" "$BURST" "$GSO_MAX" >/dev/null
  gbps=$(/usr/bin/python3 "$HERE/model_report.py" rate --rate "$RATE")
  # What the namespaces give without ouro, between hosts 1 and 2: a TCP ping-pong, then an exchange.
  a2=$("$HOSTS" addr "$PREFIX" 2)
  socket_probe serve ping 29400 2000 "$OUT/pingpong-$RATE.txt"
  log "rate $RATE ($gbps GB/s): TCP ping-pong between namespaces: $(cat "$OUT/pingpong-$RATE.txt")"
  socket_probe exchange-serve exchange 29401 5000 "$OUT/exchange-$RATE.txt"
  log "rate $RATE: TCP exchange between namespaces: $(cat "$OUT/exchange-$RATE.txt")"
  # The model's alpha between hosts: the mean exchange, both ends sending at once, as a
  # collective's steps do (tcp_pingpong.py says why that costs more than half a round trip); the
  # mean, as ouro-bench times a loop of calls, not each.
  ALPHA_US=$(sed -n 's/.*mean \([0-9.]*\) us.*/\1/p' "$OUT/exchange-$RATE.txt" | awk '{ printf "%.2f", $1 }')
  [[ -n "$ALPHA_US" ]] || ALPHA_US=probe
  # The machine's CPUs: every host streams to the next at once (tcp_stream.py). Where the streams
  # moved less than 90% of what the links let through, the CPUs held them: the model then prices
  # TCP at that rate over the CPUs (tcpcpu); else the links hold first and it prices none. Links
  # that hold them carry 0.95 of their rate in payload (tbf counts the headers: 1448 of every
  # 1514 bytes a packet), so 90% is below what the links alone leave and above the CPUs' share
  # with a small bucket (0.805 of 1 GB/s at --burst 32kb --gso-max 16384, 8 hosts on 2 CPUs).
  TCPCPU=0
  if ((max_hosts >= 3)); then
    start=$(/usr/bin/python3 -c 'import time; print(time.time() + 2)')
    spids=() cpids=()
    for ((i = 1; i <= max_hosts; i++)); do
      HOSTS_UTS=0 timeout 30 "$HOSTS" exec "$PREFIX" $((i % max_hosts + 1)) /usr/bin/python3 "$HERE/tcp_stream.py" sink \
        "$("$HOSTS" addr "$PREFIX" $((i % max_hosts + 1)))" $((29500 + i)) &
      spids+=($!)
    done
    sleep 0.5
    for ((i = 1; i <= max_hosts; i++)); do
      HOSTS_UTS=0 timeout 30 "$HOSTS" exec "$PREFIX" "$i" /usr/bin/python3 "$HERE/tcp_stream.py" send \
        "$("$HOSTS" addr "$PREFIX" $((i % max_hosts + 1)))" $((29500 + i)) "$start" 3 >"$OUT/runs/stream-$RATE-$i.txt" 2>&1 &
      cpids+=($!)
    done
    for i in "${cpids[@]}" "${spids[@]}"; do wait "$i" 2>/dev/null || true; done
    read -r agg cpu < <(cat "$OUT"/runs/stream-"$RATE"-*.txt | awk -v n="$max_hosts" -v g="$gbps" -v cpus="$(nproc)" '
      /^sent/ { b += $2; t = $5 > t ? $5 : t; k++ }
      END { if (k < n || t <= 0) { print 0, 0; exit } r = b / t / 1e9; printf "%.3f %s\n", r, (r < 0.9 * n * g ? sprintf("%.3f", r / cpus) : 0) }')
    TCPCPU=$cpu
    echo "$RATE: $max_hosts streams at once moved $agg GB/s on $(nproc) CPUs; tcpcpu=$TCPCPU" | tee "$OUT/tcpstream-$RATE.txt" >>"$OUT/sweep.log"
    log "rate $RATE: $max_hosts TCP streams at once: $agg GB/s on $(nproc) CPUs (links allow $(awk -v n="$max_hosts" -v g="$gbps" 'BEGIN { print n * g }')): tcpcpu=$TCPCPU"
  fi
  WAKE_US=""
  if [[ $WAKE_AT != off ]]; then
    wake_at || true
    log "rate $RATE: wake measured at $WAKE_AT: ${WAKE_US:-failed, so the library default stays}; $(cat "$OUT/wake-$RATE.txt" 2>/dev/null)"
  fi
  for h in $HOST_LIST; do
    for l in $PER_HOST_LIST; do
      if ((SECONDS - START > DEADLINE_MIN * 60)); then
        echo "$RATE ${h}x$l: not started, past the --deadline of $DEADLINE_MIN min" | tee -a "$OUT/skipped.txt" >&2
        continue
      fi
      calibrate "$h" "$l" "$gbps" || { echo "$RATE ${h}x$l: the probe failed" | tee -a "$OUT/skipped.txt" >&2; continue; }
      spec=$(cat "$OUT/spec-$RATE-${h}x$l")
      echo "$RATE ${h}x$l $spec" >>"$OUT/specs.txt"
      log "config $RATE ${h}x$l: OURO_MODEL='$spec'"
      for ((rep = 1; rep <= REPEAT; rep++)); do
        for s in $SYSTEMS; do
          measure "$s" "$h" "$l" "$spec"
          log "  done $s (run $rep of $REPEAT)"
        done
      done
    done
  done
done
"$HOSTS" down "$PREFIX" >/dev/null 2>&1 || true
log "sweep done in $((SECONDS - START)) s; report:"
/usr/bin/python3 "$HERE/model_report.py" report --dir "$OUT" --model-bin "$BUILD/bench/ouro-model"
