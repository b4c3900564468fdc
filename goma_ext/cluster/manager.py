"""Start, stop and inspect one cluster host (role all, server or worker); what it runs is in STATE/cluster.json."""

from __future__ import annotations

import itertools
import json
import os
import shutil
import socket
import stat
import sys
import tempfile
import time
from dataclasses import asdict, dataclass, replace
from enum import Enum
from pathlib import Path
from typing import Any

from goma_ext.cluster import acl, bgd_launch, procs, redis_server, roles, sandboxing, secretfiles, tokens
from goma_ext.cluster.postgres import (
    DB_USER,
    ClusterError,
    Postgres,
    choose_data_dir,
    our_data_dir,
    reusable_data_dir,
)
from goma_ext.cluster.roles import Role, parse_size, probe_host
from goma_ext.cluster.server import (
    DEFAULT_POLL_S,
    PersistentStore,
    ServerSettings,
    Watermarks,
    check_venv,
    ensure_venv,
    migrate,
    migrations,
    render_cleanup_config,
    render_config,
)
from goma_ext.reapi import capabilities, retry
from goma_ext.reapi.channel import open_channel
from goma_ext.reapi.errors import RemoteError
from goma_ext.remote.config import RemoteConfig, explain_failure
from goma_ext.remote.names import ENV_VARS, TOKEN_ENV
from goma_ext.worker.bots import SESSION_FILE
from thinlto_base import safefs

STATE_FILE = "cluster.json"
SERVER_CONFIG = "buildgrid.yml"
CLEANUP_CONFIG = "cleanup.yml"
ACL_FILE = "buildgrid-acl.yml"  # beside SERVER_CONFIG: which RPCs each token's role may call (no secret in it)
READY_TIMEOUT_S = 90.0
CLEANUP_INTERVAL_S = 10
DEFAULT_CAS_MAX_SIZE = parse_size(roles.DEFAULT_CAS_MAX_SIZE)
DEFAULT_AC_MAX_MEMORY = parse_size(roles.DEFAULT_AC_MAX_MEMORY)


class Auth(Enum):
    """How BuildGrid authenticates clients and workers."""

    JWT = "jwt"  # HS256 tokens the cluster mints (STATE/auth): the default, the cluster is open to every local user
    NONE = "none"


@dataclass(frozen=True)
class ClusterSpec:
    """What to start: ports (0 = pick a free one), workers, optional TLS, where BuildGrid's venv lives."""

    state: Path
    port: int = 0
    workers: int = 2
    instance: str = ""
    server_venv: Path | None = None
    tls_port: int | None = None
    tls_cert: Path | None = None
    tls_key: Path | None = None
    tls_ca: Path | None = None  # what the workers verify the TLS endpoint with (default: the certificate itself)
    tls_client_ca: Path | None = None  # mTLS: BuildGrid requires client certificates signed by this CA
    worker_cert: Path | None = None  # the client certificate the workers (and the cluster's own probe) present
    worker_key: Path | None = None
    also_plaintext: bool = False  # with TLS: also serve grpc:// on `port` (without TLS it is the only channel)
    auth: Auth = Auth.JWT
    compilers: tuple[str, ...] = ()
    keepalive_s: int = 30
    poll_s: float = DEFAULT_POLL_S  # server: the scheduler's polling (a test suite's clusters poll less)
    compression: str = "off"  # server: `gzip`: BuildGrid compresses its answers (ServerSettings.compression)
    run_as: str | None = None  # root: the workers' action user (default goma-ext-runner, created if missing)
    sandbox_dir: Path | None = None  # default STATE/sandboxes, or a temp dir when the runner cannot reach STATE
    worker_args: tuple[str, ...] = ()  # extra `goma-ext worker` flags (limits, --isolation)
    role: Role = Role.ALL
    listen: tuple[str, ...] = ("127.0.0.1",)  # server: the addresses BuildGrid binds
    cas_max_size: int = DEFAULT_CAS_MAX_SIZE  # server: `bgd cleanup`'s high watermark (bytes)
    ac_max_memory: int = DEFAULT_AC_MAX_MEMORY  # server: redis maxmemory (bytes)
    cas_access_refresh_s: int = 60  # server: how stale a blob's recorded access time may be (eviction waits 2x)
    server_url: str | None = None  # worker: the server's endpoint
    worker_token_file: Path | None = None  # worker: the token the server host's `cluster start` minted
    bot_id: str | None = None  # worker: bot id prefix (default: host name; `all`: local-STATE)


