#!/usr/bin/env bash
# What the flight recorder and the replica checks cost (issue #34): 8 B and 16 MiB all-reduces at 2
# and 4 ranks over shared memory, each configuration run with the recorder on (the default) and off
# (OURO_TRACE_CALLS=0), and with OURO_VERIFY=1 and OURO_VERIFY=100, interleaved in one run: every
# round runs every side of a configuration back to back, in a rotating order, so a load that comes
# and goes hits them alike. The table: per side, the median over the rounds of each run's time per
# call, and its difference from "off" (the median of the rounds' own differences, with the lowest
# and highest), in microseconds and percent.
#
#   bench/experiments/trace_cost.sh BUILD [ROUNDS]
#   TRACE_COST_SIDES="on off" TRACE_COST_CONFIGS="shm 1,shm 2" TRACE_COST_SIZES=8 bench/experiments/trace_cost.sh build 15
# (one rank: the call is a copy, so what the recorder adds to a call's own path shows without the
# noise of waiting for a peer)
#
# The 8-byte calls take a fraction of a microsecond: each run times 20000 of them (after 2000
# untimed), and the rounds' medians are what to read. Run it on an otherwise idle machine; it
# prints the load average before and after.
set -euo pipefail
build=${1:?usage: trace_cost.sh BUILD_DIR [ROUNDS]}
rounds=${2:-7}
IFS=, read -r -a configs <<<"${TRACE_COST_CONFIGS:-shm 2,shm 4}"
read -r -a sides <<<"${TRACE_COST_SIDES:-on off verify1 verify100}"
read -r -a sizes <<<"${TRACE_COST_SIZES:-8 16M}"
for p in tools/ouro-run/ouro-run bench/ouro-bench; do
  [[ -x $build/$p ]] || { echo "trace_cost.sh: $build/$p is not built" >&2; exit 2; }
done
rows=${TRACE_COST_ROWS:-$(mktemp)}
[[ -n ${TRACE_COST_ROWS:-} ]] || trap 'rm -f "$rows"' EXIT
load() { cut -d' ' -f1 /proc/loadavg; }
echo "load before: $(load)"
settings_of() {
  case $1 in
    on) echo "OURO_TRACE_CALLS=2000" ;;
    off) echo "OURO_TRACE_CALLS=0" ;;
    verify1) echo "OURO_VERIFY=1" ;;
    verify100) echo "OURO_VERIFY=100" ;;
    *) echo "trace_cost.sh: unknown side '$1' (on, off, verify1, verify100)" >&2; exit 2 ;;
  esac
}
for ((round = 1; round <= rounds; round++)); do
  for config in "${configs[@]}"; do
    read -r transport ranks <<<"$config"
    # Rotate the sides' order every round: none always runs first or after another.
    n=${#sides[@]}
    for ((k = 0; k < n; k++)); do
      side=${sides[(k + round) % n]}
      for size in "${sizes[@]}"; do
        iters=(-n 20000 -w 2000)
        [[ $size == 16M ]] && iters=(-n 30 -w 5)
        env OURO_TRANSPORT="$transport" $(settings_of "$side") timeout 300 "$build/tools/ouro-run/ouro-run" -n "$ranks" \
          "$build/bench/ouro-bench" all_reduce -b "$size" -e "$size" "${iters[@]}" -c 0 --placement out --no-progress \
          | awk -v side="$side" -v config="$transport-$ranks" -v round="$round" \
            '$1 ~ /^[0-9]+$/ { print config, side, $1, $6, round }' >>"$rows"
      done
    done
  done
done
echo "load after: $(load)"
/usr/bin/python3 - "$rows" <<'PY'
import collections, statistics, sys
times = collections.defaultdict(dict)  # (config, size, round) -> side -> us
for line in open(sys.argv[1]):
    config, side, size, us, rnd = line.split()
    times[(config, int(size), rnd)][side] = float(us)
def size_text(b):
    return f"{b >> 20} MiB" if b >= 1 << 20 else f"{b} B"
sides = sorted({s for r in times.values() for s in r}, key=lambda s: ["off", "on", "verify100", "verify1"].index(s)
               if s in ("off", "on", "verify100", "verify1") else 9)
print("| config | size | side | time per call (us), median of rounds | vs off: median of per-round differences (lowest..highest) |")
print("|---|---:|---|---:|---|")
for config, size in sorted({(c, s) for c, s, _ in times}):
    rounds = [r for (c, s, _), r in times.items() if (c, s) == (config, size)]
    for side in sides:
        mine = [r[side] for r in rounds if side in r]
        if not mine:
            continue
        cell = ""
        if side != "off":
            diffs = sorted(r[side] - r["off"] for r in rounds if side in r and "off" in r)
            rel = sorted(100 * (r[side] - r["off"]) / r["off"] for r in rounds if side in r and r.get("off"))
            if diffs:
                cell = (f"{statistics.median(diffs):+.3f} us ({diffs[0]:+.3f}..{diffs[-1]:+.3f}); "
                        f"{statistics.median(rel):+.1f}% ({rel[0]:+.1f}..{rel[-1]:+.1f})")
        print(f"| {config} | {size_text(size)} | {side} | {statistics.median(mine):.3f} | {cell} |")
print(f"rounds: {len({r for (_, _, r) in times})}")
PY
