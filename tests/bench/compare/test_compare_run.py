#!/usr/bin/python3
"""A tiny real comparison: compare.py on 2 ranks, 8 B .. 64 KiB, 3 timed iterations, with
ouro-bench (shm and TCP) and every peer. Checks that results.csv has rows for ouro and for every
peer on each collective it has, that summary.md exists, and that the PNGs exist.

The build dir comes from $OURO_BUILD_DIR (meson sets it) or argv[1]. A missing ouro-bench or
ouro-run fails the test: they are what compare is for. So does a missing peer (not installed, or
built without -Dpeers): scripts/setup.sh --tests installs and enables every one."""

import csv
import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
COMPARE = HERE.parents[2] / "bench" / "compare" / "compare.py"
sys.path.insert(0, str(COMPARE.parent))
import compare  # noqa: E402  (for the table of systems: programs, launchers, what they lack)
import table  # noqa: E402

PYTHON = "/usr/bin/python3" if Path("/usr/bin/python3").exists() else sys.executable


def installed_peers(build: Path) -> tuple:
    """-> (peers compare will run, notes on the missing ones), from compare's own table."""
    peers, notes = [], []
    # compare's default peers: the Debian-packaged ones (nccl-tests needs a GPU and is not among them).
    for name in compare.DEFAULT_SYSTEMS:
        system = compare.SYSTEMS[name]
        if name in compare.OURO_SYSTEMS:
            continue
        if system.program == "torch":
            script = compare.SRC_ROOT / "bench/peers/torch_bench.py"
            if not script.is_file():
                notes.append(f"torch: {script} not present (optional)")
                continue
            probe = subprocess.run([PYTHON, "-c", "import torch.distributed"],
                                   capture_output=True, timeout=120)
            if probe.returncode != 0:
                notes.append(f"torch: {PYTHON} cannot import torch")
                continue
        elif not os.access(build / system.program, os.X_OK):
            notes.append(f"{name}: {build / system.program} not built")
            continue
        if system.launcher != "ouro-run" and not shutil.which(system.launcher):
            notes.append(f"{name}: {system.launcher} not on PATH")
            continue
        peers.append(name)
    return peers, notes


def table_matches_json(out: Path) -> list:
    """Each program's stdout table (in its log), read by compare's fallback parser, must agree
    with the JSON the same run wrote: the fallback is only useful if it reads the same data."""
    problems = []
    for js in sorted((out / "json").glob("*.json")):
        log = out / "logs" / (js.stem + ".log")
        want = json.loads(js.read_text())["results"]
        got = table.parse(log.read_text()).to_results()
        if [r["size"] for r in got] != [r["size"] for r in want]:
            problems.append(f"{log.name}: table sizes differ from {js.name}")
            continue
        for g, w in zip(got, want):
            m_g, m_w = g["out_of_place"], w["out_of_place"]
            if abs(m_g["busbw"] - m_w["busbw"]) > 0.0051 or m_g["wrong"] != m_w["wrong"]:
                problems.append(f"{log.name}: size {w['size']}: table {m_g} vs JSON {m_w}")
    return problems


def main() -> int:
    build = Path(os.environ.get("OURO_BUILD_DIR") or (sys.argv[1] if len(sys.argv) > 1 else
                                                      compare.SRC_ROOT / "build"))
    for required in ("bench/ouro-bench", "tools/ouro-run/ouro-run"):
        if not os.access(build / required, os.X_OK):
            print(f"FAIL: {build / required} is not built (ninja -C {build})")
            return 1
    # Every peer is a package scripts/setup.sh --tests installs and a program -Dpeers=enabled
    # builds: a missing one is a broken set-up, so the comparison fails rather than runs without it.
    peers, notes = installed_peers(build)
    for note in notes:
        print(f"FAIL: peer missing: {note} (scripts/setup.sh --tests installs and configures every peer)")
    if notes:
        return 1
    systems = ["ouro", "ouro-tcp"] + peers
    # ouro's torch backend too (python/; the summary's binding targets then have their three systems).
    if not (build / "python/ouro/torch.py").is_file():
        print(f"FAIL: {build / 'python/ouro/torch.py'} is not built (-Dtorch=enabled builds it)")
        return 1
    systems.append("torch-ouro")
    out = Path(tempfile.mkdtemp(prefix="ouro-compare-tiny-"))
    try:
        cmd = [PYTHON, str(COMPARE), "--build", str(build), "--out", str(out), "--ranks", "2",
               "-b", "8", "-e", "64K", "-f", "8", "-n", "3", "-w", "1", "--timeout", "120",
               "--python", PYTHON, "--systems", ",".join(systems)]
        print("+", " ".join(cmd), flush=True)
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=900)
        print(proc.stdout)
        print(proc.stderr)
        failures = []
        if proc.returncode != 0:
            failures.append(f"compare.py exited {proc.returncode}")
        rows = []
        if (out / "results.csv").is_file():
            with open(out / "results.csv", newline="") as f:
                rows = list(csv.DictReader(f))
        have = {(r["system"], r["collective"]) for r in rows}
        sizes = {(r["system"], r["collective"], int(r["size_bytes"])) for r in rows}
        for system in systems:
            for coll in compare.DEFAULT_COLLECTIVES:
                if coll in compare.SYSTEMS[system].lacks:
                    continue
                if (system, coll) not in have:
                    failures.append(f"results.csv has no {system} {coll} rows")
                elif not {(system, coll, s) for s in (8, 64, 512, 4096, 32768)} <= sizes:
                    # 8 B on 2 ranks is 1 float per rank for reduce_scatter / all_gather.
                    failures.append(f"{system} {coll}: sizes missing from results.csv")
        failures += table_matches_json(out)
        if not (out / "summary.md").is_file():
            failures.append("summary.md missing")
        elif "torch-ouro" in systems and "torch-ouro/torch latency at 8 B" not in (out / "summary.md").read_text():
            failures.append("summary.md has no torch-ouro/torch binding line")
        if not shutil.which("gnuplot"):
            failures.append("gnuplot is not installed (scripts/setup.sh installs gnuplot-nox): PNGs cannot be drawn")
        for coll in compare.DEFAULT_COLLECTIVES:
            for kind in ("busbw", "latency"):
                if not (out / f"{coll}_np2_{kind}.png").is_file():
                    failures.append(f"{coll}_np2_{kind}.png missing")
        if failures:
            print("FAIL:\n  " + "\n  ".join(failures))
            runs = out / "runs.csv"
            if runs.is_file():
                print(runs.read_text())
            for log in sorted((out / "logs").glob("*.log")):
                text = log.read_text()
                if "exit status: 0" not in text.splitlines()[1]:
                    print(f"---- {log.name}\n{text[-3000:]}")
            return 1
        print(f"PASS: {len(rows)} rows from {', '.join(systems)}")
        return 0
    finally:
        shutil.rmtree(out, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
