"""[partition] The regular-LTO module's partition edges: the setting, the link's --lto-partitions, the planner's
edges, the thin-link step's count, the bitcode block reader it sizes inputs with, and empty partitions."""

from __future__ import annotations

import dataclasses
import shutil
import struct
import subprocess
from pathlib import Path

import pytest

from gn_thinlto.errors import GnThinltoError
from gn_thinlto.plan import linkline, planner
from gn_thinlto.plan.config import AUTO_PARTITIONS, Config, parse_config
from gn_thinlto.plan.linkline import Refused
from gn_thinlto.steps import backend, partitions
from thinlto_base.bitcode_blocks import MODULE_BLOCK, regular_lto_bytes, top_level_blocks
from thinlto_base.keys import BackendJob
from thinlto_base.store import CacheStore
from thinlto_base.trust import Trust

from .test_plan import basic_graph


@pytest.mark.parametrize(("value", "parsed"), [("auto", "auto"), ("off", "off"), (False, "off"), (1, 1), (64, 64)])
def test_the_setting_takes_auto_off_or_a_number(value: object, parsed: object) -> None:
    assert parse_config({"lto_partitions": value}, "x.yaml").lto_partitions == parsed
    assert Config().lto_partitions == "auto"


@pytest.mark.parametrize("value", [0, 65, True, "many", 2.0, None])
def test_a_bad_setting_is_one_line_naming_the_key(value: object) -> None:
    with pytest.raises(GnThinltoError, match=r"^x.yaml: lto_partitions: expected auto, off or an integer 1-64"):
        parse_config({"lto_partitions": value}, "x.yaml")


LINK = ["clang++", "-fuse-ld=lld", "-flto=thin", "-fsanitize=cfi-vcall", "a.o", "-o", "app"]


def test_the_links_own_partitions_are_read_and_kept_from_the_thin_link() -> None:
    analysis = linkline.analyze([*LINK, "-Wl,--lto-partitions=4"])
    assert analysis.lto_partitions == 4 and analysis.split_lto_unit
    assert "-Wl,--lto-partitions=4" in analysis.thin_link_drop
    assert linkline.analyze([*LINK, "-Wl,-plugin-opt=lto-partitions=2"]).lto_partitions == 2
    assert linkline.analyze(LINK).lto_partitions == 0
    for bad in ("0", "x", "65"):
        with pytest.raises(Refused, match="regular-LTO partitions"):
            linkline.analyze([*LINK, f"-Wl,--lto-partitions={bad}"])


@pytest.fixture(scope="module")
def facts() -> planner._LinkFacts:
    """The basic workspace's `app` link, as the planner sees it, with split LTO units."""
    graph, _ = basic_graph()
    producers, rules = planner.producers_of(graph), planner.rules_of(graph)
    target = next(t for t in planner.link_targets(graph.project) if t.outputs[0] == "./app")
    f = planner._analyze(target, graph, Config(), producers, rules, planner.InputClassifier(graph, producers, rules))
    return dataclasses.replace(f, analysis=dataclasses.replace(f.analysis, split_lto_unit=True))


def _asking(f: planner._LinkFacts, n: int, split: bool = True) -> planner._LinkFacts:
    return dataclasses.replace(f, analysis=dataclasses.replace(f.analysis, lto_partitions=n, split_lto_unit=split))


def test_partition_edges_follow_the_setting_and_the_link(facts: planner._LinkFacts) -> None:
    count = planner._partition_count
    assert count(facts, Config()) == (AUTO_PARTITIONS, "auto")
    assert count(facts, Config(lto_partitions=3)) == (3, "fixed")
    assert count(facts, Config(lto_partitions="off")) == (0, "")
    assert count(_asking(facts, 5), Config()) == (5, "fixed")  # the link's own N wins over auto
    assert count(_asking(facts, 5), Config(lto_partitions=3)) == (5, "fixed")
    assert count(_asking(facts, 1), Config(lto_partitions="off")) == (0, "")
    assert count(_asking(facts, 0, split=False), Config()) == (0, "")  # no split LTO units: nothing to split
    with pytest.raises(Refused, match="--lto-partitions=2, which needs partition edges"):
        count(_asking(facts, 2), Config(lto_partitions="off"))
    with pytest.raises(Refused, match="without split LTO units"):
        count(_asking(facts, 2, split=False), Config())


def test_a_partition_edge_is_code_generation_of_its_bitcode(facts: planner._LinkFacts) -> None:
    edges = planner._partition_backends(facts, 2)
    assert [(b.bitcode, b.index, b.native) for b in edges] == [
        ("gn-thinlto/app/lto/part0.bc", "", "gn-thinlto/app/lto/part0.o"),
        ("gn-thinlto/app/lto/part1.bc", "", "gn-thinlto/app/lto/part1.o"),
    ]
    argv = edges[0].argv
    assert argv[:5] == (facts.compiler, "-c", "-x", "ir", "gn-thinlto/app/lto/part0.bc")
    assert argv[-3:] == ("-O2", "-Xclang", "-disable-llvm-passes")
    assert not any(a.startswith("-fthinlto-index") for a in argv) and argv.count("-O2") == 1


