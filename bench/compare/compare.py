#!/usr/bin/python3
"""Runs ouro and its peers on the same sizes, ranks and dtype and reports them side by side.

    bench/compare/compare.py --ranks 2,4 -b 8 -e 256M -f 4 --budget 0.3

For every collective x world size x system it starts that system's benchmark program (all of
them share bench/harness.hpp: same flags, warm-up, timed loop, formulas and check) with -J, so
the numbers differ only by the library underneath:

    ouro       ouro-run -n N build/bench/ouro-bench           OURO_TRANSPORT=shm
    ouro-tcp   ouro-run -n N build/bench/ouro-bench           OURO_TRANSPORT=tcp
               (ouro, ouro-tcp: with --host, host buffers even on a GPU machine)
    cuda       ouro-run -n N build/bench/ouro-bench -D        device buffers (CUDA builds, GPU machines)
    nccl-tests all_reduce_perf -g N (all_gather_perf, ...)   when on PATH; one process, N GPUs
    ouro-tcp-syscc (opt-in) the same with OURO_TCP_CONGESTION=system: the kernel's default
               congestion control, as the peers get it (ouro replaces a pacing bbr by cubic)
    openmpi    mpirun.openmpi ... -n N build/bench/peers/ouro-bench-openmpi
    mpich      mpirun.mpich -n N build/bench/peers/ouro-bench-mpich
    gloo       ouro-run -n N build/bench/peers/ouro-bench-gloo (FileStore in a fresh temp dir)
    torch      ouro-run -n N /usr/bin/python3 bench/peers/torch_bench.py (optional)
    torch-ouro the same with --backend ouro (PYTHONPATH=build/python: ouro's c10d backend,
               python/; optional) -- PyTorch users' view of ouro, beside torch's gloo and the C API

A system whose program or launcher is missing is skipped with a note; one that lacks a
collective is not started for it. Every run is bounded by --timeout and a failure is recorded
(runs.csv, summary.md) without stopping the comparison. Results go to --out: results.csv,
runs.csv, summary.md, one busbw and one latency PNG per collective x world size (gnuplot), the
programs' JSON under json/ and their output under logs/.

Exit status: 0 when every run that could start succeeded, 1 when a run failed, timed out or
reported wrong results (or ouro-bench itself is missing), 2 for a bad command line.
Python 3 standard library only; run with /usr/bin/python3.
"""

from __future__ import annotations

import argparse
import dataclasses
import datetime
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import report  # noqa: E402  (sibling modules; this folder is not a package)
import table  # noqa: E402

SRC_ROOT = Path(__file__).resolve().parents[2]
# The three collectives the comparison is about (the issue); any harness collective may be named.
DEFAULT_COLLECTIVES = ["all_reduce", "reduce_scatter", "all_gather"]
KNOWN_COLLECTIVES = ["all_reduce", "reduce_scatter", "all_gather", "broadcast", "reduce",
                     "alltoall", "sendrecv"]
DEFAULT_SYSTEMS = ["ouro", "ouro-tcp", "openmpi", "mpich", "gloo", "torch", "torch-ouro"]
# The subject; every other system is a peer.
OURO_SYSTEMS = {"ouro", "ouro-tcp", "ouro-tcp-syscc", "cuda", "torch-ouro"}


@dataclasses.dataclass(frozen=True)
class System:
    name: str
    launcher: str      # "ouro-run", "mpirun.openmpi" or "mpirun.mpich"
    program: str       # under the build dir; "torch" means the Python script
    env: tuple = ()    # (name, value) pairs set for this system only
    lacks: frozenset = frozenset()  # collectives the library has no call for: never started
    peer_optional: bool = False     # absence is expected (torch): a note, not a warning
    args: tuple = ()   # extra arguments after the shared ones


