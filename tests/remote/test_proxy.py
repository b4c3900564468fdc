"""`goma-ext proxy` and the thin client against the real cluster: the common path, then each fault ending in a
correct output (the proxy killed, hung, left a stale socket, of another version, fed bad requests)."""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import struct
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import pytest

from bench.subjects import thin_program
from bench.subjects.thin_program import ThinProgram
from goma_ext.remote import proxy_protocol as wire
from goma_ext.remote import stats
from goma_ext.remote.wrapper import WARNING_PREFIX
from tests.conftest import REPO
from tests.remote.conftest import HOST_TOOLCHAIN, INSTANCE, Cluster, records

THIN_CLIENT = REPO / "goma_ext" / "remote" / "thin_client.py"


@pytest.fixture
def proxy_dir() -> Iterator[Path]:
    """A state directory of this test's own (so its proxy's figures are its own); its proxies stop at the end."""
    directory = Path(tempfile.mkdtemp(prefix="gxt-"))
    try:
        yield directory
    finally:
        for pid_file in directory.glob("*.pid"):
            try:
                os.kill(int(pid_file.read_text()), signal.SIGCONT)
            except (OSError, ValueError):
                pass
        subprocess.run([sys.executable, "-m", "goma_ext.cli", "proxy", "stop"], capture_output=True, timeout=120,
                       env={**os.environ, wire.STATE_DIR_ENV: str(directory)}, check=False)
        shutil.rmtree(directory, ignore_errors=True)


def client_env(salt: str, proxy_dir: Path, **extra: str) -> dict[str, str]:
    return {**os.environ, "GOMA_EXT_CACHE_SALT": salt, "GOMA_EXT_REMOTE_INSTANCE": INSTANCE,
            wire.STATE_DIR_ENV: str(proxy_dir), **extra}


def client_cmd(argv: list[str], endpoint: str) -> list[str]:
    """The command ninja runs for a remote backend: the thin client under `python -S`."""
    return [sys.executable, "-S", str(THIN_CLIENT), "--remote", endpoint, "--exec-root", "..", "--", *argv]


def run_client(program: ThinProgram, module: str, endpoint: str, env: Mapping[str, str],
               compiler: str = thin_program.CLANG) -> subprocess.CompletedProcess[str]:
    return subprocess.run(client_cmd(program.backend(module, compiler=compiler), endpoint), cwd=program.out,
                          capture_output=True, text=True, timeout=180, env=dict(env))


def start_client(program: ThinProgram, module: str, endpoint: str, env: Mapping[str, str],
                 compiler: str = thin_program.CLANG) -> subprocess.Popen[str]:
    return subprocess.Popen(client_cmd(program.backend(module, compiler=compiler), endpoint), cwd=program.out,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=dict(env))


def proxy_status(env: Mapping[str, str]) -> list[dict[str, Any]]:
    out = subprocess.run([sys.executable, "-m", "goma_ext.cli", "proxy", "status", "--json"], capture_output=True,
                         text=True, check=True, env=dict(env)).stdout
    return list(json.loads(out))


def the_proxy(env: Mapping[str, str]) -> dict[str, Any]:
    found = proxy_status(env)
    assert len(found) == 1, found
    return found[0]


def warnings(stderr: str) -> list[str]:
    return [line for line in stderr.splitlines() if line.startswith(WARNING_PREFIX)]


def check_outputs(program: ThinProgram, ref: Mapping[str, bytes]) -> None:
    for m in thin_program.MODULES:
        assert program.native(m).read_bytes() == ref[m], m
    assert program.link_and_check() == "self-check ok"


