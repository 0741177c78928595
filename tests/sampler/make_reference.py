#!/usr/bin/python3
"""Reference vectors for ouro::sampler, taken from PyTorch itself.

  make_reference.py [--out FILE]   write the vectors (default: reference.txt beside this script)
  make_reference.py --live EXE     regenerate with the installed torch into a temporary file,
                                   check it equals the committed file, then run the C++ test
                                   program EXE on it; exit 77 (skip) when torch is missing

Needs Debian's python3-torch (run it with /usr/bin/python3) and numpy. Every sampler,
batch and forward-randperm line comes from torch: torch.utils.data.distributed.
DistributedSampler, torch.utils.data.BatchSampler and torch.randperm. PyTorch >= 2.7's
inside-out randperm (used for n >= 214748364) cannot come from the torch 1.13 Debian
ships, so its lines come from a torch-free reimplementation below, whose MT19937 is
CPython's own (only the seeding is written here) and which is first checked against
torch on the forward algorithm that both share.

Line format (one vector per line, key=value fields, lists comma-separated):
  sampler n= replicas= seed= epoch= shuffle= drop_last= ranks=R0;R1;...   every rank's list
  hashed  n= replicas= rank= seed= epoch= shuffle= drop_last= len= hash= at=POS:VALUE,...
  batch   n= replicas= rank= seed= epoch= shuffle= drop_last= batch_size= batch_drop_last=
          batches=B0;B1;...                 BatchSampler(DistributedSampler(...), ...)
  randperm        algorithm=forward|inside_out n= seed= perm=...
  randperm_hashed algorithm=forward|inside_out n= seed= len= hash= at=...
hash is listHash() below: sum over k of splitmix64((k << 32) + value_k + golden) mod 2^64.
"""
import os
import random
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
DEFAULT_OUT = os.path.join(HERE, "reference.txt")

SEEDS = [0, 1, 42, 2**32 + 5]
EPOCHS = [0, 1, 2, 3]
SEED_EPOCHS = [(s, e) for s in SEEDS for e in EPOCHS]
MASK64 = (1 << 64) - 1


# ---- torch-free MT19937 and randperm ----
def mt19937_draws(seed):
    """next32() of MT19937 seeded like at::mt19937 (init_genrand with the low 32 bits)."""
    state = [seed & 0xFFFFFFFF]
    for j in range(1, 624):
        prev = state[-1]
        state.append((1812433253 * (prev ^ (prev >> 30)) + j) & 0xFFFFFFFF)
    gen = random.Random()
    gen.setstate((3, tuple(state) + (624,), None))  # CPython's genrand_uint32 from here on
    return lambda: gen.getrandbits(32)


def randperm_python(n, seed, algorithm):
    next32 = mt19937_draws(seed)
    if algorithm == "forward":
        p = list(range(n))
        for i in range(n - 1):
            z = next32() % (n - i)
            p[i], p[i + z] = p[i + z], p[i]
        return p
    p = [0] * n
    for i in range(n):
        z = ((next32() << 32) | next32()) % (i + 1)
        p[i] = i
        p[i] = p[z]
        p[z] = i
    return p


