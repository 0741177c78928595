#!/usr/bin/python3
"""Every script the README and docs/ tell a reader to run works as written.

A path to a .py or .sh file of this repository that starts a command (the first word of a
`code span` or of a line in a ``` block) must exist, be executable and start with a #! line:
a reader types it as shown, and "Permission denied" is a broken instruction. Paths a doc only
mentions (in prose, or after an interpreter such as /usr/bin/python3) must exist.
Usage: check_documented_commands.py REPO_ROOT
"""
import os
import re
import sys

SCRIPT = re.compile(r"(?:\./)?((?:bench|scripts|tools|tests|trainer|examples|python)/[\w./-]+\.(?:py|sh))")


def documents(root):
    yield os.path.join(root, "README.md")
    docs = os.path.join(root, "docs")
    for folder, _, files in os.walk(docs):
        for name in sorted(files):
            if name.endswith(".md"):
                yield os.path.join(folder, name)


def commands(text):
    """(path, starts_a_command) for every script path in a markdown text."""
    in_block = False
    for line in text.splitlines():
        if line.lstrip().startswith("```"):
            in_block = not in_block
            continue
        if in_block:
            stripped = line.strip().removeprefix("$ ")
            for m in SCRIPT.finditer(stripped):
                yield m.group(1), m.start() == 0 or stripped[: m.start()].strip() in ("", "sudo", "exec")
            continue
        for span in re.findall(r"`([^`]+)`", line):
            span = span.strip()
            for m in SCRIPT.finditer(span):
                yield m.group(1), m.start() == 0
        for m in SCRIPT.finditer(re.sub(r"`[^`]+`", "", line)):
            yield m.group(1), False


def main():
    root = sys.argv[1]
    problems, checked = [], 0
    for doc in documents(root):
        with open(doc, encoding="utf-8") as f:
            text = f.read()
        for path, runs in commands(text):
            checked += 1
            full = os.path.join(root, path)
            where = os.path.relpath(doc, root)
            if not os.path.isfile(full):
                problems.append(f"{where}: {path} does not exist")
                continue
            if not runs:
                continue
            with open(full, "rb") as f:
                first = f.readline()
            if not os.access(full, os.X_OK):
                problems.append(f"{where}: {path} is run as a command but is not executable (git update-index --chmod=+x)")
            if not first.startswith(b"#!"):
                problems.append(f"{where}: {path} is run as a command but has no #! line")
    for p in problems:
        print("FAIL", p)
    print(f"{checked} script references checked, {len(problems)} problems")
    if checked == 0:
        print("FAIL no script references found: the scan is broken")
        return 1
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
