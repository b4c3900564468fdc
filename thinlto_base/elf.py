"""The one ELF reader: headers, sections, symbols, segments and the dynamic section of an ELF32/ELF64 file of
either byte order, read by offset (never the whole file: libLLVM is ~130 MB) and never past the file's end.

Layouts and constants are thinlto_base.elf_layout's. A file that is not ELF, or is cut short, raises
ElfFormatError saying what and at which offset, without the file's name: each caller names the file in its own
error (the build step's, `gn-thinlto parity`'s, the remote toolchain's). Standard library only: build steps read
objects with it under `python -S`.
"""

from __future__ import annotations

import os
import struct
from collections.abc import Iterator
from typing import BinaryIO

from thinlto_base.elf_layout import (
    IDENT_SIZE,
    LAYOUTS,
    MAGIC,
    DynamicTag,
    Header,
    Layout,
    Section,
    SectionType,
    Segment,
    SegmentType,
    Symbol,
)

MAX_DYNAMIC_ENTRIES = 1 << 16


class ElfFormatError(ValueError):
    """Not an ELF file, or one whose headers point past its end (the message names the offset)."""


class NotElfError(ElfFormatError):
    """The file does not start with an ELF identification (a script, a text file, too short)."""

    def __init__(self) -> None:
        super().__init__("not an ELF file")


class ElfFile:
    """An open ELF file. Use as a context manager: `with ElfFile.open(path) as elf: …`."""

    def __init__(self, f: BinaryIO) -> None:
        self._f = f
        self._size = os.fstat(f.fileno()).st_size
        if self._size < IDENT_SIZE:
            raise NotElfError
        ident = self.read(0, IDENT_SIZE, "e_ident")
        if ident[:4] != MAGIC:
            raise NotElfError
        layout = LAYOUTS.get((ident[4], ident[5]))
        if layout is None:
            raise ElfFormatError(f"unknown ELF class {ident[4]} or byte order {ident[5]}")
        self.elf_class, self.data = ident[4], ident[5]
        self.layout: Layout = layout
        self.header = Header(*self._unpack(layout.header, IDENT_SIZE, "ELF header"))

    @classmethod
    def open(cls, path: str | os.PathLike[str]) -> ElfFile:
        f = open(path, "rb")
        try:
            return cls(f)
        except BaseException:
            f.close()
            raise

    def __enter__(self) -> ElfFile:
        return self

    def __exit__(self, *exc: object) -> None:
        self._f.close()

    def read(self, offset: int, size: int, what: str) -> bytes:
        """SIZE bytes at OFFSET; ElfFormatError naming WHAT when they run past the end of the file."""
        if offset < 0 or size < 0 or offset + size > self._size:
            raise ElfFormatError(f"truncated ELF file: {what} at offset {offset} ({size} bytes) runs past the end "
                                 f"of the file ({self._size} bytes)")
        self._f.seek(offset)
        data = self._f.read(size)
        if len(data) != size:  # the file shrank while read
            raise ElfFormatError(f"truncated ELF file: {what} at offset {offset}")
        return data

    def _unpack(self, s: struct.Struct, offset: int, what: str) -> tuple[int, ...]:
        return s.unpack(self.read(offset, s.size, what))

    # sections and symbols

    def sections(self) -> list[Section]:
        h, s = self.header, self.layout.section
        if h.shnum and h.shentsize < s.size:
            raise ElfFormatError(f"section header entries of {h.shentsize} bytes are too small")
        table = self.read(h.shoff, h.shentsize * h.shnum, "section headers") if h.shnum else b""
        return [Section(*s.unpack_from(table, i * h.shentsize)) for i in range(h.shnum)]

    def content(self, section: Section, what: str = "section") -> bytes:
        return b"" if section.type == SectionType.NOBITS else self.read(section.offset, section.size, what)

    def section_names(self, sections: list[Section]) -> list[str]:
        index = self.header.shstrndx
        table = self.content(sections[index], "section name table") if index < len(sections) else b""
        return [string(table, s.name) for s in sections]

    def symbols(self, sections: list[Section], table: Section) -> Iterator[tuple[str, Symbol]]:
        """(name, symbol) of every entry of symbol table section TABLE but the null entry 0."""
        s, order = self.layout.symbol, self.layout.symbol_order
        data = self.content(table, "symbol table")
        names = self.content(sections[table.link], "symbol name table") if table.link < len(sections) else b""
        for pos in range(s.size, len(data) - s.size + 1, s.size):
            raw = s.unpack_from(data, pos)
            sym = Symbol(*(raw[i] for i in order))
            yield string(names, sym.name), sym

    # segments and the dynamic section

    def segments(self) -> list[Segment]:
        h, s, order = self.header, self.layout.segment, self.layout.segment_order
        if h.phnum and h.phentsize < s.size:
            raise ElfFormatError(f"program header entries of {h.phentsize} bytes are too small")
        table = self.read(h.phoff, h.phentsize * h.phnum, "program headers") if h.phnum else b""
        out = []
        for i in range(h.phnum):
            raw = s.unpack_from(table, i * h.phentsize)
            out.append(Segment(*(raw[j] for j in order)))
        return out

    def dynamic(self, segments: list[Segment]) -> list[tuple[int, int]]:
        """(d_tag, d_val) of PT_DYNAMIC up to DT_NULL; none for a static file."""
        seg = next((p for p in segments if p.type == SegmentType.DYNAMIC), None)
        if seg is None:
            return []
        s = self.layout.dynamic
        count = min(seg.filesz // s.size, MAX_DYNAMIC_ENTRIES)
        data = self.read(seg.offset, count * s.size, "PT_DYNAMIC")
        out = []
        for i in range(count):
            tag, value = s.unpack_from(data, i * s.size)
            if tag == DynamicTag.NULL:
                break
            out.append((tag, value))
        return out

    def at_address(self, segments: list[Segment], vaddr: int, size: int, what: str) -> bytes:
        """SIZE bytes (fewer at a segment's end) at virtual address VADDR of a PT_LOAD segment."""
        for p in segments:
            if p.type == SegmentType.LOAD and p.vaddr <= vaddr < p.vaddr + p.filesz:
                return self.read(p.offset + vaddr - p.vaddr, min(size, p.vaddr + p.filesz - vaddr), what)
        raise ElfFormatError(f"{what} address {vaddr:#x} is in no PT_LOAD segment")


def string(table: bytes, offset: int) -> str:
    """The NUL-terminated string at OFFSET of a string table (undecodable bytes replaced)."""
    if offset >= len(table):
        return ""
    end = table.find(b"\0", offset)
    return table[offset:end if end >= 0 else len(table)].decode("utf-8", "replace")
