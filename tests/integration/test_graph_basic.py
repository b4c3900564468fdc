"""[graph] tests/workspaces/basic built through the gn-thinlto graph, compared with GN's in-process ThinLTO.

Covers thin and regular archives, a source_set, an unused lazy archive member, a shared library and an
executable linking it, an assembly object and a refused target (all in one small workspace).
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from gn_thinlto.analysis.graph_query import backend_outputs

from .test_graph_support import Build, copy_workspace, defined_functions, disassembly, gen_and_build, gn_thinlto, plain_build, section_bytes, text_size

BINARIES = ("app", "tool", "app_unittests", "lib_unittests", "refused")
PLANNED = ("app", "tool", "app_unittests", "lib_unittests", "libcomp.so")


@pytest.fixture(scope="module")
def root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return copy_workspace("basic", tmp_path_factory.mktemp("ws"))


@pytest.fixture(scope="module")
def built(root: Path) -> Build:
    return gen_and_build(root, root.parent / "out")


@pytest.fixture(scope="module")
def reference(root: Path) -> Build:
    return plain_build(root, root.parent / "ref")


def _used(b: Build, target_dir: str) -> list[str]:
    return (b.out / "gn-thinlto" / target_dir / "used.txt").read_text().split()


def test_every_binary_passes_its_self_check(built: Build) -> None:
    for name in BINARIES:
        assert built.run_binary(name) == f"OK {name}"


def test_cross_module_call_is_inlined(built: Build) -> None:
    text = disassembly(built.out / "app")
    main = text.split("<main>:")[1].split("\n\n")[0]
    assert "_ZN3lib6SquareEi" not in main, main  # lib::Square (lib/square.cc) was imported and inlined


def test_backend_count_equals_used_objects(built: Build) -> None:
    for target in PLANNED:
        tdir = target
        own = [o for o in backend_outputs(built.out, target) if o.startswith(f"gn-thinlto/{tdir}/")]
        assert len(own) == len(_used(built, tdir)), target
    # ninja -t commands does not follow dyndep-discovered inputs (ninja 1.11): it lists no backend at all.
    commands = built.ninja("-t", "commands", "app")
    assert commands.count("-fthinlto-index=") == 0


def test_unused_lazy_member_costs_nothing(built: Build) -> None:
    used = _used(built, "app")
    assert "obj/lib/lib.unused.o" not in used and "obj/lib/lib.square.o" in used
    assert not (built.out / "gn-thinlto/app/native/obj/lib/lib.unused.o").exists()
    assert (built.out / "gn-thinlto/app/index/obj/lib/lib.unused.o.thinlto.bc").is_file()  # skip-flag index
    assert "_ZN3lib6UnusedEv" not in defined_functions(built.out / "app")


def test_archives_source_set_asm_and_shared_library(built: Build) -> None:
    used = _used(built, "app")
    assert "obj/reg/libreg.reg.o" in used  # member of a regular archive
    assert "obj/ss/ss.ss.o" in used  # source_set object
    rsp = (built.out / "gn-thinlto/app/final.rsp").read_text().split()
    # The assembly member the thin link extracted is linked eagerly, before the natives of the bitcode
    # (where lld's in-process LTO link places it); the bitcode members are gone from the final link.
    assert rsp.index("obj/lib/lib.asm.o") < rsp.index("gn-thinlto/app/native/obj/app/app.main.o")
    assert "obj/lib/lib.square.o" not in rsp and "-Wl,--start-lib" not in rsp
    assert "asm_answer" in defined_functions(built.out / "app")
    query = built.ninja("-t", "query", "libcomp.so")
    assert "input: gn_thinlto_final_link" in query
    assert "./libcomp.so" in rsp  # the executable links the shared library built through the graph
    # The shared library whole-archives lib.a: every member is used, none lazily dropped.
    assert sorted(_used(built, "libcomp.so")) == ["obj/comp/libcomp.comp.o", "obj/lib/lib.shape.o", "obj/lib/lib.square.o", "obj/lib/lib.unused.o"]


def test_refused_target_keeps_gns_edge(built: Build) -> None:
    assert "input: link\n" in built.ninja("-t", "query", "refused")
    reason = (built.out / "gn-thinlto/refused.txt").read_text()
    assert reason == "//refused:refused (./refused): unknown LTO linker option '--lto-debug-pass-manager'\n"
    proc = gn_thinlto("gen", str(built.out), "--root", str(built.root))
    assert proc.stdout.splitlines()[0] == (
        "gn-thinlto: //refused:refused: left to GN's in-process ThinLTO link: "
        "unknown LTO linker option '--lto-debug-pass-manager'"
    )


def test_same_functions_and_text_size_as_in_process(built: Build, reference: Build) -> None:
    for name in PLANNED:
        ours, theirs = built.out / name, reference.out / name
        assert defined_functions(ours) == defined_functions(theirs), name
        a, b = text_size(ours), text_size(theirs)
        assert abs(a - b) <= 0.02 * b, (name, a, b)
        # Same backend flags and the in-process section order: the code is byte-identical here.
        assert section_bytes(ours, ".text") == section_bytes(theirs, ".text"), name


def test_second_ninja_is_a_no_op(built: Build) -> None:
    out = built.ninja("-n", "-d", "explain")
    assert "no work to do" in out, out


def test_explain(built: Build) -> None:
    proc = gn_thinlto("explain", str(built.out), "//app:app")
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    assert lines[0] == "//app:app (./app): 6 bitcode objects, 5 used by the thin link"
    assert "  used    obj/app/app.main.o" in lines
    assert "            imports from obj/lib/lib.square.o" in lines
    assert any(re.match(r"  unused  obj/lib/lib.unused.o", line) for line in lines)
    bad = gn_thinlto("explain", str(built.out), "//nope:nope")
    assert bad.returncode == 2 and bad.stderr.startswith("gn-thinlto: error: //nope:nope: no ThinLTO link")


def test_explain_imports_agree_with_llds_imports_files(built: Build) -> None:
    from gn_thinlto.cli.explain import explain

    for target in PLANNED:
        e = explain(built.out, target)
        for o in e.objects:
            imports_file = built.out / "gn-thinlto" / target / "index" / f"{o.bitcode}.imports"
            assert list(o.imports) == sorted(imports_file.read_text().split()), (target, o.bitcode)
