#!/usr/bin/python3
"""PyTorch DDP and ouro-train side by side: the same model, init, data order and optimizer at
the same world size and threads per rank on this host, in one sitting. --model mlp (default): an
MLP with SGD on Fashion-MNIST; --model gpt: nanoGPT's GPT (bench/trainer/torch_gpt.py, ouro-train
--model gpt) with AdamW, warm-up + cosine and clipping on the fortunes corpus's byte windows.

    bench/trainer/side_by_side.py                      # W=2, 784,1024,1024,10, batch 64/rank, 1 epoch
    bench/trainer/side_by_side.py --steps 100 --modes ddp --repeat 3 --json result.json
    bench/trainer/side_by_side.py --model gpt          # W=2, L=4 H=4 C=128 T=128, batch 16/rank, 30 steps

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

--model gpt: the same systems and the same samples/s definition, a sample being one window of
block_size + 1 bytes (tokens/s = samples/s * block_size; batch assembly gathers B windows of the
training split). ouro-train gets its GPT defaults spelled out (AdamW betas 0.9,0.95, eps 1e-8,
weight decay 0.1 on tensors of 2+ dimensions, clip 1.0, --warmup-steps, min lr = lr/10, cosine
to the last step) and torch the same, from the same --init (nanoGPT's initialisation, seeded);
--threads N gives every rank N threads on both sides (torch.set_num_threads, ouro-train
--threads; more than one unbinds the ranks). The table adds the model's FLOP/s, FLOPs per token
as nanoGPT's estimate_mfu counts them (6 N + 12 L T C, N the parameters less wpe; torch_gpt.py
flops_per_token) times tokens/s, against the machine's sgemm rate measured in the same run: W
processes at once, one per rank and bound like the ranks, each OpenBLAS sgemm (numpy, the BLAS
both sides use here) at N threads on [B*T, C] x [C, 4C] (the blocks' c_fc product) for
--sgemm-seconds, their rates summed; measured before and after the systems, the mean of the two
is the reference.
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
    torch.set_num_threads(config["threads"])
    rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    dist.init_process_group(config["backend"], init_method="env://", rank=rank, world_size=world)
    if config["model"] == "gpt":
        return torch_gpt_worker(config, rank, world)
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


def torch_gpt_worker(config, rank, world):
    """The GPT rank: nanoGPT's training step (train.py) under DDP, ouro-train's data order."""
    import torch
    import torch.distributed as dist
    sys.path.insert(0, HERE)
    import torch_gpt
    g = config["gpt"]
    T = g["block_size"]
    data, _ = torch_gpt.load_corpus(config["text"])
    train = torch.frombuffer(bytearray(torch_gpt.train_part(data)), dtype=torch.uint8)
    windows = torch_gpt.window_count(len(train), T)
    model = torch_gpt.build_gpt(g)
    torch_gpt.load_ouro_state(model, read_safetensors(config["init"]))
    ddp = torch.nn.parallel.DistributedDataParallel(model)
    optimizer = torch.optim.AdamW(torch_gpt.adamw_groups(model, config["weight_decay"]), lr=config["lr"],
                                  betas=tuple(config["betas"]), eps=config["eps"])
    sampler = torch.utils.data.DistributedSampler(range(windows), num_replicas=world, rank=rank,
                                                  shuffle=True, seed=config["seed"], drop_last=False)
    batch = config["batch_size"]
    steps = config["steps"] if config["steps"] is not None else config["epochs"] * (len(sampler) // batch)
    offsets = torch.arange(T + 1)
    step_seconds, loss_sum, loss, epoch, done = 0.0, 0.0, float("nan"), 0, 0
    dist.barrier()
    while done < steps:
        sampler.set_epoch(epoch)
        batches = list(torch.utils.data.BatchSampler(sampler, batch, drop_last=True))[:steps - done]
        for i, indices in enumerate(batches, start=done):
            started = time.perf_counter()
            rows = train[torch.tensor(indices)[:, None] * T + offsets].long()
            x, y = rows[:, :-1].contiguous(), rows[:, 1:].contiguous()
            lr = torch_gpt.learning_rate(i, config["lr"], config["min_lr"], config["warmup_steps"], steps)
            for group in optimizer.param_groups:
                group["lr"] = lr
            _, out = ddp(x, y)
            out.backward()
            if config["grad_clip"] > 0:
                torch.nn.utils.clip_grad_norm_(model.parameters(), config["grad_clip"])
            optimizer.step()
            optimizer.zero_grad(set_to_none=True)
            step_seconds += time.perf_counter() - started
            loss = out.item()
            loss_sum += loss
        done += len(batches)
        epoch += 1
    result = {"rank": rank, "steps": done, "samples": done * batch, "step_seconds": step_seconds,
              "final_loss": loss, "train_loss": loss_sum / max(done, 1), "test_accuracy": None}
    if rank == 0 and config["save"]:
        write_safetensors(config["save"], torch_gpt.ouro_state(model))
    dist.barrier()
    dist.destroy_process_group()
    with open(config["result"] % rank, "w") as out:
        json.dump(result, out)
    return 0


def sgemm_worker(config_path):
    """One process of the sgemm reference: OpenBLAS (numpy) at THREADS threads on [M, K] x [K, N]
    for SECONDS after a warm-up; writes its GFLOP/s."""
    config = json.load(open(config_path))
    for name in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS"):
        os.environ[name] = str(config["threads"])
    import numpy
    m, k, n = config["shape"]
    rng = numpy.random.default_rng(0)
    a = rng.standard_normal((m, k), dtype=numpy.float32)
    b = rng.standard_normal((k, n), dtype=numpy.float32)
    c = numpy.empty((m, n), dtype=numpy.float32)
    for _ in range(3):
        numpy.matmul(a, b, out=c)
    calls, started = 0, time.perf_counter()
    while True:
        numpy.matmul(a, b, out=c)
        calls += 1
        elapsed = time.perf_counter() - started
        if elapsed >= config["seconds"]:
            break
    with open(config["result"], "w") as out:
        json.dump({"gflops": 2.0 * m * k * n * calls / elapsed / 1e9, "calls": calls, "seconds": elapsed}, out)
    return 0


def measure_sgemm(args, shape, folder, tag):
    """The machine's sgemm rate as the ranks would see it: W processes at once, each bound like
    its rank and at --threads threads; (sum of their GFLOP/s, each one's)."""
    processes = []
    for rank in range(args.world):
        config = {"threads": args.threads, "shape": shape, "seconds": args.sgemm_seconds,
                  "result": os.path.join(folder, f"sgemm-{tag}-{rank}.json")}
        path = os.path.join(folder, f"sgemm-{tag}-{rank}-config.json")
        json.dump(config, open(path, "w"))
        cpus = cpus_for_rank(rank, args.world, args.bind, args.threads)
        env = dict(os.environ, OPENBLAS_NUM_THREADS=str(args.threads), OMP_NUM_THREADS=str(args.threads))
        processes.append((subprocess.Popen(
            [sys.executable, os.path.abspath(__file__), "--sgemm-worker", path], env=env,
            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
            preexec_fn=(lambda c=cpus: os.sched_setaffinity(0, c)) if cpus else None), config["result"]))
    rates = []
    for process, result in processes:
        output = process.communicate()[0]
        if process.returncode != 0:
            raise RuntimeError(f"sgemm measurement failed: {output[-1000:]}")
        rates.append(json.load(open(result))["gflops"])
    return sum(rates), rates


def gpt_flops_per_token(n_layer, n_embd, block_size):
    """torch_gpt.flops_per_token: 6 N + 12 L T C, N the parameters less wpe."""
    sys.path.insert(0, HERE)
    import torch_gpt
    return torch_gpt.flops_per_token(n_layer, n_embd, block_size)


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def cpu_for_rank(rank, world, bind):
    """ouro-run's --bind-to auto: rank i on the i-th allowed CPU when the ranks fit, else unbound."""
    cpus = sorted(os.sched_getaffinity(0))
    return cpus[rank] if bind == "auto" and world <= len(cpus) else None


def cpus_for_rank(rank, world, bind, threads):
    """The CPU set rank runs on: {cpu_for_rank} at one thread per rank, else None (unbound: one
    CPU per rank would stack a rank's threads on one core, as ouro-run --bind-to auto would)."""
    cpu = cpu_for_rank(rank, world, bind) if threads == 1 else None
    return {cpu} if cpu is not None else None


def combine_torch_results(results, world):
    """The figures ouro-train reports, from every rank's result dict."""
    rank0 = next(r for r in results if r["rank"] == 0)
    slowest = max(r["step_seconds"] for r in results)
    samples = sum(r["samples"] for r in results)
    combined = {"samples_per_s": samples / slowest if slowest > 0 else 0.0, "test_accuracy": rank0["test_accuracy"],
                "final_loss": rank0["final_loss"], "steps": rank0["steps"], "train_seconds": slowest,
                "world_size": world}
    if all("train_loss" in r for r in results):  # the GPT: every rank's mean loss, averaged
        combined["train_loss"] = sum(r["train_loss"] for r in results) / len(results)
    return combined


def run_torch(args, backend, init, folder, timeout):
    config = {"model": args.model, "backend": backend, "plugins": args.torch_plugins, "data": args.data,
              "layers": args.widths, "init": init, "batch_size": args.batch_size, "steps": args.steps,
              "epochs": args.epochs, "seed": args.seed, "lr": args.lr, "momentum": args.momentum,
              "weight_decay": args.weight_decay, "threads": args.threads,
              "result": os.path.join(folder, f"torch-{backend}-rank%d.json"),
              "save": os.path.join(args.save_dir, f"torch-{backend}.safetensors") if args.save_dir else None}
    if args.model == "gpt":
        config.update({"gpt": args.gpt, "text": args.text, "betas": args.betas, "eps": args.eps,
                       "min_lr": args.min_lr, "warmup_steps": args.warmup_steps, "grad_clip": args.grad_clip})
    config_path = os.path.join(folder, f"torch-{backend}.json")
    json.dump(config, open(config_path, "w"))
    env = dict(os.environ, MASTER_ADDR="127.0.0.1", MASTER_PORT=str(free_port()), WORLD_SIZE=str(args.world),
               GLOO_SOCKET_IFNAME=os.environ.get("GLOO_SOCKET_IFNAME", "lo"), OMP_NUM_THREADS=str(args.threads))
    ranks = []
    for rank in range(args.world):
        cpus = cpus_for_rank(rank, args.world, args.bind, args.threads)
        ranks.append(subprocess.Popen(
            [sys.executable, os.path.abspath(__file__), "--torch-worker", config_path],
            env=dict(env, RANK=str(rank), LOCAL_RANK=str(rank)), stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
            text=True, preexec_fn=(lambda c=cpus: os.sched_setaffinity(0, c)) if cpus else None))
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

def parse_ouro_json(text, source, model="mlp"):
    """The figures of one ouro-train --json report; ValueError naming what is missing."""
    try:
        report = json.loads(text)
    except json.JSONDecodeError as error:
        raise ValueError(f"{source}: not JSON ({error})") from None
    needed = ("samples_per_s", "test_accuracy", "steps") if model == "mlp" else \
        ("samples_per_s", "tokens_per_s", "train_loss", "steps")
    missing = [key for key in needed if key not in report]
    if missing:
        raise ValueError(f"{source}: ouro-train's --json lacks {', '.join(missing)}")
    parsed = {"samples_per_s": float(report["samples_per_s"]),
              "test_accuracy": float(report["test_accuracy"]) if model == "mlp" else None,
              "final_loss": report.get("final_loss"), "steps": int(report["steps"]),
              "train_seconds": report.get("train_seconds"), "world_size": report.get("world_size"),
              "comm_fraction": report.get("comm_fraction")}
    if model == "gpt":
        parsed.update({"train_loss": report["train_loss"], "val_loss": report.get("val_loss"),
                       "param_count": report.get("param_count")})
    return parsed


def ouro_command(args, mode, init, json_path):
    train = [args.ouro_train, "--mode", mode]
    if args.model == "gpt":
        g = args.gpt
        train += ["--model", "gpt", "--n-layer", str(g["n_layer"]), "--n-head", str(g["n_head"]),
                  "--n-embd", str(g["n_embd"]), "--block-size", str(g["block_size"]), "--optimizer", "adamw",
                  "--betas", f"{args.betas[0]!r},{args.betas[1]!r}", "--eps", repr(args.eps),
                  "--warmup-steps", str(args.warmup_steps), "--min-lr", repr(args.min_lr),
                  "--grad-clip", repr(args.grad_clip), "--sample", "0"]
        train += ["--text", args.text] if args.text else []
    else:
        train += ["--layers", args.layers, "--optimizer", "sgd", "--momentum", repr(args.momentum),
                  "--data", args.data]
    train += ["--batch-size", str(args.batch_size), "--seed", str(args.seed), "--init", init, "--lr", repr(args.lr),
              "--weight-decay", repr(args.weight_decay), "--threads", str(args.threads), "--log-every", "0",
              "--json", json_path]
    train += ["--steps", str(args.steps)] if args.steps is not None else ["--epochs", str(args.epochs)]
    if args.save_dir:
        train += ["--save", os.path.join(args.save_dir, f"ouro-{mode}.safetensors")]
    bind = args.bind if args.threads == 1 else "none"  # as cpus_for_rank: N threads need more than a CPU
    return [args.ouro_run, "-n", str(args.world), "--bind-to", bind] + train


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
    return parse_ouro_json(open(json_path).read(), json_path, args.model)


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


def gpt_markdown_table(rows, block_size, flops_per_token, sgemm_gflops):
    """The GPT's table: tokens/s, its ratio to torch DDP (gloo), the model's GFLOP/s (flops_per_token
    per token trained) and their share of the machine's sgemm rate, the mean training loss, and
    ouro-train's share of step time spent waiting on communication."""
    lines = ["| system | mode | tokens/s | ratio to torch DDP (gloo) | model GFLOP/s | of sgemm rate | "
             "train loss | comm wait |",
             "|---|---|---:|---:|---:|---:|---:|---:|"]
    for row in rows:
        if row.get("error"):
            lines.append(f"| {row['system']} | {row['mode']} | failed | - | - | - | - | - |")
            continue
        tokens = row["samples_per_s"] * block_size
        gflops = tokens * flops_per_token / 1e9
        ratio = "n/a" if row.get("ratio") is None else f"{row['ratio']:.2f}x"
        share = f"{100 * gflops / sgemm_gflops:.0f}%" if sgemm_gflops else "n/a"
        comm = "-" if row.get("comm_fraction") is None else f"{100 * row['comm_fraction']:.1f}%"
        loss = "-" if row.get("train_loss") is None else f"{row['train_loss']:.4f}"
        lines.append(f"| {row['system']} | {row['mode']} | {tokens:.0f} | {ratio} | {gflops:.2f} | {share} | "
                     f"{loss} | {comm} |")
    return "\n".join(lines)


# ---- command line -------------------------------------------------------------------------------

def parse_args(argv):
    build = os.environ.get("OURO_BUILD_DIR", os.path.join(REPO, "build"))
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", choices=["mlp", "gpt"], default="mlp", help="what to train (default mlp)")
    parser.add_argument("--world", type=int, default=2, help="ranks on this host (default 2)")
    parser.add_argument("--threads", type=int, default=1, help="threads per rank, both sides (default 1)")
    parser.add_argument("--layers", default="784,1024,1024,10", help="MLP widths")
    parser.add_argument("--n-layer", type=int, default=4, help="GPT blocks (default 4)")
    parser.add_argument("--n-head", type=int, default=4, help="GPT heads (default 4)")
    parser.add_argument("--n-embd", type=int, default=128, help="GPT channels (default 128)")
    parser.add_argument("--block-size", type=int, default=128, help="GPT context T (default 128)")
    parser.add_argument("--text", help="GPT corpus (default: the fortunes package's files, as ouro-train)")
    parser.add_argument("--batch-size", type=int, help="per rank (default 64; GPT 16 sequences)")
    length = parser.add_mutually_exclusive_group()
    length.add_argument("--steps", type=int, help="optimizer steps (default: --epochs; GPT 30)")
    length.add_argument("--epochs", type=int, help="(default 1)")
    parser.add_argument("--seed", type=int, default=0, help="init and DistributedSampler seed")
    parser.add_argument("--lr", type=float, help="(peak) rate (default 0.05; GPT 0.001)")
    parser.add_argument("--momentum", type=float, default=0.9, help="MLP's SGD")
    parser.add_argument("--weight-decay", type=float, help="(default 0; GPT 0.1, on tensors of 2+ dims)")
    parser.add_argument("--warmup-steps", type=int, default=20, help="GPT linear warm-up (default 20)")
    parser.add_argument("--min-lr", type=float, help="GPT: where the cosine ends (default lr/10)")
    parser.add_argument("--grad-clip", type=float, default=1.0, help="GPT (default 1.0; 0 = off)")
    parser.add_argument("--eps", type=float, default=1e-8, help="GPT's AdamW")
    parser.add_argument("--sgemm-seconds", type=float, default=3.0,
                        help="GPT: seconds of each sgemm measurement (default 3; 0 = none)")
    parser.add_argument("--modes", help="ouro-train modes ('' for none; default all four, GPT ddp)")
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
    gpt = args.model == "gpt"
    args.widths = [int(w) for w in args.layers.split(",")]
    if args.batch_size is None:
        args.batch_size = 16 if gpt else 64
    if args.steps is None and args.epochs is None:
        args.steps, args.epochs = (30, None) if gpt else (None, 1)
    if args.lr is None:
        args.lr = 0.001 if gpt else 0.05
    if args.weight_decay is None:
        args.weight_decay = 0.1 if gpt else 0.0
    if args.min_lr is None:
        args.min_lr = args.lr / 10
    if args.modes is None:
        args.modes = "ddp" if gpt else ",".join(OURO_MODES)
    args.betas = [0.9, 0.95]
    args.gpt = {"n_layer": args.n_layer, "n_head": args.n_head, "n_embd": args.n_embd,
                "block_size": args.block_size}
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
    if args.world < 1 or args.batch_size < 1 or args.repeat < 1 or args.threads < 1:
        parser.error("--world, --threads, --batch-size and --repeat must be >= 1")
    if gpt and (min(args.n_layer, args.n_head, args.n_embd, args.block_size) < 1 or args.n_embd % args.n_head):
        parser.error("--n-layer, --n-head, --n-embd, --block-size must be >= 1 and --n-embd a multiple of --n-head")
    return args


def main(argv):
    if argv[:1] == ["--torch-worker"]:
        return torch_worker(argv[1])
    if argv[:1] == ["--sgemm-worker"]:
        return sgemm_worker(argv[1])
    args = parse_args(argv)
    gpt = args.model == "gpt"
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
    sgemm = {}  # GPT: the reference rate, measured before and after the systems
    g = args.gpt
    sgemm_shape = [args.batch_size * g["block_size"], g["n_embd"], 4 * g["n_embd"]]
    with tempfile.TemporaryDirectory(prefix="ouro-side-by-side-") as folder:
        init = args.init
        if init is None:
            import torch
            torch.manual_seed(args.seed)
            init = os.path.join(folder, "init.safetensors")
            if gpt:
                sys.path.insert(0, HERE)
                import torch_gpt
                write_safetensors(init, torch_gpt.ouro_state(torch_gpt.build_gpt(g)))
            else:
                write_safetensors(init, build_model(args.widths).state_dict())
        def reference_sgemm(tag):
            try:
                sgemm[tag] = measure_sgemm(args, sgemm_shape, folder, tag)
                print(f"sgemm {sgemm_shape} {tag}: {sgemm[tag][0]:.1f} GFLOP/s ({args.world} x {args.threads} "
                      f"thread(s))", file=sys.stderr)
            except (RuntimeError, OSError, ValueError) as error:
                notes.append(f"sgemm {tag} the runs not measured: {error}")

        if gpt and args.sgemm_seconds > 0:
            reference_sgemm("before")
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
        if gpt and args.sgemm_seconds > 0:
            reference_sgemm("after")
    rows = add_ratios([summarize(s, m, runs[(s, m)], errors.get((s, m))) for s, m, _ in systems])
    length = f"{args.steps} steps" if args.steps is not None else f"{args.epochs} epoch(s)"
    summary = {}
    if gpt:
        sys.path.insert(0, HERE)
        import torch_gpt
        flops = gpt_flops_per_token(g["n_layer"], g["n_embd"], g["block_size"])
        params, non_embedding = torch_gpt.param_counts(g["n_layer"], g["n_embd"], g["block_size"])
        reference = statistics.mean(v[0] for v in sgemm.values()) if sgemm else None
        for row in rows:
            if row.get("samples_per_s"):
                row["tokens_per_s"] = row["samples_per_s"] * g["block_size"]
                row["model_flops_per_s"] = row["tokens_per_s"] * flops
                row["of_sgemm"] = row["model_flops_per_s"] / (reference * 1e9) if reference else None
        summary = {"flops_per_token": flops, "param_count": params, "non_embedding_params": non_embedding,
                   "sgemm_shape": sgemm_shape, "sgemm_gflops": reference,
                   "sgemm_runs": {k: {"total": v[0], "per_rank": v[1]} for k, v in sgemm.items()}}
        print(f"W={args.world}, GPT L={g['n_layer']} H={g['n_head']} C={g['n_embd']} T={g['block_size']} "
              f"({params} parameters, {non_embedding} without wpe), batch {args.batch_size} sequences per rank, "
              f"{length}, {args.threads} thread(s) per rank, AdamW lr {args.lr} (warm-up {args.warmup_steps}, "
              f"cosine to {args.min_lr}) wd {args.weight_decay} clip {args.grad_clip}, seed {args.seed}, "
              f"{args.repeat} run(s) each (median), bind {args.bind}\n")
        print(gpt_markdown_table(rows, g["block_size"], flops, reference))
        print(f"\ntokens/s: all ranks' tokens (samples * {g['block_size']}) / the slowest rank's summed step time "
              "(batch gather, forward, backward with communication, clipping, optimizer); loading, setup and "
              "evaluation excluded.")
        print(f"model FLOP/s: tokens/s * {flops} FLOPs per token (6 N + 12 L T C, N = {non_embedding}: nanoGPT's "
              "estimate_mfu).")
        if reference:
            each = ", ".join(f"{k} {v[0]:.1f}" for k, v in sgemm.items())
            print(f"sgemm rate: {reference:.1f} GFLOP/s, the mean of {each}: {args.world} processes at once, "
                  f"{args.threads} thread(s) each, OpenBLAS (numpy) on [{sgemm_shape[0]}, {sgemm_shape[1]}] x "
                  f"[{sgemm_shape[1]}, {sgemm_shape[2]}].")
    else:
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
            json.dump({"settings": settings, "rows": rows, "notes": notes, **summary}, out, indent=2)
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
