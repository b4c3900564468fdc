"""Whose action-cache entries a build uses: the trust model of a shared cache (README, "Sharing the cache").

An entry counts only when its file is owned by a trusted writer (by default the user running the build, and
root, who can change the compiler itself anyway; more users, such as the CI account that fills a team cache,
by name or uid in the config) and no one else can write it (mode without group or other write; entries are
written 0644 whatever the umask). Blobs need no trust: an entry names each blob's SHA-256 and every hit
re-hashes it. Anything else in the directory is a miss. Standard library only; names are resolved (pwd) only
when an entry's owner is not already among the trusted uids.
"""

from __future__ import annotations

import os
from collections.abc import Iterable


class Untrusted(Exception):
    """An entry whose writer is not trusted (or whose file others could have changed): a miss, kept in place."""

    def __init__(self, uid: int, why: str) -> None:
        super().__init__(f"uid {uid}: {why}")
        self.uid, self.why = uid, why


class Trust:
    """The trusted writers: this user, root, and WRITERS (user names or numeric uids)."""

    __slots__ = ("names", "uids")

    def __init__(self, writers: Iterable[str] = ()) -> None:
        self.uids = {os.geteuid(), 0}
        self.names: list[str] = []
        for w in writers:
            if w.isdigit():
                self.uids.add(int(w))
            elif w:
                self.names.append(w)

    def _resolve(self) -> None:
        import pwd

        for name in self.names:
            try:
                self.uids.add(pwd.getpwnam(name).pw_uid)
            except KeyError:
                pass  # a user this machine does not have wrote nothing here
        self.names = []

    def trusts(self, uid: int) -> bool:
        if uid not in self.uids and self.names:
            self._resolve()
        return uid in self.uids

    def check(self, st: os.stat_result) -> None:
        """Raise Untrusted unless ST (an entry's stat) was written by a trusted writer and only it can change."""
        if not self.trusts(st.st_uid):
            raise Untrusted(st.st_uid, "not a writer this build trusts")
        if st.st_mode & 0o022:
            raise Untrusted(st.st_uid, "writable by group or others")


def unknown_users(writers: Iterable[str]) -> list[str]:
    """The names in WRITERS this machine has no user for (numeric uids are taken as they are)."""
    import pwd

    missing = []
    for w in writers:
        if not w.isdigit():
            try:
                pwd.getpwnam(w)
            except KeyError:
                missing.append(w)
    return missing
