#!/usr/bin/python3
"""PyTorch DDP and ouro-train side by side: the same MLP, init, data order and SGD on
Fashion-MNIST, at the same world size on this host, in one sitting.

    bench/trainer/side_by_side.py                      # W=2, 784,1024,1024,10, batch 64/rank, 1 epoch
    bench/trainer/side_by_side.py --steps 100 --modes ddp --repeat 3 --json result.json

Systems: torch DDP (torch.distributed, one process per rank, started here with env://
rendezvous, DistributedDataParallel with its default 25 MB buckets) for each of --torch-backends
(gloo and ouro: ouro's own c10d backend, python/ouro/torch.py, imported from BUILD/python; a
backend torch does not know once --torch-plugin modules are imported is skipped with a note),
then ouro-train --mode M under ouro-run for each of --modes.

samples/s is measured the same way for both, as ouro-train defines it (tools/ouro-train/
reporting.hpp): all ranks' training samples / the slowest rank's summed step time, where a step
is assembling the batch from the in-memory training set (a gather of B rows), forward, backward
(with its gradient communication) and the optimizer update. Every step counts; reading the
dataset, building the model, the rendezvous and evaluation are outside. Test accuracy is over the
10,000 test images after the last step. Ranks get one thread each (torch.set_num_threads(1),
ouro-train --threads 1) and, with --bind auto, one CPU each as ouro-run's --bind-to auto does.
With --repeat K every system runs K times, interleaved, and the table shows each one's median.

Prints a markdown table (system, mode, samples/s, ratio to torch DDP gloo, test accuracy) and
writes --json. Exits 1 when a run failed. Must run under /usr/bin/python3 (Debian's python3-torch).
"""

import argparse
import gzip
import json
import os
import socket
import statistics
import struct
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
DEFAULT_DATA = "/usr/share/datasets/fashion-mnist"
TRAIN_SIZE = 60000
BASELINE = ("torch DDP (gloo)", "ddp")
BUILTIN_TORCH_BACKENDS = {"gloo", "mpi", "nccl", "ucc"}
OURO_MODES = ["ddp", "zero1", "zero2", "zero3"]


# ---- pieces shared by both sides: safetensors and the dataset, read by hand --------------------

def read_safetensors(path):
    import torch
    blob = open(path, "rb").read()
    (size,) = struct.unpack("<Q", blob[:8])
    header = {k: v for k, v in json.loads(blob[8:8 + size]).items() if k != "__metadata__"}
    dtypes = {"F32": torch.float32, "BF16": torch.bfloat16}
    return {n: torch.frombuffer(bytearray(blob[8 + size + t["data_offsets"][0]:8 + size + t["data_offsets"][1]]),
                                dtype=dtypes[t["dtype"]]).reshape(t["shape"]) for n, t in header.items()}


def write_safetensors(path, state):
    header, chunks, offset = {}, [], 0
    for name, tensor in state.items():
        raw = tensor.detach().contiguous().to("cpu").numpy().tobytes()
        header[name] = {"dtype": "F32", "shape": list(tensor.shape), "data_offsets": [offset, offset + len(raw)]}
        chunks.append(raw)
        offset += len(raw)
    text = json.dumps(header).encode()
    text += b" " * (-len(text) % 8)
    with open(path, "wb") as out:
        out.write(struct.pack("<Q", len(text)) + text + b"".join(chunks))


def load_split(data_dir, split):
    """(images [N, 784] float32 pixel/255, labels [N] int64) from the gzip'd IDX files."""
    import torch

    def idx(name):
        blob = gzip.open(os.path.join(data_dir, name), "rb").read()
        shape = struct.unpack(">" + "I" * blob[3], blob[4:4 + 4 * blob[3]])
        return torch.frombuffer(bytearray(blob[4 + 4 * blob[3]:]), dtype=torch.uint8).reshape(shape)

    images = idx(f"{split}-images-idx3-ubyte.gz")
    return images.reshape(len(images), -1).to(torch.float32) / 255, idx(f"{split}-labels-idx1-ubyte.gz").long()


