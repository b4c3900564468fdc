"""The ELF symbol probe that decides whether lld's regular-LTO object joins the final link."""

from __future__ import annotations

import struct
from pathlib import Path

import pytest

from gn_thinlto.steps.elf_probe import has_real_symbols
from gn_thinlto.errors import GnThinltoError

STT_FUNC, STT_FILE = 2, 4


def _elf(symbol_types: list[int]) -> bytes:
    """A minimal ELF64 LE object: header, a .symtab with a null entry plus one symbol per type, 2 sections."""
    syms = b"\0" * 24 + b"".join(struct.pack("<IBBHQQ", 1, (1 << 4) | t, 0, 1, 0, 0) for t in symbol_types)
    ehdr_size, shentsize = 64, 64
    symtab_off = ehdr_size
    shoff = symtab_off + len(syms)
    null_sh = b"\0" * shentsize
    symtab_sh = struct.pack("<IIQQQQIIQQ", 0, 2, 0, 0, symtab_off, len(syms), 0, 1, 8, 24)
    ident = b"\x7fELF\x02\x01\x01" + b"\0" * 9
    ehdr = struct.pack("<16sHHIQQQIHHHHHH", ident, 1, 62, 1, 0, 0, shoff, 0, ehdr_size, 0, 0, shentsize, 2, 0)
    return ehdr + syms + null_sh + symtab_sh


def test_only_file_symbol_means_empty(tmp_path: Path) -> None:
    p = tmp_path / "a.o"
    p.write_bytes(_elf([STT_FILE]))
    assert not has_real_symbols(p)
    p.write_bytes(_elf([STT_FILE, STT_FUNC]))
    assert has_real_symbols(p)


def test_rejects_non_elf_and_truncation(tmp_path: Path) -> None:
    p = tmp_path / "a.o"
    p.write_bytes(b"BC\xc0\xde")
    with pytest.raises(GnThinltoError, match="not an ELF file"):
        has_real_symbols(p)
    p.write_bytes(_elf([STT_FUNC])[:-40])
    with pytest.raises(GnThinltoError, match="truncated"):
        has_real_symbols(p)
