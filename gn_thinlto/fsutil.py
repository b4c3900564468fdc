"""File writes for generated outputs: write-if-changed with an atomic replace, so mtimes only move on change."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def write_if_changed(path: Path, content: bytes | str) -> bool:
    """Write CONTENT to PATH unless it already holds exactly that; atomic (temp file + replace). True if written."""
    data = content.encode() if isinstance(content, str) else content
    try:
        if path.read_bytes() == data:
            return False
    except OSError:
        pass
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        os.fchmod(fd, 0o666 & ~_umask())
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return True


def replace_if_changed(src: Path, dst: Path) -> bool:
    """Move SRC over DST unless their contents are equal (then SRC is removed and DST keeps its mtime)."""
    data = src.read_bytes()
    try:
        same = dst.read_bytes() == data
    except OSError:
        same = False
    if same:
        src.unlink()
        return False
    dst.parent.mkdir(parents=True, exist_ok=True)
    os.replace(src, dst)
    return True
