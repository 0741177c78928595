#!/usr/bin/python3
"""Recovery time after a lost rank (#23): ouro's shrink, ouro's restart from a checkpoint and
torchrun restarting a PyTorch DDP job, in one sitting, on the same small GPT.

    ninja -C build tools/ouro-run/ouro-run tools/ouro-train/ouro-train
    /usr/bin/python3 bench/elastic/recovery_time.py --json recovery.json

(3.5 minutes on the shared 2-core development VM at load 5-8, 8 minutes at load 13-17;
/usr/bin/python3 is Debian's, with python3-torch.)

Every trial starts a job of W=3 ranks, waits until the job's step log shows step S completed,
SIGKILLs the process of launch rank 1 (found by RANK / OURO_RANK in /proc/PID/environ, among the
processes of this trial only) and measures

  ready again the time from the kill until the job is ready to train again, its state restored:
              for a shrink when rank 0 prints ouro-train's "lost rank(s) ... going on with 2
              rank(s)" line, for a restart when the new round's rank 0 starts its step log (after
              its rendezvous and checkpoint load, right before its first step);
  next step   the time from the kill to the first step completed after that (the figure #23
              asks for);
  caught up   the time from the kill until the job completed a step beyond the last one
              completed before the kill (a checkpoint reload recomputes the steps since it).

A step counts as completed when its row appears in rank 0's step log: ouro-train's --metrics CSV
(--log-every 1, flushed per row) or, for torch, the same CSV the worker below writes. This script
polls the log every --poll-ms and timestamps each row when it first sees it, for both systems.

Kinds (--kinds):
  ouro-shrink-ddp    ouro-run --rank-failure continue, ouro-train --mode ddp --on-failure shrink:
                     the two ranks left shrink the communicator and redo the step from their own
                     copies (no process starts)
  ouro-shrink-zero2  the same in zero2: the lost shards come from the newest --checkpoint
  ouro-restart       ouro-run --max-restarts 1, ouro-train --mode ddp --resume auto: every rank
                     starts again and reloads the newest --checkpoint
  torchrun           torchrun --max_restarts 1 --nproc_per_node 3 (c10d rendezvous, torchrun's
                     default --monitor_interval 5) restarting a torch DDP (gloo) job that
                     torch.saves a checkpoint every K steps and resumes from it
  torchrun-fast      the same with --monitor_interval 0.1, how often torchrun's agent looks at
                     its workers (the default makes it notice a dead worker up to 5 s late)

The model: nanoGPT's GPT (bench/trainer/torch_gpt.py, ouro-train --model gpt) with L=2 H=2
C=64 T=64 on the fortunes corpus (ouro-train's default), AdamW with ouro-train's GPT defaults,
a global batch of 24 sequences: ouro-train --virtual-ranks 6 --batch-size 4, torch 8 per rank.
Both checkpoint every --checkpoint-every steps. Every trial of a kind kills at another step
(--kill-steps), so at another distance from the last checkpoint.

Also checked: the final weights (ouro-train --save; the torch worker's state_dict) against an
uninterrupted run of the same system (ouro's must be equal; torch's is reported), the exit
status, and that no process of the trial and nothing it put in /dev/shm is left.

ouro-run, ouro-train and libouro.so.0 are copied from the build folder (OURO_BUILD_DIR, default
build/) at the start, so a rebuild during the sitting cannot change the bits between trials. The
load average at each trial's start goes into --json: on a shared machine, compare rows only from
one quiet sitting. --keep DIR keeps the logs, checkpoints and torchrun's logs.

Prints a markdown table (median and range over the trials of each kind) and writes --json.
Exit status: 0 done, 1 a trial failed.
"""

