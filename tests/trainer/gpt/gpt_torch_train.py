#!/usr/bin/python3
"""ouro-train --model gpt trains the same numbers as PyTorch (issue #22): the same GPT in PyTorch
(Debian's torch 1.13; the model of gpt_torch_check.py: nanoGPT's GPT, bias=True, no dropout,
GELU tanh, head tied to wte) starts from the same safetensors and uses the same data order,
learning-rate schedule, clipping and AdamW parameter groups. After 20 fp32 AdamW steps the largest
absolute weight difference must be at most 1e-4, and so must each step's loss difference.

Test mode (meson test 'trainer gpt torch training'):

    gpt_torch_train.py OURO_RUN OURO_TRAIN

writes a small English-like corpus of its own (seeded, no package needed), builds the torch model
under torch.manual_seed with nanoGPT's init, saves it as safetensors (by hand: no safetensors
module), and trains a tiny GPT (L=2, H=2, C=32, T=16, lr 1e-2, warm-up 5, min-lr 1e-3, clip 1.0,
20 steps, each run reaching its second epoch) four ways: --mode single (W=1, batch 8), and under
ouro-run --mode zero3 (W=2, batch 4), --mode ddp (W=2, batch 3, --accumulate 2) and --mode zero2
(W=3, batch 3, which trains on DistributedSampler's padded samples). PyTorch trains one process on
each step's global batch (the ranks' micro-batches concatenated in rank order, the mean over every
token). Checked per step: loss (<= 1e-4), the CSV's lr against nanoGPT's get_lr (<= 1e-12
relative), the CSV's grad_norm against torch's clip_grad_norm_ total (<= 1e-4 relative); at the
end: every weight (<= 1e-4) and the JSON's val_loss (<= 1e-4). It also requires that clipping
clipped on some steps and not on others, so both paths are compared. Exits 77 (skipped) with one
line when torch cannot be imported, 1 on any mismatch.
Observed: loss 5.6e-7, weights 1.8e-5 (the weights move 0.108), validation loss 3.5e-7, grad_norm
4.9e-7 relative, lr exact, at most; 9-11 of 20 steps clipped. Any one of: warm-up 4 instead of 5,
weight decay on every tensor, no clipping, eps 1e-6, another sampler seed, or no set_epoch moves
the weights by 3e-3 to 2e-1 and the losses by 5e-4 or more: the test fails.

Reference mode (torch only, for docs that put PyTorch's number beside ouro-train's):

    gpt_torch_train.py --reference --steps N [--init FILE.safetensors] [--world 4 --batch-size 16]

trains the torch GPT with ouro-train's GPT defaults (L=4, H=4, C=128, T=128, AdamW lr 1e-3 betas
0.9,0.95 weight decay 0.1 on tensors of dim >= 2, warm-up 20, cosine to lr/10 at step N, clip 1.0,
seed 0) on the fortunes corpus (as ouro-train reads it: /usr/share/games/fortunes's regular files
but *.dat, by name) or --text FILE, with the data order of
`ouro-run -n 4 ouro-train --mode ddp --model gpt --steps N --seed 0` (batch 16 per rank: W ranks of
B concatenated; --world 1 --batch-size 64 is --mode single --batch-size 64's order), and prints the
final validation loss: the mean cross-entropy over every window of T+1 bytes at k*T of the last
10%, evaluated in batches under no_grad. For the same start as ouro-train, write ouro's own init
with `ouro-train --model gpt --steps 0 --sample 0 --save init.safetensors` (same --seed and shape)
and pass --init init.safetensors here; without --init the model starts from nanoGPT's init under
torch.manual_seed(--seed). See --help for the rest (--metrics, --save, --threads, ...).
"""

import argparse
import csv
import json
import math
import os
import random
import struct
import subprocess
import sys
import tempfile
import time

SKIP = 77
HERE = os.path.dirname(os.path.abspath(__file__))
FORTUNES = "/usr/share/games/fortunes"

try:
    import torch
    from torch.nn import functional as F
except ImportError as error:
    print(f"SKIP: torch cannot be imported ({error}); install Debian's python3-torch and run /usr/bin/python3")
    sys.exit(SKIP)

sys.path.insert(0, HERE)
from gpt_torch_check import GPT  # noqa: E402  (the PyTorch GPT whose gradients match ouro's)
from torch_gpt import learning_rate  # noqa: E402  (nanoGPT's get_lr; gpt_torch_check puts bench/trainer on the path)


