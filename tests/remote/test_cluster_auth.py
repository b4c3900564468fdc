"""[sandbox] The cluster's own services authenticate. PostgreSQL: a password (scram-sha-256) in a 0600 file, no
`trust`, so another local user cannot connect, let alone run `COPY … TO PROGRAM`. BuildGrid: JWT on every RPC,
localhost included (a request without the cluster's token, or with one another key signed, is UNAUTHENTICATED,
while the cluster's workers and a client with its token build: every other remote test passes through it); with
TLS configured, no plaintext listener unless asked for (the session cluster asks; a second one here does not)."""

from __future__ import annotations

import os
import shutil
import stat
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from bench.subjects.thin_program import ThinProgram
from goma_ext.cluster import manager, procs, secretfiles, tokens
from goma_ext.cluster.postgres import DB_USER, pg_bin
from goma_ext.reapi import capabilities, execution, retry
from goma_ext.reapi.channel import open_channel
from goma_ext.reapi.digest import Digest
from goma_ext.reapi.errors import RemoteError
from goma_ext.remote import stats
from goma_ext.remote.config import RemoteConfig
from goma_ext.remote.wrapper import WARNING_PREFIX
from tests.remote.conftest import INSTANCE, TEST_POLL_S, Cluster, records, wrapper
from tests.system_users import User, temporary_user

ONCE = retry.RetryPolicy(1, timeout_s=5.0)


def _psql_as(user: User, port: int, db_user: str, sql: str, password: str | None = None) -> tuple[int, str]:
    """psql over TCP as USER, never prompting (-w): the password only from PGPASSWORD, when given."""
    env = ["env", f"PGPASSWORD={password}"] if password is not None else []
    argv = [*env, str(pg_bin() / "psql"), "-w", "-h", "127.0.0.1", "-p", str(port), "-U", db_user, "-d", "bgd",
            "-c", sql]
    proc = user.run(argv)
    return proc.returncode, proc.stderr


@pytest.mark.skipif(os.geteuid() != 0, reason="plays a second local user: needs root")
def test_postgres_refuses_another_local_user_so_copy_to_program_cannot_run(cluster: Cluster) -> None:
    st = cluster.st
    marker = Path(tempfile.gettempdir()) / f"gx-pg-copy-{os.getpid()}"
    sql = f"COPY (SELECT 1) TO PROGRAM 'id > {marker}'"
    with temporary_user("gxpg") as user:
        for db_user, password in ((DB_USER, None), ("postgres", None), (DB_USER, "wrong"), (user.name, None)):
            code, err = _psql_as(user, st.pg_port, db_user, sql, password)
            assert code != 0, (db_user, err)
            assert "no password supplied" in err or "password authentication failed" in err, err
    assert not marker.exists()


def test_pg_hba_has_no_trust_and_no_socket(cluster: Cluster) -> None:
    pg = cluster.st.postgres
    hba = (pg.data_dir / "pg_hba.conf").read_text()
    rules = [line.split() for line in hba.splitlines() if line.split("#", 1)[0].strip()]
    assert rules and all(r[-1] in ("peer", "scram-sha-256") for r in rules), rules
    assert "trust" not in hba.replace("# ", "").split("#", 1)[0] and pg.trust_lines() == []
    assert not list(pg.data_dir.glob(".s.PGSQL.*"))  # unix_socket_directories='': TCP on 127.0.0.1 only


def test_secrets_are_0600_in_a_0700_directory_and_on_no_command_line(cluster: Cluster) -> None:
    st = cluster.st
    d = st.auth_dir
    assert stat.S_IMODE(d.stat().st_mode) == 0o700 and d.stat().st_uid == os.geteuid()
    names = sorted(p.name for p in d.iterdir())
    assert names == sorted([secretfiles.CACHE_WRITER_TOKEN, secretfiles.CLIENT_TOKEN, secretfiles.JWT_SECRET,
                            secretfiles.PG_PASSFILE, secretfiles.WORKER_TOKEN])
    for p in d.iterdir():
        assert stat.S_IMODE(p.stat().st_mode) == 0o600 and p.stat().st_uid == os.geteuid(), p
    password = (d / secretfiles.PG_PASSFILE).read_text().strip().rsplit(":", 1)[1]
    secret = (d / secretfiles.JWT_SECRET).read_text().strip()
    assert len(password) >= 43 and len(secret) >= 43
    public = [Path(st.state) / name for name in (manager.STATE_FILE, manager.SERVER_CONFIG, manager.ACL_FILE)]
    public += list((Path(st.state) / "logs").iterdir())
    for f in public:
        text = f.read_text(errors="replace")
        assert password not in text and secret not in text, f
    for cmdline in Path("/proc").glob("[0-9]*/cmdline"):
        try:
            argv = cmdline.read_bytes()
        except OSError:
            continue
        assert password.encode() not in argv and secret.encode() not in argv, cmdline


