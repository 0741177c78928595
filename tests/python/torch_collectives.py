#!/usr/bin/python3
"""One rank of the torch backend's collective test (started by launch.py at world 2 and 3).

Every collective of ProcessGroupOuro on every dtype ouro has, plus bool/int16/complex where they
are supported or refused, against results computed here by hand from the same inputs (each rank's
input is a closed-form function of its rank, so every rank knows every input). Small integer values
keep float results exact, so equality is exact except for AVG in float16/bfloat16. Then: lists of
tensors, non-contiguous tensors, async work with get_future().then(), error messages (BAND refused,
a mismatched call, any-source receive), and DDP against gloo on the same processes.
"""

import time
from datetime import timedelta

from rank_common import PORT, RANK, WORLD, Checks, import_torch, run

import_torch()
import torch  # noqa: E402
import torch.distributed as dist  # noqa: E402

R = dist.ReduceOp
OURO_DTYPES = [torch.int8, torch.uint8, torch.int32, torch.int64, torch.float16, torch.float32, torch.float64,
               torch.bfloat16]
MOVE_ONLY = [torch.bool, torch.int16, torch.complex64]  # moved as bytes; reductions: see reduce_checks
OPS = {"SUM": R.SUM, "PRODUCT": R.PRODUCT, "MIN": R.MIN, "MAX": R.MAX, "AVG": R.AVG}
check = Checks()


def value(rank, n, dtype):
    """Rank `rank`'s input: 1..3 plus the rank, so sums and products of 3 ranks fit int8."""
    x = torch.arange(n, dtype=torch.float64) % 3 + 1 + rank
    if dtype == torch.bool:
        return (x.long() + rank) % 2 == 0
    if dtype.is_complex:
        return torch.complex(x, -x).to(dtype)
    return x.to(dtype)


def expected(op, dtype, n, world=WORLD):
    xs = torch.stack([value(r, n, dtype).to(torch.complex128 if dtype.is_complex else torch.float64)
                      for r in range(world)])
    if op == "SUM":
        out = xs.sum(0)
    elif op == "PRODUCT":
        out = xs.prod(0)
    elif op == "MIN":
        out = xs.min(0).values
    elif op == "MAX":
        out = xs.max(0).values
    else:
        out = xs.sum(0) / world
        if not dtype.is_floating_point and not dtype.is_complex:
            out = torch.trunc(out)
    return out.to(dtype)


def same(got, want, dtype, op=""):
    if dtype in (torch.float16, torch.bfloat16) and op == "AVG":
        return torch.allclose(got.double(), want.double(), rtol=1e-2)
    return torch.equal(got, want)


