#!/usr/bin/python3
"""ouro-train's bits do not depend on the CPU's OpenBLAS kernels (trainer/model/blas_kernels.hpp).

    test_ouro_train_cpu.py OURO_RUN OURO_TRAIN kernels

OpenBLAS picks its sgemm kernels for the CPU it loads on, and OPENBLAS_CORETYPE makes it run
another CPU's kernels on this one, which stands in for a machine of that kind:
  - the control: one OpenBLAS product of the GPT's shapes, through ctypes, under each core type
    this CPU can run; on an AVX-512 CPU Haswell's and SkylakeX's kernels give other bits, so the
    check below can fail (on a CPU with one kind only the control says so and the check is
    weaker);
  - a 1-block GPT (64 channels, context 32, batch 4), 10 steps in one process under
    OPENBLAS_CORETYPE unset, Haswell, Zen and (AVX-512 CPUs) SkylakeX and Cooperlake: one SHA-256
    of the saved model, and the --json says the kernels are pinned;
  - a job whose two ranks run different kernels (rank 0 SkylakeX, rank 1 Haswell: hosts of two CPU
    kinds), started with torchrun's variables, with --virtual-ranks 2: the single run's SHA-256.
Exit status: 0 pass, 1 fail.
"""

import ctypes
import hashlib
import json
import random
import socket
import subprocess
import sys
import tempfile

from cli_support import JOB_TIMEOUT_S, check, clean_env, main, run
from test_ouro_train_gpt import write_corpus

SHAPE = ["--n-layer", "1", "--n-head", "2", "--n-embd", "64", "--block-size", "32"]
BATCH = 4


def sha(path):
    with open(path, "rb") as f:
        return hashlib.sha256(f.read()).hexdigest()


def avx512():
    with open("/proc/cpuinfo") as f:
        return " avx512f " in f.read().replace("\n", " ")


def probe_sgemm():
    """Run as `test_ouro_train_cpu.py --probe`: the SHA-256 of one sgemm, [B T, C] x [C, 4C]."""
    m, k, n = BATCH * 32, 64, 256
    blas = ctypes.CDLL("libopenblas.so.0")
    blas.openblas_set_num_threads(1)
    rng = random.Random(1)
    a = (ctypes.c_float * (m * k))(*[rng.uniform(-1, 1) for _ in range(m * k)])
    b = (ctypes.c_float * (k * n))(*[rng.uniform(-1, 1) for _ in range(k * n)])
    c = (ctypes.c_float * (m * n))()
    # cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, M, N, K, 1, A, K, B, N, 0, C, N)
    blas.cblas_sgemm(101, 111, 111, m, n, k, ctypes.c_float(1.0), a, k, b, n, ctypes.c_float(0.0), c, n)
    print(hashlib.sha256(bytes(c)).hexdigest())


def with_coretype(coretype):
    env = clean_env()
    env.pop("OPENBLAS_CORETYPE", None)
    if coretype:
        env["OPENBLAS_CORETYPE"] = coretype
    return env


def case_kernels(ouro_run, ouro_train):
    coretypes = ["", "Haswell", "Zen"] + (["SkylakeX", "Cooperlake"] if avx512() else [])
    control = {}
    for coretype in coretypes:
        out = subprocess.run([sys.executable, __file__, "--probe"], env=with_coretype(coretype), check=True,
                             stdout=subprocess.PIPE, text=True, timeout=60).stdout.strip()
        control[coretype or "unset"] = out
    kinds = len(set(control.values()))
    if avx512():
        check(kinds > 1, f"OpenBLAS gives one product under every core type here ({control}): the check proves nothing")
    with tempfile.TemporaryDirectory(prefix="ouro-train-cpu-") as work:
        write_corpus(f"{work}/corpus.txt")
        flags = ["--model", "gpt", "--text", f"{work}/corpus.txt", *SHAPE, "--batch-size", str(BATCH), "--steps", "10",
                 "--sample", "0", "--log-every", "0"]
        shas = {}
        for coretype in coretypes:
            name = coretype or "unset"
            command = [ouro_train, *flags, "--save", f"{work}/{name}.safetensors", "--json", f"{work}/{name}.json"]
            result = subprocess.run(command, cwd=work, env=with_coretype(coretype), stdout=subprocess.PIPE,
                                    stderr=subprocess.PIPE, text=True, timeout=JOB_TIMEOUT_S)
            check(result.returncode == 0, f"OPENBLAS_CORETYPE={name}: exit {result.returncode}\n{result.stderr}")
            shas[name] = sha(f"{work}/{name}.safetensors")
        check(len(set(shas.values())) == 1, f"the saved models differ by OpenBLAS core type: {shas}")
        for name in shas:
            with open(f"{work}/{name}.json") as f:
                kernels = json.load(f).get("blas_kernels")
            check(kernels == "Haswell (pinned)", f"OPENBLAS_CORETYPE={name}: blas_kernels {kernels!r}")

        # Two ranks on two kinds of kernels, as on hosts of two CPU kinds.
        if avx512():
            with socket.socket() as s:
                s.bind(("127.0.0.1", 0))
                port = str(s.getsockname()[1])
            virtual = ["--virtual-ranks", "2", "--batch-size", str(BATCH // 2)]
            jobs = []
            for rank, coretype in ((0, "SkylakeX"), (1, "Haswell")):
                env = with_coretype(coretype)
                env.update({"RANK": str(rank), "WORLD_SIZE": "2", "LOCAL_RANK": str(rank), "MASTER_ADDR": "127.0.0.1",
                            "MASTER_PORT": port})
                jobs.append(subprocess.Popen([ouro_train, *flags, "--mode", "ddp", *virtual, "--save",
                                              f"{work}/mixed.safetensors"], cwd=work, env=env,
                                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True))
            for job in jobs:
                _, err = job.communicate(timeout=JOB_TIMEOUT_S)
                check(job.returncode == 0, f"the mixed job: exit {job.returncode}\n{err}")
            run([ouro_train, *flags, "--mode", "single", *virtual, "--save", f"{work}/single-v2.safetensors"], work)
            check(sha(f"{work}/mixed.safetensors") == sha(f"{work}/single-v2.safetensors"),
                  "a job of SkylakeX and Haswell ranks does not end with the one-process run's bits")
    mixed = ", and a job of a SkylakeX and a Haswell rank ends with one process's bits" if avx512() else ""
    return (f"one SHA-256 ({next(iter(shas.values()))[:12]}...) under OPENBLAS_CORETYPE {', '.join(shas)}, where "
            f"one OpenBLAS product gives {kinds} different results{mixed}")


if __name__ == "__main__":
    if sys.argv[1:] == ["--probe"]:
        probe_sgemm()
        sys.exit(0)
    sys.exit(main({"kernels": case_kernels}, sys.argv[1:]))
