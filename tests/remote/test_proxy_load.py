"""The proxy under load (loopback only, bounded): 2,000 actions from up to 200 concurrent thin clients against the
session's BuildGrid (with --full; a fifth of both by default, tests/budget.py). Nothing may be lost or wrong; the
figures are printed (the benchmark records them)."""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path

import pytest

from bench import proxy_load
from goma_ext.remote import proxy_protocol as wire
from tests import budget
from tests.remote.conftest import INSTANCE, Cluster

ACTIONS, CLIENTS = budget.cases(2000), budget.cases(200)


@pytest.mark.slow
def test_actions_from_a_crowd_of_concurrent_clients(cluster: Cluster, tmp_path: Path, salt: str) -> None:
    copies = ACTIONS // (len(proxy_load.VARIANTS) * 5)
    actions, digests = proxy_load.prepare(tmp_path, copies)
    state = tempfile.mkdtemp(prefix="gxl-")
    env = {**os.environ, "GOMA_EXT_CACHE_SALT": salt, "GOMA_EXT_REMOTE_INSTANCE": INSTANCE, wire.STATE_DIR_ENV: state}
    try:
        result = proxy_load.run_load(actions, digests, cluster.endpoint, env, CLIENTS)
    finally:
        proxy_load.stop_proxies(env)
        shutil.rmtree(state, ignore_errors=True)
    print(proxy_load.describe(result))
    assert result.actions == ACTIONS and result.lost == 0 and result.wrong == 0, result
    assert result.modes.get("fallback", 0) == 0 and sum(result.modes.values()) == ACTIONS
    assert result.proxy["actions_remote"] <= result.distinct  # every distinct action executed at most once
    assert result.proxy["children_cpu_s"] == 0  # the proxy ran no process of its own