@dataclass(frozen=True)
class ClusterState:
    """A started cluster, as recorded in STATE/cluster.json."""

    state: str
    port: int
    instance: str
    pg_port: int
    pg_data: str
    pg_user: str | None
    server_venv: str
    workers: int
    server_pid: int | None = None
    worker_pid: int | None = None
    tls_port: int | None = None
    tls_cert: str | None = None
    tls_key: str | None = None
    tls_ca: str | None = None
    tls_client_ca: str | None = None
    worker_cert: str | None = None
    worker_key: str | None = None
    plaintext: bool = True
    auth: str = Auth.NONE.value  # a state file without it predates authentication
    pg_passfile: str | None = None
    compilers: tuple[str, ...] = ()
    keepalive_s: int = 30
    poll_s: float = DEFAULT_POLL_S
    compression: str = "off"
    run_as: str | None = None
    sandbox_dir: str | None = None
    sandbox_dir_owned: bool = False
    worker_args: tuple[str, ...] = ()
    role: str = Role.ALL.value  # a state file without it predates roles: everything on one host
    listen: tuple[str, ...] = ("127.0.0.1",)
    cas_max_size: int | None = None  # None: unbounded disk CAS, in-memory action cache (`all`)
    ac_max_memory: int | None = None
    cas_access_refresh_s: int = 60
    # Set when the host has redis (the server role's action cache). 0 since redis listens on redis_socket alone; a
    # state file from before that names the loopback port its redis listened on (start moves it to a socket).
    redis_port: int | None = None
    redis_pid: int | None = None
    redis_socket: str | None = None  # redis' Unix socket, in a directory only the cluster's user can change
    cleanup_pid: int | None = None
    server_url: str | None = None
    worker_token_file: str | None = None
    bot_id: str | None = None
    migrated: str | None = None  # "SCRIPTS:REVISION": server.migrations and the revision they brought the database to
    worker_socket: str | None = None  # `all`: the Unix socket BuildGrid serves this host's workers on
    boot_id: str | None = None  # the boot the pids above were recorded in (procs.boot_id)

    @property
    def host_role(self) -> Role:
        return Role(self.role)

    @property
    def _host(self) -> str:
        host = probe_host(self.listen)
        return f"[{host}]" if ":" in host else host

    @property
    def plaintext_endpoint(self) -> str | None:
        return f"grpc://{self._host}:{self.port}" if self.plaintext and self.host_role.runs_server else None

    @property
    def tls_endpoint(self) -> str | None:
        return f"grpcs://{self._host}:{self.tls_port}" if self.tls_port and self.host_role.runs_server else None

    @property
    def endpoint(self) -> str:
        """The endpoint workers and probes use: TLS when configured; a worker host's is its server's."""
        if self.server_url:
            return self.server_url
        return self.tls_endpoint or f"grpc://{self._host}:{self.port}"

    @property
    def endpoint_port(self) -> int:
        return int(self.endpoint.rsplit(":", 1)[1])

    @property
    def endpoint_host(self) -> str:
        """The address (or name) in the endpoint, without an IPv6 address's brackets."""
        return self.endpoint.split("://", 1)[-1].rsplit(":", 1)[0].strip("[]")

    @property
    def server_serving(self) -> bool:
        """The recorded BuildGrid runs and listens on its endpoint's port: a pid recorded before a crash or a reboot
        may be another process's now, and the port anyone's (procs.listens)."""
        return (self.server_pid is not None and procs.alive(self.server_pid)
                and procs.listens(self.server_pid, self.endpoint_port, self.endpoint_host))

    @property
    def redis_serving(self) -> bool:
        """The recorded redis-server runs on its socket (its process title names it), and the socket is there."""
        if self.redis_socket is None or redis_title(self.redis_pid) != b"unixsocket:" + os.fsencode(self.redis_socket):
            return False
        try:
            return stat.S_ISSOCK(os.stat(self.redis_socket).st_mode)
        except OSError:
            return False

    @property
    def store(self) -> PersistentStore | None:
        """The server role's persistent CAS index and redis action cache (None for `all`)."""
        if self.redis_port is None:
            return None
        return PersistentStore(Path(self.redis_socket or Path(self.state) / "redis" / REDIS_SOCKET),
                               self.auth_dir / secretfiles.REDIS_PASSWORD, self.cas_access_refresh_s)

    @property
    def auth_dir(self) -> Path:
        return Path(self.state) / secretfiles.AUTH_DIR

    def token_file(self, role: tokens.Role) -> Path | None:
        """The 0600 file with ROLE's bearer token (None without authentication)."""
        if self.worker_token_file is not None:  # a worker host: the server host minted it
            return Path(self.worker_token_file) if role is tokens.Role.WORKER else None
        if self.auth != Auth.JWT.value:
            return None
        return self.auth_dir / secretfiles.token_name(role)

    def client_config(self, rpc_timeout_s: float = 30.0, max_attempts: int = 4) -> RemoteConfig:
        """Settings for a client of this cluster: its endpoint, CA and client token, and the workers' certificate
        when there is one (a cluster that requires client certificates refuses a probe without one). Never the
        worker token: BuildGrid refuses it Execute and the action cache. A worker host holds no client token (None
        here): whoever builds there uses a client token of their own, from the server host."""
        tls = self.endpoint.startswith("grpcs://")
        return RemoteConfig(
            endpoint=self.endpoint, instance=self.instance, ca_file=self.ca_file,
            client_cert=Path(self.worker_cert) if tls and self.worker_cert else None,
            client_key=Path(self.worker_key) if tls and self.worker_key else None,
            token_file=self.token_file(tokens.Role.CLIENT),
            rpc_timeout_s=rpc_timeout_s, max_attempts=max_attempts,
        )

    def probe_config(self, rpc_timeout_s: float = 30.0, max_attempts: int = 4) -> RemoteConfig:
        """What `start` waits with and `status` probes with (GetCapabilities only, which every role may call): the
        client settings, or on a worker host, which holds no client token, its worker token."""
        cfg = self.client_config(rpc_timeout_s, max_attempts)
        return cfg if cfg.token_file else replace(cfg, token_file=self.token_file(tokens.Role.WORKER))

    @property
    def ca_file(self) -> Path | None:
        """What TLS clients of the endpoint verify it with."""
        secure = self.endpoint.startswith("grpcs://")
        return Path(self.tls_ca) if secure and self.tls_ca else None

    @property
    def pg_data_ours(self) -> bool:
        """Whether the recorded data directory is still the cluster's (postgres.our_data_dir)."""
        return our_data_dir(Path(self.state), self.pg_data, self.pg_user)

    @property
    def postgres(self) -> Postgres:
        passfile = Path(self.pg_passfile) if self.pg_passfile else None
        return Postgres(Path(self.pg_data), self.pg_port, self.pg_user, passfile)

    def save(self) -> None:
        path = Path(self.state) / STATE_FILE
        tmp = path.with_suffix(".tmp")
        tmp.write_text(json.dumps(asdict(replace(self, boot_id=procs.boot_id())), indent=2, sort_keys=True) + "\n")
        os.replace(tmp, path)


