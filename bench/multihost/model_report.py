#!/usr/bin/env python3
"""model_vs_measured.sh's helper: parameters in, results out (issue #24, "model against measurement").

  model_report.py rate --rate 1gbit                    the tc rate in GB/s (1e9 bytes/s)
  model_report.py spec --line '# model: ...' --rate-gbps G
        an OURO_MODEL spec from ouro-bench's "# model:" line (the probe's parameters), with the
        host link's rate capped at G (tbf's burst lets the probe's 256 KiB transfers pass at the
        veth's speed); --tcp-cpu-gbps C adds tcpcpu=C (the machine's CPUs priced)
        and --wake-us W adds wake=W (the wait behind each rank ahead of a woken one on its core)
  model_report.py wake --json RUN.json... --model-bin OURO_MODEL --hosts H --per-host L --cpus C --spec SPEC
        the model's wake (us a rank ahead of a woken one on its core) from 8-byte gather-fold runs
  model_report.py collect --json RUN.json --csv measured.csv --rate R --hosts H --per-host L
        --system S --spec SPEC --load LOAD          appends one CSV row per measured size
  model_report.py merge --into OUT --from OUT2 --systems "mpich"
        replaces those systems' rows of OUT/measured.csv by OUT2's, at the rates OUT2 measured
        (a rerun of some systems or rates)
  model_report.py report --dir OUT --model-bin BUILD/bench/ouro-model
        reads OUT/measured.csv, writes OUT/table.csv, OUT/report.md and OUT/model_vs_measured.png

Judged per point (configuration, size), as the issue asks:
  model error  = model time / measured time - 1 (target |error| <= 25%), for every ouro row
  planner      = the named run of the algorithm auto picked / the best named run (<= 1.10),
                 and auto's own run / the best named run
  wire         = at 256 MiB, auto's busbw / the model's link-rate limit for the algorithm it ran
                 (the model with no latency, free local links and folds: >= 90%); where the spec
                 prices the machine's CPUs (tcpcpu), also against that limit with them
  peers        = the best peer's time / auto's time (>= 2x), or auto's busbw within 10% of the
                 wire's limit (wire_busbw: the tbf rate x (2(n-1)/n) / (2(H-1)/H), what any
                 all-reduce gets when each host link carries its least, 2(H-1)/H S each way)
"""
import argparse
import csv
import json
import math
import os
import re
import shutil
import statistics
import subprocess
import sys

OURO_NAMED = ["pairwise", "hierarchical", "one-shot", "gather-fold", "doubling", "halving-doubling"]
PEERS = ["openmpi", "mpich", "gloo"]
FIELDS = ["rate", "hosts", "per_host", "ranks", "system", "size", "iters", "time_us", "busbw", "model_us",
          "model_busbw", "model_algo", "load1", "spec"]


def rate_gbps(rate):
    m = re.fullmatch(r"([0-9.]+)\s*([kmg]?)bit", rate.strip().lower())
    if not m:
        sys.exit(f"model_report.py: rate '{rate}' is not a tc rate such as 1gbit or 500mbit")
    return float(m.group(1)) * {"": 1, "k": 1e3, "m": 1e6, "g": 1e9}[m.group(2)] / 8e9


def spec_from_line(line, cap, alpha_us=None, tcp_cpu=0.0, wake_us=None):
    links = {k: (float(a), float(b)) for k, a, b in re.findall(r"\b(shm|tcp|ib) ([0-9.]+) us ([0-9.]+) GB/s", line)}
    red = re.search(r"reduce ([0-9.]+) GB/s", line)
    if "tcp" not in links or "shm" not in links or not red:
        sys.exit(f"model_report.py: cannot read the model's parameters from '{line}'")
    shm_a, shm_b = links["shm"]
    tcp_a, tcp_b = links["tcp"]
    if alpha_us is not None:
        tcp_a = alpha_us
    spec = f"shm={shm_a:g},{shm_b:g};tcp={tcp_a:g},{min(tcp_b, cap):g};reduce={float(red.group(1)):g};net=tcp"
    spec += f";tcpcpu={tcp_cpu:g}" if tcp_cpu > 0 else ""
    return spec + (f";wake={wake_us:g}" if wake_us is not None else "")


