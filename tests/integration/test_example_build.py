"""[foundation] The bundled example builds with in-process ThinLTO and every binary passes its self-check."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import EXAMPLE_ROOT, REPO

pytestmark = pytest.mark.slow

MIN_TRANSLATION_UNITS = 80


def test_example_has_chromium_shape() -> None:
    units = [p for p in EXAMPLE_ROOT.rglob("*") if p.suffix in (".c", ".cc", ".S")]
    assert len(units) >= MIN_TRANSLATION_UNITS
    assert any(p.suffix == ".c" for p in units) and any(p.suffix == ".S" for p in units)


def test_example_command_builds_and_self_checks(tmp_path: Path) -> None:
    out = tmp_path / "out"
    proc = subprocess.run(
        [sys.executable, "-m", "gn_thinlto.cli", "example", "--root", str(EXAMPLE_ROOT), "--out", str(out)],
        cwd=REPO, capture_output=True, text=True,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    summary = proc.stdout.strip().splitlines()[-1]
    assert "self-checks" in summary and "FAIL" not in proc.stdout
    checked, total = summary.split("self-checks ")[1].split(" ")[0].split("/")
    assert checked == total and int(total) >= 6
    # In-process ThinLTO at this stage: the link lines carry -flto=thin and lld.
    commands = subprocess.run(["ninja", "-C", str(out), "-t", "commands"], capture_output=True, text=True, check=True)
    links = [c for c in commands.stdout.splitlines() if " -o " in c and "-fuse-ld=lld" in c]
    assert links and all("-flto=thin" in c for c in links)


def test_example_command_rejects_a_root_without_dot_gn(tmp_path: Path) -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "gn_thinlto.cli", "example", "--root", str(tmp_path), "--out", str(tmp_path / "o")],
        cwd=REPO, capture_output=True, text=True,
    )
    assert proc.returncode == 2
    assert proc.stderr.strip().count("\n") == 0 and "no .gn file" in proc.stderr
