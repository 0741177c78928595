"""Helpers for the ouro-train command-line tests: running the program in a clean environment,
reading and writing safetensors by hand (no torch needed), and reading checkpoints back."""

import json
import os
import struct
import subprocess
import sys
from array import array

SKIP = 77
DATA = "/usr/share/datasets/fashion-mnist"
DATA_FILES = ["train-images-idx3-ubyte.gz", "train-labels-idx1-ubyte.gz",
              "t10k-images-idx3-ubyte.gz", "t10k-labels-idx1-ubyte.gz"]
# Every job is bounded; ouro's own waits fail first (OURO_TIMEOUT_S) so a broken rendezvous
# reports ouro's error rather than being killed silently.
JOB_TIMEOUT_S = 120
LAUNCHER_PREFIXES = ("OURO_", "SLURM_", "SBATCH_", "SRUN_", "SALLOC_", "OMPI_", "PMIX_", "PMI_", "HYDRA_",
                     "MPI_LOCAL", "TORCHELASTIC_")
LAUNCHER_NAMES = ("RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE", "GROUP_RANK", "MASTER_ADDR",
                  "MASTER_PORT")


class Failure(Exception):
    pass


def check(condition, message):
    if not condition:
        raise Failure(message)


def clean_env(extra=None):
    """The caller's environment without any launcher's variables (they would outrank the ones a
    test sets, and a test run under srun or ouro-run would prove nothing), plus extra."""
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(LAUNCHER_PREFIXES) and k not in LAUNCHER_NAMES}
    env["OURO_TIMEOUT_S"] = "60"
    env.update(extra or {})
    return env


def run(command, cwd, env=None, expect=0):
    """Runs command; returns (exit status, stdout, stderr). expect: the status required (None:
    any nonzero)."""
    result = subprocess.run(command, cwd=cwd, env=clean_env(env), stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, timeout=JOB_TIMEOUT_S)
    shown = f"$ {' '.join(command)}\n--- stdout\n{result.stdout}--- stderr\n{result.stderr}"
    if expect is None:
        check(result.returncode != 0, f"expected a failure, got exit status 0\n{shown}")
    else:
        check(result.returncode == expect, f"expected exit status {expect}, got {result.returncode}\n{shown}")
    return result.returncode, result.stdout, result.stderr


def have_data():
    return all(os.path.isfile(os.path.join(DATA, f)) for f in DATA_FILES)


# ---- safetensors --------------------------------------------------------------------------------

def read_safetensors(path):
    """{name: (dtype, shape, raw bytes)}, metadata dict."""
    with open(path, "rb") as f:
        blob = f.read()
    (size,) = struct.unpack("<Q", blob[:8])
    header = json.loads(blob[8:8 + size])
    metadata = header.pop("__metadata__", {})
    tensors = {}
    for name, t in header.items():
        begin, end = t["data_offsets"]
        tensors[name] = (t["dtype"], t["shape"], blob[8 + size + begin:8 + size + end])
    return tensors, metadata


def write_safetensors(path, tensors, metadata=None):
    """tensors: {name: (dtype, shape, raw bytes)}, written in the given order."""
    header, offset, data = {}, 0, b""
    if metadata:
        header["__metadata__"] = metadata
    for name, (dtype, shape, raw) in tensors.items():
        header[name] = {"dtype": dtype, "shape": shape, "data_offsets": [offset, offset + len(raw)]}
        offset += len(raw)
        data += raw
    text = json.dumps(header).encode()
    text += b" " * (-len(text) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)) + text + data)


def floats(raw):
    values = array("f")
    values.frombytes(raw)
    return values


def model_tensors(widths, value=0.0):
    """torch.nn.Sequential's state dict of the MLP as safetensors entries, every value `value`."""
    tensors = {}
    for k in range(len(widths) - 1):
        n_in, n_out = widths[k], widths[k + 1]
        tensors[f"{2 * k}.weight"] = ("F32", [n_out, n_in], array("f", [value] * (n_out * n_in)).tobytes())
        tensors[f"{2 * k}.bias"] = ("F32", [n_out], array("f", [value] * n_out).tobytes())
    return tensors


def param_count(widths):
    return sum(widths[k] * widths[k + 1] + widths[k + 1] for k in range(len(widths) - 1))


def check_model_file(path, widths):
    """The --save file: torch's names, shapes and F32 in module order; returns the flat vector."""
    tensors, _ = read_safetensors(path)
    expected = list(model_tensors(widths))
    check(sorted(tensors) == sorted(expected), f"{path}: tensors {sorted(tensors)}, expected {sorted(expected)}")
    flat = array("f")
    for name, (_, shape, _) in model_tensors(widths).items():
        dtype, got_shape, raw = tensors[name]
        check(dtype == "F32" and got_shape == shape, f"{path}: {name} is {dtype} {got_shape}, expected F32 {shape}")
        flat.extend(floats(raw))
    check(all(v == v for v in flat), f"{path}: holds NaN")
    return flat


