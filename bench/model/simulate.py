#!/usr/bin/env python3
"""ouro's all-reduce at scale, by the cost model (issue #24): 8 to 4,096 hosts x 8 ranks, 8 B to
1 GiB, 100 Gbit/s and 2 us between hosts (the defaults of ouro-model). Runs bench/model's
ouro-model (the library's own comm/plan/cost_model.cpp), prints a markdown table of ouro's
algorithms beside NCCL's ring and tree under the same parameters, with the cost of the
reproducibility guarantee (ouro's best / NCCL's best), and draws a PNG with gnuplot.

usage: bench/model/simulate.py [--model-bin build/bench/ouro-model] [--png FILE] [--model SPEC]
"""
import argparse
import os
import shutil
import subprocess
import sys

SIZES = [8, 1 << 10, 64 << 10, 1 << 20, 16 << 20, 256 << 20, 1 << 30]


def human(b):
    for unit, f in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if b >= f:
            return f"{b // f} {unit}"
    return f"{b} B"


def us(t):
    if t is None:
        return "-"
    return f"{t * 1e6:,.0f}" if t >= 1e-4 else f"{t * 1e6:.1f}"


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--model-bin", default="build/bench/ouro-model")
    ap.add_argument("--out", default="/tmp/ouro-model", help="the plot's data files")
    ap.add_argument("--png", default="bench/model/cost_of_guarantee.png")
    ap.add_argument("--model", default=None, help="model spec (tcp=ALPHA_US,GBPS;shm=...;reduce=GBPS;net=ib), passed to ouro-model")
    args = ap.parse_args()
    cmd = [args.model_bin]
    if args.model:
        cmd += ["--model", args.model]
    text = subprocess.run(cmd, check=True, capture_output=True, text=True).stdout
    lines = text.splitlines()
    params = lines[0].lstrip("# ")
    head = lines[1].split("\t")
    rows = []
    for line in lines[2:]:
        f = dict(zip(head, line.split("\t")))
        for k in list(f):
            if k not in ("planned", "best_ouro"):
                f[k] = None if f[k] == "-" else float(f[k])
        rows.append(f)
    os.makedirs(args.out, exist_ok=True)

    def t(r, name):
        return r.get(name)

    print(f"Parameters: {params}\n")
    print("| hosts x 8 | size | ouro today (planner's pick) | ouro, model's pick | chain, model's slice | "
          "ordered chain, ideal window | NCCL ring | NCCL tree | cost of the guarantee (best ouro / best NCCL) |")
    print("|---|---|---|---|---|---|---|---|---|")
    dat = {}
    for r in rows:
        h, b = int(r["hosts"]), int(r["bytes"])
        today = t(r, r["planned"])
        best = t(r, r["best_ouro"])
        sliced = t(r, "hier-sliced")
        cands = [x for x in (best, sliced) if x is not None]
        ouro_best = min(cands)
        nccl = min(x for x in (t(r, "nccl-ring"), t(r, "nccl-tree")) if x is not None)
        ideal = t(r, "ideal-sliced")
        dat.setdefault(h, []).append((b, today / nccl, ouro_best / nccl, (ideal or ouro_best) / nccl))
        if b in SIZES:
            pick = r["best_ouro"] if best <= (sliced or 1e300) else f"hierarchical, {int(r['slice']) >> 10} KiB slices"
            print(f"| {h} | {human(b)} | {us(today)} ({r['planned']}) | {us(best)} ({r['best_ouro']}) | {us(sliced)} | "
                  f"{us(ideal)} | {us(t(r, 'nccl-ring'))} | {us(t(r, 'nccl-tree'))} | {ouro_best / nccl:.2f}x |")
    print("\n(times in us; 'cost of the guarantee' takes the faster of the model's pick and the chain with "
          "the model's slice)")
    for h, pts in dat.items():
        with open(os.path.join(args.out, f"ratio_{h}.dat"), "w") as f:
            for p in pts:
                f.write("%d %g %g %g\n" % p)
    png = args.png
    if shutil.which("gnuplot"):
        hosts = sorted(dat)
        plot = ", ".join(f"'{args.out}/ratio_{h}.dat' using 1:3 with linespoints title '{h} hosts'" for h in hosts)
        script = f"""set terminal pngcairo size 1000,600
set output '{png}'
set logscale xy
set format x '%.0s%cB'
set xlabel 'bytes per rank'
set ylabel 'best ouro / best NCCL (ring or tree), model'
set title 'Cost of the rank-order guarantee, all-reduce, H hosts x 8 ranks, 100 Gbit/s, 2 us'
set key outside right
set grid
plot {plot}
"""
        subprocess.run(["gnuplot"], input=script, text=True, check=True)
        print(f"\nplot: {png}", file=sys.stderr)
    else:
        print("gnuplot not found: no plot drawn", file=sys.stderr)


if __name__ == "__main__":
    main()
