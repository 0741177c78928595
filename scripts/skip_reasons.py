#!/usr/bin/env python3
"""Reads meson's testlog.json and sorts the skipped tests by the reason they printed.

    scripts/skip_reasons.py BUILD/meson-logs/testlog.json

A test skips (exit 77) with a one-line reason, "skipped: <reason>" (or "<name>: skipped: ..."). The
only reasons a machine set up by scripts/setup.sh may have are missing hardware: "no GPU" (the test
says "no GPU", "no NVIDIA GPU" or "no CUDA device") and "no RDMA device". Every other skip hides a
failure: something setup.sh installs did not work, or a test skipped for a reason of its own.

Prints, on stdout, three lines for run-tests.sh to read:
    allowed N            skips for missing hardware
    unexpected N         every other skip (each is counted as a failure)
    reasons TEXT         "no GPU: 5, no RDMA device: 1" (empty when nothing skipped)
and, on stderr, one line per unexpected skip naming the test and what it printed.
"""
import collections
import json
import re
import sys

HARDWARE = [
    ("no GPU", re.compile(r"skipped: no (GPU|NVIDIA GPU|CUDA device)\b")),
    ("no RDMA device", re.compile(r"skipped: no RDMA device\b")),
]
ANY_REASON = re.compile(r"(?i)\bskip(?:ped)?\b[:(]?\s*(.*)")


def classify(output):
    for name, pattern in HARDWARE:
        if pattern.search(output):
            return name, True
    m = ANY_REASON.search(output)
    return (m.group(1).strip() if m else "no reason printed"), False


def main(path):
    allowed = collections.Counter()
    unexpected = []
    try:
        lines = open(path).read().splitlines()
    except OSError as e:
        print(f"skip_reasons.py: cannot read {path}: {e}", file=sys.stderr)
        lines = []
    for line in lines:
        try:
            test = json.loads(line)
        except json.JSONDecodeError:
            continue
        if test.get("result") != "SKIP":
            continue
        output = (test.get("stdout") or "") + "\n" + (test.get("stderr") or "")
        reason, ok = classify(output)
        if ok:
            allowed[reason] += 1
        else:
            unexpected.append((test.get("name", "?"), reason))
    for name, reason in unexpected:
        print(f"UNEXPECTED SKIP (counted as a failure): {name}: {reason[:300]}", file=sys.stderr)
    print(f"allowed {sum(allowed.values())}")
    print(f"unexpected {len(unexpected)}")
    print("reasons " + ", ".join(f"{r}: {n}" for r, n in sorted(allowed.items())))


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit("usage: skip_reasons.py BUILD/meson-logs/testlog.json")
    main(sys.argv[1])