def build_model(widths):
    import torch
    modules = []
    for k in range(len(widths) - 1):
        modules += [torch.nn.Linear(widths[k], widths[k + 1])] + ([torch.nn.ReLU()] if k + 2 < len(widths) else [])
    return torch.nn.Sequential(*modules)


# ---- the torch DDP side -----------------------------------------------------------------------

def torch_backend_status(name, plugins=()):
    """(usable, note): whether torch.distributed knows backend `name` once `plugins` are imported."""
    try:
        import importlib
        import torch.distributed as dist
    except ImportError as error:
        return False, f"torch DDP ({name}) skipped: torch cannot be imported ({error})"
    for module in plugins:
        try:
            importlib.import_module(module)
        except ImportError as error:
            return False, f"torch DDP ({name}) skipped: --torch-plugin {module} cannot be imported ({error})"
    if name in BUILTIN_TORCH_BACKENDS:
        available = getattr(dist, f"is_{name}_available", lambda: False)()
        return available, None if available else f"torch DDP ({name}) skipped: this torch was built without it"
    if name.upper() in dist.Backend._plugins:
        return True, None
    return False, (f"torch DDP ({name}) skipped: torch {__import__('torch').__version__} has no '{name}' backend "
                   f"(a plugin registers one with torch.distributed.Backend.register_backend; name its "
                   f"module with --torch-plugin)")


def torch_worker(config_path):
    """One rank of torch DDP (RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT in the environment)."""
    import importlib
    import torch
    import torch.distributed as dist
    config = json.load(open(config_path))
    for module in config["plugins"]:
        importlib.import_module(module)
    torch.set_num_threads(1)
    rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    dist.init_process_group(config["backend"], init_method="env://", rank=rank, world_size=world)
    images, labels = load_split(config["data"], "train")
    model = build_model(config["layers"])
    model.load_state_dict(read_safetensors(config["init"]))
    ddp = torch.nn.parallel.DistributedDataParallel(model)
    optimizer = torch.optim.SGD(ddp.parameters(), lr=config["lr"], momentum=config["momentum"],
                                weight_decay=config["weight_decay"])
    sampler = torch.utils.data.DistributedSampler(range(TRAIN_SIZE), num_replicas=world, rank=rank,
                                                  shuffle=True, seed=config["seed"], drop_last=False)
    batch = config["batch_size"]
    per_epoch = len(sampler) // batch
    steps = config["steps"] if config["steps"] is not None else config["epochs"] * per_epoch
    step_seconds, loss, epoch, done = 0.0, float("nan"), 0, 0
    dist.barrier()
    while done < steps:
        sampler.set_epoch(epoch)
        batches = list(torch.utils.data.BatchSampler(sampler, batch, drop_last=True))[:steps - done]
        for indices in batches:
            started = time.perf_counter()
            index = torch.tensor(indices)
            x, y = images[index], labels[index]
            optimizer.zero_grad()
            out = torch.nn.functional.cross_entropy(ddp(x), y)
            out.backward()
            optimizer.step()
            step_seconds += time.perf_counter() - started
            loss = out.item()
        done += len(batches)
        epoch += 1
    result = {"rank": rank, "steps": done, "samples": done * batch, "step_seconds": step_seconds,
              "final_loss": loss}
    if rank == 0:
        test_images, test_labels = load_split(config["data"], "t10k")
        with torch.no_grad():
            predicted = torch.cat([model(chunk).argmax(1) for chunk in test_images.split(1000)])
        result["test_accuracy"] = float((predicted == test_labels).double().mean())
        if config["save"]:
            write_safetensors(config["save"], model.state_dict())
    dist.barrier()
    dist.destroy_process_group()
    with open(config["result"] % rank, "w") as out:
        json.dump(result, out)
    return 0


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def cpu_for_rank(rank, world, bind):
    """ouro-run's --bind-to auto: rank i on the i-th allowed CPU when the ranks fit, else unbound."""
    cpus = sorted(os.sched_getaffinity(0))
    return cpus[rank] if bind == "auto" and world <= len(cpus) else None