def load(state: Path) -> ClusterState | None:
    path = state / STATE_FILE
    if not path.is_file():
        return None
    try:
        data = json.loads(path.read_text())
        data["compilers"] = tuple(data.get("compilers", ()))
        data["worker_args"] = tuple(data.get("worker_args", ()))
        data["listen"] = tuple(data.get("listen", ("127.0.0.1",)))
        st = ClusterState(**data)
    except (ValueError, TypeError) as e:
        raise ClusterError(f"{path}: unreadable cluster state ({e}); remove it and start again") from e
    # pids recorded before a reboot are other processes' now, if anyone's: never trusted, never signalled (a state
    # file without a boot id, from before it was recorded, keeps them: its cluster may be running)
    if st.boot_id is not None and st.boot_id != procs.boot_id():
        st = replace(st, server_pid=None, worker_pid=None, redis_pid=None, cleanup_pid=None)
    return _still_ours(st)


def _still_ours(st: ClusterState) -> ClusterState:
    """ST without the recorded pids of processes that are not the daemons it started: a daemon that died leaves its
    pid to be handed out again in the same boot, and as root any root process passes procs.alive. Taken for ours
    (stopped by `stop`, left running by `start`) is only a process whose command line names this state's own
    files, as the manager started it (_is_daemon). (redis: redis_title.)"""
    foreign: dict[str, Any] = {name: None for name in _DAEMON_MARKS
                               if procs.alive(getattr(st, name)) and not _is_daemon(st, name)}
    return replace(st, **foreign) if foreign else st


# What names each recorded daemon's own files in its command line: an option and its value, side by side.
_DAEMON_MARKS = {"server_pid": ("start", SERVER_CONFIG), "cleanup_pid": ("start", CLEANUP_CONFIG),
                 "worker_pid": ("--work-dir", "workers")}


def _is_daemon(st: ClusterState, name: str) -> bool:
    """Whether the process of ST's recorded pid NAME (server_pid, cleanup_pid, worker_pid) has the command line the
    manager starts it with: BuildGrid's and the cleanup's `start STATE/CONFIG`, the workers' `--work-dir
    STATE/workers`."""
    flag, below_state = _DAEMON_MARKS[name]
    pair = (os.fsencode(flag), os.fsencode(Path(st.state) / below_state))
    return pair in itertools.pairwise(procs.cmdline(getattr(st, name)).split(b"\0"))


def _wait_ready(st: ClusterState, pid: int, log: Path) -> None:
    cfg = st.probe_config(rpc_timeout_s=2.0, max_attempts=1)
    instance = st.instance
    host, port = st.endpoint_host, st.endpoint_port  # the probe's (cfg.endpoint is st.endpoint)
    deadline = time.monotonic() + READY_TIMEOUT_S
    last = "no answer"
    while time.monotonic() < deadline:
        if not procs.alive(pid):
            tail = log.read_text(errors="replace")[-800:] if log.exists() else ""
            raise ClusterError(f"BuildGrid exited during start-up; see {log}:\n{tail}")
        if not procs.listens(pid, port, host):  # the token goes only to the server just started (procs.listens)
            last = f"BuildGrid (pid {pid}) does not listen on {host} port {port} yet"
            time.sleep(0.2)
            continue
        try:
            with open_channel(cfg) as ch:
                capabilities.fetch(ch, instance, cfg.metadata(), retry.RetryPolicy(1, timeout_s=2.0))
            return
        except RemoteError as e:
            if e.code == "UNAUTHENTICATED":  # it answered: waiting longer would not help
                raise ClusterError(f"BuildGrid refused the cluster's own client token ({e}); see {log}") from e
            if e.code == "CONFIG":  # e.g. the probe's client certificate is unreadable: waiting would not help
                raise ClusterError(f"cannot probe BuildGrid: {e}") from e
            last = explain_failure(cfg, str(e))
            time.sleep(0.2)
    raise ClusterError(f"BuildGrid did not answer within {READY_TIMEOUT_S:.0f} s (last: {last}); see {log}")


