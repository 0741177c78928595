#!/usr/bin/env bash
# hsdp_hosts.sh: ouro-train's hsdp against zero3 and ddp across namespace hosts whose links are
# slower than the inside of a host (issue #25; docs/TRAINING.md "HSDP across hosts"). One
# ouro-run per host, as on a cluster; a GPT large enough that communication matters; prints
# samples/s, steps/s, the comm share, the CPU time per step and the bytes per rank of each mode,
# and checks that every mode saved the same weights.
#
#   bench/trainer/hsdp_hosts.sh [--build DIR] [--hosts H] [--per-host L] [--rate RATE|auto]
#                               [--steps K] [--repeat N] [--modes "ddp zero3 hsdp"]
#                               [--model "ouro-train model flags"] [--json FILE] [--collectives SIZE]
#                               [--old-build DIR]
#
#   --rate auto (default): a tenth of the intra-host bandwidth, measured first in this sitting
#   (ouro's 2-rank shared-memory all_reduce busbw at 16 MiB, the best of 3), as tbf on both ends
#   of every host link (tests/netns/hosts.sh shape). --repeat N runs the modes N times,
#   interleaved, and reports each figure's median (samples/s with its range) and the median of
#   each round's ratios to ddp and zero3 (the modes of one round run within a minute, so slow
#   changes in the machine's load cancel). CPU s/step: user + system time of every rank of the
#   job (/usr/bin/time around each ouro-run) less that of a 1-step job of the mode, per step. --json FILE writes the settings and every run.
#   --collectives SIZE (e.g. 3M, a GPT block of the default model): afterwards, on the same hosts
#   and links, ouro-bench times each collective the modes issue per unit: all_reduce (ddp),
#   all_gather and reduce_scatter of SIZE over every rank (zero3; hsdp's reduce-scatter), and
#   all_gather of SIZE / L over one rank per host (hsdp's replicas; L of these groups share the
#   links at once in a real step) and of SIZE over one host's L ranks (hsdp's gathers).
#   --modes takes MODE+vN for MODE with --virtual-ranks N (e.g. "ddp ddp+v6": invariant ddp, whose
#   ratio to plain ddp is printed), and MODE+free for MODE run with the host links unshaped (the
#   same job on these CPUs when the links cost almost nothing: its floor here; printed as MODE /
#   MODE+free, and hsdp+free / zero3 bounds what hsdp / zero3 can reach on these CPUs). --hosts 1
#   runs one host (no link between hosts). MODE+old runs MODE with the ouro-train of --old-build
#   DIR (an older build, e.g. of main), interleaved with this build's: an A/B in one sitting,
#   printed as MODE / MODE+old; its weights must match too.
#   Default model: --model gpt --n-layer 4 --n-head 4 --n-embd 256 --block-size 64 --batch-size 4
#   (3.24 M parameters, 12.4 MiB in fp32) on a generated word corpus, fp32, AdamW, 20 steps.
# Needs root (network namespaces), tc, python3, and the build's ouro-run, ouro-train (and
# ouro-bench for --rate auto). Only addresses inside the namespaces it creates are used; the
# hosts are removed on exit.
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
HOSTS=$ROOT/tests/netns/hosts.sh
BUILD=$ROOT/build
NHOSTS=3
PER_HOST=2
RATE=auto
STEPS=20
REPEAT=1
MODES="ddp zero3 hsdp"
MODEL="--model gpt --n-layer 4 --n-head 4 --n-embd 256 --block-size 64 --batch-size 4"
JSON_OUT=""
COLL=""
OLD_BUILD=""
while (($#)); do
  case "$1" in
    --build) BUILD=$(realpath "$2"); shift ;;
    --hosts) NHOSTS=$2; shift ;;
    --per-host) PER_HOST=$2; shift ;;
    --rate) RATE=$2; shift ;;
    --steps) STEPS=$2; shift ;;
    --repeat) REPEAT=$2; shift ;;
    --modes) MODES=$2; shift ;;
    --model) MODEL=$2; shift ;;
    --json) JSON_OUT=$2; shift ;;
    --collectives) COLL=$2; shift ;;
    --old-build) OLD_BUILD=$(realpath "$2"); shift ;;
    -h | --help) sed -n '2,/^set -euo/p' "$0" | sed '$d' | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "hsdp_hosts.sh: unknown argument '$1' (--help lists them)" >&2; exit 2 ;;
  esac
  shift
