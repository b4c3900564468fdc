"""goma_ext/cluster/bgd_launch.py runs BuildGrid's command line with its config schema checked against the
meta-schema once, not once per object: the objects are still validated, so a bad value fails as under `bgd`.
(Every cluster the suite starts runs its server, migrations and CAS cleanup through it: the good configs pass.)"""

from __future__ import annotations

import os
import re
import subprocess
from pathlib import Path

from goma_ext.cluster import bgd_launch
from goma_ext.cluster.manager import SERVER_CONFIG
from tests.builds import REPO
from tests.remote.conftest import Cluster


def test_a_bad_value_in_the_config_fails_validation(cluster: Cluster, tmp_path: Path) -> None:
    config = (cluster.state / SERVER_CONFIG).read_text()
    bad = tmp_path / "bad.yml"
    bad.write_text(re.sub(r"(?m)^(\s+)poll-interval: .*$", r"\1poll-interval: soon", config, count=1))
    assert bad.read_text() != config
    bgd = Path(os.environ.get("GOMA_EXT_SERVER_VENV", REPO / ".state" / "server-venv")) / "bin" / "bgd"
    proc = subprocess.run(bgd_launch.command(bgd, "server", "start", str(bad)), capture_output=True, text=True,
                          timeout=120)
    assert proc.returncode != 0
    assert f"Config ({bad}) failed validation: 'soon' is not of type 'number'" in proc.stdout + proc.stderr
