#!/usr/bin/env bash
# ouro-train across 3 network-namespace hosts under ouro-run --nnodes 2:3 --max-restarts 1
# (docs/ELASTIC.md): a GPT with 6 virtual ranks in zero2, checkpoints every 10 steps, --resume
# auto. Host 3's link is cut mid-job; the job restarts on the 2 hosts left, resumes from the newest
# checkpoint and finishes with the SHA-256 of an uninterrupted run on one host (the bits do not
# depend on the world size, nor on the restart).
# Exit 77 (one line) without root or network namespaces.
# usage: elastic_train_nnodes.sh OURO_RUN OURO_TRAIN
set -uo pipefail
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
TEST_NAME="launcher ouro-train --nnodes 2:3 after a cut link"
# shellcheck source-path=SCRIPTDIR source=lib.sh
source "$HERE/lib.sh"
HOSTS=$HERE/../netns/hosts.sh
ouro_run=${1:-} ouro_train=${2:-}
[[ -x "$ouro_run" && -x "$ouro_train" ]] || fail "usage: elastic_train_nnodes.sh OURO_RUN OURO_TRAIN"
ouro_run=$(realpath "$ouro_run") ouro_train=$(realpath "$ouro_train")
[[ $(id -u) == 0 ]] || skip "needs root to create network namespaces"
for cmd in ip nsenter unshare sha256sum; do command -v $cmd >/dev/null 2>&1 || skip "$cmd is not installed"; done
ip netns list >/dev/null 2>&1 || skip "'ip netns' does not work here"
namespace_hosts_test ouro-elastic-train
d=$WORK
python3 -c "
import random
r = random.Random(1)
w = ['the', 'cat', 'sat', 'on', 'a', 'mat', 'and', 'dog', 'ran', 'far', 'away', 'into', 'night']
open('$d/corpus.txt', 'w').write(' '.join(r.choice(w) for _ in range(2000)))"
TRAIN=(--mode zero2 --model gpt --text "$d/corpus.txt" --n-layer 1 --n-head 2 --n-embd 16 --block-size 16
       --batch-size 2 --virtual-ranks 6 --steps 400 --sample 0 --log-every 1)
show() {
  local f
  for f in "$d"/node*.err "$d"/node*.out; do [[ -e "$f" ]] && { echo "---- $(basename "$f")" >&2; tail -n 15 "$f" >&2; }; done
}

# The uninterrupted run, 2 ranks on this host.
"$ouro_run" -n 2 "$ouro_train" "${TRAIN[@]}" --save "$d/full.safetensors" >"$d/full.out" 2>"$d/full.err" ||
  { cat "$d/full.err" >&2; fail "the uninterrupted run failed"; }
want=$(sha256sum <"$d/full.safetensors" | cut -c1-64)

PREFIX="ect-$$"
"$HOSTS" up "$PREFIX" 3 >"$WORK/up.log" 2>&1 || { cat "$WORK/up.log" >&2; fail "hosts.sh up failed"; }
master="$("$HOSTS" addr "$PREFIX" 1):29500"
for i in 1 2 3; do
  "$HOSTS" exec "$PREFIX" "$i" env OURO_TIMEOUT_S=20 "$ouro_run" --nnodes 2:3 --node-rank $((i - 1)) --master "$master" \
    -n 1 --max-restarts 1 --rdzv-timeout 20 --rdzv-last-call 2 --node-timeout 3 --kill-timeout 1 \
    "$ouro_train" "${TRAIN[@]}" --checkpoint "$d/ck" --checkpoint-every 10 --resume auto --metrics "$d/m.csv" \
    --save "$d/elastic.safetensors" >"$d/node$((i - 1)).out" 2>"$d/node$((i - 1)).err" </dev/null &
  PIDS+=($!)
done
step_reached() {  # step_reached N: rank 0's metrics show step N
  [[ -e "$d/m.csv" ]] && awk -F, -v s="$1" 'NR > 1 && $2 >= s {found = 1} END {exit !found}' "$d/m.csv"
}
for ((i = 0; i < 600; i++)); do step_reached 30 && break; sleep 0.05; done
step_reached 30 || { show; fail "the job did not reach step 30 on 3 hosts"; }
"$HOSTS" cut "$PREFIX" 3
for n in 0 1; do
  for ((i = 0; i < 600; i++)); do pid_alive "${PIDS[$n]}" || break; sleep 0.1; done
  pid_alive "${PIDS[$n]}" && { show; fail "node $n's ouro-run still runs a minute after the cut"; }
  wait "${PIDS[$n]}" || { show; fail "node $n's ouro-run failed after the cut"; }
  grep -q "1 restart: round 0 failed: node 2 was lost" "$d/node$n.err" || { show; fail "node $n does not say it restarted without node 2"; }
done
grep -q "resuming from $d/ck/step-" "$d/node0.out" || { show; fail "round 1 did not resume from a checkpoint"; }
got=$(sha256sum <"$d/elastic.safetensors" | cut -c1-64)
[[ "$got" == "$want" ]] || { show; fail "after the cut the job ended with SHA-256 $got, the uninterrupted run $want"; }
for ((i = 0; i < 300; i++)); do pid_alive "${PIDS[2]}" || break; sleep 0.1; done
stop_pids "${PIDS[2]}"
"$HOSTS" down "$PREFIX" >/dev/null 2>&1
PREFIX=""
echo "ok: host 3 cut at step >= 30; the job finished on 2 hosts with the uninterrupted run's SHA-256 ${want:0:12}"
