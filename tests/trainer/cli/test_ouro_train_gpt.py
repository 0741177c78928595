#!/usr/bin/python3
"""ouro-train --model gpt end to end: refusals, outputs, modes and resumption, on a tiny GPT.

    test_ouro_train_gpt.py OURO_RUN OURO_TRAIN CASE

Every case trains a 1-block, 2-head, 16-channel GPT with a 16-byte context (7664 parameters) on a
~8 KB text the test writes itself, so no data set is needed and each case takes about a second.

CASE (each a meson test of its own):
  bad-input  every refusal of a GPT run (and of GPT flags without --model gpt): the documented
             exit status (2 for the command line, 1 for files), one message naming the flag or
             file and what to do, nothing written; under ouro-run one message for the job
  outputs    --json, --metrics (--log-every 1), --plot (when gnuplot draws PNGs), --sample with
             --temperature 0, --save: every field checked against values computed here (the
             parameter count, bits per byte, nanoGPT's get_lr per CSV row, nanoGPT's tensor
             names); the same command twice gives the same sample and bytes; --init of the
             saved file gives the model back
  modes      ddp, zero1, zero2, zero3 at W=2 give the same model bytes and validation loss in
             fp32, in bf16 and with --accumulate 2; --mode single equals ddp at W=1 bit for bit
             and W=2's global batch up to rounding
  resume     zero2 at W=2 (and ddp in bf16 with --accumulate 2) killed after a checkpoint and
             resumed equals the uninterrupted run byte for byte, across an epoch boundary;
             another distributed --mode continues it; the W=2 checkpoint resumed at W=3 holds the same state
             and trains on; a ddp checkpoint of W=2 resumes at W=1
Exit status: 0 pass, 1 fail.
"""

import json
import math
import os
import random
import re
import shutil
import subprocess
import sys
import tempfile
from array import array

from cli_support import (JOB_TIMEOUT_S, SKIP, check, clean_env, files_under, floats, main, read_checkpoint,
                         read_safetensors, run, write_safetensors)

V, L, H, C, T = 256, 1, 2, 16, 16
SHAPE = ["--n-layer", str(L), "--n-head", str(H), "--n-embd", str(C), "--block-size", str(T)]
MODEL_DESCRIPTION = f"gpt:n_layer={L},n_head={H},n_embd={C},block_size={T},vocab_size={V}"
ZERO_MODES = ("ddp", "zero1", "zero2", "zero3")


def write_corpus(path, words=2000):
    """~8 KB of space-separated words from a small vocabulary: learnable in a few steps. At
    --block-size 16: 7324 training bytes = 457 windows, 814 validation bytes = 50 windows."""
    rng = random.Random(1)
    vocabulary = ["the", "cat", "sat", "on", "a", "mat", "and", "dog", "ran", "far", "away", "into", "night"]
    with open(path, "w") as f:
        f.write(" ".join(rng.choice(vocabulary) for _ in range(words)))


def gpt(text, *flags):
    return ["--model", "gpt", "--text", text, *SHAPE, *flags]


def ranks(ouro_run, n, ouro_train, *args):
    return [ouro_run, "-n", str(n), ouro_train, *args]


def with_work(case):
    def wrapped(ouro_run, ouro_train):
        with tempfile.TemporaryDirectory(prefix="ouro-train-gpt-") as work:
            write_corpus(f"{work}/corpus.txt")
            return case(ouro_run, ouro_train, work)
    return wrapped


def run_bytes(command, cwd):
    """run() for a command whose stdout holds sampled bytes (not necessarily UTF-8)."""
    result = subprocess.run(command, cwd=cwd, env=clean_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            timeout=JOB_TIMEOUT_S)
    err = result.stderr.decode("utf-8", "replace")
    check(result.returncode == 0, f"$ {' '.join(command)}\nexit status {result.returncode}\n--- stderr\n{err}")
    return result.stdout


# ---- the GPT's tensors, from nanoGPT's model.py (independently of the trainer's layout) ------------

def gpt_layout(n_layer=L, n_embd=C, block_size=T, vocab=V):
    """[(name, shape)] in nanoGPT's state_dict() order, lm_head.weight (tied to wte) left out."""
    out = [("transformer.wte.weight", [vocab, n_embd]), ("transformer.wpe.weight", [block_size, n_embd])]
    for layer in range(n_layer):
        p = f"transformer.h.{layer}."
        out += [(p + "ln_1.weight", [n_embd]), (p + "ln_1.bias", [n_embd]),
                (p + "attn.c_attn.weight", [3 * n_embd, n_embd]), (p + "attn.c_attn.bias", [3 * n_embd]),
                (p + "attn.c_proj.weight", [n_embd, n_embd]), (p + "attn.c_proj.bias", [n_embd]),
                (p + "ln_2.weight", [n_embd]), (p + "ln_2.bias", [n_embd]),
                (p + "mlp.c_fc.weight", [4 * n_embd, n_embd]), (p + "mlp.c_fc.bias", [4 * n_embd]),
                (p + "mlp.c_proj.weight", [n_embd, 4 * n_embd]), (p + "mlp.c_proj.bias", [n_embd])]
    return out + [("transformer.ln_f.weight", [n_embd]), ("transformer.ln_f.bias", [n_embd])]


