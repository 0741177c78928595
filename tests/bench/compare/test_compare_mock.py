#!/usr/bin/python3
"""compare.py against stand-in programs (mock/): every system "installed", each misbehaving in
its own way, so the runner's bookkeeping is tested without MPI, Gloo, torch or ouro-bench:
commands and launcher flags, the timeout killing a hung run, failures recorded without
stopping the comparison, the table fallback when JSON is missing, systems skipped for a
collective they lack or for a missing program, results.csv / runs.csv / summary.md, the
best-peer ratio, and the plots. Runs in a few seconds."""

import csv
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
import unittest
from pathlib import Path

HERE = Path(__file__).resolve().parent
COMPARE = HERE.parents[2] / "bench" / "compare" / "compare.py"
MOCK = HERE / "mock"
SIZES = ["-b", "8", "-e", "4K", "-f", "8"]  # 8, 64, 512, 4096


def read_csv(path):
    with open(path, newline="") as f:
        return list(csv.DictReader(f))


class MockSetup(unittest.TestCase):
    """A fake build tree and PATH per test class; each class runs compare once (setUpClass)
    and its tests read the outputs, except CommandLine which runs it per test."""

    @classmethod
    def setUpClass(cls):
        cls.make_tree()

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.dir, ignore_errors=True)

    @classmethod
    def make_tree(cls):
        self = cls
        self.dir = Path(tempfile.mkdtemp(prefix="ouro-compare-mock-"))
        build, fakebin = self.dir / "build", self.dir / "bin"
        for d in (build / "bench/peers", build / "tools/ouro-run", fakebin, self.dir / "torch",
                  self.dir / "tmp"):
            d.mkdir(parents=True)
        # The stand-ins tell which system they are from the name they are run under.
        (build / "bench/ouro-bench").symlink_to(MOCK / "fake_bench.py")
        for peer in ("openmpi", "mpich", "gloo"):
            (build / f"bench/peers/ouro-bench-{peer}").symlink_to(MOCK / "fake_bench.py")
        (self.dir / "torch/torch_bench.py").symlink_to(MOCK / "fake_bench.py")
        (build / "tools/ouro-run/ouro-run").symlink_to(MOCK / "fake_launcher.py")
        for launcher in ("mpirun.openmpi", "mpirun.mpich"):
            (fakebin / launcher).symlink_to(MOCK / "fake_launcher.py")
        self.build, self.out = build, self.dir / "out"
        self.env = dict(os.environ, PATH=f"{fakebin}:{os.environ.get('PATH', '')}",
                        TMPDIR=str(self.dir / "tmp"))

    @classmethod
    def compare(self, *args, behavior="", timeout=120):
        env = dict(self.env, FAKE_BENCH_BEHAVIOR=behavior,
                   FAKE_BENCH_PIDFILE=str(self.dir / "hung.pid"))
        cmd = [sys.executable, str(COMPARE), "--build", str(self.build), "--out", str(self.out),
               "--torch-script", str(self.dir / "torch/torch_bench.py"),
               "--python", str(MOCK / "fake_python.py"), *SIZES, *args]
        return subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=timeout)

    @classmethod
    def runs(self):
        return {(r["system"], r["collective"], int(r["nranks"])): r
                for r in read_csv(self.out / "runs.csv")}


