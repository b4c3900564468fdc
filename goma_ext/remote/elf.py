"""The ELF facts the dynamic loader acts on: class, machine, interpreter, DT_NEEDED, DT_RPATH/DT_RUNPATH, DT_SONAME.

Read by offset, never the whole file (libLLVM is ~130 MB): the header, the program headers, the PT_DYNAMIC segment
and the string table it points to (a virtual address, mapped to a file offset through the PT_LOAD segments).
Layouts from the System V gABI (ELF32/ELF64, either byte order)."""

from __future__ import annotations

import struct
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO

from goma_ext.remote.errors import InputError

PT_LOAD, PT_DYNAMIC, PT_INTERP = 1, 2, 3
DT_NULL, DT_NEEDED, DT_STRTAB, DT_STRSZ, DT_SONAME, DT_RPATH, DT_RUNPATH = 0, 1, 5, 10, 14, 15, 29
ET_EXEC, ET_DYN = 2, 3
MAX_DYNAMIC_ENTRIES = 1 << 16


class ElfError(InputError):
    """A file that is not an ELF object the loader could use, with the file and what is wrong."""


@dataclass(frozen=True)
class ElfLayout:
    """The struct formats of one ELF class and byte order."""

    header: str  # from e_type to e_shstrndx
    phdr: str
    dyn: str
    phdr_fields: tuple[int, int, int, int]  # indexes of p_type, p_offset, p_vaddr, p_filesz in a program header


LAYOUTS = {
    (1, 1): ElfLayout("<HHIIIIIHHHHHH", "<IIIIIIII", "<iI", (0, 1, 2, 4)),
    (1, 2): ElfLayout(">HHIIIIIHHHHHH", ">IIIIIIII", ">iI", (0, 1, 2, 4)),
    (2, 1): ElfLayout("<HHIQQQIHHHHHH", "<IIQQQQQQ", "<qQ", (0, 2, 3, 5)),
    (2, 2): ElfLayout(">HHIQQQIHHHHHH", ">IIQQQQQQ", ">qQ", (0, 2, 3, 5)),
}


@dataclass(frozen=True)
class DynamicInfo:
    """What the loader reads from one object to load its dependencies."""

    elf_class: int  # 1: 32-bit, 2: 64-bit
    machine: int
    interpreter: str | None
    needed: tuple[str, ...]
    rpath: tuple[str, ...]
    runpath: tuple[str, ...]
    soname: str | None

    def compatible(self, other: DynamicInfo) -> bool:
        """Whether the loader of `self` would accept `other` as one of its libraries."""
        return self.elf_class == other.elf_class and self.machine == other.machine


def _read(f: BinaryIO, offset: int, size: int, path: Path, what: str) -> bytes:
    f.seek(offset)
    data = f.read(size)
    if len(data) != size:
        raise ElfError(f"{path}: truncated ELF file ({what} at offset {offset})")
    return data


def read_dynamic(path: Path) -> DynamicInfo:
    """The dynamic-linking facts of `path`; ElfError for anything that is not an ELF executable or library."""
    try:
        with open(path, "rb") as f:
            ident = f.read(16)
            if len(ident) < 16 or ident[:4] != b"\x7fELF":
                raise ElfError(f"{path}: not an ELF file (a script or wrapper cannot travel as a toolchain)")
            layout = LAYOUTS.get((ident[4], ident[5]))
            if layout is None:
                raise ElfError(f"{path}: unknown ELF class {ident[4]} or byte order {ident[5]}")
            head = struct.unpack(layout.header, _read(f, 16, struct.calcsize(layout.header), path, "header"))
            e_type, machine, phoff, phentsize, phnum = head[0], head[1], head[4], head[8], head[9]
            if e_type not in (ET_EXEC, ET_DYN):
                raise ElfError(f"{path}: ELF type {e_type} is neither an executable nor a shared object")
            size = struct.calcsize(layout.phdr)
            if phentsize < size:
                raise ElfError(f"{path}: program header entries of {phentsize} bytes are too small")
            table = _read(f, phoff, phentsize * phnum, path, "program headers")
            it, io, iv, isz = layout.phdr_fields
            loads: list[tuple[int, int, int]] = []
            dynamic = interp = None
            for i in range(phnum):
                ph = struct.unpack_from(layout.phdr, table, i * phentsize)
                kind, offset, vaddr, filesz = ph[it], ph[io], ph[iv], ph[isz]
                if kind == PT_LOAD:
                    loads.append((vaddr, offset, filesz))
                elif kind == PT_DYNAMIC:
                    dynamic = (offset, filesz)
                elif kind == PT_INTERP:
                    interp = _read(f, offset, filesz, path, "PT_INTERP").split(b"\0", 1)[0].decode()
            entries = _dynamic_entries(f, path, layout, dynamic)
            strings = _strings(f, path, entries, loads)
    except OSError as e:
        raise ElfError(f"{path}: {e.strerror}") from e
    except (UnicodeDecodeError, struct.error) as e:
        raise ElfError(f"{path}: malformed ELF file ({e})") from e

    def values(tag: int) -> list[str]:
        return [strings(v) for t, v in entries if t == tag]

    def paths(tag: int) -> tuple[str, ...]:
        return tuple(p for v in values(tag) for p in v.split(":") if p)

    sonames = values(DT_SONAME)
    return DynamicInfo(
        elf_class=ident[4], machine=machine, interpreter=interp, needed=tuple(values(DT_NEEDED)),
        rpath=paths(DT_RPATH), runpath=paths(DT_RUNPATH), soname=sonames[0] if sonames else None,
    )


def _dynamic_entries(
    f: BinaryIO, path: Path, layout: ElfLayout, dynamic: tuple[int, int] | None
) -> list[tuple[int, int]]:
    if dynamic is None:
        return []  # a static executable: nothing to load
    size = struct.calcsize(layout.dyn)
    count = min(dynamic[1] // size, MAX_DYNAMIC_ENTRIES)
    data = _read(f, dynamic[0], count * size, path, "PT_DYNAMIC")
    entries = []
    for i in range(count):
        tag, value = struct.unpack_from(layout.dyn, data, i * size)
        if tag == DT_NULL:
            break
        entries.append((tag, value))
    return entries


def _strings(
    f: BinaryIO, path: Path, entries: list[tuple[int, int]], loads: list[tuple[int, int, int]]
) -> Callable[[int], str]:
    """A function from a DT_STRTAB offset to its string."""
    tags = dict(entries)
    if DT_STRTAB not in tags:
        return lambda _offset: ""
    vaddr, size = tags[DT_STRTAB], tags.get(DT_STRSZ, 0)
    for start, offset, filesz in loads:
        if start <= vaddr < start + filesz:
            table = _read(f, offset + vaddr - start, min(size, start + filesz - vaddr), path, "DT_STRTAB")
            break
    else:
        raise ElfError(f"{path}: DT_STRTAB address {vaddr:#x} is in no PT_LOAD segment")

    def string(at: int) -> str:
        if at >= len(table):
            raise ElfError(f"{path}: dynamic string offset {at} is past the string table")
        return table[at:table.index(b"\0", at)].decode()

    return string
