"""compare.py's outputs: results.csv, runs.csv, summary.md and the gnuplot PNGs.

Kept apart from the runner so the report can be read and tested without running anything: it
takes RunRecords (compare.py) whose `results` are entries of ouro-bench's JSON "results" list
(harness.hpp), from JSON or from the table parser.

The ratio column answers the issue's question, "how does ouro compare with the best peer at
this size": best = the non-ouro system with the smallest time per op at that size (same size,
count and world size for all, so also the highest busbw); ouro/best = best time / ouro time,
i.e. ouro's busbw over the best peer's: above 1 ouro is faster.
"""

from __future__ import annotations

import csv
import dataclasses
import datetime
import math
import os
import shutil
import subprocess
from pathlib import Path

CSV_COLUMNS = ["system", "collective", "nranks", "dtype", "placement", "size_bytes", "count",
               "time_us", "algbw", "busbw", "wrong", "repeat"]
RUN_COLUMNS = ["system", "collective", "nranks", "status", "rc", "seconds", "sizes", "source",
               "log", "note", "repeat"]
PLACEMENTS = (("out_of_place", "out"), ("in_place", "in"))


@dataclasses.dataclass
class RunInfo:
    argv: list
    build: str
    ranks: list
    collectives: list
    systems: list
    dtype: str
    placement: str  # out | in | both
    sizes: str
    iterations: str
    wall_s: float
    src_root: str
    load: tuple = (None, None)  # 1-minute load average before the first run and after the last


# ---------------------------------------------------------------- machine and formatting

def machine_info(src_root: str) -> list:
    """(label, value) pairs describing where the numbers were taken."""
    def read(path):
        try:
            return Path(path).read_text(errors="replace")
        except OSError:
            return ""
    cpu = next((ln.split(":", 1)[1].strip() for ln in read("/proc/cpuinfo").splitlines()
                if ln.startswith("model name")), "unknown")
    mem_kib = next((int(ln.split()[1]) for ln in read("/proc/meminfo").splitlines()
                    if ln.startswith("MemTotal:")), 0)
    os_name = next((ln.split("=", 1)[1].strip('"') for ln in read("/etc/os-release").splitlines()
                    if ln.startswith("PRETTY_NAME=")), "")
    try:
        usable = len(os.sched_getaffinity(0))
    except AttributeError:
        usable = os.cpu_count()
    info = [("date", datetime.datetime.now().astimezone().isoformat(timespec="seconds")),
            ("host", os.uname().nodename),
            ("cpu", f"{cpu}, {usable} usable cores (nproc)"),
            ("memory", f"{mem_kib / 1048576:.1f} GiB"),
            ("kernel", f"{os.uname().sysname} {os.uname().release}" + (f", {os_name}"
                                                                        if os_name else ""))]
    try:
        rev = subprocess.run(["git", "-C", src_root, "rev-parse", "--short", "HEAD"],
                             capture_output=True, text=True, timeout=10)
        dirty = subprocess.run(["git", "-C", src_root, "status", "--porcelain",
                                "--untracked-files=no"], capture_output=True, text=True,
                               timeout=10)
        if rev.returncode == 0:
            info.append(("ouro commit", rev.stdout.strip()
                         + (" (with uncommitted changes)" if dirty.stdout.strip() else "")))
    except (OSError, subprocess.TimeoutExpired):
        pass
    return info


