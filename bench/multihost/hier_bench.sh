#!/usr/bin/env bash
# hier_bench.sh: all-reduce across namespace hosts whose links are slower than the inside of a
# host, as on a cluster: ouro's hierarchical algorithm, ouro's flat one (OURO_ALGO=ring) and Open
# MPI, in one sitting over the same hosts and links. Prints busbw per size and the ratios.
#
#   bench/multihost/hier_bench.sh [--build DIR] [--hosts H] [--per-host L] [--rate RATE|auto]
#                                 [-b MIN] [-e MAX] [--budget S] [--repeat N] [--no-mpi]
#                                 [--before DIR]
#
#   The hierarchical system runs OURO_ALGO=hierarchical (at one rank per host too, where auto
#   keeps the flat algorithm). --before DIR adds "hier-before": the same named algorithm from
#   another build (e.g. the commit before a change), interleaved in the same rounds.
#
#   --rate auto (default): a tenth of the intra-host bandwidth, measured first in this sitting
#   (ouro's 2-rank shared-memory all_reduce busbw at 16 MiB), as tbf on both ends of every host
#   link (tests/netns/hosts.sh shape). --repeat N runs the systems N times, interleaved, and
#   reports each size's median.
# Needs root (network namespaces), tc, a build with the peer programs (-Dpeers=enabled; Open MPI
# from scripts/setup.sh --tests). Only addresses inside the namespaces it creates are used; the
# hosts are removed on exit.
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
HOSTS=$ROOT/tests/netns/hosts.sh
BUILD=$ROOT/build
NHOSTS=3
PER_HOST=2
RATE=auto
MIN=1M
MAX=256M
BUDGET=1
REPEAT=1
MPI=1
BEFORE=""
while (($#)); do
  case "$1" in
    --build) BUILD=$(realpath "$2"); shift ;;
    --hosts) NHOSTS=$2; shift ;;
    --per-host) PER_HOST=$2; shift ;;
    --rate) RATE=$2; shift ;;
    -b) MIN=$2; shift ;;
    -e) MAX=$2; shift ;;
    --budget) BUDGET=$2; shift ;;
    --repeat) REPEAT=$2; shift ;;
    --no-mpi) MPI=0 ;;
    --before) BEFORE=$(realpath "$2"); shift ;;
    -h | --help) sed -n '2,/^set -euo/p' "$0" | sed '$d' | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "hier_bench.sh: unknown argument '$1' (--help lists them)" >&2; exit 2 ;;
  esac
  shift
done
BENCH=$BUILD/bench/ouro-bench
RUN=$BUILD/tools/ouro-run/ouro-run
MPIBENCH=$BUILD/bench/peers/ouro-bench-openmpi
[[ $(id -u) == 0 ]] || { echo "hier_bench.sh: needs root (network namespaces)" >&2; exit 1; }
for f in "$BENCH" "$RUN"; do [[ -x "$f" ]] || { echo "hier_bench.sh: $f is not built (ninja -C $BUILD)" >&2; exit 1; }; done
if ((MPI)) && [[ ! -x "$MPIBENCH" ]]; then
  echo "hier_bench.sh: $MPIBENCH is not built (configure with -Dpeers=enabled after scripts/setup.sh --tests), or pass --no-mpi" >&2
  exit 1
fi

PREFIX=hb-$$
WORK=$(mktemp -d /tmp/ouro-hier-bench.XXXXXX)
cleanup() { "$HOSTS" down "$PREFIX" >/dev/null 2>&1 || true; rm -rf "$WORK"; }
trap cleanup EXIT
trap 'exit 1' INT TERM HUP
NRANKS=$((NHOSTS * PER_HOST))
COMMON=(all_reduce -b "$MIN" -e "$MAX" -f 4 --budget "$BUDGET" --placement out --no-progress -c 1)

