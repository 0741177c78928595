#!/usr/bin/python3
"""torch.distributed's "gloo" backend, or ouro's own ("ouro", python/ouro/torch.py), measured the way
ouro-bench measures (bench/harness.hpp).

    ouro-run -n 2 /usr/bin/python3 bench/peers/torch_bench.py all_reduce -b 8 -e 1M -f 4
    PYTHONPATH=build/python ouro-run -n 2 /usr/bin/python3 bench/peers/torch_bench.py --backend ouro \
        all_reduce -b 8 -e 1M -f 4

A Python re-implementation of the C++ harness, since torch is reached from Python: the same flags
(bench/flags.cpp), sizes and layouts (formulas.cpp), seeded inputs and check (verify.cpp), timing
(harness.cpp: barrier, warm-up, -n ops back to back or --budget, times combined by -a) and the
same table and JSON (report.cpp; no progress line), so bench/compare reads it like the others.
Keep it in step with those files.

What torch 1.13's gloo backend has: all_reduce, broadcast, reduce, all_gather, alltoall
(all_to_all_single) and sendrecv (isend/irecv); no reduce_scatter; dtypes int8 uint8 int32 int64
float16 float32 float64 (no uint32/uint64 in torch, no bfloat16 in its gloo); ops sum prod max
min (no avg). The "ouro" backend (--backend ouro) has the same and reduce_scatter, which it runs
as torch's _reduce_scatter_base, and all_gather as _all_gather_base (the flat-tensor calls FSDP
and ZeRO use; gloo has neither). Their collectives work in place on one tensor, so out of place is what a torch user
writes: recv.copy_(send) and then the in-place call, the copy inside the measured time (the
anchors' torch_allreduce.py measures in place only).

Rank and world size: RANK/WORLD_SIZE (ouro-run sets them). Rendezvous: env:// when MASTER_ADDR
and MASTER_PORT are set, else a FileStore file in OURO_BENCH_GLOO_STORE (default
/tmp/ouro-bench-torch-<hash of OURO_TOKEN or of the parent pid>). GLOO_SOCKET_IFNAME defaults to
lo (loopback only); torch's intra-op threads default to 1 per rank (OMP_NUM_THREADS overrides),
as in the anchors. Must run under /usr/bin/python3 (Debian's python3-torch).
"""

import datetime
import hashlib
import json
import math
import os
import shutil
import socket
import sys
import time

import numpy as np

PROGRAM = "torch_bench.py"
COLLECTIVES = ["all_reduce", "reduce_scatter", "all_gather", "broadcast", "reduce", "alltoall", "sendrecv"]
REDUCTIONS = {"all_reduce", "reduce_scatter", "reduce"}
ROOTED = {"broadcast", "reduce"}
IN_PLACE = set(COLLECTIVES) - {"alltoall", "sendrecv"}
OPS = ["sum", "prod", "max", "min", "avg"]
# name: (size, numpy type, floating, signed); ouro's numeric order (dtypes.cpp).
DTYPES = {
    "int8": (1, np.int8, False, True), "uint8": (1, np.uint8, False, False),
    "int32": (4, np.int32, False, True), "uint32": (4, np.uint32, False, False),
    "int64": (8, np.int64, False, True), "uint64": (8, np.uint64, False, False),
    "float16": (2, np.float16, True, True), "float32": (4, np.float32, True, True),
    "float64": (8, np.float64, True, True), "bfloat16": (2, None, True, True),
}
ALIASES = {"half": "float16", "float": "float32", "double": "float64", "bf16": "bfloat16",
           "char": "int8", "int": "int32"}
# ouro's types (core/dtype.hpp) that torch 1.13 has no tensor type for, with their aliases.
NO_TORCH_TYPE = {name: kind for kind, names in (("float8e4m3", ("float8e4m3", "fp8e4m3", "f8e4m3", "e4m3")),
                                                ("float8e5m2", ("float8e5m2", "fp8e5m2", "f8e5m2", "e5m2")))
                 for name in names}
BITS = {1: np.uint8, 2: np.uint16, 4: np.uint32, 8: np.uint64}
GUARD_BYTE, GUARD_BYTES, BUDGET_MIN_ITERS = 0xA5, 256, 5
AVERAGES = ["rank0", "mean", "min", "max"]


class UsageError(Exception):
    pass


# ---------------------------------------------------------------- flags (flags.cpp)

