#!/usr/bin/python3
"""A rank SIGKILLed at a random step: the job ends with the uninterrupted run's SHA-256.

    test_ouro_train_recovery.py OURO_RUN OURO_TRAIN CASE [SEED]

A tiny GPT (test_ouro_train_gpt.py's) with 6 virtual ranks on a text the test writes, 3 ranks,
300 steps; rank 1 is killed with SIGKILL once the metrics show a step drawn at random in 20..150.

CASE:
  shrink-ddp    ouro-run --rank-failure continue, ouro-train --on-failure shrink in ddp: the two
                ranks left shrink, redo the step from their own copies and finish
  shrink-zero2  the same in zero2, which reloads the newest checkpoint (every 25 steps)
  restart       ouro-run --max-restarts 1: every rank starts again, --resume auto reloads the
                newest checkpoint at the same world size
  trials10      10 trials at random steps, the three kinds in turn (the documented long run,
                docs/ELASTIC.md; SEED picks the steps)
Every trial also checks that the job left nothing in /dev/shm and no process behind.
Exit status: 0 pass, 1 fail.
"""

import glob
import hashlib
import os
import random
import signal
import subprocess
import sys
import tempfile
import time

from cli_support import JOB_TIMEOUT_S, check, clean_env, main, run
from test_ouro_train_gpt import gpt, ranks, write_corpus

WORLD, VIRTUAL, STEPS = 3, 6, 300


def sha(path):
    with open(path, "rb") as f:
        return hashlib.sha256(f.read()).hexdigest()


def config(work, mode):
    return ["--mode", mode, *gpt(f"{work}/corpus.txt", "--batch-size", "2", "--steps", str(STEPS), "--sample", "0",
                                 "--virtual-ranks", str(VIRTUAL), "--log-every", "1")]


def ouro_train_pids(ouro_train):
    """{launch rank: pid} of the ouro-train processes running now."""
    pids = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/cmdline", "rb") as f:
                if not f.read().startswith(ouro_train.encode() + b"\0"):
                    continue
            with open(f"/proc/{entry}/environ", "rb") as f:
                env = dict(item.split(b"=", 1) for item in f.read().split(b"\0") if b"=" in item)
        except OSError:
            continue
        if b"OURO_RANK" in env:
            pids[int(env[b"OURO_RANK"])] = int(entry)
    return pids


def last_step(csv):
    try:
        with open(csv) as f:
            rows = f.read().splitlines()[1:]
        return int(rows[-1].split(",")[1]) if rows else 0
    except (OSError, ValueError, IndexError):
        return 0


def shm_files():
    return set(glob.glob("/dev/shm/ouro-*"))


def trial(ouro_run, ouro_train, work, kind, kill_step, reference):
    """One run of `kind` with rank 1 killed at kill_step; checks the SHA-256 against reference."""
    name = f"{kind}-{kill_step}"
    mode = "zero2" if kind == "shrink-zero2" else "ddp"
    flags = config(work, mode) + ["--metrics", f"{work}/{name}.csv", "--save", f"{work}/{name}.safetensors"]
    if kind.startswith("shrink"):
        launcher = [ouro_run, "-n", str(WORLD), "--rank-failure", "continue"]
        flags += ["--on-failure", "shrink"]
    else:
        launcher = [ouro_run, "-n", str(WORLD), "--max-restarts", "1"]
        flags += ["--resume", "auto"]
    if kind != "shrink-ddp":
        flags += ["--checkpoint", f"{work}/{name}-ck", "--checkpoint-every", "25"]
    shm_before = shm_files()
    env = clean_env({"OURO_TIMEOUT_S": "30"})
    job = subprocess.Popen([*launcher, ouro_train, *flags], cwd=work, env=env, stdout=subprocess.PIPE,
                           stderr=subprocess.PIPE, text=True)
    killed = None
    deadline = time.time() + JOB_TIMEOUT_S
    while job.poll() is None and time.time() < deadline:
        if killed is None and last_step(f"{work}/{name}.csv") >= kill_step:
            pid = ouro_train_pids(ouro_train).get(1)
            if pid:
                os.kill(pid, signal.SIGKILL)
                killed = (pid, last_step(f"{work}/{name}.csv"))
        time.sleep(0.005)
    if job.poll() is None:
        job.kill()
    out, err = job.communicate(timeout=30)
    check(killed is not None, f"{name}: the run ended (exit {job.returncode}) before step {kill_step}:\n{err[-2000:]}")
    check(job.returncode == 0, f"{name}: exit status {job.returncode}\n--- stdout\n{out[-2000:]}\n--- stderr\n{err[-3000:]}")
    what = "lost rank(s) 1" if kind.startswith("shrink") else "1 restart"
    check(what in out + err, f"{name}: the output does not say '{what}':\n{out[-1500:]}\n{err[-1500:]}")
    got = sha(f"{work}/{name}.safetensors")
    check(got == reference, f"{name}: rank 1 killed at step {killed[1]}: SHA-256 {got[:16]}, uninterrupted {reference[:16]}")
    left = ouro_train_pids(ouro_train)
    check(not left, f"{name}: ouro-train processes left behind: {left}")
    check(shm_files() <= shm_before, f"{name}: left in /dev/shm: {sorted(shm_files() - shm_before)}")
    return f"{kind} killed at step {killed[1]}"


def trials(kinds, seed):
    def case(ouro_run, ouro_train):
        rng = random.Random(seed)
        with tempfile.TemporaryDirectory(prefix="ouro-train-recovery-") as work:
            write_corpus(f"{work}/corpus.txt")
            # The uninterrupted run: what every trial must end with (the same at any world size).
            run(ranks(ouro_run, WORLD, ouro_train, *config(work, "ddp"), "--save", f"{work}/full.safetensors"), work)
            reference = sha(f"{work}/full.safetensors")
            done = [trial(ouro_run, ouro_train, work, kind, rng.randint(20, 150), reference) for kind in kinds]
        return f"{len(done)} trial(s), one SHA-256 ({reference[:12]}...): " + "; ".join(done)
    return case


if __name__ == "__main__":
    seed = int(sys.argv[4]) if len(sys.argv) > 4 else int(time.time())
    cases = {"shrink-ddp": trials(["shrink-ddp"], seed), "shrink-zero2": trials(["shrink-zero2"], seed),
             "restart": trials(["restart"], seed),
             "trials10": trials(["shrink-ddp", "shrink-zero2", "restart"] * 3 + ["shrink-ddp"], seed)}
    print(f"seed {seed}")
    sys.exit(main(cases, sys.argv[1:4]))
