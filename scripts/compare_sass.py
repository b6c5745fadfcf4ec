#!/usr/bin/env python3
"""Compares the sm_90 machine code (SASS) of two builds of tbe_optimized, object by object, without
cuobjdump: every .o's .nv_fatbin holds the cubin (an ELF); its .text.<kernel> sections are the
kernels' SASS bytes, .nv.constant0.<kernel> their parameter blocks, .nv.shared.<kernel> their static
shared memory. Line tables (-lineinfo) are left out: they change when source lines move.

  scripts/compare_sass.py OLD_DIR NEW_DIR
      OLD_DIR, NEW_DIR: the CMakeFiles/tbe_optimized.dir folders of two builds (the objects of
      kernels/*.cu and src/*.cu). Exit 0 when every kernel of every object has the same bytes.

docs/mutation.md uses it to show that the mutation hooks cost nothing in a normal build."""
import pathlib
import re
import struct
import subprocess
import sys
import tempfile

COMPARED = (b".text.", b".nv.constant0.", b".nv.shared.")


def cubins(obj: pathlib.Path):
    with tempfile.NamedTemporaryFile() as tmp:
        subprocess.run(["objcopy", "-O", "binary", "--only-section=.nv_fatbin", str(obj), tmp.name],
                       check=True)
        data = pathlib.Path(tmp.name).read_bytes()
    at = data.find(b"\x7fELF")
    while at >= 0:
        yield data[at:]
        at = data.find(b"\x7fELF", at + 4)


def sections(elf: bytes):
    """{name: bytes} of the compared sections of one ELF64 cubin (NOBITS: its size as bytes)."""
    shoff, = struct.unpack_from("<Q", elf, 0x28)
    shentsize, shnum, shstrndx = struct.unpack_from("<HHH", elf, 0x3A)
    heads = [struct.unpack_from("<IIQQQQIIQQ", elf, shoff + i * shentsize) for i in range(shnum)]
    names_off = heads[shstrndx][4]
    out = {}
    for name, kind, _flags, _addr, off, size, *_ in heads:
        end = elf.index(b"\0", names_off + name)
        n = elf[names_off + name:end]
        if n.startswith(COMPARED):
            out[n.decode()] = str(size).encode() if kind == 8 else elf[off:off + size]
    return out


ANON = re.compile(r"(\d+)_GLOBAL__N__")


def stable_name(name: str) -> str:
    """The section name with each anonymous namespace's mangled identifier (<len>_GLOBAL__N__<hash
    of the translation unit>...) replaced by a fixed one: the hash changes with the source text."""
    out, at = [], 0
    for m in ANON.finditer(name):
        if m.start() < at:
            continue
        length = int(m.group(1))
        out.append(name[at:m.start()] + "ANON")
        at = m.start(1) + len(m.group(1)) + length
    return "".join(out) + name[at:]


def kernels(obj: pathlib.Path):
    merged = {}
    for i, elf in enumerate(cubins(obj)):
        for name, body in sections(elf).items():
            merged[f"{i}:{stable_name(name)}"] = body
    return merged


def main(old_dir: str, new_dir: str) -> int:
    old, new = pathlib.Path(old_dir), pathlib.Path(new_dir)
    objs = sorted(p.relative_to(old) for p in old.rglob("*.cu.o"))
    if not objs:
        print(f"compare_sass: no *.cu.o under {old}")
        return 2
    bad = 0
    for rel in objs:
        a, b = kernels(old / rel), kernels(new / rel)
        diff = sorted(k for k in a.keys() | b.keys() if a.get(k) != b.get(k))
        text = sum(len(v) for k, v in a.items() if ".text." in k)
        print(f"{rel}: {len([k for k in a if '.text.' in k])} kernels, {text} SASS bytes: "
              + ("identical" if not diff else f"{len(diff)} sections differ"))
        for k in diff[:10]:
            print(f"  differs: {k}")
        bad += bool(diff)
    print("compare_sass: " + ("every object identical" if bad == 0 else f"{bad} objects differ"))
    return 1 if bad else 0


if __name__ == "__main__":
    if len(sys.argv) != 3:
        print(__doc__)
        sys.exit(2)
    sys.exit(main(sys.argv[1], sys.argv[2]))
