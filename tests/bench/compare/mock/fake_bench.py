#!/usr/bin/python3
"""A stand-in benchmark program for compare's mock test, reachable under the names of the real
ones (ouro-bench, ouro-bench-openmpi, ..., torch_bench.py): accepts the harness's flags, prints
an nccl-tests table and writes the JSON documented in bench/harness.hpp. Times follow a simple
latency + bytes/bandwidth model per system, so the report's "best peer" is predictable.

FAKE_BENCH_BEHAVIOR="system:what,system@collective:what,..." makes one system misbehave
(for every collective, or for one):
  hang    sleep past compare's --timeout after printing two rows
  crash   print two rows, then exit 3 without JSON
  nojson  print the whole table but write no JSON (compare falls back to the table parser)
  wrong   report wrong elements at the second size, exit 1
  skip    print a skip line and no rows (a collective the program lacks), exit 0
  slowonce  times 10x longer in its first run (per system and collective; a state file beside
          FAKE_BENCH_PIDFILE remembers it), as a descheduled run would be
"""
import json
import os
import sys
import time

name = os.path.basename(sys.argv[0])
system = {"ouro-bench": "ouro", "ouro-bench-openmpi": "openmpi", "ouro-bench-mpich": "mpich",
          "ouro-bench-gloo": "gloo", "torch_bench.py": "torch"}[name]
if system == "ouro" and os.environ.get("OURO_TRANSPORT") == "tcp":
    system = "ouro-tcp"
if system in ("gloo", "torch") and not os.path.isdir(os.environ.get("OURO_BENCH_GLOO_STORE", "")):
    sys.exit(f"{name}: OURO_BENCH_GLOO_STORE is not a directory")
behavior = dict(kv.split(":") for kv in os.environ.get("FAKE_BENCH_BEHAVIOR", "").split(",") if kv)
what = behavior.get(f"{system}@{sys.argv[1]}", behavior.get(system, ""))
# latency us, bandwidth GB/s
MODEL = {"ouro": (1.0, 8.0), "ouro-tcp": (30.0, 2.0), "openmpi": (0.5, 4.0),
         "mpich": (0.8, 6.0), "gloo": (200.0, 1.0), "torch": (400.0, 1.2)}

def size_of(text):
    mult = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}
    return int(text[:-1]) * mult[text[-1]] if text[-1] in mult else int(text)

argv = sys.argv[1:]
collective = argv[0]
opts = {}
i = 1
while i < len(argv):
    if argv[i] in ("--no-progress", "--host", "-D"):  # flags without a value
        i += 1
        continue
    opts[argv[i]] = argv[i + 1]
    i += 2
nranks = int(os.environ.get("FAKE_NRANKS", "1"))
lo, hi, factor = size_of(opts["-b"]), size_of(opts["-e"]), int(opts["-f"])
dtype = opts.get("-d", "float32")
factor_bus = {"all_reduce": 2 * (nranks - 1) / nranks}.get(collective, (nranks - 1) / nranks)

if system == "ouro" and nranks == 2 and os.environ.get("OURO_DEBUG") == "info":
    # What the real library logs from its core-distance probe (comm/exec/algo_direct.cpp).
    print("vm:1 [r0] ouro INFO: rank 0: cache-line round trip to rank 1: 452 ns, cores far apart (200 ns "
          "to 2 us); this call's staging copies go around the cache (OURO_SHM_STREAM_STAGING, ...)",
          file=sys.stderr)
print(f"# ouro-bench (fake {system}) collective {collective} nranks {nranks}")
print("#       size         count      type   redop    root     time   algbw   busbw #wrong"
      "     time   algbw   busbw #wrong")
if what == "skip":
    print(f"# skipping {collective}: {system} does not support it")
    sys.exit(0)
slowdown = 1.0
if what == "slowonce":
    marker = os.path.join(os.path.dirname(os.environ["FAKE_BENCH_PIDFILE"]),
                          f"slowonce-{system}-{collective}")
    if not os.path.exists(marker):
        open(marker, "w").close()
        slowdown = 10.0
results = []
size, row = lo, 0
while size <= hi:
    lat, bw = MODEL[system]
    t = (lat + size / (bw * 1e3)) * slowdown
    alg = size / 1e3 / t
    wrong = 5 if what == "wrong" and row == 1 else 0
    count = size // 4 // (nranks if collective in ("reduce_scatter", "all_gather") else 1)
    print(f"{size:12d}  {count:12d}  {dtype:>8s}  {'sum':>6s}  {-1:6d}  {t:7.2f}  {alg:6.2f}"
          f"  {alg * factor_bus:6.2f}  {wrong:5d}      N/A", flush=True)
    results.append({"size": size, "count": count, "type": dtype, "redop": "sum", "root": -1,
                    "iters": 20, "out_of_place": {"time_us": t, "algbw": alg,
                                                  "busbw": alg * factor_bus, "wrong": wrong},
                    "in_place": None})
    row += 1
    if row == 2 and what == "hang":
        if os.environ.get("FAKE_BENCH_PIDFILE"):  # lets the test check the timeout killed us
            with open(os.environ["FAKE_BENCH_PIDFILE"], "w") as f:
                f.write(str(os.getpid()))
        time.sleep(120)
    if row == 2 and what == "crash":
        sys.exit(3)
    size *= factor
bad = sum(r["out_of_place"]["wrong"] for r in results)
print(f"# Out of bounds values : {bad} {'FAILED' if bad else 'OK'}")
print(f"# Avg bus bandwidth    : {sum(r['out_of_place']['busbw'] for r in results) / len(results):g}")
if what != "nojson":
    with open(opts["-J"], "w") as f:
        json.dump({"system": system, "description": f"fake {system} for compare's mock test",
                   "collective": collective, "nranks": nranks, "results": results,
                   "out_of_bounds": bad, "avg_busbw": 0, "ok": bad == 0}, f)
sys.exit(1 if bad else 0)
