#!/usr/bin/python3
"""Stands in for ouro-run, mpirun.openmpi and mpirun.mpich in compare's mock test: skips the
launcher's options, then runs the program once (as "rank 0") with FAKE_NRANKS set, so
compare's own logic (commands, timeouts, JSON and table parsing, the report) can be tested
without MPI, Gloo or ouro-bench built."""
import os
import sys

args = sys.argv[1:]
nranks = "1"
takes_value = {"-n", "-np", "--bind-to", "--nproc-per-node", "--map-by"}
i = 0
while i < len(args) and args[i].startswith("-"):
    if args[i] in takes_value:
        if args[i] in ("-n", "-np", "--nproc-per-node"):
            nranks = args[i + 1]
        i += 2
    else:
        i += 1
if i >= len(args):
    sys.exit("fake launcher: no program given")
os.environ["FAKE_NRANKS"] = nranks
os.environ["FAKE_LAUNCHER"] = os.path.basename(sys.argv[0])
os.execv(args[i], args[i:])
