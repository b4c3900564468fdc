"""Daemon processes: start detached with a log file, check liveness, stop by process group with a grace period."""

from __future__ import annotations

import errno
import ipaddress
import os
import re
import signal
import socket
import struct
import subprocess
import time
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path


def spawn(argv: Sequence[str], log: Path, env: Mapping[str, str] | None = None, cwd: Path | None = None) -> int:
    """Start argv in its own session (so stop() can signal its whole group); return its pid. It runs in CWD, by
    default `/`, never in the caller's working directory: `python -m` puts that first on the module path, and a
    root `cluster start` run from a directory another user can write (/tmp, a checkout) would run their module."""
    log.parent.mkdir(parents=True, exist_ok=True)
    with open(log, "ab") as out:
        proc = subprocess.Popen(
            list(argv), stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT, start_new_session=True,
            env=dict(env) if env is not None else None, cwd=cwd or "/",
        )
    # Popen may return while the kernel is still inside execve, before /proc shows the new command line: whoever
    # reads it next (the manager tells its daemons from other processes by it) must see it.
    deadline = time.monotonic() + 5.0
    while not cmdline(proc.pid) and proc.poll() is None and time.monotonic() < deadline:
        time.sleep(0.001)
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


def same_network(pid: int) -> bool:
    """Whether process PID is in this process's network namespace (its /proc tables are then this one's)."""
    try:
        theirs, ours = os.stat(f"/proc/{pid}/ns/net"), os.stat("/proc/self/ns/net")
    except OSError:
        return False
    return (theirs.st_dev, theirs.st_ino) == (ours.st_dev, ours.st_ino)


def tcp_listeners(pid: int) -> dict[str, tuple[ipaddress.IPv4Address | ipaddress.IPv6Address, int]]:
    """Every listening TCP socket in PID's network namespace: its inode's link text (`socket:[N]`) -> (local
    address, port). Whoever holds it: see listens."""
    out = {}
    for table, family, words in ((f"/proc/{pid}/net/tcp", socket.AF_INET, 1),
                                 (f"/proc/{pid}/net/tcp6", socket.AF_INET6, 4)):
        try:
            lines = Path(table).read_text().splitlines()[1:]
        except OSError:
            continue
        for line in lines:
            fields = line.split()  # sl local_address rem_address st … uid timeout inode
            if len(fields) <= 9 or fields[3] != "0A":
                continue
            hex_addr, hex_port = fields[1].rsplit(":", 1)
            # the kernel prints each 32-bit word of the address in this machine's byte order
            packed = struct.pack(f"={words}I", *(int(hex_addr[i:i + 8], 16) for i in range(0, 8 * words, 8)))
            addr = ipaddress.ip_address(socket.inet_ntop(family, packed))
            # gRPC binds an IPv4 address through an IPv6 socket: ::ffff:127.0.0.1 listens on 127.0.0.1
            mapped = addr.ipv4_mapped if isinstance(addr, ipaddress.IPv6Address) else None
            out[f"socket:[{fields[9]}]"] = (mapped or addr, int(hex_port, 16))
    return out


def _held(pid: int, links: Iterable[str]) -> set[str]:
    """Those of LINKS (`socket:[N]`) that process PID holds open itself."""
    links = set(links)
    try:
        fds = os.listdir(f"/proc/{pid}/fd")
    except OSError:
        return set()
    held = set()
    for fd in fds:
        try:
            link = os.readlink(f"/proc/{pid}/fd/{fd}")
        except OSError:
            continue
        if link in links:
            held.add(link)
    return held


def held_listeners(pid: int) -> list[tuple[ipaddress.IPv4Address | ipaddress.IPv6Address, int]]:
    """(address, port) of each listening TCP socket process PID holds open itself."""
    listeners = tcp_listeners(pid)
    return [listeners[link] for link in _held(pid, listeners)]


def _specificity(bound: ipaddress.IPv4Address | ipaddress.IPv6Address,
                 wanted: ipaddress.IPv4Address | ipaddress.IPv6Address) -> int | None:
    """How closely a socket bound to BOUND matches a connection to WANTED, as Linux chooses among listeners on one
    port (the highest wins): 2 the address itself, 1 its family's wildcard; None if it does not match. IPv6's `::`
    for an IPv4 address is left to _dual_stack: /proc does not show whether it also takes IPv4."""
    if bound == wanted:
        return 2
    return 1 if bound.is_unspecified and bound.version == wanted.version else None


def _dual_stack(wanted: ipaddress.IPv4Address, port: int) -> bool:
    """Whether WANTED:PORT, which no IPv4 socket listens on, is taken all the same: by an IPv6 `::` socket with
    IPV6_V6ONLY off (gRPC binds 0.0.0.0 so). A bind of our own tells; one that succeeds is let go at once. Only one
    user can hold such a socket on a port, so no one else can take the IPv4 address beside it."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        try:
            s.bind((str(wanted), port))
        except OSError as e:
            return e.errno == errno.EADDRINUSE
    return False


def listens(pid: int, port: int, host: str) -> bool:
    """Whether a connection to HOST (an address, or a name: each of its addresses) on PORT reaches a listening TCP
    socket that process PID holds, in PID's network namespace: for each address, the socket the kernel would choose
    among all that listen on PORT (the most specific binding) is PID's.

    Checked before a secret goes to HOST:PORT: a port recorded in the cluster's state, free while the cluster was
    down, may be anyone's by the time its own process starts (a local user who took it would read the password or
    token sent to it); a server that holds the port on another address, or on a wildcard beside another user's
    socket on HOST's own address, is no better; nor is a process in another network namespace (an action's sandbox
    listening there on the port says nothing of who holds it here)."""
    try:
        wanted = {ipaddress.ip_address(host.strip("[]").split("%", 1)[0])}  # /proc shows no zone
    except ValueError:
        try:
            wanted = {ipaddress.ip_address(str(info[4][0]).split("%", 1)[0])
                      for info in socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)}
        except (OSError, ValueError):
            return False
    if not same_network(pid):
        return False
    on_port = {link: addr for link, (addr, p) in tcp_listeners(pid).items() if p == port}
    held = _held(pid, on_port)
    if not held or not wanted:
        return False
    for w in wanted:
        ranked = {link: rank for link, addr in on_port.items() if (rank := _specificity(addr, w)) is not None}
        if not ranked and w.version == 4:  # only a dual-stack `::` can take it: is PID's such a socket?
            ranked = {link: 0 for link, addr in on_port.items() if addr == ipaddress.IPv6Address("::")
                      and link in held and _dual_stack(w, port)}
        best = max(ranked.values(), default=None)
        if best is None or not {link for link, rank in ranked.items() if rank == best} <= held:
            return False
    return True
