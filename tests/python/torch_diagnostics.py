#!/usr/bin/python3
"""One rank of the torch backend's diagnostics test (issue #34; started by launch.py at world 3).

ouro.torch.check_replicas on a module and a tensor: equal copies pass; one bit flipped in rank 1's
copy of a weight raises ouro.ReplicaMismatch on every rank naming the parameter and rank 1; a group
of another backend is refused. ouro.torch.dump_trace gives the group's flight record.
"""

from rank_common import PORT, RANK, WORLD, Checks, import_torch, run

import_torch()
import torch  # noqa: E402
import torch.distributed as dist  # noqa: E402

import ouro  # noqa: E402
import ouro.torch  # noqa: E402,F401

check = Checks()


def main():
    dist.init_process_group("ouro", init_method=f"tcp://127.0.0.1:{PORT}", rank=RANK, world_size=WORLD)
    torch.manual_seed(0)  # the same model on every rank
    model = torch.nn.Sequential(torch.nn.Linear(8, 4), torch.nn.BatchNorm1d(4))
    # Linear's weight and bias, BatchNorm's weight and bias, and its 3 buffers.
    check(ouro.torch.check_replicas(model) == 7, "equal replicas pass")
    check(ouro.torch.check_replicas(torch.arange(10.0)) == 1, "a tensor")
    if RANK == 1:
        with torch.no_grad():
            model[0].weight.view(-1).view(torch.int32)[3] ^= 1  # one bit of one weight, on rank 1
    check.raises(lambda: ouro.torch.check_replicas(model),
                 ["rank " + str(RANK), "check_replicas", "0.weight", "rank 1 (hash", "differs from ranks 0, 2"],
                 "a flipped bit names the parameter and the rank")
    try:
        ouro.torch.check_replicas(model)
    except ouro.ReplicaMismatch:
        check(True, "it is an ouro.ReplicaMismatch")
    record = ouro.torch.dump_trace()
    calls = record["communicators"][0]["calls"]
    check(record["format"] == "ouro-trace" and calls[-1]["collective"] == "allgather", "dump_trace", str(calls[-1]))
    gloo = dist.new_group(list(range(WORLD)), backend="gloo")
    try:
        ouro.torch.check_replicas(model, group=gloo)
        check(False, "a group of another backend is refused")
    except ValueError as e:
        check("backend is gloo, not ouro" in str(e), "a group of another backend is refused", str(e))
    dist.destroy_process_group()
    check.done()


run(main)
