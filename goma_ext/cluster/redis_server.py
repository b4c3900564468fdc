"""The server role's redis (Debian's redis-server): BuildGrid's action cache, persisted and bounded.

A Unix socket only, in a directory only the cluster's user can change (BuildGrid runs on the same host): no TCP
port, which any local user could take while redis is down and be sent the password by a reconnecting BuildGrid
(redis' AUTH is in clear). A password from a 0600 file (`requirepass`; the config that holds it is 0600 too), the
append-only file for persistence (a restart keeps every cached result), and a memory bound with `allkeys-lru`
eviction (an evicted result is a cache miss, never an error)."""

from __future__ import annotations

import shutil
import socket
import time
from dataclasses import dataclass
from pathlib import Path

from goma_ext.cluster import procs, secretfiles
from goma_ext.cluster.postgres import ClusterError
from thinlto_base import safefs

REDIS_SERVER = "redis-server"
READY_TIMEOUT_S = 30.0


@dataclass(frozen=True)
class RedisSettings:
    """What redis.conf is rendered from."""

    socket: Path  # in a directory only the cluster's user can change (start checks it)
    data_dir: Path  # appendonly files
    max_memory: int  # bytes; allkeys-lru above it


def render_config(s: RedisSettings, password: str) -> str:
    """redis.conf: its Unix socket only (no port), password, AOF persistence, LRU memory bound, no daemonizing."""
    if not password or any(c.isspace() or c in "\"'\\" for c in password):
        raise ClusterError("the redis password must be non-empty without spaces, quotes or backslashes")
    if not procs.socket_fits(s.socket):
        raise ClusterError(f"{s.socket}: not usable as redis' socket (at most {procs.SOCKET_PATH_MAX} bytes of "
                           "letters, digits and ./+-_)")
    lines = [
        "port 0",  # no TCP at all
        f"unixsocket {s.socket}",
        "unixsocketperm 700",
        "daemonize no",
        'logfile ""',
        f"dir {s.data_dir}",
        "appendonly yes",
        "appendfsync everysec",
        'save ""',  # the append-only file is the persistence; no RDB snapshots beside it
        f"maxmemory {s.max_memory}",
        "maxmemory-policy allkeys-lru",
        f"requirepass {password}",
        'rename-command CONFIG ""',  # a leaked password cannot rewrite the config (dir, dbfilename) through redis
    ]
    return "\n".join(lines) + "\n"


def binary() -> str:
    found = shutil.which(REDIS_SERVER) or (f"/usr/bin/{REDIS_SERVER}" if Path(f"/usr/bin/{REDIS_SERVER}").exists()
                                           else None)
    if found is None:
        raise ClusterError("redis-server not found; install the Debian package redis-server (`./dev setup`)")
    return found


def start(s: RedisSettings, password_file: Path, config: Path, log: Path) -> int:
    """Write CONFIG (0600: it holds the password) and start redis-server on it; return its pid once it answers."""
    s.data_dir.mkdir(mode=0o700, parents=True, exist_ok=True)
    why = safefs.unsafe_dir(s.socket.parent)
    if why is not None:  # the password goes to whatever answers at the socket: only we may put one there
        raise ClusterError(f"{s.socket.parent}: {why}; redis' socket must be in a directory of the cluster's user")
    secretfiles.write_private(config, render_config(s, secretfiles.read_private(password_file)))
    pid = procs.spawn([binary(), str(config)], log)
    deadline = time.monotonic() + READY_TIMEOUT_S
    while time.monotonic() < deadline:
        if not procs.alive(pid):
            tail = log.read_text(errors="replace")[-600:] if log.exists() else ""
            raise ClusterError(f"redis-server exited during start-up; see {log}:\n{tail}")
        if ping(s.socket, secretfiles.read_private(password_file)):
            return pid
        time.sleep(0.1)
    procs.stop(pid)
    raise ClusterError(f"redis-server did not answer within {READY_TIMEOUT_S:.0f} s; see {log}")


def ping(path: Path, password: str) -> bool:
    """AUTH then PING over RESP at the socket PATH (no client library in goma-ext's own environment): True on +OK,
    +PONG."""
    request = (f"*2\r\n$4\r\nAUTH\r\n${len(password)}\r\n{password}\r\n" "*1\r\n$4\r\nPING\r\n").encode()
    try:
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as conn:
            conn.settimeout(1.0)
            conn.connect(str(path))
            conn.sendall(request)
            reply = b""
            while reply.count(b"\r\n") < 2:
                chunk = conn.recv(256)
                if not chunk:
                    break
                reply += chunk
    except OSError:
        return False
    return reply.startswith(b"+OK\r\n+PONG\r\n")
