#!/usr/bin/python3
"""ouro-train --verify-every / --verify-replay end to end (issue #34), on the tiny GPT of
test_ouro_train_gpt.py at 4 ranks.

    test_ouro_train_verify.py OURO_RUN OURO_TRAIN CASE      (FLIP_SHIM_LIB: tests/trainer/cli/flip_shim.c)

The fault: flip_shim.c, LD_PRELOADed into the ranks (no test code in libouro or ouro-train), flips
one bit of the replica the trainer hands to ouroCommReplicaHashes on one rank, once or at every
check after a given one. Every check hashes ddp's weights, then exp_avg, then exp_avg_sq (adamw):
3 calls per check, plus one check at the start with --verify-replay.

CASE:
  detect     a bit of rank 1's weights flipped after step 3, and of its exp_avg after step 2: the run
             stops naming the step, the rank and what differs; zero2 (gathered weights) and hsdp
             (replicas of each shard; 2 copies: no majority) detect it too; a check before every
             checkpoint; a clean run with --verify-every 1 gives the same bits as one without
  replay     --verify-replay: a flip once is called transient and training goes on to the same
             final bits as a clean run; a flip at every check is called persistent, naming rank 1
  bad-input  --verify-replay without --verify-every, outside ddp; --verify-every in single mode
Exit status: 0 pass, 1 fail.
"""

import os
import random
import sys
import tempfile

from cli_support import check, main, run

SHAPE = ["--model", "gpt", "--n-layer", "1", "--n-head", "2", "--n-embd", "16", "--block-size", "16",
         "--log-every", "0", "--sample", "0"]


def corpus(work):
    rng = random.Random(1)
    vocabulary = ["the", "cat", "sat", "on", "a", "mat", "and", "dog", "ran", "far", "away", "into", "night"]
    with open(f"{work}/corpus.txt", "w") as f:
        f.write(" ".join(rng.choice(vocabulary) for _ in range(2000)))
    return ["--text", f"{work}/corpus.txt"]


def job(ouro_run, ouro_train, work, flags, flip=None, expect=0, n=4):
    env = {"LD_PRELOAD": os.environ["FLIP_SHIM_LIB"], "FLIP_SHIM": flip} if flip else {}
    _, out, err = run([ouro_run, "-n", str(n), ouro_train, *SHAPE, *corpus(work), *flags], work, env=env,
                      expect=expect)
    return out + err


def same_file(a, b):
    with open(a, "rb") as x, open(b, "rb") as y:
        return x.read() == y.read()


def case_detect(ouro_run, ouro_train):
    with tempfile.TemporaryDirectory(prefix="ouro-verify-") as work:
        ddp = ["--mode", "ddp", "--steps", "6", "--verify-every", "1"]
        text = job(ouro_run, ouro_train, work, ddp, flip="1:7", expect=None)
        check("the replicas differ after step 3: rank 1's copy of the weights (hash" in text and
              "differs from ranks 0, 2, 3's" in text, f"ddp weights, step 3:\n{text}")
        text = job(ouro_run, ouro_train, work, ddp, flip="1:5", expect=None)
        check("the replicas differ after step 2: rank 1's copy of the optimizer state 'exp_avg'" in text,
              f"ddp exp_avg, step 2:\n{text}")
        text = job(ouro_run, ouro_train, work, ["--mode", "zero2", "--steps", "6", "--verify-every", "1"],
                   flip="2:2", expect=None)
        check("the replicas differ after step 2: rank 2's copy of the gathered weights" in text and
              "from ranks 0, 1, 3's" in text, f"zero2, step 2:\n{text}")
        text = job(ouro_run, ouro_train, work, ["--mode", "hsdp", "--shard-size", "2", "--steps", "6",
                                                "--verify-every", "2"], flip="1:4", expect=None)
        check("the replicas differ after step 4: rank 1's and rank 3's copies of the shard of the weights differ, and "
              "no copy has a majority" in text, f"hsdp, step 4:\n{text}")
        text = job(ouro_run, ouro_train, work, ["--mode", "ddp", "--steps", "6", "--verify-every", "100",
                                                "--checkpoint", f"{work}/ck", "--checkpoint-every", "2"],
                   flip="3:4", expect=None)
        check("the replicas differ before the checkpoint at step 4: rank 3's copy of the weights" in text,
              f"a check before each checkpoint:\n{text}")
        job(ouro_run, ouro_train, work, ["--mode", "ddp", "--steps", "6", "--verify-every", "1", "--save",
                                         f"{work}/checked.safetensors"])
        job(ouro_run, ouro_train, work, ["--mode", "ddp", "--steps", "6", "--save", f"{work}/plain.safetensors"])
        check(same_file(f"{work}/checked.safetensors", f"{work}/plain.safetensors"),
              "checking changed the model's bits")
    return "a flipped bit named with its step and rank in ddp weights and exp_avg, zero2, hsdp, before a checkpoint"


def case_replay(ouro_run, ouro_train):
    with tempfile.TemporaryDirectory(prefix="ouro-verify-") as work:
        flags = ["--mode", "ddp", "--steps", "6", "--verify-every", "1", "--verify-replay"]
        # Checks: 1-3 at the start, then 3k+1..3k+3 after step k: 10 is the weights after step 3.
        text = job(ouro_run, ouro_train, work, [*flags, "--save", f"{work}/replayed.safetensors"], flip="1:10")
        check("the replicas differ after step 3: rank 1's copy of the weights" in text and
              "redoing step 3 from the state verified at step 2" in text and
              "the replay of step 3 agrees on every rank: the fault was transient" in text, f"transient:\n{text}")
        job(ouro_run, ouro_train, work, ["--mode", "ddp", "--steps", "6", "--save", f"{work}/clean.safetensors"])
        check(same_file(f"{work}/replayed.safetensors", f"{work}/clean.safetensors"),
              "the replayed run's model differs from a clean run's: the replay is not exact")
        text = job(ouro_run, ouro_train, work, flags, flip="1:10:3", expect=None)
        check("the replay from step 2 differs again (rank 1's copy of the weights" in text and
              "the fault is persistent" in text, f"persistent:\n{text}")
    return "a flip once is transient and ends with a clean run's bits; a flip at every check is persistent, rank 1"


def case_bad_input(ouro_run, ouro_train):
    with tempfile.TemporaryDirectory(prefix="ouro-verify-") as work:
        for flags, words in ((["--mode", "ddp", "--verify-replay"], "--verify-replay redoes steps after a failed check"),
                             (["--mode", "zero2", "--verify-every", "1", "--verify-replay"],
                              "--verify-replay needs --mode ddp"),
                             (["--mode", "single", "--verify-every", "1"], "a --mode single run has one copy"),
                             (["--mode", "ddp", "--verify-every", "0"], "--verify-every needs a whole number")):
            _, out, err = run([ouro_train, *SHAPE, *corpus(work), *flags], work, expect=2)
            check(words in err, f"{flags}: {err}")
    return "refusals name the flag and what to pass"


CASES = {"detect": case_detect, "replay": case_replay, "bad-input": case_bad_input}

if __name__ == "__main__":
    sys.exit(main(CASES, sys.argv[1:]))
