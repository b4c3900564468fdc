"""[chromium] tests/workspaces/shapes: one program built by toolchains of every link shape real GN projects
use (-flto=thin in the tool command with inline inputs and several groups, GN's simple-example toolchain, a
launcher prefix, Chromium's older link wrappers with a shell tail), through the graph and in-process."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from tests.conftest import EXAMPLE_ROOT

from .test_graph_support import (
    Build,
    copy_workspace,
    defined_functions,
    dynamic_symbols,
    gn_thinlto,
    relinked_in_process,
    text_size,
    unstripped,
)

pytestmark = pytest.mark.slow
TOOLCHAIN_DIRS = ("", "simple/", "launcher/", "legacy/")
BINARIES = tuple(f"{d}{name}" for d in TOOLCHAIN_DIRS for name in ("app", "libshared.so", "libplugin.so"))
WRAPPERS = ("link_wrapper.py", "solink_wrapper.py", "wrapper_common.py")


@pytest.fixture(scope="module")
def root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = copy_workspace("shapes", tmp_path_factory.mktemp("shapes"))
    for name in WRAPPERS:  # the legacy toolchain runs the example's link wrappers
        shutil.copy(EXAMPLE_ROOT / "build" / "toolchain" / name, root / "build" / "toolchain" / name)
    return root


@pytest.fixture(scope="module")
def gen_output(root: Path) -> str:
    proc = gn_thinlto("gen", str(root.parent / "out"), "--root", str(root))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return proc.stdout


@pytest.fixture(scope="module")
def built(root: Path, gen_output: str) -> Build:
    b = Build(root, root.parent / "out")
    b.ninja()
    return b


@pytest.fixture(scope="module")
def reference(built: Build) -> Build:
    """GN's own graph, in-process ThinLTO in lld: a copy of the graph's build relinked (the compiles are the same;
    simple/native_tool, not a ThinLTO link, is GN's link in both and stays)."""
    return relinked_in_process(built, built.root.parent / "ref", "", (), not_thinlto=("simple/native_tool",))


def test_every_link_of_every_shape_goes_through_the_graph(gen_output: str, built: Build) -> None:
    assert ("gn-thinlto: 13 link targets: 12 ThinLTO links in the ninja graph, 0 left to GN, 1 not ThinLTO "
            "(details: gn-thinlto/links.txt)") in gen_output
    rows = [line.split("\t") for line in (built.out / "gn-thinlto/links.txt").read_text().splitlines()]
    assert len(rows) == 13 and sorted(r[1] for r in rows) == ["graph"] * 12 + ["not ThinLTO"]
    assert ["//src:native_tool(//build/toolchain:simple)", "not ThinLTO", "no -flto=thin in its link"] in rows
    assert built.run_binary("simple/native_tool") == "OK native_tool"


def test_programs_pass_their_checks(built: Build, reference: Build) -> None:
    for d in TOOLCHAIN_DIRS:
        assert built.run_binary(f"{d}app") == "OK app", d
        assert reference.run_binary(f"{d}app") == "OK app", d


def test_same_functions_and_text_as_in_process(built: Build, reference: Build) -> None:
    for name in BINARIES:
        folder, _, base = name.rpartition("/")
        ours = unstripped(built.out / folder, base)
        theirs = unstripped(reference.out / folder, base)
        assert defined_functions(ours) == defined_functions(theirs), name
        assert dynamic_symbols(ours) == dynamic_symbols(theirs), name
        a, b = text_size(ours), text_size(theirs)
        assert abs(a - b) <= 0.02 * b, (name, a, b)


def test_inline_shape_keeps_its_groups_and_flags(built: Build) -> None:
    """-flto=thin came from the tool command, the inputs were inline: the final link is GN's command with
    the inputs replaced by the response file (groups dropped around lazy members), solibs still after it."""
    ninja = (built.out / "gn-thinlto/app/build.ninja").read_text()
    argv = next(line for line in ninja.splitlines() if line.startswith("  argv = ") and "final.rsp" in line)
    assert "-flto=thin" in argv and "@gn-thinlto/app/final.rsp" in argv
    rsp = (built.out / "gn-thinlto/app/final.rsp").read_text().split()
    assert "./libshared.so" in rsp and not any(p.endswith("lib.unused.o") for p in rsp)
    module = (built.out / "gn-thinlto/libplugin.so/build.ninja").read_text()
    assert "-Wl,--whole-archive @gn-thinlto/libplugin.so/final.rsp -Wl,--no-whole-archive" in module


def test_legacy_wrappers_and_shell_tail(built: Build, reference: Build) -> None:
    """Old-style --unstripped-file/--sofile wrappers and solink_module's `&& llvm-strip`: every product as
    from GN's edge, the .TOC byte for byte."""
    for name in ("legacy/app", "legacy/libshared.so", "legacy/libplugin.so"):
        assert (built.out / name).is_file() and defined_functions(built.out / name) == set(), name
    toc = "legacy/libshared.so.TOC"
    assert (built.out / toc).read_bytes() == (reference.out / toc).read_bytes()
    module = (built.out / "gn-thinlto/legacy/libplugin.so/build.ninja").read_text()
    assert "final.rsp -Wl,--no-whole-archive && /usr/lib/llvm-19/bin/llvm-strip -o legacy/libplugin.so" in module
    assert "  restat = 1\n" in (built.out / "gn-thinlto/legacy/libshared.so/build.ninja").read_text()


def test_second_ninja_is_a_no_op(built: Build) -> None:
    assert "no work to do" in built.ninja("-n")
