#!/usr/bin/env python3
"""Checks the device code nvcc embedded in the kernel objects (no cuobjdump on these machines).

The .nv_fatbin section of each object (objcopy) holds fatbins: a 16-byte header (magic
0xba55ed50, version, header size, payload size) and entries, each with a header (kind: 1 PTX,
2 ELF cubin; header size; payload size; at +28 the architecture, e.g. 80 or 90; at +40 flags,
0x8000 = compressed) and its payload. Every cubin is an ELF (OSABI 0x41, the SM in bits 8-15 of
e_flags) whose symbol table names its kernels; PTX names them in `.entry` lines (zstd-compressed
here: decoded with the zstd program when it is installed).

Requires every --kernel (as c++filt prints it, without the parameter list) in a cubin of every
--arch and, when decodable, in the PTX of every --ptx. Exit 0 when all are there, 1 otherwise.

  check_fatbin.py --arch 80 --arch 90 --ptx 90 --kernel 'ns::k<float>' OBJECT_OR_ARCHIVE...
"""
import argparse
import os
import shutil
import struct
import subprocess
import sys
import tempfile

FATBIN_MAGIC = 0xBA55ED50
KIND_PTX, KIND_ELF = 1, 2


def objects_of(path, workdir):
    with open(path, "rb") as f:
        magic = f.read(8)
    if magic == b"!<thin>\n":  # members are paths to the objects (ar t prints them usable from here)
        return subprocess.run(["ar", "t", path], check=True, capture_output=True, text=True).stdout.split()
    if magic == b"!<arch>\n":
        out = tempfile.mkdtemp(dir=workdir)
        subprocess.run(["ar", "x", os.path.abspath(path)], check=True, cwd=out)
        return [os.path.join(out, n) for n in sorted(os.listdir(out))]
    return [path]


def fatbin_section(obj, workdir):
    out = os.path.join(workdir, "section.bin")
    if os.path.exists(out):
        os.remove(out)
    subprocess.run(["objcopy", "-O", "binary", "--only-section=.nv_fatbin", obj, out], check=True)
    with open(out, "rb") as f:
        return f.read()


def entries(section):
    """Yields (kind, arch, flags, payload) for every entry of every fatbin in the section."""
    at = 0
    while at + 16 <= len(section):
        magic, _version, header_size, size = struct.unpack_from("<IHHQ", section, at)
        if magic != FATBIN_MAGIC:
            at += 8  # fatbins are 8-byte aligned in the section
            continue
        entry, end = at + header_size, at + header_size + size
        while entry + 48 <= end:
            kind, _unknown, entry_header, payload_size = struct.unpack_from("<HHIQ", section, entry)
            arch = struct.unpack_from("<I", section, entry + 28)[0]
            flags = struct.unpack_from("<Q", section, entry + 40)[0]
            payload = section[entry + entry_header:entry + entry_header + payload_size]
            yield kind, arch, flags, payload
            entry += entry_header + payload_size
        at = end


