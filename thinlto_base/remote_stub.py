"""Stand-ins for outputs that stay in the remote build's CAS (`remote.download: minimal`).

A backend's native object is written as a small text file naming its digest instead of its bytes: ninja sees the
output (its mtime, and restat: the stand-in changes only when the digest does), the remote final link takes it
by digest, and whatever must read the object here (a local link, `gn-thinlto parity`, a user) fetches the bytes
first (`goma-ext fetch`). The first line is not the start of any object format, so a tool handed a stand-in
fails on it ("unknown file type") instead of reading it as something else. Standard library only: the backend
step (python -S) tests for it.
"""

from __future__ import annotations

import os
import stat

from thinlto_base import safefs

MAGIC = b"!<gn-thinlto remote output>\n"
MAX_STUB_BYTES = 4096  # a stand-in is a few hundred bytes; a larger file is never one
# What `minimal` keeps in the CAS: native objects, which only the (remote) final link reads. Anything else an
# action writes comes down: the optimized module of a two-step backend (the next action reads it), and the
# split-DWARF .dwo files, which a link command's local post-link steps read (Chromium's `llvm-dwp` after the link).
STUB_SUFFIXES = (".o",)
FETCH_SUFFIXES = (".o", ".dwo")  # what `goma-ext fetch DIR` looks at: .dwo stand-ins of builds before 2026-12-07
_HEX = frozenset("0123456789abcdef")


class Stub:
    """What a stand-in records: the blob's SHA-256 and size, its mode bit, and where it is kept. (A plain class:
    the backend cache imports this module on every hit, and dataclasses costs milliseconds to import.)"""

    __slots__ = ("endpoint", "executable", "hash", "instance", "size")

    def __init__(self, hash: str, size: int, executable: bool, endpoint: str, instance: str) -> None:
        self.hash, self.size, self.executable = hash, size, executable
        self.endpoint, self.instance = endpoint, instance

    def _fields(self) -> tuple[str, int, bool, str, str]:
        return (self.hash, self.size, self.executable, self.endpoint, self.instance)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Stub) and self._fields() == other._fields()

    def __hash__(self) -> int:
        return hash(self._fields())

    def __repr__(self) -> str:
        return f"Stub{self._fields()!r}"

    def text(self) -> bytes:
        import json

        body = json.dumps({"digest": f"{self.hash}/{self.size}", "executable": self.executable,
                           "endpoint": self.endpoint, "instance": self.instance}, sort_keys=True)
        return (MAGIC + body.encode() + b"\n" +
                b"# The remote build keeps this object in its CAS (remote.download: minimal).\n"
                b"# `goma-ext fetch PATH` replaces this file with the object's bytes.\n")


def is_stub_bytes(data: bytes) -> bool:
    return data.startswith(MAGIC) and len(data) <= MAX_STUB_BYTES


def parse(data: bytes) -> Stub | None:
    """The stand-in's record, or None when DATA is not a well-formed stand-in."""
    if not is_stub_bytes(data):
        return None
    import json

    try:
        doc = json.loads(data[len(MAGIC):].split(b"\n", 1)[0])
        digest, executable = doc["digest"], doc["executable"]
        endpoint, instance = doc["endpoint"], doc["instance"]
        hash_, _, size = digest.partition("/")
    except (ValueError, KeyError, TypeError, AttributeError, RecursionError):
        return None
    if not (len(hash_) == 64 and set(hash_) <= _HEX and size.isascii() and size.isdigit()
            and isinstance(executable, bool) and isinstance(endpoint, str) and isinstance(instance, str)):
        return None
    return Stub(hash_, int(size), executable, endpoint, instance)


def read_stub(path: str | os.PathLike[str], follow_links: bool = True) -> Stub | None:
    """PATH's record if it is a stand-in (None for any other file, or none). Never blocks: a FIFO or a device is
    not one. Without FOLLOW_LINKS, a symbolic link is not one either."""
    found = stat_stub(path, follow_links)
    return found[0] if found is not None else None


def stat_stub(path: str | os.PathLike[str], follow_links: bool = True) -> tuple[Stub, os.stat_result] | None:
    """read_stub's record with the file's status, both from one descriptor (a file renamed into place meanwhile
    is not taken for the stand-in that was read)."""
    flags = os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC | (0 if follow_links else os.O_NOFOLLOW)
    try:
        fd = os.open(path, flags)
    except OSError:
        return None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            return None
        head = os.read(fd, MAX_STUB_BYTES + 1)
    except OSError:
        return None
    finally:
        os.close(fd)
    stub = parse(head)
    return (stub, st) if stub is not None else None


def kept_remote(path: str) -> bool:
    """Whether `minimal` leaves the output PATH in the CAS."""
    return path.endswith(STUB_SUFFIXES)


def holds(path: str | os.PathLike[str], stub: Stub) -> bool:
    """Whether PATH is a stand-in for STUB's digest, or already holds the object's bytes (a regular file, not
    through a link; never blocking)."""
    return safefs.holds(path, stub.hash, stub.size) or read_stub(path, follow_links=False) == stub