done
RUN=$BUILD/tools/ouro-run/ouro-run
TRAIN=$BUILD/tools/ouro-train/ouro-train
BENCH=$BUILD/bench/ouro-bench
PY=/usr/bin/python3
[[ -x "$PY" ]] || PY=$(command -v python3)
[[ $(id -u) == 0 ]] || { echo "hsdp_hosts.sh: needs root (network namespaces)" >&2; exit 1; }
[[ -x /usr/bin/time ]] || { echo "hsdp_hosts.sh: /usr/bin/time is not installed (apt-get install time)" >&2; exit 1; }
for f in "$RUN" "$TRAIN"; do [[ -x "$f" ]] || { echo "hsdp_hosts.sh: $f is not built (ninja -C $BUILD)" >&2; exit 1; }; done
TRAIN_OLD=${OLD_BUILD:+$OLD_BUILD/tools/ouro-train/ouro-train}
if [[ " $MODES " == *+old* ]] && [[ -z "$TRAIN_OLD" || ! -x "$TRAIN_OLD" ]]; then
  echo "hsdp_hosts.sh: MODE+old runs the ouro-train of --old-build DIR, which is not given or not built (${TRAIN_OLD:-no --old-build})" >&2
  exit 1
fi
if [[ ("$RATE" == auto || -n "$COLL") && ! -x "$BENCH" ]]; then
  echo "hsdp_hosts.sh: --rate auto and --collectives measure with $BENCH, which is not built (ninja -C $BUILD bench/ouro-bench); or pass --rate RATE" >&2
  exit 1
fi

PREFIX=hh-$$
WORK=$(mktemp -d /tmp/ouro-hsdp-bench.XXXXXX)
cleanup() { "$HOSTS" down "$PREFIX" >/dev/null 2>&1 || true; rm -rf "$WORK"; }
trap cleanup EXIT
trap 'exit 1' INT TERM HUP
export OURO_TOKEN=hsdp-bench

# A word corpus (the GPT reads bytes), fixed by its seed.
"$PY" -c "
import random
r = random.Random(1)
w = 'the cat sat on a mat and dog ran far away into night over hill river stone light'.split()
open('$WORK/corpus.txt', 'w').write(' '.join(r.choice(w) for _ in range(12000)))"

intra=""
if [[ "$RATE" == auto ]]; then
  best=0
  for k in 1 2 3; do
    "$RUN" -n 2 "$BENCH" all_reduce -b 16M -e 16M --budget 1 --placement out --no-progress -J "$WORK/intra.json" >/dev/null
    bw=$("$PY" -c 'import json,sys; print(json.load(open(sys.argv[1]))["results"][0]["out_of_place"]["busbw"])' "$WORK/intra.json")
    best=$(awk -v a="$best" -v b="$bw" 'BEGIN { print (b > a ? b : a) }')
  done
  intra=$best
  RATE=$(awk -v g="$intra" 'BEGIN { printf "%dmbit", g * 8000 / 10 }')
fi
load_start=$(cut -d' ' -f1-3 /proc/loadavg)

"$HOSTS" up "$PREFIX" "$NHOSTS" >"$WORK/up.log" 2>&1 || { cat "$WORK/up.log" >&2; exit 1; }
"$HOSTS" shape "$PREFIX" "$RATE" >/dev/null
MASTER=$("$HOSTS" addr "$PREFIX" 1)
PORT=29500

# run_mode MODE K [STEPS]: one job, one ouro-run per host (under /usr/bin/time: MODE.K.I.cpu);
# node 0's rank 0 writes MODE.K.json.
run_mode() {
  local mode=$1 k=$2 steps=${3:-$STEPS} i pids=() ok=1 flags base=${1%+free} train=$TRAIN
  # MODE+old: that mode with --old-build's ouro-train.
  [[ $base == *+old ]] && { train=$TRAIN_OLD; base=${base%+old}; }
  # MODE+vN: that mode with --virtual-ranks N (ddp+v6: invariant ddp over 6 micro-batches).
  flags="--mode ${base%%+v*}"
  [[ $base == *+v* ]] && flags+=" --virtual-ranks ${base##*+v}"
  # MODE+free: that mode with the host links unshaped for this run only (its floor on these CPUs).
  [[ $mode == *+free ]] && "$HOSTS" shape "$PREFIX" off >/dev/null
  PORT=$((PORT + 1))
  # shellcheck disable=SC2086  # MODEL is a list of flags
  for ((i = 1; i <= NHOSTS; i++)); do
    "$HOSTS" exec "$PREFIX" "$i" /usr/bin/time -f "%U %S" -o "$WORK/$mode.$k.$i.cpu" "$RUN" --nnodes "$NHOSTS" --node-rank $((i - 1)) -n "$PER_HOST" \
      --master "$MASTER:$PORT" "$train" $MODEL --text "$WORK/corpus.txt" --steps "$steps" --sample 0 \
      --log-every 0 $flags --json "$WORK/$mode.$k.json" --save "$WORK/$mode.$k.safetensors" \
      >"$WORK/$mode.$k.$i.log" 2>&1 </dev/null &
    pids+=($!)
  done
  for i in "${pids[@]}"; do wait "$i" || ok=0; done
  [[ $mode == *+free ]] && "$HOSTS" shape "$PREFIX" "$RATE" >/dev/null
  ((ok)) || { echo "hsdp_hosts.sh: $mode failed:" >&2; cat "$WORK/$mode.$k".*.log >&2; exit 1; }
  sha256sum <"$WORK/$mode.$k.safetensors" | cut -c1-64 >"$WORK/$mode.$k.sha"
}

