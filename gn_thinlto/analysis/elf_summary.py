"""What a linked ELF binary holds, for comparing two builds: its defined functions with their sizes, its
sections' sizes and its dynamic symbols.

Read by thinlto_base.elf (never past the file's end): a truncated or foreign file is an ElfError naming the
offset.
"""

from __future__ import annotations

import os
from collections import Counter
from dataclasses import dataclass

from gn_thinlto.errors import GnThinltoError, reason
from thinlto_base.elf import ElfFile, ElfFormatError
from thinlto_base.elf_layout import SHF_ALLOC, SHN_UNDEF, FileType, SectionType, SymbolType


class ElfError(GnThinltoError):
    """A file that is not a readable ELF binary, with the offset where reading failed."""


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
    """EXEC or DYN for a linked ELF file, else None (objects, other files, unreadable ones)."""
    try:
        with ElfFile.open(path) as elf:
            kind = elf.header.type
    except (OSError, ElfFormatError):
        return None
    return FileType(kind) if kind in (FileType.EXEC, FileType.DYN) else None


def summarize(path: str | os.PathLike[str]) -> ElfSummary:
    """Read PATH's functions, sections and dynamic symbols; ElfError when it is not a readable ELF file."""
    sections: dict[str, int] = {}
    functions: Counter[tuple[str, int]] = Counter()
    dynamic: set[str] = set()
    stripped = True
    dw_ref = False
    try:
        with ElfFile.open(path) as elf:
            headers = elf.sections()
            for sh, name in zip(headers, elf.section_names(headers)):
                if sh.flags & SHF_ALLOC:
                    sections[name] = sections.get(name, 0) + sh.size
                if sh.type == SectionType.SYMTAB:
                    stripped = False
                    for n, sym in elf.symbols(headers, sh):
                        if sym.shndx == SHN_UNDEF:
                            continue
                        if sym.info & 0xF in (SymbolType.FUNC, SymbolType.GNU_IFUNC):
                            functions[(n, sym.size)] += 1
                        dw_ref = dw_ref or n.startswith("DW.ref.")
                elif sh.type == SectionType.DYNSYM:
                    dynamic.update(f"{n} {'undefined' if sym.shndx == SHN_UNDEF else 'defined'}"
                                   for n, sym in elf.symbols(headers, sh))
    except ElfFormatError as e:
        raise ElfError(f"{os.fspath(path)}: {e}") from e
    except OSError as e:
        raise ElfError(f"{os.fspath(path)}: {reason(e)}") from e
    return ElfSummary(functions, sections, frozenset(dynamic), stripped, dw_ref)