def _initial_state(spec: ClusterSpec) -> ClusterState:
    if spec.role is Role.WORKER:
        return _initial_worker_state(spec)
    if spec.tls_cert is None and (spec.tls_key or spec.tls_ca or spec.also_plaintext):
        raise ClusterError("--tls-key, --tls-ca and --also-plaintext need --tls-cert")
    if spec.tls_cert is not None and spec.tls_key is None:
        raise ClusterError("--tls-cert needs --tls-key")
    _check_client_certs(spec)
    pg_data, pg_user = choose_data_dir(spec.state)
    server = spec.role is Role.SERVER
    # A server host runs no worker: it gets no sandbox directory (a made one would be left in the temp dir).
    sandbox_dir, owned = (None, False) if server else (
        (spec.sandbox_dir, False) if spec.sandbox_dir else sandboxing.choose_sandbox_dir(spec.state))
    return ClusterState(
        state=str(spec.state), port=spec.port or procs.free_port(), instance=spec.instance,
        pg_port=procs.free_port(), pg_data=str(pg_data), pg_user=pg_user,
        server_venv=str((spec.server_venv or spec.state / "server-venv").resolve()),
        workers=0 if server else spec.workers,
        tls_port=(spec.tls_port or procs.free_port()) if spec.tls_cert else None,
        tls_cert=str(spec.tls_cert.resolve()) if spec.tls_cert else None,
        tls_key=str(spec.tls_key.resolve()) if spec.tls_key else None,
        tls_ca=str((spec.tls_ca or spec.tls_cert).resolve()) if spec.tls_cert else None,
        tls_client_ca=str(spec.tls_client_ca.resolve()) if spec.tls_client_ca else None,
        worker_cert=str(spec.worker_cert.resolve()) if spec.worker_cert else None,
        worker_key=str(spec.worker_key.resolve()) if spec.worker_key else None,
        plaintext=spec.tls_cert is None or spec.also_plaintext, auth=spec.auth.value,
        pg_passfile=str((spec.state / secretfiles.AUTH_DIR / secretfiles.PG_PASSFILE).resolve()),
        compilers=spec.compilers, keepalive_s=spec.keepalive_s, poll_s=spec.poll_s, compression=spec.compression,
        run_as=None if server else sandboxing.ensure_runner(spec.run_as),
        sandbox_dir=None if sandbox_dir is None else str(sandbox_dir.resolve()), sandbox_dir_owned=owned,
        worker_args=spec.worker_args, role=spec.role.value, listen=spec.listen,
        cas_max_size=spec.cas_max_size if server else None, ac_max_memory=spec.ac_max_memory if server else None,
        redis_port=0 if server else None, cas_access_refresh_s=spec.cas_access_refresh_s,
    )


def _initial_worker_state(spec: ClusterSpec) -> ClusterState:
    """A worker host: no database, no server; the endpoint, CA and token of a server host."""
    if spec.server_url is None:
        raise ClusterError("--role worker needs --server")
    token = spec.worker_token_file.resolve() if spec.worker_token_file else None
    if token is not None:
        secretfiles.read_private(token)  # there, readable, and not readable by others: one line now, not per worker
    sandbox_dir, owned = (spec.sandbox_dir, False) if spec.sandbox_dir else sandboxing.choose_sandbox_dir(spec.state)
    return ClusterState(
        state=str(spec.state), port=0, instance=spec.instance, pg_port=0, pg_data="", pg_user=None,
        server_venv="", workers=spec.workers, tls_ca=str(spec.tls_ca.resolve()) if spec.tls_ca else None,
        plaintext=False, auth=Auth.JWT.value if token else Auth.NONE.value, compilers=spec.compilers,
        keepalive_s=spec.keepalive_s, run_as=sandboxing.ensure_runner(spec.run_as),
        sandbox_dir=str(sandbox_dir.resolve()), sandbox_dir_owned=owned, worker_args=spec.worker_args,
        role=Role.WORKER.value, listen=(), server_url=spec.server_url,
        worker_token_file=str(token) if token else None, bot_id=spec.bot_id or socket.gethostname(),
    )


