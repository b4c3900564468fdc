"""The step launcher (launcher.c, compiled as the hook compiles it) and the build directory's step server: the
same cache behaviour as the Python step, the compiler run by the launcher, and a Python step whenever the server
is missing, foreign, of other settings, or dies."""

from __future__ import annotations

import contextlib
import fcntl
import os
import shutil
import signal
import socket
import stat
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from gn_thinlto.render.ninja import STEP_DIR
from gn_thinlto.steps.backend_log import read_stats
from gn_thinlto.steps.launcher_build import build_launcher, c_compiler
from gn_thinlto.steps.step_args import serves, server_socket, socket_path
from tests.conftest import step_server_pids

LAUNCHER = "gn-thinlto/step-launcher"
pytestmark = pytest.mark.skipif(not c_compiler(), reason="no C compiler for the step launcher")


class Dir:
    """A build directory with the launcher, a fake compiler and the rule's command."""

    def __init__(self, root: Path) -> None:
        self.root = root
        assert build_launcher(str(root), LAUNCHER) == ""
        self.compiler = root / "fake-clang"
        self.compiler.write_text(
            "#!/bin/sh\n"
            'while [ "$1" != "-o" ]; do case "$1" in ir) shift; in="$1";; esac; shift; done\n'
            'echo run >> runs\n'
            'if grep -q FAIL "$in"; then echo "fake-clang: error: bad bitcode $in" >&2; exit 3; fi\n'
            'if grep -q SLOW "$in"; then sleep 3; fi\n'
            'printf "native(%s)" "$(cat "$in")" > "$2"\n')
        self.compiler.chmod(0o755)
        self.python = [sys.executable, "-S", f"{STEP_DIR}/backend.py", "--cache", "gn-thinlto/cache",
                       "--log", "gn-thinlto/backend.log"]
        self.socket = socket_path(self.python, "gn-thinlto")
        self.accounting = root / "accounting.txt"

    def command(self, bitcode: str, target: str = "app", cache: str = "gn-thinlto/cache", servers: int = 1
                ) -> list[str]:
        (self.root / target).mkdir(exist_ok=True)
        index = f"{target}/{bitcode}.thinlto.bc"
        (self.root / index).write_bytes(b"INDEX")
        python = [c if c != "gn-thinlto/cache" else cache for c in self.python]
        spread = ["--servers", str(servers)] if servers > 1 else []
        return [LAUNCHER, *spread, self.socket, *python, "--socket", self.socket, "--", str(self.compiler), "-c",
                "-x", "ir", bitcode, f"-fthinlto-index={index}", "-o", f"{target}/{bitcode}.native.o", "-O2"]

    def step(self, bitcode: str, target: str = "app", **kw: object) -> subprocess.CompletedProcess[str]:
        env = {**os.environ, "GN_THINLTO_STEP_ACCOUNTING": str(self.accounting)}
        return subprocess.run(self.command(bitcode, target, **kw),  # type: ignore[arg-type]
                              cwd=self.root, capture_output=True, text=True, env=env, timeout=60)

    def served(self) -> list[str]:
        """Per step since the last call: "server" (only the launcher accounted) or "python" (it fell back)."""
        lines = self.accounting.read_text().splitlines() if self.accounting.exists() else []
        self.accounting.unlink(missing_ok=True)
        kinds, i = [], 0
        while i < len(lines):
            if i + 1 < len(lines) and lines[i + 1].startswith("python"):
                kinds.append("python")
                i += 2
            else:
                kinds.append("server" if lines[i].startswith("launcher") else "python")
                i += 1
        return kinds

    def runs(self) -> int:
        runs = self.root / "runs"
        return runs.read_text().count("run") if runs.exists() else 0

    def server_up(self, timeout: float = 20.0) -> int:
        """The server's pid, once it accepts."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            pid = server_pid(self.root)
            if pid and (self.root / self.socket).exists():
                return pid
            time.sleep(0.05)
        raise AssertionError(f"no step server came up; log: {self.log()}")

    def log(self) -> str:
        log = self.root / f"{self.socket}.log"
        return log.read_text() if log.exists() else ""


def server_pid(root: Path) -> int:
    pids = step_server_pids(root)
    return pids[0] if pids else 0


@pytest.fixture
def build() -> Iterator[Dir]:
    """A build directory another user can reach (pytest's tmp dirs are 0700), its server killed after."""
    root = Path(tempfile.mkdtemp(prefix="gn-step-")).resolve()
    os.chmod(root, 0o711)
    try:
        yield Dir(root)
    finally:
        for pid in step_server_pids(root):
            os.kill(pid, signal.SIGKILL)
        shutil.rmtree(root, ignore_errors=True)


def test_the_first_step_starts_the_server_and_the_next_ones_are_served(build: Dir) -> None:
    for name in ("a.o", "b.o"):
        (build.root / name).write_text(name.upper())
    first = build.step("a.o")
    assert first.returncode == 0, first.stderr
    build.server_up()
    assert build.step("b.o").returncode == 0  # a miss: the launcher runs the compiler
    assert build.step("b.o", "tool").returncode == 0  # the same job in another link: a hit
    assert build.step("a.o", "tool").returncode == 0
    assert build.served() == ["python", "server", "server", "server"]
    assert build.runs() == 2
    assert (build.root / "tool/b.o.native.o").read_text() == "native(B.O)"
    stats = read_stats(build.root / "gn-thinlto/backend.log")
    assert (stats.hits, stats.misses) == (2, 2)
    assert "serving" in build.log()


def _fnv1a(args: list[str]) -> int:
    h = 2166136261
    for byte in b"".join(a.encode() + b"\0" for a in args):
        h = ((h ^ byte) * 16777619) & 0xFFFFFFFF
    return h


def test_several_servers_share_the_edges_each_by_the_launchers_hash(build: Dir) -> None:
    """[scale] `step_servers: 3`: the launcher sends each edge to the server its command hashes to; the first edge
    for a server (none answers) runs the Python step, which starts that very server; afterwards every edge is
    served, by three processes, with the cache shared between them."""
    chosen: dict[str, str] = {}  # four edges for each server (the hash covers the build's temporary paths)
    for name in (f"m{i}.o" for i in range(200)):
        sock = server_socket(build.socket, _fnv1a(build.command(name, servers=3)[4:]) % 3)
        if list(chosen.values()).count(sock) < 4:
            chosen[name] = sock
    names = sorted(chosen)
    for name in names:
        (build.root / name).write_text(name.upper())
    assert len(names) == 12 and len(set(chosen.values())) == 3
    for name in names:
        assert build.step(name, servers=3).returncode == 0
        wait_for_socket = time.monotonic() + 20
        while not (build.root / chosen[name]).exists():
            assert time.monotonic() < wait_for_socket, (name, chosen[name], build.log())
            time.sleep(0.05)
    build.served()
    for name in names:  # now every edge finds its server: hits, served by all three
        assert build.step(name, "tool", servers=3).returncode == 0
    assert build.served() == ["server"] * len(names)
    assert len(step_server_pids(build.root)) == 3 and build.runs() == len(names)
    assert all((build.root / f"tool/{n}.native.o").read_text() == f"native({n.upper()})" for n in names)
    assert all(serves(sock, build.socket) for sock in chosen.values())
    assert not serves(build.socket[: -len(".sock")] + ".01.sock", build.socket)
    assert not serves("gn-thinlto/other.1.sock", build.socket)
    assert not serves(build.socket[: -len(".sock")] + ".\u00b2.sock", build.socket)  # a digit, not an ASCII one


def test_an_unchanged_output_keeps_its_mtime(build: Dir) -> None:
    (build.root / "a.o").write_text("A")
    assert build.step("a.o").returncode == 0
    build.server_up()
    out = build.root / "app/a.o.native.o"
    os.utime(out, (1, 1))
    assert build.step("a.o").returncode == 0 and build.served()[-1] == "server"
    assert out.stat().st_mtime == 1


def test_a_failing_compiler_fails_the_step_with_its_message_and_stores_nothing(build: Dir) -> None:
    (build.root / "a.o").write_text("A")
    (build.root / "bad.o").write_text("FAIL")
    assert build.step("a.o").returncode == 0
    build.server_up()
    failed = build.step("bad.o")
    assert failed.returncode == 3 and "fake-clang: error: bad bitcode bad.o" in failed.stderr
    assert build.served()[-1] == "server"
    assert not (build.root / "app/bad.o.native.o").exists()
    assert not [p for p in (build.root / "app").iterdir() if p.name.endswith(".tmp")]
    assert read_stats(build.root / "gn-thinlto/backend.log").misses == 1


def test_other_settings_and_bad_steps_are_left_to_the_python_step(build: Dir) -> None:
    (build.root / "a.o").write_text("A")
    assert build.step("a.o").returncode == 0
    build.server_up()
    other = build.step("a.o", "tool", cache="other-cache")  # a rule the server was not started for
    assert other.returncode == 0 and build.served()[-1] == "python"
    assert (build.root / "other-cache").is_dir()
    missing = build.step("nonexistent.o")  # the server says what the step would say
    assert missing.returncode == 2 and "gn-thinlto: error: backend:" in missing.stderr
    assert missing.stderr.count("\n") == 1


def test_a_server_killed_mid_step_leaves_the_step_to_the_launcher(build: Dir) -> None:
    (build.root / "a.o").write_text("A")
    (build.root / "slow.o").write_text("SLOW")
    assert build.step("a.o").returncode == 0
    pid = build.server_up()
    env = {**os.environ, "GN_THINLTO_STEP_ACCOUNTING": str(build.accounting)}
    step = subprocess.Popen(build.command("slow.o"), cwd=build.root, env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 10
    while build.runs() < 2 and time.monotonic() < deadline:
        time.sleep(0.02)
    os.kill(pid, signal.SIGKILL)
    _, err = step.communicate(timeout=60)
    assert step.returncode == 0, err
    assert (build.root / "app/slow.o.native.o").read_text() == "native(SLOW)"
    assert build.runs() == 3  # started by the server's launcher, run again by the Python step
    # and the next step starts a new server (the dead one's socket is taken over)
    assert build.step("a.o", "tool").returncode == 0
    assert build.server_up() != pid


def test_the_server_holds_none_of_the_steps_output_pipes(build: Dir) -> None:
    """ninja waits for a step's stdout and stderr to close: a server that kept them would hang the build."""
    (build.root / "a.o").write_text("A")
    start = time.monotonic()
    first = build.step("a.o")  # capture_output: returns only once both pipes are closed
    assert first.returncode == 0 and time.monotonic() - start < 20
    build.server_up()
    fds = [os.readlink(f) for f in Path(f"/proc/{server_pid(build.root)}/fd").iterdir()]
    assert not [f for f in fds if f.startswith("pipe:")], fds


def test_the_server_leaves_when_its_socket_is_removed_or_it_is_idle(build: Dir) -> None:
    (build.root / "a.o").write_text("A")
    assert build.step("a.o").returncode == 0
    pid = build.server_up()
    (build.root / build.socket).unlink()
    deadline = time.monotonic() + 10
    while server_pid(build.root) == pid and time.monotonic() < deadline:
        time.sleep(0.05)
    assert server_pid(build.root) != pid and "the socket was removed" in build.log()
    with open(build.root / f"{build.socket}.log", "a") as log:
        idle = subprocess.Popen([sys.executable, "-S", f"{STEP_DIR}/step_server.py", "--socket", build.socket,
                                 "--idle", "0.5", *build.python[3:]], cwd=build.root, stderr=log)
        assert idle.wait(timeout=20) == 0
    assert "idle for 0.5 s" in build.log()
    lock = os.open(build.root / f"{build.socket}.lock", os.O_RDWR)
    try:
        fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)  # released
    finally:
        os.close(lock)


@pytest.mark.skipif(os.geteuid() != 0, reason="plays another local user: needs root (CI runs as root)")
def test_another_user_is_not_served(build: Dir) -> None:
    (build.root / "a.o").write_text("A")
    assert build.step("a.o").returncode == 0
    build.server_up()
    sock = build.root / build.socket
    assert stat.S_IMODE(sock.stat().st_mode) == 0o600
    os.chmod(sock, 0o666)  # even reachable, the server talks to its own user only
    os.chmod(build.root / "gn-thinlto", 0o755)
    launcher = build.root / LAUNCHER
    probe = subprocess.run([str(launcher), build.socket, "/bin/echo", "fell back"], cwd=build.root,
                           capture_output=True, text=True, user=65534, group=65534, timeout=30)
    assert probe.stdout == "fell back\n"
    deadline = time.monotonic() + 5
    while "closed a connection from uid 65534" not in build.log() and time.monotonic() < deadline:
        time.sleep(0.05)
    assert "closed a connection from uid 65534" in build.log()


def test_a_compiler_named_without_a_path_is_served_only_where_both_paths_find_it(build: Dir) -> None:
    """The server resolves the compiler on its own PATH (the cache key names it), the launcher runs it on the
    edge's: the step is served only when the launcher's PATH (it sends its environment) finds the same file as
    the server's; otherwise the Python step runs it."""
    ours, other = build.root / "bin", build.root / "other-bin"
    for d in (ours, other):
        d.mkdir()
    os.symlink(build.compiler, ours / "fake-clang")
    shutil.copy(build.compiler, other / "fake-clang")  # another file, the same behaviour

    def step(bitcode: str, bin_dir: Path) -> None:
        (build.root / bitcode).write_text(bitcode.upper())
        command = build.command(bitcode)
        command[command.index(str(build.compiler))] = "fake-clang"
        env = {**os.environ, "PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}",
               "GN_THINLTO_STEP_ACCOUNTING": str(build.accounting)}
        assert subprocess.run(command, cwd=build.root, env=env, timeout=60).returncode == 0

    step("a.o", ours)  # starts the server, with this PATH
    build.server_up()
    step("b.o", ours)
    step("c.o", other)
    assert build.served() == ["python", "server", "python"]
    assert (build.root / "app/c.o.native.o").read_text() == "native(C.O)"


def test_a_moved_build_directory_is_still_served(build: Dir) -> None:
    (build.root / "a.o").write_text("A")
    assert build.step("a.o").returncode == 0
    pid = build.server_up()
    moved = build.root.with_name(build.root.name + "-moved")
    build.root.rename(moved)
    try:
        build.root = moved
        build.accounting, build.compiler = moved / "accounting.txt", moved / "fake-clang"
        build.served()
        (moved / "b.o").write_text("B")
        assert build.step("b.o").returncode == 0 and build.served() == ["server"]
        assert server_pid(moved) == pid
    finally:
        os.kill(pid, signal.SIGKILL)
        shutil.rmtree(moved, ignore_errors=True)


def test_a_stopped_server_does_not_stop_the_build(build: Dir) -> None:
    """A server that takes no request (stopped, wedged) costs each edge the launcher's wait for the
    request's acknowledgement (10 s), then the Python step runs it."""
    (build.root / "a.o").write_text("A")
    assert build.step("a.o").returncode == 0
    pid = build.server_up()
    os.kill(pid, signal.SIGSTOP)
    try:
        build.served()
        (build.root / "b.o").write_text("B")
        assert build.step("b.o").returncode == 0 and build.served() == ["python"]
        assert (build.root / "app/b.o.native.o").read_text() == "native(B)"
    finally:
        os.kill(pid, signal.SIGCONT)


class StandInProxy:
    """Stands in for goma-ext's proxy (unit scope: the cluster tests run the real one) on the socket the thin
    client looks for under STATE: each `run` request is kept, its output written as a result's would be, and
    answered with a message on stderr."""

    def __init__(self, state: Path, cwd: Path, endpoint: str) -> None:
        from goma_ext.remote import proxy_protocol as wire

        self.cwd, self.requests = cwd, []
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.bind(wire.paths(str(state), wire.endpoint_key(str(cwd), endpoint, "", "", "", ""))["sock"])
        self.sock.listen(8)
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self) -> None:
        import base64

        from goma_ext.remote import proxy_protocol as wire

        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            with conn:
                msg = wire.receive(conn, 1 << 20)
                self.requests.append(msg)
                argv = msg["argv"]
                (self.cwd / argv[argv.index("-o") + 1]).write_text(f"remote({len(self.requests)})")
                wire.send(conn, {"type": "result", "exit_code": 0, "stdout": "", "mode": "cache_hit",
                                 "stderr": base64.b64encode(b"stand-in proxy: done\n").decode(),
                                 "bytes_uploaded": 0, "input_bytes": 0, "phases": {}})