import argparse
import contextlib
import hashlib
import json
import os
import re
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import uuid

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
TRAINER_BENCH = os.path.join(REPO, "bench", "trainer")
TAG_VARIABLE = "OURO_RECOVERY_TIME_TRIAL"
WORLD, VIRTUAL, OURO_BATCH = 3, 6, 4
GPT = {"n_layer": 2, "n_head": 2, "n_embd": 64, "block_size": 64}
# ouro-train's GPT defaults, spelled out for the torch worker.
LR, MIN_LR, WARMUP, BETAS, EPS, WEIGHT_DECAY, CLIP = 1e-3, 1e-4, 20, (0.9, 0.95), 1e-8, 0.1, 1.0
LAUNCHER_NAMES = {"RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT",
                  "GROUP_RANK", "GROUP_WORLD_SIZE", "ROLE_RANK", "ROLE_WORLD_SIZE"}
LAUNCHER_PREFIXES = ("OURO_", "TORCHELASTIC_", "OMPI_", "PMI_", "PMIX_", "SLURM_", "MPI_")
KINDS = ["ouro-shrink-ddp", "ouro-shrink-zero2", "ouro-restart", "torchrun", "torchrun-fast"]
LABELS = {
    "ouro-shrink-ddp": "ouro shrink, ddp (survivors redo the step from their own copies)",
    "ouro-shrink-zero2": "ouro shrink, zero2 (survivors reload the newest checkpoint)",
    "ouro-restart": "ouro-run --max-restarts 1 + checkpoint (ddp, --resume auto)",
    "torchrun": "torchrun --max_restarts 1 + torch.save checkpoint (DDP gloo)",
    "torchrun-fast": "the same, torchrun --monitor_interval 0.1",
}


# ---- the torch DDP worker (one rank under torchrun) -------------------------------------------

def torch_worker(config_path):
    cfg = json.load(open(config_path))
    if os.environ.get("RANK") == "0":  # when the round's rank 0 started, before torch is imported
        with open(cfg["started"] % int(os.environ.get("TORCHELASTIC_RESTART_COUNT", "0")), "w") as out:
            out.write(f"{time.time():.6f}\n")
    import torch
    import torch.distributed as dist
    sys.path.insert(0, TRAINER_BENCH)
    import torch_gpt
    torch.set_num_threads(1)
    rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    dist.init_process_group("gloo", init_method="env://", rank=rank, world_size=world)
    T, batch, steps = GPT["block_size"], cfg["batch_size"], cfg["steps"]
    data, _ = torch_gpt.load_corpus(None)
    train = torch.frombuffer(bytearray(torch_gpt.train_part(data)), dtype=torch.uint8)
    windows = torch_gpt.window_count(len(train), T)
    torch.manual_seed(cfg["seed"])
    model = torch_gpt.build_gpt(GPT)
    optimizer = torch.optim.AdamW(torch_gpt.adamw_groups(model, WEIGHT_DECAY), lr=LR, betas=BETAS, eps=EPS)
    step = 0
    if os.path.exists(cfg["checkpoint"]):
        saved = torch.load(cfg["checkpoint"])
        model.load_state_dict(saved["model"])
        optimizer.load_state_dict(saved["optimizer"])
        step = saved["step"]
    ddp = torch.nn.parallel.DistributedDataParallel(model)
    sampler = torch.utils.data.DistributedSampler(range(windows), num_replicas=world, rank=rank, shuffle=True,
                                                  seed=cfg["seed"], drop_last=False)
    per_epoch = len(sampler) // batch
    offsets = torch.arange(T + 1)
    log = None
    if rank == 0:  # a new step log per round, once ready to train (as ouro-train opens --metrics)
        log = open(cfg["metrics"], "w")
        log.write("epoch,step,loss,time\n")
        log.flush()
    while step < steps:
        epoch, skip = divmod(step, per_epoch)
        sampler.set_epoch(epoch)
        for indices in list(torch.utils.data.BatchSampler(sampler, batch, drop_last=True))[skip:skip + steps - step]:
            rows = train[torch.tensor(indices)[:, None] * T + offsets].long()
            x, y = rows[:, :-1].contiguous(), rows[:, 1:].contiguous()
            for group in optimizer.param_groups:
                group["lr"] = torch_gpt.learning_rate(step, LR, MIN_LR, WARMUP, steps)
            _, loss = ddp(x, y)
            loss.backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), CLIP)
            optimizer.step()
            optimizer.zero_grad(set_to_none=True)
            step += 1
            if rank == 0 and step % cfg["checkpoint_every"] == 0:
                temporary = cfg["checkpoint"] + ".tmp"
                torch.save({"model": model.state_dict(), "optimizer": optimizer.state_dict(), "step": step},
                           temporary)
                os.replace(temporary, cfg["checkpoint"])
            if log:
                log.write(f"{epoch},{step},{loss.item():.6f},{time.time():.6f}\n")
                log.flush()
    if rank == 0:
        digest = hashlib.sha256()
        for tensor in model.state_dict().values():
            digest.update(tensor.detach().contiguous().numpy().tobytes())
        with open(cfg["hash"], "w") as out:
            out.write(digest.hexdigest())
    dist.barrier()
    dist.destroy_process_group()
    return 0


