"""ouro: collective communication between processes (shared memory and TCP).

    ouro.Comm       numpy-level communicator (mpi4py-like); needs no torch
    ouro.torch      ``import ouro.torch`` registers the torch.distributed backend "ouro"
    ouro.Error      raised when an ouro call fails; the message says what failed, on which
                    rank, in which call and what to do

From a build tree: PYTHONPATH=BUILD/python /usr/bin/python3 ... (docs/PYTORCH.md).
"""

from ._ouro import Error, version
from .comm import Comm, SUM, PROD, MAX, MIN, AVG

__all__ = ["Comm", "Error", "version", "SUM", "PROD", "MAX", "MIN", "AVG"]
