"""ThinLTO index decoding and bitcode inspection on small real LLVM 19 / 22 files (see index_data/README.md)."""

from __future__ import annotations

from pathlib import Path

import pytest

from goma_ext.bitcode.objects import inspect, inspect_bytes
from goma_ext.errors import DecodeError, GomaExtError
from goma_ext.bitcode.index import imports_file_path, own_module_path, parse_index, read_index
from tests.unit.index_bitwriter import stream

DATA = Path(__file__).parent / "index_data"
VERSIONS = {19: 10, 22: 12}  # LLVM major -> summary (FS_VERSION) version


@pytest.mark.parametrize("llvm", sorted(VERSIONS))
def test_module_table_hashes_and_counts(llvm: int) -> None:
    ix = read_index(DATA / f"llvm{llvm}-a.o.thinlto.bc")
    assert ix.version == VERSIONS[llvm] and ix.bitcode_version == 2 and not ix.skip and not ix.empty
    paths = [m.path for m in ix.modules]
    assert paths[:2] == ["a.o", "b.o"] and paths[2].startswith("libd.a(c.o at ")
    assert [m.modid for m in ix.modules] == [0, 1, 2]
    assert all(len(m.hash or b"") == 20 and m.hash_hex == (m.hash or b"").hex() for m in ix.modules)
    assert dict(ix.summary_counts) == {"a.o": 2, "b.o": 1, paths[2]: 1}
    imports = (DATA / f"llvm{llvm}-a.o.imports").read_text().splitlines()
    assert list(ix.imported_paths("a.o")) == imports
    assert "WITH_GLOBAL_VALUE_DEAD_STRIPPING" in ix.flag_names


def test_module_hash_matches_the_object() -> None:
    for llvm in VERSIONS:
        ix = read_index(DATA / f"llvm{llvm}-a.o.thinlto.bc")
        info = inspect(DATA / f"llvm{llvm}-a.o")
        own = ix.own_module("out/a.o")
        assert own is not None and own.path == "a.o" and own.hash == info.module_hash


def test_llvm19_hash_words_known_value() -> None:
    # llvm-bcanalyzer-19 -dump: <HASH op0=3129652266 op1=2750572116 op2=511302750 op3=603432489 op4=1140178091/>
    a = read_index(DATA / "llvm19-a.o.thinlto.bc").modules[0]
    assert a.hash_hex == "".join(f"{w:08x}" for w in (3129652266, 2750572116, 511302750, 603432489, 1140178091))


@pytest.mark.parametrize("llvm", sorted(VERSIONS))
def test_skip_index(llvm: int) -> None:
    ix = read_index(DATA / f"llvm{llvm}-skip.thinlto.bc")
    assert ix.skip and ix.flags == 2 and ix.modules == () and ix.imported_paths() == ()


def test_listing_without_summaries_matches() -> None:
    full = read_index(DATA / "llvm22-a.o.thinlto.bc")
    fast = read_index(DATA / "llvm22-a.o.thinlto.bc", summaries=False)
    assert fast.modules == full.modules and fast.flags == full.flags and sum(fast.summary_counts.values()) == 0


def test_zero_byte_index_is_empty(tmp_path: Path) -> None:
    (tmp_path / "x.o.thinlto.bc").write_bytes(b"")
    ix = read_index(tmp_path / "x.o.thinlto.bc")
    assert ix.empty and not ix.skip and ix.modules == () and ix.version is None


def test_object_is_not_an_index() -> None:
    with pytest.raises(DecodeError, match="no MODULE_STRTAB_BLOCK"):
        read_index(DATA / "llvm19-a.o")


def test_missing_file_is_a_user_error(tmp_path: Path) -> None:
    with pytest.raises(GomaExtError, match="cannot read"):
        read_index(tmp_path / "nope.thinlto.bc")


def test_undefined_modid_in_summary_is_an_error() -> None:
    def module(w):  # MST with modid 0; a COMBINED record naming modid 7
        w.block(19, 3, lambda b: b.unabbrev(1, [0, ord("a")]))
        w.block(20, 4, lambda b: b.unabbrev(10, [10]).unabbrev(20, [0]).unabbrev(4, [1, 7, 0, 0]))

    with pytest.raises(DecodeError, match="module id 7") as info:
        parse_index(stream(lambda w: w.block(8, 3, module)), name="x.thinlto.bc")
    assert info.value.block_path == ("MODULE_BLOCK", "GLOBALVAL_SUMMARY_BLOCK")


