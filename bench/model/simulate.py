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
            if k not in ("planned", "best_ouro", "rules", "chosen"):
                f[k] = None if f[k] == "-" else float(f[k])
        rows.append(f)
    os.makedirs(args.out, exist_ok=True)

    def t(r, name):
        return r.get(name)

    print(f"Parameters: {params}\n")
    print("| hosts x 8 | size | ouro, the planner (OURO_MODEL) | ouro, rules (OURO_MODEL=off) | ouro's fastest by the model | "
          "ordered chain, ideal | NCCL ring | NCCL tree | planner / best NCCL | fastest ouro / best NCCL |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    dat = {}
    for r in rows:
        h, b = int(r["hosts"]), int(r["bytes"])
        chosen, rules = r["chosen-s"], r["rules-s"]
        best = t(r, r["best_ouro"])
        sliced = t(r, "hier-sliced")
        fastest, fname = best, r["best_ouro"]
        if sliced is not None and sliced < fastest:
            fastest, fname = sliced, f"hierarchical, {int(r['slice']) >> 10} KiB slices"
        fastest = min(fastest, chosen)
        nccl = min(x for x in (t(r, "nccl-ring"), t(r, "nccl-tree")) if x is not None)
        ideal = t(r, "ideal-sliced")
        dat.setdefault(h, []).append((b, chosen / nccl, fastest / nccl, (ideal or fastest) / nccl, rules / nccl))
        if b in SIZES:
            print(f"| {h} | {human(b)} | {us(chosen)} ({r['chosen']}) | {us(rules)} ({r['rules']}) | {us(fastest)} ({fname}) | "
                  f"{us(ideal)} | {us(t(r, 'nccl-ring'))} | {us(t(r, 'nccl-tree'))} | {chosen / nccl:.2f}x | {fastest / nccl:.2f}x |")
    print("\n(times in us; the planner's pick is the model's fastest where it beats the rules' plan by 1.25x, else "
          "the rules' plan; 'fastest' also weighs the chain at the model's slice)")
    for h, pts in dat.items():
        with open(os.path.join(args.out, f"ratio_{h}.dat"), "w") as f:
            for p in pts:
                f.write("%d %g %g %g %g\n" % p)
    png = args.png
    if shutil.which("gnuplot"):
        hosts = sorted(dat)
        plot = ", ".join(f"'{args.out}/ratio_{h}.dat' using 1:2 with linespoints lc {k + 1} title '{h} hosts'"
                         for k, h in enumerate(hosts))
        plot += ", " + ", ".join(f"'{args.out}/ratio_{h}.dat' using 1:4 with lines dt 2 lc {k + 1} notitle"
                                 for k, h in enumerate(hosts))
        script = f"""set terminal pngcairo size 1000,600
set output '{png}'
set logscale xy
set format x '%.0s%cB'
set xlabel 'bytes per rank'
set ylabel 'ouro (the planner) / best of NCCL ring, tree'
set title "Cost of the rank-order guarantee by the model: all-reduce, H hosts x 8 ranks, 100 Gbit/s, 2 us\\n(solid: the planner's pick; dashed: the ordered chain on links between neighbours, not built)"
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
