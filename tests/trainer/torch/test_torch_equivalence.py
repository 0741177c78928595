#!/usr/bin/python3
"""ouro-train trains the same numbers as PyTorch: from one torch-written init file, 20 steps of
SGD (lr 0.05, momentum 0.9) and of AdamW (lr 1e-3, weight decay 0.01) on a 784,64,10 MLP, in
--mode single (batch W*B, no launcher) and in ddp, zero1, zero2 and zero3 at W=2 under ouro-run,
each compared with torch_reference.py's weights for the same data order.

    test_torch_equivalence.py OURO_RUN OURO_TRAIN

Bounds on the largest absolute weight difference: 1e-5 (SGD), 1e-4 (AdamW: its update divides by
sqrt(v) + eps, which magnifies last-bit differences in small gradients). They allow for float32
summation order (OpenBLAS against torch's kernels, the cross-rank average) and nothing more: a
wrong sample, step or formula moves weights by 1e-3 or more in 20 steps. Exits 77 (skipped) with
one line when torch or the Fashion-MNIST files are missing.
"""

import os
import subprocess
import sys
import tempfile
import time

SKIP = 77
HERE = os.path.dirname(os.path.abspath(__file__))
DATA = os.environ.get("OURO_FASHION_MNIST", "/usr/share/datasets/fashion-mnist")
DATA_FILES = ["train-images-idx3-ubyte.gz", "train-labels-idx1-ubyte.gz",
              "t10k-images-idx3-ubyte.gz", "t10k-labels-idx1-ubyte.gz"]
LAYERS = "784,64,10"
WORLD, BATCH, STEPS, SEED = 2, 32, 20, 0
MODES = ["ddp", "zero1", "zero2", "zero3"]
OPTIMIZERS = {  # name: (flags shared by torch_reference.py and ouro-train, bound)
    "sgd": (["--optimizer", "sgd", "--lr", "0.05", "--momentum", "0.9"], 1e-5),
    "adamw": (["--optimizer", "adamw", "--lr", "1e-3", "--weight-decay", "0.01"], 1e-4),
}


def skip_reason():
    try:
        import torch  # noqa: F401  (Debian's python3-torch, under /usr/bin/python3)
    except ImportError as error:
        return f"torch cannot be imported ({error}); install python3-torch and run /usr/bin/python3"
    missing = [f for f in DATA_FILES if not os.path.isfile(os.path.join(DATA, f))]
    if missing:
        return f"Fashion-MNIST missing in {DATA} ({', '.join(missing)}); install dataset-fashion-mnist"
    return None


def run(command, what):
    started = time.monotonic()
    result = subprocess.run(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    if result.returncode != 0:
        print(f"FAIL {what}: exit status {result.returncode} from\n  {' '.join(command)}\n{result.stdout}")
        return None
    return time.monotonic() - started


def max_difference(reference, other, what):
    """Largest |a - b| over every tensor, or None (with a message) when names or shapes differ."""
    if set(reference) != set(other):
        print(f"FAIL {what}: tensor names differ: torch {sorted(reference)}, ouro-train {sorted(other)}")
        return None
    worst = 0.0
    for name, tensor in reference.items():
        if tuple(tensor.shape) != tuple(other[name].shape):
            print(f"FAIL {what}: {name} has shape {list(other[name].shape)}, torch {list(tensor.shape)}")
            return None
        worst = max(worst, float((tensor.double() - other[name].double()).abs().max()))
    return worst


def main(argv):
    if len(argv) != 2:
        print("usage: test_torch_equivalence.py OURO_RUN OURO_TRAIN", file=sys.stderr)
        return 2
    reason = skip_reason()
    if reason:
        print(f"SKIP: {reason}")
        return SKIP
    ouro_run, ouro_train = (os.path.abspath(p) for p in argv)
    sys.path.insert(0, HERE)
    import torch
    import torch_reference as reference

    torch.set_num_threads(1)
    failures = 0
    rows = []
    with tempfile.TemporaryDirectory(prefix="ouro-torch-equivalence-") as folder:
        init = os.path.join(folder, "init.safetensors")
        torch.manual_seed(SEED)
        reference.write_safetensors(init, reference.build_model(reference.parse_layers(LAYERS)).state_dict())
        initial = reference.read_safetensors(init)
        dataset = reference.load_fashion_mnist(DATA, "train")
        common = ["--layers", LAYERS, "--steps", str(STEPS), "--seed", str(SEED), "--init", init]
        for name, (flags, bound) in OPTIMIZERS.items():
            # torch: W ranks of B (what the ranks see) and one rank of W*B (what --mode single sees).
            expected = {}
            for world, batch in ((WORLD, BATCH), (1, WORLD * BATCH)):
                args = reference.parse_args(common + flags + ["--world", str(world), "--batch-size", str(batch),
                                                              "--data", DATA, "--out", "unused"])
                model, _ = reference.train(args, dataset)
                expected[world] = model.state_dict()
            moved = max_difference(initial, expected[WORLD], "init against torch") or 0.0
            for mode in ["single"] + MODES:
                out = os.path.join(folder, f"{name}-{mode}.safetensors")
                train = [ouro_train, "--mode", mode, *common, *flags, "--data", DATA, "--threads", "1",
                         "--log-every", "0", "--save", out]
                if mode == "single":
                    command, world = train + ["--batch-size", str(WORLD * BATCH)], 1
                else:
                    command, world = [ouro_run, "-n", str(WORLD)] + train + ["--batch-size", str(BATCH)], WORLD
                what = f"{name} {mode}"
                seconds = run(command, what)
                difference = None if seconds is None else max_difference(
                    expected[world], reference.read_safetensors(out), what)
                passed = difference is not None and difference <= bound
                failures += not passed
                rows.append((name, mode, world, difference, bound, moved, seconds, passed))

    print(f"ouro-train against torch, {LAYERS}, {STEPS} steps, batch {BATCH} per rank "
          f"(single: {WORLD * BATCH}), seed {SEED}")
    print(f"{'optimizer':9} {'mode':6} {'W':>2} {'max |ouro - torch|':>19} {'bound':>7} "
          f"{'moved from init':>15} {'seconds':>7}  result")
    for name, mode, world, difference, bound, moved, seconds, passed in rows:
        shown = "-" if difference is None else f"{difference:.3e}"
        took = "-" if seconds is None else f"{seconds:.1f}"
        print(f"{name:9} {mode:6} {world:>2} {shown:>19} {bound:>7.0e} {moved:>15.3e} {took:>7}  "
              f"{'ok' if passed else 'FAIL'}")
    if failures:
        print(f"FAIL: {failures} of {len(rows)} runs differ from torch beyond the bound (or did not finish)")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