def _bitcode(*modules: int, wrapped: bool = False) -> bytes:
    """A bitcode file of top-level blocks: an IDENTIFICATION block before each MODULE of the given word counts."""
    out = b"BC\xc0\xde"
    for words in modules:
        for block, n in ((13, 5), (MODULE_BLOCK, words)):
            out += struct.pack("<II", 1 | block << 2 | 3 << 10, n) + bytes(4 * n)
    out += struct.pack("<II", 1 | 23 << 2 | 3 << 10, 2) + bytes(8)  # STRTAB
    if wrapped:
        out = struct.pack("<5I", 0x0B17C0DE, 0, 20, len(out), 7) + out
    return out


@pytest.mark.parametrize("wrapped", [False, True])
def test_block_sizes_are_read_from_the_headers(tmp_path: Path, wrapped: bool) -> None:
    path = tmp_path / "x.o"
    path.write_bytes(_bitcode(100, 7, wrapped=wrapped))
    with path.open("rb") as f:
        assert top_level_blocks(f) == [(13, 20), (8, 400), (13, 20), (8, 28), (23, 8)]
    assert regular_lto_bytes(path) == 28
    path.write_bytes(_bitcode(100))
    assert regular_lto_bytes(path) == 0
    path.write_bytes(b"\x7fELF" + bytes(60))
    assert regular_lto_bytes(path) == 0


def test_the_regular_part_of_a_real_object_is_what_llvm_bcanalyzer_reports(tmp_path: Path) -> None:
    clang, bcanalyzer = shutil.which("clang++-19"), shutil.which("llvm-bcanalyzer-19")
    assert clang and bcanalyzer, "clang-19 and llvm-19 are the project's toolchain"
    src = tmp_path / "v.cc"
    src.write_text("struct A { virtual int f(); }; int A::f() { return 1; } int g(A* a) { return a->f(); }\n")
    obj = tmp_path / "v.o"
    subprocess.run([clang, "-c", "-O2", "-flto=thin", "-fvisibility=hidden", "-fwhole-program-vtables",
                    "-fsplit-lto-unit", str(src), "-o", str(obj)], check=True)
    dump = subprocess.run([bcanalyzer, "-dump", str(obj)], capture_output=True, text=True, check=True).stdout
    words = [int(line.split("NumWords=")[1].split()[0]) for line in dump.splitlines()
             if line.startswith("<MODULE_BLOCK")]
    assert len(words) == 2 and regular_lto_bytes(obj) == 4 * words[1] > 0


def test_a_tu_without_external_definitions_is_one_regular_lto_module_counted_whole(tmp_path: Path) -> None:
    """ThinLTOBitcodeWriter writes a split-LTO-unit TU that defines nothing externally visible (a test in an
    anonymous namespace) as a regular-LTO module: its one module counts, as llvm-bcanalyzer's summary block says.
    Without split LTO units, and for a TU that merely contains the flag's name, it does not."""
    clang, bcanalyzer = shutil.which("clang++-19"), shutil.which("llvm-bcanalyzer-19")
    assert clang and bcanalyzer, "clang-19 and llvm-19 are the project's toolchain"
    src = tmp_path / "t.cc"
    src.write_text("namespace { struct A { virtual int f(); }; int A::f() { return 1; } }\n"
                   "__attribute__((noinline)) static int ThinLTO(A* a) { return a->f(); }\n"
                   "static int r = ThinLTO(new A);\n")  # -g: the name in the metadata strings, as bytes
    flags = ["-g", "-c", "-O2", "-flto=thin", "-fvisibility=hidden", "-fwhole-program-vtables", str(src)]
    objs = {}
    for name, extra in (("split", ["-fsplit-lto-unit"]), ("thin", ["-fno-split-lto-unit"])):
        objs[name] = tmp_path / f"{name}.o"
        subprocess.run([clang, *flags, *extra, "-o", str(objs[name])], check=True)
    dump = subprocess.run([bcanalyzer, "-dump", str(objs["split"])], capture_output=True, text=True,
                          check=True).stdout
    words = [int(line.split("NumWords=")[1].split()[0]) for line in dump.splitlines()
             if line.startswith("<MODULE_BLOCK")]
    assert len(words) == 1 and "<FULL_LTO_GLOBALVAL_SUMMARY_BLOCK" in dump
    assert regular_lto_bytes(objs["split"]) == 4 * words[0]
    thin = subprocess.run([bcanalyzer, "-dump", str(objs["thin"])], capture_output=True, text=True,
                          check=True).stdout
    assert "<GLOBALVAL_SUMMARY_BLOCK" in thin and b"ThinLTO" in objs["thin"].read_bytes()
    assert regular_lto_bytes(objs["thin"]) == 0