SYSTEMS = {
    "ouro": System("ouro", "ouro-run", "bench/ouro-bench", (("OURO_TRANSPORT", "shm"),), args=("--host",)),
    "ouro-tcp": System("ouro-tcp", "ouro-run", "bench/ouro-bench", (("OURO_TRANSPORT", "tcp"),),
                       args=("--host",)),
    "ouro-tcp-syscc": System("ouro-tcp-syscc", "ouro-run", "bench/ouro-bench",
                             (("OURO_TRANSPORT", "tcp"), ("OURO_TCP_CONGESTION", "system")), args=("--host",)),
    # Device buffers (ouro-bench -D fails with a clear message where there is no GPU) and NCCL's
    # own benchmark beside it: one process driving N GPUs (-g N), its table parsed from stdout.
    "cuda": System("cuda", "ouro-run", "bench/ouro-bench", args=("-D",), peer_optional=True),
    "nccl-tests": System("nccl-tests", "nccl-tests", "nccl-tests", peer_optional=True),
    "openmpi": System("openmpi", "mpirun.openmpi", "bench/peers/ouro-bench-openmpi"),
    "mpich": System("mpich", "mpirun.mpich", "bench/peers/ouro-bench-mpich"),
    # Which collectives a program has is its own business (the harness prints a skip line
    # that compare records as "unsupported"); `lacks` only saves starting one to hear it.
    "gloo": System("gloo", "ouro-run", "bench/peers/ouro-bench-gloo"),
    # torch 1.13's gloo backend rejects reduce_scatter. One thread per rank as in the anchors:
    # torch's intra-op threads would fight the ranks for the 2 cores.
    "torch": System("torch", "ouro-run", "torch", (("OMP_NUM_THREADS", "1"),),
                    lacks=frozenset({"reduce_scatter"}), peer_optional=True),
    # ouro's torch.distributed backend (python/ouro/torch.py), measured by the same script.
    "torch-ouro": System("torch-ouro", "ouro-run", "torch", (("OMP_NUM_THREADS", "1"),),
                         peer_optional=True, args=("--backend", "ouro")),
}


@dataclasses.dataclass
class RunRecord:
    system: str
    collective: str
    nranks: int
    status: str = "pending"  # ok, wrong, failed, timeout, missing, unsupported, skipped, dry-run
    rc: int | None = None
    seconds: float = 0.0
    source: str = ""         # where the rows came from: "json" or "table" (stdout fallback)
    log: str = ""            # relative to the output dir
    json_path: str = ""
    note: str = ""
    repeat: int = 1          # which of --repeat K runs of the plan this is
    description: str = ""    # the program's own line about the system (JSON "description")
    results: list = dataclasses.field(default_factory=list)  # JSON "results" entries
    skipped: list = dataclasses.field(default_factory=list)  # JSON "skipped": what it lacks


def normalize_collective(name: str) -> str:
    """all_reduce, allreduce, all-reduce, all_reduce_perf -> all_reduce (as ouro-bench does)."""
    squashed = name.removesuffix("_perf").replace("_", "").replace("-", "").lower()
    for known in KNOWN_COLLECTIVES:
        if known.replace("_", "") == squashed:
            return known
    raise argparse.ArgumentTypeError(f"unknown collective {name!r}; one of "
                                     + ", ".join(KNOWN_COLLECTIVES))


