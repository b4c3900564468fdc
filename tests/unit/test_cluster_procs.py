"""[harden] Before the cluster manager sends a secret to a port on this host (redis's password, the probe's bearer
token), the process listening there must be the one it just started: a port recorded in the cluster's state is
free while the cluster is down, and an attacker's audit (2026-11-29) had another local user take redis's port
first and receive the password (then log in to the real redis with it)."""

from __future__ import annotations

import subprocess
import sys

from goma_ext.cluster import procs

LISTEN = "import socket, sys, time\ns = socket.socket()\ns.bind(('127.0.0.1', 0))\ns.listen()\n" \
         "print(s.getsockname()[1], flush=True)\ntime.sleep(60)\n"


def test_a_port_counts_as_a_process_s_only_while_that_process_listens_on_it() -> None:
    squatter = subprocess.Popen([sys.executable, "-S", "-c", LISTEN], stdout=subprocess.PIPE, text=True)
    try:
        assert squatter.stdout is not None
        port = int(squatter.stdout.readline())
        assert procs.listens(squatter.pid, port)
        ours = subprocess.Popen([sys.executable, "-S", "-c", "import time; time.sleep(60)"])
        try:
            assert not procs.listens(ours.pid, port)  # the process we started is not the one on that port
        finally:
            ours.kill()
            ours.wait()
    finally:
        squatter.kill()
        squatter.wait()
    assert not procs.listens(squatter.pid, port)

