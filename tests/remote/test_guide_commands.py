"""[shape] Every command the user guide shows runs, in page order, as a user following the page would run it.

The commands come from the pages themselves (tests/docs_commands.py, the extractor test_docs parses them with).
Each page gets a directory to run in and the values of its placeholders: a copy of the session's build of the
example for `out/Release` and OUT (for a remote build, with one target's backends forgotten: REMOTE_TARGET), the
session cluster for HOST:PORT, files made here for `a.o` and TOKEN. The replacements are whole words, and nothing
else of a command changes. A command that cannot run on one machine under test is listed in NOT_HERE with the reason
and the test that runs its equivalent; a command that is neither run nor listed, or a listing that matches no
command, fails the test: a page cannot gain an untested command.
"""

from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from goma_ext.cluster import manager, tokens
from goma_ext.cluster.roles import Role
from goma_ext.worker.bots import SESSION_FILE
from tests.builds import REPO, Build, copy_example_tree, forget_target_backends
from tests.docs_commands import GUIDE, page_commands
from tests.remote.conftest import INSTANCE, TEST_POLL_S, Cluster, make_cert

pytestmark = pytest.mark.slow
CA_ENV = "GOMA_EXT_REMOTE_CA_FILE"

# page -> {a piece of the command line: why it does not run here, and what runs its equivalent}
NOT_HERE: dict[str, dict[str, str]] = {
    "install.md": {
        "./dev ": "the checkout's set-up script: CI's .ci/run runs `./dev test`, the fresh-machine check "
                  "(.ci/fresh-check) `./dev example` and `./dev test` on a new Debian",
        "pip install gn-thinlto": "needs the package index: tests/integration/test_installed_wheel.py installs "
                                  "the wheel `pip install .` builds into a new venv",
        "pip install .": "tests/integration/test_installed_wheel.py builds and installs the wheel into a new venv",
    },
    "local-builds.md": {
        "./dev example": "the checkout's set-up script (see install.md); the next line runs the command it wraps",
    },
    "cluster.md": {
        "goma-ext cluster ": "needs hosts at 10.0.0.5 and beyond: tests/remote/test_cluster_hosts.py runs these "
                             "commands between network namespaces, with their addresses",
        "gn-thinlto gen out/Release --remote grpcs://10.0.0.5:8981": "the client of that cluster: "
                                                                     "tests/remote/test_cluster_hosts.py",
    },
    "dtlto.md": {
        "cmake -G Ninja": "configures a CMake project: tests/integration/test_dtlto_cmake.py builds ninja and "
                          "libdeflate with these flags",
        "clang-22 … ": "an elided command line: the full one above it runs",
        "app.7233.dist-file.json": "a job file lld writes and deletes during a link: "
                                   "tests/integration/test_dtlto.py runs the distributor on lld's own",
        "thin_lto_distributor=": "the whole example compiled again with clang 22: "
                                 "tests/integration/test_dtlto_gn.py builds it with these args",
    },
}


@dataclass
class Page:
    """Where a page's commands run (CWD, or the first of PLACES whose piece the command holds), their environment,
    and the page's placeholders' values (whole words)."""

    name: str
    cwd: Path
    env: dict[str, str]
    values: dict[str, str] = field(default_factory=dict)
    places: dict[str, Path] = field(default_factory=dict)
    daemons: dict[str, Callable[[float], bool]] = field(default_factory=dict)  # a piece -> "up since T"

    def commands(self) -> list[tuple[int, str]]:
        found = page_commands(GUIDE / self.name)
        excused = NOT_HERE.get(self.name, {})
        stale = [piece for piece in excused if not any(piece in text for _, text in found)]
        assert not stale, f"{self.name}: NOT_HERE lists commands the page no longer shows: {stale}"
        return [(line, text) for line, text in found if not any(piece in text for piece in excused)]

    def fill(self, text: str) -> str:
        for name, value in sorted(self.values.items(), key=lambda kv: -len(kv[0])):
            # not inside a longer word or path (x/out/Release), but right after a scheme's // (grpcs://HOST:PORT)
            text = re.sub(rf"(?<![\w.-])(?<![^/]/){re.escape(name)}(?![\w-])", value.replace("\\", "\\\\"), text)
        return text

    def run(self) -> list[str]:
        """Every command of the page in order; the failures, one line each."""
        failed = []
        for line, text in self.commands():
            command = self.fill(text)
            cwd = next((d for piece, d in self.places.items() if piece in text), self.cwd)
            up = next((check for piece, check in self.daemons.items() if piece in text), None)
            # a CA is for a grpcs:// endpoint (the configuration refuses one beside grpc://, as it would a user's)
            env = self.env if "grpcs://" in command else {k: v for k, v in self.env.items() if k != CA_ENV}
            error = _daemon(command, cwd, env, up) if up else _once(command, cwd, env)
            if error:
                failed.append(f"docs/guide/{self.name}:{line}: `{command}` in {cwd}: {error}")
        return failed


