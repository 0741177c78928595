#!/usr/bin/python3
"""Runs PyTorch's own distributed test suite (DistributedTest._DistTestBase, spawn mode) against
a c10d backend: gloo as the baseline, ouro as a plug-in given gloo's feature set.

  run_suite.py --backend gloo|ouro|gloo_plugin --world N [--subset ci|full] [-k REGEX]...
               [--timeout-per-test S] [--jobs J] [--batch-size B] [--json OUT]
  run_suite.py --compare --world N [--baseline GLOO.json] ...
                                            gloo (or its recorded report), then ouro, on the same tests
  run_suite.py --render-exceptions          exceptions.txt as the markdown table of the docs
  run_suite.py --check-doc docs/TORCH-SUITE.md   the doc carries that table

Tests run in batches in child processes (suite_child.py), each batch in its own session; a test
that outlives its deadline has the batch's whole process tree killed, counts as "timeout", and
the batch goes on from the next test. docs/TORCH-SUITE.md explains the rest.

Exit status: 0 when every selected test passed or was skipped (with --subset ci: every listed
test passed), failures named in exceptions.txt aside for a plug-in; 1 otherwise; 77 (meson's
skip) when torch is missing, or with --builddir when the ouro package is not built and the
source tree has no python/ binding yet.
"""
import argparse
import concurrent.futures
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time

PYTHON = "/usr/bin/python3"  # Debian's torch; a python3 earlier on PATH need not have it
HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
CHILD = os.path.join(HERE, "suite_child.py")
CI_SUBSET = os.path.join(HERE, "ci_subset.txt")
EXCEPTIONS = os.path.join(HERE, "exceptions.txt")

# Plug-in backends and the module whose import registers each with torch.distributed.
PLUGIN_MODULES = {"ouro": "ouro.torch", "gloo_plugin": "gloo_plugin"}
BUILTIN = ("gloo",)
SKIP_EXIT = 77
# The suite's own join timeout is --timeout-per-test; the runner kills the tree this much later,
# leaving the suite time to collect the hung ranks' tracebacks and report its own timeout.
KILL_GRACE_S = 30


class Outcome:
    __slots__ = ("status", "seconds", "detail")

    def __init__(self, status, seconds=0.0, detail=""):
        self.status, self.seconds, self.detail = status, seconds, detail

    def reason(self):
        """One line for the summary: the exception's last line, or the skip reason."""
        lines = [l.strip() for l in self.detail.strip().splitlines() if l.strip()]
        for line in reversed(lines):
            if re.match(r"^[\w.]*(Error|Exception|Timeout)\b|^AssertionError|^RuntimeError", line):
                return line[:300]
        return (lines[-1] if lines else self.status)[:300]


# ---- environment ----------------------------------------------------------------------------

def torch_problem():
    """None when Debian's torch with torch.distributed is importable, else why not."""
    if not os.access(PYTHON, os.X_OK):
        return f"{PYTHON} not found"
    probe = subprocess.run(
        [PYTHON, "-c", "import torch.distributed as d, sys; sys.exit(0 if d.is_available() else 3)"],
        capture_output=True, text=True)
    if probe.returncode == 3:
        return "torch is built without torch.distributed"
    if probe.returncode != 0:
        tail = (probe.stderr.strip().splitlines() or ["?"])[-1]
        return f"torch not importable by {PYTHON} ({tail})"
    return None


def probe_ouro(folder):
    """("ok" | "absent" | "broken", why) for `import ouro.torch` with folder on PYTHONPATH.

    "absent" is a package that is not built (no ouro, or no ouro.torch / its extension);
    "broken" is one that is there and fails to import, which never counts as not built.
    """
    if not os.path.isdir(os.path.join(folder, "ouro")):
        return "absent", f"{folder} has no ouro package"
    env = dict(os.environ, PYTHONPATH=folder)
    probe = subprocess.run([PYTHON, "-c", "import ouro.torch"], env=env, cwd="/",
                           capture_output=True, text=True, timeout=120)
    if probe.returncode == 0:
        return "ok", ""
    last = (probe.stderr.strip().splitlines() or [f"exit {probe.returncode}"])[-1]
    if re.search(r"No module named '(ouro|ouro\.torch|ouro\._torch)'", last):
        return "absent", f"{folder}: {last}"
    return "broken", f"import ouro.torch from {folder}: {last}"


