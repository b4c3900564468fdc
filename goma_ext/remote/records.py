"""One line of the wrapper's stats log, written without dataclasses or enum (the thin client writes it too)."""

from __future__ import annotations

import json
import os
from collections.abc import Mapping


def line(output: str, mode: str, exit_code: int, wall_s: float, bytes_uploaded: int = 0, input_bytes: int = 0,
         naive_bytes: int | None = None, phases: Mapping[str, float] | None = None, reason: str = "",
         bytes_downloaded: int = 0) -> str:
    """The JSON of one run record (the fields of goma_ext.remote.stats.RunRecord)."""
    return json.dumps({
        "output": output, "mode": mode, "exit_code": exit_code, "wall_s": round(wall_s, 4),
        "bytes_uploaded": bytes_uploaded, "input_bytes": input_bytes, "naive_bytes": naive_bytes,
        "phases": {k: round(v, 4) for k, v in sorted((phases or {}).items())}, "reason": reason,
        **({"bytes_downloaded": bytes_downloaded} if bytes_downloaded else {}),
    }, sort_keys=True)


def append(log: str | os.PathLike[str], text: str) -> None:
    """Append one line with a single O_APPEND write, so concurrent wrappers never interleave; never through a
    planted link, never blocking on a FIFO."""
    fd = os.open(log, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC, 0o644)
    try:
        os.write(fd, (text + "\n").encode())
    finally:
        os.close(fd)


def output_of(argv: list[str] | tuple[str, ...]) -> str:
    """The command's -o output, as the record names it."""
    return argv[argv.index("-o") + 1] if "-o" in argv[:-1] else "?"


def naive_bytes(rsp: str | None, cwd: str) -> int | None:
    """What the naive approach would upload: the size of every file the response file names (stats only)."""
    if not rsp:
        return None
    try:
        with open(os.path.join(cwd, rsp), encoding="utf-8") as f:
            names = f.read().split()
        return sum(os.stat(os.path.join(cwd, n)).st_size for n in names)
    except (OSError, UnicodeDecodeError):
        return None
