#!/usr/bin/env python3
"""ouro's all-reduce at scale, by the cost model (issues #24 and #37): 8 to 4,096 hosts x 8 ranks,
8 B to 1 GiB, 100 Gbit/s and 2 us between hosts (the defaults of ouro-model). Runs bench/model's
ouro-model (the library's own comm/plan/cost_model.cpp) twice, once per reduction order
(OURO_ORDER=rank, the left fold ouro kept before issue #37, and OURO_ORDER=tree, the canonical tree
of kernels/common/canonical_order.hpp), and prints a markdown table of what the planner runs under
each beside NCCL's ring and tree under the same parameters, with the cost of the reproducibility
guarantee (ouro's time / NCCL's best); draws a PNG with gnuplot.

usage: bench/model/simulate.py [--model-bin build/bench/ouro-model] [--png FILE] [--model SPEC] [--check 1|0]
                               [--hosts 8,64,512,4096] [--all] (every power of two, not only the
                               issue's seven sizes)
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


def run_model(binary, order, spec, hosts, check):
    cmd = [binary, "--order", order, "--check", check]
    if spec:
        cmd += ["--model", spec]
    if hosts:
        cmd += ["--hosts", hosts]
    text = subprocess.run(cmd, check=True, capture_output=True, text=True).stdout
    lines = text.splitlines()
    head = lines[1].split("\t")
    rows = {}
    for line in lines[2:]:
        f = dict(zip(head, line.split("\t")))
        for k in list(f):
            if k not in ("planned", "best_ouro", "rules", "chosen"):
                f[k] = None if f[k] == "-" else float(f[k])
        rows[(int(f["hosts"]), int(f["bytes"]))] = f
    return lines[0].lstrip("# "), rows


def slice_note(r):
    if r["chosen"] in ("pairwise", "hierarchical", "halving-doubling") and r["chosen-slice"]:
        s = int(r["chosen-slice"])
        return f", {s >> 20} MiB slices" if s >= 1 << 20 else f", {s >> 10} KiB slices"
    return ""


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--model-bin", default="build/bench/ouro-model")
    ap.add_argument("--out", default="/tmp/ouro-model", help="the plot's data files")
    ap.add_argument("--png", default="bench/model/cost_of_guarantee.png")
    ap.add_argument("--model", default=None, help="model spec (tcp=ALPHA_US,GBPS;shm=...;reduce=GBPS;net=ib), passed to ouro-model")
    ap.add_argument("--all", action="store_true", help="every power of two from 8 B, not only the issue's sizes")
    ap.add_argument("--check", default="1", choices=["1", "0"],
                    help="price the call check's rounds (OURO_CHECK=1, the default) or the data alone")
    ap.add_argument("--hosts", default=None, help="host counts, e.g. 8,64,512,4096 (default: ouro-model's, 8 to 4096)")
    args = ap.parse_args()
    params, before = run_model(args.model_bin, "rank", args.model, args.hosts, args.check)
    _, after = run_model(args.model_bin, "tree", args.model, args.hosts, args.check)
    os.makedirs(args.out, exist_ok=True)

    print(f"Parameters: {params}\n")
    print("| hosts x 8 | size | before: the planner, rank order | after: the planner, tree order | "
          "after: rules (OURO_MODEL=off) | NCCL ring | NCCL tree | before / best NCCL | after / best NCCL |")
    print("|---|---|---|---|---|---|---|---|---|")
    dat = {}
    worst = {"all": 0.0, "large": 0.0}
    for (h, b), a in sorted(after.items()):
        r = before[(h, b)]
        nccl = min(x for x in (a["nccl-ring"], a["nccl-tree"]) if x is not None)
        ratio_before, ratio_after = r["chosen-s"] / nccl, a["chosen-s"] / nccl
        dat.setdefault(h, []).append((b, ratio_after, ratio_before, a["rules-s"] / nccl))
        if b in SIZES:
            worst["all"] = max(worst["all"], ratio_after)
            if b >= 256 << 20:
                worst["large"] = max(worst["large"], ratio_after)
        if b in SIZES or args.all:
            print(f"| {h} | {human(b)} | {us(r['chosen-s'])} ({r['chosen']}{slice_note(r)}) | "
                  f"{us(a['chosen-s'])} ({a['chosen']}{slice_note(a)}) | {us(a['rules-s'])} ({a['rules']}) | "
                  f"{us(a['nccl-ring'])} | {us(a['nccl-tree'])} | {ratio_before:.2f}x | **{ratio_after:.2f}x** |")
    print("\n(times in us; the planner's pick is the model's fastest of the algorithms that keep the order, where it "
          "beats the rules' plan by 1.25x, else the rules' plan)")
    print(f"\nafter, the issue's sizes: at most {worst['all']:.2f}x NCCL's best; from 256 MiB at most {worst['large']:.2f}x")
    for h, pts in dat.items():
        with open(os.path.join(args.out, f"ratio_{h}.dat"), "w") as f:
            for p in pts:
                f.write("%d %g %g %g\n" % p)
    png = args.png
    if shutil.which("gnuplot"):
        hosts = sorted(dat)
        plot = ", ".join(f"'{args.out}/ratio_{h}.dat' using 1:2 with linespoints lc {k + 1} title '{h} hosts'"
                         for k, h in enumerate(hosts))
        plot += ", " + ", ".join(f"'{args.out}/ratio_{h}.dat' using 1:3 with lines dt 2 lc {k + 1} notitle"
                                 for k, h in enumerate(hosts))
        script = f"""set terminal pngcairo size 1000,600 noenhanced
set output '{png}'
set logscale xy
set format x '%.0s%cB'
set xlabel 'bytes per rank'
set ylabel 'ouro (the planner) / best of NCCL ring, tree'
set title "Cost of the reproducibility guarantee by the model: all-reduce, H hosts x 8 ranks, 100 Gbit/s, 2 us\\n(solid: the canonical tree, OURO_ORDER=tree; dashed: the rank-order fold before issue #37)"
set key outside right
set grid
set arrow from graph 0, first 1.5 to graph 1, first 1.5 nohead dt 3 lc rgb 'gray'
plot {plot}
"""
        subprocess.run(["gnuplot"], input=script, text=True, check=True)
        print(f"\nplot: {png}", file=sys.stderr)
    else:
        print("gnuplot not found: no plot drawn", file=sys.stderr)


if __name__ == "__main__":
    main()
