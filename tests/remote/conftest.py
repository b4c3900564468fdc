"""Remote fixtures: one real cluster (PostgreSQL + BuildGrid 0.4.4 + goma-ext workers) per test session."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator, Mapping, Sequence
from contextlib import ExitStack
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from bench.subjects import thin_program
from bench.subjects.thin_program import ThinProgram
from goma_ext.cluster import manager, procs, tokens
from goma_ext.remote import stats
from tests.conftest import REPO
from tests.system_users import User, temporary_user

if TYPE_CHECKING:
    from tests.remote.attacker import Attacker

SLOW_CLANG = "slow-clang-19"  # an allow-listed compiler that sleeps first, to fault-inject mid-action
# A shell script cannot travel as a toolchain: actions of the slow clang use the worker's own (toolchain: host).
HOST_TOOLCHAIN = {"GOMA_EXT_REMOTE_TOOLCHAIN": "host"}
SLOW_DELAY_S = 2.0
# The test clusters idle through most of the run (one per pytest-xdist worker, beside the other worker's tests):
# they poll 5x less than a real cluster (goma_ext/cluster/server.py DEFAULT_POLL_S): ~20 % of a core saved per
# cluster, ~0.2 s more per action.
TEST_POLL_S = 0.25
INSTANCE = "gn-thinlto/test"  # a non-empty REAPI instance name, so resource names carry it


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
        """The plaintext endpoint (the session cluster serves it beside TLS: `--also-plaintext`)."""
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


def _make_cert(d: Path) -> tuple[Path, Path]:
    cert, key = d / "server.crt", d / "server.key"
    subprocess.run(
        ["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "2", "-subj", "/CN=localhost",
         "-addext", "subjectAltName=DNS:localhost,IP:127.0.0.1", "-keyout", str(key), "-out", str(cert)],
        check=True, capture_output=True,
    )
    return cert, key


def _make_slow_clang(d: Path) -> Path:
    script = d / SLOW_CLANG
    script.write_text(f"#!/bin/sh\n/bin/sleep {SLOW_DELAY_S}\nexec /usr/bin/clang-19 \"$@\"\n")
    script.chmod(0o755)
    return script


@pytest.fixture(scope="session")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    """Workers sandbox every action (bubblewrap); as root they run actions as a user made for the session, in a
    directory that user can reach (pytest's own temp dirs are 0700). JWT authentication is on (the default) and
    every client the tests start finds the client token in GOMA_EXT_REMOTE_TOKEN_FILE, set for the session;
    grpcs:// and, asked for explicitly, plaintext grpc:// are served."""
    base = tmp_path_factory.mktemp("cluster")
    cert, key = _make_cert(base)
    with ExitStack() as stack:
        reachable = Path(tempfile.mkdtemp(prefix="gx-remote-"))
        stack.callback(shutil.rmtree, reachable, True)
        os.chmod(reachable, 0o711)
        slow = _make_slow_clang(reachable)  # the sandbox binds it: the runner must reach it
        runner = stack.enter_context(temporary_user("gxrun")) if os.geteuid() == 0 else None
        venv = Path(os.environ.get("GOMA_EXT_SERVER_VENV", REPO / ".state" / "server-venv"))
        spec = manager.ClusterSpec(
            state=base / "state", workers=2, server_venv=venv, tls_cert=cert, tls_key=key, instance=INSTANCE,
            compilers=("clang-19", "clang++-19", "/usr/lib/llvm-19/bin/clang", "/usr/lib/llvm-19/bin/clang++",
                       str(slow), "/usr/lib/llvm-22/bin/clang"),  # what lld 22 names for DTLTO jobs
            keepalive_s=20, poll_s=TEST_POLL_S, run_as=runner.name if runner else None,
            sandbox_dir=reachable / "sandboxes",
            worker_args=("--max-procs", "256", "--cpu-time", "120", "--max-stream-bytes", "8M", "--tmp-size", "64M"),
            also_plaintext=True,
        )
        stack.callback(manager.destroy, base / "state")
        st = manager.start(spec)
        env = stack.enter_context(pytest.MonkeyPatch.context())
        env.setenv("GOMA_EXT_REMOTE_TOKEN_FILE", str(st.token_file(tokens.Role.CLIENT)))
        yield Cluster(base / "state", cert, slow, runner)


@pytest.fixture(scope="session")
def program_template(tmp_path_factory: pytest.TempPathFactory) -> ThinProgram:
    return thin_program.build(tmp_path_factory.mktemp("template") / "ws")


@pytest.fixture
def program(program_template: ThinProgram, tmp_path: Path) -> ThinProgram:
    """A fresh copy of the workspace (bitcode + indexes, no native objects)."""
    return program_template.copy(tmp_path / "ws")


@dataclass(frozen=True)
class WrapperRun:
    returncode: int
    stdout: str
    stderr: str


@pytest.fixture
def salt(request: pytest.FixtureRequest) -> str:
    """A cache salt unique to the test, so tests never share action-cache entries."""
    return f"{request.node.nodeid}-{os.getpid()}"


def _wrapper_cmd(argv: Sequence[str], remote: str, extra: Sequence[str]) -> list[str]:
    return [sys.executable, "-m", "goma_ext.cli", "run", "--remote", remote, "--exec-root", "..",
            "--naive-inputs", "link.rsp", *extra, "--", *argv]


def _env(salt: str) -> dict[str, str]:
    return {**os.environ, "GOMA_EXT_CACHE_SALT": salt, "GOMA_EXT_REMOTE_INSTANCE": INSTANCE}


def wrapper(program: ThinProgram, argv: Sequence[str], remote: str, salt: str, *extra: str,
            env: Mapping[str, str] | None = None) -> WrapperRun:
    """Run `goma-ext run` exactly as ninja would, from the build directory (`env` adds to its environment)."""
    proc = subprocess.run(
        _wrapper_cmd(argv, remote, extra), cwd=program.out, capture_output=True, text=True, timeout=180,
        env={**_env(salt), **(env or {})},
    )
    return WrapperRun(proc.returncode, proc.stdout, proc.stderr)


def start_wrapper(program: ThinProgram, argv: Sequence[str], remote: str, salt: str,
                  env: Mapping[str, str] | None = None) -> subprocess.Popen[str]:
    return subprocess.Popen(
        _wrapper_cmd(argv, remote, ()), cwd=program.out, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        env={**_env(salt), **(env or {})},
    )


def local_reference(program: ThinProgram, tmp_path: Path) -> dict[str, bytes]:
    """Every module's backend run locally, in a separate copy: the bytes remote results must equal."""
    ref = program.copy(tmp_path / "ref")
    for m in thin_program.MODULES:
        subprocess.run(ref.backend(m), cwd=ref.out, check=True)
    return {m: ref.native(m).read_bytes() for m in thin_program.MODULES}


def records(program: ThinProgram) -> list[stats.RunRecord]:
    return stats.read(program.out / "gn_thinlto_remote.jsonl")


def no_temp_files(program: ThinProgram) -> list[str]:
    return sorted(p.name for p in (program.out / "obj").iterdir() if p.name.endswith(".tmp"))


@pytest.fixture
def own_proxy_dir() -> Iterator[str]:
    """A proxy state directory of the test's own (GOMA_EXT_PROXY_DIR for the clients it starts), its proxies stopped
    after: for tests that kill a proxy, or whose outage a proxy would remember (it holds a server it found down
    for DOWN_HOLD_S) past the test."""
    state = tempfile.mkdtemp(prefix="gxe-")
    try:
        yield state
    finally:
        subprocess.run([sys.executable, "-m", "goma_ext.cli", "proxy", "stop"], capture_output=True, check=False,
                       env={**os.environ, "GOMA_EXT_PROXY_DIR": state}, timeout=120)
        shutil.rmtree(state, ignore_errors=True)


@pytest.fixture(scope="module")
def attacker(cluster: Cluster) -> Iterator[Attacker]:
    """A local user made for the module (removed after), admitted to the cluster with its own copy of the client
    token, with a private directory: the attack suites' player."""
    from tests.remote.attacker import Attacker

    assert cluster.runner is not None
    with temporary_user("gxatk") as user:
        home = Path(tempfile.mkdtemp(prefix="gx-attacker-"))
        try:
            os.chown(home, user.uid, user.gid)
            yield Attacker(user, home, cluster)
        finally:
            shutil.rmtree(home, ignore_errors=True)