def _server_settings(st: ClusterState) -> ServerSettings:
    state = Path(st.state)
    return ServerSettings(
        port=st.port, db_url=st.postgres.url, cas_dir=state / "cas", instance=st.instance, tls_port=st.tls_port,
        tls_cert=Path(st.tls_cert) if st.tls_cert else None, tls_key=Path(st.tls_key) if st.tls_key else None,
        tls_client_ca=Path(st.tls_client_ca) if st.tls_client_ca else None,
        keepalive_s=st.keepalive_s, poll_s=st.poll_s, plaintext=st.plaintext, compression=st.compression,
        jwt_secret_file=st.auth_dir / secretfiles.JWT_SECRET if st.auth == Auth.JWT.value else None,
        acl_file=state / ACL_FILE if st.auth == Auth.JWT.value else None,
        listen=st.listen, store=st.store, unix_socket=Path(st.worker_socket) if st.worker_socket else None,
    )


def _check_client_certs(spec: ClusterSpec) -> None:
    """mTLS options: on the TLS channel only (a plaintext one would let clients in without a certificate), and
    the workers need a certificate of their own when the server requires one."""
    if spec.tls_cert is None and (spec.tls_client_ca or spec.worker_cert or spec.worker_key):
        raise ClusterError("--tls-client-ca, --worker-cert and --worker-key need --tls-cert")
    if (spec.worker_cert is None) != (spec.worker_key is None):
        raise ClusterError("--worker-cert and --worker-key go together: give both or neither")
    if spec.tls_client_ca is not None and spec.also_plaintext:
        raise ClusterError("--tls-client-ca with --also-plaintext: the plaintext port would take clients without a "
                           "certificate; drop one of them")
    if spec.tls_client_ca is not None and spec.worker_cert is None:
        raise ClusterError("--tls-client-ca needs --worker-cert/--worker-key: the workers must present a certificate "
                           "(`goma-ext cluster pki DIR --client worker` makes one)")
    for flag, path in (("--tls-client-ca", spec.tls_client_ca), ("--worker-cert", spec.worker_cert),
                       ("--worker-key", spec.worker_key)):
        if path is not None and not path.is_file():
            raise ClusterError(f"{flag} {path}: no such file")


def private_dir(path: Path) -> None:
    """PATH, made when missing, 0700 (also when an older goma-ext made it world-readable)."""
    path.mkdir(mode=0o700, parents=True, exist_ok=True)
    os.chmod(path, 0o700)


def start_server(st: ClusterState) -> ClusterState:
    """(Re)start BuildGrid on the recorded ports; returns the state with its pid."""
    state = Path(st.state)
    bgd = ensure_venv(Path(st.server_venv))
    settings = _server_settings(st)
    if settings.acl_file is not None:
        _write_atomically(settings.acl_file, acl.render(st.instance))
    config = state / SERVER_CONFIG  # no secret in it: files named by path (`!read-file`, passfile=)
    _write_atomically(config, render_config(settings))
    private_dir(settings.cas_dir)  # blobs are every build's inputs and outputs: no other local user reads them
    log = state / "logs" / "buildgrid.log"
    pid = procs.spawn(bgd_launch.command(bgd, "server", "start", str(config)), log)
    try:
        _wait_ready(st, pid, log)
    except ClusterError:
        procs.stop(pid)  # not recorded anywhere yet: nothing else would ever stop it
        raise
    return replace(st, server_pid=pid)


def _write_atomically(path: Path, text: str) -> None:
    """PATH with TEXT, through a temp file renamed over it: BuildGrid never reads half a config."""
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_text(text)
    os.replace(tmp, path)


def _start_redis(st: ClusterState) -> ClusterState:
    if st.redis_port is None or st.ac_max_memory is None:
        return st
    password = st.auth_dir / secretfiles.REDIS_PASSWORD
    if not password.exists():
        secretfiles.write_private(password, secretfiles.new_secret() + "\n")
    assert st.store is not None
    settings = redis_server.RedisSettings(st.store.redis_socket, Path(st.state) / "redis", st.ac_max_memory)
    pid = redis_server.start(settings, password, st.auth_dir / "redis.conf", Path(st.state) / "logs" / "redis.log")
    return replace(st, redis_pid=pid)


def _start_cleanup(st: ClusterState) -> ClusterState:
    """`bgd cleanup` over the CAS index: above the high watermark it deletes least recently used blobs."""
    if st.cas_max_size is None or st.store is None:
        return st
    marks = Watermarks.for_max_size(st.cas_max_size, st.store.refresh_accesstime_s)
    config = Path(st.state) / CLEANUP_CONFIG
    config.write_text(render_cleanup_config(_server_settings(st), marks))
    bgd = ensure_venv(Path(st.server_venv))
    cmd = bgd_launch.command(bgd, "cleanup", "start", str(config), "--sleep-interval", str(CLEANUP_INTERVAL_S))
    pid = procs.spawn(cmd, Path(st.state) / "logs" / "cleanup.log")
    return replace(st, cleanup_pid=pid)


