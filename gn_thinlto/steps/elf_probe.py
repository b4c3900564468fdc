"""A minimal ELF64 little-endian symbol-table probe: does an object define or reference any real symbol?

Used on the regular-LTO object lld writes with --lto-obj-path: without a regular LTO part (no CFI or split
LTO unit) it is an empty object holding only a FILE symbol, and is left out of the final link.
Layout: ELF-64 Object File Format (System V gABI), Elf64_Ehdr / Elf64_Shdr / Elf64_Sym.
"""

from __future__ import annotations

import enum
import os
import struct

from gn_thinlto.errors import GnThinltoError

_EHDR = struct.Struct("<16sHHIQQQIHHHHHH")
_SHDR = struct.Struct("<IIQQQQIIQQ")
_SYM = struct.Struct("<IBBHQQ")


class SectionType(enum.IntEnum):
    SYMTAB = 2


class SymbolType(enum.IntEnum):
    NOTYPE = 0
    SECTION = 3
    FILE = 4


def has_real_symbols(path: str | os.PathLike[str]) -> bool:
    """True when the object's .symtab holds a symbol other than the null, FILE and SECTION entries."""
    with open(path, "rb") as f:
        data = f.read()
    if len(data) < _EHDR.size or data[:4] != b"\x7fELF" or data[4] != 2 or data[5] != 1:
        raise GnThinltoError(f"{path}: not a little-endian ELF64 object")
    fields = _EHDR.unpack_from(data)
    shoff, shentsize, shnum = fields[6], fields[11], fields[12]
    for i in range(shnum):
        off = shoff + i * shentsize
        if off + _SHDR.size > len(data):
            raise GnThinltoError(f"{path}: section header {i} at offset {off} is truncated")
        sh = _SHDR.unpack_from(data, off)
        if sh[1] != SectionType.SYMTAB:
            continue
        sym_off, sym_size = sh[4], sh[5]
        if sym_off + sym_size > len(data):
            raise GnThinltoError(f"{path}: .symtab at offset {sym_off} ({sym_size} bytes) is truncated")
        for j in range(1, sym_size // _SYM.size):
            _name, info, _other, _shndx, _value, _size = _SYM.unpack_from(data, sym_off + j * _SYM.size)
            if info & 0xF not in (SymbolType.FILE, SymbolType.SECTION):
                return True
    return False