class Failures(MockSetup):
    """One all_reduce on 2 ranks where four of six systems misbehave."""

    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        start = time.monotonic()
        cls.proc = cls.compare(
            "--ranks", "2", "--collectives", "all_reduce", "--timeout", "2",
            behavior="openmpi:hang,mpich:crash,gloo:nojson,torch:wrong")
        cls.wall = time.monotonic() - start

    def test_each_failure_recorded_and_the_rest_ran(self):
        self.assertEqual(self.proc.returncode, 1, self.proc.stderr)
        runs = self.runs()
        status = {k[0]: (r["status"], r["source"], int(r["sizes"])) for k, r in runs.items()}
        self.assertEqual(status, {
            "ouro": ("ok", "json", 4), "ouro-tcp": ("ok", "json", 4),
            "openmpi": ("timeout", "table", 2),  # rows printed before it hung are kept
            "mpich": ("failed", "table", 2),     # exit 3 after two rows, no JSON
            "gloo": ("ok", "table", 4),          # no JSON: the stdout table parser
            "torch": ("wrong", "json", 4),
            "torch-ouro": ("missing", "", 0)})  # optional: the mock tree has no build/python
        self.assertIn("wrong elements at 1 size(s): 64", runs[("torch", "all_reduce", 2)]["note"])
        self.assertIn("exit 3", runs[("mpich", "all_reduce", 2)]["note"])

    def test_timeout_killed_the_hung_program(self):
        self.assertLess(self.wall, 60)
        pid = int((self.dir / "hung.pid").read_text())
        self.assertFalse(Path(f"/proc/{pid}").exists(), "hung rank still alive after timeout")

    def test_rendezvous_dirs_removed(self):
        self.assertEqual(list((self.dir / "tmp").iterdir()), [])

    def test_wrong_sizes_flagged_not_best(self):
        summary = (self.out / "summary.md").read_text()
        self.assertIn("`!` marks sizes where the check found wrong elements", summary)
        self.assertIn("- openmpi: timeout", summary)
        self.assertIn("logs/all_reduce_np2_mpich.log", summary)
        log = (self.out / "logs/all_reduce_np2_openmpi.log").read_text()
        self.assertIn("--allow-run-as-root --oversubscribe -n 2", log)
        self.assertIn("timed out after 2s", log)


