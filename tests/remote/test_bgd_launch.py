"""goma_ext/cluster/bgd_launch.py runs BuildGrid's command line with its config schema checked against the
meta-schema once, not once per object: the objects are still validated, so a cluster's config passes and a bad
value fails as under `bgd` (`bgd server lint`, BuildGrid's strict validation; every cluster the suite starts
runs its server, migrations and CAS cleanup through the launcher)."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

from goma_ext.cluster import bgd_launch
from goma_ext.cluster.server import ServerSettings, ensure_venv, render_config
from tests.builds import REPO


def _lint(config: Path) -> subprocess.CompletedProcess[str]:
    bgd = ensure_venv(Path(os.environ.get("GOMA_EXT_SERVER_VENV", REPO / ".state" / "server-venv")))
    return subprocess.run(bgd_launch.command(bgd, "server", "lint", str(config)), capture_output=True, text=True,
                          timeout=120)


def test_a_cluster_config_passes_and_a_bad_value_fails(tmp_path: Path) -> None:
    text = render_config(ServerSettings(port=1000, db_url="postgresql+psycopg2://bgd@127.0.0.1:5/bgd",
                                        cas_dir=tmp_path / "cas", poll_s=1.0))
    good, bad = tmp_path / "good.yml", tmp_path / "bad.yml"
    good.write_text(text)
    bad.write_text(text.replace("  poll-interval: 1.0\n", "  poll-interval: soon\n", 1))
    assert bad.read_text() != text
    ok = _lint(good)
    assert ok.returncode == 0, ok.stdout + ok.stderr
    failed = _lint(bad)
    assert failed.returncode != 0
    assert f"Config ({bad}) failed validation: 'soon' is not of type 'number'" in failed.stdout + failed.stderr