def parse_bytes(text):
    for suffix in ("iB", "B", "b"):
        if text.endswith(suffix):
            text = text[:-len(suffix)]
            break
    scale = {"k": 1 << 10, "m": 1 << 20, "g": 1 << 30, "t": 1 << 40}.get(text[-1:].lower(), 1)
    if scale != 1:
        text = text[:-1]
    if not text.isdigit():
        return None
    return int(text) * scale


def parse_args(argv):
    o = dict(collective=None, min_bytes=32 << 20, max_bytes=32 << 20, step_bytes=1 << 20, step_factor=1,
             iters=20, warmup=5, check=1, ops=["sum"], dtypes=["float32"], root=0, all_roots=False,
             average=1, blocking=True, json=None, budget=0.0, max_iters=10000, out_of_place=True,
             in_place=True, seed=1, device=False, inject_error=False, progress=True, backend="gloo")
    long_flags = {"minbytes": "b", "maxbytes": "e", "stepbytes": "i", "stepfactor": "f", "iters": "n",
                  "warmup_iters": "w", "check": "c", "op": "o", "datatype": "d", "root": "r",
                  "average": "a", "blocking": "z", "output_file": "J"}
    i = 0
    while i < len(argv):
        arg = argv[i]
        i += 1
        if arg in ("-h", "--help"):
            return None
        if not arg.startswith("-") or arg == "-":
            name = arg[:-5] if arg.endswith("_perf") else arg
            squashed = name.replace("_", "").replace("-", "")
            found = [c for c in COLLECTIVES if c.replace("_", "") == squashed]
            if o["collective"] or not found:
                raise UsageError(f"unexpected argument '{arg}'; give one collective ("
                                 + ", ".join(COLLECTIVES) + "), then flags")
            o["collective"] = found[0]
            continue
        if arg in ("-D", "--device", "--no-progress", "--inject-error"):
            o[{"-D": "device", "--device": "device", "--no-progress": "progress",
               "--inject-error": "inject_error"}[arg]] = arg != "--no-progress"
            continue
        if arg == "--backend" or arg.startswith("--backend="):
            value = arg.partition("=")[2] if "=" in arg else (argv[i] if i < len(argv) else "")
            i += 0 if "=" in arg else 1
            if value not in ("gloo", "ouro"):
                raise UsageError(f"bad value '{value}' for --backend: expected gloo or ouro")
            o["backend"] = value
            continue
        if arg.startswith("--"):
            name, eq, value = arg[2:].partition("=")
            flag = long_flags.get(name, name)
            if flag not in long_flags.values() and name not in ("budget", "max-iters", "placement", "seed"):
                raise UsageError(f"unknown flag '{arg}'; see --help")
        else:
            flag, value, eq = arg[1], arg[2:], arg[2:]
        if not eq:
            if i >= len(argv):
                raise UsageError(f"flag '{arg}' needs a value; see --help")
            value = argv[i]
            i += 1

        def bad(what):
            return UsageError(f"bad value '{value}' for {arg}: expected {what}")

        def integer(minimum):
            if not value.lstrip("-").isdigit() or int(value) < minimum:
                raise bad(f"an integer >= {minimum}")
            return int(value)

        if flag in ("b", "e", "i"):
            v = parse_bytes(value)
            if v is None:
                raise bad("a size such as 8, 64K, 16M or 1G")
            o[{"b": "min_bytes", "e": "max_bytes", "i": "step_bytes"}[flag]] = v
        elif flag == "f":
            o["step_factor"] = integer(1)
        elif flag in ("n", "w", "c"):
            o[{"n": "iters", "w": "warmup", "c": "check"}[flag]] = integer(1 if flag == "n" else 0)
        elif flag == "o":
            if value != "all" and value not in OPS:
                raise bad("sum, prod, max, min, avg or all")
            o["ops"] = OPS if value == "all" else [value]
        elif flag == "d":
            value = ALIASES.get(value, value)
            if value in NO_TORCH_TYPE:
                kind = NO_TORCH_TYPE[value]
                raise UsageError(f"bad value '{value}' for {arg}: {kind} has no tensor type in torch 1.13 (float8 "
                                 f"dtypes came in torch 2.1), so this script cannot run it (ouro-bench -d {kind} "
                                 f"can); expected one of {', '.join(DTYPES)} or all")
            if value != "all" and value not in DTYPES:
                raise bad("a type name such as float32, bfloat16, int8, or all")
            o["dtypes"] = list(DTYPES) if value == "all" else [value]
        elif flag == "r":
            o["all_roots"] = value in ("all", "-1")
            if not o["all_roots"]:
                o["root"] = integer(0)
        elif flag == "a":
            o["average"] = integer(0)
            if o["average"] > 3:
                raise bad("0 (rank 0), 1 (mean), 2 (min) or 3 (max)")
        elif flag == "z":
            if value not in ("0", "1"):
                raise bad("0 (ops on a stream) or 1 (blocking)")
            o["blocking"] = value == "1"
        elif flag == "J":
            o["json"] = value
        elif flag == "budget":
            try:
                o["budget"] = float(value)
            except ValueError:
                o["budget"] = -1.0
            if not (0 < o["budget"] < math.inf):
                raise bad("a positive number of seconds")
        elif flag == "max-iters":
            o["max_iters"] = integer(1)
        elif flag == "placement":
            if value not in ("out", "in", "both"):
                raise bad("out, in or both")
            o["out_of_place"], o["in_place"] = value != "in", value != "out"
        elif flag == "seed":
            o["seed"] = integer(0) & 0xFFFFFFFF
        else:
            raise UsageError(f"unknown flag '{arg}'; see --help")
    if not o["collective"]:
        raise UsageError("no collective given; for example: all_reduce -b 8 -e 128M -f 2")
    if o["min_bytes"] > o["max_bytes"]:
        raise UsageError(f"-b ({o['min_bytes']} bytes) is larger than -e ({o['max_bytes']} bytes); swap them")
    if o["step_factor"] == 1 and o["step_bytes"] == 0 and o["min_bytes"] != o["max_bytes"]:
        raise UsageError("-i 0 with -f 1 would never reach -e; give -i > 0 or -f > 1")
    if o["device"]:
        raise UsageError("torch's backends are measured with host buffers only here; drop -D")
    if not o["blocking"]:
        raise UsageError("torch is measured with blocking calls only; drop -z 0")
    return o