class Sweep(MockSetup):
    """Everything works: two collectives x two world sizes; one peer not built."""

    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        (cls.build / "bench/peers/ouro-bench-mpich").unlink()
        cls.proc = cls.compare("--ranks", "2,4", "--collectives", "all_reduce,reduce_scatter",
                               "--budget", "0.01", behavior="gloo@reduce_scatter:skip")

    def test_exit_and_statuses(self):
        self.assertEqual(self.proc.returncode, 0, self.proc.stderr)
        runs = self.runs()
        self.assertEqual(len(runs), 2 * 2 * 7)  # collectives x world sizes x default systems
        for n in (2, 4):
            # gloo's program says it skips; torch is known to lack it and is not started.
            gloo = runs[("gloo", "reduce_scatter", n)]
            self.assertEqual((gloo["status"], gloo["rc"]), ("unsupported", "0"))
            self.assertIn("does not support", gloo["note"])
            torch = runs[("torch", "reduce_scatter", n)]
            self.assertEqual((torch["status"], torch["rc"]), ("unsupported", ""))
            self.assertEqual(runs[("gloo", "all_reduce", n)]["status"], "ok")
            self.assertEqual(runs[("mpich", "all_reduce", n)]["status"], "missing")
            self.assertIn("not built", runs[("mpich", "all_reduce", n)]["note"])
            self.assertEqual(runs[("openmpi", "all_reduce", n)]["status"], "ok")
            # ouro's torch backend is optional: missing from this tree, noted, exit status 0.
            self.assertEqual(runs[("torch-ouro", "all_reduce", n)]["status"], "missing")
            self.assertIn("no torch backend", runs[("torch-ouro", "all_reduce", n)]["note"])

    def test_results_csv(self):
        rows = read_csv(self.out / "results.csv")
        self.assertEqual(list(rows[0]), ["system", "collective", "nranks", "dtype", "placement",
                                         "size_bytes", "count", "time_us", "algbw", "busbw",
                                         "wrong", "repeat"])
        key = {(r["system"], r["collective"], r["nranks"], r["size_bytes"]) for r in rows}
        for system in ("ouro", "ouro-tcp", "openmpi"):
            for coll in ("all_reduce", "reduce_scatter"):
                for n in ("2", "4"):
                    for size in ("8", "64", "512", "4096"):
                        self.assertIn((system, coll, n, size), key)
        self.assertNotIn("mpich", {r["system"] for r in rows})
        self.assertTrue(all(r["dtype"] == "float32" and r["placement"] == "out" for r in rows))

    def test_every_program_got_the_same_arguments(self):
        logs = sorted((self.out / "logs").glob("all_reduce_np4_*.log"))
        # Everything after the collective but the JSON path, which names the system, and a
        # system's own trailing flags (ouro's --host: host buffers even on a GPU machine).
        tails = {p.name: re.sub(r"-J \S+ ", "", p.read_text().splitlines()[0]
                                .split(" all_reduce ", 1)[1]).removesuffix(" --host") for p in logs}
        self.assertEqual(len(set(tails.values())), 1, tails)
        self.assertIn("-b 8 -e 4K -f 8 -n 20 -w 5 -d float32 -c 1 --placement out", tails[
            "all_reduce_np4_ouro.log"])
        self.assertIn("--budget 0.01", tails["all_reduce_np4_ouro.log"])
        ouro_tcp = (self.out / "logs/all_reduce_np4_ouro-tcp.log").read_text().splitlines()[0]
        self.assertIn("OURO_TRANSPORT=tcp", ouro_tcp)

    def test_summary_tables_and_ratio(self):
        summary = (self.out / "summary.md").read_text()
        for title in ("## all_reduce, 2 ranks, float32", "## reduce_scatter, 4 ranks, float32"):
            self.assertIn(title, summary)
            self.assertIn(title, self.proc.stdout)  # the tables go to stdout too
        # Mock model: ouro 1 us + size/8 GB/s, openmpi 0.5 us + size/4 GB/s: openmpi is the
        # best peer everywhere; ratio 0.502/1.001 at 8 B and 1.524/1.512 at 4 KiB.
        row8 = next(ln for ln in summary.splitlines() if re.match(r"\|\s+8 B ", ln))
        self.assertRegex(row8, r"\| +openmpi \| +0\.501x \|$")
        row4k = next(ln for ln in summary.splitlines() if re.match(r"\|\s+4 KiB ", ln))
        self.assertRegex(row4k, r"\| +openmpi \| +1\.01x \|$")
        self.assertIn("AMD" if "AMD" in Path("/proc/cpuinfo").read_text() else "cpu:", summary)

    def test_plots(self):
        # gnuplot-nox is one of scripts/setup.sh's packages: without it this is a broken set-up.
        self.assertTrue(shutil.which("gnuplot"), "gnuplot is not installed (scripts/setup.sh installs gnuplot-nox)")
        for coll in ("all_reduce", "reduce_scatter"):
            for n in (2, 4):
                for kind in ("busbw", "latency"):
                    png = self.out / f"{coll}_np{n}_{kind}.png"
                    self.assertTrue(png.is_file(), png)
                    self.assertEqual(png.read_bytes()[:8], b"\x89PNG\r\n\x1a\n")