# ---- safetensors, by hand ----------------------------------------------------------------------

def write_safetensors(path, tensors, metadata=None):
    """{name: float32 tensor} in the given order; header padded with spaces to 8 bytes."""
    header, chunks, offset = {}, [], 0
    if metadata:
        header["__metadata__"] = {str(k): str(v) for k, v in metadata.items()}
    for name, tensor in tensors.items():
        raw = tensor.detach().to(torch.float32).contiguous().numpy().tobytes()
        header[name] = {"dtype": "F32", "shape": list(tensor.shape), "data_offsets": [offset, offset + len(raw)]}
        chunks.append(raw)
        offset += len(raw)
    text = json.dumps(header, separators=(",", ":")).encode()
    text += b" " * (-len(text) % 8)
    with open(path, "wb") as out:
        out.write(struct.pack("<Q", len(text)) + text + b"".join(chunks))


def read_safetensors(path):
    """{name: float32 tensor} in file order (F32 only, as ouro-train writes)."""
    blob = open(path, "rb").read()
    (size,) = struct.unpack("<Q", blob[:8])
    header = {k: v for k, v in json.loads(blob[8:8 + size]).items() if k != "__metadata__"}
    data = bytearray(blob[8 + size:])
    out = {}
    for name, t in header.items():
        if t["dtype"] != "F32":
            raise ValueError(f"{path}: tensor {name} is {t['dtype']}, expected F32")
        begin, end = t["data_offsets"]
        out[name] = torch.frombuffer(data[begin:end], dtype=torch.float32).reshape(t["shape"]).clone()
    return out


# ---- the model ---------------------------------------------------------------------------------

def build_model(config, init_path=None, seed=0):
    """The torch GPT from init_path (nanoGPT's names without lm_head.weight), or nanoGPT's
    _init_weights under torch.manual_seed(seed), which the model's constructor draws:
    N(0, 0.02) for Linear and Embedding weights, zero biases, c_proj.weight N(0, 0.02/sqrt(2 L))."""
    torch.manual_seed(seed)
    model = GPT(config)
    if init_path:
        weights = read_safetensors(init_path)
        if "lm_head.weight" in weights:
            raise ValueError(f"--init {init_path}: holds lm_head.weight; the head is tied to transformer.wte.weight")
        state = dict(weights, **{"lm_head.weight": weights["transformer.wte.weight"]})
        model.load_state_dict(state, strict=True)
    return model


def state_without_head(model):
    """ouro's tensors: the state_dict without lm_head.weight (tied to transformer.wte.weight)."""
    return {k: v.detach().clone() for k, v in model.state_dict().items() if k != "lm_head.weight"}


def make_optimizer(model, lr, betas, eps, weight_decay):
    """nanoGPT's configure_optimizers: decay on tensors of dim >= 2, none on biases and LayerNorms;
    named_parameters() yields the tied wte/lm_head tensor once."""
    params = [p for _, p in model.named_parameters() if p.requires_grad]
    groups = [{"params": [p for p in params if p.dim() >= 2], "weight_decay": weight_decay},
              {"params": [p for p in params if p.dim() < 2], "weight_decay": 0.0}]
    try:
        return torch.optim.AdamW(groups, lr=lr, betas=betas, eps=eps, foreach=False)
    except TypeError:  # a torch without the foreach argument is single-tensor anyway
        return torch.optim.AdamW(groups, lr=lr, betas=betas, eps=eps)


# ---- data --------------------------------------------------------------------------------------

def train_split(size):
    """floor(size * 9 / 10)."""
    return size * 9 // 10


def window_count(size, block):
    return (size - 1) // block if size >= block + 1 else 0


def windows(data, starts, block):
    """(inputs, targets) [n, T] int64 for the windows of block+1 bytes at starts (a 1-D tensor)."""
    offsets = starts[:, None] + torch.arange(block)[None, :]
    return data[offsets], data[offsets + 1]


