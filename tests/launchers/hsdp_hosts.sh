#!/usr/bin/env bash
# ouro-train --mode hsdp across 3 network-namespace hosts x 2 ranks (tests/netns/hosts.sh; issue
# #25; docs/TRAINING.md), one ouro-run per host as on a cluster:
#   1. a tiny GPT, 10 steps: ddp, hsdp with the default shard group (a host's 2 ranks) and zero3
#      save the same SHA-256, in fp32 and in bf16; hsdp's params, grads and optimizer bytes per
#      rank (--json) are ddp's / 2 and zero3's ddp's / 6, up to the per-unit rounding.
#   2. bad input, each: exit status 2 on every rank, exactly one ouro-train message, no file
#      written: hosts with 2, 2 and 1 ranks (world 5) and with 3, 2 and 1 ranks (world 6, divisible
#      but a group would still span hosts), both under the default shard group; 2 ranks per host
#      but not in host order (a group of 2 consecutive ranks spans hosts); --shard-size 4 at
#      world 6 ("does not divide"). ouro-run starts as many ranks on every host, in host order,
#      so the uneven and out-of-order jobs are started rank by rank with torchrun's variables.
# Exit 77 (one line) without root or network namespaces. usage: hsdp_hosts.sh OURO_RUN OURO_TRAIN
set -uo pipefail
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
TEST_NAME="launcher ouro-train hsdp across 3 hosts"
# shellcheck source-path=SCRIPTDIR source=lib.sh
source "$HERE/lib.sh"
HOSTS=$HERE/../netns/hosts.sh
ouro_run=${1:-} ouro_train=${2:-}
[[ -x "$ouro_run" && -x "$ouro_train" ]] || fail "usage: hsdp_hosts.sh OURO_RUN OURO_TRAIN"
ouro_run=$(realpath "$ouro_run") ouro_train=$(realpath "$ouro_train")
[[ $(id -u) == 0 ]] || skip "needs root to create network namespaces"
for cmd in ip nsenter unshare sha256sum python3; do command -v $cmd >/dev/null 2>&1 || skip "$cmd is not installed"; done
ip netns list >/dev/null 2>&1 || skip "'ip netns' does not work here"
namespace_hosts_test ouro-hsdp-hosts
PY=/usr/bin/python3
[[ -x "$PY" ]] || PY=$(command -v python3)
d=$WORK
"$PY" -c "
import random
r = random.Random(1)
w = ['the', 'cat', 'sat', 'on', 'a', 'mat', 'and', 'dog', 'ran', 'far', 'away', 'into', 'night']
open('$d/corpus.txt', 'w').write(' '.join(r.choice(w) for _ in range(2000)))"
TRAIN=(--model gpt --text "$d/corpus.txt" --n-layer 1 --n-head 2 --n-embd 16 --block-size 16 --batch-size 2
       --steps 10 --sample 0 --log-every 0)

PREFIX="hsd-$$"
"$HOSTS" up "$PREFIX" 3 >"$WORK/up.log" 2>&1 || { cat "$WORK/up.log" >&2; fail "hosts.sh up failed"; }
MASTER_IP=$("$HOSTS" addr "$PREFIX" 1)
PORT=29500  # every job its own port: node 0's listening socket of the previous job may linger

