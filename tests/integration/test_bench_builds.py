"""[bench] The builds benchmarks (local and remote) run end to end at their smallest size (no timing asserts)."""

from __future__ import annotations

from pathlib import Path

import pytest

from .bench_support import bench

pytestmark = pytest.mark.slow


def test_builds_smallest(tmp_path: Path) -> None:
    # micro (bench/subjects): tiny's two binaries, each linking one shared object and its own main: every variant,
    # edit and self-check of tiny, with 4 backend edges (3 distinct actions) instead of 10 (6)
    data = bench("builds", "--subjects", "micro", "--variants", "abcd", "--repeat", "1", results=tmp_path, cluster=True)
    cases = {(b["variant"], b["case"]) for b in data["builds"]}
    variants = "abc" if data.get("remote_missing") else "abcd"
    assert cases == {(v, c) for v in variants for c in ("clean", "comment", "body", "leaf")}
    assert all("self-checks OK" in c for c in data["checks"])
    assert {r["case"] for r in data["ratios"] if r.get("c_vs_a_wall")} == {"clean", "comment", "body", "leaf"}
    assert all(b["wall_samples"] == [b["wall_s"]] for b in data["builds"])


def test_remote_smallest(tmp_path: Path) -> None:
    data = bench("remote", "--subjects", "micro", results=tmp_path, cluster=True)
    if not data["rows"]:  # no PostgreSQL here: the benchmark says so instead of inventing numbers
        assert data["missing"]
        return
    builds = {r["build"]: r for r in data["rows"]}
    assert builds["d1"]["remote_executions"] + builds["d1"]["local_fallbacks"] == builds["d1"]["actions"] > 0
    assert data["ratios"][0]["d2_cache_hit_rate"] is not None
