"""Daemon processes: start detached with a log file, check liveness, stop by process group with a grace period."""

from __future__ import annotations

import os
import re
import signal
import socket
import subprocess
import time
from collections.abc import Mapping, Sequence
from pathlib import Path


def spawn(argv: Sequence[str], log: Path, env: Mapping[str, str] | None = None, cwd: Path | None = None) -> int:
    """Start argv in its own session (so stop() can signal its whole group); return its pid."""
    log.parent.mkdir(parents=True, exist_ok=True)
    with open(log, "ab") as out:
        proc = subprocess.Popen(
            list(argv), stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT, start_new_session=True,
            env=dict(env) if env is not None else None, cwd=cwd,
        )
    return proc.pid


def alive(pid: int | None) -> bool:
    """Whether PID is a live process of ours (this effective user's): a recorded pid that another user's process
    has taken since (after a reboot, pids are handed out again) is not, so it is neither trusted to be our daemon
    nor signalled."""
    if not pid:
        return False
    try:
        if os.stat(f"/proc/{pid}").st_uid != os.geteuid():
            return False
        os.kill(pid, 0)
    except (ProcessLookupError, FileNotFoundError, PermissionError):
        return False
    try:  # a zombie child of ours counts as dead
        done, _ = os.waitpid(pid, os.WNOHANG)
        return done == 0
    except ChildProcessError:
        return True


def boot_id() -> str | None:
    """This boot's id (a new one at every boot), or None where the kernel gives none."""
    try:
        return Path("/proc/sys/kernel/random/boot_id").read_text().strip()
    except OSError:
        return None


def cmdline(pid: int | None) -> bytes:
    """PID's command line, NUL-separated (b"" when it cannot be read)."""
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes() if pid else b""
    except OSError:
        return b""


def stop(pid: int | None, grace_s: float = 10.0) -> None:
    """SIGTERM the process group, then SIGKILL it after `grace_s`."""
    if pid is None or not alive(pid):
        return
    for sig, wait_s in ((signal.SIGTERM, grace_s), (signal.SIGKILL, 5.0)):
        try:
            os.killpg(pid, sig)
        except ProcessLookupError:
            return
        deadline = time.monotonic() + wait_s
        while time.monotonic() < deadline:
            if not alive(pid):
                return
            time.sleep(0.05)


SOCKET_PATH_MAX = 100  # sun_path holds 108 bytes with its NUL


def socket_fits(path: Path) -> bool:
    """Whether PATH can be a Unix socket's: short enough for sun_path, and taken as it is both by gRPC (which reads
    a socket's address as a URI: ?, # and % would be taken apart) and as a word of redis.conf."""
    return len(os.fsencode(path)) <= SOCKET_PATH_MAX and re.fullmatch(r"[\w./+-]+", str(path)) is not None


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def port_open(port: int, host: str = "127.0.0.1") -> bool:
    try:
        with socket.create_connection((host, port), timeout=0.5):
            return True
    except OSError:
        return False


def listens(pid: int, port: int) -> bool:
    """Whether process PID holds a listening TCP socket on PORT (IPv4 or IPv6, in its own network namespace).
    Checked before a secret goes to a port on this host: a port recorded in the cluster's state, free while the
    cluster was down, may be anyone's by the time its own process starts (a local user who took it would read the
    password or token sent to it)."""
    inodes = set()
    for table in (f"/proc/{pid}/net/tcp", f"/proc/{pid}/net/tcp6"):
        try:
            lines = Path(table).read_text().splitlines()[1:]
        except OSError:
            continue
        for line in lines:
            fields = line.split()  # sl local_address rem_address st … uid timeout inode
            if len(fields) > 9 and fields[3] == "0A" and int(fields[1].rsplit(":", 1)[1], 16) == port:
                inodes.add(f"socket:[{fields[9]}]")
    if not inodes:
        return False
    try:
        fds = os.listdir(f"/proc/{pid}/fd")
    except OSError:
        return False
    for fd in fds:
        try:
            if os.readlink(f"/proc/{pid}/fd/{fd}") in inodes:
                return True
        except OSError:
            continue
    return False