def parse_args(argv: list) -> argparse.Namespace:
    extra = []
    if "--" in argv:  # everything after "--" goes to every program unchanged
        extra = argv[argv.index("--") + 1:]
        argv = argv[:argv.index("--")]
    p = argparse.ArgumentParser(
        prog="compare.py",
        description="Run ouro and its peers (Open MPI, MPICH, Gloo, torch.distributed gloo) "
                    "on the same collectives, sizes, ranks and dtype; write results.csv, "
                    "summary.md and plots. Arguments after '--' go to every program.")
    p.add_argument("--build", type=Path,
                   default=Path(os.environ.get("OURO_BUILD_DIR", SRC_ROOT / "build")),
                   help="meson build dir holding bench/ and tools/ouro-run "
                        "(default: $OURO_BUILD_DIR or <source>/build)")
    p.add_argument("--ranks", default="2,4", help="world sizes, comma-separated (default 2,4)")
    p.add_argument("--collectives", default=",".join(DEFAULT_COLLECTIVES),
                   help="comma-separated (default %(default)s)")
    p.add_argument("--systems", default=",".join(DEFAULT_SYSTEMS),
                   help="comma-separated, from " + ", ".join(SYSTEMS) +
                   " (default: all but ouro-tcp-syscc)")
    p.add_argument("-b", "--minbytes", default="8", help="smallest size (default 8)")
    p.add_argument("-e", "--maxbytes", default="256M", help="largest size (default 256M)")
    p.add_argument("-f", "--stepfactor", default="2", help="size multiplier (default 2)")
    p.add_argument("-n", "--iters", type=int, default=20, help="timed iterations (default 20)")
    p.add_argument("-w", "--warmup_iters", type=int, default=5, help="warm-up iterations (5)")
    p.add_argument("--budget", type=float, default=None,
                   help="seconds per size for the timed loop; iterations follow from the "
                        "warm-up (passed as --budget to every program, replaces -n)")
    p.add_argument("--repeat", type=int, default=1,
                   help="run the whole plan K times, interleaved (every system once, then again); "
                        "tables and plots show each size's median time over the K runs, which "
                        "one slow run (a descheduled vCPU) cannot move (default 1)")
    p.add_argument("-d", "--dtype", default="float32", help="element type (default float32)")
    p.add_argument("-c", "--check", type=int, choices=(0, 1), default=1,
                   help="verify results (default 1)")
    p.add_argument("--placement", choices=("out", "in", "both"), default="out",
                   help="out-of-place, in-place or both (default out; the summary shows "
                        "out-of-place when both ran)")
    p.add_argument("--out", type=Path, default=None,
                   help="output dir (default <source>/bench/results/<date>-<time>)")
    p.add_argument("--timeout", type=float, default=900,
                   help="seconds one program run may take (default 900)")
    p.add_argument("--python", default="/usr/bin/python3" if Path("/usr/bin/python3").exists()
                   else sys.executable,
                   help="interpreter for the torch peer (Debian's python3-torch lives under "
                        "/usr/bin/python3)")
    p.add_argument("--torch-script", type=Path, default=SRC_ROOT / "bench/peers/torch_bench.py")
    p.add_argument("--no-plots", action="store_true", help="skip gnuplot")
    p.add_argument("--dry-run", action="store_true", help="print the commands, run nothing")
    args = p.parse_args(argv)
    args.extra = extra
    try:
        args.ranks = [int(r) for r in args.ranks.split(",") if r.strip()]
    except ValueError:
        p.error(f"--ranks {args.ranks!r}: expected numbers like 2,4")
    if not args.ranks or min(args.ranks) < 1:
        p.error("--ranks needs world sizes of at least 1")
    try:
        args.collectives = [normalize_collective(c) for c in args.collectives.split(",") if c]
    except argparse.ArgumentTypeError as e:
        p.error(str(e))
    args.systems = [s.strip() for s in args.systems.split(",") if s.strip()]
    for s in args.systems:
        if s not in SYSTEMS:
            p.error(f"unknown system {s!r}; one of {', '.join(SYSTEMS)}")
    if args.timeout <= 0:
        p.error("--timeout must be positive")
    if args.repeat < 1:
        p.error("--repeat must be at least 1")
    # Runs start in the output dir, so every path given relative to here must be made absolute.
    # (absolute, not resolved: a program may be a symlink whose name matters to it).
    args.build = args.build.absolute()
    args.torch_script = args.torch_script.absolute()
    if os.sep in args.python:
        args.python = os.path.abspath(args.python)
    if args.out is None:
        stamp = datetime.datetime.now().strftime("%Y-%m-%d-%H%M%S")
        args.out = SRC_ROOT / "bench" / "results" / stamp
    args.out = args.out.absolute()
    return args


