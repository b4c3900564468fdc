"""`gn-thinlto gen --remote URL`: the graph's backends run through goma-ext run on the local cluster.

The thin link and final link stay local; natives are byte-identical to a local graph build; a fresh build
directory is served from the action cache; ninja's regeneration keeps the remote rule.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from gn_thinlto import tools
from gn_thinlto.cli.example import run_self_checks
from goma_ext.remote import stats
from tests.integration.test_graph_support import copy_workspace, gn_thinlto
from tests.remote.conftest import INSTANCE, Cluster

pytestmark = pytest.mark.slow


def gen_and_build(root: Path, out: Path, salt: str, *flags: str) -> None:
    env = {**os.environ, "GOMA_EXT_CACHE_SALT": salt, "GOMA_EXT_REMOTE_INSTANCE": INSTANCE}
    proc = subprocess.run([sys.executable, "-m", "gn_thinlto.cli", "gen", str(out), "--root", str(root), *flags],
                          capture_output=True, text=True, env=env)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    build = subprocess.run(["ninja", "-C", str(out)], capture_output=True, text=True, env=env)
    assert build.returncode == 0, build.stdout[-3000:]
    assert "goma-ext: warning" not in build.stdout, build.stdout[-3000:]


def natives(out: Path) -> dict[str, bytes]:
    return {str(p.relative_to(out)): p.read_bytes() for p in sorted((out / "gn-thinlto").glob("*/native/**/*.o"))}


def test_gen_remote_builds_through_the_cluster(cluster: Cluster, tmp_path: Path, salt: str) -> None:
    root = copy_workspace("basic", tmp_path)
    local, remote, fresh = tmp_path / "local", tmp_path / "remote", tmp_path / "fresh"
    gen_and_build(root, local, salt)
    gen_and_build(root, remote, salt, "--remote", cluster.endpoint)

    assert "goma_ext/remote/thin_client.py --remote" in (remote / "gn-thinlto/rules.ninja").read_text()
    summary = stats.report(remote)
    assert summary["runs"] > 0 and summary["remote_executions"] == summary["runs"], summary
    assert summary["naive_upload_bytes"] >= summary["input_bytes"] > 0
    assert natives(remote) == natives(local)
    binaries = tools.gn_ls(remote, root, "--type=executable", "--as=output")
    assert binaries and [c for c in run_self_checks(remote, binaries) if not c.ok] == []

    report = gn_thinlto("report", str(remote), "--json")
    assert report.returncode == 0 and json.loads(report.stdout)["runs"] == summary["runs"]

    gen_and_build(root, fresh, salt, "--remote", cluster.endpoint)
    again = stats.report(fresh)
    assert again["remote_executions"] == 0 and again["cache_hits"] == again["runs"] == summary["runs"], again

    (root / "app" / "BUILD.gn").touch()
    regen = subprocess.run(["ninja", "-C", str(remote), "build.ninja"], capture_output=True, text=True)
    assert regen.returncode == 0, regen.stdout + regen.stderr
    assert "goma_ext/remote/thin_client.py --remote" in (remote / "gn-thinlto/rules.ninja").read_text()