# ---- watching a trial ---------------------------------------------------------------------------

class StepLog:
    """Rank 0's step log (a CSV with the step in column 1), polled: every row with the time this
    script first saw it and its generation (a new generation when the file was started again)."""

    def __init__(self, path):
        self.path, self.key, self.data, self.generation = path, None, b"", 0
        self.rows = []  # (seen at, generation, step)
        self.restarts = []  # when each new generation was first seen

    def poll(self, now):
        try:
            st = os.stat(self.path)
        except FileNotFoundError:
            return
        key = (st.st_ino, st.st_size, st.st_mtime_ns)
        if key == self.key:
            return
        self.key = key
        try:
            with open(self.path, "rb") as f:
                data = f.read()
        except FileNotFoundError:
            return
        if data.startswith(self.data):
            fresh = data[len(self.data):]
        else:
            self.generation += 1
            self.restarts.append(now)
            self.data, fresh = b"", data
        complete = fresh[:fresh.rfind(b"\n") + 1]
        self.data += complete
        for line in complete.decode(errors="replace").splitlines():
            fields = line.split(",")
            if len(fields) > 1 and fields[1].isdigit():
                self.rows.append((now, self.generation, int(fields[1])))

    def last_step(self):
        return self.rows[-1][2] if self.rows else 0


def read_environ(pid):
    with open(f"/proc/{pid}/environ", "rb") as f:
        return dict(item.split(b"=", 1) for item in f.read().split(b"\0") if b"=" in item)


def tagged_processes(tag):
    """{pid: environment} of the live processes carrying this trial's tag (only ours)."""
    found = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            env = read_environ(entry)
            if env.get(TAG_VARIABLE.encode()) != tag.encode():
                continue
            with open(f"/proc/{entry}/stat") as f:
                if f.read().rsplit(")", 1)[1].split()[0] == "Z":
                    continue
            with open(f"/proc/{entry}/cmdline", "rb") as f:
                env[b"\0cmdline"] = f.read()
        except (OSError, ValueError, IndexError):
            continue
        found[int(entry)] = env
    return found


def rank_process(tag, rank, kind):
    """The pid of launch rank `rank`'s training process in this trial, or None."""
    for pid, env in tagged_processes(tag).items():
        if kind.startswith("torchrun"):
            if env.get(b"RANK") == str(rank).encode() and b"--torch-worker" in env[b"\0cmdline"]:
                return pid
        elif env.get(b"OURO_RANK") == str(rank).encode() and b"ouro-train" in env[b"\0cmdline"].split(b"\0")[0]:
            return pid
    return None


def drain(stream, lines):
    for line in iter(stream.readline, ""):
        lines.append((time.monotonic(), line))
    stream.close()


def clean_env(tag):
    env = {k: v for k, v in os.environ.items() if not k.startswith(LAUNCHER_PREFIXES) and k not in LAUNCHER_NAMES}
    env.update({TAG_VARIABLE: tag, "OURO_TIMEOUT_S": "30", "GLOO_SOCKET_IFNAME": "lo", "OMP_NUM_THREADS": "1"})
    return env


