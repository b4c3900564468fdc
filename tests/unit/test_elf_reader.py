"""thinlto_base.elf, the one ELF reader, against llvm-nm and llvm-readelf on objects of both classes and byte
orders (clang-19 compiles for each target without a sysroot) and on a real shared library."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from thinlto_base.elf import ElfFile, ElfFormatError
from thinlto_base.elf_layout import DynamicTag, SectionType, SymbolType

pytestmark = pytest.mark.integration
SOURCE = "int gx_data = 3;\nstatic int gx_local(int x) { return x * gx_data; }\nint gx_func(int x) { return gx_local(x) + 1; }\n"
LIBLLVM = Path("/usr/lib/x86_64-linux-gnu/libLLVM.so.19.1")  # Debian's llvm-19
TARGETS = ("x86_64-linux-gnu", "i386-linux-gnu", "powerpc64-linux-gnu", "mips-linux-gnu")  # 64/32 LE, 64/32 BE


@pytest.mark.parametrize("target", TARGETS)
def test_symbols_and_sections_agree_with_llvm(tmp_path: Path, target: str) -> None:
    src = tmp_path / "a.c"
    src.write_text(SOURCE)
    obj = tmp_path / "a.o"
    subprocess.run(["clang-19", f"--target={target}", "-O1", "-fno-pic", "-c", str(src), "-o", str(obj)], check=True)
    nm = subprocess.run(["llvm-nm-19", "--defined-only", "--format=just-symbols", str(obj)], capture_output=True,
                        text=True, check=True).stdout.split()
    with ElfFile.open(obj) as elf:
        sections = elf.sections()
        names = elf.section_names(sections)
        symbols = {n: s for t in sections if t.type == SectionType.SYMTAB for n, s in elf.symbols(sections, t)}
    assert ".text" in names and ".symtab" in names
    assert {n for n, s in symbols.items() if s.shndx and s.info & 0xF != SymbolType.FILE and n} >= set(nm) - {""}
    assert symbols["gx_func"].info & 0xF == SymbolType.FUNC and symbols["gx_data"].size == 4


def test_the_dynamic_section_of_a_real_library() -> None:
    lib = LIBLLVM
    readelf = subprocess.run(["llvm-readelf-19", "-d", str(lib)], capture_output=True, text=True, check=True).stdout
    with ElfFile.open(lib) as elf:
        segments = elf.segments()
        tags = dict(elf.dynamic(segments))
        table = elf.at_address(segments, tags[DynamicTag.STRTAB], tags[DynamicTag.STRSZ], "DT_STRTAB")
    soname = table[tags[DynamicTag.SONAME]:].split(b"\0", 1)[0].decode()
    assert f"Library soname: [{soname}]" in readelf


def test_foreign_and_truncated_files_say_what_and_where(tmp_path: Path) -> None:
    (tmp_path / "text").write_text("#!/bin/sh\n")
    with pytest.raises(ElfFormatError, match="not an ELF file"):
        ElfFile.open(tmp_path / "text")
    (tmp_path / "short").write_bytes(b"\x7fELF")
    with pytest.raises(ElfFormatError, match="not an ELF file"):
        ElfFile.open(tmp_path / "short")
    data = LIBLLVM.read_bytes()[:4096]
    (tmp_path / "cut").write_bytes(data[:200])
    with ElfFile.open(tmp_path / "cut") as elf, pytest.raises(ElfFormatError, match=r"truncated.*offset \d+"):
        elf.sections()