def bench_args(args, collective: str, json_path: Path) -> list:
    """The one argument list every program gets (nccl-tests' flags, shared by the harness)."""
    out = [collective, "-b", args.minbytes, "-e", args.maxbytes, "-f", args.stepfactor,
           "-n", str(args.iters), "-w", str(args.warmup_iters), "-d", args.dtype,
           "-c", str(args.check), "--placement", args.placement, "-J", str(json_path),
           "--no-progress"]
    if args.budget is not None:
        out += ["--budget", f"{args.budget:g}"]
    return out + list(args.extra)


NCCL_TESTS = {"all_reduce": "all_reduce_perf", "reduce_scatter": "reduce_scatter_perf",
              "all_gather": "all_gather_perf", "broadcast": "broadcast_perf", "reduce": "reduce_perf",
              "alltoall": "alltoall_perf", "sendrecv": "sendrecv_perf"}


def nccl_command(args, collective: str, nranks: int) -> tuple:
    """nccl-tests' program for the collective, one process over nranks GPUs (-g), with the same
    sizes and iterations; -> (argv, None) or (None, why it is skipped)."""
    program = NCCL_TESTS.get(collective)
    path = shutil.which(program) if program else None
    if path is None:
        return None, f"{program or collective + ' (no nccl-tests program)'} not on PATH (nccl-tests, GPU machines only)"
    return [path, "-b", args.minbytes, "-e", args.maxbytes, "-f", args.stepfactor, "-g", str(nranks),
            "-n", str(args.iters), "-w", str(args.warmup_iters), "-c", str(args.check), "-d", args.dtype], None


def free_loopback_port() -> int:
    # For torch's env:// rendezvous (MASTER_PORT); bound on 127.0.0.1 only.
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Launchers:
    """Finds each system's launcher and program once; says what is missing and why."""

    def __init__(self, args):
        self.args = args
        self._torch_ok = None

    def command(self, system: System, nranks: int) -> tuple:
        """-> (argv prefix up to and including the program, None) or (None, why missing)."""
        build = self.args.build
        if system.launcher == "nccl-tests":
            return None, "nccl-tests runs per collective (nccl_command)"
        if system.program == "torch":
            script = self.args.torch_script
            if not script.is_file():
                return None, f"{script} not found (optional peer)"
            if not shutil.which(self.args.python):
                return None, f"{self.args.python} not found"
            if not self._torch_importable():
                return None, f"{self.args.python} cannot import torch (python3-torch)"
            if "ouro" in system.args and not (build / "python/ouro/torch.py").is_file():
                return None, f"{build / 'python/ouro'} has no torch backend (configure with -Dpython=enabled)"
            program = [self.args.python, str(script)]
        else:
            path = build / system.program
            if not (path.is_file() and os.access(path, os.X_OK)):
                return None, f"{path} not built"
            program = [str(path)]
        if system.launcher == "ouro-run":
            ouro_run = build / "tools/ouro-run/ouro-run"
            if not os.access(ouro_run, os.X_OK):
                return None, f"{ouro_run} not built"
            return [str(ouro_run), "-n", str(nranks)] + program, None
        launcher = shutil.which(system.launcher)
        if launcher is None:
            return None, f"{system.launcher} not on PATH"
        if system.launcher == "mpirun.openmpi":
            # Root needs --allow-run-as-root; more ranks than cores need --oversubscribe.
            # Binding is each launcher's default: mpirun.openmpi and ouro-run pin one rank per
            # core when the ranks fit the cores, and spread them otherwise.
            return [launcher, "--allow-run-as-root", "--oversubscribe",
                    "-n", str(nranks)] + program, None
        return [launcher, "-n", str(nranks)] + program, None

    def _torch_importable(self) -> bool:
        if self._torch_ok is None:
            try:
                r = subprocess.run([self.args.python, "-c", "import torch.distributed"],
                                   capture_output=True, timeout=120)
                self._torch_ok = r.returncode == 0
            except (OSError, subprocess.TimeoutExpired):
                self._torch_ok = False
        return self._torch_ok


