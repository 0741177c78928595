#!/usr/bin/python3
"""Runs under torchrun (test_torchrun.py): the backend needs nothing but init_process_group("ouro");
rank, world size and rendezvous come from torchrun's own variables and store. Writes
$PYOURO_TEST_RESULT_DIR/rankR.ok when its all_reduce is right."""

import os

import torch
import torch.distributed as dist

import ouro.torch  # noqa: F401  (registers the backend)

dist.init_process_group("ouro")
rank, world = dist.get_rank(), dist.get_world_size()
t = torch.full((4,), float(rank + 1))
dist.all_reduce(t)
want = float(world * (world + 1) // 2)
if not torch.equal(t, torch.full((4,), want)):
    raise SystemExit(f"FAIL rank {rank}: all_reduce gave {t.tolist()}, expected {want}")
dist.barrier()
dist.destroy_process_group()
with open(os.path.join(os.environ["PYOURO_TEST_RESULT_DIR"], f"rank{rank}.ok"), "w") as f:
    f.write(f"rank {rank} of {world}\n")
print(f"ok torchrun rank {rank} of {world}")