show() {  # show NAME: the job's logs
  local f
  for f in "$d/$1".*.err "$d/$1".*.out; do
    [[ -s "$f" ]] && { echo "---- $(basename "$f")" >&2; tail -n 15 "$f" >&2; }
  done
}
# wait_pids NAME SECONDS: waits for every PID in PIDS (bounded); their exit statuses go to RCS.
RCS=()
wait_pids() {
  local name=$1 n=$(($2 * 20)) i pid live
  for ((i = 0; i < n; i++)); do
    live=0
    for pid in "${PIDS[@]}"; do pid_alive "$pid" && live=1 && break; done
    ((live)) || break
    sleep 0.05
  done
  for pid in "${PIDS[@]}"; do
    pid_alive "$pid" || continue
    show "$name"
    fail "job '$name' still runs after $2 s"
  done
  RCS=()
  for pid in "${PIDS[@]}"; do
    wait "$pid"
    RCS+=($?)
  done
  PIDS=()
}
# run_hosts NAME ARGS...: ouro-run --nnodes 3 -n 2 on every host, ouro-train ARGS; statuses in RCS.
run_hosts() {
  local name=$1 i
  shift
  PORT=$((PORT + 1))
  PIDS=()
  for i in 1 2 3; do
    "$HOSTS" exec "$PREFIX" "$i" "$ouro_run" --nnodes 3 --node-rank $((i - 1)) --master "$MASTER_IP:$PORT" -n 2 \
      "$ouro_train" "$@" >"$d/$name.$i.out" 2>"$d/$name.$i.err" </dev/null &
    PIDS+=($!)
  done
  wait_pids "$name" 60
}
# run_ranks NAME "H H ..." ARGS...: rank r on host H_r (1..3), started directly with torchrun's
# variables (RANK, WORLD_SIZE, LOCAL_RANK, LOCAL_WORLD_SIZE, MASTER_ADDR, MASTER_PORT); RCS.
run_ranks() {
  local name=$1 h r=0 world
  local -a place
  read -r -a place <<<"$2"
  shift 2
  world=${#place[@]}
  local -A count=() next=()
  for h in "${place[@]}"; do count[$h]=$((${count[$h]:-0} + 1)); done
  PORT=$((PORT + 1))
  PIDS=()
  for h in "${place[@]}"; do
    "$HOSTS" exec "$PREFIX" "$h" env RANK=$r WORLD_SIZE="$world" LOCAL_RANK="${next[$h]:-0}" \
      LOCAL_WORLD_SIZE="${count[$h]}" MASTER_ADDR="$MASTER_IP" MASTER_PORT=$PORT \
      "$ouro_train" "$@" >"$d/$name.$r.out" 2>"$d/$name.$r.err" </dev/null &
    PIDS+=($!)
    next[$h]=$((${next[$h]:-0} + 1))
    r=$((r + 1))
  done
  wait_pids "$name" 60
}

# 1. the same bits in ddp, hsdp and zero3; hsdp's memory is a host's share
for precision in fp32 bf16; do
  ddp_sum=""
  for mode in ddp hsdp zero3; do
    name=$mode-$precision
    run_hosts "$name" "${TRAIN[@]}" --mode "$mode" --precision "$precision" --save "$d/$name.safetensors" --json "$d/$name.json"
    for i in 0 1 2; do
      ((RCS[i] == 0)) || { show "$name"; fail "$name: host $((i + 1))'s ouro-run exited ${RCS[i]}"; }
    done
    sum=$(sha256sum <"$d/$name.safetensors" | cut -c1-64)
    [[ -n "$ddp_sum" ]] || ddp_sum=$sum
    [[ "$sum" == "$ddp_sum" ]] || fail "$precision: $mode saved SHA-256 $sum, ddp $ddp_sum"
  done
  # bytes per rank: hsdp shards over L = 2 (a host), zero3 over W = 6; each unit's shard is
  # rounded up to whole elements (3 units here, under 64 bytes in all).
  "$PY" - "$d" "$precision" <<'EOF' || fail "$precision: bytes_per_rank are not a host's share (above)"
import json, sys
d, prec = sys.argv[1], sys.argv[2]
j = {m: json.load(open(f"{d}/{m}-{prec}.json")) for m in ("ddp", "hsdp", "zero3")}
ok = True
for m, share in (("hsdp", 2), ("zero3", 6)):
    if j[m]["mode"] != m or j[m]["world_size"] != 6:
        print(f"{m}: mode {j[m]['mode']} world {j[m]['world_size']}, expected {m} at 6", file=sys.stderr)
        ok = False
    for field in ("params", "grads", "optimizer"):
        full, got = j["ddp"]["bytes_per_rank"][field], j[m]["bytes_per_rank"][field]
        if not full / share <= got <= full / share + 64:
            print(f"{m} {prec}: bytes_per_rank.{field} {got}, ddp {full}: expected ddp / {share} "
                  f"= {full / share:.0f} up to 64 bytes of rounding", file=sys.stderr)
            ok = False
sys.exit(0 if ok else 1)
EOF
  echo "ok: $precision: ddp, hsdp, zero3 on 3 hosts x 2 ranks save SHA-256 ${ddp_sum:0:12}; hsdp holds 1/2 of ddp's bytes, zero3 1/6"
done

# 2. bad input: exit 2 everywhere, one message, no file
OURO_TIMEOUT_S=10  # these jobs stop at setting up; a wait that times out is a failure here anyway
export OURO_TIMEOUT_S
refused() {  # refused NAME PATTERN WHAT: every status 2, one ouro-train line matching PATTERN, no output
  local name=$1 pattern=$2 what=$3 rc lines
  for rc in "${RCS[@]}"; do
    ((rc == 2)) || { show "$name"; fail "$what: exit status $rc, expected 2 (statuses ${RCS[*]})"; }
  done
  lines=$(cat "$d/$name".*.err "$d/$name".*.out | grep -c '^ouro-train')
  ((lines == 1)) || { show "$name"; fail "$what: $lines ouro-train messages, expected exactly one"; }
  grep -h '^ouro-train' "$d/$name".*.err "$d/$name".*.out | grep -qE -- "$pattern" ||
    { show "$name"; fail "$what: the message does not match '$pattern'"; }
  for f in "$d/$name.safetensors" "$d/$name.json"; do
    [[ ! -e "$f" ]] || fail "$what: $(basename "$f") was written"
  done
  echo "ok: $what: exit 2, one message: $(grep -h '^ouro-train' "$d/$name".*.err "$d/$name".*.out | cut -c1-160)"
}
bad() { echo "${TRAIN[@]}" --save "$d/$1.safetensors" --json "$d/$1.json"; }
# shellcheck disable=SC2046  # bad's words are paths without spaces (mktemp) and fixed flags
run_ranks uneven5 "1 1 2 2 3" $(bad uneven5) --mode hsdp
refused uneven5 "span hosts.*--shard-size" "hosts with 2, 2, 1 ranks (world 5), default shard group"
# shellcheck disable=SC2046
run_ranks uneven6 "1 1 1 2 2 3" $(bad uneven6) --mode hsdp
refused uneven6 "span hosts.*--shard-size" "hosts with 3, 2, 1 ranks (world 6), default shard group"
# shellcheck disable=SC2046
run_ranks unordered "1 2 1 2 3 3" $(bad unordered) --mode hsdp
refused unordered "span hosts.*--shard-size" "2 ranks per host not in host order, default shard group"
# shellcheck disable=SC2046
run_hosts shard4 $(bad shard4) --mode hsdp --shard-size 4
refused shard4 "--shard-size 4 does not divide the world size 6" "--shard-size 4 at world 6"
"$HOSTS" down "$PREFIX" >/dev/null 2>&1
PREFIX=""