def run_bounded(cmd: list, env: dict, cwd: Path, timeout: float) -> tuple:
    """Runs cmd in its own session so the timeout can stop the launcher and every rank it
    started (by process group id). -> (rc, stdout, stderr, timed_out, seconds)."""
    start = time.monotonic()
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        proc = subprocess.Popen(cmd, stdout=out, stderr=err, stdin=subprocess.DEVNULL, env=env,
                                cwd=cwd, start_new_session=True)
        timed_out = False
        try:
            proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            timed_out = True
            # SIGTERM first: ouro-run and the mpiruns pass it on to their ranks and clean up.
            _signal_group(proc.pid, signal.SIGTERM)
            try:
                proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                _signal_group(proc.pid, signal.SIGKILL)
                proc.wait()
        # Ranks that outlived their launcher would skew the next run's timings.
        _signal_group(proc.pid, signal.SIGKILL)
        seconds = time.monotonic() - start
        out.seek(0)
        err.seek(0)
        return (proc.returncode, out.read().decode("utf-8", "replace"),
                err.read().decode("utf-8", "replace"), timed_out, seconds)


def _signal_group(pgid: int, sig) -> None:
    try:
        os.killpg(pgid, sig)
    except (ProcessLookupError, PermissionError):
        pass


def load_results(json_path: Path, stdout: str, record: RunRecord) -> None:
    """Fills record.results from the JSON, else from the table on stdout."""
    if json_path.is_file():
        try:
            data = json.loads(json_path.read_text())
            record.results = list(data.get("results") or [])
            # Control characters (a C string's NUL copied into the JSON) would make the
            # summary a "binary" file for grep and editors.
            record.description = re.sub(r"[\x00-\x1f\x7f]", "",
                                        str(data.get("description") or ""))
            record.skipped = [str(x) for x in data.get("skipped") or []]
            record.source = "json"
            if data.get("ok") is False and record.status == "ok":
                record.status = "wrong"
            return
        except (ValueError, OSError, AttributeError) as e:
            record.note = f"unreadable JSON ({e}); "
    parsed = table.parse(stdout)
    if parsed.rows:
        record.results = parsed.to_results()
        record.source = "table"


def wrong_sizes(results: list) -> list:
    """Sizes where the check counted wrong elements (either placement)."""
    return [r.get("size") for r in results
            if any((r.get(key) or {}).get("wrong") for key in ("out_of_place", "in_place"))]


def any_wrong(results: list) -> bool:
    return bool(wrong_sizes(results))


def wrong_note(results: list) -> str:
    sizes = wrong_sizes(results)
    return (f"wrong elements at {len(sizes)} size(s): "
            + ", ".join(str(s) for s in sizes[:6]) + (" ..." if len(sizes) > 6 else ""))


_SKIP_LINE = re.compile(r"skip|not support|unsupported", re.IGNORECASE)


# ouro's info line from its core-distance probe (2 ranks on shared memory, calls >= 256 KiB): the
# distance decides how the staging copies are written and moves ouro's large-message figures, and
# the host may move the VM's CPUs between runs, so each run records what it measured.
_CORE_DISTANCE = re.compile(r"\[r0\] ouro INFO: rank 0: cache-line round trip to rank 1: (\d+) ns, "
                            r"cores (near|far apart|shared)")


def core_distance_note(stderr: str) -> str:
    seen = [f"{m.group(2)} ({m.group(1)} ns)" for m in _CORE_DISTANCE.finditer(stderr)]
    return "cores " + ", then ".join(seen) if seen else ""


