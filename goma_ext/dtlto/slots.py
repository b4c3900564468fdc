"""A machine-wide limit on local backend compiles, shared by every distributor process of one user.

ninja runs many links at once, and each link's distributor would otherwise start a compile per core: N links
would oversubscribe the machine N-fold. Each local compile instead holds one of LIMIT slot files
(`DIR/slot.K`, an exclusive flock). The kernel releases a slot when its holder exits, however it exits, so a
killed distributor never leaks one. A compile that finds every slot taken waits and looks again.
"""

from __future__ import annotations

import fcntl
import os
import random
import stat
import time
from pathlib import Path
from types import TracebackType


def default_dir() -> Path:
    runtime = os.environ.get("XDG_RUNTIME_DIR")
    base = Path(runtime) if runtime else Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    return base / "goma-ext" / "dtlto-slots"


class Slots:
    """LIMIT slots in DIR (created 0700 on first use)."""

    def __init__(self, directory: Path, limit: int) -> None:
        if limit < 1:
            raise ValueError("the local job limit must be at least 1")
        self.directory, self.limit = directory, limit

    def take(self) -> Slot:
        self.directory.mkdir(parents=True, exist_ok=True, mode=0o700)
        st = os.lstat(self.directory)  # not another user's, nor a link to one (a slots dir in a shared /tmp)
        if not stat.S_ISDIR(st.st_mode) or st.st_uid != os.getuid():
            raise OSError(f"local job slots directory {self.directory}: not a directory of this user's")
        if st.st_mode & 0o077:
            os.chmod(self.directory, 0o700)
        order = list(range(self.limit))
        delay = 0.005
        while True:
            random.shuffle(order)  # waiters spread over the slots instead of all polling slot 0
            for k in order:
                fd = os.open(self.directory / f"slot.{k}", os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
                try:
                    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                except BlockingIOError:
                    os.close(fd)
                    continue
                return Slot(fd)
            time.sleep(delay)
            delay = min(delay * 2, 0.1)


class Slot:
    """A held slot; released on exit from the `with` block (or by the kernel when the process dies)."""

    def __init__(self, fd: int) -> None:
        self.fd = fd

    def __enter__(self) -> Slot:
        return self

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None) -> None:
        os.close(self.fd)
