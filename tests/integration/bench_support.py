"""Helpers of the benchmark smoke tests (no tests here): run one benchmark at its smallest size, read its results.

The smoke tests are split over a few files (test_bench*.py) so that pytest-xdist, which keeps a file on one
worker, runs the long ones side by side."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

from tests.builds import REPO

# Shared across runs (gitignored): the pinned ninja sdist and the ninja/mark_built tools built from it.
CACHE = REPO / "out" / "bench-cache"


def bench(name: str, *args: str, results: Path) -> dict[str, Any]:
    """Run one benchmark; return its results file, checked for the machine it ran on and its command."""
    proc = subprocess.run([sys.executable, "-m", "bench", name, *args, "--cache", str(CACHE), "--results",
                           str(results)], cwd=REPO, capture_output=True, text=True, timeout=1800)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    data: dict[str, Any] = json.loads((results / f"{name}.json").read_text())
    assert data["machine"]["cores"] >= 1 and data["command"].startswith(f"python -m bench {name}")
    return data
