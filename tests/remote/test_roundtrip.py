"""A real cluster answers Capabilities and runs a trivial action quickly."""

from __future__ import annotations

import time
from pathlib import Path

from goma_ext.cluster import manager
from goma_ext.remote.client import RemoteExecutor
from goma_ext.remote.config import RemoteConfig
from goma_ext.remote.identity import identify
from tests.remote.conftest import INSTANCE, Cluster


def test_status_reports_every_component_running(cluster: Cluster) -> None:
    info = manager.status(cluster.state)
    assert info["postgres"] == "running" and info["buildgrid"] == "running"
    assert str(info["capabilities"]).startswith("ok")


def test_trivial_action_round_trip_is_fast(cluster: Cluster, tmp_path: Path) -> None:
    ex = RemoteExecutor(RemoteConfig(endpoint=cluster.endpoint, instance=INSTANCE))
    ident = identify("clang-19", tmp_path)
    times = []
    for i in range(10):
        t = time.monotonic()
        argv = ["clang-19", "--version", f"-DX={time.time_ns()}{i}"]
        res = ex.run(argv, tmp_path, [], [], ident)
        times.append(time.monotonic() - t)
        assert res.exit_code == 0 and not res.cache_hit
    ex.close()
    best = min(times)
    print(f"round trips (ms): {[round(x * 1000) for x in times]}")
    # Target: < 100 ms on an idle machine (about 70-90 ms measured with other builds running); the assert keeps
    # a margin for CI machines shared with parallel builds, and catches regressions such as polling sleeps.
    assert best < 0.2, f"best round trip {best * 1000:.0f} ms: {[round(x * 1000) for x in times]}"