def load_average():
    """1-minute load average, or None where /proc/loadavg is missing."""
    try:
        return float(Path("/proc/loadavg").read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return None


def human_size(n: int) -> str:
    for unit, scale in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n >= scale and n % scale == 0:
            return f"{n // scale} {unit}"
    return f"{n} B"


def fmt_us(v) -> str:
    if v is None:
        return "-"
    return f"{v:.2f}" if v < 10 else f"{v:.1f}" if v < 1000 else f"{v:.0f}"


def fmt_bw(v) -> str:
    if v is None:
        return "-"
    return f"{v:.3f}" if v < 10 else f"{v:.2f}" if v < 100 else f"{v:.1f}"


def md_table(header: list, rows: list, text_columns=()) -> str:
    """A markdown table padded to aligned columns, so it reads as well on a terminal. Columns
    whose index is in `text_columns` are left-aligned; the rest hold numbers (right)."""
    widths = [max(len(str(c)) for c in col) for col in zip(header, *rows)]
    def line(cells):
        return "| " + " | ".join(str(c).ljust(w) if i in text_columns else str(c).rjust(w)
                                 for i, (c, w) in enumerate(zip(cells, widths))) + " |"
    sep = "|" + "|".join(":" + "-" * (w + 1) if i in text_columns else "-" * (w + 1) + ":"
                         for i, w in enumerate(widths)) + "|"
    return "\n".join([line(header), sep] + [line(r) for r in rows])


# ---------------------------------------------------------------- data selection

def primary_placement(placement: str) -> str:
    """The placement the summary and plots show: out-of-place unless only in-place ran."""
    return "in_place" if placement == "in" else "out_of_place"


def series(records, collective: str, nranks: int, placement_key: str) -> dict:
    """{system: {size: (time_us, busbw, wrong)}} for one summary table, in run order.

    With several runs of a system (--repeat), each size shows the run with the median time
    (the lower middle one for an even count: a time that was measured, with its own busbw), and
    counts as wrong if any run was."""
    runs = {}
    for rec in records:
        if rec.collective != collective or rec.nranks != nranks or not rec.results:
            continue
        for r in rec.results:
            m = r.get(placement_key)
            if not m or m.get("time_us") is None:
                continue
            point = (float(m["time_us"]), m.get("busbw"), m.get("wrong"))
            runs.setdefault(rec.system, {}).setdefault(int(r["size"]), []).append(point)
    out = {}
    for system, sizes in runs.items():
        out[system] = {}
        for size, points in sizes.items():
            points.sort(key=lambda p: p[0])
            t, bw, _ = points[(len(points) - 1) // 2]
            wrong = next((p[2] for p in points if p[2]), points[0][2])
            out[system][size] = (t, bw, wrong)
    return out


def best_peer(data: dict, size: int, ouro_systems) -> tuple:
    """(name, time_us) of the fastest non-ouro system at `size` with right results."""
    best = (None, None)
    for system, points in data.items():
        if system in ouro_systems or size not in points:
            continue
        t, _, wrong = points[size]
        if wrong:  # a wrong answer is not a time to beat
            continue
        if best[1] is None or t < best[1]:
            best = (system, t)
    return best


# ---------------------------------------------------------------- outputs

def write_csv(out: Path, records) -> None:
    with open(out / "results.csv", "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(CSV_COLUMNS)
        for rec in records:
            for r in rec.results:
                for key, short in PLACEMENTS:
                    m = r.get(key)
                    if not m:
                        continue
                    w.writerow([rec.system, rec.collective, rec.nranks, r.get("type", ""), short,
                                r.get("size"), r.get("count"), _cell(m.get("time_us")),
                                _cell(m.get("algbw")), _cell(m.get("busbw")),
                                _cell(m.get("wrong")), rec.repeat])
    with open(out / "runs.csv", "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(RUN_COLUMNS)
        for rec in records:
            w.writerow([rec.system, rec.collective, rec.nranks, rec.status,
                        "" if rec.rc is None else rec.rc, f"{rec.seconds:.2f}",
                        len(rec.results), rec.source, rec.log, rec.note, rec.repeat])


def _cell(v):
    # Six significant digits: the harness's own precision, without float noise in the CSV.
    if v is None:
        return ""
    return f"{v:.6g}" if isinstance(v, float) else v


def summary_table(records, collective: str, nranks: int, placement_key: str,
                  ouro_systems) -> tuple:
    """-> (markdown text, data) for one collective x world size."""
    data = series(records, collective, nranks, placement_key)
    if not data:
        return "No system produced results.", data
    systems = list(data)
    has_ouro = "ouro" in data
    has_peer = any(s not in ouro_systems for s in systems)
    header = ["size"]
    for s in systems:
        header += [f"{s} us", f"{s} GB/s"]
    if has_peer:
        header += ["best peer"]
        if has_ouro:
            header += ["ouro/best"]
    rows, ratios = [], []
    for size in sorted({sz for pts in data.values() for sz in pts}):
        row = [human_size(size)]
        for s in systems:
            t, bw, wrong = data[s].get(size, (None, None, None))
            flag = " !" if wrong else ""  # wrong elements: shown, never the best
            row += [fmt_us(t) + flag, fmt_bw(bw) + flag]
        if has_peer:
            name, t_best = best_peer(data, size, ouro_systems)
            row.append(name or "-")
            if has_ouro:
                t_ouro, _, wrong = data["ouro"].get(size, (None, None, None))
                if t_best and t_ouro and not wrong:
                    ratio = t_best / t_ouro
                    ratios.append((ratio, size))
                    row.append(f"{ratio:.3g}x")
                else:
                    row.append("-")
        rows.append(row)
    text = md_table(header, rows)
    if ratios:
        geo = math.exp(sum(math.log(r) for r, _ in ratios) / len(ratios))
        lo, hi = min(ratios), max(ratios)
        text += (f"\n\nouro/best peer (busbw ratio, above 1 = ouro faster): geometric mean "
                 f"{geo:.3g}x over {len(ratios)} sizes; lowest {lo[0]:.3g}x at "
                 f"{human_size(lo[1])}, highest {hi[0]:.3g}x at {human_size(hi[1])}.")
    binding = binding_note(data)
    if binding:
        text += "\n\n" + binding
    if any(w for pts in data.values() for (_, _, w) in pts.values()):
        text += "\n\n`!` marks sizes where the check found wrong elements."
    return text, data


def binding_note(data: dict) -> str:
    """The PyTorch backend's targets (issue #12), when torch-ouro ran beside torch (gloo): busbw
    at least 5x gloo's from 1 MiB, 8-byte latency at most a tenth of gloo's, and at least 80% of
    the C API's (system ouro) busbw from 16 MiB. Ratios of times: every system moves the same bytes."""
    if "torch-ouro" not in data or "torch" not in data:
        return ""
    mine, gloo, capi = data["torch-ouro"], data["torch"], data.get("ouro", {})

    def ratios(other, min_size, invert=False):
        out = []
        for size, (t, _, wrong) in sorted(mine.items()):
            if size < min_size or size not in other or wrong or other[size][2]:
                continue
            t_other = other[size][0]
            if t and t_other:
                out.append((t / t_other if invert else t_other / t, size))
        return out

    def worst(rs, lowest=True):
        r, size = (min if lowest else max)(rs)
        return f"{r:.3g}x at {human_size(size)}"

    lines = []
    over_gloo = ratios(gloo, 1 << 20)
    if over_gloo:
        ok = all(r >= 5 for r, _ in over_gloo)
        lines.append(f"torch-ouro/torch busbw from 1 MiB: lowest {worst(over_gloo)} (target 5x: "
                     f"{'met' if ok else 'missed'})")
    small = ratios(gloo, 0, invert=True)
    if small and small[0][1] <= 8:
        r, size = small[0]
        lines.append(f"torch-ouro/torch latency at {human_size(size)}: {r:.3g}x (target at most 0.1x: "
                     f"{'met' if r <= 0.1 else 'missed'})")
    of_capi = ratios(capi, 16 << 20)
    if of_capi:
        ok = all(r >= 0.8 for r, _ in of_capi)
        lines.append(f"torch-ouro/ouro (C API) busbw from 16 MiB: lowest {worst(of_capi)} (target 0.8x: "
                     f"{'met' if ok else 'missed'})")
    return "\n".join(f"- {line}" for line in lines)


def write_all(out: Path, records, info: RunInfo, plots: bool, ouro_systems) -> str:
    """Writes every output; returns the summary tables for stdout."""
    write_csv(out, records)
    placement_key = primary_placement(info.placement)
    plot_note = ""
    gnuplot = shutil.which("gnuplot") if plots else None
    if plots and not gnuplot:
        plot_note = "gnuplot not found (Debian package gnuplot-nox): plots skipped."
    elif not plots:
        plot_note = "plots skipped (--no-plots)."

    sections = []
    for collective in info.collectives:
        for nranks in info.ranks:
            title = f"{collective}, {nranks} ranks, {info.dtype}"
            text, data = summary_table(records, collective, nranks, placement_key, ouro_systems)
            notes = [f"- {r.system}: {r.status}" + (f" ({r.note})" if r.note else "")
                     + (f", log `{r.log}`" if r.log and r.status != "ok" else "")
                     for r in records if r.collective == collective and r.nranks == nranks
                     and r.status != "ok"]
            pngs = []
            if gnuplot and data:
                pngs, err = plot_pair(out, gnuplot, collective, nranks, info.dtype, data)
                if err:
                    notes.append(f"- plots: {err}")
            body = f"## {title}\n\n{text}\n"
            if notes:
                body += "\n" + "\n".join(notes) + "\n"
            for png in pngs:
                body += f"\n![{png}]({png})\n"
            sections.append(body)

    descriptions = {}
    for r in records:
        if r.description and r.system not in descriptions:
            descriptions[r.system] = r.description
    placement_words = {"out_of_place": "out-of-place", "in_place": "in-place"}[placement_key]
    head = ["# ouro and its peers: collective benchmarks", ""]
    head += [f"- {k}: {v}" for k, v in machine_info(info.src_root)]
    head += [f"- command: `{' '.join(info.argv)}`",
             f"- sizes: {info.sizes}; {info.iterations}; dtype {info.dtype}; "
             f"tables and plots show {placement_words} "
             f"(results.csv has every placement run)",
             f"- wall time of the whole comparison: {info.wall_s:.0f} s; 1-minute load "
             f"average before / after: " + " / ".join("-" if v is None else f"{v:.2f}"
                                                       for v in info.load)
             + " (anything near the core count means other work shared the cores)", ""]
    head += ["Time is the mean over ranks of each rank's time per op (back-to-back loop); "
             "busbw in GB/s (1e9 B/s) with nccl-tests' factors (docs/PERFORMANCE.md). "
             "ouro/best = best peer's time / ouro's time at that size (ouro = shared memory; "
             "ouro-tcp and ouro-tcp-syscc are not peers).", ""]
    if descriptions:
        head += ["Systems:", ""] + [f"- {s}: {d}" for s, d in descriptions.items()] + [""]
    if plot_note:
        head += [plot_note, ""]
    repeated = any(r.repeat > 1 for r in records)
    runs = md_table(["system", "collective", "status", "ranks", "wall s", "sizes", "note"],
                    [[r.system + (f" (run {r.repeat})" if repeated else ""), r.collective, r.status, r.nranks,
                      f"{r.seconds:.1f}" if r.rc is not None else "-", len(r.results),
                      (r.note or "").replace("|", "/")[:100]] for r in records],
                    text_columns=(0, 1, 2, 6))
    summary = "\n".join(head) + "\n" + "\n".join(sections) + "\n## Runs\n\n" + runs + "\n"
    (out / "summary.md").write_text(summary)
    stdout_text = "\n".join(sections)
    if plot_note:
        stdout_text += "\n" + plot_note
    return stdout_text


# ---------------------------------------------------------------- gnuplot

_TERMINAL = None


def _terminal(gnuplot: str) -> str:
    """pngcairo (antialiased) when this gnuplot has it, else libgd's png."""
    global _TERMINAL
    if _TERMINAL is None:
        try:
            r = subprocess.run([gnuplot, "-e", "set terminal pngcairo"], capture_output=True,
                               text=True, timeout=30)
            ok = r.returncode == 0 and "unknown" not in r.stderr.lower()
        except (OSError, subprocess.TimeoutExpired):
            ok = False
        _TERMINAL = ("pngcairo size 960,600 font 'sans,10'" if ok
                     else "png size 960,600")
    return _TERMINAL


# One colour per system in every plot, so plots of different collectives read alike; ouro
# thickest, ouro over TCP dashed in ouro's colour family.
_STYLES = {"ouro": "lc rgb '#1f3fbf' lw 3 pt 7", "ouro-tcp": "lc rgb '#6f9fef' lw 2 dt 2 pt 6",
           "ouro-tcp-syscc": "lc rgb '#6f9fef' lw 2 dt 3 pt 4",
           "openmpi": "lc rgb '#d62728' lw 2 pt 5", "mpich": "lc rgb '#ff7f0e' lw 2 pt 9",
           "gloo": "lc rgb '#2ca02c' lw 2 pt 11", "torch": "lc rgb '#9467bd' lw 2 pt 13"}


def _style(system: str) -> str:
    return _STYLES.get(system, "lw 2")


def _xtics(sizes: list) -> str:
    """A multiplicative tick step (powers of 2) giving at most ~10 ticks over the sweep."""
    # A log axis has no 0: rows of size 0 (all_gather of 8 B on 4 ranks has count 0) are left out.
    sizes = [s for s in sizes if s > 0] or [1]
    lo, hi = min(sizes), max(sizes)
    step = 2
    while hi / lo / step ** 10 > 1:
        step *= 2
    return f"set xtics {lo}, {step}" if hi > lo else f"set xtics ({lo})"


def plot_pair(out: Path, gnuplot: str, collective: str, nranks: int, dtype: str,
              data: dict) -> tuple:
    """Writes <collective>_np<N>_busbw.png and _latency.png; -> (png names, error or '')."""
    stem = f"{collective}_np{nranks}"
    plots_dir = out / "plots"
    plots_dir.mkdir(exist_ok=True)
    sizes = sorted({s for pts in data.values() for s in pts})
    lines = ["# generated by bench/compare/report.py; data inline", ""]
    names = []
    for i, (system, points) in enumerate(data.items()):
        block = f"$d{i}"
        names.append((block, system))
        lines.append(f"{block} << EOD")
        for size in sorted(points):
            if size <= 0:  # not on a log axis
                continue
            t, bw, _ = points[size]
            lines.append(f"{size} {t!r} {bw if bw is not None else 'NaN'}")
        lines.append("EOD")
    title = f"{collective}, {nranks} ranks, {dtype}"
    # Log-x over powers of two with binary prefixes (8, 1Ki, 1Mi) as nccl-tests' sizes are.
    common = [f"set terminal {_terminal(gnuplot)}", "set grid", "set key left top noenhanced",
              "set logscale x 2", "set format x '%.0b%B'", _xtics(sizes),
              "set xlabel 'message size (bytes)'", "set style data linespoints"]
    plot_bw = ", ".join(f"{b} using 1:3 title '{s}' {_style(s)}" for b, s in names)
    plot_t = ", ".join(f"{b} using 1:2 title '{s}' {_style(s)}" for b, s in names)
    lines += common + [
        f"set output '{stem}_busbw.png'", f"set title '{title}: bus bandwidth' noenhanced",
        "set ylabel 'busbw (GB/s)'", "set yrange [0:*]", f"plot {plot_bw}",
        "unset yrange", "set autoscale y",
        f"set output '{stem}_latency.png'", f"set title '{title}: time per op' noenhanced",
        "set ylabel 'time (us)'", "set logscale y 10", "set format y '%g'", f"plot {plot_t}",
        "unset output"]
    script = plots_dir / f"{stem}.gp"
    script.write_text("\n".join(lines) + "\n")
    pngs = [f"{stem}_busbw.png", f"{stem}_latency.png"]
    try:
        r = subprocess.run([gnuplot, str(script)], cwd=out, capture_output=True, text=True,
                           timeout=60)
    except (OSError, subprocess.TimeoutExpired) as e:
        return [], f"gnuplot failed: {e}"
    if r.returncode != 0:
        return [], f"gnuplot exit {r.returncode}: {r.stderr.strip()[-300:]}"
    return [p for p in pngs if (out / p).is_file()], ""