def test_non_contiguous_modids_resolve_through_the_table() -> None:
    def module(w):
        w.block(19, 3, lambda b: b.unabbrev(1, [5, ord("x")]).unabbrev(1, [17, ord("y")]).unabbrev(2, [1, 2, 3, 4, 5]))
        w.block(20, 4, lambda b: b.unabbrev(10, [8]).unabbrev(20, [1]).unabbrev(5, [1, 17, 0, 0]).unabbrev(8, [2, 17, 0, 1]))

    ix = parse_index(stream(lambda w: w.block(8, 3, module)), name="x.thinlto.bc")
    assert [(m.modid, m.path, m.hash_hex) for m in ix.modules] == [
        (5, "x", ""), (17, "y", "0000000100000002000000030000000400000005")
    ]
    assert dict(ix.summary_counts) == {"x": 0, "y": 2}
    assert ix.imported_paths("x") == ("y",)


def test_hash_without_entry_is_an_error() -> None:
    data = stream(lambda w: w.block(8, 3, lambda m: m.block(19, 3, lambda b: b.unabbrev(2, [1, 2, 3, 4, 5]))))
    with pytest.raises(DecodeError, match="without a preceding"):
        parse_index(data)


def test_index_file_naming() -> None:
    assert own_module_path("obj/lib.a(x.o at 12).thinlto.bc") == "obj/lib.a(x.o at 12)"
    assert imports_file_path("obj/a.o.thinlto.bc") == "obj/a.o.imports"


@pytest.mark.parametrize("llvm", sorted(VERSIONS))
def test_inspect_thinlto_object(llvm: int) -> None:
    info = inspect(DATA / f"llvm{llvm}-a.o")
    assert info.is_bitcode and not info.wrapped and info.has_thinlto_summary and not info.is_index
    assert info.source_filename == "a.c" and info.triple == "x86_64-pc-linux-gnu"
    assert info.producer is not None and info.producer.startswith(f"LLVM{llvm}.")
    assert len(info.module_hash_hex) == 40 and info.module_count == 1


def test_inspect_wrapped_and_non_bitcode() -> None:
    wrapped = inspect(DATA / "llvm19-darwin-wrapped.o")
    assert wrapped.is_bitcode and wrapped.wrapped and wrapped.has_thinlto_summary
    assert wrapped.triple is not None and "apple" in wrapped.triple
    assert not inspect(DATA / "elf-head.o").is_bitcode
    assert not inspect_bytes(b"").is_bitcode
    index = inspect(DATA / "llvm19-a.o.thinlto.bc")
    assert index.is_bitcode and index.is_index and index.module_hash is None


def test_inspect_split_lto_unit() -> None:
    info = inspect(DATA / "llvm19-split-lto-unit.o")
    assert info.module_count == 2 and info.has_thinlto_summary and info.has_full_lto_summary
    # llvm-bcanalyzer-19 -dump: the first (ThinLTO) module's <HASH op0=4181067548 ...>
    assert info.module_hash_hex.startswith(f"{4181067548:08x}") and info.source_filename == "v.cc"


def test_value_guids_decode_the_same_in_both_layouts() -> None:
    """LLVM 19 writes a GUID as one VBR, LLVM 22 as two u32 halves; GUIDs are MD5-based, so equal."""
    old = read_index(DATA / "llvm19-a.o.thinlto.bc")
    new = read_index(DATA / "llvm22-a.o.thinlto.bc")
    assert old.guids["a.o"] == new.guids["a.o"] and old.guids["b.o"] == new.guids["b.o"]
    assert len(old.guids["a.o"]) == 2 and 4014738744300571210 in [g for gs in old.guids.values() for g in gs]
    assert not any(read_index(DATA / "llvm22-a.o.thinlto.bc", summaries=False).guids.values())


def test_non_character_path_is_a_located_error() -> None:
    data = stream(lambda w: w.block(8, 3, lambda m: m.block(19, 3, lambda b: b.unabbrev(1, [0, 300]))))
    with pytest.raises(DecodeError) as info:
        parse_index(data, name="x.thinlto.bc")
    assert info.value.file == "x.thinlto.bc" and info.value.block_path == ("MODULE_BLOCK", "MODULE_STRTAB_BLOCK")
