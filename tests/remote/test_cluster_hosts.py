"""[hermetic] A cluster across hosts, on one machine: four network namespaces this test makes (server, two worker
hosts, a client) joined by veth pairs to the server, with addresses only inside them (10.231.N.0/24). The server
host runs `goma-ext cluster start --role server` (PostgreSQL, redis, BuildGrid over TLS on its veth addresses, a
certificate with IP SANs made here with openssl); each worker host `--role worker --server grpcs://…`; the client
builds two of the example's binaries remotely (what is tested is the topology and the restarts, not the
example, which test_example_remote.py builds whole). Mid-way the server role is stopped and started again (the
workers reconnect by themselves); after a second restart the build directory, its backends forgotten (natives,
local cache, stats), is served entirely from the persisted action cache.

Everything (processes, namespaces with their veths, temp dirs, runner users) is removed in teardown, also when a
step fails. Needs root (CI runs as root)."""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator, Sequence
from contextlib import ExitStack
from dataclasses import dataclass
from pathlib import Path

import pytest

from goma_ext.cluster import manager, procs
from goma_ext.remote import stats
from tests.builds import REPO, Build, copy_without_backends, forget_backends
from tests.remote.conftest import TEST_POLL_S
from tests.system_users import temporary_user

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(os.geteuid() != 0, reason="needs root: it makes network namespaces, veth pairs and users"),
]

NET = "10.231"  # 10.231.N.1 = the server's end of veth N, 10.231.N.2 = the peer's (worker 1, worker 2, client)
PEERS = ("w1", "w2", "cli")
INSTANCE = "gn-thinlto/hosts"
JOBS = "6"
FIRST_TARGETS = ("crc_tool",)  # built before the first server restart (13 backends)
# after it: new backends for the reconnected workers (6 backend edges, 5 of them compiled: one has the same key as
# one of crc_tool's; counted in a local build of the example; archiver would add 44, its own and libcodec.so's)
LATER_TARGETS = ("matrix_tool",)
# worker processes per host: each one reads the compiler (~260 MB of inputs) for its first backend; two hosts
# are what the test spreads the work over
WORKERS_PER_HOST = "1"
COMPILERS = ("clang-19", "clang++-19", "/usr/lib/llvm-19/bin/clang", "/usr/lib/llvm-19/bin/clang++",
             "/usr/lib/llvm-22/bin/clang")



@dataclass(frozen=True)
class WorkerFs:
    """What a worker host's file system holds: the machine's LLVM or none (tmpfs over /usr/lib/llvm-{19,22},
    /dev/null over libLLVM*/libclang*), and whether its sandboxes get a `--base-root` (a minimal / made by
    `goma-ext worker base-root` from libc6, libgcc-s1 and libstdc++6: no LLVM either). Backends carry their
    compiler as inputs (toolchain: inputs, the default), so such workers run them all."""

    hide_llvm: bool
    base_root: bool = False


WORKER_FS = [pytest.param(WorkerFs(hide_llvm=True, base_root=True), id="no-llvm")]
HIDDEN_DIRS = ("/usr/lib/llvm-19", "/usr/lib/llvm-22")
HIDDEN_LIB_GLOBS = ("/usr/lib/x86_64-linux-gnu/libLLVM*", "/usr/lib/x86_64-linux-gnu/libclang*")


def _run(argv: Sequence[str], timeout: float = 300, **kw: object) -> subprocess.CompletedProcess[str]:
    proc = subprocess.run(list(argv), capture_output=True, text=True, timeout=timeout, **kw)  # type: ignore[call-overload]
    output = (proc.stdout + proc.stderr)[-3000:]
    assert proc.returncode == 0, f"{' '.join(argv)[:300]} exited {proc.returncode}:\n{output}"
    return proc


@dataclass(frozen=True)
class Topology:
    """The namespaces' names and what runs where."""

    tag: str
    base: Path  # 0711: the runner users reach the worker hosts' sandboxes under it

    def ns(self, who: str) -> str:
        return f"gxt-{self.tag}-{who}"

    def exec(self, who: str) -> list[str]:
        return ["ip", "netns", "exec", self.ns(who)]

    @staticmethod
    def server_ip(peer: str) -> str:
        return f"{NET}.{PEERS.index(peer) + 1}.1"

    def state(self, who: str) -> Path:
        return self.base / who / "state"


