#!/usr/bin/python3
"""One rank of the torch backend's rendezvous test (launch.py, world 3): init_process_group("ouro")
through tcp://, file:// and env:// in turn (destroying the group between), subgroups made by
dist.new_group (a fresh ouro communicator over the subgroup's prefix store, members only), and a
group's timeout= reaching ouro: an all_reduce that one member never joins fails after 3 s with
ouro's message instead of the 60 s OURO_TIMEOUT_S the launcher sets."""

import os
import time
from datetime import timedelta

from rank_common import PORT, PORT2, RANK, WORK, WORLD, Checks, import_torch, run

import_torch()
import torch  # noqa: E402
import torch.distributed as dist  # noqa: E402

check = Checks()


def world_sum(what):
    t = torch.full((5,), float(RANK + 1))
    dist.all_reduce(t)
    check(torch.equal(t, torch.full((5,), float(WORLD * (WORLD + 1) // 2))), f"all_reduce after init via {what}")


def subgroup_checks():
    members = [0, WORLD - 1]
    sub = dist.new_group(members)
    if RANK in members:
        check(sub.size() == 2 and dist.get_rank(sub) == members.index(RANK), "new_group rank and size")
        t = torch.tensor([float(RANK)])
        dist.all_reduce(t, group=sub)
        check(t.item() == float(sum(members)), "all_reduce in a new_group", str(t))
        t = torch.tensor([RANK])
        dist.broadcast(t, src=WORLD - 1, group=sub)  # src is a global rank
        check(t.item() == WORLD - 1, "broadcast in a new_group from a global rank")
    else:
        check(sub == dist.GroupMember.NON_GROUP_MEMBER, "non-members get NON_GROUP_MEMBER")
    # A second group over every rank, so two ouro communicators of the same ranks coexist.
    everyone = dist.new_group(list(range(WORLD)))
    t = torch.ones(2)
    dist.all_reduce(t, group=everyone)
    dist.all_reduce(t)
    check(torch.equal(t, torch.full((2,), float(WORLD * WORLD))), "two groups over the same ranks interleaved")


def timeout_checks():
    # timeout= of new_group is the ouro communicator's limit: rank 1 never joins, rank 0 gives up.
    sub = dist.new_group([0, 1], timeout=timedelta(seconds=3))
    if RANK == 0:
        started = time.monotonic()
        # " Timed out ": the words torch matches a timeout by (distributed_test.py), as gloo says it.
        text = check.raises(lambda: dist.all_reduce(torch.ones(1), group=sub),
                            [" Timed out ", "timed out after 3 s", "rank 1"], "a 3 s group timeout reaches ouro")
        took = time.monotonic() - started
        check(took < 20, "the timeout fired within the group's limit", f"{took:.1f} s; {text}")
    dist.barrier()  # on the default group: rank 1 waits here until rank 0 has seen its timeout


def main():
    dist.init_process_group("ouro", init_method=f"tcp://127.0.0.1:{PORT}", rank=RANK, world_size=WORLD,
                            timeout=timedelta(seconds=60))
    world_sum("tcp://")
    print("progress: tcp:// init done", flush=True)
    subgroup_checks()
    print("progress: subgroups done", flush=True)
    timeout_checks()
    print("progress: timeout done", flush=True)
    dist.destroy_process_group()

    dist.init_process_group("ouro", init_method=f"file://{WORK}/rendezvous", rank=RANK, world_size=WORLD)
    world_sum("file://")
    dist.destroy_process_group()

    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(PORT2), RANK=str(RANK), WORLD_SIZE=str(WORLD))
    dist.init_process_group("ouro", init_method="env://")
    world_sum("env://")
    dist.destroy_process_group()
    check.done()


if __name__ == "__main__":
    run(main)
