#!/usr/bin/env bash
# Interleaved A/B of two builds of ouro on the host paths, for a change that must not cost speed:
# shared memory with the default algorithms (direct), the collective driver over shared-memory
# FIFOs (OURO_ALGO=ring, the spelling old and new builds both accept), and TCP; 2 and 4 ranks;
# all-reduce from 16 B to 64 MiB. Each round runs every configuration on the old build and then on
# the new one (the other way round every second round), so a load that comes and goes hits both
# alike; the table shows the medians of the rounds: time for every size (what small calls are
# about) and busbw.
#
#   git worktree add /tmp/ouro-old <commit> && meson setup /tmp/ouro-old/build /tmp/ouro-old \
#     -Dcuda=disabled -Dpeers=disabled && ninja -C /tmp/ouro-old/build bench/ouro-bench tools/ouro-run/ouro-run
#   bench/experiments/ab_builds.sh /tmp/ouro-old/build build [ROUNDS]
#
# Run it on an otherwise idle machine: it reports the 1-minute load average before, after and at
# its highest after a round. On a busy one, give more rounds: the last column, the median over the
# rounds of each round's own new/old speed (old time / new time, run back to back), with its lowest and
# highest, says how far the noise reaches; the fastest run of each side (best of the rounds) is
# what each build does when nothing else takes its cores, the steadiest figure on a machine whose
# load comes and goes. On a machine others keep busy with niced builds, AB_PREFIX="nice -n -10"
# puts every job ahead of them, but only with kernel.sched_autogroup_enabled=0: with autogroups
# (Debian's default) nice orders processes inside one session only, and every session (a terminal,
# each test's setsid ranks) gets an equal share of the CPUs whatever its nice. Here 2 TCP ranks
# under nice -10 beside another session's tests were stacked on one core and took 450 us an 8-byte
# call; with autogroups off, 21-32 us. Not real-time scheduling (chrt -f): ranks that spin then
# starve the kernel's network threads, and TCP between namespace hosts stalls until calls time out.
# AB_ROWS=FILE keeps the raw rows. Fewer configurations or sizes, more
# iterations a run:
#   AB_CONFIGS="shm-ring 2,tcp 2" AB_SIZES="-b 1M -e 64M" AB_ITERS="-n 50 -w 5" \
#     bench/experiments/ab_builds.sh OLD NEW 9
set -euo pipefail
old=${1:?usage: ab_builds.sh OLD_BUILD_DIR NEW_BUILD_DIR [ROUNDS]}
new=${2:?usage: ab_builds.sh OLD_BUILD_DIR NEW_BUILD_DIR [ROUNDS]}
rounds=${3:-3}
IFS=, read -r -a configs <<<"${AB_CONFIGS:-shm 2,shm 4,shm-ring 2,shm-ring 4,tcp 2,tcp 4}"
read -r -a sizes <<<"${AB_SIZES:--b 16 -e 64M}"
read -r -a iters <<<"${AB_ITERS:--n 20 -w 5}"
for b in "$old" "$new"; do
  for p in tools/ouro-run/ouro-run bench/ouro-bench; do
    [[ -x $b/$p ]] || { echo "ab_builds.sh: $b/$p is not built" >&2; exit 2; }
  done
done
rows=${AB_ROWS:-$(mktemp)}
[[ -n ${AB_ROWS:-} ]] || trap 'rm -f "$rows"' EXIT
load() { cut -d' ' -f1 /proc/loadavg; }
echo "load before: $(load)"
peak=$(load)
for ((round = 1; round <= rounds; round++)); do
  for config in "${configs[@]}"; do
    read -r name ranks <<<"$config"
    settings=(OURO_TRANSPORT=tcp)
    [[ $name == shm ]] && settings=(OURO_TRANSPORT=shm)
    [[ $name == shm-ring ]] && settings=(OURO_TRANSPORT=shm OURO_ALGO=ring)
    # Odd rounds run the old build first, even rounds the new: neither always follows the other.
    sides=(old new)
    ((round % 2 == 0)) && sides=(new old)
    for side in "${sides[@]}"; do
      build=$old
      [[ $side == new ]] && build=$new
      env "${settings[@]}" timeout 300 ${AB_PREFIX:-} "$build/tools/ouro-run/ouro-run" -n "$ranks" "$build/bench/ouro-bench" \
        all_reduce "${sizes[@]}" -f 4 "${iters[@]}" --placement out --no-progress \
        | awk -v side="$side" -v config="$name-$ranks" -v round="$round" \
          '$1 ~ /^[0-9]+$/ { print config, side, $1, $6, $8, round }' >>"$rows"
    done
  done
  peak=$(printf '%s\n%s\n' "$peak" "$(load)" | sort -g | tail -n 1)
done
echo "load after: $(load) (highest after a round: $peak)"
/usr/bin/python3 - "$rows" <<'PY'
import collections, statistics, sys
runs = collections.defaultdict(list)
by_round = collections.defaultdict(dict)
for line in open(sys.argv[1]):
    config, side, size, time_us, busbw, rnd = line.split()
    runs[(config, int(size), side)].append((float(time_us), float(busbw)))
    by_round[(config, int(size), rnd)][side] = float(time_us)
def size_text(b):
    return f"{b >> 20} MiB" if b >= 1 << 20 else f"{b >> 10} KiB" if b >= 1 << 10 else f"{b} B"
print("| config | size | old time (us) | new time (us) | old busbw (GB/s) | new busbw (GB/s) | new/old speed |"
      " per round: median (lowest-highest) | best of rounds: old / new time (us), new/old |")
print("|---|---:|---:|---:|---:|---:|---:|---:|---:|")
for config, size in sorted({(c, s) for c, s, _ in runs}):
    old, new = runs.get((config, size, "old")), runs.get((config, size, "new"))
    if old and new:
        ot, nt = statistics.median(t for t, _ in old), statistics.median(t for t, _ in new)
        ob, nb = statistics.median(b for _, b in old), statistics.median(b for _, b in new)
        paired = sorted(r["old"] / r["new"] for (c, s, _), r in by_round.items()
                        if (c, s) == (config, size) and len(r) == 2 and r["new"] > 0)
        spread = f"{statistics.median(paired):.2f}x ({paired[0]:.2f}-{paired[-1]:.2f})" if paired else "-"
        bo, bn = min(t for t, _ in old), min(t for t, _ in new)
        best = f"{bo:.2f} / {bn:.2f}, {bo / bn:.2f}x"
        print(f"| {config} | {size_text(size)} | {ot:.2f} | {nt:.2f} | {ob:.2f} | {nb:.2f} | {ot / nt:.2f}x | {spread} | {best} |")
PY
