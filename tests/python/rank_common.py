"""What every rank script of tests/python shares: its rank and world from launch.py, a check that
names the rank and what failed, and the skip rule (exit 77 only when torch is truly absent)."""

import os
import sys
import traceback

SKIP = 77
RANK = int(os.environ.get("PYOURO_TEST_RANK", os.environ.get("RANK", "0")))
WORLD = int(os.environ.get("PYOURO_TEST_WORLD", os.environ.get("WORLD_SIZE", "1")))
PORT = int(os.environ.get("PYOURO_TEST_PORT", "0"))
PORT2 = int(os.environ.get("PYOURO_TEST_PORT2", "0"))
WORK = os.environ.get("PYOURO_TEST_DIR", "/tmp")


def import_torch():
    try:
        import torch  # noqa: F401  (Debian's python3-torch, under /usr/bin/python3)
        import torch.distributed  # noqa: F401
    except ImportError as error:
        print(f"skipped: torch cannot be imported by {sys.executable} ({error}); install python3-torch")
        sys.exit(SKIP)
    try:
        import ouro.torch  # noqa: F401
    except ImportError as error:
        # torch is there, so the backend must be too: a build or PYTHONPATH problem is a failure.
        print(f"FAIL rank {RANK}: torch imports but ouro.torch does not ({error}); is PYTHONPATH=BUILD/python set "
              f"and was ouro built with torch's headers (libtorch-dev)?")
        sys.exit(1)


class Checks:
    """Counts checks; the first failure prints rank, name and detail and exits 1."""

    def __init__(self):
        self.count = 0
        self.last = ""

    def __call__(self, condition, name, detail=""):
        if not condition:
            print(f"FAIL rank {RANK}/{WORLD}: {name}" + (f": {detail}" if detail else ""), flush=True)
            sys.exit(1)
        self.count += 1
        self.last = name

    def raises(self, fn, words, name):
        """fn() must raise RuntimeError whose message contains every one of `words`."""
        try:
            fn()
        except RuntimeError as error:
            text = str(error)
            missing = [w for w in words if w not in text]
            self(not missing, name, f"message lacks {missing}: {text}")
            return text
        self(False, name, "no RuntimeError was raised")

    def done(self):
        print(f"ok {self.count} checks (last: {self.last})", flush=True)


def run(main):
    try:
        main()
    except SystemExit:
        raise
    except BaseException:
        print(f"FAIL rank {RANK}/{WORLD}: unexpected exception", flush=True)
        traceback.print_exc()
        sys.stdout.flush()
        os._exit(1)