def test_auto_takes_one_partition_per_four_mib_of_split_lto_unit_bitcode(tmp_path: Path,
                                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    assert [partitions.auto_count(n << 20, 8) for n in (0, 1, 4, 5, 12, 31, 100)] == [1, 1, 1, 2, 3, 8, 8]
    files = []
    for name in ("a.o", "b.o"):
        (tmp_path / name).write_bytes(b"")
        files.append(str(tmp_path / name))
    monkeypatch.setattr(partitions, "regular_lto_bytes", lambda path: 5 << 20)
    assert partitions.count({"partitions": 8, "partition_mode": "auto", "bitcode": files})[0] == 3
    assert partitions.count({"partitions": 2, "partition_mode": "auto", "bitcode": files})[0] == 2
    assert partitions.count({"partitions": 4, "partition_mode": "fixed", "bitcode": files}) == (4, "fixed: 4")
    assert partitions.count({"partitions": 0, "bitcode": files})[0] == 0


def test_an_unused_partition_compiles_to_an_empty_object_without_a_compiler(tmp_path: Path) -> None:
    bitcode, out = tmp_path / "part3.bc", tmp_path / "part3.o"
    bitcode.write_bytes(b"")
    out.write_bytes(b"stale")
    job = BackendJob.parse(["/nonexistent/clang", "-c", "-x", "ir", str(bitcode), "-o", str(out), "-O2"])
    store = CacheStore(str(tmp_path / "cache"), Trust(()))

    def runner(argv: list[str]) -> int:
        raise AssertionError(f"ran {argv}")

    assert backend.serve(job, store, tmp_path / "log", (), runner) == (0, False)
    assert out.read_bytes() == b""
    assert not (tmp_path / "cache").exists() or not any((tmp_path / "cache").rglob("*.o"))


def test_a_missing_llvm_tool_names_the_setting(tmp_path: Path) -> None:
    with pytest.raises(GnThinltoError, match=r"llvm-split beside the link driver .* lto_partitions: off"):
        partitions.llvm_tool(str(tmp_path / "clang++"), "llvm-split")
    assert partitions.llvm_tool("clang++-19", "llvm-split").endswith("/llvm-19/bin/llvm-split")


IR = """\
define hidden void @__typeid__ZTS5Shape_0_branch_funnel(ptr nest %0, ...) local_unnamed_addr #1 {
  musttail call void (...) @llvm.icall.branch.funnel(ptr %0, ptr getelementptr (i8, ptr @_ZTV2Sq, i64 16), \
ptr nonnull @_ZNK2Sq4areaEv, ptr getelementptr (i8, ptr @"_ZTV\\5CQ", i64 16), ptr nonnull @f, ...) #3
  ret void
}
define hidden void @other(ptr %0) {
  call void @__typeid__ZTS5Shape_0_branch_funnel(ptr nest %0)
  ret void
}
declare void @llvm.icall.branch.funnel(...)
"""


def test_a_funnels_vtables_are_its_calls_every_other_operand_after_the_first() -> None:
    assert partitions.funnel_vtables(IR) == {"__typeid__ZTS5Shape_0_branch_funnel": {"_ZTV2Sq", "_ZTV\\Q"}}
    assert partitions.funnel_vtables("define void @f() {\n  ret void\n}\n") == {}


def test_a_corrupt_module_block_is_not_walked_past_its_end() -> None:
    """The walk of a module's entries stops with None on data that does not parse, without reading or counting
    past the block (a record claiming 2**40 operands, an abbreviation that was never defined, a cut-off block)."""
    from thinlto_base.bitcode_blocks import sub_blocks

    def bits(*fields: tuple[int, int]) -> bytes:
        value, pos = 0, 0
        for v, width in fields:
            value |= v << pos
            pos += width
        return value.to_bytes((pos + 7) // 8, "little")

    huge = [((1 << 40 >> 5 * k) & 31 | (32 if k < 8 else 0), 6) for k in range(9)]  # 2**40 in VBR6 chunks
    assert sub_blocks(bits((3, 3), (1, 6), *huge), 3) is None  # UNABBREV_RECORD with 2**40 operands
    assert sub_blocks(bits((4, 3)), 3) is None  # abbreviation 4, never defined
    assert sub_blocks(bits((3, 3), (1, 6), (5, 6)), 3) is None  # 5 operands, none there
    assert sub_blocks(bits((1, 3), (20, 8), (3, 4)), 3) is None  # a sub-block header cut off
    assert sub_blocks(bits((1, 3), (20, 8), (3, 4), (0, 17), (0, 32), (0, 3)), 3) == [20]  # well formed
    assert sub_blocks(bits((3, 3), *[(32, 6)] * 20), 3) is None  # a VBR6 code wider than 64 bits
    abbrev = ((2, 3), (2, 5), (0, 1), (3, 3), (1, 1), (0, 8))  # DEFINE_ABBREV [array of literal 0]: no bits each
    assert sub_blocks(bits(*abbrev, (4, 3), (31, 6)), 3) is None


def test_a_block_longer_than_its_file_is_not_read(tmp_path: Path) -> None:
    """A module header claiming 16 GiB in a small file: the file is not bitcode to size (no read of 16 GiB)."""
    path = tmp_path / "x.o"
    path.write_bytes(b"BC\xc0\xde" + struct.pack("<II", 1 | MODULE_BLOCK << 2 | 3 << 10, 0xFFFFFFFF) + bytes(64))
    with path.open("rb") as f:
        assert top_level_blocks(f) == []
    assert regular_lto_bytes(path) == 0