def _make_netns(t: Topology, stack: ExitStack) -> None:
    """The four namespaces (loopback up in each) and one veth pair from the server to each peer. The veths are
    created straight inside their namespaces: nothing is added to the machine's own network namespace."""
    for who in ("srv", *PEERS):
        _run(["ip", "netns", "add", t.ns(who)])
        stack.callback(_remove_netns, t.ns(who))
        _run(["ip", "-n", t.ns(who), "link", "set", "lo", "up"])
    for i, peer in enumerate(PEERS, 1):
        here, there = f"gx{t.tag}s{i}", f"gx{t.tag}p{i}"
        _run(["ip", "link", "add", "name", here, "netns", t.ns("srv"), "type", "veth",
              "peer", "name", there, "netns", t.ns(peer)])
        for ns, dev, addr in ((t.ns("srv"), here, f"{NET}.{i}.1/24"), (t.ns(peer), there, f"{NET}.{i}.2/24")):
            _run(["ip", "-n", ns, "addr", "add", addr, "dev", dev])
            _run(["ip", "-n", ns, "link", "set", dev, "up"])


def _remove_netns(name: str) -> None:
    """Kill whatever still runs in the namespace, then delete it (its veth ends go with it)."""
    pids = subprocess.run(["ip", "netns", "pids", name], capture_output=True, text=True).stdout.split()
    for pid in pids:
        try:
            os.kill(int(pid), signal.SIGKILL)
        except (ProcessLookupError, ValueError):
            pass
    subprocess.run(["ip", "netns", "del", name], capture_output=True, check=False)


def _make_cert(d: Path) -> tuple[Path, Path, Path]:
    """A CA and a server certificate it signed for the server's veth addresses (IP SANs), as an operator makes
    them: `goma-ext cluster pki`."""
    names = [a for p in PEERS for a in ("--server-name", Topology.server_ip(p))]
    _run([sys.executable, "-m", "goma_ext.cli", "cluster", "pki", str(d), *names], cwd=REPO)
    return d / "ca.crt", d / "server.crt", d / "server.key"


def _goma_ext(t: Topology, who: str, *argv: str, prefix: Sequence[str] = ()) -> subprocess.CompletedProcess[str]:
    return _run([*t.exec(who), *prefix, sys.executable, "-m", "goma_ext.cli", *argv], cwd=REPO)


def _server_start(t: Topology, ca: Path, cert: Path, key: Path, venv: Path) -> manager.ClusterState:
    listen = [a for p in PEERS for a in ("--listen", Topology.server_ip(p))]
    _goma_ext(t, "srv", "cluster", "start", "--role", "server", "--state", str(t.state("srv")), "--tls-cert",
              str(cert), "--tls-key", str(key), "--tls-ca", str(ca), "--server-venv", str(venv), "--instance",
              INSTANCE, "--cas-max-size", "20G", "--ac-max-memory", "256M", "--poll-interval", str(TEST_POLL_S),
              *listen)
    st = manager.load(t.state("srv"))
    assert st is not None and st.tls_port
    assert all(procs.alive(pid) for pid in (st.server_pid, st.redis_pid, st.cleanup_pid)), st
    return st


def _hide_llvm_prefix() -> list[str]:
    """unshare --mount + a shell that hides LLVM in the new mount namespace, then execs the command."""
    mounts = [f"mount -t tmpfs -o size=1m,mode=755 tmpfs {d}" for d in HIDDEN_DIRS]
    mounts += [f'for f in {g}; do if [ -e "$f" ]; then mount --bind /dev/null "$f"; fi; done' for g in HIDDEN_LIB_GLOBS]
    script = "set -e; " + "; ".join(mounts) + '; exec "$@"'
    return ["unshare", "--mount", "--propagation", "private", "sh", "-c", script, "sh"]


