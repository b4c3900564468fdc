"""The backend log in the build directory: one line per backend edge run (hit, miss, remote), read by `gn-thinlto
cache stats`, the example's summary and the trace. Standard library only (the backend step writes it)."""

from __future__ import annotations

import os

from thinlto_base.fsutil import make_parent
from thinlto_base.safefs import open_nofollow


class CacheEvent:
    """The events the backend log records (the first word of each line)."""

    HIT = "hit"
    MISS = "miss"
    REMOTE = "remote"  # a miss the launcher ran: `remote CONTENT OUTPUT`, CONTENT naming its staging directory


def record(log: str | os.PathLike[str], event: str, key: str, output: str) -> None:
    """Append one line (EVENT is a CacheEvent); O_APPEND writes of one short line are atomic enough."""
    make_parent(log)
    fd = open_nofollow(os.fspath(log), os.O_WRONLY | os.O_APPEND | os.O_CREAT)
    try:
        os.write(fd, f"{event} {key} {output}\n".encode())
    finally:
        os.close(fd)


class CacheStats:
    """Hit and miss counts of one build (or of the whole log)."""

    __slots__ = ("hits", "misses")

    def __init__(self, hits: int, misses: int) -> None:
        self.hits, self.misses = hits, misses

    def __eq__(self, other: object) -> bool:
        return isinstance(other, CacheStats) and (self.hits, self.misses) == (other.hits, other.misses)

    def __repr__(self) -> str:
        return f"CacheStats(hits={self.hits}, misses={self.misses})"


def read_stats(log: str | os.PathLike[str], offset: int = 0) -> CacheStats:
    """Hit/miss counts from the log, starting at byte OFFSET (to count one build)."""
    try:
        with open(log, "rb") as f:
            f.seek(offset)
            lines = f.read().decode(errors="replace").splitlines()  # counted by their first word only
    except FileNotFoundError:
        return CacheStats(0, 0)
    hits = sum(1 for line in lines if line.startswith(CacheEvent.HIT + " "))
    misses = sum(1 for line in lines if line.startswith(CacheEvent.MISS + " "))
    return CacheStats(hits, misses)