def global_batches(num_windows, world, batch_size, accumulate, seed):
    """Each optimizer step's window indices: for every rank r in order, its `accumulate`
    consecutive batches of BatchSampler(DistributedSampler(num_windows, W, r, shuffle=True, seed,
    drop_last=False), B, drop_last=True) after set_epoch(epoch); batches left over at the end of
    an epoch (fewer than accumulate) are skipped, and the next step starts the next epoch."""
    samplers = [torch.utils.data.DistributedSampler(range(num_windows), num_replicas=world, rank=r,
                                                    shuffle=True, seed=seed, drop_last=False)
                for r in range(world)]
    epoch = 0
    while True:
        for sampler in samplers:
            sampler.set_epoch(epoch)
        per_rank = [list(torch.utils.data.BatchSampler(s, batch_size, drop_last=True)) for s in samplers]
        steps = len(per_rank[0]) // accumulate
        if steps == 0:
            raise ValueError(f"one step needs {accumulate} batches of {batch_size} per rank, "
                             f"an epoch holds {len(per_rank[0])}")
        for i in range(steps):
            yield epoch, torch.tensor([index for r in range(world)
                                       for j in range(accumulate) for index in per_rank[r][i * accumulate + j]])
        epoch += 1


def fortunes_corpus(folder=FORTUNES):
    """ouro-train's default corpus: the folder's regular files (not symlinks) but *.dat, in byte
    order of their names, concatenated."""
    names = sorted((os.fsencode(e.name) for e in os.scandir(folder)
                    if e.is_file(follow_symlinks=False) and not e.name.endswith(".dat")))
    if not names:
        raise ValueError(f"{folder} holds no fortune files (apt-get install fortunes, or pass --text FILE)")
    return b"".join(open(os.path.join(os.fsencode(folder), n), "rb").read() for n in names)


def english_like_text(size, seed=2024):
    """size bytes of seeded sentences of common English words: a corpus that needs no package."""
    words = ("the of and to a in is it you that he was for on are with as his they be at one have this "
             "from or had by word but what some we can out other were all there when up use your how said "
             "an each she which do their time if will way about many then them write would like so these "
             "her long make thing see him two has look more day could go come did number sound no most "
             "people my over know water than call first who may down side been now find").split()
    rng, text = random.Random(seed), []
    length = 0
    while length < size:
        sentence = " ".join(rng.choice(words) for _ in range(rng.randint(3, 12)))
        sentence = sentence[0].upper() + sentence[1:] + rng.choice(".!?.,;") + ("\n" if rng.random() < 0.25 else " ")
        text.append(sentence)
        length += len(sentence)
    return "".join(text).encode()[:size]


# ---- training and evaluation -------------------------------------------------------------------

def train(model, corpus, cfg, steps, log=None):
    """Trains model in place; returns [(epoch, step, loss, lr, grad_norm)] per step. cfg: dict with
    block, world, batch, accumulate, seed, lr, min_lr, warmup, betas, eps, weight_decay, clip."""
    block = cfg["block"]
    data = torch.frombuffer(bytearray(corpus), dtype=torch.uint8).to(torch.int64)
    train_part = data[:train_split(len(corpus))]
    count = window_count(len(train_part), block)
    optimizer = make_optimizer(model, cfg["lr"], cfg["betas"], cfg["eps"], cfg["weight_decay"])
    batches = global_batches(count, cfg["world"], cfg["batch"], cfg["accumulate"], cfg["seed"])
    rows = []
    model.train()
    for i in range(steps):
        epoch, indices = next(batches)
        inputs, targets = windows(train_part, indices * block, block)
        lr = learning_rate(i, cfg["lr"], cfg["min_lr"], cfg["warmup"], steps)
        for group in optimizer.param_groups:
            group["lr"] = lr
        optimizer.zero_grad(set_to_none=True)
        _, loss = model(inputs, targets)
        loss.backward()
        if cfg["clip"] > 0:
            norm = float(torch.nn.utils.clip_grad_norm_(model.parameters(), cfg["clip"]))
        else:
            norm = float(torch.norm(torch.stack([p.grad.detach().norm(2) for p in model.parameters()]), 2))
        optimizer.step()
        rows.append((epoch, i + 1, float(loss), lr, norm))
        if log:
            log(rows[-1])
    return rows


def validation_loss(model, corpus, block, batch=64):
    """Mean cross-entropy over every window of block+1 bytes at k*block of the last 10%."""
    data = torch.frombuffer(bytearray(corpus[train_split(len(corpus)):]), dtype=torch.uint8).to(torch.int64)
    count = window_count(len(data), block)
    total = 0.0
    model.eval()
    with torch.no_grad():
        for first in range(0, count, batch):
            starts = torch.arange(first, min(first + batch, count)) * block
            inputs, targets = windows(data, starts, block)
            logits, _ = model(inputs, targets)
            total += float(F.cross_entropy(logits.view(-1, logits.size(-1)), targets.view(-1), reduction="sum"))
    model.train()
    return total / (count * block), count