def gpt_param_count(n_layer=L, n_embd=C, block_size=T, vocab=V):
    return vocab * n_embd + block_size * n_embd + n_layer * (12 * n_embd ** 2 + 13 * n_embd) + 2 * n_embd


def gpt_tensors(n_layer=L, value=0.01):
    """A GPT state dict as safetensors entries, every value `value`."""
    tensors = {}
    for name, shape in gpt_layout(n_layer):
        tensors[name] = ("F32", shape, array("f", [value] * math.prod(shape)).tobytes())
    return tensors


def check_gpt_file(path):
    """The --save file: nanoGPT's names and shapes in F32, no lm_head.weight; returns the flat
    vector in state_dict order (the trainer's parameter order)."""
    tensors, metadata = read_safetensors(path)
    layout = gpt_layout()
    check("lm_head.weight" not in tensors, f"{path}: holds lm_head.weight (the head is tied to transformer.wte.weight)")
    check(sorted(tensors) == sorted(name for name, _ in layout),
          f"{path}: tensors {sorted(tensors)}, expected nanoGPT's {sorted(name for name, _ in layout)}")
    check(metadata.get("model") == MODEL_DESCRIPTION, f"{path}: metadata {metadata}")
    flat = array("f")
    for name, shape in layout:
        dtype, got_shape, raw = tensors[name]
        check(dtype == "F32" and got_shape == shape, f"{path}: {name} is {dtype} {got_shape}, expected F32 {shape}")
        flat.extend(floats(raw))
    check(len(flat) == gpt_param_count() and all(math.isfinite(v) for v in flat), f"{path}: NaN/inf or wrong size")
    return flat


def same_bytes(a, b, what):
    with open(a, "rb") as fa, open(b, "rb") as fb:
        check(fa.read() == fb.read(), f"{what}: {a} and {b} differ")


def same_tensors(a, b, what):
    """Tensor by tensor, so that a failure names the first that differs."""
    ta, _ = read_safetensors(a)
    tb, _ = read_safetensors(b)
    check(sorted(ta) == sorted(tb), f"{what}: {a} and {b} hold different tensors")
    for name in ta:
        check(ta[name] == tb[name], f"{what}: tensor {name} differs between {a} and {b}")
    same_bytes(a, b, what)


def load_json(path):
    with open(path) as f:
        return json.load(f)


# ---- bad input ------------------------------------------------------------------------------------

