#!/usr/bin/python3
"""ouro-train end to end: its outputs, checkpoints and resumption, launchers and bad input.

    test_ouro_train.py OURO_RUN OURO_TRAIN CASE

CASE (each a meson test of its own, all small: a 784,32,10 model and a few steps):
  single            --mode single with --json, --metrics and --save: every field present and sane
  ddp-resume        ddp at W=2, SGD with momentum, 2 micro-batches, across an epoch boundary:
                    stopped at step 4 and resumed to 10 gives the bytes of an uninterrupted run to 10
  zero2-resume      zero2 at W=2, AdamW in bf16: the same at steps 9 and 20; then its W=2 checkpoint
                    resumed at W=3 holds the same state (saved model = gathered checkpoint, the W=3
                    shards rebuild the W=2 optimizer state) at the converted data position, and trains on
  zero1-zero3       zero1 and zero3 at W=2 with every output; both give the same bits (as every mode does)
  bad-input         every refusal: nonzero exit, a message naming the problem, no file written
  plot              --plot draws a PNG through gnuplot, and says so when there is nothing to draw
  launchers         torchrun-style variables and mpirun.openmpi start the same run
Exit status: 0 pass, 1 fail, 77 skipped (the Fashion-MNIST files missing; scripts/run-tests.sh counts
that skip as a failure, since setup.sh installs them).
"""

import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile

from cli_support import (DATA, SKIP, check, check_metrics, check_model_file, check_report, clean_env, files_under,
                         floats, main, model_tensors, read_checkpoint, read_safetensors, run, write_safetensors,
                         have_data, JOB_TIMEOUT_S)

WIDTHS = [784, 32, 10]
LAYERS = ",".join(map(str, WIDTHS))
# A learning rate that makes a handful of steps clearly better than chance (test accuracy > 0.2).
QUICK = ["--layers", LAYERS, "--lr", "0.1"]


def needs_data(case):
    def wrapped(ouro_run, ouro_train):
        if not have_data():
            return SKIP, f"Fashion-MNIST is not in {DATA} (install dataset-fashion-mnist)"
        with tempfile.TemporaryDirectory(prefix="ouro-train-cli-") as work:
            return case(ouro_run, ouro_train, work)
    return wrapped


def ranks(ouro_run, n, ouro_train, *args):
    return [ouro_run, "-n", str(n), ouro_train, *args]


def outputs(work, name):
    return ["--json", f"{work}/{name}.json", "--metrics", f"{work}/{name}.csv", "--save", f"{work}/{name}.safetensors"]


def same_bytes(a, b, what):
    with open(a, "rb") as fa, open(b, "rb") as fb:
        check(fa.read() == fb.read(), f"{what}: {a} and {b} differ")


@needs_data
def case_single(ouro_run, ouro_train, work):
    run([ouro_train, *QUICK, "--steps", "8", "--log-every", "3", *outputs(work, "single")], work)
    report = check_report(f"{work}/single.json", "single", 1, WIDTHS, 8)
    check(report["batch_size"] == 64 and report["epochs"] > 0, f"batch_size/epochs {report['batch_size']}/{report['epochs']}")
    check_metrics(f"{work}/single.csv", 8, 3)
    check_model_file(f"{work}/single.safetensors", WIDTHS)
    check(files_under(work) == {"single.json", "single.csv", "single.safetensors"},
          f"left behind: {sorted(files_under(work))}")
    return f"single: 8 steps, test accuracy {report['test_accuracy']:.3f}, outputs well formed"


