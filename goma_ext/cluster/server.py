"""BuildGrid 0.4.4 in its own venv: install on demand, render a tuned config, migrate the database."""

from __future__ import annotations

import fcntl
import hashlib
import os
import re
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from goma_ext.cluster import bgd_launch
from goma_ext.cluster.postgres import ClusterError
from goma_ext.remote.identity import MATCH_PROPERTY_KEYS
from thinlto_base import safefs

# psycopg2-binary 2.9.9 is the first whose wheels carry libpq 16, which has require_auth (Postgres.url)
BUILDGRID_REQUIREMENTS = ("buildgrid==0.4.4", "psycopg2-binary>=2.9.9", "redis>=4.5.1")  # redis: !redis-action-cache
# a module each requirement installs: a venv made before one was added gets it on the next start, and one whose
# distribution is older than the requirement's `>=` version gets it installed anew
_REQUIREMENT_MODULES = {"psycopg2-binary>=2.9.9": "psycopg2", "redis>=4.5.1": "redis"}


@dataclass(frozen=True)
class PersistentStore:
    """A CAS and an action cache that survive a restart: blobs on disk indexed in PostgreSQL (`!sql-index`, whose
    access times `bgd cleanup` evicts the least recently used by), action results in redis (`!redis-action-cache`;
    BuildGrid 0.4.4 has no SQL or disk action cache)."""

    redis_socket: Path  # redis' Unix socket (it has no port: redis_server)
    redis_password_file: Path  # 0600; BuildGrid reads it with `!read-file`, so the config holds no secret
    refresh_accesstime_s: int = 60  # an index row's access time is written at most this often


# The scheduler's polling: 50 ms (the assigner 10 ms) keeps a remote action's queueing to tens of milliseconds, which
# the benchmarks measured; an idle server pays for it with ~30 % of a core (BuildGrid 24 %, PostgreSQL 7 %), against
# ~9 % at 0.25 s and ~3 % at 1 s (measured on 2 cores, `cluster start --poll-interval`).
DEFAULT_POLL_S = 0.05


@dataclass(frozen=True)
class ServerSettings:
    """What the BuildGrid config is rendered from."""

    port: int
    db_url: str
    cas_dir: Path
    instance: str = ""
    tls_port: int | None = None
    tls_cert: Path | None = None
    tls_key: Path | None = None
    tls_client_ca: Path | None = None  # mTLS: the TLS channel requires client certificates signed by this CA
    plaintext: bool = True  # with TLS, also the grpc:// channel on `port` (only when asked for)
    jwt_secret_file: Path | None = None  # None: no authentication (`cluster start --auth none`)
    acl_file: Path | None = None  # with JWT: which RPCs each token's subject may call (acl.render)
    # BuildGrid's gRPC threads are also its cap on concurrent RPCs, and every action a client waits on holds one
    # Execute stream: 64 let 200 waiting clients lock the bots out (RESOURCE_EXHAUSTED on their sessions) until
    # the clients' timeouts. Sized for a build's actions in flight plus the bots.
    thread_pool_size: int = 1024
    keepalive_s: int = 30
    poll_s: float = DEFAULT_POLL_S  # how often the scheduler and the bots' sessions look for work (the assigner: 5x)
    listen: tuple[str, ...] = ("127.0.0.1",)  # the addresses every channel binds
    store: PersistentStore | None = None  # None: unbounded disk CAS and an in-memory LRU action cache (`--role all`)
    # `gzip`: BuildGrid compresses every answer (gRPC's compression is the server's choice, for every caller:
    # clients behind a slow link download less; the workers decompress too). Requests are decompressed whatever
    # this says.
    compression: str = "off"
    # A plaintext channel on a Unix socket, for this host's own workers: in a directory only the cluster's user can
    # enter, no other local user can take its place (a TCP port, when BuildGrid is down, anyone can bind, and a
    # worker reconnecting to it would hand over its token)
    unix_socket: Path | None = None