def wait_for(predicate: Any, timeout_s: float = 30.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not predicate():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.05)


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def test_one_proxy_serves_every_action_and_a_fresh_directory_from_the_cache(
    cluster: Cluster, program: ThinProgram, ref: dict[str, bytes], tmp_path: Path, salt: str, proxy_dir: Path
) -> None:
    second = program.copy(tmp_path / "second")
    env = client_env(salt, proxy_dir)
    for m in thin_program.MODULES:
        run = run_client(program, m, cluster.endpoint, env)
        assert run.returncode == 0 and warnings(run.stderr) == [], run.stderr
    for m in thin_program.MODULES:
        run = run_client(second, m, cluster.endpoint, env)
        assert run.returncode == 0 and warnings(run.stderr) == [], run.stderr
    assert {r.mode for r in records(program)} == {stats.Mode.REMOTE}
    assert {r.mode for r in records(second)} == {stats.Mode.CACHE_HIT}
    check_outputs(program, ref)
    check_outputs(second, ref)

    status = the_proxy(env)
    assert status["runs"] == 10 and status["actions_remote"] == 5 and status["actions_cache_hit"] == 5, status
    assert status.get("refused", 0) == 0
    # Inputs shared by the second directory's actions were never asked about again: the proxy knew them.
    assert status["rpc_FindMissingBlobs"] <= 5 and status["cas_known_blobs"] > 0, status
    assert status["outputs_already_here"] == 0, status
    # Run again where its object already lies (a rerun to the same object): nothing is brought down, and the file
    # is the same one with a new mtime, as the compiler would have left it.
    native = program.native(thin_program.MODULES[0])
    os.utime(native, ns=(1, 1))
    inode = native.stat().st_ino
    run = run_client(program, thin_program.MODULES[0], cluster.endpoint, env)
    assert run.returncode == 0 and warnings(run.stderr) == [], run.stderr
    again = the_proxy(env)
    assert again["outputs_already_here"] == 1 and again["bytes_already_here"] == native.stat().st_size, again
    assert again["bytes_downloaded"] == status["bytes_downloaded"], again
    assert native.stat().st_ino == inode and native.stat().st_mtime_ns > 1
    check_outputs(program, ref)
    sock = Path(status["socket"])
    assert sock.stat().st_mode & 0o777 == 0o600 and proxy_dir.stat().st_mode & 0o777 == 0o700


def test_a_client_of_the_clusters_user_reaches_it_through_its_socket(
    cluster: Cluster, program: ThinProgram, ref: dict[str, bytes], salt: str, proxy_dir: Path
) -> None:
    """On an `all` host, a client of the cluster's own user may use the Unix socket BuildGrid serves the workers on
    (`cluster start` prints it), with its client token: no other local user can take that address, as they can the
    port while BuildGrid is down."""
    sock = cluster.st.worker_socket
    assert sock is not None
    env = client_env(salt, proxy_dir)
    for m in thin_program.MODULES:
        run = run_client(program, m, f"grpc://unix:{sock}", env)
        assert run.returncode == 0 and warnings(run.stderr) == [], run.stderr
    assert {r.mode for r in records(program)} == {stats.Mode.REMOTE}
    check_outputs(program, ref)


@pytest.mark.parametrize("shards", [1, 3])
def test_identical_actions_in_flight_run_once(cluster: Cluster, program: ThinProgram, tmp_path: Path, salt: str,
                                              proxy_dir: Path, shards: int) -> None:
    """With one proxy, and with three shards ([scale]): identical actions reach the same shard, so they still
    execute once."""
    env = client_env(salt, proxy_dir, GOMA_EXT_PROXY_SHARDS=str(shards))
    copies = [program.copy(tmp_path / f"copy{i}") for i in range(6)]
    slow = str(cluster.slow_clang)  # sleeps 2 s first: every copy's request arrives while the first executes
    started = subprocess.run([sys.executable, "-m", "goma_ext.cli", "proxy", "start", "--remote", cluster.endpoint],
                             check=True, env=env, capture_output=True, text=True)
    assert started.stdout.count(f" of {shards}): pid ") == shards, started.stdout
    running = [start_client(c, "alpha", cluster.endpoint, {**env, **HOST_TOOLCHAIN}, compiler=slow) for c in copies]
    for proc in running:
        _, err = proc.communicate(timeout=120)
        assert proc.returncode == 0 and warnings(err) == [], err
    found = proxy_status(env)
    assert sorted(p["shard"] for p in found) == list(range(shards)), found
    (status,) = [p for p in found if p.get("runs")]  # one shard got all six
    assert status["shard"] == wire.shard_of(program.backend("alpha", compiler=slow), shards)
    assert status["actions_remote"] == 1 and status["joined_in_flight"] + status.get("actions_cache_hit", 0) == 5
    if shards > 1:
        text = subprocess.run([sys.executable, "-m", "goma_ext.cli", "proxy", "status"], env=env, check=True,
                              capture_output=True, text=True).stdout
        assert text.count(" shard ") == shards and f"total: {shards} proxies" in text, text
    outputs = {c.native("alpha").read_bytes() for c in copies}
    assert len(outputs) == 1