def resume_equality(ouro_run, ouro_train, work, mode, config, stop, total, every):
    """Uninterrupted run to `total` (every output checked) against stop-at-`stop` + resume."""
    run(ranks(ouro_run, 2, ouro_train, *config, "--steps", str(total), "--log-every", str(every),
              *outputs(work, "full")), work)
    precision = config[config.index("--precision") + 1] if "--precision" in config else "fp32"
    report = check_report(f"{work}/full.json", mode, 2, WIDTHS, total, precision)
    check_metrics(f"{work}/full.csv", total, every)
    check_model_file(f"{work}/full.safetensors", WIDTHS)

    _, out, _ = run(ranks(ouro_run, 2, ouro_train, *config, "--steps", str(stop), "--log-every", "0",
                          "--checkpoint", f"{work}/ck"), work)
    with open(f"{work}/ck/latest") as f:
        check(f.read() == f"step-{stop}\n", f"ck/latest does not name step-{stop}")
    check(files_under(f"{work}/ck") == {"latest", f"step-{stop}", f"step-{stop}/manifest.json",
                                        f"step-{stop}/rank-0-of-2.safetensors", f"step-{stop}/rank-1-of-2.safetensors"},
          f"checkpoint folder holds {sorted(files_under(work + '/ck'))}")
    manifest, _, state = read_checkpoint(f"{work}/ck")
    for key, want in (("mode", mode), ("world_size", 2), ("layers", WIDTHS), ("step", stop), ("seed", 0)):
        check(manifest[key] == want, f"manifest {key} = {manifest[key]}, expected {want}")

    _, out, _ = run(ranks(ouro_run, 2, ouro_train, *config, "--steps", str(total), "--log-every", "0",
                          "--resume", f"{work}/ck", "--save", f"{work}/resumed.safetensors"), work)
    check(f"at step {stop}" in out, f"the resumed run does not say where it resumes:\n{out}")
    same_bytes(f"{work}/full.safetensors", f"{work}/resumed.safetensors", f"{mode} {stop}+{total - stop} vs {total} steps")
    return manifest, state, report


@needs_data
def case_ddp_resume(ouro_run, ouro_train, work):
    # 30000 samples per rank / 2000 = 15 batches, 2 per step: 7 steps per epoch, one batch skipped;
    # steps 4 -> 10 cross into epoch 1.
    config = ["--mode", "ddp", *QUICK, "--batch-size", "2000", "--accumulate", "2", "--momentum", "0.9"]
    manifest, state, report = resume_equality(ouro_run, ouro_train, work, "ddp", config, 4, 10, 5)
    check(sorted(state) == ["momentum_buffer"], f"ddp SGD-momentum checkpoint holds state {sorted(state)}")
    check((manifest["epoch"], manifest["batch_in_epoch"]) == (0, 8), f"position {manifest['epoch']}/{manifest['batch_in_epoch']}")
    return f"ddp: 4+6 steps equal 10 steps byte for byte (test accuracy {report['test_accuracy']:.3f})"