@with_work
def case_bad_input(ouro_run, ouro_train, work):
    text = f"{work}/corpus.txt"
    inputs = f"{work}/inputs"
    os.makedirs(f"{inputs}/a_folder")
    open(f"{inputs}/empty.txt", "w").close()
    with open(text) as f, open(f"{inputs}/short.txt", "w") as g:
        g.write(f.read(100))  # 90 training bytes, 10 validation bytes: no 17-byte window
    good = gpt_tensors()
    files = {
        # torch.compile's state_dict: every name prefixed
        "compiled": {"_orig_mod." + k: v for k, v in good.items()},
        "misnamed": {k.replace("ln_1", "ln1"): v for k, v in good.items()},
        # Hugging Face's GPT-2 keeps Conv1D weights transposed
        "transposed": dict(good, **{"transformer.h.0.attn.c_attn.weight": ("F32", [C, 3 * C], bytes(4 * 3 * C * C))}),
        "with_head": dict(good, **{"lm_head.weight": ("F32", [V, C], bytes(4 * V * C))}),
        "two_layers": gpt_tensors(n_layer=2),
        "bf16": dict(good, **{"transformer.ln_f.bias": ("BF16", [C], bytes(2 * C))}),
    }
    for name, tensors in files.items():
        write_safetensors(f"{inputs}/{name}.safetensors", tensors)
    # A real GPT checkpoint of one block, for resumes that do not match it.
    run([ouro_train, *gpt(text, "--batch-size", "4", "--steps", "1", "--log-every", "0", "--sample", "0",
                          "--checkpoint", f"{inputs}/ck")], work)

    inits = "--init " + inputs
    cases = [  # (flags after the tiny GPT's, exit status, words the message must hold)
        (["--n-embd", "15"], 2, "--n-embd 15 is not a multiple of --n-head 2"),
        (["--n-embd", "20000", "--n-head", "1"], 2, "--n-embd 20000: the embedding width must be between 1 and 16384"),
        (["--block-size", "100000"], 2, "--block-size 100000: the longest sequence must be between 1 and 65536"),
        (["--n-layer", "0"], 2, "--n-layer needs a whole number >= 1, got '0'"),
        (["--block-size", "1000"], 2, "--block-size 1000 is larger than the corpus allows: the validation split of "
                                      f"{text} holds 814 bytes, a window needs 1001; use a smaller --block-size"),
        (["--text", f"{inputs}/short.txt"], 2, f"the validation split of {inputs}/short.txt holds 10 bytes, a window "
                                               "needs 17"),
        (["--batch-size", "1000"], 2, "--batch-size 1000 x --accumulate 1 needs more than the 457 samples"),
        (["--text", f"{inputs}/empty.txt"], 1, f"--text {inputs}/empty.txt is empty; pass a file that holds text"),
        (["--text", f"{work}/no_such.txt"], 1, f"--text {work}/no_such.txt does not exist; pass a text file"),
        (["--text", f"{inputs}/a_folder"], 1, f"--text {inputs}/a_folder is a directory; --text takes one text file"),
        (["--text", ""], 2, "--text needs a file name"),
        (["--model", "gpt2"], 2, "--model needs mlp or gpt, got 'gpt2'"),
        (["--layers", "784,10"], 2, "--layers sets the MLP's widths: the GPT's shape is --n-layer"),
        (["--data", inputs], 2, "--data is the Fashion-MNIST folder: the GPT reads --text FILE"),
        (["--min-lr", "0.01"], 2, "--min-lr 0.01 is above --lr 0.003"),
        (["--lr", "1e-7", "--min-lr", "2e-7"], 2, "--min-lr 2e-07 is above --lr 1e-07"),
        (["--grad-clip", "-1"], 2, "--grad-clip needs a number in [0, inf) (0 turns clipping off), got '-1'"),
        (["--grad-clip", "strong"], 2, "--grad-clip needs a finite number, got 'strong'"),
        (["--warmup-steps", "-1"], 2, "--warmup-steps needs a whole number >= 0, got '-1'"),
        (["--warmup-steps", "2.5"], 2, "--warmup-steps needs a whole number >= 0, got '2.5'"),
        (["--temperature", "-0.5"], 2, "--temperature needs a number in [0, inf)"),
        (["--temperature", "nan"], 2, "--temperature needs a finite number, got 'nan'"),
        (["--top-k", "0"], 2, "--top-k needs a whole number >= 1, got '0'"),
        (["--top-k", "-3"], 2, "--top-k needs a whole number >= 1, got '-3'"),
        (["--top-k", "many"], 2, "--top-k needs a whole number >= 1, got 'many'"),
        (["--sample", "-1"], 2, "--sample needs a whole number >= 0, got '-1'"),
        (["--init", f"{inputs}/compiled.safetensors"], 1,
         f"{inits}/compiled.safetensors: has no tensor 'transformer.wte.weight' [256,16]"),
        (["--init", f"{inputs}/misnamed.safetensors"], 1,
         f"{inits}/misnamed.safetensors: has no tensor 'transformer.h.0.ln_1.weight' [16] ({MODEL_DESCRIPTION}); "
         "names follow nanoGPT's state_dict()"),
        (["--init", f"{inputs}/transposed.safetensors"], 1,
         f"{inits}/transposed.safetensors: tensor 'transformer.h.0.attn.c_attn.weight' has shape [16,48], the model "
         f"({MODEL_DESCRIPTION}) needs [48,16]"),
        (["--init", f"{inputs}/with_head.safetensors"], 1,
         f"{inits}/with_head.safetensors: holds lm_head.weight: the head is tied to transformer.wte.weight"),
        (["--init", f"{inputs}/two_layers.safetensors"], 1,
         f"{inits}/two_layers.safetensors: holds tensor 'transformer.h.1."),
        (["--init", f"{inputs}/bf16.safetensors"], 1, "tensor 'transformer.ln_f.bias' is BF16, expected F32"),
        (["--resume", f"{inputs}/ck", "--n-layer", "2"], 1,
         f"--resume {inputs}/ck: the checkpoint (step 1) holds the model {MODEL_DESCRIPTION}, this run trains "
         "gpt:n_layer=2"),
        (["--resume", f"{inputs}/ck", "--mode", "single", "--precision", "bf16"], 1,
         "was trained in --precision fp32, this run asks for bf16: pass --precision fp32"),
    ]
    # GPT settings without --model gpt (checked before any data is looked for).
    mlp_cases = [([flag, value], 2, f"{flag} is a GPT setting: pass --model gpt, or leave it out for the MLP")
                 for flag, value in (("--n-layer", "1"), ("--n-head", "2"), ("--n-embd", "16"), ("--block-size", "8"),
                                     ("--text", text), ("--sample", "5"), ("--prompt", "ab"),
                                     ("--temperature", "1"), ("--top-k", "5"))]
    before = files_under(work)
    for mlp, table in ((False, cases), (True, mlp_cases)):
        for flags, status, words in table:
            # (--sample 0: should a refusal fail to happen, no sampled bytes that are not UTF-8.)
            base = ["--steps", "2"] if mlp else gpt(text, "--batch-size", "4", "--steps", "2", "--sample", "0")
            # Every output asked for, so that one written before the refusal shows up.
            outputs = ["--json", f"{work}/out.json", "--metrics", f"{work}/out.csv", "--log-every", "1",
                       "--save", f"{work}/out.safetensors", "--checkpoint", f"{work}/ck_out"]
            command = [ouro_train, *base, *outputs, *flags]
            _, _, err = run(command, work, expect=status)
            check(words in err, f"$ {' '.join(command)}\nexpected a message holding {words!r}, stderr was:\n{err}")
            check(len(err.strip().splitlines()) == 1, f"$ {' '.join(command)}\nexpected one line, stderr was:\n{err}")
            check(files_under(work) == before,
                  f"$ {' '.join(command)}\nwrote {sorted(files_under(work) - before)} though it failed")
    # Under ouro-run: the ranks agree, one of them says it, nothing is written.
    multi = [(["--block-size", "1000"], "--block-size 1000 is larger than the corpus allows"),
             (["--init", f"{inputs}/with_head.safetensors"], "holds lm_head.weight"),
             (["--resume", f"{inputs}/ck"], "was written by --mode single, this run is --mode zero3: pass --mode single")]
    for flags, words in multi:
        command = ranks(ouro_run, 2, ouro_train, "--mode", "zero3",
                        *gpt(text, "--batch-size", "4", "--steps", "2", "--sample", "0"),
                        "--save", f"{work}/out.safetensors", "--checkpoint", f"{work}/ck_out", *flags)
        _, _, err = run(command, work, expect=None)
        check(err.count(words) == 1, f"$ {' '.join(command)}\nexpected one message holding {words!r}:\n{err}")
        check(files_under(work) == before, f"$ {' '.join(command)}\nwrote {sorted(files_under(work) - before)}")
    count = len(cases) + len(mlp_cases) + len(multi)
    return f"{count} bad inputs refused with the documented status and one message naming the problem, nothing written"