def allreduce_checks():
    for dtype in OURO_DTYPES:
        for name, op in OPS.items():
            t = value(RANK, 10, dtype)
            dist.all_reduce(t, op=op)
            check(same(t, expected(name, dtype, 10), dtype, name), f"all_reduce {name} {dtype}",
                  f"got {t.tolist()}, want {expected(name, dtype, 10).tolist()}")
    # bool: MAX/MIN, SUM as OR, PRODUCT as AND; complex: SUM/AVG as float pairs.
    for name, want in (("MAX", "MAX"), ("MIN", "MIN"), ("SUM", "MAX"), ("PRODUCT", "MIN")):
        t = value(RANK, 6, torch.bool)
        dist.all_reduce(t, op=OPS[name])
        check(torch.equal(t, expected(want, torch.bool, 6)), f"all_reduce {name} bool", str(t.tolist()))
    for dtype in (torch.complex64, torch.complex128):
        for name in ("SUM", "AVG"):
            t = value(RANK, 5, dtype)
            dist.all_reduce(t, op=OPS[name])
            check(torch.allclose(t, expected(name, dtype, 5)), f"all_reduce {name} {dtype}", str(t.tolist()))
    check.raises(lambda: dist.all_reduce(value(RANK, 3, torch.complex64), op=R.MAX), ["complex"],
                 "complex MAX refused")
    check.raises(lambda: dist.all_reduce(value(RANK, 3, torch.int16)), ["int16"], "int16 SUM refused, dtype named")
    check.raises(lambda: dist.all_reduce(value(RANK, 3, torch.bool), op=R.AVG), ["bool", "AVG"], "bool AVG refused")
    for op in ("BAND", "BOR", "BXOR"):
        check.raises(lambda: dist.all_reduce(value(RANK, 3, torch.int32), op=getattr(R, op)), [op, "not supported"],
                     f"{op} refused")
    # Non-contiguous: every other column of a 4x6 matrix; the columns in between stay as they were.
    m = torch.full((4, 6), -1.0)
    m[:, ::2] = value(RANK, 12, torch.float32).view(4, 3)
    dist.all_reduce(m[:, ::2])
    check(torch.equal(m[:, ::2], expected("SUM", torch.float32, 12).view(4, 3)) and bool((m[:, 1::2] == -1).all()),
          "all_reduce of a non-contiguous view", str(m))
    # Several tensors in one call reduce together (gloo): every one gets the sum over ranks and list.
    a, b = value(RANK, 7, torch.float64), value(RANK, 7, torch.float64) * 10
    dist.distributed_c10d._get_default_group().allreduce([a, b]).wait()
    want = expected("SUM", torch.float64, 7) * 11
    check(torch.equal(a, want) and torch.equal(b, want), "allreduce of a list of 2 tensors", f"{a} {b}")
    a, b = value(RANK, 4, torch.int32), value(RANK, 4, torch.int32)
    opts = dist.AllreduceOptions()
    opts.reduceOp = R.AVG
    dist.distributed_c10d._get_default_group().allreduce([a, b], opts).wait()
    check(torch.equal(a, expected("AVG", torch.int32, 4)) and torch.equal(b, a), "AVG of a list of int32 tensors",
          str(a.tolist()))
    parts = [value(RANK, 3, torch.float32), value(RANK, 5, torch.float32).view(5, 1)]
    dist.all_reduce_coalesced(parts)
    check(torch.equal(parts[0], expected("SUM", torch.float32, 3)) and
          torch.equal(parts[1], expected("SUM", torch.float32, 5).view(5, 1)), "all_reduce_coalesced")


def movement_checks():
    root = WORLD - 1
    for dtype in OURO_DTYPES + MOVE_ONLY:
        t = value(RANK, 9, dtype)
        dist.broadcast(t, src=root)
        check(torch.equal(t, value(root, 9, dtype)), f"broadcast {dtype}")
        outs = [torch.zeros(9, dtype=dtype) for _ in range(WORLD)]
        dist.all_gather(outs, value(RANK, 9, dtype))
        check(all(torch.equal(outs[r], value(r, 9, dtype)) for r in range(WORLD)), f"all_gather {dtype}")
    out = torch.zeros(WORLD * 4, dtype=torch.bfloat16)
    dist._all_gather_base(out, value(RANK, 4, torch.bfloat16))
    check(torch.equal(out, torch.cat([value(r, 4, torch.bfloat16) for r in range(WORLD)])), "_all_gather_base")
    inputs = [value(RANK, 2, torch.int64), value(RANK, 6, torch.int64).view(2, 3)]
    lists = [[torch.zeros(2, dtype=torch.int64), torch.zeros(2, 3, dtype=torch.int64)] for _ in range(WORLD)]
    dist.all_gather_coalesced(lists, inputs)
    check(all(torch.equal(lists[r][0], value(r, 2, torch.int64)) and
              torch.equal(lists[r][1], value(r, 6, torch.int64).view(2, 3)) for r in range(WORLD)),
          "all_gather_coalesced")
    # gather to the last rank, scatter from it; a non-contiguous gather destination at the root.
    for dtype in (torch.float32, torch.int16):
        gl = [torch.zeros(5, 2, dtype=dtype).t() for _ in range(WORLD)] if RANK == root else None
        dist.gather(value(RANK, 10, dtype).view(2, 5), gather_list=gl, dst=root)
        if RANK == root:
            check(all(torch.equal(gl[r], value(r, 10, dtype).view(2, 5)) for r in range(WORLD)), f"gather {dtype}")
        out = torch.zeros(6, dtype=dtype)
        sl = [value(r, 6, dtype) * 2 for r in range(WORLD)] if RANK == root else None
        dist.scatter(out, scatter_list=sl, src=root)
        check(torch.equal(out, value(RANK, 6, dtype) * 2), f"scatter {dtype}")
    # reduce: only the root's tensor changes.
    for dtype in (torch.float32, torch.int64):
        t = value(RANK, 8, dtype)
        dist.reduce(t, dst=1 % WORLD, op=R.MAX)
        want = expected("MAX", dtype, 8) if RANK == 1 % WORLD else value(RANK, 8, dtype)
        check(torch.equal(t, want), f"reduce MAX {dtype} (root 1)", str(t.tolist()))
    # reduce_scatter and _reduce_scatter_base: rank r gets block r of the sum.
    for dtype in (torch.float32, torch.bfloat16, torch.uint8):
        full = value(RANK, 4 * WORLD, dtype)
        out = torch.zeros(4, dtype=dtype)
        dist.reduce_scatter(out, list(full.chunk(WORLD)))
        want = expected("SUM", dtype, 4 * WORLD).chunk(WORLD)[RANK]
        check(torch.equal(out, want), f"reduce_scatter {dtype}", f"{out.tolist()} vs {want.tolist()}")
        out2 = torch.zeros(4, dtype=dtype)
        dist._reduce_scatter_base(out2, full)
        check(torch.equal(out2, want), f"_reduce_scatter_base {dtype}")


