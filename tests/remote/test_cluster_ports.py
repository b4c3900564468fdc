"""[harden] A secret goes to a port only while the process the cluster manager started listens there, or not over a
port at all. An attacker's audit (2026-11-29) had another local user take redis's recorded port while the cluster
was down: the manager sent it redis's password (AUTH), took its answer for redis's, and the attacker then logged in
to the real redis with the password. BuildGrid itself reconnects to redis and PostgreSQL on its own: redis now
listens on a Unix socket in a directory of ours, and PostgreSQL's password goes only through SCRAM."""

from __future__ import annotations

import struct
import subprocess
from pathlib import Path

import pytest

from goma_ext.cluster import procs, redis_server, secretfiles, server
from goma_ext.cluster.postgres import DB_USER, ClusterError, Postgres
from tests.remote import session_cluster
from tests.squatter import squatting


def test_redis_takes_no_port_and_its_socket_only_in_a_directory_of_ours(tmp_path: Path) -> None:
    """redis listens on a Unix socket alone: no port that another local user could take while it is down, to be
    sent the password by a reconnecting BuildGrid (redis' AUTH is in clear; the audit's squatter got it). The
    socket's directory must be one only we can change, or someone else could put a listener there first."""
    password = tmp_path / "redis.password"
    secretfiles.write_private(password, secretfiles.new_secret())
    shared = tmp_path / "shared"
    shared.mkdir(mode=0o777)
    shared.chmod(0o1777)
    settings = redis_server.RedisSettings(shared / "redis.sock", tmp_path / "redis", 16 << 20)
    with pytest.raises(ClusterError, match="socket must be in a directory of the cluster's user"):
        redis_server.start(settings, password, tmp_path / "redis.conf", tmp_path / "redis.log")
    own = tmp_path / "run"
    own.mkdir(mode=0o700)
    settings = redis_server.RedisSettings(own / "redis.sock", tmp_path / "redis", 16 << 20)
    pid = redis_server.start(settings, password, tmp_path / "redis.conf", tmp_path / "redis.log")
    try:
        assert redis_server.ping(own / "redis.sock", secretfiles.read_private(password))
        assert procs.held_listeners(pid) == [], "redis listens on a port"
    finally:
        procs.stop(pid)


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