def run_one(args, launchers: Launchers, system: System, collective: str, nranks: int,
            repeat: int = 1) -> RunRecord:
    rec = RunRecord(system.name, collective, nranks, repeat=repeat)
    if collective in system.lacks:
        rec.status, rec.note = "unsupported", f"{system.name} has no {collective}"
        return rec
    stem = f"{collective}_np{nranks}_{system.name}" + (f"_r{repeat}" if args.repeat > 1 else "")
    json_path = args.out / "json" / f"{stem}.json"
    log_path = args.out / "logs" / f"{stem}.log"
    if system.launcher == "nccl-tests":
        cmd, why = nccl_command(args, collective, nranks)
    else:
        prefix, why = launchers.command(system, nranks)
        cmd = prefix + bench_args(args, collective, json_path) + list(system.args) if prefix else None
    if cmd is None:
        rec.status, rec.note = "missing", why
        return rec
    rec.json_path = str(json_path.relative_to(args.out))
    rec.log = str(log_path.relative_to(args.out))
    env = dict(os.environ)
    env.update(system.env)
    if system.name in OURO_SYSTEMS and "OURO_DEBUG" not in os.environ:
        env["OURO_DEBUG"] = "info"  # for the core-distance line (core_distance_note)
    scratch = None
    if system.name == "torch-ouro":
        env["PYTHONPATH"] = os.pathsep.join(p for p in (str(args.build / "python"), env.get("PYTHONPATH")) if p)
    if system.name in ("gloo", "torch", "torch-ouro"):
        # A fresh rendezvous dir per run: a stale FileStore key from an earlier run would
        # pair ranks of different jobs. torch may use it (file://) or MASTER_ADDR/PORT.
        scratch = Path(tempfile.mkdtemp(prefix=f"ouro-compare-{system.name}-"))
        env["OURO_BENCH_GLOO_STORE"] = str(scratch)
        env["GLOO_SOCKET_IFNAME"] = "lo"
        env["MASTER_ADDR"] = "127.0.0.1"
        env["MASTER_PORT"] = str(free_loopback_port())
    set_env = " ".join(f"{k}={env[k]}" for k in sorted(env)
                       if k in dict(system.env) or k in ("OURO_BENCH_GLOO_STORE", "MASTER_PORT"))
    shown = f"{set_env} {' '.join(cmd)}".strip()
    if args.dry_run:
        print(shown)
        rec.status = "dry-run"
        if scratch:
            shutil.rmtree(scratch, ignore_errors=True)
        return rec
    json_path.unlink(missing_ok=True)
    try:
        rc, stdout, stderr, timed_out, seconds = run_bounded(cmd, env, args.out, args.timeout)
    except OSError as e:
        rec.status, rec.note = "failed", f"could not start: {e}"
        return rec
    finally:
        if scratch:
            shutil.rmtree(scratch, ignore_errors=True)
    rec.rc, rec.seconds = rc, seconds
    log_path.write_text(f"# cmd: {shown}\n# exit status: {rc}"
                        f"{' (timed out after %gs)' % args.timeout if timed_out else ''}"
                        f"  wall: {seconds:.1f} s\n{stdout}"
                        + (f"# ---- stderr ----\n{stderr}" if stderr else ""))
    rec.status = "ok"
    load_results(json_path, stdout, rec)
    if timed_out:
        rec.status = "timeout"
        rec.note += f"killed after {args.timeout:g} s; {len(rec.results)} sizes done"
    elif rc != 0 and any_wrong(rec.results):
        rec.status = "wrong"
        rec.note += wrong_note(rec.results)
    elif rc != 0 and "-D" in system.args and ("no CUDA device" in stderr or "built without CUDA" in stderr
                                                   or "needs a CUDA build" in stderr):
        rec.status = "missing"  # device buffers where there is no GPU (or no CUDA build): skipped
        rec.note += "no CUDA device or no CUDA build (ouro-bench -D)"
    elif rc != 0:
        rec.status = "failed"
        # The harness and launchers report errors on stderr; stdout holds only the table.
        tail = [line.strip() for line in stderr.splitlines() if line.strip() and " ouro INFO: " not in line]
        rec.note += f"exit {rc}" + (f": {tail[-1][:200]}" if tail else ", nothing on stderr")
    elif not rec.results:
        # The harness lists what the backend lacks in the JSON and as "# skipped:" lines.
        lines = rec.skipped or [line for line in stdout.splitlines() if _SKIP_LINE.search(line)]
        rec.status = "unsupported" if lines else "failed"
        rec.note += (lines[0].lstrip("# ").removeprefix("skipped: ").strip()[:200] if lines
                     else "exit 0 but no results")
    elif any_wrong(rec.results):
        rec.status = "wrong"
        rec.note += wrong_note(rec.results)
    distance = core_distance_note(stderr)
    if distance:
        rec.note = f"{rec.note}; {distance}" if rec.note else distance
    return rec


