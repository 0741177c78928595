#!/usr/bin/env python3
"""PyTorch's own NCCL backend on ouro's libnccl.so.2, on a machine with a GPU (tools/gpu-check-nccl.sh).

    torch_nccl_check.py --libnccl build/nccl/libnccl.so.2 --world 2 [--part all|collectives|ddp|graph]

Starts WORLD processes on GPU 0 (ouro lets several ranks share a GPU; NVIDIA's NCCL refuses), each
with ouro's library in LD_PRELOAD, and in each:
  - prints the libnccl files the process mapped and torch.cuda.nccl.version(), and fails unless
    ouro's library is the one mapped (no run can silently use NVIDIA's);
  - collectives: all_reduce (sum, avg, max; int64, float32, float16, bfloat16), reduce_scatter_tensor,
    all_gather_into_tensor, broadcast, all_to_all_single, batch_isend_irecv and barrier. Integers and
    data movement are checked exactly; float reductions bit for bit against ouro's host path (the same
    library's ncclAllReduce/ncclReduceScatter on host memory, through ctypes, same inputs);
  - ddp: 50 steps of a small GPT under DistributedDataParallel with bucket_cap_mb 1 and 25; the
    SHA-256 of the weights must be the same on every rank and for both bucket sizes (NCCL does not
    promise that: its bits change with the bucket);
  - graph: an all_reduce captured in a CUDA graph and replayed 1,000 times, each result checked.
Exit 0 when every check passed, 77 without a GPU or torch.
"""
import argparse
import ctypes
import hashlib
import os
import socket
import subprocess
import sys


def parse():
    p = argparse.ArgumentParser()
    p.add_argument("--libnccl", required=True)
    p.add_argument("--world", type=int, default=2)
    p.add_argument("--part", default="all")
    p.add_argument("--rank", type=int, default=-1, help=argparse.SUPPRESS)
    return p.parse_args()


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def launch(args):
    lib = os.path.abspath(args.libnccl)
    port = free_port()
    procs = []
    for r in range(args.world):
        env = dict(os.environ, LD_PRELOAD=lib, RANK=str(r), WORLD_SIZE=str(args.world), LOCAL_RANK=str(r),
                   MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port), CUBLAS_WORKSPACE_CONFIG=":4096:8")
        procs.append(subprocess.Popen([sys.executable, __file__, "--libnccl", lib, "--world", str(args.world),
                                       "--part", args.part, "--rank", str(r)], env=env))
    codes = [p.wait(timeout=600) for p in procs]
    print(f"torch_nccl_check: world {args.world}, part {args.part}: exit codes {codes}")
    return 0 if all(c == 0 for c in codes) else 1


# ---- one rank ----

failures = []


def check(ok, what):
    if not ok:
        failures.append(what)
        print(f"rank {RANK}: FAILED: {what}", flush=True)


class HostNccl:
    """The same libnccl.so.2 on host memory (ouro's host path), through ctypes: the reference."""

    def __init__(self, lib_path, dist, rank, world):
        self.lib = ctypes.CDLL(lib_path)
        uid = ctypes.create_string_buffer(128)
        if rank == 0:
            assert self.lib.ncclGetUniqueId(uid) == 0
        box = [bytes(uid.raw) if rank == 0 else None]
        dist.broadcast_object_list(box, src=0)
        uid = ctypes.create_string_buffer(box[0], 128)
        self.comm = ctypes.c_void_p()
        # ncclUniqueId is passed by value: a 128-byte struct.
        Id = ctypes.c_char * 128
        self.lib.ncclCommInitRank.argtypes = [ctypes.POINTER(ctypes.c_void_p), ctypes.c_int, Id, ctypes.c_int]
        rc = self.lib.ncclCommInitRank(ctypes.byref(self.comm), world, Id.from_buffer_copy(uid.raw), rank)
        assert rc == 0, f"host ncclCommInitRank: {rc}"

    def run(self, name, send, recv, count, dtype, op):
        fn = getattr(self.lib, name)
        rc = fn(ctypes.c_void_p(send.data_ptr()), ctypes.c_void_p(recv.data_ptr()), ctypes.c_size_t(count),
                ctypes.c_int(dtype), ctypes.c_int(op), self.comm, ctypes.c_void_p(0))
        assert rc == 0, f"host {name}: {rc}"


NCCL_TYPES = {"int64": 4, "float16": 6, "float32": 7, "bfloat16": 9}
NCCL_OPS = {"sum": 0, "max": 2, "avg": 4}