def check_venv(venv: Path) -> None:
    """As root, VENV (or, while it does not exist, the directory it will be made in) must be one only root can
    change: the cluster runs BuildGrid's python from it."""
    if os.geteuid() != 0:
        return
    why = safefs.unsafe_dir(venv) if os.path.lexists(venv) else safefs.unsafe_above(venv)
    if why is not None:
        raise ClusterError(f"--server-venv {venv}: {why}; as root, the cluster runs BuildGrid from it, so only root "
                           "may be able to change it")


def ensure_venv(venv: Path) -> Path:
    """Create VENV with BuildGrid if it lacks it; return its `bgd`. Clusters started at the same time (a test
    suite's workers, two `goma-ext cluster start`) take turns through a lock beside VENV, so one installs and
    the others find it installed."""
    bgd = venv / "bin" / "bgd"
    venv.parent.mkdir(parents=True, exist_ok=True)
    check_venv(venv)
    if bgd.exists() and not _missing_modules(venv):
        return bgd
    with open(venv.parent / f".{venv.name}.lock", "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        return _install(venv, bgd)


def _install(venv: Path, bgd: Path) -> Path:
    missing = _missing_modules(venv) if bgd.exists() else list(BUILDGRID_REQUIREMENTS)
    if not missing:
        return bgd
    log = venv.parent / "server-venv-install.log"
    with open(log, "a") as out:
        # -P and cwd /: not the caller's working directory first on the module path (see procs.spawn)
        steps = [] if bgd.exists() else [[sys.executable, "-P", "-m", "venv", str(venv)]]
        steps.append([str(venv / "bin" / "python"), "-P", "-m", "pip", "install", "--disable-pip-version-check",
                      *missing])
        for step in steps:
            if subprocess.run(step, stdout=out, stderr=subprocess.STDOUT, cwd="/", check=False).returncode != 0:
                raise ClusterError(f"installing BuildGrid into {venv} failed; see {log}")
    return bgd


def _missing_modules(venv: Path) -> list[str]:
    """The requirements whose module VENV's site-packages lacks (cheap: no interpreter started)."""
    sites = list(venv.glob("lib/python3*/site-packages"))
    return [req for req, module in _REQUIREMENT_MODULES.items()
            if not any((d / module).is_dir() for d in sites) or _too_old(sites, req)]


def _too_old(sites: list[Path], requirement: str) -> bool:
    """Whether REQUIREMENT (`dist>=X.Y.Z`) asks for a version that no distribution in SITES has (by its dist-info
    directory's name: no interpreter started). A requirement without `>=` is never too old."""
    name, sep, version = requirement.partition(">=")
    if not sep:
        return False
    dist, least = name.replace("-", "_"), tuple(int(p) for p in version.split("."))
    for d in sites:
        for info in d.glob(f"{dist}-*.dist-info"):
            try:
                parts = info.name[len(dist) + 1:-len(".dist-info")].split(".")[:len(least)]
                # a pre-release's part counts by its leading number (5.0.0b1: 5, 0, 0)
                if tuple(int(re.match(r"\d+", p)[0]) for p in parts) >= least:  # type: ignore[index]
                    return False
            except (ValueError, TypeError):  # TypeError: a part without a number
                continue
    return True


def _tag(tag: str, value: object) -> object:
    return {"__tag__": tag, "value": value}


class _Dumper(yaml.SafeDumper):
    pass


def _represent(dumper: yaml.SafeDumper, data: dict[str, Any]) -> yaml.Node:
    if "__tag__" in data:
        value = data["value"]
        if isinstance(value, dict):
            return dumper.represent_mapping(data["__tag__"], value)
        return dumper.represent_scalar(data["__tag__"], str(value))
    return dumper.represent_dict(data)


_Dumper.add_representer(dict, _represent)


GRPC_COMPRESSION = {"gzip": "Gzip"}  # ServerSettings.compression -> BuildGrid's `grpc-compression`


def render_config(s: ServerSettings) -> str:
    """The BuildGrid YAML: SQL scheduler tuned for ~50 ms round trips; disk CAS and in-memory LRU action cache, or
    with a PersistentStore an SQL-indexed disk CAS and a redis action cache."""
    sql = _sql(s.db_url)
    storage, cache = _storage_and_cache(s, sql)
    scheduler = _tag(
        "!sql-scheduler",
        {
            "sql": sql,
            "storage": storage,
            "action-cache": cache,
            "poll-interval": s.poll_s,
            "bot-poll-interval": s.poll_s,
            "bot-session-keepalive-timeout": s.keepalive_s,
            "session-expiry-timer-interval": 2.0,
            "max-execution-timeout": 900,
            "max-job-attempts": 3,
            # BuildGrid 0.4.4 schedules on match keys (+ OSFamily, ISA) and refuses an Execute naming any other
            # key (FAILED_PRECONDITION "Unregistered platform property"); wildcard keys are accepted and left to
            # the worker, which refuses a container-image/Pool it does not offer (goma_ext/worker/policy.py).
            "property-set": _tag("!dynamic-property-set", {"match-property-keys": list(MATCH_PROPERTY_KEYS),
                                                           "wildcard-property-keys": ["Pool", "container-image"]}),
            "assigners": [_tag("!priority-age-assigner",
                               {"count": 1, "interval": round(s.poll_s / 5, 4), "jitter-factor": 0.0})],
        },
    )
    doc = {
        "description": "goma-ext cluster",
        "server": _channels(s),
        "authorization": _authorization(s),
        "monitoring": {"enabled": False},
        "thread-pool-size": s.thread_pool_size,
        **({"grpc-compression": GRPC_COMPRESSION[s.compression]} if s.compression != "off" else {}),
        "instances": [
            {
                "name": s.instance,
                "services": [
                    _tag("!action-cache", {"cache": cache}),
                    _tag("!execution", {"scheduler": scheduler, "operation-stream-keepalive-timeout": 2}),
                    _tag("!cas", {"storage": storage}),
                    _tag("!bytestream", {"storage": storage}),
                ],
            }
        ],
    }
    return yaml.dump(doc, Dumper=_Dumper, sort_keys=False)


def _channels(s: ServerSettings) -> list[object]:
    """A plaintext and/or a TLS channel on each listen address."""
    if s.tls_port is None and not s.plaintext:
        raise ClusterError("no channel to serve: TLS is not configured and plaintext is off")
    if s.tls_port is not None and (s.tls_cert is None or s.tls_key is None):
        raise ClusterError("a TLS port needs both a certificate and a key")
    channels: list[object] = []
    if s.unix_socket is not None:
        channels.append(_tag("!channel", {"address": f"unix:{s.unix_socket}", "insecure-mode": True}))
    for host in s.listen:
        if s.plaintext:
            channels.append(_tag("!channel", {"address": f"{_bracket(host)}:{s.port}", "insecure-mode": True}))
        if s.tls_port is not None:
            credentials = {"tls-server-key": str(s.tls_key), "tls-server-cert": str(s.tls_cert),
                           **({"tls-client-certs": str(s.tls_client_ca)} if s.tls_client_ca else {})}
            channels.append(_tag("!channel", {
                "address": f"{_bracket(host)}:{s.tls_port}", "insecure-mode": False, "credentials": credentials,
            }))
    return channels


def _bracket(host: str) -> str:
    return f"[{host}]" if ":" in host else host


def _sql(db_url: str) -> object:
    pool = {"pool-size": 10, "max-overflow": 20, "pool-timeout": 30}
    return _tag("!sql-connection", {"connection-string": db_url, **pool})


def _storage_and_cache(s: ServerSettings, sql: object) -> tuple[object, object]:
    disk = _tag("!disk-storage", {"path": str(s.cas_dir)})
    if s.store is None:
        cache = _tag("!lru-action-cache", {
            "storage": disk, "max-cached-refs": 100000, "allow-updates": True, "cache-failed-actions": False,
        })
        return disk, cache
    index = _sql_index(s.store, sql, disk)
    cache = _tag("!redis-action-cache", {
        # a host that is a path is redis' Unix socket (bgd_launch teaches BuildGrid 0.4.4 that; it knows only ports)
        "redis": _tag("!redis-connection", {
            "host": str(s.store.redis_socket), "port": 0,
            "password": _tag("!read-file", str(s.store.redis_password_file)),
        }),
        "storage": index,  # a cached result whose blobs were evicted is dropped when looked up, not served
        "allow-updates": True,
        "cache-failed-actions": False,
    })
    return index, cache


def _sql_index(store: PersistentStore, sql: object, disk: object) -> object:
    return _tag("!sql-index", {
        "sql": sql, "storage": disk, "refresh-accesstime-older-than": store.refresh_accesstime_s,
        "max-inline-blob-size": 0,  # every blob on disk: the size bound counts them all
    })


@dataclass(frozen=True)
class Watermarks:
    """`bgd cleanup`'s bounds: above `high` bytes it deletes least recently used blobs down to `low`."""

    high: int
    low: int
    batch: int
    only_if_unused_for_s: int

    @classmethod
    def for_max_size(cls, max_size: int, refresh_accesstime_s: int = 60) -> Watermarks:
        low = max_size * 8 // 10
        # a blob read within the access-time refresh window may look older than it is: never evict those
        return cls(high=max_size, low=low, batch=max(1, min(max_size - low, 1 << 30)),
                   only_if_unused_for_s=2 * refresh_accesstime_s)


def render_cleanup_config(s: ServerSettings, marks: Watermarks) -> str:
    """The YAML `bgd cleanup start` reads: the same index as the server's CAS and its watermarks."""
    if s.store is None:
        raise ClusterError("a cleanup needs the persistent store (the SQL-indexed CAS)")
    disk = _tag("!disk-storage", {"path": str(s.cas_dir)})
    doc = {
        "description": "goma-ext CAS cleanup",
        "monitoring": {"enabled": False},
        "cleanup": [{
            "instance-name": s.instance,
            "index": _sql_index(s.store, _sql(s.db_url), disk),
            "high-watermark": marks.high,
            "low-watermark": marks.low,
            "batch-size": marks.batch,
            "only-if-unused-for": {"seconds": marks.only_if_unused_for_s},
        }],
    }
    return yaml.dump(doc, Dumper=_Dumper, sort_keys=False)


def _authorization(s: ServerSettings) -> dict[str, object]:
    """JWT (HS256, the secret from a 0600 file) on every instanced RPC, workers' included, and an ACL by the token's
    role: without one any valid token could call any RPC (a client could open a bot session or write the action
    cache). Localhost requests are NOT exempt (BuildGrid's `allow-localhost-requests` would let any local user in:
    the cluster is on 127.0.0.1). The action caches keep `allow-updates: true` because BuildGrid's scheduler writes
    completed results through it; the ACL is what keeps clients from calling UpdateActionResult."""
    if s.jwt_secret_file is None:
        return {"method": "none"}
    if s.acl_file is None:
        raise ClusterError("JWT authentication without an ACL would let any token call any RPC")
    return {"method": "jwt", "algorithm": "hs256", "secret": str(s.jwt_secret_file), "acl-config": str(s.acl_file),
            "allow-localhost-requests": False}


def migrations(venv: Path) -> str | None:
    """A digest of BuildGrid's migration scripts in VENV: what `bgd migrate apply` brings a database to (None when
    none are found where BuildGrid 0.4.4 keeps them: then migrate every time)."""
    scripts = sorted(venv.glob("lib/python3*/site-packages/buildgrid/server/sql/alembic/versions/*.py"))
    if not scripts:
        return None
    h = hashlib.sha256()
    for script in scripts:
        h.update(f"{script.name}\0{len(data := script.read_bytes())}\0".encode() + data)
    return h.hexdigest()


def migrate(bgd: Path, db_url: str, log: Path) -> None:
    with open(log, "a") as out:
        if subprocess.run(
            bgd_launch.command(bgd, "migrate", "apply", db_url), stdout=out, stderr=subprocess.STDOUT, check=False
        ).returncode:
            raise ClusterError(f"bgd migrate apply failed; see {log}")