def alltoall_checks():
    # Equal splits: row block p of rank r carries 100*r + p.
    inp = torch.tensor([[100 * RANK + p] * 3 for p in range(WORLD)], dtype=torch.float32)
    out = torch.zeros_like(inp)
    dist.all_to_all_single(out, inp)
    check(torch.equal(out[:, 0], torch.tensor([100 * r + RANK for r in range(WORLD)], dtype=torch.float32)),
          "all_to_all_single equal splits", str(out))
    # Uneven: rank r sends r + p + 1 rows to rank p.
    rows = lambda r, p: r + p + 1  # noqa: E731
    in_splits = [rows(RANK, p) for p in range(WORLD)]
    out_splits = [rows(q, RANK) for q in range(WORLD)]
    inp = torch.cat([torch.full((rows(RANK, p), 2), 100 * RANK + p, dtype=torch.int32) for p in range(WORLD)])
    out = torch.zeros(sum(out_splits), 2, dtype=torch.int32)
    dist.all_to_all_single(out, inp, output_split_sizes=out_splits, input_split_sizes=in_splits)
    want = torch.cat([torch.full((rows(q, RANK), 2), 100 * q + RANK, dtype=torch.int32) for q in range(WORLD)])
    check(torch.equal(out, want), "all_to_all_single uneven splits", str(out.tolist()))
    ins = [torch.full((p + 1,), 10 * RANK + p, dtype=torch.complex64) for p in range(WORLD)]
    outs = [torch.zeros(RANK + 1, dtype=torch.complex64) for _ in range(WORLD)]
    dist.all_to_all(outs, ins)
    check(all(torch.equal(outs[q], torch.full((RANK + 1,), 10 * q + RANK, dtype=torch.complex64))
              for q in range(WORLD)), "all_to_all of lists with uneven sizes")


def p2p_checks():
    nxt, prev = (RANK + 1) % WORLD, (RANK - 1) % WORLD
    send = value(RANK, 6, torch.float16)
    recv = torch.zeros(3, 4, dtype=torch.float16)[:, ::2]  # non-contiguous receive buffer
    works = [dist.isend(send, nxt), dist.irecv(recv, prev)]
    for w in works:
        w.wait()
    check(torch.equal(recv.reshape(-1), value(prev, 6, torch.float16)), "isend/irecv ring, non-contiguous recv")
    if RANK == 0:
        dist.send(value(0, 4, torch.int16), 1)
    elif RANK == 1:
        t = torch.zeros(4, dtype=torch.int16)
        dist.recv(t, 0)
        check(torch.equal(t, value(0, 4, torch.int16)), "send/recv int16")
    # Without src (ouroRecvAny): rank 0 takes one send from every other rank by recv and one by
    # irecv, in whatever order they come, and learns each sender.
    if RANK == 0:
        seen = []
        for k in range(2 * (WORLD - 1)):
            t = torch.zeros(3)
            if k % 2 == 0:
                src = dist.recv(t)
            else:
                work = dist.irecv(t)
                work.wait()
                src = work._source_rank()
            check(torch.equal(t, torch.full((3,), float(src))), f"recv without src: the data of rank {src}")
            seen.append(src)
        check(sorted(seen) == sorted(list(range(1, WORLD)) * 2), "recv without src: every rank twice", str(seen))
    else:
        dist.send(torch.full((3,), float(RANK)), 0)
        dist.send(torch.full((3,), float(RANK)), 0)