def _wait_workers(st: ClusterState, pid: int) -> None:
    bots = Path(st.state) / "workers"
    deadline = time.monotonic() + READY_TIMEOUT_S
    while time.monotonic() < deadline:
        files = list(bots.glob(f"*/{SESSION_FILE}"))
        if len(files) >= st.workers:
            return
        if not procs.alive(pid):
            break
        time.sleep(0.1)
    log = Path(st.state) / "logs" / "workers.log"
    tail = log.read_text(errors="replace").strip().splitlines()[-1:] if log.exists() else []
    raise ClusterError(f"workers did not register with BuildGrid; see {log}" + (f": {tail[0]}" if tail else ""))


def start_workers(st: ClusterState) -> ClusterState:
    state = Path(st.state)
    for old in (state / "workers").glob(f"*/{SESSION_FILE}"):
        old.unlink()
    tls = st.ca_file if not st.worker_socket else None
    cmd = [
        sys.executable, "-P", "-m", "goma_ext.cli", "worker", "--remote",  # -P: see procs.spawn
        f"grpc://unix:{st.worker_socket}" if st.worker_socket else st.endpoint, "--instance", st.instance,
        *(["--ca-file", str(tls)] if tls else []),
        *(["--client-cert", st.worker_cert] if tls and st.worker_cert else []),
        *(["--client-key", st.worker_key] if tls and st.worker_key else []),
        "--work-dir", str(state / "workers"), "--bot-id", st.bot_id or f"local-{Path(st.state).resolve().name}",
        "--count", str(st.workers),
    ]
    for c in st.compilers:
        cmd += ["--compiler", c]
    if st.sandbox_dir:
        cmd += ["--sandbox-dir", st.sandbox_dir]
    if st.run_as:
        cmd += ["--run-as", st.run_as]
    cmd += st.worker_args
    env = {k: v for k, v in os.environ.items() if k not in ENV_VARS and k != TOKEN_ENV}  # ours, not the caller's
    token = st.token_file(tokens.Role.WORKER)
    if token is not None:
        env["GOMA_EXT_REMOTE_TOKEN_FILE"] = str(token)
    pid = procs.spawn(cmd, state / "logs" / "workers.log", env=env)
    _wait_workers(st, pid)
    return replace(st, worker_pid=pid)


WORKER_SOCKET = "bgd.sock"


def _private_socket(current: str | None, preferred: Path, what: str, prefix: str) -> Path | None:
    """None while the socket CURRENT's directory is still a private one of ours (it is kept). Otherwise the socket
    to use now: PREFERRED when it can be a socket (procs.socket_fits), its directory made 0700 and checked; else one
    of the same name in a fresh directory in the temp dir (a long STATE, or one gRPC would take apart)."""
    if current is not None and safefs.unsafe_dir(Path(current).parent) is None:
        return None
    if not procs.socket_fits(preferred):
        return Path(tempfile.mkdtemp(prefix=prefix, dir="/tmp")) / preferred.name
    where = preferred.parent
    private_dir(where)
    why = safefs.unsafe_dir(where)
    if why is not None:
        raise ClusterError(f"{where}: {why}; {what} must be in a directory of ours")
    return preferred


def _own_worker_socket(st: ClusterState) -> ClusterState:
    """An `all` host's workers reach BuildGrid on a Unix socket in a directory only the cluster's user can enter
    (STATE/run, or a fresh one in the temp dir when that path is too long for a socket), never over a loopback
    port: when BuildGrid is down, any local user may bind that port, and a worker reconnecting to it would send
    them its token, with which they could take other users' actions and answer them. The directory is kept while
    it is still a private one of ours; a new one (a reboot emptied the temp dir) restarts BuildGrid and the
    workers, which must all use it."""
    if not (st.host_role.runs_server and st.host_role.runs_workers):
        return st
    sock = _private_socket(st.worker_socket, Path(st.state) / "run" / WORKER_SOCKET, "the workers' socket",
                           "goma-ext-bgd-")
    if sock is None:
        return st
    # only what is ours runs on with the old address: a pid recorded before a reboot may be anyone's process now
    if procs.alive(st.worker_pid) and _is_daemon(st, "worker_pid"):
        procs.stop(st.worker_pid)
    if st.server_serving:
        st = stop_server(st)
    return replace(st, worker_pid=None, server_pid=None, worker_socket=str(sock))


REDIS_SOCKET = "redis.sock"


def redis_title(pid: int | None) -> bytes | None:
    """What redis-server process PID of ours listens on, as its process title says (`/usr/bin/redis-server
    unixsocket:PATH`, or `… 127.0.0.1:PORT` for one from before the socket); None for any other process: a pid
    recorded earlier in this boot may be another process of ours by now."""
    if not procs.alive(pid):
        return None
    program, _, listens = procs.cmdline(pid).split(b"\0", 1)[0].partition(b" ")
    return listens if os.path.basename(program) == b"redis-server" else None


