"""The server role's redis (Debian's redis-server): BuildGrid's action cache, persisted and bounded.

127.0.0.1 only (BuildGrid runs on the same host), a password from a 0600 file (`requirepass`; the config that
holds it is 0600 too), the append-only file for persistence (a restart keeps every cached result), and a memory
bound with `allkeys-lru` eviction (an evicted result is a cache miss, never an error)."""

from __future__ import annotations

import shutil
import socket
import time
from dataclasses import dataclass
from pathlib import Path

from goma_ext.cluster import procs, secretfiles
from goma_ext.cluster.postgres import ClusterError

REDIS_SERVER = "redis-server"
READY_TIMEOUT_S = 30.0


@dataclass(frozen=True)
class RedisSettings:
    """What redis.conf is rendered from."""

    port: int
    data_dir: Path  # appendonly files
    max_memory: int  # bytes; allkeys-lru above it


def render_config(s: RedisSettings, password: str) -> str:
    """redis.conf: loopback only, password, AOF persistence, LRU memory bound, no unix socket, no daemonizing."""
    if not password or any(c.isspace() or c in "\"'\\" for c in password):
        raise ClusterError("the redis password must be non-empty without spaces, quotes or backslashes")
    lines = [
        "bind 127.0.0.1",
        "protected-mode yes",
        f"port {s.port}",
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
    secretfiles.write_private(config, render_config(s, secretfiles.read_private(password_file)))
    pid = procs.spawn([binary(), str(config)], log)
    deadline = time.monotonic() + READY_TIMEOUT_S
    while time.monotonic() < deadline:
        if not procs.alive(pid):
            tail = log.read_text(errors="replace")[-600:] if log.exists() else ""
            raise ClusterError(f"redis-server exited during start-up; see {log}:\n{tail}")
        # the password goes only to the redis-server just started, not to whoever took its port first
        if procs.listens(pid, s.port) and ping(s.port, secretfiles.read_private(password_file)):
            return pid
        time.sleep(0.1)
    procs.stop(pid)
    raise ClusterError(f"redis-server did not answer within {READY_TIMEOUT_S:.0f} s; see {log}")


def ping(port: int, password: str) -> bool:
    """AUTH then PING over RESP (no client library in goma-ext's own environment): True on +OK, +PONG."""
    request = (f"*2\r\n$4\r\nAUTH\r\n${len(password)}\r\n{password}\r\n" "*1\r\n$4\r\nPING\r\n").encode()
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=1.0) as conn:
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
