#!/usr/bin/python3
"""torchrun --nproc_per_node 2 torchrun_script.py with init_process_group("ouro") and no OURO_*
variable set: torchrun's environment and store are the whole rendezvous.

Debian's torchrun (python3 -m torch.distributed.run) is started as tests/launchers does: the c10d
rendezvous on a free port (a static --master_port would be held by the agent's store), and
--redirects 1 --tee 2 because torch 1.13's default "0" fails to parse on Python 3.11.
Exit 77 (skipped) only when torch cannot be imported."""

import glob
import os
import socket
import subprocess
import sys
import tempfile

SKIP = 77
PYTHON = "/usr/bin/python3"


def main():
    script = sys.argv[1]
    probe = subprocess.run([PYTHON, "-c", "import torch"], capture_output=True, text=True)
    if probe.returncode != 0:
        reason = (probe.stderr.strip().splitlines() or ["?"])[-1]
        print(f"skipped: torch cannot be imported by {PYTHON} ({reason}); install python3-torch")
        return SKIP
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    with tempfile.TemporaryDirectory(prefix="ouro-torchrun-") as work:
        env = {k: v for k, v in os.environ.items() if not k.startswith("OURO_")}
        env["PYOURO_TEST_RESULT_DIR"] = work
        command = [PYTHON, "-m", "torch.distributed.run", "--nnodes", "1", "--nproc_per_node", "2",
                   "--rdzv_backend", "c10d", "--rdzv_endpoint", f"127.0.0.1:{port}", "--rdzv_id", f"ouro-py-{os.getpid()}",
                   "--max_restarts", "0", "--monitor_interval", "0.2", "--redirects", "1", "--tee", "2",
                   "--log_dir", os.path.join(work, "logs"), script]
        try:
            result = subprocess.run(command, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                                    timeout=150)
        except subprocess.TimeoutExpired as e:
            print(f"FAIL torchrun ran past 150 s:\n{e.output}")
            return 1
        done = sorted(os.path.basename(p) for p in glob.glob(os.path.join(work, "rank*.ok")))
        if result.returncode != 0 or done != ["rank0.ok", "rank1.ok"]:
            logs = "".join(open(p).read() for p in sorted(glob.glob(os.path.join(work, "logs", "**", "*.log"),
                                                                      recursive=True)))
            print(f"FAIL torchrun exit {result.returncode}, ranks done: {done}\n{' '.join(command)}\n"
                  f"{result.stdout}\n{logs}")
            return 1
        print("ok: both torchrun ranks all-reduced over ouro with init_process_group('ouro') alone")
        return 0


if __name__ == "__main__":
    sys.exit(main())