def test_a_remote_step_runs_the_thin_client_in_the_server_with_the_launchers_environment(build: Dir) -> None:
    """[lean] With goma-ext's thin client as the step's launcher, the server calls it in its own process: no
    interpreter starts for the action, and the proxy it reaches is the one the launcher's environment names
    (not the environment the server was started with)."""
    from goma_ext.remote import identity_cache
    from goma_ext.remote.names import COMPILER_CACHE
    from tests.conftest import REPO

    endpoint = "grpc://127.0.0.1:1"
    compiler = os.path.realpath(build.compiler)
    identity_cache.store(str(build.root / COMPILER_CACHE),
                         {identity_cache.key(compiler): {"version": "fake-clang 1", "sha256": "0" * 64}})
    states = [Path(tempfile.mkdtemp(prefix="gxp-")) for _ in range(2)]
    proxies = [StandInProxy(state, build.root, endpoint) for state in states]
    thin = [sys.executable, "-S", str(REPO / "goma_ext/remote/thin_client.py"), "--remote", endpoint,
            "--exec-root", "."]
    try:
        for i, name in enumerate(("a.o", "b.o")):
            (build.root / name).write_text(name.upper())
            command = build.command(name)
            split = command.index("--")
            command[split:split] = ["--launcher", "--", *thin]
            env = {k: v for k, v in os.environ.items() if not k.startswith("GOMA_EXT_")}  # e.g. a session's token
            env.update(GN_THINLTO_STEP_ACCOUNTING=str(build.accounting), GOMA_EXT_PROXY_DIR=str(states[i]))
            step = subprocess.run(command, cwd=build.root, capture_output=True, text=True, env=env, timeout=60)
            assert step.returncode == 0 and "stand-in proxy: done" in step.stderr, step.stderr
            if i == 0:
                build.server_up()
        last = build.accounting.read_text().splitlines()[-1].split()
        assert last[0] == "launcher" and last[2] == "0"  # the served step ran no command through the launcher
        assert build.served() == ["python", "server"]
        assert [len(p.requests) for p in proxies] == [1, 1] and build.runs() == 0
        assert (build.root / "app/b.o.native.o").read_text() == "remote(1)"
    finally:
        for proxy, state in zip(proxies, states, strict=True):
            proxy.sock.close()
            for pid_file in state.glob("proxy-*.pid"):  # a real proxy the full client started if this failed
                with contextlib.suppress(ValueError, OSError):
                    os.kill(int(pid_file.read_text().split()[0]), signal.SIGTERM)
            shutil.rmtree(state, ignore_errors=True)


def test_one_server_ignores_a_choice_inherited_from_outside(build: Dir) -> None:
    """A GN_THINLTO_STEP_SERVER left in the environment (an outer build with several servers) does not make the
    Python step start a server the launcher of a one-server rule never asks."""
    (build.root / "a.o").write_text("A")
    inherited = server_socket(build.socket, 2)
    env = {**os.environ, "GN_THINLTO_STEP_SERVER": inherited}
    run = subprocess.run(build.command("a.o"), cwd=build.root, capture_output=True, text=True, env=env, timeout=60)
    assert run.returncode == 0, run.stderr
    build.server_up()
    assert not (build.root / inherited).exists()
