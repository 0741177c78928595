#!/usr/bin/python3
"""ouro-train --virtual-ranks V: the same bits at every world size, and --resume auto across them.

    test_ouro_train_virtual.py OURO_RUN OURO_TRAIN CASE

A tiny GPT (test_ouro_train_gpt.py's) on a text the test writes, 6 virtual ranks of 2 sequences.

CASE (each a meson test of its own):
  worlds  single at W=1, ddp at W=2, zero3 at W=3 (uneven: 2 micro-batches each), zero1 at W=4
          (uneven: 1 or 2), zero2 at W=6, hsdp at W=6 and W=4 in groups of 2, and bf16 at W=1,
          W=5 (zero2) and W=6 (hsdp in groups of 3): within a precision one model file
          (SHA-256), one validation loss and one training loss; fp32 and bf16 differ; without
          --virtual-ranks the W=2 run gives other bits (the property is the flag's)
  resume  --resume auto with an empty --checkpoint folder starts afresh; a run at W=2 that
          crashed after its step-4 checkpoint, resumed with --resume auto at W=3 and at W=1,
          ends with the uninterrupted run's bytes; another --virtual-ranks is refused; W above V
          is refused
Exit status: 0 pass, 1 fail.
"""

import hashlib
import json
import sys
import tempfile

from cli_support import check, main, run
from test_ouro_train_gpt import crashed_after, gpt, ranks, write_corpus

VIRTUAL = 6


def sha(path):
    with open(path, "rb") as f:
        return hashlib.sha256(f.read()).hexdigest()


def load(path):
    with open(path) as f:
        return json.load(f)


def with_work(case):
    def wrapped(ouro_run, ouro_train):
        with tempfile.TemporaryDirectory(prefix="ouro-train-virtual-") as work:
            write_corpus(f"{work}/corpus.txt")
            return case(ouro_run, ouro_train, work)
    return wrapped


def config(work, *flags):
    return gpt(f"{work}/corpus.txt", "--batch-size", "2", "--steps", "8", "--warmup-steps", "2", "--grad-clip", "0.5",
               "--log-every", "0", "--sample", "0", *flags)


def train(ouro_run, ouro_train, work, world, mode, name, *flags):
    command = config(work, "--mode", mode, "--save", f"{work}/{name}.safetensors", "--json", f"{work}/{name}.json",
                     *flags)
    run(ranks(ouro_run, world, ouro_train, *command) if mode != "single" else [ouro_train, *command], work)
    report = load(f"{work}/{name}.json")
    return sha(f"{work}/{name}.safetensors"), report["val_loss"], report["train_loss"]


@with_work
def case_worlds(ouro_run, ouro_train, work):
    v = ["--virtual-ranks", str(VIRTUAL)]
    # hsdp in shard groups of 2 (3 replicas) and of 3 (2 replicas).
    runs = {"fp32": [(1, "single", []), (2, "ddp", []), (3, "zero3", []), (4, "zero1", []), (6, "zero2", []),
                     (6, "hsdp", ["--shard-size", "2"]), (4, "hsdp", ["--shard-size", "2"])],
            "bf16": [(1, "single", []), (5, "zero2", []), (6, "hsdp", ["--shard-size", "3"])]}
    results = {}
    for precision, plan in runs.items():
        for world, mode, extra in plan:
            name = f"{precision}-{mode}-w{world}"
            results[name] = train(ouro_run, ouro_train, work, world, mode, name, *v, "--precision", precision, *extra)
        first = f"{precision}-{plan[0][1]}-w{plan[0][0]}"
        for world, mode, _ in plan[1:]:
            name = f"{precision}-{mode}-w{world}"
            check(results[name] == results[first],
                  f"{name} gives (sha, val_loss, train_loss) {results[name]}, {first} {results[first]}")
    check(results["fp32-single-w1"][0] != results["bf16-single-w1"][0], "fp32 and bf16 give the same model")
    # Without the flag a run's bits follow its world size (the ordinary path): the W=2 run with
    # 6 ranks' worth of batch is not the virtual one.
    plain = train(ouro_run, ouro_train, work, 2, "ddp", "plain", "--batch-size", "6")
    check(plain[0] != results["fp32-ddp-w2"][0], "the run without --virtual-ranks has the virtual run's bits")
    return f"one SHA-256 per precision at W = 1, 2, 3, 4, 5, 6, hsdp included ({results['fp32-single-w1'][0][:12]}...)"


@with_work
def case_resume(ouro_run, ouro_train, work):
    v = ["--virtual-ranks", str(VIRTUAL)]
    # An empty folder: a fresh start, which is the uninterrupted run.
    full = train(ouro_run, ouro_train, work, 2, "zero2", "full", *v, "--checkpoint", f"{work}/ck",
                 "--checkpoint-every", "4", "--resume", "auto")
    fresh = train(ouro_run, ouro_train, work, 2, "zero2", "fresh", *v)
    check(full == fresh, f"--resume auto on an empty folder {full} is not a fresh run {fresh}")
    for world in (3, 1):
        crashed = f"{work}/crashed-{world}"
        crashed_after(f"{work}/ck", 4, crashed)
        mode = "zero2"
        _, out, _ = run(ranks(ouro_run, world, ouro_train,
                              *config(work, "--mode", mode, *v, "--checkpoint", crashed, "--resume", "auto",
                                      "--save", f"{work}/resumed-{world}.safetensors",
                                      "--json", f"{work}/resumed-{world}.json")), work)
        check("at step 4" in out, f"W={world}: the resumed run does not say it resumes at step 4:\n{out}")
        check(sha(f"{work}/resumed-{world}.safetensors") == full[0],
              f"W={world}: resumed from the W=2 checkpoint, the model is not the uninterrupted run's")
        check(load(f"{work}/resumed-{world}.json")["val_loss"] == full[1], f"W={world}: another validation loss")
    # The virtual ranks fix the run's bits: another V is refused, as is a world above V.
    _, _, err = run(ranks(ouro_run, 2, ouro_train, *config(work, "--mode", "zero2", "--virtual-ranks", "4",
                                                           "--checkpoint", f"{work}/ck", "--resume", "auto")),
                    work, expect=1)
    check("--virtual-ranks 6" in err, f"another --virtual-ranks is not refused by name:\n{err}")
    _, _, err = run(ranks(ouro_run, 3, ouro_train, *config(work, "--mode", "ddp", "--virtual-ranks", "2")), work,
                    expect=2)
    check("--virtual-ranks" in err and "3 ranks" in err, f"W=3 with --virtual-ranks 2 is not refused clearly:\n{err}")
    return "resumed at W=3 and W=1 from a W=2 checkpoint: the uninterrupted run's bytes"


if __name__ == "__main__":
    sys.exit(main({"worlds": case_worlds, "resume": case_resume}, sys.argv[1:]))