@needs_data
def case_zero2_resume(ouro_run, ouro_train, work):
    # 15 steps per epoch at W=2: 9 -> 20 crosses into epoch 1.
    config = ["--mode", "zero2", "--layers", LAYERS, "--batch-size", "2000", "--optimizer", "adamw", "--lr", "0.003",
              "--weight-decay", "0.01", "--precision", "bf16"]
    manifest, state, _ = resume_equality(ouro_run, ouro_train, work, "zero2", config, 9, 20, 4)
    _, params, _ = read_checkpoint(f"{work}/ck")
    check(sorted(state) == ["exp_avg", "exp_avg_sq"], f"AdamW checkpoint holds state {sorted(state)}")

    # The W=2 checkpoint at W=3, no further step: the state every rank restored, gathered.
    _, out, _ = run(ranks(ouro_run, 3, ouro_train, *config, "--steps", "9", "--log-every", "0", "--resume", f"{work}/ck",
                          "--save", f"{work}/w3.safetensors", "--checkpoint", f"{work}/ck3"), work)
    saved = check_model_file(f"{work}/w3.safetensors", WIDTHS)
    check(saved == params, "resumed at W=3, the gathered parameters differ from the W=2 checkpoint's")
    manifest3, params3, state3 = read_checkpoint(f"{work}/ck3")
    check(manifest3["world_size"] == 3 and manifest3["step"] == 9, f"W=3 manifest {manifest3}")
    # 9 steps x 2 ranks x 2000 = 36000 samples into epoch 0 = 6 global batches of 3 x 2000.
    check((manifest3["epoch"], manifest3["batch_in_epoch"]) == (0, 6),
          f"W=3 position {manifest3['epoch']}/{manifest3['batch_in_epoch']}, expected 0/6")
    check(params3 == params, "W=3 checkpoint parameters differ from the W=2 checkpoint's")
    for name in state:
        check(state3[name] == state[name], f"W=3 checkpoint {name} differs from the W=2 checkpoint's")

    # And it trains on at W=3 across the epoch boundary (10 batches per epoch there).
    run(ranks(ouro_run, 3, ouro_train, *config, "--steps", "14", "--log-every", "5", "--resume", f"{work}/ck3",
              "--json", f"{work}/w3.json"), work)
    report = check_report(f"{work}/w3.json", "zero2", 3, WIDTHS, 14, "bf16")
    return (f"zero2: 9+11 steps equal 20 steps; W=2 checkpoint resumed at W=3 holds the same state and trains on "
            f"(test accuracy {report['test_accuracy']:.3f})")


@needs_data
def case_zero1_zero3(ouro_run, ouro_train, work):
    for mode in ("zero1", "zero3"):
        run(ranks(ouro_run, 2, ouro_train, "--mode", mode, *QUICK, "--steps", "6", "--log-every", "2",
                  *outputs(work, mode)), work)
        check_report(f"{work}/{mode}.json", mode, 2, WIDTHS, 6)
        check_metrics(f"{work}/{mode}.csv", 6, 2)
        check_model_file(f"{work}/{mode}.safetensors", WIDTHS)
    same_bytes(f"{work}/zero1.safetensors", f"{work}/zero3.safetensors", "zero1 vs zero3 after 6 steps")
    return "zero1 and zero3: outputs well formed, same model bits"


def write_fake_checkpoint(folder, widths, **changes):
    """A one-rank checkpoint written by hand (zeros), with manifest fields overridden."""
    n = sum(widths[k] * widths[k + 1] + widths[k + 1] for k in range(len(widths) - 1))
    os.makedirs(f"{folder}/step-3")
    manifest = {"format": "ouro-train checkpoint", "version": 1, "mode": "single", "world_size": 1, "precision": "fp32",
                "layers": widths, "param_count": n,
                "optimizer": {"kind": "sgd", "lr": 0.01, "momentum": 0, "weight_decay": 0, "betas": [0.9, 0.999],
                              "eps": 1e-8},
                "step": 3, "epoch": 0, "batch_in_epoch": 3, "seed": 0, "batch_size": 64, "accumulate": 1}
    manifest.update(changes)
    with open(f"{folder}/step-3/manifest.json", "w") as f:
        json.dump(manifest, f)
    write_safetensors(f"{folder}/step-3/rank-0-of-1.safetensors", {"params": ("F32", [n], bytes(4 * n))},
                      {"ranges": f"0:{n}", "rank": "0", "world_size": "1", "param_count": str(n),
                       "optimizer_steps": "3"})
    with open(f"{folder}/latest", "w") as f:
        f.write("step-3\n")