def combine_torch_results(results, world):
    """The figures ouro-train reports, from every rank's result dict."""
    rank0 = next(r for r in results if r["rank"] == 0)
    slowest = max(r["step_seconds"] for r in results)
    samples = sum(r["samples"] for r in results)
    return {"samples_per_s": samples / slowest if slowest > 0 else 0.0, "test_accuracy": rank0["test_accuracy"],
            "final_loss": rank0["final_loss"], "steps": rank0["steps"], "train_seconds": slowest,
            "world_size": world}


def run_torch(args, backend, init, folder, timeout):
    config = {"backend": backend, "plugins": args.torch_plugins, "data": args.data, "layers": args.widths,
              "init": init, "batch_size": args.batch_size, "steps": args.steps, "epochs": args.epochs,
              "seed": args.seed, "lr": args.lr, "momentum": args.momentum, "weight_decay": args.weight_decay,
              "result": os.path.join(folder, f"torch-{backend}-rank%d.json"),
              "save": os.path.join(args.save_dir, f"torch-{backend}.safetensors") if args.save_dir else None}
    config_path = os.path.join(folder, f"torch-{backend}.json")
    json.dump(config, open(config_path, "w"))
    env = dict(os.environ, MASTER_ADDR="127.0.0.1", MASTER_PORT=str(free_port()), WORLD_SIZE=str(args.world),
               GLOO_SOCKET_IFNAME=os.environ.get("GLOO_SOCKET_IFNAME", "lo"), OMP_NUM_THREADS="1")
    ranks = []
    for rank in range(args.world):
        cpu = cpu_for_rank(rank, args.world, args.bind)
        ranks.append(subprocess.Popen(
            [sys.executable, os.path.abspath(__file__), "--torch-worker", config_path],
            env=dict(env, RANK=str(rank), LOCAL_RANK=str(rank)), stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
            text=True, preexec_fn=(lambda c=cpu: os.sched_setaffinity(0, {c})) if cpu is not None else None))
    outputs, failed = [], False
    for rank, process in enumerate(ranks):
        try:
            outputs.append(process.communicate(timeout=timeout)[0])
        except subprocess.TimeoutExpired:
            for other in ranks:
                other.kill()
            outputs.append(process.communicate()[0] + f"\n(rank {rank} killed after {timeout} s)")
        failed |= process.returncode != 0
    if failed:
        raise RuntimeError(f"torch DDP ({backend}) failed:\n" + "\n".join(o[-2000:] for o in outputs))
    return combine_torch_results([json.load(open(config["result"] % r)) for r in range(args.world)], args.world)


# ---- the ouro-train side ----------------------------------------------------------------------

def parse_ouro_json(text, source):
    """The figures of one ouro-train --json report; ValueError naming what is missing."""
    try:
        report = json.loads(text)
    except json.JSONDecodeError as error:
        raise ValueError(f"{source}: not JSON ({error})") from None
    missing = [key for key in ("samples_per_s", "test_accuracy", "steps") if key not in report]
    if missing:
        raise ValueError(f"{source}: ouro-train's --json lacks {', '.join(missing)}")
    return {"samples_per_s": float(report["samples_per_s"]), "test_accuracy": float(report["test_accuracy"]),
            "final_loss": report.get("final_loss"), "steps": int(report["steps"]),
            "train_seconds": report.get("train_seconds"), "world_size": report.get("world_size"),
            "comm_fraction": report.get("comm_fraction")}


def ouro_command(args, mode, init, json_path):
    train = [args.ouro_train, "--mode", mode, "--layers", args.layers, "--batch-size", str(args.batch_size),
             "--seed", str(args.seed), "--init", init, "--optimizer", "sgd", "--lr", repr(args.lr),
             "--momentum", repr(args.momentum), "--weight-decay", repr(args.weight_decay), "--threads", "1",
             "--data", args.data, "--log-every", "0", "--json", json_path]
    train += ["--steps", str(args.steps)] if args.steps is not None else ["--epochs", str(args.epochs)]
    if args.save_dir:
        train += ["--save", os.path.join(args.save_dir, f"ouro-{mode}.safetensors")]
    return [args.ouro_run, "-n", str(args.world), "--bind-to", args.bind] + train