def find_ouro_package(args):
    """(folder, None) for the first place `ouro.torch` imports from, else (None, problem)."""
    if args.ouro_path:
        candidates = [args.ouro_path]
    elif args.builddir:
        candidates = [os.path.join(args.builddir, "python")]
    else:
        candidates = [os.path.join(REPO, d, "python") for d in ("build-py", "build")]
    problems = []
    for folder in candidates:
        status, why = probe_ouro(folder)
        if status == "ok":
            return folder, None
        problems.append((status, why))
    broken = [p for p in problems if p[0] == "broken"]
    return None, (broken or problems)[0]


def child_env(backend, world, scratch, ouro_path, timeout):
    env = dict(os.environ)
    temp_dir = os.path.join(scratch, "temp")
    for sub in ("barrier", "test_dir"):
        os.makedirs(os.path.join(temp_dir, sub), exist_ok=True)
    tmp = os.path.join(scratch, "tmp")  # the suite's own temp files, removed with the scratch
    os.makedirs(tmp, exist_ok=True)
    env.update({
        # As torch's run_test.py sets them for test_distributed_spawn (its file:// variant, which
        # also enables the barrier-timeout tests; setUp replaces TEMP_DIR per test).
        "BACKEND": backend,
        "WORLD_SIZE": str(world),
        "TEMP_DIR": temp_dir,
        "INIT_METHOD": "file://" + temp_dir + "/",
        "TMPDIR": tmp,
        "DISTRIBUTED_TESTS_DEFAULT_TIMEOUT": str(timeout),
        "PYTHONUNBUFFERED": "1",
    })
    if backend in PLUGIN_MODULES:
        env["TORCH_SUITE_BACKEND_MODULE"] = PLUGIN_MODULES[backend]
    if backend == "ouro" and ouro_path:
        env["PYTHONPATH"] = os.pathsep.join(p for p in (ouro_path, env.get("PYTHONPATH")) if p)
    return env


# ---- test lists -----------------------------------------------------------------------------

def list_tests(env, scratch):
    out = os.path.join(scratch, "list.json")
    proc = subprocess.run([PYTHON, CHILD, "list", out], env=env, cwd=scratch,
                          capture_output=True, text=True, timeout=300)
    if proc.returncode != 0 or not os.path.exists(out):
        sys.stderr.write(proc.stdout[-4000:] + proc.stderr[-4000:])
        raise SystemExit(f"run_suite: listing the suite for {env['BACKEND']} failed (rc {proc.returncode})")
    with open(out) as f:
        return json.load(f)


def read_ci_subset(world):
    """Names listed for this world size: lines `WORLDS test_name`, WORLDS like 2 or 2,3."""
    names = []
    with open(CI_SUBSET) as f:
        for line in f:
            line = line.split("#", 1)[0].strip()
            if not line:
                continue
            worlds, name = line.split(None, 1)
            if str(world) in worlds.split(","):
                names.append(name.strip())
    return names


def read_exceptions():
    """{test_name: reason} from exceptions.txt (`test_name: reason`, # comments)."""
    found = {}
    if not os.path.exists(EXCEPTIONS):
        return found
    with open(EXCEPTIONS) as f:
        for number, line in enumerate(f, 1):
            if not line.strip() or line.lstrip().startswith("#"):
                continue
            name, sep, reason = line.partition(":")
            if not sep or not reason.strip():
                raise SystemExit(f"{EXCEPTIONS}:{number}: expected `test_name: reason`")
            found[name.strip()] = reason.strip()
    return found