def _once(command: str, cwd: Path, env: Mapping[str, str]) -> str | None:
    proc = subprocess.run(["bash", "-euo", "pipefail", "-c", command], cwd=cwd, env=dict(env), capture_output=True,
                          text=True, timeout=1200)
    if proc.returncode == 0:
        return None
    return f"exit {proc.returncode}: {(proc.stderr or proc.stdout).strip()[-800:]}"


def _daemon(command: str, cwd: Path, env: Mapping[str, str], up: Callable[[float], bool],
            timeout_s: float = 120) -> str | None:
    """A long-running command: it must come up (UP since it started), then it is stopped with SIGTERM, as a
    service manager would."""
    started = time.time()
    proc = subprocess.Popen(["bash", "-c", f"exec {command}"], cwd=cwd, env=dict(env), stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True, start_new_session=True)
    try:
        deadline = time.monotonic() + timeout_s
        while not up(started):
            if proc.poll() is not None or time.monotonic() > deadline:
                return f"did not come up (exit {proc.poll()})"
            time.sleep(0.2)
        return None
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGTERM)
        try:
            out = proc.communicate(timeout=60)[0]
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            out = proc.communicate()[0]
        if proc.returncode not in (0, -signal.SIGTERM, 128 + signal.SIGTERM):
            print(out[-2000:])


def _sessions(work_dir: Path, count: int) -> Callable[[float], bool]:
    """COUNT workers in WORK_DIR have a session (each writes its file once it has one) since a time."""
    def up(since: float) -> bool:
        return sum(1 for f in work_dir.glob(f"*/{SESSION_FILE}") if f.stat().st_mtime >= since) >= count
    return up


def _host_port(endpoint: str) -> str:
    return endpoint.split("://", 1)[1]


def _server_venv() -> Path:
    return Path(os.environ.get("GOMA_EXT_SERVER_VENV", REPO / ".state" / "server-venv"))


def _server_only(base: Path) -> tuple[manager.ClusterState, Path]:
    """A server host (PostgreSQL, redis, BuildGrid over TLS on 127.0.0.1) for workers.md's workers to join, and
    the certificate they verify it with."""
    base.mkdir()
    cert, key = make_cert(base)
    st = manager.start(manager.ClusterSpec(state=base / "state", role=Role.SERVER, tls_cert=cert, tls_key=key,
                                           server_venv=_server_venv(), poll_s=TEST_POLL_S))
    return st, cert


def _thin_pair(d: Path) -> None:
    """a.o (ThinLTO bitcode) and a.o.thinlto.bc (its index from lld's thin link) in D: what remote.md's backend
    command line compiles."""
    (d / "a.cc").write_text("int f(int x) { return x * 3; }\nint main(int argc, char**) { return f(argc); }\n")
    subprocess.run(["clang++-19", "-flto=thin", "-O2", "-c", "a.cc", "-o", "a.o"], cwd=d, check=True)
    subprocess.run(["clang++-19", "-flto=thin", "-fuse-ld=lld", "-Wl,--thinlto-index-only", "a.o", "-o", "a"],
                   cwd=d, check=True)


