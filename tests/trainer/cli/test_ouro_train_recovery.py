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
  shrink-resumed  zero2 resumed (--resume) from another folder's step-30 checkpoint, written with
                another --lr, loses rank 1 before its own first checkpoint: it goes on from the
                checkpoint it resumed, not from its initial weights at step 0
  other-run-folder  a --checkpoint folder holding another run's checkpoints is refused (exit 2,
                nothing written) unless this run continues that run
  shrink-late   rank 2 is stopped (SIGSTOP) as rank 1 is killed and continued 3 s later: rank 2
                is alive, not lost; the job goes on with ranks 0 and 2. And --on-failure shrink
                under a launcher that does not report lost ranks is refused
  shrink-hsdp   hsdp at W=6 in shard groups of 3 loses rank 1: the 5 left re-plan their groups
                (5 is not a multiple of 3) and finish
  trials10      10 trials at random steps, the three first kinds in turn (the documented long
                run, docs/ELASTIC.md; SEED picks the steps)
Every kill trial also checks that the job left nothing in /dev/shm and no process behind, and
what its --json says of the recovery.
Exit status: 0 pass, 1 fail.
"""

import glob
import hashlib
import json
import os
import random
import signal
import subprocess
import sys
import tempfile
import time

from cli_support import JOB_TIMEOUT_S, check, clean_env, files_under, main, run
from test_ouro_train_gpt import gpt, ranks, write_corpus

WORLD, VIRTUAL, STEPS = 3, 6, 300


def sha(path):
    with open(path, "rb") as f:
        return hashlib.sha256(f.read()).hexdigest()


def config(work, mode, *extra):
    return ["--mode", mode, *gpt(f"{work}/corpus.txt", "--batch-size", "2", "--steps", str(STEPS), "--sample", "0",
                                 "--virtual-ranks", str(VIRTUAL), "--log-every", "1"), *extra]


def ouro_train_pids(ouro_train, trial_id):
    """{launch rank: pid} of this trial's ouro-train processes running now: those whose environment
    carries OURO_TEST_TRIAL=trial_id (another job of the same binary, a benchmark or a second test
    run on the machine, must never be stopped or killed, or counted as left behind)."""
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
        if b"OURO_RANK" in env and env.get(b"OURO_TEST_TRIAL") == trial_id.encode():
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


# What each kind of trial runs: the mode, the world, the extra flags, and how it recovers.
KINDS = {
    "shrink-ddp": ("ddp", WORLD, []),
    "shrink-zero2": ("zero2", WORLD, []),
    "restart": ("ddp", WORLD, []),
    "shrink-late": ("ddp", WORLD, []),
    "shrink-hsdp": ("hsdp", 6, ["--shard-size", "3"]),
}


def trial(ouro_run, ouro_train, work, kind, kill_step, reference, flags_before=(), stop_rank=None):
    """One run of `kind` with rank 1 killed at kill_step; checks the SHA-256 against reference.
    flags_before: more ouro-train flags (a --resume); stop_rank: a rank SIGSTOPped as rank 1 is
    killed and continued 3 s later. Returns a description and the --json report."""
    name = f"{kind}-{kill_step}"
    mode, world, extra = KINDS[kind] if kind in KINDS else ("zero2", WORLD, [])
    flags = config(work, mode, *extra, *flags_before) + [
        "--metrics", f"{work}/{name}.csv", "--save", f"{work}/{name}.safetensors", "--json", f"{work}/{name}.json"]
    if kind.startswith("shrink"):
        launcher = [ouro_run, "-n", str(world), "--rank-failure", "continue"]
        flags += ["--on-failure", "shrink"]
    else:
        launcher = [ouro_run, "-n", str(world), "--max-restarts", "1"]
        flags += ["--resume", "auto"]
    if kind not in ("shrink-ddp", "shrink-late"):
        every = "1000" if kind == "shrink-resumed" else "25"  # shrink-resumed: none of its own before the kill
        flags += ["--checkpoint", f"{work}/{name}-ck", "--checkpoint-every", every]
    shm_before = shm_files()
    trial_id = f"{work}/{name}"
    env = clean_env({"OURO_TIMEOUT_S": "30", "OURO_TEST_TRIAL": trial_id})
    job = subprocess.Popen([*launcher, ouro_train, *flags], cwd=work, env=env, stdout=subprocess.PIPE,
                           stderr=subprocess.PIPE, text=True)
    killed = None
    deadline = time.time() + JOB_TIMEOUT_S
    while job.poll() is None and time.time() < deadline:
        if killed is None and last_step(f"{work}/{name}.csv") >= kill_step:
            pids = ouro_train_pids(ouro_train, trial_id)
            if pids.get(1) and (stop_rank is None or pids.get(stop_rank)):
                if stop_rank is not None:
                    os.kill(pids[stop_rank], signal.SIGSTOP)
                os.kill(pids[1], signal.SIGKILL)
                killed = (pids[1], last_step(f"{work}/{name}.csv"))
                if stop_rank is not None:
                    time.sleep(3)  # longer than any quiet window a leader might wait for
                    os.kill(pids[stop_rank], signal.SIGCONT)
        time.sleep(0.005)
    if job.poll() is None:
        job.kill()
    out, err = job.communicate(timeout=30)
    check(killed is not None, f"{name}: the run ended (exit {job.returncode}) before step {kill_step}:\n{err[-2000:]}")
    check(job.returncode == 0, f"{name}: exit status {job.returncode}\n--- stdout\n{out[-2000:]}\n--- stderr\n{err[-3000:]}")
    what = "lost rank(s) 1 at" if kind.startswith("shrink") else "1 restart"
    check(what in out + err, f"{name}: the output does not say '{what}':\n{out[-1500:]}\n{err[-1500:]}")
    got = sha(f"{work}/{name}.safetensors")
    check(got == reference, f"{name}: rank 1 killed at step {killed[1]}: SHA-256 {got[:16]}, uninterrupted {reference[:16]}"
          f"\n--- stdout\n{out[-1500:]}")
    left = ouro_train_pids(ouro_train, trial_id)
    check(not left, f"{name}: ouro-train processes left behind: {left}")
    check(shm_files() <= shm_before, f"{name}: left in /dev/shm: {sorted(shm_files() - shm_before)}")
    with open(f"{work}/{name}.json") as f:
        report = json.load(f)
    if kind.startswith("shrink"):
        recoveries = report["recoveries"]
        check(len(recoveries) == 1 and recoveries[0]["lost_ranks"] == [1] and recoveries[0]["world_size"] == world - 1,
              f"{name}: recoveries {recoveries}, expected one that lost rank 1 and went on with {world - 1} ranks")
        if kind == "shrink-hsdp":
            # Groups of 3 cannot cut 5 ranks; the smallest size that does and holds no more per
            # rank is 5: zero3 over the ranks left.
            check(recoveries[0]["mode"] == "zero3" and "re-planned: zero3 over the 5 ranks left" in out,
                  f"{name}: recovery {recoveries[0]}, output {out[-800:]}: expected hsdp re-planned as zero3 over 5")
    return f"{kind} killed at step {killed[1]}", report


def trials(kinds, seed):
    def case(ouro_run, ouro_train):
        rng = random.Random(seed)
        with tempfile.TemporaryDirectory(prefix="ouro-train-recovery-") as work:
            write_corpus(f"{work}/corpus.txt")
            # The uninterrupted run: what every trial must end with (the same at any world size).
            run(ranks(ouro_run, WORLD, ouro_train, *config(work, "ddp"), "--save", f"{work}/full.safetensors"), work)
            reference = sha(f"{work}/full.safetensors")
            if "shrink-late" in kinds:
                # Without a launcher that reports lost ranks, silence would have to decide: refused.
                _, _, err = run(ranks(ouro_run, 2, ouro_train, *config(work, "ddp"), "--on-failure", "shrink"), work,
                                expect=2)
                words = "--on-failure shrink needs a launcher that reports lost ranks"
                check(err.count(words) == 1, f"shrink under ouro-run --rank-failure stop: expected {words!r}:\n{err}")
            done = [trial(ouro_run, ouro_train, work, kind, rng.randint(20, 150), reference,
                          stop_rank=2 if kind == "shrink-late" else None)[0] for kind in kinds]
        return f"{len(done)} trial(s), one SHA-256 ({reference[:12]}...): " + "; ".join(done)
    return case


def shrink_resumed(seed):
    """A run resumed from another folder's checkpoint loses a rank before its own first one."""
    def case(ouro_run, ouro_train):
        rng = random.Random(seed)
        with tempfile.TemporaryDirectory(prefix="ouro-train-recovery-") as work:
            write_corpus(f"{work}/corpus.txt")
            # 30 steps at another learning rate: a state the resumed run's own start cannot reach.
            run(ranks(ouro_run, WORLD, ouro_train, *config(work, "zero2", "--lr", "0.01", "--steps", "30"),
                      "--checkpoint", f"{work}/first"), work)
            resume = ["--resume", f"{work}/first"]
            run(ranks(ouro_run, WORLD, ouro_train, *config(work, "zero2", *resume), "--save", f"{work}/full.safetensors"),
                work)
            reference = sha(f"{work}/full.safetensors")
            text, report = trial(ouro_run, ouro_train, work, "shrink-resumed", rng.randint(40, 150), reference,
                                 flags_before=resume)
            at = report["recoveries"][0]["resumed_at_step"]
            check(at == 30, f"shrink-resumed: recovered at step {at}, not at the resumed checkpoint's step 30")
        return f"{text}: went on from the resumed step-30 checkpoint, the uninterrupted SHA-256 ({reference[:12]}...)"
    return case


