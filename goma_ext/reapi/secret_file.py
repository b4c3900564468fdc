"""Reading a client's secret file (a bearer token, an mTLS private key): refused when other users may read or
write it, as ssh refuses a private key others can read. Standard library only (the thin client imports it)."""

from __future__ import annotations

import os
import stat
from pathlib import Path

from goma_ext.reapi.errors import RemoteConfigError

OPEN_BITS = 0o077  # any access by the group or by others


def read_secret(setting: str, path: Path) -> bytes:
    """PATH's bytes, checked on the file that was read (no race between the check and the read); one line naming
    SETTING and PATH when it cannot be read or others may read or change it."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC | os.O_NONBLOCK)
        try:
            st = os.fstat(fd)
            if not stat.S_ISREG(st.st_mode):
                raise RemoteConfigError(f"remote {setting} {path}: not a regular file")
            if st.st_mode & OPEN_BITS:
                raise RemoteConfigError(f"remote {setting} {path}: mode {st.st_mode & 0o777:o} lets other users "
                                        f"read or change a secret; chmod 600 {path}")
            with os.fdopen(os.dup(fd), "rb") as f:
                return f.read()
        finally:
            os.close(fd)
    except OSError as e:
        raise RemoteConfigError(f"remote {setting} {path}: {e.strerror}") from e
