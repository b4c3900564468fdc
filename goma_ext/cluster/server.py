"""BuildGrid 0.4.4 in its own venv: install on demand, render a tuned config, migrate the database."""

from __future__ import annotations

import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from goma_ext.cluster.postgres import ClusterError
from goma_ext.remote.identity import MATCH_PROPERTY_KEYS

BUILDGRID_REQUIREMENTS = ("buildgrid==0.4.4", "psycopg2-binary")


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
    thread_pool_size: int = 64
    keepalive_s: int = 30


def ensure_venv(venv: Path) -> Path:
    """Create VENV with BuildGrid if it lacks it; return its `bgd`."""
    bgd = venv / "bin" / "bgd"
    if bgd.exists():
        return bgd
    venv.parent.mkdir(parents=True, exist_ok=True)
    log = venv.parent / "server-venv-install.log"
    with open(log, "w") as out:
        steps = [
            [sys.executable, "-m", "venv", str(venv)],
            [
                str(venv / "bin" / "python"),
                "-m",
                "pip",
                "install",
                "--disable-pip-version-check",
                *BUILDGRID_REQUIREMENTS,
            ],
        ]
        for step in steps:
            if subprocess.run(step, stdout=out, stderr=subprocess.STDOUT, check=False).returncode != 0:
                raise ClusterError(f"installing BuildGrid into {venv} failed; see {log}")
    return bgd


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


def render_config(s: ServerSettings) -> str:
    """The BuildGrid YAML: SQL scheduler tuned for ~50 ms round trips, disk CAS, in-memory LRU action cache."""
    if s.tls_port is None and not s.plaintext:
        raise ClusterError("no channel to serve: TLS is not configured and plaintext is off")
    channels = []
    if s.plaintext:
        channels.append(_tag("!channel", {"address": f"127.0.0.1:{s.port}", "insecure-mode": True}))
    if s.tls_port is not None:
        if s.tls_cert is None or s.tls_key is None:
            raise ClusterError("a TLS port needs both a certificate and a key")
        channels.append(
            _tag(
                "!channel",
                {
                    "address": f"127.0.0.1:{s.tls_port}",
                    "insecure-mode": False,
                    "credentials": {
                        "tls-server-key": str(s.tls_key), "tls-server-cert": str(s.tls_cert),
                        **({"tls-client-certs": str(s.tls_client_ca)} if s.tls_client_ca else {}),
                    },
                },
            )
        )
    sql = _tag(
        "!sql-connection", {"connection-string": s.db_url, "pool-size": 10, "max-overflow": 20, "pool-timeout": 30}
    )
    storage = _tag("!disk-storage", {"path": str(s.cas_dir)})
    cache = _tag(
        "!lru-action-cache",
        {
            "storage": storage,
            "max-cached-refs": 100000,
            "allow-updates": True,
            "cache-failed-actions": False,
        },
    )
    scheduler = _tag(
        "!sql-scheduler",
        {
            "sql": sql,
            "storage": storage,
            "action-cache": cache,
            "poll-interval": 0.05,
            "bot-poll-interval": 0.05,
            "bot-session-keepalive-timeout": s.keepalive_s,
            "session-expiry-timer-interval": 2.0,
            "max-execution-timeout": 900,
            "max-job-attempts": 3,
            # BuildGrid 0.4.4 schedules on match keys (+ OSFamily, ISA) and refuses an Execute naming any other
            # key (FAILED_PRECONDITION "Unregistered platform property"); wildcard keys are accepted and left to
            # the worker, which refuses a container-image/Pool it does not offer (goma_ext/worker/policy.py).
            "property-set": _tag("!dynamic-property-set", {"match-property-keys": list(MATCH_PROPERTY_KEYS),
                                                           "wildcard-property-keys": ["Pool", "container-image"]}),
            "assigners": [_tag("!priority-age-assigner", {"count": 1, "interval": 0.01, "jitter-factor": 0.0})],
        },
    )
    doc = {
        "description": "goma-ext local cluster",
        "server": channels,
        "authorization": _authorization(s),
        "monitoring": {"enabled": False},
        "thread-pool-size": s.thread_pool_size,
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


def _authorization(s: ServerSettings) -> dict[str, object]:
    """JWT (HS256, the secret from a 0600 file) on every instanced RPC, workers' included. Localhost requests are
    NOT exempt (BuildGrid's `allow-localhost-requests` would let any local user in: the cluster is on 127.0.0.1)."""
    if s.jwt_secret_file is None:
        return {"method": "none"}
    return {"method": "jwt", "algorithm": "hs256", "secret": str(s.jwt_secret_file), "allow-localhost-requests": False}


def migrate(bgd: Path, db_url: str, log: Path) -> None:
    with open(log, "a") as out:
        if subprocess.run(
            [str(bgd), "migrate", "apply", db_url], stdout=out, stderr=subprocess.STDOUT, check=False
        ).returncode:
            raise ClusterError(f"bgd migrate apply failed; see {log}")
