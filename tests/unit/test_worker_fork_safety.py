"""The worker's process loads gRPC with its fork handlers off (goma_ext/worker/__init__.py): a root worker starts
each sandbox with a uid change (fork, not vfork) while other threads are in gRPC calls, and gRPC's handlers in
such a child could kill it before exec (SIGABRT or SIGBUS: 3 of 600 children in this probe without the setting;
tests/unit/test_worker_hermetic.py's ETXTBSY test once got `bwrap exit -7`)."""

from __future__ import annotations

import os
import subprocess
import sys

from tests.conftest import REPO

# Four threads keep calling into gRPC (a channel to a port nothing listens on) while the main thread starts
# children the way the root worker starts bwrap: Popen with user= (a uid change: fork, and fork handlers).
PROBE = """
import os, subprocess, sys, threading
import goma_ext.worker  # first: what the worker's process does before it loads gRPC
import grpc
print("env", os.environ.get("GRPC_ENABLE_FORK_SUPPORT"), flush=True)
channel = grpc.insecure_channel("127.0.0.1:1")
stop = threading.Event()
def spin():
    while not stop.is_set():
        try:
            grpc.channel_ready_future(channel).result(timeout=0.01)
        except Exception:
            pass
threads = [threading.Thread(target=spin, daemon=True) for _ in range(4)]
for t in threads:
    t.start()
bad = []
for _ in range(int(sys.argv[1])):
    child = subprocess.run(["/bin/true"], user=os.getuid(), capture_output=True)
    if child.returncode != 0 or child.stderr:
        bad.append((child.returncode, child.stderr[-200:]))
stop.set()
print("bad", len(bad), bad[:3], flush=True)
"""


def _probe(forks: int, env: dict[str, str]) -> str:
    proc = subprocess.run([sys.executable, "-c", PROBE, str(forks)], capture_output=True, text=True, cwd=REPO,
                          env=env, timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    return proc.stdout


def test_children_started_while_threads_are_in_grpc_reach_exec() -> None:
    env = {k: v for k, v in os.environ.items() if k != "GRPC_ENABLE_FORK_SUPPORT"}
    out = _probe(300, env)
    assert "env None\n" in out  # the worker's own children (bwrap, the actions) do not inherit the setting
    assert "bad 0 []" in out, out


def test_a_setting_the_user_made_is_kept() -> None:
    out = _probe(1, {**os.environ, "GRPC_ENABLE_FORK_SUPPORT": "1"})
    assert "env 1\n" in out, out