@needs_data
def case_bad_input(ouro_run, ouro_train, work):
    inputs = f"{work}/inputs"
    os.makedirs(inputs)
    # Inputs the cases point at, made once.
    os.makedirs(f"{inputs}/corrupt")
    for name in ("train-images-idx3-ubyte.gz", "train-labels-idx1-ubyte.gz", "t10k-images-idx3-ubyte.gz",
                 "t10k-labels-idx1-ubyte.gz"):
        with open(f"{inputs}/corrupt/{name}", "wb") as f:
            f.write(b"this is not gzip data")
    good = model_tensors(WIDTHS)
    wrong_shape = dict(good, **{"0.weight": ("F32", [16, 784], bytes(4 * 16 * 784))})
    missing = {k: v for k, v in good.items() if k != "2.bias"}
    bf16 = dict(good, **{"0.bias": ("BF16", [32], bytes(2 * 32))})
    extra = dict(good, **{"4.weight": ("F32", [10, 10], bytes(400))})
    for name, tensors in (("wrong_shape", wrong_shape), ("missing", missing), ("bf16", bf16), ("extra", extra)):
        write_safetensors(f"{inputs}/{name}.safetensors", tensors)
    with open(f"{inputs}/garbage.safetensors", "wb") as f:
        f.write(b"\xff" * 64)
    with open(f"{inputs}/a_file", "w") as f:
        f.write("not a folder\n")
    os.makedirs(f"{inputs}/empty_ckpt")
    for name, widths, changes in (("ck_layers", [784, 16, 10], {}), ("ck_mode", WIDTHS, {"mode": "zero2"}),
                                  ("ck_precision", WIDTHS, {"precision": "bf16"}),
                                  ("ck_optimizer", WIDTHS, {"optimizer": {"kind": "adamw", "lr": 0.001, "momentum": 0,
                                                                          "weight_decay": 0, "betas": [0.9, 0.999],
                                                                          "eps": 1e-8}}),
                                  ("ck_seed", WIDTHS, {"seed": 7}), ("ck_momentum", WIDTHS, {}),
                                  ("ck_huge", WIDTHS, {"param_count": 10**15}),
                                  ("ck_far", WIDTHS, {"batch_in_epoch": 2**62})):
        write_fake_checkpoint(f"{inputs}/{name}", widths, **changes)

    launcher2 = {"OURO_RANK": "0", "OURO_WORLD_SIZE": "2"}
    cases = [  # (flags, extra environment, exit status, words the message must hold)
        (["--bogus", "1"], None, 2, "unknown option '--bogus'"),
        (["--steps"], None, 2, "--steps needs a value"),
        (["--batch-size", "abc"], None, 2, "--batch-size needs a whole number"),
        (["--batch-size", "0"], None, 2, "--batch-size needs a whole number >= 1"),
        (["--steps", "1.5"], None, 2, "--steps needs a whole number"),
        (["--lr", "fast"], None, 2, "--lr needs a finite number"),
        (["--eps", "0"], None, 2, "--eps needs a number > 0"),
        (["--betas", "0.9"], None, 2, "--betas needs two numbers"),
        (["--momentum", "1.5"], None, 2, "--momentum needs a number in [0, 1]"),
        (["--threads", "-1"], None, 2, "--threads needs a whole number >= 1"),
        (["--layers", "100,32,10"], None, 2, "--layers must start at 784"),
        (["--layers", "784,32,11"], None, 2, "--layers must end at 10"),
        (["--layers", "784,,10"], None, 2, "--layers needs comma-separated widths"),
        (["--layers", "784"], None, 2, "--layers needs at least two widths"),
        (["--mode", "ring"], None, 2, "--mode needs one of single, ddp, zero1, zero2, zero3, hsdp, got 'ring'"),
        (["--precision", "fp16"], None, 2, "--precision needs fp32 or bf16, got 'fp16'"),
        (["--optimizer", "adam"], None, 2, "--optimizer needs sgd or adamw, got 'adam'"),
        (["--steps", "3", "--epochs", "1"], None, 2, "--steps and --epochs exclude each other"),
        (["--checkpoint-every", "5"], None, 2, "--checkpoint-every needs --checkpoint"),
        (["--log-every", "0", "--metrics", f"{work}/m.csv"], None, 2, "--log-every 0"),
        (["--batch-size", "70000"], None, 2, "--batch-size 70000"),
        ([], launcher2, 2, "--mode single trains in one process, but the launcher started 2 (OURO_WORLD_SIZE=2)"),
        (["--mode", "ddp"], None, 1, "ouroCommInitFromEnv"),
        (["--data", f"{work}/no_such_dir"], None, 1, f"{work}/no_such_dir"),
        (["--data", f"{inputs}/corrupt"], None, 1, "-ubyte.gz"),
        (["--init", f"{inputs}/wrong_shape.safetensors"], None, 1, "tensor '0.weight' has shape [16,784]"),
        (["--init", f"{inputs}/missing.safetensors"], None, 1, "has no tensor '2.bias'"),
        (["--init", f"{inputs}/bf16.safetensors"], None, 1, "tensor '0.bias' is BF16, expected F32"),
        (["--init", f"{inputs}/extra.safetensors"], None, 1, "holds tensor '4.weight'"),
        (["--init", f"{inputs}/garbage.safetensors"], None, 1, f"{inputs}/garbage.safetensors"),
        (["--init", f"{work}/no_such.safetensors"], None, 1, f"{work}/no_such.safetensors"),
        (["--resume", f"{inputs}/empty_ckpt"], None, 1, "no checkpoint there"),
        (["--resume", f"{inputs}/ck_layers"], None, 1, "holds the model --layers 784,16,10"),
        (["--resume", f"{inputs}/ck_mode"], None, 1, "was written by --mode zero2"),
        (["--resume", f"{inputs}/ck_precision"], None, 1, "was trained in --precision bf16"),
        (["--resume", f"{inputs}/ck_optimizer"], None, 1, "holds adamw state"),
        (["--resume", f"{inputs}/ck_seed"], None, 1, "was run with --seed 7"),
        (["--resume", f"{inputs}/ck_momentum", "--momentum", "0.9"], None, 1, "was written with --momentum 0"),
        (["--resume", f"{inputs}/ck_huge"], None, 1, "is not the parameter count of its layers"),
        (["--resume", f"{inputs}/ck_far"], None, 1, "is further into an epoch than any data set holds"),
        (["--json", f"{work}/no_such_dir/out.json"], None, 1, "the folder " + f"{work}/no_such_dir does not exist"),
        (["--checkpoint", f"{inputs}/a_file/ck"], None, 1, f"--checkpoint {inputs}/a_file/ck"),
    ]
    before = files_under(work)
    for flags, env, status, words in cases:
        # Every case asks for every output, where the flags leave room, so that a file written
        # before the refusal shows up.
        asked = [] if any(f in flags for f in ("--checkpoint-every", "--json", "--checkpoint", "--metrics")) else [
            "--json", f"{work}/out.json", "--metrics", f"{work}/out.csv", "--checkpoint", f"{work}/ck"]
        command = [ouro_train, "--layers", LAYERS, "--steps", "2", "--save", f"{work}/out.safetensors", *asked, *flags]
        _, out, err = run(command, work, env=env, expect=status)
        check(words in err, f"$ {' '.join(command)}\nexpected a message holding {words!r}, stderr was:\n{err}")
        check(len(err.strip().splitlines()) <= 3, f"$ {' '.join(command)}\nexpected one message, stderr was:\n{err}")
        check(files_under(work) == before,
              f"$ {' '.join(command)}\nwrote {sorted(files_under(work) - before)} though it failed")
    # Ranks agree: under ouro-run, a bad --init makes one rank report and both stop.
    _, out, err = run(ranks(ouro_run, 2, ouro_train, "--mode", "ddp", "--layers", LAYERS, "--init",
                            f"{inputs}/missing.safetensors"), work, expect=None)
    check(err.count("has no tensor '2.bias'") == 1, f"2 ranks, bad --init: expected one message, stderr:\n{err}")
    return f"{len(cases) + 1} bad inputs refused with a message naming the problem, nothing written"


