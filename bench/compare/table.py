#!/usr/bin/python3
"""Parser for nccl-tests result tables (the format ouro-bench and the peers' programs print).

compare.py reads each program's JSON (-J) first; this parser is the fallback when a run left no
JSON (killed by the timeout, crashed after some sizes, or an older program without -J), and a
way to bring real nccl-tests logs from GPU machines into the same CSV. It follows nccl-tests'
layout (src/common.cu):

    # nThread 1 nGpus 8 minBytes 8 maxBytes 134217728 step: 2(factor) warmup iters: 5 ...
    #                                              out-of-place                in-place
    #  size  count  type  redop  root  time  algbw  busbw #wrong  time  algbw  busbw #wrong
    #  (B)  (elements)                 (us)  (GB/s) (GB/s)        (us)  (GB/s) (GB/s)
         8      2  float    sum    -1  10.53   0.00   0.00     0  10.29   0.00   0.00     0
    # Out of bounds values : 0 OK
    # Avg bus bandwidth    : 39.2587

Any field of a placement may read "N/A" (no check: #wrong; no in-place run: all four), and a
placement that was not run at all may be a single "N/A" or missing. The column header, when
present, decides the layout, so older nccl-tests (no "root" column, a float "error" instead of
"#wrong") parse too. Lines that are neither comments nor rows are kept in `unparsed` so a
caller can tell a clean table from one interleaved with warnings.

Standard library only. Usable as a script: `table.py FILE` prints the rows as CSV.
"""

from __future__ import annotations

import dataclasses
import re
import sys
from typing import Optional

NA = "N/A"

# Leading columns of the current nccl-tests layout and the per-placement group.
DEFAULT_LEADING = ["size", "count", "type", "redop", "root"]
DEFAULT_GROUP = ["time", "algbw", "busbw", "#wrong"]

# ouro-run --tag-output and mpirun --tag-output prefix lines with the rank; strip those so a
# tagged log parses like a plain one.
_TAG = re.compile(r"^\s*(\[\d+\]:\s?|\[\d+,\d+\]<stdout>:\s?)")
_OOB = re.compile(r"^#?\s*Out of bounds values\s*:\s*(\d+)\s*(OK|FAILED)?", re.IGNORECASE)
_AVG = re.compile(r"^#?\s*Avg bus bandwidth\s*:\s*([-+0-9.eE]+|N/A|nan|inf)", re.IGNORECASE)
_STARTING = re.compile(r"^#\s*Collective test starting:\s*(\S+)")
# "key: value" and "key value" pairs of nccl-tests' first line, e.g.
# "# nThread 1 nGpus 1 minBytes 8 maxBytes 134217728 step: 2(factor) warmup iters: 5 iters: 20"
# (ouro-bench's first line has the same keys, with "nranks" for nThread/nGpus.)
_PARAM_KEYS = ["nThread", "nGpus", "nranks", "minBytes", "maxBytes", "step", "warmup iters",
               "iters", "agg iters", "validation", "graph"]


@dataclasses.dataclass
class Measurement:
    """One placement of one row. None stands for "N/A"."""
    time_us: Optional[float]
    algbw: Optional[float]
    busbw: Optional[float]
    wrong: Optional[float]  # an int for "#wrong"; a float max error in old "error" tables

    def to_json(self) -> dict:
        wrong = self.wrong
        if wrong is not None and float(wrong).is_integer():
            wrong = int(wrong)
        return {"time_us": self.time_us, "algbw": self.algbw, "busbw": self.busbw, "wrong": wrong}


@dataclasses.dataclass
class Row:
    size: int
    count: int
    type: str
    redop: str
    root: int
    out_of_place: Optional[Measurement]
    in_place: Optional[Measurement]
    line: int  # 1-based line number in the input, for error messages


@dataclasses.dataclass
class Table:
    rows: list
    params: dict
    collective: Optional[str] = None  # from "# Collective test starting: X" when present
    out_of_bounds: Optional[int] = None
    ok: Optional[bool] = None  # footer verdict; None when the footer is missing
    avg_busbw: Optional[float] = None
    columns: Optional[list] = None  # header column names as printed
    unparsed: list = dataclasses.field(default_factory=list)  # (line number, text)

    def to_results(self) -> list:
        """Rows in the shape of ouro-bench's JSON "results" (harness.hpp), so compare.py has
        one code path for both sources."""
        out = []
        for r in self.rows:
            out.append({
                "size": r.size, "count": r.count, "type": r.type, "redop": r.redop,
                "root": r.root, "iters": None,
                "out_of_place": r.out_of_place.to_json() if r.out_of_place else None,
                "in_place": r.in_place.to_json() if r.in_place else None,
            })
        return out


class ParseError(ValueError):
    pass


def _number(token: str, kind, line_no: int, what: str):
    if token == NA:
        return None
    try:
        return kind(token)
    except ValueError:
        raise ParseError(f"line {line_no}: {what} is {token!r}, not a number") from None


def _split_header(tokens: list) -> tuple:
    """The header line's names -> (leading columns, per-placement group)."""
    names = [t.lstrip("#") for t in tokens if t.lstrip("#")]
    # nccl-tests prints "#wrong" as one token; after lstrip it is "wrong".
    if "time" not in names:
        raise ParseError("column header without a 'time' column")
    first = names.index("time")
    leading = names[:first]
    rest = names[first:]
    try:
        second = rest.index("time", 1)
        group = rest[:second]
    except ValueError:
        group = rest
    return leading, group


def _is_header(tokens: list) -> bool:
    names = {t.lstrip("#") for t in tokens}
    return {"size", "count", "time"} <= names