def collectives(torch, dist, rank, world, host):
    dev = torch.device("cuda", 0)
    dtypes = {"int64": torch.int64, "float16": torch.float16, "float32": torch.float32, "bfloat16": torch.bfloat16}
    ops = {"sum": dist.ReduceOp.SUM, "max": dist.ReduceOp.MAX, "avg": dist.ReduceOp.AVG}
    n = 4099  # not a multiple of anything

    def inputs(r, dtype, count=n):
        g = torch.Generator().manual_seed(1000 + r)
        if dtype == torch.int64:
            return torch.randint(-50, 50, (count,), generator=g, dtype=torch.int64)
        return (torch.randn(count, generator=g) * 4).to(dtype)

    for tname, dtype in dtypes.items():
        for oname, op in ops.items():
            if oname == "avg" and dtype == torch.int64:
                continue  # torch refuses AVG on integers
            x = inputs(rank, dtype)
            gpu = x.to(dev)
            dist.all_reduce(gpu, op=op)
            ref = torch.empty_like(x)
            host.run("ncclAllReduce", x, ref, n, NCCL_TYPES[tname], NCCL_OPS[oname])
            got = gpu.cpu()
            check(got.view(torch.uint8).equal(ref.view(torch.uint8)) if dtype != torch.int64 else got.equal(ref),
                  f"all_reduce {tname} {oname}: device result differs from ouro's host path")
            if dtype == torch.int64:
                want = sum(inputs(r, dtype) for r in range(world)) if oname == "sum" else \
                    torch.stack([inputs(r, dtype) for r in range(world)]).max(0).values
                check(got.equal(want), f"all_reduce {tname} {oname}: not the exact result")
        # reduce_scatter_tensor: block r of the sum to rank r.
        x = inputs(rank, dtype, n * world)
        out = torch.empty(n, dtype=dtype, device=dev)
        dist.reduce_scatter_tensor(out, x.to(dev))
        ref = torch.empty(n, dtype=dtype)
        host.run("ncclReduceScatter", x, ref, n, NCCL_TYPES[tname], 0)
        check(out.cpu().view(torch.uint8).equal(ref.view(torch.uint8)),
              f"reduce_scatter_tensor {tname}: device result differs from ouro's host path")
        # all_gather_into_tensor: exact.
        out = torch.empty(n * world, dtype=dtype, device=dev)
        dist.all_gather_into_tensor(out, inputs(rank, dtype).to(dev))
        check(out.cpu().equal(torch.cat([inputs(r, dtype) for r in range(world)])), f"all_gather_into_tensor {tname}")
    # broadcast from the last rank; all_to_all_single; a ring of batch_isend_irecv; barrier.
    root = world - 1
    b = (inputs(root, torch.float32) if rank == root else torch.zeros(n)).to(dev)
    dist.broadcast(b, src=root)
    check(b.cpu().equal(inputs(root, torch.float32)), "broadcast")
    send = torch.arange(world * 16, dtype=torch.int64, device=dev) + 1000 * rank
    recv = torch.empty_like(send)
    dist.all_to_all_single(recv, send)
    want = torch.cat([torch.arange(rank * 16, rank * 16 + 16, dtype=torch.int64) + 1000 * r for r in range(world)])
    check(recv.cpu().equal(want), "all_to_all_single")
    nxt, prv = (rank + 1) % world, (rank - 1) % world
    out = torch.full((n,), float(rank), device=dev)
    inn = torch.empty(n, device=dev)
    for req in dist.batch_isend_irecv([dist.P2POp(dist.isend, out, nxt), dist.P2POp(dist.irecv, inn, prv)]):
        req.wait()
    check(inn.cpu().equal(torch.full((n,), float(prv))), "batch_isend_irecv ring")
    dist.barrier()


