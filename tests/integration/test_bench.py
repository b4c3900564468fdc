"""[bench] Every benchmark runs end to end once at its smallest size, so it cannot rot (no timing asserts)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import REPO

pytestmark = pytest.mark.slow

# Shared across runs (gitignored): the pinned ninja sdist and the ninja/mark_built tools built from it.
CACHE = REPO / "out" / "bench-cache"


def bench(*args: str, results: Path) -> str:
    proc = subprocess.run([sys.executable, "-m", "bench", *args, "--cache", str(CACHE), "--results", str(results)],
                          cwd=REPO, capture_output=True, text=True, timeout=1800)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert proc.stdout.startswith("machine: ")
    return proc.stdout


def test_scale_smallest(tmp_path: Path) -> None:
    out = bench("scale", "--sizes", "2:3", "--mix", "2:2", "--naive-max-links", "2", "--repeat", "1", results=tmp_path)
    data = json.loads((tmp_path / "scale.json").read_text())
    modes = {(r["workspace"], r["mode"]) for r in data["rows"]}
    assert {("grid-2x3", "gn"), ("grid-2x3", "naive"), ("mix-2x2", "gn")} <= modes
    # every mode reached a true no-op on its marked-built directory (else the benchmark exits non-zero)
    naive = next(r for r in data["rows"] if r["mode"] == "naive" and r["workspace"] == "grid-2x3")
    assert naive["backend_edges"] == 2 * 4 and "parse/be vs naive" in out


def test_builds_smallest(tmp_path: Path) -> None:
    out = bench("builds", "--subjects", "tiny", results=tmp_path)
    data = json.loads((tmp_path / "builds.json").read_text())
    cases = {(b["variant"], b["case"]) for b in data["builds"]}
    assert cases == {(v, c) for v in "abc" for c in ("clean", "comment", "body", "leaf")}
    assert all("self-checks OK" in c for c in data["checks"]) and "c/a wall" in out
