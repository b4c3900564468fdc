"""[trust] The cluster's PostgreSQL data directory is created fresh or refused: a planted link, another user's
directory or old data at its path is never chowned, chmodded or initdb'd."""

from __future__ import annotations

import os
import pwd
from pathlib import Path

import pytest

from goma_ext.cluster.postgres import RUN_AS_WHEN_ROOT, ClusterError, choose_data_dir, fresh_dir


def test_a_new_path_is_made_private(tmp_path: Path) -> None:
    os.close(fresh_dir(tmp_path / "state" / "postgres"))
    assert (tmp_path / "state" / "postgres").stat().st_mode & 0o777 == 0o700


@pytest.mark.parametrize("plant", ["link", "file", "old-data", "open-mode"])
def test_anything_already_there_is_refused(tmp_path: Path, plant: str) -> None:
    victim = tmp_path / "victim"
    victim.mkdir(mode=0o755)
    path = tmp_path / "postgres"
    if plant == "link":
        path.symlink_to(victim)
    elif plant == "file":
        path.write_text("x")
    else:
        path.mkdir(mode=0o700)
        if plant == "old-data":
            (path / "PG_VERSION").write_text("15\n")
        else:
            path.chmod(0o777)
    with pytest.raises(ClusterError, match="refusing to put PostgreSQL's data there"):
        fresh_dir(path)
    assert victim.stat().st_mode & 0o777 == 0o755 and list(victim.iterdir()) == []


@pytest.mark.skipif(os.geteuid() != 0, reason="the /tmp fallback is root's (CI runs as root)")
def test_roots_fallback_is_a_new_unpredictable_directory(tmp_path: Path) -> None:
    pwd.getpwnam(RUN_AS_WHEN_ROOT)
    unreachable = tmp_path / "private"
    unreachable.mkdir(mode=0o700)
    tmp_path.chmod(0o700)
    first, user = choose_data_dir(unreachable)
    second, _ = choose_data_dir(unreachable)
    try:
        assert user == RUN_AS_WHEN_ROOT and first != second
        for d in (first, second):
            assert d.name.startswith("goma-ext-pg-") and d.stat().st_uid == 0 and d.stat().st_mode & 0o777 == 0o700
            os.close(fresh_dir(d))  # the empty directory mkdtemp made is accepted
    finally:
        for d in (first, second):
            d.rmdir()