class Repeat(MockSetup):
    """--repeat 3 with one slow run of ouro and of openmpi: tables show the median run."""

    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        cls.proc = cls.compare("--ranks", "2", "--collectives", "all_reduce", "--systems",
                               "ouro,openmpi", "--repeat", "3", "--no-plots",
                               behavior="ouro:slowonce,openmpi:slowonce")

    def test_every_run_recorded(self):
        self.assertEqual(self.proc.returncode, 0, self.proc.stderr)
        runs = read_csv(self.out / "runs.csv")
        self.assertEqual(sorted((r["system"], r["repeat"]) for r in runs),
                         [(s, str(k)) for s in ("openmpi", "ouro") for k in (1, 2, 3)])
        self.assertEqual(len({r["log"] for r in runs}), 6)  # one log per run, none overwritten
        rows = [r for r in read_csv(self.out / "results.csv")
                if r["system"] == "ouro" and r["size_bytes"] == "8"]
        times = sorted(float(r["time_us"]) for r in rows)
        self.assertEqual(len(times), 3)
        self.assertAlmostEqual(times[2], 10 * times[0], places=3)  # the slow first run is kept

    def test_ouro_runs_note_the_core_distance(self):
        notes = {(r["system"], r["repeat"]): r["note"] for r in read_csv(self.out / "runs.csv")}
        for k in ("1", "2", "3"):
            self.assertEqual(notes[("ouro", k)], "cores far apart (452 ns)")
            self.assertEqual(notes[("openmpi", k)], "")
        self.assertRegex((self.out / "summary.md").read_text(), r"\| ouro \(run 1\) .*\| cores far apart \(452 ns\) \|")

    def test_tables_show_the_median(self):
        summary = (self.out / "summary.md").read_text()
        self.assertIn("median of 3 interleaved runs", summary)
        self.assertRegex(summary, r"\| ouro \(run 2\) +\| all_reduce ")
        # Model times (ouro 1 us + size/8 GB/s, openmpi 0.5 + size/4): the slow runs are left out.
        row8 = next(ln for ln in summary.splitlines() if re.match(r"\|\s+8 B ", ln))
        self.assertRegex(row8, r"^\|\s+8 B \|\s+1\.00 \|")
        self.assertRegex(row8, r"\| +openmpi \| +0\.501x \|$")


class CommandLine(MockSetup):
    # A fresh tree per test: one of them deletes ouro-bench.
    @classmethod
    def setUpClass(cls):
        pass

    @classmethod
    def tearDownClass(cls):
        pass

    def setUp(self):
        self.make_tree()

    def tearDown(self):
        shutil.rmtree(self.dir, ignore_errors=True)

    def test_dry_run_prints_launchers(self):
        p = self.compare("--ranks", "3", "--collectives", "allgather", "--dry-run",
                         "--systems", "openmpi,mpich,gloo", "--", "--seed", "7")
        self.assertEqual(p.returncode, 0, p.stderr)
        lines = p.stdout.splitlines()
        self.assertEqual(len(lines), 3)
        self.assertIn("mpirun.openmpi --allow-run-as-root --oversubscribe -n 3 ",
                      lines[0])
        self.assertRegex(lines[1], r"mpirun.mpich -n 3 \S+/ouro-bench-mpich all_gather ")
        self.assertIn("OURO_BENCH_GLOO_STORE=", lines[2])
        self.assertTrue(all(ln.endswith("--seed 7") for ln in lines))
        self.assertFalse(self.out.exists())

    def test_ouro_tcp_with_the_kernels_congestion_control(self):
        p = self.compare("--ranks", "2", "--collectives", "all_reduce", "--dry-run",
                         "--systems", "ouro-tcp,ouro-tcp-syscc")
        self.assertEqual(p.returncode, 0, p.stderr)
        tcp, syscc = p.stdout.splitlines()
        self.assertNotIn("OURO_TCP_CONGESTION", tcp)
        self.assertIn("OURO_TCP_CONGESTION=system", syscc)
        self.assertIn("OURO_TRANSPORT=tcp", syscc)

    def test_bad_arguments(self):
        for args in (["--systems", "nccl"], ["--collectives", "allfoo"], ["--ranks", "0"],
                     ["--repeat", "0"]):
            p = self.compare(*args, "--dry-run")
            self.assertEqual(p.returncode, 2, args)

    def test_missing_ouro_bench_fails(self):
        (self.build / "bench/ouro-bench").unlink()
        p = self.compare("--ranks", "2", "--collectives", "all_reduce", "--systems",
                         "ouro,openmpi", "--no-plots")
        self.assertEqual(p.returncode, 1)
        self.assertEqual(self.runs()[("ouro", "all_reduce", 2)]["status"], "missing")
        self.assertEqual(list(self.out.glob("*.png")), [])


if __name__ == "__main__":
    unittest.main(verbosity=2)