def model_time_us(model_bin, hosts, per_host, waiting, spec, algo):
    """ouro-model's time for one algorithm at 8 bytes, in us."""
    out = subprocess.run([model_bin, "--hosts", str(hosts), "--per-host", str(per_host), "--min", "8", "--max", "8",
                          "--waiting", f"{waiting:g}", "--model", spec], check=True, capture_output=True, text=True).stdout
    rows = [line.split("\t") for line in out.splitlines() if not line.startswith("#")]
    return float(rows[1][rows[0].index(algo)]) * 1e6


def wake(a):
    """The model's wake from measured 8-byte gather-folds (their median): the wake at which the model's time
    equals the measurement. Solved by bisection, not from the slope at wake=0..1 us: a message pays
    max(transfer, ranks waiting x wake), so the time is not linear in wake while small wakes hide behind
    the transfers (at 4 x 2, 4.9 us more for the first us of wake, 7.4 a us from 10 us on)."""
    runs = []
    for path in a.json:
        with open(path) as f:
            runs.append(json.load(f)["results"][0]["out_of_place"]["time_us"])
    waiting = max(0.0, a.hosts * a.per_host / a.cpus - 1)
    base = re.sub(r";wake=[^;]*", "", a.spec)

    def model(w):
        return model_time_us(a.model_bin, a.hosts, a.per_host, waiting, base + f";wake={w:g}", "gather-fold")

    lo, hi = 0.0, 1000.0  # us; the model's time grows with wake (a max of non-decreasing terms)
    t0, t_hi, measured = model(lo), model(hi), statistics.median(runs)
    if waiting <= 0 or t_hi <= t0:
        sys.exit(f"model_report.py: no ranks wait at {a.hosts}x{a.per_host} on {a.cpus} CPUs; wake cannot be measured there")
    if measured <= t0:
        hi = 0.0
    elif t_hi < measured:
        lo = hi
    else:
        for _ in range(30):  # to 1e-6 of the range
            mid = (lo + hi) / 2
            lo, hi = (mid, hi) if model(mid) < measured else (lo, mid)
    w = hi
    print(f"{a.hosts}x{a.per_host} on {a.cpus} CPUs ({waiting:g} ranks waiting a core): gather-fold 8 B measured "
          f"{measured:.1f} us (median of {' '.join(f'{t:.1f}' for t in runs)}), model {t0:.1f} us at wake=0 and "
          f"{model(w):.1f} us at wake={w:.2f}: wake={w:.2f}")


def collect(a):
    with open(a.json) as f:
        run = json.load(f)
    new = not os.path.exists(a.csv)
    with open(a.csv, "a", newline="") as f:
        w = csv.DictWriter(f, FIELDS)
        if new:
            w.writeheader()
        for r in run["results"]:
            oop = r.get("out_of_place")
            if not oop:
                continue
            m = r.get("model") or {}
            w.writerow({"rate": a.rate, "hosts": a.hosts, "per_host": a.per_host, "ranks": run["nranks"],
                        "system": a.system, "size": r["size"], "iters": r["iters"], "time_us": oop["time_us"],
                        "busbw": oop["busbw"], "model_us": m.get("time_us") if m.get("time_us") is not None else "",
                        "model_busbw": m.get("busbw") if m.get("busbw") is not None else "",
                        "model_algo": m.get("algorithm") or "", "load1": a.load,
                        "spec": a.spec if a.system not in PEERS else ""})


def merge(a):
    systems = set(a.systems.split())
    new = [r for r in csv.DictReader(open(os.path.join(a.src, "measured.csv"))) if r["system"] in systems]
    if not new:
        sys.exit(f"model_report.py: {a.src}/measured.csv has no rows of {sorted(systems)}")
    replaced = {(r["system"], r["rate"]) for r in new}  # only the rates the rerun measured
    keep = [r for r in csv.DictReader(open(os.path.join(a.into, "measured.csv")))
            if (r["system"], r["rate"]) not in replaced]
    with open(os.path.join(a.into, "measured.csv"), "w", newline="") as f:
        w = csv.DictWriter(f, FIELDS)
        w.writeheader()
        w.writerows(keep + new)
    print(f"{len(new)} rows of {sorted(systems)} from {a.src}", file=sys.stderr)


def human(b):
    for unit, f in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if b >= f and b % f == 0:
            return f"{b // f} {unit}"
    return f"{b} B"


def fmt_us(t):
    if t is None:
        return "-"
    return f"{t:,.0f}" if t >= 100 else f"{t:.1f}"


