"""[graph] `gn-thinlto example` builds through the graph by default (reporting backend jobs and cache hits)
and through GN's own in-process ThinLTO links with --in-process (run on the small basic workspace)."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from .test_graph_support import copy_workspace, gn_thinlto


@pytest.fixture(scope="module")
def root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return copy_workspace("basic", tmp_path_factory.mktemp("cli"))


def _query(out: Path, target: str) -> str:
    return subprocess.run(["ninja", "-C", str(out), "-t", "query", target], capture_output=True, text=True).stdout


def test_example_builds_through_the_graph_by_default(root: Path) -> None:
    out = root.parent / "graph"
    proc = gn_thinlto("example", "--root", str(root), "--out", str(out))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    lines = proc.stdout.strip().splitlines()
    backends = next(line for line in lines if line.startswith("ThinLTO backends: "))
    jobs, hits = int(backends.split()[2]), int(backends.split(", ")[1].split()[0])
    assert jobs == sum(len((out / f"gn-thinlto/{t}/used.txt").read_text().split())
                       for t in ("app", "tool", "app_unittests", "lib_unittests", "libcomp.so"))
    assert hits >= 1  # e.g. lib.unused.o, compiled the same way for several links
    assert lines[-1].startswith("example: 5 executables + 1 shared library built (")
    assert "self-checks 5/5 passed" in lines[-1]
    assert "input: gn_thinlto_final_link" in _query(out, "app")


def test_in_process_opt_out(root: Path) -> None:
    out = root.parent / "inproc"
    proc = gn_thinlto("example", "--root", str(root), "--out", str(out), "--in-process")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "ThinLTO backends:" not in proc.stdout
    assert "self-checks 5/5 passed" in proc.stdout.strip().splitlines()[-1]
    assert "input: link\n" in _query(out, "app")