# ---- outputs --------------------------------------------------------------------------------------

def nanogpt_lr(it, lr, min_lr, warmup, decay_iters):
    """nanoGPT train.py's get_lr, as written there."""
    if it < warmup:
        return lr * (it + 1) / (warmup + 1)
    if it > decay_iters:
        return min_lr
    decay_ratio = (it - warmup) / (decay_iters - warmup)
    coeff = 0.5 * (1.0 + math.cos(math.pi * decay_ratio))
    return min_lr + coeff * (lr - min_lr)


def printed_sample(stdout, prompt, n):
    """The n sampled bytes of the run's stdout: after the 'sample (...):' line, the prompt, then them."""
    marker = f"sample ({n} bytes after '{prompt}'".encode()
    at = stdout.find(marker)
    check(at >= 0, f"no sample line in the output:\n{stdout!r}")
    start = stdout.index(b"\n", at) + 1
    check(stdout[start:start + len(prompt)] == prompt.encode(), f"the sample does not start with the prompt: {stdout!r}")
    return stdout[start + len(prompt):start + len(prompt) + n]


def sample_text_matches(text, raw):
    """Whether text is raw as JSON text: raw's UTF-8 characters as they are, each invalid stretch
    (bytes >= 0x80 that are no character) one or more U+FFFD (nlohmann-json's replacement, which
    splits some stretches differently from Python's decode(errors="replace"))."""
    pattern, k = b"", 0
    while k < len(text):
        if text[k] == "\ufffd":
            run_length = len(text[k:]) - len(text[k:].lstrip("\ufffd"))
            pattern += rb"[\x80-\xff]{%d,%d}" % (run_length, 4 * run_length)
            k += run_length
        else:
            pattern += re.escape(text[k].encode())
            k += 1
    return re.fullmatch(pattern, raw, re.DOTALL) is not None