def select(listing, args):
    tests = {t["name"]: t["static_skip"] for t in listing["tests"]}
    if args.subset == "ci":
        names = read_ci_subset(args.world)
        unknown = [n for n in names if n not in tests]
        if unknown:
            raise SystemExit(f"run_suite: {CI_SUBSET} names tests this torch lacks: {unknown}")
    else:
        names = sorted(tests)
    if args.k:
        names = [n for n in names if any(re.search(p, n) for p in args.k)]
    return names, tests


# ---- running --------------------------------------------------------------------------------

def kill_tree(proc):
    try:
        os.killpg(proc.pid, signal.SIGKILL)  # the batch's session: it, the test, every rank
    except ProcessLookupError:
        pass
    proc.wait()


class BatchRunner:
    def __init__(self, env, scratch, timeout, verbose):
        self.env, self.scratch, self.timeout, self.verbose = env, scratch, timeout, verbose
        self.logs = os.path.join(scratch, "logs")
        os.makedirs(self.logs, exist_ok=True)
        self.lock = threading.Lock()
        self.serial = 0
        self.done = 0

    def _next_tag(self):
        with self.lock:
            self.serial += 1
            return f"batch{self.serial:03d}"

    def _report(self, name, outcome, total):
        with self.lock:
            self.done += 1
            line = f"[{self.done}/{total}] {outcome.status:7s} {outcome.seconds:6.1f}s {name}"
            if outcome.status in ("fail", "timeout") or (self.verbose and outcome.status == "skip"):
                line += f"  -- {outcome.reason()}"
            print(line, flush=True)

    def run(self, names, total):
        """Runs names in one child, restarting after a kill; returns {name: Outcome}."""
        results, pending = {}, list(names)
        while pending:
            tag = self._next_tag()
            names_file = os.path.join(self.logs, tag + ".tests")
            events_file = os.path.join(self.logs, tag + ".events")
            log_path = os.path.join(self.logs, tag + ".log")
            with open(names_file, "w") as f:
                f.write("\n".join(pending) + "\n")
            with open(log_path, "w") as log:
                proc = subprocess.Popen([PYTHON, CHILD, "run", names_file, events_file],
                                        env=self.env, cwd=self.scratch, stdout=log,
                                        stderr=subprocess.STDOUT, start_new_session=True)
            launched = time.time()
            current, started, offset, killed = None, None, 0, False
            before = len(results)
            while True:
                exited = proc.poll() is not None
                offset, current, started = self._read_events(
                    events_file, offset, results, current, started, total)
                if exited:
                    break
                deadline_from = started if current else launched
                if time.time() - deadline_from > self.timeout + KILL_GRACE_S:
                    kill_tree(proc)
                    killed = True
                    offset, current, started = self._read_events(
                        events_file, offset, results, current, started, total)
                    if current:
                        outcome = Outcome("timeout", time.time() - started,
                                          f"killed after {self.timeout + KILL_GRACE_S} s "
                                          f"(log {log_path})")
                        results[current] = outcome
                        self._report(current, outcome, total)
                    break
                time.sleep(0.2)
            rc = proc.returncode
            kill_tree(proc)  # ranks a finished test left behind go too
            if current and current not in results:
                outcome = Outcome("fail", time.time() - started,
                                  f"batch process exited with {rc} during the test (log {log_path})")
                results[current] = outcome
                self._report(current, outcome, total)
            pending = [n for n in pending if n not in results]
            if pending and len(results) == before:
                # Nothing ran: the child cannot even import the suite. Say why once, for all.
                with open(log_path, errors="replace") as f:
                    tail = f.read()[-3000:]
                status = "timeout" if killed else "fail"
                for name in pending:
                    results[name] = Outcome(status, 0.0, f"batch could not start (rc {rc}):\n{tail}")
                    self._report(name, results[name], total)
                pending = []
        return results

    def _read_events(self, path, offset, results, current, started, total):
        if not os.path.exists(path):
            return offset, current, started
        with open(path) as f:
            f.seek(offset)
            chunk = f.read()
        complete = chunk[: chunk.rfind("\n") + 1]  # a half-written line waits for the next read
        for line in complete.splitlines():
            event = json.loads(line)
            if event["event"] == "start":
                current, started = event["test"], event["t"]
                continue
            status, detail = event["status"], event["detail"]
            # The suite's own deadline (its join timeout) is a timeout; a backend's message
            # that merely says "timed out" is an ordinary failure.
            if status == "fail" and (re.search(r"Process \d+ (terminated or )?timed out after", detail)
                                     or event["seconds"] >= self.timeout):
                status = "timeout"
            outcome = Outcome(status, event["seconds"], detail)
            results[event["test"]] = outcome
            self._report(event["test"], outcome, total)
            current = None
        return offset + len(complete), current, started