def _dtlto_program(d: Path) -> None:
    """a.o, b.o and libc.a (bitcode, clang-22) in D: what dtlto.md's plain clang link takes."""
    d.mkdir()
    sources = {"a": "int b(int); int c(int);\nint main(int argc, char**) { return b(argc) + c(argc); }\n",
               "b": "int b(int x) { return x + 1; }\n", "c": "int c(int x) { return x * 2; }\n"}
    for name, text in sources.items():
        (d / f"{name}.cc").write_text(text)
        subprocess.run(["clang-22", "-flto=thin", "-O2", "-c", f"{name}.cc", "-o", f"{name}.o"], cwd=d, check=True)
    subprocess.run(["llvm-ar-22", "rcs", "libc.a", "c.o"], cwd=d, check=True)


@pytest.fixture()
def guide_env(cluster: Cluster, tmp_path: Path, own_proxy_dir: str) -> dict[str, str]:
    """The session's environment with the installed commands first on PATH, this test's own proxy directory (a
    page's `goma-ext proxy stop` stops only its proxies) and HOME, and the session cluster's CA and instance
    name (its client token is set for the session)."""
    home = tmp_path / "home"
    home.mkdir()
    env = dict(os.environ)
    env.update(PATH=f"{Path(sys.executable).parent}:{env['PATH']}", HOME=str(home), GOMA_EXT_PROXY_DIR=own_proxy_dir,
               GOMA_EXT_REMOTE_INSTANCE=INSTANCE)
    env[CA_ENV] = str(cluster.ca_cert)
    env.setdefault("USER", "root" if os.geteuid() == 0 else str(os.geteuid()))
    env.pop("XDG_RUNTIME_DIR", None)
    return env


# The link target whose backends the pages' remote builds run again: 2 of the example's 128 distinct backends (its
# host.o, and a libbase.verify.o whose job of calc's waits for the same result), the fewest of any target.
# `gen --remote` gives every backend another command line, so ninja runs all 199 jobs again; the others hit the
# local backend cache. With every backend forgotten (`copy_without_backends`), local-builds.md's `gn-thinlto example
# --remote` executed 134 actions on the session cluster: 58 CPU s; 17-18 with crc_tool's 13, 10-11 with these 2
# (measured alone, the cluster's CPU included: most of what is left is the proxy's start, BuildGrid's first requests
# and each worker's first action, paid once per run by whichever test comes first).
REMOTE_TARGET = "report_plugin_host"


def _remote_tree(example_tree: Build, dest: Path) -> Build:
    """A copy of the session's build of the example (`copy_example_tree`) with REMOTE_TARGET's backends forgotten
    (`forget_target_backends`): generated again with --remote, it compiles nothing and runs REMOTE_TARGET's backends
    over REAPI (executed remotely, or hits in the remote action cache); every other backend hits the local cache."""
    b = copy_example_tree(example_tree, dest)
    forget_target_backends(b.out, REMOTE_TARGET)
    return b


def _tree(example_tree: Build, dest: Path) -> Path:
    """A copy of the session's build of the example laid out as the checkout (DEST/examples/chromium_style,
    DEST/out/example): `gn-thinlto example` run in DEST finds both, and compiles nothing its arguments keep."""
    copy_example_tree(example_tree, dest)
    return dest


def test_local_builds_cache_and_inspect_pages(example_tree: Build, example_in_process: Build, cluster: Cluster,
                                              tmp_path: Path, guide_env: dict[str, str]) -> None:
    """local-builds.md, then cache.md and inspect.md on its builds: local-builds.md's `gn-thinlto example
    --in-process` (in a copy of the session's in-process build, so it links nothing again) is the in-process build
    inspect.md's parity compares the graph's with; its `gn-thinlto example --remote` runs REMOTE_TARGET's backends
    on the session cluster (`_remote_tree`)."""
    local = _tree(example_tree, tmp_path / "local")
    (local / "gn_thinlto.yaml").write_text("dyndep: true\n")
    in_process = _tree(example_in_process, tmp_path / "example-in-process")
    remote = _remote_tree(example_tree, tmp_path / "example-remote").out.parent.parent
    pages = [
        Page("local-builds.md", local, guide_env,
             {"SRC": "examples/chromium_style", "out/Release": "out/example", "OUT": "out/remote",
              "ARGS": "is_official_build=true", "HOST:PORT": f"localhost:{cluster.st.tls_port}",
              "PORT": cluster.endpoint.rsplit(":", 1)[1]},
             places={"generate_linker_map=true": _tree(example_tree, tmp_path / "example-args"),
                     "example --in-process": in_process, "example --remote": remote}),
        Page("cache.md", local, guide_env,
             {"OUT": "out/example", "/srv/thinlto-cache": "out/example/gn-thinlto/cache"}),
        Page("inspect.md", local, guide_env,
             {"out/Release": "out/example", "out/graph": "out/example",
              "out/inproc": str(in_process / "out" / "example")}),
    ]
    failed = [f for page in pages for f in page.run()]
    assert not failed, "\n".join(failed)


