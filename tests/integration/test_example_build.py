"""[foundation]/[graph] The README main command builds the bundled example and every binary passes its self-check.

By default through the gn-thinlto graph (reporting backend jobs and cache hits): the session's `example_tree` is
built by that command, and its output is checked here; --in-process switches a copy of that build directory
back to GN's own in-process ThinLTO links (the session's `example_in_process`).
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from tests.builds import Build, example_stdout
from tests.conftest import EXAMPLE_ROOT, REPO

pytestmark = pytest.mark.slow

MIN_TRANSLATION_UNITS = 80
EXAMPLE_BINARIES = 11


def example(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "gn_thinlto.cli", "example", *args], cwd=REPO, capture_output=True, text=True
    )


def query(out: Path, target: str) -> str:
    return subprocess.run(["ninja", "-C", str(out), "-t", "query", target], capture_output=True, text=True).stdout


def assert_all_self_checks_passed(stdout: str) -> None:
    summary = stdout.strip().splitlines()[-1]
    assert f"self-checks {EXAMPLE_BINARIES}/{EXAMPLE_BINARIES} passed" in summary, summary
    assert "FAIL" not in stdout


def test_example_has_chromium_shape() -> None:
    units = [p for p in EXAMPLE_ROOT.rglob("*") if p.suffix in (".c", ".cc", ".S")]
    assert len(units) >= MIN_TRANSLATION_UNITS
    assert any(p.suffix == ".c" for p in units) and any(p.suffix == ".S" for p in units)


def test_example_builds_through_the_graph_then_in_process(example_tree: Build, example_in_process: Build) -> None:
    graph = example_stdout(example_tree)
    assert_all_self_checks_passed(graph)
    backends = next(line for line in graph.splitlines() if line.startswith("ThinLTO backends: "))
    assert int(backends.split()[2]) > 0 and " cache hits" in backends
    assert "input: gn_thinlto_final_link" in query(example_tree.out, "calc")

    assert_all_self_checks_passed(example_stdout(example_in_process))  # a copy of example_tree, --in-process
    assert "input: link\n" in query(example_in_process.out, "calc")
    assert not (example_in_process.out / "gn-thinlto").exists()


def test_example_command_rejects_a_root_without_dot_gn(tmp_path: Path) -> None:
    proc = example("--root", str(tmp_path), "--out", str(tmp_path / "o"))
    assert proc.returncode == 2
    assert proc.stderr.strip().count("\n") == 0 and "no .gn file" in proc.stderr
