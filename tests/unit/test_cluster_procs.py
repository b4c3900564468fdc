"""[harden] Before the cluster manager sends a secret to a port on this host (redis's password, the probe's bearer
token), the process listening there must be the one it just started: a port recorded in the cluster's state is
free while the cluster is down, and an attacker's audit (2026-11-29) had another local user take redis's port
first and receive the password (then log in to the real redis with it)."""

from __future__ import annotations

import contextlib
import ipaddress
import os
import shutil
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from goma_ext.cluster import procs

LISTEN = "import socket, sys, time\ns = socket.socket()\ns.bind(('127.0.0.1', 0))\ns.listen()\n" \
         "print(s.getsockname()[1], flush=True)\ntime.sleep(60)\n"
# Listens on the address argv[1] (of family argv[2]) at the port argv[3] (0: any free one), with SO_REUSEPORT if
# argv[4] is 1 (and IPV6_V6ONLY if argv[5] is 1), and prints the port.
LISTEN_ON = "import socket, sys, time\ns = socket.socket(getattr(socket, sys.argv[2]))\n" \
            "s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, int(sys.argv[4]))\n" \
            "s.family == socket.AF_INET6 and s.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, int(sys.argv[5]))\n" \
            "s.bind((sys.argv[1], int(sys.argv[3])))\ns.listen()\nprint(s.getsockname()[1], flush=True)\ntime.sleep(60)\n"


