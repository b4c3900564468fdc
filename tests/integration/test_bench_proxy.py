"""[bench] The proxy benchmark runs end to end at its smallest size (no timing asserts)."""

from __future__ import annotations

from pathlib import Path

import pytest

from .bench_support import bench

pytestmark = pytest.mark.slow


def test_proxy_smallest(tmp_path: Path) -> None:
    # one round of hits and two copies in the load tests (--quick: four and ten): each load test still sends every
    # distinct action from two build directories at once (the thin clients) or repeated through one step server,
    # at a fifth of the clients' and the cluster's CPU
    data = bench("proxy", "--quick", "--subject", "micro", "--workers", "2", "--hit-rounds", "1", "--load-copies", "2",
                 results=tmp_path, cluster=True)
    if data.get("missing"):  # no PostgreSQL here: the benchmark says so instead of inventing numbers
        return
    assert data["hits"]["hits"] == 5
    for run in (data["thin_load"], data["load"]):
        # 5 modules x 4 -O levels, twice: from 2 copies (thin clients), twice from 1 copy (step launchers)
        assert run["lost"] == run["wrong"] == 0 and run["actions"] == 40 and run["distinct"] == 20, run
    # [lean] the second load test runs the build's client: step launchers served by the build directory's server
    assert data["load"]["client"] == "steps" and data["load"]["python_steps"] == 0
    assert 0 < data["step_server_cpu_ms_per_action"] < data["client_cpu_ms_per_action"]
    assert {r["build"] for r in data["rows"]} == {"c", "c2", "d1", "d2", "p1", "p2"}
    assert data["proxy_cpu_ms_per_action"] > 0 and set(data["goals"]) >= {"client_cpu_per_hit_proxy_vs_in_process"}