# ---- test mode ---------------------------------------------------------------------------------

LOSS_BOUND, WEIGHT_BOUND, VAL_BOUND, NORM_REL, LR_REL = 1e-4, 1e-4, 1e-4, 1e-4, 1e-12
TEST_CONFIG = {"n_layer": 2, "n_head": 2, "n_embd": 32, "block_size": 16, "vocab_size": 256}
TEST_TRAIN = {"block": 16, "seed": 0, "lr": 1e-2, "min_lr": 1e-3, "warmup": 5, "betas": (0.9, 0.95),
              "eps": 1e-8, "weight_decay": 0.1, "clip": 1.0}
# 2380 bytes: 133 training windows of 17 bytes, an odd count, so DistributedSampler pads at W=2
# and W=3 (at W=3 the two padded samples are trained on: 45 per rank, 15 batches of 3).
TEST_STEPS, TEST_CORPUS_BYTES, INIT_SEED = 20, 2380, 1234
# (name, mode, world, batch per rank, accumulate); every run reaches its second epoch in 20 steps.
TEST_RUNS = [("single W=1 B=8", "single", 1, 8, 1), ("zero3 W=2 B=4", "zero3", 2, 4, 1),
             ("ddp W=2 B=3 acc 2", "ddp", 2, 3, 2), ("zero2 W=3 B=3", "zero2", 3, 3, 1)]
LAUNCHER_PREFIXES = ("OURO_", "SLURM_", "SBATCH_", "SRUN_", "SALLOC_", "OMPI_", "PMIX_", "PMI_", "HYDRA_",
                     "MPI_LOCAL", "TORCHELASTIC_")
LAUNCHER_NAMES = ("RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE", "GROUP_RANK", "MASTER_ADDR", "MASTER_PORT")