def _capabilities(cfg: RemoteConfig) -> None:
    with open_channel(cfg) as ch:
        capabilities.fetch(ch, cfg.instance, cfg.metadata(), ONCE)


def _execute(cfg: RemoteConfig) -> None:
    with open_channel(cfg) as ch:
        execution.execute(ch, cfg.instance, cfg.metadata(), Digest.of_bytes(b"no such action"), ONCE, 10.0)


def test_the_cas_and_the_workers_file_cache_are_private_to_the_cluster(cluster: Cluster) -> None:
    """Blobs are every build's inputs and outputs: 0700 directories (what lies under them is then unreachable for
    other local users, whatever the modes BuildGrid gives its files)."""
    state = Path(cluster.st.state)
    for d in (state / "cas", state / "workers" / "file-cache"):
        st = d.stat()
        assert stat.S_IMODE(st.st_mode) == 0o700 and st.st_uid == os.geteuid(), (d, oct(st.st_mode))
    assert any((state / "cas").iterdir())  # BuildGrid writes there


def test_requests_without_the_clusters_token_are_unauthenticated(cluster: Cluster) -> None:
    st = cluster.st
    forged = tokens.mint(secretfiles.new_secret(), tokens.Role.CLIENT)  # right shape, another key
    secret = secretfiles.read_private(st.auth_dir / secretfiles.JWT_SECRET)
    expired = tokens.mint(secret, tokens.Role.CLIENT, lifetime_s=-60)  # the right key, past its `exp`
    tls = RemoteConfig(endpoint=cluster.tls_endpoint, instance=INSTANCE, ca_file=cluster.ca_cert)
    for base in (RemoteConfig(endpoint=cluster.endpoint, instance=INSTANCE), tls):  # localhost is not exempt
        for cfg in (base, replace(base, token=forged), replace(base, token=expired),
                    replace(base, headers=(("authorization", "Basic Ym9ndXM="),))):
            for rpc in (_capabilities, _execute):
                with pytest.raises(RemoteError) as e:
                    rpc(cfg)
                assert e.value.code == "UNAUTHENTICATED", (base.endpoint, rpc.__name__, e.value)
        _capabilities(replace(base, token_file=cluster.token_file))
    shown = subprocess.run([sys.executable, "-m", "goma_ext.cli", "cluster", "token", "--state", str(cluster.state)],
                           capture_output=True, text=True, check=True).stdout
    assert shown == f"{cluster.token_file}\n"
    claims = tokens.verify(secret, cluster.token_file.read_text().strip())
    assert claims is not None and claims.subject == tokens.Role.CLIENT.value


@contextmanager
def _second_cluster(cluster: Cluster, tmp_path_factory: pytest.TempPathFactory, name: str,
                    **transport: Any) -> Iterator[tuple[manager.ClusterSpec, manager.ClusterState]]:
    """Another cluster beside the session's, started with TRANSPORT's options: one worker, JWT (the default), the
    session's venv, compilers and runner; destroyed afterwards."""
    base = tmp_path_factory.mktemp(name)
    reachable = Path(tempfile.mkdtemp(prefix=f"gx-{name}-"))
    os.chmod(reachable, 0o711)
    spec = manager.ClusterSpec(
        state=base / "state", workers=1, server_venv=Path(cluster.st.server_venv), instance=INSTANCE,
        compilers=cluster.st.compilers, keepalive_s=20, poll_s=TEST_POLL_S,
        run_as=cluster.runner.name if cluster.runner else None, sandbox_dir=reachable / "sandboxes",
        worker_args=("--max-procs", "256", "--cpu-time", "120"), **transport,
    )
    try:
        yield spec, manager.start(spec)
    finally:
        manager.destroy(base / "state")
        shutil.rmtree(reachable, ignore_errors=True)


