#!/usr/bin/python3
"""Every repository path the docs and code comments name exists, and every section they cite exists.

Scanned: every Markdown file (all of its text), and the comments of sources, build files and
scripts: // and /* */ in C, C++ and CUDA (outside string literals), # in Python (plus its
docstrings), shell, meson.build, meson_options.txt, suppression files and #! scripts. Markdown
links ([text](target)) must lead to a file, relative to their document.

A path is a run of path characters whose first component is a folder at the top of the
repository (core/dtype.hpp, tests/comm/) and that does not continue a longer path: build/tests/x,
/usr/include/x and BUILD/python/ouro are not repository paths. It must exist, with these readings:
a glob (transport/ib/ib_protocol.*) or a brace list (cuda_emulation.{hpp,cpp}) must match; an
all-capital component is a placeholder for any name (fuzz/corpus/TARGET/); a program that the
folder's meson.build builds counts as there (tools/ouro-run/ouro-run, a ninja target). A bare
document name such as DESIGN.md must name a Markdown file of the repository. A document followed
by a quoted heading, such as docs/API.md "Types" (also without docs/, or with a comma between,
across line breaks), must name a heading of that document, or the first words of one.

Names that look like repository paths but are not are listed in NOT_REPOSITORY_PATHS; stale
references in folders whose owners fix them later are listed in KNOWN_STALE, and an entry there
that matches nothing any more is itself reported, so the list only shrinks.
Usage: check_repository_paths.py REPO_ROOT
"""
import glob
import io
import os
import re
import sys
import tokenize

# Prefixes of names that start with a top-level folder yet are not paths in the repository.
NOT_REPOSITORY_PATHS = {
    "build/": "the default build directory (scripts/run-main.sh builds into ./build): build outputs",
    "bench/results/": "where bench/compare/compare.py writes its results (.gitignore)",
}

# (folder of the file that holds it, the stale reference): why it stays for now. The owners of
# these folders fix them; remove the entry with the fix (the check then fails if it comes back).
KNOWN_STALE = {
}

MARKDOWN_LINK = re.compile(r"\]\(([^()\s#]+)(?:#[^()\s]*)?\)")  # [text](target), relative to the document
DOC_NAME = re.compile(r"(?<![\w./-])([A-Z][A-Z0-9_-]*\.md)\b")
CITATION = re.compile(r"(?<![\w./-])((?:[\w.-]+/)*[A-Z][A-Z0-9_-]*\.md),?\s+\"([^\"]{1,100})\"")
C_LIKE = (".c", ".h", ".cpp", ".hpp", ".cu", ".cuh", ".inc", ".map")
HASH_COMMENTS = (".sh", ".supp", ".txt")
SKIPPED_FOLDERS = {".git", "__pycache__", "corpus", "regressions"}  # fuzz inputs are binary


def is_build_dir(path):
    return os.path.isdir(os.path.join(path, "meson-private"))


def top_level_folders(root):
    return sorted(d for d in os.listdir(root)
                  if os.path.isdir(os.path.join(root, d)) and d not in SKIPPED_FOLDERS
                  and not is_build_dir(os.path.join(root, d)))


def path_pattern(folders):
    tops = "|".join(re.escape(f) for f in folders)
    part = r"(?:[\w.+*-]|\{[\w.+*,-]*\})"  # a path character, or a brace list {hpp,cpp}
    not_inside = r"(?:(?<![\w./~$@%{-])|(?<=(?<![\w./])\./))"  # starts the name, or follows a lone ./
    return re.compile(not_inside + r"((?:" + tops + r")/" + part + r"*(?:/" + part + r"+)*/?)")


def expand_braces(path):
    m = re.search(r"\{([^{}]*)\}", path)
    if not m:
        return [path]
    return [p for alt in m.group(1).split(",") for p in expand_braces(path[:m.start()] + alt + path[m.end():])]


def built_programs(root, meson_files):
    """folder/name of every program a meson.build builds under a literal name (ninja's target)."""
    programs = set()
    for rel in meson_files:
        with open(os.path.join(root, rel), encoding="utf-8") as f:
            for m in re.finditer(r"\bexecutable\(\s*'([\w.+-]+)'", f.read()):
                programs.add(os.path.join(os.path.dirname(rel), m.group(1)))
    return programs