def run_backend(args, backend, names_for=None):
    """Runs one backend at args.world; returns (report dict, {name: Outcome})."""
    scratch = tempfile.mkdtemp(prefix=f"torch-suite-{backend}-w{args.world}-", dir=args.work_dir)
    env = child_env(backend, args.world, scratch, args.ouro_found, args.timeout_per_test)
    t0 = time.time()
    listing = list_tests(env, scratch)
    names, static = select(listing, args) if names_for is None else (names_for, None)
    if static is None:
        static = {t["name"]: t["static_skip"] for t in listing["tests"]}
    results = {n: Outcome("skip", 0.0, "decorator: " + static[n]) for n in names if static.get(n)}
    to_run = [n for n in names if n not in results]
    print(f"== {backend} world {args.world}: {len(listing['tests'])} tests in the suite, "
          f"{len(names)} selected, {len(results)} skipped by decorators, {len(to_run)} to run "
          f"(timeout {args.timeout_per_test} s, batches of {args.batch_size}, {args.jobs} job(s))",
          flush=True)
    runner = BatchRunner(env, scratch, args.timeout_per_test, args.verbose)
    batches = [to_run[i:i + args.batch_size] for i in range(0, len(to_run), args.batch_size)]
    with concurrent.futures.ThreadPoolExecutor(max_workers=args.jobs) as pool:
        for part in pool.map(lambda b: runner.run(b, len(to_run)), batches):
            results.update(part)
    seconds = time.time() - t0
    report = make_report(backend, args, listing, names, results, seconds)
    keep = args.keep or any(o.status in ("fail", "timeout") for o in results.values())
    if keep:
        shutil.rmtree(os.path.join(scratch, "tmp"), ignore_errors=True)
        shutil.rmtree(os.path.join(scratch, "temp"), ignore_errors=True)
        report["logs"] = runner.logs
    else:
        shutil.rmtree(scratch, ignore_errors=True)
    return report, results


def make_report(backend, args, listing, names, results, seconds):
    counts = {s: sorted(n for n in names if results[n].status == s)
              for s in ("pass", "fail", "skip", "timeout")}
    return {
        "backend": backend, "world": args.world, "subset": args.subset, "filters": args.k,
        "suite_tests": len(listing["tests"]), "selected": len(names),
        "seconds": round(seconds, 1), "patches": listing.get("patches", {}),
        "counts": {s: len(v) for s, v in counts.items()},
        "tests": {n: {"status": results[n].status, "seconds": round(results[n].seconds, 2),
                      "reason": results[n].reason(), "detail": results[n].detail[-6000:]}
                  for n in names},
    }


def summarize(report, results, excused):
    c = report["counts"]
    print(f"\n== {report['backend']} world {report['world']} ({report['subset']}): "
          f"{c['pass']} passed, {c['fail']} failed, {c['skip']} skipped, {c['timeout']} timed out "
          f"of {report['selected']} in {report['seconds']:.0f} s")
    for status in ("fail", "timeout"):
        for name, o in sorted(results.items()):
            if o.status == status:
                mark = " (excused: exceptions.txt)" if name in excused else ""
                print(f"  {status.upper():7s} {name}{mark}: {o.reason()}")
    if report.get("logs"):
        print(f"  logs: {report['logs']}")
    line = {k: report[k] for k in ("backend", "world", "subset", "selected", "seconds")}
    line.update(passed=c["pass"], failed=c["fail"], skipped=c["skip"], timed_out=c["timeout"])
    print("TORCH_SUITE_RESULT " + json.dumps(line), flush=True)


