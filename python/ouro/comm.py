"""ouro.Comm: an mpi4py-like communicator over numpy arrays (no torch needed).

    comm = ouro.Comm.from_env()                 # under ouro-run, torchrun, srun, mpirun
    comm = ouro.Comm(rank, size, "tcp://10.0.0.1:29500")
    total = comm.allreduce(np.ones(4, np.float32), op="sum")

Types: int8, uint8, int32, uint32, int64, uint64, float16, float32, float64 reduce natively;
bool reduces with max/min (sum as OR, prod as AND); complex64/128 with sum/avg (as float pairs);
bfloat16 and the fp8 types have no numpy dtype: pass their bits, bfloat16 as a uint16 array with
dtype="bfloat16", float8e4m3 / float8e5m2 (OCP FP8 E4M3 and E5M2) as uint8 arrays with
dtype="float8e4m3" / "float8e5m2". Moving data
(broadcast, allgather, alltoall, send, recv) works for any fixed-size dtype, as raw bytes.
Results of reductions follow ouro's reproducible rank-order fold (docs/API.md). Inputs need not be
contiguous (they are copied); `out=` arrays receive the result wherever they live.
"""

import json

import numpy as np

from . import _ouro

SUM, PROD, MAX, MIN, AVG = "sum", "prod", "max", "min", "avg"
# ouro's codes by name, from the extension (core/dtype.hpp's table): ops in code order, and numpy's
# dtype of the same name for every ouro type numpy has. The others (bfloat16, float8e4m3,
# float8e5m2) travel as their bits in unsigned arrays of their size, named by dtype=.
_OPS = {name: code for code, name in _ouro.ops()}
_CODES = {name: code for code, name, _ in _ouro.dtypes()}
_SIZES = {name: size for _, name, size in _ouro.dtypes()}
_BITS_ONLY = ("bfloat16", "float8e4m3", "float8e5m2")
_NATIVE = {np.dtype(name): code for name, code in _CODES.items() if name not in _BITS_ONLY}
_UINT8 = _CODES["uint8"]


def _op_code(op, call):
    key = str(op).lower()
    if key not in _OPS:
        raise ValueError(f"{call}: op {op!r} is not one of {', '.join(_OPS)} (ouro has no bitwise reductions)")
    return _OPS[key]


def _reduction(array, op, dtype, call):
    """(flat contiguous view, ouro dtype code, ouro op code) for reducing `array`."""
    code = _op_code(op, call)
    if dtype is not None:
        name = str(dtype)
        if name not in _BITS_ONLY or array.dtype.itemsize != _SIZES[name]:
            raise ValueError(f"{call}: dtype={dtype!r} applies only as 'bfloat16' to 2-byte (uint16) arrays, or as "
                             f"'float8e4m3' or 'float8e5m2' to 1-byte (uint8) arrays; this array is {array.dtype}")
        bits = np.uint16 if _SIZES[name] == 2 else np.uint8
        return array.view(bits).reshape(-1), _CODES[name], code
    if array.dtype in _NATIVE:
        return array.reshape(-1), _NATIVE[array.dtype], code
    if array.dtype == np.bool_:
        if code == _OPS[AVG]:
            raise TypeError(f"{call}: an average of bool values is not a bool; convert the array first")
        code = {_OPS[SUM]: _OPS[MAX], _OPS[PROD]: _OPS[MIN]}.get(code, code)  # sum: OR, prod: AND
        return array.view(np.uint8).reshape(-1), _UINT8, code
    if array.dtype in (np.complex64, np.complex128):
        if code not in (_OPS[SUM], _OPS[AVG]):
            raise TypeError(f"{call}: complex arrays reduce with sum or avg only (as pairs of floats), not {op}")
        real = np.float32 if array.dtype == np.complex64 else np.float64
        return array.view(real).reshape(-1), _NATIVE[np.dtype(real)], code
    raise TypeError(f"{call}: ouro cannot reduce {array.dtype} arrays (it reduces int8, uint8, int32, uint32, int64, "
                    f"uint64, float16, float32, float64, bfloat16 given as uint16 with dtype='bfloat16', "
                    f"float8e4m3 and float8e5m2 given as uint8 with dtype='float8e4m3' or 'float8e5m2', and bool "
                    f"and complex with some ops); convert the array, e.g. a.astype(np.int32)")


