#!/usr/bin/env python3
"""Where two builds spend their CPU time per call, from two `perf record` files of the same run.

A wall-clock A/B on a loaded machine mostly measures the load; the samples of a cpu-clock profile,
per call, measure each build's own work: copies, reductions, the kernel's socket copies and TCP
stack, and the waiting (spinning, yielding, polling), which is what the load changes. Both
profiles must come from the same ouro-bench command (same sizes and iteration counts), one per
build, e.g.

  OURO_TRANSPORT=shm OURO_ALGO=ring perf record -F 4999 -o old.data -- \\
      OLD/tools/ouro-run/ouro-run -n 2 OLD/bench/ouro-bench all_reduce -b 1M -e 1M -n 2000 -w 20 --placement out
  (the same with NEW into new.data)
  bench/experiments/perf_work.py old.data new.data 2020      # calls: -n + -w (+1 checked)

Prints a table of samples per 100 calls by kind of work (one sample: 1/F of a second of a CPU).
"""
import collections
import re
import subprocess
import sys

KINDS = [  # (kind, pattern on the symbol), the first that matches
    ("copies in user space (memcpy)", r"memmove|memcpy"),
    ("reduction", r"OpEntries|reduce"),
    ("socket copies in the kernel", r"^_copy_(from|to)_iter$"),
    ("waiting: spinning, yielding, polling a link", r"_M_invoke|tryRecv|trySendSlot|TcpLink::progress|sched_yield|"
     r"__schedule|^schedule$|finish_task_switch|waitSlow|notePeersOnMyCpu|clock_gettime|sched_getcpu|"
     r"progressLinks|futex|blockBriefly|poll"),
    ("the benchmark's own (inputs, check)", r"bench::"),
]


def samples(path):
    out = subprocess.run(["perf", "report", "-i", path, "--no-children", "-n", "-g", "none", "--sort", "symbol",
                          "--stdio"], capture_output=True, text=True, check=True).stdout
    kinds = collections.Counter()
    for line in out.splitlines():
        m = re.match(r"\s+[\d.]+%\s+(\d+)\s+\[(.)\]\s+(.*)", line)
        if not m:
            continue
        count, space, symbol = int(m.group(1)), m.group(2), re.split(r"\s{2,}", m.group(3).strip())[0]
        kind = next((k for k, pattern in KINDS if re.search(pattern, symbol)), None)
        if kind is None:
            kind = "other kernel (TCP stack, system calls)" if space == "k" else "other user code"
        kinds[kind] += count
    return kinds


def main():
    if len(sys.argv) != 4:
        sys.exit("usage: perf_work.py OLD.data NEW.data CALLS")
    old, new, calls = samples(sys.argv[1]), samples(sys.argv[2]), float(sys.argv[3])
    print("| samples per 100 calls | old | new |")
    print("|---|---:|---:|")
    for kind in sorted(set(old) | set(new), key=lambda k: -old[k]):
        print(f"| {kind} | {old[kind] / calls * 100:.1f} | {new[kind] / calls * 100:.1f} |")
    print(f"| all | {sum(old.values()) / calls * 100:.1f} | {sum(new.values()) / calls * 100:.1f} |")


if __name__ == "__main__":
    main()
