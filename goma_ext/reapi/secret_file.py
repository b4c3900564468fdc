"""Reading a client's secret file (a bearer token, an mTLS private key) as PostgreSQL reads its key: refused when
someone but its owner may read or change it (mode 0600 at most; 0640 when root owns it, as Debian's ssl-cert group
reads keys), or when it belongs to another user than the reader or root (who could change it at any time). The
check is made on the file that is read, so nothing can swap it in between."""

from __future__ import annotations

import os
from pathlib import Path

from goma_ext.reapi.errors import RemoteConfigError

OPEN_BITS = 0o077  # any access by the group or by others
ROOT_OPEN_BITS = 0o037  # a root-owned file may also be read by its group


def read_with_stat(path: Path) -> tuple[bytes, os.stat_result]:
    """PATH's bytes and the status of the file they were read from (OSError as it comes): a check of its mode then
    holds for what was read, whatever replaces the path meanwhile."""
    with open(path, "rb") as f:
        return f.read(), os.fstat(f.fileno())


def read_secret(setting: str, path: Path, marker: bytes = b"", what: str = "") -> bytes:
    """PATH's bytes; one line naming SETTING and PATH when it cannot be read, when it lacks MARKER (then it is not
    WHAT, said before any complaint about its mode: a certificate given as a key is a wrong file, not a leak), or
    when its owner or mode fails the rule above."""
    try:
        data, st = read_with_stat(path)
    except OSError as e:
        raise RemoteConfigError(f"remote {setting} {path}: {e.strerror}") from e
    if marker and marker not in data:
        raise RemoteConfigError(f"remote {setting} {path}: not a PEM {what}")
    if st.st_uid not in (os.geteuid(), 0):
        raise RemoteConfigError(f"remote {setting} {path}: owned by uid {st.st_uid}, who may change a secret; "
                                "use a copy of your own, mode 600")
    if st.st_mode & (ROOT_OPEN_BITS if st.st_uid == 0 else OPEN_BITS):
        raise RemoteConfigError(f"remote {setting} {path}: mode {st.st_mode & 0o777:o} lets other users read or "
                                f"change a secret; chmod 600 {path}")
    return data
