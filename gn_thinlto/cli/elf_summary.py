"""What a linked ELF binary holds, for comparing two builds: its defined functions with their sizes, its
sections' sizes and its dynamic symbols.

Layout: ELF-64 Object File Format (System V gABI): Elf64_Ehdr, Elf64_Shdr, Elf64_Sym; little-endian only
(x86-64, AArch64, RISC-V), the targets gn-thinlto builds for. Read with offsets from the headers, never past the
file's end: a truncated or foreign file is an ElfError naming the offset.
"""

from __future__ import annotations

import enum
import os
import struct
from collections import Counter
from dataclasses import dataclass

from gn_thinlto.errors import GnThinltoError

_IDENT = struct.Struct("<4sBB")  # magic, EI_CLASS, EI_DATA
_EHDR = struct.Struct("<16sHHIQQQIHHHHHH")
_SHDR = struct.Struct("<IIQQQQIIQQ")
_SYM = struct.Struct("<IBBHQQ")
_MAGIC = b"\x7fELF"
_CLASS64, _DATA_LSB = 2, 1


class FileType(enum.IntEnum):  # e_type
    REL = 1
    EXEC = 2
    DYN = 3


class SectionType(enum.IntEnum):  # sh_type
    NOBITS = 8
    SYMTAB = 2
    DYNSYM = 11


class SymbolType(enum.IntEnum):  # ELF64_ST_TYPE(st_info)
    FUNC = 2
    GNU_IFUNC = 10


SHF_ALLOC = 0x2
SHN_UNDEF = 0


class ElfError(GnThinltoError):
    """A file that is not a readable little-endian ELF64 binary, with the offset where reading failed."""


@dataclass(frozen=True)
class ElfSummary:
    """FUNCTIONS: (name, size) of every defined function symbol, as a multiset (local functions of two
    translation units may share a name); SECTIONS: size of every allocated section by name; DYNAMIC: the
    dynamic symbols as `name defined|undefined`. STRIPPED: there was no symbol table. DW_REF: whether it
    defines a `DW.ref.*` personality pointer (COMDAT data that code generation creates)."""

    functions: Counter[tuple[str, int]]
    sections: dict[str, int]
    dynamic: frozenset[str]
    stripped: bool
    dw_ref: bool = False


def linked_type(path: str | os.PathLike[str]) -> FileType | None:
    """EXEC or DYN for a linked ELF64 little-endian file, else None (objects, other files, unreadable ones)."""
    try:
        with open(path, "rb") as f:
            head = f.read(18)
    except OSError:
        return None
    if len(head) < 18 or head[:4] != _MAGIC or head[4] != _CLASS64 or head[5] != _DATA_LSB:
        return None
    kind = struct.unpack_from("<H", head, 16)[0]
    return FileType(kind) if kind in (FileType.EXEC, FileType.DYN) else None


def _unpack(s: struct.Struct, data: bytes, offset: int, what: str) -> tuple[int, ...]:
    if offset < 0 or offset + s.size > len(data):
        raise ElfError(f"{what} at offset {offset} runs past the end of the file ({len(data)} bytes)")
    return s.unpack_from(data, offset)


def _name(strtab: bytes, offset: int) -> str:
    end = strtab.find(b"\0", offset)
    return strtab[offset:end if end >= 0 else len(strtab)].decode("utf-8", "replace")


def _symbols(data: bytes, sh: tuple[int, ...], strtab: bytes) -> list[tuple[str, int, int, int]]:
    """(name, type, section index, size) of every symbol of symbol table section SH."""
    offset, size = sh[4], sh[5]
    if offset + size > len(data):
        raise ElfError(f"symbol table at offset {offset} runs past the end of the file")
    out = []
    for pos in range(offset + _SYM.size, offset + size - _SYM.size + 1, _SYM.size):  # entry 0 is null
        name, info, _other, shndx, _value, sym_size = _SYM.unpack_from(data, pos)
        out.append((_name(strtab, name), info & 0xF, shndx, sym_size))
    return out


def summarize(path: str | os.PathLike[str]) -> ElfSummary:
    """Read PATH's functions, sections and dynamic symbols; ElfError when it is not a readable ELF64 LE file."""
    with open(path, "rb") as f:
        data = f.read()
    if data[:4] != _MAGIC or len(data) < _EHDR.size or data[4] != _CLASS64 or data[5] != _DATA_LSB:
        raise ElfError(f"{os.fspath(path)}: not a little-endian ELF64 file")
    ehdr = _unpack(_EHDR, data, 0, "ELF header")
    shoff, shentsize, shnum, shstrndx = ehdr[6], ehdr[11], ehdr[12], ehdr[13]
    headers = [_unpack(_SHDR, data, shoff + i * shentsize, f"section header {i}") for i in range(shnum)]

    def content(i: int) -> bytes:
        sh = headers[i]
        return b"" if sh[1] == SectionType.NOBITS else data[sh[4]:sh[4] + sh[5]]

    shstrtab = content(shstrndx) if shstrndx < shnum else b""
    sections: dict[str, int] = {}
    functions: Counter[tuple[str, int]] = Counter()
    dynamic: set[str] = set()
    stripped = True
    dw_ref = False
    for sh in headers:
        name = _name(shstrtab, sh[0])
        if sh[2] & SHF_ALLOC:
            sections[name] = sections.get(name, 0) + sh[5]
        if sh[1] not in (SectionType.SYMTAB, SectionType.DYNSYM):
            continue
        strtab = content(sh[6]) if sh[6] < shnum else b""
        symbols = _symbols(data, sh, strtab)
        if sh[1] == SectionType.SYMTAB:
            stripped = False
            functions.update((n, size) for n, kind, shndx, size in symbols
                             if kind in (SymbolType.FUNC, SymbolType.GNU_IFUNC) and shndx != SHN_UNDEF)
            dw_ref = dw_ref or any(n.startswith("DW.ref.") and shndx != SHN_UNDEF for n, _, shndx, _ in symbols)
        else:
            dynamic.update(f"{n} {'undefined' if shndx == SHN_UNDEF else 'defined'}" for n, _, shndx, _ in symbols)
    return ElfSummary(functions, sections, frozenset(dynamic), stripped, dw_ref)
