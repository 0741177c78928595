#!/usr/bin/python3
"""One rank of the ouro.Comm test, started by ouro-run (-n 2 and -n 3): every method on every
numpy dtype it maps, against hand-computed results (inputs are closed-form in the rank), plus
refusals with their messages, split, and errors surfacing as ouro.Error. Needs numpy only."""

import sys

import numpy as np

import ouro

TYPES = [np.int8, np.uint8, np.int32, np.uint32, np.int64, np.uint64, np.float16, np.float32, np.float64]
failures = 0
count = 0


def check(cond, name, detail=""):
    global count
    if not cond:
        print(f"FAIL rank {comm.rank}: {name} {detail}", flush=True)
        sys.exit(1)
    count += 1


def value(rank, n, dtype):
    return (np.arange(n) % 3 + 1 + rank).astype(dtype)


def ranks_stack(n, dtype):
    return np.stack([value(r, n, dtype).astype(np.float64) for r in range(comm.size)])


def refused(fn, words, name):
    try:
        fn()
    except (TypeError, ValueError, ouro.Error) as e:
        check(all(w in str(e) for w in words), name, f"message lacks {words}: {e}")
        return str(e)
    check(False, name, "nothing was raised")


comm = ouro.Comm.from_env()
n, r = comm.size, comm.rank
check(n >= 2 and 0 <= r < n, "rank and size from the environment")
# ouro.Comm's numpy mapping comes from core/dtype.hpp's table by name: every type but the ones numpy
# lacks (given as bits) maps, to a numpy dtype of the table's size, and TYPES below covers them all.
BITS_ONLY = {"bfloat16": 2, "float8e4m3": 1, "float8e5m2": 1}
table = ouro._ouro.dtypes()
check([name for _, name, _ in table if name not in BITS_ONLY] == [np.dtype(t).name for t in TYPES], "dtype table names")
check(all(np.dtype(name).itemsize == size for _, name, size in table if name not in BITS_ONLY), "dtype table sizes")
check({name: size for _, name, size in table if name in BITS_ONLY} == BITS_ONLY, "bits-only dtypes and sizes")
check([name for _, name in ouro._ouro.ops()] == ["sum", "prod", "max", "min", "avg"], "op table names")
for dtype in TYPES:
    stack = ranks_stack(10, dtype)
    for op, want in (("sum", stack.sum(0)), ("prod", stack.prod(0)), ("max", stack.max(0)), ("min", stack.min(0)),
                     ("avg", np.trunc(stack.sum(0) / n) if np.dtype(dtype).kind in "iu" else stack.sum(0) / n)):
        got = comm.allreduce(value(r, 10, dtype), op=op)
        ok = np.allclose(got.astype(np.float64), want, rtol=1e-3) if op == "avg" else np.array_equal(got, want.astype(dtype))
        check(got.dtype == dtype and ok, f"allreduce {op} {np.dtype(dtype)}", f"{got} vs {want}")
    full = value(r, 4 * n, dtype)
    got = comm.reduce_scatter(full.reshape(n * 2, 2))
    check(np.array_equal(got, ranks_stack(4 * n, dtype).sum(0).astype(dtype).reshape(n * 2, 2)[2 * r:2 * r + 2]),
          f"reduce_scatter {np.dtype(dtype)}")
    g = comm.allgather(value(r, 5, dtype))
    check(g.shape == (n, 5) and all(np.array_equal(g[q], value(q, 5, dtype)) for q in range(n)), "allgather")
    b = value(r, 6, dtype)
    comm.broadcast(b, root=n - 1)
    check(np.array_equal(b, value(n - 1, 6, dtype)), "broadcast")
    red = comm.reduce(value(r, 6, dtype), op="max", root=1)
    check((red is None) == (r != 1), "reduce returns at the root only")
    if r == 1:
        check(np.array_equal(red, ranks_stack(6, dtype).max(0).astype(dtype)), "reduce max at the root")

# bool (max/min, sum as OR), complex (sum), bfloat16 bits, byte-moved dtypes, out= and views.
bits = (np.arange(6) + r) % 2 == 0
check(np.array_equal(comm.allreduce(bits, op="sum"), np.ones(6, bool) if n > 1 else bits), "bool sum is OR")
c = (np.arange(4) + 1j * r).astype(np.complex64)
check(np.allclose(comm.allreduce(c), sum((np.arange(4) + 1j * q).astype(np.complex64) for q in range(n))),
      "complex64 sum")
bf = (np.full(3, 1.0 + r, np.float32).view(np.uint32) >> 16).astype(np.uint16)  # 1+r in bfloat16 bits
got = comm.allreduce(bf, dtype="bfloat16")
check(np.array_equal((got.astype(np.uint32) << 16).view(np.float32), np.full(3, n * (n + 1) / 2, np.float32)),
      "bfloat16 given as uint16 bits")
# fp8 as uint8 bits: E4M3 1+r (bits 0x38, 0x40, 0x44, ...) sums exactly for these world sizes; E5M2
# 57344 saturates: twice the largest value is the largest value, not inf. Avg in E4M3 rounds once.
e4m3 = {1.0: 0x38, 2.0: 0x40, 3.0: 0x44, 4.0: 0x48, 6.0: 0x4c, 10.0: 0x52}
got = comm.allreduce(np.full(3, e4m3[1.0 + r], np.uint8), dtype="float8e4m3")
check(got.dtype == np.uint8 and np.array_equal(got, np.full(3, e4m3[n * (n + 1) / 2], np.uint8)),
      "float8e4m3 sum given as uint8 bits", f"{got}")
