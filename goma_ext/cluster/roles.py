"""What each host of a cluster runs (`--role`), the checks of a role's options, and human sizes (`20G`)."""

from __future__ import annotations

import ipaddress
import re
from dataclasses import dataclass
from enum import Enum
from pathlib import Path

from goma_ext.cluster.postgres import ClusterError

DEFAULT_CAS_MAX_SIZE = "20G"
DEFAULT_AC_MAX_MEMORY = "512M"
_UNITS = {"": 1, "K": 1 << 10, "M": 1 << 20, "G": 1 << 30, "T": 1 << 40}
_SIZE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([KMGT]?)(?:i?B)?\s*$", re.IGNORECASE)


class Role(Enum):
    """`all`: PostgreSQL, BuildGrid and workers on one host (127.0.0.1). `server`: PostgreSQL, redis, BuildGrid and
    its CAS cleanup, listening on the network over TLS. `worker`: workers only, joining a server over the network."""

    ALL = "all"
    SERVER = "server"
    WORKER = "worker"

    @property
    def runs_server(self) -> bool:
        return self is not Role.WORKER

    @property
    def runs_workers(self) -> bool:
        return self is not Role.SERVER


def parse_size(text: str) -> int:
    """Bytes from `20G`, `512M`, `1.5T`, `300000` (binary units; a trailing B or iB is allowed)."""
    m = _SIZE.match(text)
    if m is None:
        raise ClusterError(f"{text!r} is not a size (e.g. 20G, 512M, 1.5T)")
    value = int(float(m.group(1)) * _UNITS[m.group(2).upper()])
    if value <= 0:
        raise ClusterError(f"{text!r}: a size must be positive")
    return value


@dataclass(frozen=True)
class RoleOptions:
    """The role-specific options of `cluster start`, as given (None = not given)."""

    role: Role
    server: str | None = None
    token_file: Path | None = None
    tls_ca: Path | None = None
    tls_cert: Path | None = None
    plaintext: bool = False
    listen: tuple[str, ...] = ()
    cas_max_size: str | None = None
    ac_max_memory: str | None = None
    compression: str | None = None


def check(o: RoleOptions) -> None:
    """One line for the first option that does not fit the role."""
    if o.role is Role.WORKER:
        if o.server is None:
            raise ClusterError("--role worker needs --server grpcs://HOST:PORT (the server host's endpoint)")
        if not o.server.startswith(("grpc://", "grpcs://")):
            raise ClusterError(f"--server {o.server}: not a grpc:// or grpcs:// endpoint")
        if o.server.startswith("grpcs://") and o.tls_ca is None:
            raise ClusterError("--role worker with a grpcs:// --server needs --tls-ca (the server cert's CA)")
        for flag, given in (("--listen", o.listen), ("--cas-max-size", o.cas_max_size),
                            ("--ac-max-memory", o.ac_max_memory), ("--tls-cert", o.tls_cert),
                            ("--plaintext", o.plaintext), ("--compression", o.compression)):
            if given:
                raise ClusterError(f"{flag} is a server option; --role worker only runs workers")
        return
    if o.server is not None or o.token_file is not None:
        flag = "--server" if o.server is not None else "--token-file"
        raise ClusterError(f"{flag} is for --role worker (a {o.role.value} host serves its own endpoint and tokens)")
    if o.role is Role.ALL:
        for flag, given in (("--listen", o.listen), ("--cas-max-size", o.cas_max_size),
                            ("--ac-max-memory", o.ac_max_memory), ("--plaintext", o.plaintext)):
            if given:
                raise ClusterError(f"{flag} is for --role server (--role all serves 127.0.0.1 only)")
        return
    if o.tls_cert is None and not o.plaintext:
        raise ClusterError("--role server needs --tls-cert/--tls-key (or --plaintext: tokens then cross the network "
                           "unencrypted)")
    if o.tls_cert is not None and o.plaintext:
        raise ClusterError("--plaintext and --tls-cert: pick one (--also-plaintext serves both)")
    for host in o.listen:
        try:
            ipaddress.ip_address(host)
        except ValueError:
            raise ClusterError(f"--listen {host}: not an IP address (e.g. 0.0.0.0 or 10.0.0.5)") from None
    for flag, size in (("--cas-max-size", o.cas_max_size), ("--ac-max-memory", o.ac_max_memory)):
        if size is not None:
            try:
                parse_size(size)
            except ClusterError as e:
                raise ClusterError(f"{flag}: {e}") from None


def probe_host(listen: tuple[str, ...]) -> str:
    """The address this host reaches its own server at: the first listen address, loopback for a wildcard."""
    host = listen[0] if listen else "127.0.0.1"
    if host == "0.0.0.0":
        return "127.0.0.1"
    if host == "::":
        return "::1"
    return host
