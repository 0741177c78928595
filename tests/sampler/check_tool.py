#!/usr/bin/python3
"""ouro-sampler against the reference vectors, and its handling of bad arguments.

  check_tool.py OURO_SAMPLER REFERENCE_TXT
"""
import subprocess
import sys


def run(tool, *args):
    return subprocess.run([tool, *map(str, args)], capture_output=True, text=True)


def fields_of(line):
    kind, *rest = line.split(" ")
    return kind, dict(item.split("=", 1) for item in rest)


def sampler_args(f, rank):
    args = ["--size", f["n"], "--replicas", f["replicas"], "--rank", rank, "--seed", f["seed"], "--epoch", f["epoch"]]
    if f["drop_last"] == "1":
        args.append("--drop-last")
    if f["shuffle"] == "0":
        args.append("--no-shuffle")
    return args


def main(tool, reference):
    failures = []

    def expect(condition, what):
        if not condition:
            failures.append(what)

    with open(reference) as fh:
        vectors = [fields_of(line.rstrip("\n")) for line in fh if line.strip() and not line.startswith("#")]

    # Every 13th sampler vector (all ranks; 13 so that seeds, epochs and flags all rotate) and every batch vector whose two drop_last agree,
    # which is what the tool's single --drop-last means.
    checked = 0
    samplers = [f for kind, f in vectors if kind == "sampler"]
    for f in samplers[::13]:
        for rank, expected in enumerate(f["ranks"].split(";")):
            result = run(tool, *sampler_args(f, rank))
            want = expected.replace(",", " ") + "\n"
            expect(result.returncode == 0 and result.stdout == want,
                   f"{sampler_args(f, rank)}: got {result.stdout[:200]!r} rc={result.returncode}, want {want[:200]!r}")
            checked += 1
    for kind, f in vectors:
        if kind != "batch" or f["drop_last"] != f["batch_drop_last"]:
            continue
        args = sampler_args(f, f["rank"]) + ["--batch-size", f["batch_size"]]
        want = "".join(b.replace(",", " ") + "\n" for b in f["batches"].split(";")) if f["batches"] else ""
        result = run(tool, *args)
        expect(result.returncode == 0 and result.stdout == want,
               f"{args}: got {result.stdout[:200]!r} rc={result.returncode}, want {want[:200]!r}")
        checked += 1

    # Equivalent spellings.
    base = ["--size", 50, "--replicas", 3, "--rank", 1]
    plain = run(tool, *base, "--seed", 7).stdout
    expect(run(tool, "--size=50", "--replicas=3", "--rank=1", "--seed=7").stdout == plain, "--flag=value form")
    expect(run(tool, *base, "--seed", 4294967296 + 7).stdout == plain, "seed keeps its low 32 bits")
    expect(run(tool, *base, "--seed", -1).stdout == run(tool, *base, "--seed", 2**64 - 1).stdout,
           "negative seed is taken modulo 2^64")
    expect(run(tool, *base, "--pytorch", "1.13").stdout == run(tool, *base).stdout,
           "--pytorch 1.13 matches the default below the inside-out threshold")
    expect(run(tool, "--help").returncode == 0, "--help exits 0")

    # Bad arguments: exit 2 and a message naming the flag.
    for args, flag in (
            (["--replicas", 2, "--rank", 0], "--size"),
            (["--size", 10, "--rank", 0], "--replicas"),
            (["--size", 10, "--replicas", 2], "--rank"),
            ([*base[:4], "--rank", 3], "--rank"),
            (["--size", 10, "--replicas", 2, "--rank", -1], "--rank"),
            (["--size", 10, "--replicas", 0, "--rank", 0], "--replicas"),
            (["--size", -5, "--replicas", 2, "--rank", 0], "--size"),
            (["--size", "ten", "--replicas", 2, "--rank", 0], "--size"),
            (["--size", 0, "--replicas", 2, "--rank", 0, "--drop-last"], "--drop-last"),
            ([*base, "--batch-size", 0], "--batch-size"),
            ([*base, "--batch-size"], "--batch-size"),
            ([*base, "--epoch", "1.5"], "--epoch"),
            ([*base, "--seed", "x"], "--seed"),
            ([*base, "--pytorch", "two"], "--pytorch"),
            ([*base, "--drop-last=yes"], "--drop-last"),
            ([*base, "--shuffle"], "--shuffle")):
        result = run(tool, *args)
        expect(result.returncode == 2 and flag in result.stderr and "usage:" in result.stderr,
               f"{args}: rc={result.returncode} stderr={result.stderr[:200]!r} (want exit 2 naming {flag})")

    for failure in failures:
        print("FAIL:", failure)
    print(f"{checked} reference vectors through the tool, {len(failures)} failures")
    return 1 if failures or checked < 100 else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1], sys.argv[2]))