def wire_busbw(rate, hosts, per_host):
    """The most busbw any all-reduce gets through host links of this rate: every host's link must
    carry at least 2(H-1)/H S each way (its share of the reduce-scatter and the all-gather between
    hosts), and busbw counts 2(n-1)/n S per rank."""
    n = hosts * per_host
    return rate_gbps(rate) * (2 * (n - 1) / n) / (2 * (hosts - 1) / hosts)


def link_limit(model_bin, hosts, per_host, rate, algo, size, tcp_cpu=0.0, cpus=0):
    """The model's busbw for `algo` with only the host link's rate: no latency, free local links and folds.
    With tcp_cpu and cpus: the machine's CPUs carrying every host's TCP too (the spec's tcpcpu)."""
    spec = f"net=tcp;tcp=0.001,{rate_gbps(rate):g};shm=0.001,100000;reduce=100000;tcpcpu={tcp_cpu:g}"
    out = subprocess.run([model_bin, "--hosts", str(hosts), "--per-host", str(per_host), "--min", str(size),
                          "--max", str(size), "--model", spec, "--cpus", str(cpus if tcp_cpu > 0 else 0)],
                         check=True, capture_output=True, text=True).stdout
    lines = out.splitlines()
    head = lines[1].split("\t")
    row = dict(zip(head, lines[2].split("\t")))
    cands = [row.get(algo)] + ([row.get("hier-sliced")] if algo == "hierarchical" else [])
    t = min(float(x) for x in cands if x and x != "-")
    n = hosts * per_host
    return 2 * (n - 1) / n * size / t / 1e9


def load(path):
    rows = []
    with open(path) as f:
        for r in csv.DictReader(f):
            for k in ("hosts", "per_host", "ranks", "size", "iters"):
                r[k] = int(r[k])
            for k in ("time_us", "busbw", "model_us", "model_busbw", "load1"):
                r[k] = float(r[k]) if r[k] not in ("", None) else None
            rows.append(r)
    return rows


