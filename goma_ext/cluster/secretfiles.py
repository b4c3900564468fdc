"""The cluster's secrets on disk: 0600 files in a 0700 STATE/auth directory, written atomically, never logged."""

from __future__ import annotations

import os
import secrets
from pathlib import Path
from typing import assert_never

from goma_ext.cluster import tokens
from goma_ext.cluster.postgres import ClusterError
from goma_ext.reapi.secret_file import read_with_stat

AUTH_DIR = "auth"
PG_PASSFILE = "pgpass"  # libpq's password file: BuildGrid's connection string names it, never the password
JWT_SECRET = "jwt-hs256.secret"
WORKER_TOKEN = "worker.token"
CLIENT_TOKEN = "client.token"
CACHE_WRITER_TOKEN = "cache-writer.token"
REDIS_PASSWORD = "redis.password"  # redis `requirepass`; BuildGrid reads it with `!read-file`


def token_name(role: tokens.Role) -> str:
    """The file in STATE/auth that holds ROLE's bearer token."""
    if role is tokens.Role.WORKER:
        return WORKER_TOKEN
    if role is tokens.Role.CLIENT:
        return CLIENT_TOKEN
    if role is tokens.Role.CACHE_WRITER:
        return CACHE_WRITER_TOKEN
    assert_never(role)


def auth_dir(state: Path) -> Path:
    """STATE/auth, made 0700 (and made so again if it was widened)."""
    d = state / AUTH_DIR
    try:
        d.mkdir(mode=0o700, exist_ok=True)
        if d.is_symlink() or not d.is_dir():
            raise ClusterError(f"{d}: not a directory; refusing to keep the cluster's secrets there")
        os.chmod(d, 0o700)
    except OSError as e:
        raise ClusterError(f"{d}: {e.strerror}") from e
    return d


def write_private(path: Path, text: str) -> Path:
    """PATH with TEXT, mode 0600 from its creation (a temp file renamed over it: readers never see half)."""
    tmp = path.with_name(f".{path.name}.{secrets.token_hex(4)}.tmp")
    try:
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
        with os.fdopen(fd, "w") as out:
            out.write(text)
        os.replace(tmp, path)
    except OSError as e:
        tmp.unlink(missing_ok=True)
        raise ClusterError(f"{path}: cannot write: {e.strerror}") from e
    return path


def read_private(path: Path) -> str:
    """A secret file's text; refused when others can read it (someone widened it: it may have leaked)."""
    try:
        data, st = read_with_stat(path)  # the mode of the file read, not of whatever the path names by then
    except OSError as e:
        raise ClusterError(f"{path}: {e.strerror}") from e
    mode = st.st_mode & 0o777
    if mode & 0o077:
        raise ClusterError(f"{path}: mode {mode:o} lets others read a secret; make a new one (remove it)")
    return data.decode().strip()


def new_secret() -> str:
    """256 random bits, URL-safe (no ':' or '\\', so it needs no escaping in a pgpass line)."""
    return secrets.token_urlsafe(32)


def pgpass_line(port: int, user: str, password: str) -> str:
    return f"127.0.0.1:{port}:*:{user}:{password}\n"