def files_to_scan(root):
    """(relative path, kind) of every file whose text or comments are checked."""
    for folder, dirs, files in os.walk(root):
        dirs[:] = sorted(d for d in dirs if d not in SKIPPED_FOLDERS and not is_build_dir(os.path.join(folder, d)))
        for name in sorted(files):
            full = os.path.join(folder, name)
            rel = os.path.relpath(full, root)
            if name.endswith(".md"):
                yield rel, "markdown"
            elif name.endswith(C_LIKE):
                yield rel, "c"
            elif name.endswith(".py"):
                yield rel, "python"
            elif name in ("meson.build", "meson_options.txt") or name.endswith(HASH_COMMENTS):
                yield rel, "hash"
            elif "." not in name and os.access(full, os.X_OK):
                with open(full, "rb") as f:
                    if f.read(2) == b"#!":
                        yield rel, "hash"


def c_comments(text):
    """(line, text) of every // and /* */ comment line, skipping string and character literals."""
    out, i, line, n = [], 0, 1, len(text)
    while i < n:
        c = text[i]
        if c == "\n":
            line += 1
            i += 1
        elif text.startswith("//", i):
            end = text.find("\n", i)
            end = n if end < 0 else end
            out.append((line, text[i + 2:end]))
            i = end
        elif text.startswith("/*", i):
            end = text.find("*/", i + 2)
            end = n if end < 0 else end
            for k, part in enumerate(text[i + 2:end].split("\n")):
                out.append((line + k, part))
            line += text.count("\n", i, end)
            i = end + 2
        elif c == '"' and i > 0 and text[i - 1] == "R" and (m := re.match(r'"([^()\\\s]{0,16})\(', text[i:])):
            end = text.find(")" + m.group(1) + '"', i)  # raw string literal R"delim(...)delim"
            end = n if end < 0 else end
            line += text.count("\n", i, end)
            i = end + len(m.group(1)) + 2
        elif c == '"' or (c == "'" and not (i > 0 and text[i - 1].isalnum())):  # not a digit separator
            j = i + 1
            while j < n and text[j] not in (c, "\n"):
                j += 2 if text[j] == "\\" else 1
            i = j + 1
        else:
            i += 1
    return out


def python_comments(text):
    """(line, text) of every # comment and docstring line of a Python file."""
    out, previous = [], tokenize.NEWLINE
    try:
        for tok in tokenize.generate_tokens(io.StringIO(text).readline):
            if tok.type == tokenize.COMMENT:
                out.append((tok.start[0], tok.string[1:]))
            elif tok.type == tokenize.STRING and previous in (tokenize.NEWLINE, tokenize.INDENT, tokenize.DEDENT):
                for k, part in enumerate(tok.string.split("\n")):
                    out.append((tok.start[0] + k, part))
            if tok.type not in (tokenize.COMMENT, tokenize.NL):
                previous = tok.type
    except (tokenize.TokenError, SyntaxError) as e:
        raise SystemExit(f"cannot tokenize a Python file: {e}")
    return out


def hash_comments(text):
    """(line, text) of every # comment of a shell, meson or data file: a # outside quotes that
    starts the line or follows a blank (not $# or ${#x}); #! lines are not comments."""
    out = []
    for number, line in enumerate(text.splitlines(), 1):
        if line.startswith("#!"):
            continue
        quote = None
        for i, c in enumerate(line):
            if quote:
                if c == quote:
                    quote = None
            elif c in "'\"":
                quote = c
            elif c == "#" and (i == 0 or line[i - 1] in " \t"):
                out.append((number, line[i + 1:]))
                break
    return out


def headings(path):
    with open(path, encoding="utf-8") as f:
        return [re.sub(r"^#+\s*", "", line).strip() for line in f if re.match(r"#+\s", line)]


def names_heading(cited, heads):
    """A citation names a heading when it is the heading or its first words."""
    cited = " ".join(cited.split())
    return any(h == cited or (h.startswith(cited) and not h[len(cited)].isalnum()) for h in heads)