def async_checks():
    t = value(RANK, 1000, torch.float32)
    work = dist.all_reduce(t, async_op=True)
    fut = work.get_future().then(lambda f: f.value()[0] * 2)
    doubled = fut.wait()
    work.wait()
    check(work.is_completed(), "work completed after wait")
    check(torch.equal(t, expected("SUM", torch.float32, 1000)), "async all_reduce result")
    check(torch.equal(doubled, t * 2), "get_future().then() sees the output tensor")
    # Many in flight at once, completed in any order of waiting.
    ts = [value(RANK, 100, torch.int64) * (i + 1) for i in range(8)]
    ws = [dist.all_reduce(x, async_op=True) for x in ts]
    for w in reversed(ws):
        w.wait()
    check(all(torch.equal(x, expected("SUM", torch.int64, 100) * (i + 1)) for i, x in enumerate(ts)),
          "8 async all_reduces in flight")
    # A barrier lets no rank out before every rank is in: rank r arrives r * 50 ms late, and each
    # rank's exit time (CLOCK_MONOTONIC, one clock for every process of a host) must come after
    # every rank's arrival. Checked for the three ways in.
    group = dist.distributed_c10d._get_default_group()
    ways = {"barrier": lambda: dist.barrier(),
            "barrier(async_op=True)": lambda: dist.barrier(async_op=True).wait(),
            # torch 1.13 sends dist.monitored_barrier to gloo only; the group's own method reaches ouroBarrier.
            "the group's monitored_barrier": lambda: group.monitored_barrier(timedelta(seconds=30))}
    for name, enter in ways.items():
        time.sleep(0.05 * RANK)
        arrived = time.monotonic()
        enter()
        left = time.monotonic()
        times = torch.tensor([arrived, left], dtype=torch.float64)
        everyone = [torch.zeros(2, dtype=torch.float64) for _ in range(WORLD)]
        dist.all_gather(everyone, times)
        last_arrival = max(float(t[0]) for t in everyone)
        check(all(float(t[1]) >= last_arrival for t in everyone),
              f"{name}: a rank left before the last one arrived ({[tuple(map(float, t)) for t in everyone]})")


def error_checks():
    # Ranks that disagree: ouro's own message (rank, call, the other side), as a RuntimeError.
    n = 4 if RANK == 0 else 5
    text = check.raises(lambda: dist.all_reduce(torch.ones(n)), ["disagree"], "mismatched all_reduce surfaces")
    check(f"rank {RANK}" in text and "allreduce" in text, "message names the rank and the call", text)
    t = torch.ones(3)
    dist.all_reduce(t)  # a disagreement leaves the communicator usable
    check(torch.equal(t, torch.full((3,), float(WORLD))), "communicator usable after a disagreement")
    # The same failure through an async work's future.
    fut = dist.all_reduce(torch.ones(n), async_op=True).get_future()
    check.raises(fut.wait, ["disagree"], "mismatch surfaces through get_future()")


def ddp_checks():
    # The same tiny model trained 3 steps under DDP on ouro and on gloo gives the same weights.
    gloo = dist.new_group(backend="gloo")
    results = []
    for group in (None, gloo):
        torch.manual_seed(0)
        model = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(), torch.nn.Linear(16, 2))
        ddp = torch.nn.parallel.DistributedDataParallel(model, process_group=group, bucket_cap_mb=0.0005)
        opt = torch.optim.SGD(ddp.parameters(), lr=0.1)
        gen = torch.Generator().manual_seed(RANK)
        for _ in range(3):
            opt.zero_grad()
            ddp(torch.randn(4, 8, generator=gen)).pow(2).sum().backward()
            opt.step()
        results.append([p.detach().clone() for p in model.parameters()])
    diff = max((a - b).abs().max().item() for a, b in zip(*results))
    check(diff < 1e-6, "DDP over ouro matches DDP over gloo", f"largest weight difference {diff}")


def main():
    dist.init_process_group("ouro", init_method=f"tcp://127.0.0.1:{PORT}", rank=RANK, world_size=WORLD,
                            timeout=timedelta(seconds=60))
    check(dist.get_backend() == "ouro" or str(dist.get_backend()).lower() == "ouro", "backend is ouro",
          str(dist.get_backend()))
    allreduce_checks()
    movement_checks()
    alltoall_checks()
    p2p_checks()
    async_checks()
    error_checks()
    ddp_checks()
    dist.destroy_process_group()
    check.done()


if __name__ == "__main__":
    run(main)
