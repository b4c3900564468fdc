"""ELF's on-disk layouts and constants, from the System V gABI (ELF32 and ELF64, either byte order): the tables
thinlto_base.elf reads with, kept apart from the reading (as pyelftools keeps its structs apart from its
readers). Standard library only."""

from __future__ import annotations

import enum
import struct
from dataclasses import dataclass
from typing import NamedTuple

MAGIC = b"\x7fELF"
IDENT_SIZE = 16  # e_ident: magic, EI_CLASS (4), EI_DATA (5), version, OS ABI, padding
CLASS32, CLASS64 = 1, 2  # e_ident[EI_CLASS]
DATA_LSB, DATA_MSB = 1, 2  # e_ident[EI_DATA]


class FileType(enum.IntEnum):  # e_type
    REL = 1
    EXEC = 2
    DYN = 3


class SectionType(enum.IntEnum):  # sh_type (the ones read here)
    SYMTAB = 2
    NOBITS = 8
    DYNSYM = 11


class SymbolType(enum.IntEnum):  # ELF_ST_TYPE(st_info) = st_info & 0xf
    NOTYPE = 0
    FUNC = 2
    SECTION = 3
    FILE = 4
    GNU_IFUNC = 10


class SegmentType(enum.IntEnum):  # p_type (the ones read here)
    LOAD = 1
    DYNAMIC = 2
    INTERP = 3


class DynamicTag(enum.IntEnum):  # d_tag (the ones read here)
    NULL = 0
    NEEDED = 1
    STRTAB = 5
    STRSZ = 10
    SONAME = 14
    RPATH = 15
    RUNPATH = 29


SHF_ALLOC = 0x2
SHN_UNDEF = 0


class Header(NamedTuple):  # Elf{32,64}_Ehdr after e_ident
    type: int
    machine: int
    version: int
    entry: int
    phoff: int
    shoff: int
    flags: int
    ehsize: int
    phentsize: int
    phnum: int
    shentsize: int
    shnum: int
    shstrndx: int


class Section(NamedTuple):  # Elf{32,64}_Shdr
    name: int
    type: int
    flags: int
    addr: int
    offset: int
    size: int
    link: int
    info: int
    addralign: int
    entsize: int


class Symbol(NamedTuple):  # Elf{32,64}_Sym, in one order for both classes (their field orders differ on disk)
    name: int
    info: int
    other: int
    shndx: int
    value: int
    size: int


class Segment(NamedTuple):  # Elf{32,64}_Phdr, in one order for both classes
    type: int
    flags: int
    offset: int
    vaddr: int
    paddr: int
    filesz: int
    memsz: int
    align: int


@dataclass(frozen=True)
class Layout:
    """The struct formats of one ELF class and byte order; `*_order`: the on-disk position of each NamedTuple field
    (ELF32 places st_value/st_size and p_flags elsewhere than ELF64)."""

    header: struct.Struct
    section: struct.Struct
    symbol: struct.Struct
    symbol_order: tuple[int, ...]
    segment: struct.Struct
    segment_order: tuple[int, ...]
    dynamic: struct.Struct  # d_tag (signed), d_val


def _layout(elf_class: int, data: int) -> Layout:
    e = "<" if data == DATA_LSB else ">"
    if elf_class == CLASS32:
        return Layout(struct.Struct(e + "HHIIIIIHHHHHH"), struct.Struct(e + "IIIIIIIIII"),
                      # on disk: st_name st_value st_size st_info st_other st_shndx
                      struct.Struct(e + "IIIBBH"), (0, 3, 4, 5, 1, 2),
                      # on disk: p_type p_offset p_vaddr p_paddr p_filesz p_memsz p_flags p_align
                      struct.Struct(e + "IIIIIIII"), (0, 6, 1, 2, 3, 4, 5, 7),
                      struct.Struct(e + "iI"))
    return Layout(struct.Struct(e + "HHIQQQIHHHHHH"), struct.Struct(e + "IIQQQQIIQQ"),
                  struct.Struct(e + "IBBHQQ"), (0, 1, 2, 3, 4, 5),
                  struct.Struct(e + "IIQQQQQQ"), (0, 1, 2, 3, 4, 5, 6, 7),
                  struct.Struct(e + "qQ"))


LAYOUTS = {(c, d): _layout(c, d) for c in (CLASS32, CLASS64) for d in (DATA_LSB, DATA_MSB)}
