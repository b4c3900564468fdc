"""A real cluster answers Capabilities and runs trivial actions (round trips are printed; the <100 ms target is a
benchmark number, bench/remote_bench.py and docs/benchmarks.md, never a test assertion)."""

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


def test_trivial_actions_execute_remotely(cluster: Cluster, tmp_path: Path) -> None:
    ex = RemoteExecutor(RemoteConfig(endpoint=cluster.endpoint, instance=INSTANCE, token_file=cluster.token_file))
    ident = identify("clang-19", tmp_path)
    times = []
    for i in range(10):
        t = time.monotonic()
        argv = ["clang-19", "--version", f"-DX={time.time_ns()}{i}"]
        res = ex.run(argv, tmp_path, [], [], ident)
        times.append(time.monotonic() - t)
        assert res.exit_code == 0 and not res.cache_hit
    ex.close()
    print(f"round trips (ms): {[round(x * 1000) for x in times]}")