for ((k = 1; k <= REPEAT; k++)); do
  for mode in $MODES; do run_mode "$mode" "$k"; done
done
for mode in $MODES; do run_mode "$mode" base 1; done
load_end=$(cut -d' ' -f1-3 /proc/loadavg)

echo "# ouro-train $MODEL --steps $STEPS, fp32 AdamW; $NHOSTS namespace hosts x $PER_HOST ranks (ouro-run per host)"
if [[ -n "$intra" ]]; then
  echo "# host links: tbf $RATE on both ends (a tenth of the intra-host ouro shm all_reduce busbw, $intra GB/s, 2 ranks, 16 MiB)"
else
  echo "# host links: tbf $RATE on both ends"
fi
echo "# load average $load_start at the start, $load_end at the end; median of $REPEAT"
# shellcheck disable=SC2086  # MODES is a list of words
"$PY" - "$WORK" "$REPEAT" "$JSON_OUT" "$RATE" "${intra:-null}" "$MODEL" "$STEPS" $MODES <<'EOF'
import json, statistics, sys
work, repeat, json_out, rate, intra, model, steps = sys.argv[1:8]
modes, repeat = sys.argv[8:], int(repeat)
MiB = 1 << 20
rows, runs = [], []
shas = {}  # by the virtual ranks ("": none): the modes agree within each
def cpu(m, k):
    return sum(sum(map(float, open(f"{work}/{m}.{k}.{i}.cpu").read().split()[-2:]))
               for i in range(1, 100) if __import__("os").path.exists(f"{work}/{m}.{k}.{i}.cpu"))
sps_of = {}
for m in modes:
    js = [json.load(open(f"{work}/{m}.{k}.json")) for k in range(1, repeat + 1)]
    for k in range(1, repeat + 1):
        shas.setdefault(m.replace("+free", "").partition("+v")[2], set()).add(open(f"{work}/{m}.{k}.sha").read().strip())
        js[k - 1]["cpu_seconds"] = cpu(m, k)
    runs += js
    sps_of[m] = [j["samples_per_s"] for j in js]
    sps = statistics.median(sps_of[m])
    comm = statistics.median(j["comm_fraction"] for j in js)
    cpu_step = (statistics.median(j["cpu_seconds"] for j in js) - cpu(m, "base")) / (int(steps) - 1)
    b = js[0]["bytes_per_rank"]
    lo, hi = min(sps_of[m]), max(sps_of[m])
    spread = f" ({lo:.1f}-{hi:.1f})" if repeat > 1 else ""
    rows.append([m, f"{sps:.1f}{spread}", f"{sps / js[0]['global_batch_size']:.3f}", f"{100 * comm:.1f}%",
                 f"{statistics.median(j['train_seconds'] for j in js):.1f}", f"{cpu_step:.2f}",
                 f"{b['params'] / MiB:.2f}", f"{b['grads'] / MiB:.2f}", f"{b['optimizer'] / MiB:.2f}",
                 f"{b['buffers'] / MiB:.2f}", f"{(b['params'] + b['grads'] + b['optimizer']) / MiB:.2f}",
                 f"{max(j['peak_rss_bytes'] for j in js) / MiB:.0f}"])
head = ["mode", "samples/s", "steps/s", "comm", "train s", "CPU s/step", "params MiB", "grads MiB",
        "optimizer MiB", "buffers MiB", "model states MiB", "peak RSS MiB"]
print("| " + " | ".join(head) + " |")
print("|---|" + "---:|" * (len(head) - 1))
for r in rows:
    print("| `" + r[0] + "` | " + " | ".join(r[1:]) + " |")
