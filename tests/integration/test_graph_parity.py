"""[graph] Parity with lld's in-process ThinLTO at --lto-O0 (how Chromium links most targets): the same functions
with the same sizes, sections and dynamic symbols, in tests/workspaces/basic built both ways."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from gn_thinlto.analysis.elf_summary import summarize
from gn_thinlto.analysis.parity import compare_builds

from .test_graph_support import NM, Build, copy_workspace, gen_and_build, gn_thinlto, plain_build

ARGS = "--args=lto_opt_level=0"
PLANNED = ("app", "tool", "app_unittests", "lib_unittests", "libcomp.so")


@pytest.fixture(scope="module")
def root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return copy_workspace("basic", tmp_path_factory.mktemp("parity"))


@pytest.fixture(scope="module")
def built(root: Path) -> Build:
    return gen_and_build(root, root.parent / "out", ARGS)


@pytest.fixture(scope="module")
def reference(root: Path) -> Build:
    return plain_build(root, root.parent / "ref", ARGS.removeprefix("--args="))


def text_symbol_sizes(binary: Path) -> dict[str, int]:
    """llvm-nm's defined text symbols with their sizes (summed per name: local functions may share one)."""
    out = subprocess.run([NM, "--print-size", "--size-sort", "--defined-only", str(binary)],
                         capture_output=True, text=True, check=True).stdout
    sizes: dict[str, int] = {}
    for line in out.splitlines():
        parts = line.split()
        if len(parts) == 4 and parts[2] in "tTwWiI":
            sizes[parts[3]] = sizes.get(parts[3], 0) + int(parts[1], 16)
    return sizes


def test_backends_optimize_at_o0_and_generate_code_at_o2(built: Build) -> None:
    ninja = (built.out / "gn-thinlto/app/build.ninja").read_text()
    head = next(line for line in ninja.splitlines() if line.startswith("gn_thinlto_backend_head"))
    flags = next(line for line in ninja.splitlines() if line.startswith("gn_thinlto_backend_flags"))
    assert head.split(" = ", 1)[1].startswith("--cg-opt-level=2 ")
    assert " -O0 " in f"{flags} " and " -faddrsig " in flags
    assert "-Wl,--lto-O0" in (built.out / "gn-thinlto/app/thinlink.json").read_text()


@pytest.mark.parametrize("name", PLANNED)
def test_every_function_has_its_in_process_size(built: Build, reference: Build, name: str) -> None:
    ours, theirs = text_symbol_sizes(built.out / name), text_symbol_sizes(reference.out / name)
    assert ours and set(ours) == set(theirs)
    differing = {f: (theirs[f], ours[f]) for f in ours if ours[f] != theirs[f]}
    assert differing == {}, f"{name}: {len(differing)} functions differ, e.g. {sorted(differing.items())[:5]}"


def test_the_elf_reader_sees_the_functions_llvm_nm_sees(built: Build) -> None:
    for name in PLANNED:
        functions = summarize(built.out / name).functions
        sizes: dict[str, int] = {}
        for (f, size), n in functions.items():
            sizes[f] = sizes.get(f, 0) + size * n
        assert sizes == text_symbol_sizes(built.out / name), name


def test_the_parity_command_finds_every_binary_at_parity(built: Build, reference: Build) -> None:
    results = {r.name: r for r in compare_builds(reference.out, built.out)}
    assert set(PLANNED) <= set(results)
    assert [r.line() for r in results.values() if not r.at_parity] == []
    proc = gn_thinlto("parity", str(reference.out), str(built.out))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert len(proc.stdout.splitlines()) == len(results)
    assert all(": at parity: " in line for line in proc.stdout.splitlines())


def test_the_parity_command_sees_naive_o0_backends(built: Build, reference: Build, root: Path) -> None:
    """The check has teeth: the same graph with one-step `-O0` backends (what gn-thinlto generated before) is
    reported, with the worst functions, and exits 1."""
    naive = root.parent / "naive"
    b = gen_and_build(root, naive, ARGS)
    for ninja in (naive / "gn-thinlto").glob("*/build.ninja"):
        text = ninja.read_text().replace("= --cg-opt-level=2 ", "= ")
        ninja.write_text(text)
    b.ninja()
    proc = gn_thinlto("parity", str(reference.out), str(naive))
    assert proc.returncode == 1, proc.stdout + proc.stderr
    app = next(line for line in proc.stdout.splitlines() if line.startswith("app:"))
    assert "app: NOT at parity: " in app and "functions differing" in app and "worst: " in app
