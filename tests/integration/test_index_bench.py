"""The index benchmark runs end to end at its smallest size, so it cannot rot (no timing asserts)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from tests.conftest import REPO


def test_bench_index_runs(tmp_path: Path) -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "bench", "index", "--sizes", "10", "--repeat", "2", "--workdir", str(tmp_path)],
        cwd=REPO, capture_output=True, text=True, timeout=300,
    )
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    assert lines[0].startswith("machine: ") and "ours/bca" in lines[1]
    row = lines[2].split()
    assert row[0] == "11" and float(row[-1]) > 0