def clean_env():
    """The environment without any launcher's variables (they would outrank ouro-run's)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(LAUNCHER_PREFIXES) and k not in LAUNCHER_NAMES}
    env["OURO_TIMEOUT_S"] = "60"
    return env


def read_metrics(path):
    with open(path, newline="") as f:
        return [(int(r["epoch"]), int(r["step"]), float(r["loss"]), float(r["lr"]), float(r["grad_norm"]))
                for r in csv.DictReader(f)]


def compare_run(folder, ouro_run, ouro_train, init, text, run):
    """One ouro-train run against torch; returns (failures, summary dict)."""
    name, mode, world, batch, accumulate = run
    tag = mode + str(world)
    save, metrics, summary = (os.path.join(folder, f"{tag}.{ext}") for ext in ("safetensors", "csv", "json"))
    t = TEST_TRAIN
    command = [ouro_train, "--model", "gpt", "--mode", mode, "--text", text, "--init", init,
               "--n-layer", str(TEST_CONFIG["n_layer"]), "--n-head", str(TEST_CONFIG["n_head"]),
               "--n-embd", str(TEST_CONFIG["n_embd"]), "--block-size", str(TEST_CONFIG["block_size"]),
               "--batch-size", str(batch), "--accumulate", str(accumulate), "--steps", str(TEST_STEPS),
               "--seed", str(t["seed"]), "--lr", repr(t["lr"]), "--min-lr", repr(t["min_lr"]),
               "--warmup-steps", str(t["warmup"]), "--grad-clip", repr(t["clip"]),
               "--betas", f"{t['betas'][0]},{t['betas'][1]}", "--eps", repr(t["eps"]),
               "--weight-decay", repr(t["weight_decay"]), "--optimizer", "adamw", "--precision", "fp32",
               "--threads", "1", "--sample", "0", "--log-every", "1", "--metrics", metrics,
               "--json", summary, "--save", save]
    if mode != "single":
        command = [ouro_run, "-n", str(world)] + command
    started = time.monotonic()
    result = subprocess.run(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                            env=clean_env(), timeout=100)
    seconds = time.monotonic() - started
    if result.returncode != 0:
        return [f"{name}: ouro-train exited {result.returncode}:\n  {' '.join(command)}\n{result.stdout}"], None

    model = build_model(TEST_CONFIG, init)
    initial = state_without_head(model)
    cfg = dict(t, world=world, batch=batch, accumulate=accumulate)
    corpus = open(text, "rb").read()
    expected = train(model, corpus, cfg, TEST_STEPS)
    val_torch, _ = validation_loss(model, corpus, t["block"])
    ours = read_metrics(metrics)
    failures = []
    if [r[:2] for r in ours] != [r[:2] for r in expected]:
        failures.append(f"{name}: CSV's (epoch, step) {[r[:2] for r in ours]} != torch's {[r[:2] for r in expected]}")
        return failures, None
    loss_diff = max(abs(a[2] - b[2]) for a, b in zip(ours, expected))
    lr_rel = max(abs(a[3] - b[3]) / b[3] for a, b in zip(ours, expected))
    norm_rel = max(abs(a[4] - b[4]) / b[4] for a, b in zip(ours, expected))
    bad = [(abs(a[2] - b[2]), b[1], a[2], b[2]) for a, b in zip(ours, expected) if abs(a[2] - b[2]) > LOSS_BOUND]
    if bad:
        worst_step = max(bad)
        failures.append(f"{name}: the loss differs by more than {LOSS_BOUND:.0e} on {len(bad)} of {len(ours)} steps, "
                        f"first step {bad[0][1]} (ouro {bad[0][2]:.9g}, torch {bad[0][3]:.9g}), most at step "
                        f"{worst_step[1]} ({worst_step[0]:.3e})")
    if lr_rel > LR_REL:
        failures.append(f"{name}: the CSV's lr differs from get_lr by up to {lr_rel:.3e} (relative)")
    if norm_rel > NORM_REL:
        failures.append(f"{name}: grad_norm differs from torch's clip_grad_norm_ total by up to {norm_rel:.3e} "
                        "(relative)")
    clipped = sum(1 for r in ours if r[4] > t["clip"])
    if clipped == 0 or clipped == len(ours):
        failures.append(f"{name}: clipping clipped on {clipped} of {len(ours)} steps; the test needs some of each "
                        f"(grad norms {[round(r[4], 3) for r in ours]}, clip {t['clip']})")

    weights = read_safetensors(save)
    final = state_without_head(model)
    if list(weights) != list(final):
        failures.append(f"{name}: ouro's tensors {list(weights)} != torch's {list(final)}")
        return failures, None
    weight_diff, worst = 0.0, ""
    for tensor, value in final.items():
        diff = float((weights[tensor].double() - value.double()).abs().max())
        if diff >= weight_diff:
            weight_diff, worst = diff, tensor
    moved = max(float((final[k].double() - initial[k].double()).abs().max()) for k in final)
    if weight_diff > WEIGHT_BOUND:
        failures.append(f"{name}: weights differ by up to {weight_diff:.3e} ({worst}) > {WEIGHT_BOUND:.0e}")
    val_ouro = json.load(open(summary))["val_loss"]
    val_diff = abs(val_ouro - val_torch)
    if val_diff > VAL_BOUND:
        failures.append(f"{name}: validation loss ouro {val_ouro:.9g} torch {val_torch:.9g} differ by {val_diff:.3e}")
    return failures, {"name": name, "loss": loss_diff, "weights": weight_diff, "worst": worst, "moved": moved,
                      "val": val_diff, "val_torch": val_torch, "lr": lr_rel, "norm": norm_rel, "clipped": clipped,
                      "first": expected[0][2], "last": expected[-1][2], "epochs": expected[-1][0] + 1,
                      "global": world * batch * accumulate,
                      "seconds": seconds}


def test_main(ouro_run, ouro_train):
    torch.set_num_threads(1)  # one summation order, and the 2-core machine is shared
    started = time.monotonic()
    failures, rows = [], []
    with tempfile.TemporaryDirectory(prefix="ouro-gpt-torch-train-") as folder:
        text = os.path.join(folder, "corpus.txt")
        with open(text, "wb") as f:
            f.write(english_like_text(TEST_CORPUS_BYTES))
        init = os.path.join(folder, "init.safetensors")
        write_safetensors(init, state_without_head(build_model(TEST_CONFIG, seed=INIT_SEED)),
                          {"source": f"nanoGPT init, torch.manual_seed({INIT_SEED})"})
        for run in TEST_RUNS:
            failed, row = compare_run(folder, ouro_run, ouro_train, init, text, run)
            failures += failed
            if row:
                rows.append(row)
    count = window_count(train_split(TEST_CORPUS_BYTES), TEST_TRAIN["block"])
    print(f"ouro-train --model gpt against PyTorch {torch.__version__}: GPT {TEST_CONFIG}, {TEST_STEPS} AdamW "
          f"steps (lr {TEST_TRAIN['lr']}, warm-up {TEST_TRAIN['warmup']}, min-lr {TEST_TRAIN['min_lr']}, clip "
          f"{TEST_TRAIN['clip']}), {count} training windows of a {TEST_CORPUS_BYTES}-byte corpus")
    print(f"{'run':18} {'batch':>5} {'epochs':>6} {'max|dloss|':>10} {'max|dw|':>9} {'moved':>7} {'|dval|':>9} "
          f"{'lr rel':>8} {'norm rel':>8} {'clipped':>7} {'loss first->last':>17} {'s':>5}")
    for r in rows:
        print(f"{r['name']:18} {r['global']:5} {r['epochs']:6} {r['loss']:10.2e} {r['weights']:9.2e} "
              f"{r['moved']:7.3f} {r['val']:9.2e} {r['lr']:8.1e} {r['norm']:8.1e} {r['clipped']:>4}/{TEST_STEPS} "
              f"{r['first']:8.4f}->{r['last']:.4f} {r['seconds']:5.2f}")
    print(f"bounds: loss, weights and validation loss {LOSS_BOUND:.0e} (the issue's); lr {LR_REL:.0e} and "
          f"grad_norm {NORM_REL:.0e} relative; {time.monotonic() - started:.1f} s in all")
    if failures:
        print("FAIL: ouro-train and PyTorch trained different numbers:\n  " + "\n  ".join(failures))
        return 1
    print("ouro-train's GPT training agrees with PyTorch's: every step's loss, lr and gradient norm, the "
          "final weights and the validation loss")
    return 0


# ---- reference mode ----------------------------------------------------------------------------

def reference_main(argv):
    parser = argparse.ArgumentParser(
        prog="gpt_torch_train.py --reference",
        description="PyTorch's side of the GPT reference run: ouro-train's GPT defaults and data order, "
                    "torch only; prints the final validation loss.")
    parser.add_argument("--reference", action="store_true", help="this mode (torch only)")
    steps = parser.add_mutually_exclusive_group(required=True)
    steps.add_argument("--steps", type=int, help="optimizer steps in all (the schedule's total)")
    steps.add_argument("--epochs", type=int, help="full epochs (steps = epochs * steps per epoch)")
    parser.add_argument("--init", metavar="FILE", help="start from this safetensors (e.g. ouro-train --steps 0 --save)")
    parser.add_argument("--text", metavar="FILE", help=f"corpus (default: the fortunes files in {FORTUNES})")
    parser.add_argument("--world", type=int, default=4, help="ranks the global batch stands for (default 4)")
    parser.add_argument("--batch-size", type=int, default=16, help="per rank per micro-batch (default 16)")
    parser.add_argument("--accumulate", type=int, default=1)
    parser.add_argument("--seed", type=int, default=0, help="sampler seed, and torch init seed without --init")
    parser.add_argument("--n-layer", type=int, default=4)
    parser.add_argument("--n-head", type=int, default=4)
    parser.add_argument("--n-embd", type=int, default=128)
    parser.add_argument("--block-size", type=int, default=128)
    parser.add_argument("--lr", type=float, default=3e-3, help="ouro-train --model gpt's default")
    parser.add_argument("--min-lr", type=float, help="default lr/10")
    parser.add_argument("--warmup-steps", type=int, default=20)
    parser.add_argument("--grad-clip", type=float, default=1.0, help="0 = off")
    parser.add_argument("--weight-decay", type=float, default=0.1)
    parser.add_argument("--betas", default="0.9,0.95")
    parser.add_argument("--eps", type=float, default=1e-8)
    parser.add_argument("--threads", type=int, default=2, help="torch.set_num_threads (default 2)")
    parser.add_argument("--eval-batch", type=int, default=64, help="validation windows per forward")
    parser.add_argument("--log-every", type=int, default=50, help="progress line every N steps (0 = none)")
    parser.add_argument("--metrics", metavar="FILE.csv", help="every step: epoch,step,loss,lr,grad_norm")
    parser.add_argument("--save", metavar="FILE.safetensors", help="final weights, ouro-train's names")
    parser.add_argument("--json", metavar="FILE", help="summary: val_loss, final_loss, steps, seconds, ...")
    args = parser.parse_args(argv)
    if min(args.world, args.batch_size, args.accumulate, args.threads, args.eval_batch) < 1:
        parser.error("--world, --batch-size, --accumulate, --threads and --eval-batch must be >= 1")
    torch.set_num_threads(args.threads)
    corpus = open(args.text, "rb").read() if args.text else fortunes_corpus()
    block = args.block_size
    count = window_count(train_split(len(corpus)), block)
    if count == 0 or window_count(len(corpus) - train_split(len(corpus)), block) == 0:
        parser.error(f"--block-size {block} is larger than the corpus ({len(corpus)} bytes) allows")
    per_rank = -(-count // args.world)
    steps_per_epoch = per_rank // args.batch_size // args.accumulate
    total = args.steps if args.steps is not None else args.epochs * steps_per_epoch
    config = {"n_layer": args.n_layer, "n_head": args.n_head, "n_embd": args.n_embd, "block_size": block,
              "vocab_size": 256}
    model = build_model(config, args.init, args.seed)
    beta1, beta2 = (float(b) for b in args.betas.split(","))
    cfg = {"block": block, "world": args.world, "batch": args.batch_size, "accumulate": args.accumulate,
           "seed": args.seed, "lr": args.lr, "min_lr": args.lr / 10 if args.min_lr is None else args.min_lr,
           "warmup": args.warmup_steps, "betas": (beta1, beta2), "eps": args.eps,
           "weight_decay": args.weight_decay, "clip": args.grad_clip}
    print(f"torch {torch.__version__} GPT {config}, {sum(p.numel() for p in model.parameters())} parameters, "
          f"init {args.init or f'nanoGPT, torch.manual_seed({args.seed})'}; corpus {args.text or FORTUNES} "
          f"({len(corpus)} bytes, {count} training windows); global batch {args.world} x {args.batch_size} x "
          f"{args.accumulate}, {steps_per_epoch} steps per epoch; training to step {total}", flush=True)
    started = time.monotonic()
    metrics = open(args.metrics, "w") if args.metrics else None
    if metrics:
        metrics.write("epoch,step,loss,lr,grad_norm\n")

    def log(row):
        epoch, step, loss, lr, norm = row
        if metrics:
            metrics.write(f"{epoch},{step},{loss:.9g},{lr:.17g},{norm:.9g}\n")
        if args.log_every and (step % args.log_every == 0 or step == total):
            print(f"epoch {epoch} step {step}/{total} loss {loss:.4f} lr {lr:.2e} norm {norm:.3f} "
                  f"({time.monotonic() - started:.0f} s)", flush=True)

    rows = train(model, corpus, cfg, total, log)
    if metrics:
        metrics.close()
    seconds = time.monotonic() - started
    val, windows_count = validation_loss(model, corpus, block, args.eval_batch)
    print(f"end at step {total}: validation loss {val:.4f} ({val / math.log(2):.4f} bits per byte) over "
          f"{windows_count} windows; {seconds:.0f} s training")
    if args.save:
        write_safetensors(args.save, state_without_head(model), {"format": "pt", "source": "gpt_torch_train.py"})
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"val_loss": val, "val_bits_per_byte": val / math.log(2), "validation_windows": windows_count,
                       "final_loss": rows[-1][2] if rows else None, "steps": total, "train_seconds": seconds,
                       "torch": torch.__version__, "init": args.init, "world": args.world,
                       "batch_size": args.batch_size, "accumulate": args.accumulate, "seed": args.seed,
                       "config": config, "schedule": {k: cfg[k] for k in ("lr", "min_lr", "warmup", "clip")}},
                      f, indent=2)
    print(f"val_loss {val:.9g}")
    return 0


def main(argv):
    if "--reference" in argv:
        return reference_main(argv)
    if argv in (["-h"], ["--help"]):
        print(__doc__)
        return 0
    if len(argv) != 2 or argv[0].startswith("-"):
        print("usage: gpt_torch_train.py OURO_RUN OURO_TRAIN\n"
              "       gpt_torch_train.py --reference --steps N [--init FILE] ...  (--reference --help)",
              file=sys.stderr)
        return 2
    return test_main(*(os.path.abspath(p) for p in argv))


if __name__ == "__main__":
    try:
        sys.exit(main(sys.argv[1:]))
    except (ValueError, OSError) as error:
        print(f"gpt_torch_train.py: {error}", file=sys.stderr)
        sys.exit(2)
