"""Faults, each ending in a correct build with no partial outputs: the wrapper falls back or the cluster recovers."""

from __future__ import annotations

import os
import signal
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from bench.subjects import thin_program
from bench.subjects.thin_program import ThinProgram
from goma_ext.cluster import procs
from goma_ext.reapi.digest import Digest
from goma_ext.remote import stats
from goma_ext.remote.wrapper import WARNING_PREFIX
from tests.remote import session_cluster
from tests.remote.conftest import (
    HOST_TOOLCHAIN,
    Cluster,
    no_temp_files,
    records,
    start_wrapper,
    wrapper,
)


@pytest.fixture(scope="module")
def own_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    """A cluster of this module's own: the run's is shared with tests running meanwhile, which a killed server or
    worker would fail. Its actions use the worker's own compilers (`toolchain: host`, as the slow clang's must):
    the faults are the server's, a worker's and a blob's; shipping clang and its libraries (~260 MB) as inputs
    cost ~5 CPU s of hashing, uploading and fetching (the other remote tests ship compilers)."""
    with session_cluster.private(tmp_path_factory.mktemp("faults") / "cluster") as own:
        with pytest.MonkeyPatch.context() as env:
            env.setenv("GOMA_EXT_REMOTE_TOKEN_FILE", str(own.token_file))
            for name, value in HOST_TOOLCHAIN.items():
                env.setenv(name, value)
            yield own


@pytest.fixture
def healthy(own_cluster: Cluster) -> Cluster:
    """The module's cluster, with BuildGrid restarted if an earlier fault test stopped it."""
    own_cluster.ensure_server()
    return own_cluster


def _check_build(program: ThinProgram, ref: dict[str, bytes]) -> None:
    for m in thin_program.MODULES:
        assert program.native(m).read_bytes() == ref[m], m
    assert program.link_and_check() == "self-check ok"
    assert no_temp_files(program) == []


def test_server_down_before_the_build(program: ThinProgram, ref: dict[str, bytes], salt: str) -> None:
    down = f"grpc://127.0.0.1:{procs.free_port()}"
    for i, m in enumerate(thin_program.MODULES):
        run = wrapper(program, program.backend(m), down, salt)
        assert run.returncode == 0
        warnings = [line for line in run.stderr.splitlines() if line.startswith(WARNING_PREFIX)]
        assert len(warnings) == 1 and "UNAVAILABLE" in warnings[0], run.stderr
        assert "marked unreachable" in warnings[0] or i == 0  # later backends skip the retries
    assert {r.mode for r in records(program)} == {stats.Mode.FALLBACK}
    _check_build(program, ref)


def test_server_killed_mid_build(healthy: Cluster, program: ThinProgram, ref: dict[str, bytes], salt: str,
                                 own_proxy_dir: str) -> None:
    """Its own proxy, which remembers the outage (DOWN_HOLD_S) and goes with the test."""
    slow = str(healthy.slow_clang)
    env = {**HOST_TOOLCHAIN, "GOMA_EXT_PROXY_DIR": own_proxy_dir}
    running = [start_wrapper(program, program.backend(m, compiler=slow), healthy.endpoint, salt, env)
               for m in thin_program.MODULES]
    time.sleep(1.5)
    server = healthy.st.server_pid
    assert server is not None
    os.killpg(server, signal.SIGKILL)
    for proc in running:
        _, err = proc.communicate(timeout=120)
        assert proc.returncode == 0, err
    assert any(r.mode is stats.Mode.FALLBACK for r in records(program))
    _check_build(program, ref)
    healthy.ensure_server()


def _worker_children(supervisor: int) -> dict[int, int]:
    """Worker index -> pid of the supervisor's children."""
    kids: dict[int, int] = {}
    for pid in Path(f"/proc/{supervisor}/task/{supervisor}/children").read_text().split():
        argv = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
        if b"--index" in argv:
            kids[int(argv[argv.index(b"--index") + 1])] = int(pid)
    return kids


def test_worker_killed_mid_action(healthy: Cluster, program: ThinProgram, ref: dict[str, bytes], salt: str) -> None:
    proc = start_wrapper(program, program.backend("alpha", compiler=str(healthy.slow_clang)), healthy.endpoint, salt,
                         HOST_TOOLCHAIN)
    busy: list[Path] = []
    deadline = time.monotonic() + 60  # generous: the workers may still be reconnecting to a restarted server
    while not busy and time.monotonic() < deadline:
        busy = list(Path(str(healthy.st.sandbox_dir)).glob("*/sb-*"))  # SANDBOX-DIR/BOT-ID/sb-…
        time.sleep(0.05)
    assert busy, "no worker picked up the action"
    index = int(busy[0].parent.name.rsplit("-", 1)[1])
    supervisor = healthy.st.worker_pid
    assert supervisor is not None
    os.kill(_worker_children(supervisor)[index], signal.SIGKILL)
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == 0, err
    assert program.native("alpha").read_bytes() == ref["alpha"]
    assert [r.mode for r in records(program)] == [stats.Mode.REMOTE], err  # requeued and re-run remotely
    for m in (m for m in thin_program.MODULES if m != "alpha"):
        assert wrapper(program, program.backend(m), healthy.endpoint, salt).returncode == 0
    _check_build(program, ref)


def test_corrupted_blob_is_caught_by_its_digest(healthy: Cluster, program: ThinProgram, ref: dict[str, bytes],
                                                 tmp_path: Path, salt: str) -> None:
    assert wrapper(program, program.backend("beta"), healthy.endpoint, salt).returncode == 0
    digest = Digest.of_file(program.native("beta"))
    blob = healthy.state / "cas" / "cas" / "objects" / digest.hash[:2] / digest.hash[2:]
    good = blob.read_bytes()
    data = bytearray(good)
    data[len(data) // 2] ^= 0xFF
    blob.write_bytes(bytes(data))
    fresh = program.copy(tmp_path / "fresh")
    (fresh.out / "gn_thinlto_remote.jsonl").unlink()
    fresh.native("beta").unlink()
    try:
        run = wrapper(fresh, fresh.backend("beta"), healthy.endpoint, salt)
    finally:
        blob.write_bytes(good)  # later tests of the module fetch this object too
    assert run.returncode == 0
    assert run.stderr.count(WARNING_PREFIX) == 1 and "content" in run.stderr, run.stderr
    assert [r.mode for r in records(fresh)] == [stats.Mode.FALLBACK]
    assert fresh.native("beta").read_bytes() == ref["beta"]
    assert no_temp_files(fresh) == []


def test_compile_error_is_reported_once_with_its_exit_code(healthy: Cluster, program: ThinProgram, salt: str) -> None:
    argv = program.backend("gamma", extra=("-mllvm", "-goma-ext-no-such-option"))
    run = wrapper(program, argv, healthy.endpoint, salt)
    assert run.returncode == 1
    assert run.stderr.count("goma-ext-no-such-option") == 1, run.stderr
    assert WARNING_PREFIX not in run.stderr
    assert [(r.mode, r.exit_code) for r in records(program)] == [(stats.Mode.REMOTE, 1)]
    assert not program.native("gamma").exists()