def snapshot_build(args, folder):
    """Copies ouro-run, ouro-train and the libouro.so.0 they load (RPATH $ORIGIN/../../comm) into
    folder, so a rebuild of the build folder during the sitting cannot change the bits midway;
    points args at the copies."""
    copies = {}
    for name, tool in (("ouro-run", args.ouro_run), ("ouro-train", args.ouro_train)):
        target = os.path.join(folder, "build", "tools", name, name)
        os.makedirs(os.path.dirname(target), exist_ok=True)
        shutil.copy2(tool, target)
        copies[name] = target
        library = os.path.join(os.path.dirname(os.path.realpath(tool)), "..", "..", "comm", "libouro.so.0")
        if os.path.exists(library):
            os.makedirs(os.path.join(folder, "build", "comm"), exist_ok=True)
            shutil.copy2(library, os.path.join(folder, "build", "comm", "libouro.so.0"))
    args.ouro_run, args.ouro_train = copies["ouro-run"], copies["ouro-train"]
    return {name: sha256(path)[:16] for name, path in copies.items()}


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def sha256(path):
    with open(path, "rb") as f:
        return hashlib.sha256(f.read()).hexdigest()


# ---- the jobs -----------------------------------------------------------------------------------

def ouro_job(args, kind, folder, name):
    """(command, step log, weights file) of one ouro job; kind None: uninterrupted."""
    mode = "zero2" if kind == "ouro-shrink-zero2" else "ddp"
    train = [args.ouro_train, "--mode", mode, "--model", "gpt", "--n-layer", str(GPT["n_layer"]),
             "--n-head", str(GPT["n_head"]), "--n-embd", str(GPT["n_embd"]), "--block-size", str(GPT["block_size"]),
             "--batch-size", str(OURO_BATCH), "--virtual-ranks", str(VIRTUAL), "--steps", str(args.steps),
             "--seed", "0", "--sample", "0", "--log-every", "1", "--metrics", f"{folder}/{name}.csv",
             "--save", f"{folder}/{name}.safetensors", "--json", f"{folder}/{name}.json"]
    if kind and kind.startswith("ouro-shrink"):
        launcher = [args.ouro_run, "-n", str(WORLD), "--rank-failure", "continue"]
        train += ["--on-failure", "shrink"]
    elif kind == "ouro-restart":
        launcher = [args.ouro_run, "-n", str(WORLD), "--max-restarts", "1"]
        train += ["--resume", "auto"]
    else:
        launcher = [args.ouro_run, "-n", str(WORLD)]
    if kind in ("ouro-shrink-zero2", "ouro-restart"):
        train += ["--checkpoint", f"{folder}/{name}-ck", "--checkpoint-every", str(args.checkpoint_every)]
    return launcher + train, f"{folder}/{name}.csv", f"{folder}/{name}.safetensors"


def torch_job(args, kind, folder, name):
    config = {"steps": args.steps, "batch_size": VIRTUAL * OURO_BATCH // WORLD, "seed": 0,
              "checkpoint_every": args.checkpoint_every, "checkpoint": f"{folder}/{name}.pt",
              "metrics": f"{folder}/{name}.csv", "hash": f"{folder}/{name}.sha256",
              "started": f"{folder}/{name}-started-round%d"}
    path = f"{folder}/{name}-config.json"
    json.dump(config, open(path, "w"))
    os.makedirs(f"{folder}/{name}-logs")
    monitor = "0.1" if kind == "torchrun-fast" else "5"
    command = [args.python, "-m", "torch.distributed.run", "--nnodes", "1", "--nproc_per_node", str(WORLD),
               "--rdzv_backend", "c10d", "--rdzv_endpoint", f"127.0.0.1:{free_port()}", "--rdzv_id", name,
               "--max_restarts", "1" if kind else "0", "--monitor_interval", monitor,
               "--redirects", "1", "--tee", "2", "--log_dir", f"{folder}/{name}-logs",
               os.path.abspath(__file__), "--torch-worker", path]
    return command, config["metrics"], config["hash"]