pairs = [("hsdp", "zero3"), ("hsdp", "ddp"), ("zero3", "ddp")]
pairs += [(m, m.split("+v")[0]) for m in modes if "+v" in m and "+free" not in m]  # invariant against plain
# A mode against itself on free links: how much of its floor it reaches; and the bound that
# floor puts on hsdp / zero3 (hsdp with every link wait gone against zero3 as measured).
pairs += [(m.replace("+free", ""), m) for m in modes if m.endswith("+free")]
pairs += [(m.replace("+old", ""), m) for m in modes if m.endswith("+old")]  # this build against the old one
pairs += [(m, "zero3") for m in modes if m.endswith("+old") and m != "zero3+old"]
if "hsdp+free" in modes and "zero3" in modes:
    pairs.append(("hsdp+free", "zero3"))
for a, b in pairs:
    if a in sps_of and b in sps_of:
        ratios = [x / y for x, y in zip(sps_of[a], sps_of[b])]
        print(f"# {a} / {b} samples/s, median of the rounds' ratios: {statistics.median(ratios):.2f} "
              f"(rounds: {' '.join(f'{r:.2f}' for r in ratios)})")
print(f"# param_count {runs[0]['param_count']}, global batch {runs[0]['global_batch_size']}; "
      + ("every mode saved the same weights" + (" (per number of virtual ranks)" if len(shas) > 1 else "")
         if all(len(v) == 1 for v in shas.values()) else f"WEIGHTS DIFFER: {shas}"))
if json_out:
    json.dump({"rate": rate, "intra_busbw_gbs": None if intra == "null" else float(intra), "model": model,
               "steps": int(steps), "repeat": repeat, "runs": runs}, open(json_out, "w"), indent=1)
sys.exit(0 if all(len(v) == 1 for v in shas.values()) else 1)
EOF

[[ -n "$COLL" ]] || exit 0
# coll NAME COLLECTIVE SIZE NODES PER_NODE: one ouro-bench run on hosts 1..NODES; prints
# "NAME<tab>BYTES<tab>TIME_US<tab>BUSBW"
coll() {
  local name=$1 what=$2 size=$3 nodes=$4 per=$5 i pids=() ok=1 f
  PORT=$((PORT + 1))
  f=coll-$PORT
  for ((i = 1; i <= nodes; i++)); do
    "$HOSTS" exec "$PREFIX" "$i" /usr/bin/time -f "%U %S" -o "$WORK/$mode.$k.$i.cpu" "$RUN" --nnodes "$nodes" --node-rank $((i - 1)) -n "$per" --master "$MASTER:$PORT" \
      "$BENCH" "$what" -b "$size" -e "$size" --budget 1 --placement out --no-progress -J "$WORK/$f.json" \
      >"$WORK/$f.$i.log" 2>&1 </dev/null &
    pids+=($!)
  done
  for i in "${pids[@]}"; do wait "$i" || ok=0; done
  ((ok)) || { echo "hsdp_hosts.sh: ouro-bench $name failed:" >&2; cat "$WORK/$f".*.log >&2; exit 1; }
  "$PY" -c 'import json,sys; r=json.load(open(sys.argv[1]))["results"][0]
print(sys.argv[2], r["size"], r["out_of_place"]["time_us"], r["out_of_place"]["busbw"], sep="\t")' "$WORK/$f.json" "$name"
}
half=$(("$("$PY" -c 'import sys; s=sys.argv[1]; m={"K":1<<10,"M":1<<20,"G":1<<30}
print(int(s[:-1])*m[s[-1]] if s[-1] in m else int(s))' "$COLL")" / PER_HOST))
{
  coll "all_reduce ${NHOSTS}x$PER_HOST (ddp)" all_reduce "$COLL" "$NHOSTS" "$PER_HOST"
  coll "all_gather ${NHOSTS}x$PER_HOST (zero3)" all_gather "$COLL" "$NHOSTS" "$PER_HOST"
  coll "reduce_scatter ${NHOSTS}x$PER_HOST (zero3, hsdp)" reduce_scatter "$COLL" "$NHOSTS" "$PER_HOST"
  coll "all_gather ${NHOSTS}x1 of 1/$PER_HOST (hsdp replicas)" all_gather "$half" "$NHOSTS" 1
  coll "all_gather 1x$PER_HOST (hsdp group)" all_gather "$COLL" 1 "$PER_HOST"
} >"$WORK/coll.txt"
echo "# collectives on the same links, ouro-bench, float32, out of place, SIZE = whole buffer"
echo "| collective | bytes | time ms | busbw GB/s |"
echo "|---|---:|---:|---:|"
while IFS=$'\t' read -r name size us bw; do
  printf '| %s | %s | %.2f | %.3f |\n' "$name" "$size" "$(awk -v t="$us" 'BEGIN { print t / 1000 }')" "$bw"
done <"$WORK/coll.txt"
