"""The example's GN guard: a plain `gn gen` in a gn-thinlto build directory stops with one clear reason
instead of silently turning the graph back into in-process LTO links; every hooked path still works."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import EXAMPLE_ROOT, REPO

GUARD_MESSAGE = "is a gn-thinlto build directory"


@pytest.fixture
def root(tmp_path: Path) -> Path:
    copy = tmp_path / "src"
    shutil.copytree(EXAMPLE_ROOT, copy, ignore=shutil.ignore_patterns("out*"))
    return copy


def gn(root: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["gn", *args, f"--root={root}"], capture_output=True, text=True)


def hooked_gen(root: Path, out: Path) -> None:
    proc = subprocess.run([sys.executable, "-m", "gn_thinlto.cli", "gen", str(out), "--root", str(root)],
                          cwd=REPO, capture_output=True, text=True)
    assert proc.returncode == 0, proc.stdout + proc.stderr


def graph_in_place(out: Path) -> bool:
    return "gn-thinlto" in (out / "build.ninja").read_text()


def test_plain_gn_gen_is_refused_in_a_gn_thinlto_directory(root: Path, tmp_path: Path) -> None:
    out = tmp_path / "out"
    hooked_gen(root, out)
    proc = gn(root, "gen", str(out))
    assert proc.returncode != 0
    assert GUARD_MESSAGE in proc.stdout + proc.stderr
    assert graph_in_place(out)


def test_hooked_paths_and_other_gn_commands_pass_the_guard(root: Path, tmp_path: Path) -> None:
    out = tmp_path / "out"
    hooked_gen(root, out)
    hooked_gen(root, out)  # a second `gn-thinlto gen` on the same directory
    (root / "apps/calc/BUILD.gn").touch()
    regen = subprocess.run(["ninja", "-C", str(out), "build.ninja"], capture_output=True, text=True)
    assert regen.returncode == 0 and "Regenerating ninja files" in regen.stdout, regen.stdout + regen.stderr
    assert graph_in_place(out)
    assert gn(root, "ls", str(out), "//apps/calc:calc").returncode == 0


def test_plain_gn_gen_elsewhere_is_untouched(root: Path, tmp_path: Path) -> None:
    out = tmp_path / "plain"
    proc = gn(root, "gen", str(out))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert not graph_in_place(out)