def elf_functions(elf):
    """Names of the FUNC symbols of an ELF64 cubin, and the SM its e_flags name."""
    if elf[:4] != b"\x7fELF" or elf[4] != 2:
        raise ValueError("not an ELF64 cubin")
    e_flags = struct.unpack_from("<I", elf, 0x30)[0]
    shoff = struct.unpack_from("<Q", elf, 0x28)[0]
    shentsize, shnum = struct.unpack_from("<HH", elf, 0x3A)
    sections = [struct.unpack_from("<IIQQQQIIQQ", elf, shoff + i * shentsize) for i in range(shnum)]
    names = []
    for sh in sections:
        if sh[1] != 2:  # SHT_SYMTAB
            continue
        strtab = sections[sh[6]]
        strings = elf[strtab[4]:strtab[4] + strtab[5]]
        for k in range(sh[5] // 24):
            st_name, st_info = struct.unpack_from("<IB", elf, sh[4] + k * 24)
            if st_info & 0xF == 2:  # STT_FUNC
                names.append(strings[st_name:strings.index(b"\0", st_name)].decode())
    return names, (e_flags >> 8) & 0xFF


def unpacked(payload, flags, workdir):
    """An entry's payload, zstd-decompressed when compressed (nvcc compresses large cubins too);
    None when it is and zstd is missing."""
    if flags & 0x8000 or payload[:4] == b"\x28\xb5\x2f\xfd":
        if not shutil.which("zstd"):
            return None
        packed = os.path.join(workdir, "entry.zst")
        with open(packed, "wb") as f:
            f.write(payload)
        result = subprocess.run(["zstd", "-dc", packed], capture_output=True)
        if result.returncode != 0 and not result.stdout:
            return None
        payload = result.stdout
    return payload


def ptx_entries(payload, flags, workdir):
    """Kernel names of a PTX entry, or None when it cannot be decoded here."""
    payload = unpacked(payload, flags, workdir)
    if payload is None:
        return None
    text = payload.decode("utf-8", "replace")
    return [line.split(".entry", 1)[1].strip().split("(")[0].strip()
            for line in text.splitlines() if ".entry" in line]


def demangle(names):
    if not names:
        return []
    out = subprocess.run(["c++filt"], input="\n".join(names), capture_output=True, text=True, check=True).stdout
    result = []
    for line in out.splitlines():
        if line.startswith("void "):
            line = line[len("void "):]
        result.append(line.split("(")[0])
    return result


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--arch", type=int, action="append", default=[], help="SM that needs a cubin (80, 90)")
    parser.add_argument("--ptx", type=int, action="append", default=[], help="compute capability that needs PTX")
    parser.add_argument("--kernel", action="append", default=[], help="kernel name as c++filt prints it")
    parser.add_argument("inputs", nargs="+")
    args = parser.parse_args()
    problems = []
    cubins, ptx = {}, {}  # arch -> set of kernel names (None: present, names unknown)
    with tempfile.TemporaryDirectory() as workdir:
        for path in args.inputs:
            for obj in objects_of(path, workdir):
                for kind, arch, flags, payload in entries(fatbin_section(obj, workdir)):
                    if kind == KIND_ELF:
                        elf = unpacked(payload, flags, workdir)
                        if elf is None:
                            problems.append(f"{obj}: the sm_{arch} cubin is compressed and zstd is missing")
                            continue
                        names, elf_arch = elf_functions(elf)
                        if elf_arch != arch:
                            problems.append(f"{obj}: cubin for sm_{arch} says sm_{elf_arch} in its ELF header")
                        cubins.setdefault(arch, set()).update(demangle(names))
                    elif kind == KIND_PTX:
                        names = ptx_entries(payload, flags, workdir)
                        known = ptx.setdefault(arch, set())
                        if names is None:
                            ptx[arch] = None
                        elif known is not None:
                            known.update(demangle(names))
    for arch in args.arch:
        if arch not in cubins:
            problems.append(f"no sm_{arch} cubin (found: {sorted(cubins)})")
            continue
        problems += [f"sm_{arch} cubin lacks {k}" for k in args.kernel if k not in cubins[arch]]
    for arch in args.ptx:
        if arch not in ptx:
            problems.append(f"no compute_{arch} PTX (found: {sorted(ptx)})")
        elif ptx[arch] is None:
            print(f"note: compute_{arch} PTX is compressed and zstd is missing: kernel names not checked")
        else:
            problems += [f"compute_{arch} PTX lacks {k}" for k in args.kernel if k not in ptx[arch]]
    for p in problems:
        print("FAIL:", p)
    if not problems:
        print(f"ok: {len(args.kernel)} kernels in cubins for sm_{', sm_'.join(map(str, args.arch))}"
              f" and PTX for compute_{', compute_'.join(map(str, args.ptx))}")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