# ---- compact form of long lists ----
def list_hash(values):
    import numpy as np
    v = np.asarray(values, dtype=np.uint64)
    x = (np.arange(len(v), dtype=np.uint64) << np.uint64(32)) + v + np.uint64(0x9E3779B97F4A7C15)
    x = (x ^ (x >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
    x = (x ^ (x >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
    x = x ^ (x >> np.uint64(31))
    return int(x.sum(dtype=np.uint64)) & MASK64


def sample_positions(length):
    picks = [0, 1, length // 7, length // 3, length // 2, (5 * length) // 7, length - 2, length - 1]
    return sorted({p for p in picks if 0 <= p < length})


def compact(values):
    at = ",".join(f"{p}:{values[p]}" for p in sample_positions(len(values)))
    return f"len={len(values)} hash={list_hash(values):016x} at={at}"


def join(values):
    return ",".join(str(v) for v in values)


# ---- the vectors ----
def generate(torch):
    from torch.utils.data import BatchSampler
    from torch.utils.data.distributed import DistributedSampler

    def shard(n, replicas, rank, seed, epoch, shuffle, drop_last):
        s = DistributedSampler(range(n), num_replicas=replicas, rank=rank, shuffle=shuffle,
                               seed=seed, drop_last=drop_last)
        s.set_epoch(epoch)
        indices = list(iter(s))
        assert len(indices) == len(s)
        return s, indices

    def key(n, replicas, seed, epoch, shuffle, drop_last):
        return f"n={n} replicas={replicas} seed={seed} epoch={epoch} shuffle={int(shuffle)} drop_last={int(drop_last)}"

    out = [f"# ouro sampler reference vectors, made by tests/sampler/make_reference.py with torch {torch.__version__}",
           "# (see that script for the line format; regenerate rather than edit)"]

    def sampler_line(n, replicas, seed, epoch, shuffle, drop_last):
        lists = [shard(n, replicas, r, seed, epoch, shuffle, drop_last)[1] for r in range(replicas)]
        out.append(f"sampler {key(n, replicas, seed, epoch, shuffle, drop_last)} ranks={';'.join(join(l) for l in lists)}")

    # Every small size against every replica count, both flags; seed and epoch rotate so all
    # sixteen pairs appear. Size 0 with drop_last is left out: ouro refuses it (PyTorch does not).
    sizes = [0, 1, 2, 3, 4, 5, 7, 8, 9, 11, 13, 16, 17, 31, 64, 97, 100]
    case = 0
    for n in sizes:
        for replicas in range(1, 9):
            for drop_last in (False, True):
                for shuffle in (True, False):
                    if n == 0 and drop_last:
                        continue
                    seed, epoch = SEED_EPOCHS[case % len(SEED_EPOCHS)]
                    case += 1
                    sampler_line(n, replicas, seed, epoch, shuffle, drop_last)
    # Every seed and epoch for two shapes, padded and with a dropped tail.
    for n, replicas in ((13, 3), (100, 8)):
        for seed, epoch in SEED_EPOCHS:
            for drop_last in (False, True):
                sampler_line(n, replicas, seed, epoch, True, drop_last)

    # Large datasets: each rank's list as length, hash and a few positions.
    for n, replicas, seed, epoch, shuffle, drop_last in (
            (10**6, 8, 42, 0, True, False),
            (10**6, 3, 2**32 + 5, 3, True, True),
            (10**6, 1, 0, 1, True, False),
            (999983, 7, 1, 2, True, False),   # prime: padding on every rank but one
            (999983, 8, 0, 3, True, True),    # prime: a dropped tail
            (10**6, 5, 0, 0, False, False)):
        for rank in range(replicas):
            _, indices = shard(n, replicas, rank, seed, epoch, shuffle, drop_last)
            out.append(f"hashed n={n} replicas={replicas} rank={rank} seed={seed} epoch={epoch} "
                       f"shuffle={int(shuffle)} drop_last={int(drop_last)} {compact(indices)}")

    # BatchSampler over one rank's DistributedSampler; the drop_last flags agree (as a
    # DataLoader passes them) except in the last block.
    case = 0
    batch_cases = [(n, replicas, bs, dl, dl) for n in (0, 1, 5, 23, 100) for replicas in (1, 3, 4)
                   for bs in (1, 3, 4, 8, 32) for dl in (False, True) if not (n == 0 and dl)]
    batch_cases += [(23, 3, 4, False, True), (23, 3, 4, True, False), (100, 4, 7, False, True),
                    (100, 3, 8, True, False)]
    for n, replicas, batch_size, drop_last, batch_drop_last in batch_cases:
        seed, epoch = SEED_EPOCHS[case % len(SEED_EPOCHS)]
        rank = case % replicas
        shuffle = case % 5 != 4
        case += 1
        s, _ = shard(n, replicas, rank, seed, epoch, shuffle, drop_last)
        batches = list(BatchSampler(s, batch_size, batch_drop_last))
        out.append(f"batch n={n} replicas={replicas} rank={rank} seed={seed} epoch={epoch} "
                   f"shuffle={int(shuffle)} drop_last={int(drop_last)} batch_size={batch_size} "
                   f"batch_drop_last={int(batch_drop_last)} batches={';'.join(join(b) for b in batches)}")

    # torch.randperm itself, and the same check of the torch-free forward shuffle that vouches
    # for the inside-out lines after it.
    def torch_randperm(n, seed):
        g = torch.Generator()
        g.manual_seed(seed)
        return torch.randperm(n, generator=g).tolist()

    perm_seeds = SEEDS + [2**64 - 1]
    for n in (0, 1, 2, 3, 10, 100):
        for seed in perm_seeds:
            perm = torch_randperm(n, seed)
            assert perm == randperm_python(n, seed, "forward"), (n, seed)
            out.append(f"randperm algorithm=forward n={n} seed={seed} perm={join(perm)}")
    for n, seed in ((10**6, 7), (3 * 10**6 + 1, 2**32 + 5)):
        out.append(f"randperm_hashed algorithm=forward n={n} seed={seed} {compact(torch_randperm(n, seed))}")
    assert torch_randperm(5000, 123) == randperm_python(5000, 123, "forward")

    for n in (0, 1, 2, 3, 10, 100):
        for seed in perm_seeds:
            out.append(f"randperm algorithm=inside_out n={n} seed={seed} perm={join(randperm_python(n, seed, 'inside_out'))}")
    for n, seed in ((100003, 42), (65536, 2**32 + 5)):
        out.append(f"randperm_hashed algorithm=inside_out n={n} seed={seed} "
                   f"{compact(randperm_python(n, seed, 'inside_out'))}")
    return "\n".join(out) + "\n"


def data_lines(text):
    return [line for line in text.splitlines() if line and not line.startswith("#")]


def live(test_exe):
    try:
        import torch
    except ImportError as e:
        print(f"skipped: torch cannot be imported by {sys.executable} ({e})")
        return 77
    text = generate(torch)
    with open(DEFAULT_OUT) as f:
        committed = data_lines(f.read())
    fresh = data_lines(text)
    if fresh != committed:
        for i, (a, b) in enumerate(zip(fresh, committed)):
            if a != b:
                print(f"torch {torch.__version__} disagrees with reference.txt at data line {i + 1}:\n"
                      f"  torch:     {a[:300]}\n  committed: {b[:300]}")
                break
        else:
            print(f"torch gives {len(fresh)} data lines, reference.txt has {len(committed)}")
        return 1
    with tempfile.NamedTemporaryFile("w", suffix=".txt", delete=False) as f:
        f.write(text)
        path = f.name
    try:
        env = dict(os.environ, OURO_SAMPLER_REFERENCE=path)
        return subprocess.run([test_exe, "[reference]"], env=env).returncode
    finally:
        os.unlink(path)


def main(argv):
    if len(argv) == 2 and argv[0] == "--live":
        return live(argv[1])
    out = DEFAULT_OUT
    if len(argv) == 2 and argv[0] == "--out":
        out = argv[1]
    elif argv:
        print(__doc__, file=sys.stderr)
        return 2
    import torch
    text = generate(torch)
    with open(out, "w") as f:
        f.write(text)
    print(f"wrote {len(data_lines(text))} vectors to {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