@needs_data
def case_plot(ouro_run, ouro_train, work):
    # gnuplot-nox is one of scripts/setup.sh's packages: without it (or its PNG terminal) the
    # set-up is broken, which is a failure, not a reason to skip.
    check(shutil.which("gnuplot") is not None, "gnuplot is not installed (scripts/setup.sh installs gnuplot-nox)")
    terminals = subprocess.run(["gnuplot", "-e", "set terminal"], stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                               text=True).stdout
    check("png" in terminals, "this gnuplot has no PNG terminal (Debian's gnuplot-nox has one)")
    run([ouro_train, *QUICK, "--batch-size", "2000", "--steps", "40", "--log-every", "5", "--plot", f"{work}/p.png"],
        work)
    with open(f"{work}/p.png", "rb") as f:
        head = f.read(16)
    check(head.startswith(b"\x89PNG\r\n\x1a\n"), f"{work}/p.png is not a PNG (starts {head!r})")
    check(os.path.getsize(f"{work}/p.png") > 5000, f"{work}/p.png is only {os.path.getsize(work + '/p.png')} bytes")
    check(files_under(work) == {"p.png"}, f"left behind: {sorted(files_under(work))}")
    # No training step, no curve: said so, not a failure, and no empty picture.
    _, out, _ = run([ouro_train, *QUICK, "--steps", "0", "--plot", f"{work}/none.png"], work)
    check("not plotted" in out and not os.path.exists(f"{work}/none.png"), f"--steps 0 --plot:\n{out}")
    return "plot: PNG written; none without a training step"


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@needs_data
def case_launchers(ouro_run, ouro_train, work):
    config = ["--mode", "ddp", *QUICK, "--steps", "3", "--log-every", "0"]
    # torchrun's variables, set by hand as torchrun would.
    port = str(free_port())
    procs = []
    for r in range(2):
        env = clean_env({"RANK": str(r), "WORLD_SIZE": "2", "LOCAL_RANK": str(r), "LOCAL_WORLD_SIZE": "2",
                         "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": port})
        procs.append(subprocess.Popen([ouro_train, *config, "--save", f"{work}/torchrun.safetensors"], cwd=work,
                                      env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True))
    for r, p in enumerate(procs):
        out, _ = p.communicate(timeout=JOB_TIMEOUT_S)
        check(p.returncode == 0, f"torchrun-style rank {r} exited {p.returncode}:\n{out}")
    check_model_file(f"{work}/torchrun.safetensors", WIDTHS)
    done = "torchrun-style variables"
    # Open MPI is one of scripts/setup.sh --tests' packages: its absence fails the case.
    mpirun = shutil.which("mpirun.openmpi")
    check(mpirun is not None, "mpirun.openmpi is not installed (scripts/setup.sh --tests installs openmpi-bin)")
    if mpirun:
        command = [mpirun, "--allow-run-as-root", "--oversubscribe", "-n", "2", "-x", "MASTER_ADDR", "-x",
                   "MASTER_PORT", "-x", "OURO_TIMEOUT_S", ouro_train, *config, "--save", f"{work}/mpirun.safetensors"]
        run(command, work, env={"MASTER_ADDR": "127.0.0.1", "MASTER_PORT": str(free_port())})
        with open(f"{work}/torchrun.safetensors", "rb") as a, open(f"{work}/mpirun.safetensors", "rb") as b:
            check(a.read() == b.read(), "mpirun and torchrun-style runs of the same job saved different models")
        done += " and mpirun.openmpi"
    return f"launchers: {done} ran the same job"


CASES = {
    "single": case_single,
    "ddp-resume": case_ddp_resume,
    "zero2-resume": case_zero2_resume,
    "zero1-zero3": case_zero1_zero3,
    "bad-input": case_bad_input,
    "plot": case_plot,
    "launchers": case_launchers,
}

if __name__ == "__main__":
    sys.exit(main(CASES, sys.argv[1:]))
