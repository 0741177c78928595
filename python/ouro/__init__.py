"""ouro: collective communication between processes (shared memory and TCP).

    ouro.Comm       numpy-level communicator (mpi4py-like); needs no torch
    ouro.torch      ``import ouro.torch`` registers the torch.distributed backend "ouro"
    ouro.Error      raised when an ouro call fails; the message says what failed, on which
                    rank, in which call and what to do
    ouro.ReplicaMismatch  an ouro.Error: copies that must be the same differ (Comm.check_replicas,
                    ouro.torch.check_replicas, OURO_VERIFY)

From a build tree: PYTHONPATH=BUILD/python /usr/bin/python3 ... (docs/PYTORCH.md).
"""

from ._ouro import Error, ReplicaMismatch, version
from .comm import Comm, SUM, PROD, MAX, MIN, AVG

__all__ = ["Comm", "Error", "ReplicaMismatch", "version", "SUM", "PROD", "MAX", "MIN", "AVG"]