@with_work
def case_outputs(ouro_run, ouro_train, work):
    steps, warmup, lr, min_lr = 6, 2, 0.003, 0.0002
    plot = shutil.which("gnuplot") is not None and "png" in subprocess.run(
        ["gnuplot", "-e", "set terminal"], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True).stdout

    def command(name, *more):
        out = ["--json", f"{work}/{name}.json", "--metrics", f"{work}/{name}.csv", "--save", f"{work}/{name}.safetensors"]
        if plot:
            out += ["--plot", f"{work}/{name}.png"]
        return [ouro_train, *gpt(f"{work}/corpus.txt", "--batch-size", "4", "--steps", str(steps), "--warmup-steps",
                                 str(warmup), "--lr", str(lr), "--min-lr", str(min_lr), "--log-every", "1", "--sample",
                                 "20", "--prompt", "ab", "--temperature", "0", *more), *out]

    stdout = run_bytes(command("a"), work)
    report = load_json(f"{work}/a.json")
    n = gpt_param_count()
    check(n == 7664, f"the formula gives {n} parameters")
    for key, want in (("model", "gpt"), ("n_layer", L), ("n_head", H), ("n_embd", C), ("block_size", T),
                      ("param_count", n), ("steps", steps), ("mode", "single"), ("world_size", 1),
                      ("precision", "fp32"), ("batch_size", 4), ("global_batch_size", 4), ("warmup_steps", warmup),
                      ("min_lr", min_lr), ("grad_clip", 1.0), ("resumed_from_step", None)):
        check(report.get(key) == want, f"a.json: {key} = {report.get(key)!r}, expected {want!r}")
    check(report["optimizer"]["kind"] == "adamw" and report["optimizer"]["betas"] == [0.9, 0.95]
          and report["optimizer"]["weight_decay"] == 0.1, f"a.json: optimizer {report['optimizer']} is not nanoGPT's")
    val = report["val_loss"]
    check(isinstance(val, float) and math.isfinite(val) and 0 < val < 6.5, f"a.json: val_loss {val}")
    check(abs(report["val_bits_per_byte"] - val / math.log(2)) <= 1e-12 * val,
          f"a.json: val_bits_per_byte {report['val_bits_per_byte']} is not val_loss / ln 2 = {val / math.log(2)}")
    check(report["last_lr"] == nanogpt_lr(steps - 1, lr, min_lr, warmup, steps), f"a.json: last_lr {report['last_lr']}")
    # The sample: 20 bytes after the prompt on stdout; the JSON holds them as text, invalid UTF-8
    # replaced by U+FFFD.
    raw = printed_sample(stdout, "ab", 20)
    check(len(raw) == 20, f"the printed sample is {len(raw)} bytes: {raw!r}")
    check(report["sample"] == raw.decode("utf-8", "replace"),
          f"a.json: sample {report['sample']!r}, stdout printed {raw!r}")

    # The CSV: one row per step, nanoGPT's lr (the same doubles), a finite gradient norm.
    with open(f"{work}/a.csv") as f:
        lines = f.read().splitlines()
    check(lines[0] == "epoch,step,loss,accuracy,samples_per_s,comm_fraction,lr,grad_norm", f"a.csv: header {lines[0]!r}")
    check([int(line.split(",")[1]) for line in lines[1:]] == list(range(1, steps + 1)), f"a.csv: rows {lines[1:]}")
    for line in lines[1:]:
        epoch, step, loss, accuracy, rate, comm, row_lr, norm = (float(x) for x in line.split(","))
        want = nanogpt_lr(int(step) - 1, lr, min_lr, warmup, steps)
        check(row_lr == want, f"a.csv: step {int(step)} lr {row_lr!r}, nanoGPT's get_lr gives {want!r}")
        check(epoch == 0 and 0 < loss < 6.5 and 0 <= accuracy <= 1 and rate > 0 and comm == 0,
              f"a.csv: row {line!r}")
        check(math.isfinite(norm) and norm > 0, f"a.csv: grad_norm {norm} at step {int(step)}")

    check_gpt_file(f"{work}/a.safetensors")
    expected = {"corpus.txt", "a.json", "a.csv", "a.safetensors"} | ({"a.png"} if plot else set())
    check(files_under(work) == expected, f"left behind: {sorted(files_under(work))}, expected {sorted(expected)}")
    if plot:
        with open(f"{work}/a.png", "rb") as f:
            check(f.read(8) == b"\x89PNG\r\n\x1a\n", f"{work}/a.png is not a PNG")

    # The same command again: the same sample and the same bytes.
    stdout_b = run_bytes(command("b"), work)
    check(printed_sample(stdout_b, "ab", 20) == raw, "the same command sampled different text")
    check(load_json(f"{work}/b.json")["sample"] == report["sample"], "the same command wrote a different sample")
    same_bytes(f"{work}/a.safetensors", f"{work}/b.safetensors", "the same command twice")
    with open(f"{work}/a.csv") as fa, open(f"{work}/b.csv") as fb:
        strip = lambda text: [line.split(",")[:4] + line.split(",")[6:] for line in text.splitlines()]  # not speed
        check(strip(fa.read()) == strip(fb.read()), "the same command logged different losses or rates")

    # --init of the saved model, no step: the same model (bytes), validation loss and sample. (The
    # same --batch-size: the validation windows are evaluated that many at a time, and the sums of
    # another split round differently in the last digits.)
    stdout_c = run_bytes([ouro_train, *gpt(f"{work}/corpus.txt", "--steps", "0", "--init", f"{work}/a.safetensors",
                                           "--batch-size", "4",
                                           "--sample", "20", "--prompt", "ab", "--temperature", "0", "--log-every",
                                           "0", "--save", f"{work}/c.safetensors", "--json", f"{work}/c.json")], work)
    same_bytes(f"{work}/a.safetensors", f"{work}/c.safetensors", "--init of the saved model, --steps 0, --save")
    check(printed_sample(stdout_c, "ab", 20) == raw, "the model read back by --init samples different text")
    check(load_json(f"{work}/c.json")["val_loss"] == val, "the model read back by --init has another validation loss")

    # Sampled at temperature 1.5 the bytes are rarely UTF-8: the JSON text has U+FFFD for each
    # invalid stretch and every other character as printed; the same seed draws the same bytes.
    sampled = []
    for name in ("d", "e"):
        stdout_d = run_bytes([ouro_train, *gpt(f"{work}/corpus.txt", "--steps", "0", "--init", f"{work}/a.safetensors",
                                               "--sample", "200", "--prompt", "ab", "--temperature", "1.5", "--seed",
                                               "1", "--log-every", "0", "--json", f"{work}/{name}.json")], work)
        sampled.append(printed_sample(stdout_d, "ab", 200))
    check(sampled[0] == sampled[1], "the same seed sampled different bytes at temperature 1.5")
    text_d = load_json(f"{work}/d.json")["sample"]
    check(sample_text_matches(text_d, sampled[0]), f"d.json: sample {text_d!r} is not the printed {sampled[0]!r}")
    replaced = text_d.count("\ufffd")
    plotted = "a PNG, " if plot else "(no gnuplot with PNG: no plot), "
    return (f"outputs: val_loss {val:.4f}, {n} parameters, {steps} CSV rows on nanoGPT's schedule, {plotted}"
            f"sample {raw!r} repeated; --init round trip; a 200-byte sample with {replaced} U+FFFD as JSON text")


