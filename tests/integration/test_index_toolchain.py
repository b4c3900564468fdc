"""The index decoder and bitcode inspection against real clang/lld output and llvm-bcanalyzer, LLVM 19 and 22."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from goma_ext.bitcode.objects import inspect
from goma_ext.bitcode.bitstream import Bitstream, Block
from goma_ext.bitcode.index import imports_file_path, own_module_path, read_index
from tests.conftest import LLVM_VERSIONS, Llvm
from tests.integration.index_workspace import Workspace, bcanalyzer_block_stats, bcanalyzer_dump, build


@pytest.fixture(scope="module", params=LLVM_VERSIONS, ids=[f"llvm{v}" for v in LLVM_VERSIONS])
def workspace(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Workspace:
    version = request.param
    return build(tmp_path_factory.mktemp(f"thinlto{version}"), Path(f"/usr/lib/llvm-{version}/bin"))


def _rel(ws: Workspace, p: Path) -> str:
    return os.path.relpath(p, ws.root)


def test_workspace_shape(workspace: Workspace) -> None:
    indexes = workspace.index_files()
    # every object, archive member and lazy object gets an index, main too
    assert len(indexes) == workspace.layout.total + len(workspace.unused) + 1
    big = read_index(workspace.root / "obj/main.o.thinlto.bc")
    assert len(big.modules) > workspace.layout.total // workspace.layout.main_stride


def test_module_table_is_imports_plus_self(workspace: Workspace) -> None:
    for path in workspace.index_files():
        rel = _rel(workspace, path)
        ix = read_index(path)
        listed = (workspace.root / imports_file_path(rel)).read_text().splitlines()
        own = own_module_path(rel)
        paths = [m.path for m in ix.modules]
        if ix.skip:
            assert paths == [] and listed == [], rel
        else:
            assert sorted(paths) == sorted([*listed, own]), rel
            assert sorted(ix.imported_paths(own)) == sorted(listed), rel


def test_hashes_flags_and_counts_match_bcanalyzer(workspace: Workspace) -> None:
    bcanalyzer = workspace.tool("llvm-bcanalyzer")
    for path in workspace.index_files():
        ix = read_index(path)
        dump = bcanalyzer_dump(bcanalyzer, path)
        words = {m.modid: (m.path, m.hash) for m in ix.modules}
        assert words.keys() == dump.modules.keys(), path
        for modid, (mod_path, hash_words) in dump.modules.items():
            assert words[modid][0] == mod_path
            assert words[modid][1] == b"".join(w.to_bytes(4, "big") for w in hash_words or ()), path
        assert ix.flags == dump.flags
        by_path = {dump.modules[modid][0]: n for modid, n in dump.combined_by_modid.items()}
        assert {p: n for p, n in ix.summary_counts.items() if n} == by_path, path
        guids = {dump.modules[modid][0]: tuple(sorted(g)) for modid, g in dump.guids_by_modid.items()}
        assert {p: g for p, g in ix.guids.items() if g} == guids, path


def test_skip_flag_exactly_for_unused_lazy_members(workspace: Workspace) -> None:
    skipped = sorted(_rel(workspace, p) for p in workspace.index_files() if read_index(p).skip)
    expected = []
    for obj in workspace.unused:
        if obj.startswith("obj/lazy/"):
            expected.append(obj + ".thinlto.bc")
        else:  # an archive member: lld names it "lib/libX.a(member.o at OFFSET)"
            archive = "lib/libstatic.a" if "/static/" in obj else "lib/libthin.a"
            expected += [s for s in skipped if s.startswith(f"{archive}({Path(obj).name} at ")]
    assert skipped == sorted(expected) and len(expected) == len(workspace.unused)


def test_index_hashes_are_the_objects_module_hashes(workspace: Workspace) -> None:
    table = {m.path: m.hash for m in read_index(workspace.root / "obj/main.o.thinlto.bc").modules}
    checked = 0
    for mod_path, digest in table.items():
        if "(" in mod_path:
            continue
        info = inspect(workspace.root / mod_path)
        assert info.is_bitcode and info.has_thinlto_summary and info.module_hash == digest, mod_path
        checked += 1
    assert checked > 10


def test_inspect_matches_bcanalyzer_on_objects(workspace: Workspace) -> None:
    bcanalyzer = workspace.tool("llvm-bcanalyzer")
    for obj in ("obj/main.o", "obj/t7.o", "obj/lazy/unused_startlib.o"):
        info = inspect(workspace.root / obj)
        text = subprocess.run([bcanalyzer, "-dump", obj], cwd=workspace.root, capture_output=True, text=True,
                              check=True).stdout
        hash_line = next(line for line in text.splitlines() if line.strip().startswith("<HASH "))
        words = [int(tok.split("=")[1].rstrip("/>")) for tok in hash_line.split() if tok.startswith("op")]
        assert info.module_hash == b"".join(w.to_bytes(4, "big") for w in words)
        assert "record string = 'src/" in text or f"'{info.source_filename}'" in text
        assert info.source_filename is not None and info.source_filename.endswith(".c")
        assert info.triple == "x86_64-pc-linux-gnu" and "<GLOBALVAL_SUMMARY_BLOCK" in text
    native = workspace.root / "native.o"
    subprocess.run([workspace.tool("clang"), "-c", "-x", "c", "-", "-o", str(native)], input="int x;", text=True,
                   check=True)
    assert not inspect(native).is_bitcode


COMPLEX_CXX = """\
#include <map>
#include <string>
#include <vector>
struct Base { virtual ~Base() = default; virtual int f(int) const = 0; };
struct D : Base { std::map<std::string, std::vector<int>> m; int f(int x) const override { return (int)m.size() + x; } };
int use(const Base &b) { return b.f(3); }
int make() { D d; d.m["a"].push_back(1); return use(d); }
"""


def test_generic_reader_matches_bcanalyzer_on_complex_bitcode(llvm: Llvm, tmp_path: Path) -> None:
    """Debug info, metadata blobs, C++ and a split LTO unit (two modules, two BLOCKINFOs): every block
    instance and record llvm-bcanalyzer counts, our reader visits."""
    (tmp_path / "big.cc").write_text(COMPLEX_CXX)
    obj = tmp_path / "big.o"
    subprocess.run([llvm.tool("clang++"), "-g", "-O1", "-flto=thin", "-fsplit-lto-unit", "-fwhole-program-vtables",
                    "-fvisibility=hidden", "-c", "big.cc", "-o", str(obj)], cwd=tmp_path, check=True)
    ours: dict[int, list[int]] = {}

    def walk(block: Block) -> None:
        ours.setdefault(block.block_id, [0, 0])[0] += 1
        for entry in block.entries():
            if isinstance(entry, Block):
                walk(entry)
            else:
                ours[block.block_id][1] += 1

    for block in Bitstream(obj.read_bytes(), name=str(obj)).blocks():
        walk(block)
    theirs = bcanalyzer_block_stats(llvm.tool("llvm-bcanalyzer"), obj)
    theirs.pop(0, None)  # BLOCKINFO is absorbed by our reader, not yielded
    assert {k: tuple(v) for k, v in ours.items()} == theirs
    info = inspect(obj)
    assert info.module_count == 2 and info.has_thinlto_summary and info.has_full_lto_summary
