#!/usr/bin/python3
"""One batch of PyTorch's distributed test suite, run by run_suite.py (not meant to be run by hand).

This file plays the part of torch's test/distributed/test_distributed_spawn.py, which Debian
does not ship: it defines TestDistBackendWithSpawn over DistributedTest._DistTestBase, and each
test spawns WORLD_SIZE ranks. Spawned ranks import this file again as __mp_main__, so the
top level below is everything a rank needs before TestDistBackend._run calls
init_process_group(backend=BACKEND): the import fixes, the feature-set rewrite, and for a
plug-in backend the module that registers it (TORCH_SUITE_BACKEND_MODULE, default
"<backend>.torch", e.g. `import ouro.torch`).

Environment (set by run_suite.py): BACKEND, WORLD_SIZE, TEMP_DIR, INIT_METHOD, and PYTHONPATH
holding the plug-in's package.

Usage: suite_child.py list OUT.json
       suite_child.py run TESTS.txt EVENTS.jsonl
`run` appends one JSON line when a test starts and one when it ends, flushed at once, so the
runner knows which test was running when it had to kill the batch.
"""
import importlib
import json
import os
import sys
import time
import traceback
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import suite_patches  # noqa: E402  (must precede every torch.testing import)

BACKEND = os.environ["BACKEND"]
suite_patches.install(BACKEND)
if BACKEND not in ("gloo", "nccl", "mpi", "ucc"):
    importlib.import_module(os.environ.get("TORCH_SUITE_BACKEND_MODULE", BACKEND + ".torch"))

import torch  # noqa: E402
from torch.testing._internal.distributed.distributed_test import (  # noqa: E402
    DistributedTest,
    TestDistBackend,
)

torch.backends.cuda.matmul.allow_tf32 = False


class TestDistBackendWithSpawn(TestDistBackend, DistributedTest._DistTestBase):
    # As torch's test_distributed_spawn.py (1.13).
    def setUp(self):
        super().setUp()
        self._spawn_processes()
        torch.backends.cudnn.flags(enabled=True, allow_tf32=False).__enter__()


def list_tests(out_path):
    """Every test name, with the reason when a decorator already skips it in this process."""
    loader = unittest.TestLoader()
    tests = []
    for name in loader.getTestCaseNames(TestDistBackendWithSpawn):
        method = getattr(TestDistBackendWithSpawn, name)
        skip = getattr(method, "__unittest_skip_why__", None) if getattr(
            method, "__unittest_skip__", False) else None
        tests.append({"name": name, "static_skip": skip})
    with open(out_path, "w") as f:
        json.dump({"tests": tests, "patches": suite_patches.applied}, f)


class _EventResult(unittest.TestResult):
    def __init__(self, events):
        super().__init__()
        self._events = events
        self._started = 0.0

    def _write(self, record):
        self._events.write(json.dumps(record) + "\n")
        self._events.flush()

    def startTest(self, test):
        super().startTest(test)
        self._started = time.time()
        self._write({"event": "start", "test": test._testMethodName, "t": self._started})

    def _end(self, test, status, detail=""):
        self._write({"event": "end", "test": test._testMethodName, "status": status,
                     "seconds": round(time.time() - self._started, 2), "detail": detail})

    def addSuccess(self, test):
        super().addSuccess(test)
        self._end(test, "pass")

    def addFailure(self, test, err):
        super().addFailure(test, err)
        self._end(test, "fail", self._exc_info_to_string(err, test))

    def addError(self, test, err):
        super().addError(test, err)
        self._end(test, "fail", self._exc_info_to_string(err, test))

    def addSkip(self, test, reason):
        super().addSkip(test, reason)
        self._end(test, "skip", reason)

    def addExpectedFailure(self, test, err):
        super().addExpectedFailure(test, err)
        self._end(test, "pass", "expected failure")

    def addUnexpectedSuccess(self, test):
        super().addUnexpectedSuccess(test)
        self._end(test, "fail", "unexpected success")


def run_tests(names_path, events_path):
    with open(names_path) as f:
        names = [line.strip() for line in f if line.strip()]
    with open(events_path, "a") as events:
        result = _EventResult(events)
        for name in names:
            try:
                TestDistBackendWithSpawn(name).run(result)
            except Exception:  # a crash outside unittest's guard still ends the test
                result._end(TestDistBackendWithSpawn(name), "fail", traceback.format_exc())


if __name__ == "__main__":
    mode = sys.argv[1]
    if mode == "list":
        list_tests(sys.argv[2])
    elif mode == "run":
        run_tests(sys.argv[2], sys.argv[3])
    else:
        sys.exit(f"suite_child.py: unknown mode {mode!r}")