@pytest.fixture(scope="module")
def tls_only(cluster: Cluster, tmp_path_factory: pytest.TempPathFactory) -> Iterator[manager.ClusterState]:
    """A second cluster with TLS and without --also-plaintext."""
    with _second_cluster(cluster, tmp_path_factory, "tls-only", tls_cert=cluster.ca_cert,
                         tls_key=cluster.ca_cert.with_name("server.key")) as (_, st):
        yield st


def test_with_tls_the_plaintext_port_is_not_listening(tls_only: manager.ClusterState) -> None:
    st = tls_only
    assert st.plaintext_endpoint is None and st.endpoint == f"grpcs://127.0.0.1:{st.tls_port}"
    assert not procs.port_open(st.port) and procs.port_open(st.tls_port or 0)
    info = manager.status(Path(st.state))
    assert info["plaintext_endpoint"] is None and info["tls_endpoint"] == st.endpoint
    assert str(info["capabilities"]).startswith("ok"), info
    config = (Path(st.state) / "buildgrid.yml").read_text()
    # the one plaintext channel is the workers' Unix socket, in a directory only the cluster's user can enter
    assert config.count("insecure-mode: true") == 1 and f"address: unix:{st.worker_socket}" in config


def test_tls_only_cluster_builds_with_its_workers_over_tls(
    tls_only: manager.ClusterState, program: ThinProgram, ref: dict[str, bytes], salt: str
) -> None:
    st = tls_only
    workers = (Path(f"/proc/{st.worker_pid}/cmdline").read_bytes()).split(b"\0")
    # the workers' way in is their private socket; a client's only way in is TLS
    assert workers[workers.index(b"--remote") + 1].decode() == f"grpc://unix:{st.worker_socket}"
    token = st.token_file(tokens.Role.CLIENT)
    run = wrapper(program, program.backend("delta"), st.endpoint, salt, "--ca-file", str(st.tls_ca),
                  "--token-file", str(token))
    assert run.returncode == 0 and WARNING_PREFIX not in run.stderr, run.stderr
    assert [r.mode for r in records(program)] == [stats.Mode.REMOTE]
    assert program.native("delta").read_bytes() == ref["delta"]


@pytest.fixture(scope="module")
def plaintext_all(cluster: Cluster, tmp_path_factory: pytest.TempPathFactory) -> Iterator[manager.ClusterSpec]:
    """A second `all` cluster without TLS."""
    with _second_cluster(cluster, tmp_path_factory, "plaintext-all") as (spec, _):
        yield spec


def test_workers_never_send_their_token_to_whoever_took_buildgrids_port(plaintext_all: manager.ClusterSpec) -> None:
    """[harden] An attacker's audit (2026-12-07): with BuildGrid down and its workers up (`cluster stop --role
    server` on an `all` host, a crash), any local user could bind BuildGrid's loopback port, and the workers,
    reconnecting every few seconds, sent it their token: with it, one could take other users' actions and
    answer them into the shared action cache. The workers reach BuildGrid on a Unix socket in a 0700 directory
    instead, and the port hears nothing from them."""
    import time

    from tests.squatter import squatting

    st = manager.load(plaintext_all.state)
    assert st is not None and st.worker_socket is not None and procs.alive(st.worker_pid)
    run = Path(st.worker_socket).parent
    assert stat.S_IMODE(run.stat().st_mode) == 0o700 and run.stat().st_uid == os.geteuid()
    manager.stop(plaintext_all.state, manager.Role.SERVER)  # BuildGrid down, the workers up and retrying
    assert procs.alive(st.worker_pid) and not procs.port_open(st.port)
    with squatting(st.port) as (_, heard):
        time.sleep(8)  # the workers retry within 5 s
    assert heard == [], heard[:1]
    started = manager.start(plaintext_all)  # BuildGrid back: the workers find it on their socket
    assert started.worker_pid == st.worker_pid and started.worker_socket == st.worker_socket
    assert str(manager.status(plaintext_all.state)["capabilities"]).startswith("ok")