def report(a):
    rows = load(os.path.join(a.dir, "measured.csv"))
    cpus = 0  # the machine's CPUs (machine.txt: "N CPUs; ..."), for the limit with tcpcpu
    if os.path.exists(os.path.join(a.dir, "machine.txt")):
        m = re.match(r"(\d+) CPUs", open(os.path.join(a.dir, "machine.txt")).read())
        cpus = int(m.group(1)) if m else 0
    # (rate, hosts, per_host) -> size -> system -> row; named ouro rows only where that algorithm ran.
    # A point measured more than once (model_vs_measured.sh --repeat) counts by its median time.
    pts = {}
    for r in rows:
        if r["system"] in OURO_NAMED and r["model_algo"] != r["system"]:
            continue
        pts.setdefault((r["rate"], r["hosts"], r["per_host"]), {}).setdefault(r["size"], {}).setdefault(r["system"], []).append(r)
    for sizes in pts.values():
        for systems in sizes.values():
            for s, runs in systems.items():
                runs.sort(key=lambda r: r["time_us"])
                systems[s] = dict(runs[(len(runs) - 1) // 2], repeats=len(runs),
                                  spread=(runs[0]["time_us"], runs[-1]["time_us"]))
    table = []
    for cfg in sorted(pts, key=lambda c: (rate_gbps(c[0]), c[1], c[2])):
        for size in sorted(pts[cfg]):
            sysrows = pts[cfg][size]
            auto = sysrows.get("auto")
            named = {s: sysrows[s] for s in OURO_NAMED if s in sysrows}
            peers = {s: sysrows[s] for s in PEERS if s in sysrows}
            best_named = min(named, key=lambda s: named[s]["time_us"]) if named else None
            best_peer = min(peers, key=lambda s: peers[s]["time_us"]) if peers else None
            t = {"rate": cfg[0], "hosts": cfg[1], "per_host": cfg[2], "size": size}
            if auto:
                t.update(auto_us=auto["time_us"], auto_busbw=auto["busbw"], model_us=auto["model_us"],
                         pick=auto["model_algo"], load1=auto["load1"], auto_repeats=auto["repeats"],
                         auto_spread=auto["spread"])
                if auto["model_us"]:
                    t["model_err"] = auto["model_us"] / auto["time_us"] - 1
            for s, r in named.items():
                t[f"{s}_us"] = r["time_us"]
                if r["model_us"]:
                    t[f"{s}_model_err"] = r["model_us"] / r["time_us"] - 1
            if best_named:
                t["best_algo"], t["best_us"] = best_named, named[best_named]["time_us"]
                if auto:
                    t["auto_over_best"] = auto["time_us"] / t["best_us"]
                    if auto["model_algo"] in named:
                        t["pick_over_best"] = named[auto["model_algo"]]["time_us"] / t["best_us"]
            for s, r in peers.items():
                t[f"{s}_us"] = r["time_us"]
            if best_peer:
                t["best_peer"], t["best_peer_us"] = best_peer, peers[best_peer]["time_us"]
                if auto:
                    t["peer_over_auto"] = t["best_peer_us"] / auto["time_us"]
                    t["wire_busbw"] = wire_busbw(cfg[0], cfg[1], cfg[2])
                    t["auto_of_wire"] = auto["busbw"] / t["wire_busbw"]
            if auto and size == max(pts[cfg]) and size >= (256 << 20):
                lim = link_limit(a.model_bin, cfg[1], cfg[2], cfg[0], auto["model_algo"], size)
                t["limit_busbw"], t["auto_of_limit"] = lim, auto["busbw"] / lim
                m = re.search(r"tcpcpu=([0-9.]+)", auto["spec"] or "")
                if m and float(m.group(1)) > 0 and cpus:
                    lim = link_limit(a.model_bin, cfg[1], cfg[2], cfg[0], auto["model_algo"], size, float(m.group(1)), cpus)
                    t["cpu_limit_busbw"], t["auto_of_cpu_limit"] = lim, auto["busbw"] / lim
            table.append(t)

    cols = ["rate", "hosts", "per_host", "size", "load1", "pick", "auto_us", "model_us", "model_err", "auto_busbw",
            "best_algo", "best_us", "pick_over_best", "auto_over_best"] + \
           [f"{s}_us" for s in OURO_NAMED] + [f"{s}_model_err" for s in OURO_NAMED] + \
           [f"{s}_us" for s in PEERS] + ["best_peer", "best_peer_us", "peer_over_auto", "wire_busbw", "auto_of_wire",
                                         "limit_busbw", "auto_of_limit", "cpu_limit_busbw", "auto_of_cpu_limit"]
    with open(os.path.join(a.dir, "table.csv"), "w", newline="") as f:
        w = csv.DictWriter(f, cols, extrasaction="ignore")
        w.writeheader()
        for t in table:
            w.writerow({k: (f"{v:.6g}" if isinstance(v, float) else v) for k, v in t.items()})

    md = []
    md.append("| config | size | auto: measured us (median [range] of the runs; algorithm) | model us (error) | best named (us) | pick / best | "
              "auto / best | best peer (us) | best peer / auto | auto busbw (of the wire) |")
    md.append("|---|---|---|---|---|---|---|---|---|---|")
    for t in table:
        cfg = f"{t['hosts']}x{t['per_host']} {t['rate']}"
        pct = lambda x: "-" if x is None else f"{x * 100:+.0f}%"
        ratio = lambda x: "-" if x is None else f"{x:.2f}"
        spread = ""
        if (t.get("auto_repeats") or 1) > 1:
            spread = f" [{fmt_us(t['auto_spread'][0])}-{fmt_us(t['auto_spread'][1])}, {t['auto_repeats']} runs]"
        md.append(f"| {cfg} | {human(t['size'])} | {fmt_us(t.get('auto_us'))}{spread} ({t.get('pick', '-')}) | "
                  f"{fmt_us(t.get('model_us'))} ({pct(t.get('model_err'))}) | "
                  f"{t.get('best_algo', '-')} ({fmt_us(t.get('best_us'))}) | {ratio(t.get('pick_over_best'))} | "
                  f"{ratio(t.get('auto_over_best'))} | {t.get('best_peer', '-')} ({fmt_us(t.get('best_peer_us'))}) | "
                  f"{ratio(t.get('peer_over_auto'))}x | "
                  f"{t.get('auto_busbw', 0):.3f} ({(t.get('auto_of_wire') or 0) * 100:.0f}%) |")

    # One line per configuration: how many points meet each target.
    summ = ["| config | load avg | points | model within 25% (auto) | all ouro rows within 25% | median abs error | "
            "pick within 10% of best | auto within 10% of best | 256 MiB busbw / limit | >= 2x best peer | "
            "2x or >= 90% of wire |", "|---|---|---|---|---|---|---|---|---|---|---|"]
    for cfg in sorted(pts, key=lambda c: (rate_gbps(c[0]), c[1], c[2])):
        ts = [t for t in table if (t["rate"], t["hosts"], t["per_host"]) == cfg]
        errs = [t["model_err"] for t in ts if t.get("model_err") is not None]
        all_errs = [t[k] for t in ts for k in ["model_err"] + [f"{s}_model_err" for s in OURO_NAMED]
                    if t.get(k) is not None]
        picks = [t["pick_over_best"] for t in ts if t.get("pick_over_best") is not None]
        autos = [t["auto_over_best"] for t in ts if t.get("auto_over_best") is not None]
        peer = [t["peer_over_auto"] for t in ts if t.get("peer_over_auto") is not None]
        wire_ok = [t for t in ts if t.get("peer_over_auto") is not None and
                   (t["peer_over_auto"] >= 2 or (t.get("auto_of_wire") or 0) >= 0.9)]
        loads = [r["load1"] for r in rows if (r["rate"], r["hosts"], r["per_host"]) == cfg and r["load1"] is not None]
        lim = [t for t in ts if t.get("auto_of_limit") is not None]
        limtxt = "not run"
        if lim:
            l0 = lim[0]
            limtxt = f"{l0['auto_busbw']:.3f} / {l0['limit_busbw']:.3f} = {l0['auto_of_limit'] * 100:.0f}%"
            if l0.get("auto_of_cpu_limit") is not None:
                limtxt += f" (with the CPUs: / {l0['cpu_limit_busbw']:.3f} = {l0['auto_of_cpu_limit'] * 100:.0f}%)"
        frac = lambda xs, ok: f"{sum(1 for x in xs if ok(x))}/{len(xs)}" if xs else "-"
        summ.append(
            f"| {cfg[1]}x{cfg[2]} {cfg[0]} | {min(loads):.1f}-{max(loads):.1f} | {len(ts)} | "
            f"{frac(errs, lambda e: abs(e) <= 0.25)} | {frac(all_errs, lambda e: abs(e) <= 0.25)} | "
            f"{(statistics.median(abs(e) for e in errs) * 100 if errs else float('nan')):.0f}% | "
            f"{frac(picks, lambda x: x <= 1.10)} | {frac(autos, lambda x: x <= 1.10)} | "
            f"{limtxt} | "
            f"{frac(peer, lambda x: x >= 2)} | {len(wire_ok)}/{len(peer)} |")

    extra = []
    for name in ("specs.txt", "probes.txt", "skipped.txt", "machine.txt"):
        p = os.path.join(a.dir, name)
        if os.path.exists(p) and os.path.getsize(p):
            extra.append(f"{name}:\n\n" + "".join("    " + line for line in open(p)))
    for p in sorted(os.listdir(a.dir)):
        if p.startswith(("pingpong-", "exchange-", "wake-")):
            extra.append(f"{p}: {open(os.path.join(a.dir, p)).read().strip()}")
    with open(os.path.join(a.dir, "report.md"), "w") as f:
        f.write("\n".join(summ) + "\n\n" + "\n".join(md) + "\n\n" + "\n\n".join(extra) + "\n")
    plot(a, pts)
    print(open(os.path.join(a.dir, "report.md")).read())


def plot(a, pts):
    """Time against size per configuration: auto measured, the model's time for it, the best named
    algorithm, each peer; one panel per configuration (gnuplot multiplot)."""
    if not shutil.which("gnuplot"):
        print("gnuplot not found: no plot drawn", file=sys.stderr)
        return
    cfgs = sorted(pts, key=lambda c: (rate_gbps(c[0]), c[1], c[2]))
    dat = os.path.join(a.dir, "plot")
    os.makedirs(dat, exist_ok=True)
    series = ["auto", "model", "best-named"] + PEERS
    for cfg in cfgs:
        name = f"{cfg[0]}-{cfg[1]}x{cfg[2]}"
        with open(os.path.join(dat, name + ".dat"), "w") as f:
            for size in sorted(pts[cfg]):
                s = pts[cfg][size]
                named = [s[n]["time_us"] for n in OURO_NAMED if n in s]
                vals = [s["auto"]["time_us"] if "auto" in s else None,
                        s["auto"]["model_us"] if "auto" in s and s["auto"]["model_us"] else None,
                        min(named) if named else None] + [s[p]["time_us"] if p in s else None for p in PEERS]
                f.write(f"{size} " + " ".join("NaN" if v is None else f"{v:g}" for v in vals) + "\n")
    ncol = 4
    nrow = math.ceil(len(cfgs) / ncol)
    styles = ["lp pt 7 lw 2 lc rgb '#1f77b4'", "l dt 2 lw 2 lc rgb '#000000'", "lp pt 6 lc rgb '#17becf'",
              "lp pt 4 lc rgb '#d62728'", "lp pt 8 lc rgb '#ff7f0e'", "lp pt 10 lc rgb '#2ca02c'"]
    titles = ["ouro auto", "model (the planned algorithm)", "best named ouro algorithm", "Open MPI", "MPICH", "Gloo"]
    out = os.path.join(a.dir, "model_vs_measured.png")
    g = [f"set terminal pngcairo size {420 * ncol},{330 * nrow + 60} font ',9'", f"set output '{out}'",
         "set logscale xy", "set xtics (\"8\" 8, \"512\" 512, \"32K\" 32768, \"2M\" 2097152, \"128M\" 134217728)",
         "set xrange [4:512*1024*1024]", "set grid", "set key top left font ',7'",
         f"set multiplot layout {nrow},{ncol} title 'float32 all\\_reduce across namespace hosts: time (us) "
         "against bytes per rank, measured and by the model'"]
    for i, cfg in enumerate(cfgs):
        f = os.path.join(dat, f"{cfg[0]}-{cfg[1]}x{cfg[2]}.dat")
        g.append(f"set title '{cfg[1]} hosts x {cfg[2]}, tbf {cfg[0]}'")
        g.append("unset key" if i else "set key top left font ',7'")
        g.append("plot " + ", ".join(f"'{f}' using 1:{k + 2} with {styles[k]} title '{titles[k]}'"
                                     for k in range(len(series))))
    g.append("unset multiplot")
    subprocess.run(["gnuplot"], input="\n".join(g) + "\n", text=True, check=True)
    print(f"plot: {out}", file=sys.stderr)


def main():
    ap = argparse.ArgumentParser()
    sub = ap.add_subparsers(dest="cmd", required=True)
    p = sub.add_parser("rate")
    p.add_argument("--rate", required=True)
    p = sub.add_parser("spec")
    p.add_argument("--line", required=True)
    p.add_argument("--rate-gbps", type=float, required=True)
    p.add_argument("--alpha-us", default="probe", help="the host link's latency in us, or 'probe' (the line's)")
    p.add_argument("--tcp-cpu-gbps", type=float, default=0.0, help="tcpcpu: TCP a CPU carries (0: not priced)")
    p.add_argument("--wake-us", default="", help="wake: the wait behind each rank ahead on a core ('': the library's)")
    p = sub.add_parser("wake")
    p.add_argument("--json", nargs="+", required=True)
    p.add_argument("--model-bin", required=True)
    p.add_argument("--hosts", type=int, required=True)
    p.add_argument("--per-host", type=int, required=True)
    p.add_argument("--cpus", type=int, required=True)
    p.add_argument("--spec", required=True)
    p = sub.add_parser("collect")
    for k in ("json", "csv", "rate", "hosts", "per-host", "system", "spec", "load"):
        p.add_argument("--" + k, required=True)
    p = sub.add_parser("merge")
    p.add_argument("--into", required=True)
    p.add_argument("--from", dest="src", required=True)
    p.add_argument("--systems", required=True)
    p = sub.add_parser("report")
    p.add_argument("--dir", required=True)
    p.add_argument("--model-bin", required=True)
    a = ap.parse_args()
    if a.cmd == "rate":
        print(f"{rate_gbps(a.rate):g}")
    elif a.cmd == "spec":
        print(spec_from_line(a.line, a.rate_gbps, None if a.alpha_us == "probe" else float(a.alpha_us), a.tcp_cpu_gbps,
                             float(a.wake_us) if a.wake_us else None))
    elif a.cmd == "wake":
        wake(a)
    elif a.cmd == "collect":
        collect(a)
    elif a.cmd == "merge":
        merge(a)
    else:
        report(a)


if __name__ == "__main__":
    main()