def bad_outcomes(report, strict, excused):
    """Names that make the run fail: failures and timeouts, and with strict (the CI subset,
    whose every test passes under gloo here) skips as well."""
    bad = {"fail", "timeout"} | ({"skip"} if strict else set())
    return sorted(n for n, t in report["tests"].items() if t["status"] in bad and n not in excused)


# ---- entry points ---------------------------------------------------------------------------

def exceptions_table():
    rows = ["| Test | Why it is excused |", "|---|---|"]
    rows += [f"| `{name}` | {reason} |" for name, reason in sorted(read_exceptions().items())]
    return "\n".join(rows) + "\n"


def check_doc(path):
    """The doc must carry exceptions.txt exactly as --render-exceptions prints it."""
    path = os.path.normpath(path)
    with open(path, encoding="utf-8") as f:
        doc = f.read()
    if exceptions_table() in doc:
        print(f"{path}: exception table matches {EXCEPTIONS} ({len(read_exceptions())} entries)")
        return 0
    print(f"FAIL {path} does not carry the table of {EXCEPTIONS}; paste the output of "
          "`tests/torch_suite/run_suite.py --render-exceptions` over the old one")
    return 1


def check_ouro(args):
    """Finds ouro's package when the run needs it; otherwise exits as the docs describe:
    77 while it is not built and the source tree has no python/ yet (meson), 1 after that,
    and 1 whenever it is built but does not import."""
    args.ouro_found = None
    if (args.against if args.compare else args.backend) != "ouro":
        return
    args.ouro_found, problem = find_ouro_package(args)
    if args.ouro_found:
        print(f"ouro.torch from {args.ouro_found}", flush=True)
        return
    status, why = problem
    if status == "absent" and args.builddir and not os.path.isdir(os.path.join(REPO, "python")):
        print(f"SKIP ouro.torch not built ({why}; the source tree has no python/ yet)")
        sys.exit(SKIP_EXIT)
    if status == "absent" and args.builddir:
        why += ("; python/ exists in the source tree, so this build must have ouro.torch"
                + (f" (meson: {args.build_summary})" if args.build_summary else ""))
    elif status == "absent":
        why += " (build it, or pass --ouro-path or --builddir)"
    print(f"FAIL {why}")
    sys.exit(1)


def load_baseline(args):
    """A gloo report written by --json, cut down to this run's selection."""
    with open(args.baseline) as f:
        base = json.load(f)
    base = base.get("gloo", base)
    if base["backend"] != "gloo" or base["world"] != args.world:
        raise SystemExit(f"run_suite: {args.baseline} is {base['backend']} at world "
                         f"{base['world']}, not gloo at world {args.world}")
    names = set(base["tests"])
    if args.subset == "ci":
        names &= set(read_ci_subset(args.world))
    if args.k:
        names = {n for n in names if any(re.search(p, n) for p in args.k)}
    base["tests"] = {n: t for n, t in base["tests"].items() if n in names}
    print(f"== gloo world {args.world}: {len(names)} tests from {args.baseline}", flush=True)
    return base


