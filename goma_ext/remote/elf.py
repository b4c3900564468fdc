"""The ELF facts the dynamic loader acts on: class, machine, interpreter, DT_NEEDED, DT_RPATH/DT_RUNPATH, DT_SONAME.

Read by thinlto_base.elf, by offset, never the whole file (libLLVM is ~130 MB): the header, the program headers,
the PT_DYNAMIC segment and the string table it points to (a virtual address, mapped to a file offset through the
PT_LOAD segments)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from goma_ext.reapi.errors import InputError
from thinlto_base.elf import ElfFile, ElfFormatError, NotElfError
from thinlto_base.elf_layout import DynamicTag, FileType, SegmentType


class ElfError(InputError):
    """A file that is not an ELF object the loader could use, with the file and what is wrong."""


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


def read_dynamic(path: Path) -> DynamicInfo:
    """The dynamic-linking facts of `path`; ElfError for anything that is not an ELF executable or library."""
    try:
        with ElfFile.open(path) as elf:
            if elf.header.type not in (FileType.EXEC, FileType.DYN):
                raise ElfError(f"{path}: ELF type {elf.header.type} is neither an executable nor a shared object")
            segments = elf.segments()
            interp = next((elf.read(p.offset, p.filesz, "PT_INTERP").split(b"\0", 1)[0].decode()
                           for p in segments if p.type == SegmentType.INTERP), None)
            entries = elf.dynamic(segments)
            tags = dict(entries)
            table = b""
            if DynamicTag.STRTAB in tags:
                table = elf.at_address(segments, tags[DynamicTag.STRTAB], tags.get(DynamicTag.STRSZ, 0), "DT_STRTAB")
            elf_class, machine = elf.elf_class, elf.header.machine
    except NotElfError as e:
        raise ElfError(f"{path}: {e} (a script or wrapper cannot travel as a toolchain)") from e
    except ElfFormatError as e:
        raise ElfError(f"{path}: {e}") from e
    except OSError as e:
        raise ElfError(f"{path}: {e.strerror}") from e
    except UnicodeDecodeError as e:
        raise ElfError(f"{path}: malformed ELF file ({e})") from e

    def string(at: int) -> str:
        if at >= len(table):
            raise ElfError(f"{path}: dynamic string offset {at} is past the string table")
        end = table.find(b"\0", at)
        try:
            return table[at:end if end >= 0 else len(table)].decode()
        except UnicodeDecodeError as e:
            raise ElfError(f"{path}: malformed ELF file ({e})") from e

    def values(tag: int) -> list[str]:
        return [string(v) for t, v in entries if t == tag]

    def paths(tag: int) -> tuple[str, ...]:
        return tuple(p for v in values(tag) for p in v.split(":") if p)

    sonames = values(DynamicTag.SONAME)
    return DynamicInfo(
        elf_class=elf_class, machine=machine, interpreter=interp, needed=tuple(values(DynamicTag.NEEDED)),
        rpath=paths(DynamicTag.RPATH), runpath=paths(DynamicTag.RUNPATH), soname=sonames[0] if sonames else None,
    )
