"""`gn-thinlto parity`: comparing two builds' functions, sections and dynamic symbols (on ELF summaries)."""

from __future__ import annotations

import struct
from collections import Counter
from pathlib import Path

import pytest

from gn_thinlto.analysis.elf_summary import ElfError, ElfSummary, linked_type, summarize
from gn_thinlto.analysis.parity import Verdict, compare, linked_binaries


def _summary(functions: dict[str, int], sections: dict[str, int] | None = None, dynamic: tuple[str, ...] = (),
             dw_ref: bool = False) -> ElfSummary:
    return ElfSummary(Counter(functions.items()), sections or {".text": sum(functions.values())},
                      frozenset(dynamic), False, dw_ref)


def test_equal_builds_are_at_parity() -> None:
    r = compare("app", _summary({"main": 10, "f": 20}), _summary({"main": 10, "f": 20}))
    assert r.at_parity and r.functions.verdict is Verdict.EQUAL
    assert r.line() == ("app: at parity: 2 functions equal (30 bytes); 1 sections equal (30 bytes); "
                        "dynamic symbols equal")


def test_differing_functions_are_listed_worst_first_and_limited_to_ten() -> None:
    inproc = {f"f{i}": 100 for i in range(15)}
    graph = {f"f{i}": 100 + i for i in range(15)}
    r = compare("app", _summary(inproc), _summary(graph))
    assert not r.at_parity and r.functions.verdict is Verdict.DIFFERENT
    worst = r.line().split("worst: ", 1)[1].split(")", 1)[0].split(", ")
    assert worst[:2] == ["f14 100→114", "f13 100→113"] and len(worst) == 10


def test_missing_functions_and_tolerance() -> None:
    r = compare("app", _summary({"main": 100, "gone": 5}), _summary({"main": 101}), tolerance=2)
    assert not r.at_parity and "gone 5→absent" in r.line()
    r = compare("app", _summary({"main": 100}), _summary({"main": 101}), tolerance=2)
    assert r.at_parity and r.functions.verdict is Verdict.WITHIN and "within tolerance" in r.line()
    assert not compare("app", _summary({"main": 100}), _summary({"main": 103}), tolerance=2).at_parity


def test_dynamic_symbols_must_match() -> None:
    r = compare("lib.so", _summary({"f": 1}, dynamic=("f defined", "g defined")), _summary({"f": 1}, dynamic=("f defined",)))
    assert not r.at_parity and "dynamic symbols differ: -g defined" in r.line()


def test_lld_in_process_dw_ref_copies_are_accounted_for_exactly() -> None:
    """lld keeps one DW.ref personality pointer per in-process LTO object (it ignores their COMDATs): 8 bytes of
    .data and a 24-byte dynamic relocation per extra copy; other differences still count."""
    def summary(data: int, rela: int) -> ElfSummary:
        return _summary({"f": 1}, {".text": 1, ".data": data, ".rela.dyn": rela, ".relro_padding": data}, dw_ref=True)

    r = compare("app", summary(40, 672), summary(24, 624))
    assert r.at_parity and "2 more DW.ref COMDAT copies" in r.line()
    assert not compare("app", summary(40, 672), summary(24, 600)).at_parity  # relocations do not match the copies
    assert not compare("app", summary(44, 672), summary(24, 624)).at_parity  # not whole pointers
    assert compare("app", summary(40, 600), summary(32, 600)).at_parity  # no dynamic relocation (static personality)


def _elf(path: Path, kind: int) -> Path:
    """A minimal ELF64 LE file of type KIND with a symbol table holding one function and one DW.ref object."""
    strtab = b"\0main\0DW.ref.x\0"
    shstrtab = b"\0.text\0.symtab\0.strtab\0.shstrtab\0"
    syms = (bytes(24) + struct.pack("<IBBHQQ", 1, 0x12, 0, 1, 0x1000, 42)
            + struct.pack("<IBBHQQ", 6, 0x01, 0, 1, 0x1040, 8))
    text = bytes(64)
    body = text + syms + strtab + shstrtab
    off_text, off_sym = 64, 64 + len(text)
    off_str, off_shstr = off_sym + len(syms), off_sym + len(syms) + len(strtab)
    shoff = 64 + len(body)
    shdrs = [bytes(64),
             struct.pack("<IIQQQQIIQQ", 1, 1, 0x6, 0x1000, off_text, len(text), 0, 0, 16, 0),
             struct.pack("<IIQQQQIIQQ", 7, 2, 0, 0, off_sym, len(syms), 3, 1, 8, 24),
             struct.pack("<IIQQQQIIQQ", 15, 3, 0, 0, off_str, len(strtab), 0, 0, 1, 0),
             struct.pack("<IIQQQQIIQQ", 23, 3, 0, 0, off_shstr, len(shstrtab), 0, 0, 1, 0)]
    ehdr = struct.pack("<16sHHIQQQIHHHHHH", b"\x7fELF\x02\x01\x01" + bytes(9), kind, 62, 1, 0, 0, shoff, 0, 64, 0, 0,
                       64, len(shdrs), 4)
    path.write_bytes(ehdr + body + b"".join(shdrs))
    return path


def test_the_elf_reader(tmp_path: Path) -> None:
    s = summarize(_elf(tmp_path / "app", 3))
    assert s.functions == Counter({("main", 42): 1}) and s.sections == {".text": 64}
    assert s.dw_ref and not s.stripped and s.dynamic == frozenset()
    assert linked_type(tmp_path / "app") is not None and linked_type(_elf(tmp_path / "a.o", 1)) is None
    data = (tmp_path / "app").read_bytes()
    (tmp_path / "cut").write_bytes(data[: len(data) - 100])
    with pytest.raises(ElfError, match="offset"):
        summarize(tmp_path / "cut")
    (tmp_path / "text").write_text("not elf")
    with pytest.raises(ElfError, match="not an ELF file"):
        summarize(tmp_path / "text")


def test_binaries_are_found_outside_object_trees(tmp_path: Path) -> None:
    _elf(tmp_path / "app", 3)
    (tmp_path / "exe.unstripped").mkdir()
    _elf(tmp_path / "exe.unstripped" / "app", 2)
    (tmp_path / "obj").mkdir()
    _elf(tmp_path / "obj" / "tool", 3)
    _elf(tmp_path / "a.o", 1)
    assert list(linked_binaries(tmp_path)) == ["app", "exe.unstripped/app"]