def test_proxy_killed_mid_action_is_replaced(cluster: Cluster, program: ThinProgram, ref: dict[str, bytes],
                                             salt: str, proxy_dir: Path) -> None:
    env = client_env(salt, proxy_dir)
    subprocess.run([sys.executable, "-m", "goma_ext.cli", "proxy", "start", "--remote", cluster.endpoint],
                   check=True, env=env, capture_output=True)
    first = the_proxy(env)
    slow = str(cluster.slow_clang)
    running = [start_client(program, m, cluster.endpoint, {**env, **HOST_TOOLCHAIN}, compiler=slow)
               for m in thin_program.MODULES]
    wait_for(lambda: the_proxy(env)["active"] >= 1)
    os.kill(first["pid"], signal.SIGKILL)
    for proc in running:
        _, err = proc.communicate(timeout=180)
        # Each client saw its connection drop and handed the action to a new proxy, with no local fallback: its
        # retry asks for a ping first, which the dying proxy (still accepting connections for a moment after
        # SIGKILL) cannot answer.
        assert proc.returncode == 0 and warnings(err) == [], err
    check_outputs(program, ref)
    second = the_proxy(env)
    assert second["pid"] != first["pid"] and not alive(first["pid"])
    assert all(r.exit_code == 0 for r in records(program))


def test_stale_socket_file_is_replaced(cluster: Cluster, program: ThinProgram, tmp_path: Path, salt: str,
                                       proxy_dir: Path) -> None:
    env = client_env(salt, proxy_dir)
    assert run_client(program, "alpha", cluster.endpoint, env).returncode == 0
    old = the_proxy(env)
    os.kill(old["pid"], signal.SIGKILL)
    wait_for(lambda: not alive(old["pid"]))
    sock = Path(old["socket"])
    assert sock.is_socket()  # left behind: nothing listens on it now
    run = run_client(program, "beta", cluster.endpoint, env)
    assert run.returncode == 0 and warnings(run.stderr) == [], run.stderr
    assert the_proxy(env)["pid"] != old["pid"]
    assert [r.mode for r in records(program)] == [stats.Mode.REMOTE, stats.Mode.REMOTE]


def test_hung_proxy_means_local_runs_after_the_deadline(cluster: Cluster, program: ThinProgram, ref: dict[str, bytes],
                                                        salt: str, proxy_dir: Path) -> None:
    env = client_env(salt, proxy_dir, GOMA_EXT_PROXY_TIMEOUT="2")
    assert run_client(program, "alpha", cluster.endpoint, env).returncode == 0
    pid = the_proxy(env)["pid"]
    os.kill(pid, signal.SIGSTOP)
    try:
        t = time.monotonic()
        run = run_client(program, "beta", cluster.endpoint, env)
        first_s = time.monotonic() - t
        assert run.returncode == 0 and len(warnings(run.stderr)) == 1, run.stderr
        assert "running locally" in run.stderr and "stopped answering" in run.stderr
        t = time.monotonic()
        for m in ("gamma", "delta", "main"):  # later clients do not wait for the hung proxy again
            run = run_client(program, m, cluster.endpoint, env)
            assert run.returncode == 0 and len(warnings(run.stderr)) == 1, run.stderr
        later_s = time.monotonic() - t
    finally:
        os.kill(pid, signal.SIGCONT)
    assert first_s >= 2 and later_s < first_s * 3, (first_s, later_s)
    assert [r.mode for r in records(program)] == [stats.Mode.REMOTE] + [stats.Mode.FALLBACK] * 4
    check_outputs(program, ref)


def test_a_proxy_of_another_version_makes_way(cluster: Cluster, program: ThinProgram, tmp_path: Path, salt: str,
                                             proxy_dir: Path) -> None:
    old_tree = tmp_path / "old"
    shutil.copytree(REPO / "goma_ext", old_tree / "goma_ext", ignore=shutil.ignore_patterns("__pycache__"))
    init = old_tree / "goma_ext" / "__init__.py"
    init.write_text(init.read_text().replace('__version__ = "', '__version__ = "0.0.0-old-'))
    env = client_env(salt, proxy_dir)
    old_env = {**env, "PYTHONPATH": str(old_tree)}
    subprocess.run([sys.executable, "-m", "goma_ext.cli", "proxy", "start", "--remote", cluster.endpoint],
                   check=True, env=old_env, capture_output=True, cwd=tmp_path)
    old = the_proxy(env)
    assert old["version"].startswith("0.0.0-old-"), old
    run = run_client(program, "alpha", cluster.endpoint, env)
    assert run.returncode == 0 and warnings(run.stderr) == [], run.stderr
    wait_for(lambda: not alive(old["pid"]))
    new = the_proxy(env)
    assert new["pid"] != old["pid"] and new["version"] == wire.version_tag()
    assert [r.mode for r in records(program)] == [stats.Mode.REMOTE]
    log = Path(str(old["socket"])[: -len("sock")] + "log").read_text()
    assert "making way for its proxy" in log


