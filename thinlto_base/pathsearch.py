"""Program lookups on a search path, each remembered for a second.

A step server serves every backend edge of a build directory in one process, and each edge looked the same
compiler up on PATH three times (the step's cache key, the check that the launcher's PATH finds the same
program, the thin client's compiler identity): 10 % of the server's CPU per remote action in a profile
(docs/benchmarks.md, "Proxy shards"). A lookup is remembered per (name, search path) for MEMO_S: the path a
name resolves to changes only when a program is installed into or removed from a directory on it, and a
second later every process sees the change (a shell remembers its lookups until `hash -r`). What the program
*is* is never remembered here: callers resolve links and stat the file they found, every time.
"""

from __future__ import annotations

import os
import time

MEMO_S = 1.0
MEMO_ENTRIES = 256  # (name, search path) pairs; the memo starts over beyond this

_memo: dict[tuple[str, str], tuple[float, str | None]] = {}


def which(program: str, search: str | None = None) -> str | None:
    """The first executable regular file named PROGRAM on SEARCH (default $PATH; os.defpath without one), as
    joined there, or None. PROGRAM is a bare name. Thread-safe: the memo is one dict (GIL-atomic updates)."""
    path = search if search is not None else os.environ.get("PATH", os.defpath)
    key = (program, path)
    now = time.monotonic()
    known = _memo.get(key)
    if known is not None and now - known[0] < MEMO_S:
        return known[1]
    found = _search(program, path)
    if len(_memo) >= MEMO_ENTRIES:
        _memo.clear()
    _memo[key] = (now, found)
    return found


def _search(program: str, path: str) -> str | None:
    for d in path.split(os.pathsep):
        candidate = os.path.join(d or ".", program)
        if os.path.isfile(candidate) and os.access(candidate, os.X_OK):
            return candidate
    return None
