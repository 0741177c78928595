#!/usr/bin/python3
"""Stands in for /usr/bin/python3 with torch: says yes to compare's "import torch.distributed"
probe and runs any script with the real interpreter."""
import os
import sys

if sys.argv[1:3] == ["-c", "import torch.distributed"]:
    sys.exit(0)
os.execv(sys.executable, [sys.executable] + sys.argv[1:])
