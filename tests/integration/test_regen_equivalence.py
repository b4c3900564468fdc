"""[hook-perf] Incremental regeneration writes the same bytes as a full run, over a sequence of BUILD.gn edits.

A small Chromium-shaped workspace (bench.subjects.synth.chromium) goes through edits a developer makes: add a source,
remove one, change a compile flag, change a link flag, add a target, delete one, change gn_thinlto.yaml. After
each, `gn-thinlto gen` regenerates the build dir with the hook's state from the previous run (incremental), the
result is recorded, and the same regeneration is run again without the state (full). Every file of the build
dir must be byte-identical; the incremental run must have planned fewer links than there are when the edit
leaves most of them alone. The state of the incremental run is then put back, so the chain stays incremental.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path

import pytest

from bench.fsio import write_workspace
from bench.subjects import synth
from gn_thinlto.regen import STATE_FILE

from .test_graph_support import gn_thinlto

pytestmark = pytest.mark.slow
IGNORED = {STATE_FILE, ".ninja_log", ".ninja_deps"}
KEPT = re.compile(r"gn-thinlto: (\d+) of (\d+) link targets unchanged since the last run, (\d+) planned again")


def _snapshot(out: Path) -> dict[str, bytes]:
    return {p.relative_to(out).as_posix(): p.read_bytes() for p in sorted(out.rglob("*"))
            if p.is_file() and p.relative_to(out).as_posix() not in IGNORED}


def _gen(root: Path, out: Path) -> tuple[int, int]:
    """gn-thinlto gen; (links kept from the last run, link targets)."""
    proc = gn_thinlto("gen", str(out), "--root", str(root))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    m = KEPT.search(proc.stdout)
    total = int(re.search(r"gn-thinlto: (\d+) link targets", proc.stdout).group(1))  # type: ignore[union-attr]
    return (int(m.group(1)) if m else 0), total


def _edit(path: Path, old: str, new: str) -> None:
    text = path.read_text()
    assert old in text, (path, old)
    path.write_text(text.replace(old, new, 1))


def _library_with(root: Path, pattern: str) -> Path:
    """A BUILD.gn under ROOT/PATTERN defining a library with at least 3 sources."""
    for path in sorted(root.glob(pattern)):
        if path.read_text().count(".cc") >= 3:
            return path
    raise AssertionError(f"no library with 3 sources under {pattern}")


def test_incremental_regeneration_matches_full_runs(tmp_path: Path) -> None:
    ws = synth.chromium(objects=300, tests=10, shared_libs=3, tools=6, big_tests=2, seed=3)
    root = write_workspace(ws, tmp_path / "src")
    out = tmp_path / "out"
    lib = _library_with(root, "components/*/BUILD.gn")
    other = _library_with(root, "third_party/*/BUILD.gn")
    tool0 = root / "tools/tool0/BUILD.gn"

    def add_source() -> None:
        (lib.parent / "added.cc").write_text("int added_fn(int x) { return x * 3; }\n")
        _edit(lib, 'sources = ["', 'sources = ["added.cc", "')

    def remove_source() -> None:
        _edit(other, 'sources = ["s0.cc", ', 'sources = [')

    def change_cflag() -> None:
        _edit(lib, "  sources = [", '  cflags = ["-DREGEN_TEST=1"]\n  sources = [', )

    def change_ldflag() -> None:
        _edit(tool0, '  sources = ["main.cc"]', '  sources = ["main.cc"]\n  ldflags = ["-Wl,-O2"]')

    def add_target() -> None:
        (root / "tools/added").mkdir()
        (root / "tools/added/main.cc").write_text(synth._main_source("l0_f0"))
        (root / "tools/added/BUILD.gn").write_text(
            'executable("added") {\n  sources = ["main.cc"]\n  deps = ["//third_party/l%s:l%s"]\n}\n'
            % ((n := other.parent.name[1:]), n))
        _edit(root / "BUILD.gn", 'deps = [', 'deps = ["//tools/added", ')

    def delete_target() -> None:
        _edit(root / "BUILD.gn", '"//tools/tool0", ', "")
        tool0.write_text("")

    def null_index_config() -> None:
        (root / "gn_thinlto.yaml").write_text("testonly: shared_null_index\n")

    def add_test_source() -> None:  # under null-index: the shared backends change
        test = root / "tests/t3/BUILD.gn"
        (test.parent / "added_test.cc").write_text("int added_test_fn(int x) { return x - 1; }\n")
        _edit(test, 'sources = ["', 'sources = ["added_test.cc", "')

    def config_back() -> None:
        (root / "gn_thinlto.yaml").unlink()

    edits: list[tuple[str, Callable[[], None], bool]] = [
        ("add a source", add_source, True), ("remove a source", remove_source, True),
        ("change a compile flag", change_cflag, True), ("change a link flag", change_ldflag, True),
        ("add a target", add_target, True), ("delete a target", delete_target, True),
        ("change gn_thinlto.yaml", null_index_config, False), ("add a test source", add_test_source, True),
        ("change gn_thinlto.yaml back", config_back, False),
    ]
    kept, total = _gen(root, out)
    assert kept == 0 and total == len(ws.links)
    for name, edit, some_kept in edits:
        edit()
        kept, total = _gen(root, out)
        incremental = _snapshot(out)
        assert (kept > 0) if some_kept else (kept == 0), (name, kept, total)
        state = (out / STATE_FILE).read_bytes()
        (out / STATE_FILE).unlink()
        assert _gen(root, out)[0] == 0
        full = _snapshot(out)
        assert sorted(incremental) == sorted(full), name
        differ = [p for p in full if incremental[p] != full[p]]
        assert not differ, (name, differ[:5])
        (out / STATE_FILE).write_bytes(state)
