"""[graph] Variants of tests/workspaces/basic: CFI (split LTO unit), minimized thin-link bitcode, and
test-only links on shared null-index backends (refused where CFI needs the thin link). The null-index builds
change no compile: each is a copy of the build with the same args (`_relinked`), so only its links run."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from gn_thinlto.steps.elf_probe import has_real_symbols

from .test_graph_support import Build, copy_build_dir, copy_workspace, disassembly, gen_and_build, gn_thinlto

BINARIES = ("app", "tool", "app_unittests", "lib_unittests", "refused")


@pytest.fixture(scope="module")
def root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return copy_workspace("basic", tmp_path_factory.mktemp("variants"))


def _config(root: Path, name: str, text: str) -> Path:
    path = root.parent / name
    path.write_text(text)
    return path


def _check_all(b: Build) -> None:
    for name in BINARIES:
        assert b.run_binary(name) == f"OK {name}"


@pytest.fixture(scope="module")
def cfi(root: Path) -> Build:
    return gen_and_build(root, root.parent / "cfi", "--args=use_cfi=true")


@pytest.fixture(scope="module")
def plain(root: Path) -> Build:
    return gen_and_build(root, root.parent / "plain")


def _relinked(b: Build, name: str) -> Path:
    """B's build directory copied beside it (as deep) to NAME without the graph's state but its backend cache
    (gn-thinlto/: thin links, natives, logs, the regeneration record): generated again with B's args, ninja
    compiles nothing and runs every thin link, backend and final link as in a new build directory, the backends
    it shares with B hits of the cache."""
    out = copy_build_dir(b.out, b.out.parent / name)
    for path in (out / "gn-thinlto").iterdir():
        if path.is_dir() and path.name != "cache":
            shutil.rmtree(path)
        elif not path.is_dir():
            path.unlink()
    return out


def _no_compile(b: Build, before: int) -> None:
    assert not [o for o in b.ran_since(before) if o.startswith("obj/") and o.endswith(".o")]


def test_cfi_uses_the_split_regular_lto_object(cfi: Build) -> None:
    b = cfi
    _check_all(b)
    split = b.out / "gn-thinlto/app/lto.split.o"
    assert has_real_symbols(split)  # vtables and type-id globals of the regular LTO part
    rsp = (b.out / "gn-thinlto/app/final.rsp").read_text().split()
    assert "gn-thinlto/app/lto.split.o" in rsp
    assert "ud1" in disassembly(b.out / "app") or "ud2" in disassembly(b.out / "app")  # CFI trap in the code


def test_without_split_unit_the_empty_regular_object_is_left_out(plain: Build) -> None:
    b = plain
    assert not has_real_symbols(b.out / "gn-thinlto/app/lto.split.o")
    assert "gn-thinlto/app/lto.split.o" not in (b.out / "gn-thinlto/app/final.rsp").read_text()


def test_minimized_thin_link_bitcode(root: Path) -> None:
    config = _config(root, "minimized.yaml", "minimized_bitcode: true\n")
    b = gen_and_build(root, root.parent / "min", "--args=use_thin_link_bitcode=true", "--config", str(config))
    _check_all(b)
    rsp = (b.out / "gn-thinlto/app/thinlink.rsp").read_text().split()
    assert "obj/app/app.main.thinlink.o" in rsp and "obj/app/app.main.o" not in rsp
    assert (b.out / "gn-thinlto/app/used.txt").read_text().split()[0] == "obj/app/app.main.o"
    assert (b.out / "gn-thinlto/app/index/obj/app/app.main.o.thinlto.bc").is_file()
    assert "gn-thinlto/app/native/obj/app/app.main.o" in (b.out / "gn-thinlto/app/final.rsp").read_text()
    assert "_ZN3lib6SquareEi" not in disassembly(b.out / "app").split("<main>:")[1].split("\n\n")[0]


def test_testonly_links_share_null_index_backends(root: Path, plain: Build) -> None:
    config = _config(root, "null.yaml", "testonly: shared_null_index\n")
    out = _relinked(plain, "null")
    before = len(Build(root, out).log_entries())
    b = gen_and_build(root, out, "--config", str(config))
    _no_compile(b, before)
    _check_all(b)
    assert not (b.out / "gn-thinlto/app_unittests/thinlink.json").exists()
    shared = {e for e in b.ran_since(0) if e.startswith("gn-thinlto/shared/")}
    square = [e for e in shared if e.endswith("obj/lib/lib.square.o")]
    assert len(square) == 1  # one codegen for both test binaries
    for test in ("app_unittests", "lib_unittests"):
        assert f"    {square[0]}\n" in b.ninja("-t", "query", test)  # (ninja deletes the rsp after the link)
    assert (b.out / "gn-thinlto/app/thinlink.json").is_file()  # non-test links keep their thin link


def test_null_index_mode_is_refused_for_cfi(root: Path, cfi: Build) -> None:
    config = _config(root, "null.yaml", "testonly: shared_null_index\n")
    out = _relinked(cfi, "null_cfi")
    before = len(Build(root, out).log_entries())
    proc = gn_thinlto("gen", str(out), "--root", str(root), "--args=use_cfi=true", "--config", str(config))
    assert proc.returncode == 0, proc.stderr
    reason = "testonly shared null-index backends cannot serve CFI/split LTO units (they need the thin link)"
    assert f"gn-thinlto: //app:app_unittests: left to GN's in-process ThinLTO link: {reason}" in proc.stdout
    b = Build(root, out)
    b.ninja()
    _no_compile(b, before)
    _check_all(b)
