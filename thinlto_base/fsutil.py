"""File writes for generated outputs: write-if-changed with an atomic replace, so mtimes only move on change.

Imported by the build steps, which run once per backend edge: stdlib `os` only (no pathlib or tempfile,
whose imports cost more than a backend cache hit).
"""

from __future__ import annotations

import hashlib
import os
import time
from collections.abc import Sequence

from thinlto_base.safefs import create_exclusive, makedirs

# A file changed less than this before it was hashed may change again within the same (coarse) timestamp tick,
# leaving its stat identity as it was (git's "racy" rule).
RACY_NS = 100_000_000


def changed_lately(st: os.stat_result) -> bool:
    """Whether the file of ST changed less than RACY_NS ago: a digest of it is not to be remembered by its stat
    identity."""
    return time.time_ns() - max(st.st_mtime_ns, st.st_ctime_ns) < RACY_NS


def read_bytes(path: str | os.PathLike[str]) -> bytes:
    with open(path, "rb") as f:
        return f.read()


def file_sha256(path: str | os.PathLike[str]) -> str:
    """The hex SHA-256 of a file's content, read in 1 MiB chunks."""
    h = hashlib.sha256()
    with open(path, "rb") as f:
        while chunk := f.read(1 << 20):
            h.update(chunk)
    return h.hexdigest()


def code_version(seed: bytes, paths: Sequence[str]) -> bytes:
    """A version of the code in PATHS (their names and contents, after SEED): what an output made by that code is
    kept under, so that an upgrade which changes it never serves or keeps what the old code made."""
    h = hashlib.sha256(seed)
    for path in paths:
        with open(path, "rb") as f:
            h.update(os.path.basename(path).encode() + b"\0" + f.read())
    return h.hexdigest().encode()


def is_empty_file(path: str | os.PathLike[str]) -> bool:
    """Whether PATH is a file of no bytes (False when it cannot be stat'ed: whoever reads it says why)."""
    try:
        return os.stat(path).st_size == 0
    except OSError:
        return False


def make_parent(path: str | os.PathLike[str]) -> None:
    """Create PATH's directory (and its parents) if missing."""
    parent = os.path.dirname(os.fspath(path))
    if parent:
        makedirs(parent)


def remove_if_exists(path: str | os.PathLike[str]) -> None:
    try:
        os.unlink(path)
    except FileNotFoundError:
        pass


def _same_content(path: str | os.PathLike[str], data: bytes) -> bool:
    try:
        if os.stat(path).st_size != len(data):
            return False
        return read_bytes(path) == data
    except OSError:
        return False


def same_files(a: str | os.PathLike[str], b: str | os.PathLike[str]) -> bool:
    """Whether files A and B both exist with the same contents."""
    try:
        return _same_content(b, read_bytes(a))
    except OSError:
        return False


def write_if_changed(path: str | os.PathLike[str], content: bytes | str) -> bool:
    """Write CONTENT to PATH unless it already holds exactly that; atomic (temp file + replace). True if written."""
    data = content.encode() if isinstance(content, str) else content
    if _same_content(path, data):
        return False
    path = os.fspath(path)
    make_parent(path)
    parent, name = os.path.split(path)
    tmp = os.path.join(parent, f".{name}.{os.getpid()}.{os.urandom(4).hex()}.tmp")
    fd = create_exclusive(tmp)  # a new file, never through a planted link
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise
    return True


def replace_if_changed(src: str | os.PathLike[str], dst: str | os.PathLike[str]) -> bool:
    """Move SRC over DST unless their contents are equal (then SRC is removed and DST keeps its mtime)."""
    if _same_content(dst, read_bytes(src)):
        os.unlink(src)
        return False
    make_parent(dst)
    os.replace(src, dst)
    return True


def remove_named_after(prefix: str) -> None:
    """Remove every file in PREFIX's directory whose name starts with PREFIX's name (one step's temporaries)."""
    parent, name = os.path.split(prefix)
    try:
        with os.scandir(parent or ".") as entries:
            mine = [e.path for e in entries if e.name.startswith(name)]
    except OSError:
        return
    for path in mine:
        try:
            os.unlink(path)
        except OSError:
            pass


def sweep_temporaries(path: str | os.PathLike[str]) -> None:
    """Remove the temporary files (`.NAME.PID.….tmp`) that killed writers of PATH left beside it: those whose
    writer PID no longer runs. Only for a path that one step writes at a time (a build output: ninja runs its
    edge once at a time), before that step writes. A live writer's file is kept: a step orphaned by a killed
    ninja may still be writing beside the output a new build's step writes (the step server's threads share
    its pid; each removes its own temporaries when its step ends)."""
    parent, name = os.path.split(os.fspath(path))
    prefix = f".{name}."
    try:
        with os.scandir(parent or ".") as entries:
            stale = [e for e in entries if e.name.startswith(prefix) and e.name.endswith(".tmp")]
    except OSError:
        return
    for tmp in stale:
        writer = tmp.name[len(prefix):].split(".", 1)[0]
        if writer.isdigit() and process_running(int(writer)):
            continue
        try:
            os.unlink(tmp.path)
        except OSError:
            pass


def process_running(pid: int) -> bool:
    """Whether process PID exists (another user's included)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:
        return True  # EPERM: another user's process
    return True
