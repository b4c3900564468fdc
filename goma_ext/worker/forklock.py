"""The worker's fork lock: no child is forked while a file the worker writes is open for writing (ETXTBSY).

A child forked by one thread inherits every fd of the process, O_CLOEXEC ones included, until it execs. If another
thread meanwhile closes and publishes an executable it wrote, exec of that file fails with "Text file busy" as
long as such a child still holds it open for writing. Go's syscall.ForkLock solves this the same way: writers hold
the lock while their fd is open, and whoever forks holds it until the child has exec'd (subprocess.Popen returns
only after the exec). It is process-wide by nature, so it is a module-level lock, the one mutable global here.
"""

from __future__ import annotations

import threading

FORK_LOCK = threading.Lock()


def forks_passed() -> None:
    """For a writer that kept its file open without the lock (a download or a copy that takes a while): called once
    the file is closed, it returns when every child forked meanwhile has exec'd (each forker holds the lock until
    then), so none still holds the file open for writing."""
    with FORK_LOCK:
        pass
