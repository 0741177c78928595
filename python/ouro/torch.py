"""The torch.distributed backend "ouro": ``import ouro.torch`` registers it, then

    dist.init_process_group("ouro", init_method="tcp://10.0.0.1:29500", rank=r, world_size=n)

(or file://, env://, under torchrun) runs collectives on CPU tensors through ouro. The rendezvous
is torch's own store, so no OURO_* variable is needed; ``timeout=`` becomes ouro's limit on every
wait of the group. dist.new_group(ranks) builds a fresh ouro communicator over the subgroup's
store. See docs/PYTORCH.md for what each call supports.
"""

import json
import os
from datetime import timedelta

import torch as _torch_module
import torch.distributed as _dist

# The group's work runs on ouro's threads while torch computes (DDP's hooks overlap gradient
# all-reduces with backward), usually on the same cores: a wait that spins keeps the core from
# the backward pass. So ouro's waits yield at once here unless the user chose (OURO_SPIN_US):
# torch DDP on 2 ranks, one core each, went from 0.94x to 1.26-1.30x gloo's samples/s (bench/trainer/
# side_by_side.py, docs/PYTORCH.md); sched_yield returns at once when nothing else wants the core,
# so a lone collective's latency is unchanged.
os.environ.setdefault("OURO_SPIN_US", "0")

from . import _torch
from ._ouro import ReplicaMismatch

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


# ---- diagnostics (docs/PYTORCH.md "Diagnostics") ----
def _group(group):
    return group if group is not None else _dist.distributed_c10d._get_default_group()


def check_replicas(tensor_or_module, group=None):
    """Collective over `group` (default: the default group; its backend must be "ouro"): do the
    ranks hold the same bits? A tensor, or a module's parameters and buffers, each compared by a
    64-bit hash (one 8-byte all-gather per tensor). Raises ouro.ReplicaMismatch on every rank when
    not, naming each tensor that differs and the ranks whose copy is not the majority's; returns
    the number of tensors checked. For DDP replicas: check_replicas(model) after a step."""
    pg = _group(group)
    if isinstance(tensor_or_module, _torch_module.nn.Module):
        named = list(tensor_or_module.named_parameters()) + list(tensor_or_module.named_buffers())
    elif isinstance(tensor_or_module, _torch_module.Tensor):
        named = [("the tensor", tensor_or_module)]
    else:
        raise TypeError(f"check_replicas: expected a torch.Tensor or torch.nn.Module, got {type(tensor_or_module).__name__}")
    problems = []
    for name, tensor in named:
        hashes = _torch.replica_hashes(pg, tensor.detach())
        groups = {}
        for rank, h in enumerate(hashes):
            groups.setdefault(h, []).append(rank)
        if len(groups) < 2:
            continue
        majority = max(groups.values(), key=len)
        tied = sum(len(ranks) == len(majority) for ranks in groups.values()) > 1
        parts = [f"rank{'s' if len(ranks) > 1 else ''} {', '.join(map(str, ranks))} (hash {h:016x})"
                 for h, ranks in groups.items() if tied or ranks is not majority]
        if tied:
            problems.append(f"{name}: the copies differ and none has a majority: {'; '.join(parts)}")
        else:
            problems.append(f"{name}: {'; '.join(parts)} differ{'s' if len(parts) == 1 else ''} from ranks "
                            f"{', '.join(map(str, majority))}")
    if problems:
        raise ReplicaMismatch(f"rank {_dist.get_rank(pg)}: check_replicas: {len(problems)} of {len(named)} tensors "
                              f"are not the same on every rank: " + "; ".join(problems))
    return len(named)


def dump_trace(group=None):
    """The flight recorder's record of the group's ouro communicator (its last calls), as a dict;
    the format ouro-trace reads (docs/LAUNCHER.md "When a job hangs"). Local; never waits."""
    return json.loads(_torch.dump_trace(_group(group)))