def _own_redis_socket(st: ClusterState) -> ClusterState:
    """The server role's redis listens on a Unix socket, never on a loopback port (redis_server): STATE/redis/
    redis.sock beside its data, or a fresh directory in the temp dir when that path cannot be a socket. The
    socket is kept while its directory is still a private one of ours. A new one (a reboot emptied the temp dir,
    or a state from before the socket, whose redis listens on a port) restarts redis and BuildGrid, which must
    both use it."""
    if st.redis_port is None:
        return st
    sock = _private_socket(st.redis_socket, Path(st.state) / "redis" / REDIS_SOCKET, "redis' socket",
                           "goma-ext-redis-")
    if sock is None:
        return st
    st = stop_server(st)  # serving or not: a BuildGrid still running would reconnect to the old address
    if redis_title(st.redis_pid) is not None:
        procs.stop(st.redis_pid)  # SIGTERM: redis flushes its append-only file before it exits
    return replace(st, redis_pid=None, server_pid=None, redis_socket=str(sock))


def check_state(state: Path) -> None:
    """As root, STATE must be a directory only root can change: the cluster reads its settings there (which program
    to run, as which user), writes its logs and secrets there, and removes what it names. One not made yet must be
    made where no one else can rename or replace it (every directory above root's), or its maker's files would
    soon lie in another user's directory."""
    if os.geteuid() != 0:
        return
    made = state
    while not os.path.lexists(made) and made.parent != made:
        made = made.parent  # the nearest directory that exists: what it and those above it are decides
    why = safefs.unsafe_dir(state) if made == state else safefs.unsafe_above(made / "new")
    if why is not None:
        raise ClusterError(f"--state {state}: {why}; as root, the cluster trusts what it holds, so only root may be "
                           "able to change it (give a --state of root's own; a cluster already running there: stop "
                           "the pids in its cluster.json by hand)")


def start(spec: ClusterSpec) -> ClusterState:
    """Start what the host's role runs (idempotent: running parts are left alone). `all`: PostgreSQL, BuildGrid
    and workers; `server`: PostgreSQL, redis, BuildGrid and the CAS cleanup; `worker`: workers only."""
    check_state(spec.state)
    (spec.state / "logs").mkdir(parents=True, exist_ok=True)
    check_state(spec.state)  # again: someone may have made a directory on the way between the check and the mkdir
    st = load(spec.state) or _initial_state(spec)
    if st.sandbox_dir:
        sandbox_dir, owned = sandboxing.reusable_sandbox_dir(spec.state, st.sandbox_dir, st.sandbox_dir_owned)
        st = replace(st, sandbox_dir=sandbox_dir, sandbox_dir_owned=owned)
    if st.pg_data:
        st = replace(st, pg_data=reusable_data_dir(spec.state, st.pg_data, st.pg_user))
    if st.host_role is not spec.role:
        raise ClusterError(f"{spec.state} holds a --role {st.role} host; start it with --role {st.role} "
                           "(or use another --state)")
    if st.host_role.runs_workers and spec.workers != st.workers:
        st = replace(st, workers=spec.workers)
    if st.host_role.runs_server:
        check_venv(Path(st.server_venv))  # before anything is stopped for the workers' socket
    st = _own_redis_socket(_own_worker_socket(st))
    st.save()
    if st.host_role.runs_server:
        st = _start_server_side(st)
    if st.host_role.runs_workers and not procs.alive(st.worker_pid):
        st = start_workers(st)
        st.save()
    return st


def _start_server_side(st: ClusterState) -> ClusterState:
    pg = st.postgres
    if pg.passfile is None:
        raise ClusterError(
            f"{st.state}: made by an older goma-ext (PostgreSQL with `trust` authentication); "
            "`goma-ext cluster stop` it and start a new cluster in an empty --state"
        )
    if not pg.initialised():
        secretfiles.auth_dir(Path(st.state))
        password = secretfiles.new_secret()
        secretfiles.write_private(pg.passfile, secretfiles.pgpass_line(pg.port, DB_USER, password))
        pg.init(password)
    if pg.trust_lines():
        raise ClusterError(f"{pg.data_dir}/pg_hba.conf trusts connections without a password; refusing to use it")
    if st.auth == Auth.JWT.value:
        ensure_tokens(st)
    if not pg.running():
        pg.start()
    if st.store is not None and not st.redis_serving:
        st = _start_redis(st)
        st.save()
    if not st.server_serving:
        bgd = ensure_venv(Path(st.server_venv))
        scripts, version = migrations(Path(st.server_venv)), pg.schema_version()
        # A restart of the same BuildGrid on the database it migrated needs no second `bgd migrate apply` (2 CPU s);
        # a new, dropped or recreated database (no alembic version, or another one), or other scripts, get one.
        if scripts is None or version is None or st.migrated != f"{scripts}:{version}":
            migrate(bgd, pg.url, Path(st.state) / "logs" / "migrate.log")
            st = replace(st, migrated=f"{scripts}:{pg.schema_version()}")
            st.save()
        st = start_server(st)
        st.save()
    if st.cas_max_size is not None and not procs.alive(st.cleanup_pid):
        st = _start_cleanup(st)
        st.save()
    return st