class Checker:
    def __init__(self, root):
        self.root = root
        self.paths = path_pattern(top_level_folders(root))
        scanned = list(files_to_scan(root))
        self.doc_names = {os.path.basename(rel) for rel, kind in scanned if kind == "markdown"}
        self.programs = built_programs(root, [rel for rel, _ in scanned if os.path.basename(rel) == "meson.build"])
        self.problems, self.checked, self.used_stale = [], 0, set()

    def report(self, where, folder_of, reference, what):
        for (folder, stale), _ in KNOWN_STALE.items():
            if folder_of.startswith(folder) and reference == stale:
                self.used_stale.add((folder, stale))
                return
        self.problems.append(f"{where}: {what}")

    def exists(self, path):
        if path.rstrip("/") in self.programs:
            return True
        # An all-capital component (TARGET, RANK) is a placeholder: any name matches it.
        pattern = "/".join("*" if re.fullmatch(r"[A-Z][A-Z0-9_]*", c) else c for c in path.split("/"))
        full = os.path.join(self.root, pattern)
        if "*" in pattern:
            return any(os.path.isdir(p) or not path.endswith("/") for p in glob.glob(full))
        return os.path.isdir(full) if path.endswith("/") else os.path.exists(full)

    def check_path(self, where, rel, path):
        path = path.rstrip(".")
        if any(path.startswith(prefix) for prefix in NOT_REPOSITORY_PATHS):
            return
        self.checked += 1
        missing = [p for p in expand_braces(path) if not self.exists(p)]
        if missing:
            self.report(where, rel, path, f"{', '.join(missing)} does not exist")

    def check_citation(self, where, rel, doc, cited):
        self.checked += 1
        candidates = [doc] if "/" in doc else [os.path.join("docs", doc), doc]
        target = next((c for c in candidates if os.path.isfile(os.path.join(self.root, c))), None)
        if target is None:
            return  # the document name itself is checked (and reported) as a path or name
        if not names_heading(cited, headings(os.path.join(self.root, target))):
            self.report(where, rel, f'{doc} "{cited}"', f'{doc} "{cited}": {target} has no such heading')

    def check_links(self, rel, lines):
        for number, text in lines:
            for m in MARKDOWN_LINK.finditer(text):
                target = m.group(1)
                if re.match(r"[a-z]+:", target):
                    continue  # https:, mailto:
                self.checked += 1
                if not os.path.exists(os.path.join(self.root, os.path.dirname(rel), target)):
                    self.report(f"{rel}:{number}", rel, target, f"link target {target} does not exist")

    def check_text(self, rel, lines):
        """lines: (line number, text) of one file's comments or Markdown."""
        for number, text in lines:
            where = f"{rel}:{number}"
            for m in self.paths.finditer(text):
                self.check_path(where, rel, m.group(1))
            for m in DOC_NAME.finditer(text):
                self.checked += 1
                if m.group(1) not in self.doc_names:
                    self.report(where, rel, m.group(1), f"{m.group(1)} is not a document of this repository")
        # Citations may wrap across lines: look in the whole text, whitespace folded.
        starts, joined = [], ""
        for number, text in lines:
            starts.append((len(joined), number))
            joined += text.strip() + " "
        for m in CITATION.finditer(joined):
            number = next(n for at, n in reversed(starts) if at <= m.start())
            self.check_citation(f"{rel}:{number}", rel, m.group(1), m.group(2))

    def run(self):
        for rel, kind in files_to_scan(self.root):
            with open(os.path.join(self.root, rel), encoding="utf-8", errors="replace") as f:
                text = f.read()
            if kind == "markdown":
                lines = list(enumerate(text.splitlines(), 1))
                self.check_links(rel, lines)
            elif kind == "c":
                lines = c_comments(text)
            elif kind == "python":
                lines = python_comments(text)
            else:
                lines = hash_comments(text)
            self.check_text(rel, lines)
        for entry in sorted(set(KNOWN_STALE) - self.used_stale):
            self.problems.append(f"KNOWN_STALE entry {entry} matches nothing any more: remove it from {__file__}")


def main():
    checker = Checker(sys.argv[1])
    checker.run()
    for p in checker.problems:
        print("FAIL", p)
    print(f"{checker.checked} path and section references checked, {len(checker.problems)} problems")
    if checker.checked == 0:
        print("FAIL no references found: the scan is broken")
        return 1
    return 1 if checker.problems else 0


if __name__ == "__main__":
    sys.exit(main())
