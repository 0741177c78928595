#!/usr/bin/python3
"""What pinning OpenBLAS's kernels costs (trainer/model/blas_kernels.hpp; docs/TRAINING.md, "Bits
that do not depend on the CPU").

    bench/trainer/blas_kernels.py [--rounds N] [--steps K] [--baseline OURO_TRAIN] [--json FILE]

1. sgemm: OpenBLAS's rate (GFLOP/s, one thread) on the reference GPT's products ([B T, C] x [C, 4C],
   [B T, 4C] x [4C, C], [B T, C] x [C, 3C], B T = 2048, C = 128), under OpenBLAS's own choice for
   this CPU (OPENBLAS_CORETYPE unset) and under the pinned Haswell kernels, interleaved, each
   timed for about a second, in subprocesses (OpenBLAS reads the variable as it loads).
2. ouro-train: the reference GPT in one process for K steps (tokens/s from --json), the build's
   ouro-train (pinned whatever the environment) against --baseline, an ouro-train built before the
   pin (e.g. from a worktree at an older commit), run with OPENBLAS_CORETYPE unset (its CPU's own
   kernels) and Haswell; N rounds, interleaved, medians and each round's ratio.
Run it under `flock /tmp/ouro-shared.lock` on a shared machine, and report the load it prints.
"""

import argparse
import ctypes
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SHAPES = [(2048, 512, 128), (2048, 128, 512), (2048, 384, 128)]  # M, N, K


def time_sgemm():
    """In a subprocess: GFLOP/s of each shape, after a warm-up, about a second each."""
    blas = ctypes.CDLL("libopenblas.so.0")
    blas.openblas_set_num_threads(1)
    blas.openblas_get_corename.restype = ctypes.c_char_p
    rates = []
    for m, n, k in SHAPES:
        a, b, c = (ctypes.c_float * (m * k))(), (ctypes.c_float * (k * n))(), (ctypes.c_float * (m * n))()
        for i in range(m * k):
            a[i] = (i % 7) * 0.1
        for i in range(k * n):
            b[i] = (i % 5) * 0.1
        call = lambda: blas.cblas_sgemm(101, 111, 111, m, n, k, ctypes.c_float(1.0), a, k, b, n, ctypes.c_float(0.0), c, n)
        call()
        count, start = 0, time.perf_counter()
        while time.perf_counter() - start < 1.0:
            call()
            count += 1
        rates.append(2.0 * m * n * k * count / (time.perf_counter() - start) / 1e9)
    print(json.dumps({"core": blas.openblas_get_corename().decode(), "gflops": rates}))


def env_with(coretype):
    env = dict(os.environ)
    env.pop("OPENBLAS_CORETYPE", None)
    if coretype:
        env["OPENBLAS_CORETYPE"] = coretype
    return env


def train(binary, coretype, steps, work):
    out = f"{work}/run.json"
    subprocess.run([binary, "--model", "gpt", "--mode", "single", "--steps", str(steps), "--sample", "0",
                    "--log-every", "0", "--json", out], env=env_with(coretype), check=True,
                   stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, timeout=1800)
    with open(out) as f:
        return json.load(f)["tokens_per_s"]


def main():
    if sys.argv[1:] == ["--sgemm"]:
        time_sgemm()
        return
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--steps", type=int, default=20)
    p.add_argument("--ouro-train", default=os.path.join(os.environ.get("OURO_BUILD_DIR", f"{ROOT}/build"),
                                                        "tools/ouro-train/ouro-train"))
    p.add_argument("--baseline", help="an ouro-train built before the kernels were pinned")
    p.add_argument("--json")
    args = p.parse_args()
    load = [open("/proc/loadavg").read().split()[:3]]
    sgemm = {"own": [], "Haswell": []}
    for _ in range(args.rounds):
        for name, coretype in (("own", ""), ("Haswell", "Haswell")):
            r = subprocess.run([sys.executable, __file__, "--sgemm"], env=env_with(coretype), check=True,
                               stdout=subprocess.PIPE, text=True)
            sgemm[name].append(json.loads(r.stdout))
    print(f"# sgemm, one thread, GFLOP/s (median of {args.rounds}); OpenBLAS's own kernels here: {sgemm['own'][0]['core']}")
    print("| shape M x N x K | own | Haswell (pinned) | pinned / own |")
    print("|---|---:|---:|---:|")
    for i, (m, n, k) in enumerate(SHAPES):
        own = statistics.median(x["gflops"][i] for x in sgemm["own"])
        pinned = statistics.median(x["gflops"][i] for x in sgemm["Haswell"])
        print(f"| {m} x {n} x {k} | {own:.1f} | {pinned:.1f} | {pinned / own:.2f} |")
    runs = {}
    with tempfile.TemporaryDirectory(prefix="ouro-blas-bench-") as work:
        configs = [("pinned", args.ouro_train, "")]
        if args.baseline:
            configs += [("baseline own", args.baseline, ""), ("baseline Haswell", args.baseline, "Haswell")]
        for _ in range(args.rounds):
            for name, binary, coretype in configs:
                runs.setdefault(name, []).append(train(binary, coretype, args.steps, work))
    load.append(open("/proc/loadavg").read().split()[:3])
    print(f"# ouro-train reference GPT, one process, {args.steps} steps, tokens/s (median of {args.rounds}, range)")
    for name, values in runs.items():
        print(f"| {name} | {statistics.median(values):.0f} | {min(values):.0f}-{max(values):.0f} |")
    if args.baseline:
        ratios = [a / b for a, b in zip(runs["pinned"], runs["baseline own"])]
        print(f"# pinned / baseline with its CPU's own kernels, per round: {' '.join(f'{r:.3f}' for r in ratios)}; "
              f"median {statistics.median(ratios):.3f}")
    print(f"# load average {' '.join(load[0])} at the start, {' '.join(load[1])} at the end")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"sgemm": sgemm, "train": runs, "load": load, "steps": args.steps}, f, indent=1)


if __name__ == "__main__":
    main()
