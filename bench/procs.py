"""Processes as /proc shows them, for the benchmarks that charge CPU to a component (the proxy, the cluster, the
step servers) that is not their own child."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

CLK_TCK = os.sysconf("SC_CLK_TCK")


def processes() -> Iterator[tuple[int, bytes]]:
    """(pid, command line with NUL-separated arguments) of every process still there."""
    for name in os.listdir("/proc"):
        if name.isdigit():
            try:
                yield int(name), Path(f"/proc/{name}/cmdline").read_bytes()
            except OSError:
                continue


def cwd(pid: int) -> str:
    """PID's working directory ("" when it is gone)."""
    try:
        return os.readlink(f"/proc/{pid}/cwd")
    except OSError:
        return ""


def cpu_s(pid: int, children: bool = False) -> float | None:
    """PID's CPU seconds (user + system; with CHILDREN, its reaped children's too), None when it is gone."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return None
    return sum(int(f) for f in fields[11 : 15 if children else 13]) / CLK_TCK


def step_servers(under: str) -> Iterator[int]:
    """The pids of the step servers whose working directory is UNDER or below it."""
    for pid, cmd in processes():
        if any(arg.endswith(b"step_server.py") for arg in cmd.split(b"\0")):
            where = cwd(pid)
            if where == under or where.startswith(under.rstrip("/") + "/"):
                yield pid
