"""Remote fixtures: the run's cluster (PostgreSQL + BuildGrid 0.4.4 + goma-ext workers), test programs, wrappers."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from bench.subjects import thin_program
from bench.subjects.thin_program import ThinProgram
from goma_ext.remote import stats
from tests.remote import session_cluster
from tests.remote.session_cluster import (  # noqa: F401 (re-exported: the remote tests import them from here)
    INSTANCE,
    SLOW_CLANG,
    SLOW_DELAY_S,
    TEST_POLL_S,
    Cluster,
    make_cert,
)
from tests.system_users import temporary_user

if TYPE_CHECKING:
    from tests.remote.attacker import Attacker

# A shell script cannot travel as a toolchain: actions of the slow clang use the worker's own (toolchain: host).
HOST_TOOLCHAIN = {"GOMA_EXT_REMOTE_TOOLCHAIN": "host"}


@pytest.fixture(scope="session")
def cluster() -> Iterator[Cluster]:
    """The run's cluster (tests/remote/session_cluster.py), shared by every pytest-xdist worker. Every client the
    tests start finds its client token in GOMA_EXT_REMOTE_TOKEN_FILE, set for the session."""
    shared = session_cluster.shared()
    with pytest.MonkeyPatch.context() as env:
        env.setenv("GOMA_EXT_REMOTE_TOKEN_FILE", str(shared.token_file))
        yield shared


@pytest.fixture(scope="session")
def program_template(tmp_path_factory: pytest.TempPathFactory) -> ThinProgram:
    return thin_program.build(tmp_path_factory.mktemp("template") / "ws")


@pytest.fixture(scope="session")
def ref(program_template: ThinProgram, tmp_path_factory: pytest.TempPathFactory) -> dict[str, bytes]:
    """The bytes a `program`'s remote or fallen-back backends must produce (`local_reference`), made once: every
    `program` is a copy of the same template."""
    return local_reference(program_template, tmp_path_factory.mktemp("reference"))


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