def ddp(torch, dist, rank, world):
    import torch.nn as nn
    torch.use_deterministic_algorithms(True)
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    dev = torch.device("cuda", 0)

    class Block(nn.Module):
        def __init__(self, d, h):
            super().__init__()
            self.h = h
            self.ln1, self.ln2 = nn.LayerNorm(d), nn.LayerNorm(d)
            self.qkv, self.proj = nn.Linear(d, 3 * d), nn.Linear(d, d)
            self.mlp = nn.Sequential(nn.Linear(d, 4 * d), nn.GELU(approximate="tanh"), nn.Linear(4 * d, d))

        def forward(self, x):
            B, T, D = x.shape
            q, k, v = self.qkv(self.ln1(x)).split(D, dim=2)
            q, k, v = (t.view(B, T, self.h, D // self.h).transpose(1, 2) for t in (q, k, v))
            att = (q @ k.transpose(-2, -1)) / (D // self.h) ** 0.5
            att = att.masked_fill(torch.triu(torch.ones(T, T, device=x.device, dtype=torch.bool), 1), float("-inf"))
            y = (att.softmax(-1) @ v).transpose(1, 2).reshape(B, T, D)
            x = x + self.proj(y)
            return x + self.mlp(self.ln2(x))

    class GPT(nn.Module):
        def __init__(self, vocab=96, d=64, layers=2, heads=4, ctx=32):
            super().__init__()
            self.wte, self.wpe = nn.Embedding(vocab, d), nn.Embedding(ctx, d)
            self.blocks = nn.Sequential(*[Block(d, heads) for _ in range(layers)])
            self.lnf, self.head = nn.LayerNorm(d), nn.Linear(d, vocab, bias=False)

        def forward(self, idx):
            x = self.wte(idx) + self.wpe(torch.arange(idx.shape[1], device=idx.device))
            return self.head(self.lnf(self.blocks(x)))

    digests = {}
    for bucket in (1, 25):
        torch.manual_seed(0)
        model = GPT().to(dev)
        model = nn.parallel.DistributedDataParallel(model, device_ids=[0], bucket_cap_mb=bucket)
        opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
        g = torch.Generator().manual_seed(100 + rank)  # each rank its own data
        for _ in range(50):
            idx = torch.randint(0, 96, (8, 33), generator=g).to(dev)
            logits = model(idx[:, :-1])
            loss = nn.functional.cross_entropy(logits.reshape(-1, 96), idx[:, 1:].reshape(-1))
            opt.zero_grad()
            loss.backward()
            opt.step()
        h = hashlib.sha256()
        for p in model.module.parameters():
            h.update(p.detach().cpu().numpy().tobytes())
        digests[bucket] = h.hexdigest()
    everyone = [None] * world
    dist.all_gather_object(everyone, digests)
    if rank == 0:
        for r, d in enumerate(everyone):
            print(f"ddp: rank {r}: sha256 bucket_cap_mb=1 {d[1][:16]}... bucket_cap_mb=25 {d[25][:16]}...")
    check(all(d == everyone[0] for d in everyone), "ddp: every rank has the same weights")
    check(digests[1] == digests[25], "ddp: bucket_cap_mb 1 and 25 give the same weights")


def graph(torch, dist, rank, world):
    dev = torch.device("cuda", 0)
    x = torch.zeros(1024, device=dev)
    y = torch.zeros(1024, device=dev)
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):  # warm-up outside capture: the communicator sets up its device state
        for _ in range(3):
            y.copy_(x)
            dist.all_reduce(y)
    torch.cuda.current_stream().wait_stream(s)
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        y.copy_(x)
        dist.all_reduce(y)
    bad = 0
    for i in range(1000):
        x.fill_(float(rank + 1 + i))
        g.replay()
        want = float(sum(r + 1 + i for r in range(world)))
        if not bool((y == want).all()):
            bad += 1
    torch.cuda.synchronize()
    check(bad == 0, f"graph: {bad} of 1000 replays gave a wrong all_reduce")


def rank_main(args):
    global RANK
    RANK = args.rank
    try:
        import torch
        import torch.distributed as dist
    except ImportError:
        print("skipped: no torch")
        return 77
    if not torch.cuda.is_available():
        print("skipped: no GPU")
        return 77
    lib = os.path.abspath(args.libnccl)
    mapped = sorted({l.split()[-1] for l in open("/proc/self/maps") if "libnccl" in l})
    print(f"rank {RANK}: libnccl mapped: {mapped}; torch.cuda.nccl.version() = {torch.cuda.nccl.version()}", flush=True)
    check(any(os.path.realpath(m) == os.path.realpath(lib) for m in mapped), "ouro's libnccl.so.2 is not mapped")
    torch.cuda.set_device(0)
    dist.init_process_group("nccl", device_id=torch.device("cuda", 0))
    world = dist.get_world_size()
    if args.part in ("all", "collectives"):
        collectives(torch, dist, RANK, world, HostNccl(lib, dist, RANK, world))
    if args.part in ("all", "ddp"):
        ddp(torch, dist, RANK, world)
    if args.part in ("all", "graph"):
        graph(torch, dist, RANK, world)
    dist.destroy_process_group()
    print(f"rank {RANK}: {'OK' if not failures else str(len(failures)) + ' FAILED'}", flush=True)
    return 0 if not failures else 1


if __name__ == "__main__":
    a = parse()
    sys.exit(rank_main(a) if a.rank >= 0 else launch(a))
