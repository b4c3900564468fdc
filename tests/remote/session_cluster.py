"""The test run's cluster: one real cluster (PostgreSQL + BuildGrid 0.4.4 + goma-ext workers) for every
pytest-xdist worker of the run (tests/run_shared.py), stopped by the run's own process at its end. Tests that
stop or kill parts of a cluster start their own (`start_private`): the others keep using this one meanwhile."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from pathlib import Path

from goma_ext.cluster import manager, procs, tokens
from tests import run_shared
from tests.builds import REPO
from tests.system_users import User, make_user, remove_user, user

SLOW_CLANG = "slow-clang-19"  # an allow-listed compiler that sleeps first, to fault-inject mid-action
SLOW_DELAY_S = 2.0
# The test clusters idle through most of the run, beside the tests: they poll 20x less than a real cluster
# (goma_ext/cluster/server.py DEFAULT_POLL_S; the assigner every 0.2 s, not 10 ms). Measured, a cluster of three
# workers idle for 40 s: 3.7 % of a core at 1 s, 2.7 % at 2 s, 6 % at 0.5 s, 30 % at the default; the example's
# 128 remote backends took 47.9 s at 2 s and 49.9 s at 0.5 s (waiting bots are woken by the scheduler, not by
# their poll).
TEST_POLL_S = 1.0
INSTANCE = "gn-thinlto/test"  # a non-empty REAPI instance name, so resource names carry it
_FILE = "cluster.json"


@dataclass(frozen=True)
class Cluster:
    """A running test cluster and the files the tests need."""

    state: Path
    ca_cert: Path
    slow_clang: Path
    runner: User | None  # the unprivileged user the workers run actions as (None when the tests are not root)

    @property
    def st(self) -> manager.ClusterState:
        st = manager.load(self.state)
        if st is None:
            raise RuntimeError("cluster state vanished")
        return st

    @property
    def endpoint(self) -> str:
        """The plaintext endpoint (the test clusters serve it beside TLS: `--also-plaintext`)."""
        endpoint = self.st.plaintext_endpoint
        if endpoint is None:
            raise RuntimeError("the test cluster serves no plaintext endpoint")
        return endpoint

    @property
    def tls_endpoint(self) -> str:
        return f"grpcs://localhost:{self.st.tls_port}"

    @property
    def token_file(self) -> Path:
        """The client token the cluster minted (JWT is on): every test client sends it, through the environment."""
        path = self.st.token_file(tokens.Role.CLIENT)
        if path is None:
            raise RuntimeError("the test cluster has no authentication")
        return path

    def ensure_server(self) -> None:
        """Restart BuildGrid if a fault test stopped it."""
        if not procs.alive(self.st.server_pid):
            manager.start(manager.ClusterSpec(state=self.state, workers=self.st.workers))


def make_cert(d: Path) -> tuple[Path, Path]:
    cert, key = d / "server.crt", d / "server.key"
    subprocess.run(
        ["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "2", "-subj", "/CN=localhost",
         "-addext", "subjectAltName=DNS:localhost,IP:127.0.0.1", "-keyout", str(key), "-out", str(cert)],
        check=True, capture_output=True,
    )
    return cert, key


WORKERS = 3  # the run's cluster serves every pytest-xdist worker's remote tests (./dev test runs three)


def server_venv() -> Path:
    """The server venv the tests' clusters share (made by the first that needs it)."""
    return Path(os.environ.get("GOMA_EXT_SERVER_VENV", REPO / ".state" / "server-venv"))


def start(d: Path, runner_prefix: str = "gxrun", workers: int = WORKERS) -> None:
    """A cluster in D (state, certificate) whose workers sandbox every action (bubblewrap); as root they run
    actions as a user made for it, in a directory that user can reach (pytest's own temp dirs are 0700). JWT
    authentication is on (the default); grpcs:// and, asked for explicitly, plaintext grpc:// are served. What it
    made is recorded in D as it is made, so that `stop` undoes it even after a failed start."""
    cert, key = make_cert(d)
    reachable = Path(tempfile.mkdtemp(prefix="gx-remote-"))
    os.chmod(reachable, 0o711)
    made: dict[str, str | None] = {"reachable": str(reachable), "runner": None}
    (d / _FILE).write_text(json.dumps(made))
    slow = reachable / SLOW_CLANG  # the sandbox binds it: the runner must reach it
    slow.write_text(f"#!/bin/sh\n/bin/sleep {SLOW_DELAY_S}\nexec /usr/bin/clang-19 \"$@\"\n")
    slow.chmod(0o755)
    if os.geteuid() == 0:
        made["runner"] = make_user(runner_prefix).name
        (d / _FILE).write_text(json.dumps(made))
    venv = server_venv()
    manager.start(manager.ClusterSpec(
        state=d / "state", workers=workers, server_venv=venv, tls_cert=cert, tls_key=key, instance=INSTANCE,
        compilers=("clang-19", "clang++-19", "/usr/lib/llvm-19/bin/clang", "/usr/lib/llvm-19/bin/clang++",
                   str(slow), "/usr/lib/llvm-22/bin/clang"),  # what lld 22 names for DTLTO jobs
        keepalive_s=20, poll_s=TEST_POLL_S, run_as=made["runner"], sandbox_dir=reachable / "sandboxes",
        worker_args=("--max-procs", "256", "--cpu-time", "120", "--max-stream-bytes", "8M", "--tmp-size", "64M"),
        also_plaintext=True,
    ))


def load(d: Path) -> Cluster:
    made = json.loads((d / _FILE).read_text())
    runner = user(made["runner"]) if made["runner"] else None
    return Cluster(d / "state", d / "server.crt", Path(made["reachable"]) / SLOW_CLANG, runner)


def stop(d: Path) -> None:
    """Undo `start`: the cluster, then its runner user and the directory that user reached."""
    with ExitStack() as undo:
        made = json.loads((d / _FILE).read_text()) if (d / _FILE).exists() else {}
        if made.get("reachable"):
            undo.callback(shutil.rmtree, made["reachable"], True)
        if made.get("runner"):
            undo.callback(remove_user, made["runner"])
        manager.destroy(d / "state")


def shared() -> Cluster:
    """The run's cluster, started by the first process that asks."""
    return load(run_shared.once("cluster", start, stop))


@contextmanager
def private(d: Path) -> Iterator[Cluster]:
    """A cluster like the run's, of the caller's own in the new directory D, stopped after."""
    d.mkdir(mode=0o700)
    try:
        start(d, runner_prefix="gxprun", workers=2)
        yield load(d)
    finally:
        stop(d)