# ---- modes ----------------------------------------------------------------------------------------

@with_work
def case_modes(ouro_run, ouro_train, work):
    text = f"{work}/corpus.txt"
    base = gpt(text, "--steps", "6", "--warmup-steps", "2", "--log-every", "0", "--sample", "0")
    configs = {"fp32": ["--batch-size", "4"], "bf16": ["--batch-size", "4", "--precision", "bf16"],
               "accumulate": ["--batch-size", "2", "--accumulate", "2"]}
    losses = {}
    for config, flags in configs.items():
        for mode in ZERO_MODES:
            name = f"{config}-{mode}"
            run(ranks(ouro_run, 2, ouro_train, "--mode", mode, *base, *flags, "--save", f"{work}/{name}.safetensors",
                      "--json", f"{work}/{name}.json"), work)
            report = load_json(f"{work}/{name}.json")
            check((report["mode"], report["world_size"], report["precision"]) ==
                  (mode, 2, "bf16" if "bf16" in flags else "fp32"), f"{name}.json: {report['mode']} W={report['world_size']}")
            check(report["global_batch_size"] == 8, f"{name}.json: global batch {report['global_batch_size']}")
            losses[name] = report["val_loss"]
            check_gpt_file(f"{work}/{name}.safetensors")
        for mode in ZERO_MODES[1:]:
            same_tensors(f"{work}/{config}-ddp.safetensors", f"{work}/{config}-{mode}.safetensors",
                         f"{config}: ddp vs {mode} at W=2")
            check(losses[f"{config}-{mode}"] == losses[f"{config}-ddp"],
                  f"{config}: validation loss {losses[config + '-' + mode]!r} in {mode}, {losses[config + '-ddp']!r} in ddp")
    check(losses["bf16-ddp"] != losses["fp32-ddp"], "bf16 and fp32 give the same validation loss: was bf16 used?")

    # --mode single is ddp at W=1, bit for bit; and W=2 x 4 the same global batch as W=1 x 8
    # (rank r takes every other sample of the permutation), equal up to the order of the sums.
    run([ouro_train, *base, "--batch-size", "8", "--save", f"{work}/single.safetensors", "--json", f"{work}/single.json"],
        work)
    run(ranks(ouro_run, 1, ouro_train, "--mode", "ddp", *base, "--batch-size", "8", "--save", f"{work}/w1.safetensors"),
        work)
    same_tensors(f"{work}/single.safetensors", f"{work}/w1.safetensors", "--mode single vs ddp at W=1")
    single = check_gpt_file(f"{work}/single.safetensors")
    ddp = check_gpt_file(f"{work}/fp32-ddp.safetensors")
    differ = max(abs(a - b) for a, b in zip(single, ddp))
    check(differ < 1e-5, f"--mode single (batch 8) and ddp at W=2 (batch 4) differ by {differ} in a parameter")
    single_loss = load_json(f"{work}/single.json")["val_loss"]
    check(abs(single_loss - losses["fp32-ddp"]) < 1e-5 * single_loss,
          f"validation loss {single_loss} single, {losses['fp32-ddp']} ddp at W=2")
    return (f"modes: ddp/zero1/zero2/zero3 at W=2 bit-identical in fp32, bf16 and with --accumulate 2; single = "
            f"ddp at W=1; single vs W=2 within {differ:.1e}")


