#!/usr/bin/env python3
"""comm/'s rooms include one way only: each room's files include only their own room and the
rooms below it, never a room above (comm/meson.build lists the order), so the include graph
between the rooms has no upward arrow and no cycle. Also: no file is left in comm/ outside a room.

usage: check_rooms.py SOURCE_ROOT"""
import pathlib
import re
import sys

# Top to bottom. A room may include itself and anything after it.
ROOMS = ["api", "exec", "setup", "progress", "plan"]
# setup/store/ is a room of its own inside setup: the stores know nothing of communicators.
SUBROOMS = {"setup/store": ["setup/store"]}
INCLUDE = re.compile(r'^\s*#\s*include\s+"comm/([^"]+)"', re.M)


def room_of(rel: str) -> str:
    for sub in SUBROOMS:
        if rel.startswith(sub + "/"):
            return sub
    return rel.split("/", 1)[0]


def main() -> int:
    root = pathlib.Path(sys.argv[1])
    comm = root / "comm"
    problems = []
    for path in sorted(comm.rglob("*")):
        if path.suffix not in (".cpp", ".hpp", ".h", ".cuh"):
            continue
        rel = path.relative_to(comm).as_posix()
        room = room_of(rel)
        top = rel.split("/", 1)[0]
        if "/" not in rel or top not in ROOMS:
            problems.append(f"comm/{rel}: outside the rooms {', '.join(ROOMS)}; move it into the one it serves")
            continue
        for target in INCLUDE.findall(path.read_text()):
            target_room = room_of(target)
            if room in SUBROOMS:
                if target_room not in SUBROOMS[room]:
                    problems.append(f"comm/{rel} includes comm/{target}: {room}/ may include only itself")
                continue
            t_top = target.split("/", 1)[0]
            if t_top not in ROOMS:
                problems.append(f"comm/{rel} includes comm/{target}, which is in no room")
            elif ROOMS.index(t_top) < ROOMS.index(top):
                problems.append(f"comm/{rel} includes comm/{target}: {top}/ is below {t_top}/, so that include "
                                f"points upward (order, top to bottom: {' > '.join(ROOMS)})")
    for p in problems:
        print("FAIL:", p)
    if not problems:
        print(f"ok: comm/'s rooms include one way only ({' > '.join(ROOMS)})")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