def sweep_sizes(o):
    sizes, size = [], o["min_bytes"]
    while size <= o["max_bytes"]:
        sizes.append(size)
        nxt = size * o["step_factor"] if o["step_factor"] > 1 else size + o["step_bytes"]
        if nxt <= size:
            break
        size = nxt
    return sizes


# ---------------------------------------------------------------- layouts and formulas (formulas.cpp)

def layout_for(c, nbytes, es, n, r):
    total = nbytes // es
    lay = dict(send_off=0, recv_off=0)
    if c == "reduce_scatter":
        lay.update(count=total // n, send=total // n * n, recv=total // n, recv_off=total // n * r)
    elif c == "all_gather":
        lay.update(count=total // n, send=total // n, recv=total // n * n, send_off=total // n * r)
    elif c == "alltoall":
        lay.update(count=total // n, send=total // n * n, recv=total // n * n)
    else:
        lay.update(count=total, send=total, recv=total)
    lay["bytes"] = max(lay["send"], lay["recv"]) * es
    return lay


def bandwidths(c, count, es, n, seconds):
    if seconds <= 0:
        return 0.0, 0.0
    nbytes = count * es * (n if c in ("reduce_scatter", "all_gather", "alltoall") else 1)
    algbw = nbytes / 1.0e9 / seconds
    factor = {"all_reduce": 2.0 * (n - 1) / n, "reduce_scatter": (n - 1) / n, "all_gather": (n - 1) / n,
              "alltoall": (n - 1) / n}.get(c, 1.0)
    return algbw, algbw * factor


# ---------------------------------------------------------------- inputs and check (verify.cpp)

def splitmix64(x):
    x = x + np.uint64(0x9E3779B97F4A7C15)
    x = (x ^ (x >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
    x = (x ^ (x >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
    return x ^ (x >> np.uint64(31))


def input_values(case, rank, first, count):
    """verify.cpp's inputValue for elements [first, first + count) of `rank`, as int64."""
    c, dtype, op, n, seed = case["collective"], case["dtype"], case["op"], case["nranks"], case["seed"]
    _, _, floating, signed = DTYPES[dtype]
    idx = np.arange(first, first + count, dtype=np.uint64)
    with np.errstate(over="ignore"):
        h = splitmix64(splitmix64(splitmix64(np.array([seed], dtype=np.uint64)) ^ np.uint64(rank)) ^ idx)
    unsigned = not floating and not signed
    if op == "prod" and c in REDUCTIONS:
        ones = np.ones(count, dtype=np.int64) if unsigned else np.where(h & np.uint64(1), 1, -1).astype(np.int64)
        return np.where((idx + np.uint64(rank)) % np.uint64(n) == 0, 2, ones).astype(np.int64)
    limit = {"int8": 127, "uint8": 255, "bfloat16": 256}.get(dtype, 1000)
    m = max(1, limit // max(n, 1))
    if unsigned:
        return (h % np.uint64(m + 1)).astype(np.int64)
    return (h % np.uint64(2 * m + 1)).astype(np.int64) - m


def as_type(values, dtype):
    """storeElement: integers wrap like a C cast; floats are exact (small integers)."""
    return values.astype(DTYPES[dtype][1])


def expected(case, count, recv_count):
    c, n, me, root, op = case["collective"], case["nranks"], case["rank"], case["root"], case["op"]
    if c in ("all_reduce", "reduce"):
        acc = input_values(case, 0, 0, count)
        with np.errstate(over="ignore"):
            for r in range(1, n):
                v = input_values(case, r, 0, count)
                acc = {"sum": acc + v, "prod": acc * v, "max": np.maximum(acc, v), "min": np.minimum(acc, v)}[op]
        return as_type(acc, case["dtype"])
    if c == "broadcast":
        return as_type(input_values(case, root, 0, count), case["dtype"])
    if c == "sendrecv":
        return as_type(input_values(case, (me - 1 + n) % n, 0, count), case["dtype"])
    if c == "reduce_scatter":
        acc = input_values(case, 0, me * count, count)
        with np.errstate(over="ignore"):
            for r in range(1, n):
                v = input_values(case, r, me * count, count)
                acc = {"sum": acc + v, "prod": acc * v, "max": np.maximum(acc, v), "min": np.minimum(acc, v)}[op]
        return as_type(acc, case["dtype"])
    parts = [input_values(case, r, me * count if c == "alltoall" else 0, count) for r in range(n)]
    return as_type(np.concatenate(parts) if parts else np.zeros(0, np.int64), case["dtype"])[:recv_count]


def poison(dtype):
    return {"int8": -128, "uint8": 255, "float16": 30000, "float32": 1e30, "float64": 1e30}.get(dtype, 1000003)


# ---------------------------------------------------------------- torch.distributed

class Torch:
    """The measured system: one process group of `backend` (gloo or ouro) over all ranks."""

    def __init__(self, backend):
        os.environ.setdefault("GLOO_SOCKET_IFNAME", "lo")
        import torch
        import torch.distributed as dist
        self.torch, self.dist, self.backend = torch, dist, backend
        if backend == "ouro":
            try:
                import ouro.torch  # noqa: F401  (registers the backend "ouro")
            except ImportError as e:
                raise RuntimeError(f"cannot import ouro.torch ({e}): build ouro with the python option "
                                   "(meson -Dpython=enabled) and set PYTHONPATH=BUILD/python") from e
        torch.set_num_threads(int(os.environ.get("OMP_NUM_THREADS", "1") or 1))
        env = os.environ
        rank, size = env.get("RANK", env.get("OURO_RANK")), env.get("WORLD_SIZE", env.get("OURO_WORLD_SIZE"))
        if rank is None or size is None:
            raise RuntimeError("no rank and world size in the environment: start it with ouro-run -n N, "
                               "or set RANK and WORLD_SIZE for each rank")
        self.rank, self.size = int(rank), int(size)
        self.store_dir = None
        if env.get("MASTER_ADDR") and env.get("MASTER_PORT"):
            init = "env://"
        else:
            job = env.get("OURO_TOKEN") or f"ppid:{os.getppid()}"
            default = "/tmp/ouro-bench-torch-" + hashlib.sha256(job.encode()).hexdigest()[:16]
            store = env.get("OURO_BENCH_GLOO_STORE") or default
            os.makedirs(store, exist_ok=True)
            self.store_dir = store if store == default else None  # made here: removed at the end
            init = f"file://{store}/torch-filestore"
        timeout = datetime.timedelta(seconds=float(env.get("OURO_TIMEOUT_S", "300")))
        dist.init_process_group(backend, init_method=init, rank=self.rank, world_size=self.size, timeout=timeout)
        self.types = {"int8": torch.int8, "uint8": torch.uint8, "int32": torch.int32, "int64": torch.int64,
                      "float16": torch.float16, "float32": torch.float32, "float64": torch.float64}
        self.ops = {"sum": dist.ReduceOp.SUM, "prod": dist.ReduceOp.PRODUCT, "max": dist.ReduceOp.MAX,
                    "min": dist.ReduceOp.MIN}
        where = f"GLOO_SOCKET_IFNAME={env['GLOO_SOCKET_IFNAME']}" if backend == "gloo" else "ouro's own transports"
        self.description = (f"torch {torch.__version__} torch.distributed {backend} ({init.split(':')[0]} "
                            f"rendezvous, {where}, {torch.get_num_threads()} thread); "
                            "out of place = copy_ + the in-place call")

    def supports(self, c, dtype, op):
        return ((c != "reduce_scatter" or self.backend == "ouro") and dtype in self.types
                and (c not in REDUCTIONS or op in self.ops))

    def run(self, c, send, recv, count, op, root, in_place):
        dist = self.dist
        if c == "all_reduce":
            if not in_place:
                recv.copy_(send)
            dist.all_reduce(recv, op=self.ops[op])
        elif c == "reduce":
            if not in_place:
                recv.copy_(send)
            dist.reduce(recv, root, op=self.ops[op])
        elif c == "broadcast":
            if self.rank != root:
                dist.broadcast(recv, root)
            else:
                dist.broadcast(send, root)  # the root's tensor is only read
                if not in_place:
                    recv.copy_(send)
        elif c == "reduce_scatter":  # ouro only
            dist._reduce_scatter_base(recv, send, op=self.ops[op])
        elif c == "all_gather":
            if self.backend == "ouro":
                dist._all_gather_base(recv, send)
            elif count:  # gloo's allgather divides by the input size
                dist.all_gather(list(recv.split(count)), send)
        elif c == "alltoall":
            dist.all_to_all_single(recv, send)
        elif c == "sendrecv":
            if self.size == 1:
                recv.copy_(send)
            else:
                works = [dist.irecv(recv, (self.rank - 1) % self.size), dist.isend(send, (self.rank + 1) % self.size)]
                for w in works:
                    w.wait()

    def barrier(self):
        self.dist.barrier()

    def combine(self, value, how):
        t = self.torch.tensor([value], dtype=self.torch.float64)
        self.dist.all_reduce(t, op=self.ops[how])
        return float(t.item())

    def close(self):
        self.dist.barrier()
        self.dist.destroy_process_group()
        if self.rank == 0 and self.store_dir:
            shutil.rmtree(self.store_dir, ignore_errors=True)


# ---------------------------------------------------------------- the sweep (harness.cpp, report.cpp)

def fmt_time(us):
    return "%8.2f" % us if us < 1e5 else "%8.1f" % us if us < 1e7 else "%8.0f" % us


def placement_columns(p):
    if p is None:
        return "  %8s  %6s  %6s  %6s" % ("N/A", "N/A", "N/A", "N/A")
    wrong = "N/A" if p["wrong"] is None else str(p["wrong"])
    return "  %s  %6.2f  %6.2f  %6s" % (fmt_time(p["time_us"]), p["algbw"], p["busbw"], wrong)


def json_placement(p):
    if p is None:
        return "null"
    wrong = "null" if p["wrong"] is None else str(p["wrong"])
    return ('{"time_us": %.6g, "algbw": %.6g, "busbw": %.6g, "wrong": %s}'
            % (p["time_us"], p["algbw"], p["busbw"], wrong))


class Sweep:
    def __init__(self, system, o):
        self.s, self.o, self.n, self.me = system, o, system.size, system.rank
        self.torch = system.torch
        self.rows, self.skipped, self.wrong_total, self.busbw = [], [], 0, []
        self.injected = False

    def say(self, line):
        if self.me == 0:
            print(line, flush=True)

    def run(self):
        o, c, n = self.o, self.o["collective"], self.n
        if not o["all_roots"] and c in ROOTED and o["root"] >= n:
            raise RuntimeError(f"-r {o['root']} is not a rank of this {n}-rank job; give 0..{n - 1} or all")
        sizes = sweep_sizes(o)
        max_bytes = max([layout_for(c, s, DTYPES[t][0], n, self.me)["bytes"] for t in o["dtypes"] for s in sizes])
        u8 = self.torch.uint8
        self.send = self.torch.zeros(max_bytes + GUARD_BYTES, dtype=u8)  # zeroed: every page touched
        self.recv = self.torch.zeros(max_bytes + GUARD_BYTES, dtype=u8)
        step = f"{o['step_factor']}(factor)" if o["step_factor"] > 1 else f"{o['step_bytes']}(bytes)"
        iters = ("budget %.3g s" % o["budget"]) if o["budget"] > 0 else str(o["iters"])
        self.say(f"# torch {c}: nranks {n}  minBytes {o['min_bytes']}  maxBytes {o['max_bytes']}  step: {step}  "
                 f"warmup iters: {o['warmup']}  iters: {iters}  validation: {o['check']}  blocking: 1  "
                 f"average: {AVERAGES[o['average']]}")
        self.say(f"# {self.s.description}")
        self.say(f"# rank 0 on {socket.gethostname()}, pid {os.getpid()}; host buffers\n#")
        head = "# %10s  %12s  %8s  %6s  %6s  %8s  %6s  %6s  %6s  %8s  %6s  %6s  %6s"
        self.say("#%75s%37s" % ("out-of-place", "in-place"))
        self.say(head % ("size", "count", "type", "redop", "root", "time", "algbw", "busbw", "#wrong",
                         "time", "algbw", "busbw", "#wrong"))
        self.say(head % ("(B)", "(elements)", "", "", "", "(us)", "(GB/s)", "(GB/s)", "", "(us)", "(GB/s)",
                         "(GB/s)", ""))
        ops = o["ops"] if c in REDUCTIONS else ["sum"]
        roots = list(range(n)) if o["all_roots"] and c in ROOTED else [o["root"] if c in ROOTED else -1]
        for t in o["dtypes"]:
            for op in ops:
                if not self.s.supports(c, t, op):
                    what = f"torch has no {c} for {t}" + (f" {op}" if c in REDUCTIONS else "")
                    self.skipped.append(what)
                    self.say(f"# skipped: {what}")
                    continue
                for size in sizes:
                    for root in roots:
                        self.row(size, t, op, root)
        ok = self.wrong_total == 0
        self.say(f"# Out of bounds values : {self.wrong_total} {'OK' if ok else 'FAILED'}")
        self.say("# Avg bus bandwidth    : %g \n#" % (sum(self.busbw) / len(self.busbw) if self.busbw else 0.0))
        if self.me == 0 and o["json"]:
            self.write_json()
        return 0 if ok else 1

    def row(self, size, t, op, root):
        o, c = self.o, self.o["collective"]
        lay = layout_for(c, size, DTYPES[t][0], self.n, self.me)
        case = dict(collective=c, dtype=t, op=op, root=max(root, 0), nranks=self.n, rank=self.me, seed=o["seed"])
        row = dict(size=lay["bytes"], count=lay["count"], type=t, redop=op if c in REDUCTIONS else "none",
                   root=root, iters=0, out=None, inp=None)
        if o["out_of_place"]:
            row["out"] = self.placement(lay, case, False, row)
        if o["in_place"] and c in IN_PLACE:
            row["inp"] = self.placement(lay, case, True, row)
        for p in (row["out"], row["inp"]):
            if p is not None:
                self.wrong_total += p["wrong"] or 0
                self.busbw.append(p["busbw"])
        self.rows.append(row)
        self.say("  %10d  %12d  %8s  %6s  %6d" % (row["size"], row["count"], t, row["redop"], root)
                 + placement_columns(row["out"]) + placement_columns(row["inp"]))

    def view(self, base, first_elem, elems, t):
        es = DTYPES[t][0]
        return base[first_elem * es:(first_elem + elems) * es].view(self.s.types[t])

    def placement(self, lay, case, in_place, row):
        o, c, t, es = self.o, case["collective"], case["dtype"], DTYPES[case["dtype"]][0]
        base = self.recv if in_place else self.send
        send = self.view(base, lay["send_off"] if in_place else 0, lay["send"], t)
        recv = self.view(self.recv, lay["recv_off"] if in_place else 0, lay["recv"], t)
        recv_elems = lay["count"] if in_place and c == "reduce_scatter" else lay["recv"]
        guard_at = (max(lay["send"], lay["recv"]) if in_place else lay["recv"]) * es
        guard = self.recv[guard_at:guard_at + GUARD_BYTES]
        call = (c, send, recv, lay["count"], case["op"], case["root"], in_place)

        send.copy_(self.torch.from_numpy(as_type(input_values(case, self.me, 0, lay["send"]), t)))
        self.s.barrier()
        warm_s, warmup = 0.0, max(o["warmup"], 1 if o["budget"] > 0 else 0)
        if warmup:
            t0 = time.perf_counter()
            for _ in range(warmup):
                self.s.run(*call)
            warm_s = (time.perf_counter() - t0) / warmup
        iters = o["iters"]
        if o["budget"] > 0:
            per_op = max(self.s.combine(warm_s, "max"), 1e-9)
            iters = int(min(max(math.ceil(o["budget"] / per_op), BUDGET_MIN_ITERS), o["max_iters"]))
        row["iters"] = iters
        self.s.barrier()
        t0 = time.perf_counter()
        for _ in range(iters):
            self.s.run(*call)
        per_op = (time.perf_counter() - t0) / iters
        how = o["average"]
        seconds = (self.s.combine(per_op if self.me == 0 else 0.0, "sum") if how == 0 else
                   self.s.combine(per_op, "sum") / self.n if how == 1 else
                   self.s.combine(per_op, "min" if how == 2 else "max"))
        algbw, busbw = bandwidths(c, lay["count"], es, self.n, seconds)
        result = dict(time_us=seconds * 1e6, algbw=algbw, busbw=busbw, wrong=None)
        if o["check"] > 0:
            wrong = 0
            for k in range(o["check"]):
                check = dict(case, seed=(case["seed"] + 1 + k) & 0xFFFFFFFF)
                fill = self.torch.from_numpy(np.full(lay["recv"], poison(t)).astype(DTYPES[t][1]))
                if not in_place or c == "all_gather":
                    recv.copy_(fill)
                send.copy_(self.torch.from_numpy(as_type(input_values(check, self.me, 0, lay["send"]), t)))
                guard.fill_(GUARD_BYTE)
                self.s.run(*call)
                out = recv[:recv_elems]
                if (o["inject_error"] and not self.injected and self.me == self.n - 1 and recv_elems > 0
                        and (c != "reduce" or self.me == check["root"])):
                    out[:1].copy_(fill[:1])
                    self.injected = True
                if c != "reduce" or self.me == check["root"]:
                    want = expected(check, lay["count"], recv_elems).view(BITS[es])
                    wrong += int(np.count_nonzero(out.numpy().view(BITS[es]) != want))
                wrong += int(np.count_nonzero(guard.numpy() != GUARD_BYTE))
            result["wrong"] = int(self.s.combine(float(wrong), "sum"))
        return result

    def write_json(self):
        o = self.o
        rows = []
        for r in self.rows:
            rows.append('{"size": %d, "count": %d, "type": "%s", "redop": "%s", "root": %d, "iters": %d, '
                        '"out_of_place": %s, "in_place": %s}'
                        % (r["size"], r["count"], r["type"], r["redop"], r["root"], r["iters"],
                           json_placement(r["out"]), json_placement(r["inp"])))
        with open(o["json"], "w") as f:
            f.write('{"system": "torch", "description": %s, "collective": "%s", "nranks": %d, "blocking": true, '
                    '"buffers": "host", "average": "%s", "warmup_iters": %d, "iters": %d, "budget_s": %s,\n'
                    ' "results": [%s],\n "skipped": [%s],\n "out_of_bounds": %d, "avg_busbw": %.6g, "ok": %s}\n'
                    % (json.dumps(self.s.description), o["collective"], self.n, AVERAGES[o["average"]],
                       o["warmup"], o["iters"], "%g" % o["budget"],
                       "".join((",\n  " if i else "\n  ") + s for i, s in enumerate(rows)),
                       ", ".join(json.dumps(s) for s in self.skipped), self.wrong_total,
                       sum(self.busbw) / len(self.busbw) if self.busbw else 0.0,
                       "true" if self.wrong_total == 0 else "false"))


def main(argv):
    try:
        options = parse_args(argv)
    except UsageError as e:
        print(f"{PROGRAM}: {e}", file=sys.stderr)
        return 2
    if options is None:
        print(__doc__)
        return 0
    rank = None
    try:
        system = Torch(options["backend"])
        rank = system.rank
        rc = Sweep(system, options).run()
        system.close()
        return rc
    except Exception as e:  # a failed call names the rank, like the C++ programs (exit 2)
        where = f"rank {rank}: " if rank is not None else ""
        print(f"{PROGRAM}: {where}{type(e).__name__}: {e}; check that every rank runs the same command "
              "line and that no rank died", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