def run_ouro(args, mode, init, folder, timeout):
    json_path = os.path.join(folder, f"ouro-{mode}.json")
    if os.path.exists(json_path):
        os.remove(json_path)
    command = ouro_command(args, mode, init, json_path)
    try:
        result = subprocess.run(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        raise RuntimeError(f"ouro-train --mode {mode} did not finish in {timeout} s") from None
    if result.returncode != 0:
        raise RuntimeError(f"ouro-train --mode {mode} exited {result.returncode}: {' '.join(command)}\n"
                           f"{result.stdout[-2000:]}")
    return parse_ouro_json(open(json_path).read(), json_path)


# ---- the table ----------------------------------------------------------------------------------

def summarize(system, mode, runs, error=None):
    """One table row from a system's runs (dicts as run_torch/run_ouro return): medians of samples/s."""
    row = {"system": system, "mode": mode, "runs": [r["samples_per_s"] for r in runs], "error": error}
    if runs and error is None:
        row.update({k: v for k, v in runs[-1].items() if k != "samples_per_s"})
        row["samples_per_s"] = statistics.median(row["runs"])
    return row


def add_ratios(rows):
    base = next((r for r in rows if (r["system"], r["mode"]) == BASELINE and r.get("samples_per_s")), None)
    for row in rows:
        row["ratio"] = row["samples_per_s"] / base["samples_per_s"] if base and row.get("samples_per_s") else None
    return rows


def markdown_table(rows):
    lines = ["| system | mode | samples/s | ratio to torch DDP (gloo) | test accuracy |",
             "|---|---|---:|---:|---:|"]
    for row in rows:
        if row.get("error"):
            lines.append(f"| {row['system']} | {row['mode']} | failed | - | - |")
            continue
        ratio = "n/a" if row.get("ratio") is None else f"{row['ratio']:.2f}x"
        lines.append(f"| {row['system']} | {row['mode']} | {row['samples_per_s']:.0f} | {ratio} | "
                     f"{row['test_accuracy']:.4f} |")
    return "\n".join(lines)


# ---- command line -------------------------------------------------------------------------------

def parse_args(argv):
    build = os.environ.get("OURO_BUILD_DIR", os.path.join(REPO, "build"))
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--world", type=int, default=2, help="ranks on this host (default 2)")
    parser.add_argument("--layers", default="784,1024,1024,10")
    parser.add_argument("--batch-size", type=int, default=64, help="per rank (default 64)")
    length = parser.add_mutually_exclusive_group()
    length.add_argument("--steps", type=int, help="optimizer steps (default: --epochs)")
    length.add_argument("--epochs", type=int, default=1)
    parser.add_argument("--seed", type=int, default=0, help="init and DistributedSampler seed")
    parser.add_argument("--lr", type=float, default=0.05)
    parser.add_argument("--momentum", type=float, default=0.9)
    parser.add_argument("--weight-decay", type=float, default=0.0)
    parser.add_argument("--modes", default=",".join(OURO_MODES), help="ouro-train modes ('' for none)")
    parser.add_argument("--torch-backends", default="gloo,ouro",
                        help="torch DDP backends (default gloo,ouro; '' for none); unknown ones are skipped")
    parser.add_argument("--python-path", default=os.path.join(build, "python"),
                        help="where the backend 'ouro' is imported from (default BUILD/python)")
    parser.add_argument("--torch-plugin", dest="torch_plugins", action="append", default=[], metavar="MODULE",
                        help="import MODULE first in every torch rank (a backend plugin registers itself)")
    parser.add_argument("--repeat", type=int, default=1, help="runs per system, interleaved; medians shown")
    parser.add_argument("--bind", choices=["auto", "none"], default="auto", help="one CPU per rank (default auto)")
    parser.add_argument("--init", help="start from this safetensors file (default: torch's init with --seed)")
    parser.add_argument("--data", default=DEFAULT_DATA)
    parser.add_argument("--ouro-run", default=os.path.join(build, "tools/ouro-run/ouro-run"))
    parser.add_argument("--ouro-train", default=os.path.join(build, "tools/ouro-train/ouro-train"))
    parser.add_argument("--timeout", type=float, default=1800, help="seconds per run")
    parser.add_argument("--json", help="write the rows and the settings here")
    parser.add_argument("--save-dir", help="final weights here: torch-BACKEND.safetensors, ouro-MODE.safetensors")
    args = parser.parse_args(argv)
    args.widths = [int(w) for w in args.layers.split(",")]
    if args.steps is not None:
        args.epochs = None
    args.mode_list = [m for m in args.modes.split(",") if m]
    args.backend_list = [b for b in args.torch_backends.split(",") if b]
    if "ouro" in args.backend_list:
        # ouro's backend registers itself on import; here and in every torch rank (PYTHONPATH).
        if "ouro.torch" not in args.torch_plugins:
            args.torch_plugins.append("ouro.torch")
        sys.path.insert(0, args.python_path)
        os.environ["PYTHONPATH"] = os.pathsep.join(p for p in (args.python_path, os.environ.get("PYTHONPATH")) if p)
    bad = [m for m in args.mode_list if m not in OURO_MODES]
    if bad:
        parser.error(f"--modes: unknown {', '.join(bad)} (known: {', '.join(OURO_MODES)})")
    if args.world < 1 or args.batch_size < 1 or args.repeat < 1:
        parser.error("--world, --batch-size and --repeat must be >= 1")
    return args


def main(argv):
    if argv[:1] == ["--torch-worker"]:
        return torch_worker(argv[1])
    args = parse_args(argv)
    notes, systems = [], []  # systems: (system, mode, run function)
    for backend in args.backend_list:
        usable, note = torch_backend_status(backend, args.torch_plugins)
        if usable:
            systems.append((f"torch DDP ({backend})", "ddp", lambda i, f, t, b=backend: run_torch(args, b, i, f, t)))
        else:
            notes.append(note)
    if args.mode_list:
        missing = [p for p in (args.ouro_run, args.ouro_train) if not os.access(p, os.X_OK)]
        if missing:
            notes.append(f"ouro-train skipped: {', '.join(missing)} not built (ninja -C BUILD tools/ouro-train/ouro-train)")
        else:
            systems += [("ouro-train", m, lambda i, f, t, m=m: run_ouro(args, m, i, f, t)) for m in args.mode_list]
    runs = {(s, m): [] for s, m, _ in systems}
    errors = {}
    with tempfile.TemporaryDirectory(prefix="ouro-side-by-side-") as folder:
        init = args.init
        if init is None:
            import torch
            torch.manual_seed(args.seed)
            init = os.path.join(folder, "init.safetensors")
            write_safetensors(init, build_model(args.widths).state_dict())
        for repeat in range(args.repeat):
            for system, mode, run in systems:
                if (system, mode) in errors:
                    continue
                try:
                    runs[(system, mode)].append(run(init, folder, args.timeout))
                    print(f"[{repeat + 1}/{args.repeat}] {system} {mode}: "
                          f"{runs[(system, mode)][-1]['samples_per_s']:.0f} samples/s", file=sys.stderr)
                except (RuntimeError, ValueError, OSError) as error:
                    errors[(system, mode)] = str(error)
                    print(f"{system} {mode}: {error}", file=sys.stderr)
    rows = add_ratios([summarize(s, m, runs[(s, m)], errors.get((s, m))) for s, m, _ in systems])
    length = f"{args.steps} steps" if args.steps is not None else f"{args.epochs} epoch(s)"
    print(f"W={args.world}, layers {args.layers}, batch {args.batch_size} per rank, {length}, SGD lr {args.lr} "
          f"momentum {args.momentum}, seed {args.seed}, {args.repeat} run(s) each (median), bind {args.bind}\n")
    print(markdown_table(rows))
    print("\nsamples/s: all ranks' samples / the slowest rank's summed step time (batch gather, forward, "
          "backward with communication, optimizer); loading, setup and evaluation excluded.")
    for note in notes:
        print(f"note: {note}")
    if args.json:
        settings = {k: v for k, v in vars(args).items() if k not in ("json", "mode_list", "backend_list")}
        with open(args.json, "w") as out:
            json.dump({"settings": settings, "rows": rows, "notes": notes}, out, indent=2)
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