# ---- resume ---------------------------------------------------------------------------------------

def crashed_after(ck, step, to):
    """What a run killed right after its step-`step` checkpoint leaves: that step and `latest`
    naming it (stopping with --steps `step` instead would change the cosine schedule, whose
    horizon is --steps)."""
    os.makedirs(to)
    shutil.copytree(f"{ck}/step-{step}", f"{to}/step-{step}")
    with open(f"{to}/latest", "w") as f:
        f.write(f"step-{step}\n")


def resume_equality(ouro_run, ouro_train, work, name, mode, flags, stop, total):
    """An uninterrupted run to `total` with a checkpoint every `stop` steps, against its step-`stop`
    checkpoint resumed to `total`. Returns the manifest and state of the step-`stop` checkpoint."""
    config = ["--mode", mode, *flags, "--steps", str(total), "--log-every", "0", "--sample", "0"]
    run(ranks(ouro_run, 2, ouro_train, *config, "--checkpoint", f"{work}/{name}", "--checkpoint-every", str(stop),
              "--save", f"{work}/{name}-full.safetensors", "--json", f"{work}/{name}-full.json"), work)
    with open(f"{work}/{name}/latest") as f:
        check(f.read() == f"step-{total}\n", f"{name}/latest does not name step-{total}")
    steps = {f"step-{s}" for s in range(stop, total + 1, stop)} | {f"step-{total}"}
    want = {"latest"} | steps | {f"{s}/{f}" for s in steps
                                  for f in ("manifest.json", "rank-0-of-2.safetensors", "rank-1-of-2.safetensors")}
    check(files_under(f"{work}/{name}") == want, f"{name} holds {sorted(files_under(work + '/' + name))}")
    # The final checkpoint holds the saved model.
    manifest, params, state = read_checkpoint(f"{work}/{name}")
    saved = check_gpt_file(f"{work}/{name}-full.safetensors")
    check(params == saved, f"{name}: the step-{total} checkpoint's parameters are not the saved model")
    for key, value in (("model", MODEL_DESCRIPTION), ("layers", []), ("param_count", gpt_param_count()),
                       ("mode", mode), ("world_size", 2), ("step", total)):
        check(manifest[key] == value, f"{name}: manifest {key} = {manifest[key]!r}, expected {value!r}")
    check(sorted(state) == ["exp_avg", "exp_avg_sq"], f"{name}: AdamW checkpoint holds state {sorted(state)}")

    crashed_after(f"{work}/{name}", stop, f"{work}/{name}-crashed")
    _, out, _ = run(ranks(ouro_run, 2, ouro_train, *config, "--resume", f"{work}/{name}-crashed", "--save",
                          f"{work}/{name}-resumed.safetensors", "--json", f"{work}/{name}-resumed.json"), work)
    check(f"at step {stop}" in out, f"the resumed run does not say where it resumes:\n{out}")
    same_tensors(f"{work}/{name}-full.safetensors", f"{work}/{name}-resumed.safetensors",
                 f"{mode} {' '.join(flags[flags.index('--batch-size'):])}: {stop}+{total - stop} steps vs {total}")
    full, resumed = load_json(f"{work}/{name}-full.json"), load_json(f"{work}/{name}-resumed.json")
    check(resumed["val_loss"] == full["val_loss"] and resumed["last_lr"] == full["last_lr"],
          f"{name}: resumed val_loss/last_lr {resumed['val_loss']}/{resumed['last_lr']}, "
          f"uninterrupted {full['val_loss']}/{full['last_lr']}")
    check(resumed["resumed_from_step"] == stop and resumed["steps_this_run"] == total - stop,
          f"{name}: resumed_from_step {resumed['resumed_from_step']}, steps_this_run {resumed['steps_this_run']}")
    return read_checkpoint(f"{work}/{name}-crashed")


