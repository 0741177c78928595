#!/usr/bin/python3
"""Starts WORLD ranks of a Python test script and bounds the job in time.

    launch.py WORLD SCRIPT [ARGS...]

Every rank runs `/usr/bin/python3 SCRIPT ARGS` with PYOURO_TEST_RANK, PYOURO_TEST_WORLD, PYOURO_TEST_PORT and
PYOURO_TEST_PORT2 (free TCP ports for rendezvous) and PYOURO_TEST_DIR (a fresh directory, for file:// and scratch)
set, plus OURO_TIMEOUT_S=60 unless given, so a hung collective fails inside the test's budget
rather than at meson's. Exit: 0 when every rank passes; 77 (skipped) when every rank exits 77
(torch missing), printing the first rank's one-line reason; 1 otherwise, with the output of every
rank that failed. A rank that fails makes the others stop after a short grace.
"""

import os
import socket
import subprocess
import sys
import tempfile
import time

SKIP = 77
JOB_TIMEOUT_S = float(os.environ.get("PYOURO_TEST_JOB_TIMEOUT_S", "150"))
PYTHON = "/usr/bin/python3"  # Debian's torch and numpy live here, not in a python3 earlier on PATH


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def main():
    if len(sys.argv) < 3:
        sys.exit("usage: launch.py WORLD SCRIPT [ARGS...]")
    world, script, args = int(sys.argv[1]), sys.argv[2], sys.argv[3:]
    with tempfile.TemporaryDirectory(prefix="ouro-pytest-") as work:
        env = dict(os.environ, PYOURO_TEST_WORLD=str(world), PYOURO_TEST_PORT=str(free_port()),
                   PYOURO_TEST_PORT2=str(free_port()), PYOURO_TEST_DIR=work)
        env.setdefault("OURO_TIMEOUT_S", "60")
        procs, logs = [], []
        for rank in range(world):
            log = open(os.path.join(work, f"rank{rank}.log"), "w+")
            procs.append(subprocess.Popen([PYTHON, script, *args], env=dict(env, PYOURO_TEST_RANK=str(rank)),
                                          stdout=log, stderr=subprocess.STDOUT))
            logs.append(log)
        deadline = time.monotonic() + JOB_TIMEOUT_S
        failed_at = None
        while any(p.poll() is None for p in procs):
            now = time.monotonic()
            if failed_at is None and any(p.returncode not in (None, 0, SKIP) for p in procs):
                failed_at = now
            if now > deadline or (failed_at is not None and now > failed_at + 10):
                for p in procs:
                    if p.poll() is None:
                        p.kill()
                break
            time.sleep(0.05)
        codes = [p.wait() for p in procs]
        outputs = []
        for log in logs:
            log.seek(0)
            outputs.append(log.read())
            log.close()
    if all(c == SKIP for c in codes):
        print(outputs[0].strip().splitlines()[-1] if outputs[0].strip() else "skipped")
        return SKIP
    if all(c == 0 for c in codes):
        for rank, out in enumerate(outputs):
            lines = [line for line in out.splitlines() if line.startswith("ok")]
            print(f"rank {rank}: {lines[-1] if lines else 'passed'}")
        return 0
    timed_out = time.monotonic() > deadline
    print(f"FAIL {os.path.basename(script)} at world size {world}: exit codes {codes}"
          + (f" (the job ran past {JOB_TIMEOUT_S:.0f} s and was killed)" if timed_out else ""))
    for rank, (code, out) in enumerate(zip(codes, outputs)):
        if code != 0:
            print(f"---- rank {rank} (exit {code}) ----\n{out}")
    return 1


if __name__ == "__main__":
    sys.exit(main())
