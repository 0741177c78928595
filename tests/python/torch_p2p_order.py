#!/usr/bin/python3
"""One rank of the torch backend's point-to-point order test (launch.py, world 2 and 3).

ouro runs a communicator's calls in issue order and a send waits for its receive, so the binding
defers isend/irecv and issues the pending ones together (docs/PYTORCH.md, "Point-to-point").
Here: ranks 0 and 1 post isend and irecv to each other in every combination of orders (the same
on both, opposite on each) and wait in either order; batch_isend_irecv around a ring of every
rank, both directions at once; pending calls issued by a following collective, by polling
is_completed(), by get_future(), and by destroying the group.
"""

from datetime import timedelta

from rank_common import PORT, RANK, WORLD, Checks, import_torch, run

import_torch()
import torch  # noqa: E402
import torch.distributed as dist  # noqa: E402

check = Checks()


def payload(src, dst, n=5):
    return torch.arange(n, dtype=torch.float32) + 100 * src + dst


def post(kind, peer, out):
    if kind == "send":
        return dist.isend(payload(RANK, peer), peer)
    return dist.irecv(out, peer)


def pair_orders():
    # Every order of "isend to the peer" and "irecv from it" on rank 0 against every order on rank 1.
    if RANK > 1:
        return
    peer = 1 - RANK
    orders = [("send", "recv"), ("recv", "send")]
    for mine in orders:
        for theirs in orders:
            order = mine if RANK == 0 else theirs
            for wait_reversed in (False, True):
                out = torch.zeros(5)
                works = [post(kind, peer, out) for kind in order]
                for w in (reversed(works) if wait_reversed else works):
                    w.wait()
                check(torch.equal(out, payload(peer, RANK)),
                      f"rank 0 {mine}, rank 1 {theirs}, waits {'reversed' if wait_reversed else 'in order'}")
    # Two messages each way, all posted before any wait: the k-th send meets the k-th receive.
    outs = [torch.zeros(5), torch.zeros(5)]
    works = [dist.isend(payload(RANK, peer), peer), dist.irecv(outs[0], peer),
             dist.isend(payload(RANK, peer) * 2, peer), dist.irecv(outs[1], peer)]
    for w in works:
        w.wait()
    check(torch.equal(outs[0], payload(peer, RANK)) and torch.equal(outs[1], payload(peer, RANK) * 2),
          "two messages each way keep their order")
    # Blocking send/recv, opposite orders: rank 0 sends first, rank 1 receives first.
    out = torch.zeros(5)
    if RANK == 0:
        dist.send(payload(0, 1), 1)
        dist.recv(out, 1)
    else:
        dist.recv(out, 0)
        dist.send(payload(1, 0), 0)
    check(torch.equal(out, payload(peer, RANK)), "blocking send/recv")


def ring_batch():
    # batch_isend_irecv (torch issues plain isend/irecv for non-NCCL backends): each rank sends to
    # both neighbours and receives from both, receives posted first.
    nxt, prev = (RANK + 1) % WORLD, (RANK - 1) % WORLD
    from_prev, from_next = torch.zeros(5), torch.zeros(5)
    ops = [dist.P2POp(dist.irecv, from_prev, prev), dist.P2POp(dist.irecv, from_next, nxt),
           dist.P2POp(dist.isend, payload(RANK, nxt), nxt), dist.P2POp(dist.isend, payload(RANK, prev), prev)]
    if WORLD == 2:
        ops = ops[:1] + ops[2:3]  # one neighbour: the same rank both ways
    for w in dist.batch_isend_irecv(ops):
        w.wait()
    check(torch.equal(from_prev, payload(prev, RANK)), "batch_isend_irecv ring: from the previous rank")
    if WORLD > 2:
        check(torch.equal(from_next, payload(nxt, RANK)), "batch_isend_irecv ring: from the next rank")


def issued_by_other_calls():
    nxt, prev = (RANK + 1) % WORLD, (RANK - 1) % WORLD
    # A collective issues the pending calls before itself; the works then complete unasked.
    out = torch.zeros(5)
    works = [dist.irecv(out, prev), dist.isend(payload(RANK, nxt), nxt)]
    t = torch.ones(3)
    dist.all_reduce(t)
    check(torch.equal(t, torch.full((3,), float(WORLD))), "all_reduce after pending isend/irecv")
    for w in works:
        w.wait()
    check(torch.equal(out, payload(prev, RANK)), "isend/irecv issued by the following all_reduce")
    # Polling is_completed() issues them.
    out = torch.zeros(5)
    works = [dist.irecv(out, prev), dist.isend(payload(RANK, nxt), nxt)]
    while not all(w.is_completed() for w in works):
        pass
    check(torch.equal(out, payload(prev, RANK)), "is_completed() polling issues pending calls")
    # get_future() issues them; the future carries the received tensor.
    out = torch.zeros(5)
    works = [dist.irecv(out, prev), dist.isend(payload(RANK, nxt), nxt)]
    got = works[0].get_future().wait()[0]
    works[1].wait()
    check(torch.equal(got, payload(prev, RANK)), "get_future() issues pending calls")


def issued_at_destroy():
    nxt, prev = (RANK + 1) % WORLD, (RANK - 1) % WORLD
    out = torch.zeros(5)
    works = [dist.irecv(out, prev), dist.isend(payload(RANK, nxt), nxt)]
    dist.destroy_process_group()  # issues them (or a wait below does, if torch still holds the group)
    for w in works:
        w.wait()
    check(torch.equal(out, payload(prev, RANK)), "pending isend/irecv complete across destroy_process_group")


def source_rank_and_eager_send():
    """A named receive's work gives its src (irecv(...)._source_rank(), as gloo); and a small send
    completes before its receive is posted: a sender cannot help a receiver that posts later, which
    is why a receive from any source (ouroRecvAny) looks at the links' pending messages instead."""
    if RANK == 1:
        dist.send(torch.full((3,), 7.0), 0)  # returns although rank 0 has not posted its receive
        dist.barrier()
    elif RANK == 0:
        dist.barrier()  # rank 1's send completed before this barrier
        out = torch.zeros(3)
        work = dist.irecv(out, 1)
        work.wait()
        check(work._source_rank() == 1 and out.tolist() == [7.0] * 3, "irecv(src=1)._source_rank() is 1")
    else:
        dist.barrier()


def main():
    dist.init_process_group("ouro", init_method=f"tcp://127.0.0.1:{PORT}", rank=RANK, world_size=WORLD,
                            timeout=timedelta(seconds=60))
    pair_orders()
    ring_batch()
    issued_by_other_calls()
    dist.barrier()
    source_rank_and_eager_send()
    dist.barrier()
    issued_at_destroy()
    check.done()


if __name__ == "__main__":
    run(main)