def _parse_params(text: str) -> dict:
    """Key/value pairs of nccl-tests' first comment line (best effort)."""
    params = {}
    body = text.lstrip("#").strip()
    for key in sorted(_PARAM_KEYS, key=len, reverse=True):
        m = re.search(r"(?:^|\s)" + re.escape(key) + r":?\s+(\S+)", body)
        if m and key not in params:
            params[key] = m.group(1)
            body = body[:m.start()] + " " + body[m.end():]
    return params


def _parse_group(tokens: list, group: list, line_no: int) -> Optional[Measurement]:
    if all(t == NA for t in tokens):
        return None
    values = dict(zip(group, tokens))
    wrong_token = values.get("wrong", values.get("error", NA))
    return Measurement(
        time_us=_number(values.get("time", NA), float, line_no, "time"),
        algbw=_number(values.get("algbw", NA), float, line_no, "algbw"),
        busbw=_number(values.get("busbw", NA), float, line_no, "busbw"),
        wrong=_number(wrong_token, float, line_no, "#wrong"),
    )


def _parse_row(tokens: list, leading: list, group: list, line_no: int) -> Row:
    lead = dict(zip(leading, tokens[:len(leading)]))
    rest = tokens[len(leading):]
    g = len(group)
    # Placements: both full groups; only out-of-place; or one side collapsed to a lone N/A.
    if len(rest) == 2 * g:
        oop, ip = rest[:g], rest[g:]
    elif len(rest) == g:
        oop, ip = rest, [NA]
    elif len(rest) == g + 1 and rest[-1] == NA:
        oop, ip = rest[:g], [NA]
    elif len(rest) == g + 1 and rest[0] == NA:
        oop, ip = [NA], rest[1:]
    else:
        raise ParseError(f"line {line_no}: {len(tokens)} fields, expected {len(leading) + 2 * g} "
                         f"({' '.join(leading)} + 2 x {' '.join(group)})")
    size = _number(lead.get("size", NA), int, line_no, "size")
    count = _number(lead.get("count", NA), int, line_no, "count")
    if size is None or count is None:
        raise ParseError(f"line {line_no}: size and count are required")
    root = _number(lead.get("root", "-1"), int, line_no, "root")
    return Row(size=size, count=count, type=lead.get("type", ""), redop=lead.get("redop", "none"),
               root=-1 if root is None else root,
               out_of_place=_parse_group(oop, group, line_no) if len(oop) == g else None,
               in_place=_parse_group(ip, group, line_no) if len(ip) == g else None,
               line=line_no)


def parse(text: str, strict: bool = False) -> Table:
    """Parses one program's stdout. strict=True raises on a row-like line that does not parse;
    otherwise such lines go to `unparsed` (a truncated last line of a killed run, say)."""
    table = Table(rows=[], params={})
    leading, group = list(DEFAULT_LEADING), list(DEFAULT_GROUP)
    for line_no, raw in enumerate(text.splitlines(), start=1):
        line = _TAG.sub("", raw, count=1).rstrip()
        stripped = line.strip()
        if not stripped:
            continue
        # Footers: nccl-tests 2.x prints them as comments, 1.x and early 2.0 without the '#'.
        if m := _OOB.match(stripped):
            table.out_of_bounds = int(m.group(1))
            # nccl-tests always prints the verdict; without one, zero means OK.
            verdict = m.group(2)
            table.ok = verdict.upper() == "OK" if verdict else table.out_of_bounds == 0
            continue
        if m := _AVG.match(stripped):
            table.avg_busbw = _number(m.group(1), float, line_no, "avg bus bandwidth")
            continue
        if stripped.startswith("#"):
            tokens = stripped.split()
            if m := _STARTING.match(stripped):
                table.collective = m.group(1)
            elif _is_header(tokens):
                leading, group = _split_header(tokens)
                table.columns = [t.lstrip("#") for t in tokens if t.lstrip("#")]
            elif "minBytes" in stripped or "nThread" in stripped:
                table.params.update(_parse_params(stripped))
            continue
        tokens = stripped.split()
        if not tokens[0].isdigit():
            table.unparsed.append((line_no, raw))
            continue
        try:
            table.rows.append(_parse_row(tokens, leading, group, line_no))
        except ParseError:
            if strict:
                raise
            table.unparsed.append((line_no, raw))
    return table


def parse_file(path, strict: bool = False) -> Table:
    with open(path, encoding="utf-8", errors="replace") as f:
        return parse(f.read(), strict=strict)


def _main(argv: list) -> int:
    if len(argv) != 2 or argv[1] in ("-h", "--help"):
        print("usage: table.py FILE   (prints the nccl-tests table in FILE as CSV)",
              file=sys.stderr)
        return 2
    t = parse_file(argv[1])
    print("size,count,type,redop,root,placement,time_us,algbw,busbw,wrong")
    for r in t.rows:
        for name, m in (("out_of_place", r.out_of_place), ("in_place", r.in_place)):
            if m is None:
                continue
            j = m.to_json()
            cells = [r.size, r.count, r.type, r.redop, r.root, name, j["time_us"], j["algbw"],
                     j["busbw"], j["wrong"]]
            print(",".join("" if c is None else str(c) for c in cells))
    print(f"# out_of_bounds={t.out_of_bounds} ok={t.ok} avg_busbw={t.avg_busbw} "
          f"unparsed_lines={len(t.unparsed)}", file=sys.stderr)
    return 0 if t.ok is not False else 1


if __name__ == "__main__":
    sys.exit(_main(sys.argv))