@with_work
def case_resume(ouro_run, ouro_train, work):
    text = f"{work}/corpus.txt"
    # 457 training windows: 229 per rank at W=2, 7 batches of 32 (7 steps per epoch, the last
    # window of a rank unused); steps 5 -> 10 cross into epoch 1.
    flags = gpt(text, "--warmup-steps", "2", "--batch-size", "32")
    manifest, params, state = resume_equality(ouro_run, ouro_train, work, "z2", "zero2", flags, 5, 10)
    check((manifest["step"], manifest["epoch"], manifest["batch_in_epoch"]) == (5, 0, 5),
          f"z2 step-5: step/epoch/batch {manifest['step']}/{manifest['epoch']}/{manifest['batch_in_epoch']}")
    # ddp in bf16 with 2 micro-batches of 16 (14 batches, 7 steps per epoch): 4 -> 8 crosses too.
    d2_flags = gpt(text, "--warmup-steps", "2", "--batch-size", "16", "--accumulate", "2", "--precision", "bf16")
    resume_equality(ouro_run, ouro_train, work, "d2", "ddp", d2_flags, 4, 8)

    # Another distributed mode continues the run with the same bits (docs/TRAINING.md): the zero2
    # checkpoint resumed in zero3 and in hsdp (shard groups of 1 at W=2) ends as the zero2 run.
    for other, extra in (("zero3", []), ("hsdp", ["--shard-size", "1"])):
        run(ranks(ouro_run, 2, ouro_train, "--mode", other, *extra, *flags, "--steps", "10", "--log-every", "0",
                  "--sample", "0", "--resume", f"{work}/z2-crashed", "--save", f"{work}/z2-as-{other}.safetensors"),
            work)
        same_tensors(f"{work}/z2-full.safetensors", f"{work}/z2-as-{other}.safetensors",
                     f"zero2 checkpoint continued in {other}")

    # The W=2 checkpoint at W=3, no further step: the same state, gathered; the position 5 x 2 x 32
    # = 320 samples into epoch 0 is 3 global batches of 3 x 32 (288) at W=3.
    config3 = ["--mode", "zero2", *flags, "--log-every", "0", "--sample", "0"]
    run(ranks(ouro_run, 3, ouro_train, *config3, "--steps", "5", "--resume", f"{work}/z2-crashed",
              "--save", f"{work}/w3.safetensors", "--checkpoint", f"{work}/ck3"), work)
    check(check_gpt_file(f"{work}/w3.safetensors") == params, "resumed at W=3, the saved model is not the checkpoint's")
    manifest3, params3, state3 = read_checkpoint(f"{work}/ck3")
    check((manifest3["world_size"], manifest3["step"], manifest3["epoch"], manifest3["batch_in_epoch"]) == (3, 5, 0, 3),
          f"W=3 manifest {manifest3}")
    check(params3 == params, "the W=3 checkpoint's parameters differ from the W=2 checkpoint's")
    for name in state:
        check(state3[name] == state[name], f"the W=3 checkpoint's {name} differs from the W=2 checkpoint's")
    run(ranks(ouro_run, 3, ouro_train, *config3, "--steps", "10", "--resume", f"{work}/ck3", "--json",
              f"{work}/w3.json"), work)
    w3 = load_json(f"{work}/w3.json")
    check(w3["steps"] == 10 and w3["world_size"] == 3 and math.isfinite(w3["val_loss"]) and
          w3["val_loss"] < load_json(f"{work}/z2-resumed.json")["val_loss"] + 0.5, f"W=3 run on: {w3}")

    # A ddp checkpoint of W=2 at W=1 (ddp shards are replicas).
    _, out, _ = run(ranks(ouro_run, 1, ouro_train, "--mode", "ddp", *d2_flags, "--steps", "8", "--log-every", "0",
                          "--sample", "0", "--resume", f"{work}/d2-crashed", "--json", f"{work}/w1.json"), work)
    w1 = load_json(f"{work}/w1.json")
    check("at step 4" in out and w1["steps"] == 8 and w1["world_size"] == 1 and math.isfinite(w1["val_loss"]),
          f"ddp W=2 checkpoint at W=1: {out}")
    return ("resume: zero2 fp32 5+5 = 10 steps and ddp bf16 accumulate 2 4+4 = 8 steps byte for byte across an "
            "epoch; continued in zero3 and hsdp; W=2 -> W=3 same state, trains on; ddp W=2 -> W=1 trains on")


CASES = {
    "bad-input": case_bad_input,
    "outputs": case_outputs,
    "modes": case_modes,
    "resume": case_resume,
}

if __name__ == "__main__":
    sys.exit(main(CASES, sys.argv[1:]))
