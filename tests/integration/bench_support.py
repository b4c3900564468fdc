"""Helpers of the benchmark smoke tests (no tests here): run one benchmark at its smallest size, read its results.

The smoke tests are split over a few files (test_bench*.py) so that pytest-xdist, which keeps a file on one
worker, runs the long ones side by side."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

from bench import cluster_tool
from tests.builds import REPO
from tests.remote import session_cluster

# Shared across runs (gitignored): the pinned ninja sdist and the ninja/mark_built tools built from it.
CACHE = REPO / "out" / "bench-cache"


def bench(name: str, *args: str, results: Path, cluster: bool = False) -> dict[str, Any]:
    """Run one benchmark; return its results file, checked for the machine it ran on and its command. With
    CLUSTER, its remote rows run on the run's cluster (tests/remote/session_cluster.py) instead of one the
    benchmark starts and stops (a cluster's start alone costs ~11 s of CPU, measured)."""
    env = dict(os.environ)
    if cluster and cluster_tool.available() is None:
        shared = session_cluster.shared()
        env.update({cluster_tool.EXISTING_ENV: str(shared.state), "GOMA_EXT_REMOTE_INSTANCE": session_cluster.INSTANCE})
    proc = subprocess.run([sys.executable, "-m", "bench", name, *args, "--cache", str(CACHE), "--results",
                           str(results)], cwd=REPO, capture_output=True, text=True, timeout=1800, env=env)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    data: dict[str, Any] = json.loads((results / f"{name}.json").read_text())
    assert data["machine"]["cores"] >= 1 and data["command"].startswith(f"python -m bench {name}")
    assert data.get("shared_cluster") == env.get(cluster_tool.EXISTING_ENV)
    return data