def _worker_start(t: Topology, peer: str, ca: Path, port: int, runner: str, fs: WorkerFs) -> None:
    token = t.base / peer / "worker.token"  # copied from the server host, as an operator would
    shutil.copyfile(t.state("srv") / "auth" / "worker.token", token)
    os.chmod(token, 0o600)
    base_root = t.base / "base-root"
    if fs.base_root and not base_root.exists():
        _run([sys.executable, "-m", "goma_ext.cli", "worker", "base-root", str(base_root)], cwd=REPO)
    extra = [f"--worker-arg=--base-root={base_root}"] if fs.base_root else []
    # A worker with a base root has no compilers of its own (it runs the ones actions carry).
    compilers = [] if fs.base_root else [a for c in COMPILERS for a in ("--compiler", c)]
    _goma_ext(t, peer, "cluster", "start", "--role", "worker", "--state", str(t.state(peer)), "--server",
              f"grpcs://{Topology.server_ip(peer)}:{port}", "--tls-ca", str(ca), "--token-file", str(token),
              "--instance", INSTANCE, "--workers", WORKERS_PER_HOST, "--bot-id", peer, "--run-as", runner, *compilers,
              "--worker-arg=--max-procs=256", "--worker-arg=--cpu-time=120", *extra,
              prefix=_hide_llvm_prefix() if fs.hide_llvm else ())


def _llvm_visible_to_worker(t: Topology, peer: str) -> bool:
    st = manager.load(t.state(peer))
    assert st is not None and st.worker_pid
    probe = subprocess.run(["nsenter", f"--mount=/proc/{st.worker_pid}/ns/mnt", "test", "-e",
                            "/usr/lib/llvm-19/bin/clang"], capture_output=True)
    return probe.returncode == 0


def _worker_log(t: Topology, peer: str) -> str:
    log = t.state(peer) / "logs" / "workers.log"
    return log.read_text(errors="replace") if log.exists() else ""


def _leases(t: Topology, peer: str) -> int:
    return len(re.findall(r"bot \S+: lease ", _worker_log(t, peer)))


def _sessions(t: Topology, peer: str) -> int:
    return len(re.findall(r"bot \S+: session ", _worker_log(t, peer)))


@dataclass(frozen=True)
class Client:
    t: Topology
    endpoint: str
    env: dict[str, str]

    def gen(self, b: Build) -> None:
        _run([sys.executable, "-m", "gn_thinlto.cli", "gen", str(b.out), "--root", str(b.root), "--remote",
              self.endpoint], env=self.env, cwd=REPO)

    def ninja(self, out: Path, *targets: str) -> str:
        proc = _run([*self.t.exec("cli"), "ninja", "-C", str(out), "-j", JOBS, *targets], timeout=1500,
                    env=self.env)
        assert "goma-ext: warning" not in proc.stdout, proc.stdout[-3000:]
        return proc.stdout


@pytest.fixture(params=WORKER_FS)
def worker_fs(request: pytest.FixtureRequest) -> WorkerFs:
    fs: WorkerFs = request.param
    return fs


@pytest.fixture()
def topology() -> Iterator[Topology]:
    tag = str(os.getpid() % 100000)
    with ExitStack() as stack:
        base = Path(tempfile.mkdtemp(prefix=f"gxt-{tag}-"))
        stack.callback(shutil.rmtree, base, True)
        os.chmod(base, 0o711)
        t = Topology(tag, base)
        for who in ("srv", *PEERS):
            (base / who).mkdir(mode=0o711)
        _make_netns(t, stack)  # removed last: the callbacks below stop what runs in the namespaces first
        stack.callback(manager.destroy, t.state("srv"))
        for peer in ("w1", "w2"):
            stack.callback(manager.destroy, t.state(peer))
        yield t


def _wait_reconnected(t: Topology, before: dict[str, int], timeout_s: float = 120) -> None:
    deadline = time.monotonic() + timeout_s
    while any(_sessions(t, p) <= before[p] for p in before):
        assert time.monotonic() < deadline, {p: _worker_log(t, p)[-1500:] for p in before}
        time.sleep(0.5)


