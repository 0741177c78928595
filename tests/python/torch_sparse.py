#!/usr/bin/python3
"""One rank of the torch backend's sparse all_reduce test (started by launch.py at world 2 and 3).

all_reduce of sparse COO CPU tensors (SUM only, as gloo): every rank's input is a closed-form
function of its rank, so every rank knows the dense sum. Ranks have different nnz, overlapping
indices, and the last rank none at all; float32 and float64 values (not small integers: the sum
must be the left fold in rank order, the same bits on every rank), hybrid tensors (dense
dimensions), 1 to 3 sparse dimensions, uncoalesced inputs, a list of two tensors, async work and
its future, and the refusals (MAX; ranks that disagree on the shape, after which the group works).
"""

from datetime import timedelta

from rank_common import PORT, RANK, WORLD, Checks, import_torch, run

import_torch()
import torch  # noqa: E402
import torch.distributed as dist  # noqa: E402

check = Checks()


def sparse_input(rank, dtype, shape, sparse_dim, duplicates=False):
    """Rank r's tensor: nnz 2r+3 (0 on the last rank), indices overlapping between ranks."""
    g = torch.Generator().manual_seed(1000 + rank)
    nnz = 0 if rank == WORLD - 1 else 2 * rank + 3
    idx = [torch.randint(0, shape[d], (nnz,), generator=g) for d in range(sparse_dim)]
    indices = torch.stack(idx) if nnz else torch.zeros(sparse_dim, 0, dtype=torch.long)
    if nnz:
        indices[:, 0] = 0  # every non-empty rank has the first element: overlaps for sure
    values = torch.randn([nnz] + list(shape[sparse_dim:]), generator=g, dtype=torch.float64).to(dtype)
    t = torch.sparse_coo_tensor(indices, values, shape)
    return t if duplicates else t.coalesce()


def dense_sum(dtype, shape, sparse_dim, duplicates):
    """The left fold over the ranks, in rank order, of the dense inputs."""
    out = torch.zeros(shape, dtype=dtype)
    for r in range(WORLD):
        out = out + sparse_input(r, dtype, shape, sparse_dim, duplicates).to_dense()
    return out


def same_on_every_rank(dense):
    """Every rank's result has the same bits (an all_gather of the dense result)."""
    gathered = [torch.empty_like(dense) for _ in range(WORLD)]
    dist.all_gather(gathered, dense)
    return all(torch.equal(g, gathered[0]) for g in gathered)


def sum_checks():
    cases = [((7,), 1), ((6, 3), 1), ((5, 4), 2), ((4, 3, 2), 3), ((5, 2, 3), 1), ((4, 3, 2, 2), 2)]
    for dtype in (torch.float32, torch.float64):
        for shape, sparse_dim in cases:
            for duplicates in (False, True):
                name = f"sparse all_reduce {dtype} shape {list(shape)} sparse_dim {sparse_dim}" + \
                       (" uncoalesced" if duplicates else "")
                t = sparse_input(RANK, dtype, shape, sparse_dim, duplicates)
                dist.all_reduce(t)
                want = dense_sum(dtype, shape, sparse_dim, duplicates)
                check(t.layout == torch.sparse_coo and t.is_coalesced(),
                      name + ": the input tensor holds a coalesced sparse result", str(t))
                check(t.dtype == dtype and t.shape == torch.Size(shape) and t.sparse_dim() == sparse_dim,
                      name + ": dtype and shape kept", str(t))
                got = t.to_dense()
                if duplicates:  # the dense reference sums a rank's duplicates in its own order
                    ok = torch.allclose(got, want, rtol=1e-6 if dtype == torch.float32 else 1e-12)
                else:  # the rank-order fold, exactly
                    ok = torch.equal(got, want)
                check(ok, name, f"got {got.tolist()}, want {want.tolist()}")
                check(same_on_every_rank(got), name + ": same bits on every rank")
    # Every rank empty: nothing to move (all-gathers of count 0).
    t = torch.sparse_coo_tensor(torch.zeros(2, 0, dtype=torch.long), torch.zeros(0), (3, 3))
    dist.all_reduce(t)
    check(t._nnz() == 0 and t.shape == (3, 3) and t.is_coalesced(), "sparse all_reduce with every rank empty")
    # Integers sum exactly too.
    t = torch.sparse_coo_tensor([[RANK, WORLD]], torch.tensor([RANK + 1, 10], dtype=torch.int64), (WORLD + 1,))
    dist.all_reduce(t)
    want = torch.tensor([r + 1 for r in range(WORLD)] + [10 * WORLD], dtype=torch.int64)
    check(torch.equal(t.to_dense(), want), "sparse all_reduce int64", str(t.to_dense().tolist()))


def api_checks():
    # Async, and the future's value is the input tensor holding the result (gloo's).
    t = sparse_input(RANK, torch.float64, (6, 3), 1)
    work = dist.all_reduce(t, async_op=True)
    value = work.get_future().wait()
    work.wait()
    want = dense_sum(torch.float64, (6, 3), 1, False)
    check(torch.equal(t.to_dense(), want), "async sparse all_reduce")
    check(len(value) == 1 and torch.equal(value[0].to_dense(), want),
          "the future's value is the result", str(value))
    # Several tensors in one call (the group's own method, as gloo allows): folded, then reduced;
    # every tensor receives the sum.
    pg = dist.distributed_c10d._get_default_group()
    a = sparse_input(RANK, torch.float64, (6,), 1)
    b = torch.sparse_coo_tensor([[5]], torch.tensor([1.0], dtype=torch.float64), (6,))
    pg.allreduce([a, b]).wait()
    want = dense_sum(torch.float64, (6,), 1, False) + torch.tensor([0, 0, 0, 0, 0, float(WORLD)],
                                                                   dtype=torch.float64)
    check(torch.allclose(a.to_dense(), want) and torch.equal(a.to_dense(), b.to_dense()),
          "a list of two sparse tensors", f"{a.to_dense().tolist()} vs {want.tolist()}")


def error_checks():
    t = sparse_input(RANK, torch.float32, (5,), 1)
    check.raises(lambda: dist.all_reduce(t, op=dist.ReduceOp.MAX), ["MAX", "sparse", "SUM"], "sparse MAX refused")
    # Ranks that disagree on the shape: found after the metadata exchange, raised on every rank.
    n = 5 if RANK == 0 else 6
    bad = torch.sparse_coo_tensor([[0]], [1.0], (n,))
    check.raises(lambda: dist.all_reduce(bad), ["same shape", "rank"], "mismatched sparse shapes refused")
    bad = torch.sparse_coo_tensor([[0]], torch.tensor([1.0], dtype=torch.float64 if RANK else torch.float32), (5,))
    check.raises(lambda: dist.all_reduce(bad), ["float64", "float32"], "mismatched sparse dtypes refused")
    u = torch.sparse_coo_tensor([[1]], [1.0], (4,))
    dist.all_reduce(u)
    check(torch.equal(u.to_dense(), torch.tensor([0.0, WORLD, 0.0, 0.0])), "group usable after the refusals")


def main():
    dist.init_process_group("ouro", init_method=f"tcp://127.0.0.1:{PORT}", rank=RANK, world_size=WORLD,
                            timeout=timedelta(seconds=60))
    sum_checks()
    api_checks()
    error_checks()
    dist.destroy_process_group()
    check.done()


if __name__ == "__main__":
    run(main)