def main(argv: list) -> int:
    args = parse_args(argv)
    if not args.dry_run:
        (args.out / "json").mkdir(parents=True, exist_ok=True)
        (args.out / "logs").mkdir(parents=True, exist_ok=True)
    launchers = Launchers(args)
    # Interleaved repeats: a slow spell of the machine hits one run of every system, not all
    # runs of one.
    plan = [(c, n, SYSTEMS[s], k) for k in range(1, args.repeat + 1) for c in args.collectives
            for n in args.ranks for s in args.systems]
    records = []
    started = time.monotonic()
    load_before = report.load_average()
    cores = len(os.sched_getaffinity(0))
    if not args.dry_run and load_before is not None and load_before > 0.5 * cores:
        # Other work on the cores shows up in every number (ranks wait for descheduled peers).
        print(f"warning: load average {load_before:.2f} on {cores} cores before the first run; "
              f"timings will include other work", file=sys.stderr)
    for i, (collective, nranks, system, k) in enumerate(plan, start=1):
        if not args.dry_run:
            print(f"[{i:3d}/{len(plan)}] {collective} np{nranks} {system.name:9s} "
                  + (f"run {k} " if args.repeat > 1 else ""),
                  end="", file=sys.stderr, flush=True)
        rec = run_one(args, launchers, system, collective, nranks, k)
        records.append(rec)
        if not args.dry_run:
            print(f"{rec.status}" + (f" {rec.seconds:.1f} s, {len(rec.results)} sizes"
                                     if rec.rc is not None else "")
                  + (f" ({rec.note})" if rec.note else ""), file=sys.stderr, flush=True)
    if args.dry_run:
        return 0
    info = report.RunInfo(
        argv=[str(Path(sys.argv[0]))] + argv, build=str(args.build), ranks=args.ranks,
        collectives=args.collectives, systems=args.systems, dtype=args.dtype,
        placement=args.placement, sizes=f"-b {args.minbytes} -e {args.maxbytes} "
                                        f"-f {args.stepfactor}",
        iterations=(f"--budget {args.budget:g} s per size (warm-up {args.warmup_iters})"
                    if args.budget is not None
                    else f"-n {args.iters} timed, -w {args.warmup_iters} warm-up")
        + (f"; median of {args.repeat} interleaved runs of every system" if args.repeat > 1
           else ""),
        wall_s=time.monotonic() - started, src_root=str(SRC_ROOT),
        load=(load_before, report.load_average()))
    text = report.write_all(args.out, records, info, plots=not args.no_plots,
                            ouro_systems=OURO_SYSTEMS)
    print(text)
    print(f"results in {args.out}", file=sys.stderr)
    bad = [r for r in records if r.status in ("failed", "timeout", "wrong")]
    # An optional ouro system (cuda without a GPU, torch-ouro without python/) missing is a note.
    ouro_missing = [r for r in records if r.system in OURO_SYSTEMS and r.status == "missing"
                    and not SYSTEMS[r.system].peer_optional]
    return 1 if bad or ouro_missing else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
