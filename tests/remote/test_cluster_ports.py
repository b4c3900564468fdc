"""[harden] A secret goes to a port only while the process the cluster manager started listens there. An
attacker's audit (2026-11-29) had another local user take redis's recorded port while the cluster was down: the
manager sent it redis's password (AUTH), took its answer for redis's, and the attacker then logged in to the real
redis with the password."""

from __future__ import annotations

import struct
import subprocess
from pathlib import Path

import pytest

from goma_ext.cluster import redis_server, secretfiles, server
from goma_ext.cluster.postgres import DB_USER, ClusterError, Postgres
from tests.remote import session_cluster
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


def test_buildgrid_sends_no_postgres_password_to_a_process_that_took_its_port(tmp_path: Path) -> None:
    """BuildGrid reconnects to PostgreSQL's loopback port whenever it lost it: whoever took the port meanwhile and
    asks for the password in clear (AuthenticationCleartextPassword) must not get it. Connects as BuildGrid does,
    with the server venv's SQLAlchemy and psycopg2 to the URL the cluster gives it."""
    python = server.ensure_venv(session_cluster.server_venv()).with_name("python")
    secret = secretfiles.new_secret()
    connect = "import sqlalchemy, sys; sqlalchemy.create_engine(sys.argv[1]).connect()"
    # no TLS (to libpq's SSLRequest), then AuthenticationCleartextPassword (to its startup message)
    with squatting(answer=(b"N", b"R" + struct.pack("!ii", 8, 3))) as (port, heard):
        passfile = secretfiles.write_private(tmp_path / "pgpass", f"127.0.0.1:{port}:*:{DB_USER}:{secret}\n")
        url = Postgres(tmp_path / "data", port, None, passfile).url
        proc = subprocess.run([str(python), "-c", connect, url], capture_output=True, text=True, timeout=120,
                              check=False)
    assert heard and not any(secret.encode() in h for h in heard), heard
    assert proc.returncode != 0 and "cleartext password" in proc.stderr, proc.stderr[-2000:]


def test_the_managers_psql_sends_no_password_to_a_process_that_took_postgres_port(tmp_path: Path) -> None:
    """The manager's own queries go through Debian's psql (libpq 15, which answers a request for the password in
    clear). A stale postmaster.pid naming a live process (not PostgreSQL) makes `pg_ctl status` say running: the
    query must not reach whoever holds the port."""
    (tmp_path / "data").mkdir()
    other = subprocess.Popen(["sleep", "60"])  # the live process the stale pid names now
    try:
        (tmp_path / "data" / "postmaster.pid").write_text(f"{other.pid}\n{tmp_path / 'data'}\n")
        with squatting(answer=(b"N", b"R" + struct.pack("!ii", 8, 3))) as (port, heard):
            passfile = secretfiles.write_private(tmp_path / "pgpass", f"127.0.0.1:{port}:*:{DB_USER}:pw\n")
            with pytest.raises(ClusterError, match="not held by the postmaster"):
                Postgres(tmp_path / "data", port, None, passfile).schema_version()
    finally:
        other.kill()
        other.wait()
    assert heard == [], heard