@contextlib.contextmanager
def listening(address: str, family: str = "AF_INET", port: int = 0, reuse: bool = False, v6only: bool = False
              ) -> Iterator[tuple[int, int]]:
    """(pid, port) of a process listening on ADDRESS:PORT, killed and reaped afterwards."""
    proc = subprocess.Popen([sys.executable, "-S", "-c", LISTEN_ON, address, family, str(port), str(int(reuse)),
                             str(int(v6only))],
                            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline()
        if not line:
            pytest.skip(f"cannot listen on {address} here")
        yield proc.pid, int(line)
    finally:
        proc.kill()
        proc.wait()


def test_a_port_counts_as_a_process_s_only_while_that_process_listens_on_it() -> None:
    squatter = subprocess.Popen([sys.executable, "-S", "-c", LISTEN], stdout=subprocess.PIPE, text=True)
    try:
        assert squatter.stdout is not None
        port = int(squatter.stdout.readline())
        assert procs.listens(squatter.pid, port, "127.0.0.1")
        ours = subprocess.Popen([sys.executable, "-S", "-c", "import time; time.sleep(60)"])
        try:
            assert not procs.listens(ours.pid, port, "127.0.0.1")  # the process we started is not the one on that port
        finally:
            ours.kill()
            ours.wait()
    finally:
        squatter.kill()
        squatter.wait()
    assert not procs.listens(squatter.pid, port, "127.0.0.1")



def test_a_port_held_on_another_address_than_the_clients_does_not_count() -> None:
    """A server that holds its port on one address, while another process holds the same port on the address the
    client connects to (a bind of the server's that failed there, say), is not where the secret would go."""
    with listening("127.0.0.2") as (server, port):
        assert procs.listens(server, port, "127.0.0.2")
        assert not procs.listens(server, port, "127.0.0.1")
        with listening("127.0.0.1", port=port) as (squatter, _):
            assert not procs.listens(server, port, "127.0.0.1")
            assert procs.listens(squatter, port, "127.0.0.1")


def test_a_wildcard_listener_does_not_count_beside_another_process_on_the_clients_address() -> None:
    """Linux gives a connection to the most specific listener: a server on 0.0.0.0 beside another user's socket on
    127.0.0.1 (both with SO_REUSEPORT, which lets one user bind both) is not what 127.0.0.1 reaches."""
    with listening("127.0.0.1", reuse=True) as (squatter, port), listening("0.0.0.0", port=port, reuse=True) as (server, _):
        assert procs.listens(server, port, "127.0.0.2")  # the wildcard is the most specific there
        assert not procs.listens(server, port, "127.0.0.1")
        assert procs.listens(squatter, port, "127.0.0.1")


def test_a_wildcard_listener_covers_every_address_of_its_family_and_a_name_needs_all_its_addresses() -> None:
    with listening("0.0.0.0") as (pid, port):
        assert procs.listens(pid, port, "127.0.0.1")
        assert not procs.listens(pid, port, "::1")  # an IPv4 wildcard does not take IPv6 connections
    with listening("::", "AF_INET6") as (pid, port):  # dual-stack (IPV6_V6ONLY off), as gRPC binds 0.0.0.0
        assert procs.listens(pid, port, "::1") and procs.listens(pid, port, "[::1]")
        assert procs.listens(pid, port, "127.0.0.1")  # no one else can bind 127.0.0.1 on that port beside it
    with listening("::", "AF_INET6", v6only=True) as (pid, port):  # IPv6 only: 127.0.0.1 on that port is anyone's
        assert procs.listens(pid, port, "::1")
        assert not procs.listens(pid, port, "127.0.0.1")
    with listening("127.0.0.1") as (pid, port):
        resolved = {info[4][0] for info in socket.getaddrinfo("localhost", port, type=socket.SOCK_STREAM)}
        assert procs.listens(pid, port, "localhost") == (resolved == {"127.0.0.1"})
        assert not procs.listens(pid, port, "no-such-host.invalid")


def test_the_kernel_s_listener_table_is_read_with_each_address() -> None:
    with listening("127.0.0.2") as (pid, port):
        assert (ipaddress.ip_address("127.0.0.2"), port) in procs.tcp_listeners(pid).values()


def test_an_ipv4_address_bound_through_an_ipv6_socket_counts_as_that_address() -> None:
    """gRPC servers (BuildGrid's) bind 127.0.0.1 as ::ffff:127.0.0.1 on an IPv6 socket."""
    with listening("::ffff:127.0.0.1", "AF_INET6") as (pid, port):
        assert (ipaddress.ip_address("127.0.0.1"), port) in procs.held_listeners(pid)
        assert procs.listens(pid, port, "127.0.0.1")


def test_a_process_in_another_network_namespace_does_not_count() -> None:
    """Its /proc tables are its namespace's: an action in a sandbox of its own, listening on the port there, says
    nothing of who holds that port here (a local user may)."""
    if shutil.which("unshare") is None:
        pytest.skip("no unshare here")
    proc = subprocess.Popen(["unshare", "-rn", "--", sys.executable, "-S", "-c", LISTEN_ON, "127.0.0.1", "AF_INET",
                             "0", "0"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline()
        if not line:
            pytest.skip(f"cannot make a network namespace here: {proc.stderr.read() if proc.stderr else ''}")
        port = int(line)
        assert (ipaddress.ip_address("127.0.0.1"), port) in procs.held_listeners(proc.pid)  # in its own namespace
        assert not procs.same_network(proc.pid)
        assert not procs.listens(proc.pid, port, "127.0.0.1")
    finally:
        proc.kill()
        proc.wait()


def test_a_daemon_never_imports_a_module_planted_in_the_callers_working_directory(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """`python -m` puts the working directory first on the module path: a root `cluster start` run from /tmp or a
    shared checkout would run another user's `venv`, `pip` or `goma_ext` package. Daemons start in `/`."""
    planted = tmp_path / "venv"
    planted.mkdir()
    (planted / "__init__.py").write_text("")
    (planted / "__main__.py").write_text(f"open({str(tmp_path / 'ran')!r}, 'w').write('planted')\n")
    monkeypatch.chdir(tmp_path)
    pid = procs.spawn([sys.executable, "-m", "venv", "--help"], tmp_path / "log")
    os.waitpid(pid, 0)
    assert not (tmp_path / "ran").exists()
    assert "usage" in (tmp_path / "log").read_text()


def test_a_grpc_server_on_every_address_counts_for_loopback() -> None:
    """gRPC binds 0.0.0.0 (`cluster start --listen 0.0.0.0`) as one dual-stack `::` socket; the probe then goes to
    127.0.0.1."""
    code = ("import grpc, sys, time\nfrom concurrent import futures\ns = grpc.server(futures.ThreadPoolExecutor(1))\n"
            "print(s.add_insecure_port('0.0.0.0:0'), flush=True)\ns.start()\ntime.sleep(60)\n")
    proc = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout is not None
        port = int(proc.stdout.readline())
        deadline = time.monotonic() + 30
        while not procs.held_listeners(proc.pid):
            assert time.monotonic() < deadline
            time.sleep(0.05)
        assert procs.listens(proc.pid, port, "127.0.0.1")
    finally:
        proc.kill()
        proc.wait()
