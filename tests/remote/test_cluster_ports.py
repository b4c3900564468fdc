"""[harden] A secret goes to a port only while the process the cluster manager started listens there. An
attacker's audit (2026-11-29) had another local user take redis's recorded port while the cluster was down: the
manager sent it redis's password (AUTH), took its answer for redis's, and the attacker then logged in to the real
redis with the password."""

from __future__ import annotations

from pathlib import Path

import pytest

from goma_ext.cluster import procs, redis_server, secretfiles
from goma_ext.cluster.postgres import ClusterError
from tests.squatter import squatting


def test_redis_start_sends_no_password_to_a_process_that_took_its_port(tmp_path: Path) -> None:
    # it answers what redis would say to AUTH and PING, so that only the pid check can tell
    with squatting(answer=b"+OK\r\n+PONG\r\n") as (port, heard):
        password = tmp_path / "redis.password"
        secretfiles.write_private(password, secretfiles.new_secret())
        settings = redis_server.RedisSettings(port, tmp_path / "redis", 16 << 20)
        with pytest.raises(ClusterError, match="redis-server exited during start-up"):  # its port is taken
            redis_server.start(settings, password, tmp_path / "redis.conf", tmp_path / "redis.log")
    assert heard == [], heard  # no AUTH, no password