def run_job(args, kind, system, folder, name, kill_step=None):
    """Runs one job (SIGKILLing rank 1 once step kill_step is logged, if given); the trial's record."""
    command, metrics, weights = (torch_job if system == "torch" else ouro_job)(args, kind, folder, name)
    tag = uuid.uuid4().hex
    load_at_start = os.getloadavg()[0]
    shm_before = set(os.listdir("/dev/shm"))
    log = StepLog(metrics)
    out_lines, err_lines = [], []
    started = time.monotonic()
    job = subprocess.Popen(command, cwd=folder, env=clean_env(tag), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                           text=True, errors="replace", start_new_session=True)
    readers = [threading.Thread(target=drain, args=(job.stdout, out_lines), daemon=True),
               threading.Thread(target=drain, args=(job.stderr, err_lines), daemon=True)]
    for reader in readers:
        reader.start()
    pids, next_scan, killed, problems = set(), 0.0, None, []
    deadline = started + args.trial_timeout
    while job.poll() is None and time.monotonic() < deadline:
        now = time.monotonic()
        log.poll(now)
        if now >= next_scan:  # every process of the trial, for the /dev/shm check
            pids |= set(tagged_processes(tag))
            next_scan = now + 0.25
        if kill_step is not None and killed is None and log.last_step() >= kill_step:
            pid = rank_process(tag, 1, kind)
            if pid:
                os.kill(pid, signal.SIGKILL)
                killed = {"time": time.monotonic(), "wall": time.time(), "pid": pid, "step": log.last_step(), "generation": log.generation}
        time.sleep(args.poll_ms / 1000)
    if job.poll() is None:
        problems.append(f"still running after {args.trial_timeout} s: stopped")
        os.killpg(job.pid, signal.SIGKILL)
    job.wait()
    for reader in readers:
        reader.join(timeout=10)
    log.poll(time.monotonic())
    wall = time.monotonic() - started
    # Nothing of the trial may be left: processes (they get 5 s to go), /dev/shm entries.
    for _ in range(50):
        left = tagged_processes(tag)
        if not left:
            break
        time.sleep(0.1)
    for pid in left:
        problems.append(f"process {pid} left behind (killed now)")
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    pids |= set(left)
    for entry in sorted(set(os.listdir("/dev/shm")) - shm_before):
        if any(re.search(rf"(?<!\d){pid}(?!\d)", entry) for pid in pids):
            problems.append(f"/dev/shm/{entry} left behind (removed now)")
            try:
                os.unlink(f"/dev/shm/{entry}")
            except OSError:
                pass
    if job.returncode != 0:
        problems.append(f"exit status {job.returncode}")
    record = {"kind": kind or "uninterrupted", "system": system, "name": name, "kill_step": kill_step,
              "load_average_at_start": load_at_start,
              "exit_status": job.returncode, "wall_s": wall, "problems": problems,
              "weights": (open(weights).read().strip() if system == "torch" else sha256(weights))
              if os.path.exists(weights) else None}
    if kill_step is not None:
        record.update(measure(kind, log, killed, out_lines + err_lines, problems))
        started_file = f"{folder}/{name}-started-round1"
        if system == "torch" and killed and os.path.exists(started_file):  # the new round's rank 0 process
            record["new_process_s"] = float(open(started_file).read()) - killed["wall"]
    if problems:
        tail = "".join(line for _, line in (out_lines + err_lines)[-30:])
        record["output_tail"] = tail
    if system == "ouro" and os.path.exists(f"{folder}/{name}.json"):
        record["recoveries"] = json.load(open(f"{folder}/{name}.json")).get("recoveries")
    return record


