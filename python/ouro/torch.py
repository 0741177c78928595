"""The torch.distributed backend "ouro": ``import ouro.torch`` registers it, then

    dist.init_process_group("ouro", init_method="tcp://10.0.0.1:29500", rank=r, world_size=n)

(or file://, env://, under torchrun) runs collectives on CPU tensors through ouro. The rendezvous
is torch's own store, so no OURO_* variable is needed; ``timeout=`` becomes ouro's limit on every
wait of the group. dist.new_group(ranks) builds a fresh ouro communicator over the subgroup's
store. See docs/PYTORCH.md for what each call supports.
"""

import os
from datetime import timedelta

import torch.distributed as _dist

# The group's work runs on ouro's threads while torch computes (DDP's hooks overlap gradient
# all-reduces with backward), usually on the same cores: a wait that spins keeps the core from
# the backward pass. So ouro's waits yield at once here unless the user chose (OURO_SPIN_US):
# torch DDP on 2 ranks, one core each, went from 0.94x to 1.26-1.30x gloo's samples/s (bench/trainer/
# side_by_side.py, docs/PYTORCH.md); sched_yield returns at once when nothing else wants the core,
# so a lone collective's latency is unchanged.
os.environ.setdefault("OURO_SPIN_US", "0")

from . import _torch

BACKEND = "ouro"


def _store_name(store):
    # For ouro's messages: "torch PrefixStore" etc.; the class is all a PrefixStore tells.
    return f"torch {type(store).__name__}"


def create_process_group(store, rank, world_size, timeout=timedelta(minutes=30)):
    """The creator torch calls for backend "ouro": (store, rank, size, timeout) -> ProcessGroup."""
    seconds = timeout.total_seconds() if isinstance(timeout, timedelta) else float(timeout)
    return _torch.create_process_group(store, rank, world_size, seconds, _store_name(store))


# Registering twice raises in torch (a module imported under two names would); once is enough.
if BACKEND.upper() not in _dist.Backend._plugins:
    _dist.Backend.register_backend(BACKEND, create_process_group)