def _movement(array):
    """(flat contiguous view, ouro dtype code) for moving `array` unchanged."""
    if array.dtype in _NATIVE:
        return array.reshape(-1), _NATIVE[array.dtype]
    if array.dtype.hasobject:
        raise TypeError(f"ouro moves fixed-size data; {array.dtype} arrays hold Python objects")
    return array.reshape(-1).view(np.uint8), _UINT8


def _output(out, shape, dtype, call):
    """A contiguous array to receive into, and the caller's `out` to copy into afterwards (or None)."""
    if out is None:
        return np.empty(shape, dtype), None
    if out.shape != tuple(shape) or out.dtype != dtype:
        raise ValueError(f"{call}: out has shape {out.shape} and dtype {out.dtype}; "
                         f"shape {tuple(shape)} and dtype {dtype} are needed")
    if out.flags.c_contiguous and out.flags.writeable:
        return out, None
    return np.empty(shape, dtype), out


def _finish(result, original):
    if original is None:
        return result
    original[...] = result
    return original


class Comm:
    """A communicator: Comm(rank, size, init_method) or Comm.from_env(). Close it (or use `with`)."""

    def __init__(self, rank=None, size=None, init_method="env://", *, _handle=None):
        if _handle is not None:
            self._c = _handle
        elif rank is None and size is None and init_method == "env://":
            self._c = _ouro.Communicator.from_env()
        else:
            if rank is None or size is None:
                raise ValueError("Comm(rank, size, init_method): give both rank and size, or use Comm.from_env()")
            self._c = _ouro.Communicator.init_rank(int(size), int(rank), str(init_method))

    @classmethod
    def from_env(cls):
        """Rank, size and rendezvous from OURO_*, torchrun, Slurm, Open MPI or MPICH variables."""
        return cls(_handle=_ouro.Communicator.from_env())

    rank = property(lambda self: self._c.rank)
    size = property(lambda self: self._c.size)
    local_rank = property(lambda self: self._c.local_rank)
    local_size = property(lambda self: self._c.local_size)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def __repr__(self):
        return f"<ouro.Comm rank {self.rank} of {self.size}>"

    # ---- collectives ----
    def allreduce(self, array, op=SUM, out=None, dtype=None):
        """Elementwise reduction over all ranks; returns `out` (a new array when None)."""
        a = np.ascontiguousarray(array)
        result, original = _output(out, a.shape, a.dtype, "allreduce")
        send, code, opc = _reduction(a, op, dtype, "allreduce")
        recv, _, _ = _reduction(result, op, dtype, "allreduce")
        self._c.allreduce(send, recv, send.size, code, opc)
        return _finish(result, original)

    def reduce_scatter(self, array, op=SUM, out=None, dtype=None):
        """Reduces `array` (first axis = size x k) and returns this rank's k rows of the result."""
        a = np.ascontiguousarray(array)
        if a.ndim == 0 or a.shape[0] % self.size:
            raise ValueError(f"reduce_scatter: the first axis ({a.shape[0] if a.ndim else 'scalar'}) must be a "
                             f"multiple of the world size {self.size}")
        shape = (a.shape[0] // self.size,) + a.shape[1:]
        result, original = _output(out, shape, a.dtype, "reduce_scatter")
        send, code, opc = _reduction(a, op, dtype, "reduce_scatter")
        recv, _, _ = _reduction(result, op, dtype, "reduce_scatter")
        self._c.reduce_scatter(send, recv, recv.size, code, opc)
        return _finish(result, original)

    def reduce(self, array, op=SUM, root=0, out=None, dtype=None):
        """The reduction at `root` (returned there); other ranks return None."""
        a = np.ascontiguousarray(array)
        at_root = self.rank == root
        result, original = _output(out if at_root else None, a.shape, a.dtype, "reduce")
        send, code, opc = _reduction(a, op, dtype, "reduce")
        recv, _, _ = _reduction(result, op, dtype, "reduce")
        self._c.reduce(send, recv, send.size, code, opc, int(root))
        return _finish(result, original) if at_root else None

    def allgather(self, array, out=None):
        """Every rank's array stacked along a new first axis: shape (size, *array.shape)."""
        a = np.ascontiguousarray(array)
        result, original = _output(out, (self.size,) + a.shape, a.dtype, "allgather")
        send, code = _movement(a)
        recv, _ = _movement(result)
        self._c.allgather(send, recv, send.size, code)
        return _finish(result, original)

    def broadcast(self, array, root=0):
        """Overwrites `array` on every rank with root's, in place; returns it."""
        a = np.ascontiguousarray(array)
        if not a.flags.writeable:
            raise ValueError("broadcast: the array is read-only")
        buf, code = _movement(a)
        self._c.broadcast(buf, buf.size, code, int(root))
        if a is not array:
            array[...] = a
        return array

    def alltoall(self, array, out=None):
        """Block r of the first axis (size x k) goes to rank r; out's block r came from rank r."""
        a = np.ascontiguousarray(array)
        if a.ndim == 0 or a.shape[0] % self.size:
            raise ValueError(f"alltoall: the first axis must be a multiple of the world size {self.size}")
        result, original = _output(out, a.shape, a.dtype, "alltoall")
        send, code = _movement(a)
        recv, _ = _movement(result)
        self._c.alltoall(send, recv, send.size // self.size, code)
        return _finish(result, original)

    def send(self, array, dest):
        buf, code = _movement(np.ascontiguousarray(array))
        self._c.send(buf, buf.size, code, int(dest))

    def recv(self, out, source):
        """Receives into `out` (its shape and dtype say how much); returns it."""
        result, original = _output(out, out.shape, out.dtype, "recv")
        buf, code = _movement(result)
        self._c.recv(buf, buf.size, code, int(source))
        return _finish(result, original)

    def recv_any(self, out):
        """Receives the next send to this rank from any rank into `out` (ouroRecvAny): returns
        (out, the sender's rank)."""
        result, original = _output(out, out.shape, out.dtype, "recv_any")
        buf, code = _movement(result)
        source = self._c.recv_any(buf, buf.size, code)
        return _finish(result, original), source

    def barrier(self):
        self._c.barrier()

    # ---- communicators ----
    def split(self, color, key=0):
        """Collective: ranks with the same color form a new Comm, ordered by key; color None gives None."""
        child = self._c.split(-1 if color is None else int(color), int(key))
        return None if child is None else Comm(_handle=child)

    def close(self):
        """Waits for nothing pending (every call here blocks) and frees the communicator."""
        self._c.close()

    def abort(self):
        """Frees the communicator at once; peers' calls then fail with ouro.Error."""
        self._c.abort()

    # ---- diagnostics (docs/API.md "Diagnostics") ----
    def check_replicas(self, array):
        """Collective: are `array`'s bytes the same on every rank? Raises ouro.ReplicaMismatch (an
        ouro.Error) on every rank when not, naming the ranks that differ from the majority. Costs one
        8-byte all-gather of a 64-bit hash of each rank's copy."""
        self._c.check_replicas(np.ascontiguousarray(array))

    def dump_trace(self):
        """The flight recorder's record of this communicator's last calls, as a dict (the JSON
        document ouro-trace reads; docs/LAUNCHER.md "When a job hangs"). Local; never waits."""
        return json.loads(self._c.dump_trace())