def measure(kind, log, killed, lines, problems):
    """next_step_s and caught_up_s of a trial from its step log's rows."""
    if killed is None:
        problems.append("the job ended before the kill step")
        return {}
    t_kill = killed["time"]
    before = [step for seen, _, step in log.rows if seen <= t_kill]
    last_before = max(before) if before else 0
    if kind.startswith("ouro-shrink"):
        said = [seen for seen, line in lines if "lost rank(s)" in line and seen > t_kill]
        if not said:
            problems.append("ouro-train did not say 'lost rank(s)'")
            return {"killed_at_step": killed["step"]}
        after = [(seen, step) for seen, _, step in log.rows if seen > max(t_kill, said[0])]
        recovered = said[0] - t_kill
    else:
        after = [(seen, step) for seen, generation, step in log.rows
                 if seen > t_kill and generation > killed["generation"]]
        recovered = None
        restarted = [seen for seen in log.restarts if seen > t_kill]
        if restarted:  # the new round's rank 0 started its step log
            recovered = restarted[0] - t_kill
    if not after:
        problems.append("no step was completed after the kill")
        return {"killed_at_step": killed["step"]}
    caught = [seen for seen, step in after if step > last_before]
    end = (caught[0] if caught else after[0][0]) + 0.1
    timeline = [(round(seen - t_kill, 4), generation, step) for seen, generation, step in log.rows
                if t_kill - 0.2 <= seen <= end]
    return {"timeline": timeline, "killed_at_step": killed["step"], "last_step_before_kill": last_before,
            "resumed_at_step": after[0][1] - 1, "steps_redone": last_before - (after[0][1] - 1),
            "next_step_s": after[0][0] - t_kill, "caught_up_s": caught[0] - t_kill if caught else None,
            "recovered_s": recovered}


# ---- the table ----------------------------------------------------------------------------------

def spread(values, digits=2):
    values = [v for v in values if v is not None]
    if not values:
        return "-"
    median = statistics.median(values)
    return f"{median:.{digits}f} ({min(values):.{digits}f}-{max(values):.{digits}f})"