# busbw per size from an ouro-bench JSON file: "SIZE BUSBW" lines.
busbw() { /usr/bin/python3 -c 'import json,sys
for r in json.load(open(sys.argv[1]))["results"]: print(r["size"], r["out_of_place"]["busbw"])' "$1"; }

if [[ "$RATE" == auto ]]; then
  "$RUN" -n 2 "$BENCH" all_reduce -b 16M -e 16M --budget 1 --placement out --no-progress -J "$WORK/intra.json" >/dev/null
  intra=$(busbw "$WORK/intra.json" | awk '{print $2}')
  RATE=$(awk -v g="$intra" 'BEGIN { printf "%dmbit", g * 8000 / 10 }')
  echo "# intra-host: ouro shm all_reduce 2 ranks 16 MiB busbw $intra GB/s; host links: tbf $RATE (a tenth)"
fi

"$HOSTS" up "$PREFIX" "$NHOSTS" >"$WORK/up.log" 2>&1 || { cat "$WORK/up.log" >&2; exit 1; }
"$HOSTS" shape "$PREFIX" "$RATE" >/dev/null
MASTER=$("$HOSTS" addr "$PREFIX" 1)

# ouro: one ouro-run per host, as on a cluster; node 0's rank 0 writes the JSON.
run_ouro() {  # run_ouro NAME ALGO [BUILD]
  local name=$1 algo=$2 build=${3:-$BUILD} i port=$((29500 + RANDOM % 1000)) pids=()
  for ((i = 1; i <= NHOSTS; i++)); do
    OURO_ALGO=$algo OURO_TOKEN=hier-bench "$HOSTS" exec "$PREFIX" "$i" "$build/tools/ouro-run/ouro-run" --nnodes "$NHOSTS" \
      --node-rank $((i - 1)) --nproc-per-node "$PER_HOST" --master "$MASTER:$port" "$build/bench/ouro-bench" "${COMMON[@]}" -J "$WORK/$name.json" \
      >"$WORK/$name-$i.log" 2>&1 &
    pids+=($!)
  done
  local ok=1
  for i in "${pids[@]}"; do wait "$i" || ok=0; done
  ((ok)) || { echo "hier_bench.sh: ouro ($name) failed:" >&2; cat "$WORK/$name"-*.log >&2; exit 1; }
}

run_mpi() {
  local i
  for ((i = 1; i <= NHOSTS; i++)); do echo "$("$HOSTS" name "$PREFIX" "$i") slots=$PER_HOST"; done >"$WORK/hostfile"
  NETNS_PREFIX=$PREFIX "$HOSTS" exec "$PREFIX" 1 mpirun.openmpi --allow-run-as-root --hostfile "$WORK/hostfile" \
    --mca plm_rsh_agent "$ROOT/tests/netns/rsh_agent.sh" --mca oob_tcp_if_include eth0 --mca btl_tcp_if_include eth0 \
    -x NETNS_PREFIX -n "$NRANKS" "$MPIBENCH" "${COMMON[@]}" -J "$WORK/openmpi.json" >"$WORK/openmpi.log" 2>&1 ||
    { echo "hier_bench.sh: Open MPI failed:" >&2; cat "$WORK/openmpi.log" >&2; exit 1; }
}

systems=(hierarchical)
[[ -n "$BEFORE" ]] && systems+=(hier-before)
systems+=(flat)
((MPI)) && systems+=(openmpi)
for ((k = 1; k <= REPEAT; k++)); do
  run_ouro hierarchical hierarchical && busbw "$WORK/hierarchical.json" >"$WORK/hierarchical.$k"
  if [[ -n "$BEFORE" ]]; then run_ouro hier-before hierarchical "$BEFORE" && busbw "$WORK/hier-before.json" >"$WORK/hier-before.$k"; fi
  run_ouro flat ring && busbw "$WORK/flat.json" >"$WORK/flat.$k"
  if ((MPI)); then run_mpi && busbw "$WORK/openmpi.json" >"$WORK/openmpi.$k"; fi
done

echo "# all_reduce float32, $NHOSTS namespace hosts x $PER_HOST ranks, host links tbf $RATE, busbw GB/s (median of $REPEAT)"
/usr/bin/python3 - "$WORK" "$REPEAT" "${systems[@]}" <<'EOF'
import statistics, sys
work, repeat, systems = sys.argv[1], int(sys.argv[2]), sys.argv[3:]
table = {}
for s in systems:
    for k in range(1, repeat + 1):
        for line in open(f"{work}/{s}.{k}"):
            size, bw = line.split()
            table.setdefault(int(size), {}).setdefault(s, []).append(float(bw))
head = ["bytes"] + systems + ["hier/flat"] + (["hier/before"] if "hier-before" in systems else []) + (["hier/openmpi"] if "openmpi" in systems else [])
print("| " + " | ".join(head) + " |")
print("|" + "---|" * len(head))
for size in sorted(table):
    med = {s: statistics.median(v) for s, v in table[size].items()}
    row = [str(size)] + [f"{med.get(s, 0):.3f}" for s in systems]
    row.append(f"{med['hierarchical'] / med['flat']:.2f}x" if med.get("flat") else "-")
    if "hier-before" in systems:
        row.append(f"{med['hierarchical'] / med['hier-before']:.2f}x" if med.get("hier-before") else "-")
    if "openmpi" in systems:
        row.append(f"{med['hierarchical'] / med['openmpi']:.2f}x" if med.get("openmpi") else "-")
    print("| " + " | ".join(row) + " |")
EOF