got = comm.allreduce(np.full(2, 0x7b, np.uint8), dtype="float8e5m2")
check(np.array_equal(got, np.full(2, 0x7b, np.uint8)), "float8e5m2 sum saturates at 57344", f"{got}")
got = comm.allreduce(np.full(2, 0x7f if r == 0 else 0x38, np.uint8), op="max", dtype="float8e4m3")
check(np.array_equal(got, np.full(2, 0x7f, np.uint8)), "float8e4m3 max propagates its NaN", f"{got}")
refused(lambda: comm.allreduce(np.ones(3, np.uint16), dtype="float8e4m3"), ["float8e4m3", "uint8"],
        "fp8 dtype on a 2-byte array refused")
refused(lambda: comm.allreduce(np.ones(3, np.uint8), dtype="float8"), ["float8e4m3", "float8e5m2"],
        "unknown bits-only dtype refused, the known ones named")
i16 = np.arange(4, dtype=np.int16) + r
comm.broadcast(i16, root=0)
check(np.array_equal(i16, np.arange(4, dtype=np.int16)), "int16 broadcast as bytes")
refused(lambda: comm.allreduce(np.ones(3, np.int16)), ["int16"], "int16 reduction refused, dtype named")
refused(lambda: comm.allreduce(np.ones(3, np.int32), op="band"), ["band"], "bitwise op refused")
out = np.zeros((4, 6), np.float32)
comm.allreduce(np.ones(12, np.float32).reshape(4, 3) * (r + 1), out=out[:, ::2])
check(np.array_equal(out[:, ::2], np.full((4, 3), n * (n + 1) / 2)) and not out[:, 1::2].any(), "out= a strided view")
a2a = np.array([[100 * r + p] * 2 for p in range(n)], np.int64)
got = comm.alltoall(a2a)
check(np.array_equal(got[:, 0], [100 * q + r for q in range(n)]), "alltoall")
# Pairs (0,1), (2,3), ...: even rank r sends to r+1. With an odd number of ranks the last one has
# no partner and sends nothing (a send to rank 0 would never be received, and the recv_any round
# below would take it as that rank's).
if r % 2 == 0 and r + 1 < n:
    comm.send(value(r, 3, np.float64), r + 1)
if r % 2 == 1:
    got = comm.recv(np.zeros(3), r - 1)
    check(np.array_equal(got, value(r - 1, 3, np.float64)), "send/recv")
comm.barrier()
# recv_any: rank 0 takes one send from every other rank, whichever comes first.
if r == 0:
    senders = []
    for _ in range(n - 1):
        got, src = comm.recv_any(np.zeros(3))
        check(np.array_equal(got, value(src, 3, np.float64)), f"recv_any: the data of rank {src}")
        senders.append(src)
    check(sorted(senders) == list(range(1, n)), "recv_any: every other rank once", str(senders))
else:
    comm.send(value(r, 3, np.float64), 0)
comm.barrier()

# Errors: a mismatched call raises ouro.Error (a RuntimeError) with ouro's message.
try:
    comm.allreduce(np.ones(4 if r == 0 else 5, np.float32))
    check(False, "mismatched allreduce raises")
except ouro.Error as e:
    check(isinstance(e, RuntimeError) and "disagree" in str(e) and f"rank {r}" in str(e), "mismatch message", str(e))

# Diagnostics (issue #34): replicas compared by hash; the flight recorder's record.
same = np.arange(1000, dtype=np.float32)
comm.check_replicas(same)
check(True, "check_replicas passes on equal copies")
odd = same.copy()
if r == n - 1:
    odd.view(np.uint32)[500] ^= 1 << 7  # one bit, on the last rank
try:
    comm.check_replicas(odd)
    check(n == 1, "check_replicas raises on a flipped bit")
except ouro.ReplicaMismatch as e:
    verdict = "differs from the majority" if n > 2 else "no copy has a majority"
    check(isinstance(e, ouro.Error) and f"rank {n - 1} (hash" in str(e) and verdict in str(e),
          "check_replicas names the rank that differs", str(e))
record = comm.dump_trace()
calls = record["communicators"][0]["calls"]
check(record["format"] == "ouro-trace" and record["communicators"][0]["size"] == n, "dump_trace's document")
check(calls[-1]["collective"] == "allgather" and calls[-1]["count"] == 8, "the last call recorded is the check's",
      str(calls[-1]))

# split: even and odd ranks.
sub = comm.split(r % 2, key=-r)
check(sub.size == len(range(r % 2, n, 2)), "split size")
check(sub.rank == sorted(range(r % 2, n, 2), reverse=True).index(r), "split orders by key")
check(sub.allreduce(np.array([r], np.int32))[0] == sum(range(r % 2, n, 2)), "allreduce in a split")
sub.close()
check(comm.split(None) is None, "split with color None gives None")
comm.close()
refused(lambda: comm.barrier(), ["closed"], "a closed Comm says so")
print(f"ok {count} checks", flush=True)