def table(trials, references):
    lines = ["| recovery path | killed after step | ready again, s | next step after the kill, s "
             "| back past the kill step, s | steps redone | final weights vs uninterrupted |",
             "|---|---|---:|---:|---:|---|---|"]
    for kind in KINDS:
        rows = [t for t in trials if t["kind"] == kind]
        if not rows:
            continue
        system = rows[0]["system"]
        same = [t["weights"] == references[system] for t in rows]
        weights = ("equal SHA-256" if all(same) else
                   "differs" if not any(same) else f"equal in {sum(same)} of {len(same)}")
        if system == "ouro" and not all(same):
            weights += " (MUST be equal)"
        lines.append(f"| {LABELS[kind]} | {', '.join(str(t.get('killed_at_step', '?')) for t in rows)} "
                     f"| {spread([t.get('recovered_s') for t in rows])} | {spread([t.get('next_step_s') for t in rows])} | {spread([t.get('caught_up_s') for t in rows])} "
                     f"| {', '.join(str(t.get('steps_redone', '?')) for t in rows)} | {weights} |")
    return "\n".join(lines)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    build = os.environ.get("OURO_BUILD_DIR", os.path.join(REPO, "build"))
    parser.add_argument("--ouro-run", default=os.path.join(build, "tools/ouro-run/ouro-run"))
    parser.add_argument("--ouro-train", default=os.path.join(build, "tools/ouro-train/ouro-train"))
    parser.add_argument("--python", default="/usr/bin/python3", help="the Python with torch, for torchrun")
    parser.add_argument("--kinds", default=",".join(KINDS), help=f"comma-separated, of {','.join(KINDS)}")
    parser.add_argument("--steps", type=int, default=200)
    parser.add_argument("--kill-steps", default="40,85,130", help="one trial per step, for each kind")
    parser.add_argument("--checkpoint-every", type=int, default=25)
    parser.add_argument("--poll-ms", type=float, default=2.0)
    parser.add_argument("--trial-timeout", type=float, default=120.0)
    parser.add_argument("--json", help="write every trial's record here")
    parser.add_argument("--keep", metavar="DIR", help="work in DIR (made, and kept) instead of a temporary folder")
    parser.add_argument("--torch-worker", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.torch_worker:
        return torch_worker(args.torch_worker)
    kinds = [k for k in args.kinds.split(",") if k]
    unknown = [k for k in kinds if k not in KINDS]
    if unknown:
        parser.error(f"unknown kind(s) {', '.join(unknown)}; known: {', '.join(KINDS)}")
    kill_steps = [int(s) for s in args.kill_steps.split(",")]
    if any(not 0 < s < args.steps for s in kill_steps):
        parser.error("every --kill-steps step must be within 1..--steps - 1")
    for tool in (args.ouro_run, args.ouro_train):
        if not os.access(tool, os.X_OK):
            parser.error(f"{tool} is not built (ninja -C build tools/ouro-run/ouro-run tools/ouro-train/ouro-train)")
    started = time.monotonic()
    commit = subprocess.run(["git", "-C", REPO, "describe", "--always", "--dirty"], stdout=subprocess.PIPE,
                            stderr=subprocess.DEVNULL, text=True).stdout.strip()
    print(f"ouro at {commit or '?'}; {WORLD} ranks, GPT {GPT}, {args.steps} steps", flush=True)
    failed = False
    trials, references = [], {}
    if args.keep:
        os.makedirs(args.keep)
    with (contextlib.nullcontext(os.path.abspath(args.keep)) if args.keep
          else tempfile.TemporaryDirectory(prefix="ouro-recovery-time-")) as folder:
        binaries = snapshot_build(args, folder)
        systems = sorted({"torch" if k.startswith("torchrun") else "ouro" for k in kinds})
        for system in systems:
            ref = run_job(args, None, system, folder, f"{system}-uninterrupted")
            references[system] = ref["weights"]
            print(f"{system} uninterrupted: {ref['wall_s']:.1f} s, weights {str(ref['weights'])[:16]}", flush=True)
            if ref["problems"]:
                print(f"  problems: {'; '.join(ref['problems'])}\n{ref.get('output_tail', '')}", flush=True)
                failed = True
        for round_ in range(len(kill_steps)):
            for k, kind in enumerate(kinds):  # interleaved, each kind at every kill step
                kill_step = kill_steps[(round_ + k) % len(kill_steps)]
                system = "torch" if kind.startswith("torchrun") else "ouro"
                t = run_job(args, kind, system, folder, f"{kind}-{kill_step}", kill_step)
                trials.append(t)
                same = "same weights" if t["weights"] == references[system] else "OTHER weights"
                print(f"{kind} killed after step {t.get('killed_at_step')} (load {t['load_average_at_start']:.1f}): "
                      f"ready again {t.get('recovered_s')!s:.6} s, next step {t.get('next_step_s')!s:.6} s, "
                      f"caught up {t.get('caught_up_s')!s:.6} s, "
                      + (f"new rank 0 process at {t['new_process_s']:.2f} s, " if "new_process_s" in t else "")
                      + f"resumed at {t.get('resumed_at_step')}, {same} "
                      f"({t['wall_s']:.1f} s)", flush=True)
                if t["problems"]:
                    print(f"  problems: {'; '.join(t['problems'])}\n{t.get('output_tail', '')}", flush=True)
                    failed = True
                if system == "ouro" and t["weights"] != references["ouro"]:
                    failed = True
    print()
    print(table(trials, references))
    loads = [t["load_average_at_start"] for t in trials]
    print(f"\n{len(trials)} trials in {time.monotonic() - started:.0f} s"
          + (f"; 1-minute load average at their starts {min(loads):.1f}-{max(loads):.1f}" if loads else ""))
    if args.json:
        with open(args.json, "w") as out:
            json.dump({"settings": {"world": WORLD, "virtual_ranks": VIRTUAL, "gpt": GPT, "steps": args.steps,
                                    "kill_steps": kill_steps, "checkpoint_every": args.checkpoint_every,
                                    "poll_ms": args.poll_ms, "binaries": binaries, "commit": commit},
                       "references": references, "trials": trials}, out, indent=1)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