def other_run_folder(ouro_run, ouro_train):
    """--checkpoint into a folder that holds another run's checkpoints."""
    with tempfile.TemporaryDirectory(prefix="ouro-train-recovery-") as work:
        write_corpus(f"{work}/corpus.txt")
        short = ["--steps", "4", "--log-every", "0"]
        run(ranks(ouro_run, 2, ouro_train, *config(work, "zero2", *short), "--checkpoint", f"{work}/a"), work)
        run(ranks(ouro_run, 2, ouro_train, *config(work, "zero2", *short, "--lr", "0.01"), "--checkpoint", f"{work}/b"),
            work)
        before = files_under(work)
        refused = [
            # A fresh run into run a's folder.
            (["--checkpoint", f"{work}/a"], f"--checkpoint {work}/a already holds the checkpoints of another run"),
            # Run b continued into run a's folder.
            (["--resume", f"{work}/b", "--checkpoint", f"{work}/a", "--steps", "6"],
             f"not of the run this one resumes from {work}/b"),
        ]
        for flags, words in refused:
            command = ranks(ouro_run, 2, ouro_train, *config(work, "zero2", *short, *flags), "--save",
                            f"{work}/out.safetensors")
            _, _, err = run(command, work, expect=2)
            check(err.count(words) == 1, f"$ {' '.join(command)}\nexpected one message holding {words!r}:\n{err}")
            check(files_under(work) == before, f"$ {' '.join(command)}\nwrote {sorted(files_under(work) - before)}")
        # Continuing run a into its own folder, by name and by --resume auto, is the same run.
        run(ranks(ouro_run, 2, ouro_train, *config(work, "zero2", *short, "--steps", "6"), "--resume", f"{work}/a",
                  "--checkpoint", f"{work}/a"), work)
        run(ranks(ouro_run, 2, ouro_train, *config(work, "zero2", *short, "--steps", "8"), "--resume", "auto",
                  "--checkpoint", f"{work}/a"), work)
        with open(f"{work}/a/step-8/manifest.json") as f, open(f"{work}/a/step-4/manifest.json") as g:
            ids = json.load(f)["run_id"], json.load(g)["run_id"]
        check(ids[0] == ids[1] and len(ids[0]) == 32, f"run a's checkpoints carry run ids {ids}")
        with open(f"{work}/b/latest") as f:
            b_latest = f.read().strip()
        with open(f"{work}/b/{b_latest}/manifest.json") as f:
            check(json.load(f)["run_id"] != ids[0], "runs a and b have the same run id")
    return "another run's --checkpoint folder refused twice (exit 2, one message, nothing written); the run's own accepted"


if __name__ == "__main__":
    seed = int(sys.argv[4]) if len(sys.argv) > 4 else int(time.time())
    cases = {"shrink-ddp": trials(["shrink-ddp"], seed), "shrink-zero2": trials(["shrink-zero2"], seed),
             "restart": trials(["restart"], seed), "shrink-resumed": shrink_resumed(seed),
             "other-run-folder": other_run_folder, "shrink-late": trials(["shrink-late"], seed),
             "shrink-hsdp": trials(["shrink-hsdp"], seed),
             "trials10": trials(["shrink-ddp", "shrink-zero2", "restart"] * 3 + ["shrink-ddp"], seed)}
    print(f"seed {seed}")
    sys.exit(main(cases, sys.argv[1:4]))