def parse_args(argv):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--backend", choices=list(BUILTIN) + sorted(PLUGIN_MODULES), default="gloo")
    p.add_argument("--world", type=int, default=2, help="ranks per test (default 2)")
    p.add_argument("--subset", choices=("ci", "full"), default="full")
    p.add_argument("-k", action="append", default=[], metavar="REGEX",
                   help="only tests whose name matches (re.search); repeatable, any may match")
    p.add_argument("--timeout-per-test", type=int, default=180, metavar="S",
                   help="seconds a test may run (default 180); the tree is killed 30 s later")
    p.add_argument("--jobs", type=int, default=1, help="batches run at once (default 1)")
    p.add_argument("--batch-size", type=int, default=16, help="tests per child process (default 16)")
    p.add_argument("--json", metavar="OUT", help="write the full report(s) here")
    p.add_argument("--compare", action="store_true",
                   help="run gloo and ouro on the same tests; fail on gloo passes that ouro loses")
    p.add_argument("--baseline", metavar="GLOO.json",
                   help="with --compare: take gloo's results from this --json report instead of running gloo")
    p.add_argument("--against", default="ouro", choices=sorted(PLUGIN_MODULES),
                   help="the backend --compare holds against gloo (default ouro)")
    p.add_argument("--builddir", help="meson build dir; ouro's package is <builddir>/python")
    p.add_argument("--ouro-path", help="folder holding the built `ouro` package")
    p.add_argument("--build-summary", default="",
                   help="meson's line on the Python package, quoted when ouro.torch is missing")
    p.add_argument("--work-dir", help="where scratch folders go (default: the system temp dir)")
    p.add_argument("--keep", action="store_true", help="keep the logs even when all passed")
    p.add_argument("--verbose", action="store_true", help="print skip reasons as tests end")
    p.add_argument("--render-exceptions", action="store_true",
                   help="print exceptions.txt as the markdown table docs/TORCH-SUITE.md carries")
    p.add_argument("--check-doc", metavar="MD", help="check that MD carries that table; no torch needed")
    args = p.parse_args(argv)
    # The children import from another working directory: relative paths would not resolve there.
    if args.builddir:
        args.builddir = os.path.abspath(args.builddir)
    if args.ouro_path:
        args.ouro_path = os.path.abspath(args.ouro_path)
    if args.world < 2:
        p.error("--world must be at least 2")
    return args


def main(argv):
    args = parse_args(argv)
    if args.render_exceptions:
        print(exceptions_table(), end="")
        return 0
    if args.check_doc:
        return check_doc(args.check_doc)
    problem = torch_problem()
    if problem:
        print(f"SKIP {problem}")
        return SKIP_EXIT
    check_ouro(args)
    excused = read_exceptions()
    strict = args.subset == "ci"
    if not args.compare:
        report, results = run_backend(args, args.backend)
        excuse = excused if args.backend != "gloo" else {}
        summarize(report, results, excuse)
        if args.json:
            with open(args.json, "w") as f:
                json.dump(report, f, indent=1)
        return 1 if bad_outcomes(report, strict, excuse) else 0

    if args.baseline:
        base = load_baseline(args)
    else:
        base, base_results = run_backend(args, "gloo")
        summarize(base, base_results, {})
    names = sorted(base["tests"])
    other, other_results = run_backend(args, args.against, names_for=names)
    summarize(other, other_results, excused)
    lost = sorted(n for n in names if base["tests"][n]["status"] == "pass"
                  and other["tests"][n]["status"] != "pass")
    gained = sorted(n for n in names if other["tests"][n]["status"] == "pass"
                    and base["tests"][n]["status"] != "pass")
    unexcused = [n for n in lost if n not in excused]
    stale = sorted(n for n in excused if n in names and other["tests"][n]["status"] == "pass")
    print(f"\n== compare world {args.world}: {len(lost)} test(s) pass under gloo but not under "
          f"{args.against}, {len(unexcused)} of them not in exceptions.txt")
    for n in lost:
        t = other["tests"][n]
        print(f"  {'EXCUSED' if n in excused else 'LOST':7s} {n} [{t['status']}]: "
              f"{excused.get(n) or t['reason']}")
    for n in gained:
        print(f"  GAINED  {n} (passes under {args.against}, {base['tests'][n]['status']} under gloo)")
    for n in stale:
        print(f"  STALE   {n}: passes under {args.against} but is listed in exceptions.txt")
    summary = {"world": args.world, "subset": args.subset, "against": args.against,
               "lost": len(lost), "unexcused": unexcused, "gained": len(gained), "stale": stale}
    print("TORCH_SUITE_COMPARE " + json.dumps(summary), flush=True)
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"gloo": base, args.against: other, "compare": summary}, f, indent=1)
    return 1 if unexcused else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