def _raw(sock_path: str, payload: bytes, read: bool = True) -> dict[str, Any] | None:
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
        s.settimeout(20)
        s.connect(sock_path)
        s.sendall(payload)
        if not read:
            return None
        return wire.receive(s, wire.MAX_ANSWER_BYTES)


def _frame(message: object) -> bytes:
    data = json.dumps(message).encode()
    return struct.pack(">I", len(data)) + data


def test_bad_requests_are_refused_and_the_proxy_keeps_serving(
    cluster: Cluster, program: ThinProgram, tmp_path: Path, salt: str, proxy_dir: Path
) -> None:
    env = client_env(salt, proxy_dir)
    assert run_client(program, "alpha", cluster.endpoint, env).returncode == 0
    status = the_proxy(env)
    good = wire.run_message(
        program.backend("beta"), str(program.out), ("/x", "v", "0" * 64), {},
        {"GOMA_EXT_CACHE_SALT": salt, "GOMA_EXT_REMOTE_INSTANCE": INSTANCE, "GOMA_EXT_REMOTE": cluster.endpoint,
         "GOMA_EXT_REMOTE_TOKEN_FILE": env["GOMA_EXT_REMOTE_TOKEN_FILE"]},  # the cluster's client token (JWT)
        {"exec_root": ".."}, "")
    compiler = json.loads((program.out / ".goma_ext_compilers.json").read_text())
    path_key, ident = next(iter(compiler.items()))
    good["compiler"] = {"path": path_key.split(":")[0], "version": ident["version"], "sha256": ident["sha256"]}

    def variant(**changes: Any) -> dict[str, Any]:
        return {**good, **changes}

    bad: list[tuple[bytes, str]] = [
        (struct.pack(">I", 1 << 31), "exceeds the limit"),
        (struct.pack(">I", 5) + b"{oops", "not JSON"),
        (_frame([1, 2]), "not an object"),
        (_frame({"op": "frobnicate"}), "unknown op"),
        (_frame(variant(extra=1)), "unknown field"),
        (_frame(variant(cwd="out")), "not an absolute path"),
        (_frame(variant(argv=[])), "argv"),
        (_frame(variant(compiler={**good["compiler"], "sha256": "f" * 64})), "not the"),
        (_frame(variant(settings={**good["settings"], "flags": {"endpoint": "grpc://127.0.0.1:1"}})),
         "select another proxy"),
        (_frame(variant(argv=[*good["argv"][:-1], "/tmp/elsewhere.o"])), "absolute path"),  # -o /tmp/…
    ]
    for payload, why in bad:
        answer = _raw(status["socket"], payload)
        assert answer is not None and answer["type"] == wire.REFUSED and why in answer["message"], (why, answer)
    _raw(status["socket"], struct.pack(">I", 100) + b"{", read=False)  # a truncated frame, then gone
    run = run_client(program, "beta", cluster.endpoint, env)
    assert run.returncode == 0 and warnings(run.stderr) == [], run.stderr
    after = the_proxy(env)
    assert after["pid"] == status["pid"] and after["refused"] == len(bad) + 1
    log = Path(status["socket"][: -len("sock")] + "log").read_text()
    assert log.count("bad request from pid") == len(bad) + 1


def test_no_startable_proxy_means_the_in_process_path_with_one_warning(
    cluster: Cluster, program: ThinProgram, salt: str, tmp_path: Path
) -> None:
    blocker = tmp_path / "not-a-directory"
    blocker.write_text("")
    env = client_env(salt, blocker / "proxy")
    run = run_client(program, "alpha", cluster.endpoint, env)
    assert run.returncode == 0, run.stderr
    assert len(warnings(run.stderr)) == 1 and "running this action in-process" in run.stderr, run.stderr
    assert [r.mode for r in records(program)] == [stats.Mode.REMOTE]


def test_idle_proxy_stops_and_removes_its_socket(cluster: Cluster, program: ThinProgram, salt: str,
                                                 proxy_dir: Path) -> None:
    env = client_env(salt, proxy_dir, GOMA_EXT_PROXY_IDLE_TIMEOUT="2")
    assert run_client(program, "alpha", cluster.endpoint, env).returncode == 0
    status = the_proxy(env)
    wait_for(lambda: not alive(status["pid"]), timeout_s=20)
    assert not Path(status["socket"]).exists() and proxy_status(env) == []