def read_checkpoint(folder):
    """(manifest, params, {state name: whole vector}) of folder's latest checkpoint, rebuilt from
    every shard's ranges by hand (an independent reading of the format docs/TRAINING.md gives)."""
    with open(os.path.join(folder, "latest")) as f:
        step_dir = os.path.join(folder, f.read().strip())
    with open(os.path.join(step_dir, "manifest.json")) as f:
        manifest = json.load(f)
    n, world = manifest["param_count"], manifest["world_size"]
    params, state, covered = array("f", [0.0]) * n, {}, [0] * n
    for r in range(world):
        tensors, metadata = read_safetensors(os.path.join(step_dir, f"rank-{r}-of-{world}.safetensors"))
        check(metadata.get("rank") == str(r) and metadata.get("world_size") == str(world),
              f"{step_dir}: shard {r} metadata {metadata}")
        ranges = [tuple(int(x) for x in item.split(":")) for item in metadata["ranges"].split(",") if item]
        for name, (dtype, shape, raw) in tensors.items():
            check(dtype == "F32", f"{step_dir}: shard {r} tensor {name} is {dtype}")
            values, src = floats(raw), 0
            target = params if name == "params" else state.setdefault(name, array("f", [0.0]) * n)
            for offset, count in ranges:
                target[offset:offset + count] = values[src:src + count]
                if name == "params":
                    for i in range(offset, offset + count):
                        covered[i] = 1
                src += count
            check(src == len(values), f"{step_dir}: shard {r} {name} holds {len(values)} floats, ranges {src}")
    check(all(covered), f"{step_dir}: the shards do not cover every parameter")
    return manifest, params, state


def check_report(path, mode, world, widths, steps, precision="fp32"):
    """The --json report: every field the spec names, with sane values."""
    with open(path) as f:
        report = json.load(f)
    for key in ("test_accuracy", "final_loss", "steps", "samples_per_s", "comm_fraction", "bytes_per_rank",
                "peak_rss_bytes", "mode", "world_size", "precision", "param_count", "epochs", "batch_size"):
        check(key in report, f"{path}: no \"{key}\" in {sorted(report)}")
    check(0.0 <= report["test_accuracy"] <= 1.0, f"{path}: test_accuracy {report['test_accuracy']}")
    check(report["test_accuracy"] > 0.2, f"{path}: test_accuracy {report['test_accuracy']} is no better than chance")
    check(isinstance(report["final_loss"], float) and 0 < report["final_loss"] < 5,
          f"{path}: final_loss {report['final_loss']}")
    check(report["steps"] == steps, f"{path}: steps {report['steps']}, expected {steps}")
    check(report["samples_per_s"] > 0, f"{path}: samples_per_s {report['samples_per_s']}")
    check(0.0 <= report["comm_fraction"] <= 1.0, f"{path}: comm_fraction {report['comm_fraction']}")
    check(world > 1 or report["comm_fraction"] == 0, f"{path}: comm_fraction {report['comm_fraction']} in one process")
    memory = report["bytes_per_rank"]
    for key in ("params", "grads", "optimizer", "buffers", "activations"):
        check(isinstance(memory.get(key), int) and memory[key] >= 0, f"{path}: bytes_per_rank.{key} = {memory.get(key)}")
    n = param_count(widths)
    if mode != "zero3":  # zero3 keeps a 1/W shard of the parameters between steps
        check(memory["params"] >= n * (2 if precision == "bf16" else 4), f"{path}: bytes_per_rank.params {memory}")
    # ZeRO pads each shard group to a multiple of the world size: a few elements more than n.
    check(0 < memory["params"] <= 4 * n + 4096, f"{path}: bytes_per_rank.params {memory['params']} for {n} parameters")
    check(report["peak_rss_bytes"] > 50 * 2**20, f"{path}: peak_rss_bytes {report['peak_rss_bytes']} (the data alone is 200 MB)")
    check(report["mode"] == mode and report["world_size"] == world and report["precision"] == precision,
          f"{path}: mode/world/precision {report['mode']}/{report['world_size']}/{report['precision']}")
    check(report["param_count"] == n, f"{path}: param_count {report['param_count']}, expected {n}")
    return report


def check_metrics(path, steps, every):
    """The --metrics CSV: the header and one row per logged step (and the last step)."""
    with open(path) as f:
        lines = f.read().splitlines()
    check(lines[0] == "epoch,step,loss,accuracy,samples_per_s,comm_fraction", f"{path}: header {lines[0]!r}")
    logged = [int(line.split(",")[1]) for line in lines[1:]]
    expected = list(range(every, steps + 1, every))
    if not expected or expected[-1] != steps:
        expected.append(steps)
    check(logged == expected, f"{path}: rows at steps {logged}, expected {expected}")
    for line in lines[1:]:
        epoch, _, loss, accuracy, rate, comm = (float(x) for x in line.split(","))
        check(epoch >= 0 and 0 < loss < 5 and 0 <= accuracy <= 1 and rate > 0 and 0 <= comm <= 1,
              f"{path}: row {line!r}")


def files_under(folder):
    out = set()
    for root, dirs, files in os.walk(folder):
        for name in dirs + files:
            out.add(os.path.relpath(os.path.join(root, name), folder))
    return out


def main(cases, argv):
    """test.py OURO_RUN OURO_TRAIN CASE: runs cases[CASE](ouro_run, ouro_train)."""
    if len(argv) != 3 or argv[2] not in cases:
        print(f"usage: {sys.argv[0]} OURO_RUN OURO_TRAIN {{{'|'.join(cases)}}}")
        return 2
    ouro_run, ouro_train = (os.path.abspath(p) for p in argv[:2])
    try:
        message = cases[argv[2]](ouro_run, ouro_train)
    except Failure as failure:
        print(f"FAIL ({argv[2]}): {failure}")
        return 1
    if isinstance(message, tuple) and message[0] == SKIP:
        print(f"SKIP ({argv[2]}): {message[1]}")
        return SKIP
    print(f"PASS ({argv[2]}): {message}")
    return 0