def ensure_tokens(st: ClusterState) -> None:
    """The HS256 secret (made once) and a token per role signed with it: worker, client and cache writer (made
    again when missing, signed with another key or expiring within tokens.RENEW_BEFORE_S). All 0600 in the 0700
    STATE/auth."""
    d = secretfiles.auth_dir(Path(st.state))
    secret_file = d / secretfiles.JWT_SECRET
    if not secret_file.exists():
        secretfiles.write_private(secret_file, secretfiles.new_secret() + "\n")
    secret = secretfiles.read_private(secret_file)
    for role in tokens.Role:
        path = st.token_file(role)
        if path is None:
            continue
        old = secretfiles.read_private(path) if path.exists() else ""
        if not tokens.still_good(secret, old):
            secretfiles.write_private(path, tokens.mint(secret, role) + "\n")


def stop_server(st: ClusterState) -> ClusterState:
    procs.stop(st.server_pid)
    return replace(st, server_pid=None)


def stop(state: Path, role: Role | None = None) -> ClusterState | None:
    """Stop what ROLE runs on this host (default: everything it runs): workers, then the CAS cleanup, BuildGrid,
    redis and PostgreSQL. Data (CAS, index, action cache, tokens) stays for the next start."""
    st = load(state)
    if st is None:
        return None
    role = role or st.host_role
    if role is Role.SERVER and not st.host_role.runs_server:
        raise ClusterError(f"{state} is a --role {st.role} host: it runs no server")
    if role.runs_workers:
        procs.stop(st.worker_pid)
        st = replace(st, worker_pid=None)
    if role.runs_server and st.host_role.runs_server:
        procs.stop(st.cleanup_pid)
        st = stop_server(replace(st, cleanup_pid=None))
        if redis_title(st.redis_pid) is not None:  # a recorded pid that is redis still, not another process now
            procs.stop(st.redis_pid)  # SIGTERM: redis flushes its append-only file before it exits
        st = replace(st, redis_pid=None)
        if st.pg_data_ours:  # else someone else's postmaster.pid would name the pid pg_ctl signals
            st.postgres.stop()
    st.save()
    return st


def destroy(state: Path) -> None:
    """Stop the cluster and delete its PostgreSQL data when it lives outside STATE (the /tmp fallback)."""
    st = stop(state)
    if st is None:
        return
    if st.pg_data and st.pg_data_ours and Path(st.state).resolve() not in Path(st.pg_data).resolve().parents:
        shutil.rmtree(st.pg_data, ignore_errors=True)
    if st.sandbox_dir and st.sandbox_dir_owned:
        shutil.rmtree(st.sandbox_dir, ignore_errors=True)
    for sock in (st.worker_socket, st.redis_socket):
        if sock and not Path(sock).is_relative_to(st.state):
            shutil.rmtree(Path(sock).parent, ignore_errors=True)  # the temp dir of a long STATE


def status(state: Path) -> dict[str, object]:
    """Each component's liveness plus a Capabilities probe of the endpoint."""
    st = load(state)
    if st is None:
        return {"state": str(state), "started": False}
    probe = "down"
    serving = st.server_serving
    if serving or st.host_role is Role.WORKER:  # a token goes only to the cluster's own server
        try:
            cfg = st.probe_config(rpc_timeout_s=2.0, max_attempts=1)
            with open_channel(cfg) as ch:
                t = time.monotonic()
                capabilities.fetch(ch, st.instance, cfg.metadata(), retry.RetryPolicy(1, timeout_s=2.0))
                probe = f"ok ({(time.monotonic() - t) * 1000:.0f} ms)"
        except RemoteError as e:
            probe = f"error: {explain_failure(st.probe_config(), str(e))}"
    info: dict[str, object] = {
        "state": st.state, "started": True, "role": st.role, "endpoint": st.endpoint, "instance": st.instance,
        "plaintext_endpoint": st.plaintext_endpoint, "tls_endpoint": st.tls_endpoint, "ca_file": st.tls_ca,
        "tls_client_ca": st.tls_client_ca, "worker_cert": st.worker_cert,
        "auth": st.auth, "client_token": str(st.token_file(tokens.Role.CLIENT) or "") or None,
        "cache_writer_token": str(st.token_file(tokens.Role.CACHE_WRITER) or "") or None,
        "capabilities": probe,
    }
    if st.host_role.runs_server:
        info["postgres"] = "running" if st.pg_data_ours and st.postgres.running() else "stopped"
        info["buildgrid"] = "running" if serving else "stopped"
    if st.store is not None:
        info["redis"] = "running" if st.redis_serving else "stopped"
        info["cas_cleanup"] = "running" if procs.alive(st.cleanup_pid) else "stopped"
        info["cas_max_size"] = st.cas_max_size
    if st.host_role.runs_workers:
        info["workers"] = f"{st.workers} ({'running' if procs.alive(st.worker_pid) else 'stopped'})"
    return info