@pytest.mark.skipif(os.geteuid() != 0, reason="workers.md's base-root needs root (CI runs as root)")
def test_remote_workers_dtlto_and_install_pages(example_tree: Build, cluster: Cluster, tmp_path: Path,
                                                guide_env: dict[str, str]) -> None:
    """remote.md on a copy of the example with REMOTE_TARGET's backends forgotten (its `gen --remote` and ninja run
    them on the session cluster: action-cache hits after local-builds.md's `gn-thinlto example --remote`), its
    `cluster` commands in a directory of their own, whose clusters are stopped after the page (it leaves its mTLS
    cluster running, which polls every 50 ms: a quarter of a core); workers.md against a server-only cluster made
    for it (its workers join it, then stop; the cluster is stopped after the page); dtlto.md on a small program;
    install.md."""
    tree = _remote_tree(example_tree, tmp_path / "remote")
    out = tree.out
    _thin_pair(out)
    clusters = tmp_path / "clusters"
    page_clusters = [clusters / ".state" / name for name in ("cluster", "mtls-cluster")]
    for state in page_clusters:  # the page's state directories, with the BuildGrid venv installed
        state.mkdir(parents=True)
        (state / "server-venv").symlink_to(_server_venv())
    dtlto = tmp_path / "dtlto"
    _dtlto_program(dtlto)
    # where the page's workers work and find their base root: the runner user must search every parent (as it
    # would /var/lib/gx and /srv), which pytest's 0700 temp dirs are not
    workers = Path(tempfile.mkdtemp(prefix="gx-guide-"))
    os.chmod(workers, 0o711)
    server_state = tmp_path / "server" / "state"
    failed: list[str] = []
    try:
        failed += Page("remote.md", tree.root, guide_env,
                       {"out/Release": "../../out/example", "HOST:PORT": f"localhost:{cluster.st.tls_port}",
                        "TOKEN": str(cluster.token_file), "PORT": cluster.endpoint.rsplit(":", 1)[1]},
                       places={"goma-ext run ": out, "goma-ext index": out, "goma-ext cluster": clusters,
                               "goma-ext proxy": clusters}).run()
        for state in page_clusters:
            manager.destroy(state)
        server, server_cert = _server_only(server_state.parent)
        # the page's workers join that server (its default instance name) with its CA and its worker token
        worker_env = {k: v for k, v in guide_env.items() if k != "GOMA_EXT_REMOTE_INSTANCE"}
        worker_env.update(GOMA_EXT_REMOTE_TOKEN_FILE=str(server.token_file(tokens.Role.WORKER)))
        worker_env[CA_ENV] = str(server_cert)
        tls = f"localhost:{server.tls_port}"
        failed += Page("workers.md", workers, worker_env,
                       {"10.0.0.5:8981": tls, "HOST:PORT": tls, "ca.pem": str(server_cert),
                        "/var/lib/gx": str(workers / "work"), "/srv/gx-base": str(workers / "base"),
                        "/srv/gx-base-zlib": str(workers / "base-zlib")},
                       daemons={"--count 4": _sessions(workers / "work", 4),
                                "--base-root": _sessions(workers / "work", 1)}).run()
        manager.destroy(server_state)
        failed += Page("dtlto.md", dtlto, guide_env, {"HOST:PORT": _host_port(cluster.endpoint)}).run()
        failed += Page("install.md", tmp_path, guide_env).run()
    finally:
        for state in (*page_clusters, server_state):  # again where a page failed before its own was stopped
            manager.destroy(state)
        shutil.rmtree(workers, ignore_errors=True)
    assert not failed, "\n".join(failed)