def _restart_server(t: Topology, ca: Path, cert: Path, key: Path, venv: Path) -> None:
    """`cluster stop --role server`, then `start --role server` on the same state; the workers reconnect."""
    before = {p: _sessions(t, p) for p in ("w1", "w2")}
    _goma_ext(t, "srv", "cluster", "stop", "--role", "server", "--state", str(t.state("srv")))
    st = manager.load(t.state("srv"))
    assert st is not None and st.server_pid is None and st.redis_pid is None
    _server_start(t, ca, cert, key, venv)
    _wait_reconnected(t, before)


def test_a_cluster_across_hosts_survives_server_restarts_and_serves_a_fresh_build_from_its_cache(
    topology: Topology, worker_fs: WorkerFs, salt: str, example_tree: Build
) -> None:
    t = topology
    ca, cert, key = _make_cert(t.base / "srv")
    venv = Path(os.environ.get("GOMA_EXT_SERVER_VENV", REPO / ".state" / "server-venv"))
    st = _server_start(t, ca, cert, key, venv)
    assert st.listen == tuple(Topology.server_ip(p) for p in PEERS) and st.cas_max_size == 20 << 30
    with ExitStack() as users:
        for peer in ("w1", "w2"):
            runner = users.enter_context(temporary_user(f"gx{peer}"))
            users.callback(manager.stop, t.state(peer))  # before its runner user goes
            _worker_start(t, peer, ca, st.tls_port or 0, runner.name, worker_fs)
            assert _llvm_visible_to_worker(t, peer) is not worker_fs.hide_llvm  # checked inside its mount namespace
        _build_restart_and_rebuild(t, ca, cert, key, venv, st, salt, example_tree)


def _build_restart_and_rebuild(t: Topology, ca: Path, cert: Path, key: Path, venv: Path, st: manager.ClusterState,
                               salt: str, example_tree: Build) -> None:
    """The client builds a copy of the session's local build of the example, its backends forgotten: the compiles
    are local work the cluster has nothing to do with."""
    proxy_dir = tempfile.mkdtemp(prefix="gxt-proxy-")
    env = {**os.environ, "GOMA_EXT_CACHE_SALT": salt, "GOMA_EXT_REMOTE_INSTANCE": INSTANCE,
           "GOMA_EXT_REMOTE_CA_FILE": str(ca), "GOMA_EXT_REMOTE_TOKEN_FILE": str(t.state("srv") / "auth" /
                                                                                   "client.token"),
           "GOMA_EXT_PROXY_DIR": proxy_dir}
    client = Client(t, f"grpcs://{Topology.server_ip('cli')}:{st.tls_port}", env)
    tree = copy_without_backends(example_tree, t.base / "cli")
    out = tree.out
    try:
        client.gen(tree)
        client.ninja(out, *FIRST_TARGETS)
        first = stats.report(out)
        assert first["remote_executions"] > 10 and first["remote_executions"] == first["runs"], first
        _restart_server(t, ca, cert, key, venv)
        client.ninja(out, *FIRST_TARGETS, *LATER_TARGETS)
        whole = stats.report(out)
        assert whole["runs"] > first["runs"] and whole["remote_executions"] == whole["runs"], whole
        per_host = {p: _leases(t, p) for p in ("w1", "w2")}
        assert all(n > 0 for n in per_host.values()) and sum(per_host.values()) >= whole["remote_executions"], per_host

        _restart_server(t, ca, cert, key, venv)
        forget_backends(out)
        client.ninja(out, *FIRST_TARGETS, *LATER_TARGETS)
        fresh = stats.report(out)
        assert fresh["runs"] == whole["runs"] and fresh["cache_hits"] == fresh["runs"], fresh
        assert fresh["remote_executions"] == 0 and fresh["bytes_uploaded"] == 0, fresh
        assert {p: _leases(t, p) for p in ("w1", "w2")} == per_host  # nothing executed for the fresh build
        print(json.dumps({"first_part": first, "whole": whole, "fresh": fresh, "leases_per_worker_host": per_host}))
    finally:
        subprocess.run([*t.exec("cli"), sys.executable, "-m", "goma_ext.cli", "proxy", "stop"], capture_output=True,
                       check=False, env=env, cwd=REPO)
        shutil.rmtree(proxy_dir, ignore_errors=True)
